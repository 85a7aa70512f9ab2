"""Codec 4: Zstandard (RFC 8878), with cramjam. Record batches (magic 2) only.

Kafka 2.1 added zstd for record batches; message sets of magic 0 and 1 never
carry it. Producers write one zstd frame per batch (the Java client streams
it, so the frame may not declare its content size); kiel reads any number of
concatenated frames, and skippable frames.

Strategy: cramjam's one-shot ``decompress`` allocates whatever the data asks
for, so it is not used on untrusted input. Instead, kiel walks the frame and
block headers first (a few bytes per 128 KiB of output), which bounds the
output from above without decompressing anything: a raw or RLE block makes
exactly its declared size, a compressed block at most the frame's block
maximum size (128 KiB or the window size, whichever is smaller), and a frame
that declares its content size makes exactly that. A bound over
``max_output_size`` is refused before any allocation; otherwise the output
is decompressed with ``decompress_into`` into a buffer of the bound's size
(cramjam fails rather than writing past the end of it). Only frames that do
not declare their content size and hold compressed blocks can have a bound
above ``max_output_size`` yet a real output below it: they get a buffer of
exactly ``max_output_size``, and output that does not fit is over the limit.
"""
import struct
from typing import Optional

from kiel.compression.base import (
    DEFAULT_MAX_OUTPUT_SIZE,
    BytesLike,
    Codec,
    as_view,
    require_cramjam,
)
from kiel.exc import CompressionError, ConfigError

#: The zstd frame magic number, little-endian on the wire.
ZSTD_FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
#: The compression level Kafka's Java client uses by default.
DEFAULT_ZSTD_LEVEL = 3

_U32 = struct.Struct("<I")
(_MAGIC,) = _U32.unpack(ZSTD_FRAME_MAGIC)
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50
_MAX_BLOCK = 128 * 1024
_DICT_ID_SIZES = (0, 1, 2, 4)
_FCS_SIZES = (0, 2, 4, 8)


def _frame_header(view: memoryview, pos: int) -> tuple[int, Optional[int], int, bool]:
    """Parse the frame header at ``pos`` (after the magic).

    Returns:
        ``(position of the first block, declared content size or None,
        block maximum size, whether a 4-byte checksum ends the frame)``.

    Raises:
        CompressionError: a truncated or invalid header, or a dictionary id.
    """
    end = len(view)
    if pos >= end:
        raise CompressionError("zstd: truncated frame header")
    descriptor = view[pos]
    pos += 1
    if descriptor & 0x08:
        raise CompressionError("zstd: reserved frame header bit is set")
    single_segment = bool(descriptor & 0x20)
    fcs_size = _FCS_SIZES[descriptor >> 6] or (1 if single_segment else 0)
    dict_size = _DICT_ID_SIZES[descriptor & 0x03]
    window_size = None
    if not single_segment:
        if pos >= end:
            raise CompressionError("zstd: truncated frame header")
        exponent, mantissa = view[pos] >> 3, view[pos] & 0x07
        base = 1 << (10 + exponent)
        window_size = base + (base >> 3) * mantissa
        pos += 1
    if end - pos < dict_size + fcs_size:
        raise CompressionError("zstd: truncated frame header")
    if dict_size and int.from_bytes(view[pos : pos + dict_size], "little"):
        raise CompressionError("zstd: frames that need a dictionary are not supported")
    pos += dict_size
    content_size: Optional[int] = None
    if fcs_size:
        content_size = int.from_bytes(view[pos : pos + fcs_size], "little")
        if fcs_size == 2:
            content_size += 256
        pos += fcs_size
    if window_size is None:
        window_size = content_size or 0
    return pos, content_size, max(1, min(window_size, _MAX_BLOCK)), bool(descriptor & 0x04)


def _frame_bound(view: memoryview, pos: int) -> tuple[int, int, bool]:
    """Walk one zstd frame (after its magic) without decompressing it.

    Returns:
        ``(end of the frame, most bytes it can decompress to, whether that
        is exact)``: exact when the frame declares its content size or holds
        raw and RLE blocks only.

    Raises:
        CompressionError: truncated, a reserved block type, or a block over
            the block maximum size.
    """
    pos, content_size, block_max, checksum = _frame_header(view, pos)
    end = len(view)
    bound = 0
    exact = True
    while True:
        if end - pos < 3:
            raise CompressionError("zstd: truncated block header")
        header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
        pos += 3
        last, kind, size = header & 1, (header >> 1) & 0x03, header >> 3
        if kind == 3:
            raise CompressionError("zstd: reserved block type")
        if size > block_max:
            raise CompressionError(f"zstd: block of {size} bytes exceeds the maximum {block_max}")
        content = 1 if kind == 1 else size
        if end - pos < content:
            raise CompressionError(f"zstd: truncated block ({content} bytes, {end - pos} left)")
        pos += content
        if kind == 2:
            bound += block_max
            exact = False
        else:
            bound += size
        if last:
            break
    if checksum:
        if end - pos < 4:
            raise CompressionError("zstd: truncated frame checksum")
        pos += 4
    if content_size is not None:
        return pos, min(bound, content_size), True
    return pos, bound, exact


def _output_bound(view: memoryview) -> tuple[int, bool]:
    """The most bytes ``view`` (zstd frames, possibly concatenated) can decompress to.

    Returns:
        ``(bound, exact)``, see :func:`_frame_bound`.

    Raises:
        CompressionError: not a sequence of well-framed zstd frames.
    """
    end = len(view)
    if not end:
        raise CompressionError("zstd: truncated frame (no bytes)")
    pos = 0
    bound = 0
    exact = True
    while pos < end:
        if end - pos < 4:
            raise CompressionError(f"zstd: {end - pos} trailing bytes are not a frame")
        (magic,) = _U32.unpack_from(view, pos)
        pos += 4
        if magic & _SKIPPABLE_MASK == _SKIPPABLE_MAGIC:
            if end - pos < 4 or _U32.unpack_from(view, pos)[0] > end - pos - 4:
                raise CompressionError("zstd: truncated skippable frame")
            pos += 4 + _U32.unpack_from(view, pos)[0]
            continue
        if magic != _MAGIC:
            raise CompressionError(f"zstd: bad frame magic {magic:08x}")
        pos, frame_bound, frame_exact = _frame_bound(view, pos)
        bound += frame_bound
        exact = exact and frame_exact
    return bound, exact


class ZstdCodec(Codec):
    """Zstandard, with cramjam (a dependency of kiel).

    Args:
        level: compression level, 1 (fastest) to 22 (smallest); default 3,
            as Kafka's Java client.
        max_output_size: the largest decompressed payload accepted.

    Raises:
        ConfigError: ``level`` is not an integer from 1 to 22, or
            ``max_output_size`` is not a positive integer.
        MissingDependencyError: cramjam is not installed.
    """

    codec_id = 4
    name = "zstd"

    def __init__(
        self, *, level: int = DEFAULT_ZSTD_LEVEL, max_output_size: int = DEFAULT_MAX_OUTPUT_SIZE
    ) -> None:
        super().__init__(max_output_size=max_output_size)
        if not isinstance(level, int) or isinstance(level, bool) or not 1 <= level <= 22:
            raise ConfigError(f"zstd level must be an integer from 1 to 22, got {level!r}")
        self.level = level
        cramjam = require_cramjam("zstd")
        self._compress = cramjam.zstd.compress
        self._decompress_into = cramjam.zstd.decompress_into
        self._cramjam_errors = (cramjam.DecompressionError, cramjam.CompressionError)

    def compress(self, data: BytesLike) -> bytes:
        """Compress ``data`` into one zstd frame, with its content size (see
        :meth:`Codec.compress`)."""
        return bytes(self._compress(as_view(data), level=self.level))

    def decompress(self, data: BytesLike) -> bytes:
        """Decompress one or more concatenated zstd frames.

        A bad magic, a truncated or corrupt frame, a frame that needs a
        dictionary or too much output raise :class:`CompressionError` (see
        :meth:`Codec.decompress`).
        """
        view = as_view(data)
        bound, exact = _output_bound(view)
        if bound > self.max_output_size:
            if exact:
                raise self._too_large(bound)
            bound = self.max_output_size
        out = bytearray(bound)
        try:
            size = self._decompress_into(view, out)
        except self._cramjam_errors as exc:
            if bound == self.max_output_size and not exact:
                raise CompressionError(
                    f"zstd: corrupt frame, or more than max_output_size={self.max_output_size}"
                    f" bytes of output ({exc})"
                ) from exc
            raise CompressionError(f"zstd: corrupt frame ({exc})") from exc
        del out[size:]
        return bytes(out)
