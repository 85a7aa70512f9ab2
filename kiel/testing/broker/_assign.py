"""TEMPORARY stand-in for ``kiel.protocol.messages.assign_offsets`` (plain sets only).

Used only while ``kiel.protocol.messages`` is not importable.
"""

import struct
import zlib
from typing import Tuple

from kiel.exc import CorruptMessageError, UnsupportedCodecError

_HEADER = struct.Struct(">qi")
_OFFSET = struct.Struct(">q")


def assign_offsets(message_set: bytes, base_offset: int) -> Tuple[bytes, int]:
    """Validate CRCs and rewrite offsets of an uncompressed message set."""
    buf = bytearray(message_set)
    pos = 0
    count = 0
    end = len(buf)
    while end - pos >= 12:
        _, size = _HEADER.unpack_from(buf, pos)
        if size < 14 or pos + 12 + size > end:
            break
        (crc,) = struct.unpack_from(">I", buf, pos + 12)
        if zlib.crc32(memoryview(buf)[pos + 16: pos + 12 + size]) != crc:
            raise CorruptMessageError("CRC mismatch", offset=pos)
        if buf[pos + 17] & 0x07:
            raise UnsupportedCodecError("compressed sets need kiel.protocol.messages")
        _OFFSET.pack_into(buf, pos, base_offset + count)
        count += 1
        pos += 12 + size
    return bytes(buf[:pos]), count
