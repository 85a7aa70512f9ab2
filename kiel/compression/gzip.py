"""Codec 1: gzip, with the standard library's zlib."""
import zlib

from kiel.compression.base import DEFAULT_MAX_OUTPUT_SIZE, BytesLike, Codec, as_view
from kiel.exc import CompressionError, ConfigError

#: zlib ``wbits`` for the gzip container (header and CRC32/ISIZE trailer).
_GZIP_WBITS = 16 + zlib.MAX_WBITS
#: Default deflate level. Other Python Kafka clients hard-code 9, which is
#: several times slower for a few percent smaller output.
DEFAULT_GZIP_LEVEL = 6


class GzipCodec(Codec):
    """gzip (RFC 1952), what Kafka calls ``compression.codec=gzip``.

    Compression writes one gzip member with a zero timestamp, so the output is
    deterministic. Decompression accepts several concatenated members (as
    ``gzip`` and Java's ``GZIPInputStream`` do) and ignores zero padding after
    the last one, like Python's :mod:`gzip`.

    Args:
        level: deflate level, 0 (store) to 9 (smallest); default 6.
        max_output_size: the largest decompressed payload accepted.

    Raises:
        ConfigError: ``level`` is not an integer from 0 to 9, or
            ``max_output_size`` is not a positive integer.
    """

    codec_id = 1
    name = "gzip"

    def __init__(
        self, *, level: int = DEFAULT_GZIP_LEVEL, max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE
    ) -> None:
        super().__init__(max_output_size=max_output_size)
        if not isinstance(level, int) or isinstance(level, bool) or not 0 <= level <= 9:
            raise ConfigError(f"gzip level must be an integer from 0 to 9, got {level!r}")
        self.level = level

    def compress(self, data: BytesLike) -> bytes:
        """Compress ``data`` into one gzip member (see :meth:`Codec.compress`)."""
        view = as_view(data)
        compressor = zlib.compressobj(self.level, zlib.DEFLATED, _GZIP_WBITS)
        return compressor.compress(view) + compressor.flush()

    def decompress(self, data: BytesLike) -> bytes:
        """Decompress one or more concatenated gzip members (see :meth:`Codec.decompress`).

        The output is the concatenated contents of every member. A bad header,
        corrupt deflate data, a CRC or length mismatch, a truncated member,
        trailing garbage or too much output raise :class:`CompressionError`.
        """
        pending: BytesLike = as_view(data)
        limit = self.max_output_size
        parts = []
        total = 0
        while True:
            decompressor = zlib.decompressobj(_GZIP_WBITS)
            try:
                # Strategy: ask for one byte more than the budget left, so that
                # a stream that would go over it stops there instead of
                # allocating its whole output.
                chunk = decompressor.decompress(pending, limit - total + 1)
            except zlib.error as exc:
                raise CompressionError(f"gzip: corrupt stream ({exc})") from exc
            total += len(chunk)
            if total > limit:
                raise self._too_large()
            if not decompressor.eof:
                raise CompressionError("gzip: truncated stream (no end of member)")
            parts.append(chunk)
            pending = decompressor.unused_data
            if not pending.strip(b"\x00"):
                break
        return parts[0] if len(parts) == 1 else b"".join(parts)
