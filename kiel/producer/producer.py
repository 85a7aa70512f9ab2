"""The producer: batches records per partition and sends them to partition leaders.

Flow of one record::

    produce() -> serialize, check size -> pick a partition (routing.py) ->
    append to that partition's open batch (accumulator.py) -> the batch
    closes when full (batch_size) or after linger -> the sender (sender.py)
    groups closed batches by leader: one ProduceRequest per leader covering
    every partition that has batches to send -> response: resolve each
    record's future with (topic, partition, offset), or retry the batch
    (same order, same partition) after a backoff, or fail its futures with
    the typed error.

A record that cannot be batched at once (its topic's metadata is not loaded
yet, or the buffer is full) waits in order in admission.py.

Everything runs on the IOLoop; nothing blocks it. ``produce()`` itself is a
plain function that returns an :class:`asyncio.Future`, so it is cheap to
call many times without awaiting, and the future can be awaited, yielded
from a ``tornado.gen.coroutine``, gathered or given callbacks.
"""

import asyncio
import contextlib
import datetime
import logging
from bisect import bisect_right
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from itertools import accumulate
from operator import add
from typing import TYPE_CHECKING, Any, Optional, Union

from kiel import _options
from kiel import compression as codecs
from kiel._aio import Tasks, within
from kiel._signature import parameters_of
from kiel.client import Client, ClientOptions
from kiel.exc import (
    BufferFullError,
    ClientClosedError,
    ConfigError,
    KielError,
    MessageSizeTooLargeError,
    TransactionStateError,
    UnknownPartitionError,
    UnsupportedFeatureError,
)
from kiel.metrics import ProducerMetrics
from kiel.producer.accumulator import PartitionQueue, RecordAccumulator
from kiel.producer.admission import Admission, PreparedRecord
from kiel.producer.inputs import (
    as_bytes,
    call,
    check_headers,
    check_timestamp,
    many_args,
)
from kiel.producer.outcomes import FlushResult, Outcomes
from kiel.producer.partitioners import Partitioner
from kiel.producer.routing import Router, TopicRoute
from kiel.producer.sender import Sender, unheld
from kiel.producer.settings import (
    check_ack_timeout,
    check_acks,
    check_idempotence,
    check_sizes,
    compression_id,
    linger_seconds,
    make_codec,
    positive_int,
)
from kiel.producer.transactions import (
    DEFAULT_TRANSACTION_TIMEOUT,
    Transactions,
    check_transactional,
)
from kiel.protocol.messages import MESSAGE_OVERHEAD
from kiel.protocol.versions import PRODUCE
from kiel.structs import GroupMetadata, RecordMetadata

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["Producer", "compression_id"]

log = logging.getLogger(__name__)

_Future = asyncio.Future
_MESSAGE_OVERHEAD = MESSAGE_OVERHEAD
#: enqueue() gives the IOLoop a turn after this many records queued without
#: waiting: a loop of ``await producer.enqueue(...)`` that never finds the
#: buffer full would otherwise hold the loop until it does (32 MB of
#: records, a few hundred milliseconds), and no request would go out
#: meanwhile. A thousand records take a millisecond or two.
ENQUEUE_TURN = 1000
_Headers = Optional[Iterable[tuple[str, Optional[bytes]]]]
_Timestamp = Optional[Union[int, datetime.datetime]]


class Producer(Client):
    """Produce records to Kafka topics from Tornado (asyncio) code.

    On a Kafka 0.8 broker each batch travels as a magic-0 message set
    (Produce v0); on a broker that speaks Produce v3 as a record batch, which
    also carries each record's timestamp and headers (see
    :doc:`/guides/current_brokers`).

    Example::

        producer = Producer(["kafka1:9092", "kafka2:9092"], compression="snappy")
        await producer.connect()
        topic, partition, offset = await producer.produce("events", b"hello")
        await producer.close()

    Args:
        brokers: bootstrap list, ``["host", "host:port", ...]`` or a
            comma-separated string.
        required_acks: ``1`` (the leader wrote it), ``-1`` (every in-sync
            replica has it) or ``0`` (do not wait: futures resolve once the
            request is written, with offset -1, and broker errors are never
            seen).
        ack_timeout: seconds the broker may wait for replicas with
            ``required_acks=-1`` before answering RequestTimedOut (a
            retriable error); it must be shorter than ``request_timeout``.
            Default: half of ``request_timeout``.
        compression: ``None``/``"none"``, ``"gzip"``, ``"snappy"`` or
            ``"lz4"`` (0.8.2+ brokers; framed for magic 0); each batch is
            compressed once into one wrapper message.
        gzip_level: deflate level for gzip, 1 to 9 (default 6: several
            times faster than 9 for output a few percent larger).
        batch_size: a partition's batch closes when its records reach this
            many bytes (a larger record travels alone); at most
            ``max_request_size``.
        linger: seconds a batch that is not full may wait for more records.
            0 (the default) sends on the next IOLoop iteration, which still
            batches everything produced in the same callback and everything
            produced while the partition's previous request is in flight.
        linger_ms: deprecated: ``linger`` in milliseconds (a
            :class:`DeprecationWarning`; giving both is a
            :class:`~kiel.exc.ConfigError`).
        max_request_size: largest sum of batches sent for one partition in one
            request (several closed batches of a partition go together); at
            least ``max_message_size``, and below 2 GiB (a frame's size is an
            int32).
        max_message_size: a record whose encoded message (key + value +
            :data:`~kiel.protocol.messages.MESSAGE_OVERHEAD` bytes) is larger
            is refused by :meth:`produce`; match the broker's
            ``message.max.bytes``.
        max_pending_bytes: bytes of every record the producer holds (batched,
            or waiting for its topic's metadata) and that is not yet
            acknowledged or failed, at most: past it :meth:`produce` raises
            :class:`~kiel.exc.BufferFullError` and :meth:`enqueue` waits
            for room. At least one record
            (:data:`~kiel.protocol.messages.MESSAGE_OVERHEAD` bytes).
        buffer_timeout: seconds :meth:`enqueue` may wait for room before it
            raises :class:`~kiel.exc.BufferFullError`; ``None`` waits as
            long as it takes.
        partitioner: ``partitioner(key, partitions) -> partition``; the
            default hashes keys as the Java client does (murmur2) and spreads
            unkeyed records round-robin over partitions that have a leader.
        key_maker: ``key_maker(value) -> key``, called with the value (before
            serialization) when :meth:`produce` gets no key.
        serializer: ``serializer(value) -> bytes`` for values; without one,
            values must be ``bytes`` (or ``bytearray``/``memoryview``) or
            ``None``.
        key_serializer: the same for keys.
        allow_auto_create_topics: ``True`` (the default) leaves it to the
            broker whether a topic the producer names and the cluster lacks
            is created (``auto.create.topics.enable``); ``False`` asks it not
            to (Metadata v4, Kafka 0.11+; an older broker is asked for every
            topic instead), and producing to a topic that does not exist
            fails with :class:`~kiel.exc.UnknownTopicError`.
        client_id: sent in request headers.
        connect_timeout: seconds per connection attempt.
        request_timeout: seconds to wait for each response; a broker that
            does not answer in time fails the attempt with
            :class:`~kiel.exc.RequestTimeoutError` (retriable) and its
            connection is closed.
        metadata_max_age: refresh metadata at least this often (seconds).
        retry_backoff: first retry delay (seconds), doubling up to
            ``max_backoff``, jittered.
        max_backoff: largest retry delay (seconds).
        retries: how many times a batch is retried after a retriable error
            (leader moved, connection lost, timeout...) before its records
            fail with that error.
        idempotent: ``None`` (the default): idempotent where the broker
            serves InitProducerId (Kafka 2.4+, Tansu) and
            ``required_acks=-1``; off on a Kafka 0.8 broker, and off (said
            once at INFO) when ``required_acks`` is 0 or 1 or
            ``max_batches_in_flight`` is above 5. ``True``: idempotent or
            an error (a :class:`~kiel.exc.ConfigError` here with other acks
            or more than 5 batches in flight, an
            :class:`~kiel.exc.UnsupportedFeatureError` from :meth:`connect`
            on a broker without InitProducerId). ``False``: off. An
            idempotent producer numbers its batches so that a batch sent
            again after a lost answer is not written twice: see
            :doc:`/guides/producer` ("Delivery guarantees").
        max_batches_in_flight: batches of one partition sent and not yet
            answered, at most: default 5 when idempotent (one batch per
            partition per request, order kept over retries), else 1 (one
            request per partition in flight, carrying as many of its batches
            as fit in ``max_request_size``).
        ssl_context: an ``ssl.SSLContext`` for TLS (``ssl_options``: its
            deprecated name).
        sasl_mechanism, sasl_username, sasl_password: SASL authentication
            (see :class:`~kiel.client.Client`).
        transactional_id: makes the producer transactional (see
            :doc:`/guides/transactions`): it produces only inside
            transactions (:meth:`begin_transaction`,
            :meth:`commit_transaction`, :meth:`abort_transaction`,
            ``async with producer.transaction()``), and :meth:`connect`
            fences older producers with the same id. A non-empty str; it
            needs idempotence (not ``idempotent=False``) and
            ``required_acks=-1``.
        transaction_timeout: seconds a transaction may stay open (default
            60, above 0 and at most 900, Kafka's default maximum): sent to
            the broker with InitProducerId, and kiel's own bound: past it
            the producer aborts the transaction and
            :meth:`commit_transaction` raises
            :class:`~kiel.exc.TransactionTimeoutError`.

    Raises:
        ConfigError: a bad setting.
        MissingDependencyError: snappy or lz4 compression without cramjam.
    """

    @_options.constructor
    def __init__(
        self,
        brokers: Union[str, Sequence[str]],
        *,
        required_acks: int = -1,
        ack_timeout: Optional[float] = None,
        compression: Optional[str] = None,
        gzip_level: int = codecs.DEFAULT_GZIP_LEVEL,
        batch_size: int = 16384,
        linger: Optional[float] = None,
        linger_ms: Optional[float] = None,
        max_request_size: int = 1048576,
        max_message_size: int = 1000000,
        max_pending_bytes: int = 32 * 1024 * 1024,
        buffer_timeout: Optional[float] = None,
        partitioner: Optional[Partitioner] = None,
        key_maker: Optional[Callable[[Any], Any]] = None,
        serializer: Optional[Callable[[Any], bytes]] = None,
        key_serializer: Optional[Callable[[Any], bytes]] = None,
        allow_auto_create_topics: bool = True,
        idempotent: Optional[bool] = None,
        max_batches_in_flight: Optional[int] = None,
        transactional_id: Optional[str] = None,
        transaction_timeout: float = DEFAULT_TRANSACTION_TIMEOUT,
        **client_options: "Unpack[ClientOptions]",
    ) -> None:
        super().__init__(brokers, **client_options)
        idempotent, transaction_timeout = check_transactional(
            transactional_id, transaction_timeout, idempotent, required_acks,
            max_batches_in_flight)
        self.cluster.auto_create_topics = _options.flag("allow_auto_create_topics",
                                                        allow_auto_create_topics)
        request_timeout = self.cluster.request_timeout
        self.required_acks = check_acks(required_acks)
        self._idempotence, in_flight, self._plain_in_flight = check_idempotence(
            idempotent, self.required_acks, max_batches_in_flight)
        self._in_flight = in_flight
        self.ack_timeout = check_ack_timeout(ack_timeout, required_acks, request_timeout)
        self.batch_size = positive_int("batch_size", batch_size)
        self.max_request_size = positive_int("max_request_size", max_request_size)
        self.max_message_size = positive_int("max_message_size", max_message_size)
        self.max_pending_bytes = positive_int("max_pending_bytes", max_pending_bytes)
        check_sizes(self.batch_size, self.max_request_size, self.max_message_size,
                     self.max_pending_bytes)
        self.linger = linger_seconds(linger, linger_ms)
        self.buffer_timeout = _options.optional(_options.real, "buffer_timeout", buffer_timeout,
                                               at_least=0)
        for name, func in (
            ("partitioner", partitioner),
            ("key_maker", key_maker),
            ("serializer", serializer),
            ("key_serializer", key_serializer),
        ):
            if func is not None and not callable(func):
                raise ConfigError(f"{name} must be callable, got {func!r}")
        self.key_maker = key_maker
        self.serializer = serializer
        self.key_serializer = key_serializer
        # The inlined fast path of produce() applies without these (and to
        # keyed records without a key_serializer).
        self._plain = not (partitioner or key_maker or serializer)
        self._plain_keys = self._plain and key_serializer is None
        self.codec_id = compression_id(compression)
        self.gzip_level = _options.integer("gzip_level", gzip_level, at_least=1, most=9)
        self.codec = make_codec(self.codec_id, self.gzip_level)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._closing = False
        #: records enqueue() queued since it last gave the loop a turn
        self._since_turn = 0
        self._wire(partitioner, request_timeout)
        self._txn = None if transactional_id is None else self._transactions(
            transactional_id, transaction_timeout)

    def _wire(self, partitioner: Optional[Partitioner], request_timeout: float) -> None:
        """Make the parts: accumulator, router, sender, admission."""
        self._tasks = Tasks("kiel-producer")
        self._outcomes = Outcomes()
        self._accumulator = accumulator = RecordAccumulator(
            batch_size=self.batch_size,
            linger=self.linger,
            max_request_size=self.max_request_size,
            max_pending_bytes=self.max_pending_bytes,
            codec=self.codec,
            clock=lambda: asyncio.get_running_loop().time(),
            codec_id=self.codec_id,
            compresslevel=self.gzip_level if self.codec_id == codecs.GZIP else None,
            max_in_flight=self._in_flight,
            # Produce v3+ carries one record batch per partition (Apache
            # Kafka and noida-db refuse more): closed batches of a partition
            # go joined into one, with or without idempotence.
            one_batch=True,
            # Futures nobody holds, dropped when their batch closes: see
            # RecordAccumulator._release.
            unheld=unheld,
        )
        self._router = Router(self.cluster, accumulator, partitioner)
        self.partitioner: Partitioner = self._router.partitioner
        self._routes = self._router.routes
        self._sender = Sender(
            self.cluster,
            accumulator,
            required_acks=self.required_acks,
            ack_timeout=self.ack_timeout,
            request_timeout=request_timeout,
            topics=lambda: self._routes,
            settled=lambda: self._admission.freed(),
            closed=lambda: self.closed,
            tasks=self._tasks,
            outcomes=self._outcomes,
            idempotence=self._idempotence,
            in_flight_without=self._plain_in_flight,
        )
        self._admission = Admission(
            cluster=self.cluster,
            router=self._router,
            accumulator=accumulator,
            place=self._append,
            expedite=lambda: self._sender.wake(force=True),
            tasks=self._tasks,
            buffer_timeout=self.buffer_timeout,
            outcomes=self._outcomes,
        )
        self._parked = self._admission.parked

    # ------------------------------------------------------------------
    # public API

    async def connect(self) -> None:
        """Load cluster metadata from the bootstrap brokers and, unless
        idempotence is off, get the producer id and epoch (InitProducerId).

        Raises:
            NoBrokersError: no bootstrap broker answered within the retries.
            UnsupportedFeatureError: ``idempotent=True`` and the broker does
                not serve InitProducerId (a Kafka 0.8 broker).
            BrokerError: the broker refused InitProducerId (e.g.
                :class:`~kiel.exc.ClusterAuthorizationFailedError`).
            ProducerFencedError: (transactional) the coordinator refused
                the transactional id's epoch; the producer is unusable.

        A transactional producer's InitProducerId carries its
        ``transactional_id`` and goes to that id's transaction coordinator:
        an older producer with the same id is fenced, and a transaction it
        left open is aborted.
        """
        await super().connect()
        idem = self._idempotence
        if idem is not None and not idem.ready:
            await self._sender.identity()

    @property
    def max_batches_in_flight(self) -> int:
        """Batches of one partition in flight at most: 5 by default while
        idempotence is on or undecided, 1 once it is off (unless set)."""
        return self._accumulator.max_in_flight

    @property
    def idempotent(self) -> Optional[bool]:
        """Whether the producer numbers its batches: ``None`` until a broker
        was asked (by :meth:`connect` or the first batch)."""
        idem = self._idempotence
        return False if idem is None else idem.enabled

    @property
    def producer_id(self) -> int:
        """The idempotent producer's id, -1 before it has one (or when off)."""
        idem = self._idempotence
        return -1 if idem is None else idem.producer_id

    @property
    def producer_epoch(self) -> int:
        """The idempotent producer's epoch, -1 before it has one (or when off)."""
        idem = self._idempotence
        return -1 if idem is None else idem.producer_epoch

    @property
    def pending_bytes(self) -> int:
        """Bytes of records produced and not yet acknowledged or failed
        (batched or waiting for their topic's metadata): at most
        ``max_pending_bytes``."""
        return self._admission.held_bytes

    @property
    def pending_records(self) -> int:
        """Records produced and not yet acknowledged or failed (parked ones included)."""
        return self._accumulator.pending_records + len(self._parked)

    def metrics(self) -> ProducerMetrics:
        """What this producer sent, failed and holds, and its requests.

        Cheap to call often: see :mod:`kiel.metrics` for how it counts, and
        :mod:`kiel.metrics_prometheus` to export it.

        Returns:
            a :class:`~kiel.metrics.ProducerMetrics` snapshot.
        """
        sender = self._sender
        return ProducerMetrics(
            **self.cluster.metric_fields(),
            records_out=sender.records_out,
            bytes_out=sender.bytes_out,
            batches_out=sender.batches_out,
            records_failed=self._outcomes.failed_total,
            errors=dict(sender.errors),
            pending_records=self.pending_records,
            pending_bytes=self.pending_bytes,
        )

    def produce(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: Optional[int] = None,
        *,
        headers: Optional[Iterable[tuple[str, Optional[bytes]]]] = None,
        timestamp: Optional[Union[int, datetime.datetime]] = None,
    ) -> "asyncio.Future[RecordMetadata]":
        """Queue one record; the returned future resolves once it is acknowledged.

        This is a plain function: it never blocks and never waits. When the
        topic's metadata is not loaded yet, the record waits, in order,
        before it is batched; its future covers that wait too. Every record
        held (batched or waiting) counts against ``max_pending_bytes``: a
        record that does not fit is refused at once with
        :class:`~kiel.exc.BufferFullError`, so memory stays bounded however
        long a broker is away. Use :meth:`enqueue` in a loop that should
        itself slow down instead.

        Records of one partition are written in the order :meth:`produce`
        was called, retries included (unless idempotence is off and
        ``max_batches_in_flight`` is above 1); an idempotent producer writes
        each once, however often its batch was sent.

        Args:
            topic: the topic.
            value: ``bytes`` (or ``bytearray``/``memoryview``, copied), or
                ``None`` for a null value; anything when a ``serializer`` is
                set (``None`` is never serialized).
            key: the key, likewise (``key_serializer``); when ``None`` and a
                ``key_maker`` is set, ``key_maker(value)`` makes it.
            partition: write to this partition instead of asking the
                partitioner.
            headers: ``(key, value)`` pairs, ``str`` keys and ``bytes`` (or
                ``None``) values, kept in order; needs a broker that speaks
                Produce v3 (Kafka 0.11+).
            timestamp: the record's CreateTime, epoch milliseconds or a
                ``datetime`` (naive means UTC); default: when its batch
                opened. Needs Produce v3 like ``headers``.

        Returns:
            a future of :class:`~kiel.structs.RecordMetadata` ``(topic,
            partition, offset)``; ``offset`` is -1 with ``required_acks=0``,
            and when an idempotent producer's retry was answered
            DUPLICATE_SEQUENCE_NUMBER (the broker wrote the record before
            and does not say where: Tansu).
            The future fails with the typed error that stopped the record: a
            :class:`~kiel.exc.BrokerError` subclass (e.g.
            ``MessageSizeTooLargeError``, ``NotLeaderForPartitionError`` once
            retries ran out), :class:`~kiel.exc.UnknownTopicError`,
            :class:`~kiel.exc.UnknownPartitionError`,
            :class:`~kiel.exc.RequestTimeoutError`,
            :class:`~kiel.exc.KielConnectionError`,
            :class:`~kiel.exc.DeliveryUnknownError` (a request carrying it
            was sent and never answered: maybe written),
            :class:`~kiel.exc.NoBrokersError`. Cancelling it does not
            withdraw a record that is already batched.

        Raises:
            BufferFullError: the records held and this one would pass
                ``max_pending_bytes``; nothing was queued.
            ClientClosedError: the producer is closing or closed.
            SerializationError: the value or key is not bytes (and no
                serializer is set), or the serializer failed.
            MessageSizeTooLargeError: the encoded message is larger than
                ``max_message_size``; nothing was sent.
            ConfigError: ``topic`` is not a non-empty string,
                ``partition`` is not a non-negative int, or ``headers`` or
                ``timestamp`` are malformed.
            UnsupportedFeatureError: ``headers`` or ``timestamp`` for a
                cluster known to speak only Produce v0 (Kafka 0.8); where
                that is only found out when the batch is sent, the record's
                future fails with it. Never dropped silently.
            RuntimeError: called with no running event loop.
        """
        # Strategy: one inlined path for the common record (bytes value,
        # bytes key or no key, the default partitioner's choice or a
        # partition named, room in the buffer, metadata loaded): about a
        # microsecond. Everything else takes the general path below, which
        # also says why a record is refused.
        if self._txn is not None and not self._txn.open:
            self._txn.refuse(topic)  # raises: outside a transaction
        if headers is None and timestamp is None and self._plain and type(value) is bytes:
            route = self._routes.get(topic)
            if (
                route is not None
                and route.snapshot is self.cluster.partitions.get(topic)
                and not self._parked
                and not self._closing
            ):
                queue: Optional[PartitionQueue]
                if key is None:
                    size = MESSAGE_OVERHEAD + len(value)
                    if partition is None:
                        rr = route.rr_queues
                        index = route.rr % len(rr)
                        queue = rr[index] or route.rr_queue(index)
                        route.rr += 1
                    else:
                        # type(): True is not partition 1. A partition the
                        # route has no queue for yet: the general path.
                        queue = route.queues.get(partition) if type(partition) is int else None
                elif type(key) is bytes and self._plain_keys:
                    size = MESSAGE_OVERHEAD + len(value) + len(key)
                    if partition is None:
                        queue = route.by_key.get(key) or self._router.keyed(route, key)
                    else:
                        queue = route.queues.get(partition) if type(partition) is int else None
                else:
                    queue = None
                accumulator = self._accumulator
                if (
                    queue is not None
                    and size <= self.max_message_size
                    and accumulator.pending_bytes + size <= self.max_pending_bytes
                ):
                    future: asyncio.Future[RecordMetadata] = _Future(loop=self._loop)
                    batch = queue.open
                    if batch is not None and batch.size + size <= accumulator.batch_size:
                        # RecordAccumulator.append for a record that fits the
                        # open batch, inlined: most records.
                        keys = batch.keys
                        if keys is not None:
                            keys.append(key)
                        elif key is not None:
                            batch.keys = [None] * len(batch.values)
                            batch.keys.append(key)
                        batch.values.append(value)
                        batch.payloads.append(future)
                        batch.size += size
                        accumulator.pending_bytes += size
                        return future
                    due = accumulator.append(queue, key, value, size, future)
                    if due is not None:
                        self._sender.wake_at(due)
                    return future
        return self._submit(self._prepare(
            topic, value, key, partition, headers=headers, timestamp=timestamp))

    @parameters_of(produce)
    async def enqueue(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: Optional[int] = None,
        *,
        headers: Optional[Iterable[tuple[str, Optional[bytes]]]] = None,
        timestamp: Optional[Union[int, datetime.datetime]] = None,
    ) -> "asyncio.Future[RecordMetadata]":
        """Wait for room in the buffer, then :meth:`produce`.

        The back-pressured form for loops that produce many records::

            for v in values:
                await producer.enqueue("events", v)
            report = await producer.flush()

        (Keep a future only when you will look at it: one nobody holds when
        its batch closes is let go, and its record counted by
        :meth:`flush`; 200,000 futures kept cost the garbage collector
        more than producing them.)

        When there is room it queues the record at once, as :meth:`produce`
        does, and every :data:`ENQUEUE_TURN` (1000) records so queued it
        gives the IOLoop a turn, after queueing: such a loop leaves the
        loop free to send the records and serve other work, without a
        ``sleep(0)`` of its own.

        Args:
            topic: as for :meth:`produce`.
            value: as for :meth:`produce`.
            key: as for :meth:`produce`.
            partition: as for :meth:`produce`.
            headers: as for :meth:`produce`.
            timestamp: as for :meth:`produce`.

        Returns:
            the record's future, as :meth:`produce` returns it (awaiting it
            waits for the acknowledgement).

        Raises:
            BufferFullError: no room within ``buffer_timeout``.
            ClientClosedError: the producer is closing or closed.
            SerializationError: as for :meth:`produce`.
            MessageSizeTooLargeError: as for :meth:`produce`.
            ConfigError: as for :meth:`produce`.
            UnsupportedFeatureError: as for :meth:`produce`.
        """
        # Strategy: room in the buffer is the common case, and then
        # enqueue() is produce(). First produce()'s inlined path, written out
        # here again (a call less per record, about 0.1 us: enqueue() is the
        # loop the guide teaches); test_producer_fast_paths.py checks both
        # paths queue the same records the same way.
        if self._txn is not None and not self._txn.open:
            self._txn.refuse(topic)  # raises: outside a transaction
        if headers is None and timestamp is None and self._plain and type(value) is bytes:
            route = self._routes.get(topic)
            if (
                route is not None
                and route.snapshot is self.cluster.partitions.get(topic)
                and not self._parked
                and not self._closing
            ):
                queue: Optional[PartitionQueue]
                if key is None:
                    size = MESSAGE_OVERHEAD + len(value)
                    if partition is None:
                        rr = route.rr_queues
                        index = route.rr % len(rr)
                        queue = rr[index] or route.rr_queue(index)
                        route.rr += 1
                    else:
                        # type(): True is not partition 1. A partition the
                        # route has no queue for yet: the general path.
                        queue = route.queues.get(partition) if type(partition) is int else None
                elif type(key) is bytes and self._plain_keys:
                    size = MESSAGE_OVERHEAD + len(value) + len(key)
                    if partition is None:
                        queue = route.by_key.get(key) or self._router.keyed(route, key)
                    else:
                        queue = route.queues.get(partition) if type(partition) is int else None
                else:
                    queue = None
                accumulator = self._accumulator
                if (
                    queue is not None
                    and size <= self.max_message_size
                    and accumulator.pending_bytes + size <= self.max_pending_bytes
                ):
                    future: asyncio.Future[RecordMetadata] = _Future(loop=self._loop)
                    batch = queue.open
                    if batch is not None and batch.size + size <= accumulator.batch_size:
                        # As in produce().
                        keys = batch.keys
                        if keys is not None:
                            keys.append(key)
                        elif key is not None:
                            batch.keys = [None] * len(batch.values)
                            batch.keys.append(key)
                        batch.values.append(value)
                        batch.payloads.append(future)
                        batch.size += size
                        accumulator.pending_bytes += size
                    else:
                        due = accumulator.append(queue, key, value, size, future)
                        if due is not None:
                            self._sender.wake_at(due)
                    self._since_turn += 1
                    if self._since_turn >= ENQUEUE_TURN:
                        self._since_turn = 0
                        await asyncio.sleep(0)
                    return future
        if not self._parked and self._plain_keys:
            # Then produce() itself, for records its inlined path does not
            # take (headers, say), rather than a record prepared and
            # submitted here. Without a serializer, key maker or
            # partitioner nothing of the application's runs there, so a
            # record refused for want of room is prepared again below.
            # (Parameters written out, not *args: a tuple and a dict less
            # per record.)
            try:
                if headers is None and timestamp is None:
                    future = self.produce(topic, value, key, partition)
                else:
                    future = self.produce(topic, value, key, partition, headers=headers,
                                          timestamp=timestamp)
            except BufferFullError:
                pass
            else:
                self._since_turn += 1
                if self._since_turn >= ENQUEUE_TURN:
                    # The record is queued: the turn changes nothing of it.
                    self._since_turn = 0
                    await asyncio.sleep(0)
                return future
        record = self._prepare(topic, value, key, partition, headers=headers,
                               timestamp=timestamp)
        if self._parked or not self._accumulator.has_room(record.size):
            await self._admission.wait_for_room(record.topic, record.size)
            if self._closing:
                raise ClientClosedError("the producer is closed", topic=record.topic)
        return self._submit(record)

    def produce_many(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        keys: Optional[Iterable[Any]] = None,
        partition: Optional[int] = None,
    ) -> int:
        """Queue many records at once, without a future each: the fastest
        way to produce, for callers who only need :meth:`flush`'s report.

        Each record goes where :meth:`produce` would send it (round-robin
        for unkeyed records, the partitioner for keyed ones), in order. What
        happens to it is counted by the next :meth:`flush` (or listed there,
        with ``future=None``, when it fails): nothing fails silently::

            producer.produce_many("events", values)
            result = await producer.flush()
            if result.failed:
                for failure in result.failures:
                    log.error("not written to %s: %s", failure.topic, failure.error)

        All or nothing: every record is checked first, and when one is
        refused, or they do not all fit in the buffer, none is queued.

        Args:
            topic: the topic.
            values: the values, as :meth:`produce` takes them (a list or
                tuple is used as it is; another iterable is read first).
            keys: a key per value (as many as values), or ``None`` for
                unkeyed records (the fast path: values of type ``bytes``,
                no ``key_maker``, ``serializer`` or custom ``partitioner``).
            partition: write every record to this partition.

        Returns:
            how many records were queued.

        Raises:
            BufferFullError: the records do not fit under
                ``max_pending_bytes`` with those held (nothing was queued:
                use :meth:`enqueue_many`, which waits, or smaller slices).
            ConfigError: ``values`` or ``keys`` is a ``str``/bytes-like
                object rather than a collection of them, ``keys`` has
                another length, or as for :meth:`produce`.
            ClientClosedError: as for :meth:`produce`.
            SerializationError: as for :meth:`produce`.
            MessageSizeTooLargeError: as for :meth:`produce`.
            RuntimeError: called with no running event loop.
        """
        values, given_keys = many_args(topic, values, keys)
        if self._txn is not None and not self._txn.open:
            self._txn.refuse(topic)  # raises: outside a transaction
        if not values:
            return 0
        if self._plain and not self._closing:
            if given_keys is None:
                queued = self._produce_plain(topic, values, partition)
            elif self._plain_keys and partition is None:
                queued = self._produce_keyed(topic, values, given_keys)
            else:
                queued = 0
            if queued:
                return queued
        key_list: list[Any] = [None] * len(values) if given_keys is None else given_keys
        prepare = self._prepare
        records = [prepare(topic, value, key, partition) for value, key in zip(values, key_list)]
        self._check_room(topic, sum(record.size for record in records), len(records))
        place = self._place_bare
        for record in records:
            place(record)
        return len(records)

    def _produce_plain(self, topic: str, values: list[Any],
                       partition: Optional[int] = None) -> int:
        """:meth:`produce_many`'s fast path: unkeyed ``bytes`` values of a
        topic whose metadata is loaded, nothing parked, to ``partition``
        (one the route has a queue for) or round-robin; returns 0 when it
        does not apply (the general path then checks and queues them)."""
        route = self._fast_route(topic, values)
        if route is None:
            return 0
        queue = None
        if partition is not None:
            # type(): True is not partition 1; a partition without a queue
            # yet (or not the topic's): the general path.
            queue = route.queues.get(partition) if type(partition) is int else None
            if queue is None:
                return 0
        # Strategy: the checks, the sizes and the split over partitions are
        # C-level passes over the list (map, sum, slices), not a step per record.
        sizes = list(map(_MESSAGE_OVERHEAD.__add__, map(len, values)))
        if not self._fast_room(topic, sizes):
            return 0
        if queue is not None:
            due = self._accumulator.extend(queue, values, sizes)
            if due is not None:
                self._sender.wake_at(due)
            return len(values)
        rr = route.rr_queues
        count, start, n = len(rr), route.rr, len(values)
        route.rr += n
        accumulator, wake_at = self._accumulator, self._sender.wake_at
        for j in range(min(count, n)):
            # Record i goes to rr[(start + i) % count], as produce() sends it.
            index = (start + j) % count
            due = accumulator.extend(rr[index] or route.rr_queue(index), values[j::count],
                                     sizes[j::count])
            if due is not None:
                wake_at(due)
        return n

    def _produce_keyed(self, topic: str, values: list[Any], keys: list[Any]) -> int:
        """:meth:`produce_many`'s fast path for ``bytes`` values with
        ``bytes`` keys under the default partitioner (each record to its
        key's partition, found through the route's key cache); returns 0
        when it does not apply, as :meth:`_produce_plain` does."""
        route = self._fast_route(topic, values, keys)
        if route is None:
            return 0
        sizes = list(map(_MESSAGE_OVERHEAD.__add__, map(add, map(len, values), map(len, keys))))
        if not self._fast_room(topic, sizes):
            return 0
        by_key, keyed = route.by_key, self._router.keyed
        append, wake_at = self._accumulator.append, self._sender.wake_at
        for key, value, size in zip(keys, values, sizes):
            due = append(by_key.get(key) or keyed(route, key), key, value, size, None)
            if due is not None:
                wake_at(due)
        return len(values)

    def _fast_route(self, topic: str, *columns: list[Any]) -> Optional[TopicRoute]:
        """The topic's route when :meth:`produce_many`'s fast paths apply
        (its metadata loaded and current, nothing parked, every item of
        ``columns`` ``bytes``), else ``None``."""
        route = self._routes.get(topic)
        if (
            route is None
            or route.snapshot is not self.cluster.partitions.get(topic)
            or self._parked
            or any(set(map(type, column)) != {bytes} for column in columns)
        ):
            return None
        return route

    def _fast_room(self, topic: str, sizes: list[int]) -> bool:
        """Whether records of ``sizes`` may take a fast path: ``False`` when
        one is too large (the general path then says which).

        Raises:
            BufferFullError: they do not fit in the buffer together.
        """
        if max(sizes) > self.max_message_size:
            return False
        self._check_room(topic, sum(sizes), len(sizes))
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return True

    async def enqueue_many(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        keys: Optional[Iterable[Any]] = None,
        partition: Optional[int] = None,
    ) -> int:
        """:meth:`produce_many`, waiting for room in the buffer instead of
        raising :class:`~kiel.exc.BufferFullError`: the records go in
        slices of about an eighth of ``max_pending_bytes`` (one record at
        least), each queued as soon as it fits.

        Args:
            topic: as for :meth:`produce_many`.
            values: as for :meth:`produce_many`.
            keys: as for :meth:`produce_many`.
            partition: as for :meth:`produce_many`.

        Returns:
            how many records were queued (all of them).

        Raises:
            BufferFullError: no room within ``buffer_timeout``.
            ConfigError: as for :meth:`produce_many`.
            ClientClosedError: as for :meth:`produce`.
            SerializationError: as for :meth:`produce`.
            MessageSizeTooLargeError: as for :meth:`produce`.

        When a slice is refused, the slices before it stay queued (the next
        :meth:`flush` reports them).
        """
        values, key_list = many_args(topic, values, keys)
        try:
            total = list(accumulate(map(_MESSAGE_OVERHEAD.__add__, map(len, values)),
                                    initial=0))
        except TypeError:  # values for a serializer (or None): counted by their overhead
            total = [MESSAGE_OVERHEAD * i for i in range(len(values) + 1)]
        slice_bytes = max(1, self.max_pending_bytes // 8)
        i, n = 0, len(values)
        while i < n:
            j = max(bisect_right(total, total[i] + slice_bytes, i + 1) - 1, i + 1)
            size = total[j] - total[i]
            if self._parked or not self._admission.has_room(size):
                await self._admission.wait_for_room(topic, size)
                if self._closing:
                    raise ClientClosedError("the producer is closed", topic=topic)
            self.produce_many(topic, values[i:j], partition=partition,
                              keys=None if key_list is None else key_list[i:j])
            i = j
        return n

    async def flush(self) -> FlushResult:
        """Send everything produced so far now, wait until each record is
        acknowledged or has failed, and report what happened since the
        previous report.

        Batches are sent without waiting for ``linger``. Failures are not
        raised here: they are on each record's future, and listed in the
        result. Waiting for many records this way costs next to nothing,
        where awaiting (or gathering) a future per record costs more than
        producing it::

            for value in values:
                producer.produce("events", value)   # futures not kept
            result = await producer.flush()
            if result.failed:
                for failure in result.failures:
                    log.error("not written to %s: %s", failure.topic, failure.error)

        Returns:
            a :class:`~kiel.producer.outcomes.FlushResult`: how many records
            were delivered and which failed since the previous ``flush()``
            returned (records of every caller, including records produced
            while this call waited), the failed ones the broker may have
            written counted apart (``unknown``); at most
            :data:`~kiel.producer.outcomes.MAX_LISTED_FAILURES` failures are
            listed, all are counted. A cancelled ``flush()`` reports
            nothing; the next one reports its records.
        """
        await self._settle_all()
        return self._outcomes.take()

    async def _settle_all(self) -> None:
        """Wait until every record produced so far is settled (sent now, without linger)."""
        if self._loop is None:
            return
        accumulator = self._accumulator
        accumulator.begin_flush()
        try:
            # Strategy: no callback per record. First wait until every record
            # parked before this call has left the queue (it is FIFO), then
            # for the batches that exist at that point, which hold every
            # record admitted so far (batches complete in any order; the
            # oldest unfinished one tells).
            await self._admission.wait_admitted()
            target = accumulator.last_seq
            self._sender.wake()
            oldest = accumulator.oldest_unfinished()
            while oldest is not None and oldest <= target:
                await self._admission.progress.wait()
                oldest = accumulator.oldest_unfinished()
        finally:
            accumulator.end_flush()

    async def close(self, timeout: Optional[float] = None) -> None:
        """Flush, then close every connection.

        Records produced before ``close()`` are delivered (or fail with
        their error) first; :meth:`produce` after it raises
        :class:`~kiel.exc.ClientClosedError`. Closing twice is harmless.

        When the flush is cut short (``timeout`` passed, or the task running
        ``close()`` was cancelled, e.g. by ``asyncio.wait_for``), the records
        left fail: those in a request that is out and unanswered with
        :class:`~kiel.exc.DeliveryUnknownError` (the broker may have written
        them), the others with :class:`~kiel.exc.ClientClosedError` (they
        were not written).

        Args:
            timeout: seconds the flush may take, at most; ``None`` (the
                default) waits until every record is settled, which takes at
                most about ``(retries + 1) * request_timeout`` plus backoffs.

        Raises:
            ConfigError: ``timeout`` is not ``None`` or a number >= 0.
        """
        if timeout is not None and (
            not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0
        ):
            raise ConfigError(f"timeout must be None or seconds >= 0, got {timeout!r}")
        if self.closed:
            return
        if self._txn is not None:  # an open transaction is aborted, bounded
            await self._txn.close(timeout)
        self._closing = True
        try:
            # Not flush(): the report stays for a flush() after close().
            if timeout is None:
                await self._settle_all()
            else:
                try:
                    await within(self._settle_all(), timeout)
                except asyncio.TimeoutError:
                    pass  # not an error of close(): what is left fails below
        finally:
            # Whatever is left (after a complete flush, nothing) fails.
            error = ClientClosedError("the producer closed before the record was sent")
            await self._admission.fail_all(error)
            await self._sender.stop(error)
            await super().close()

    # ------------------------------------------------------------------
    # record intake

    def _prepare(
        self, topic: str, value: Any, key: Any = None, partition: Optional[int] = None, *,
        headers: _Headers = None, timestamp: _Timestamp = None,
    ) -> PreparedRecord:
        """Check and serialize a record: :meth:`produce`'s parameters, so that
        :meth:`enqueue` can pass its arguments on unchanged and have them
        checked the same way."""
        if self._closing:
            raise ClientClosedError("the producer is closed", topic=topic)
        if self._txn is not None and not self._txn.open:
            self._txn.refuse(topic)  # raises: outside a transaction
        if type(topic) is not str or not topic:
            raise ConfigError(f"topic must be a non-empty str, got {topic!r}")
        if self.key_maker is not None and key is None:
            key = call(self.key_maker, value, "key_maker", topic)
        if value is not None:
            if self.serializer is not None:
                value = call(self.serializer, value, "serializer", topic)
            if type(value) is not bytes:
                value = as_bytes(value, "value", topic)
        if key is not None:
            if self.key_serializer is not None:
                key = call(self.key_serializer, key, "key_serializer", topic)
            if type(key) is not bytes:
                key = as_bytes(key, "key", topic)
        size = MESSAGE_OVERHEAD + (0 if value is None else len(value)) + (
            0 if key is None else len(key)
        )
        if size > self.max_message_size:
            raise MessageSizeTooLargeError(
                f"message of {size} bytes is larger than max_message_size "
                f"({self.max_message_size}); not sent",
                topic=topic,
            )
        if partition is not None and (type(partition) is not int or partition < 0):
            raise ConfigError(f"partition must be a non-negative int, got {partition!r}")
        if headers is None and timestamp is None:
            return PreparedRecord(topic, key, value, partition, size)
        pairs = check_headers(headers, topic)
        millis = check_timestamp(timestamp, topic)
        if pairs or millis is not None:
            produce = self.cluster.highest_known(PRODUCE)
            if produce is not None and produce < 3:
                raise UnsupportedFeatureError(
                    "record timestamps and headers need a broker that speaks Produce v3 "
                    "(Kafka 0.11+); this cluster speaks v0. Nothing was sent",
                    topic=topic,
                )
        size += sum(len(k) + (0 if v is None else len(v)) + 2 for k, v in pairs)
        if size > self.max_message_size:
            raise MessageSizeTooLargeError(
                f"message of {size} bytes (headers included) is larger than "
                f"max_message_size ({self.max_message_size}); not sent",
                topic=topic,
            )
        return PreparedRecord(topic, key, value, partition, size, millis, pairs)

    def _submit(self, record: PreparedRecord) -> "asyncio.Future[RecordMetadata]":
        """Batch a prepared record now, or park it until metadata and room allow."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._check_room(record.topic, record.size)
        # An asyncio.Future whatever the loop's create_future() makes: the
        # sender resolves them with asyncio.Future.set_result.
        future: asyncio.Future[RecordMetadata] = _Future(loop=loop)
        if not self._parked:
            route = self._router.route(record.topic)
            if route is not None:
                self._append(route, record, future)
                return future
        self._admission.park(record, future)
        return future

    def _check_room(self, topic: str, size: int, records: int = 1) -> None:
        """Raise unless ``size`` more bytes of records fit in the buffer (one
        record larger than ``max_pending_bytes`` fits when nothing is held;
        several never pass it together).

        Raises:
            BufferFullError: they do not.
        """
        admission = self._admission
        if not admission.has_room(size) or (
            records > 1 and admission.held_bytes + size > self.max_pending_bytes
        ):
            raise BufferFullError(
                f"the producer holds {admission.held_bytes} bytes of records, "
                f"max_pending_bytes={self.max_pending_bytes}: no room for {size} more "
                "(produce() does not wait: use enqueue(), or raise max_pending_bytes)",
                topic=topic,
            )

    def _place_bare(self, record: PreparedRecord) -> None:
        """Batch a prepared record without a future (produce_many()), now
        or once admitted."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if not self._parked:
            route = self._router.route(record.topic)
            if route is not None:
                self._append(route, record, None)
                return
        self._admission.park(record, None)

    def _append(self, route: TopicRoute, record: PreparedRecord,
                future: "Optional[asyncio.Future[RecordMetadata]]") -> None:
        """Batch a record on its topic's route (now, or once admitted)."""
        try:
            queue = self._router.pick(route, record.key, record.partition)
        except (ConfigError, UnknownPartitionError) as e:
            self._outcomes.fail(future, e, record.topic, record.partition)
            return
        due = self._accumulator.append(queue, record.key, record.value, record.size, future,
                                       record.timestamp, record.headers)
        if due is not None:
            self._sender.wake_at(due)


    # ------------------------------------------------------------------
    # transactions (kiel.producer.transactions)

    def _transactions(self, transactional_id: str, timeout: float) -> Transactions:
        """Make the transaction state and hook it into the sender."""
        idem = self._idempotence
        assert idem is not None  # check_transactional made it required
        txn = Transactions(
            transactional_id, timeout, cluster=self.cluster, idempotence=idem,
            accumulator=self._accumulator, outcomes=self._outcomes, tasks=self._tasks,
            backoff=self.cluster.backoff, request_timeout=self.cluster.request_timeout,
            settle_all=self._settle_all, admitted=self._admission.wait_admitted,
            wake=self._sender.wake, settled=self._admission.freed)
        self._sender.transactions = txn
        return txn

    @property
    def transactional_id(self) -> Optional[str]:
        """The transactional id, or ``None`` for a producer that is not transactional."""
        return None if self._txn is None else self._txn.transactional_id

    @property
    def transaction_timeout(self) -> Optional[float]:
        """Seconds a transaction may stay open (kiel's bound), or ``None``
        for a producer that is not transactional."""
        return None if self._txn is None else self._txn.timeout

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (begun and not yet committed or aborted)."""
        return self._txn is not None and self._txn.state != "none"

    def _transactional(self, call: str) -> Transactions:
        txn = self._txn
        if txn is None:
            raise TransactionStateError(
                f"{call}() needs a transactional producer: "
                "Producer(..., transactional_id=...)")
        return txn

    def begin_transaction(self) -> None:
        """Begin a transaction: from now until :meth:`commit_transaction` or
        :meth:`abort_transaction`, every record produced belongs to it.

        Nothing is sent yet: each partition joins the transaction
        (AddPartitionsToTxn) before its first record goes.

        Raises:
            TransactionStateError: not a transactional producer, a
                transaction is open already, or :meth:`connect` was not
                awaited.
            ProducerFencedError: another producer with the same
                transactional id took over; this one is unusable.
        """
        self._transactional("begin_transaction").begin()

    async def send_offsets_to_transaction(
        self, offsets: "Mapping[tuple[str, int], int]", group_metadata: GroupMetadata
    ) -> None:
        """Commit a consumer group's offsets with the transaction: they
        count only if it commits (consume-transform-produce, exactly once).

        Args:
            offsets: ``{(topic, partition): offset}``, each the next offset
                to read (as :meth:`GroupedConsumer.commit
                <kiel.consumer.grouped.GroupedConsumer.commit>` takes them).
            group_metadata: the consumer's
                :meth:`~kiel.consumer.grouped.GroupedConsumer.group_metadata`
                (taken right before this call), or a group id alone (a
                ``str``), as Java's ``ConsumerGroupMetadata(groupId)``.

        Raises:
            TransactionStateError: no transaction is open (or it can only abort).
            ConfigError: malformed offsets or group metadata.
            GroupError: the group refused the commit: the consumer is no
                longer a member of that generation (e.g.
                :class:`~kiel.exc.IllegalGenerationError`); the transaction
                can only abort.
            ProducerFencedError: fenced; the producer is unusable.
            BrokerError, NoBrokersError, KielConnectionError,
            RequestTimeoutError: retries ran out; the transaction can only abort.
        """
        await self._transactional("send_offsets_to_transaction").send_offsets(
            offsets, group_metadata)

    async def commit_transaction(self) -> None:
        """Send every record of the transaction, wait for each to be
        acknowledged, then commit it (EndTxn): a read_committed consumer
        sees its records, and its offsets count.

        Raises:
            TransactionStateError: no transaction is open.
            TransactionAbortedError: a record of it failed, or its offsets
                were refused: it was aborted instead (its ``__cause__`` says
                why).
            TransactionTimeoutError: it was open longer than
                ``transaction_timeout``: the producer aborted it.
            ProducerFencedError: fenced; the producer is unusable.
            BrokerError, NoBrokersError, KielConnectionError,
            RequestTimeoutError: EndTxn failed past the retries: whether it
                committed is unknown; call ``commit_transaction()`` again.
        """
        await self._transactional("commit_transaction").commit()

    async def abort_transaction(self) -> None:
        """Abort the transaction: its records not sent yet fail with
        :class:`~kiel.exc.TransactionAbortedError`, the ones out are
        settled, then EndTxn (abort): a read_committed consumer sees none.

        Raises:
            TransactionStateError: no transaction is open, or a commit is
                unconfirmed (call :meth:`commit_transaction` again).
            ProducerFencedError: fenced; the producer is unusable.
            BrokerError, NoBrokersError, KielConnectionError,
            RequestTimeoutError: EndTxn failed past the retries: call
                ``abort_transaction()`` again.
        """
        await self._transactional("abort_transaction").abort()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        """``async with producer.transaction():`` begins a transaction,
        commits it when the block ends normally and aborts it when the
        block raises (the exception is raised again)::

            async with producer.transaction():
                producer.produce("out", value)
                await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())

        Raises:
            as :meth:`begin_transaction` and :meth:`commit_transaction`; an
            exception of the block is raised again after the abort (an
            abort that fails too is logged; a fenced producer's abort is
            not attempted).
        """
        txn = self._transactional("transaction")
        txn.begin()
        try:
            yield
        except BaseException:
            if txn.fatal is None:
                try:
                    await txn.abort()
                except KielError as e:
                    log.warning("producer: aborting the transaction after an error failed: %s",
                                e)
            raise
        await txn.commit()
