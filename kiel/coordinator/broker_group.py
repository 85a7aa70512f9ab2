"""The brokers' group coordinator as a grouped consumer's coordinator object.

:class:`BrokerGroup` is what an application passes as
``GroupedConsumer(..., coordinator=BrokerGroup(...))``: the settings of a
group the brokers coordinate (Kafka 0.9 and later, KRaft included), checked
once when built; :class:`~kiel.coordinator.membership.BrokerMembership`
joins with them. :class:`BrokerGroupMetrics` is its typed part of the
consumer's metrics.
"""

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from kiel._options import real
from kiel.consumer.membership import GroupCoordinator, Membership
from kiel.coordinator.assignors import Assignor, assignors_for
from kiel.exc import ConfigError
from kiel.metrics import GroupMetrics, Sample

__all__ = ["BrokerGroup", "BrokerGroupMetrics"]


@dataclass(frozen=True, kw_only=True)
class BrokerGroup(GroupCoordinator):
    """A group the brokers' group coordinator forms (JoinGroup, SyncGroup, Heartbeat).

    Every time is in seconds (kiel's unit; the peers' ``*_ms`` settings
    divided by 1000). The shared settings (``allocator``, ``member_id``,
    ``capacity``, ``join_timeout``, ``leave_timeout``) are
    :class:`~kiel.consumer.membership.GroupCoordinator`'s.

    Args:
        allocator: Kafka's ``"range"`` or ``"roundrobin"`` (Java's
            assignors, so kiel shares groups with other clients), kiel's own
            (``"round_robin"``, ``"sticky"``, ``"weighted"``, a registered
            name or a callable; ``kiel.<name>`` on the wire),
            ``"cooperative-sticky"``, ``"cooperative:<name>"``, or a
            preference list such as ``["range", "roundrobin"]`` (the default)
            of which the coordinator picks one every member offers.
        member_id: must stay ``None``: the coordinator gives the member ids
            (use ``group_instance_id`` for a stable identity).
        session_timeout: seconds the coordinator waits for a heartbeat
            before it drops the member (default 10; the broker's
            ``group.min/max.session.timeout.ms`` bound it).
        heartbeat_interval: seconds between heartbeats (default 3), sent on
            their own task whatever the application does.
        max_poll_interval: seconds the application may go without asking
            for records (default 300); past it the member leaves the group
            on purpose and the next ``consume()`` raises
            :class:`~kiel.exc.PollIntervalExceededError`, then joins again.
            Also bounds how long a rebalance waits for the others.
        group_instance_id: a static member's id (KIP-345): kept across
            restarts, no LeaveGroup on close.

    Raises:
        ConfigError: a bad setting.
    """

    session_timeout: float = 10.0
    heartbeat_interval: float = 3.0
    max_poll_interval: float = 300.0
    group_instance_id: Optional[str] = None

    kind: ClassVar[str] = "brokers"
    KEYWORDS: ClassVar[Mapping[str, str]] = {
        name: name for name in ("session_timeout", "heartbeat_interval", "max_poll_interval",
                                "group_instance_id")
    }
    FOREIGN: ClassVar[str] = (
        "only for a group kept in ZooKeeper (pass zk_hosts, or "
        "coordinator=ZooKeeperGroup(hosts=...))")

    def __post_init__(self) -> None:
        self.check()
        # Resolved once: a bad allocator fails here, at construction.
        object.__setattr__(self, "_assignors", assignors_for(self.allocator, self.capacity))

    @property
    def assignors(self) -> list[Assignor]:
        """The assignors this member offers, in order of preference."""
        found: list[Assignor] = getattr(self, "_assignors")  # noqa: B009 - set in __post_init__
        return found

    def check(self) -> None:
        """Refuse a bad setting.

        Raises:
            ConfigError: a bad setting, named with the consumer's keyword.
        """
        for name, most in (("session_timeout", 3600.0), ("heartbeat_interval", 3600.0),
                           ("max_poll_interval", 86400.0), ("join_timeout", math.inf),
                           ("leave_timeout", math.inf)):
            _seconds(name, getattr(self, name), most)
        if self.heartbeat_interval >= self.session_timeout:
            raise ConfigError(
                f"heartbeat_interval ({self.heartbeat_interval} s) must be below "
                f"session_timeout ({self.session_timeout} s); a third of it is usual"
            )
        if self.member_id is not None:
            raise ConfigError(
                "member_id: in a group the brokers coordinate, the coordinator gives the "
                "member ids; for a stable identity across restarts use group_instance_id"
            )
        iid = self.group_instance_id
        if iid is not None and (not isinstance(iid, str) or not iid or len(iid) > 249):
            raise ConfigError(f"group_instance_id must be a non-empty str, got {iid!r}")
        self.check_shared()

    def metrics(self, membership: Optional[Membership]) -> "BrokerGroupMetrics":
        """The broker group's part of the consumer's metrics.

        Returns:
            ``membership``'s state, generation, leadership and heartbeat
            (``NOT_STARTED`` before it joined).
        """
        if membership is None:
            return BrokerGroupMetrics(coordinator=self.kind)
        raw = membership.metrics()
        return BrokerGroupMetrics(
            coordinator=self.kind, state=raw["group_state"], generation=raw["generation"],
            leader=bool(raw["leader"]), assignor=raw.get("assignor"),
            rebalance_protocol=raw.get("rebalance_protocol", "eager"),
            heartbeat_at=raw.get("last_heartbeat"),
            last_rebalance_seconds=raw.get("last_rebalance_seconds"),
        )


@dataclass(frozen=True, kw_only=True)
class BrokerGroupMetrics(GroupMetrics):
    """A broker group member's part of the consumer's metrics.

    ``state`` is ``UNJOINED``, ``REVOKING``, ``JOINING``, ``SYNCING``,
    ``STABLE``, ``LEFT`` (``max_poll_interval`` passed), ``FAILED`` or
    ``CLOSED`` (``NOT_STARTED`` before connect).
    """

    #: the generation this member belongs to (-1: none).
    generation: int = -1
    #: whether this member leads its group (runs the assignor).
    leader: bool = False
    #: the assignor the coordinator chose (``None``: none yet).
    assignor: Optional[str] = None
    #: ``"eager"`` or ``"cooperative"`` (KIP-429).
    rebalance_protocol: str = "eager"
    #: wall-clock time (``time.time()``) of the last heartbeat answered.
    heartbeat_at: Optional[float] = None
    #: the last rebalance's seconds, as the membership timed it.
    last_rebalance_seconds: Optional[float] = None

    heartbeats: ClassVar[bool] = True

    @property
    def last_heartbeat(self) -> Optional[float]:
        return self.heartbeat_at

    def samples(self) -> Iterator[Sample]:
        yield from super().samples()
        yield Sample("kiel_group_generation", (), self.generation)
        yield Sample("kiel_group_leader", (), int(self.leader))
        if self.heartbeat_at is not None:
            yield Sample("kiel_group_last_heartbeat_timestamp_seconds", (), self.heartbeat_at)

    def flat(self) -> dict[str, Any]:
        return {**super().flat(), "generation": self.generation, "leader": self.leader}


def _seconds(name: str, value: Any, most: float) -> None:
    real(name, value, above=0)  # finite: a wait for ever is not a bound
    if value > most:
        hint = f" ({value} ms is {value / 1000:g} s)" if value / 1000 <= most else ""
        raise ConfigError(f"{name} is in seconds: {value!r} is over {most:g}{hint}")
