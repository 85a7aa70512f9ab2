"""The legacy message-set codec (kiel.protocol.messages).

Conformance is checked against kafka-python's legacy record classes, which
read and write the same bytes as the Java clients. kafka-python needs
python-snappy for snappy, which is not installed: a fixture gives it a shim
over cramjam's raw snappy (the library kiel.compression uses), so its xerial
framing and kiel's are compared on the same raw blocks.
"""
import os
import re
import struct
import textwrap
import types
import zlib

import cramjam
import kafka.codec as kafka_codec  # noqa: E402
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from kafka.record import legacy_records  # noqa: E402
from kafka.record.memory_records import MemoryRecords  # noqa: E402

import kiel.compression
from kiel.exc import (
    CompressionError,
    ConfigError,
    CorruptMessageError,
    LocalProtocolError,
    ProtocolError,
    UnsupportedCodecError,
    UnsupportedVersionError,
)
from kiel.protocol.messages import (
    MAX_NESTING,
    DecodeResult,
    MessageBoundary,
    Record,
    assign_offsets,
    decode_message_set,
    encode_message_set,
    find_position,
    iter_message_boundaries,
)
from tests.support.messages import GZIP, LZ4, NONE, SNAPPY, kp_encode

HYPO = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def kafka_python_snappy(monkeypatch):
    """Let kafka-python do snappy with cramjam (python-snappy is not installed)."""
    shim = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(bytes(b))),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(bytes(b))),
    )
    monkeypatch.setattr(kafka_codec, "snappy", shim)


# ---------------------------------------------------------------------------
# Helpers


def kp_decode(data):
    """(offset, key, value, timestamp) of every record kafka-python reads."""
    records = MemoryRecords(data)
    out = []
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        assert batch.validate_crc()
        for rec in batch:
            out.append((rec.offset, rec.key, rec.value, rec.timestamp))


def kiel_tuples(result):
    return [(r.offset, r.key, r.value, r.timestamp) for r in result.records]


def raw_message(offset, value, key=None, magic=0, attrs=0, timestamp=None, crc=None):
    """One message built by hand (for shapes the encoders never write)."""
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += struct.pack(">q", timestamp or 0)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    if crc is None:
        crc = zlib.crc32(body)
    return struct.pack(">qiI", offset, len(body) + 4, crc) + body


def wrapper(inner_set, codec, offset=0, magic=0, attrs_extra=0, timestamp=None, compressed=None):
    value = compressed if compressed is not None else kiel.compression.compress(codec, inner_set)
    return raw_message(offset, value, magic=magic, attrs=codec | attrs_extra, timestamp=timestamp)


def sample(n, null_every=0):
    out = []
    for i in range(n):
        key = None if null_every and i % null_every == 0 else b"key-%d" % i
        value = None if null_every and i % (null_every + 2) == 1 else b"value %d " % i * (i % 7)
        out.append((key, value))
    return out


SAMPLES = [
    [],
    [(None, b"")],
    [(b"", None)],
    [(None, None)],
    sample(1),
    sample(25),
    sample(40, null_every=3),
    [(bytes(range(256)), bytes(range(256)) * 300)],  # > 32 KiB: several xerial blocks
]

pairs = st.lists(
    st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=200)),
    max_size=30,
)


# ---------------------------------------------------------------------------
# Encoding: byte-for-byte kafka-python


@pytest.mark.parametrize("msgs", SAMPLES)
def test_encode_uncompressed_matches_kafka_python(msgs):
    assert encode_message_set(msgs) == kp_encode(msgs)


@pytest.mark.parametrize("msgs", SAMPLES[1:])
def test_encode_snappy_matches_kafka_python(msgs):
    assert encode_message_set(msgs, SNAPPY) == kp_encode(msgs, SNAPPY)


@pytest.mark.parametrize("msgs", SAMPLES[1:])
def test_encode_gzip_matches_kafka_python(msgs, monkeypatch):
    """gzip output carries a header kafka-python fills differently (mtime, OS byte).

    Everything else is identical: with kafka-python's gzip swapped for kiel's
    (same level, 9), the whole set is byte-identical; and kiel's gzip stream
    equals kafka-python's after the 10-byte header (same deflate data, CRC32
    and length trailer). Decoded content is compared too.
    """
    ours = encode_message_set(msgs, GZIP, compresslevel=9)
    theirs = kp_encode(msgs, GZIP)
    assert kp_decode(ours) == kp_decode(theirs)
    assert kiel_tuples(decode_message_set(ours)) == kp_decode(theirs)
    plain = encode_message_set(msgs)
    kiel_gzip = kiel.compression.compress(GZIP, plain, level=9)
    assert kiel_gzip[10:] == kafka_codec.gzip_encode(plain)[10:]
    monkeypatch.setattr(
        legacy_records, "gzip_encode", lambda data: kiel.compression.compress(GZIP, data, level=9)
    )
    assert ours == kp_encode(msgs, GZIP)


def test_encode_empty_is_empty():
    assert encode_message_set([]) == b""
    assert encode_message_set([], GZIP) == b""


def test_encode_takes_records_iterables_and_bytes_likes():
    records = decode_message_set(encode_message_set(sample(5)), "t", 3).records
    assert encode_message_set(records) == encode_message_set(sample(5))
    assert encode_message_set(iter(sample(5))) == encode_message_set(sample(5))
    assert encode_message_set([(bytearray(b"k"), memoryview(b"v"))]) == encode_message_set(
        [(b"k", b"v")]
    )
    mixed = [records[0], [b"k", b"v"], (None, b"w")]
    assert encode_message_set(mixed) == encode_message_set(
        [(records[0].key, records[0].value), (b"k", b"v"), (None, b"w")]
    )


@pytest.mark.parametrize(
    "bad", [[("key", b"v")], [(b"k", "value")], [(b"k", 5)], [b"abc"], [None], [(b"k",)]]
)
def test_encode_refuses_what_the_wire_cannot_carry(bad):
    with pytest.raises(LocalProtocolError):
        encode_message_set(bad)


def test_encode_unknown_codec():
    with pytest.raises(UnsupportedCodecError):
        encode_message_set([(None, b"x")], 7)


# ---------------------------------------------------------------------------
# Decoding what kafka-python writes


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY])
@pytest.mark.parametrize("msgs", SAMPLES[1:])
def test_decode_kafka_python_magic0(codec, msgs):
    # Offsets as a broker assigned them (inner ones absolute in magic 0).
    offsets = [1000 + i for i in range(len(msgs))]
    data = kp_encode(msgs, codec, offsets=offsets)
    result = decode_message_set(data, "topic", 7)
    assert kiel_tuples(result) == kp_decode(data)
    assert [r.offset for r in result.records] == offsets
    assert {(r.topic, r.partition) for r in result.records} == {("topic", 7)}
    assert result.next_offset == offsets[-1] + 1
    assert result.valid_bytes == len(data) and not result.truncated


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY])
@pytest.mark.parametrize("msgs", SAMPLES[1:])
def test_decode_kafka_python_magic1(codec, msgs):
    timestamps = [1_500_000_000_000 + 10 * i for i in range(len(msgs))]
    data = kp_encode(msgs, codec, magic=1, timestamps=timestamps)
    assert kiel_tuples(decode_message_set(data)) == kp_decode(data)
    if codec:
        # As a 0.10 broker serves it: the wrapper carries the last absolute
        # offset, inner offsets stay relative (the offset is not under the CRC).
        base = 500
        served = struct.pack(">q", base + len(msgs) - 1) + data[8:]
        result = decode_message_set(served)
        assert [r.offset for r in result.records] == [base + i for i in range(len(msgs))]
        assert kiel_tuples(result) == kp_decode(served)
        assert [r.timestamp for r in result.records] == timestamps


def test_decode_magic1_log_append_time_uses_the_wrapper_timestamp():
    inner = kp_encode(sample(3), magic=1, timestamps=[1, 2, 3])
    data = wrapper(inner, GZIP, offset=12, magic=1, attrs_extra=0x08, timestamp=99)
    result = decode_message_set(data)
    assert [(r.offset, r.timestamp) for r in result.records] == [(10, 99), (11, 99), (12, 99)]


def test_decode_raw_snappy_wrapper_as_librdkafka_writes_it():
    msgs = sample(30, null_every=4)
    inner = kp_encode(msgs, offsets=list(range(70, 100)))
    data = wrapper(inner, SNAPPY, offset=99, compressed=bytes(cramjam.snappy.compress_raw(inner)))
    result = decode_message_set(data)
    assert [(r.offset, r.key, r.value) for r in result.records] == [
        (70 + i, k, v) for i, (k, v) in enumerate(msgs)
    ]


def test_decode_accepts_bytearray_and_memoryview():
    data = encode_message_set(sample(5))
    expected = decode_message_set(data)
    assert decode_message_set(bytearray(data)) == expected
    assert decode_message_set(memoryview(b"xx" + data)[2:]) == expected
    assert all(type(r.value) is bytes for r in expected.records)


def test_decode_refuses_str():
    with pytest.raises(ConfigError):
        decode_message_set("not bytes")


def test_decode_empty():
    assert decode_message_set(b"") == DecodeResult([], None, 0, False, False, None)


def test_fast_path_and_general_path_agree_on_mixed_key_lengths():
    msgs = [(None, b"a"), (b"k1", b"b"), (b"k2", None), (b"", b""), (None, b"c")]
    msgs += [(b"long" * 400, b"d")]
    msgs += [(b"k%d" % (i % 3 * 11), b"v" * i) for i in range(50)]
    data = encode_message_set(msgs)
    assert [(r.key, r.value) for r in decode_message_set(data).records] == msgs
    assert kiel_tuples(decode_message_set(data)) == kp_decode(data)


# ---------------------------------------------------------------------------
# Truncation and the too-large signal


def test_truncated_trailing_message_is_dropped():
    msgs = sample(6)
    data = encode_message_set(msgs)
    bounds = list(iter_message_boundaries(data))
    for cut in range(bounds[0].end, len(data)):
        result = decode_message_set(data[:cut])
        complete = [b for b in bounds if b.end <= cut]
        assert [r.offset for r in result.records] == [b.offset for b in complete]
        assert result.valid_bytes == complete[-1].end
        assert result.truncated == (cut != complete[-1].end)
        assert not result.first_message_too_large
        assert result.next_offset == complete[-1].offset + 1


@pytest.mark.parametrize("codec", [NONE, GZIP])
def test_first_message_too_large_is_reported(codec):
    data = encode_message_set([(b"key", b"v" * 5000), (None, b"next")], codec)
    first = next(iter_message_boundaries(data))
    for cut in list(range(1, 30)) + [100, first.end - 1]:
        result = decode_message_set(data[:cut])
        assert result.records == [] and result.truncated and result.first_message_too_large
        assert result.valid_bytes == 0 and result.next_offset is None
        assert result.first_message_size == (first.end if cut >= 12 else None)


def test_size_field_of_int32_max_is_a_truncation_not_an_allocation():
    data = struct.pack(">qi", 5, 2**31 - 1) + b"\x00" * 30
    result = decode_message_set(data)
    assert result.first_message_too_large and result.first_message_size == 2**31 - 1 + 12


# ---------------------------------------------------------------------------
# Offsets: min_offset, nesting


def test_min_offset_drops_earlier_messages_of_a_wrapper():
    inner = kp_encode(sample(10), offsets=list(range(100, 110)))
    data = wrapper(inner, GZIP, offset=109) + encode_message_set([(None, b"after")]).replace(
        struct.pack(">q", 0), struct.pack(">q", 110), 1
    )
    result = decode_message_set(data, min_offset=105)
    assert [r.offset for r in result.records] == [105, 106, 107, 108, 109, 110]
    assert result.next_offset == 111
    everything_old = decode_message_set(data, min_offset=1000)
    assert everything_old.records == [] and everything_old.next_offset == 111


def test_nested_wrappers_are_unwrapped():
    inner = kp_encode(sample(4), offsets=[10, 11, 12, 13])
    middle = wrapper(inner, SNAPPY, offset=13) + raw_message(14, b"plain")
    data = wrapper(middle, GZIP, offset=14)
    result = decode_message_set(data)
    assert [r.offset for r in result.records] == [10, 11, 12, 13, 14]
    assert result.records[-1].value == b"plain"


def test_nested_offsets_that_are_not_the_logs_are_corrupt():
    """A broker numbers one level: a producer's nested set keeps offsets
    that run past its wrapper's or go backwards; neither is handed out."""
    inner = kp_encode(sample(3), offsets=[0, 1, 2])
    with pytest.raises(CorruptMessageError, match="past its own offset"):
        decode_message_set(wrapper(wrapper(inner, GZIP, offset=0), GZIP, offset=0))
    before = raw_message(6, b"six")
    with pytest.raises(CorruptMessageError, match="go backwards"):
        decode_message_set(wrapper(before + wrapper(inner, GZIP, offset=7), GZIP, offset=7))
    # The same nesting with the log's offsets is unwrapped.
    good = kp_encode(sample(3), offsets=[7, 8, 9])
    result = decode_message_set(wrapper(before + wrapper(good, GZIP, offset=9), GZIP, offset=9))
    assert [r.offset for r in result.records] == [6, 7, 8, 9]


def test_nesting_deeper_than_the_bound_is_corrupt():
    data = raw_message(0, b"bottom")
    for _ in range(MAX_NESTING):
        data = wrapper(data, GZIP)
    assert decode_message_set(data).records[0].value == b"bottom"
    with pytest.raises(CorruptMessageError):
        decode_message_set(wrapper(data, GZIP))


def test_decoded_bytes_budget_spans_every_wrapper_and_nesting_level():
    # Each level decompresses to under the budget on its own (a per-call cap
    # lets this through); together the levels exceed it and are refused.
    bottom = b"".join(raw_message(i, b"\0" * 30_000) for i in range(2))  # ~60 KB
    bottom2 = b"".join(raw_message(i, b"\0" * 30_000) for i in range(2, 4))
    middle = wrapper(bottom, GZIP, offset=1)
    top = wrapper(middle + wrapper(bottom2, GZIP, offset=3), GZIP, offset=3)
    assert len(decode_message_set(top).records) == 4
    assert len(decode_message_set(top, max_decoded=200_000).records) == 4
    with pytest.raises(CompressionError):
        decode_message_set(top, max_decoded=100_000)


def test_magic1_message_inside_magic0_wrapper_is_corrupt():
    inner = raw_message(0, b"v", magic=1, timestamp=5)
    with pytest.raises(CorruptMessageError):
        decode_message_set(wrapper(inner, GZIP))


# ---------------------------------------------------------------------------
# Errors


def test_crc_mismatch_names_the_offset():
    data = raw_message(42, b"value", crc=12345)
    with pytest.raises(CorruptMessageError) as info:
        decode_message_set(data)
    assert info.value.offset == 42
    assert decode_message_set(data, check_crcs=False).records[0].value == b"value"


def test_unknown_magic_is_an_unsupported_version():
    with pytest.raises(UnsupportedVersionError):
        decode_message_set(raw_message(0, b"value", magic=2))


def _with_crc(offset, body):
    return struct.pack(">qiI", offset, len(body) + 4, zlib.crc32(body)) + body


@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">bbi", 0, 0, 2**31 - 1) + struct.pack(">i", 1) + b"x",  # key length huge
        struct.pack(">bbi", 0, 0, -2) + struct.pack(">i", 1) + b"x",  # key length < -1
        struct.pack(">bbi", 0, 0, -1) + struct.pack(">i", 2**31 - 1) + b"x",  # value length huge
        struct.pack(">bbi", 0, 0, -1) + struct.pack(">i", -1) + b"x",  # null value + extra byte
        struct.pack(">bbi", 0, 0, -1) + struct.pack(">i", 3) + b"x",  # value length too long
        struct.pack(">bbi", 0, 0, -1) + struct.pack(">i", 0) + b"x",  # value length too short
        struct.pack(">bbq", 1, 0, 0) + struct.pack(">i", -1),  # magic 1, too short
        struct.pack(">bb", 0, 0),  # size below the minimum
    ],
)
def test_inconsistent_lengths_are_corrupt(body):
    with pytest.raises(CorruptMessageError):
        decode_message_set(_with_crc(3, body))
    with pytest.raises(CorruptMessageError):
        decode_message_set(_with_crc(3, body), check_crcs=False)
    if body[0] == 0:
        with pytest.raises(CorruptMessageError):
            assign_offsets(_with_crc(3, body), 0)


def test_negative_size_is_corrupt():
    with pytest.raises(CorruptMessageError):
        decode_message_set(struct.pack(">qi", 0, -5) + b"\x00" * 40)


def test_compressed_null_value_and_garbage():
    with pytest.raises(CorruptMessageError):
        decode_message_set(raw_message(0, None, attrs=GZIP))
    with pytest.raises(CompressionError):
        decode_message_set(raw_message(0, b"not gzip at all", attrs=GZIP))
    with pytest.raises(UnsupportedCodecError):
        decode_message_set(raw_message(0, b"whatever", attrs=5))
    truncated_inner = encode_message_set(sample(3))[:-2]
    with pytest.raises(CorruptMessageError):
        decode_message_set(wrapper(truncated_inner, GZIP))


VALID_SETS = [
    encode_message_set(sample(8, null_every=3)),
    encode_message_set(sample(8), GZIP),
    encode_message_set(sample(8), SNAPPY),
    encode_message_set(sample(8), LZ4),
    kp_encode(sample(5), magic=1, timestamps=[1, 2, 3, 4, 5]),
    kp_encode(sample(5), GZIP, magic=1, timestamps=[1, 2, 3, 4, 5]),
]


def test_every_flipped_byte_under_the_crc_is_caught():
    for data in VALID_SETS:
        for bound in iter_message_boundaries(data):
            for pos in range(bound.start + 16, bound.end):
                for mask in (0x01, 0x80, 0xFF):
                    bad = bytearray(data)
                    bad[pos] ^= mask
                    with pytest.raises(CorruptMessageError):
                        decode_message_set(bytes(bad))


@HYPO
@given(st.binary(max_size=400), st.booleans())
def test_random_bytes_only_raise_protocol_errors(data, check):
    try:
        decode_message_set(data, check_crcs=check)
    except ProtocolError:
        pass


@HYPO
@given(
    st.sampled_from(VALID_SETS),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
    st.integers(0, 10**6),
    st.booleans(),
)
def test_mutated_sets_only_raise_protocol_errors(data, flips, cut, check):
    bad = bytearray(data)
    for pos, mask in flips:
        bad[pos % len(bad)] ^= mask
    bad = bytes(bad[: cut % (len(bad) + 1)])
    try:
        result = decode_message_set(bad, check_crcs=check)
    except ProtocolError:
        return
    assert result.valid_bytes <= len(bad)


@HYPO
@given(st.binary(min_size=1, max_size=300), st.sampled_from([GZIP, SNAPPY, LZ4]), st.booleans())
def test_random_compressed_values_only_raise_protocol_errors(value, codec, check):
    try:
        decode_message_set(raw_message(0, value, attrs=codec), check_crcs=check)
    except ProtocolError:
        pass


@HYPO
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(-128, 127), st.binary(max_size=60)),
        min_size=1, max_size=4,
    ),
)
def test_random_bodies_under_a_good_crc_only_raise_protocol_errors(messages):
    """The CRC passes, so the parser behind it (lengths, magic, codecs) is what is tested."""
    data = b"".join(
        _with_crc(i, struct.pack(">bb", magic, attrs) + body)
        for i, (magic, attrs, body) in enumerate(messages)
    )
    try:
        decode_message_set(data)
    except ProtocolError:
        pass
    try:
        assign_offsets(data, 0)
    except ProtocolError:
        pass


@st.composite
def well_framed_garbage(draw):
    """A message with consistent lengths and a good CRC, but arbitrary content.

    Its value is sometimes a real compressed stream of random bytes (or of a
    mutated message set), so the inner parser sees garbage that decompresses.
    """
    magic = draw(st.sampled_from([0, 0, 1]))
    codec = draw(st.sampled_from([NONE, GZIP, SNAPPY, LZ4, 5]))
    inner = draw(st.binary(max_size=80) | st.sampled_from(VALID_SETS))
    if inner and draw(st.booleans()):
        inner = bytearray(inner)
        inner[draw(st.integers(0, len(inner) - 1))] ^= draw(st.integers(1, 255))
        inner = bytes(inner)
    if codec in (GZIP, SNAPPY, LZ4) and draw(st.booleans()):
        value = kiel.compression.compress(codec, inner)
    else:
        value = inner
    key = draw(st.none() | st.binary(max_size=8))
    return raw_message(draw(st.integers(0, 2**40)), value, key=key, magic=magic,
                       attrs=codec | draw(st.sampled_from([0, 0x08])), timestamp=7)


@HYPO
@given(st.lists(well_framed_garbage(), min_size=1, max_size=3))
def test_well_framed_garbage_only_raises_protocol_errors(messages):
    data = b"".join(messages)
    try:
        decode_message_set(data)
    except ProtocolError:
        pass
    try:
        assign_offsets(data, 0)
    except ProtocolError:
        pass


# ---------------------------------------------------------------------------
# Round trips


@HYPO
@given(pairs, st.sampled_from([NONE, GZIP, SNAPPY, LZ4]))
def test_round_trip(msgs, codec):
    result = decode_message_set(encode_message_set(msgs, codec), "t", 1)
    assert result.records == [
        Record("t", 1, i, key, value, None) for i, (key, value) in enumerate(msgs)
    ]
    assert result.next_offset == (len(msgs) if msgs else None)
    assert not result.truncated and not result.first_message_too_large


@HYPO
@given(pairs)
def test_kafka_python_reads_what_kiel_writes(msgs):
    assume(msgs)
    data = encode_message_set(msgs)
    assert kp_decode(data) == [(i, k, v, None) for i, (k, v) in enumerate(msgs)]


# ---------------------------------------------------------------------------
# Broker side: assign_offsets, boundaries


def test_assign_offsets_plain_set():
    msgs = sample(20, null_every=3)
    produced = encode_message_set(msgs)
    assigned, count = assign_offsets(produced, 1000)
    assert count == 20 and len(assigned) == len(produced)
    result = decode_message_set(assigned)
    assert [(r.offset, r.key, r.value) for r in result.records] == [
        (1000 + i, k, v) for i, (k, v) in enumerate(msgs)
    ]
    # Only the offsets changed.
    for a, p in zip(iter_message_boundaries(assigned), iter_message_boundaries(produced)):
        assert assigned[a.start + 8 : a.end] == produced[p.start + 8 : p.end]


@pytest.mark.parametrize("codec", [GZIP, SNAPPY])
def test_assign_offsets_compressed_set_is_recompressed_with_absolute_offsets(codec):
    msgs = sample(15)
    produced = kp_encode(msgs, codec)  # as kafka-python sends it: inner 0..14, wrapper 0
    assigned, count = assign_offsets(produced, 500)
    assert count == 15
    bounds = list(iter_message_boundaries(assigned))
    assert len(bounds) == 1 and bounds[0].offset == 514  # the wrapper: last inner offset
    assert assigned[bounds[0].start + 17] & 0x07 == codec
    assert kp_decode(assigned) == [(500 + i, k, v, None) for i, (k, v) in enumerate(msgs)]
    assert [r.offset for r in decode_message_set(assigned).records] == list(range(500, 515))


def test_assign_offsets_mixed_set_goes_into_one_wrapper_with_the_last_codec():
    produced = (
        encode_message_set(sample(3), GZIP)
        + encode_message_set([(None, b"plain")])
        + encode_message_set(sample(2), SNAPPY)
    )
    assigned, count = assign_offsets(produced, 7)
    assert count == 6
    (bound,) = iter_message_boundaries(assigned)
    assert bound.offset == 12 and assigned[bound.start + 17] & 0x07 == SNAPPY
    values = [r.value for r in decode_message_set(assigned).records]
    assert values == [v for _, v in sample(3)] + [b"plain"] + [v for _, v in sample(2)]


def test_assign_offsets_refuses_bad_input():
    good = encode_message_set(sample(3))
    bad = bytearray(good)
    bad[30] ^= 1
    with pytest.raises(CorruptMessageError):
        assign_offsets(bytes(bad), 0)
    with pytest.raises(UnsupportedVersionError):
        assign_offsets(raw_message(0, b"v", magic=1), 0)
    with pytest.raises(CorruptMessageError):
        assign_offsets(raw_message(0, None, attrs=GZIP), 0)
    corrupt_inner = bytearray(encode_message_set(sample(2)))
    corrupt_inner[-1] ^= 1
    with pytest.raises(CorruptMessageError):
        assign_offsets(wrapper(bytes(corrupt_inner), GZIP), 0)
    with pytest.raises(CorruptMessageError):
        assign_offsets(struct.pack(">qi", 0, 3) + b"\x00" * 20, 0)


def test_assign_offsets_trims_a_partial_trailing_message_and_empty_input():
    good = encode_message_set(sample(3))
    assigned, count = assign_offsets(good + good[:20], 10)
    assert count == 3 and assigned == assign_offsets(good, 10)[0]
    assert assign_offsets(b"", 10) == (b"", 0)
    assert assign_offsets(wrapper(b"", GZIP), 10) == (b"", 0)


def test_boundaries_and_find_position():
    data, _ = assign_offsets(encode_message_set(sample(5)), 20)
    bounds = list(iter_message_boundaries(data))
    assert [b.offset for b in bounds] == [20, 21, 22, 23, 24]
    assert bounds[0].start == 0 and bounds[-1].end == len(data)
    assert all(isinstance(b, MessageBoundary) for b in bounds)
    assert find_position(data, 0) == 0
    assert find_position(data, 22) == bounds[2].start
    assert find_position(data, 25) is None
    with pytest.raises(CorruptMessageError):
        list(iter_message_boundaries(data[:-1]))
    assert list(iter_message_boundaries(data[:-1], strict=False)) == bounds[:-1]
    assert list(iter_message_boundaries(data + b"\x00" * 5, strict=False)) == bounds
    with pytest.raises(CorruptMessageError):
        list(iter_message_boundaries(data + b"\x00" * 5))


def test_message_sets_guide_examples_run():
    guide = os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        "docs", "guides", "message_sets.rst",
    )
    with open(guide, encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"\.\. testcode::\n\n((?:(?:    .*)?\n)+)", text)
    assert len(blocks) == 3
    for block in blocks:
        exec(compile(textwrap.dedent(block), guide, "exec"), {})
