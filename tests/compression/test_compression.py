"""Tests for kiel.compression: conformance with kafka-python and librdkafka
(kcat), round trips, hostile input and the missing-extra error."""
import base64
import gzip as stdlib_gzip
import hashlib
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiel import compression
from kiel.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from kiel.compression._xxh32 import xxh32
from kiel.compression.lz4 import LZ4_FRAME_MAGIC, header_checksum
from kiel.compression.snappy import XERIAL_HEADER, XERIAL_MAGIC
from kiel.compression.zstd import ZSTD_FRAME_MAGIC
from kiel.exc import (
    CompressionError,
    ConfigError,
    KielError,
    LocalProtocolError,
    ProtocolError,
    UnsupportedCodecError,
)
from tests.support.compression import patch_kafka_codec

REPO = Path(__file__).resolve().parents[2]

# The test extra installs cramjam: a missing one fails here, loudly.
import cramjam  # noqa: E402

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED = [c for c in CODECS if c != NONE]
#: What a message set (magic 0/1) may carry, so what kcat's legacy mode writes.
MESSAGE_SET_CODECS = [GZIP, SNAPPY, LZ4]

#: Codec options worth round-tripping, per codec.
OPTIONS = {
    NONE: [{}],
    GZIP: [{}, {"level": 0}, {"level": 1}, {"level": 9}],
    SNAPPY: [{}, {"xerial": False}, {"block_size": 7}, {"block_size": 1024}],
    LZ4: [{}, {"magic": 1}],
    ZSTD: [{}, {"level": 1}, {"level": 19}],
}


def sample(seed: int, size: int) -> bytes:
    """Deterministic test data mixing random runs (incompressible) and repeats."""
    rnd = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        if rnd.random() < 0.5:
            out += rnd.randbytes(rnd.randint(1, 300))
        else:
            out += bytes([rnd.randrange(256)]) * rnd.randint(1, 300)
    return bytes(out[:size])


# --------------------------------------------------------------------------
# kafka-python's codec module, made usable without its optional C extensions.


@pytest.fixture
def kafka_codec(monkeypatch):
    """kafka.codec with shims (see :func:`patch_kafka_codec`)."""
    return patch_kafka_codec(monkeypatch)


# --------------------------------------------------------------------------
# Registry


def test_codec_ids_and_names():
    assert (NONE, GZIP, SNAPPY, LZ4, ZSTD) == (0, 1, 2, 3, 4)
    assert compression.CODEC_MASK == 0x07
    assert compression.CODEC_NAMES == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
    for name, codec_id in compression.CODEC_NAMES.items():
        assert compression.codec_id_for(name.upper()) == codec_id
    for cid in CODECS:
        codec = compression.get_codec(cid)
        assert codec.codec_id == cid
        assert compression.get_codec(cid) is codec  # shared default instance
        assert compression.is_available(cid)
        assert repr(codec).startswith("<")


@pytest.mark.parametrize("bad", [5, 6, 7, -1, 8, 255, "gzip", None, 1.0, True])
def test_unknown_codec_id(bad):
    with pytest.raises(UnsupportedCodecError) as info:
        compression.get_codec(bad)
    assert isinstance(info.value, ProtocolError)
    assert repr(bad) in str(info.value)
    with pytest.raises(UnsupportedCodecError):
        compression.decompress(bad, b"abc")
    with pytest.raises(UnsupportedCodecError):
        compression.compress(bad, b"abc")
    assert not compression.is_available(bad)


@pytest.mark.parametrize("name", ["zstd", "", "gzip9", None, 1])
def test_unknown_codec_name(name):
    # zstd exists for record batches only: a message set (magic 0/1) cannot carry it.
    with pytest.raises(ConfigError):
        compression.codec_id_for(name)


def test_zstd_is_named_for_record_batches():
    assert compression.codec_id_for("ZSTD", magic=2) == ZSTD
    for name, codec_id in compression.CODEC_NAMES.items():
        assert compression.codec_id_for(name, magic=2) == codec_id
    with pytest.raises(ConfigError, match="zstd"):
        compression.codec_id_for("brotli", magic=2)


@pytest.mark.parametrize(
    "codec_id, options",
    [
        (GZIP, {"level": 10}),
        (GZIP, {"level": -1}),
        (GZIP, {"level": "6"}),
        (GZIP, {"level": True}),
        (GZIP, {"max_output_size": 0}),
        (GZIP, {"max_output_size": 1.5}),
        (GZIP, {"nonsense": 1}),
        (NONE, {"level": 1}),
        pytest.param(SNAPPY, {"block_size": 0}),
        pytest.param(SNAPPY, {"block_size": None}),
        pytest.param(LZ4, {"magic": 2}),
        pytest.param(LZ4, {"magic": False}),
        pytest.param(LZ4, {"magic": 0.0}),
        pytest.param(LZ4, {"magic": [0]}),
        pytest.param(ZSTD, {"level": 0}),
        pytest.param(ZSTD, {"level": 23}),
        pytest.param(ZSTD, {"level": "3"}),
    ],
)
def test_bad_options(codec_id, options):
    with pytest.raises(ConfigError):
        compression.get_codec(codec_id, **options)


def test_options_build_new_instances():
    codec = compression.get_codec(GZIP, level=9)
    assert codec.level == 9 and codec is not compression.get_codec(GZIP, level=9)
    assert compression.get_codec(GZIP).level == compression.DEFAULT_GZIP_LEVEL == 6


@pytest.mark.parametrize("codec_id", CODECS)
def test_str_is_not_bytes(codec_id):
    for call in (compression.compress, compression.decompress):
        with pytest.raises(LocalProtocolError):
            call(codec_id, "text")
        with pytest.raises(LocalProtocolError):
            call(codec_id, 12)


@pytest.mark.parametrize("codec_id", CODECS)
def test_accepts_any_bytes_like(codec_id):
    data = sample(7, 5000)
    packed = compression.compress(codec_id, data)
    for wrap in (bytes, bytearray, memoryview, lambda b: memoryview(b"xx" + b + b"yy")[2:-2]):
        assert compression.compress(codec_id, wrap(data)) == packed
        assert compression.decompress(codec_id, wrap(packed)) == data
    # a non-byte format is read as its raw bytes
    words = memoryview(bytearray(data[:4000])).cast("I")
    assert compression.decompress(codec_id, compression.compress(codec_id, words)) == data[:4000]


# --------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize("codec_id", CODECS)
@pytest.mark.parametrize(
    "data",
    [b"", b"a", sample(1, 65535), sample(2, 65536), sample(3, 65537), sample(4, 300_000),
     bytes(200_000), os.urandom(150_000)],
    ids=["empty", "one", "64k-1", "64k", "64k+1", "300k", "zeros", "random"],
)
def test_round_trip_sizes(codec_id, data):
    for options in OPTIONS[codec_id]:
        packed = compression.compress(codec_id, data, **options)
        assert isinstance(packed, bytes)
        assert compression.decompress(codec_id, packed) == data
        assert type(compression.decompress(codec_id, packed)) is bytes


@pytest.mark.parametrize("codec_id", CODECS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=4096), option=st.integers(min_value=0, max_value=10))
def test_round_trip_property(codec_id, data, option):
    options = OPTIONS[codec_id][option % len(OPTIONS[codec_id])]
    codec = compression.get_codec(codec_id, **options)
    assert codec.decompress(codec.compress(data)) == data


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=3000), block_size=st.integers(min_value=1, max_value=5000))
def test_snappy_xerial_block_structure(data, block_size):
    packed = compression.compress(SNAPPY, data, block_size=block_size)
    assert packed[:16] == XERIAL_HEADER
    pos, blocks = 16, []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(packed[pos + 4:pos + 4 + length])))
        pos += 4 + length
    assert pos == len(packed)
    assert blocks == [data[i:i + block_size] for i in range(0, len(data), block_size)]


def test_gzip_is_deterministic_and_leveled():
    data = sample(5, 100_000)
    assert compression.compress(GZIP, data) == compression.compress(GZIP, data)
    sizes = [len(compression.compress(GZIP, data, level=lvl)) for lvl in (0, 1, 6, 9)]
    assert sizes[0] > len(data) and sizes[1] >= sizes[2] >= sizes[3]
    packed = compression.compress(GZIP, data)
    assert packed[:4] == b"\x1f\x8b\x08\x00" and packed[4:8] == bytes(4)  # no name, mtime 0
    assert stdlib_gzip.decompress(packed) == data


def test_gzip_concatenated_members_and_padding():
    parts = [b"first ", b"", sample(6, 70_000), b"last"]
    stream = b"".join(stdlib_gzip.compress(p) for p in parts)
    assert compression.decompress(GZIP, stream) == b"".join(parts)
    assert compression.decompress(GZIP, stream + bytes(100)) == b"".join(parts)
    with pytest.raises(CompressionError, match="gzip"):
        compression.decompress(GZIP, stream + b"garbage")
    with pytest.raises(CompressionError, match="truncated"):
        compression.decompress(GZIP, stream + stdlib_gzip.compress(b"cut")[:-3])


# --------------------------------------------------------------------------
# Conformance with kafka-python (kafka.codec)


def test_xxh32_reference_vectors():
    # From the xxHash reference implementation (XXH32, seed 0 unless given).
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"", seed=1) == 0x0B2CB792
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    try:
        import xxhash
    except ImportError:
        return
    for n in range(0, 80):
        data = os.urandom(n)
        assert xxh32(data) == xxhash.xxh32(data).intdigest()


def test_lz4_header_checksums():
    # Kafka 0.8.2 (KafkaLZ4BlockOutputStream), librdkafka for magic 0 and
    # kafka-python's lz4_encode_old_kafka all write 04 22 4d 18 60 40 1a.
    assert header_checksum(b"\x60\x40", kafka_0_8=True) == 0x1A
    assert header_checksum(b"\x60\x40", kafka_0_8=False) == 0x82  # the LZ4 spec's value


def test_lz4_headers_written():
    assert compression.compress(LZ4, b"")[:7] == bytes.fromhex("04224d1860401a")
    assert compression.compress(LZ4, b"", magic=1)[:7] == bytes.fromhex("04224d18604082")


def test_lz4_header_checksum_is_checked_on_every_frame():
    # The checksums of a descriptor are computed once and kept: every frame
    # is still checked against them, the second time round too.
    frame = compression.compress(LZ4, b"kiel")
    for _ in range(2):
        for hc in range(256):
            other = frame[:6] + bytes((hc,)) + frame[7:]
            if hc in (0x1A, 0x82):  # Kafka 0.8's and the spec's, for FLG 60 BD 40
                assert compression.decompress(LZ4, other) == b"kiel"
            else:
                with pytest.raises(CompressionError, match="header checksum"):
                    compression.decompress(LZ4, other)


@pytest.mark.parametrize("level", [1, 6, 9])
def test_gzip_both_ways(kafka_codec, level):
    for data in (b"", sample(8, 1), sample(9, 100_000)):
        assert compression.decompress(GZIP, kafka_codec.gzip_encode(data, level)) == data
        assert kafka_codec.gzip_decode(compression.compress(GZIP, data, level=level)) == data


@pytest.mark.parametrize("block_size", [32 * 1024, 1024, 100, 1])
def test_snappy_xerial_equals_kafka_python(kafka_codec, block_size):
    for data in (b"", b"kiel", sample(10, 1000), sample(11, 200_000), os.urandom(40_000)):
        if block_size == 1 and len(data) > 1000:
            continue
        ours = compression.compress(SNAPPY, data, block_size=block_size)
        assert ours == kafka_codec.snappy_encode(data, xerial_blocksize=block_size)
        theirs = kafka_codec.snappy_encode(data, True, block_size)
        assert compression.decompress(SNAPPY, theirs) == data
        if data:  # kafka-python reads a header-only stream (empty payload) as a raw block
            assert kafka_codec.snappy_decode(ours) == data
    assert compression.compress(SNAPPY, sample(12, 5000), xerial=False) == (
        kafka_codec.snappy_encode(sample(12, 5000), xerial_compatible=False)
    )


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=5000), block_size=st.integers(min_value=1, max_value=6000))
def test_snappy_xerial_equals_kafka_python_property(kafka_codec, data, block_size):
    ours = compression.compress(SNAPPY, data, block_size=block_size)
    assert ours == kafka_codec.snappy_encode(data, xerial_blocksize=block_size)
    assert compression.decompress(SNAPPY, kafka_codec.snappy_encode(data, True, block_size)) == data


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=5000))
def test_kafka_python_reads_ours_property(kafka_codec, data):
    assert kafka_codec.gzip_decode(compression.compress(GZIP, data)) == data
    assert kafka_codec.lz4_decode_old_kafka(compression.compress(LZ4, data)) == data
    if data:
        assert kafka_codec.snappy_decode(compression.compress(SNAPPY, data)) == data
    assert kafka_codec.snappy_decode(compression.compress(SNAPPY, data, xerial=False)) == data


def test_snappy_xerial_version_fields_ignored():
    data = sample(13, 10_000)
    body = compression.compress(SNAPPY, data)[16:]
    for version, compat in ((1, 1), (0x01000000, 0x01000000), (2, 0)):  # little-endian writers too
        stream = XERIAL_MAGIC + struct.pack(">ii", version, compat) + body
        assert compression.decompress(SNAPPY, stream) == data
    assert compression.decompress(SNAPPY, XERIAL_HEADER) == b""


#: (length, sha256) of kafka.codec.lz4_encode_old_kafka(input) from kafka-python
#: 3.0.12 with lz4 4.4.5 and xxhash 4.1.0 (inputs: LZ4_GOLDEN_INPUTS). A
#: mismatch after a cramjam upgrade would mean its liblz4 compresses blocks
#: differently (still valid LZ4), not that the framing broke: the framing is
#: checked on its own in test_lz4_frame_layout.
LZ4_OLD_KAFKA_GOLDEN = {
    "empty": (11, "2121ebd5e5359c64e56adc51860ab89d42331cfa2d5596887ed4cf124f8a7264"),
    "short": (19, "2abaacf00f63807e7b1daff0c0b7413a3d4941a80d7ba83b74aeec339b7366d7"),
    "mixed_1k": (558, "c342c88aee39c273b390410452558e743ccfbb2b4dd0fbfef0873c953ecac324"),
    "mixed_200k": (105812, "fb1fd95e70a03cde2a186707e29377586968997b2044f0359d3a7928fdeffc06"),
    "random_70k": (70019, "fdf81cac7732a8ef03f4b8d32a1ff77334749c7e8fb44055b343dd9fc18d409e"),
    "one_block": (282, "12ba507aaf371000b4637408b806d10df3a5e9549addf07fbc522908db4fdff6"),
}
LZ4_GOLDEN_INPUTS = {
    "empty": lambda: b"",
    "short": lambda: b"kiel",
    "mixed_1k": lambda: sample(1, 1000),
    "mixed_200k": lambda: sample(2, 200_000),
    "random_70k": lambda: random.Random(3).randbytes(70_000),
    "one_block": lambda: b"x" * 65536,
}


@pytest.mark.parametrize("name", sorted(LZ4_OLD_KAFKA_GOLDEN))
def test_lz4_equals_kafka_python_old_kafka(kafka_codec, name):
    data = LZ4_GOLDEN_INPUTS[name]()
    ours = compression.compress(LZ4, data)
    assert (len(ours), hashlib.sha256(ours).hexdigest()) == LZ4_OLD_KAFKA_GOLDEN[name]
    # kafka-python's reader (fixing the header up, then liblz4) reads ours...
    assert kafka_codec.lz4_decode_old_kafka(ours) == data
    # ...and liblz4 reads our magic-1 frames as they are.
    assert bytes(cramjam.lz4.decompress(compression.compress(LZ4, data, magic=1))) == data
    if kafka_codec.lz4_encode is not None:  # the real python-lz4 is installed
        assert ours == kafka_codec.lz4_encode_old_kafka(data)
        assert compression.decompress(LZ4, kafka_codec.lz4_encode_old_kafka(data)) == data
        assert compression.decompress(LZ4, kafka_codec.lz4_encode(data)) == data


def test_lz4_old_kafka_literal():
    # kafka.codec.lz4_encode_old_kafka(b"kiel"), verbatim: header with the
    # KAFKA-3160 checksum, one stored (uncompressed) block, end mark.
    frame = bytes.fromhex("04224d1860401a040000806b69656c00000000")
    if cramjam is not None:
        assert compression.compress(LZ4, b"kiel") == frame
        assert compression.decompress(LZ4, frame) == b"kiel"


def test_lz4_frame_layout():
    data = sample(14, 200_000)
    frame = compression.compress(LZ4, data)
    assert frame[:7] == bytes.fromhex("04224d1860401a")
    assert frame[-4:] == bytes(4)
    pos, out = 7, b""
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if not word:
            break
        size = word & 0x7FFFFFFF
        block = frame[pos:pos + size]
        pos += size
        assert size <= 65536
        if word & 0x80000000:
            out += block
        else:
            scratch = bytearray(65536)
            out += scratch[:cramjam.lz4.decompress_block_into(block, scratch)]
    assert pos == len(frame)
    assert out == data
    assert compression.get_codec(LZ4, magic=1).compress(data)[7:] == frame[7:]


def test_lz4_reads_other_frame_options():
    data = sample(15, 150_000)
    good = compression.compress(LZ4, data, magic=1)
    blocks = good[7:-4]

    def frame(flg, bd, extra=b"", body=blocks, tail=b""):
        desc = bytes((flg, bd)) + extra
        checksum = bytes((header_checksum(desc, False),))
        return LZ4_FRAME_MAGIC + desc + checksum + body + bytes(4) + tail

    # content size + content checksum (unverified but skipped correctly)
    sized = frame(0x6C, 0x40, struct.pack("<Q", len(data)), tail=b"\xde\xad\xbe\xef")
    assert compression.decompress(LZ4, sized) == data
    assert bytes(cramjam.lz4.decompress(frame(0x68, 0x40, struct.pack("<Q", len(data))))) == data
    with pytest.raises(CompressionError, match="header says"):
        compression.decompress(LZ4, frame(0x68, 0x40, struct.pack("<Q", len(data) + 1)))
    # a larger block maximum (256 KiB) with our 64 KiB blocks is fine
    assert compression.decompress(LZ4, frame(0x60, 0x50)) == data
    # block checksums: 4 bytes after each block
    with_sums, pos = b"", 0
    while pos < len(blocks):
        (word,) = struct.unpack_from("<I", blocks, pos)
        size = word & 0x7FFFFFFF
        with_sums += blocks[pos:pos + 4 + size] + b"\x00\x00\x00\x00"
        pos += 4 + size
    assert compression.decompress(LZ4, frame(0x70, 0x40, body=with_sums)) == data
    # rejected: linked blocks, dictionary id, bad version, reserved bits, bad HC
    for flg, bd, match in ((0x40, 0x40, "linked"), (0x61, 0x40, "dictionary"),
                           (0xA0, 0x40, "version"), (0x62, 0x40, "reserved"),
                           (0x60, 0x41, "reserved"), (0x60, 0x30, "block maximum")):
        with pytest.raises(CompressionError, match=match):
            compression.decompress(LZ4, frame(flg, bd))
    broken = bytearray(good)
    broken[6] ^= 0xFF
    with pytest.raises(CompressionError, match="header checksum"):
        compression.decompress(LZ4, bytes(broken))


# --------------------------------------------------------------------------
# librdkafka (kcat): payloads captured from kcat 1.7.1 / librdkafka 2.0.2
# producing ten messages "kcat message N: hello hello hello" with
# api.version.request=false, broker.version.fallback=0.8.2 (magic 0) to a fake
# 0.8 broker. Each is the value of the wrapper message; all three decode to
# the same inner message set.

KCAT_VALUES = {
    GZIP: (
        "H4sIAAAAAAAAA2NggAP95twCVgaG/0AA5ClmJyeWKOSmFhcnpqcqGFopZKTm5OQjk1BtjCCtOkdsz+PQaoRbKxNIq+dit"
        "k4cWo1xa2UGaV3xfIEUDq0muLWygLSebZgdg0OrKW6trCCtSZrXpuHQaoZbKxtIK7vf2ws4tJrj1soO0lp9ce5HHFotcG"
        "vlAGmV27ZsOw6tlri1cgKxgWVesB9cqxJqkjDAohcAMthq9U8CAAA="
    ),
    SNAPPY: (
        "zwQAABkBkC+DbXAFAAD/////AAAAIWtjYXQgbWVzc2FnZSAxOiBoZWxsbyAdBg06IAEAAAAvLMQ9z1o7AAAyZjsAAAIBO"
        "wxJowaJWjsAADNmOwAAAwE7DKjnoBpaOwAANGY7AAAEATsMzYCbXFo7AAA1ZjsAAAUBOwxiKdaWWjsAADZmOwAABgE7DA"
        "dO7dBaOwAAN2Y7AAAHATsMe9Gd8Vo7AAA4ZjsAAAgBOwwetqa3WjsAADlmOwAgCQAAADA5blNOFTsEImsyEwIAMEo8AA=="
    ),
    LZ4: (
        "BCJNGGBAGtIAAAAWAAEA+BUvg21wBQAA/////wAAACFrY2F0IG1lc3NhZ2UgMTogaGVsbG8GAAM6AJ8BAAAALyzEPc87A"
        "AQfMjsABxACOwBPSaMGiTsABB8zOwAHEAM7AE+o56AaOwAEHzQ7AAcQBDsAT82Am1w7AAQfNTsABxAFOwBPYinWljsABB"
        "82OwAHEAY7AE8HTu3QOwAEHzc7AAcQBzsAT3vRnfE7AAQfODsABxAIOwBPHramtzsABB85OwAHlQkAAAAwOW5TTjsAGiI"
        "TAhowPABQaGVsbG8AAAAA"
    ),
}


def _inner_values(message_set):
    """The values of an uncompressed magic-0 message set (just enough parsing for the test)."""
    values, pos = [], 0
    while pos < len(message_set):
        _offset, size = struct.unpack_from(">qi", message_set, pos)
        message = message_set[pos + 12:pos + 12 + size]
        _crc, magic, attributes, key_len = struct.unpack_from(">ibbi", message, 0)
        assert (magic, attributes, key_len) == (0, 0, -1)
        (value_len,) = struct.unpack_from(">i", message, 10)
        values.append(message[14:14 + value_len])
        pos += 12 + size
    return values


@pytest.mark.parametrize("codec_id", MESSAGE_SET_CODECS)
def test_decodes_kcat_payloads(codec_id):
    value = base64.b64decode(KCAT_VALUES[codec_id])
    if codec_id == SNAPPY:
        assert not value.startswith(XERIAL_MAGIC)  # librdkafka writes raw blocks
    if codec_id == LZ4:
        assert value[:7] == bytes.fromhex("04224d1860401a")  # KAFKA-3160 checksum
    inner = compression.decompress(codec_id, value)
    assert inner == compression.decompress(GZIP, base64.b64decode(KCAT_VALUES[GZIP]))
    assert _inner_values(inner) == [
        f"kcat message {i}: hello hello hello".encode() for i in range(1, 11)
    ]


class _FakeLegacyBroker:
    """Just enough of a Kafka 0.8 broker for kcat to produce one message set.

    Answers Metadata v0 (one broker, topic ``t`` with partition 0) and
    Produce v0 (no error), and keeps the message sets it was sent.
    """

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.message_sets = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @staticmethod
    def _read(conn, size):
        buf = b""
        while len(buf) < size:
            chunk = conn.recv(size - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _serve(self):
        def string(value):
            return struct.pack(">h", len(value)) + value

        conn, _ = self.listener.accept()
        with conn:
            while True:
                try:
                    (size,) = struct.unpack(">i", self._read(conn, 4))
                    request = self._read(conn, size)
                except (EOFError, OSError):
                    return
                api_key, _version, correlation_id, client_len = struct.unpack_from(">hhih", request)
                pos = 10 + client_len
                if api_key == 3:  # Metadata v0
                    body = struct.pack(">ii", 1, 0) + string(b"127.0.0.1")
                    body += struct.pack(">i", self.port)
                    body += struct.pack(">ih", 1, 0) + string(b"t")
                    body += struct.pack(">ihiiiiii", 1, 0, 0, 0, 1, 0, 1, 0)
                elif api_key == 0:  # Produce v0
                    pos += 2 + 4 + 4  # acks, timeout, topic count
                    (topic_len,) = struct.unpack_from(">h", request, pos)
                    pos += 2 + topic_len + 4 + 4  # topic, partition count, partition
                    (set_size,) = struct.unpack_from(">i", request, pos)
                    self.message_sets.append(request[pos + 4:pos + 4 + set_size])
                    body = struct.pack(">i", 1) + string(b"t") + struct.pack(">iihq", 1, 0, 0, 0)
                    self.done.set()
                else:
                    return
                response = struct.pack(">i", correlation_id) + body
                conn.sendall(struct.pack(">i", len(response)) + response)

    def close(self):
        self.listener.close()


@pytest.mark.interop
@pytest.mark.parametrize("codec_id", MESSAGE_SET_CODECS)
def test_kcat_live(codec_id):
    name = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4"}[codec_id]
    broker = _FakeLegacyBroker()
    lines = [f"live {name} {i} " + "padding " * 8 for i in range(20)]
    try:
        subprocess.run(
            ["kcat", "-P", "-b", f"127.0.0.1:{broker.port}", "-t", "t", "-p", "0", "-z", name,
             "-X", "api.version.request=false", "-X", "broker.version.fallback=0.8.2",
             "-X", "linger.ms=50"],
            input="\n".join(lines).encode(), timeout=30, check=True, capture_output=True,
        )
        assert broker.done.wait(10)
    finally:
        broker.close()
    (message_set,) = broker.message_sets
    # the wrapper message: offset, size, crc, magic 0, attributes = codec, key -1, value
    _offset, _size, _crc, magic, attributes, key_len, value_len = struct.unpack_from(
        ">qiibbii", message_set
    )
    assert (magic, attributes & 7, key_len) == (0, codec_id, -1)
    value = message_set[26:26 + value_len]
    assert _inner_values(compression.decompress(codec_id, value)) == [s.encode() for s in lines]


# --------------------------------------------------------------------------
# Hostile input: only CompressionError, bounded memory


@pytest.mark.parametrize("codec_id", COMPRESSED)
@settings(max_examples=300, deadline=None)
@given(junk=st.binary(max_size=2000))
def test_random_bytes_only_raise_compression_error(codec_id, junk):
    try:
        compression.decompress(codec_id, junk, max_output_size=1 << 20)
    except CompressionError as exc:
        assert str(exc)


_PREFIXES = {
    GZIP: [b"", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03"],
    SNAPPY: [b"", XERIAL_MAGIC, XERIAL_HEADER, XERIAL_HEADER + b"\x00\x00\x00\x05"],
    LZ4: [b"", LZ4_FRAME_MAGIC, bytes.fromhex("04224d1860401a"), bytes.fromhex("04224d18604082")],
    # magic; + single segment with a 1-byte size; + a windowed frame; a skippable frame
    ZSTD: [b"", ZSTD_FRAME_MAGIC, ZSTD_FRAME_MAGIC + b"\x20\x05", ZSTD_FRAME_MAGIC + b"\x00\x58",
           b"\x50\x2a\x4d\x18\x02\x00\x00\x00xy"],
}


@pytest.mark.parametrize("codec_id", COMPRESSED)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_plausible_prefixes_only_raise_compression_error(codec_id, data):
    prefix = data.draw(st.sampled_from(_PREFIXES[codec_id]))
    junk = prefix + data.draw(st.binary(max_size=500))
    try:
        compression.decompress(codec_id, junk, max_output_size=1 << 20)
    except CompressionError:
        pass


#: Spans two LZ4 blocks and three xerial blocks.
MULTI_BLOCK = sample(16, 70_000)


@pytest.mark.parametrize("codec_id", COMPRESSED)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_mutated_streams_only_raise_compression_error(codec_id, data):
    options = data.draw(st.sampled_from(OPTIONS[codec_id]))
    payload = data.draw(st.one_of(st.binary(max_size=3000), st.just(MULTI_BLOCK)))
    packed = bytearray(compression.compress(codec_id, payload, **options))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        kind = data.draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        pos = data.draw(st.integers(min_value=0, max_value=max(len(packed) - 1, 0)))
        if kind == "flip" and packed:
            packed[pos] ^= 1 << data.draw(st.integers(min_value=0, max_value=7))
        elif kind == "set" and packed:
            packed[pos] = data.draw(st.integers(min_value=0, max_value=255))
        elif kind == "insert":
            packed[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and packed:
            del packed[pos:pos + data.draw(st.integers(min_value=1, max_value=8))]
        elif kind == "truncate":
            del packed[pos:]
    try:
        compression.decompress(codec_id, bytes(packed), max_output_size=1 << 20)
    except CompressionError:
        pass


@pytest.mark.parametrize("codec_id", COMPRESSED)
def test_every_truncation_raises(codec_id):
    for options in OPTIONS[codec_id]:
        size = 300 if options.get("block_size", 1024) < 1024 else 3000  # keep it quadratic-cheap
        packed = compression.compress(codec_id, sample(17, size), **options)
        for cut in range(len(packed)):
            try:
                out = compression.decompress(codec_id, packed[:cut])
            except CompressionError:
                continue
            # only a xerial stream cut at a block boundary is a (shorter) valid stream
            assert codec_id == SNAPPY and options.get("xerial", True), (options, cut)
            assert len(out) < size


@pytest.mark.parametrize(
    "stream, match",
    [
        (XERIAL_MAGIC + b"\x00\x00", "truncated xerial header"),
        (XERIAL_HEADER + b"\x00\x00", "truncated xerial block length"),
        (XERIAL_HEADER + b"\x00\x00\x00\x10abc", "does not fit"),
        (XERIAL_HEADER + b"\x7f\xff\xff\xff" + b"abc", "does not fit"),
        (XERIAL_HEADER + b"\xff\xff\xff\xfe" + b"abc", "does not fit"),
        (XERIAL_HEADER + b"\x00\x00\x00\x00", "does not fit"),
        (XERIAL_HEADER + b"\x00\x00\x00\x03\x05\x10a", "corrupt block"),
        (b"", "corrupt block"),
        (b"\x05\x10ab", "corrupt block"),
    ],
)
def test_snappy_bad_framing(stream, match):
    with pytest.raises(CompressionError, match=match) as info:
        compression.decompress(SNAPPY, stream)
    assert isinstance(info.value, KielError)
    if match == "corrupt block":
        assert isinstance(info.value.__cause__, cramjam.DecompressionError)


@pytest.mark.parametrize(
    "stream, match",
    [
        (b"", "truncated"),
        (b"\x1f\x8b", "truncated"),
        (b"PK\x03\x04 not gzip", "corrupt"),
        (zlib.compress(b"zlib, not gzip"), "corrupt"),
    ],
)
def test_gzip_bad_input(stream, match):
    with pytest.raises(CompressionError, match=match) as info:
        compression.decompress(GZIP, stream)
    if match == "corrupt":
        assert isinstance(info.value.__cause__, zlib.error)


def test_gzip_crc_mismatch():
    packed = bytearray(compression.compress(GZIP, b"payload" * 100))
    packed[-8] ^= 0xFF  # CRC32 in the trailer
    with pytest.raises(CompressionError, match="corrupt"):
        compression.decompress(GZIP, bytes(packed))


def test_gzip_bomb_is_bounded():
    bomb = compression.compress(GZIP, bytes(64 << 20), level=9)  # ~64 KiB
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError, match="max_output_size"):
            compression.decompress(GZIP, bomb, max_output_size=1 << 20)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    # exactly at the limit is fine, one byte over is not
    packed = compression.compress(GZIP, bytes(1000))
    assert compression.decompress(GZIP, packed, max_output_size=1000) == bytes(1000)
    with pytest.raises(CompressionError):
        compression.decompress(GZIP, packed, max_output_size=999)
    members = packed + packed
    assert len(compression.decompress(GZIP, members, max_output_size=2000)) == 2000
    with pytest.raises(CompressionError):
        compression.decompress(GZIP, members, max_output_size=1999)


def test_snappy_bomb_is_bounded():
    # A raw block whose length varint claims 4 GiB: refused before decompressing.
    start = time.perf_counter()
    with pytest.raises(CompressionError, match="4294967295 bytes, over max_output_size"):
        compression.decompress(SNAPPY, b"\xff\xff\xff\xff\x0f\x00")
    assert time.perf_counter() - start < 1
    xerial = compression.compress(SNAPPY, bytes(4 << 20))
    with pytest.raises(CompressionError, match="max_output_size"):
        compression.decompress(SNAPPY, xerial, max_output_size=1 << 20)
    assert compression.decompress(SNAPPY, xerial, max_output_size=4 << 20) == bytes(4 << 20)
    raw = compression.compress(SNAPPY, bytes(1000), xerial=False)
    with pytest.raises(CompressionError, match="max_output_size"):
        compression.decompress(SNAPPY, raw, max_output_size=999)


def test_lz4_bomb_is_bounded():
    frame = compression.compress(LZ4, bytes(4 << 20))
    with pytest.raises(CompressionError, match="max_output_size"):
        compression.decompress(LZ4, frame, max_output_size=1 << 20)
    assert compression.decompress(LZ4, frame, max_output_size=4 << 20) == bytes(4 << 20)
    desc = b"\x68\x40" + struct.pack("<Q", 1 << 40)
    claims = LZ4_FRAME_MAGIC + desc + bytes((header_checksum(desc, False),)) + bytes(4)
    with pytest.raises(CompressionError, match="max_output_size"):
        compression.decompress(LZ4, claims)


def _zstd_stream(data: bytes) -> bytes:
    """A zstd frame as a streaming compressor writes it: no content size."""
    compressor = cramjam.zstd.Compressor(level=3)
    compressor.compress(data)
    return bytes(compressor.finish())


def test_zstd_reads_frames_with_and_without_content_size():
    data = sample(18, 300_000)
    declared = compression.compress(ZSTD, data)
    assert declared[:4] == ZSTD_FRAME_MAGIC and declared[4] & 0xC0  # a content size field
    streamed = _zstd_stream(data)
    assert not streamed[4] & 0xC0 and not streamed[4] & 0x20  # none: a windowed frame
    for packed in (declared, streamed, bytes(cramjam.zstd.compress(data, level=19))):
        assert compression.decompress(ZSTD, packed) == data
    # Concatenated frames and skippable frames, as the format allows.
    skippable = b"\x5f\x2a\x4d\x18" + struct.pack("<I", 3) + b"abc"
    joined = declared + skippable + _zstd_stream(b"tail")
    assert compression.decompress(ZSTD, joined) == data + b"tail"


def test_zstd_bomb_is_bounded():
    # Declared content sizes are refused before anything is allocated.
    packed = compression.compress(ZSTD, bytes(64 << 20))
    assert len(packed) < 10_000
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError, match="67108864 bytes, over max_output_size"):
            compression.decompress(ZSTD, packed, max_output_size=1 << 20)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    # Without a declared size, the output is capped at max_output_size.
    streamed = _zstd_stream(bytes(4 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError, match="max_output_size"):
            compression.decompress(ZSTD, streamed, max_output_size=1 << 20)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 << 20
    assert compression.decompress(ZSTD, streamed, max_output_size=4 << 20) == bytes(4 << 20)
    # exactly at the limit is fine, one byte over is not
    packed = compression.compress(ZSTD, bytes(1000))
    assert compression.decompress(ZSTD, packed, max_output_size=1000) == bytes(1000)
    with pytest.raises(CompressionError, match="max_output_size"):
        compression.decompress(ZSTD, packed, max_output_size=999)
    # A frame header that claims 2**63 bytes over one empty block: its blocks
    # bound it, nothing big is allocated, and the lie makes it corrupt.
    claims = ZSTD_FRAME_MAGIC + b"\xe0" + struct.pack("<Q", 1 << 63) + b"\x01\x00\x00"
    tracemalloc.start()
    try:
        with pytest.raises(CompressionError, match="corrupt frame"):
            compression.decompress(ZSTD, claims)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


@pytest.mark.parametrize(
    "frame, match",
    [
        (b"", "no bytes"),
        (b"\x28\xb5\x2f", "trailing bytes"),
        (b"\x28\xb5\x2f\xfe\x00", "bad frame magic"),
        (ZSTD_FRAME_MAGIC, "truncated frame header"),
        (ZSTD_FRAME_MAGIC + b"\x08\x58", "reserved frame header bit"),
        (ZSTD_FRAME_MAGIC + b"\x01\x58\x07", "dictionary"),
        (ZSTD_FRAME_MAGIC + b"\x20\x05\x01\x00", "truncated block header"),
        (ZSTD_FRAME_MAGIC + b"\x20\x05" + b"\x07\x00\x00", "reserved block type"),
        (ZSTD_FRAME_MAGIC + b"\x20\x05" + b"\x29\x00\x00abc", "truncated block"),
        (ZSTD_FRAME_MAGIC + b"\x20\x05" + b"\x31\x00\x00" + b"x" * 6, "exceeds the maximum"),
        (ZSTD_FRAME_MAGIC + b"\x24\x05" + b"\x29\x00\x00abcde", "truncated frame checksum"),
        (ZSTD_FRAME_MAGIC + b"\x20\x05" + b"\x2d\x00\x00abcde", "corrupt frame"),
        (b"\x50\x2a\x4d\x18\x09\x00\x00\x00xy", "truncated skippable frame"),
    ],
)
def test_zstd_bad_framing(frame, match):
    with pytest.raises(CompressionError, match=match):
        compression.decompress(ZSTD, frame)


@pytest.mark.parametrize(
    "frame, match",
    [
        (b"\x04\x22\x4d", "truncated frame header"),
        (b"\x02\x21\x4c\x18" + bytes(10), "bad frame magic"),  # the legacy LZ4 format
        (bytes.fromhex("04224d1860401a"), "no end mark"),
        (bytes.fromhex("04224d1860401a") + b"\x05\x00\x00\x00ab", "truncated block"),
        (bytes.fromhex("04224d1860401a") + b"\x01\x00\x01\x00", "exceeds"),
        (bytes.fromhex("04224d1860401a") + b"\x02\x00\x00\x00\xff\xff" + bytes(4), "corrupt block"),
        (bytes.fromhex("04224d1860401a") + bytes(4) + b"x", "after the end"),
        (bytes.fromhex("04224d1864401a"), "header checksum"),
    ],
)
def test_lz4_bad_framing(frame, match):
    with pytest.raises(CompressionError, match=match):
        compression.decompress(LZ4, frame)


# --------------------------------------------------------------------------
# The optional extra


def _run(code):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=str(REPO), env=env, capture_output=True, text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_missing_cramjam_says_it_is_a_dependency():
    # cramjam is an install dependency of kiel: an environment without it
    # (a broken install, --no-deps) gets an error saying what to install,
    # never a hint at an extra that no longer decides whether it is there.
    out = _run(
        """
import sys
sys.modules["cramjam"] = None  # makes "import cramjam" raise ImportError
import kiel
import kiel.compression as c
from kiel.exc import MissingDependencyError
assert c.decompress(c.GZIP, c.compress(c.GZIP, b"still works")) == b"still works"
assert c.is_available(c.GZIP) and c.is_available(c.NONE)
assert not c.is_available(c.SNAPPY) and not c.is_available(c.LZ4)
assert not c.is_available(c.ZSTD)
for cid in (c.SNAPPY, c.LZ4, c.ZSTD):
    codec_class = {c.SNAPPY: c.SnappyCodec, c.LZ4: c.LZ4Codec, c.ZSTD: c.ZstdCodec}[cid]
    for call in (lambda: c.get_codec(cid), lambda: c.compress(cid, b"x"),
                 lambda: c.decompress(cid, b"x"), codec_class):
        try:
            call()
        except MissingDependencyError as exc:
            assert "pip install cramjam" in str(exc), exc
            assert "kiel[" not in str(exc), exc
            assert isinstance(exc, ImportError)
            assert isinstance(exc.__cause__, ImportError)
            print(exc)
        else:
            raise AssertionError("no MissingDependencyError")
"""
    )
    for codec in ("snappy", "lz4", "zstd"):
        assert (
            f"{codec} compression needs the cramjam package, a dependency of kiel"
            " that is missing here: pip install cramjam"
        ) in out, out


def test_import_does_not_load_cramjam():
    out = _run(
        """
import sys
import kiel.compression as c
print("cramjam" in sys.modules)
c.get_codec(c.GZIP)
print("cramjam" in sys.modules)
"""
    )
    assert out.split() == ["False", "False"]
