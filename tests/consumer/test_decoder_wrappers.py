"""Compressed wrappers decoded a slice at a time (issue #11, the gzip target).

A wrapper (a magic 0/1 message whose value is a compressed message set) is
opened when the decoder reaches it and its inner messages are decoded as
they are asked for, like the top level's: the records alive at once stay
about ``want`` plus one slice, whatever the wrapper's size. The unit tests
drive the :class:`~kiel.consumer.decoder.Decoder` over real message sets
(pure logic, no I/O); the last ones consume through the embedded broker.
"""
import asyncio
import struct
import uuid
import zlib

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import kiel.compression
import kiel.consumer.decoder as decoder_module
from kiel.consumer import BEGINNING, SingleConsumer
from kiel.consumer.decoder import Decoder
from kiel.consumer.subscription import Status, Subscription
from kiel.exc import CompressionError, CorruptMessageError
from kiel.producer import Producer
from kiel.protocol.crc32c import crc32c
from kiel.protocol.messages import (
    CODEC_GZIP,
    assign_offsets,
    decode_message_set,
    encode_message_set,
)
from kiel.protocol.record_batch import RecordBatchBuilder, decode_record_batches
from kiel.structs import TopicPartition
from tests.conftest import run
from tests.support.single_consumer import consumer_for, produce_raw

TP = TopicPartition("t", 0)
VALUE = b"v" * 91
#: Bytes of one inner message with a 100-byte value (26 of overhead).
MESSAGE_BYTES = 126
#: The most records of the first slice, sized before the records' size is
#: known (64 KiB); later slices hold about what is still wanted.
FIRST_SLICE = decoder_module._DECODE_CHUNK // MESSAGE_BYTES + 1
#: The most records a slice holds past ``want`` once their size is known.
SMALL_SLICE = decoder_module._MIN_DECODE_CHUNK // MESSAGE_BYTES + 1


def gzip_log(count, per_wrapper, base=0):
    """``count`` 100-byte values in gzip wrappers of ``per_wrapper``, as a broker stores them."""
    out = []
    for start in range(0, count, per_wrapper):
        n = min(per_wrapper, count - start)
        values = [(None, b"%09d" % (start + i) + VALUE) for i in range(n)]
        data, _ = assign_offsets(encode_message_set(values, CODEC_GZIP), base + start)
        out.append(data)
    return b"".join(out)


def message(offset, value, magic=0, attrs=0, timestamp=0, crc=None):
    """One message by hand (magic 1 and bad CRCs: shapes the encoder never writes)."""
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body) if crc is None else crc) \
        + body


def wrap(inner, offset, magic=0, attrs=0, timestamp=0):
    return message(offset, kiel.compression.compress(CODEC_GZIP, inner), magic,
                   CODEC_GZIP | attrs, timestamp)


def state_of(position=0, **options):
    options.setdefault("max_fetch_size", 16 << 20)
    subscription = Subscription(4 << 20)
    subscription.assign(TP, position)
    return Decoder(**options), subscription


def take(decoder, subscription, want):
    """One round: decode about ``want`` records and hand them out."""
    st = subscription.state(TP)
    asyncio.run(decoder.decode(st, want))
    return subscription.drain({TP}, want).get(TP, [])


def take_all(decoder, subscription, want):
    out, rounds = [], 0
    while True:
        got = take(decoder, subscription, want)
        if not got:
            return out, rounds
        rounds += 1
        out.extend(got)


# --------------------------------------------------------------------------
# the protocol's cursor over one wrapper


def test_a_wrapper_opened_then_decoded_in_slices_equals_the_whole_decode():
    from kiel.protocol.messages import decode_wrapper_slice

    inner = b"".join(message(i, b"m%d" % i, magic=1, timestamp=1000 + i) for i in range(30))
    data = message(40, b"before") + wrap(inner, 70, magic=1, attrs=0x08, timestamp=5555)
    whole = decode_message_set(data, "t", 0, min_offset=50)
    head = decode_message_set(data, "t", 0, min_offset=50, open_compressed=True)
    wrapper = head.opened
    assert head.records == [] and head.next_offset == 41 and head.valid_bytes == len(data)
    assert wrapper is not None and (wrapper.offset, wrapper.delta) == (70, 41)
    sliced, position, last = [], 0, None
    while position < len(wrapper.data):
        part = decode_wrapper_slice(wrapper, position, 60, "t", 0, min_offset=50)
        assert len(part.records) <= 2  # 60 bytes: at most the message that crosses them
        sliced.extend(part.records)
        position, last = part.position, part.last_offset
    assert sliced == whole.records and last + 1 == whole.next_offset == 71
    # Relative offsets made absolute; the wrapper's log-append time on each.
    assert [r.offset for r in sliced] == list(range(50, 71))
    assert {(r.timestamp, r.timestamp_type) for r in sliced} == {(5555, 1)}


# --------------------------------------------------------------------------
# the decoder: bounded records, right offsets


def test_records_alive_stay_about_what_is_asked_whatever_the_wrapper_size():
    data = gzip_log(5000, 1000)
    decoder, subscription = state_of(decode_budget=0)
    Decoder.received(subscription.state(TP), data)
    records, rounds = take_all(decoder, subscription, 50)
    assert [r.offset for r in records] == list(range(5000))
    assert [r.value[:9] for r in records] == [b"%09d" % i for i in range(5000)]
    assert rounds >= 5000 // 50
    assert decoder.peak_slice <= FIRST_SLICE
    assert decoder.peak_records <= 50 + FIRST_SLICE < 1000
    assert subscription.state(TP).raw is None and subscription.state(TP).inner is None


def test_a_fetch_starting_inside_a_wrapper_hands_out_from_its_position():
    data = gzip_log(3000, 1000)
    decoder, subscription = state_of(position=1500)
    # A broker answers from the wrapper that holds the position.
    Decoder.received(subscription.state(TP), data[len(gzip_log(1000, 1000)):])
    records, _ = take_all(decoder, subscription, 50)
    assert [r.offset for r in records] == list(range(1500, 3000))
    assert subscription.position(TP) == 3000


def test_held_bytes_count_the_open_wrapper_and_every_way_out_drops_it():
    data = gzip_log(2000, 1000)
    for leave in ("seek", "unassign", "close", "error"):
        decoder, subscription = state_of()
        st = subscription.state(TP)
        Decoder.received(st, data)
        assert len(take(decoder, subscription, 50)) == 50
        assert st.inner is not None  # half handed out
        assert subscription.held()[0] == len(data) + len(st.inner.data)
        if leave == "seek":
            subscription.seek(TP, 10)
        elif leave == "unassign":
            subscription.unassign(TP)
        elif leave == "close":
            subscription.drop_fetched()
        else:
            st.buffer = []  # handed out; a failing deserializer then drops the rest
            decoder.deserializer = lambda value: 1 / 0
            asyncio.run(decoder.decode(st, 50))
            assert st.error is not None
        assert st.inner is None and subscription.held() == (0, 0)
        if leave == "seek":
            # Fetched again from the new position: the wrapper is opened anew.
            Decoder.received(st, data)
            assert [r.offset for r in take(decoder, subscription, 5)] == list(range(10, 15))


def test_a_pause_while_a_wrapper_is_half_handed_out_keeps_its_cursor():
    data = gzip_log(2000, 1000)
    decoder, subscription = state_of()
    Decoder.received(subscription.state(TP), data)
    got = take(decoder, subscription, 50)
    subscription.pause(TP)
    assert subscription.to_decode({TP}) == [] and take(decoder, subscription, 50) == []
    subscription.resume(TP)
    rest, _ = take_all(decoder, subscription, 50)
    assert [r.offset for r in got + rest] == list(range(2000))


def test_a_corrupt_inner_message_after_good_ones():
    """The records before it are handed out; its error is raised at its offset."""
    good = b"".join(message(i, b"good %d" % i) for i in range(300))
    bad = message(300, b"bad", crc=0)
    data = wrap(good + bad + message(301, b"never"), 301)
    decoder, subscription = state_of()
    st = subscription.state(TP)
    Decoder.received(st, data)
    records = []
    while st.error is None or st.buffer:
        records.extend(take(decoder, subscription, 50))
    assert [r.value for r in records] == [b"good %d" % i for i in range(300)]
    assert isinstance(st.error, CorruptMessageError) and st.error.offset == 300
    assert subscription.position(TP) == 300 and st.raw is None and st.inner is None


def test_a_bomb_is_refused_before_it_is_held():
    inner = message(0, b"\0" * 300_000) + message(1, b"\0" * 300_000)
    decoder, subscription = state_of(max_decoded=400_000)
    st = subscription.state(TP)
    Decoder.received(st, wrap(inner, 1))
    assert take(decoder, subscription, 50) == []
    assert isinstance(st.error, CompressionError) and st.inner is None and st.raw is None


def test_nested_wrappers_keep_decoding_whole_and_their_offset_checks():
    good = message(7, b"seven") + message(8, b"eight")
    data = wrap(message(6, b"six") + wrap(good, 8), 8) + message(9, b"nine")
    decoder, subscription = state_of()
    Decoder.received(subscription.state(TP), data)
    records, _ = take_all(decoder, subscription, 1)
    assert [r.offset for r in records] == [6, 7, 8, 9]
    # Offsets going backwards in a nested wrapper, across two rounds.
    backwards = wrap(message(6, b"six") + wrap(message(0, b"zero"), 6), 6)
    decoder, subscription = state_of()
    st = subscription.state(TP)
    Decoder.received(st, backwards)
    assert [r.offset for r in take(decoder, subscription, 1)] == [6]
    assert take(decoder, subscription, 1) == []
    assert isinstance(st.error, CorruptMessageError) and "backwards" in str(st.error)


# --------------------------------------------------------------------------
# through the embedded broker


def fill(cluster, topic, count, per_wrapper=1000):
    values = [(None, b"%09d" % i + VALUE) for i in range(count)]
    produce_raw(cluster, topic, 0, values, codec=CODEC_GZIP, batch=per_wrapper)


@pytest.mark.zookeeper
def test_consuming_gzip_wrappers_of_1000_records_50_at_a_time(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    fill(kafka_cluster, topic, 4000)

    async def main():
        async with consumer_for(kafka_cluster, max_records=50,
                                max_bytes=1 << 20) as consumer:
            got = []
            while len(got) < 4000:
                records = await consumer.consume(topic, start=BEGINNING)
                assert len(records) <= 50
                got.extend(records)
            return got, consumer.decoder

    got, decoder = run(main())
    assert [r.offset for r in got] == list(range(4000))
    assert sorted(r.value[:9] for r in got) == [b"%09d" % i for i in range(4000)]
    # Counted, never timed: one call materialises what was asked plus one
    # slice, never a wrapper's 1,000 records.
    assert decoder.peak_slice <= FIRST_SLICE
    assert decoder.peak_records <= 50 + FIRST_SLICE < 1000


@pytest.mark.zookeeper
def test_seek_into_and_pause_inside_a_wrapper_through_the_broker(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    fill(kafka_cluster, topic, 3000)

    async def main():
        async with consumer_for(kafka_cluster, max_records=50) as consumer:
            # A start inside the second wrapper.
            first = await consumer.consume(topic, start={0: 1234})
            assert [r.offset for r in first] == list(range(1234, 1234 + len(first)))
            assert 0 < len(first) <= 50
            st = consumer.subscription.state(TopicPartition(topic, 0))
            assert st.inner is not None  # half handed out
            consumer.pause(topic, 0)
            assert st.status is Status.PAUSED
            assert await consumer.consume(topic) == []
            consumer.resume(topic, 0)
            rest = []
            while len(first) + len(rest) < 3000 - 1234:
                rest.extend(await consumer.consume(topic))
            assert [r.offset for r in first + rest] == list(range(1234, 3000))
            # Seek back into the middle of a wrapper half handed out.
            consumer.seek(topic, 0, 500)
            again = await consumer.consume(topic)
            assert again[0].offset == 500 and again[0].value[:9] == b"000000500"

    run(main())


def test_a_deserializer_failing_on_the_first_record_of_a_round_loses_nothing():
    """The failed record and those after it are fetched again (or sought
    past), never skipped: the rest of the raw answer goes with the error."""
    first_slice = decoder_module._DECODE_CHUNK // MESSAGE_BYTES  # records of the first slice
    values = [(None, b"%09d" % i + VALUE) for i in range(2 * first_slice)]
    bad = first_slice  # the first record of the second decode
    values[bad] = (None, b"bad" + VALUE)
    data, _ = assign_offsets(encode_message_set(values), 0)
    decoder, subscription = state_of(deserializer=lambda v: int(v[:9]))
    st = subscription.state(TP)
    Decoder.received(st, data)
    records = []
    while st.error is None or st.buffer:
        records.extend(take(decoder, subscription, 50))
    assert [r.offset for r in records] == list(range(bad))
    assert st.error.offset == bad and subscription.position(TP) == bad
    assert st.raw is None  # fetched again from the position: nothing skipped
    st.error = None  # the application took the error and calls again
    assert take(decoder, subscription, 50) == []  # not the records past the failed slice


# --------------------------------------------------------------------------
# compressed record batches (magic 2)


def gzip_batches(count, per_batch, base=0):
    """``count`` records (100-byte values, a header on every 7th) in gzip
    batches of ``per_batch``, base offsets assigned as a broker does."""
    out = []
    for start in range(0, count, per_batch):
        builder = RecordBatchBuilder(CODEC_GZIP)
        for i in range(start, min(count, start + per_batch)):
            builder.append(b"k%d" % i if i % 3 else None, b"%09d" % i + VALUE,
                           timestamp=1_000 + i, headers=[("h", b"%d" % i)] if i % 7 == 0 else [])
        out.append(struct.pack(">q", base + start) + builder.build()[8:])
    return b"".join(out)


def test_a_compressed_batch_is_decoded_a_slice_at_a_time():
    data = gzip_batches(5000, 1000)
    whole = decode_record_batches(data, "t", 0)
    decoder, subscription = state_of(decode_budget=0)
    Decoder.received(subscription.state(TP), data, record_batches=True)
    records, rounds = take_all(decoder, subscription, 50)
    assert records == whole.records  # keys, values, timestamps, headers
    assert [r.offset for r in records] == list(range(5000))
    assert rounds >= 5000 // 50
    first_slice = decoder_module._DECODE_CHUNK // 100 + 1  # records take 100 bytes or more
    assert decoder.peak_records <= 50 + first_slice < 1000


def test_a_fetch_starting_inside_a_compressed_batch_and_a_seek_while_it_is_open():
    data = gzip_batches(3000, 1000)
    decoder, subscription = state_of(position=1500)
    st = subscription.state(TP)
    Decoder.received(st, data, record_batches=True)
    got = take(decoder, subscription, 50)
    assert [r.offset for r in got] == list(range(1500, 1550)) and st.inner is not None
    assert subscription.opened() == len(st.inner.data) > 0
    subscription.seek(TP, 2990)
    assert st.inner is None and st.raw is None
    Decoder.received(st, data, record_batches=True)
    records, _ = take_all(decoder, subscription, 50)
    assert [r.offset for r in records] == list(range(2990, 3000))


def test_a_compressed_batch_whose_records_fall_short_of_its_count():
    """The records it holds are handed out; the error comes at the batch."""
    batch = bytearray(gzip_batches(300, 300))
    struct.pack_into(">i", batch, 57, 301)  # one record more than it holds
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    decoder, subscription = state_of()
    st = subscription.state(TP)
    Decoder.received(st, bytes(batch), record_batches=True)
    records = []
    while st.error is None or st.buffer:
        records.extend(take(decoder, subscription, 50))
    assert [r.offset for r in records] == list(range(300))
    assert isinstance(st.error, CorruptMessageError) and st.error.offset == 0
    assert st.raw is None and st.inner is None


@pytest.mark.interop
def test_consuming_large_gzip_batches_from_tansu_50_at_a_time(tansu_broker):
    """A current broker (Tansu) serves kiel's gzip record batches of 1,500
    records: handed out 50 at a time, a batch never comes to life whole."""
    topic = tansu_broker.create_topic(f"batches-{uuid.uuid4().hex[:8]}", 1)
    total = 3000

    async def main():
        async with Producer(tansu_broker.bootstrap, compression="gzip", linger=0.5,
                            batch_size=1 << 20) as producer:
            for start in (0, 1500):  # two batches of 1,500 records
                await asyncio.gather(*(producer.produce(topic, b"%09d" % i + VALUE, partition=0)
                                       for i in range(start, start + 1500)))
        async with SingleConsumer(tansu_broker.bootstrap, max_records=50,
                                  max_wait_time=0.2) as consumer:
            got, opened = [], 0
            while len(got) < total:
                records = await consumer.consume(topic, start=BEGINNING)
                assert len(records) <= 50
                got.extend(records)
                opened = max(opened, consumer.subscription.opened())
            return got, opened, consumer.decoder

    got, opened, decoder = run(main())
    assert [r.offset for r in got] == list(range(total))
    assert [r.value[:9] for r in got] == [b"%09d" % i for i in range(total)]
    assert opened >= 1000 * 100  # a batch of more than 1,000 records was open
    first_slice = decoder_module._DECODE_CHUNK // 100 + 1  # records take 100 bytes or more
    assert decoder.peak_records <= 50 + first_slice < 1000


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    groups=st.lists(st.tuples(st.integers(1, 60), st.booleans()), min_size=1, max_size=8),
    position=st.integers(0, 300),
    want=st.integers(1, 40),
    batches=st.booleans(),
)
def test_handed_out_in_rounds_equals_the_whole_decode(groups, position, want, batches):
    """Wrappers (or batches) and plain entries, a fetch position anywhere,
    any ``want``: the records handed out are those of decoding it whole."""
    pieces, base = [], 0
    for size, compressed in groups:
        if batches:
            builder = RecordBatchBuilder(CODEC_GZIP if compressed else 0)
            for i in range(size):
                builder.append(None, b"%d" % (base + i) * (i % 5), timestamp=base + i)
            pieces.append(struct.pack(">q", base) + builder.build()[8:])
        else:
            values = [(None, b"%d" % (base + i) * (i % 5)) for i in range(size)]
            pieces.append(assign_offsets(
                encode_message_set(values, CODEC_GZIP if compressed else 0), base)[0])
        base += size
        if base <= position:
            pieces = []  # a broker answers from the entry that holds the position
    assume(pieces)
    data = b"".join(pieces)
    decode_whole = decode_record_batches if batches else decode_message_set
    expected = decode_whole(data, "t", 0, min_offset=position).records
    decoder, subscription = state_of(position=position, decode_budget=0)
    Decoder.received(subscription.state(TP), data, record_batches=batches)
    records, _ = take_all(decoder, subscription, want)
    assert records == expected
    assert subscription.state(TP).error is None


@pytest.mark.parametrize("codec", [0, CODEC_GZIP], ids=["plain", "gzip"])
def test_record_offsets_that_do_not_increase_after_good_ones(codec):
    """Issue #23, defect 4: the records before the first bad offset are
    handed out (those of a good batch before it too); the error comes at
    the bad record, and the position never jumps."""
    from tests.support.record_batch import batch_with_deltas


    good = gzip_batches(20, 20)  # offsets 0..19, in a batch of its own
    deltas = list(range(300)) + [299, 300, 301]  # the 301st repeats the 300th
    data = good + batch_with_deltas(deltas, 301, 20, codec) + gzip_batches(5, 5, base=322)
    decoder, subscription = state_of()
    st = subscription.state(TP)
    Decoder.received(st, data, record_batches=True)
    records = []
    while st.error is None or st.buffer:
        got = take(decoder, subscription, 50)
        assert got or st.error is not None
        records.extend(got)
    assert [r.offset for r in records] == list(range(320))
    assert isinstance(st.error, CorruptMessageError) and "do not increase" in str(st.error)
    assert st.error.offset == 320
    assert subscription.position(TP) == 320 and st.raw is None and st.inner is None


def test_a_large_batch_inflates_off_the_loop_and_a_bomb_after_good_records_waits():
    """Issue #23, defect 6: a batch past the inline bound inflates in kiel's
    decompression thread, its records as if decoded inline; one that would
    pass max_decoded fails there, after the records before it are handed out."""
    big = gzip_batches(30_000, 30_000, base=10)  # about 3.3 MB once inflated
    builder = RecordBatchBuilder()
    for i in range(10):
        builder.append(None, b"before %d" % i, timestamp=1)
    before = struct.pack(">q", 0) + builder.build()[8:]
    decoder, subscription = state_of(decode_budget=0)
    st = subscription.state(TP)
    Decoder.received(st, before + big, record_batches=True)
    records, _ = take_all(decoder, subscription, 1000)
    assert [r.offset for r in records] == list(range(30_010))
    assert records[10:] == decode_record_batches(big, "t", 0).records
    # The same, with too little max_decoded for the large batch.
    decoder, subscription = state_of(decode_budget=0, max_decoded=2_000_000)
    st = subscription.state(TP)
    Decoder.received(st, before + big, record_batches=True)
    got = take(decoder, subscription, 1000)
    assert [r.value for r in got] == [b"before %d" % i for i in range(10)]
    assert take(decoder, subscription, 1000) == []
    assert isinstance(st.error, CompressionError) and st.error.offset == 10
    assert st.inner is None and subscription.position(TP) == 10


@pytest.mark.parametrize("magic", [0, 1])
def test_a_wrapper_too_large_to_inflate_inline_is_opened_pending(magic):
    """Issue #23, defect 6: past ``inline_decoded`` a wrapper comes back
    still compressed; decompressed elsewhere, it slices as if opened inline."""
    from kiel.protocol.messages import decode_wrapper_slice, open_message_set

    inner = b"".join(message(i if magic else 40 + i, b"%06d" % i + b"v" * 500, magic=magic,
                             timestamp=7) for i in range(3000))
    data = message(39, b"before") + wrap(inner, 3039, magic=magic)
    whole = decode_message_set(data, "t", 0)
    head = open_message_set(data, "t", 0, inline_decoded=1 << 16)
    opened = head.opened
    assert [r.value for r in head.records] == [b"before"]
    assert opened is not None and opened.pending and opened.data == b""
    opened.inflated(opened.decompress())  # what the decoder runs in its thread
    assert not opened.pending and opened.budget[0] == 128 * 1024 * 1024 - len(inner)
    part = decode_wrapper_slice(opened, 0, 1 << 30, "t", 0)
    assert part.records == whole.records[1:]
    assert [r.offset for r in part.records] == list(range(40, 3040))
    # A wrapper past max_decoded fails off the loop, with its offset.
    head = open_message_set(data, "t", 0, max_decoded=1 << 20, inline_decoded=1 << 16)
    with pytest.raises(CompressionError) as info:
        head.opened.decompress()
    assert info.value.offset == 3039
