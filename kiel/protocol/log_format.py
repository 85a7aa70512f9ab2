"""What message sets (magic 0 and 1) and record batches (magic 2) share on the wire.

Both formats are a sequence of log entries that start alike: an int64 offset
and an int32 size (the *log overhead*), and both carry the codec in the low
three attribute bits and the timestamp type in bit 3; both decoders take
their input (:func:`as_bytes`) and report a bad entry (:func:`corrupt`) alike.
One home for those, so :mod:`kiel.protocol.messages` and
:mod:`kiel.protocol.record_batch` cannot drift apart.
"""
import struct
import zlib
from typing import Any, Optional, Union

import kiel.compression as _compression
from kiel.exc import ConfigError, CorruptMessageError, KielError, LocalProtocolError

__all__ = [
    "Buffer",
    "CODEC_GZIP",
    "CODEC_LZ4",
    "CODEC_MASK",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_ZSTD",
    "LOG_OVERHEAD",
    "NO_MIN_OFFSET",
    "OFFSET_SIZE",
    "TIMESTAMP_TYPE_BIT",
    "DEFAULT_MAX_DECODED",
    "as_bytes",
    "as_pair",
    "corrupt",
    "decode_arguments",
    "decompress",
]

#: What the decoders accept: ``bytes`` is read in place, the others copied once.
Buffer = Union[bytes, bytearray, memoryview]

#: Codec ids, as the attributes' low three bits carry them.
CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
#: Record batches only (Kafka 2.1+).
CODEC_ZSTD = 4
CODEC_MASK = 0x07
#: Attribute bit 3: the timestamps are the broker's (log-append time).
TIMESTAMP_TYPE_BIT = 0x08

#: Bytes in front of every log entry: its offset (int64) and size (int32).
LOG_OVERHEAD = 12
#: The offset and size at the start of every log entry.
OFFSET_SIZE = struct.Struct(">qi")
#: "No lower bound" for the decoders' ``min_offset``.
NO_MIN_OFFSET = -(2**63)


def as_bytes(buf: Buffer, what: str) -> bytes:
    """``buf`` as ``bytes`` for a decoder to read in place.

    ``bytes`` is returned as it is (the decoders slice keys and values out of
    it); a ``bytearray`` or ``memoryview`` is copied once, so the records
    handed out never alias a buffer the caller reuses.

    Args:
        buf: what was given to a decoder.
        what: how an error names it ("a message set", "record batches").

    Raises:
        ConfigError: ``buf`` is not bytes-like.
    """
    if type(buf) is bytes:
        return buf
    try:
        return bytes(buf)
    except TypeError as e:
        raise ConfigError(f"{what} must be bytes-like, not {type(buf).__name__}") from e


def corrupt(message: str, offset: Optional[int]) -> CorruptMessageError:
    """The error for a log entry whose framing or content is inconsistent."""
    return CorruptMessageError(message, offset=offset)


#: Default bound of one decode's decompressed bytes, every wrapper, batch and
#: nesting level together (128 MiB).
DEFAULT_MAX_DECODED = 128 * 1024 * 1024


def decode_arguments(
    buf: Buffer,
    topic: str = "",
    partition: int = -1,
    *,
    min_offset: Optional[int] = None,
    check_crcs: bool = True,
    max_decoded: int = DEFAULT_MAX_DECODED,
    open_compressed: bool = False,
) -> tuple[Buffer, str, int, Optional[int], bool, int, bool]:
    """The parameters both decoders take, declared once, with their defaults.

    :func:`kiel.protocol.messages.decode_message_set` and
    :func:`kiel.protocol.record_batch.decode_record_batches` show and take
    these parameters (:func:`kiel._signature.parameters_of`) and bind their
    arguments by calling this; each documents what they mean for its format.

    Returns:
        the arguments, in the order of the parameters.
    """
    return buf, topic, partition, min_offset, check_crcs, max_decoded, open_compressed


def decompress(
    codec: int, value: Buffer, offset: int, budget: Optional[list[int]] = None
) -> bytes:
    """Decompress one compressed entry's value within what is left of ``budget[0]``.

    Strategy: the budget is shared by every wrapper and nesting level of one
    decode (a one-element list, decremented here), so nesting cannot multiply
    the bound as a per-call cap would. Without a budget: the codec's own cap.

    Raises:
        CompressionError: it does not decompress, or to more than is left.
        UnsupportedCodecError: an unknown codec id.
        CorruptMessageError: the codec library failed with an error of its own.
    """
    if budget is None:
        budget = [DEFAULT_MAX_DECODED]
    try:
        inner = _compression.decompress(codec, value, max_output_size=max(budget[0], 1))
    except KielError as e:
        raise e.with_context(offset=offset)  # noqa: B904 (the same error, more context)
    except (ValueError, OSError, EOFError, zlib.error, struct.error, IndexError) as e:
        # kiel.compression promises kiel errors; this is a safety net for a
        # codec library that raises something else on garbage.
        raise corrupt(f"compressed entry (codec {codec}) does not decompress: {e!r}",
                      offset) from e
    budget[0] -= len(inner)
    return inner if type(inner) is bytes else bytes(inner)


def as_pair(item: Any, what: str) -> tuple[Any, Any]:
    """``item`` as ``(key, value)``, for the encoders.

    Raises:
        LocalProtocolError: it is not a pair.
    """
    try:
        key, value = item
    except (TypeError, ValueError) as e:
        raise LocalProtocolError(
            f"{what} must be a (key, value) pair, not {type(item).__name__}: {item!r:.80}"
        ) from e
    return key, value
