"""A member's registration, ``/consumers/<group>/ids/<member_id>``: what it says and how to read it.

The data is the Kafka 0.8 consumer's JSON, so existing tools see the group::

    {"version": 1, "subscription": {"<topic>": 1, ...}, "pattern": "static",
     "timestamp": "<ms>", "kiel": {"host": ..., "pid": ..., "capacity": ...}}

``pattern`` is ``static`` (``subscription`` lists topics), ``white_list`` or
``black_list`` (``subscription`` holds one regular expression). Other
clients' registrations have no ``kiel`` part.
"""

import json
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Iterable
from re import Pattern
from typing import Optional, Union

from kiel.exc import ConfigError

__all__ = ["Subscription", "capacity_of", "encode", "subscription", "subscription_of"]

log = logging.getLogger(__name__)

#: What a member subscribes to: ``(pattern, topic names)``, one of them empty
#: (``None`` or ``[]``).
Subscription = tuple[Optional[Pattern[str]], list[str]]


def subscription(topics: Union[Iterable[str], Pattern[str], str], pattern: bool) -> Subscription:
    """``(pattern, static topics)`` from :class:`~kiel.zookeeper.group.GroupMember`'s
    ``topics`` and ``pattern``.

    Raises:
        ConfigError: neither a topic nor a pattern.
    """
    if isinstance(topics, str) and pattern:
        return re.compile(topics), []
    if isinstance(topics, re.Pattern):
        return topics, []
    static = [topics] if isinstance(topics, str) else sorted(set(topics))
    if not static:
        raise ConfigError("subscribe to at least one topic or a pattern")
    return None, static


def encode(subscribed: Subscription, capacity: float) -> bytes:
    """This member's registration data (its subscription and advertised ``capacity``)."""
    pattern, static = subscribed
    if pattern is not None:
        subscription, kind = {pattern.pattern: 1}, "white_list"
    else:
        subscription, kind = {t: 1 for t in static}, "static"
    registration = {
        "version": 1,
        "subscription": subscription,
        "pattern": kind,
        "timestamp": str(int(time.time() * 1000)),
        "kiel": {"host": socket.gethostname(), "pid": os.getpid(), "capacity": capacity},
    }
    return json.dumps(registration).encode()


def subscription_of(data: bytes) -> Callable[[str], bool]:
    """Which topics a registration subscribes to.

    ``static`` lists topics; ``white_list`` / ``black_list`` hold a regex.
    A registration that says nothing readable subscribes to every topic.
    """
    try:
        registration = json.loads(data.decode())
        subscription = dict(registration["subscription"])
        kind = registration.get("pattern", "static")
        if kind == "static":
            topics = frozenset(subscription)
            return topics.__contains__
        patterns = [re.compile(p) for p in subscription]
    except (ValueError, KeyError, TypeError, AttributeError, re.error) as e:
        log.warning("unreadable member registration (%s); counting it in for every topic", e)
        return lambda topic: True
    if kind == "white_list":
        return lambda topic: any(p.fullmatch(topic) for p in patterns)
    if kind == "black_list":
        return lambda topic: not any(p.fullmatch(topic) for p in patterns)
    return lambda topic: True


def capacity_of(data: bytes) -> float:
    """The ``kiel.capacity`` a registration advertises (1.0 when it says none)."""
    try:
        return float(json.loads(data.decode())["kiel"]["capacity"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return 1.0
