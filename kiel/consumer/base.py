"""What both consumers are built on: :class:`_BaseConsumer`.

It takes the fetch options once, wires the consumer's parts together --
:class:`~kiel.consumer.subscription.Subscription` (partition state),
:class:`~kiel.consumer.fetcher.Fetcher` (I/O),
:class:`~kiel.consumer.decoder.Decoder` (records) -- and owns what the
consumers do alike: handing records out (and taking back those a
``stream()`` loop has not yielded), positions and lag, errors kept for the
next call, riding out unreachable brokers and the health rule
(:mod:`kiel.consumer.health`), and the close sequence.

Positions have one meaning in kiel: :meth:`_BaseConsumer.position` is the
offset of the next record to be handed to the application, i.e. the offset
after the last record ``consume()`` returned or ``stream()`` yielded.
Records fetched ahead and not handed out yet do not count.
"""

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Optional,
    Union,
    overload,
)

from kiel import _options
from kiel._aio import Tasks, Wakeup, within
from kiel.client import Client, ClientOptions
from kiel.consumer.decoder import Decoder
from kiel.consumer.fetcher import (
    ANSWER_GRACE,
    FETCH_ANSWER_OVERHEAD,
    ISOLATION_LEVELS,
    OFFSET_RESET_POLICIES,
    PARTITION_ANSWER_OVERHEAD,
    Fetcher,
)
from kiel.consumer.health import CLIENT, HEALTH_STALL, Health
from kiel.consumer.offsets import list_offsets
from kiel.consumer.positions import Start, lag_of, to_timestamp
from kiel.consumer.subscription import Loan, PartitionState, Subscription
from kiel.exc import (
    ClientClosedError,
    ConfigError,
    KielError,
    RequestTimeoutError,
    UnsupportedFeatureError,
)
from kiel.metrics import ConsumerMetrics
from kiel.protocol.versions import FETCH
from kiel.serializers import Deserializer
from kiel.structs import Record, TopicPartition

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ConsumedBatches", "ConsumedRecord", "Topics"]


#: What consumers hand out. ``key`` and ``value`` are ``bytes`` (or ``None``)
#: without deserializers, and whatever the deserializers return with them.
ConsumedRecord = Record[Any, Any]
#: Records per partition, in offset order.
ConsumedBatches = dict[TopicPartition, list[ConsumedRecord]]
#: A topic name, or several.
Topics = Union[str, Sequence[str]]


def topic_list(topics: Topics) -> list[str]:
    """``topics`` as a list of names.

    Raises:
        ConfigError: not a non-empty name or list of non-empty names.
    """
    names = [topics] if isinstance(topics, str) else list(topics)
    if not names or not all(isinstance(t, str) and t for t in names):
        raise ConfigError(f"topics must be a name or a list of names, got {topics!r}")
    return names


#: Background errors kept for the application's next consume() (see ``_errors``).
MAX_PENDING_ERRORS = 16

#: The longest ``max_wait_time`` accepted, seconds. Brokers hold a fetch this
#: long only while nothing arrives; longer waits are almost always a
#: millisecond value from kiel 0.9 (see the migration guide).
MAX_WAIT_TIME = 60.0


def _check_fetch_options(
    max_wait_time: Any, min_bytes: Any, max_bytes: Any, max_fetch_size: Any,
    offset_reset: Any, decode_budget: Any, deserializer: Any, key_deserializer: Any,
    isolation_level: Any = "read_uncommitted",
) -> None:
    _options.real("max_wait_time", max_wait_time, at_least=0)
    if max_wait_time > MAX_WAIT_TIME:
        # kiel 0.9 took milliseconds: 1000 meant one second. A wait this long
        # is almost surely such a value, so refuse it rather than wait minutes.
        raise ConfigError(
            f"max_wait_time is in seconds (at most {MAX_WAIT_TIME:g}); got {max_wait_time!r}. "
            f"kiel 0.9 took milliseconds: {max_wait_time!r} ms is {max_wait_time / 1000:g} s"
        )
    for name, value, low in (
        ("min_bytes", min_bytes, 0),
        ("max_bytes", max_bytes, 1),
        ("max_fetch_size", max_fetch_size, 1),
    ):
        _options.integer(name, value, at_least=low, most=2**31 - 1)
    if max_fetch_size < max_bytes:
        raise ConfigError(f"max_fetch_size ({max_fetch_size}) must be >= max_bytes ({max_bytes})")
    if not isinstance(offset_reset, str) or offset_reset not in OFFSET_RESET_POLICIES:
        raise ConfigError(
            f"offset_reset must be one of {', '.join(OFFSET_RESET_POLICIES)}; got {offset_reset!r}"
        )
    if not isinstance(isolation_level, str) or isolation_level not in ISOLATION_LEVELS:
        raise ConfigError(
            f"isolation_level must be one of {', '.join(map(repr, ISOLATION_LEVELS))}; "
            f"got {isolation_level!r}"
        )
    _options.real("decode_budget", decode_budget, at_least=0)
    for name, func in (("deserializer", deserializer), ("key_deserializer", key_deserializer)):
        if func is not None and not callable(func):
            raise ConfigError(f"{name} must be callable(bytes), got {func!r}")


#: Records a ``stream()`` loop takes per round when ``max_records`` is not set.
#: Short rounds let a web app's requests in between them: in bench_webapp,
#: request p99 rose by 4.5-6 ms while draining with 500, 3-3.7 ms with 100,
#: at the same SingleConsumer throughput.
STREAM_RECORDS = 100


#: The default decoded-bytes bound is this many times ``max_bytes``.
DECODED_PER_FETCHED = 32


def decoded_bytes_bound(max_bytes: int, max_decoded: Any) -> int:
    """The decoded-bytes bound: ``max_decoded``, or one derived from ``max_bytes``.

    Raises:
        ConfigError: ``max_decoded`` is neither ``None`` nor a positive int.
    """
    if max_decoded is None:
        return max(DECODED_PER_FETCHED * max_bytes, 16 * 1024 * 1024)
    return _options.integer("max_decoded", max_decoded, at_least=1)


#: The default prefetch bound is this many times ``max_bytes``.
PREFETCH_PER_FETCHED = 16


def prefetch_bytes_bound(max_bytes: int, max_prefetch_bytes: Any) -> int:
    """The prefetch bound: ``max_prefetch_bytes``, or one derived from ``max_bytes``.

    Raises:
        ConfigError: neither ``None`` nor an int >= ``max_bytes``.
    """
    if max_prefetch_bytes is None:
        return max(PREFETCH_PER_FETCHED * max_bytes, 64 * 1024 * 1024)
    return _options.integer("max_prefetch_bytes", max_prefetch_bytes, at_least=max_bytes)


def check_max_records(max_records: Any) -> None:
    """Refuse a ``max_records`` that is neither ``None`` nor a positive int.

    Raises:
        ConfigError: a bad value.
    """
    _options.optional(_options.integer, "max_records", max_records, at_least=1)


class _BaseConsumer(Client):
    """The base of :class:`~kiel.consumer.SingleConsumer` and
    :class:`~kiel.consumer.grouped.GroupedConsumer`.

    Args:
        brokers: bootstrap list, ``["host", "host:port", ...]`` or a
            comma-separated string.
        max_wait_time: seconds a broker may hold a fetch while it has less
            than ``min_bytes`` for it; ``consume()`` returns an empty list
            after about that long when no message arrives.
        min_bytes: bytes a broker waits for before answering a fetch.
        max_bytes: bytes fetched per partition per request.
        max_fetch_size: a message larger than ``max_bytes`` doubles that
            partition's fetch size, up to this cap; a message larger still
            raises :class:`~kiel.exc.MessageTooLargeError`. It must fit in the
            client's ``max_frame_size`` with room for the answer's headers.
        offset_reset: when the broker answers OffsetOutOfRange (the position
            was deleted by retention, or lies past the end): ``"earliest"``,
            ``"latest"``, or ``"raise"`` to raise
            :class:`~kiel.exc.OffsetOutOfRangeError`.
        deserializer: called with each non-null value (``bytes``); its
            result becomes ``Record.value`` (default: raw ``bytes``).
        key_deserializer: the same for keys (default: raw ``bytes``).
        decode_budget: seconds of decoding after which the consumer yields to
            the IOLoop (bounds how long decoding a big fetch stalls the loop).
        max_records: the most records one ``consume()`` returns unless it is
            given its own ``max_records`` (default ``None``: what one round
            decoded, about ``DECODE_RECORDS`` plus one decode slice);
            ``stream()`` takes this many (default ``STREAM_RECORDS``) at a
            time. Records are decoded only as they are handed out; the rest of
            a fetched answer stays raw.
        max_decoded: the most bytes compressed messages decoded at once may
            expand to, every wrapper and nesting level together (default:
            ``DECODED_PER_FETCHED`` times ``max_bytes``, at least 16 MiB); more
            raises :class:`~kiel.exc.CompressionError`.
        max_prefetch_bytes: the most bytes of fetched answers held and asked
            for in flight, all partitions together (default:
            ``PREFETCH_PER_FETCHED`` times ``max_bytes``, at least 64 MiB);
            fetching pauses while they are at the bound. One partition is
            always fetched when nothing is held, so a message up to
            ``max_fetch_size`` still gets through.
        isolation_level: ``"read_uncommitted"`` (default, as every other
            client's: every record, those of open and aborted transactions
            too) or ``"read_committed"``: only records of committed
            transactions (and those outside transactions), none past the
            last stable offset, which :meth:`highwater` and the lag then
            count to. Needs a broker with Fetch v4 (Kafka 0.11+): an older
            one raises :class:`~kiel.exc.UnsupportedFeatureError`.
        **client_options: the :class:`~kiel.client.Client` settings
            (``client_id``, ``connect_timeout``, ``request_timeout``,
            ``retry_backoff``, ``max_backoff``, ``retries``, ...).

    Raises:
        ConfigError: a bad setting.
    """

    @_options.constructor
    def __init__(
        self,
        brokers: Union[str, Sequence[str]],
        *,
        max_wait_time: float = 1.0,
        min_bytes: int = 1,
        max_bytes: int = 1024 * 1024,
        max_fetch_size: int = 16 * 1024 * 1024,
        offset_reset: str = "earliest",
        deserializer: Optional[Deserializer] = None,
        key_deserializer: Optional[Deserializer] = None,
        decode_budget: float = 0.0005,
        max_records: Optional[int] = None,
        max_decoded: Optional[int] = None,
        max_prefetch_bytes: Optional[int] = None,
        isolation_level: str = "read_uncommitted",
        **client_options: "Unpack[ClientOptions]",
    ) -> None:
        _check_fetch_options(
            max_wait_time, min_bytes, max_bytes, max_fetch_size, offset_reset, decode_budget,
            deserializer, key_deserializer, isolation_level,
        )
        check_max_records(max_records)
        super().__init__(brokers, **client_options)
        # A consumer never creates a topic: a misspelt name is UnknownTopicError,
        # not a new empty topic (issue 35).
        self.cluster.auto_create_topics = False
        frame_cap = self.cluster.max_frame_size
        headers = FETCH_ANSWER_OVERHEAD + PARTITION_ANSWER_OVERHEAD + 255
        if max_fetch_size + headers > frame_cap:
            raise ConfigError(
                f"max_fetch_size ({max_fetch_size}) plus {headers} bytes of "
                f"headers must fit max_frame_size ({frame_cap})"
            )
        self.offset_reset = offset_reset
        #: The default bound of one consume() (None: unbounded).
        self.max_records = max_records
        changed = Wakeup()
        #: Outage conditions under way and when a fetch was last answered
        #: (:meth:`healthy`, ``metrics()``).
        self.health = Health(f"{type(self).__name__} {self.cluster.client_id!r}")
        #: The partitions this consumer fetches, and their state.
        self.subscription = Subscription(max_bytes, on_change=changed.fire)
        #: Decodes and deserializes what the fetcher brings.
        self.decoder = Decoder(
            max_fetch_size=max_fetch_size,
            deserializer=deserializer,
            key_deserializer=key_deserializer,
            decode_budget=decode_budget,
            max_decoded=decoded_bytes_bound(max_bytes, max_decoded),
        )
        #: Sends the Fetch requests.
        self.fetcher = Fetcher(
            self.cluster,
            self.subscription,
            self.decoder,
            changed,
            max_wait_time=max_wait_time,
            min_bytes=min_bytes,
            offset_reset=offset_reset,
            max_prefetch_bytes=prefetch_bytes_bound(max_bytes, max_prefetch_bytes),
            health=self.health,
            isolation_level=isolation_level,
        )
        #: ``"read_uncommitted"`` or ``"read_committed"``.
        self.isolation_level = isolation_level
        #: The end (:data:`END`, offset_reset ``"latest"``) is the last
        #: stable offset, as ListOffsets with isolation 1 answers it.
        self._read_committed = isolation_level == "read_committed"
        self._tasks = Tasks(f"kiel-{type(self).__name__}")
        #: Errors met in the background, raised by the next consume(). Each
        #: was logged when it happened; an application that does not call
        #: consume() for a while gets the newest MAX_PENDING_ERRORS.
        self._errors: collections.deque[BaseException] = collections.deque(
            maxlen=MAX_PENDING_ERRORS
        )
        self._closing = False

    async def connect(self) -> None:
        """Load cluster metadata from the bootstrap brokers.

        Raises:
            NoBrokersError: no bootstrap broker answered.
            NotKafkaError: a bootstrap address answered, but not as Kafka.
            UnsupportedFeatureError: ``isolation_level="read_committed"``
                and the broker speaks no Fetch v4 (Kafka 0.8 to 0.10 have
                no transactions); the connections are closed.
        """
        await super().connect()
        if self._read_committed:
            fetch = self.cluster.highest_known(FETCH)
            if fetch is not None and fetch < 4:
                self.cluster.close()
                raise UnsupportedFeatureError(
                    "isolation_level='read_committed' needs a broker with transactions "
                    f"(Fetch v4, Kafka 0.11+); this one speaks Fetch v{fetch}: use "
                    "isolation_level='read_uncommitted'", api="Fetch")

    # ------------------------------------------------------------------
    # handing records out

    def _limit(self, max_records: Optional[int]) -> Optional[int]:
        """The bound of one ``consume()``: its own, else the consumer's.

        Raises:
            ConfigError: a bad ``max_records``.
        """
        check_max_records(max_records)
        return self.max_records if max_records is None else max_records

    @property
    def _stream_records(self) -> int:
        """How many records a ``stream()`` loop takes per round."""
        return self.max_records or STREAM_RECORDS

    @staticmethod
    def _flatten(batches: ConsumedBatches) -> list[ConsumedRecord]:
        """One list: partitions in order, each partition's records in offset order."""
        if len(batches) == 1:
            return next(iter(batches.values()))
        records: list[ConsumedRecord] = []
        for tp in sorted(batches):
            records.extend(batches[tp])
        return records

    async def _stream(
        self, fetch: Callable[[], Awaitable[ConsumedBatches]]
    ) -> AsyncIterator[ConsumedRecord]:
        """Yield the records of ``fetch()`` rounds one at a time, until closed."""
        subscription = self.subscription
        while True:
            try:
                batches = await fetch()
            except ClientClosedError:
                return
            # Strategy: a batch's positions already moved past it in the
            # subscription; each partition's records are on loan to this loop
            # until yielded (the loan hangs off the partition's record).
            # Whatever must stop them (a consume() or seek() while some are
            # not yet yielded, a revocation) takes the loan back: the
            # partition is sought to its first record not yielded, and this
            # loop skips the rest of that partition's batch.
            lent: dict[TopicPartition, tuple[PartitionState, Loan]] = {}
            for tp, records in batches.items():
                st = subscription.get(tp)
                if st is not None:  # always, in the step the batch was drained in
                    lent[tp] = (st, st.lend(records[0].offset))
            for tp in sorted(lent):
                st, loan = lent[tp]
                for record in batches[tp]:
                    if st.loan is not loan:
                        break
                    loan.next = record.offset + 1
                    self._handing_out(tp, record)
                    try:
                        yield record
                    except GeneratorExit:
                        # The loop was left (or its task ended) while it held this one.
                        self._left_holding(tp, record)
                        raise
                    if st.loan is loan:
                        self._handed_out(tp, record)
                if st.loan is loan:
                    st.take_loan()

    def _handing_out(self, tp: TopicPartition, record: ConsumedRecord) -> None:
        """``stream()`` is about to yield ``record`` (a hook for subclasses)."""

    def _handed_out(self, tp: TopicPartition, record: ConsumedRecord) -> None:
        """The ``stream()`` loop asked for the record after ``record`` (a hook)."""

    def _left_holding(self, tp: TopicPartition, record: ConsumedRecord) -> None:
        """The ``stream()`` loop ended while it held ``record`` (a hook)."""

    def _reclaim(self, tps: Optional[Iterable[TopicPartition]] = None) -> None:
        """Take back what ``stream()`` loops have not yielded of ``tps`` (default: all).

        Each such partition is sought back to its first record not yielded.
        """
        subscription = self.subscription
        states = subscription.lent()
        if not states:
            return  # most calls: nothing is on loan (no walk over ``tps``)
        if tps is not None:
            states = [st for st in map(subscription.get, tps) if st is not None]
        for st in states:
            loan = st.take_loan()
            if loan is not None and loan.next < st.position:
                subscription.seek(st.tp, loan.next)

    # ------------------------------------------------------------------
    # positions

    def _tps(self, topic: str, partition: Optional[int]) -> list[TopicPartition]:
        """The partitions a positions call names (all of ``topic``'s for ``None``).

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        raise NotImplementedError

    def _position(self, tp: TopicPartition) -> int:
        st = self.subscription.get(tp)
        return -1 if st is None else st.handed_position

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record to be handed to the application.

        That is the offset after the last record ``consume()`` returned or
        ``stream()`` yielded for the partition (or its start position, before
        any); records fetched ahead are not counted. -1 while the start of a
        grouped consumer's partition is not known yet.

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        (tp,) = self._tps(topic, partition)
        return self._position(tp)

    def highwater(self, topic: str, partition: int) -> Optional[int]:
        """A partition's high watermark (the offset the next message will get)
        as of the latest fetch, or ``None`` before the first one. With
        ``isolation_level="read_committed"``, its last stable offset (the
        first offset of a transaction still open, else the high watermark):
        where this consumer's records end for now.

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        (tp,) = self._tps(topic, partition)
        st = self.subscription.get(tp)
        return None if st is None else st.highwater

    @overload
    def lag(self, topic: str) -> dict[int, Optional[int]]: ...

    @overload
    def lag(self, topic: str, partition: int) -> Optional[int]: ...

    def lag(
        self, topic: str, partition: Optional[int] = None
    ) -> Union[Optional[int], dict[int, Optional[int]]]:
        """Messages between the position and the high watermark.

        Args:
            topic: a topic being consumed.
            partition: one partition, or ``None`` for a dict of all of them.

        Returns:
            the lag (``Optional[int]``, ``None`` before the first fetch), or a
            dict ``{partition: lag}`` when ``partition`` is ``None``.

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        lags: dict[int, Optional[int]] = {}
        for tp in self._tps(topic, partition):
            st = self.subscription.get(tp)
            position = self._position(tp)
            highwater = None if st is None else st.highwater
            lags[tp.partition] = lag_of(highwater, position if position >= 0 else None)
        return lags if partition is None else lags[partition]

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Make ``offset`` the next offset handed out for a partition (see the subclasses)."""
        raise NotImplementedError

    async def _seek_all(self, topic: str, tps: list[TopicPartition], start: Start) -> None:
        """Seek ``tps`` (partitions of ``topic``) to ``start``, through :meth:`seek`.

        Raises:
            ConfigError: a bad ``start``.
            UnknownPartitionError: a dict names a partition not consumed.
            BrokerError, NoBrokersError: the offsets could not be resolved.
        """
        if isinstance(start, dict):
            for p, o in start.items():
                self.seek(topic, int(p), o)
            return
        if isinstance(start, int) and not isinstance(start, bool):
            for tp in tps:
                self.seek(tp.topic, tp.partition, start)
            return
        timestamp = to_timestamp(start)
        offsets = await list_offsets(self.cluster, {tp: timestamp for tp in tps},
                                     read_committed=self._read_committed)
        for tp, offset in offsets.items():
            self.seek(tp.topic, tp.partition, offset)

    # ------------------------------------------------------------------
    # metrics

    def metrics(self) -> ConsumerMetrics:
        """What this consumer fetched and decoded, its errors, lag and requests.

        A snapshot of plain counters (:mod:`kiel.metrics`: cheap to call
        often); the metrics guide says what each field means.

        Returns:
            a :class:`~kiel.metrics.ConsumerMetrics` snapshot.
        """
        return ConsumerMetrics(**self._metric_fields())

    def _metric_fields(self) -> dict[str, Any]:
        """The fields of :class:`~kiel.metrics.ConsumerMetrics`, for subclasses to extend."""
        decoder, fetcher = self.decoder, self.fetcher
        errors = dict(fetcher.errors)
        for name, n in decoder.errors.items():
            errors[name] = errors.get(name, 0) + n
        lag: dict[TopicPartition, Optional[int]] = {}
        subscription = self.subscription
        for tp in subscription.assignment():
            st = subscription.get(tp)
            position = self._position(tp)
            lag[tp] = lag_of(
                None if st is None else st.highwater, position if position >= 0 else None
            )
        health = self.health
        # Read before the health rule: it forgets partitions no longer assigned.
        unhealthy = self.unhealthy()
        now = time.monotonic()
        return {
            **self.cluster.metric_fields(),
            "records_in": fetcher.records_in,
            "bytes_in": fetcher.bytes_in,
            "fetch_errors": errors,
            "lag": lag,
            "decode_seconds": decoder.decode_seconds,
            "decoder_yields": decoder.yields,
            "healthy": unhealthy is None,
            "unhealthy": unhealthy,
            "fetch_partitions": len(self._to_fetch()),
            "last_fetch": health.answered_wall,
            "seconds_since_fetch": (
                None if health.answered_at is None else now - health.answered_at),
            "outage": health.outage,
            "outage_seconds": health.outage_seconds(now),
            "outages": dict(health.started),
        }

    # ------------------------------------------------------------------
    # riding out outages, and the health rule

    def _deadline(self) -> float:
        """When a ``consume()`` round starting now must be over (monotonic):
        its documented wait, ``max_wait_time``."""
        return time.monotonic() + self.fetcher.max_wait_time

    async def _step(self, step: Awaitable[Any], deadline: float, what: str) -> bool:
        """Run ``step`` of a round (metadata, starting a topic) within the round's wait.

        A retriable failure, or a step still waiting at ``deadline`` (a dark
        network: the refresh it waits for goes on in the background), is
        noted in :attr:`health` and retried by the next call.

        Returns:
            whether the step succeeded.

        Raises:
            KielError: a failure that is not retriable.
        """
        try:
            await within(step, max(0.001, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            self.health.failed(RequestTimeoutError(
                f"{what} was not answered within the call's wait "
                f"(max_wait_time={self.fetcher.max_wait_time:g}s)"))
            return False
        except KielError as e:
            if self.health.absorb(e):
                return False
            raise
        return True

    def _to_fetch(self) -> list[TopicPartition]:
        """The partitions the consumer should be fetching: assigned, not
        paused by the application (a subclass hook)."""
        return self.subscription.to_fetch()

    def _observe(self, now: float) -> list[TopicPartition]:
        """Tell :attr:`health` which partitions there are to fetch (each
        round, and each look at the health rule); returns them."""
        partitions = self._to_fetch()
        self.health.keep_only(set(partitions))
        self.health.wanting(len(partitions), now)
        return partitions

    def _stall(self, stall: Optional[float]) -> float:
        """The health rule's ``stall``: given, or the default."""
        if stall is not None:
            return float(_options.real("stall", stall, above=0))
        return max(HEALTH_STALL, 3 * (self.fetcher.max_wait_time + ANSWER_GRACE))

    def healthy(self, stall: Optional[float] = None) -> bool:
        """Whether the consumer is fetching: the health rule, for a ``/health`` endpoint.

        A consumer is *not* healthy when it is closed, or when, for longer
        than ``stall`` seconds:

        * it has partitions to fetch (assigned, or owned by a group member;
          not paused by the application) and no broker answered a fetch
          (fetches stalled: whatever lag the partitions had is growing
          unseen); or
        * an outage condition has lasted (a broker away, a connection lost,
          a leader moving, the coordinator unavailable: what ``consume()``
          rides out, see ``metrics().outage``); or
        * a broker group's coordinator answered no heartbeat (the member is
          out of its group, or rejoining).

        The clock of a stall starts when there is something to fetch, so a
        consumer given partitions a moment ago is not unhealthy yet. An
        application that stops calling ``consume()`` stops fetching too, so
        a consume loop that died shows up here. It is healthy again as soon
        as fetches are answered.

        Args:
            stall: seconds (default: :data:`~kiel.consumer.health.HEALTH_STALL`,
                10, or three fetch rounds of ``max_wait_time`` plus one second
                if longer). Choose it above the longest time your application
                takes over one batch.

        Returns:
            True when healthy.

        Raises:
            ConfigError: ``stall`` is not a positive number.
        """
        return self.unhealthy(stall) is None

    def unhealthy(self, stall: Optional[float] = None) -> Optional[str]:
        """Why :meth:`healthy` is false, for a human (``None`` when healthy).

        Raises:
            ConfigError: ``stall`` is not a positive number.
        """
        limit = self._stall(stall)
        if self.closed or self._closing:
            return "the consumer is closed"
        now = time.monotonic()
        health = self.health
        partitions = self._observe(now)
        stalled = health.stalled_for(now)
        if stalled > limit:
            return (f"no fetch answered for {stalled:.1f} s with {len(partitions)} "
                    f"partition(s) to fetch" + (f" ({health.outage})" if health.outage else ""))
        lasted = health.outage_seconds(now)
        if lasted > limit:
            latest = health.latest()
            return f"{health.outage} for {lasted:.1f} s" + (f": {latest}" if latest else "")
        return None

    # ------------------------------------------------------------------
    # errors and closing

    def _check_open(self) -> None:
        if self.closed or self._closing:
            raise ClientClosedError("the consumer is closed")

    def _raise_pending(self) -> None:
        """Raise the first error kept for the application (once); the retriable
        ones before it (a background commit that met an outage, retried by the
        next commit) go to :attr:`health` instead."""
        errors = self._errors
        while errors:
            error = errors.popleft()
            if not self.health.absorb(error, CLIENT):
                raise error

    async def _leave(self) -> None:
        """What a consumer does first when it closes (a hook for subclasses)."""

    async def close(self) -> None:
        """Stop fetching and close every connection; pending calls raise
        :class:`~kiel.exc.ClientClosedError` and ``stream()`` loops end."""
        if self.closed or self._closing:
            return
        self._closing = True
        try:
            await self._leave()
        finally:
            self.fetcher.close()
            await super().close()
            # With the connections closed, requests in flight end at once;
            # whatever still runs after that is cancelled.
            await self.fetcher.wait_closed(self.cluster.request_timeout)
            await self._tasks.cancel(self.cluster.request_timeout)
