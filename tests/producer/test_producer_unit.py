"""Producer pieces that need no broker: settings, the batches' wire bytes,
and the errors produce() raises before anything is sent."""
import asyncio
import inspect
import warnings

import pytest

from kiel import compression
from kiel._aio import Tasks
from kiel.cluster import Cluster
from kiel.exc import (
    ClientClosedError,
    ConfigError,
    MessageSizeTooLargeError,
    SerializationError,
)
from kiel.producer import Producer, RecordMetadata
from kiel.producer.accumulator import ProducerBatch, RecordAccumulator
from kiel.producer.admission import Admission
from kiel.producer.outcomes import FailedRecord, FlushResult, Outcomes
from kiel.producer.routing import Router
from kiel.protocol.messages import MESSAGE_OVERHEAD, decode_message_set, encode_message_set
from kiel.structs import TopicPartition


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", None])
def test_batch_payload_matches_encode_message_set(codec):
    messages = [(None, b"v%d" % i) for i in range(50)] + [(b"k", b"keyed"), (b"", None)]
    producer = Producer("127.0.0.1:1", compression=codec)
    batch = ProducerBatch(TopicPartition("t", 0), 0.0, 1)
    batch.values = [value for _, value in messages]
    batch.keys = [key for key, _ in messages]
    payload = batch.encode(producer.codec)
    assert payload == encode_message_set(messages, compression.codec_id_for(codec or "none"))
    assert batch.encode(producer.codec) is payload  # encoded once, retries resend it
    decoded = decode_message_set(payload)
    assert [(r.key, r.value) for r in decoded.records] == messages


def test_gzip_level_default_and_setting():
    assert Producer("h", compression="gzip").codec.level == 6
    assert Producer("h", compression="gzip", gzip_level=9).codec.level == 9
    with pytest.raises(ConfigError):
        Producer("h", compression="gzip", gzip_level=10)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"required_acks": 2},
        {"required_acks": True},
        {"compression": "zstd"},
        {"compression": 1},
        {"batch_size": 0},
        {"max_pending_bytes": -1},
        {"max_message_size": 1.5},
        {"linger_ms": -1},
        {"linger": -0.5},
        {"linger": "5"},
        {"linger": 0.005, "linger_ms": 5},
        {"buffer_timeout": -0.1},
        {"partitioner": "murmur2"},
        {"serializer": 42},
        {"ack_timeout": 40},  # not shorter than request_timeout (30)
        {"request_timeout": 0},
    ],
)
def test_bad_settings_raise_config_error(kwargs):
    with pytest.raises(ConfigError):
        Producer("127.0.0.1:9092", **kwargs)


def test_linger_is_seconds_and_linger_ms_a_deprecated_alias():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Producer("h").linger == 0.0
        assert Producer("h", linger=0.25).linger == 0.25
    with pytest.warns(DeprecationWarning, match="linger_ms is deprecated") as caught:
        assert Producer("h", linger_ms=5).linger == 0.005
    assert caught[0].filename == __file__  # points at the caller
    with pytest.raises(ConfigError, match="not both"):
        Producer("h", linger=0.005, linger_ms=5)


def test_ack_timeout_only_matters_with_acks_all():
    assert Producer("h", required_acks=1, ack_timeout=40).ack_timeout == 40
    assert Producer("h", request_timeout=8).ack_timeout == 4


def test_caller_errors_raise_before_anything_is_sent():
    async def main():
        p = Producer("127.0.0.1:1", max_message_size=100)
        with pytest.raises(SerializationError):
            p.produce("t", "str")
        with pytest.raises(SerializationError):
            p.produce("t", b"v", key=1)
        with pytest.raises(MessageSizeTooLargeError):
            p.produce("t", b"x" * 75)
        with pytest.raises(ConfigError):
            p.produce(b"t", b"v")
        assert p.pending_bytes == 0 and p.pending_records == 0
        await p.close()
        with pytest.raises(ClientClosedError):
            p.produce("t", b"v")
        with pytest.raises(ClientClosedError):
            await p.enqueue("t", b"v")

    asyncio.run(main())


def test_enqueue_takes_and_checks_exactly_produces_parameters():
    # enqueue() declares produce()'s parameters once (kiel._signature): the
    # signature shown by help() and Sphinx, and the checks at run time, are
    # produce()'s.
    produce = inspect.signature(Producer.produce)
    enqueue = inspect.signature(Producer.enqueue)
    assert list(enqueue.parameters.values()) == list(produce.parameters.values())
    assert inspect.iscoroutinefunction(Producer.enqueue)

    async def main():
        p = Producer("127.0.0.1:1", max_message_size=100)
        with pytest.raises(TypeError):
            await p.enqueue("t", b"v", None, None, [("h", b"")])  # headers are keyword-only
        with pytest.raises(TypeError):
            await p.enqueue("t", b"v", headrs=[])
        with pytest.raises(TypeError):
            await p.enqueue("t")
        with pytest.raises(SerializationError):
            await p.enqueue("t", b"v", key=1)
        with pytest.raises(MessageSizeTooLargeError):
            await p.enqueue("t", b"x" * 75)
        with pytest.raises(ConfigError):
            await p.enqueue("t", b"v", partition=-1)
        with pytest.raises(ConfigError):
            await p.enqueue("t", b"v", timestamp="yesterday")
        assert p.pending_bytes == 0 and p.pending_records == 0
        await p.close()

    asyncio.run(main())


def test_serializer_that_returns_text_is_refused():
    async def main():
        p = Producer("127.0.0.1:1", serializer=str)
        with pytest.raises(SerializationError, match="value must be bytes"):
            p.produce("t", 42)
        await p.close()

    asyncio.run(main())


def test_record_metadata_is_a_tuple():
    meta = RecordMetadata("t", 1, 42)
    topic, partition, offset = meta
    assert (topic, partition, offset) == ("t", 1, 42) == meta


def test_outcomes_fail_futures_and_report_a_bounded_list():
    async def main():
        loop = asyncio.get_running_loop()
        outcomes = Outcomes(max_listed=2)
        futures = [loop.create_future() for _ in range(4)]
        futures[3].cancel()  # its owner gave up: not failed, not reported
        errors = [ConfigError(f"e{i}") for i in range(4)]
        for future, error in zip(futures, errors):
            outcomes.fail(future, error, "t", 0)
        outcomes.delivered += 5
        report = outcomes.take()
        assert report.delivered == 5 and report.failed == 3
        assert report.failures == [FailedRecord("t", 0, futures[0], errors[0]),
                                   FailedRecord("t", 0, futures[1], errors[1])]
        assert futures[2].exception() is errors[2]  # counted, not listed: on its future
        assert outcomes.take() == FlushResult(0, 0, [])

    asyncio.run(main())


def test_a_wait_for_room_cancelled_as_room_frees_is_cancelled():
    # enqueue() waits here; its caller cancelled in the round that room frees
    # must see CancelledError, not go on to batch its record.
    async def main() -> None:
        cluster = Cluster(["127.0.0.1:1"])  # never connected: nothing here asks it
        accumulator = RecordAccumulator(
            batch_size=1000, linger=0.0, max_request_size=10**6,
            max_pending_bytes=MESSAGE_OVERHEAD + 1, codec=None,
            clock=lambda: asyncio.get_running_loop().time())
        tp = TopicPartition("t", 0)
        accumulator.append(accumulator.queue(tp), None, b"a", MESSAGE_OVERHEAD + 1, None)
        admission = Admission(
            cluster=cluster, router=Router(cluster, accumulator, None), accumulator=accumulator,
            place=lambda *_: None, expedite=lambda: None, tasks=Tasks(), buffer_timeout=30.0,
            outcomes=Outcomes())
        waiter = asyncio.ensure_future(admission.wait_for_room("t", MESSAGE_OVERHEAD + 1))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not waiter.done()
        [(_, [batch])] = accumulator.drain(0, lambda _: 1, force=True).ready[1]
        accumulator.complete(batch)
        admission.freed()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(main())


def test_keyed_routes_follow_a_new_snapshot_and_stay_bounded():
    # produce()'s keyed fast path remembers each key's partition per route;
    # a new metadata snapshot (say the topic grew) must forget them, and the
    # memory must stay bounded however many keys pass.
    from kiel.cluster import PartitionInfo
    from kiel.producer.partitioners import key_partition
    from kiel.producer.routing import KEY_CACHE_SIZE

    def snapshot(n):
        return {p: PartitionInfo("t", p, 1, (1,), (1,), 0) for p in range(n)}

    cluster = Cluster(["127.0.0.1:1"])  # never connected: the map is set here
    accumulator = RecordAccumulator(batch_size=1000, linger=0.0, max_request_size=10**6,
                                    max_pending_bytes=10**6, codec=None, clock=lambda: 0.0)
    router = Router(cluster, accumulator, None)
    keys = [b"user-%d" % i for i in range(50)]
    cluster.partitions["t"] = snapshot(3)
    route = router.route("t")
    assert [router.keyed(route, k).tp.partition for k in keys] == [
        key_partition(k, [0, 1, 2]) for k in keys]
    assert all(route.by_key[k].tp.partition == key_partition(k, [0, 1, 2]) for k in keys)
    cluster.partitions["t"] = snapshot(7)
    route = router.route("t")
    assert route.by_key == {}
    assert [router.keyed(route, k).tp.partition for k in keys] == [
        key_partition(k, list(range(7))) for k in keys]
    for i in range(3 * KEY_CACHE_SIZE):
        router.keyed(route, b"%d" % i)
        assert len(route.by_key) <= KEY_CACHE_SIZE
