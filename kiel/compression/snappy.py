"""Codec 2: snappy, in xerial framing or as a raw block, with cramjam.

Kafka carries snappy in two shapes:

* **xerial framing**, written by the Java clients (snappy-java's
  ``SnappyOutputStream``) and kafka-python::

      +------------------+---------+--------+-----------+-------------+-----+
      | magic            | version | compat | block len | block       | ... |
      +------------------+---------+--------+-----------+-------------+-----+
      | \\x82 SNAPPY \\x00 | int32   | int32  | BE int32  | raw snappy  |     |
      +------------------+---------+--------+-----------+-------------+-----+

  Each block is an independent raw snappy block of at most ``block_size``
  uncompressed bytes (32 KiB in snappy-java and kafka-python).
* **a raw snappy block**, written by librdkafka (kcat and the clients built on
  it).

Decompression tells them apart by the magic (it can never start a valid raw
block) and ignores the version and compat fields, which some producers write
little-endian.
"""
import struct

from kiel.compression.base import (
    DEFAULT_MAX_OUTPUT_SIZE,
    BytesLike,
    Codec,
    as_view,
    check_positive_int,
    require_cramjam,
)
from kiel.exc import CompressionError

#: The first 8 bytes of a xerial-framed stream.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
#: The full 16-byte header kiel writes: magic, version 1, compat 1.
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
#: Uncompressed bytes per xerial block (snappy-java's default, kafka-python's too).
DEFAULT_XERIAL_BLOCK_SIZE = 32 * 1024

_INT32 = struct.Struct(">i")


class SnappyCodec(Codec):
    """snappy, with cramjam (a dependency of kiel).

    Args:
        xerial: write the xerial-framed form (the default, what Java clients
            write and every Kafka client reads); ``False`` writes one raw
            snappy block, as librdkafka does.
        block_size: uncompressed bytes per xerial block (default 32 KiB).
        max_output_size: the largest decompressed payload accepted.

    Raises:
        ConfigError: ``block_size`` or ``max_output_size`` is not a positive integer.
        MissingDependencyError: cramjam is not installed.
    """

    codec_id = 2
    name = "snappy"

    def __init__(
        self,
        *,
        xerial: bool = True,
        block_size: int = DEFAULT_XERIAL_BLOCK_SIZE,
        max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE,
    ) -> None:
        super().__init__(max_output_size=max_output_size)
        self.xerial = bool(xerial)
        self.block_size = check_positive_int("block_size", block_size)
        cramjam = require_cramjam("snappy")
        self._compress_raw = cramjam.snappy.compress_raw
        self._decompress_raw = cramjam.snappy.decompress_raw
        self._raw_len = cramjam.snappy.decompress_raw_len
        self._cramjam_errors = (cramjam.DecompressionError, cramjam.CompressionError)

    def compress(self, data: BytesLike) -> bytes:
        """Compress ``data``, xerial-framed unless the codec was built with ``xerial=False``.

        The output is the xerial stream (16-byte header, then length-prefixed
        blocks; just the header for empty input) or one raw snappy block (see
        :meth:`Codec.compress`).
        """
        view = as_view(data)
        if not self.xerial:
            return bytes(self._compress_raw(view))
        size = self.block_size
        parts: list[BytesLike] = [XERIAL_HEADER]
        for start in range(0, len(view), size):
            block = self._compress_raw(view[start:start + size])
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)

    def decompress(self, data: BytesLike) -> bytes:
        """Decompress a xerial-framed stream or a raw snappy block.

        A truncated header, a block length that is not positive or runs past
        the end, a corrupt snappy block or too much output raise
        :class:`CompressionError` (see :meth:`Codec.decompress`).
        """
        view = as_view(data)
        if view[:8] != XERIAL_MAGIC:
            return self._block(view, 0)
        end = len(view)
        if end < len(XERIAL_HEADER):
            raise CompressionError(f"snappy: truncated xerial header ({end} of 16 bytes)")
        pos = len(XERIAL_HEADER)
        parts: list[bytes] = []
        total = 0
        while pos < end:
            if end - pos < 4:
                raise CompressionError(f"snappy: truncated xerial block length at byte {pos}")
            (length,) = _INT32.unpack_from(view, pos)
            pos += 4
            if length <= 0 or length > end - pos:
                raise CompressionError(
                    f"snappy: xerial block length {length} at byte {pos - 4} "
                    f"does not fit the {end - pos} bytes left"
                )
            block = self._block(view[pos:pos + length], total)
            total += len(block)
            parts.append(block)
            pos += length
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _block(self, block: memoryview, produced: int) -> bytes:
        """Decompress one raw block after checking its declared size against the budget."""
        try:
            # Strategy: a raw block starts with its uncompressed length (a
            # varint); check it before decompressing so that a forged length
            # never turns into a huge allocation.
            size = self._raw_len(block)
            if produced + size > self.max_output_size:
                raise self._too_large(produced + size)
            return bytes(self._decompress_raw(block))
        except self._cramjam_errors as exc:
            raise CompressionError(f"snappy: corrupt block ({exc})") from exc
