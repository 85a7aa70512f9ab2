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

import pytest

from kiel.compression import codec_id_for
from kiel.exc import CorruptMessageError
from kiel.protocol.messages import MessageSetBuilder, decode_message_set, encode_message_set
from kiel.protocol.record_batch import RecordBatchBuilder, decode_record_batches
from kiel.spark.columns import (
    ARROW_SCHEMA,
    ARROW_SCHEMA_WITH_HEADERS,
    _uniform_run,
    coalesce,
    decode_answer,
    to_arrow,
)
from kiel.structs import Record
from tests.test_messages import kp_encode

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


def test_coalesce_gathers_batches_in_order_within_its_bounds():
    batches = [to_arrow([Record(TOPIC, 0, o, None, b"x" * 10, None) for o in range(i, i + 7)])
               for i in range(0, 70, 7)]
    out = list(coalesce(iter(batches), rows=20))
    assert [b.num_rows for b in out] == [21, 21, 21, 7]
    assert [o for b in out for o in b.column("offset").to_pylist()] == list(range(70))
    # The bytes bound: each batch goes on alone when one is already that large.
    assert [b.num_rows for b in coalesce(iter(batches), rows=10**6, max_bytes=1)] == [7] * 10
    assert list(coalesce(iter([]))) == []
