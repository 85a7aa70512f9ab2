"""The idempotent producer on noida-db, a second Kafka-compatible broker that
dedupes as Apache Kafka does: a batch sent again with the same producer id,
epoch and sequence is not written again, and is answered with the first
write's offset (Tansu answers DUPLICATE_SEQUENCE_NUMBER instead).

noida-db advertises the port it listens on and has no advertised-listener
option, so no proxy stands in front of it: its dedupe is judged by sending
one of kiel's numbered batches twice, and the producer's run (with a renewal
of its identity forced half-way) by reading the log back with confluent-kafka.
"""
import asyncio
from typing import Any, List, Tuple

import confluent_kafka.admin
import pytest

from kiel import Producer
from kiel.producer.accumulator import RecordAccumulator
from kiel.producer.idempotence import Idempotence
from kiel.protocol import ProducePartitionData, ProduceRequestV3, ProduceTopicData
from kiel.protocol.messages import MESSAGE_OVERHEAD
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.support.idempotence import CLEAN, PARTITIONS, confluent_read, judge, records


@pytest.fixture
def noida(noida_broker: Any) -> str:
    """The bootstrap address of kiel.testing's noida-db (the ``noida_broker``
    fixture: shared by this module's tests, which use unique topics)."""
    return noida_broker.bootstrap


def create_topic(bootstrap: str, partitions: int) -> str:
    name = unique("idem-noida")
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([confluent_kafka.admin.NewTopic(name, partitions, 1)]
                                      ).values():
        future.result(30)
    return name


def test_keyed_records_with_a_renewal_half_way_are_written_once_in_order(noida: str) -> None:
    topic = create_topic(noida, PARTITIONS)
    count = 4000
    pairs = records(count)

    async def main() -> Tuple[int, Any]:
        async with Producer(noida, batch_size=1024) as producer:
            assert producer.idempotent is True
            first_id = producer.producer_id
            results: List[Any] = []
            for start in range(0, count, 200):
                if start == count // 2:
                    # As after a refused numbering: renew, then number again from 0.
                    idem = producer._idempotence
                    assert idem is not None
                    idem.renew = True
                futures = [producer.produce(topic, value, key=key)
                           for key, value in pairs[start:start + 200]]
                results.extend(await asyncio.gather(*futures, return_exceptions=True))
            idem = producer._idempotence
            assert idem is not None and idem.renewals == 1 and producer.producer_id >= 0
            assert (producer.producer_id, producer.producer_epoch) != (first_id, 0)
            return sum(isinstance(r, BaseException) for r in results), results

    failed, results = run(main())
    assert failed == 0
    assert all(r.offset >= 0 for r in results)  # noida says where: no -1
    assert judge(confluent_read(noida, topic, count, idle=2.0), count) == CLEAN


def numbered_batch(idempotent: bool) -> bytes:
    """One of kiel's batches of three records, numbered as the producer does."""
    acc = RecordAccumulator(batch_size=10**6, linger=0.0, max_request_size=10**6,
                            max_pending_bytes=10**6, codec=None, clock=lambda: 0.0)
    queue = acc.queue(TopicPartition("t", 0))
    for value in (b"a", b"b", b"c"):
        acc.append(queue, None, value, MESSAGE_OVERHEAD + 1, None)
    [(queue, [batch])] = acc.drain(0, lambda tp: 1, force=True).ready[1]
    if idempotent:
        idem = Idempotence(required=True)
        idem.enabled, idem.producer_id, idem.producer_epoch = True, PRODUCER[0], PRODUCER[1]
        idem.number(queue, batch)
    return batch.encode(None, True)


PRODUCER: List[int] = []


@pytest.mark.parametrize("idempotent", [True, False])
def test_noida_judges_kiels_numbering_a_batch_sent_twice_is_written_once(
        noida: str, idempotent: bool) -> None:
    """The dedupe a broker does on kiel's batch header (producer id, epoch,
    base sequence): sent twice, a numbered batch is answered with the same
    offset and written once; a batch without numbers is written twice."""
    topic = create_topic(noida, 1)

    async def main() -> List[int]:
        async with Producer(noida) as producer:
            PRODUCER[:] = [producer.producer_id, producer.producer_epoch]
            data = numbered_batch(idempotent)
            cluster = producer.cluster
            await cluster.refresh_metadata([topic])
            leader = cluster.leader(topic, 0)
            offsets = []
            for _ in range(2):  # as a retry after a lost answer would
                request = ProduceRequestV3(None, -1, 5000, [
                    ProduceTopicData(topic, [ProducePartitionData(0, data)])])
                response = await cluster.send(leader, request)
                [answer] = response.topics[0].partitions
                assert answer.error_code == 0, answer
                offsets.append(answer.offset)
            return offsets

    offsets = run(main())
    log = confluent_read(noida, topic, 3, idle=1.5)
    if idempotent:
        assert offsets == [0, 0] and log == [b"a", b"b", b"c"]
    else:
        assert offsets == [0, 3] and log == [b"a", b"b", b"c"] * 2
