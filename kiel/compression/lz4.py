"""Codec 3: LZ4 frames, with cramjam's block functions and kiel's own framing.

Kafka uses the LZ4 frame format (magic ``04 22 4D 18``) with independent
blocks of at most 64 KiB, no block checksums, no content size and no content
checksum. Kafka 0.8.2 and 0.9 got one detail wrong (KAFKA-3160): the header
checksum byte ``HC`` is computed over the magic number *and* the frame
descriptor, where the LZ4 spec hashes the descriptor only::

    spec (magic 1, Kafka 0.10+):  HC = (xxh32(FLG BD [size] [dict]) >> 8) & 0xFF
    Kafka 0.8/0.9 (magic 0):      HC = (xxh32(magic FLG BD ...)     >> 8) & 0xFF

0.8.2 brokers reject frames with the correct checksum, and Kafka 0.10+ expects
the correct one in magic 1 messages, so :class:`LZ4Codec` writes the one its
``magic`` asks for (0 by default, like kafka-python's ``lz4_encode_old_kafka``
and librdkafka for magic 0). :meth:`LZ4Codec.decompress` accepts either.

Strategy: kiel parses the frame itself and hands each block to
``cramjam.lz4.decompress_block``. That is what makes both checksum variants
readable and bounds the output (each block is at most its declared maximum
size, and the total is checked after each block). Block and content checksums,
when a producer sets them, are skipped rather than verified: computing XXH32
over the payload in pure Python would be slow, and the Kafka message CRC32
already covers the compressed bytes. Linked (dependent) blocks, dictionaries
and legacy or skippable frames are rejected: Kafka never produces them.
"""
import struct
from typing import Optional

from kiel.compression._xxh32 import xxh32
from kiel.compression.base import (
    DEFAULT_MAX_OUTPUT_SIZE,
    BytesLike,
    Codec,
    as_view,
    require_cramjam,
)
from kiel.exc import CompressionError, ConfigError

#: The LZ4 frame magic number, little-endian on the wire.
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
#: Uncompressed bytes per block kiel writes (block maximum size id 4).
LZ4_BLOCK_SIZE = 64 * 1024

_U32 = struct.Struct("<I")
_UNCOMPRESSED = 0x80000000
_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
#: FLG: version 01, independent blocks, no checksums, no content size, no dict id.
_FLG = 0x60
#: BD: block maximum size 64 KiB.
_BD = 0x40
_END_MARK = b"\x00\x00\x00\x00"


def header_checksum(descriptor: bytes, kafka_0_8: bool) -> int:
    """Compute the header checksum byte of an LZ4 frame.

    Args:
        descriptor: the frame descriptor (FLG, BD and the optional content
            size and dictionary id), without the magic and the checksum byte.
        kafka_0_8: compute it the way Kafka 0.8/0.9 do (KAFKA-3160: the
            magic number is hashed too) instead of as the LZ4 spec says.

    Returns:
        the checksum byte as an int.
    """
    hashed = LZ4_FRAME_MAGIC + bytes(descriptor) if kafka_0_8 else bytes(descriptor)
    return (xxh32(hashed) >> 8) & 0xFF


def _frame_header(kafka_0_8: bool) -> bytes:
    descriptor = bytes((_FLG, _BD))
    return LZ4_FRAME_MAGIC + descriptor + bytes((header_checksum(descriptor, kafka_0_8),))


_HEADERS = {0: _frame_header(kafka_0_8=True), 1: _frame_header(kafka_0_8=False)}

#: Both header checksum variants of the descriptors met, by descriptor.
_CHECKSUMS: dict[bytes, tuple[int, int]] = {}


def _checksums(descriptor: bytes) -> tuple[int, int]:
    """The spec's and Kafka 0.8's header checksums of ``descriptor``.

    Strategy: the pure-Python XXH32 took most of the time of decompressing
    a small frame, for the same few descriptors every time: FLG and BD take
    at most 16 values that pass the header's checks, so the checksums of
    those are kept. A descriptor with a content size is one of a kind and
    is hashed each time.
    """
    known = _CHECKSUMS.get(descriptor)
    if known is None:
        known = (header_checksum(descriptor, False), header_checksum(descriptor, True))
        if len(descriptor) == 2:
            _CHECKSUMS[descriptor] = known
    return known


class LZ4Codec(Codec):
    """LZ4 frames, with cramjam (a dependency of kiel).

    Args:
        magic: the message format version the frames are for. 0 (the
            default, Kafka 0.8.x) writes the KAFKA-3160 header checksum that
            0.8.2 brokers require; 1 writes the spec's checksum (Kafka 0.10+).
        max_output_size: the largest decompressed payload accepted.

    Raises:
        ConfigError: ``magic`` is not 0 or 1, or ``max_output_size`` is not a
            positive integer.
        MissingDependencyError: cramjam is not installed.
    """

    codec_id = 3
    name = "lz4"

    def __init__(self, *, magic: int = 0, max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE) -> None:
        super().__init__(max_output_size=max_output_size)
        if type(magic) is not int or magic not in _HEADERS:
            raise ConfigError(f"lz4 magic must be 0 or 1, got {magic!r}")
        self.magic = magic
        cramjam = require_cramjam("lz4")
        self._compress_block = cramjam.lz4.compress_block
        # Strategy: decompress_block_into (not decompress_block, whose output
        # is padded to output_len in cramjam 2.x) into a scratch buffer of the
        # block maximum size, so the size of each block comes back exactly.
        self._decompress_block_into = cramjam.lz4.decompress_block_into
        self._cramjam_errors = (cramjam.DecompressionError, cramjam.CompressionError)

    def compress(self, data: BytesLike) -> bytes:
        """Compress ``data`` into one LZ4 frame the way Kafka's own encoder does.

        Independent 64 KiB blocks, a block that does not shrink is stored
        uncompressed, no content size, no checksums but the header's (see
        :meth:`Codec.compress`).
        """
        view = as_view(data)
        parts: list[BytesLike] = [_HEADERS[self.magic]]
        for start in range(0, len(view), LZ4_BLOCK_SIZE):
            chunk = view[start:start + LZ4_BLOCK_SIZE]
            block = self._compress_block(chunk, store_size=False)
            if len(block) >= len(chunk):
                parts.append(_U32.pack(len(chunk) | _UNCOMPRESSED))
                parts.append(chunk)
            else:
                parts.append(_U32.pack(len(block)))
                parts.append(block)
        parts.append(_END_MARK)
        return b"".join(parts)

    def decompress(self, data: BytesLike) -> bytes:
        """Decompress one LZ4 frame, with either header checksum variant.

        A bad magic, version, flag or header checksum, a truncated frame, a
        corrupt block, bytes after the frame or too much output raise
        :class:`CompressionError` (see :meth:`Codec.decompress`).
        """
        view = as_view(data)
        flg, block_max, content_size, pos = self._read_header(view)
        out, pos = self._read_blocks(view, pos, block_max, bool(flg & 0x10))
        if flg & 0x04:
            pos += 4  # the content checksum (not verified, see the module's docstring)
        end = len(view)
        if pos > end:
            raise CompressionError("lz4: truncated frame (checksum cut off)")
        if pos < end:
            raise CompressionError(f"lz4: {end - pos} bytes after the end of the frame")
        if content_size is not None and content_size != len(out):
            raise CompressionError(
                f"lz4: frame holds {len(out)} bytes but its header says {content_size}"
            )
        return bytes(out)

    def _read_header(self, view: memoryview) -> tuple[int, int, Optional[int], int]:
        """Read and check the frame header.

        Returns:
            ``(FLG, block maximum size, content size or None, where the first
            block starts)``.

        Raises:
            CompressionError: a bad or truncated header, a frame kiel does not
                read, or a content size over ``max_output_size``.
        """
        end = len(view)
        if end < 7:
            raise CompressionError(f"lz4: truncated frame header ({end} bytes)")
        if view[:4] != LZ4_FRAME_MAGIC:
            raise CompressionError(f"lz4: bad frame magic {bytes(view[:4]).hex()}")
        flg, bd = view[4], view[5]
        if flg >> 6 != 1:
            raise CompressionError(f"lz4: unsupported frame version {flg >> 6}")
        if flg & 0x02 or bd & 0x8F:
            raise CompressionError("lz4: reserved frame descriptor bits are set")
        if flg & 0x01:
            raise CompressionError("lz4: frames with a dictionary id are not supported")
        if not flg & 0x20:
            raise CompressionError("lz4: linked (dependent) blocks are not supported")
        block_max = _BLOCK_MAX.get(bd >> 4)
        if block_max is None:
            raise CompressionError(f"lz4: invalid block maximum size id {bd >> 4}")
        content_size = None
        pos = 6
        if flg & 0x08:
            if end < 15:
                raise CompressionError(f"lz4: truncated frame header ({end} bytes)")
            content_size = int.from_bytes(view[6:14], "little")
            if content_size > self.max_output_size:
                raise self._too_large(content_size)
            pos = 14
        descriptor = bytes(view[4:pos])
        if view[pos] not in _checksums(descriptor):
            raise CompressionError("lz4: frame header checksum mismatch")
        return flg, block_max, content_size, pos + 1

    def _read_blocks(
        self, view: memoryview, pos: int, block_max: int, block_checksums: bool
    ) -> tuple[bytearray, int]:
        """Decompress the blocks from ``pos`` up to the end mark.

        Returns:
            the decompressed bytes and where the end mark ends.

        Raises:
            CompressionError: a truncated frame, a block over ``block_max``
                or corrupt, or output over ``max_output_size``.
        """
        end = len(view)
        out = bytearray()
        scratch = bytearray(block_max)
        while True:
            if end - pos < 4:
                raise CompressionError("lz4: truncated frame (no end mark)")
            (word,) = _U32.unpack_from(view, pos)
            pos += 4
            if word == 0:
                return out, pos
            size = word & ~_UNCOMPRESSED
            if size > block_max:
                raise CompressionError(
                    f"lz4: block of {size} bytes exceeds the frame's maximum of {block_max}"
                )
            if size > end - pos:
                raise CompressionError(f"lz4: truncated block ({size} bytes, {end - pos} left)")
            block = view[pos:pos + size]
            pos += size + (4 if block_checksums else 0)
            if word & _UNCOMPRESSED:
                out += block
            else:
                try:
                    produced = self._decompress_block_into(block, scratch)
                except self._cramjam_errors as exc:
                    raise CompressionError(f"lz4: corrupt block ({exc})") from exc
                out += memoryview(scratch)[:produced]
            if len(out) > self.max_output_size:
                raise self._too_large()
