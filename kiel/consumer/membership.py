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

The caller chooses the coordinator with an object, a
:class:`GroupCoordinator`: :class:`kiel.coordinator.BrokerGroup` or
:class:`kiel.zookeeper.group_coordinator.ZooKeeperGroup`. Each holds its
settings (the shared ones, :class:`GroupCoordinator`'s fields, and its own),
checked once when built, and turns its membership's state into its typed
part of the consumer's metrics (:class:`~kiel.metrics.GroupMetrics`). The
consumer's old keywords (``zk_hosts=``, ``session_timeout=`` ...) build the
same objects (:func:`coordinator_from_keywords`).

Strategy: this package knows adapters by name only (:data:`ADAPTERS`,
:data:`COORDINATORS`), and imports one when a consumer is built with it. So
``kiel.consumer`` imports neither kazoo nor any adapter, a broker group never
loads kazoo, and a new coordinator is one more adapter, not a fork of the
consumer.
"""

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from re import Pattern
from typing import Any, ClassVar, Optional, Protocol, Union

from kiel._aio import Tasks
from kiel._options import real
from kiel.cluster import Cluster
from kiel.consumer.offsets import GroupOffsets
from kiel.exc import ConfigError
from kiel.metrics import GroupMetrics, Rebalance
from kiel.structs import TopicPartition

__all__ = [
    "ADAPTERS",
    "COORDINATORS",
    "OWN_KEYWORDS",
    "SHARED_KEYWORDS",
    "GroupContext",
    "GroupCoordinator",
    "Membership",
    "PartitionHooks",
    "adapter",
    "coordinator_from_keywords",
    "shim_keywords",
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
        """The adapter's state (state, generation and so on), which its
        :class:`GroupCoordinator` turns into the consumer's typed
        :class:`~kiel.metrics.GroupMetrics`."""


#: The consumer keywords every coordinator reads (its :class:`GroupCoordinator` fields).
SHARED_KEYWORDS = ("allocator", "member_id", "capacity", "join_timeout", "leave_timeout")


@dataclass(frozen=True, kw_only=True)
class GroupCoordinator:
    """Who forms a grouped consumer's group, and how: the base of every coordinator.

    Pass a subclass as ``GroupedConsumer(..., coordinator=...)``:
    :class:`kiel.coordinator.BrokerGroup` (the brokers' group coordinator)
    or :class:`kiel.zookeeper.group_coordinator.ZooKeeperGroup` (Kafka
    0.8's groups in ZooKeeper). Immutable, checked when built, and free of
    connections: one object may configure many consumers.

    Args:
        allocator: the allocator name (see the allocators guide: one name
            is one algorithm in every coordinator), a callable, or ``None``
            for the coordinator's default; a broker group also takes a
            preference list.
        member_id: this member's id, where the coordinator lets the member
            choose it (ZooKeeper); ``None``: the coordinator's.
        capacity: advertised to the other members; the ``"weighted"``
            allocator splits partitions in proportion to it.
        join_timeout: seconds ``connect()`` waits to join and take the
            first assignment.
        leave_timeout: seconds ``close()`` gives the graceful leave.

    Raises:
        ConfigError: a bad setting (when built).
    """

    allocator: Any = None
    member_id: Optional[str] = None
    capacity: float = 1.0
    join_timeout: float = 60.0
    leave_timeout: float = 10.0

    #: The coordinator's name in metrics and logs (``"brokers"``, ``"zookeeper"``):
    #: also the key of its membership adapter in :data:`ADAPTERS`.
    kind: ClassVar[str] = ""
    #: kiel 1.x's consumer keywords for this coordinator's own settings:
    #: keyword -> field (the shim, :func:`coordinator_from_keywords`).
    KEYWORDS: ClassVar[Mapping[str, str]] = {}
    #: Why another coordinator's keyword is refused here (after its name).
    FOREIGN: ClassVar[str] = ""

    def check_shared(self) -> None:
        """Refuse a bad shared setting (a subclass's ``__post_init__`` calls it).

        Raises:
            ConfigError: a bad capacity or join/leave timeout.
        """
        real("capacity", self.capacity, above=0, unit="a number")
        real("join_timeout", self.join_timeout, above=0)
        real("leave_timeout", self.leave_timeout, at_least=0)

    def metrics(self, membership: Optional["Membership"]) -> GroupMetrics:
        """This coordinator's part of the consumer's metrics: the state of
        ``membership`` (``None``: not connected yet).

        Returns:
            a :class:`~kiel.metrics.GroupMetrics` of the coordinator's own kind.
        """
        raise NotImplementedError

    @classmethod
    def from_keywords(cls, options: Mapping[str, Any]) -> "GroupCoordinator":
        """The coordinator kiel 1.x's consumer keywords describe (the given ones).

        Raises:
            ConfigError: a bad setting, or another coordinator's keyword.
        """
        foreign = sorted(set(options) - set(cls.KEYWORDS) - set(SHARED_KEYWORDS))
        if foreign:
            raise ConfigError(f"{', '.join(foreign)}: {cls.FOREIGN}")
        return cls(**{cls.KEYWORDS.get(name, name): value for name, value in options.items()})

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return f"{type(self).__name__}({shown})"


#: The coordinators a group can live in: kind -> (module, class) of the membership adapter.
ADAPTERS: dict[str, tuple[str, str]] = {
    "zookeeper": ("kiel.zookeeper.membership", "ZooKeeperMembership"),
    "brokers": ("kiel.coordinator.membership", "BrokerMembership"),
}

#: The coordinator objects by kind: (module, class) of the :class:`GroupCoordinator`.
COORDINATORS: dict[str, tuple[str, str]] = {
    "zookeeper": ("kiel.zookeeper.group_coordinator", "ZooKeeperGroup"),
    "brokers": ("kiel.coordinator.broker_group", "BrokerGroup"),
}


def _load(where: tuple[str, str]) -> Any:
    module, cls = where
    return getattr(importlib.import_module(module), cls)


def adapter(name: str) -> Any:
    """The membership adapter class registered as ``name`` (imported now, once).

    An adapter builds a :class:`Membership` from ``(context, coordinator)``,
    the coordinator being its own :class:`GroupCoordinator` subclass.

    Raises:
        KeyError: no such adapter.
    """
    return _load(ADAPTERS[name])


#: kiel 1.x's consumer keywords for each coordinator's own settings (its
#: class's ``KEYWORDS``, named here so that the consumer knows them without
#: importing an adapter; tests/consumer/test_coordinator_objects.py holds them equal).
OWN_KEYWORDS: dict[str, tuple[str, ...]] = {
    "brokers": ("session_timeout", "heartbeat_interval", "max_poll_interval",
                "group_instance_id"),
    "zookeeper": ("zk_hosts", "zk_session_timeout", "zk_chroot", "zk_max_retry_delay",
                  "zk_connect_timeout", "zk_auth", "partitions_from", "acquire_timeout"),
}


def shim_keywords() -> list[str]:
    """Every consumer keyword the shim takes: the coordinators' own and the shared ones."""
    names = set(SHARED_KEYWORDS)
    for own in OWN_KEYWORDS.values():
        names.update(own)
    return sorted(names)


def coordinator_from_keywords(options: Mapping[str, Any]) -> GroupCoordinator:
    """The coordinator kiel 1.x's keywords describe: ZooKeeper's when
    ``zk_hosts`` is given, else the brokers'.

    Args:
        options: the keywords given (``None`` values left out).

    Raises:
        ConfigError: a bad setting, or a keyword of the other coordinator.
    """
    kind = "zookeeper" if options.get("zk_hosts") is not None else "brokers"
    cls: type[GroupCoordinator] = _load(COORDINATORS[kind])
    return cls.from_keywords(options)
