"""The operations a test can ask of a running cluster, and their synchronous facade.

:class:`ClusterOps` runs on the cluster's IOLoop; each method takes and
returns JSON-able values so that the same operations serve the in-process
:class:`~kiel.testing.broker.cluster.EmbeddedCluster` and the control channel
of a ``serve`` subprocess (:class:`~kiel.testing.broker.control.ClusterProcess`).

:class:`ClusterControl` is the synchronous, documented API both of those
expose; a subclass only supplies :meth:`ClusterControl._call`.
"""

from typing import TYPE_CHECKING, Any, Optional, Union

from kiel.exc import HarnessError

if TYPE_CHECKING:  # pragma: no cover
    from kiel.testing.broker.core import ClusterCore

__all__ = ["ClusterControl", "ClusterOps", "OPERATIONS"]

ApiSpec = Union[None, int, str]

#: Names of the operations reachable through :meth:`ClusterControl._call`.
OPERATIONS = (
    "create_topic",
    "describe",
    "leader",
    "offsets",
    "committed_offset",
    "stop_broker",
    "start_broker",
    "restart_broker",
    "move_leader",
    "preferred_leader_election",
    "hang_broker",
    "resume_broker",
    "close_connections",
    "drop_responses",
    "inject_error",
    "corrupt_offsets",
    "set_latency",
    "clear_faults",
    "heal",
    "delete_records",
    "roll_segment",
    "errors",
)


class ClusterOps:
    """Cluster operations with JSON-able arguments and results; call on the cluster's loop."""

    def __init__(self, core: "ClusterCore") -> None:
        self.core = core

    async def create_topic(self, name: str, partitions: Optional[int] = None,
                           replication: Optional[int] = None,
                           assignment: Optional[dict[Any, list[int]]] = None) -> dict[str, Any]:
        if assignment is not None:
            assignment = {int(p): list(r) for p, r in assignment.items()}
        await self.core.create_topic(name, partitions, replication, assignment)
        return self._topic(name)

    def _topic(self, name: str) -> dict[str, Any]:
        return self.core.describe()["topics"][name]

    async def describe(self) -> dict[str, Any]:
        return self.core.describe()

    async def leader(self, topic: str, partition: int) -> int:
        return self.core.require_partition(topic, partition).leader

    async def offsets(self, topic: str, partition: int) -> list[int]:
        log = self.core.require_partition(topic, partition).log
        return [log.start_offset, log.end_offset]

    async def committed_offset(self, group: str, topic: str, partition: int) -> Optional[int]:
        raw = await self.core.fetch_offset(group, topic, partition)
        return None if raw is None else int(raw.decode("ascii"))

    async def stop_broker(self, broker_id: int) -> None:
        await self.core.stop_broker(broker_id)

    async def start_broker(self, broker_id: int) -> None:
        await self.core.start_broker(broker_id)

    async def restart_broker(self, broker_id: int) -> None:
        await self.core.stop_broker(broker_id)
        await self.core.start_broker(broker_id)

    async def move_leader(self, topic: str, partition: int, broker_id: int) -> None:
        await self.core.move_leader(topic, partition, broker_id)

    async def preferred_leader_election(self) -> None:
        await self.core.preferred_leader_election()

    async def hang_broker(self, broker_id: int) -> None:
        self.core._broker(broker_id).hang()

    async def resume_broker(self, broker_id: int) -> None:
        self.core._broker(broker_id).resume()

    async def close_connections(self, broker_id: Optional[int] = None) -> int:
        brokers = [self.core._broker(broker_id)] if broker_id is not None else \
            list(self.core.brokers.values())
        return sum(b.close_connections() for b in brokers)

    async def drop_responses(self, api: ApiSpec = None, count: Optional[int] = 1,
                             broker_id: Optional[int] = None) -> None:
        self.core.faults.add_drop(api, count, broker_id)

    async def inject_error(self, api: ApiSpec, error_code: int, count: Optional[int] = 1,
                           broker_id: Optional[int] = None) -> None:
        self.core.faults.add_error(api, error_code, count, broker_id)

    async def corrupt_offsets(self, delta: int, count: Optional[int] = 1,
                              broker_id: Optional[int] = None) -> None:
        self.core.faults.add_offset_shift(delta, count, broker_id)

    async def set_latency(self, seconds: float, api: ApiSpec = None,
                          broker_id: Optional[int] = None) -> None:
        self.core.faults.set_latency(seconds, api, broker_id)

    async def clear_faults(self) -> None:
        self.core.faults.clear()
        for broker in self.core.brokers.values():
            broker.resume()

    async def heal(self) -> None:
        await self.clear_faults()
        for broker_id in sorted(self.core.brokers):
            await self.core.start_broker(broker_id)
        await self.core.preferred_leader_election()

    async def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        return self.core.require_partition(topic, partition).log.delete_before(before_offset)

    async def roll_segment(self, topic: str, partition: int) -> None:
        self.core.require_partition(topic, partition).log.roll()

    async def errors(self) -> list[str]:
        return [repr(e) for e in self.core.errors]


class ClusterControl:
    """The synchronous, thread-safe API of a running embedded cluster.

    Shared by :class:`~kiel.testing.broker.cluster.EmbeddedCluster` (in-process)
    and :class:`~kiel.testing.broker.control.ClusterProcess` (a ``serve``
    subprocess). Broker ids are 1..N. ``api`` arguments take an API name
    (``"Produce"``, ``"Fetch"``, ``"ListOffsets"``, ``"Metadata"``,
    ``"OffsetCommit"``, ``"OffsetFetch"``, ``"GroupCoordinator"``) or key;
    ``None`` means every API. ``broker_id=None`` means every broker.
    """

    def _call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    # -- topics and state -----------------------------------------------------

    def create_topic(self, name: str, partitions: Optional[int] = None,
                     replication: Optional[int] = None,
                     assignment: Optional[dict[int, list[int]]] = None) -> dict[str, Any]:
        """Create a topic (written to ZooKeeper as ``AdminUtils.createTopic`` does).

        Args:
            name: topic name (``[a-zA-Z0-9._-]``, at most 255 characters).
            partitions: partition count (default: the cluster's ``partitions``).
            replication: replicas per partition (default: the cluster's ``replication``).
            assignment: explicit ``{partition: [broker ids]}``; the first
                replica is the preferred leader.

        Returns:
            the topic's partitions, as :meth:`describe` shows them.

        Raises:
            ConfigError: illegal name, topic exists, or replication too high.
        """
        return self._call("create_topic", name, partitions, replication, assignment)

    def describe(self) -> dict[str, Any]:
        """A snapshot of brokers, controller and topics.

        ``{"brokers": {"1": {...}}, "controller": 1, "topics": {name: {"0": {...}}}}``.

        Broker ids and partitions are string keys (the same in-process and
        over the control channel). Per broker: ``host``, ``port``,
        ``running``, ``hung``, ``connections``; per partition: ``leader``,
        ``leader_epoch``, ``replicas``, ``isr``, ``start_offset``,
        ``end_offset``, ``segments``, ``fetch_waiters`` (long-polling
        fetches parked on it right now).
        """
        return self._call("describe")

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader id (-1: none).

        Raises:
            HarnessError: no such partition.
        """
        return self._call("leader", topic, partition)

    def offsets(self, topic: str, partition: int) -> list[int]:
        """``[log start offset, log end offset]`` of a partition."""
        return self._call("offsets", topic, partition)

    def committed_offset(self, group: str, topic: str, partition: int) -> Optional[int]:
        """The v0 offset ``group`` committed (from ZooKeeper or memory), ``None`` if none."""
        return self._call("committed_offset", group, topic, partition)

    # -- fault injection ---------------------------------------------------------

    def stop_broker(self, broker_id: int) -> None:
        """Stop a broker: its port refuses connections, open ones close, its
        registration leaves ZooKeeper, and leadership fails over to live replicas
        (partitions with none answer LeaderNotAvailable)."""
        self._call("stop_broker", broker_id)

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped broker on the same port; it rejoins the ISR of its partitions
        and leads those that had no leader."""
        self._call("start_broker", broker_id)

    def restart_broker(self, broker_id: int) -> None:
        """:meth:`stop_broker` then :meth:`start_broker`."""
        self._call("restart_broker", broker_id)

    def move_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Make ``broker_id`` lead the partition (ZooKeeper state updated, leader epoch
        bumped). The old leader answers NotLeaderForPartition (6) from now on.

        Raises:
            HarnessError: no such partition or broker, or the broker is stopped.
        """
        self._call("move_leader", topic, partition, broker_id)

    def preferred_leader_election(self) -> None:
        """Give every partition back to its first (preferred) replica where it is alive."""
        self._call("preferred_leader_election")

    def hang_broker(self, broker_id: int) -> None:
        """The broker keeps accepting connections but answers nothing until
        :meth:`resume_broker` (then held requests are answered, like SIGCONT).
        It stays registered and leader of its partitions meanwhile."""
        self._call("hang_broker", broker_id)

    def resume_broker(self, broker_id: int) -> None:
        """Undo :meth:`hang_broker`."""
        self._call("resume_broker", broker_id)

    def close_connections(self, broker_id: Optional[int] = None) -> int:
        """Close every open client connection now; returns how many were closed."""
        return self._call("close_connections", broker_id)

    def drop_responses(self, api: ApiSpec = None, count: Optional[int] = 1,
                       broker_id: Optional[int] = None) -> None:
        """Cut the next ``count`` responses (of ``api``) after half their bytes
        and close those connections (``count=None``: until :meth:`clear_faults`)."""
        self._call("drop_responses", api, count, broker_id)

    def inject_error(self, api: ApiSpec, error_code: int, count: Optional[int] = 1,
                     broker_id: Optional[int] = None) -> None:
        """Answer the next ``count`` requests of ``api`` with ``error_code`` in every
        partition (or as the request's error). Such requests are not executed
        (nothing is appended or committed). A Produce with acks=0 has its
        connection closed instead, as 0.8.2 does on errors."""
        self._call("inject_error", api, error_code, count, broker_id)

    def corrupt_offsets(self, delta: int, count: Optional[int] = 1,
                        broker_id: Optional[int] = None) -> None:
        """Raise the offset of the last whole message by ``delta`` in the next
        ``count`` Fetch answers that carry messages (``count=None``: until
        :meth:`clear_faults`). The log is untouched: only those answers lie.
        No CRC covers a message's offset, so this is the corruption only a
        client's offset checks can see.

        Raises:
            ConfigError: ``delta`` is 0 or ``count`` below 1.
        """
        self._call("corrupt_offsets", delta, count, broker_id)

    def set_latency(self, seconds: float, api: ApiSpec = None,
                    broker_id: Optional[int] = None) -> None:
        """Delay answers of ``api`` on ``broker_id`` by ``seconds`` (0 removes the rule)."""
        self._call("set_latency", seconds, api, broker_id)

    def clear_faults(self) -> None:
        """Remove every error, cut and latency rule and resume hung brokers."""
        self._call("clear_faults")

    def heal(self) -> None:
        """Undo every fault: :meth:`clear_faults`, start stopped brokers, and
        :meth:`preferred_leader_election`."""
        self._call("heal")

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Drop whole log segments ending at or before ``before_offset`` (what retention
        does); returns the new log start offset. Fetches below it answer OffsetOutOfRange."""
        return self._call("delete_records", topic, partition, before_offset)

    def roll_segment(self, topic: str, partition: int) -> None:
        """Start a new log segment now (ListOffsets answers at segment granularity)."""
        self._call("roll_segment", topic, partition)

    def errors(self) -> list[str]:
        """Unexpected errors (broker bugs) recorded so far, as ``repr`` strings."""
        return self._call("errors")

    def check(self) -> None:
        """Raise if the brokers recorded an unexpected error (a bug in kiel.testing).

        Raises:
            HarnessError: listing the errors.
        """
        errors = self.errors()
        if errors:
            raise HarnessError("embedded broker errors: " + "; ".join(errors))
