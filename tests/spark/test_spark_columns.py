"""kiel.spark.columns: fetch answers straight into Arrow columns (pure: no
Spark session, no cluster).

The columns must be exactly what kiel's own decoders and ``to_arrow`` make
of the same bytes (plain messages, keys, nulls, compressed wrappers, magic
1, record batches, an answer the broker cut), and every check must hold: a
flipped bit, inconsistent lengths or offsets that go back raise kiel's typed
errors, never rows.
"""
import struct
import zlib

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiel.compression import codec_id_for
from kiel.exc import CorruptMessageError, ProtocolError
from kiel.protocol.crc32c import crc32c
from kiel.protocol.messages import MessageSetBuilder, decode_message_set, encode_message_set
from kiel.protocol.record_batch import (
    CODEC_GZIP,
    LOG_APPEND_TIME,
    RecordBatchBuilder,
    decode_record_batches,
)
from kiel.spark.columns import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_WITH_HEADERS,
    _batch_run,
    _Rows,
    _uniform_records,
    _uniform_run,
    coalesce,
    decode_answer,
    to_arrow,
)
from kiel.structs import Record
from tests.support.messages import kp_encode

TOPIC = "t"


def message_set(pairs, first=0, codec=None):
    """A message set of ``(key, value)`` pairs at offsets ``first``, ``first + 1``..."""
    data = encode_message_set(pairs, codec=codec) if codec else encode_message_set(pairs)
    return renumber(data, first)


def renumber(data, first):
    """``data`` with its top-level offsets set from ``first`` on (what a broker does)."""
    out = bytearray(data)
    pos, offset = 0, first
    while pos + 12 <= len(out):
        size = struct.unpack_from(">i", out, pos + 8)[0]
        struct.pack_into(">q", out, pos, offset)
        pos += 12 + size
        offset += 1
    return bytes(out)


def rows(decoded, headers=False):
    """The rows of a Decoded, as dicts of columns."""
    out = []
    for batch in decoded.batches:
        assert batch.schema == (ARROW_SCHEMA_WITH_HEADERS if headers else ARROW_SCHEMA)
        out.extend(batch.to_pylist())
    return out


def reference(data, min_offset=0, end=2**62, headers=False):
    """What kiel's decoder and to_arrow make of the same bytes."""
    records = [r for r in decode_message_set(data, TOPIC, 3, min_offset=min_offset).records
               if r.offset < end]
    return to_arrow(records, headers).to_pylist() if records else []


PAIRS = [(None, b"v%d" % i) for i in range(50)] + \
    [(b"key-%d" % i, b"w" * (i * 7)) for i in range(50)] + \
    [(b"k", None), (None, None), (b"", b""), (None, b"last")]


def test_plain_messages_match_kiels_decoder():
    data = message_set(PAIRS, first=100)
    got = decode_answer(data, TOPIC, 3, 100, 2**62, False, False)
    assert rows(got) == reference(data)
    assert (got.rows, got.next_offset, got.valid_bytes, got.needed) == \
        (len(PAIRS), 100 + len(PAIRS), len(data), None)
    with_headers = decode_answer(data, TOPIC, 3, 100, 2**62, False, True)
    assert rows(with_headers, True) == reference(data, headers=True)


def test_the_range_cuts_both_ends_and_a_cut_answer_ends_early():
    data = message_set(PAIRS, first=0)
    got = decode_answer(data, TOPIC, 3, 10, 20, False, False)
    assert [r["offset"] for r in rows(got)] == list(range(10, 20))
    assert got.next_offset == 20
    # The broker cut the answer inside message 31: 31 messages, the rest next time.
    bounds = [b.end for b in __import__("kiel.protocol.messages", fromlist=["x"])
              .iter_message_boundaries(data)]
    cut = data[:bounds[30] + 7]
    got = decode_answer(cut, TOPIC, 3, 0, 2**62, False, False)
    assert [r["offset"] for r in rows(got)] == list(range(31)) and got.next_offset == 31
    # Not even one message: the size it needs.
    got = decode_answer(data[:bounds[0] - 1], TOPIC, 3, 0, 2**62, False, False)
    assert (got.rows, got.needed) == (0, bounds[0])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4"])
def test_compressed_wrappers_and_what_follows_them(codec):
    plain = message_set([(None, b"a%d" % i) for i in range(5)], first=0)
    builder = MessageSetBuilder(codec=codec_id_for(codec), base_offset=5)
    for i in range(5):
        builder.append(None, b"z%d" % i)
    wrapped = builder.build()
    data = plain + renumber(wrapped, 9) + message_set([(None, b"b")], first=10)
    got = decode_answer(data, TOPIC, 3, 0, 2**62, False, False)
    assert rows(got) == reference(data)
    assert got.next_offset == reference(data)[-1]["offset"] + 1


def test_magic_1_messages_keep_their_timestamps():
    # kafka-python writes magic 1 (kiel's builder writes magic 0 only), after plain magic 0.
    data = message_set([(None, b"old")], first=0) + kp_encode(
        [(b"k", b"v%d" % i) for i in range(3)], magic=1, offsets=[1, 2, 3],
        timestamps=[1_700_000_000_000 + i for i in range(3)])
    got = decode_answer(data, TOPIC, 3, 0, 2**62, False, False)
    assert rows(got) == reference(data)
    assert [r["timestampType"] for r in rows(got)] == [-1, 0, 0, 0]


def test_record_batches():
    builder = RecordBatchBuilder(base_offset=40)
    for i in range(6):
        builder.append(b"k%d" % i, b"v%d" % i, timestamp=1_700_000_000_000 + i,
                       headers=[("h", b"%d" % i)] if i % 2 else [])
    data = builder.build()
    got = decode_answer(data, TOPIC, 3, 42, 45, True, True)
    records = decode_record_batches(data, TOPIC, 3, min_offset=42).records
    assert rows(got, True) == to_arrow([r for r in records if r.offset < 45], True).to_pylist()
    assert got.next_offset == 46


def test_a_flipped_bit_is_a_crc_error_never_a_row():
    data = bytearray(message_set(PAIRS, first=0))
    data[len(data) // 2] ^= 0x10
    with pytest.raises(CorruptMessageError, match="CRC"):
        decode_answer(bytes(data), TOPIC, 3, 0, 2**62, False, False)


def test_inconsistent_lengths_are_refused():
    # A value length one short of the message: the CRC is made right again,
    # so only the length check can find it.
    good = message_set([(None, b"abcdef")], first=0)
    bad = bytearray(good)
    struct.pack_into(">i", bad, 22, 5)
    struct.pack_into(">I", bad, 12, zlib.crc32(bytes(bad[16:])))
    with pytest.raises(CorruptMessageError):
        decode_answer(bytes(bad), TOPIC, 3, 0, 2**62, False, False)


def test_offsets_that_go_back_are_refused():
    data = message_set(PAIRS[:3], first=5) + message_set(PAIRS[:3], first=6)
    with pytest.raises(CorruptMessageError, match="do not increase"):
        decode_answer(data, TOPIC, 3, 0, 2**62, False, False)


# ----------------------------------------------------------------------
# uniform runs: messages of one layout, read by strided slices


UNIFORM = [(None, b"u" * 100)] * 200
KEYED = [(b"key-%04d" % i, b"value-%06d" % i) for i in range(200)]


@pytest.mark.parametrize("pairs", [UNIFORM, KEYED], ids=["null-keys", "fixed-keys"])
def test_uniform_messages_match_kiels_decoder(pairs):
    data = message_set(pairs, first=1000)
    assert _uniform_run(data, TOPIC, 3, 1000, 2**62, False)[1] == 200  # the strided path
    for min_offset, end in ((1000, 2**62), (1013, 1150), (1199, 1200), (900, 1001)):
        got = decode_answer(data, TOPIC, 3, min_offset, end, False, False)
        assert rows(got) == reference(data, min_offset, end), (min_offset, end)
    cut = data[:len(data) - 30]  # the broker cut the last message
    got = decode_answer(cut, TOPIC, 3, 1000, 2**62, False, True)
    assert rows(got, True) == reference(cut, headers=True)
    assert (got.rows, got.next_offset) == (199, 1199)


def test_a_uniform_run_then_other_messages():
    data = message_set(UNIFORM + PAIRS, first=0)
    got = decode_answer(data, TOPIC, 3, 0, 2**62, False, False)
    assert rows(got) == reference(data)
    assert got.next_offset == len(UNIFORM) + len(PAIRS)


def test_a_uniform_run_with_gaps_in_its_offsets():
    # Offsets need not be consecutive (compaction): read message by message.
    data = message_set(UNIFORM[:50], first=0) + message_set(UNIFORM[:50], first=70)
    got = decode_answer(data, TOPIC, 3, 0, 2**62, False, False)
    assert [r["offset"] for r in rows(got)] == list(range(50)) + list(range(70, 120))


@pytest.mark.parametrize("where", [30, 5000, 20_000])
def test_a_flipped_bit_in_a_uniform_run_is_a_crc_error(where):
    data = bytearray(message_set(UNIFORM, first=0))
    data[where] ^= 0x01
    with pytest.raises(CorruptMessageError):
        decode_answer(bytes(data), TOPIC, 3, 0, 2**62, False, False)


def test_a_uniform_run_that_goes_back_is_refused():
    data = message_set(UNIFORM[:40], first=10) + message_set(UNIFORM[:40], first=20)
    with pytest.raises(CorruptMessageError, match="do not increase"):
        decode_answer(data, TOPIC, 3, 0, 2**62, False, False)


# ----------------------------------------------------------------------
# record batches (magic 2, Fetch v4): the batch run reads plain ones into Arrow


def record_batch(pairs, base_offset, stamp=1_700_000_000_000, **options):
    """One uncompressed batch of ``(key, value)`` pairs, a millisecond apart."""
    builder = RecordBatchBuilder(base_offset=base_offset, **options)
    for i, (key, value) in enumerate(pairs):
        builder.append(key, value, timestamp=stamp + i)
    return builder.build()


def batches(pairs, first=0, per_batch=130, **options):
    """``pairs`` in consecutive batches of ``per_batch`` records (a producer's 16 KiB)."""
    return b"".join(record_batch(pairs[i:i + per_batch], first + i, **options)
                    for i in range(0, len(pairs), per_batch))


def batch_reference(data, min_offset=0, end=2**62, headers=False):
    records = [r for r in decode_record_batches(data, TOPIC, 3, min_offset=min_offset).records
               if r.offset < end]
    return to_arrow(records, headers).to_pylist() if records else []


def reseal(data, pos=0):
    """``data`` with the CRC-32C of the batch at ``pos`` made right again."""
    out = bytearray(data)
    end = pos + 12 + struct.unpack_from(">i", out, pos + 8)[0]
    struct.pack_into(">I", out, pos + 17, crc32c(bytes(out[pos + 21:end])))
    return bytes(out)


BATCH_PAIRS = [(None, b"u" * 100)] * 700 + PAIRS + [(b"k%d" % i, None) for i in range(70)]


def test_plain_record_batches_are_read_by_the_batch_run():
    data = batches(BATCH_PAIRS, first=500)
    pos, count, next_offset, _ = _batch_run(data, TOPIC, 3, 500, 2**62, False)
    assert (pos, count, next_offset) == (len(data), len(BATCH_PAIRS), 500 + len(BATCH_PAIRS))
    for min_offset, end in ((500, 2**62), (613, 1150), (1199, 1200), (400, 501), (640, 641)):
        for headers in (False, True):
            got = decode_answer(data, TOPIC, 3, min_offset, end, True, headers)
            assert rows(got, headers) == batch_reference(data, min_offset, end, headers), \
                (min_offset, end)
    got = decode_answer(data, TOPIC, 3, 500, 2**62, True, False)
    assert (got.rows, got.next_offset, got.valid_bytes, got.needed) == \
        (len(BATCH_PAIRS), 500 + len(BATCH_PAIRS), len(data), None)
    assert rows(got)[0]["timestamp"] is not None and rows(got)[0]["timestampType"] == 0


def test_record_batches_with_log_append_time_and_negative_timestamps():
    data = (record_batch(PAIRS, 0, timestamp_type=LOG_APPEND_TIME)
            + record_batch(PAIRS, len(PAIRS), stamp=-1)
            + record_batch(PAIRS[:3], 2 * len(PAIRS), stamp=-3))
    assert _batch_run(data, TOPIC, 3, 0, 2**62, False)[1] == 2 * len(PAIRS) + 3
    got = decode_answer(data, TOPIC, 3, 0, 2**62, True, False)
    assert rows(got) == batch_reference(data)
    assert {r["timestampType"] for r in rows(got)} == {1, -1, 0}


def test_other_batches_go_to_kiels_decoder_and_the_run_goes_on_before_them():
    builder = RecordBatchBuilder(base_offset=200)
    builder.append(b"k", b"with headers", timestamp=5, headers=[("h", b"1"), ("n", None)])
    builder.append(None, b"none", timestamp=6)
    with_headers = builder.build()
    compressed = record_batch(PAIRS[:20], 201, codec=CODEC_GZIP)
    data = batches(BATCH_PAIRS[:200]) + with_headers + compressed + record_batch(PAIRS, 221)
    assert _batch_run(data, TOPIC, 3, 0, 2**62, False)[:3] == \
        (len(batches(BATCH_PAIRS[:200])), 200, 200)
    for headers in (False, True):
        got = decode_answer(data, TOPIC, 3, 0, 2**62, True, headers)
        assert rows(got, headers) == batch_reference(data, headers=headers)
        assert got.next_offset == 221 + len(PAIRS)
    old = message_set(PAIRS[:5], first=221 + len(PAIRS))  # an old segment after new ones
    got = decode_answer(data + old, TOPIC, 3, 0, 2**62, True, False)
    assert rows(got) == batch_reference(data + old)


def test_a_cut_answer_of_record_batches():
    data = batches(BATCH_PAIRS, per_batch=100)
    cut = data[:len(data) - 50]
    got = decode_answer(cut, TOPIC, 3, 0, 2**62, True, False)
    assert rows(got) == batch_reference(cut)
    last = len(BATCH_PAIRS) // 100 * 100
    assert (got.rows, got.next_offset, got.needed) == (last, last, None)
    first = record_batch(BATCH_PAIRS[:100], 0)
    got = decode_answer(first[:-1], TOPIC, 3, 0, 2**62, True, False)
    assert (got.rows, got.next_offset, got.needed) == (0, None, len(first))


def test_a_timestamp_past_sparks_is_a_typed_error_in_both_paths():
    # 2**62 ms is past the int64 of microseconds Spark's timestamps are.
    data = record_batch(PAIRS[:3], 0, stamp=2**62)
    with pytest.raises(CorruptMessageError, match="does not fit Spark's timestamp"):
        decode_answer(data, TOPIC, 3, 0, 2**62, True, False)
    with pytest.raises(CorruptMessageError, match="does not fit Spark's timestamp"):
        to_arrow(decode_record_batches(data, TOPIC, 3).records)


def test_a_gap_after_the_range_ends_it():
    data = record_batch(PAIRS[:10], 0) + record_batch(PAIRS[:10], 50)
    got = decode_answer(data, TOPIC, 3, 0, 30, True, False)
    assert [r["offset"] for r in rows(got)] == list(range(10))
    assert got.next_offset >= 30


def test_a_batch_past_the_range_says_where_it_ends():
    # read_range compares the offset after the answer's last record with the
    # answer's high watermark: a batch past the range counts to its last
    # offset, so a base offset corrupted up to the high watermark shows too.
    data = record_batch(PAIRS[:10], 0) + record_batch(PAIRS[:10], 50)
    assert decode_answer(data, TOPIC, 3, 0, 30, True, False).next_offset == 60


@pytest.mark.parametrize("where", [30, 2000, 40_000])
def test_a_flipped_bit_in_a_record_batch_is_a_crc_error(where):
    data = bytearray(batches(BATCH_PAIRS))
    data[where] ^= 0x01
    with pytest.raises(CorruptMessageError, match="CRC"):
        decode_answer(bytes(data), TOPIC, 3, 0, 2**62, True, False)


def test_bad_records_in_a_resealed_batch_are_refused():
    good = batches(BATCH_PAIRS[:100])
    second = record_batch([(None, b"abcdef")] * 3, 100)
    # The second record's value length one short (zig-zag 6 -> 5, the byte 12 -> 10):
    # the record no longer adds up (its last byte is read as a header count). The CRC
    # is right again.
    at = second.index(b"\x0cabcdef", 61 + 10)
    short = reseal(second[:at] + b"\x0a" + second[at + 1:])
    with pytest.raises(CorruptMessageError, match="does not fit the record"):
        decode_answer(good + short, TOPIC, 3, 0, 2**62, True, False)
    # Offset deltas that go back (the third record's delta 2 -> 0, zig-zag byte 4 -> 0).
    third = second.rindex(b"\x01\x0cabcdef") - 1
    assert second[third] == 4
    back = reseal(second[:third] + b"\x00" + second[third + 1:])
    with pytest.raises(CorruptMessageError, match="do not increase"):
        decode_answer(good + back, TOPIC, 3, 0, 2**62, True, False)
    # A record count the records do not have.
    fewer = bytearray(second)
    struct.pack_into(">i", fewer, 57, 4)
    with pytest.raises(CorruptMessageError):
        decode_answer(good + reseal(bytes(fewer)), TOPIC, 3, 0, 2**62, True, False)
    # The rows before the bad batch were read by the run: none comes out of a bad answer.
    assert _batch_run(good + short, TOPIC, 3, 0, 2**62, False)[1] == 100


def uniform_batch(count, base, key=None, value=b"u" * 100, spread=1):
    """One batch of ``count`` records of one layout (timestamps ``spread`` ms apart at most)."""
    builder = RecordBatchBuilder(base_offset=base)
    for i in range(count):
        builder.append(key, value, timestamp=1_700_000_000_000 + i % spread)
    return builder.build()


@pytest.mark.parametrize("count, key, value, spread", [
    (130, None, b"u" * 100, 1),  # a producer's 16 KiB batch, within one millisecond
    (130, b"key-0001", b"u" * 100, 50),  # a fixed-size key, timestamps apart
    (9000, None, b"", 1),  # past 8192: two-byte then three-byte offset deltas
    (70, None, None, 1),  # null values
])
def test_records_of_one_layout_are_read_by_strided_slices(count, key, value, spread):
    data = uniform_batch(count, 1000, key, value, spread)
    place = (1000, count - 1, 1_700_000_000_000, None, 0, 2**62)
    # The strided path reads them all (up to 8192; then record by record).
    assert _uniform_records(data, _Rows(), 61, len(data), count, place)[1] == min(count, 8192)
    assert _batch_run(data, TOPIC, 3, 0, 2**62, False)[1] == count
    for min_offset, end in ((1000, 2**62), (1013, 1070), (1063, 1065), (1069, 1070),
                            (900, 1001), (1100, 9500)):
        got = decode_answer(data, TOPIC, 3, min_offset, end, True, False)
        assert rows(got) == batch_reference(data, min_offset, end), (min_offset, end)


def test_a_record_that_breaks_the_layout_is_read_by_the_loop_or_refused():
    data = uniform_batch(130, 0)
    # Record 100's timestamp delta made two bytes long (a record of its own length).
    builder = RecordBatchBuilder(base_offset=0)
    for i in range(130):
        builder.append(None, b"u" * 100, timestamp=1_700_000_000_000 + (500 if i == 100 else 0))
    odd = builder.build()
    assert _uniform_records(odd, _Rows(), 61, len(odd), 130, (0, 129, 0, None, 0, 2**62))[1] \
        == 64
    got = decode_answer(odd, TOPIC, 3, 0, 2**62, True, False)
    assert rows(got) == batch_reference(odd) and got.rows == 130
    # Record 100's header count set to one (no header follows), the CRC right again.
    # Records take 109 bytes (2 + 107), from record 64 on 110 (a two-byte offset delta).
    assert len(data) == 61 + 64 * 109 + 66 * 110
    at = 61 + 64 * 109 + 37 * 110 - 1
    assert data[at] == 0 and data[at + 1:at + 3] == b"\xd8\x01"  # the next one's length
    bad = reseal(data[:at] + b"\x02" + data[at + 1:])
    with pytest.raises(CorruptMessageError):
        decode_answer(bad, TOPIC, 3, 0, 2**62, True, False)


# Batches as producers write them: one layout (or not), nulls, timestamps near or far.
RECORD = st.tuples(st.one_of(st.none(), st.binary(max_size=12)),
                   st.one_of(st.none(), st.binary(max_size=300)))
BATCH = st.tuples(st.lists(RECORD, min_size=1, max_size=150), st.booleans(),
                  st.integers(-2, 200), st.sampled_from([0, 1]))


def built(batch_specs):
    """The answer the broker would send for these batches, back to back from offset 0."""
    out, offset = [], 0
    for pairs, one_layout, spread, timestamp_type in batch_specs:
        if one_layout:
            pairs = [pairs[0]] * len(pairs)
        builder = RecordBatchBuilder(base_offset=offset, timestamp_type=timestamp_type)
        for i, (key, value) in enumerate(pairs):
            builder.append(key, value, timestamp=1_700_000_000_000 + (i * spread) % 5000)
        out.append(builder.build())
        offset += len(pairs)
    return b"".join(out), offset


def table(decoded):
    """The rows of a Decoded as one Arrow table (compared as Arrow: a corrupt
    timestamp may be past what Python's datetime holds)."""
    return pa.Table.from_batches(decoded.batches, ARROW_SCHEMA).combine_chunks()


def reference_table(data, end=2**62):
    """kiel's decoder's records up to the first at or past ``end``, in the
    answer's order (where a read stops: the same as filtering while offsets
    increase, which a corrupt base offset can break), as Arrow."""
    records = decode_record_batches(data, TOPIC, 3, min_offset=0).records
    kept = []
    for record in records:
        if record.offset >= end:
            break
        kept.append(record)
    return pa.Table.from_batches([to_arrow(kept)] if kept else [],
                                 ARROW_SCHEMA).combine_chunks()


def outcome(decode):
    """What a decode makes of an answer: its rows, or the kind of error it raised."""
    try:
        return decode()
    except ProtocolError as e:
        return type(e)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(BATCH, min_size=1, max_size=4), st.data())
def test_any_answer_of_record_batches_reads_as_kiels_decoder_reads_it(batch_specs, data):
    answer, count = built(batch_specs)
    min_offset = data.draw(st.integers(0, count - 1))
    end = data.draw(st.integers(min_offset + 1, count + 5))
    got = decode_answer(answer, TOPIC, 3, min_offset, end, True, False)
    assert rows(got) == batch_reference(answer, min_offset, end)
    assert got.rows == len(rows(got))
    # A byte changed, the batch's CRC made right again (only the framing
    # checks can catch it), or not (the CRC must): the same rows or the same
    # error as kiel's decoder, never other rows.
    at = data.draw(st.integers(0, len(answer) - 1))
    flipped = bytearray(answer)
    flipped[at] ^= data.draw(st.integers(1, 255))
    batch_at, pos = 0, 0
    while pos <= at:
        batch_at, pos = pos, pos + 12 + struct.unpack_from(">i", answer, pos + 8)[0]
    for bad in (bytes(flipped), reseal(bytes(flipped), batch_at) if at >= batch_at + 21
                else bytes(flipped)):
        mine = outcome(lambda bad=bad: table(decode_answer(bad, TOPIC, 3, 0, 2**62, True,
                                                           False)))
        theirs = outcome(lambda bad=bad: reference_table(bad))
        assert mine == theirs if isinstance(mine, type) or isinstance(theirs, type) \
            else mine.equals(theirs)


def test_coalesce_gathers_batches_in_order_within_its_bounds():
    batches = [to_arrow([Record(TOPIC, 0, o, None, b"x" * 10, None) for o in range(i, i + 7)])
               for i in range(0, 70, 7)]
    out = list(coalesce(iter(batches), rows=20))
    assert [b.num_rows for b in out] == [21, 21, 21, 7]
    assert [o for b in out for o in b.column("offset").to_pylist()] == list(range(70))
    # The bytes bound: each batch goes on alone when one is already that large.
    assert [b.num_rows for b in coalesce(iter(batches), rows=10**6, max_bytes=1)] == [7] * 10
    assert list(coalesce(iter([]))) == []
