"""produce_many() and enqueue_many(): records without a future each, whose
delivery (and failure) flush() reports, against the embedded cluster."""
import asyncio
from typing import Any, List

import pytest

from kiel.exc import (
    BufferFullError,
    ConfigError,
    MessageSizeTooLargeError,
    SerializationError,
    UnknownPartitionError,
)
from kiel.producer import Producer
from kiel.producer.partitioners import DefaultPartitioner
from tests.conftest import run
from tests.support.producer import in_thread, read_back


def _partition_values(bootstrap: str, topic: str, partitions: int,
                      counts: List[int]) -> List[List[bytes]]:
    return [[m.value for m in read_back(bootstrap, topic, p, counts[p])]
            for p in range(partitions)]


def test_produce_many_delivers_every_record_in_order(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    n = 5000

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, batch_size=4096, linger=0.002) as p:
            await p.connect()
            values = [b"v-%05d" % i for i in range(n)]
            assert p.produce_many(topic, values[:2000]) == 2000
            single = p.produce(topic, values[2000])  # one with a future, between
            assert p.produce_many(topic, tuple(values[2001:])) == n - 2001
            report = await p.flush()
            return report, await single

    report, meta = run(main())
    assert (report.delivered, report.failed, report.failures) == (n, 0, [])
    assert meta.topic == topic and meta.offset >= 0
    counts = [kafka_cluster.offsets(topic, p)[1] for p in range(3)]
    assert sum(counts) == n
    # Round-robin as produce() does it: even shares, each partition in order.
    assert max(counts) - min(counts) <= 1
    got = _partition_values(kafka_cluster.bootstrap, topic, 3, counts)
    assert sorted(v for part in got for v in part) == sorted(b"v-%05d" % i for i in range(n))
    for part in got:
        assert part == sorted(part)


def test_produce_many_failures_are_counted_and_listed_by_flush(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)

    async def main() -> None:
        async with Producer(kafka_cluster.bootstrap, retries=2) as p:
            await p.connect()
            # The broker refuses the next request (MessageSizeTooLarge: not
            # retriable): every record of it is listed, without a future.
            await in_thread(kafka_cluster.inject_error, "Produce", 10, 1)
            p.produce_many(topic, [b"r1", b"r2", b"r3"], partition=1)
            report = await p.flush()
            assert (report.delivered, report.failed) == (0, 3)
            assert [f.future for f in report.failures] == [None] * 3
            assert {(f.topic, f.partition) for f in report.failures} == {(topic, 1)}
            assert all(isinstance(f.error, MessageSizeTooLargeError) for f in report.failures)
            # A partition the topic does not have: failed, not dropped.
            p.produce_many(topic, [b"a", b"b"], partition=7)
            p.produce_many(topic, [b"fine"] * 10)
            report = await p.flush()
            assert (report.delivered, report.failed) == (10, 2)
            assert all(isinstance(f.error, UnknownPartitionError) and f.partition == 7
                       and f.future is None for f in report.failures)

    run(main())


def test_produce_many_queues_all_or_nothing(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main() -> None:
        async with Producer(kafka_cluster.bootstrap, max_pending_bytes=10_000,
                            max_message_size=1000) as p:
            await p.connect()
            with pytest.raises(SerializationError):
                p.produce_many(topic, [b"ok", "not bytes", b"ok"])
            with pytest.raises(MessageSizeTooLargeError):
                p.produce_many(topic, [b"ok", b"x" * 2000])
            with pytest.raises(BufferFullError):
                p.produce_many(topic, [b"y" * 500] * 40)
            # The same with keys (their own fast path).
            with pytest.raises(MessageSizeTooLargeError):
                p.produce_many(topic, [b"ok", b"x" * 2000], keys=[b"a", b"b"])
            with pytest.raises(MessageSizeTooLargeError):  # the key counts too
                p.produce_many(topic, [b"ok", b"x" * 900], keys=[b"a", b"k" * 200])
            with pytest.raises(BufferFullError):
                p.produce_many(topic, [b"y" * 500] * 40, keys=[b"k"] * 40)
            with pytest.raises(ConfigError):
                p.produce_many(topic, b"a value, not values")
            with pytest.raises(ConfigError):
                p.produce_many(topic, [b"a", b"b"], keys=[b"k"])
            with pytest.raises(ConfigError):
                p.produce_many(["not", "a topic"], [b"a"])  # type: ignore[arg-type]
            with pytest.raises(ConfigError):
                await p.enqueue_many("", [b"a"])
            assert p.pending_records == 0 and p.pending_bytes == 0
            assert await p.flush() == (0, 0, [], 0)
            assert p.produce_many(topic, []) == 0

    run(main())


@pytest.mark.parametrize("kind", [bytearray, bytes])  # converted (general path), or not
def test_produce_many_keyed_and_converted_records_go_where_produce_sends_them(
    kafka_cluster, topic_factory, kind
):
    topic = topic_factory(partitions=3)
    keys = [b"key-%d" % (i % 7) for i in range(300)]
    values = [kind(b"kv-%03d" % i) for i in range(300)]

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap) as p:
            await p.connect()
            p.produce_many(topic, values, keys=keys)
            return await p.flush()

    report = run(main())
    assert (report.delivered, report.failed) == (300, 0)
    partitioner = DefaultPartitioner()
    counts = [kafka_cluster.offsets(topic, p)[1] for p in range(3)]
    got = _partition_values(kafka_cluster.bootstrap, topic, 3, counts)
    for i, (key, value) in enumerate(zip(keys, values)):
        assert bytes(value) in got[partitioner(key, [0, 1, 2])], i
    for partition in range(3):  # in order within each partition
        assert got[partition] == [bytes(v) for k, v in zip(keys, values)
                                  if partitioner(k, [0, 1, 2]) == partition]


def test_produce_many_before_metadata_waits_then_delivers(kafka_cluster, topic_factory):
    # No connect(): the topic's metadata is not loaded, so the records wait
    # (parked, in order) and are batched once it is.
    topic = topic_factory(partitions=2)

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap) as p:
            p.produce_many(topic, [b"early-%d" % i for i in range(50)])
            return await p.flush()

    report = run(main())
    assert (report.delivered, report.failed) == (50, 0)


def test_enqueue_many_waits_for_room_and_stays_in_the_bound(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    limit = 20_000
    n = 5000

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, max_pending_bytes=limit,
                            batch_size=2000) as p:
            await p.connect()
            peak = [0]
            done = asyncio.Event()

            async def watch() -> None:
                while not done.is_set():
                    peak[0] = max(peak[0], p.pending_bytes)
                    await asyncio.sleep(0)

            watcher = asyncio.ensure_future(watch())
            assert await p.enqueue_many(topic, [b"e" * 100] * n) == n
            report = await p.flush()
            done.set()
            await watcher
            return report, peak[0]

    report, peak = run(main())
    assert (report.delivered, report.failed) == (n, 0)
    assert 0 < peak <= limit
    assert sum(kafka_cluster.offsets(topic, p)[1] for p in range(3)) == n
