"""Transactions written by the peers (confluent-kafka), for the tests that
read them committed (consumer, CLI, Spark), and the markers in a log
(kiel's transactional producer's tests)."""
from typing import Dict, List, Optional

import confluent_kafka
import confluent_kafka.admin

from tests.conftest import run, unique


def create_topic(bootstrap: str, partitions: int = 1, prefix: str = "rc") -> str:
    name = unique(prefix)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(
            [confluent_kafka.admin.NewTopic(name, partitions, 1)]).values():
        future.result(30)
    return name


def confluent_txn(bootstrap: str, txn_id: Optional[str] = None) -> confluent_kafka.Producer:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id or unique("txn"),
        "transaction.timeout.ms": 60000,
        "linger.ms": 5,
    })
    producer.init_transactions(30)
    return producer


def confluent_write(producer: confluent_kafka.Producer, topic: str, values: List[bytes],
                    commit: bool, partition: int = 0) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, partition=partition)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def batch(name: str, start: int, count: int) -> List[bytes]:
    return [f"{name}-{i}".encode() for i in range(start, start + count)]


def write_open(producer: confluent_kafka.Producer, topic: str, values: List[bytes],
               partition: int = 0) -> None:
    """Begin a transaction and write ``values`` in it (flushed), left open."""
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value, partition=partition)
    producer.flush(30)


def committed_then_open(bootstrap: str, prefix: str, committed: int, open_count: int
                        ) -> "tuple[str, confluent_kafka.Producer]":
    """A new one-partition topic holding ``committed`` records ("a-i") of a
    committed transaction (their COMMIT marker next), then ``open_count``
    ("open-i") of a transaction left open. Returns the topic and the
    producer (abort or commit it)."""
    topic = create_topic(bootstrap, prefix=prefix)
    writer = confluent_txn(bootstrap)
    confluent_write(writer, topic, batch("a", 0, committed), commit=True)
    write_open(writer, topic, batch("open", 0, open_count))
    return topic, writer


def commit_abort_commit(bootstrap: str, topic: str) -> None:
    """confluent-kafka: commit 100 (a-), abort 100 (b-), commit 100 (c-)."""
    producer = confluent_txn(bootstrap)
    confluent_write(producer, topic, batch("a", 0, 100), commit=True)
    confluent_write(producer, topic, batch("b", 0, 100), commit=False)
    confluent_write(producer, topic, batch("c", 0, 100), commit=True)


def committed_values() -> List[bytes]:
    return batch("a", 0, 100) + batch("c", 0, 100)


def interleaved(bootstrap: str, topic: str, count: int = 20) -> List[bytes]:
    """p and q write interleaved on partition 0; q aborts, p commits.
    Returns what read_committed must read (p's records, in order)."""
    p = confluent_txn(bootstrap)
    q = confluent_txn(bootstrap)
    p.begin_transaction()
    q.begin_transaction()
    for i in range(count):
        p.produce(topic, f"p-{i}".encode(), partition=0)
        p.flush(30)
        q.produce(topic, f"q-{i}".encode(), partition=0)
        q.flush(30)
    q.abort_transaction(30)
    p.commit_transaction(30)
    return [f"p-{i}".encode() for i in range(count)]


def control_batches(bootstrap: str, topic: str, partitions: int = 3) -> Dict[str, int]:
    """The COMMIT and ABORT markers in ``topic``, counted from kiel's own
    decoder of the raw log (a Fetch of every partition from offset 0)."""
    from kiel.client import Client
    from kiel.protocol import FetchPartitionData, FetchRequestV4, FetchTopicData
    from kiel.protocol.record_batch import COMMIT, decode_record_batches

    async def main() -> Dict[str, int]:
        counts = {"commit": 0, "abort": 0, "transactional_batches": 0}
        async with Client(bootstrap) as client:
            await client.cluster.refresh_metadata([topic])
            for p in range(partitions):
                leader = client.cluster.leader(topic, p)
                response = await client.cluster.send(leader, FetchRequestV4(
                    -1, 100, 1, 64 << 20, 0, [FetchTopicData(topic, [
                        FetchPartitionData(p, 0, 64 << 20)])]))
                data = response.topics[0].partitions[0].records
                result = decode_record_batches(data)
                for marker in result.markers:
                    counts["commit" if marker.control_type == COMMIT else "abort"] += 1
                counts["transactional_batches"] += sum(
                    1 for b in result.batches if b.is_transactional and not b.is_control)
        return counts

    return run(main())
