"""Writing raw messages and reading them back with a SingleConsumer."""

from typing import Any, List, Optional, Sequence, Tuple

from kiel.consumer import BEGINNING, SingleConsumer
from kiel.protocol import ProducePartitionData, ProduceRequest, ProduceTopicData
from kiel.protocol.messages import encode_message_set
from kiel.structs import Record
from kiel.testing.broker.rawclient import RawClient


def produce_raw(
    cluster: Any,
    topic: str,
    partition: int,
    messages: Sequence[Tuple[Optional[bytes], Optional[bytes]]],
    codec: int = 0,
    batch: int = 1000,
) -> None:
    """Append ``(key, value)`` pairs to one partition through its leader (blocking)."""
    with RawClient(cluster.address(cluster.leader(topic, partition))) as client:
        for i in range(0, len(messages), batch):
            message_set = encode_message_set(messages[i : i + batch], codec)
            response = client.request(
                ProduceRequest(
                    1,
                    10000,
                    [ProduceTopicData(topic, [ProducePartitionData(partition, message_set)])],
                )
            )
            assert response.topics[0].partitions[0].error_code == 0


def values(n: int, prefix: str = "m", start: int = 0) -> List[Tuple[None, bytes]]:
    return [(None, f"{prefix}{i}".encode()) for i in range(start, start + n)]


async def consume_n(
    consumer: SingleConsumer, topics: Any, n: int, start: Any = BEGINNING, rounds: int = 1000
) -> List[Record]:
    got: List[Record] = []
    for _ in range(rounds):
        if len(got) >= n:
            break
        got.extend(await consumer.consume(topics, start=start))
    return got


def consumer_for(cluster: Any, **options: Any) -> SingleConsumer:
    options.setdefault("max_wait_time", 0.2)
    return SingleConsumer(cluster.bootstrap, **options)

