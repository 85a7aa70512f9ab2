"""The fetch machinery shared by kiel's consumers.

A :class:`Fetcher` owns the per-partition state of a consumer -- position,
high watermark, pause flag, fetch size, buffered records, errors -- and turns
a set of assigned partitions into Fetch v0 requests: one request per leader
covering all its partitions, every leader in parallel, at most one request in
flight per leader (a broker answers a connection's requests in order, so a
second long poll would only queue behind the first).

The set of assigned partitions may change at any time (:meth:`Fetcher.assign`,
:meth:`Fetcher.unassign`): a grouped consumer drives it with the partitions
its allocator hands out, a single consumer with every partition of the topics
it was asked for. Responses that come back for a partition that was
unassigned, sought or reset while its request was in flight are dropped.

Flow of one partition::

    position known --(leader fetch)--> response --(decode, yielding)--> buffer
         ^                                                                 |
         +-------------- drained by fetch(): position = next offset <------+

A partition is fetched again only once its buffer was drained, so at most one
decoded batch per partition waits in memory; the next request leaves as soon
as a batch is handed out, while the application works on it (prefetch).
"""

import asyncio
import datetime
import functools
import logging
import random
import struct
import time
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Set,
    Tuple,
)

from tornado.locks import Lock

from kiel.clients.records import BEGINNING, END, Record, TopicPartition
from kiel.cluster import Cluster
from kiel.exc import (
    ClientClosedError,
    ConfigError,
    DeserializationError,
    KielError,
    LeaderNotAvailableError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    ProtocolError,
    UnknownPartitionError,
    UnknownTopicError,
    for_code,
)
from kiel.protocol import (
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopicData,
    ListOffsetsPartitionData,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicData,
)
from kiel.protocol.fetch import CONSUMER_REPLICA_ID
from kiel.protocol.list_offsets import EARLIEST, LATEST
from kiel.protocol.messages import decode_message_set

log = logging.getLogger(__name__)

#: Offset reset policies for a position the broker answers OffsetOutOfRange to.
OFFSET_RESET_POLICIES = ("earliest", "latest", "raise")

Deserializer = Callable[[bytes], Any]

_new_record = tuple.__new__
_entry_header = struct.Struct(">qi")
_LOG_OVERHEAD = _entry_header.size
#: Bytes of the first decode slice; later slices are sized from the measured
#: decode speed, within [_MIN_DECODE_CHUNK, _MAX_DECODE_CHUNK].
_DECODE_CHUNK = 64 * 1024
_MIN_DECODE_CHUNK = 4 * 1024
_MAX_DECODE_CHUNK = 1024 * 1024
#: Shortest time a slice aims at (with a decode budget of 0).
_MIN_SLICE_TIME = 0.0005


def to_timestamp(start: Any, now: Optional[float] = None) -> int:
    """The ListOffsets v0 ``timestamp`` for a start position.

    Args:
        start: :data:`BEGINNING`, :data:`END`, a ``datetime`` (naive ones are
            taken as UTC) or a ``timedelta`` (that long ago).
        now: the current time in epoch seconds (default: the wall clock).

    Returns:
        ``EARLIEST`` (-2), ``LATEST`` (-1) or milliseconds since the epoch.

    Raises:
        ConfigError: ``start`` is none of those, or a negative ``timedelta``.
    """
    if start is BEGINNING:
        return EARLIEST
    if start is END:
        return LATEST
    if isinstance(start, datetime.datetime):
        if start.tzinfo is None:
            start = start.replace(tzinfo=datetime.timezone.utc)
        return max(0, int(start.timestamp() * 1000))
    if isinstance(start, datetime.timedelta):
        if start < datetime.timedelta(0):
            raise ConfigError(f"a timedelta start means 'that long ago'; got {start}")
        wall = time.time() if now is None else now
        return max(0, int((wall - start.total_seconds()) * 1000))
    raise ConfigError(
        f"start must be BEGINNING, END, an offset, a dict, a datetime or a timedelta; got {start!r}"
    )


def _delay(base: float, cap: float, failures: int) -> float:
    delay = min(cap, base * (2 ** max(0, failures - 1)))
    return random.uniform(delay / 2, delay)


async def list_offsets(
    cluster: Cluster, timestamps: Dict[TopicPartition, int]
) -> Dict[TopicPartition, int]:
    """Resolve ListOffsets v0 timestamps to offsets, one request per leader.

    A 0.8 broker answers a timestamp at log-segment granularity: the base
    offset of the newest segment last written before that time (or the log end
    offset if the active segment qualifies). A time older than every segment
    answers nothing; that resolves to the earliest offset.

    Args:
        cluster: the client's cluster.
        timestamps: ``EARLIEST``, ``LATEST`` or epoch milliseconds per partition.

    Returns:
        the offset per partition.

    Raises:
        BrokerError: a partition error that persisted past the retries (e.g.
            :class:`~kiel.exc.UnknownTopicOrPartitionError`), or that is not
            retriable.
        NoBrokersError, KielConnectionError, RequestTimeoutError: the cluster
            could not be reached within the retries.
    """
    remaining = dict(timestamps)
    result: Dict[TopicPartition, int] = {}
    backoff = cluster.backoff
    delays = backoff.delays()
    while remaining:
        by_leader: Dict[int, List[TopicPartition]] = {}
        errors: List[KielError] = []
        for tp in remaining:
            leader = cluster.leader(tp.topic, tp.partition)
            if leader < 0 or leader not in cluster.brokers:
                errors.append(LeaderNotAvailableError(topic=tp.topic, partition=tp.partition))
            else:
                by_leader.setdefault(leader, []).append(tp)
        answers = await asyncio.gather(
            *(_list_from(cluster, leader, tps, remaining) for leader, tps in by_leader.items())
        )
        for found, errs in answers:
            errors.extend(errs)
            for tp, offset in found.items():
                if offset is None:  # a time before every segment: the earliest offset
                    remaining[tp] = EARLIEST
                else:
                    result[tp] = offset
                    del remaining[tp]
        if not remaining:
            break
        fatal = [e for e in errors if not e.retriable]
        if fatal:
            raise fatal[0]
        if errors:
            delay = next(delays, None)
            if delay is None:
                raise errors[0]
            if any(e.invalid_metadata for e in errors):
                await cluster.refresh_metadata()
            await asyncio.sleep(delay)
    return result


async def _list_from(
    cluster: Cluster, leader: int, tps: List[TopicPartition], timestamps: Dict[TopicPartition, int]
) -> Tuple[Dict[TopicPartition, Optional[int]], List[KielError]]:
    by_topic: Dict[str, List[ListOffsetsPartitionData]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(
            ListOffsetsPartitionData(tp.partition, timestamps[tp], 1)
        )
    request = ListOffsetsRequest(
        CONSUMER_REPLICA_ID, [ListOffsetsTopicData(t, ps) for t, ps in by_topic.items()]
    )
    found: Dict[TopicPartition, Optional[int]] = {}
    errors: List[KielError] = []
    try:
        response: ListOffsetsResponse = await cluster.send(leader, request)
    except KielError as e:
        if not e.retriable:
            raise
        return found, [e]
    wanted = set(tps)
    for topic in response.topics:
        for part in topic.partitions:
            tp = TopicPartition(topic.topic, part.partition)
            if tp not in wanted:
                continue
            error = for_code(part.error_code)
            if error is not None:
                errors.append(error(api="ListOffsets", topic=tp.topic, partition=tp.partition))
            elif part.offsets:
                found[tp] = part.offsets[0]
            elif timestamps[tp] >= 0:
                found[tp] = None
            else:
                raise ProtocolError(
                    "the broker answered no offset for the earliest/latest position",
                    api="ListOffsets",
                    topic=tp.topic,
                    partition=tp.partition,
                    broker_id=leader,
                )
    return found, errors


class PartitionState:
    """What a :class:`Fetcher` knows about one assigned partition."""

    __slots__ = (
        "tp",
        "position",
        "highwater",
        "paused",
        "fetch_size",
        "buffer",
        "next_offset",
        "epoch",
        "error",
        "failures",
        "retry_at",
        "in_flight",
        "answered",
    )

    def __init__(self, tp: TopicPartition, position: int, fetch_size: int) -> None:
        self.tp = tp
        #: The offset of the next record to hand out.
        self.position = position
        #: The high watermark from the latest fetch response (None until one).
        self.highwater: Optional[int] = None
        self.paused = False
        self.fetch_size = fetch_size
        #: Decoded records not handed out yet, and the offset that follows them.
        self.buffer: List[Record] = []
        self.next_offset = position
        #: Bumped on seek/reset/unassign: in-flight results of an older epoch are dropped.
        self.epoch = 0
        #: An error to raise to the application (then cleared).
        self.error: Optional[KielError] = None
        self.failures = 0
        self.retry_at = 0.0
        self.in_flight = False
        #: Whether a broker answered for the current position (reset by seeks).
        self.answered = False


class Fetcher:
    """Fetches a changing set of partitions; the engine of kiel's consumers.

    Args:
        cluster: the client's :class:`~kiel.cluster.Cluster` (metadata,
            connections, backoff and retry settings).
        max_wait_time: seconds a broker may hold a fetch while it has less
            than ``min_bytes`` to answer (Fetch's ``MaxWaitTime``).
        min_bytes: bytes a broker waits for before it answers a fetch.
        max_bytes: bytes fetched per partition per request (``MaxBytes``).
        max_fetch_size: a message larger than ``max_bytes`` doubles the
            partition's fetch size up to this cap; beyond it
            :class:`~kiel.exc.MessageTooLargeError` is raised.
        offset_reset: what to do when the broker answers OffsetOutOfRange:
            ``"earliest"``, ``"latest"`` or ``"raise"``.
        deserializer: called with each non-null value (``bytes``).
        key_deserializer: called with each non-null key (``bytes``).
        decode_budget: seconds of decoding after which the fetcher yields to
            the IOLoop before decoding more (the loop's worst stall).
        request_timeout: seconds to wait for a fetch beyond ``max_wait_time``
            (default: the cluster's ``request_timeout``).

    Raises:
        ConfigError: a bad setting.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        max_wait_time: float = 1.0,
        min_bytes: int = 1,
        max_bytes: int = 1024 * 1024,
        max_fetch_size: int = 16 * 1024 * 1024,
        offset_reset: str = "earliest",
        deserializer: Optional[Deserializer] = None,
        key_deserializer: Optional[Deserializer] = None,
        decode_budget: float = 0.002,
        request_timeout: Optional[float] = None,
    ) -> None:
        if not isinstance(max_wait_time, (int, float)) or not 0 <= max_wait_time <= 2**31 / 1000:
            raise ConfigError(f"max_wait_time must be seconds >= 0, got {max_wait_time!r}")
        for name, value, low in (
            ("min_bytes", min_bytes, 0),
            ("max_bytes", max_bytes, 1),
            ("max_fetch_size", max_fetch_size, 1),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value < 2**31:
                raise ConfigError(f"{name} must be an int in [{low}, 2**31), got {value!r}")
        if max_fetch_size < max_bytes:
            raise ConfigError(
                f"max_fetch_size ({max_fetch_size}) must be >= max_bytes ({max_bytes})"
            )
        if offset_reset not in OFFSET_RESET_POLICIES:
            raise ConfigError(
                f"offset_reset must be one of {', '.join(OFFSET_RESET_POLICIES)}; "
                f"got {offset_reset!r}"
            )
        if decode_budget < 0:
            raise ConfigError(f"decode_budget must be >= 0, got {decode_budget!r}")
        self.cluster = cluster
        self.max_wait_time = max_wait_time
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.max_fetch_size = max_fetch_size
        self.offset_reset = offset_reset
        self.deserializer = deserializer
        self.key_deserializer = key_deserializer
        self.decode_budget = decode_budget
        self.request_timeout = (
            cluster.request_timeout if request_timeout is None else request_timeout
        )
        self._parts: Dict[TopicPartition, PartitionState] = {}
        self._inflight: Dict[int, asyncio.Task[Set[TopicPartition]]] = {}
        self._refresh: Optional[asyncio.Future[None]] = None
        self._errors: List[BaseException] = []
        self._changed: Optional[asyncio.Future[None]] = None
        self._decoding = Lock()
        self._closed = False
        #: Times the decoder yielded to the IOLoop (for tests and benchmarks).
        self.yields = 0
        self._step_started = 0.0
        self._chunk = _DECODE_CHUNK
        #: The latest failure that was retried (for logs, metrics and tests).
        self.last_error: Optional[KielError] = None

    # ------------------------------------------------------------------
    # assignment and positions

    def assign(self, tp: TopicPartition, position: int) -> None:
        """Start fetching ``tp`` from ``position`` (re-assigning seeks).

        Raises:
            ConfigError: a negative position.
        """
        if position < 0:
            raise ConfigError(
                f"offsets are >= 0, got {position}", topic=tp.topic, partition=tp.partition
            )
        st = self._parts.get(tp)
        if st is None:
            self._parts[tp] = PartitionState(tp, position, self.max_bytes)
        else:
            self._seek(st, position)
        self._notify()

    def unassign(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` and drop its undelivered records (no-op if not assigned)."""
        st = self._parts.pop(tp, None)
        if st is not None:
            st.epoch += 1
            st.buffer = []
            self._notify()

    @property
    def in_flight(self) -> int:
        """Fetch requests sent and not answered yet (at most one per leader)."""
        return len(self._inflight)

    def is_assigned(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is assigned."""
        return tp in self._parts

    def assignment(self) -> List[TopicPartition]:
        """The assigned partitions, sorted."""
        return sorted(self._parts)

    def state(self, tp: TopicPartition) -> PartitionState:
        """The state of an assigned partition.

        Raises:
            UnknownPartitionError: ``tp`` is not assigned.
        """
        st = self._parts.get(tp)
        if st is None:
            raise UnknownPartitionError(
                "partition is not assigned to this consumer", topic=tp.topic, partition=tp.partition
            )
        return st

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record :meth:`fetch` returns for ``tp``."""
        return self.state(tp).position

    def highwater(self, tp: TopicPartition) -> Optional[int]:
        """The high watermark of ``tp`` from its latest fetch (None before one)."""
        return self.state(tp).highwater

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next offset returned for ``tp``; drops buffered records.

        Raises:
            ConfigError: a negative offset.
            UnknownPartitionError: ``tp`` is not assigned.
        """
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ConfigError(
                f"offsets are ints >= 0, got {offset!r}", topic=tp.topic, partition=tp.partition
            )
        self._seek(self.state(tp), offset)
        self._notify()

    def _seek(self, st: PartitionState, offset: int) -> None:
        st.epoch += 1
        st.answered = False
        st.position = st.next_offset = offset
        st.buffer = []
        st.error = None
        st.failures = 0
        st.retry_at = 0.0

    def pause(self, tp: TopicPartition) -> None:
        """Stop fetching and returning ``tp`` (records already buffered are kept)."""
        self.state(tp).paused = True

    def resume(self, tp: TopicPartition) -> None:
        """Undo :meth:`pause`."""
        self.state(tp).paused = False
        self._notify()

    def paused(self) -> List[TopicPartition]:
        """The paused partitions, sorted."""
        return sorted(tp for tp, st in self._parts.items() if st.paused)

    # ------------------------------------------------------------------
    # fetching

    async def fetch(
        self, partitions: Optional[Iterable[TopicPartition]] = None
    ) -> Dict[TopicPartition, List[Record]]:
        """Hand out what one fetch round brought for ``partitions``.

        Records buffered by an earlier request are returned at once. Otherwise
        requests go out (one per leader) and this waits until a leader answers
        for one of ``partitions``: its records, or nothing if the broker held
        the request for ``max_wait_time`` without data. Retriable failures are
        retried with backoff (refreshing metadata where it is stale) inside
        the call; a failure that outlasts the cluster's retries is raised.

        Args:
            partitions: which assigned partitions to fetch and return
                (default: all). Unassigned ones are ignored.

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
            KielError: a retriable error (connection, leadership, timeout)
                persisted past the retries; the next call tries again.
        """
        deadline = time.monotonic() + self.max_wait_time
        while True:
            self._check_open()
            wanted = self._wanted(partitions)
            out = self._drain(wanted)
            self._kick(wanted)
            if out:
                return out
            self._raise_errors(wanted)
            # Wait for any leader's answer (one for other partitions may free
            # its leader for ours), a change (seek, resume, assign, close), or
            # the end of a backoff.
            tasks: Set[asyncio.Future[Any]] = set(self._inflight.values())
            changed = self._change_future()
            delay = self._retry_delay(wanted)
            if not tasks and delay is None:
                # Nothing to fetch (nothing assigned, or all paused): an empty round.
                await asyncio.wait([changed], timeout=self.max_wait_time)
                if changed.done():
                    continue
                return {}
            done, _ = await asyncio.wait(
                tasks | {changed}, timeout=delay, return_when=asyncio.FIRST_COMPLETED
            )
            # Partitions may have been unassigned (a grouped consumer's
            # rebalance) while this waited.
            wanted = self._wanted(partitions)
            for task in done:
                if task is changed or task.cancelled() or task.exception() is not None:
                    continue  # an exception is raised by _raise_errors
                if wanted.intersection(task.result() or ()):
                    # A healthy answer: the round is over if it brought records
                    # or ``max_wait_time`` is spent (answers dropped after a
                    # seek, or cut short, get another round until then).
                    self._check_open()
                    out = self._drain(wanted)
                    self._kick(wanted)
                    if out:
                        return out
                    self._raise_errors(wanted)
                    if time.monotonic() >= deadline and self._all_answered(wanted):
                        return out

    def _all_answered(self, wanted: Set[TopicPartition]) -> bool:
        """Whether every fetchable wanted partition got an answer at its position."""
        parts = self._parts
        return all(
            st.answered or st.paused or st.error is not None
            for st in (parts[tp] for tp in wanted)
        )

    def _wanted(self, partitions: Optional[Iterable[TopicPartition]]) -> Set[TopicPartition]:
        if partitions is None:
            return set(self._parts)
        return {tp for tp in partitions if tp in self._parts}

    def _drain(self, wanted: Set[TopicPartition]) -> Dict[TopicPartition, List[Record]]:
        out: Dict[TopicPartition, List[Record]] = {}
        parts = self._parts
        for tp in wanted:
            st = parts[tp]
            if st.buffer and not st.paused:
                out[tp] = st.buffer
                st.buffer = []
                st.position = st.next_offset
        return out

    def _raise_errors(self, wanted: Set[TopicPartition]) -> None:
        if self._errors:
            raise self._errors.pop(0)
        for tp in sorted(wanted):
            st = self._parts[tp]
            if st.error is not None and not st.paused:
                error, st.error = st.error, None
                raise error

    def _retry_delay(self, wanted: Set[TopicPartition]) -> Optional[float]:
        """Seconds until a wanted partition may be fetched again, or None if none waits."""
        now = time.monotonic()
        waits = [
            st.retry_at
            for st in (self._parts[tp] for tp in wanted)
            if st.retry_at > now and not st.paused and not st.in_flight and st.error is None
        ]
        if not waits:
            return None
        return min(waits) - now

    def _kick(self, wanted: Set[TopicPartition]) -> None:
        """Send a fetch to every leader that has fetchable wanted partitions and none in flight."""
        now = time.monotonic()
        by_leader: Dict[int, List[PartitionState]] = {}
        busy: Set[int] = set()
        cluster = self.cluster
        for tp in wanted:
            st = self._parts[tp]
            if st.paused or st.in_flight or st.error is not None:
                continue
            try:
                leader = cluster.leader(tp.topic, tp.partition)
            except (UnknownTopicError, UnknownPartitionError):
                leader = -1
            if st.buffer:
                busy.add(leader)  # fetch the leader's partitions together, once drained
                continue
            if st.retry_at > now:
                continue
            if leader < 0 or leader not in cluster.brokers:
                self._failed(
                    st,
                    LeaderNotAvailableError(
                        "the partition has no leader in the metadata",
                        topic=tp.topic,
                        partition=tp.partition,
                    ),
                    now,
                )
                continue
            by_leader.setdefault(leader, []).append(st)
        for leader, states in by_leader.items():
            if leader in self._inflight or leader in busy:
                continue
            requested = [(st, st.position, st.epoch, st.fetch_size) for st in states]
            for st in states:
                st.in_flight = True
            task = asyncio.ensure_future(self._fetch_from(leader, requested))
            self._inflight[leader] = task
            task.add_done_callback(functools.partial(self._fetch_done, leader))

    def _fetch_done(self, leader: int, task: "asyncio.Task[Set[TopicPartition]]") -> None:
        if self._inflight.get(leader) is task:
            del self._inflight[leader]
        if not task.cancelled() and task.exception() is not None:
            # Surfaced by the next fetch() (or the one awaiting this task).
            self._errors.append(task.exception())  # type: ignore[arg-type]
        self._notify()

    def _failed(self, st: PartitionState, error: KielError, now: Optional[float] = None) -> None:
        """Count a failure of ``st``: back off and retry, or keep the error to raise."""
        tp = st.tp
        error.with_context(topic=tp.topic, partition=tp.partition, offset=st.position)
        self.last_error = error
        if error.invalid_metadata:
            self._want_metadata()
        if not error.retriable:
            st.error = error
            return
        st.failures += 1
        backoff = self.cluster.backoff
        if backoff.retries is not None and st.failures > backoff.retries:
            st.error = error
            st.failures = 0
            st.retry_at = 0.0
            return
        now = time.monotonic() if now is None else now
        st.retry_at = now + _delay(backoff.base, backoff.cap, st.failures)
        log.debug(
            "fetch of %s/%s failed (%s); retry %d", tp.topic, tp.partition, error, st.failures
        )

    def _want_metadata(self) -> None:
        if self._refresh is None or self._refresh.done():
            self._refresh = asyncio.ensure_future(self._refresh_metadata())

    async def _refresh_metadata(self) -> None:
        topics = sorted({tp.topic for tp in self._parts})
        try:
            await self.cluster.refresh_metadata(topics)
        except KielError as e:
            # Partitions keep backing off; the error is shown once to the application.
            self._errors[:] = [*self._errors[-7:], e]
        self._notify()

    async def _fetch_from(
        self, leader: int, requested: List[Tuple[PartitionState, int, int, int]]
    ) -> Set[TopicPartition]:
        """Send one Fetch to ``leader`` and decode into buffers.

        Returns:
            the partitions the broker answered without error.
        """
        healthy: Set[TopicPartition] = set()
        try:
            by_topic: Dict[str, List[FetchPartitionData]] = {}
            for st, offset, _epoch, size in requested:
                by_topic.setdefault(st.tp.topic, []).append(
                    FetchPartitionData(st.tp.partition, offset, size)
                )
            request = FetchRequest(
                CONSUMER_REPLICA_ID,
                int(self.max_wait_time * 1000),
                self.min_bytes,
                [FetchTopicData(topic, parts) for topic, parts in by_topic.items()],
            )
            try:
                response: FetchResponse = await self.cluster.send(
                    leader, request, timeout=self.request_timeout + self.max_wait_time
                )
                self._step_started = time.monotonic()  # resumed by the network: a new step
            except KielError as e:
                if self._closed:
                    return healthy
                now = time.monotonic()
                for st, offset, epoch, _size in requested:
                    if self._current(st, offset, epoch):
                        self._failed(st, _copy(e), now)
                return healthy
            expected = {st.tp: (st, offset, epoch) for st, offset, epoch, _size in requested}
            resets: List[Tuple[PartitionState, int, int]] = []
            for topic in response.topics:
                for part in topic.partitions:
                    tp = TopicPartition(topic.topic, part.partition)
                    entry = expected.pop(tp, None)
                    if entry is None:
                        continue
                    st, offset, epoch = entry
                    if not self._current(st, offset, epoch):
                        continue
                    if part.error_code == 0:
                        st.highwater = part.high_watermark
                        # One decoder at a time: a loop iteration then runs
                        # at most one decode budget, not one per leader.
                        acquired = self._decoding.acquire()
                        if not acquired.done():  # type: ignore[attr-defined]
                            await acquired
                            self._step_started = time.monotonic()
                        try:
                            if self._current(st, offset, epoch) and await self._decode(
                                st, offset, epoch, part.message_set
                            ):
                                healthy.add(tp)
                        finally:
                            self._decoding.release()
                    elif part.error_code == OffsetOutOfRangeError.errno:
                        resets.append((st, offset, epoch))
                    else:
                        error_cls = for_code(part.error_code)
                        assert error_cls is not None
                        self._failed(
                            st, error_cls(api="Fetch", broker_id=leader, errno=part.error_code)
                        )
            for st, offset, epoch in expected.values():
                if self._current(st, offset, epoch):
                    self._failed(
                        st,
                        ProtocolError(
                            "the fetch response left the partition out",
                            api="Fetch",
                            broker_id=leader,
                        ),
                    )
            for st, offset, epoch in resets:
                if await self._reset(st, offset, epoch):
                    healthy.add(st.tp)
            return healthy
        finally:
            for st, _offset, _epoch, _size in requested:
                st.in_flight = False

    def _current(self, st: PartitionState, offset: int, epoch: int) -> bool:
        return (
            self._parts.get(st.tp) is st
            and st.epoch == epoch
            and st.position == offset
            and not st.buffer
        )

    async def _reset(self, st: PartitionState, offset: int, epoch: int) -> bool:
        tp = st.tp
        if self.offset_reset == "raise":
            st.error = OffsetOutOfRangeError(
                "the position is out of the range the broker holds (offset_reset='raise')",
                topic=tp.topic,
                partition=tp.partition,
                offset=offset,
            )
            return False
        timestamp = EARLIEST if self.offset_reset == "earliest" else LATEST
        try:
            new = (await list_offsets(self.cluster, {tp: timestamp}))[tp]
        except KielError as e:
            if self._current(st, offset, epoch):
                self._failed(st, e)
            return False
        if not self._current(st, offset, epoch):
            return False
        log.warning(
            "offset %d out of range for %s/%d: reset to %s offset %d",
            offset,
            tp.topic,
            tp.partition,
            self.offset_reset,
            new,
        )
        self._seek(st, new)
        return True

    async def _decode(self, st: PartitionState, offset: int, epoch: int, data: bytes) -> bool:
        """Decode one partition's message set into its buffer, yielding to the loop.

        Returns:
            True when the answer counts as a healthy round (records, or an
            empty set); False when the fetch must be retried with a larger
            size, or an error was kept for the application.
        """
        tp = st.tp
        topic, partition = tp
        records: List[Record] = []
        next_offset: Optional[int] = None
        size = len(data)
        pos = 0
        chunk = self._chunk
        # Strategy: decode a slice at a time (a slice ends wherever a message
        # is cut; ``valid_bytes`` says where the next one starts) and hand the
        # loop back whenever ``decode_budget`` is spent. Slices are sized from
        # the measured decode speed to take about half the budget: bytes are a
        # poor clock, as 64 KiB of compressed wrappers can hold 20,000
        # messages. A 10 MB fetch then never stalls the IOLoop for much more
        # than a budget (or one compressed wrapper, which decodes as a whole).
        clock = time.perf_counter
        try:
            while pos < size:
                end = min(size, pos + chunk)
                piece = data if pos == 0 and end == size else data[pos:end]
                started = clock()
                result = decode_message_set(piece, topic, partition, min_offset=offset)
                if result.first_message_too_large:
                    if end < size:  # the message is larger than a slice: widen it
                        chunk = max(2 * chunk, result.first_message_size or 0)
                        continue
                    break
                elapsed = clock() - started
                if result.valid_bytes and elapsed > 0:
                    target = max(self.decode_budget / 2, _MIN_SLICE_TIME)
                    ideal = int(result.valid_bytes * target / elapsed)
                    self._chunk = min(max(ideal, _MIN_DECODE_CHUNK), _MAX_DECODE_CHUNK)
                chunk = self._chunk
                pos += result.valid_bytes
                if result.next_offset is not None:
                    next_offset = result.next_offset
                if result.records:
                    records.extend(result.records)
                if result.truncated and end >= size:
                    break  # the broker cut the last message at max_bytes
                if await self._breathe() and not self._current(st, offset, epoch):
                    return False
        except ProtocolError as e:
            e.with_context(api="Fetch", topic=topic, partition=partition)
            if e.offset is None:
                e.with_context(offset=offset)
            st.error = e
            return False
        if pos == 0 and size:
            return self._grow(st, offset, result.first_message_size)
        st.failures = 0
        st.answered = True
        if records and (self.deserializer is not None or self.key_deserializer is not None):
            deserialized = await self._deserialize(st, offset, epoch, records)
            if deserialized is None:
                return False
            records = deserialized
        if not self._current(st, offset, epoch):
            return False
        if records:
            st.buffer = records
            st.next_offset = records[-1].offset + 1
        elif next_offset is not None and next_offset > offset:
            # Only messages before the position (inside a compressed wrapper).
            st.position = st.next_offset = next_offset
        return True

    async def _breathe(self) -> bool:
        """Yield to the IOLoop if this step of the loop has used up ``decode_budget``.

        Strategy: the clock is the fetcher's, not one decode call's: it starts
        when a fetch task resumes (an answer arrived, or after a yield), so
        finishing one partition and starting the next in the same step still
        counts as one step. Only one task decodes at a time (``_decoding``).

        Returns:
            whether it yielded (the caller re-checks its partition's state).
        """
        if time.monotonic() - self._step_started < self.decode_budget:
            return False
        await asyncio.sleep(0)
        self.yields += 1
        self._step_started = time.monotonic()
        return True

    def _grow(self, st: PartitionState, offset: int, needed: Optional[int]) -> bool:
        """The first message did not fit: double the fetch size, or give up at the cap."""
        tp = st.tp
        if st.fetch_size >= self.max_fetch_size or (needed or 0) > self.max_fetch_size:
            st.error = MessageTooLargeError(
                f"a message of {needed or 'more than ' + str(st.fetch_size)} bytes does not fit "
                f"max_fetch_size={self.max_fetch_size}; raise max_fetch_size or seek past it",
                topic=tp.topic,
                partition=tp.partition,
                offset=offset,
            )
            return False
        size = st.fetch_size
        while size < (needed or 0) or size == st.fetch_size:
            size *= 2
        st.fetch_size = min(size, self.max_fetch_size)
        log.info(
            "message at %s/%d offset %d exceeds the fetch size; fetch size now %d",
            tp.topic,
            tp.partition,
            offset,
            st.fetch_size,
        )
        return False

    async def _deserialize(
        self, st: PartitionState, offset: int, epoch: int, records: List[Record]
    ) -> Optional[List[Record]]:
        """Apply the deserializers; on failure keep the good prefix and the error."""
        value_fn = self.deserializer
        key_fn = self.key_deserializer
        out: List[Record] = []
        append = out.append
        new = _new_record
        i = 0
        record = records[0]
        try:
            for i, record in enumerate(records):
                topic, partition, roff, key, value, ts = record
                if key_fn is not None and key is not None:
                    key = key_fn(key)
                if value_fn is not None and value is not None:
                    value = value_fn(value)
                append(new(Record, (topic, partition, roff, key, value, ts)))
                if not i & 1023 and await self._breathe():
                    if not self._current(st, offset, epoch):
                        return None
        except Exception as e:  # noqa: BLE001 -- the application's code: wrap it, keep the cause
            error = DeserializationError(
                f"the deserializer failed: {e!r}",
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
            )
            error.__cause__ = e
            if not self._current(st, offset, epoch):
                return None
            if out:
                # Hand out what decoded; the error comes with the next fetch.
                st.error = error
                return out
            st.error = error
            return None
        return out

    # ------------------------------------------------------------------

    def _change_future(self) -> "asyncio.Future[None]":
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_event_loop().create_future()
        return self._changed

    def _notify(self) -> None:
        if self._changed is not None and not self._changed.done():
            self._changed.set_result(None)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")

    def close(self) -> None:
        """Stop fetching; pending and later :meth:`fetch` calls raise ClientClosedError."""
        # In-flight requests are not cancelled: they end when their connection
        # closes (the client closes the cluster next) or when the broker
        # answers; either way their results are dropped.
        self._closed = True
        for st in self._parts.values():
            st.epoch += 1
            st.buffer = []
        self._notify()

    async def wait_closed(self) -> None:
        """Wait until the requests in flight at :meth:`close` have ended.

        Close the connections first (``cluster.close()``), or this waits for
        the brokers to answer (at most ``max_wait_time`` plus a round trip).
        """
        pending: List[asyncio.Future[Any]] = [t for t in self._inflight.values() if not t.done()]
        if self._refresh is not None and not self._refresh.done():
            pending.append(self._refresh)
        if pending:
            await asyncio.wait(pending)


def _copy(error: KielError) -> KielError:
    """A fresh instance of ``error`` per partition (errors carry per-partition context)."""
    clone = type(error).__new__(type(error))
    KielError.__init__(clone, error.message, **error.context)
    if hasattr(error, "errno"):
        clone.errno = error.errno  # type: ignore[attr-defined]
    clone.__cause__ = error.__cause__ or error
    return clone
