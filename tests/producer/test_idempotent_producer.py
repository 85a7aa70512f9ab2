"""The idempotent producer against real brokers (issue 30): no duplicate on any retry.

Tansu advertises a fault proxy made with ``kafka=True``, so every connection
goes through it; the proxy drops the connection right after the broker's
answer to every Nth Produce request (the broker wrote the batch, the answer
never arrives), or rewrites an answer's error code. Keyed records over
several partitions, read back by confluent-kafka, kafka-python and kiel: 0 failed, 0
duplicates, 0 missing, order per key. The same run with
``idempotent=False`` finds duplicates: the test can fail.
"""
import asyncio
from typing import Any, Dict, List, Tuple

import confluent_kafka
import pytest

from kiel import Producer
from kiel.consumer import SingleConsumer
from kiel.testing.tansu import TansuBroker
from tests.conftest import run, unique
from tests.support.idempotence import (
    CLEAN,
    PARTITIONS,
    confluent_read,
    judge,
    proxied_tansu,
    records,
)

__all__ = ["proxied_tansu"]  # the fixture, used by name

#: Records produced at once, then awaited.
WAVE = 150
#: What each record says: its key and its number within its key.
Record = Tuple[bytes, int]


async def produce_all(bootstrap: str, topic: str, count: int, **options: Any) -> Tuple[
        int, Producer]:
    """Produce ``count`` records in waves; returns how many failed, and the producer."""
    producer = Producer(bootstrap, batch_size=1024, retries=30, retry_backoff=0.02,
                        max_backoff=0.2, **options)
    await producer.connect()
    pairs = records(count)
    results: List[Any] = []
    # In waves, as an application producing steadily: many requests.
    for start in range(0, count, WAVE):
        futures = [producer.produce(topic, value, key=key)
                   for key, value in pairs[start:start + WAVE]]
        results.extend(await asyncio.gather(*futures, return_exceptions=True))
    await producer.close()
    return sum(isinstance(r, BaseException) for r in results), producer


def kafka_python_read(bootstrap: str, topic: str, idle: float = 3.0) -> List[bytes]:
    """The same with kafka-python, until ``idle`` seconds bring nothing new."""
    import kafka

    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                   consumer_timeout_ms=int(idle * 1000))
    got: Dict[int, List[Tuple[int, bytes]]] = {}
    try:
        partitions = [kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        for message in consumer:
            got.setdefault(message.partition, []).append((message.offset, message.value))
    finally:
        consumer.close()
    return [value for p in sorted(got) for _, value in sorted(got[p])]


async def kiel_read(bootstrap: str, topic: str, at_least: int, idle_rounds: int = 10
                    ) -> List[bytes]:
    """The same with kiel's SingleConsumer."""
    got: Dict[int, List[Tuple[int, bytes]]] = {}
    count = 0
    idle = 0
    async with SingleConsumer(bootstrap, max_wait_time=0.2) as consumer:
        for _ in range(2000):
            batch = await consumer.consume(topic, start=0)
            for r in batch:
                got.setdefault(r.partition, []).append((r.offset, r.value))
            count += len(batch)
            idle = 0 if batch else idle + 1
            if count >= at_least and idle >= idle_rounds:
                break
    return [value for p in sorted(got) for _, value in sorted(got[p])]


def cut_run(proxied_tansu: Tuple[TansuBroker, Any], count: int, every: int,
            **options: Any) -> Tuple[int, Dict[str, int], Dict[str, int], Producer]:
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("idem-cut"), PARTITIONS)
    proxy.cut_after_produce(every)
    failed, producer = run(produce_all(broker.bootstrap, topic, count, **options))
    proxy.cut_after_produce(0)
    stats = proxy.kafka_stats()
    log = confluent_read(broker.bootstrap, topic, count)
    return failed, judge(log, count), stats, producer


@pytest.mark.slow
def test_cuts_after_the_broker_wrote_leave_no_duplicate(proxied_tansu: Any) -> None:
    """The issue's scenario: every 4th Produce answer lost after the broker
    wrote the batch; kiel's default producer writes each record once, in order."""
    count = 6000
    failed, verdict, stats, producer = cut_run(proxied_tansu, count, 4)
    assert stats["cut"] >= 10, stats  # the faults did happen
    assert producer.idempotent is True and producer.producer_id >= 0
    assert failed == 0
    assert verdict == CLEAN, (verdict, stats)
    broker, _ = proxied_tansu
    topic = topic_of(producer)
    assert judge(run(kiel_read(broker.bootstrap, topic, count)), count) == CLEAN
    assert judge(kafka_python_read(broker.bootstrap, topic), count) == CLEAN


def topic_of(producer: Producer) -> str:
    (topic,) = producer._routes  # the one topic it produced to
    return str(topic)


@pytest.mark.slow
def test_the_same_cuts_without_idempotence_write_duplicates(proxied_tansu: Any) -> None:
    """What the test above would find without idempotence: it can fail."""
    count = 6000
    failed, verdict, stats, producer = cut_run(proxied_tansu, count, 4, idempotent=False)
    assert stats["cut"] >= 10, stats
    assert producer.idempotent is False
    assert verdict["duplicates"] > 0, (verdict, stats)


def rewrite_run(proxied_tansu: Tuple[TansuBroker, Any], code: int, count: int = 1500,
                **options: Any) -> Tuple[int, Dict[str, int], Dict[str, int], Producer]:
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("idem-rewrite"), PARTITIONS)
    # A few answers into the run, three of them: each a success the
    # broker wrote, answered as ``code``.
    proxy.rewrite_produce_error(code, every=3, times=3)
    failed, producer = run(produce_all(broker.bootstrap, topic, count, **options))
    proxy.rewrite_produce_error(code, every=0)
    stats = proxy.kafka_stats()
    log = confluent_read(broker.bootstrap, topic, count, idle=2.0)
    return failed, judge(log, count), stats, producer


@pytest.mark.slow
@pytest.mark.parametrize("code", [45, 59, 47])
def test_a_refused_numbering_renews_the_producer_id_and_loses_nothing(
        proxied_tansu: Any, code: int) -> None:
    """OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH:
    the producer renews its identity (Tansu refuses the KIP-360 bump: a new
    producer id) and sends again; nothing fails, nothing is missing. The
    broker did write the batches whose answers were rewritten, so those (and
    only as many records as they held) are in the log twice."""
    failed, verdict, stats, producer = rewrite_run(proxied_tansu, code)
    assert stats["rewritten"] == 3, stats
    assert failed == 0
    assert verdict["missing"] == 0 and verdict["unknown"] == 0, verdict
    idem = producer._idempotence
    assert idem is not None and idem.renewals == 3
    # A rewritten batch holds at most a wave's records (waves are awaited).
    assert verdict["duplicates"] <= 3 * WAVE, verdict


@pytest.mark.slow
def test_without_idempotence_the_same_answers_fail_records(proxied_tansu: Any) -> None:
    """The test above, idempotence off: the rewritten answers fail records."""
    failed, verdict, stats, _ = rewrite_run(proxied_tansu, 45, idempotent=False)
    assert stats["rewritten"] >= 1, stats  # fewer, larger requests without idempotence
    assert failed > 0


@pytest.mark.slow
def test_a_duplicate_sequence_answer_is_a_delivery_without_an_offset(proxied_tansu: Any) -> None:
    """46 to a retry of a batch whose answer was lost: the broker wrote it
    before; its records resolve with offset -1 (Tansu does not say where)."""
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("idem-dup"), 1)

    async def main() -> List[Any]:
        async with Producer(broker.bootstrap, retry_backoff=0.01) as producer:
            await producer.produce(topic, b"first")
            proxy.cut_after_produce(1, times=1)
            second = await producer.produce(topic, b"second")
            third = await producer.produce(topic, b"third")
            idem = producer._idempotence
            assert idem is not None and idem.renewals == 0
            return [second, third]

    second, third = run(main())
    assert proxy.kafka_stats()["cut"] == 1
    assert (second.offset, third.offset) == (-1, 2)
    assert confluent_read(broker.bootstrap, topic, 3, idle=1.0) == [b"first", b"second", b"third"]


@pytest.mark.slow
def test_a_duplicate_answer_to_a_first_attempt_is_not_trusted(proxied_tansu: Any) -> None:
    """46 to a batch's first attempt: nothing of this producer's can have
    written it (a broker that gave the same producer id to another producer
    answers so): a refused numbering, not a delivery. The producer renews its
    id and sends again; the record is not lost (the proxy lied: the broker
    had written it, so it is there twice)."""
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("idem-dup-first"), 1)

    async def main() -> Any:
        async with Producer(broker.bootstrap, retry_backoff=0.01) as producer:
            await producer.produce(topic, b"first")
            proxy.rewrite_produce_error(46, every=1, times=1)
            second = await producer.produce(topic, b"second")
            idem = producer._idempotence
            assert idem is not None and idem.renewals == 1
            return second

    second = run(main())
    assert second.offset == 2
    assert confluent_read(broker.bootstrap, topic, 3, idle=1.0) == [
        b"first", b"second", b"second"]

def confluent_produce(bootstrap: str, topic: str, count: int) -> int:
    """librdkafka's idempotent producer, the same records in the same waves;
    returns how many failed."""
    errors: List[Any] = []

    def report(error: Any, _message: Any) -> None:
        if error is not None:
            errors.append(error)

    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 0,
        "batch.size": 1024, "log_level": 3})
    pairs = records(count)
    for start in range(0, count, WAVE):
        for key, value in pairs[start:start + WAVE]:
            producer.produce(topic, value, key=key, on_delivery=report)
        assert producer.flush(60) == 0
    return len(errors)


@pytest.mark.slow
def test_kiels_default_producer_beside_librdkafkas_idempotent_one(proxied_tansu: Any) -> None:
    """The issue's acceptance run: kiel's default Producer and confluent-kafka
    with enable.idempotence, the same records through the same cuts."""
    broker, proxy = proxied_tansu
    count = 3000
    verdicts = {}
    for client in ("kiel", "confluent"):
        topic = broker.create_topic(unique(f"side-{client}"), PARTITIONS)
        before = proxy.kafka_stats()["cut"]
        proxy.cut_after_produce(4)
        if client == "kiel":
            failed, _ = run(produce_all(broker.bootstrap, topic, count))
        else:
            failed = confluent_produce(broker.bootstrap, topic, count)
        proxy.cut_after_produce(0)
        assert proxy.kafka_stats()["cut"] - before >= 5
        verdicts[client] = (failed, judge(confluent_read(broker.bootstrap, topic, count), count))
    assert verdicts == {"kiel": (0, CLEAN), "confluent": (0, CLEAN)}
