"""The per-record fast paths of produce(), enqueue() and produce_many()
(issue 34) do what the general path does: the same partition for a named
partition or a key (murmur2, as the Java client), the same order, the same
errors, the same waiting for room. Against the embedded cluster, read back
with kafka-python."""
import asyncio
import random
from typing import Any, List, Optional, Tuple

import pytest
from kafka.partitioner.default import murmur2 as kafka_murmur2

from kiel.exc import BufferFullError, ConfigError, UnknownPartitionError
from kiel.producer import Producer
from kiel.producer.partitioners import key_partition, murmur2
from kiel.producer.routing import KEY_CACHE_SIZE
from tests.conftest import run
from tests.support.producer import read_back


def test_murmur2_equals_kafka_pythons_for_many_keys():
    # kafka-python's murmur2 is the Java client's (its own tests check the
    # Java vectors): every length from 0 to 300 bytes (past the compiled
    # unpackers' 255), and keys as applications make them.
    rng = random.Random(34)
    keys = [bytes(rng.randrange(256) for _ in range(n)) for n in range(301) for _ in range(3)]
    keys += [b"user-%06d" % i for i in range(20000)]
    keys += [b"order-%d" % rng.randrange(10**12) for _ in range(5000)]
    assert [murmur2(key) for key in keys] == [kafka_murmur2(key) for key in keys]


def _records(partitions: int, n: int) -> List[Tuple[Optional[bytes], bytes, int]]:
    """(key, value, partition): keyed and unkeyed records mixed on every
    partition, so that batches gain their key list midway."""
    return [(None if i % 3 else b"k%d" % i, b"v%05d" % i, (i * 7) % partitions)
            for i in range(n)]


@pytest.mark.parametrize("how", ["produce", "enqueue"])
def test_named_partitions_keep_order_and_keys(kafka_cluster, topic_factory, how):
    topic = topic_factory(partitions=3)
    records = _records(3, 3000)

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, batch_size=2048, linger=0.002) as p:
            await p.connect()
            metas = []
            for key, value, partition in records:
                if how == "produce":
                    metas.append(p.produce(topic, value, key, partition))
                else:
                    metas.append(await p.enqueue(topic, value, key, partition))
                if len(metas) % 500 == 0:
                    await asyncio.sleep(0)
            return await asyncio.gather(*metas)

    metas = run(main())
    assert [m.partition for m in metas] == [partition for _, _, partition in records]
    for partition in range(3):
        mine = [(k, v) for k, v, p in records if p == partition]
        got = read_back(kafka_cluster.bootstrap, topic, partition, len(mine))
        assert [(m.key, m.value) for m in got] == mine


def test_named_partitions_refused_as_before(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap) as p:
            await p.produce(topic, b"warm-up", partition=0)  # the route exists
            for bad in (True, -1, 1.0, "1"):
                with pytest.raises(ConfigError):
                    p.produce(topic, b"x", partition=bad)
                with pytest.raises(ConfigError):
                    await p.enqueue(topic, b"x", b"key", partition=bad)
            unknown = p.produce(topic, b"x", b"key", partition=7)
            with pytest.raises(UnknownPartitionError):
                await unknown
            # Partition 1 has no queue yet: the general path makes it.
            return await p.produce(topic, b"y", b"key", partition=1)

    assert run(main()).partition == 1


def test_keys_go_to_murmur2_partitions_past_the_key_cache(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=5)
    keys = [b"user-%06d" % i for i in range(KEY_CACHE_SIZE + 3000)]

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, linger=0.002) as p:
            await p.connect()
            futures = []
            for _ in range(2):  # the second round finds most in the cache
                for key in keys:
                    futures.append(p.produce(topic, b"v", key))
                await asyncio.sleep(0)
            return await asyncio.gather(*futures)

    metas = run(main())
    expected = [key_partition(key, [0, 1, 2, 3, 4]) for key in keys] * 2
    assert [m.partition for m in metas] == expected


def test_enqueue_waits_for_room_in_order_and_produce_still_refuses(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    values = [b"%05d" % i + b"x" * 200 for i in range(3000)]

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, max_pending_bytes=20000,
                            linger=0.001) as p:
            await p.connect()
            futures = []
            refused = 0
            high = 0
            for i, value in enumerate(values):
                futures.append(await p.enqueue(topic, value, None, 0 if i % 2 else None))
                high = max(high, p.pending_bytes)
                if p.pending_bytes + 300 > p.max_pending_bytes:
                    try:
                        p.produce(topic, b"y" * 300)
                    except BufferFullError:
                        refused += 1
            await asyncio.gather(*futures)
            return refused, high, p.max_pending_bytes

    refused, high, bound = run(main())
    assert refused > 0 and high <= bound
    got = read_back(kafka_cluster.bootstrap, topic, 0, len(values))
    assert [m.value for m in got] == values


@pytest.mark.parametrize("keyed", [False, True])
def test_produce_many_to_a_named_partition_keeps_order(kafka_cluster, topic_factory, keyed):
    topic = topic_factory(partitions=3)
    values = [b"v%05d" % i for i in range(4000)]
    keys = [b"k%d" % i for i in range(4000)] if keyed else None

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, batch_size=4096, linger=0.002) as p:
            await p.produce(topic, b"first", partition=2)  # the fast path's queue exists
            for start in range(0, len(values), 1000):
                await p.enqueue_many(topic, values[start:start + 1000], partition=2,
                                     keys=None if keys is None else keys[start:start + 1000])
            return await p.flush()

    report = run(main())
    assert (report.delivered, report.failed) == (len(values) + 1, 0)
    got = read_back(kafka_cluster.bootstrap, topic, 2, len(values) + 1)
    assert [m.value for m in got] == [b"first"] + values
    assert [m.key for m in got[1:]] == (keys or [None] * len(values))
    assert [kafka_cluster.offsets(topic, p)[1] for p in (0, 1)] == [0, 0]


def test_an_enqueue_loop_with_room_gives_the_loop_turns(kafka_cluster, topic_factory):
    # The producer guide's loop, `await producer.enqueue(...)` per record
    # with no sleep(0) of its own: with room in the buffer enqueue() never
    # waits, and it held the IOLoop until the buffer was full (no callback
    # ran, no request went out). Now it gives a turn every ENQUEUE_TURN
    # records, after queueing them.
    from kiel.producer.producer import ENQUEUE_TURN

    topic = topic_factory(partitions=2)
    n = 5 * ENQUEUE_TURN

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, linger=0.001) as p:
            await p.connect()
            loop = asyncio.get_running_loop()
            turns = []

            def tick() -> None:
                turns.append(p.pending_records)
                handle[0] = loop.call_soon(tick)

            handle = [loop.call_soon(tick)]
            await asyncio.sleep(0)
            turns.clear()
            futures = [await p.enqueue(topic, b"v%d" % i, None, i % 2) for i in range(n)]
            handle[0].cancel()
            await asyncio.gather(*futures)
            return turns, futures

    turns, futures = run(main())
    assert len(turns) >= n // ENQUEUE_TURN - 1
    assert [f.result().partition for f in futures] == [i % 2 for i in range(n)]
    for partition in (0, 1):
        got = read_back(kafka_cluster.bootstrap, topic, partition, n // 2)
        assert [m.value for m in got] == [b"v%d" % i for i in range(partition, n, 2)]


def test_futures_nobody_holds_are_counted_and_those_with_callbacks_resolved(
        kafka_cluster, topic_factory):
    # The sender leaves unresolved the futures only their batch holds (the
    # application dropped them: nothing can see them): they still count as
    # delivered, and a dropped future with a done callback, or a kept one,
    # is resolved with its offset.
    topic = topic_factory(partitions=1)

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, linger=0.001) as p:
            await p.connect()
            seen: List[int] = []
            for i in range(3000):
                future = p.produce(topic, b"%d" % i)
                if i % 1000 == 7:
                    future.add_done_callback(lambda f: seen.append(f.result().offset))
                del future
            report = await p.flush()  # batches of futures nobody else holds
            await asyncio.sleep(0)  # the callbacks' turn
            kept = p.produce(topic, b"kept")
            return seen, report, await kept

    seen, report, meta = run(main())
    assert (report.delivered, report.failed) == (3000, 0)
    assert meta.offset == 3000
    assert sorted(seen) == [7, 1007, 2007]
