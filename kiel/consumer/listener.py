"""ConsumerRebalanceListener: the application's callbacks around ownership changes.

No kazoo here: an application can subclass the listener without importing
the grouped consumer's ZooKeeper machinery.
"""

import inspect
import logging
from typing import Any, List, Sequence

from kiel.structs import TopicPartition

__all__ = ["ConsumerRebalanceListener", "call_listener"]

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
    """

    def on_partitions_revoked(self, revoked: List[TopicPartition]) -> Any:
        """Before ``revoked`` are handed over: no record of them is in the
        application's hands any more (or ``revoke_timeout`` passed); their
        finished positions are committed right after this returns."""

    def on_partitions_assigned(self, assigned: List[TopicPartition]) -> Any:
        """``assigned`` are owned now; fetching starts from their committed
        positions right after this returns."""

    def on_partitions_lost(self, lost: List[TopicPartition]) -> Any:
        """The ZooKeeper session expired: ``lost`` may already belong to
        another member; nothing is committed. Defaults to
        :meth:`on_partitions_revoked` when a listener lacks this method."""


async def call_listener(
    listener: Any, name: str, tps: Sequence[TopicPartition], errors: List[BaseException]
) -> None:
    """Call ``listener.<name>(tps)`` if it has that method, awaiting an ``async`` one.

    ``on_partitions_lost`` falls back to ``on_partitions_revoked``. What the
    listener raises is the application's error: it is logged and kept in
    ``errors`` (the consumer raises it from its next ``consume()``); the
    group carries on.
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
            await result
    except Exception as e:  # noqa: BLE001 - the application's code: raised by consume()
        log.error("%s(%s) raised %r", name, list(tps), e)
        errors.append(e)
