"""The consumers' I/O: Fetch requests (v0, or v4 where the leader speaks it)
for the partitions of a subscription.

A :class:`Fetcher` turns the fetching partitions of a
:class:`~kiel.consumer.subscription.Subscription` into Fetch v0 requests: one
request per leader covering all its partitions, every leader in parallel, at
most one request in flight per leader (a broker answers a connection's
requests in order, so a second long poll would only queue behind the first).
Each partition's answer goes to the :class:`~kiel.consumer.decoder.Decoder`;
an OffsetOutOfRange answer is reset with ListOffsets
(:func:`kiel.consumer.offsets.list_offsets`) as ``offset_reset`` says.

Flow of one partition::

    position known --(leader fetch)--> raw answer --(fetch(): decoder, a
         ^                                  bounded number of records)--> buffer
         |                                                                  |
         +------------ drained by fetch(): position = next offset <---------+

A partition is fetched again only once its raw answer was decoded and its
buffer drained, so at most one answer per partition waits in memory, and its
records are decoded only as they are handed out; the next request leaves as
soon as the last of them is handed out, while the application works on them
(prefetch). All partitions' raw answers and requests in flight together stay
under ``max_prefetch_bytes``: fetching pauses while they are at the bound.
Failures are retried per partition with the cluster's backoff
(:meth:`kiel.retry.Backoff.delay`), refreshing metadata when it is stale;
retriable ones for as long as they last (a broker outage is ridden out, see
:mod:`kiel.consumer.health`, which notes them and the answers).
"""

import asyncio
import functools
import logging
import time
from collections.abc import Iterable
from typing import Any, Optional

from kiel._aio import Tasks, Turns, Wakeup
from kiel.cluster import Cluster
from kiel.consumer.decoder import DECODE_RECORDS, Decoder
from kiel.consumer.health import Health
from kiel.consumer.offsets import list_offsets
from kiel.consumer.subscription import Batches, PartitionState, Subscription
from kiel.exc import (
    ClientClosedError,
    KielError,
    LeaderNotAvailableError,
    OffsetOutOfRangeError,
    ProtocolError,
    UnsupportedFeatureError,
    for_code,
)
from kiel.metrics import count_error
from kiel.protocol import (
    FetchPartitionData,
    FetchRequest,
    FetchRequestV4,
    FetchResponse,
    FetchTopicData,
)
from kiel.protocol.fetch import CONSUMER_REPLICA_ID, READ_COMMITTED, READ_UNCOMMITTED
from kiel.protocol.list_offsets import EARLIEST, LATEST
from kiel.protocol.versions import FETCH
from kiel.structs import TopicPartition

__all__ = ["ISOLATION_LEVELS", "OFFSET_RESET_POLICIES", "Fetcher"]

log = logging.getLogger(__name__)

#: Offset reset policies for a position the broker answers OffsetOutOfRange to.
OFFSET_RESET_POLICIES = ("earliest", "latest", "raise")
#: Isolation levels, as Kafka names them, and their Fetch field.
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}

#: What one request asks for a partition: its state, and its position, epoch
#: and fetch size when the request left.
_Asked = tuple[PartitionState, int, int, int]

#: Room kept in a frame for a Fetch answer's headers (correlation id, a
#: one-topic header; a topic name is at most 255 bytes).
FETCH_ANSWER_OVERHEAD = 1024
#: Seconds :meth:`Fetcher.fetch` waits past ``max_wait_time`` for an answer
#: (its way back from a broker that held the request that long). A request
#: still unanswered then (a dark network) stays in flight for a later call.
ANSWER_GRACE = 1.0
#: A partition's answer headers besides its topic's name (partition, error
#: code, high watermark, message set size, the topic's own header).
PARTITION_ANSWER_OVERHEAD = 64


class Fetcher:
    """Fetches the partitions of a subscription; the I/O of kiel's consumers.

    Args:
        cluster: the client's :class:`~kiel.cluster.Cluster` (metadata,
            connections, backoff and retry settings).
        subscription: the partitions and their state.
        decoder: decodes each partition's answer.
        changed: fired by the subscription on every change a waiting
            :meth:`fetch` must see.
        max_wait_time: seconds a broker may hold a fetch while it has less
            than ``min_bytes`` to answer (Fetch's ``MaxWaitTime``).
        min_bytes: bytes a broker waits for before it answers a fetch.
        offset_reset: what to do when the broker answers OffsetOutOfRange:
            ``"earliest"``, ``"latest"`` or ``"raise"``.
        request_timeout: seconds to wait for a fetch beyond ``max_wait_time``
            (default: the cluster's ``request_timeout``).
        max_prefetch_bytes: the most bytes of raw answers held and fetch
            sizes asked in flight, all partitions together; one partition is
            always fetched when nothing is held.
        health: where retriable failures and answers are noted (default: a
            new :class:`~kiel.consumer.health.Health`).
        isolation_level: ``"read_uncommitted"`` (every record) or
            ``"read_committed"``: Fetch with isolation 1, records of
            aborted transactions dropped, nothing at or past the last stable
            offset handed out, and the partitions' ``highwater`` (so the
            lag) is the last stable offset.
    """

    def __init__(
        self,
        cluster: Cluster,
        subscription: Subscription,
        decoder: Decoder,
        changed: Wakeup,
        *,
        max_wait_time: float = 1.0,
        min_bytes: int = 1,
        offset_reset: str = "earliest",
        request_timeout: Optional[float] = None,
        max_prefetch_bytes: int = 64 * 1024 * 1024,
        health: Optional[Health] = None,
        isolation_level: str = "read_uncommitted",
    ) -> None:
        self.cluster = cluster
        #: ``"read_uncommitted"`` or ``"read_committed"``.
        self.isolation_level = isolation_level
        self._isolation = ISOLATION_LEVELS[isolation_level]
        #: Retriable failures and answers, for the consumer's health.
        self.health = Health() if health is None else health
        self.subscription = subscription
        self.decoder = decoder
        self.max_wait_time = max_wait_time
        self.min_bytes = min_bytes
        self.offset_reset = offset_reset
        self.max_prefetch_bytes = max_prefetch_bytes
        self.request_timeout = (
            cluster.request_timeout if request_timeout is None else request_timeout
        )
        self._changed = changed
        self._tasks = Tasks("kiel-fetcher")
        self._inflight: dict[int, asyncio.Task[set[TopicPartition]]] = {}
        #: The assigned partitions by leader, in order, and each one's
        #: leader; those without one (see :meth:`_plan_fetches`).
        self._plan: dict[int, list[PartitionState]] = {}
        self._leader_of: dict[TopicPartition, int] = {}
        self._leaderless: list[PartitionState] = []
        self._plan_key: Optional[tuple[Any, ...]] = None
        #: Per leader, where the next request starts taking partitions.
        self._turns: dict[int, int] = {}
        #: Per leader in flight, the fetch sizes its request asked for.
        self._asked: dict[int, int] = {}
        #: Leaders the prefetch bound left out, first come first.
        self._waiting: list[int] = []
        #: Where the next round starts decoding (turns, so no partition starves).
        self._decode_turn = 0
        self._refresh: Optional[asyncio.Task[None]] = None
        self._errors: list[BaseException] = []
        self._closed = False
        #: The latest failure that was retried (for logs, metrics and tests).
        self.last_error: Optional[KielError] = None
        # Counters for the consumer's metrics(): one add per partition answer.
        #: Records handed out to the application.
        self.records_in = 0
        #: Bytes of message sets (record batches) fetched.
        self.bytes_in = 0
        #: Fetch errors per partition, by class name.
        self.errors: dict[str, int] = {}

    @property
    def prefetched(self) -> int:
        """Bytes of raw answers held plus fetch sizes asked in flight (under
        ``max_prefetch_bytes``, or one partition's answer when alone)."""
        return self.subscription.held()[0] + sum(self._asked.values())

    @property
    def in_flight(self) -> int:
        """Fetch requests sent and not answered yet (at most one per leader)."""
        return len(self._inflight)

    # ------------------------------------------------------------------
    # one fetch round

    async def fetch(
        self, partitions: Optional[Iterable[TopicPartition]] = None,
        max_records: Optional[int] = None, deadline: Optional[float] = None,
    ) -> Batches:
        """Hand out what one fetch round brought for ``partitions``.

        Records buffered by an earlier request are returned at once. Otherwise
        requests go out (one per leader) and this waits until a leader answers
        for one of ``partitions``: its records, or nothing if the broker held
        the request for ``max_wait_time`` without data. It never waits longer
        than ``max_wait_time`` plus :data:`ANSWER_GRACE`: requests unanswered
        then (a dark network) stay in flight, and the next calls hand out
        what they bring. Retriable failures (a broker away, a connection
        lost, a timeout, a leader moving) are retried with backoff
        (refreshing metadata where it is stale), within the call while its
        time lasts and in the next calls after, for as long as they last:
        they are noted in :attr:`health`, never raised.

        Args:
            partitions: which assigned partitions to fetch and return
                (default: all). Unassigned ones are ignored.
            max_records: at most this many records (``None``: all buffered);
                the rest stay buffered for the next call.
            deadline: a ``time.monotonic()`` time the call's waits end by,
                if sooner than ``max_wait_time`` from now (the caller spent
                part of its wait already).

        Returns:
            records per partition, in offset order; partitions without records
            are absent.

        Raises:
            ClientClosedError: the fetcher was closed.
            OffsetOutOfRangeError: the position is out of range and the reset
                policy is ``"raise"`` (``seek`` to go on).
            MessageTooLargeError: a message does not fit ``max_fetch_size``.
            DeserializationError: the deserializer failed on the record at
                the partition's position.
            KielError: an error that is not retriable (a broker's refusal,
                such as an authorization failure).
        """
        now = time.monotonic()
        if deadline is None or deadline > now + self.max_wait_time:
            deadline = now + self.max_wait_time
        # The call's own bound: requests stuck in flight (a dark network)
        # are not waited for until their timeout; they stay in flight, and
        # what becomes of them is for a later call.
        give_up = deadline + ANSWER_GRACE
        subscription = self.subscription
        # The partitions wanted, worked out in slices (100,000 of them, say):
        # the round's reads of them below find them ready.
        turns = Turns()
        for _step in subscription.wanted_steps(partitions):
            await turns.give()
        while True:
            out = await self._round(partitions, max_records)
            if out:
                return out
            # Wait for any leader's answer (one for other partitions may free
            # its leader for ours), a change (seek, resume, assign, close), or
            # the end of a backoff.
            tasks: set[asyncio.Future[Any]] = set(self._inflight.values())
            changed = self._changed.future()
            now = time.monotonic()
            delay = subscription.retry_delay(subscription.wanted(partitions), now)
            if not tasks and delay is None:
                # Nothing to fetch (nothing assigned, or all paused): an empty round.
                await asyncio.wait([changed], timeout=max(0.0, deadline - now))
                if changed.done() and time.monotonic() < deadline:
                    continue
                return {}
            if now >= give_up:
                return {}
            done, _ = await asyncio.wait(
                tasks | {changed}, timeout=give_up - now if delay is None else min(
                    delay, give_up - now), return_when=asyncio.FIRST_COMPLETED
            )
            # Partitions may have been unassigned (a grouped consumer's
            # rebalance) while this waited.
            wanted = subscription.wanted(partitions)
            for task in done:
                if task is changed or task.cancelled() or task.exception() is not None:
                    continue  # an exception is raised by _collect
                if wanted.intersection(task.result() or ()):
                    # A healthy answer: the round is over if it brought records
                    # or ``max_wait_time`` is spent (answers dropped after a
                    # seek, or cut short, get another round until then).
                    out = await self._round(partitions, max_records)
                    if out or (
                        time.monotonic() >= deadline
                        and subscription.all_answered(subscription.wanted(partitions))
                    ):
                        return out

    async def _round(
        self, partitions: Optional[Iterable[TopicPartition]], max_records: Optional[int]
    ) -> Batches:
        """Decode what is about to be handed out, then :meth:`_collect` it."""
        await self._decode_wanted(partitions, max_records)
        await self._plan_fetches()
        return self._collect(self.subscription.wanted(partitions), max_records)

    async def _decode_wanted(
        self, partitions: Optional[Iterable[TopicPartition]], max_records: Optional[int]
    ) -> None:
        """Decode raw answers of ``wanted`` until about ``max_records`` records are buffered.

        Strategy: records come to life only here, right before they are
        handed out, so the records alive stay proportional to what the
        application asks for. The partitions are taken from a point that
        turns every round, so a partition with a large raw answer does not
        keep the others waiting.
        """
        # A consume() loop that always finds records ready never suspends by
        # itself: the decoder's step clock runs across its calls and hands
        # the loop back once a budget is spent.
        await self.decoder.breathe()
        # What is wanted is read after the yield: a rebalance may have
        # unassigned partitions meanwhile.
        wanted = self.subscription.wanted(partitions)
        pending = self.subscription.to_decode(wanted)
        if not pending:
            return
        want = max_records or DECODE_RECORDS
        have = self.subscription.buffered(wanted)
        turn = self._decode_turn % len(pending)
        self._decode_turn += 1
        for st in pending[turn:] + pending[:turn]:
            if have >= want:
                break
            await self.decoder.decode(st, want - have)
            have += len(st.buffer)

    def _collect(self, wanted: set[TopicPartition], max_records: Optional[int] = None) -> Batches:
        """Drain what is buffered for ``wanted`` and send the fetches that can go.

        Raises:
            ClientClosedError: the fetcher was closed.
            KielError: nothing was buffered, and an error that is not
                retriable is waiting (retriable ones go to :attr:`health`).
        """
        if self._closed:
            raise ClientClosedError("the consumer is closed")
        out = self.subscription.drain(wanted, max_records)
        if out:
            self.records_in += sum(map(len, out.values()))
        self._kick(wanted)
        if not out:
            while self._errors:
                failure = self._errors.pop(0)
                if not self.health.absorb(failure):
                    raise failure
            error = self.subscription.take_error(wanted)
            if error is not None:
                raise error
        return out

    async def _plan_fetches(self) -> None:
        """Keep :attr:`_plan` (the assigned partitions by leader, in order)
        up to the subscription and the metadata.

        Strategy: the walk over every assigned partition (100,000, say)
        happens only when an assignment or the metadata changed, a slice
        at a time (:class:`kiel._aio.Turns`); a fetch round then walks only
        the partitions it asks for (see :meth:`_within_frame`).
        """
        cluster = self.cluster
        subscription = self.subscription
        while True:
            key = self._plan_key_now()
            if self._plan_key is not None and _same_key(self._plan_key, key):
                return
            plan: dict[int, list[PartitionState]] = {}
            leader_of: dict[TopicPartition, int] = {}
            leaderless: list[PartitionState] = []
            turns = Turns()
            by_topic = subscription.by_topic()
            brokers = cluster.brokers
            for topic in sorted(by_topic):
                parts = by_topic[topic]
                infos = cluster.partitions.get(topic) or {}
                for i, partition in enumerate(sorted(parts)):
                    st = parts[partition]
                    info = infos.get(partition)
                    leader = -1 if info is None else info.leader
                    if leader < 0 or leader not in brokers:
                        leaderless.append(st)
                    else:
                        plan.setdefault(leader, []).append(st)
                    leader_of[st.tp] = leader
                    if not i % 256:
                        await turns.give()
                if by_topic is not subscription.by_topic():
                    break
            if _same_key(key, self._plan_key_now()):
                self._plan, self._leader_of, self._leaderless = plan, leader_of, leaderless
                self._plan_key = key
                return
            # Changed while it was walked: walk again.

    def _plan_key_now(self) -> tuple[Any, ...]:
        """What :attr:`_plan` depends on: the assignment's version, the
        brokers and each topic's partitions (the cluster replaces these
        objects on every metadata refresh)."""
        cluster = self.cluster
        return (
            self.subscription.version, cluster.brokers,
            *(cluster.partitions.get(topic) for topic in self.subscription.topics()),
        )

    def _kick(self, wanted: set[TopicPartition]) -> None:
        """Send a fetch to every leader that has fetchable wanted partitions and none in flight."""
        now = time.monotonic()
        busy: set[int] = set(self._inflight)
        leader_of = self._leader_of
        for st in self.subscription.holding(wanted):
            if st.draining():
                # Its leader's partitions are fetched together, once drained.
                busy.add(leader_of.get(st.tp, -1))
        for st in self._leaderless:
            if st.tp in wanted and st.fetch_now(now):
                tp = st.tp
                self._failed(
                    st,
                    LeaderNotAvailableError(
                        "the partition has no leader in the metadata",
                        topic=tp.topic,
                        partition=tp.partition,
                    ),
                    now,
                )
        held, _records = self.subscription.held()
        in_flight = sum(self._asked.values())
        room = self.max_prefetch_bytes - held - in_flight
        # Strategy: a leader left out by the prefetch bound goes first next
        # time, and nobody overtakes it meanwhile: otherwise the leaders
        # whose long polls keep coming back empty would take the room for
        # ever from the one that has data.
        waiting = self._waiting
        def turn(leader: int) -> tuple[int, int]:
            return (waiting.index(leader) if leader in waiting else len(waiting), leader)

        ready = sorted((leader for leader in self._plan if leader not in busy), key=turn)
        for i, leader in enumerate(ready):
            # The prefetch bound: fetching pauses while the answers held and
            # asked for fill it; with nothing held one partition always goes.
            asked, found = self._within_frame(
                leader, wanted, now, room, alone=not (held or in_flight)
            )
            if not found:
                continue  # nothing of this leader's to fetch now
            if not asked:
                waiting.extend(left for left in ready[i:] if left not in waiting)
                break
            if leader in waiting:
                waiting.remove(leader)
            asked_bytes = self._send(leader, asked)
            room -= asked_bytes
            in_flight += asked_bytes

    def _send(self, leader: int, asked: list[_Asked]) -> int:
        """Start the request for ``asked`` to ``leader``; returns the bytes it asks for."""
        asked_bytes = sum(size for _st, _offset, _epoch, size in asked)
        self._asked[leader] = asked_bytes
        for st, _offset, _epoch, _size in asked:
            st.in_flight = True
        task = self._tasks.spawn(self._fetch_from(leader, asked), f"fetch from {leader}")
        self._inflight[leader] = task
        task.add_done_callback(functools.partial(self._fetch_done, leader))
        return asked_bytes

    def _within_frame(
        self, leader: int, wanted: set[TopicPartition], now: float, room: int, alone: bool
    ) -> tuple[list[_Asked], bool]:
        """The fetchable partitions of ``wanted`` led by ``leader`` whose
        answers fit one frame, and ``room``, together; and whether it has
        any fetchable partition at all.

        Strategy: a broker answers each partition with up to its fetch size,
        so the sizes asked (plus headers) must fit the connection's frame
        cap or the whole answer is refused; they must also fit ``room``, what
        is left of the prefetch bound. The first partition goes whatever its
        size when the consumer holds and awaits nothing else (``alone``).
        The leader's partitions (in order, :attr:`_plan`) are taken from
        where its previous request stopped, so the ones left out go first
        next time and every partition is fetched in turn; the walk stops
        when the frame is full, so a round's work follows what it asks for.
        """
        states = self._plan[leader]
        count = len(states)
        start = self._turns.get(leader, 0) % count
        frame_room = self.cluster.max_frame_size - FETCH_ANSWER_OVERHEAD
        infos = self.cluster.partitions
        asked: list[_Asked] = []
        found = False
        last = start
        for k in range(count):
            index = (start + k) % count
            st = states[index]
            tp = st.tp
            if tp not in wanted or not st.fetch_now(now):
                continue
            info = (infos.get(tp.topic) or {}).get(tp.partition)
            if info is None or info.leader != leader:
                self._plan_key = None  # the metadata moved it: plan again next round
                continue
            found = True
            cost = st.fetch_size + PARTITION_ANSWER_OVERHEAD + len(tp.topic)
            if (asked or not alone) and (cost > frame_room or st.fetch_size > room):
                break
            frame_room -= cost
            room -= st.fetch_size
            asked.append((st, st.position, st.epoch, st.fetch_size))
            last = index
        if asked:
            self._turns[leader] = last + 1
        return asked, found

    def _fetch_done(self, leader: int, task: "asyncio.Task[set[TopicPartition]]") -> None:
        if self._inflight.get(leader) is task:
            del self._inflight[leader]
            self._asked.pop(leader, None)
        if not task.cancelled() and task.exception() is not None:
            # Surfaced by the next fetch() (or the one awaiting this task).
            self._errors.append(task.exception())  # type: ignore[arg-type]
        self._changed.fire()

    # ------------------------------------------------------------------
    # one request

    async def _fetch_from(self, leader: int, asked: list[_Asked]) -> set[TopicPartition]:
        """Send one Fetch to ``leader`` and decode the answers into buffers.

        Returns:
            the partitions the broker answered without error.
        """
        try:
            try:
                version = (await self.cluster.versions(leader)).of(FETCH)
                response: FetchResponse = await self.cluster.send(
                    leader,
                    self._request(asked, version),
                    timeout=self.request_timeout + self.max_wait_time,
                )
            except KielError as e:
                self._asked.pop(leader, None)
                if not self._closed:
                    now = time.monotonic()
                    for st, offset, epoch, _size in asked:
                        if st.current(offset, epoch):
                            self._failed(st, _copy(e), now)
                return set()
            # The bytes asked for are in hand now: they count as held answers.
            self._asked.pop(leader, None)
            self.decoder.resumed()  # resumed by the network: a new step of the loop
            return await self._take(leader, asked, response, version >= 4)
        finally:
            for st, _offset, _epoch, _size in asked:
                st.in_flight = False

    def _request(self, asked: list[_Asked], version: int) -> Any:
        """The Fetch request for ``asked``: v0, or v4 (record batches) when the leader speaks it.

        Raises:
            UnsupportedFeatureError: read_committed with a leader below
                Fetch v4 (Kafka 0.8 to 0.10: no transactions).
        """
        if version < 4 and self._isolation == READ_COMMITTED:
            raise UnsupportedFeatureError(
                f"isolation_level='read_committed' needs Fetch v4 (Kafka 0.11+, transactions); "
                f"this broker serves Fetch v{version}: use isolation_level='read_uncommitted'",
                api="Fetch",
            )
        by_topic: dict[str, list[FetchPartitionData]] = {}
        for st, offset, _epoch, size in asked:
            by_topic.setdefault(st.tp.topic, []).append(
                FetchPartitionData(st.tp.partition, offset, size)
            )
        topics = [FetchTopicData(topic, parts) for topic, parts in by_topic.items()]
        if version >= 4:
            # The response bound is what v0 could answer at most: every
            # partition's own bound (a broker still returns a first batch
            # larger than that, so a large message is never stuck).
            total = min(sum(size for _st, _offset, _epoch, size in asked), 2**31 - 1)
            return FetchRequestV4(
                CONSUMER_REPLICA_ID, int(self.max_wait_time * 1000), self.min_bytes, total,
                self._isolation, topics,
            )
        return FetchRequest(
            CONSUMER_REPLICA_ID, int(self.max_wait_time * 1000), self.min_bytes, topics
        )

    async def _take(
        self, leader: int, asked: list[_Asked], response: FetchResponse, batches: bool = False
    ) -> set[TopicPartition]:
        """Hand each partition's answer to the decoder, or count its error.

        ``batches``: the answer is Fetch v4's (record batches, magic 2).
        """
        healthy: set[TopicPartition] = set()
        committed = batches and self._isolation == READ_COMMITTED
        expected = {st.tp: (st, offset, epoch) for st, offset, epoch, _size in asked}
        resets: list[tuple[PartitionState, int, int]] = []
        for topic in response.topics:
            for part in topic.partitions:
                entry = expected.pop(TopicPartition(topic.topic, part.partition), None)
                if entry is None:
                    continue
                st, offset, epoch = entry
                if not st.current(offset, epoch):
                    continue
                error = for_code(part.error_code)
                if error is None:
                    st.highwater = part.high_watermark
                    self.bytes_in += len(part.message_set)
                    self.decoder.received(st, part.message_set, record_batches=batches)
                    if committed:
                        # read_committed: where this consumer's log ends is
                        # the last stable offset (lag counts to it), and the
                        # decoder drops the aborted transactions' batches.
                        v4: Any = part  # a FetchPartitionResponseV4
                        stable = v4.last_stable_offset
                        if stable >= 0:
                            st.highwater = min(stable, part.high_watermark)
                        self.decoder.committed(st, v4.aborted_transactions, stable)
                    healthy.add(st.tp)
                    self.health.answered(st.tp)
                elif error is OffsetOutOfRangeError:
                    self.errors["OffsetOutOfRangeError"] = (
                        self.errors.get("OffsetOutOfRangeError", 0) + 1
                    )
                    resets.append(entry)
                else:
                    self._failed(st, error(api="Fetch", broker_id=leader, errno=part.error_code))
        for st, offset, epoch in expected.values():
            if st.current(offset, epoch):
                self._failed(
                    st,
                    ProtocolError(
                        "the fetch response left the partition out", api="Fetch", broker_id=leader
                    ),
                )
        for st, offset, epoch in resets:
            if await self._reset(st, offset, epoch):
                healthy.add(st.tp)
                self.health.answered(st.tp)
        return healthy

    async def _reset(self, st: PartitionState, offset: int, epoch: int) -> bool:
        """OffsetOutOfRange at ``offset``: past the log end, go to the end;
        below it (deleted by retention), move as ``offset_reset`` says.

        Returns:
            whether the partition moved (a healthy round).
        """
        tp = st.tp
        if self.offset_reset == "raise":
            st.error = OffsetOutOfRangeError(
                "the position is out of the range the broker holds (offset_reset='raise')",
                topic=tp.topic,
                partition=tp.partition,
                offset=offset,
            )
            st.mark()
            return False
        # Strategy: the broker does not say on which side the position fell,
        # so ask for the log end first. Past the end (a log truncated after
        # an unclean election) there is nothing to replay: go to the end
        # whatever the policy. Below the end the records were deleted by
        # retention: the policy decides, and the loss is logged.
        try:
            end = (await list_offsets(
                self.cluster, {tp: LATEST}, read_committed=self._isolation == READ_COMMITTED))[tp]
            new = end
            if offset < end and self.offset_reset == "earliest":
                new = (await list_offsets(self.cluster, {tp: EARLIEST}))[tp]
        except KielError as e:
            if st.current(offset, epoch):
                self._failed(st, e)
            return False
        if not st.current(offset, epoch):
            return False
        if offset >= end:
            log.warning(
                "offset %d past the log end of %s/%d: moved to the end, offset %d",
                offset, tp.topic, tp.partition, end,
            )
        else:
            log.warning(
                "offset %d out of range for %s/%d (deleted by retention): reset to %s "
                "offset %d; %d records lost",
                offset, tp.topic, tp.partition, self.offset_reset, new, max(0, new - offset),
            )
        st.seek(new)
        return True

    # ------------------------------------------------------------------
    # failures

    def _failed(self, st: PartitionState, error: KielError, now: Optional[float] = None) -> None:
        """Count a failure of ``st``: back off and retry, or keep the error to raise."""
        retrying = st.failed(error, self.cluster.backoff, time.monotonic() if now is None else now)
        self.last_error = error
        count_error(self.errors, error)
        if retrying:
            self.health.failed(error, st.tp)
        if error.invalid_metadata:
            self._want_metadata()
        if retrying:
            log.debug("fetch of %s failed (%s); retry %d", st.tp, error, st.failures)

    def _want_metadata(self) -> None:
        if self._refresh is None or self._refresh.done():
            self._refresh = self._tasks.spawn(self._refresh_metadata(), "metadata refresh")

    async def _refresh_metadata(self) -> None:
        try:
            await self.cluster.refresh_metadata(self.subscription.topics())
        except KielError as e:
            # Partitions keep backing off; a retriable error is a condition
            # of the consumer's health, another is raised once to the application.
            if not self.health.absorb(e):
                self._errors[:] = [*self._errors[-7:], e]
        self._changed.fire()

    # ------------------------------------------------------------------

    def close(self) -> None:
        """Stop fetching; pending and later :meth:`fetch` calls raise ClientClosedError."""
        # In-flight requests are not cancelled here: they end when their
        # connection closes (the client closes the cluster next) or when the
        # broker answers; either way their results are dropped.
        self._closed = True
        self.subscription.drop_fetched()

    async def wait_closed(self, timeout: float) -> None:
        """Wait until the requests in flight at :meth:`close` have ended.

        Close the connections first (``cluster.close()``): they then end at
        once. Whatever still runs after ``timeout`` seconds is cancelled.
        """
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        await self._tasks.cancel(timeout)


def _same_key(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two :meth:`Fetcher._plan_key_now` keys are the same (their
    objects by identity)."""
    return len(a) == len(b) and a[0] == b[0] and all(x is y for x, y in zip(a[1:], b[1:]))


def _copy(error: KielError) -> KielError:
    """A fresh instance of ``error`` per partition (errors carry per-partition context)."""
    clone = type(error).__new__(type(error))
    KielError.__init__(clone, error.message, **error.context)
    if hasattr(error, "errno"):
        clone.errno = error.errno  # type: ignore[attr-defined]
    clone.__cause__ = error.__cause__ or error
    return clone
