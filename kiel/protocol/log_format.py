"""What message sets (magic 0 and 1) and record batches (magic 2) share on the wire.

Both formats are a sequence of log entries that start alike: an int64 offset
and an int32 size (the *log overhead*), and both carry the codec in the low
three attribute bits and the timestamp type in bit 3. One home for those
numbers, so :mod:`kiel.protocol.messages` and :mod:`kiel.protocol.record_batch`
cannot drift apart.
"""
import struct
from typing import Union

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
