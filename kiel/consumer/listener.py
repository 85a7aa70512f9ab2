"""ConsumerRebalanceListener: the application's callbacks around ownership changes.

No kazoo here: an application can subclass the listener without importing
the grouped consumer's group machinery (ZooKeeper or the brokers' coordinator).
"""

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Sequence
from typing import Any, Optional

from kiel._aio import within
from kiel.exc import ConfigError, GroupError
from kiel.structs import TopicPartition

__all__ = ["CALLBACKS", "ConsumerRebalanceListener", "call_listener", "check_listener"]

#: The callbacks a listener may have; it needs at least one.
CALLBACKS = ("on_partitions_revoked", "on_partitions_assigned", "on_partitions_lost")

log = logging.getLogger(__name__)


class ConsumerRebalanceListener:
    """Callbacks around ownership changes (kafka-python's ConsumerRebalanceListener).

    Subclass it, or pass any object with some of these methods; each may be a
    plain function or an ``async def``. A plain function runs on the IOLoop:
    a slow one blocks the loop (and every other partition's fetching) while it
    runs, so make slow work ``async``.

    Per partition, the old owner's :meth:`on_partitions_revoked` finishes
    before the new owner's :meth:`on_partitions_assigned` starts. Partitions
    that stay with this member are never revoked.

    An ``async`` callback gets ``listener_timeout`` seconds (a consumer
    setting); past it, it is cancelled, a :class:`~kiel.exc.GroupError` is
    logged and raised by the next ``consume()``, and the hand-off goes on (a
    revoked partition is committed and released all the same). A plain
    function cannot be interrupted.
    """

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> Any:
        """Before ``revoked`` are handed over: no record of them is in the
        application's hands any more (or ``revoke_timeout`` passed); their
        finished positions are committed right after this returns."""

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> Any:
        """``assigned`` are owned now; fetching starts from their committed
        positions right after this returns."""

    def on_partitions_lost(self, lost: list[TopicPartition]) -> Any:
        """The member's group session ended without a hand-over (its ZooKeeper
        session expired; or the brokers' coordinator fenced it, forgot it, or
        heard no heartbeat for ``session_timeout``): ``lost`` may already
        belong to another member; nothing is committed. Defaults to
        :meth:`on_partitions_revoked` when a listener lacks this method."""


def check_listener(listener: Any) -> None:
    """Refuse a listener that has none of :data:`CALLBACKS` (it would never be
    called: a function, a string, a misspelt method).

    Raises:
        ConfigError: it has none of them.
    """
    if listener is not None and not any(callable(getattr(listener, name, None))
                                        for name in CALLBACKS):
        raise ConfigError(f"listener must have one or more of {', '.join(CALLBACKS)} "
                          f"(a ConsumerRebalanceListener), got {listener!r}")


async def call_listener(
    listener: Any,
    name: str,
    tps: Sequence[TopicPartition],
    errors: deque[BaseException],
    timeout: Optional[float] = None,
) -> None:
    """Call ``listener.<name>(tps)`` if it has that method, awaiting an ``async`` one.

    ``on_partitions_lost`` falls back to ``on_partitions_revoked``. What the
    listener raises is the application's error: it is logged and kept in
    ``errors`` (the consumer raises it from its next ``consume()``); the
    group carries on.

    Args:
        listener: the application's listener, or ``None``.
        name: the callback's name.
        tps: the partitions it is told about.
        errors: where its failure is kept for the application.
        timeout: seconds an ``async`` callback may take (``None``: no bound);
            past it, it is cancelled and a :class:`~kiel.exc.GroupError` is
            logged and kept in ``errors``, and the hand-off goes on.
    """
    if listener is None:
        return
    if name == "on_partitions_lost" and not hasattr(listener, name):
        name = "on_partitions_revoked"
    method = getattr(listener, name, None)
    if method is None:
        return
    try:
        result = method(list(tps))
        if inspect.isawaitable(result):
            await within(result, timeout)
    except asyncio.TimeoutError:
        error = GroupError(
            f"{name}({list(tps)}) did not return within listener_timeout={timeout}s; "
            "cancelled, the hand-off goes on"
        )
        log.error("%s", error)
        errors.append(error)
    except Exception as e:  # noqa: BLE001 - the application's code: raised by consume()
        log.error("%s(%s) raised %r", name, list(tps), e)
        errors.append(e)
