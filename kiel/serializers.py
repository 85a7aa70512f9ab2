"""Serializers and deserializers for record values and keys.

A serializer is any callable ``serializer(value) -> bytes`` given to
:class:`~kiel.clients.Producer` (``serializer=`` for values,
``key_serializer=`` for keys); a deserializer is ``deserializer(bytes) -> value``
given to the consumers. kiel ships a JSON pair::

    from kiel.serializers import json_deserializer, json_serializer

    producer = Producer(brokers, serializer=json_serializer)
    consumer = SingleConsumer(brokers, deserializer=json_deserializer)

Without a serializer, values (and keys) must already be ``bytes``: kiel never
guesses an encoding.
"""
import json
from collections.abc import Callable
from typing import Any, Optional

__all__ = [
    "Deserializer",
    "Serializer",
    "json_deserializer",
    "json_serializer",
    "utf8_deserializer",
    "utf8_serializer",
]

#: Turns an application value into the bytes sent (``None`` stays a null).
Serializer = Callable[[Any], Optional[bytes]]
#: Turns the bytes received (``None`` for a null) into an application value.
Deserializer = Callable[[Optional[bytes]], Any]

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_serializer(value: Any) -> bytes:
    """Encode ``value`` as compact UTF-8 JSON.

    Args:
        value: anything :mod:`json` can encode (dicts, lists, strings,
            numbers, booleans, ``None``). NaN and infinities are refused, as
            they are not JSON.

    Returns:
        the JSON text as UTF-8 bytes, without insignificant whitespace.

    Raises:
        TypeError: ``value`` holds something JSON cannot encode.
        ValueError: ``value`` holds NaN or an infinity, or a circular reference.
    """
    return _encoder.encode(value).encode("utf-8")


def json_deserializer(data: Optional[bytes]) -> Any:
    """Decode UTF-8 JSON bytes (the inverse of :func:`json_serializer`).

    Args:
        data: the record value; ``None`` (a null value, e.g. a tombstone)
            stays ``None``.

    Returns:
        the decoded value.

    Raises:
        ValueError: ``data`` is not UTF-8 JSON (``json.JSONDecodeError`` and
            ``UnicodeDecodeError`` are both ``ValueError``).
    """
    if data is None:
        return None
    return json.loads(bytes(data).decode("utf-8"))


def utf8_serializer(value: str) -> bytes:
    """Encode a ``str`` as UTF-8 (handy for string keys).

    Raises:
        TypeError: ``value`` is not a ``str``.
    """
    if not isinstance(value, str):
        raise TypeError(f"utf8_serializer takes str, not {type(value).__name__}")
    return value.encode("utf-8")


def utf8_deserializer(data: Optional[bytes]) -> Optional[str]:
    """Decode UTF-8 bytes to ``str``; ``None`` stays ``None``.

    Raises:
        ValueError: ``data`` is not valid UTF-8.
    """
    if data is None:
        return None
    return bytes(data).decode("utf-8")
