"""Record batches (magic 2), varints and CRC-32C: kiel against kafka-python, and hostile bytes.

kafka-python 3.0.12's ``kafka.record.default_records`` is the reference:

* **byte for byte**: kiel's :class:`RecordBatchBuilder` writes exactly what
  ``DefaultRecordBatchBuilder`` writes for the same records (timestamps
  fixed), every codec. kafka-python's gzip writes the current time into the
  gzip header and lz4/zstd need packages the test extra does not install, so
  for this comparison kafka-python is handed kiel's codecs: what is compared
  is the batch around the compressed bytes (header, CRC-32C, attributes, the
  "compression did not help, send plain" rule, the records inside);
* **each decodes the other's**: here kafka-python keeps independent codecs
  (its own gzip and xerial framing; cramjam's liblz4 and libzstd frame
  functions, which share no code with kiel's lz4 framing and zstd bound walk).
"""
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Tuple

import cramjam
import kafka.codec as kafka_codec
import kafka.record.default_records as kp_records
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record._crc32c import crc as kp_crc32c
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.util import decode_varint as kp_decode_varint
from kafka.record.util import encode_varint as kp_encode_varint

from kiel import compression
from kiel.exc import (
    CompressionError,
    ConfigError,
    CorruptMessageError,
    LocalProtocolError,
    ProtocolError,
    TruncatedError,
    UnsupportedCodecError,
    UnsupportedVersionError,
)
from kiel.protocol import crc32c as crc_module
from kiel.protocol.crc32c import crc32c, crc32c_pure
from kiel.protocol.messages import assign_offsets, encode_message_set
from kiel.protocol.primitives import (
    UnsignedVarInt,
    VarInt,
    VarLong,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    size_of_varint,
)
from kiel.protocol.record_batch import (
    ABORT,
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    COMMIT,
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    RecordBatchBuilder,
    decode_record_batches,
    encode_record_batch,
)
from kiel.structs import Record
from tests.support.record_batch import (
    TS,
    Spec,
    _record,
    batch_with_deltas,
    control_batch,
    kiel_batch,
    restamp,
    with_base_offset,
)

REPO = Path(__file__).resolve().parents[2]
CODECS = [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD]
CODEC_IDS = ["none", "gzip", "snappy", "lz4", "zstd"]



# --------------------------------------------------------------------------
# Building the same batch with both libraries




def kp_batch(specs: List[Spec], codec: int = CODEC_NONE,
             producer: Tuple[int, int, int] = (-1, -1, -1), transactional: bool = False) -> bytes:
    builder = KpBuilder(2, codec, transactional, *producer, 1 << 30)
    for offset, (key, value, ts, headers) in enumerate(specs):
        assert builder.append(offset, ts, key, value, headers) is not None
    return bytes(builder.build())


def kp_read(data: bytes) -> List[Tuple[Any, ...]]:
    batch = KpBatch(data)
    assert batch.validate_crc()
    return [(r.offset, r.key, r.value, r.timestamp, r.timestamp_type, tuple(r.headers))
            for r in batch]


def kiel_read(data: bytes) -> List[Tuple[Any, ...]]:
    result = decode_record_batches(data, "t", 0)
    assert not result.truncated and result.valid_bytes == len(data)
    return [(r.offset, r.key, r.value, r.timestamp, tt, h)
            for r, tt, h in zip(result.records, result.timestamp_types, result.headers)]


def _shim_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    # python-snappy >= 0.7 is exactly cramjam's raw snappy (see test_compression.py).
    if kafka_codec.snappy is None:
        monkeypatch.setattr(kafka_codec, "snappy", type("snappy", (), {
            "compress": staticmethod(lambda d: bytes(cramjam.snappy.compress_raw(bytes(d)))),
            "decompress": staticmethod(lambda d: bytes(cramjam.snappy.decompress_raw(bytes(d)))),
        }))


@pytest.fixture
def kp_kiel_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's record batches compressing with kiel's codecs (see the module doc)."""
    _shim_snappy(monkeypatch)
    for name, codec_id in (("gzip", CODEC_GZIP), ("lz4", CODEC_LZ4), ("zstd", CODEC_ZSTD)):
        codec = compression.get_codec(codec_id, magic=1) if codec_id == CODEC_LZ4 \
            else compression.get_codec(codec_id)
        monkeypatch.setattr(kp_records, f"{name}_encode", codec.compress)
        monkeypatch.setattr(kp_records, f"{name}_decode", codec.decompress)
    for name in ("snappy", "lz4", "zstd"):
        monkeypatch.setattr(kafka_codec, f"has_{name}", lambda: True)


@pytest.fixture
def kp_own_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's record batches with codecs independent of kiel's (see the module doc)."""
    _shim_snappy(monkeypatch)
    monkeypatch.setattr(kp_records, "lz4_encode", _liblz4_frame)
    monkeypatch.setattr(kp_records, "lz4_decode",
                        lambda d: bytes(cramjam.lz4.decompress(bytes(d))))
    monkeypatch.setattr(kp_records, "zstd_encode",
                        lambda d: bytes(cramjam.zstd.compress(bytes(d), level=3)))
    monkeypatch.setattr(kp_records, "zstd_decode",
                        lambda d: bytes(cramjam.zstd.decompress(bytes(d))))
    for name in ("snappy", "lz4", "zstd"):
        monkeypatch.setattr(kafka_codec, f"has_{name}", lambda: True)


def _liblz4_frame(data: bytes) -> bytes:
    """An LZ4 frame as liblz4 writes it for Kafka: independent blocks (Kafka
    refuses linked ones), here with block and content checksums too."""
    compressor = cramjam.lz4.Compressor(block_linked=False)
    compressor.compress(bytes(data))
    return bytes(compressor.finish())


def _payloads() -> st.SearchStrategy:
    # Random bytes do not compress; repeats do (so both sides of the
    # "compression did not help" rule are exercised).
    return st.one_of(st.none(), st.binary(max_size=60),
                     st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=4),
                               st.integers(1, 80)))


SPECS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=20)),
        _payloads(),
        st.integers(TS - 10**6, TS + 10**9),
        st.lists(st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=8))),
                 max_size=3),
    ),
    min_size=1, max_size=25,
)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def sample_specs(count: int = 50) -> List[Spec]:
    return [(None if i % 7 == 0 else b"key-%d" % i,
             None if i % 11 == 5 else b"value %d " % i * (i % 9),
             TS + i * 13 - (i % 3) * 40,
             [("trace", b"t%d" % i), ("\u00e9t\u00e9", None)] if i % 4 == 0 else [])
            for i in range(count)]


# --------------------------------------------------------------------------
# Byte for byte


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_batch_bytes_equal_kafka_python(kp_kiel_codecs: None, codec: int) -> None:
    specs = sample_specs()
    ours = kiel_batch(specs, codec, partition_leader_epoch=0)
    assert ours == kp_batch(specs, codec)
    if codec:
        assert ours[22] & 0x07 == codec  # repetitive values: compression helped


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@PROPERTY
@given(specs=SPECS, producer=st.sampled_from([(-1, -1, -1), (4000, 2, 17), (2**62, 0, 2**31 - 5)]),
       transactional=st.booleans())
def test_random_batches_equal_kafka_python(kp_kiel_codecs: None, codec: int, specs: List[Spec],
                                           producer: Tuple[int, int, int],
                                           transactional: bool) -> None:
    producer_id, epoch, sequence = producer
    ours = kiel_batch(specs, codec, partition_leader_epoch=0, producer_id=producer_id,
                      producer_epoch=epoch, base_sequence=sequence,
                      is_transactional=transactional)
    assert ours == kp_batch(specs, codec, producer, transactional)


# --------------------------------------------------------------------------
# Each decodes the other's


def _expected(specs: List[Spec], base_offset: int = 0) -> List[Tuple[Any, ...]]:
    return [(base_offset + i, key, value, ts, CREATE_TIME, tuple(headers))
            for i, (key, value, ts, headers) in enumerate(specs)]


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@PROPERTY
@given(specs=SPECS)
def test_each_decodes_the_others(kp_own_codecs: None, codec: int, specs: List[Spec]) -> None:
    theirs = kp_batch(specs, codec)
    assert kiel_read(theirs) == _expected(specs)
    ours = kiel_batch(specs, codec)
    assert kp_read(ours) == _expected(specs)
    # The codec in the attributes is the one each used (or none when it did not help).
    assert ours[22] & 0x07 in (codec, CODEC_NONE)


@pytest.mark.parametrize("codec", CODECS[1:], ids=CODEC_IDS[1:])
def test_independent_codecs_really_compress(kp_own_codecs: None, codec: int) -> None:
    specs = sample_specs()
    theirs = kp_batch(specs, codec)
    assert theirs[22] & 0x07 == codec
    assert kiel_read(theirs) == _expected(specs)


# --------------------------------------------------------------------------
# CRC-32C

# RFC 3720, appendix B.4, plus the usual "123456789" check value.
CRC_VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),
    (b"", 0),
]


@pytest.mark.parametrize("data, expected", CRC_VECTORS)
def test_crc32c_reference_vectors(data: bytes, expected: int) -> None:
    assert crc32c_pure(data) == expected
    assert crc32c(data) == expected
    assert crc32c(memoryview(b"xx" + data)[2:]) == expected
    assert crc32c(bytearray(data)) == expected


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=3000), cut=st.integers(0, 3000))
def test_crc32c_agrees_with_kafka_python_and_chains(data: bytes, cut: int) -> None:
    expected = kp_crc32c(data)  # kafka-python's own pure-Python CRC-32C
    assert crc32c_pure(data) == expected == crc32c(data)
    head, tail = data[:cut], data[cut:]
    assert crc32c(tail, crc32c(head)) == expected
    assert crc32c_pure(tail, crc32c_pure(head)) == expected


def test_accelerated_crc32c_agrees_with_the_fallback() -> None:
    # The test extra installs google-crc32c: a missing package or one without
    # its C extension fails here instead of passing unseen.
    import google_crc32c

    assert google_crc32c.implementation == "c", "google-crc32c has no C extension here"
    assert crc_module.IMPLEMENTATION == "google-crc32c"
    rnd = os.urandom(1 << 16)
    for size in (0, 1, 61, 4095, 1 << 16):
        assert crc32c(rnd[:size]) == crc32c_pure(rnd[:size])
        assert crc32c(memoryview(rnd)[3:size]) == crc32c_pure(rnd[3:size])


def _run(code: str, extra_path: str = "") -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (extra_path, str(REPO)) if p))
    result = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_crc32c_selects_the_package_only_with_its_c_extension(tmp_path: Path) -> None:
    # A stand-in google_crc32c whose extend() marks its results: kiel must
    # call it when implementation == "c", and ignore it otherwise.
    for implementation, expected in (("c", "google-crc32c 1"), ("python", "pure-python 0")):
        fake = tmp_path / implementation
        fake.mkdir()
        (fake / "google_crc32c.py").write_text(
            f"implementation = {implementation!r}\n"
            "def extend(crc, data):\n"
            "    assert type(data) is bytes\n"
            "    return 1\n")
        out = _run("from kiel.protocol import crc32c as m\n"
                   "print(m.IMPLEMENTATION, int(m.crc32c(memoryview(b'abc')) == 1))",
                   str(fake))
        assert out.split() == expected.split()
    out = _run("import sys\nsys.modules['google_crc32c'] = None\n"
               "from kiel.protocol import crc32c as m\nprint(m.IMPLEMENTATION)")
    assert out.strip() == "pure-python"


# --------------------------------------------------------------------------
# Varints


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-200, 200)))
def test_varints_equal_kafka_python(value: int) -> None:
    out = bytearray()
    kp_encode_varint(value, out.append)
    assert encode_varint(value) == bytes(out)
    assert size_of_varint(value) == len(out)
    assert decode_varlong(bytes(out), 0) == (value, len(out))
    assert kp_decode_varint(encode_varint(value), 0) == (value, len(out))
    if -(2**31) <= value < 2**31:
        assert decode_varint(b"\x00" + bytes(out) + b"\x00", 1) == (value, len(out) + 1)
        wire: List[bytes] = []
        VarInt.encode(value, wire)
        assert VarInt.decode(wire[0], 0) == (value, len(out))
    wire = []
    VarLong.encode(value, wire)
    assert wire == [bytes(out)]


@given(value=st.integers(0, 2**32 - 1))
def test_unsigned_varints(value: int) -> None:
    data = encode_unsigned_varint(value)
    assert decode_unsigned_varint(data, 0) == (value, len(data))
    assert UnsignedVarInt.decode(data, 0) == (value, len(data))
    assert len(data) == max(1, (value.bit_length() + 6) // 7)


def test_varint_bounds() -> None:
    with pytest.raises(TruncatedError):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(TruncatedError):
        decode_varint(b"", 0)
    with pytest.raises(ProtocolError, match="longer than 5"):
        decode_varint(b"\x80" * 5 + b"\x01", 0)
    with pytest.raises(ProtocolError, match="longer than 10"):
        decode_varlong(b"\xff" * 11, 0)
    with pytest.raises(ProtocolError, match="too wide"):
        decode_varint(encode_varint(2**31), 0)  # zig-zag 2**32 needs 33 bits
    with pytest.raises(ProtocolError, match="too wide"):
        decode_varlong(b"\xff" * 9 + b"\x7f", 0)
    assert decode_varint(encode_varint(-(2**31)), 0) == (-(2**31), 5)
    for bad in (2**63, -(2**63) - 1, 1.0, "1", None, True):
        with pytest.raises(LocalProtocolError):
            encode_varint(bad)  # type: ignore[arg-type]
    for bad_unsigned in (-1, 2**64, True):
        with pytest.raises(LocalProtocolError):
            encode_unsigned_varint(bad_unsigned)
    for wtype, bad in ((VarInt, 2**31), (VarInt, -(2**31) - 1), (UnsignedVarInt, -1),
                       (UnsignedVarInt, 2**32), (VarLong, 2**63), (VarInt, True)):
        with pytest.raises(LocalProtocolError):
            wtype.encode(bad, [])


# --------------------------------------------------------------------------
# Decoder semantics






def test_batches_in_a_fetch_response() -> None:
    first = with_base_offset(kiel_batch(sample_specs(5)), 100)
    second = with_base_offset(kiel_batch(sample_specs(3), CODEC_GZIP), 105)
    result = decode_record_batches(first + second, "events", 7)
    assert [r.offset for r in result.records] == list(range(100, 108))
    assert {(r.topic, r.partition) for r in result.records} == {("events", 7)}
    # Each record carries its timestamp type and headers (CreateTime here).
    assert result.records[0] == Record("events", 7, 100, None, b"", TS, 0,
                                       (("trace", b"t0"), ("\u00e9t\u00e9", None)))
    assert result.records[1].headers == () and result.records[1].timestamp_type == 0
    assert [r.headers for r in result.records] == result.headers
    assert result.next_offset == 108 and result.valid_bytes == len(first + second)
    assert [b.base_offset for b in result.batches] == [100, 105]
    assert [b.record_count for b in result.batches] == [5, 3]
    assert result.headers[0] == (("trace", b"t0"), ("\u00e9t\u00e9", None))
    assert result.headers[1] == ()
    assert result.timestamp_types == [CREATE_TIME] * 8
    assert not result.truncated and not result.markers
    # min_offset drops what comes before the fetch offset, even inside a batch.
    later = decode_record_batches(first + second, min_offset=106)
    assert [r.offset for r in later.records] == [106, 107]
    assert len(later.headers) == len(later.timestamp_types) == 2
    assert later.next_offset == 108


def test_records_are_plain_records() -> None:
    data = kiel_batch([(b"k", b"v", TS, [])])
    [record] = decode_record_batches(data, "t", 1).records
    assert type(record) is Record
    assert record == Record("t", 1, 0, b"k", b"v", TS, 0, ())
    assert type(record.key) is bytes and type(record.value) is bytes


def test_empty_input() -> None:
    result = decode_record_batches(b"")
    assert result.records == [] and result.next_offset is None and result.valid_bytes == 0
    assert not result.truncated and not result.first_batch_too_large


def test_truncated_trailing_batch_is_dropped_at_every_cut() -> None:
    first = with_base_offset(kiel_batch(sample_specs(4)), 10)
    second = with_base_offset(kiel_batch(sample_specs(6), CODEC_SNAPPY), 14)
    data = first + second
    for cut in range(len(data) + 1):
        result = decode_record_batches(data[:cut])
        complete = cut >= len(first)
        assert len(result.records) == (10 if cut == len(data) else 4 if complete else 0), cut
        assert result.truncated == (cut not in (0, len(first), len(data))), cut
        assert result.valid_bytes == (len(data) if cut == len(data) else
                                      len(first) if complete else 0)
        assert result.first_batch_too_large == (0 < cut < len(first))
        if 0 < cut < len(first):
            assert result.first_batch_size == (len(first) if cut >= 12 else None)
        else:
            assert result.first_batch_size is None
        assert result.next_offset == (20 if cut == len(data) else 14 if complete else None)


def test_crc_mismatch() -> None:
    data = bytearray(with_base_offset(kiel_batch(sample_specs(3)), 42))
    data[-3] ^= 0x01  # inside the last value
    with pytest.raises(CorruptMessageError, match="CRC") as info:
        decode_record_batches(bytes(data))
    assert info.value.offset == 42
    # Unchecked, the flipped bit is just a different value.
    assert len(decode_record_batches(bytes(data), check_crcs=False).records) == 3


def test_unknown_magic() -> None:
    data = bytearray(kiel_batch(sample_specs(1)))
    data[16] = 3
    with pytest.raises(UnsupportedVersionError, match="magic byte 3"):
        decode_record_batches(bytes(data))


def test_unknown_codec() -> None:
    data = restamp(kiel_batch(sample_specs(2)), set_bits=0x05)
    with pytest.raises(UnsupportedCodecError):
        decode_record_batches(data)


def test_log_append_time() -> None:
    specs = sample_specs(4)
    data = kiel_batch(specs, timestamp_type=LOG_APPEND_TIME)
    result = decode_record_batches(data)
    max_ts = max(ts for _, _, ts, _ in specs)
    assert [r.timestamp for r in result.records] == [max_ts] * 4
    assert result.timestamp_types == [LOG_APPEND_TIME] * 4
    assert result.batches[0].timestamp_type == LOG_APPEND_TIME
    assert kp_read(data)[0][3:5] == (max_ts, LOG_APPEND_TIME)  # kafka-python agrees
    # A broker that sets the bit on a producer's batch: same reading.
    assert decode_record_batches(restamp(kiel_batch(specs), 0x08)).records == result.records




def test_transactions_and_control_batches() -> None:
    committed = with_base_offset(
        kiel_batch(sample_specs(3), producer_id=7, producer_epoch=1, base_sequence=0,
                   is_transactional=True), 0)
    aborted = with_base_offset(
        kiel_batch(sample_specs(2), producer_id=8, producer_epoch=1, base_sequence=0,
                   is_transactional=True), 3)
    data = committed + aborted + control_batch(5, COMMIT, 7) + control_batch(6, ABORT, 8)
    result = decode_record_batches(data)
    # Control records are not data; transactional data comes back (read_uncommitted).
    assert [r.offset for r in result.records] == [0, 1, 2, 3, 4]
    assert result.next_offset == 7
    assert [(m.offset, m.producer_id, m.control_type) for m in result.markers] == [
        (5, 7, COMMIT), (6, 8, ABORT)]
    assert [(b.is_transactional, b.is_control) for b in result.batches] == [
        (True, False), (True, False), (True, True), (True, True)]
    assert [b.producer_id for b in result.batches] == [7, 8, 7, 8]
    # kafka-python reads our control batches as control records too.
    assert list(KpBatch(control_batch(5, COMMIT, 7)))[0].commit


def test_control_record_without_a_key_is_corrupt() -> None:
    builder = RecordBatchBuilder(is_transactional=True)
    builder.append(None, b"", timestamp=TS)
    with pytest.raises(CorruptMessageError, match="control record"):
        decode_record_batches(restamp(builder.build(), 0x20))


def test_empty_batch_after_compaction_advances_the_offset() -> None:
    # A batch whose records were all compacted away keeps its offset range.
    data = bytearray(kiel_batch(sample_specs(1)))
    del data[HEADER_SIZE:]
    struct.pack_into(">i", data, 8, HEADER_SIZE - 12)  # batch length
    struct.pack_into(">i", data, 23, 9)  # last offset delta: ten offsets
    struct.pack_into(">i", data, 57, 0)  # record count
    batch = with_base_offset(restamp(bytes(data)), 30)
    result = decode_record_batches(batch + with_base_offset(kiel_batch(sample_specs(1)), 40))
    assert [r.offset for r in result.records] == [40]
    assert [b.record_count for b in result.batches] == [0, 1]
    assert result.next_offset == 41


def test_old_message_sets_in_the_same_buffer() -> None:
    # A broker serves segments written in the old format as they are.
    legacy = encode_message_set([(b"a", b"old"), (None, b"older")])
    legacy = struct.pack(">q", 0) + legacy[8:]
    second = bytearray(legacy[len(legacy) // 2:])
    legacy = legacy[: len(legacy) - len(second)] + struct.pack(">q", 1) + bytes(second[8:])
    batch = with_base_offset(kiel_batch([(b"b", b"new", TS, [("h", b"1")])]), 2)
    result = decode_record_batches(legacy + batch, "t", 0)
    assert [(r.offset, r.key, r.value) for r in result.records] == [
        (0, b"a", b"old"), (1, None, b"older"), (2, b"b", b"new")]
    assert result.headers == [(), (), (("h", b"1"),)]
    assert result.timestamp_types == [None, None, CREATE_TIME]
    assert result.next_offset == 3 and len(result.batches) == 1


@pytest.mark.parametrize("field, value, match", [
    (57, struct.pack(">i", -1), "record count"),
    (57, struct.pack(">i", 2**31 - 1), "record count"),
    (57, struct.pack(">i", 2), "runs past|does not fit|after the last"),
    (23, struct.pack(">i", -1), "last offset delta"),
    (8, struct.pack(">i", 40), "below the minimum"),
])
def test_bad_header_fields(field: int, value: bytes, match: str) -> None:
    data = bytearray(kiel_batch(sample_specs(1)))
    data[field : field + len(value)] = value
    with pytest.raises(CorruptMessageError, match=match):
        decode_record_batches(restamp(bytes(data)))


def _one_record_batch(record_body: bytes, count: int = 1) -> bytes:
    """A batch whose records section is ``record_body`` as given (CRC made to match)."""
    data = bytearray(kiel_batch([(b"k", b"v", TS, [])]))
    del data[HEADER_SIZE:]
    data += record_body
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">i", data, 57, count)
    return restamp(bytes(data))


@pytest.mark.parametrize("body, error, match", [
    # attributes, timestamp delta, offset delta, key, value, header count
    (_record(b"\x00", b"\x00", b"\x00", encode_varint(-2), b"\x00", b"\x00"),
     CorruptMessageError, "key length -2"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", encode_varint(-3), b"\x00"),
     CorruptMessageError, "value length -3"),
    (_record(b"\x00", b"\x00", b"\x00", encode_varint(50), b"x" * 4, b"\x00"),
     CorruptMessageError, "runs past|does not end"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", encode_varint(-1)),
     CorruptMessageError, "header count"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", encode_varint(1000)),
     CorruptMessageError, "header count"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x02", b"\x04\xff\xfe", b"\x01"),
     ProtocolError, "UTF-8"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x02", encode_varint(-1), b"\x01"),
     CorruptMessageError, "header key length"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x00", b"extra"),
     CorruptMessageError, "does not end at its length"),
    (encode_varint(3) + b"\x00" * 7, CorruptMessageError, "record length 3"),
    (encode_varint(-1) + b"\x00" * 8, CorruptMessageError, "record length -1"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", b"\x01", b"\x00") + b"\x00",
     CorruptMessageError, "after the last record"),
    (_record(b"\x00", b"\xff" * 11, b"\x00", b"\x01", b"\x01", b"\x00"),
     ProtocolError, "longer than 10"),
])
def test_bad_records(body: bytes, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        decode_record_batches(_one_record_batch(body))


@pytest.mark.parametrize("body, error, match", [
    # The same faults with lengths two and three bytes wide (the decoder
    # reads one- and two-byte varints on a path of its own).
    (_record(b"\x00", b"\x00", b"\x00", encode_varint(-200), b"\x00", b"\x00"),
     CorruptMessageError, "key length -200"),
    (_record(b"\x00", b"\x00", b"\x00", encode_varint(-70000), b"\x00", b"\x00"),
     CorruptMessageError, "key length -70000"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", encode_varint(-300), b"\x00"),
     CorruptMessageError, "value length -300"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", encode_varint(-9000), b"\x00"),
     CorruptMessageError, "value length -9000"),
    (_record(b"\x00", b"\x00", b"\x00", encode_varint(100), b"x" * 4, b"\x00"),
     CorruptMessageError, "runs past|does not end"),
    (_record(b"\x00", b"\x00", b"\x00", b"\x01", encode_varint(20000), b"x" * 4, b"\x00"),
     CorruptMessageError, "runs past|does not end"),
    (_record(b"\x00", b"\x00", encode_varint(-70), b"\x01", b"\x01", b"\x00"),
     CorruptMessageError, "offset delta -70 is negative"),
    (_record(b"\x00", b"\x00", encode_varint(9000), b"\x01", b"\x01", b"\x00"),
     CorruptMessageError, "past the batch's last offset delta"),
    (encode_varint(-100) + b"\x00" * 8, CorruptMessageError, "record length -100"),
    (encode_varint(100) + b"\x00" * 8, CorruptMessageError, "record length 100"),
    (encode_varint(10000) + b"\x00" * 8, CorruptMessageError, "record length 10000"),
    # A varint cut by the end of the batch, one and two bytes in.
    (_record(b"\x00", b"\x00", b"\x00", encode_varint(1), b"k", b"\x80"),
     CorruptMessageError, "runs past"),
    (_record(b"\x00", b"\x00", b"\x00", encode_varint(1), b"k", b"\x80\x80"),
     ProtocolError, "runs past"),
])
def test_bad_records_wide_lengths(body: bytes, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        decode_record_batches(_one_record_batch(body))


@pytest.mark.parametrize("size", [0, 1, 63, 64, 8191, 8192, 70000])
def test_every_varint_width_reads_as_kafka_python_reads_it(size: int) -> None:
    # Keys, values, header values and timestamp deltas of one, two and three
    # byte varints (and records past 64 for two-byte offset deltas), each
    # read as kafka-python reads the same batch.
    specs: List[Spec] = [
        (b"k" * size if i % 2 else None, b"v" * size if i % 3 else None,
         TS + (i * size) * (-1 if i % 4 == 1 else 1),
         [("h", b"x" * size)] if i % 5 == 0 else [])
        for i in range(70)
    ]
    data = kiel_batch(specs)
    assert kiel_read(data) == [(o, k, v, ts, tt, h) for o, k, v, ts, tt, h in kp_read(data)]
    assert len(kiel_read(data)) == 70


def test_hand_built_record_is_read() -> None:
    # The grammar, spelled out: a record with a negative timestamp delta,
    # offset delta 0, a null key, a value and one header with a null value.
    body = _record(b"\x00", encode_varint(-5), b"\x00", encode_varint(-1),
                   encode_varint(3) + b"abc", encode_varint(1),
                   encode_varint(1) + b"h", encode_varint(-1))
    result = decode_record_batches(_one_record_batch(body))
    assert result.records == [Record("", -1, 0, None, b"abc", TS - 5, 0, (("h", None),))]
    assert result.headers == [(("h", None),)]


# --------------------------------------------------------------------------
# Hostile bytes: only ProtocolError, bounded work


def only_protocol_errors(data: bytes, check: bool = True) -> None:
    try:
        result = decode_record_batches(data, check_crcs=check)
    except ProtocolError:
        return
    assert len(result.records) == len(result.headers) == len(result.timestamp_types)
    assert result.valid_bytes <= len(data)


@settings(max_examples=500, deadline=None)
@given(junk=st.binary(max_size=400))
def test_random_bytes_only_raise_protocol_errors(junk: bytes) -> None:
    only_protocol_errors(junk)
    only_protocol_errors(junk, check=False)


VALID = {codec: kiel_batch(sample_specs(12), codec) for codec in CODECS}


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_mutated_batches_only_raise_protocol_errors(codec: int, data: Any) -> None:
    packed = bytearray(VALID[codec])
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        pos = data.draw(st.integers(0, len(packed) - 1)) if packed else 0
        if kind == "flip" and packed:
            packed[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "set" and packed:
            packed[pos] = data.draw(st.integers(0, 255))
        elif kind == "insert":
            packed[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and packed:
            del packed[pos : pos + data.draw(st.integers(1, 8))]
        elif kind == "truncate":
            del packed[pos:]
    # Unchecked CRCs let the damage through to the record parser; with a
    # length field fixed up and a fresh CRC, it gets there checked too.
    only_protocol_errors(bytes(packed), check=False)
    if len(packed) >= HEADER_SIZE:
        struct.pack_into(">i", packed, 8, len(packed) - 12)
        only_protocol_errors(restamp(bytes(packed)))


# --------------------------------------------------------------------------
# The builder


def test_builder_size_and_empty() -> None:
    builder = RecordBatchBuilder()
    assert builder.size == 0 and len(builder) == 0 and builder.build() == b""
    sizes = [builder.append(b"k", b"v" * i, timestamp=TS + i) for i in range(300)]
    assert builder.size == HEADER_SIZE + sum(sizes) and len(builder) == 300
    data = builder.build()
    assert len(data) == builder.size
    assert sizes[0] == 8  # length, attributes, delta, offset delta, key 1+1, value 1+1
    # two-byte varints from 64 on: length (of 74), timestamp delta, offset
    # delta, value length; then attributes, key 1+1, value, header count
    assert sizes[64] == 2 + 2 + 2 + 2 + 1 + 2 + 64 + 1


def test_builder_compression_that_does_not_help_is_skipped() -> None:
    incompressible = [(None, os.urandom(50), TS, [])]
    for codec in CODECS[1:]:
        data = kiel_batch(incompressible, codec)
        assert data[22] & 0x07 == CODEC_NONE
        assert data == kiel_batch(incompressible)
    helped = kiel_batch([(None, b"a" * 500, TS, [])], CODEC_ZSTD)
    assert helped[22] & 0x07 == CODEC_ZSTD and len(helped) < 200


def test_builder_header_fields() -> None:
    data = kiel_batch(sample_specs(3), base_offset=77, producer_id=5, producer_epoch=6,
                      base_sequence=9)
    [batch] = decode_record_batches(data).batches
    assert (batch.base_offset, batch.partition_leader_epoch, batch.magic) == (77, -1, 2)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 6, 9)
    assert (batch.last_offset_delta, batch.record_count, batch.last_offset) == (2, 3, 79)
    # timestamps TS, TS - 27, TS - 54: the first is the base and the largest
    assert batch.base_timestamp == TS and batch.max_timestamp == TS
    assert batch.batch_length == len(data) - 12 and batch.crc == crc32c(data[21:])


def test_builder_default_timestamp_is_now() -> None:
    import time

    before = int(time.time() * 1000)
    builder = RecordBatchBuilder()
    builder.append(None, b"v")
    after = int(time.time() * 1000)
    [record] = decode_record_batches(builder.build()).records
    assert before <= record.timestamp <= after


@pytest.mark.parametrize("call", [
    lambda b: b.append("text", b"v", timestamp=TS),
    lambda b: b.append(None, 5, timestamp=TS),
    lambda b: b.append(None, b"v", timestamp=1.5),
    lambda b: b.append(None, b"v", timestamp=2**63),
    lambda b: b.append(None, b"v", timestamp=True),
    lambda b: b.append(None, b"v", timestamp=TS, headers=[(b"bytes key", b"v")]),
    lambda b: b.append(None, b"v", timestamp=TS, headers=[("k", "str value")]),
    lambda b: b.append(None, b"v", timestamp=TS, headers=[("k",)]),
    lambda b: b.append(None, b"v", timestamp=TS, headers=5),
    lambda b: b.append(None, b"v", timestamp=TS, headers=[("\ud800", b"")]),
])
def test_builder_refuses_what_the_wire_cannot_carry(call: Any) -> None:
    builder = RecordBatchBuilder()
    with pytest.raises(LocalProtocolError):
        call(builder)
    assert len(builder) == 0


def test_builder_options() -> None:
    with pytest.raises(UnsupportedCodecError):
        RecordBatchBuilder(7)
    with pytest.raises(ConfigError):
        RecordBatchBuilder(timestamp_type=2)
    with pytest.raises(ConfigError):
        RecordBatchBuilder(CODEC_GZIP, compresslevel=12)
    builder = RecordBatchBuilder(producer_epoch=2**15)
    builder.append(None, b"v", timestamp=TS)
    with pytest.raises(LocalProtocolError, match="does not fit"):
        builder.build()
    level = kiel_batch([(None, b"ab" * 500, TS, [])], CODEC_GZIP, compresslevel=1)
    assert decode_record_batches(level).records[0].value == b"ab" * 500


def test_bytes_like_keys_values_and_memoryviews() -> None:
    builder = RecordBatchBuilder()
    builder.append(bytearray(b"k"), memoryview(b"xvx")[1:2], timestamp=TS,
                   headers=[("h", bytearray(b"1"))])
    [record] = decode_record_batches(builder.build()).records
    assert (record.key, record.value) == (b"k", b"v")
    result = decode_record_batches(memoryview(builder.build()))
    assert result.headers == [(("h", b"1"),)]
    with pytest.raises(ConfigError):
        decode_record_batches("text")  # type: ignore[arg-type]


def test_encode_record_batch() -> None:
    data = encode_record_batch([(b"k", b"v"), Record("t", 0, 0, None, b"w", TS - 1),
                                Record("t", 0, 0, b"x", None)], CODEC_LZ4, timestamp=TS)
    result = decode_record_batches(data)
    assert [(r.key, r.value, r.timestamp) for r in result.records] == [
        (b"k", b"v", TS), (None, b"w", TS - 1), (b"x", None, TS)]
    assert encode_record_batch([]) == b""
    with pytest.raises(LocalProtocolError):
        encode_record_batch([b"not a pair"])  # type: ignore[list-item]


def test_decoded_bytes_budget_spans_every_compressed_batch_and_old_entry() -> None:
    # Each compressed batch decompresses to under the budget on its own (a
    # per-call cap lets this through); together they exceed it and are
    # refused, old gzip wrappers in the same answer included.
    parts = []
    for base in (0, 2):
        builder = RecordBatchBuilder(CODEC_GZIP, base_offset=base)
        for _ in range(2):
            builder.append(None, b"\0" * 30_000, timestamp=1)
        parts.append(builder.build())
    old, _ = assign_offsets(encode_message_set([(None, b"\0" * 30_000)] * 2, 1), 4)
    data = b"".join(parts) + old
    assert len(decode_record_batches(data).records) == 6
    assert len(decode_record_batches(data, max_decoded=200_000).records) == 6
    with pytest.raises(CompressionError):
        decode_record_batches(data, max_decoded=150_000)  # the old entry goes past it
    with pytest.raises(CompressionError):
        decode_record_batches(data, max_decoded=100_000)  # the second batch goes past it


def test_both_decoders_take_the_parameters_declared_once() -> None:
    # decode_message_set and decode_record_batches show and check the
    # parameters of log_format.decode_arguments (one declaration, two formats).
    import inspect

    from kiel.protocol.log_format import decode_arguments
    from kiel.protocol.messages import decode_message_set

    declared = inspect.signature(decode_arguments).parameters
    for decode in (decode_message_set, decode_record_batches):
        assert inspect.signature(decode).parameters == declared
        assert decode(b"", "t", 0, min_offset=5, open_compressed=True).records == []
        with pytest.raises(TypeError):
            decode(b"", "t", 0, check_crc=False)  # misspelt
        with pytest.raises(TypeError):
            decode(b"", "t", 0, None)  # the options are keyword-only
        with pytest.raises(ConfigError):
            decode("not bytes")


# --------------------------------------------------------------------------
# Offsets inside a batch (issue #23, defect 4)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize("deltas, last_delta, bad_at, match", [
    ([0, 1, 1], 2, 102, "do not increase"),           # a delta repeats
    ([5, 3, 4], 5, 106, "do not increase"),           # goes backwards (after 105: 103)
    ([0, 2147483647], 2, 101, "past the batch's last"),  # far past the header's last delta
    ([0, 1, 3], 2, 102, "past the batch's last"),      # just past it
    ([-1, 0], 1, 100, "negative"),                    # before the base offset
])
def test_record_offsets_must_increase_within_the_header_s_last_delta(
    codec: int, deltas: List[int], last_delta: int, bad_at: int, match: str
) -> None:
    data = batch_with_deltas(deltas, last_delta, 100, codec)
    with pytest.raises(CorruptMessageError, match=match) as info:
        decode_record_batches(data, "t", 0)
    # The error is at the first bad record: where the good ones end.
    assert info.value.offset == bad_at


def test_record_offsets_with_gaps_within_the_last_delta_are_kept() -> None:
    # Compaction leaves gaps, and may remove the last record: both are valid.
    data = batch_with_deltas([0, 3, 4, 9], 12, 100) + batch_with_deltas([0], 0, 113)
    result = decode_record_batches(data, "t", 0)
    assert [r.offset for r in result.records] == [100, 103, 104, 109, 113]
    assert result.next_offset == 114


def test_a_slice_that_does_not_go_on_where_the_last_ended_still_checks_offsets() -> None:
    from kiel.protocol.record_batch import OpenBatch, decode_batch_slice

    data = batch_with_deltas([0, 1, 2, 2], 3, 10, CODEC_GZIP)
    opened = decode_record_batches(data, open_compressed=True).opened
    assert opened is not None
    first = decode_batch_slice(opened, 0, 0, 1)
    second = decode_batch_slice(opened, first.position, first.read, 1)
    third = decode_batch_slice(opened, second.position, second.read, 1)
    assert [r.offset for r in first.records + second.records + third.records] == [10, 11, 12]
    # A fresh cursor over the same records, at the fourth: the offsets
    # before it are read again to know where they stood.
    again = OpenBatch(opened.header, opened.data)
    with pytest.raises(CorruptMessageError, match="do not increase") as info:
        decode_batch_slice(again, third.position, third.read, 1)
    assert info.value.offset == 13


# --------------------------------------------------------------------------
# Large batches opened pending (issue #23, defect 6)


@pytest.mark.parametrize("codec", CODECS[1:], ids=CODEC_IDS[1:])
def test_a_batch_too_large_to_inflate_inline_is_opened_pending(codec: int) -> None:
    from kiel.protocol.record_batch import decode_batch_slice, open_record_batches

    specs = [(None, b"%06d" % i + b"v" * 994, TS + i, []) for i in range(3000)]  # 3 MB
    small = with_base_offset(kiel_batch(sample_specs(5)), 0)  # uncompressed
    big = with_base_offset(kiel_batch(specs, codec), 5)
    head = open_record_batches(small + big, "t", 0, inline_decoded=1 << 20)
    # The small batch decoded as usual; the large one opened, still compressed.
    assert [r.offset for r in head.records] == list(range(5))
    opened = head.opened
    assert opened is not None and opened.pending and opened.data == b""
    data = opened.decompress()  # what a caller runs in another thread
    opened.inflated(data)
    assert not opened.pending and len(opened.data) > 3_000_000
    with pytest.raises(ConfigError):
        opened.decompress()  # nothing left to decompress
    sliced = decode_batch_slice(opened, 0, 0, 1 << 30, "t", 0)
    assert sliced.done and sliced.records == decode_record_batches(big, "t", 0).records


def test_a_pending_batch_keeps_the_decode_s_budget_and_its_errors() -> None:
    from kiel.protocol.record_batch import open_record_batches

    zeros = with_base_offset(kiel_batch([(None, b"\0" * 3_000_000, TS, [])], CODEC_GZIP), 0)
    head = open_record_batches(zeros, max_decoded=2_000_000, inline_decoded=1 << 20)
    assert head.opened is not None and head.opened.pending
    with pytest.raises(CompressionError):  # past what was left of max_decoded
        head.opened.decompress()
    # A payload that does not inflate at all fails the same way, off the loop.
    bad = bytearray(zeros)
    bad[HEADER_SIZE + 20: HEADER_SIZE + 40] = b"\xff" * 20
    head = open_record_batches(restamp(bytes(bad)), inline_decoded=1 << 10)
    assert head.opened is not None and head.opened.pending
    with pytest.raises(CompressionError):
        head.opened.decompress()


_MIXED_PAIRS: List[Tuple[Any, Any]] = [
    (None, b"v%d" % i) if i % 3 else (b"k", None) for i in range(9000)
] + [(b"", b"x" * 9000), (bytearray(b"kb"), memoryview(b"mv")), (None, None)]


@pytest.mark.parametrize("pairs", [
    _MIXED_PAIRS,
    # The plain kind a producer sends (no key, bytes values): values around
    # the one/two-byte varint edges, offset deltas up to and past 8192.
    [(None, b"p" * (i % 200)) for i in range(300)],
    [(None, b"q" * 7999), (None, b"")],
    [(None, b"r")] * 8190,
    [(None, b"s")] * 8191,
    [(None, b"t" * 8000)],
    [[None, b"a list, not a tuple"]],
], ids=["mixed", "plain", "edges", "8191", "8192", "long", "list"])
def test_extend_builds_what_append_builds(pairs: List[Any]) -> None:
    # extend() (the producer's plain batches) against append() per record:
    # the same bytes, size and count, across one-, two- and three-byte
    # varints (record counts past 8192, lengths past 8 KiB), null keys and
    # values, bytes-like values, after records appended one by one.
    one, many = RecordBatchBuilder(), RecordBatchBuilder()
    for builder in (one, many):
        builder.append(b"first", b"1", timestamp=TS - 5)
    for key, value in pairs:
        one.append(key, value, timestamp=TS)
    before = many.size
    assert many.extend(pairs, timestamp=TS) == many.size - before
    assert (many.build(), many.size, len(many)) == (one.build(), one.size, len(one))


@pytest.mark.parametrize("items, match", [
    ([(None, b"ok"), (None, "text")], "must be bytes"),
    ([(None, b"ok"), b"not a pair"], "pairs"),
])
def test_extend_refuses_what_the_wire_cannot_carry(items: List[Any], match: str) -> None:
    builder = RecordBatchBuilder()
    with pytest.raises(LocalProtocolError, match=match):
        builder.extend(items, timestamp=TS)
    # The records before the bad one are in, and the batch stays whole.
    assert len(builder) == 1
    assert [r.value for r in decode_record_batches(builder.build()).records] == [b"ok"]
