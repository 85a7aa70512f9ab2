"""GroupedConsumer: split a group's partitions among processes through ZooKeeper.

Membership, allocation and owner znodes are :class:`kiel.zookeeper.group.GroupMember`'s
job; this module plugs a :class:`~kiel.clients.fetcher.Fetcher` into it (the
:class:`~kiel.zookeeper.group.PartitionHooks`), tracks which records the
application holds, and commits finished offsets with OffsetCommit v0 (which a
0.8.x broker stores at ``/consumers/<group>/offsets/<topic>/<partition>``).

Example::

    from kiel.clients import GroupedConsumer

    async def work(brokers, zk_hosts):
        consumer = GroupedConsumer(brokers, "billing", zk_hosts, topics=["invoices"])
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
import collections
import inspect
import logging
import re
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Deque,
    Dict,
    Iterable,
    List,
    Optional,
    Pattern,
    Sequence,
    Set,
    Tuple,
    Union,
)

from kiel.allocators import get_allocator, weighted
from kiel.client import Client
from kiel.clients.fetcher import Deserializer, Fetcher, list_offsets
from kiel.clients.records import Record, TopicPartition
from kiel.exc import (
    ClientClosedError,
    ConfigError,
    KielError,
    OffsetMetadataTooLargeError,
    OffsetResetError,
    UnknownPartitionError,
    for_code,
)
from kiel.protocol import (
    OffsetCommitPartitionData,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicData,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicData,
)
from kiel.protocol.list_offsets import EARLIEST, LATEST
from kiel.zookeeper.client import ZooKeeper
from kiel.zookeeper.group import GroupMember, PartitionHooks

__all__ = ["GroupedConsumer", "ConsumerRebalanceListener"]

log = logging.getLogger(__name__)

Topics = Union[str, Sequence[str]]
#: Error codes after which the offset coordinator is looked up again.
_COORDINATOR_ERRORS = (14, 15, 16)
#: "No committed offset": a 0.8.2 broker answers -1 with UnknownTopicOrPartition.
_NO_OFFSET_CODES = (0, 3)


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


class _Hands:
    """What the application holds of one owned partition.

    ``pending`` lists the offsets handed out and not finished, in order;
    ``end`` is the offset after the last record handed out. The finished
    position (what a commit stores) is ``pending[0]`` or ``end``.
    """

    __slots__ = ("pending", "done", "end")

    def __init__(self, position: int) -> None:
        self.pending: Deque[int] = collections.deque()
        self.done: Set[int] = set()
        #: -1 until the partition's start position is known (nothing to commit).
        self.end = position

    @property
    def finished(self) -> int:
        return self.pending[0] if self.pending else self.end

    def hand_out(self, records: List[Record]) -> None:
        self.pending.extend(r.offset for r in records)
        self.end = records[-1].offset + 1

    def finish_all(self) -> int:
        n = len(self.pending)
        self.pending.clear()
        self.done.clear()
        return n

    def finish(self, offset: int) -> int:
        """Mark ``offset`` finished; returns how many leading offsets became finished."""
        pending = self.pending
        if not pending or offset < pending[0]:
            return 0
        if offset != pending[0]:
            self.done.add(offset)
            return 0
        pending.popleft()
        n = 1
        done = self.done
        while pending and pending[0] in done:
            done.discard(pending.popleft())
            n += 1
        return n

    def finish_through(self, offset: int) -> int:
        """Mark every handed-out offset up to ``offset`` finished (in-order consumers)."""
        pending = self.pending
        n = 0
        while pending and pending[0] <= offset:
            self.done.discard(pending.popleft())
            n += 1
        return n


class _Hooks(PartitionHooks):
    """Adapts :class:`PartitionHooks` (plain tuples) to the consumer."""

    def __init__(self, consumer: "GroupedConsumer") -> None:
        self.consumer = consumer

    async def assigned(self, partitions: List[TopicPartition]) -> None:
        await self.consumer._on_assigned([TopicPartition(*tp) for tp in partitions])

    async def revoked(self, partitions: List[TopicPartition]) -> None:
        await self.consumer._on_revoked([TopicPartition(*tp) for tp in partitions])

    async def lost(self, partitions: List[TopicPartition]) -> None:
        await self.consumer._on_lost([TopicPartition(*tp) for tp in partitions])

    def suspend(self) -> None:
        self.consumer._suspend()

    def resume(self) -> None:
        self.consumer._resume()


class GroupedConsumer(Client):
    """Consume topics as one member of a group coordinated in ZooKeeper (Kafka 0.8 style).

    Args:
        brokers: bootstrap list, ``["host", "host:port", ...]`` or a
            comma-separated string.
        group: the consumer group.
        zk_hosts: ZooKeeper connection string ``"host:port,...[/chroot]"`` of
            the ensemble the brokers register in (the broker stores v0
            offsets there too).
        topics: topic names to consume (or one name).
        pattern: instead of ``topics``: a regex (string or compiled) matched in
            full against every topic in ``/brokers/topics``; new matching
            topics join as they appear.
        allocator: ``"round_robin"`` (default), ``"range"``, ``"sticky"``,
            ``"weighted"`` (by each member's ``capacity``, read from its
            registration), another registered name, or a callable
            ``(members, partitions) -> {member: {topic: [ids]}}`` (see the
            allocators guide). Every member must use the same one.
        listener: a :class:`ConsumerRebalanceListener`-like object, or None.
        auto_finish: ``True`` (default): records count as finished when the
            application asks for more; ``False``: only :meth:`task_done`
            finishes a record.
        offset_reset: where a partition with no committed offset (or an
            out-of-range one) starts: ``"earliest"`` (default), ``"latest"``,
            or ``"raise"`` (:class:`~kiel.exc.OffsetResetError` /
            :class:`~kiel.exc.OffsetOutOfRangeError` from :meth:`consume`).
        commit_interval: seconds between automatic commits of finished
            offsets (``None`` or 0: no timed commits).
        commit_every: also commit after this many records were finished
            (``None``: not by count).
        commit_metadata: the metadata string stored with each commit (a
            broker that finds it too large gets a retry without it).
        zk_session_timeout: ZooKeeper session timeout, seconds.
        zk_chroot: optional chroot added to ``zk_hosts``.
        zk_auth: ``"user:password"``: digest-authenticate, and create this
            group's znodes with ACLs that let only that identity change them
            (anyone may read them, so 0.8 tools still see the group).
        member_id: this member's id (default ``<host>-<pid>-<random>``).
        capacity: advertised in the registration; the ``"weighted"``
            allocator splits partitions in proportion to it.
        acquire_timeout: seconds to wait for a previous owner to release a
            partition before the allocation is recomputed.
        revoke_timeout: seconds a revocation waits for the application to
            finish the records it holds of a revoked partition; unfinished
            ones are then delivered again by the next owner.
        join_timeout: seconds :meth:`connect` waits for the first allocation.
        deserializer: as for :class:`~kiel.clients.consumer.SingleConsumer`
            (likewise ``key_deserializer``, ``max_wait_time``, ``min_bytes``,
            ``max_bytes``, ``max_fetch_size``, ``decode_budget``).
        **client_options: the :class:`~kiel.client.Client` settings.

    Raises:
        ConfigError: a bad setting.
    """

    def __init__(
        self,
        brokers: Union[str, Sequence[str]],
        group: str,
        zk_hosts: str,
        topics: Optional[Topics] = None,
        pattern: Union[str, Pattern[str], None] = None,
        allocator: Union[str, Callable[..., Any]] = "round_robin",
        listener: Any = None,
        auto_finish: bool = True,
        offset_reset: str = "earliest",
        commit_interval: Optional[float] = 5.0,
        commit_every: Optional[int] = None,
        commit_metadata: str = "",
        zk_session_timeout: float = 10.0,
        zk_chroot: Optional[str] = None,
        zk_auth: Optional[str] = None,
        member_id: Optional[str] = None,
        capacity: float = 1.0,
        acquire_timeout: float = 30.0,
        revoke_timeout: float = 30.0,
        join_timeout: float = 60.0,
        deserializer: Optional[Deserializer] = None,
        key_deserializer: Optional[Deserializer] = None,
        max_wait_time: float = 1.0,
        min_bytes: int = 1,
        max_bytes: int = 1024 * 1024,
        max_fetch_size: int = 16 * 1024 * 1024,
        decode_budget: float = 0.002,
        **client_options: Any,
    ) -> None:
        if (topics is None) == (pattern is None):
            raise ConfigError("give either topics or pattern")
        if topics is not None:
            names = [topics] if isinstance(topics, str) else list(topics)
            if not names or not all(isinstance(t, str) and t for t in names):
                raise ConfigError(f"topics must be a name or a list of names, got {topics!r}")
            self._subscription: Union[List[str], Pattern[str]] = sorted(set(names))
        else:
            try:
                self._subscription = re.compile(pattern) if isinstance(pattern, str) else pattern  # type: ignore[assignment]
            except re.error as e:
                raise ConfigError(f"bad topic pattern {pattern!r}: {e}") from e
        if commit_interval is not None and commit_interval < 0:
            raise ConfigError(f"commit_interval must be >= 0, got {commit_interval!r}")
        if commit_every is not None and (not isinstance(commit_every, int) or commit_every < 1):
            raise ConfigError(f"commit_every must be an int >= 1, got {commit_every!r}")
        for name, value in (
            ("revoke_timeout", revoke_timeout),
            ("acquire_timeout", acquire_timeout),
            ("zk_session_timeout", zk_session_timeout),
        ):
            if not isinstance(value, (int, float)) or value < 0:
                raise ConfigError(f"{name} must be seconds >= 0, got {value!r}")
        if not group or "/" in group:
            raise ConfigError(f"bad group name {group!r}")
        super().__init__(brokers, **client_options)
        self.fetcher = Fetcher(
            self.cluster,
            max_wait_time=max_wait_time,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            max_fetch_size=max_fetch_size,
            offset_reset=offset_reset,
            deserializer=deserializer,
            key_deserializer=key_deserializer,
            decode_budget=decode_budget,
        )
        self.group = group
        self.zk_hosts = zk_hosts
        self.zk_session_timeout = zk_session_timeout
        self.zk_chroot = zk_chroot
        self.zk_auth = zk_auth
        self.member_id = member_id
        self.capacity = capacity
        self.acquire_timeout = acquire_timeout
        self.revoke_timeout = revoke_timeout
        self.join_timeout = join_timeout
        self.listener = listener
        self.auto_finish = auto_finish
        self.offset_reset = offset_reset
        self.commit_interval = commit_interval or None
        self.commit_every = commit_every
        self.commit_metadata = commit_metadata
        self._weighted = isinstance(allocator, str) and allocator.lower() == "weighted"
        #: Members' advertised capacities (filled by the GroupMember for "weighted").
        self._capacities: Dict[str, float] = {}
        if self._weighted:
            self._allocator: Callable[..., Any] = weighted(self._capacities.get)
        else:
            self._allocator = get_allocator(allocator)
        self.zk: Optional[ZooKeeper] = None
        self.member: Optional[GroupMember] = None
        self._coordinator: Optional[int] = None
        self._commit_lock = asyncio.Lock()
        #: Owned partitions the application may see, with what it holds of them.
        self._hands: Dict[TopicPartition, _Hands] = {}
        #: Bumped per partition whenever its records must stop flowing (revoke,
        #: loss, suspension): a stream() batch of an older epoch is dropped.
        self._epochs: Dict[TopicPartition, int] = {}
        #: First offset a stream() batch has not yielded yet, per partition.
        self._loans: Dict[TopicPartition, int] = {}
        #: Offsets last committed by this member, per partition.
        self._committed: Dict[TopicPartition, int] = {}
        #: Owned partitions whose start could not be set up yet (retried by consume()).
        self._unstarted: Set[TopicPartition] = set()
        self._errors: List[BaseException] = []
        self._finished_since_commit = 0
        self._hands_changed: Optional[asyncio.Future[None]] = None
        self._commit_task: Optional[asyncio.Future[None]] = None
        self._timer: Optional[asyncio.Future[None]] = None
        self._suspended = False
        self._closing = False
        #: Completed commits (for tests and metrics).
        self.commits = 0

    # ------------------------------------------------------------------
    # life cycle

    async def connect(self) -> None:
        """Load metadata, start ZooKeeper, find the coordinator, join the group.

        Returns once this member's first allocation is owned and fetching;
        the IOLoop keeps serving meanwhile (ZooKeeper starts in an executor).

        Raises:
            NoBrokersError: no bootstrap broker answered.
            ZooKeeperError: ZooKeeper could not be reached.
            GroupError: the first allocation did not settle within ``join_timeout``.
        """
        await super().connect()
        self.zk = ZooKeeper(
            self.zk_hosts,
            session_timeout=self.zk_session_timeout,
            chroot=self.zk_chroot,
            auth=self.zk_auth,
        )
        await self.zk.start()
        try:
            self._coordinator = await self.cluster.coordinator(self.group)
            if isinstance(self._subscription, list):
                subscription: Any = self._subscription
            else:
                subscription = self._subscription
            self.member = GroupMember(
                self.zk,
                self.group,
                subscription,
                hooks=_Hooks(self),
                allocator=self._allocator,
                member_id=self.member_id,
                capacity=self.capacity,
                acquire_timeout=self.acquire_timeout,
            )
            self.member_id = self.member.member_id
            if self._weighted:
                self.member.capacities = self._capacities
            await self.member.join(timeout=self.join_timeout)
        except BaseException:
            await self.zk.stop()
            raise
        if self.commit_interval:
            self._timer = asyncio.ensure_future(self._commit_timer())

    async def close(self) -> None:
        """Leave the group and close.

        Revokes every owned partition (listener, then a commit of the
        finished positions), releases the owner znodes, deregisters, stops
        ZooKeeper and closes the connections. With ``auto_finish`` the records
        returned by the last :meth:`consume` count as finished (the
        application is done consuming); with ``auto_finish=False`` only
        :meth:`task_done` ones do.
        """
        if self.closed or self._closing:
            return
        self._closing = True
        if self.auto_finish:
            self._finish_handed_out()
        if self._timer is not None:
            self._timer.cancel()
        try:
            if self.member is not None:
                await self.member.leave()
        finally:
            if self.zk is not None:
                await self.zk.stop()
            self.fetcher.close()
            await super().close()
            await self.fetcher.wait_closed()

    # ------------------------------------------------------------------
    # consuming

    def assignment(self) -> List[TopicPartition]:
        """The partitions this member owns, sorted."""
        return sorted(self._hands)

    def fetching(self) -> List[TopicPartition]:
        """The partitions being fetched right now (owned, started, not suspended)."""
        paused = set(self.fetcher.paused())
        return [tp for tp in self.fetcher.assignment() if tp not in paused]

    async def consume(self, topics: Optional[Topics] = None) -> List[Record]:
        """Return the records one fetch round brought for the owned partitions.

        With ``auto_finish``, calling this finishes every record returned
        before.

        Args:
            topics: only these subscribed topics (default: all).

        Returns:
            records ordered by offset within each partition; empty when none
            arrived within ``max_wait_time`` (or nothing is owned).

        Raises:
            AllocationError: raised once after an allocator failed (and any
                exception a listener raised, likewise; the group carries on).
            OffsetResetError: no committed offset and ``offset_reset="raise"``
                (the partition is owned but not fetched; :meth:`seek` it).
            KielError: a background commit failed (raised once; the next
                commit retries it), or a fetch failed as for
                :meth:`kiel.clients.consumer.SingleConsumer.consume`.
            ClientClosedError: the consumer is closed.
        """
        batches = await self._fetch(topics)
        records: List[Record] = []
        for tp in sorted(batches):
            records.extend(batches[tp])
        return records

    async def _fetch(
        self, topics: Optional[Topics], hand_out: bool = True
    ) -> Dict[TopicPartition, List[Record]]:
        self._check_open()
        if self.auto_finish:
            self._finish_handed_out()
        self._reclaim()
        self._raise_pending()
        if self._unstarted:
            await self._start(sorted(self._unstarted))
            self._raise_pending()
        names = None if topics is None else ([topics] if isinstance(topics, str) else list(topics))
        wanted: Optional[List[TopicPartition]] = None
        if names is not None:
            wanted = [tp for tp in self._hands if tp.topic in names]
        batches = await self.fetcher.fetch(wanted)
        # Same task step as the fetcher's drain: no rebalance ran in between.
        for tp, records in list(batches.items()):
            hands = self._hands.get(tp)
            if hands is None:
                del batches[tp]
            elif hand_out:
                hands.hand_out(records)
        return batches

    async def stream(self, topics: Optional[Topics] = None) -> AsyncIterator[Record]:
        """Iterate over the owned partitions' records, for ever (until closed).

        With ``auto_finish``, a record is finished when the loop asks for the
        next one. Records of a partition revoked or lost while a batch is
        being iterated are not yielded any more (the next owner gets them).
        Leaving the loop early loses nothing: the records not yielded are
        fetched again by the next :meth:`consume` or :meth:`stream`.

        Yields:
            records, in offset order within each partition.
        """
        loans = self._loans
        epochs = self._epochs
        while True:
            try:
                batches = await self._fetch(topics, hand_out=False)
            except ClientClosedError:
                return
            loans = self._loans
            token = {tp: epochs.get(tp, 0) for tp in batches}
            for tp, records in batches.items():
                loans[tp] = records[0].offset
            for tp in sorted(batches):
                for record in batches[tp]:
                    if (
                        epochs.get(tp, 0) != token[tp]
                        or loans is not self._loans
                        or tp not in loans
                        or tp not in self._hands
                    ):
                        break
                    hands = self._hands[tp]
                    hands.pending.append(record.offset)
                    hands.end = loans[tp] = record.offset + 1
                    yield record
                    if self.auto_finish and epochs.get(tp, 0) == token[tp]:
                        now_held = self._hands.get(tp)
                        if now_held is not None:
                            self._count_finished(now_held.finish_through(record.offset))
                if epochs.get(tp, 0) == token[tp] and loans is self._loans:
                    loans.pop(tp, None)

    def _reclaim(self) -> None:
        """Seek partitions a stream() batch did not finish yielding back to the first unyielded."""
        if not self._loans:
            return
        loans, self._loans = self._loans, {}
        for tp, offset in loans.items():
            if tp in self._hands and self.fetcher.is_assigned(tp):
                self._epochs[tp] = self._epochs.get(tp, 0) + 1
                if offset < self.fetcher.position(tp):
                    self.fetcher.seek(tp, offset)

    def task_done(self, record: Record) -> None:
        """Mark ``record`` finished (needed with ``auto_finish=False``; harmless otherwise).

        Records of partitions this member no longer owns are ignored.
        """
        if record.topic is None or record.partition is None:
            return
        hands = self._hands.get(TopicPartition(record.topic, record.partition))
        if hands is not None:
            self._count_finished(hands.finish(record.offset))

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Fetch an owned partition from ``offset`` next (also starts one that
        ``offset_reset="raise"`` left unstarted). Records in hand stay in hand.

        Raises:
            UnknownPartitionError: this member does not own the partition.
            ConfigError: a negative offset.
        """
        tp = TopicPartition(topic, partition)
        if tp not in self._hands:
            raise UnknownPartitionError("this member does not own the partition", topic=topic,
                                        partition=partition)
        self._loans.pop(tp, None)
        self._epochs[tp] = self._epochs.get(tp, 0) + 1
        self._unstarted.discard(tp)
        hands = self._hands[tp]
        if not hands.pending:
            hands.end = offset
        self.fetcher.assign(tp, offset)
        if self._suspended:
            self.fetcher.pause(tp)

    def position(self, topic: str, partition: int) -> int:
        """The finished position of an owned partition (what a commit would store).

        Raises:
            UnknownPartitionError: not owned.
        """
        hands = self._hands.get(TopicPartition(topic, partition))
        if hands is None:
            raise UnknownPartitionError("this member does not own the partition", topic=topic,
                                        partition=partition)
        return hands.finished

    def _finish_handed_out(self) -> None:
        n = 0
        for hands in self._hands.values():
            if hands.pending:
                n += hands.finish_all()
        self._count_finished(n)

    def _count_finished(self, n: int) -> None:
        if not n:
            return
        self._finished_since_commit += n
        waiter = self._hands_changed
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self.commit_every and self._finished_since_commit >= self.commit_every:
            self._finished_since_commit = 0
            if self._commit_task is None or self._commit_task.done():
                self._commit_task = asyncio.ensure_future(self._background_commit())

    def _raise_pending(self) -> None:
        if self.member is not None and self.member.failure is not None:
            failure, self.member.failure = self.member.failure, None
            raise failure
        if self._errors:
            raise self._errors.pop(0)

    def _check_open(self) -> None:
        if self.closed or self._closing:
            raise ClientClosedError("the consumer is closed")

    # ------------------------------------------------------------------
    # commits

    async def commit(self) -> None:
        """Commit the finished positions of every owned partition now.

        Raises:
            BrokerError, NoBrokersError, KielConnectionError,
            RequestTimeoutError: the commit failed past the retries.
        """
        await self._commit(sorted(self._hands))

    async def _background_commit(self) -> None:
        try:
            await self._commit(sorted(self._hands))
        except KielError as e:
            # Raised to the application by its next consume().
            self._errors.append(e)

    async def _commit_timer(self) -> None:
        assert self.commit_interval
        while True:
            await asyncio.sleep(self.commit_interval)
            if not self._closing:
                await self._background_commit()

    async def _commit(self, tps: Iterable[TopicPartition]) -> None:
        async with self._commit_lock:
            offsets = {}
            for tp in tps:
                hands = self._hands.get(tp)
                if (
                    hands is not None
                    and hands.finished >= 0
                    and self._committed.get(tp) != hands.finished
                ):
                    offsets[tp] = hands.finished
            if offsets:
                await self._send_commit(offsets)

    async def _send_commit(self, offsets: Dict[TopicPartition, int]) -> None:
        """OffsetCommit v0 with retries; records what was committed."""
        metadata = self.commit_metadata
        remaining = dict(offsets)
        delays = self.cluster.backoff.delays()
        while remaining:
            by_topic: Dict[str, List[OffsetCommitPartitionData]] = {}
            for tp, offset in sorted(remaining.items()):
                by_topic.setdefault(tp.topic, []).append(
                    OffsetCommitPartitionData(tp.partition, offset, metadata)
                )
            request = OffsetCommitRequest(
                self.group, [OffsetCommitTopicData(t, ps) for t, ps in by_topic.items()]
            )
            response: Optional[OffsetCommitResponse]
            response, error = await self._ask_coordinator(request)
            if response is not None:
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.topic, part.partition)
                        if tp not in remaining:
                            continue
                        if part.error_code == 0:
                            self._committed[tp] = remaining.pop(tp)
                            continue
                        if part.error_code == OffsetMetadataTooLargeError.errno and metadata:
                            metadata = ""  # retried at once without it
                            continue
                        error = self._partition_error("OffsetCommit", tp, part.error_code)
            if not remaining:
                break
            if error is None:
                if metadata == "" and self.commit_metadata:
                    continue
                error = KielError("the coordinator did not answer for every partition",
                                  group=self.group)
            delay = next(delays, None)
            if delay is None:
                raise error
            await asyncio.sleep(delay)
        self.commits += 1

    async def _ask_coordinator(self, request: Any) -> Tuple[Any, Optional[KielError]]:
        """Send ``request`` to the group's coordinator once.

        Returns:
            ``(response, None)``, or ``(None, error)`` for a retriable failure,
            after which the coordinator is looked up again.

        Raises:
            KielError: a failure that is not retriable.
        """
        try:
            return await self.cluster.send(await self._coordinator_id(), request), None
        except KielError as e:
            if not e.retriable:
                raise
            self._coordinator = None
            return None, e

    def _partition_error(self, api: str, tp: TopicPartition, code: int) -> KielError:
        """The typed error for a partition's error code, to retry.

        A coordinator error makes the coordinator be looked up again.

        Raises:
            BrokerError: the error, when it is not retriable.
        """
        cls = for_code(code)
        assert cls is not None
        err = cls(api=api, topic=tp.topic, partition=tp.partition, group=self.group)
        if code in _COORDINATOR_ERRORS:
            self._coordinator = None
        elif not err.retriable:
            raise err
        return err

    async def _coordinator_id(self) -> int:
        if self._coordinator is None or self._coordinator not in self.cluster.brokers:
            self._coordinator = await self.cluster.coordinator(self.group)
        return self._coordinator

    async def _fetch_committed(self, tps: List[TopicPartition]) -> Dict[TopicPartition, int]:
        """OffsetFetch v0: committed offsets (-1: none), with retries."""
        by_topic: Dict[str, List[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = OffsetFetchRequest(
            self.group, [OffsetFetchTopicData(t, ps) for t, ps in sorted(by_topic.items())]
        )
        delays = self.cluster.backoff.delays()
        while True:
            found: Dict[TopicPartition, int] = {}
            response: Optional[OffsetFetchResponse]
            response, error = await self._ask_coordinator(request)
            if response is not None:
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.topic, part.partition)
                        if part.error_code in _NO_OFFSET_CODES and (
                            part.error_code == 0 or part.offset < 0
                        ):
                            found[tp] = part.offset
                        else:
                            error = self._partition_error("OffsetFetch", tp, part.error_code)
                if error is None and set(tps) <= set(found):
                    return found
                if error is None:
                    error = KielError("the coordinator did not answer for every partition",
                                      group=self.group)
            assert error is not None  # a failed request or an incomplete answer
            delay = next(delays, None)
            if delay is None:
                raise error
            await asyncio.sleep(delay)

    # ------------------------------------------------------------------
    # partition hooks (called by GroupMember on the loop)

    async def _on_assigned(self, tps: List[TopicPartition]) -> None:
        for tp in tps:
            self._hands.setdefault(tp, _Hands(-1))
        try:
            await self._call_listener("on_partitions_assigned", tps)
        finally:
            await self._start(tps)

    async def _start(self, tps: List[TopicPartition]) -> None:
        """Committed offset (or the reset policy) -> start fetching. Errors are
        kept for consume(); the partitions stay in ``_unstarted`` until it works."""
        tps = [tp for tp in tps if tp in self._hands]
        self._unstarted.update(tps)
        try:
            unknown = sorted({tp.topic for tp in tps} - set(self.cluster.partitions))
            if unknown:
                await self.cluster.refresh_metadata(unknown)
            committed = await self._fetch_committed(tps)
            stored = dict(committed)
            missing = {tp: o for tp, o in committed.items() if o < 0}
            if missing and self.offset_reset == "raise":
                for tp in missing:
                    self._unstarted.discard(tp)
                self._errors.append(
                    OffsetResetError(
                        f"no committed offset for {sorted(missing)} and offset_reset='raise'",
                        group=self.group, topic=min(missing).topic,
                        partition=min(missing).partition,
                    )
                )
            elif missing:
                when = EARLIEST if self.offset_reset == "earliest" else LATEST
                await self.cluster.maybe_refresh()
                resolved = await list_offsets(self.cluster, {tp: when for tp in missing})
                committed.update(resolved)
        except KielError as e:
            log.warning("starting %s failed (%s); consume() retries", tps, e)
            self._errors.append(e)
            return
        for tp in tps:
            offset = committed.get(tp, -1)
            if tp not in self._hands or tp not in self._unstarted or offset < 0:
                continue
            self._unstarted.discard(tp)
            self._hands[tp] = _Hands(offset)
            self._committed[tp] = stored.get(tp, -1)
            self.fetcher.assign(tp, offset)
            if self._suspended:
                self.fetcher.pause(tp)

    def _stop(self, tps: List[TopicPartition]) -> None:
        for tp in tps:
            self.fetcher.unassign(tp)
            self._epochs[tp] = self._epochs.get(tp, 0) + 1
            self._loans.pop(tp, None)
            self._unstarted.discard(tp)

    async def _on_revoked(self, tps: List[TopicPartition]) -> None:
        self._stop(tps)
        await self._wait_finished(tps)
        try:
            await self._call_listener("on_partitions_revoked", tps)
        finally:
            try:
                await self._commit(tps)
            except KielError as e:
                self._errors.append(e)
            for tp in tps:
                self._hands.pop(tp, None)
                self._committed.pop(tp, None)

    async def _on_lost(self, tps: List[TopicPartition]) -> None:
        self._stop(tps)
        for tp in tps:
            self._hands.pop(tp, None)
            self._committed.pop(tp, None)
        name = "on_partitions_lost"
        if self.listener is not None and not hasattr(self.listener, name):
            name = "on_partitions_revoked"
        await self._call_listener(name, tps)

    async def _wait_finished(self, tps: List[TopicPartition]) -> None:
        """Until the application holds no record of ``tps`` (or ``revoke_timeout``)."""
        loop = asyncio.get_event_loop()
        deadline = loop.time() + self.revoke_timeout
        while not self._closing:
            held = [tp for tp in tps if tp in self._hands and self._hands[tp].pending]
            if not held:
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                log.warning(
                    "revoke_timeout: %s still in the application's hands; the next owner "
                    "gets them again", held,
                )
                return
            if self._hands_changed is None or self._hands_changed.done():
                self._hands_changed = loop.create_future()
            await asyncio.wait([self._hands_changed], timeout=remaining)

    async def _call_listener(self, name: str, tps: List[TopicPartition]) -> None:
        method = getattr(self.listener, name, None) if self.listener is not None else None
        if method is None:
            return
        try:
            result = method(list(tps))
            if inspect.isawaitable(result):
                await result
        except Exception as e:  # noqa: BLE001 - the application's code: raised by consume()
            log.error("%s(%s) raised %r", name, tps, e)
            self._errors.append(e)

    def _suspend(self) -> None:
        """Stop fetching at once; drop fetched, undelivered records (positions kept)."""
        self._suspended = True
        loans, self._loans = self._loans, {}
        for tp in self.fetcher.assignment():
            position = min(loans.get(tp, self.fetcher.position(tp)), self.fetcher.position(tp))
            self._epochs[tp] = self._epochs.get(tp, 0) + 1
            self.fetcher.seek(tp, position)
            self.fetcher.pause(tp)

    def _resume(self) -> None:
        self._suspended = False
        for tp in self.fetcher.assignment():
            self.fetcher.resume(tp)
