"""A small pure-Python XXH32, used only for LZ4 frame *header* checksums.

Strategy: the LZ4 frame descriptor is 2 to 14 bytes long, so a pure-Python
hash costs a few microseconds per descriptor (and :mod:`kiel.compression.lz4`
keeps the checksums of the usual descriptors, so most frames pay nothing)
and saves a dependency (kafka-python needs the ``xxhash`` package for
this). It is not meant for bulk data: block and content checksums are not
computed with it (see :mod:`kiel.compression.lz4`).
"""
import struct

_M32 = 0xFFFFFFFF
_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_U32 = struct.Struct("<I")
_STRIPE = struct.Struct("<4I")


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _M32


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M32, 13) * _P1) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """Return the 32-bit xxHash (XXH32) of ``data``.

    Args:
        data: a bytes-like object (meant for short inputs).
        seed: the hash seed.

    Returns:
        the hash as an unsigned 32-bit integer.
    """
    buf = bytes(data)
    length = len(buf)
    pos = 0
    if length >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while pos + 16 <= length:
            l1, l2, l3, l4 = _STRIPE.unpack_from(buf, pos)
            v1 = _round(v1, l1)
            v2 = _round(v2, l2)
            v3 = _round(v3, l3)
            v4 = _round(v4, l4)
            pos += 16
        acc = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        acc = (seed + _P5) & _M32
    acc = (acc + length) & _M32
    while pos + 4 <= length:
        acc = (acc + _U32.unpack_from(buf, pos)[0] * _P3) & _M32
        acc = (_rotl(acc, 17) * _P4) & _M32
        pos += 4
    while pos < length:
        acc = (acc + buf[pos] * _P5) & _M32
        acc = (_rotl(acc, 11) * _P1) & _M32
        pos += 1
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc
