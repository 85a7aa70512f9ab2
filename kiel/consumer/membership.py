"""The seam between a grouped consumer and whatever forms its group.

:class:`~kiel.consumer.grouped.GroupedConsumer` consumes the partitions a
group gives it; *who* forms the group is an adapter behind
:class:`Membership`:

* ``"zookeeper"`` (:class:`kiel.zookeeper.membership.ZooKeeperMembership`):
  the Kafka 0.8 way, members and owner znodes in ZooKeeper, every member
  running the allocator itself;
* ``"brokers"`` (:class:`kiel.coordinator.membership.BrokerMembership`): the
  brokers' group coordinator (JoinGroup/SyncGroup/Heartbeat), the leader
  member running the allocator for everyone.

Both drive the consumer through the same :class:`PartitionHooks` (listener,
start positions, stop and commit on revoke), so the listener, the allocators
and everything ``consume()`` offers behave alike on both.

Strategy: this package knows adapters by name only (:data:`ADAPTERS`), and
imports one when a consumer is built with it. So ``kiel.consumer`` imports
neither kazoo nor any adapter, a broker group never loads kazoo, and a new
coordinator is one more adapter, not a fork of the consumer.
"""

import importlib
from collections.abc import Mapping
from re import Pattern
from typing import Any, Optional, Protocol, Union

from kiel._aio import Tasks
from kiel.cluster import Cluster
from kiel.consumer.offsets import GroupOffsets
from kiel.metrics import Rebalance
from kiel.structs import TopicPartition

__all__ = [
    "ADAPTERS",
    "GroupContext",
    "Membership",
    "PartitionHooks",
    "adapter",
]


class PartitionHooks:
    """What a consumer does when the partitions it owns change. All are awaited on the loop.

    The default implementations do nothing, so a membership can be exercised
    on its own (tests, tooling).
    """

    async def assigned(self, partitions: list[TopicPartition]) -> None:
        """Ownership acquired: run the listener, read committed offsets, start fetching."""

    async def revoked(self, partitions: list[TopicPartition]) -> None:
        """About to give up: stop fetching, wait for in-hand records, run the listener, commit."""

    async def lost(self, partitions: list[TopicPartition]) -> None:
        """Ownership gone without a hand-over (session lost, fenced): stop, listener, no commit."""

    def in_hand(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Those of ``partitions`` the application still holds records of (unfinished).

        A membership that must give partitions up without waiting for the
        application (it left the group for ``max_poll_interval``) loses
        these instead of revoking them.
        """
        return []

    def rebalance_began(self, fresh: bool = False) -> None:
        """A rebalance begins at this member (JoinGroup, a ZooKeeper reconcile pass).

        Args:
            fresh: what stopped before does not count in its pause (the
                member had left its group on purpose).
        """

    def rebalance_ended(self) -> Optional[Rebalance]:
        """The rebalance ended, its new assignment fetching: what it moved, and the
        time its partitions had no owner here (counted in the consumer's
        metrics), or ``None`` when it moved nothing (see
        :class:`~kiel.metrics.RebalanceClock`)."""
        return None

    def suspend(self) -> None:
        """Ownership uncertain for now (a lost connection): stop fetching everything at once."""

    def resume(self) -> None:
        """Ownership certain again: fetch the owned partitions again."""


class GroupContext:
    """What a membership is given by its consumer: the same for every adapter.

    Args:
        cluster: the consumer's cluster.
        group: the group name.
        topics: sorted subscribed names, or a compiled pattern.
        hooks: the consumer's :class:`PartitionHooks`.
        offsets: the group's offsets requests (the membership gives it the
            generation and member id its commits must carry).
        tasks: the consumer's background tasks (cancelled when it closes).
    """

    __slots__ = ("cluster", "group", "topics", "hooks", "offsets", "tasks")

    def __init__(
        self,
        *,
        cluster: Cluster,
        group: str,
        topics: Union[list[str], Pattern[str]],
        hooks: PartitionHooks,
        offsets: GroupOffsets,
        tasks: Tasks,
    ) -> None:
        self.cluster = cluster
        self.group = group
        self.topics = topics
        self.hooks = hooks
        self.offsets = offsets
        self.tasks = tasks


class Membership(Protocol):
    """One member's place in a group, as the consumer sees it.

    An adapter moves the member's partitions only through the
    :class:`PartitionHooks` it was given, keeping two promises: a partition
    is handed to ``hooks.assigned`` only when no other member may fetch it,
    and to ``hooks.revoked`` (which commits) before any other member may
    take it.
    """

    #: This member's id in the group (``None`` until the first join gives one).
    member_id: Optional[str]
    #: The last error of a rebalance step (allocator, listener, a fatal
    #: answer), raised by the consumer's next ``consume()``, which clears it.
    failure: Optional[BaseException]

    async def join(self) -> None:
        """Become a member and wait for the first assignment, within the adapter's bound.

        Raises:
            KielError: the group could not be joined (a typed subclass says why).
        """

    async def leave(self) -> None:
        """Leave gracefully (revoke, commit, give the partitions back), bounded; never raises."""

    async def close(self) -> None:
        """Free what the membership holds (sessions, connections). After :meth:`leave`."""

    def may_commit(self) -> bool:
        """Whether what this member owns is surely still its own, so a commit is safe."""

    def poll(self) -> None:
        """The application asked for records (a broker group's ``max_poll_interval``)."""

    async def stored_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Offsets committed outside the coordinator's answer, where the group keeps any.

        A 0.8 group's v0 commits are also znodes in ZooKeeper; a broker
        group has none (an empty dict).

        Raises:
            KielError: they could not be read.
        """

    def metrics(self) -> Mapping[str, Any]:
        """The group's state for ``metrics()``: coordinator, state, generation and so on."""


#: The coordinators a group can live in: name -> (module, class) of the adapter.
ADAPTERS: dict[str, tuple[str, str]] = {
    "zookeeper": ("kiel.zookeeper.membership", "ZooKeeperMembership"),
    "brokers": ("kiel.coordinator.membership", "BrokerMembership"),
}


def adapter(name: str) -> Any:
    """The adapter class registered as ``name`` (imported now, once).

    An adapter class has ``OPTIONS`` (the consumer keywords it reads), a
    classmethod ``settings_for(options)`` that checks the options given once
    (raising :class:`~kiel.exc.ConfigError`), and builds a
    :class:`Membership` from ``(context, settings)``.

    Raises:
        KeyError: no such adapter.
    """
    module, cls = ADAPTERS[name]
    return getattr(importlib.import_module(module), cls)
