"""The message-set encoder as it was before MessageSetBuilder replaced it
(kiel.protocol.messages at the start of the producer restructure), frozen
here as the oracle the builder must match byte for byte. Test code only:
kiel itself has one encoder.
"""
import struct
import zlib
from typing import Any, List, Optional, Tuple

import kiel.compression as _compression
from kiel.exc import LocalProtocolError
from kiel.protocol.messages import CODEC_GZIP
from kiel.structs import Record

_INT32 = struct.Struct(">i")
_INT32_MAX = 2**31 - 1
_HEADER = struct.Struct(">qiI")  # offset, size, crc
_MAGIC_ATTRS_KLEN = struct.Struct(">bbi")
_crc32 = zlib.crc32


def _check_bytes(item: Any, what: str) -> Optional[bytes]:
    if item is None or type(item) is bytes:
        return item
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item)
    raise LocalProtocolError(
        f"message {what}s must be bytes (or None), not {type(item).__name__}"
    )


def _encode_body(key: Any, value: Any, attrs: int = 0) -> bytes:
    """A magic-0 message from the magic byte on (general path, validating)."""
    key = _check_bytes(key, "key")
    value = _check_bytes(value, "value")
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    if klen > _INT32_MAX or vlen > _INT32_MAX:
        raise LocalProtocolError("a message key or value is longer than an int32 length can say")
    return b"".join(
        (_MAGIC_ATTRS_KLEN.pack(0, attrs, klen), key or b"", _INT32.pack(vlen), value or b"")
    )


def _encode_message(offset: int, key: Any, value: Any, attrs: int = 0) -> bytes:
    """One magic-0 message with its offset and size prefix."""
    body = _encode_body(key, value, attrs)
    return _HEADER.pack(offset, len(body) + 4, _crc32(body)) + body


_NULL_KEY_PREFIX = _MAGIC_ATTRS_KLEN.pack(0, 0, -1)


def _as_pair(m: Any) -> Tuple[Any, Any]:
    if isinstance(m, Record):
        return m.key, m.value
    try:
        key, value = m
    except (TypeError, ValueError) as e:
        raise LocalProtocolError(
            f"messages must be (key, value) pairs or Records, not {type(m).__name__}"
        ) from e
    return key, value


def _encode_plain(messages: Any) -> bytes:
    parts: List[bytes] = []
    append = parts.append
    header = _HEADER.pack
    mak = _MAGIC_ATTRS_KLEN.pack
    i32 = _INT32.pack
    crc32 = _crc32
    null_prefix = _NULL_KEY_PREFIX
    offset = 0
    # Strategy: the common case (pairs of a bytes-or-None key and a bytes
    # value) builds each message body with one concatenation and CRCs it in
    # one call, with no per-message function call. A length over int32 makes
    # ``i32`` raise ``struct.error``, caught below; other types take the
    # validating ``_encode_body``.
    for key, value in messages:
        if type(value) is bytes and (key is None or type(key) is bytes):
            if key is None:
                body = null_prefix + i32(len(value)) + value
            else:
                body = mak(0, 0, len(key)) + key + i32(len(value)) + value
        else:
            body = _encode_body(key, value)
        append(header(offset, len(body) + 4, crc32(body)))
        append(body)
        offset += 1
    return b"".join(parts)


def encode_message_set(messages: Any, codec: int = 0, *,
                       compresslevel: Optional[int] = None) -> bytes:
    """What kiel.protocol.messages.encode_message_set returned before the builder."""
    if not isinstance(messages, (list, tuple)):
        messages = list(messages)
    try:
        try:
            plain = _encode_plain(messages)
        except (TypeError, ValueError):
            # Not all plain pairs (Records, or bad items): normalize and retry.
            plain = _encode_plain([_as_pair(m) for m in messages])
    except struct.error as e:
        raise LocalProtocolError(
            "a message key or value is longer than an int32 length can say"
        ) from e
    if not codec:
        return plain
    if not plain:
        return b""
    return _encode_message(0, None, _compress(codec, plain, compresslevel), codec)


def _compress(codec: int, data: bytes, compresslevel: Optional[int]) -> bytes:
    if compresslevel is not None and codec == CODEC_GZIP:
        out = _compression.compress(codec, data, level=compresslevel)
    else:
        out = _compression.compress(codec, data)
    return out if type(out) is bytes else bytes(out)


