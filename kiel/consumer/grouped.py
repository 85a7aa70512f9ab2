"""GroupedConsumer: split a group's partitions among processes.

Who forms the group is the coordinator object the caller passes, and its
:class:`~kiel.consumer.membership.Membership` adapter's job: ZooKeeper's,
``coordinator=ZooKeeperGroup(hosts=...)`` (members, allocation and owner
znodes in :mod:`kiel.zookeeper`, Kafka 0.8's way), else the brokers' group
coordinator's, ``BrokerGroup(...)`` (:mod:`kiel.coordinator`: JoinGroup,
SyncGroup, Heartbeat, beside Java, librdkafka and other Python members);
this module plugs the consumer's
fetching into it (:class:`~kiel.consumer.group_hooks.ConsumerHooks`, the
membership's :class:`~kiel.consumer.membership.PartitionHooks`), keeps one
:class:`~kiel.consumer.group_state.OwnedPartition` per owned partition, and
commits finished offsets through :mod:`kiel.consumer.commits` (OffsetCommit
v0 on a 0.8.x broker, which stores it at
``/consumers/<group>/offsets/<topic>/<partition>``; the negotiated version,
with the group's generation and member id, on a current one).

Example::

    from kiel.consumer import GroupedConsumer

    async def work(brokers):
        # A current cluster: the brokers coordinate the group. On Kafka 0.8
        # pass coordinator=ZooKeeperGroup(hosts="zk1:2181,zk2:2181").
        consumer = GroupedConsumer(brokers, "billing", topics=["invoices"])
        await consumer.connect()
        try:
            async for record in consumer.stream():
                await handle(record)
        finally:
            await consumer.close()

Delivery is at-least-once: a record is *finished* when the application asks
for more (the next :meth:`GroupedConsumer.consume`, the next step of
:meth:`GroupedConsumer.stream`) or, with ``auto_finish=False``, when it calls
:meth:`GroupedConsumer.task_done`. Only finished offsets are committed, and a
partition is handed to another member only after its finished position was
committed (see ``docs/guides/grouped_consumer.rst``).
"""

import asyncio
import logging
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from re import Pattern
from typing import (
    Any,
    Optional,
    Union,
)

from kiel import _options
from kiel.consumer.base import ConsumedBatches, ConsumedRecord, Topics, _BaseConsumer, topic_list
from kiel.consumer.commits import Commits
from kiel.consumer.group_hooks import ConsumerHooks
from kiel.consumer.group_state import GroupState
from kiel.consumer.listener import ConsumerRebalanceListener, check_listener
from kiel.consumer.membership import (
    GroupContext,
    GroupCoordinator,
    Membership,
    adapter,
    coordinator_from_keywords,
    shim_keywords,
)
from kiel.consumer.offsets import GroupOffsets
from kiel.consumer.positions import BEGINNING, END, Start, check_offset
from kiel.consumer.subscription import Status
from kiel.consumer.task_hands import TaskHands
from kiel.exc import (
    ArgumentError,
    ConfigError,
    KielError,
    UnknownPartitionError,
    UnknownTopicOrPartitionError,
)
from kiel.metrics import GroupedConsumerMetrics, GroupMetrics, RebalanceCounters
from kiel.structs import GroupMetadata, TopicPartition

__all__ = ["ConsumerRebalanceListener", "GroupedConsumer"]

log = logging.getLogger(__name__)

#: kiel 1.x's coordinator keywords, which the shim still takes (see
#: GroupedConsumer's docstring): named in the coordinators' registry.
SHIM_KEYWORDS = tuple(shim_keywords())


class GroupedConsumer(_BaseConsumer):
    """Consume topics as one member of a group: the brokers', or one kept in ZooKeeper.

    Who forms the group is the ``coordinator`` object:
    :class:`~kiel.coordinator.broker_group.BrokerGroup` (the default: the
    brokers' group coordinator, Kafka 2.4 and later, KRaft included, with
    members of any client) or
    :class:`~kiel.zookeeper.group_coordinator.ZooKeeperGroup` (the group
    lives in ZooKeeper as Kafka 0.8's did). Each holds its own settings; the
    listener, the allocators and everything below work the same on both::

        GroupedConsumer(brokers, "billing", topics=["invoices"],
                        coordinator=BrokerGroup(session_timeout=10.0))
        GroupedConsumer(brokers, "billing", topics=["invoices"],
                        coordinator=ZooKeeperGroup(hosts="zk1:2181/kafka"))

    Args:
        brokers: bootstrap list, ``["host", "host:port", ...]`` or a
            comma-separated string.
        group: the consumer group.
        topics: topic names to consume (or one name).
        pattern: instead of ``topics``: a regex (string or compiled) matched in
            full against every topic (``/brokers/topics`` in ZooKeeper, the
            brokers' metadata otherwise); new matching topics join as they
            appear.
        coordinator: a :class:`~kiel.consumer.membership.GroupCoordinator`
            (``BrokerGroup(...)``, ``ZooKeeperGroup(hosts=...)``) with the
            group's settings: the allocator, ``member_id``, ``capacity``,
            ``join_timeout``, ``leave_timeout`` and the coordinator's own
            (see each class). ``None``: the one kiel 1.x's keywords below
            describe, else ``BrokerGroup()``.
        listener: a :class:`ConsumerRebalanceListener`-like object (one with
            one or more of its callbacks; anything else is a
            :class:`~kiel.exc.ConfigError`), or None.
        auto_finish: ``True`` (default): records count as finished when the
            application asks for more; ``False``: only :meth:`task_done`
            finishes a record.
        commit_interval: seconds between automatic commits of finished
            offsets (``None`` or 0: no timed commits).
        commit_every: also commit after this many records were finished
            (``None``: not by count).
        commit_metadata: the metadata string stored with each commit (a
            broker that finds it too large gets a retry without it).
        revoke_timeout: seconds a revocation waits for the application to
            finish the records it holds of a revoked partition; unfinished
            ones are then delivered again by the next owner.
        listener_timeout: seconds an ``async`` listener callback may take;
            past it, it is cancelled, :class:`~kiel.exc.GroupError` is logged
            and raised by the next :meth:`consume`, and the hand-off goes on.
        **options: the fetch options of
            :class:`~kiel.consumer.SingleConsumer` (``deserializer``,
            ``key_deserializer``, ``max_wait_time``, ``min_bytes``,
            ``max_bytes``, ``max_fetch_size``, ``decode_budget``) and the
            :class:`~kiel.client.Client` settings. ``offset_reset`` also says
            where a partition with no committed offset starts:
            ``"earliest"`` (default), ``"latest"``, or ``"raise"``
            (:class:`~kiel.exc.OffsetResetError` from :meth:`consume`).
            And kiel 1.x's coordinator keywords, a shim that builds the
            coordinator object: ``zk_hosts`` (given: a ``ZooKeeperGroup``,
            with ``zk_session_timeout``, ``zk_chroot``,
            ``zk_max_retry_delay``, ``zk_connect_timeout``, ``zk_auth``,
            ``partitions_from``, ``acquire_timeout``: its ``hosts``,
            ``session_timeout``, ``chroot``, ``max_retry_delay``,
            ``connect_timeout``, ``auth``, ``partitions_from``,
            ``acquire_timeout``); without it a ``BrokerGroup``
            (``session_timeout``, ``heartbeat_interval``,
            ``max_poll_interval``, ``group_instance_id``); ``allocator``,
            ``member_id``, ``capacity``, ``join_timeout``, ``leave_timeout``
            for either. A keyword of the other coordinator is a
            :class:`~kiel.exc.ConfigError`; any of them beside
            ``coordinator=`` an :class:`~kiel.exc.ArgumentError`.

    Only ``brokers`` and ``group`` are taken by position; every other
    argument, ``topics`` and ``zk_hosts`` included, by name (kiel 0.9 took
    ``zk_hosts`` third: ``GroupedConsumer(brokers, group, ["svc"])`` is an
    :class:`~kiel.exc.ArgumentError` that says which name to write, never a
    list of topics taken for ZooKeeper hosts).

    Raises:
        ConfigError: a bad setting, or an option of another client (such
            as aiokafka's ``bootstrap_servers`` or ``group_id``), with kiel's
            spelling.
        ArgumentError: a third argument given by position; a coordinator
            object and kiel 1.x's coordinator keywords together.
    """

    #: :meth:`seek_to` the oldest offset the broker still holds.
    BEGINNING = BEGINNING
    #: :meth:`seek_to` the end: only messages produced from now on.
    END = END

    @staticmethod
    def _misplaced(extra: tuple[Any, ...]) -> str:
        """What arguments past ``group`` given by position were meant to be
        (the :class:`~kiel.exc.ArgumentError`'s advice)."""
        third, rest = extra[0], extra[1:]
        more = f" (and give {', '.join(map(repr, rest))} by name)" if rest else ""
        hosts: Optional[str] = None
        if isinstance(third, str) and ":" in third:  # "zk1:2181,zk2:2181[/chroot]"
            hosts = third
        elif (isinstance(third, (list, tuple)) and third
              and all(isinstance(h, str) and ":" in h for h in third)):
            hosts = ",".join(third)  # kiel 0.9's list of ZooKeeper hosts
        if hosts is not None:
            return (f"zk_hosts={hosts!r} for a group kept in ZooKeeper (kiel 0.9 took it "
                    f"third), or topics=[...] for the topics to consume{more}")
        topics = [third] if isinstance(third, str) else third
        return (f"topics={topics!r} for the topics to consume, or zk_hosts='host:port,...' "
                f"for a group kept in ZooKeeper (kiel 0.9 took it third){more}")

    @_options.constructor
    def __init__(
        self,
        brokers: Union[str, Sequence[str]],
        group: str,
        *,
        topics: Optional[Topics] = None,
        pattern: Union[str, Pattern[str], None] = None,
        coordinator: Optional[GroupCoordinator] = None,
        listener: Any = None,
        auto_finish: bool = True,
        commit_interval: Optional[float] = 5.0,
        commit_every: Optional[int] = None,
        commit_metadata: str = "",
        revoke_timeout: float = 30.0,
        listener_timeout: float = 30.0,
        **options: Any,
    ) -> None:
        self._wanted_topics = _topics_or_pattern(topics, pattern)
        _check_group_options(group, commit_interval, commit_every, revoke_timeout,
                             listener_timeout, auto_finish, commit_metadata, listener)
        #: Who forms the group, with its settings: the ``coordinator`` given,
        #: or the one kiel 1.x's keywords describe (the brokers' by default).
        self.coordinator: GroupCoordinator = _coordinator(coordinator, options)
        self._adapter = adapter(self.coordinator.kind)
        super().__init__(brokers, **options)
        self.group = group
        self.revoke_timeout = revoke_timeout
        self.listener_timeout = listener_timeout
        self.listener = listener
        self.auto_finish = auto_finish
        self.commit_interval = commit_interval or None
        self.commit_every = commit_every
        self.commit_metadata = commit_metadata
        #: The group membership (made by :meth:`connect`).
        self.membership: Optional[Membership] = None
        self._offsets = GroupOffsets(self.cluster, group)
        #: The owned partitions: each ownership (in hand, revoking, last commit)
        #: hangs off the partition's record in the subscription (pause, fetch state).
        self._state = GroupState(self.subscription)
        self._commits = Commits(
            self._offsets, self._state, self._tasks, self._errors, metadata=commit_metadata,
            every=commit_every, interval=self.commit_interval, may_commit=self._may_commit,
        )
        #: close() waited for the records in the application's hands.
        self._waited_for_hands = False
        #: Errors said to the application once each, whatever their retriable
        #: flag (a subscribed topic that does not exist).
        self._told: list[KielError] = []
        #: When connect() joined (Unix time; the heartbeats' clock starts there).
        self._joined_at: Optional[float] = None
        #: The start of owned partitions under way (see _start), if any.
        self._starting: Optional[asyncio.Task[None]] = None
        self._ownership = ConsumerHooks(
            self, commits=self._commits, offsets=self._offsets, errors=self._errors,
            reclaim=self._reclaim, waited=lambda: self._waited_for_hands,
        )
        #: With auto_finish: per task, the records its last consume() returned;
        #: its next call finishes them.
        self._hands = TaskHands(self._commits)
        #: Rebalances and how long each paused this member's partitions (metrics()).
        self.rebalances = RebalanceCounters()

    @property
    def member_id(self) -> Optional[str]:
        """This member's id in the group (known once :meth:`connect` joined, unless set)."""
        if self.membership is not None:
            return self.membership.member_id
        member_id: Optional[str] = self.coordinator.member_id
        return member_id

    @property
    def group_settings(self) -> GroupCoordinator:
        """The coordinator object (its settings): :attr:`coordinator`'s earlier name."""
        return self.coordinator

    def group_metadata(self) -> GroupMetadata:
        """The group metadata a transactional producer sends with this member's offsets.

        Pass it to ``Producer.send_offsets_to_transaction`` so the group
        coordinator refuses the commit if this member has left the
        generation its records came from (KIP-447: a zombie cannot commit).
        It is what this member's own commits carry at the moment of the
        call, so take it right before sending the offsets.

        Returns:
            on a broker group, the group id, generation, member id and
            static instance id; on a ZooKeeper group (whose generations the
            broker does not know), the group id alone with generation -1, as
            Java's ``ConsumerGroupMetadata(groupId)``.
        """
        offsets = self._offsets
        return GroupMetadata(self.group, offsets.generation_id, offsets.member_id,
                             offsets.group_instance_id)

    @property
    def zk(self) -> Any:
        """A ZooKeeper group's session (:class:`kiel.zookeeper.client.ZooKeeper`), else ``None``."""
        return getattr(self.membership, "zk", None)

    @property
    def member(self) -> Any:
        """A ZooKeeper group's :class:`kiel.zookeeper.group.GroupMember`, else ``None``."""
        return getattr(self.membership, "member", None)

    def _may_commit(self) -> bool:
        """Whether this member's ownership is certain (not suspended, session live)."""
        return self.membership is not None and self.membership.may_commit()

    @property
    def commits(self) -> int:
        """Commits completed so far (for tests and metrics)."""
        return self._commits.count

    def metrics(self) -> GroupedConsumerMetrics:
        """The consumer's metrics plus rebalances, the group's state, owned partitions.

        Returns:
            a :class:`~kiel.metrics.GroupedConsumerMetrics` snapshot.
        """
        rebalances = self.rebalances
        part = self.group_metrics()
        return GroupedConsumerMetrics(
            **self._metric_fields(),
            **part.flat(),
            rebalances=rebalances.count,
            rebalance_seconds=rebalances.seconds,
            rebalance_seconds_last=rebalances.last,
            rebalance_seconds_max=rebalances.max,
            owned_partitions=len(self._state),
            commits=self.commits,
            commits_refused=self._commits.refused,
            member_id=self.member_id,
            group=self.group,
            membership=part,
        )

    def group_metrics(self) -> GroupMetrics:
        """The group's state as its coordinator reports it (typed: its
        coordinator's :class:`~kiel.metrics.GroupMetrics` subclass); also
        ``metrics().membership``."""
        return self.coordinator.metrics(self.membership)

    # ------------------------------------------------------------------
    # health

    def _to_fetch(self) -> list[TopicPartition]:
        """The owned partitions, except those the application paused (a ZooKeeper
        suspension pauses fetching too, and counts as a stall)."""
        return self._state.to_fetch()

    def unhealthy(self, stall: Optional[float] = None) -> Optional[str]:
        """Why :meth:`healthy` is false (``None`` when healthy): the consumers'
        rule, plus a member not connected yet, and a broker group's
        coordinator that answered no heartbeat for ``stall`` seconds (the
        member is out of its group, rejoining, or cut off from it).

        Raises:
            ConfigError: ``stall`` is not a positive number.
        """
        limit = self._stall(stall)
        membership = self.membership
        silent: Optional[float] = None
        part = self.group_metrics()
        if membership is not None:
            heard = part.last_heartbeat
            joined = self._joined_at
            if heard is None or (joined is not None and joined > heard):
                heard = joined
            if part.heartbeats and heard is not None:
                silent = time.time() - heard
            began = self.health.started_at()
            if began is not None and not self._to_fetch() and (
                    part.connected
                    or (silent is not None and silent < time.monotonic() - began)):
                # Nothing to fetch, and the group's coordinator answered since
                # the outage began: what it left behind (a commit that failed
                # in it) is over.
                self.health.recovered()
        reason = super().unhealthy(stall)
        if reason is not None:
            return reason
        if membership is None:
            return "not connected to the group yet"
        if silent is not None and silent > limit:
            return (f"the group coordinator answered no heartbeat for {silent:.1f} s "
                    f"(group state {part.state})")
        return None

    # ------------------------------------------------------------------
    # life cycle

    async def connect(self) -> None:
        """Load metadata, then join the group through its coordinator.

        Returns once this member's first allocation is owned and fetching;
        the IOLoop keeps serving meanwhile (ZooKeeper starts in an executor).

        Raises:
            NoBrokersError: no bootstrap broker answered.
            ZooKeeperError: ZooKeeper could not be reached.
            UnsupportedFeatureError: no ``zk_hosts``, and the brokers do not
                coordinate groups (Kafka 0.8): the message says to pass ``zk_hosts``.
            GroupError: the first allocation did not settle within
                ``join_timeout``; in a broker group, a typed subclass when the
                coordinator refused the member (InconsistentGroupProtocolError:
                no assignor in common with the group; FencedInstanceIdError;
                GroupAuthorizationFailedError); in a ZooKeeper group,
                LegacyGroupError when members of kiel 0.9 (registered
                under ``/kiel/groups/<group>/members``) stayed live through
                ``join_timeout``: this member never consumes beside them.
            AllocationError: this member led a broker group and its allocator failed.
        """
        await super().connect()
        membership = self.membership = self._adapter(
            GroupContext(
                cluster=self.cluster, group=self.group, topics=self._wanted_topics,
                hooks=self._ownership, offsets=self._offsets, tasks=self._tasks,
            ),
            self.coordinator,
        )
        await membership.join()
        self._joined_at = time.time()
        self._commits.start_timer()
        await self._say_missing_topics()

    async def _say_missing_topics(self) -> None:
        """A subscribed topic the cluster does not have is said, not consumed in silence.

        The group goes on (the topic joins once it is created); the next
        :meth:`consume` raises :class:`~kiel.exc.UnknownTopicOrPartitionError`
        for each such topic, once.
        """
        wanted = self._wanted_topics
        if not isinstance(wanted, list):
            return  # a pattern matches what exists
        cluster = self.cluster
        missing = [t for t in wanted if not cluster.partitions.get(t)]
        if missing:
            try:
                await cluster.refresh_metadata(missing)
            except KielError as e:
                log.warning("reading the metadata of %s failed: %s", missing, e)
                return
        for topic in (t for t in missing if not cluster.partitions.get(t)):
            error = UnknownTopicOrPartitionError(
                f"topic {topic!r} does not exist (the brokers do not create it): the group "
                "consumes nothing of it until it is created", topic=topic, group=self.group,
            )
            log.warning("%s", error)
            # Said on purpose (the application must create the topic or fix
            # its subscription), though the broker's code is a retriable one.
            self._told.append(error)

    async def close(self) -> None:
        """Leave the group and close, delivering nothing twice.

        First, still a member, waits up to ``revoke_timeout`` for the
        records the application's tasks hold (no new ones are handed out:
        :meth:`consume` raises :class:`~kiel.exc.ClientClosedError`); then
        revokes every owned partition (listener, then a commit of the
        finished positions), gives them back to the group (ZooKeeper: owner
        znodes released, deregistered, session stopped; brokers: LeaveGroup
        unless static) and closes the connections. So the next owner starts
        after what the application finished, as in a rebalance; records
        still held past ``revoke_timeout`` are delivered again by it.

        With ``auto_finish`` the records that the task calling ``close()``
        got from its last :meth:`consume` count as finished (it is done
        consuming), unless ``close()`` runs while an exception propagates (a
        ``finally`` after a failing handler): then they are not, and the
        next owner delivers them again. Another task's records are finished
        when it asks for more (its next :meth:`consume`, which then raises
        ClientClosedError) or returns; a task that fails or is cancelled,
        or a ``stream()`` loop left early, leaves its records unfinished,
        and nothing waits for them. With ``auto_finish=False`` only
        :meth:`task_done` finishes a record.
        """
        await super().close()

    async def _leave(self) -> None:
        if self.auto_finish and sys.exc_info()[1] is None:
            self._hands.finish_mine()
        self._commits.stop_timer()
        membership = self.membership
        if membership is None:
            return
        # A graceful change delivers nothing twice, close() included: while
        # still a member, wait (up to revoke_timeout) for what the
        # application's tasks hold; the leave then commits it.
        # A rebalance meanwhile revokes as usual (waiting for those records too).
        try:
            held = await self._commits.wait_finished(sorted(self._state), self.revoke_timeout,
                                                     lambda: False)
        finally:
            self._waited_for_hands = True
        if held:
            log.warning("close(): revoke_timeout=%ss passed with records of %s in the "
                        "application's hands; the next owner delivers them again",
                        self.revoke_timeout, held)
        try:
            await membership.leave()
        finally:
            try:
                await membership.close()
            except KielError as e:
                # Closing goes on: a ZooKeeper session, say, ends on the server anyway.
                self._errors.append(e)
                log.warning("closing the group membership: %s", e)

    # ------------------------------------------------------------------
    # consuming

    def assignment(self) -> list[TopicPartition]:
        """The partitions this member owns, sorted."""
        return sorted(self._state)

    def fetching(self) -> list[TopicPartition]:
        """The partitions being fetched right now (owned, started, not suspended)."""
        return self.subscription.with_status(Status.FETCHING)

    async def consume(
        self, topics: Optional[Topics] = None, *, max_records: Optional[int] = None
    ) -> list[ConsumedRecord]:
        """Return the records one fetch round brought for the owned partitions.

        With ``auto_finish``, calling this finishes every record returned
        before.

        Args:
            topics: only these subscribed topics (default: all).
            max_records: at most this many records (default: the consumer's
                ``max_records``); the rest are returned by the next calls.

        Returns:
            records ordered by offset within each partition; empty when none
            arrived within ``max_wait_time`` (or nothing is owned).

        Raises:
            AllocationError: raised once after an allocator failed (and any
                exception a listener raised, likewise; the group carries on).
            OffsetResetError: no committed offset and ``offset_reset="raise"``
                (the partition is owned but not fetched; :meth:`seek` it).
            PollIntervalExceededError: the application did not ask for
                records within ``max_poll_interval`` (raised once; this call
                joins again).
            GroupError: the coordinator refused the member for good
                (fenced, no common assignor, not authorized).
            KielError: a background commit failed in a way retrying cannot
                mend (raised once), or a fetch failed as for
                :meth:`kiel.consumer.SingleConsumer.consume`. Retriable
                failures (a broker or the coordinator away, a connection
                lost, a timeout, a leader moving) are never raised: they are
                retried inside the client, this call returns what it has
                within its wait, and :meth:`healthy` and ``metrics()`` show
                the outage (see the guide's "Broker outages and health").
            ConfigError: ``topics`` names a topic the member does not
                subscribe to (``topics=``/``pattern=`` at construction).
            ClientClosedError: the consumer is closed.
        """
        return self._flatten(await self._fetch(topics, self._limit(max_records)))

    async def stream(self, topics: Optional[Topics] = None) -> AsyncIterator[ConsumedRecord]:
        """Iterate over the owned partitions' records, for ever (until closed).

        With ``auto_finish``, a record is finished when the loop asks for the
        next one. Records of a partition revoked or lost while a batch is
        being iterated are not yielded any more (the next owner gets them).
        Leaving the loop early loses nothing: the records not yielded are
        fetched again by the next :meth:`consume` or :meth:`stream`.

        Yields:
            records, in offset order within each partition.
        """
        def one_round() -> Awaitable[ConsumedBatches]:
            return self._fetch(topics, self._stream_records, hand_out=False)

        async for record in self._stream(one_round):
            yield record

    def _subscribed(self, topics: Topics) -> list[str]:
        """``topics`` as names, each one this member subscribes to.

        Raises:
            ConfigError: a name ``topics=``/``pattern=`` did not give (kiel
                0.9 took the topic in ``consume(topic)``: without this, such
                a call would return nothing for ever).
        """
        names = topic_list(topics)
        wanted = self._wanted_topics
        for name in names:
            subscribed = (name in wanted if isinstance(wanted, list)
                          else wanted.fullmatch(name) is not None)
            if not subscribed:
                shown = wanted if isinstance(wanted, list) else f"pattern={wanted.pattern!r}"
                raise ConfigError(f"{name!r} is not among the topics this member subscribes "
                                  f"to ({shown}); name it in topics= (or pattern=) when the "
                                  "consumer is built")
        return names

    async def _fetch(
        self, topics: Optional[Topics], max_records: Optional[int], hand_out: bool = True
    ) -> ConsumedBatches:
        if self.auto_finish:
            # Asking for more (even of a closing consumer): done with the last batch.
            self._hands.finish_mine()
        self._check_open()
        deadline = self._deadline()
        self._reclaim()
        if self.membership is not None:
            # The application asked for records: the only thing that keeps
            # max_poll_interval from expiring (an outage included).
            self.membership.poll()
        self._raise_pending()
        self._start(self.subscription.with_status(Status.AWAITING_RESET))
        self._raise_pending()
        held = self._state
        wanted = None
        if topics is not None:
            names = self._subscribed(topics)
            wanted = [tp for tp in held if tp.topic in names]
        self._observe(time.monotonic())
        batches = await self.fetcher.fetch(wanted, max_records, deadline)
        # Same task step as the fetcher's drain: no rebalance ran in between.
        for tp, records in list(batches.items()):
            hands = held.get(tp)
            if hands is None:
                del batches[tp]
            elif hand_out:
                hands.hand_out(records)
                if self.auto_finish:
                    self._hands.lend(tp, records)
        return batches

    def _start(self, tps: list[TopicPartition]) -> None:
        """Start owned partitions that await it, ``tps`` (their committed
        offsets, or the reset policy), in the background, one start at a
        time; and raise what the last start raised, once it has ended.

        Strategy: the call that asked goes on fetching the partitions that
        are started, within its own bound; the start's seek wakes that
        fetch, so a quick start's records still come in the same call, and
        a slow one (an offset lookup stuck in a dark network) holds up
        neither the call nor the other partitions.

        Raises:
            Exception: what a finished start raised and did not keep for
                :meth:`consume` (the kept errors are raised by
                ``_raise_pending``), unless retriable (then the next call
                starts the partitions again).
        """
        task = self._starting
        if task is not None and task.done():
            self._starting = None
            if task.cancelled():
                task.result()  # raises CancelledError
            error = task.exception()
            if error is not None and not self.health.absorb(error):
                raise error
        if tps and self._starting is None:
            self._starting = self._tasks.spawn(
                self._ownership.start(tps), "start", quiet=(Exception,))

    def _handing_out(self, tp: TopicPartition, record: ConsumedRecord) -> None:
        hands = self._state.get(tp)
        if hands is not None:
            hands.hand_out_one(record.offset)

    def _handed_out(self, tp: TopicPartition, record: ConsumedRecord) -> None:
        # The stream() loop (in this task) asked for the next record: this
        # one is finished, and only this one (others may be another task's).
        if self.auto_finish:
            self._commits.finish(tp, record.offset)

    def _left_holding(self, tp: TopicPartition, record: ConsumedRecord) -> None:
        # A stream() loop left (break, an exception, its task ended) while it
        # held this record: with auto_finish nothing will finish it, so it is
        # delivered again by the next owner and nothing waits for it.
        if self.auto_finish:
            self._commits.abandon(tp, [record.offset])

    def task_done(self, record: ConsumedRecord) -> None:
        """Mark ``record`` finished (needed with ``auto_finish=False``; harmless otherwise).

        Records of partitions this member no longer owns are ignored.
        """
        if record.topic is None or record.partition is None:
            return
        self._commits.finish(TopicPartition(record.topic, record.partition), record.offset)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Fetch an owned partition from ``offset`` next (also starts one that
        ``offset_reset="raise"`` left unstarted). Records in hand stay in hand.

        Raises:
            UnknownPartitionError: this member does not own the partition.
            ConfigError: a negative offset.
        """
        (tp,) = self._tps(topic, partition)
        check_offset(offset, topic, partition)
        hands = self._state[tp]
        if hands.record is not None:
            hands.record.take_loan()
        if not hands.pending:
            hands.end = offset
        # Fetched unless its record says otherwise (paused, suspended).
        self.subscription.assign(tp, offset)

    def _tps(self, topic: str, partition: Optional[int]) -> list[TopicPartition]:
        state = self._state
        if partition is None:
            return [tp for tp in sorted(state) if tp.topic == topic and not state.is_revoking(tp)]
        tp = TopicPartition(topic, partition)
        if tp not in state or state.is_revoking(tp):
            raise UnknownPartitionError(
                "this member does not own the partition (or is handing it over)",
                topic=topic, partition=partition,
            )
        return [tp]

    def finished(self, topic: str, partition: int) -> int:
        """The finished position of an owned partition: what a commit stores now.

        That is the first offset the application did not finish (see
        :meth:`task_done`); -1 while the partition's start is not known.

        Raises:
            UnknownPartitionError: not owned.
        """
        (tp,) = self._tps(topic, partition)
        return self._state[tp].finished

    def _raise_pending(self) -> None:
        if self._told:
            raise self._told.pop(0)
        membership = self.membership
        if membership is not None and membership.failure is not None:
            # Said on purpose: the membership retries what may heal itself
            # (rejoins, reconciles) and keeps here what the application
            # must hear of (fencing, poll expiry, an allocator or listener
            # failure, a check ZooKeeper refused).
            failure, membership.failure = membership.failure, None
            raise failure
        super()._raise_pending()

    # ------------------------------------------------------------------
    # commits

    async def commit(self, offsets: Optional[Mapping[tuple[str, int], int]] = None) -> None:
        """Commit now: every owned partition's finished position, or ``offsets``.

        Args:
            offsets: ``{(topic, partition): offset}`` for owned partitions,
                each the next offset to read (as Kafka commits), at most the
                partition's :meth:`position`. Every record below it counts as
                finished from now on, so a later commit never goes back; a
                partition whose finished position is already past it commits
                that instead.

        Raises:
            UnknownPartitionError: a partition of ``offsets`` is not owned.
            ConfigError: a negative offset, or one past the position.
            GroupError: the ZooKeeper connection is suspended or the session
                lost (another member may own the partitions now).
            BrokerError, NoBrokersError, KielConnectionError,
            RequestTimeoutError: the commit failed past the retries.
        """
        if offsets is None:
            await self._commits.commit(sorted(self._state))
            return
        chosen: dict[TopicPartition, int] = {}
        for (topic, partition), offset in offsets.items():
            (tp,) = self._tps(topic, partition)
            check_offset(offset, topic, partition)
            if offset > self._position(tp):
                raise ConfigError(
                    f"cannot commit offset {offset} of {topic}/{partition}: past its position "
                    f"{self._position(tp)} (records not handed out yet)"
                )
            chosen[tp] = offset
        for tp, offset in chosen.items():
            if offset > 0:
                self._commits.finish_through(tp, offset - 1)
        await self._commits.commit(sorted(chosen))

    async def committed(self, topic: str, partition: int) -> Optional[int]:
        """The offset the group has committed for a partition, asked from the broker.

        Any partition of the group's topics, owned by this member or not.

        Returns:
            the committed offset (the next one the group reads), or ``None``
            when the group has none.

        Raises:
            BrokerError, NoBrokersError, KielConnectionError,
            RequestTimeoutError: the offset could not be read.
        """
        tp = TopicPartition(topic, partition)
        found = await self._commits.offsets.fetch([tp])
        return found.get(tp)

    # ------------------------------------------------------------------
    # flow control

    def pause(self, topic: str, partition: Optional[int] = None) -> None:
        """Stop fetching and handing out an owned partition (or all owned ones of ``topic``).

        Back-pressure for an application that cannot keep up: records
        already fetched are kept and handed out after :meth:`resume`. A
        pause lasts while this member owns the partition (a partition
        revoked and assigned again starts unpaused) and survives a
        ZooKeeper suspension.

        Raises:
            UnknownPartitionError: not owned.
        """
        for tp in self._tps(topic, partition):
            self.subscription.pause(tp)

    def resume(self, topic: str, partition: Optional[int] = None) -> None:
        """Undo :meth:`pause` (fetching waits while ZooKeeper is suspended).

        Raises:
            UnknownPartitionError: not owned.
        """
        for tp in self._tps(topic, partition):
            self.subscription.resume(tp)

    def paused(self) -> list[TopicPartition]:
        """The owned partitions the application paused, sorted."""
        return self._state.paused()

    async def seek_to(self, topic: str, start: Start, partition: Optional[int] = None) -> None:
        """Move an owned partition (or all owned ones of ``topic``) to a start position.

        Args:
            topic: a topic of the group.
            start: :attr:`BEGINNING`, :attr:`END`, an offset, a dict
                ``{partition: offset}``, a ``datetime`` (naive means UTC) or a
                ``timedelta`` (that long ago), as for :class:`SingleConsumer`.
            partition: one partition, or ``None`` for every owned one.

        Raises:
            UnknownPartitionError: not owned.
            ConfigError: a bad ``start``.
            BrokerError, NoBrokersError: the offsets could not be resolved.
        """
        await self._seek_all(topic, self._tps(topic, partition), start)


# The shim's keywords are not in __init__'s signature (help() and Sphinx show
# the coordinator object), but the constructor's check takes them.
GroupedConsumer.__init__._kiel_shape.named.update(SHIM_KEYWORDS)  # type: ignore[attr-defined]


def _topics_or_pattern(
    topics: Optional[Topics], pattern: Union[str, Pattern[str], None]
) -> Union[list[str], Pattern[str]]:
    """What a member subscribes to: sorted topic names, or a compiled pattern.

    Raises:
        ConfigError: both or neither given, bad names, or a bad pattern.
    """
    if (topics is None) == (pattern is None):
        raise ConfigError("give either topics or pattern")
    if topics is not None:
        return sorted(set(topic_list(topics)))
    if not isinstance(pattern, str):
        return pattern  # type: ignore[return-value]
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ConfigError(f"bad topic pattern {pattern!r}: {e}") from e


def _coordinator(coordinator: Optional[GroupCoordinator],
                 options: dict[str, Any]) -> GroupCoordinator:
    """The consumer's coordinator: ``coordinator``, or the one kiel 1.x's
    keywords in ``options`` describe (taken out of ``options``).

    Raises:
        ArgumentError: both a coordinator object and old keywords.
        ConfigError: a bad setting, a keyword of the other coordinator, or
            a ``coordinator`` that is no coordinator object.
    """
    old = {name: options.pop(name) for name in SHIM_KEYWORDS if name in options}
    # None means "not given", as it always did (zk_hosts=None: the brokers).
    given = {name: value for name, value in old.items() if value is not None}
    if coordinator is None:
        return coordinator_from_keywords(given)
    if not isinstance(coordinator, GroupCoordinator):
        raise ConfigError(
            f"coordinator must be a coordinator object such as BrokerGroup(...) or "
            f"ZooKeeperGroup(hosts=...), not {type(coordinator).__name__}")
    if given:
        raise ArgumentError(
            f"{', '.join(sorted(given))}: give the group's settings either to the coordinator "
            f"object ({type(coordinator).__name__}(...)) or as the consumer's keywords of "
            "kiel 1.x, not both")
    return coordinator


def _check_group_options(
    group: Any, commit_interval: Any, commit_every: Any, revoke_timeout: Any,
    listener_timeout: Any, auto_finish: Any, commit_metadata: Any, listener: Any,
) -> None:
    """Check the settings a grouped consumer adds to the base consumer's (the
    membership's own are its adapter's to check).

    Raises:
        ConfigError: a bad setting.
    """
    _options.optional(_options.real, "commit_interval", commit_interval, at_least=0)
    _options.optional(_options.integer, "commit_every", commit_every, at_least=1)
    _options.real("revoke_timeout", revoke_timeout, at_least=0)
    _options.real("listener_timeout", listener_timeout, at_least=0)
    _options.flag("auto_finish", auto_finish)
    _options.text("commit_metadata", commit_metadata, empty=True)
    check_listener(listener)
    if not group or not isinstance(group, str) or "/" in group:
        raise ConfigError(f"bad group name {group!r}")
