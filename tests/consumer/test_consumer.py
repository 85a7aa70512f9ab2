"""SingleConsumer against the embedded 0.8.2 cluster over real TCP.

Messages are produced by third-party clients (kafka-python with
``api_version=(0, 8, 2)``, kcat in legacy mode) or written raw with
``RawClient`` when a test needs exact offsets; the consumer reads them back
byte for byte. Faults (leader moves, restarts, killed connections, hangs)
are the cluster's own fault injection.
"""

import asyncio
import datetime
import os
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

import pytest
from tornado import gen
from tornado.ioloop import IOLoop

from kiel.consumer import BEGINNING, END, SingleConsumer
from kiel.exc import (
    ClientClosedError,
    CompressionError,
    ConfigError,
    ConnectionClosedError,
    CorruptMessageError,
    DeserializationError,
    KielConnectionError,
    KielError,
    MessageTooLargeError,
    NoBrokersError,
    NotLeaderForPartitionError,
    OffsetOutOfRangeError,
    UnknownPartitionError,
    UnknownTopicError,
)
from kiel.protocol import ProducePartitionData, ProduceRequest, ProduceTopicData
from kiel.protocol.messages import CODEC_GZIP, encode_message_set
from kiel.serializers import json_deserializer
from kiel.structs import Record
from kiel.testing.broker.rawclient import RawClient
from tests.conftest import run
from tests.support.single_consumer import consume_n, consumer_for, produce_raw, values
from tests.support.waiting import until

pytestmark = pytest.mark.zookeeper

LEGACY = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.8.2.2"]


def by_partition(records: List[Record]) -> Dict[int, List[Record]]:
    out: Dict[int, List[Record]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r)
    return out


# --------------------------------------------------------------------------
# round trips


@pytest.mark.interop
def test_round_trip_with_kafka_python(kafka_cluster, topic_factory):
    from kafka import KafkaProducer

    topic = topic_factory(partitions=3)
    sent = []
    rng = __import__("random").Random(7)
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap, api_version=(0, 8, 2))
    try:
        for i in range(600):
            key = None if i % 10 == 0 else f"key-{i % 13}".encode()
            value = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300)))
            if i % 97 == 5 and key is not None:
                value = None  # a null value (tombstone)
            sent.append((key, value))
            producer.send(topic, key=key, value=value)
        producer.flush()
    finally:
        producer.close()

    async def main():
        async with consumer_for(kafka_cluster) as consumer:
            got = await consume_n(consumer, topic, len(sent))
            assert await consumer.consume(topic) == []  # nothing more: an empty round
            return got

    got = run(main())
    assert sorted(sent, key=repr) == sorted(((r.key, r.value) for r in got), key=repr)
    for partition, records in by_partition(got).items():
        assert [r.offset for r in records] == list(range(len(records)))
        assert all(r.topic == topic and r.partition == partition for r in records)
    # Keyed messages keep their order per key.
    for key in {k for k, _ in sent if k is not None}:
        assert [v for k, v in sent if k == key] == [r.value for r in got if r.key == key]


@pytest.mark.interop
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_round_trip_with_kcat(kafka_cluster, topic_factory, kcat, codec):
    topic = topic_factory(partitions=2)
    lines = [f"k{i % 5}:value {codec} {i} " + "x" * (i % 50) for i in range(2000)]
    result = subprocess.run(
        [kcat, "-b", kafka_cluster.bootstrap, "-P", "-t", topic, "-K:", "-z", codec, *LEGACY],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr

    async def main():
        async with consumer_for(kafka_cluster) as consumer:
            return await consume_n(consumer, topic, len(lines))

    got = run(main())
    expected = [tuple(x.encode() for x in line.split(":", 1)) for line in lines]
    assert sorted(expected) == sorted((r.key, r.value) for r in got)
    for records in by_partition(got).values():
        assert [r.offset for r in records] == list(range(len(records)))
    for key in {k for k, _ in expected}:
        assert [v for k, v in expected if k == key] == [r.value for r in got if r.key == key]


def test_several_topics_and_stream(kafka_cluster, topic_factory):
    a, b = topic_factory(partitions=2), topic_factory(partitions=1)
    for p in (0, 1):
        produce_raw(kafka_cluster, a, p, values(50, f"a{p}-"))
    produce_raw(kafka_cluster, b, 0, values(30, "b-"), codec=CODEC_GZIP)

    async def main():
        async with consumer_for(kafka_cluster) as consumer:
            both = await consume_n(consumer, [a, b], 130)
            assert {(r.topic, r.partition) for r in both} == {(a, 0), (a, 1), (b, 0)}
            assert len(both) == 130
            produce_later = asyncio.get_running_loop().run_in_executor(
                None, produce_raw, kafka_cluster, b, 0, values(5, "late-")
            )
            streamed = []
            async for record in consumer.stream(b):
                streamed.append(record.value)
                if len(streamed) == 5:
                    break
            await produce_later
            assert streamed == [f"late-{i}".encode() for i in range(5)]
            assert consumer.position(b, 0) == 35
            assert sorted(consumer.partitions(a)) == [0, 1]

    run(main())


def test_leaving_a_stream_loses_nothing(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        produce_raw(kafka_cluster, topic, p, values(100, f"p{p}-"))

    async def main():
        async with consumer_for(kafka_cluster) as consumer:
            seen = []
            async for record in consumer.stream(topic, start=BEGINNING):
                seen.append(record)
                # position() counts what the loop received, mid-batch too
                assert consumer.position(topic, record.partition) == record.offset + 1
                if len(seen) == 10:
                    break
            # A batch holds far more than 10: the rest comes back, nothing skipped.
            rest = await consume_n(consumer, topic, 200 - len(seen), start=None)
            got = by_partition(seen + rest)
            for p in (0, 1):
                assert [r.offset for r in got[p]] == list(range(100))
            # A second loop left mid-way, then a seek elsewhere: still exact.
            consumer.seek(topic, 0, 50)
            consumer.seek(topic, 1, 50)
            async for record in consumer.stream(topic):  # noqa: B007 -- used below
                break
            assert consumer.position(topic, record.partition) == 51
            other = 1 - record.partition
            assert consumer.position(topic, other) == 50
            again = by_partition(await consume_n(consumer, topic, 99, start=None))
            assert [r.offset for r in again[record.partition]] == list(range(51, 100))
            assert [r.offset for r in again[other]] == list(range(50, 100))

    run(main())


def test_max_records_bounds_each_consume_and_loses_nothing(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    for p in (0, 1):
        produce_raw(kafka_cluster, topic, p, values(300, f"p{p}-"))

    async def main():
        with pytest.raises(ConfigError):
            consumer_for(kafka_cluster, max_records=0)
        async with consumer_for(kafka_cluster, max_records=70) as consumer:
            with pytest.raises(ConfigError):
                await consumer.consume(topic, start=BEGINNING, max_records=-1)
            got: List[Record] = []
            sizes = []
            for _ in range(200):
                if len(got) >= 600:
                    break
                batch = await consumer.consume(topic, start=BEGINNING)
                sizes.append(len(batch))
                got.extend(batch)
            # Each call is bounded by the consumer-wide default ...
            assert max(sizes) <= 70 and len(got) == 600
            parts = by_partition(got)
            for p in (0, 1):
                assert [r.offset for r in parts[p]] == list(range(300))
                assert consumer.position(topic, p) == 300
            # ... and by the call's own bound, which wins.
            consumer.seek(topic, 0, 0)
            one = await consumer.consume(topic, max_records=1)
            assert [(r.partition, r.offset) for r in one] == [(0, 0)]
            assert consumer.position(topic, 0) == 1

    run(main())


def test_fetches_split_over_requests_to_fit_the_frame_cap(kafka_cluster, topic_factory):
    """Each leader holds 2-3 partitions asked 20 KiB each: over a 40 KiB frame
    cap, so they go over several requests, and all drain."""
    topic = topic_factory(partitions=8, replication=1)
    body = b"x" * 1000
    for p in range(8):
        produce_raw(kafka_cluster, topic, p, [(None, body)] * 40)
    frame = 40 * 1024
    with pytest.raises(ConfigError):
        consumer_for(kafka_cluster, max_frame_size=frame, max_bytes=20 * 1024,
                     max_fetch_size=frame)

    async def main():
        async with consumer_for(
            kafka_cluster, max_frame_size=frame, max_bytes=20 * 1024, max_fetch_size=20 * 1024
        ) as consumer:
            got = by_partition(await consume_n(consumer, topic, 320))
            assert sorted(got) == list(range(8))
            for p in range(8):
                assert [r.offset for r in got[p]] == list(range(40))

    run(main())


def test_decompression_bomb_is_refused_within_the_decoded_budget(kafka_cluster, topic_factory):
    """A few hundred bytes of gzip that expand to 600 KB, over a 400 KB
    budget: consume() raises a typed error (again, until a seek), never stalls."""
    topic = topic_factory(partitions=1)
    produce_raw(kafka_cluster, topic, 0, [(None, b"\0" * 300_000)] * 2, codec=CODEC_GZIP)
    produce_raw(kafka_cluster, topic, 0, values(1, "after"))

    async def main():
        async with consumer_for(kafka_cluster, max_decoded=400_000) as consumer:
            with pytest.raises(CompressionError) as info:
                await consume_n(consumer, topic, 1)
            assert info.value.offset is not None
            with pytest.raises(CompressionError):
                await consumer.consume(topic)
            consumer.seek(topic, 0, 2)
            got = await consume_n(consumer, topic, 1, start=None)
            assert [r.value for r in got] == [b"after0"]
        async with consumer_for(kafka_cluster, max_decoded=700_000) as consumer:
            assert len(await consume_n(consumer, topic, 3)) == 3

    run(main())


def test_a_nested_wrapper_through_the_broker_is_refused_never_a_stall(
    kafka_cluster, topic_factory
):
    """A producer's nested wrapper keeps the producer's inner offsets (the
    broker numbers one level): consume() raises a typed error at it, whether
    those offsets run past the log's or lie before the position, and goes on
    after a seek past it. Nothing is handed out with offsets the log lacks."""
    inner = encode_message_set(values(5, "inner"), CODEC_GZIP)  # offsets 0..4
    nested = wrapper_message(inner)
    cases = []
    for before in (0, 7):
        topic = topic_factory(partitions=1)
        produce_raw(kafka_cluster, topic, 0, values(before, "plain"))
        send_raw(kafka_cluster, topic, 0, nested)
        produce_raw(kafka_cluster, topic, 0, values(1, "after"))
        cases.append((topic, before))

    async def main():
        async with consumer_for(kafka_cluster) as consumer:
            for topic, before in cases:
                got = []
                with pytest.raises(CorruptMessageError) as info:
                    for _ in range(50):
                        got.extend(await consumer.consume(topic, start=BEGINNING))
                assert info.value.topic == topic and info.value.offset == before
                assert [r.offset for r in got] == list(range(before))
                consumer.seek(topic, 0, before + 1)
                after = await consume_n(consumer, topic, 1, start=None)
                assert [(r.offset, r.value) for r in after] == [(before + 1, b"after0")]

    run(main())


def test_an_offset_corrupted_past_the_high_watermark_is_refused_never_skipped(
    kafka_cluster, topic_factory
):
    """No CRC covers a message's offset. The broker's answer raises the last
    message's offset by 1000 (its CRC still right): consume() raises a typed
    error instead of handing it out and jumping its position past the log's
    end, where the reset policy would skip the records in between silently.
    The records before it come first, the error at its own offset; the next
    answer is honest, and every record comes once, in order."""
    topic = topic_factory(partitions=1)
    produce_raw(kafka_cluster, topic, 0, values(10))

    async def main():
        async with consumer_for(kafka_cluster) as consumer:
            got = []
            kafka_cluster.corrupt_offsets(1000, count=1)
            with pytest.raises(CorruptMessageError) as info:
                for _ in range(50):
                    got.extend(await consumer.consume(topic, start=BEGINNING))
            assert "high watermark 10" in str(info.value) and "1009" in str(info.value)
            assert info.value.topic == topic and info.value.offset == len(got) == 9
            got.extend(await consume_n(consumer, topic, 10 - len(got), start=None))
            assert [(r.offset, r.value) for r in got] == [
                (i, f"m{i}".encode()) for i in range(10)]
            assert consumer.position(topic, 0) == 10

    run(main())


def wrapper_message(inner_set: bytes) -> bytes:
    """One gzip wrapper message (offset 0) around ``inner_set``, by hand."""
    import struct
    import zlib

    from kiel.compression import compress

    body = struct.pack(">bb", 0, CODEC_GZIP) + struct.pack(">i", -1)
    value = compress(CODEC_GZIP, inner_set)
    body += struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", 0, len(body) + 4, zlib.crc32(body)) + body


def send_raw(cluster: Any, topic: str, partition: int, message_set: bytes) -> None:
    with RawClient(cluster.address(cluster.leader(topic, partition))) as client:
        response = client.request(ProduceRequest(1, 10000, [
            ProduceTopicData(topic, [ProducePartitionData(partition, message_set)])
        ]))
        assert response.topics[0].partitions[0].error_code == 0


def test_prefetch_bound_holds_and_loses_nothing(kafka_cluster, topic_factory):
    """Six partitions answered 8 KiB at a time, at most two answers' worth
    held or asked for at once: every sample stays under the bound, and every
    message arrives once, in order."""
    topic = topic_factory(partitions=6)
    body = b"y" * 200
    for p in range(6):
        produce_raw(kafka_cluster, topic, p, [(None, body + b"%d" % i) for i in range(300)])
    bound = 2 * 8 * 1024
    with pytest.raises(ConfigError):
        consumer_for(kafka_cluster, max_bytes=8 * 1024, max_prefetch_bytes=4 * 1024)

    async def main():
        consumer = consumer_for(
            kafka_cluster, max_bytes=8 * 1024, max_fetch_size=8 * 1024, max_prefetch_bytes=bound
        )
        async with consumer:
            peaks = []
            done = []

            def sample():
                peaks.append(consumer.fetcher.prefetched)
                if not done:
                    IOLoop.current().call_later(0.001, sample)

            sample()
            try:
                got = await consume_n(consumer, topic, 1800)
            finally:
                done.append(True)
            parts = by_partition(got)
            for p in range(6):
                assert [r.value for r in parts[p]] == [body + b"%d" % i for i in range(300)]
            assert 0 < max(peaks) <= bound

    run(main())


@pytest.mark.slow
def test_many_backlogged_partitions_on_one_broker_drain(kafka_cluster_factory):
    """120 partitions with 1.1 MiB of backlog each on one broker: asked all
    at once they overflow a 100 MiB frame; they drain completely with the
    default settings."""
    cluster = kafka_cluster_factory(brokers=1)
    topic = "backlog"
    cluster.create_topic(topic, partitions=120, replication=1)
    body = b"z" * 1000
    per_partition = 1100
    for p in range(120):
        produce_raw(cluster, topic, p, [(None, body)] * per_partition, batch=550)

    async def main():
        async with consumer_for(cluster) as consumer:
            counts: Dict[int, int] = {}
            total = 0
            for _ in range(20_000):
                if total >= 120 * per_partition:
                    break
                for r in await consumer.consume(topic, start=BEGINNING):
                    assert r.offset == counts.get(r.partition, 0)
                    counts[r.partition] = r.offset + 1
                    total += 1
            assert counts == {p: per_partition for p in range(120)}

    run(main())


def test_usable_from_tornado_gen_coroutine(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    produce_raw(kafka_cluster, topic, 0, values(10))

    @gen.coroutine
    def legacy_app():
        consumer = consumer_for(kafka_cluster)
        yield consumer.connect()
        got = []
        while len(got) < 10:
            records = yield consumer.consume(topic, start=SingleConsumer.BEGINNING)
            got.extend(records)
        yield consumer.close()
        return [r.value for r in got]

    assert IOLoop(make_current=False).run_sync(legacy_app, timeout=60) == [v for _, v in values(10)]


def test_deserializers(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    produce_raw(
        kafka_cluster,
        topic,
        0,
        [(b"k1", b'{"a": 1}'), (b"k0", None), (b"k2", b"[2]"), (b"k3", b"{")],
    )

    async def main():
        consumer = consumer_for(
            kafka_cluster, deserializer=json_deserializer, key_deserializer=bytes.decode
        )
        async with consumer:
            got = await consumer.consume(topic, start=BEGINNING)
            assert [(r.key, r.value) for r in got] == [("k1", {"a": 1}), ("k0", None), ("k2", [2])]
            with pytest.raises(DeserializationError) as info:
                await consumer.consume(topic)
            assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 3)
            assert isinstance(info.value.__cause__, ValueError)
            assert consumer.position(topic, 0) == 3
            consumer.seek(topic, 0, 4)  # skip the bad one
            assert await consumer.consume(topic) == []

    run(main())


# --------------------------------------------------------------------------
# start positions, positions


def test_start_positions(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    for p in range(3):
        produce_raw(kafka_cluster, topic, p, values(20, f"p{p}-"))

    async def first(start, **options):
        async with consumer_for(kafka_cluster, **options) as consumer:
            records = await consume_n(consumer, topic, 1, start=start, rounds=3)
            positions = {p: consumer.position(topic, p) for p in consumer.partitions(topic)}
            return records, positions

    async def main():
        records, positions = await first(END)
        assert records == [] and positions == {0: 20, 1: 20, 2: 20}
        records, positions = await first(BEGINNING)
        assert min(r.offset for r in records) == 0
        records, _ = await first(15)
        assert {r.offset for r in records} <= set(range(15, 20)) and records
        records, positions = await first({1: 7})
        assert {r.partition for r in records} == {1} and records[0].offset == 7
        assert list(positions) == [1]
        with pytest.raises(UnknownPartitionError):
            await first({5: 0})
        with pytest.raises(ConfigError):
            await first(-3)
        with pytest.raises(ConfigError):
            await first("beginning")

    run(main())


def test_start_at_a_time_resolves_at_segment_granularity(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    utc = datetime.timezone.utc
    produce_raw(kafka_cluster, topic, 0, values(10, "a"))  # segment 0: offsets 0-9
    kafka_cluster.roll_segment(topic, 0)
    produce_raw(kafka_cluster, topic, 0, values(5, "b"))  # segment 10: offsets 10-19
    time.sleep(0.05)
    mid_segment = datetime.datetime.now(utc)
    time.sleep(0.05)
    produce_raw(kafka_cluster, topic, 0, values(5, "b", start=5))
    kafka_cluster.roll_segment(topic, 0)  # segment 20
    time.sleep(0.05)
    after_roll = datetime.datetime.now(utc)
    time.sleep(0.05)
    produce_raw(kafka_cluster, topic, 0, values(10, "c"))  # offsets 20-29

    async def start_at(start):
        async with consumer_for(kafka_cluster) as consumer:
            records = await consumer.consume(topic, start=start)
            return records[0].offset if records else consumer.position(topic, 0)

    async def main():
        # A 0.8 broker answers with the base offset of the newest segment last
        # written before the time: segment 10 was written after `mid_segment`,
        # so the answer is segment 0 -- earlier than the time asked for.
        assert await start_at(mid_segment) == 0
        # Segment 10 was last written before `after_roll` (segment 20 after):
        # the "b"s come again, although all of them predate the time.
        assert await start_at(after_roll) == 10
        assert await start_at(after_roll.replace(tzinfo=None)) == 10  # naive means UTC
        assert await start_at(datetime.timedelta(hours=1)) == 0  # before every segment
        assert await start_at(datetime.timedelta(hours=-1)) is None  # never reached

    with pytest.raises(ConfigError):
        run(main())
    later = datetime.datetime.now(utc) + datetime.timedelta(hours=1)
    assert run(start_at(later)) == 30  # the log end


def test_pause_resume_seek_position_highwater_lag(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    produce_raw(kafka_cluster, topic, 0, values(40, "zero-"))
    produce_raw(kafka_cluster, topic, 1, values(10, "one-"))

    async def main():
        async with consumer_for(kafka_cluster, max_bytes=256) as consumer:
            got = await consumer.consume(topic, start={0: 0, 1: 0})
            consumer.pause(topic, 1)
            assert consumer.subscription.paused() == [(topic, 1)]
            paused_at = consumer.position(topic, 1)
            while consumer.position(topic, 0) < 40:
                batch = await consumer.consume(topic)
                assert {r.partition for r in batch} <= {0}
                got += batch
            assert consumer.position(topic, 1) == paused_at
            assert consumer.highwater(topic, 0) == 40 and consumer.lag(topic, 0) == 0
            assert await consumer.consume(topic) == []  # 1 is paused, 0 is drained
            consumer.resume(topic, 1)
            while consumer.position(topic, 1) < 10:
                got += await consumer.consume(topic)
            assert consumer.highwater(topic, 1) == 10 and consumer.lag(topic) == {0: 0, 1: 0}
            parts = by_partition(got)
            assert [r.offset for r in parts[0]] == list(range(40))
            assert [r.offset for r in parts[1]] == list(range(10))
            consumer.seek(topic, 0, 5)
            assert consumer.position(topic, 0) == 5 and consumer.lag(topic, 0) == 35
            again = await consumer.consume(topic)
            assert again[0].offset == 5 and again[0].value == b"zero-5"
            await consumer.seek_to(topic, BEGINNING, partition=1)
            assert consumer.position(topic, 1) == 0
            await consumer.seek_to(topic, END)
            assert consumer.position(topic, 0) == 40 and consumer.position(topic, 1) == 10
            await consumer.seek_to(topic, {1: 3})
            assert consumer.position(topic, 1) == 3
            with pytest.raises(UnknownTopicError):
                consumer.position("never-consumed", 0)
            with pytest.raises(UnknownPartitionError):
                consumer.position(topic, 9)
            with pytest.raises(ConfigError):
                consumer.seek(topic, 0, -1)

    run(main())


def test_seek_to_starts_a_topic_not_consumed_yet(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    produce_raw(kafka_cluster, topic, 0, values(10))

    async def main():
        async with consumer_for(kafka_cluster) as consumer:
            with pytest.raises(UnknownTopicError):  # partition= needs a topic consumed already
                await consumer.seek_to(topic, BEGINNING, partition=0)
            await consumer.seek_to(topic, END)
            assert consumer.partitions(topic) == [0, 1]
            assert (consumer.position(topic, 0), consumer.position(topic, 1)) == (10, 0)
            await consumer.seek_to(topic, BEGINNING)  # consumed now: a plain seek
            assert consumer.position(topic, 0) == 0
            got = await consume_n(consumer, topic, 10)
            assert [r.value for r in got] == [v for _, v in values(10)]
        async with consumer_for(kafka_cluster) as consumer:
            await consumer.seek_to(topic, {0: 4})  # a dict: only the partitions it names
            assert consumer.partitions(topic) == [0] and consumer.position(topic, 0) == 4

    run(main())


# --------------------------------------------------------------------------
# offset reset, message size


@pytest.mark.parametrize("policy", ["earliest", "latest", "raise"])
def test_offset_reset_policies(kafka_cluster, topic_factory, policy):
    topic = topic_factory(partitions=1)
    produce_raw(kafka_cluster, topic, 0, values(30))

    async def main():
        async with consumer_for(kafka_cluster, offset_reset=policy) as consumer:
            await consumer.consume(topic, start=END)
            consumer.seek(topic, 0, 1000)  # past the end: OffsetOutOfRange
            if policy == "raise":
                with pytest.raises(OffsetOutOfRangeError) as info:
                    await consumer.consume(topic)
                assert (info.value.topic, info.value.partition, info.value.offset) == (
                    topic,
                    0,
                    1000,
                )
                with pytest.raises(OffsetOutOfRangeError):  # no silent stall: again
                    await consumer.consume(topic)
                consumer.seek(topic, 0, 29)
                assert [r.offset for r in await consumer.consume(topic)] == [29]
                return
            # Past the log end there is nothing to replay: every policy but
            # "raise" goes to the end (below the log start, see the retention
            # test: "earliest" replays from the log start).
            assert await consumer.consume(topic) == []
            assert consumer.position(topic, 0) == 30
            await asyncio.get_running_loop().run_in_executor(
                None, produce_raw, kafka_cluster, topic, 0, values(1, "after")
            )
            got = await consume_n(consumer, topic, 1, start=None)
            assert [(r.offset, r.value) for r in got] == [(30, b"after0")]

    run(main())


def test_offset_reset_after_retention_deleted_the_position(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    produce_raw(kafka_cluster, topic, 0, values(10, "old"))
    kafka_cluster.roll_segment(topic, 0)
    produce_raw(kafka_cluster, topic, 0, values(10, "new"))

    async def main():
        async with consumer_for(kafka_cluster) as consumer:
            await consumer.consume(topic, start={0: 2})
            consumer.seek(topic, 0, 2)
            await asyncio.get_running_loop().run_in_executor(
                None, kafka_cluster.delete_records, topic, 0, 10
            )
            got = await consume_n(consumer, topic, 10, start=None)
            assert [r.value for r in got] == [f"new{i}".encode() for i in range(10)]

    run(main())


def test_fetch_size_grows_then_message_too_large(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    produce_raw(
        kafka_cluster,
        topic,
        0,
        [(None, b"small"), (b"big", b"x" * 100_000), (None, b"after"), (None, b"y" * 600_000)],
        batch=1,
    )

    async def main():
        options = dict(max_bytes=4096, max_fetch_size=256 * 1024)
        async with consumer_for(kafka_cluster, **options) as consumer:
            got = await consume_n(consumer, topic, 3)
            assert [r.value[:5] for r in got[:3]] == [b"small", b"xxxxx", b"after"]
            assert len(got[1].value) == 100_000
            with pytest.raises(MessageTooLargeError) as info:
                await consume_n(consumer, topic, 1, start=None)
            assert (info.value.topic, info.value.partition, info.value.offset) == (topic, 0, 3)
            assert "max_fetch_size" in str(info.value)
            # Raised again rather than stalling; a seek past it goes on.
            with pytest.raises(MessageTooLargeError):
                await consumer.consume(topic)
            consumer.seek(topic, 0, 4)
            assert await consumer.consume(topic) == []

    run(main())


# --------------------------------------------------------------------------
# bad input and faults


def test_unknown_topic(kafka_cluster_factory):
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False, auto_create_topics=False)

    async def main():
        async with consumer_for(cluster) as consumer:
            with pytest.raises(UnknownTopicError) as info:
                await consumer.consume("no-such-topic")
            assert info.value.topic == "no-such-topic"

    run(main())


def test_unreachable_brokers_fail_with_a_typed_error():
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now

    async def main():
        consumer = SingleConsumer(f"127.0.0.1:{port}", retries=1, retry_backoff=0.05)
        with pytest.raises(NoBrokersError):
            await consumer.connect()
        await consumer.close()
        with pytest.raises(ClientClosedError):
            await consumer.consume("t")

    run(main(), timeout=30)


def test_hanging_broker_is_ridden_out_within_each_calls_bound(kafka_cluster_factory):
    # Before issue 35 a retriable failure that outlasted the retries was
    # raised by consume() (and ended a loop without try/except); now every
    # call returns within its bound, the outage is counted and shown by the
    # health rule, and consuming goes on once the broker answers again.
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False)
    cluster.create_topic("hang", partitions=1)
    produce_raw(cluster, "hang", 0, values(5))

    async def main():
        consumer = consumer_for(cluster, request_timeout=0.5, retries=1, retry_backoff=0.05)
        async with consumer:
            assert len(await consume_n(consumer, "hang", 5)) == 5
            await asyncio.get_running_loop().run_in_executor(None, cluster.hang_broker, 1)
            try:
                started = time.monotonic()
                while time.monotonic() - started < 8:
                    call = time.monotonic()
                    assert await consumer.consume("hang") == []
                    # max_wait_time (1 s) plus the answer grace; generous.
                    assert time.monotonic() - call < 5
                metrics = consumer.metrics()
                assert metrics.outage is not None and sum(metrics.outages.values()) >= 1
                assert not consumer.healthy(stall=3.0)
                assert "no fetch answered" in (consumer.unhealthy(stall=3.0) or "")
            finally:
                await asyncio.get_running_loop().run_in_executor(None, cluster.resume_broker, 1)
            produce_later = asyncio.get_running_loop().run_in_executor(
                None, produce_raw, cluster, "hang", 0, values(1, "after")
            )
            await produce_later
            got = await consume_n(consumer, "hang", 1, start=None)
            assert [r.value for r in got] == [b"after0"]
            assert consumer.healthy(stall=3.0) and consumer.metrics().outage is None

    run(main())


def test_killed_connection_fails_in_flight_fetch_and_consumer_recovers(
    kafka_cluster, topic_factory
):
    topic = topic_factory(partitions=1)
    produce_raw(kafka_cluster, topic, 0, values(5))

    async def main():
        loop = asyncio.get_running_loop()
        async with consumer_for(kafka_cluster, max_wait_time=5.0) as consumer:
            assert len(await consume_n(consumer, topic, 5)) == 5
            waiting = asyncio.ensure_future(consumer.consume(topic))  # a 5 s long poll
            await until(lambda: consumer.fetcher.in_flight, what="the long poll in flight")
            closed = await loop.run_in_executor(None, kafka_cluster.close_connections, None)
            assert closed >= 1
            await loop.run_in_executor(None, produce_raw, kafka_cluster, topic, 0, values(3, "n"))
            got = await waiting
            got += await consume_n(consumer, topic, 3 - len(got), start=None)
            assert [r.value for r in got] == [b"n0", b"n1", b"n2"]
            assert isinstance(consumer.fetcher.last_error, ConnectionClosedError)

    run(main())


def test_close_ends_pending_calls_and_streams(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        consumer = consumer_for(kafka_cluster, max_wait_time=5.0)
        await consumer.connect()
        await consumer.consume(topic)
        pending = asyncio.ensure_future(consumer.consume(topic))

        async def drain_stream():
            return [r async for r in consumer.stream(topic)]

        streaming = asyncio.ensure_future(drain_stream())
        # Both are waiting on the long poll (they started before it went out).
        await until(lambda: consumer.fetcher.in_flight, what="the long poll in flight")
        await consumer.close()
        with pytest.raises(ClientClosedError):
            await pending
        assert await streaming == []

    run(main())


# --------------------------------------------------------------------------
# slow fault tests: exactly once, in order, per partition


def _check_exactly_once(records: List[Record], counts: Dict[int, int]) -> None:
    parts = by_partition(records)
    assert sorted(parts) == sorted(counts)
    for partition, got in parts.items():
        assert [r.offset for r in got] == list(range(counts[partition]))
        assert [r.value for r in got] == [
            f"p{partition}-{i}".encode() for i in range(counts[partition])
        ]


def _fill(cluster: Any, topic: str, partitions: int, per_partition: int) -> Dict[int, int]:
    for p in range(partitions):
        produce_raw(cluster, topic, p, values(per_partition, f"p{p}-"), batch=5000)
    return {p: per_partition for p in range(partitions)}


async def _consume_with_fault(
    consumer: SingleConsumer, topic: str, total: int, fault: Any, at: int, pace: float = 0.002
) -> List[Record]:
    """Consume ``total`` records; run ``fault`` (in a thread) once ``at`` arrived.

    Rounds are paced a little so that the fault lands while records are still
    flowing (checked: it must end before the last record arrives). A fast
    consumer would otherwise finish first: once only ``at`` records are left,
    it waits for the fault to end (its fetches in flight meet the fault too).
    """
    loop = asyncio.get_running_loop()
    got: List[Record] = []
    injected: Optional[asyncio.Future[Any]] = None
    done_at: Optional[int] = None
    while len(got) < total:
        got.extend(await consumer.consume(topic, start=BEGINNING))
        if injected is None and len(got) >= at:
            injected = loop.run_in_executor(None, fault)
        elif injected is not None and done_at is None and (
            injected.done() or len(got) >= total - at
        ):
            await injected
            done_at = len(got)
        await asyncio.sleep(pace)
    assert injected is not None
    await injected
    assert done_at is not None and done_at < total, "the fault ended after the consume"
    assert await consumer.consume(topic) == []
    return got


@pytest.mark.slow
def test_leader_moves_during_a_100k_consume(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    counts = _fill(kafka_cluster, topic, 3, 34_000)
    total = sum(counts.values())

    def move_all() -> None:
        for p in range(3):
            leader = kafka_cluster.leader(topic, p)
            kafka_cluster.move_leader(topic, p, leader % 3 + 1)

    async def main():
        async with consumer_for(kafka_cluster, max_bytes=16 * 1024, retries=10) as consumer:
            got = await _consume_with_fault(consumer, topic, total, move_all, total // 4)
            assert isinstance(consumer.fetcher.last_error, NotLeaderForPartitionError)
            return got

    _check_exactly_once(run(main(), timeout=120), counts)


@pytest.mark.slow
def test_broker_restart_during_a_100k_consume(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    counts = _fill(kafka_cluster, topic, 3, 34_000)
    total = sum(counts.values())
    victim = kafka_cluster.leader(topic, 0)

    def restart() -> None:
        kafka_cluster.stop_broker(victim)
        time.sleep(0.3)
        kafka_cluster.start_broker(victim)

    async def main():
        async with consumer_for(
            kafka_cluster, max_bytes=8 * 1024, retries=10, retry_backoff=0.05, max_backoff=1.0
        ) as consumer:
            got = await _consume_with_fault(
                consumer, topic, total, restart, total // 4, pace=0.02
            )
            assert isinstance(consumer.fetcher.last_error, KielError)  # it did notice
            return got

    _check_exactly_once(run(main(), timeout=120), counts)


@pytest.mark.slow
def test_killed_connections_during_a_100k_consume(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    counts = _fill(kafka_cluster, topic, 3, 34_000)
    total = sum(counts.values())

    def kill_repeatedly() -> None:
        for _ in range(5):
            kafka_cluster.close_connections()
            time.sleep(0.05)

    async def main():
        async with consumer_for(kafka_cluster, max_bytes=16 * 1024, retries=10) as consumer:
            got = await _consume_with_fault(consumer, topic, total, kill_repeatedly, total // 4)
            assert isinstance(consumer.fetcher.last_error, KielConnectionError)
            return got

    _check_exactly_once(run(main(), timeout=120), counts)


def test_the_example_runs():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run(
        [sys.executable, os.path.join(root, "examples", "consume.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "read 1000 events" in result.stdout
    assert "read all 1005 events again" in result.stdout


def _guide_blocks():
    import re
    import textwrap

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "guides", "single_consumer.rst")) as f:
        text = f.read()
    return [
        textwrap.dedent(block)
        for block in re.findall(r"\.\. testcode::\n\n((?:    .*\n|\n)+)", text)
    ]


def test_the_guide_examples_run(kafka_cluster, topic_factory):
    blocks = _guide_blocks()
    first = subprocess.run(
        [sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    assert "{0: 0, 1: 0, 2: 0}" in first.stdout
    namespace: Dict[str, Any] = {}
    exec(compile(blocks[-1], "single_consumer.rst", "exec"), namespace)
    (name,) = [n for n in namespace if n.startswith("test_")]
    namespace[name](kafka_cluster, topic_factory)
