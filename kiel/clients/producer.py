"""The producer: batches records per partition and sends them to partition leaders.

Flow of one record::

    produce() -> serialize, check size -> pick a partition -> append to that
    partition's open batch (encoded right away into the batch's message set)
    -> the batch closes when full (batch_size) or after linger_ms -> the
    sender groups closed batches by leader: one ProduceRequest per leader
    covering every partition that has batches to send -> response: resolve
    each record's future with (topic, partition, offset), or retry the batch
    (same order, same partition) after a backoff, or fail its futures with the
    typed error.

Everything runs on the IOLoop; nothing blocks it. ``produce()`` itself is a
plain function that returns an :class:`asyncio.Future`, so it is cheap to
call many times without awaiting, and the future can be awaited, yielded
from a ``tornado.gen.coroutine``, gathered or given callbacks.
"""

import asyncio
import collections
import copy
import logging
import random
import struct
import zlib
from typing import (
    Any,
    Callable,
    Deque,
    Dict,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from kiel import compression as codecs
from kiel.client import Client
from kiel.clients.partitioners import DefaultPartitioner, Partitioner
from kiel.exc import (
    BufferFullError,
    ClientClosedError,
    ConfigError,
    KielError,
    LeaderNotAvailableError,
    MessageSizeTooLargeError,
    ProtocolError,
    SerializationError,
    UnknownPartitionError,
    UnknownTopicOrPartitionError,
    for_code,
)
from kiel.protocol import ProducePartitionData, ProduceRequest, ProduceTopicData
from kiel.structs import RecordMetadata

log = logging.getLogger(__name__)

__all__ = ["Producer", "RecordMetadata", "MESSAGE_OVERHEAD"]

#: Bytes a magic-0 message adds to its key and value in a message set:
#: offset (8), message size (4), crc (4), magic (1), attributes (1), key
#: length (4), value length (4). The broker's ``message.max.bytes`` check
#: counts them too.
MESSAGE_OVERHEAD = 26

_entry_head = struct.Struct(">qiI")  # offset, message size, crc
_null_key_message = struct.Struct(">qiIbbii")  # ... magic, attributes, key length, value length
_body_head_null_key = struct.Struct(">bbii")  # magic, attributes, key length, value length
_body_head_key = struct.Struct(">bbi")  # magic, attributes, key length (key follows)
_int32 = struct.Struct(">i")
_crc32 = zlib.crc32
#: CRC32 of the 10 bytes before a null-key message's value, by value length.
_null_key_crc: Dict[int, int] = {}


_new_metadata = tuple.__new__
_Future = asyncio.Future


def encode_message(buf: bytearray, offset: int, key: Optional[bytes], value: Optional[bytes],
                   attributes: int = 0) -> None:
    """Append one magic-0 message (with its offset and size) to ``buf``.

    Byte for byte what :func:`kiel.protocol.messages.encode_message_set`
    writes for the same message (the tests check it); this incremental form
    lets the producer encode a record as it joins its batch.

    Args:
        buf: the message set being built.
        offset: the offset field (the broker assigns the real offsets; a
            producer writes the position within the set).
        key: the key, or ``None``.
        value: the value, or ``None`` (a null value).
        attributes: the attributes byte (the codec id for a wrapper message).
    """
    vlen = -1 if value is None else len(value)
    if key is None and not attributes:
        # Strategy: the common case is one pack and one CRC over the value,
        # seeded with the cached CRC of the fixed 10-byte prefix.
        crc = _null_key_crc.get(vlen)
        if crc is None:
            crc = _null_key_crc[vlen] = _crc32(_body_head_null_key.pack(0, 0, -1, vlen))
        if value is None:
            buf += _null_key_message.pack(offset, 14, crc, 0, 0, -1, -1)
        else:
            buf += _null_key_message.pack(offset, 14 + vlen, _crc32(value, crc), 0, 0, -1, vlen)
            buf += value
        return
    if key is None:
        body = _body_head_null_key.pack(0, attributes, -1, vlen) + (value or b"")
    else:
        body = b"".join(
            (_body_head_key.pack(0, attributes, len(key)), key, _int32.pack(vlen), value or b"")
        )
    buf += _entry_head.pack(offset, len(body) + 4, _crc32(body))
    buf += body


class _Batch:
    """Records of one partition that travel together (one message set, or one
    compressed wrapper message)."""

    __slots__ = ("buf", "futures", "size", "created", "delays", "done", "payload")

    def __init__(self, created: float) -> None:
        self.buf = bytearray()
        self.futures: List[asyncio.Future[RecordMetadata]] = []
        #: bytes counted against ``batch_size`` and ``max_pending_bytes``
        self.size = 0
        self.created = created
        self.delays: Any = None  # the backoff iterator, made on the first retry
        self.done: Optional[asyncio.Future[None]] = None  # made by flush() only
        self.payload: Optional[bytes] = None  # what goes on the wire (compressed once)


class _Slot:
    """Per-partition state: the batch being filled, closed batches waiting to
    go (retries at the front), and whether a request is in flight."""

    __slots__ = ("topic", "partition", "open", "ready", "in_flight", "retry_at", "stale")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.open: Optional[_Batch] = None
        self.ready: Deque[_Batch] = collections.deque()
        self.in_flight = False
        self.retry_at = 0.0
        #: waiting for a metadata refresh before the next attempt
        self.stale = False


class _Topic:
    """A topic's partitions as of one metadata snapshot, plus its slots."""

    __slots__ = ("name", "parts_ref", "all", "available", "slots", "rr_slots")

    def __init__(self, name: str) -> None:
        self.name = name
        self.parts_ref: Any = None
        self.all: List[int] = []
        self.available: List[int] = []
        self.slots: Dict[int, _Slot] = {}
        #: the slots unkeyed records go to, round-robin
        self.rr_slots: List[_Slot] = []


class _Parked(NamedTuple):
    """A record waiting for topic metadata or for room in the buffer."""

    topic: str
    key: Optional[bytes]
    value: Optional[bytes]
    partition: Optional[int]
    size: int
    future: "asyncio.Future[RecordMetadata]"
    deadline: Optional[float]
    seq: int


def _copy_error(err: KielError, **context: Any) -> KielError:
    """A copy of ``err`` with more context (errors shared by many partitions
    must not collect one partition's context)."""
    new = copy.copy(err)
    new.context = dict(err.context)
    if hasattr(err, "errno"):
        new.errno = err.errno  # type: ignore[attr-defined]
    new.__cause__ = err.__cause__
    return new.with_context(**context)


class Producer(Client):
    """Produce records to Kafka 0.8.x topics from Tornado (asyncio) code.

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
            many bytes (a larger record travels alone).
        linger_ms: how long a batch that is not full may wait for more
            records. 0 sends on the next IOLoop iteration, which still
            batches everything produced in the same callback and everything
            produced while the partition's previous request is in flight.
        max_request_size: largest sum of batches sent for one partition in one
            request (several closed batches of a partition go together).
        max_message_size: a record whose encoded message (key + value + 26
            bytes) is larger is refused by :meth:`produce`; match the
            broker's ``message.max.bytes``.
        max_pending_bytes: bytes of records produced and not yet acknowledged
            (or failed), at most; further records wait for room (see
            :meth:`produce` and :meth:`enqueue`).
        buffer_timeout: seconds a record may wait for room before its future
            fails with :class:`~kiel.exc.BufferFullError`; ``None`` waits as
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
        ssl_options: an ``ssl.SSLContext`` for TLS.

    Raises:
        ConfigError: a bad setting.
        MissingDependencyError: snappy or lz4 compression without cramjam.
    """

    def __init__(
        self,
        brokers: Union[str, Sequence[str]],
        *,
        required_acks: int = -1,
        ack_timeout: Optional[float] = None,
        compression: Optional[str] = None,
        gzip_level: int = codecs.DEFAULT_GZIP_LEVEL,
        batch_size: int = 16384,
        linger_ms: float = 0.0,
        max_request_size: int = 1048576,
        max_message_size: int = 1000000,
        max_pending_bytes: int = 32 * 1024 * 1024,
        buffer_timeout: Optional[float] = None,
        partitioner: Optional[Partitioner] = None,
        key_maker: Optional[Callable[[Any], Any]] = None,
        serializer: Optional[Callable[[Any], bytes]] = None,
        key_serializer: Optional[Callable[[Any], bytes]] = None,
        **client_options: Any,
    ) -> None:
        super().__init__(brokers, **client_options)
        request_timeout = self.cluster.request_timeout
        if required_acks not in (-1, 0, 1) or isinstance(required_acks, bool):
            raise ConfigError(f"required_acks must be -1, 0 or 1, got {required_acks!r}")
        if ack_timeout is None:
            ack_timeout = request_timeout / 2
        if not isinstance(ack_timeout, (int, float)) or not 0 <= ack_timeout * 1000 < 2**31:
            raise ConfigError(f"ack_timeout must be seconds >= 0, got {ack_timeout!r}")
        if required_acks == -1 and ack_timeout >= request_timeout:
            raise ConfigError(
                f"ack_timeout ({ack_timeout}s) must be shorter than request_timeout "
                f"({request_timeout}s): the broker may take that long to answer"
            )
        for name, value in (
            ("batch_size", batch_size),
            ("max_request_size", max_request_size),
            ("max_message_size", max_message_size),
            ("max_pending_bytes", max_pending_bytes),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(linger_ms, (int, float)) or linger_ms < 0:
            raise ConfigError(f"linger_ms must be >= 0, got {linger_ms!r}")
        if buffer_timeout is not None and (
            not isinstance(buffer_timeout, (int, float)) or buffer_timeout < 0
        ):
            raise ConfigError(f"buffer_timeout must be None or >= 0, got {buffer_timeout!r}")
        for name, func in (
            ("partitioner", partitioner),
            ("key_maker", key_maker),
            ("serializer", serializer),
            ("key_serializer", key_serializer),
        ):
            if func is not None and not callable(func):
                raise ConfigError(f"{name} must be callable, got {func!r}")
        codec_id = compression_id(compression)
        self.codec: Optional[codecs.Codec] = None
        if codec_id == codecs.GZIP:
            self.codec = codecs.get_codec(codec_id, level=gzip_level)
        elif codec_id == codecs.LZ4:
            self.codec = codecs.get_codec(codec_id, magic=0)
        elif codec_id != codecs.NONE:
            self.codec = codecs.get_codec(codec_id)
        self.codec_id = codec_id
        self.required_acks = required_acks
        self.ack_timeout = ack_timeout
        self.batch_size = batch_size
        self.linger = linger_ms / 1000.0
        self.max_request_size = max_request_size
        self.max_message_size = max_message_size
        self.max_pending_bytes = max_pending_bytes
        self.buffer_timeout = buffer_timeout
        self.partitioner: Partitioner = partitioner or DefaultPartitioner()
        # The inlined fast path of produce() applies without these.
        self._plain = not (partitioner or key_maker or serializer)
        self._round_robin = partitioner is None
        self._rr = random.randrange(1 << 16)
        self.key_maker = key_maker
        self.serializer = serializer
        self.key_serializer = key_serializer
        self._send_timeout = request_timeout
        self._ack_timeout_ms = int(ack_timeout * 1000)

        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._topics: Dict[str, _Topic] = {}
        self._active: Set[_Slot] = set()  # slots with an open or ready batch
        self._unfinished: Set[_Batch] = set()
        self._pending_bytes = 0
        self._parked: Deque[_Parked] = collections.deque()
        self._park_seq = 0
        self._progress: Optional[asyncio.Future[None]] = None
        self._admitting: Optional[asyncio.Task[None]] = None
        self._room: Optional[asyncio.Future[None]] = None
        self._drain_handle: Optional[asyncio.Handle] = None
        self._timers: Set[asyncio.TimerHandle] = set()
        self._tasks: Set[asyncio.Task[Any]] = set()
        self._refreshing: Optional[asyncio.Task[None]] = None
        self._metadata_error: Optional[KielError] = None
        self._flushing = 0
        self._force = False
        self._closing = False

    # ------------------------------------------------------------------
    # public API

    @property
    def pending_bytes(self) -> int:
        """Bytes of records produced and not yet acknowledged or failed."""
        return self._pending_bytes

    @property
    def pending_records(self) -> int:
        """Records produced and not yet acknowledged or failed (parked ones included)."""
        return sum(len(b.futures) for b in self._unfinished) + len(self._parked)

    def produce(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: Optional[int] = None,
    ) -> "asyncio.Future[RecordMetadata]":
        """Queue one record; the returned future resolves once it is acknowledged.

        This is a plain function: it never blocks and never waits. When the
        buffer is full (``max_pending_bytes``) or the topic's metadata is not
        loaded yet, the record waits, in order, before it is batched; its
        future covers that wait too (and fails with
        :class:`~kiel.exc.BufferFullError` after ``buffer_timeout``). Use
        :meth:`enqueue` in a loop that should itself slow down instead.

        Records of one partition are written in the order :meth:`produce`
        was called, retries included.

        Args:
            topic: the topic.
            value: ``bytes`` (or ``bytearray``/``memoryview``, copied), or
                ``None`` for a null value; anything when a ``serializer`` is
                set (``None`` is never serialized).
            key: the key, likewise (``key_serializer``); when ``None`` and a
                ``key_maker`` is set, ``key_maker(value)`` makes it.
            partition: write to this partition instead of asking the
                partitioner.

        Returns:
            a future of :class:`RecordMetadata` ``(topic, partition,
            offset)``; ``offset`` is -1 with ``required_acks=0``. The future
            fails with the typed error that stopped the record: a
            :class:`~kiel.exc.BrokerError` subclass (e.g.
            ``MessageSizeTooLargeError``, ``NotLeaderForPartitionError`` once
            retries ran out), :class:`~kiel.exc.UnknownTopicError`,
            :class:`~kiel.exc.UnknownPartitionError`,
            :class:`~kiel.exc.RequestTimeoutError`,
            :class:`~kiel.exc.KielConnectionError`,
            :class:`~kiel.exc.NoBrokersError`,
            :class:`~kiel.exc.BufferFullError`. Cancelling it does not
            withdraw a record that is already batched.

        Raises:
            ClientClosedError: the producer is closing or closed.
            SerializationError: the value or key is not bytes (and no
                serializer is set), or the serializer failed.
            MessageSizeTooLargeError: the encoded message is larger than
                ``max_message_size``; nothing was sent.
            ConfigError: ``topic`` is not a non-empty string or
                ``partition`` is not a non-negative int.
            RuntimeError: called with no running event loop.
        """
        # Strategy: one inlined path for the common record (bytes value, no
        # key, default partitioner, room in the buffer, metadata loaded):
        # about a microsecond. Everything else takes the general path below.
        if key is None and partition is None and self._plain and type(value) is bytes:
            state = self._topics.get(topic)
            if (
                state is not None
                and state.parts_ref is self.cluster.partitions.get(topic)
                and not self._parked
                and not self._closing
            ):
                size = 26 + len(value)
                if size <= self.max_message_size and (
                    self._pending_bytes + size <= self.max_pending_bytes
                ):
                    rr = state.rr_slots
                    slot = rr[self._rr % len(rr)]
                    self._rr += 1
                    batch = slot.open
                    if batch is None or batch.size + size > self.batch_size:
                        batch = self._open_batch(slot)
                    futures = batch.futures
                    vlen = size - 26
                    crc = _null_key_crc.get(vlen)
                    if crc is None:
                        crc = _crc32(_body_head_null_key.pack(0, 0, -1, vlen))
                        _null_key_crc[vlen] = crc
                    buf = batch.buf
                    buf += _null_key_message.pack(
                        len(futures), 14 + vlen, _crc32(value, crc), 0, 0, -1, vlen
                    )
                    buf += value
                    future: asyncio.Future[RecordMetadata] = _Future(loop=self._loop)
                    futures.append(future)
                    batch.size += size
                    self._pending_bytes += size
                    return future
        key, value, size = self._prepare(topic, value, key, partition)
        return self._submit(topic, key, value, partition, size)

    def _prepare(
        self, topic: str, value: Any, key: Any, partition: Optional[int]
    ) -> Tuple[Optional[bytes], Optional[bytes], int]:
        """Check and serialize a record; return ``(key, value, size)``."""
        if self._closing:
            raise ClientClosedError("the producer is closed", topic=topic)
        if type(topic) is not str or not topic:
            raise ConfigError(f"topic must be a non-empty str, got {topic!r}")
        if self.key_maker is not None and key is None:
            key = self._call(self.key_maker, value, "key_maker", topic)
        if value is not None:
            if self.serializer is not None:
                value = self._call(self.serializer, value, "serializer", topic)
            if type(value) is not bytes:
                value = _as_bytes(value, "value", topic)
        if key is not None:
            if self.key_serializer is not None:
                key = self._call(self.key_serializer, key, "key_serializer", topic)
            if type(key) is not bytes:
                key = _as_bytes(key, "key", topic)
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
        return key, value, size

    def _submit(
        self,
        topic: str,
        key: Optional[bytes],
        value: Optional[bytes],
        partition: Optional[int],
        size: int,
    ) -> "asyncio.Future[RecordMetadata]":
        """Batch a prepared record now, or park it until metadata and room allow."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[RecordMetadata] = loop.create_future()
        if not self._parked and self._has_room(size):
            state = self._topic_state(topic)
            if state is not None:
                self._append(state, key, value, partition, size, future)
                return future
        deadline = None
        if self.buffer_timeout is not None:
            deadline = loop.time() + self.buffer_timeout
        self._park_seq += 1
        self._parked.append(
            _Parked(topic, key, value, partition, size, future, deadline, self._park_seq)
        )
        if self._admitting is None:
            self._admitting = loop.create_task(self._admit())
        return future

    async def enqueue(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: Optional[int] = None,
    ) -> "asyncio.Future[RecordMetadata]":
        """Wait for room in the buffer, then :meth:`produce`.

        The back-pressured form for loops that produce many records::

            futures = [await producer.enqueue("events", v) for v in values]
            await producer.flush()

        Args:
            topic, value, key, partition: as for :meth:`produce`.

        Returns:
            the record's future, as :meth:`produce` returns it (awaiting it
            waits for the acknowledgement).

        Raises:
            BufferFullError: no room within ``buffer_timeout``.
            ClientClosedError, SerializationError, MessageSizeTooLargeError,
            ConfigError: as for :meth:`produce`.
        """
        key, value, size = self._prepare(topic, value, key, partition)
        if self._parked or not self._has_room(size):
            await self._wait_for_room(topic, size)
            if self._closing:
                raise ClientClosedError("the producer is closed", topic=topic)
        return self._submit(topic, key, value, partition, size)

    async def flush(self) -> None:
        """Send everything produced so far now, and wait until each record
        is acknowledged or has failed.

        Batches are sent without waiting for ``linger_ms``. Failures are not
        raised here: they are on each record's future.
        """
        loop = self._loop
        if loop is None:
            return
        self._flushing += 1
        try:
            # Strategy: no callback per record. First wait until every record
            # parked before this call has left the queue (it is FIFO by seq),
            # then for the batches that exist at that point, which hold every
            # record admitted so far.
            target = self._park_seq
            parked = self._parked
            while parked and parked[0].seq <= target:
                if self._progress is None or self._progress.done():
                    self._progress = loop.create_future()
                self._schedule_drain()
                await self._progress
            waits: List[asyncio.Future[Any]] = []
            for batch in self._unfinished:
                if batch.done is None:
                    batch.done = loop.create_future()
                waits.append(batch.done)
            self._schedule_drain()
            if waits:
                await asyncio.wait(waits)
        finally:
            self._flushing -= 1

    async def close(self) -> None:
        """Flush, then close every connection.

        Records produced before ``close()`` are delivered (or fail with
        their error) first; :meth:`produce` after it raises
        :class:`~kiel.exc.ClientClosedError`. Closing twice is harmless.
        """
        if self.closed:
            return
        self._closing = True
        try:
            await self.flush()
        finally:
            self._shutdown()
            await super().close()

    # ------------------------------------------------------------------
    # record intake

    @staticmethod
    def _call(func: Callable[[Any], Any], arg: Any, name: str, topic: str) -> Any:
        try:
            return func(arg)
        except Exception as e:  # user code: any failure becomes our typed error
            raise SerializationError(f"{name} failed: {e!r}", topic=topic) from e

    def _topic_state(self, topic: str) -> Optional[_Topic]:
        """The topic's state for the current metadata, or None if it is not loaded."""
        parts = self.cluster.partitions.get(topic)
        if parts is None:
            return None
        state = self._topics.get(topic)
        if state is None:
            state = self._topics[topic] = _Topic(topic)
        if state.parts_ref is not parts:
            state.parts_ref = parts
            state.all = sorted(parts)
            state.available = [p for p in state.all if parts[p].leader >= 0]
            for p in state.all:
                if p not in state.slots:
                    state.slots[p] = _Slot(topic, p)
            state.rr_slots = [state.slots[p] for p in (state.available or state.all)]
        return state

    def _append(
        self,
        state: _Topic,
        key: Optional[bytes],
        value: Optional[bytes],
        partition: Optional[int],
        size: int,
        future: "asyncio.Future[RecordMetadata]",
    ) -> None:
        if partition is None and key is None and self._round_robin:
            # The default partitioner's round-robin, shared with the fast path.
            rr = state.rr_slots
            slot: Optional[_Slot] = rr[self._rr % len(rr)]
            self._rr += 1
        else:
            slot = self._pick(state, key, partition, future)
            if slot is None:
                return
        assert slot is not None
        batch = slot.open
        if batch is None or (batch.size + size > self.batch_size and batch.futures):
            batch = self._open_batch(slot)
        # Strategy: encode into the batch right away (one bytearray per
        # batch); the wire payload is then the buffer itself, or one
        # compression of it.
        futures = batch.futures
        if key is None and value is not None:  # the hot path, inlined
            vlen = len(value)
            crc = _null_key_crc.get(vlen)
            if crc is None:
                crc = _null_key_crc[vlen] = _crc32(_body_head_null_key.pack(0, 0, -1, vlen))
            buf = batch.buf
            buf += _null_key_message.pack(
                len(futures), 14 + vlen, _crc32(value, crc), 0, 0, -1, vlen
            )
            buf += value
        else:
            encode_message(batch.buf, len(futures), key, value)
        futures.append(future)
        batch.size += size
        self._pending_bytes += size

    def _pick(
        self,
        state: _Topic,
        key: Optional[bytes],
        partition: Optional[int],
        future: "asyncio.Future[RecordMetadata]",
    ) -> Optional[_Slot]:
        """The record's slot: ``partition`` or the partitioner's choice
        (``None`` once the future has failed)."""
        if partition is None:
            candidates = state.all if key is not None else (state.available or state.all)
            try:
                partition = self.partitioner(key, candidates)
            except Exception as e:  # user code: surface it on the record
                future.set_exception(
                    ConfigError(f"partitioner failed: {e!r}", topic=state.name)
                )
                return None
        slot = state.slots.get(partition)
        if slot is None:
            future.set_exception(
                UnknownPartitionError(
                    f"the topic has partitions {state.all}", topic=state.name, partition=partition
                )
            )
        return slot

    def _open_batch(self, slot: _Slot) -> _Batch:
        loop = self._loop
        assert loop is not None
        if slot.open is not None:
            slot.ready.append(slot.open)
            self._schedule_drain()
        batch = slot.open = _Batch(loop.time())
        self._unfinished.add(batch)
        self._active.add(slot)
        if self.linger:
            self._call_later(self.linger, self._schedule_drain)
        else:
            self._schedule_drain()
        return batch

    def _has_room(self, size: int) -> bool:
        return self._pending_bytes + size <= self.max_pending_bytes or not self._pending_bytes

    async def _wait_for_room(self, topic: Optional[str] = None, size: int = 1,
                             deadline: Optional[float] = None,
                             parked: bool = False) -> None:
        """Wait until ``size`` bytes fit (and, unless ``parked``, no record is parked)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        if deadline is None and self.buffer_timeout is not None:
            deadline = loop.time() + self.buffer_timeout
        while not self._has_room(size) or (not parked and self._parked):
            if self._room is None or self._room.done():
                self._room = loop.create_future()
            # Pending bytes only shrink as batches complete: send the open
            # ones now rather than after linger_ms.
            self._schedule_drain(force=True)
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            if timeout is not None and timeout <= 0:
                raise BufferFullError(
                    f"no room in the buffer ({self._pending_bytes} of "
                    f"{self.max_pending_bytes} bytes pending) within buffer_timeout",
                    topic=topic,
                )
            await asyncio.wait([self._room], timeout=timeout)

    def _room_freed(self) -> None:
        room = self._room
        if room is not None and not room.done() and (
            self._pending_bytes < self.max_pending_bytes or not self._parked
        ):
            room.set_result(None)

    def _progressed(self) -> None:
        progress = self._progress
        if progress is not None and not progress.done():
            progress.set_result(None)

    async def _admit(self) -> None:
        """Move parked records into batches, in order, as metadata and room allow."""
        parked = self._parked
        try:
            while parked:
                record = parked[0]
                if record.future.done():  # cancelled by its owner
                    parked.popleft()
                    continue
                state = self._topic_state(record.topic)
                if state is None:
                    self._progressed()
                    try:
                        await self.cluster.partitions_for(record.topic)
                    except KielError as e:
                        self._fail_parked(record.topic, e)
                        self._room_freed()
                    except Exception as e:  # a bug: fail the records, do not strand them
                        log.exception("producer: loading metadata of %r failed", record.topic)
                        self._fail_parked(record.topic, e)
                        self._room_freed()
                    continue
                if not self._has_room(record.size):
                    self._progressed()
                    try:
                        await self._wait_for_room(
                            record.topic, record.size, record.deadline, parked=True
                        )
                    except KielError as e:
                        parked.popleft()
                        if not record.future.done():
                            record.future.set_exception(e)
                    continue
                parked.popleft()
                self._append(
                    state, record.key, record.value, record.partition, record.size, record.future
                )
                if not parked:
                    self._room_freed()  # enqueue() callers wait for an empty queue
        finally:
            self._admitting = None
            self._progressed()
            if parked and not self.closed:  # defensive: never strand a record
                loop = self._loop
                assert loop is not None
                self._admitting = loop.create_task(self._admit())

    def _fail_parked(self, topic: str, error: Exception) -> None:
        """Fail every parked record of ``topic`` (its metadata cannot be had)."""
        keep: Deque[_Parked] = collections.deque()
        for record in self._parked:
            if record.topic == topic:
                if not record.future.done():
                    record.future.set_exception(
                        _copy_error(error, topic=topic) if isinstance(error, KielError) else error
                    )
            else:
                keep.append(record)
        self._parked.clear()
        self._parked.extend(keep)

    # ------------------------------------------------------------------
    # sending

    def _call_later(self, delay: float, callback: Callable[[], None]) -> None:
        loop = self._loop
        assert loop is not None
        handle: asyncio.TimerHandle

        def fire() -> None:
            self._timers.discard(handle)
            callback()

        handle = loop.call_later(delay, fire)
        self._timers.add(handle)

    def _schedule_drain(self, force: bool = False) -> None:
        """Run the sender on the next loop iteration (``force``: ignore linger_ms once)."""
        if force:
            self._force = True
        if self._drain_handle is None and self._loop is not None:
            self._drain_handle = self._loop.call_soon(self._drain)

    def _drain(self) -> None:
        """Close batches that are due and send every sendable partition, one
        request per leader."""
        self._drain_handle = None
        loop = self._loop
        assert loop is not None
        now = loop.time()
        force = self._force or self._flushing > 0 or self._closing
        self._force = False
        # call_later may fire up to one clock resolution early.
        due = now - self.linger + 0.001
        refreshing = self._refreshing is not None
        by_leader: Dict[int, List[Tuple[_Slot, List[_Batch]]]] = {}
        cluster_parts = self.cluster.partitions
        brokers = self.cluster.brokers
        for slot in list(self._active):
            if slot.in_flight or slot.retry_at > now or (slot.stale and refreshing):
                continue
            batch = slot.open
            if batch is not None and (force or batch.created <= due):
                slot.ready.append(batch)
                slot.open = None
            if not slot.ready:
                if slot.open is None:
                    self._active.discard(slot)
                continue
            parts = cluster_parts.get(slot.topic)
            info = parts.get(slot.partition) if parts is not None else None
            if info is None or info.leader < 0 or info.leader not in brokers:
                err: KielError
                if self._metadata_error is not None:
                    err = _copy_error(self._metadata_error)
                elif info is None or info.leader >= 0:
                    err = UnknownTopicOrPartitionError(
                        "the partition is not in the cluster metadata"
                    )
                else:
                    err = LeaderNotAvailableError("the partition has no leader")
                batches = list(slot.ready)
                slot.ready.clear()
                self._retry_or_fail(slot, batches, err)
                continue
            taken = [slot.ready.popleft()]
            total = taken[0].size
            while slot.ready and total + slot.ready[0].size <= self.max_request_size:
                batch = slot.ready.popleft()
                total += batch.size
                taken.append(batch)
            slot.in_flight = True
            by_leader.setdefault(info.leader, []).append((slot, taken))
        for leader, items in by_leader.items():
            # Split a leader's partitions into requests of at most
            # max_request_size (each partition's share is already bounded).
            chunk: List[Tuple[_Slot, List[_Batch]]] = []
            chunk_size = 0
            for item in items:
                item_size = sum(b.size for b in item[1])
                if chunk and chunk_size + item_size > self.max_request_size:
                    self._spawn(self._send(leader, chunk))
                    chunk, chunk_size = [], 0
                chunk.append(item)
                chunk_size += item_size
            if chunk:
                self._spawn(self._send(leader, chunk))
        if self.cluster.metadata_age > self.cluster.metadata_max_age and not refreshing:
            self._refresh_metadata()

    def _spawn(self, coro: Any) -> None:
        loop = self._loop
        assert loop is not None
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _payload(self, batch: _Batch) -> bytes:
        payload = batch.payload
        if payload is None:
            if self.codec is None:
                payload = bytes(batch.buf)
            else:
                wrapper = bytearray()
                encode_message(wrapper, 0, None, self.codec.compress(batch.buf), self.codec_id)
                payload = bytes(wrapper)
            batch.payload = payload
            batch.buf = bytearray()  # the payload replaces it
        return payload

    async def _send(self, leader: int, chunk: List[Tuple[_Slot, List[_Batch]]]) -> None:
        """Send one ProduceRequest and settle every batch in it."""
        try:
            topics: Dict[str, List[ProducePartitionData]] = {}
            for slot, batches in chunk:
                if len(batches) == 1:
                    data = self._payload(batches[0])
                else:
                    data = b"".join([self._payload(b) for b in batches])
                topics.setdefault(slot.topic, []).append(
                    ProducePartitionData(slot.partition, data)
                )
            request = ProduceRequest(
                self.required_acks,
                self._ack_timeout_ms,
                [ProduceTopicData(topic, parts) for topic, parts in topics.items()],
            )
            response = await self.cluster.send(leader, request, timeout=self._send_timeout)
        except KielError as e:
            for slot, batches in chunk:
                slot.in_flight = False
                self._retry_or_fail(slot, batches, _copy_error(e, broker_id=leader))
            self._schedule_drain()
            return
        except Exception as e:  # a bug: fail the records loudly rather than strand them
            log.exception("producer: unexpected error sending to broker %s", leader)
            for slot, batches in chunk:
                slot.in_flight = False
                for batch in batches:
                    self._fail_batch(batch, e)
            self._schedule_drain()
            return
        if response is None:  # required_acks=0: written, nothing more to learn
            for slot, batches in chunk:
                slot.in_flight = False
                self._complete(slot, batches, -1)
            self._schedule_drain()
            return
        results: Dict[Tuple[str, int], Tuple[int, int]] = {}
        for topic_response in response.topics:
            for p in topic_response.partitions:
                results[(topic_response.topic, p.partition)] = (p.error_code, p.offset)
        for slot, batches in chunk:
            slot.in_flight = False
            result = results.get((slot.topic, slot.partition))
            if result is None:
                error: KielError = ProtocolError(
                    "the ProduceResponse has no status for this partition",
                    topic=slot.topic, partition=slot.partition, broker_id=leader,
                )
                for batch in batches:
                    self._fail_batch(batch, error)
                continue
            code, offset = result
            if code == 0:
                self._complete(slot, batches, offset)
                continue
            cls = for_code(code)
            assert cls is not None
            self._retry_or_fail(
                slot, batches, cls(errno=code, topic=slot.topic, partition=slot.partition,
                                   broker_id=leader)
            )
        self._schedule_drain()

    def _complete(self, slot: _Slot, batches: List[_Batch], base: int) -> None:
        topic = slot.topic
        partition = slot.partition
        offset = base
        for batch in batches:
            futures = batch.futures
            if base < 0:  # required_acks=0: no offsets
                meta = _new_metadata(RecordMetadata, (topic, partition, -1))
                for future in futures:
                    if not future.done():
                        future.set_result(meta)
            else:
                try:
                    # Strategy: no done() check per record; a future its
                    # owner cancelled makes set_result raise, and then the
                    # careful loop below takes over.
                    for i, future in enumerate(futures, offset):
                        future.set_result(_new_metadata(RecordMetadata, (topic, partition, i)))
                except asyncio.InvalidStateError:
                    for i, future in enumerate(futures, offset):
                        if not future.done():
                            future.set_result(
                                _new_metadata(RecordMetadata, (topic, partition, i))
                            )
                offset += len(futures)
            self._finish_batch(batch)

    def _fail_batch(self, batch: _Batch, error: BaseException) -> None:
        for future in batch.futures:
            if not future.done():
                future.set_exception(error)
        self._finish_batch(batch)

    def _finish_batch(self, batch: _Batch) -> None:
        self._unfinished.discard(batch)
        self._pending_bytes -= batch.size
        batch.futures = []
        batch.payload = None
        if batch.done is not None and not batch.done.done():
            batch.done.set_result(None)
        self._room_freed()

    def _retry_or_fail(self, slot: _Slot, batches: List[_Batch], error: KielError) -> None:
        """Put retriable batches back at the front of their partition (order
        kept) after a backoff; fail the others with ``error``."""
        error.with_context(topic=slot.topic, partition=slot.partition)
        if not error.retriable or self.closed:
            for batch in batches:
                self._fail_batch(batch, error)
            return
        retry = []
        delay = 0.0
        for batch in batches:
            if batch.delays is None:
                batch.delays = self.cluster.backoff.delays()
            next_delay = next(batch.delays, None)
            if next_delay is None:
                self._fail_batch(batch, error)
            else:
                retry.append(batch)
                delay = max(delay, next_delay)
        if not retry:
            return
        log.debug("producer: retrying %d batch(es) of %s/%d in %.3fs after %s",
                  len(retry), slot.topic, slot.partition, delay, error)
        slot.ready.extendleft(reversed(retry))
        self._active.add(slot)
        loop = self._loop
        assert loop is not None
        slot.retry_at = loop.time() + delay
        self._call_later(delay, self._schedule_drain)
        if error.invalid_metadata:
            slot.stale = True
            self._refresh_metadata()

    def _refresh_metadata(self) -> None:
        if self._refreshing is None and not self.closed:
            loop = self._loop
            assert loop is not None
            self._refreshing = loop.create_task(self._refresh())

    async def _refresh(self) -> None:
        try:
            # Name our topics: the cluster refreshes only the topics it was
            # asked about, and another client may have asked about others.
            await self.cluster.refresh_metadata(list(self._topics))
            self._metadata_error = None
        except KielError as e:
            # Not dropped: batches that cannot find a leader fail with it
            # once their retries run out.
            self._metadata_error = e
        finally:
            self._refreshing = None
            for state in self._topics.values():
                for slot in state.slots.values():
                    slot.stale = False
            self._schedule_drain()

    def _shutdown(self) -> None:
        """Stop timers and tasks; fail whatever is left (after a flush, nothing)."""
        for handle in self._timers:
            handle.cancel()
        self._timers.clear()
        if self._drain_handle is not None:
            self._drain_handle.cancel()
            self._drain_handle = None
        if self._admitting is not None:
            self._admitting.cancel()
        if self._refreshing is not None:
            self._refreshing.cancel()
        error = ClientClosedError("the producer closed before the record was sent")
        for record in self._parked:
            if not record.future.done():
                record.future.set_exception(_copy_error(error, topic=record.topic))
        self._parked.clear()
        for batch in list(self._unfinished):
            self._fail_batch(batch, error)
        self._room_freed()


def compression_id(name: Optional[str]) -> int:
    """Map a ``compression=`` setting to a codec id.

    Args:
        name: ``None``, ``"none"``, ``"gzip"``, ``"snappy"`` or ``"lz4"``.

    Returns:
        the codec id.

    Raises:
        ConfigError: anything else.
    """
    if name is None:
        return codecs.NONE
    if not isinstance(name, str):
        raise ConfigError(f"compression must be a codec name or None, got {name!r}")
    return codecs.codec_id_for(name)


def _as_bytes(data: Any, what: str, topic: str) -> bytes:
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, bytes):  # a bytes subclass
        return bytes(data)
    hint = " (set serializer=...)" if what == "value" else " (set key_serializer=...)"
    raise SerializationError(
        f"{what} must be bytes, got {type(data).__name__}{hint}", topic=topic
    )
