"""Producer against the embedded 0.8.2 cluster over TCP: round trips read back
by kafka-python and kcat, acks, ordering, serializers, bad input."""
import asyncio
import random
import subprocess
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest
from tornado import gen

from kiel.exc import (
    ClientClosedError,
    ConfigError,
    MessageSizeTooLargeError,
    NoBrokersError,
    SerializationError,
    UnknownPartitionError,
    UnknownTopicError,
)
from kiel.producer import Producer, RecordMetadata
from kiel.producer.partitioners import key_partition
from kiel.serializers import json_deserializer, json_serializer
from tests.conftest import run
from tests.support.producer import read_back

CODECS = [None, "gzip", "snappy"]


@pytest.fixture(autouse=True)
def _kafka_python_codecs(monkeypatch):
    """kafka-python reads snappy with cramjam standing in for python-snappy."""
    from tests.support.compression import patch_kafka_codec

    patch_kafka_codec(monkeypatch)
KCAT_COMPAT = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.8.2.2"]


# --------------------------------------------------------------------------
# helpers (also used by test_producer_faults.py)


def read_all(cluster: Any, topic: str) -> Dict[int, List[Any]]:
    """Every record of every partition of ``topic`` (per the cluster's own offsets)."""
    parts = cluster.describe()["topics"][topic]
    result = {}
    for p, info in parts.items():
        result[int(p)] = read_back(cluster.bootstrap, topic, int(p), info["end_offset"])
    return result


def kcat_read(bootstrap: str, topic: str, partition: int) -> List[Tuple[int, bytes, bytes]]:
    """``(offset, key, value)`` of a partition as kcat (librdkafka, 0.8.2 mode) reads them."""
    out = subprocess.run(
        ["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", "beginning",
         "-e", "-q", "-f", "%o\x1f%k\x1f%s\x1e", *KCAT_COMPAT],
        capture_output=True, timeout=60, check=True,
    )
    rows = []
    for row in out.stdout.split(b"\x1e")[:-1]:
        offset, key, value = row.split(b"\x1f")
        rows.append((int(offset), key, value))
    return rows


def by_partition(results: List[RecordMetadata], records: List[Any]) -> Dict[int, List[Any]]:
    """Records grouped by the partition their metadata says, in offset order."""
    grouped: Dict[int, List[Tuple[int, Any]]] = {}
    for meta, record in zip(results, records):
        grouped.setdefault(meta.partition, []).append((meta.offset, record))
    return {p: [r for _, r in sorted(rows, key=lambda x: x[0])] for p, rows in grouped.items()}


async def produce_all(producer: Producer, topic: str,
                      records: List[Tuple[Optional[bytes], Any]]) -> List[RecordMetadata]:
    futures = [producer.produce(topic, value, key=key) for key, value in records]
    return list(await asyncio.gather(*futures))


# --------------------------------------------------------------------------
# round trips


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_read_by_kafka_python(kafka_cluster, topic_factory, codec):
    topic = topic_factory(partitions=3)
    rng = random.Random(7)
    records = [
        (None if i % 4 == 0 else b"key-%d" % (i % 13), rng.randbytes(rng.randrange(0, 300)))
        for i in range(600)
    ]
    records.append((b"", b""))  # empty key and value stay empty, not null
    records.append((b"k", None))  # a null value

    async def main():
        async with Producer(kafka_cluster.bootstrap, compression=codec, batch_size=4096) as p:
            return await produce_all(p, topic, records)

    results = run(main())
    assert all(r.topic == topic for r in results)
    expected = by_partition(results, records)
    assert set(expected) == {0, 1, 2}
    for partition, rows in expected.items():
        got = read_back(kafka_cluster.bootstrap, topic, partition, len(rows))
        assert [(m.key, m.value) for m in got] == rows
        offsets = sorted(r.offset for r in results if r.partition == partition)
        assert [m.offset for m in got] == offsets == list(range(len(rows)))


@pytest.mark.interop
@pytest.mark.parametrize("codec", [*CODECS, "lz4"])
def test_round_trip_read_by_kcat(kafka_cluster, topic_factory, codec):
    topic = topic_factory(partitions=2)
    records = [(b"user-%d" % (i % 5), f"value {i} ü".encode()) for i in range(300)]

    async def main():
        async with Producer(kafka_cluster.bootstrap, compression=codec) as p:
            return await produce_all(p, topic, records)

    results = run(main())
    expected = by_partition(results, records)
    for partition, rows in expected.items():
        got = kcat_read(kafka_cluster.bootstrap, topic, partition)
        assert [(k, v) for _, k, v in got] == rows
        assert [o for o, _, _ in got] == list(range(len(rows)))


def test_keys_land_where_kafka_python_puts_them(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    keys = [b"customer-%d" % i for i in range(300)] + [random.randbytes(9) for _ in range(100)]

    async def main():
        async with Producer(kafka_cluster.bootstrap) as p:
            return await asyncio.gather(*(p.produce(topic, b"v", key=k) for k in keys))

    for key, meta in zip(keys, run(main())):
        assert meta.partition == key_partition(key, [0, 1, 2])


def test_unkeyed_records_spread_round_robin(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)

    async def main():
        async with Producer(kafka_cluster.bootstrap) as p:
            # Unkeyed records go to partitions that have a leader: wait until
            # the new topic's three have one.
            for _ in range(50):
                await p.cluster.refresh_metadata([topic])
                if all(p.cluster.leader(topic, i) >= 0 for i in range(3)):
                    break
                await asyncio.sleep(0.1)
            return await asyncio.gather(*(p.produce(topic, b"v%d" % i) for i in range(300)))

    counts = [0, 0, 0]
    for meta in run(main()):
        counts[meta.partition] += 1
    assert counts == [100, 100, 100]


def test_explicit_partition(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)

    async def main():
        async with Producer(kafka_cluster.bootstrap) as p:
            first = await p.produce(topic, b"a", key=b"ignored-for-placement", partition=2)
            with pytest.raises(UnknownPartitionError) as info:
                await p.produce(topic, b"b", partition=7)
            assert info.value.topic == topic and info.value.partition == 7
            return first

    assert run(main()) == (topic, 2, 0)


# --------------------------------------------------------------------------
# acks


def test_acks_zero_resolves_once_written_with_offset_minus_one(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap, required_acks=0) as p:
            return await asyncio.gather(*(p.produce(topic, b"m%d" % i) for i in range(200)))

    results = run(main())
    assert results == [(topic, 0, -1)] * 200
    # Written, though nobody said so: the broker holds them all, in order.
    got = read_back(kafka_cluster.bootstrap, topic, 0, 200)
    assert [m.value for m in got] == [b"m%d" % i for i in range(200)]


@pytest.mark.parametrize("acks", [1, -1])
def test_acks_one_and_all_return_real_offsets(kafka_cluster, topic_factory, acks):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap, required_acks=acks) as p:
            single = await p.produce(topic, b"first")
            rest = await asyncio.gather(*(p.produce(topic, b"x") for _ in range(50)))
            return single, rest

    single, rest = run(main())
    assert single == (topic, 0, 0)
    assert [r.offset for r in rest] == list(range(1, 51))


def test_a_cancelled_future_leaves_its_batchmates_offsets_right(kafka_cluster, topic_factory):
    # The sender resolves a batch's futures in one pass that stops at a
    # future its owner cancelled; the rest of the batch must still get their
    # own offsets, in order, and the cancelled one stays cancelled.
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap, linger=0.05) as p:
            first = await p.produce(topic, b"first")
            futures = [p.produce(topic, b"%d" % i) for i in range(20)]
            futures[3].cancel()
            futures[17].cancel()
            result = await p.flush()
            return first, futures, result

    first, futures, result = run(main())
    assert [f.cancelled() for f in futures] == [i in (3, 17) for i in range(20)]
    offsets = [None if f.cancelled() else f.result().offset for f in futures]
    assert offsets == [None if i in (3, 17) else first.offset + 1 + i for i in range(20)]
    assert result.failed == 0


# --------------------------------------------------------------------------
# the API from Tornado code, ordering, flush and close


def test_futures_can_be_yielded_from_gen_coroutine(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    @gen.coroutine
    def legacy(producer):
        meta = yield producer.produce(topic, b"from a gen.coroutine")
        both = yield [producer.produce(topic, b"a"), producer.produce(topic, b"b")]
        raise gen.Return((meta, both))

    async def main():
        async with Producer(kafka_cluster.bootstrap) as p:
            return await legacy(p)

    meta, both = run(main())
    assert meta == (topic, 0, 0)
    assert [m.offset for m in both] == [1, 2]


def test_order_is_kept_within_a_partition(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    n = 5000

    async def main():
        # Small batches and a short linger: many requests, always one batch
        # set in flight per partition.
        async with Producer(kafka_cluster.bootstrap, batch_size=512, linger=0.001) as p:
            futures = []
            for i in range(n):
                futures.append(p.produce(topic, b"%d" % i, key=b"k%d" % (i % 2)))
                if i % 97 == 0:
                    await asyncio.sleep(0)
            return await asyncio.gather(*futures)

    results = run(main())
    for partition in (0, 1):
        mine = [(r.offset, i) for i, r in enumerate(results) if r.partition == partition]
        assert [o for o, _ in sorted(mine)] == list(range(len(mine)))
        # offset order == produce order
        assert [i for _, i in sorted(mine)] == sorted(i for _, i in mine)
        got = read_back(kafka_cluster.bootstrap, topic, partition, len(mine))
        assert [int(m.value) for m in got] == [i for _, i in sorted(mine)]


def test_linger_batches_records_together(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap, linger=0.05) as p:
            futures = []
            for i in range(10):
                futures.append(p.produce(topic, b"%d" % i))
                await asyncio.sleep(0.001)  # other callbacks run; the batch waits
            assert p.pending_records == 10
            return await asyncio.gather(*futures)

    assert [r.offset for r in run(main())] == list(range(10))


def test_flush_waits_for_everything_and_close_drains(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)

    async def main():
        p = Producer(kafka_cluster.bootstrap, linger=10.0)  # only flush sends
        await p.connect()
        futures = [p.produce(topic, b"%d" % i) for i in range(100)]
        await p.flush()
        assert all(f.done() and f.exception() is None for f in futures)
        assert p.pending_bytes == 0 and p.pending_records == 0
        late = [p.produce(topic, b"late-%d" % i) for i in range(100)]
        await p.close()  # drains
        assert all(f.done() and f.exception() is None for f in late)
        with pytest.raises(ClientClosedError):
            p.produce(topic, b"after close")
        await p.close()  # harmless

    run(main())
    assert sum(len(v) for v in read_all(kafka_cluster, topic).values()) == 200


def test_produce_without_connect_loads_metadata_itself(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        p = Producer(kafka_cluster.bootstrap)
        try:
            return await p.produce(topic, b"no connect() needed")
        finally:
            await p.close()

    assert run(main()) == (topic, 0, 0)


def test_auto_created_topic(kafka_cluster):
    topic = f"auto-{random.getrandbits(40):x}"

    async def main():
        async with Producer(kafka_cluster.bootstrap) as p:
            return await p.produce(topic, b"creates the topic")

    meta = run(main())
    assert meta.topic == topic and meta.offset == 0


# --------------------------------------------------------------------------
# serializers and keys


def test_json_serializer_and_key_maker(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    events = [{"user": f"u{i % 4}", "n": i, "text": "é"} for i in range(40)]

    async def main():
        async with Producer(
            kafka_cluster.bootstrap,
            serializer=json_serializer,
            key_maker=lambda event: event["user"],
            key_serializer=str.encode,
        ) as p:
            return await asyncio.gather(*(p.produce(topic, e) for e in events))

    results = run(main())
    for event, meta in zip(events, results):
        assert meta.partition == key_partition(event["user"].encode(), [0, 1, 2])
    got = {
        (m.partition, m.offset): (m.key, json_deserializer(m.value))
        for part in read_all(kafka_cluster, topic).values()
        for m in part
    }
    for event, meta in zip(events, results):
        assert got[(meta.partition, meta.offset)] == (event["user"].encode(), event)


def test_custom_partitioner(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    calls = []

    def last_partition(key, partitions):
        calls.append((key, list(partitions)))
        return partitions[-1]

    async def main():
        async with Producer(kafka_cluster.bootstrap, partitioner=last_partition) as p:
            return await asyncio.gather(p.produce(topic, b"a", key=b"k"), p.produce(topic, b"b"))

    assert [m.partition for m in run(main())] == [2, 2]
    assert calls == [(b"k", [0, 1, 2]), (None, [0, 1, 2])]


# --------------------------------------------------------------------------
# bad input: typed errors, right away


def test_wrong_value_and_key_types_raise_at_produce(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap) as p:
            for bad in ("text", 42, {"a": 1}, ["x"]):
                with pytest.raises(SerializationError, match="value must be bytes"):
                    p.produce(topic, bad)
                with pytest.raises(TypeError):  # SerializationError is a TypeError too
                    p.produce(topic, bad)
            with pytest.raises(SerializationError, match="key must be bytes"):
                p.produce(topic, b"v", key="text-key")
            # bytes-likes are accepted (copied)
            buf = bytearray(b"mutable")
            future = p.produce(topic, buf, key=memoryview(b"mv"))
            buf[:] = b"changed"
            await future
            assert p.pending_bytes == 0

        async with Producer(kafka_cluster.bootstrap, serializer=json_serializer) as p:
            with pytest.raises(SerializationError, match="serializer failed") as info:
                p.produce(topic, object())
            assert isinstance(info.value.__cause__, TypeError)
            with pytest.raises(SerializationError):
                p.produce(topic, float("nan"))
        return True

    assert run(main())
    got = read_back(kafka_cluster.bootstrap, topic, 0, 1)
    assert (got[0].key, got[0].value) == (b"mv", b"mutable")


def test_bad_arguments_raise_config_errors(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap) as p:
            with pytest.raises(ConfigError):
                p.produce("", b"v")
            with pytest.raises(ConfigError):
                p.produce(None, b"v")
            with pytest.raises(ConfigError):
                p.produce(topic, b"v", partition=-1)
            with pytest.raises(ConfigError):
                p.produce(topic, b"v", partition="0")

    run(main())


def test_oversized_message_is_refused_before_sending(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap, max_message_size=1000) as p:
            with pytest.raises(MessageSizeTooLargeError) as info:
                p.produce(topic, b"x" * 975)  # 975 + 26 bytes of overhead
            assert info.value.topic == topic
            assert p.pending_bytes == 0
            return await p.produce(topic, b"x" * 974)  # exactly 1000: fine

    assert run(main()).offset == 0
    assert kafka_cluster.offsets(topic, 0) == [0, 1]


def test_message_the_broker_refuses_fails_its_future(kafka_cluster_factory):
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False, message_max_bytes=2000)
    cluster.create_topic("small", 1)

    async def main():
        async with Producer(cluster.bootstrap, max_message_size=10**6) as p:
            assert (await p.produce("small", b"fits")).offset == 0
            with pytest.raises(MessageSizeTooLargeError) as info:
                await p.produce("small", b"x" * 5000)
            assert info.value.topic == "small" and info.value.partition == 0
            # Not retriable: one attempt, and the producer goes on.
            return await p.produce("small", b"after")

    assert run(main()).partition == 0


def test_unknown_topic_with_auto_create_off(kafka_cluster_factory):
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False, auto_create_topics=False)
    cluster.create_topic("exists", 1)

    async def main():
        async with Producer(cluster.bootstrap) as p:
            futures = [p.produce("no-such-topic", b"v%d" % i) for i in range(3)]
            good = p.produce("exists", b"fine")
            for future in futures:
                with pytest.raises(UnknownTopicError) as info:
                    await future
                assert info.value.topic == "no-such-topic"
            return await good

    assert run(main(), timeout=30) == ("exists", 0, 0)


def test_unreachable_brokers_raise_no_brokers(unused_port_pair):
    bootstrap = ",".join(f"127.0.0.1:{port}" for port in unused_port_pair)

    async def main():
        p = Producer(bootstrap, connect_timeout=1, retries=2, retry_backoff=0.05)
        started = time.monotonic()
        with pytest.raises(NoBrokersError):
            await p.connect()
        future = p.produce("t", b"v")
        with pytest.raises(NoBrokersError):
            await future
        await p.close()
        return time.monotonic() - started

    run(main(), timeout=60)


@pytest.fixture
def unused_port_pair():
    """Two loopback ports nothing listens on."""
    import socket

    socks = [socket.socket() for _ in range(2)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports
