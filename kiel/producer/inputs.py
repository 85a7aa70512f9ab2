"""A record's parts as :meth:`~kiel.producer.Producer.produce` and
``produce_many`` take them, checked: headers, timestamps, the bytes the
serializers return, the columns of many records. Bad input is a
:class:`~kiel.exc.ConfigError` or :class:`~kiel.exc.SerializationError`
naming the topic.
"""

import datetime
from collections.abc import Callable, Iterable
from typing import Any, Optional

from kiel.exc import ConfigError, SerializationError
from kiel.structs import Header

__all__ = ["as_bytes", "as_list", "call", "check_headers", "check_timestamp", "many_args"]


def check_headers(headers: Optional[Iterable[Any]], topic: str) -> tuple[Header, ...]:
    """``headers`` as a tuple of ``(str, bytes or None)`` pairs.

    Raises:
        ConfigError: not an iterable of such pairs.
    """
    if headers is None:
        return ()
    if isinstance(headers, (str, bytes, bytearray, memoryview, dict)):
        raise ConfigError(
            f"headers must be (key, value) pairs, not a {type(headers).__name__}", topic=topic
        )
    pairs: list[Header] = []
    try:
        items = list(headers)
    except TypeError as e:
        raise ConfigError(f"headers must be (key, value) pairs: {e}", topic=topic) from e
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise ConfigError(f"a header must be a (key, value) pair, got {item!r:.80}",
                              topic=topic)
        key, value = item
        if type(key) is not str:
            raise ConfigError(f"header keys must be str, got {key!r:.80}", topic=topic)
        try:
            key.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ConfigError(f"header key {key!r:.80} is not encodable as UTF-8",
                              topic=topic) from e
        if value is not None and type(value) is not bytes:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise ConfigError(
                    f"header values must be bytes or None, got {type(value).__name__}",
                    topic=topic,
                )
            value = bytes(value)
        pairs.append((key, value))
    return tuple(pairs)


def check_timestamp(timestamp: Any, topic: str) -> Optional[int]:
    """``timestamp`` as epoch milliseconds (a naive ``datetime`` is UTC).

    Raises:
        ConfigError: neither an int64 of milliseconds nor a ``datetime``.
    """
    if timestamp is None:
        return None
    if isinstance(timestamp, datetime.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=datetime.timezone.utc)
        return int(timestamp.timestamp() * 1000)
    if type(timestamp) is not int or not -(2**63) <= timestamp < 2**63:
        raise ConfigError(
            f"timestamp must be epoch milliseconds (int) or a datetime, got {timestamp!r:.80}",
            topic=topic,
        )
    return timestamp


def call(func: Callable[[Any], Any], arg: Any, name: str, topic: str) -> Any:
    try:
        return func(arg)
    except Exception as e:  # user code: any failure becomes our typed error
        raise SerializationError(f"{name} failed: {e!r}", topic=topic) from e


def as_bytes(data: Any, what: str, topic: str) -> bytes:
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, bytes):  # a bytes subclass
        return bytes(data)
    hint = " (set serializer=...)" if what == "value" else " (set key_serializer=...)"
    raise SerializationError(
        f"{what} must be bytes, got {type(data).__name__}{hint}", topic=topic
    )


def many_args(topic: Any, values: Iterable[Any], keys: Optional[Iterable[Any]]
               ) -> tuple[list[Any], Optional[list[Any]]]:
    """Check :meth:`Producer.produce_many`'s arguments: the values and keys as lists.

    Raises:
        ConfigError: a bad topic, values or keys not a collection, or keys
            of another length.
    """
    if type(topic) is not str or not topic:
        raise ConfigError(f"topic must be a non-empty str, got {topic!r}")
    value_list = as_list(values, "values", topic)
    key_list = None if keys is None else as_list(keys, "keys", topic)
    if key_list is not None and len(key_list) != len(value_list):
        raise ConfigError(
            f"keys ({len(key_list)}) and values ({len(value_list)}) differ in length",
            topic=topic,
        )
    return value_list, key_list


def as_list(items: Iterable[Any], name: str, topic: str) -> list[Any]:
    """``items`` as a list (a list or tuple as it is).

    Raises:
        ConfigError: a ``str`` or bytes-like object, or not iterable.
    """
    if isinstance(items, list):
        return items
    if isinstance(items, (str, bytes, bytearray, memoryview)):
        raise ConfigError(
            f"{name} must be a collection of records' {name}, not one {type(items).__name__}",
            topic=topic,
        )
    try:
        return list(items)
    except TypeError as e:
        raise ConfigError(f"{name} must be iterable: {e}", topic=topic) from e
