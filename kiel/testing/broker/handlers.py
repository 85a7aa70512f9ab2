"""Request handlers of an embedded broker, with Kafka 0.8.2's ``KafkaApis`` semantics.

One :class:`RequestHandlers` per broker. Each handler takes a decoded request
and returns a response struct, ready frame bytes (Fetch, which is encoded here
so that message sets go from the log to the socket in one copy), ``None``
(Produce with acks=0: no answer) or :attr:`RequestHandlers.CLOSE`.

The error codes and their corner cases follow the 0.8.2 broker:

* Produce: UnknownTopicOrPartition (3), NotLeaderForPartition (6),
  MessageSizeTooLarge (10) per message entry over ``message.max.bytes``,
  InvalidMessage (2) for a bad CRC; partitions in error get offset -1; a
  truncated trailing message is dropped; acks=0 never answers and closes the
  connection if any partition failed; acks > 1 beyond the ISR size waits
  ``timeout`` ms and answers RequestTimedOut (7).
* Fetch: a long poll answered once ``min_bytes`` are readable, on an error,
  or after ``max_wait_time``; errors carry high watermark -1.
* Metadata: unknown topics are auto-created and answered LeaderNotAvailable (5)
  with no partitions; partitions with a stopped replica answer
  ReplicaNotAvailable (9) with only live replicas listed.
* OffsetFetch v0: a partition with no committed offset answers offset -1,
  metadata "" and UnknownTopicOrPartition (3), exactly as 0.8.2 does.
"""

import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Optional

from tornado import gen
from tornado.concurrent import Future
from tornado.ioloop import IOLoop

from kiel.exc import (
    CompressionError,
    ConfigError,
    CorruptMessageError,
    InvalidMessageError,
    InvalidTopicError,
    LeaderNotAvailableError,
    MessageSetSizeTooLargeError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
    OffsetMetadataTooLargeError,
    OffsetOutOfRangeError,
    ProtocolError,
    ReplicaNotAvailableError,
    RequestTimedOutError,
    UnknownBrokerError,
    UnknownTopicOrPartitionError,
    UnsupportedCodecError,
    ZooKeeperError,
)
from kiel.protocol import (
    BrokerMetadata,
    FetchRequest,
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicResponse,
    PartitionMetadata,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
    TopicMetadata,
)
from kiel.protocol.messages import assign_offsets, iter_message_boundaries
from kiel.testing.broker.log import index_message_set
from kiel.testing.broker.state import NO_LEADER, PartitionState, validate_topic_name

if TYPE_CHECKING:  # pragma: no cover
    from kiel.testing.broker.core import ClusterCore
    from kiel.testing.broker.server import BrokerServer

__all__ = ["RequestHandlers"]

NONE = 0
UNKNOWN = UnknownBrokerError.errno
OFFSET_OUT_OF_RANGE = OffsetOutOfRangeError.errno
INVALID_MESSAGE = InvalidMessageError.errno
UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.errno
LEADER_NOT_AVAILABLE = LeaderNotAvailableError.errno
NOT_LEADER = NotLeaderForPartitionError.errno
REQUEST_TIMED_OUT = RequestTimedOutError.errno
REPLICA_NOT_AVAILABLE = ReplicaNotAvailableError.errno
MESSAGE_SIZE_TOO_LARGE = MessageSizeTooLargeError.errno
OFFSET_METADATA_TOO_LARGE = OffsetMetadataTooLargeError.errno
INVALID_TOPIC = InvalidTopicError.errno
MESSAGE_SET_SIZE_TOO_LARGE = MessageSetSizeTooLargeError.errno
COORDINATOR_NOT_AVAILABLE = 15

_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
_i64 = struct.Struct(">q")
_fetch_partition_header = struct.Struct(">ihqi")


class _Close:
    def __repr__(self) -> str:
        return "CLOSE"


def _last_message_in_fetch(frame: bytes) -> Optional[int]:
    """Where the offset of the last whole message of the first partition
    with messages lies in a Fetch v0 response ``frame`` (as
    :meth:`RequestHandlers._fetch_frame` lays it out), or ``None``."""
    pos = 8  # size, correlation id
    (topics,) = _i32.unpack_from(frame, pos)
    pos += 4
    for _ in range(topics):
        (name,) = _i16.unpack_from(frame, pos)
        pos += 2 + name
        (partitions,) = _i32.unpack_from(frame, pos)
        pos += 4
        for _ in range(partitions):
            *_, size = _fetch_partition_header.unpack_from(frame, pos)
            pos += _fetch_partition_header.size
            # A partial message at the end (cut at the fetch size) is not one.
            bounds = list(iter_message_boundaries(memoryview(frame)[pos:pos + size],
                                                  strict=False))
            if bounds:
                return pos + bounds[-1].start
            pos += size
    return None


class RequestHandlers:
    """The API handlers of one broker."""

    #: Returned by a handler when the connection must be closed without an answer.
    CLOSE = _Close()

    def __init__(self, core: "ClusterCore", broker: "BrokerServer") -> None:
        self.core = core
        self.broker = broker
        self._by_key: dict[int, Callable[[Any, Any], Awaitable[Any]]] = {
            0: self.produce,
            1: self.fetch,
            2: self.list_offsets,
            3: self.metadata,
            8: self.offset_commit,
            9: self.offset_fetch,
            10: self.group_coordinator,
        }

    async def handle(self, header: Any, api: Any, request: Any) -> Any:
        """Dispatch to the handler of ``api``.

        An API or version kiel's protocol knows but this broker does not
        implement (ApiVersions, Produce v3, Fetch v4...) closes the
        connection unanswered, as a 0.8.2 broker does.
        """
        handler = self._by_key.get(api.key)
        if handler is None or api.version != 0:
            return self.CLOSE
        return await handler(header, request)

    def _leader_state(self, topic: str, partition: int) -> tuple[int, Optional[PartitionState]]:
        """``(error_code, state)`` for a partition this broker must lead."""
        state = self.core.partition(topic, partition)
        if state is None:
            return UNKNOWN_TOPIC_OR_PARTITION, None
        if state.leader != self.broker.broker_id:
            return NOT_LEADER, None
        return NONE, state

    # -- Produce -----------------------------------------------------------------

    def _append(self, state: PartitionState, message_set: bytes) -> tuple[int, int]:
        """Validate, assign offsets, append; ``(error_code, first_offset)``."""
        config = self.core.config
        log = state.log
        base = log.end_offset
        try:
            # Shallow sizes first, as Log.analyzeAndValidateMessageSet does (no
            # entry can be too large in a set that is not); a partial trailing
            # message is trimmed, a size below the minimum is an InvalidMessage.
            if len(message_set) > config.message_max_bytes:
                for bound in iter_message_boundaries(message_set, strict=False):
                    if bound.end - bound.start > config.message_max_bytes:
                        return MESSAGE_SIZE_TOO_LARGE, -1
            data, count = assign_offsets(message_set, base)
        except CorruptMessageError:
            return INVALID_MESSAGE, -1
        except (CompressionError, UnsupportedCodecError):
            # 0.8.2 fails such a set with an IOException wrapped as KafkaException.
            return UNKNOWN, -1
        except ProtocolError:
            return INVALID_MESSAGE, -1
        if count <= 0:
            return NONE, -1
        if len(data) > config.message_max_bytes:
            # Re-checked after recompression, as 0.8.2 does.
            if index_message_set(data)[3] > config.message_max_bytes:
                return MESSAGE_SIZE_TOO_LARGE, -1
        if len(data) > config.segment_bytes:
            return MESSAGE_SET_SIZE_TOO_LARGE, -1
        log.append(data, base + count)
        return NONE, base

    async def produce(self, header: Any, request: ProduceRequest) -> Any:
        acks = request.required_acks
        topics: list[tuple[str, list[list[int]]]] = []
        failed = 0
        total = 0
        waiting: list[PartitionState] = []
        for topic_data in request.topics:
            partitions: list[list[int]] = []
            for data in topic_data.partitions:
                total += 1
                code, state = self._leader_state(topic_data.topic, data.partition)
                offset = -1
                if state is not None:
                    code, offset = self._append(state, data.message_set)
                    if code == NONE and acks > 1 and len(state.isr) < acks:
                        waiting.append(state)
                if code != NONE:
                    failed += 1
                partitions.append([data.partition, code, offset])
            topics.append((topic_data.topic, partitions))
        if acks == 0:
            return self.CLOSE if failed else None
        if waiting and failed < total:
            # DelayedProduce: more acks than in-sync replicas never arrive; the
            # request expires after its timeout with RequestTimedOut.
            await gen.sleep(max(request.timeout, 0) / 1000.0)
            pending = {id(state) for state in waiting if len(state.isr) < acks}
            for topic, partitions in topics:
                for row in partitions:
                    state = self.core.partition(topic, row[0])
                    if state is not None and id(state) in pending and row[1] == NONE:
                        row[1] = REQUEST_TIMED_OUT
        return ProduceResponse([
            ProduceTopicResponse(topic, [ProducePartitionResponse(*row) for row in partitions])
            for topic, partitions in topics
        ])

    # -- Fetch -------------------------------------------------------------------

    def _fetch_status(self, request: FetchRequest) -> tuple[int, bool]:
        """``(readable_bytes, any_error)`` of a fetch right now."""
        readable = 0
        for topic_data in request.topics:
            for data in topic_data.partitions:
                code, state = self._leader_state(topic_data.topic, data.partition)
                if state is None:
                    return readable, True
                try:
                    readable += state.log.readable(data.fetch_offset, data.max_bytes)
                except OffsetOutOfRangeError:
                    return readable, True
                if data.max_bytes < 0:
                    return readable, True
        return readable, False

    async def fetch(self, header: Any, request: FetchRequest) -> bytes:
        count = sum(len(t.partitions) for t in request.topics)
        readable, error = self._fetch_status(request)
        if request.max_wait_time > 0 and count > 0 and readable < request.min_bytes and not error:
            await self._wait_for_data(request)
        return self._fetch_frame(header.correlation_id, request)

    async def _wait_for_data(self, request: FetchRequest) -> None:
        """The fetch purgatory: sleep until min_bytes are readable, an error, or max_wait."""
        loop = IOLoop.current()
        deadline = loop.time() + request.max_wait_time / 1000.0
        logs = set()
        for topic_data in request.topics:
            for data in topic_data.partitions:
                state = self.core.partition(topic_data.topic, data.partition)
                if state is not None:
                    logs.add(state.log)
        wake: Future = Future()

        def check() -> None:
            if wake.done():
                return
            readable, error = self._fetch_status(request)
            if error or readable >= request.min_bytes or not self.broker.running:
                wake.set_result(None)

        for log in logs:
            log.waiters.add(check)
        def expire() -> None:
            if not wake.done():
                wake.set_result(None)

        timeout = loop.call_at(deadline, expire)
        try:
            await wake
        finally:
            loop.remove_timeout(timeout)
            for log in logs:
                log.waiters.discard(check)

    def corrupt_offsets(self, frame: bytes) -> bytes:
        """``frame`` (a Fetch answer), or a copy whose last whole message's
        offset an offset-shift fault rule raised (the rule used up only on
        an answer that carries a message). No CRC covers an offset."""
        at = _last_message_in_fetch(frame)
        if at is None:
            return frame
        delta = self.core.faults.take_offset_shift(self.broker.broker_id)
        if not delta:
            return frame
        out = bytearray(frame)
        (offset,) = _i64.unpack_from(out, at)
        _i64.pack_into(out, at, offset + delta)
        return bytes(out)

    def _fetch_frame(self, correlation_id: int, request: FetchRequest) -> bytes:
        """Read every partition and encode the response frame in one pass (one copy)."""
        parts: list[Any] = [b"", _i32.pack(correlation_id), _i32.pack(len(request.topics))]
        views: list[memoryview] = []
        try:
            for topic_data in request.topics:
                name = topic_data.topic.encode("utf-8")
                parts += [_i16.pack(len(name)), name, _i32.pack(len(topic_data.partitions))]
                for data in topic_data.partitions:
                    code, state = self._leader_state(topic_data.topic, data.partition)
                    view: Optional[memoryview] = None
                    hw = -1
                    if state is not None:
                        if data.max_bytes < 0:
                            code = UNKNOWN  # 0.8.2: IllegalArgumentException for a negative size
                        else:
                            try:
                                view = state.log.read(data.fetch_offset, data.max_bytes)
                                hw = state.log.end_offset
                            except OffsetOutOfRangeError:
                                code = OFFSET_OUT_OF_RANGE
                    size = len(view) if view is not None else 0
                    parts.append(_fetch_partition_header.pack(data.partition, code, hw, size))
                    if view is not None and size:
                        parts.append(view)
                        views.append(view)
            parts[0] = _i32.pack(sum(len(p) for p in parts))
            return b"".join(parts)
        finally:
            for view in views:
                view.release()

    # -- ListOffsets ---------------------------------------------------------------

    async def list_offsets(self, header: Any, request: ListOffsetsRequest) -> ListOffsetsResponse:
        topics = []
        for topic_data in request.topics:
            partitions = []
            for data in topic_data.partitions:
                if request.replica_id == -2:  # debugging client: any replica answers
                    state = self.core.partition(topic_data.topic, data.partition)
                    code = NONE if state is not None else UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code, state = self._leader_state(topic_data.topic, data.partition)
                offsets: list[int] = []
                if state is not None:
                    offsets = state.log.offsets_before(data.timestamp, data.max_num_offsets)
                partitions.append(ListOffsetsPartitionResponse(data.partition, code, offsets))
            topics.append(ListOffsetsTopicResponse(topic_data.topic, partitions))
        return ListOffsetsResponse(topics)

    # -- Metadata ------------------------------------------------------------------

    def _partition_metadata(self, state: PartitionState) -> PartitionMetadata:
        alive = set(self.core.alive_ids())
        replicas = [r for r in state.replicas if r in alive]
        isr = [r for r in state.isr if r in alive]
        leader = state.leader if state.leader in alive else NO_LEADER
        if leader == NO_LEADER:
            code = LEADER_NOT_AVAILABLE
        elif len(replicas) < len(state.replicas) or len(isr) < len(state.isr):
            code = REPLICA_NOT_AVAILABLE
        else:
            code = NONE
        return PartitionMetadata(code, state.partition, leader, replicas, isr)

    def _topic_metadata(self, name: str) -> TopicMetadata:
        topic = self.core.topics[name]
        return TopicMetadata(NONE, name, [self._partition_metadata(s)
                                          for _, s in sorted(topic.partitions.items())])

    async def metadata(self, header: Any, request: MetadataRequest) -> MetadataResponse:
        core = self.core
        brokers = [BrokerMetadata(b.broker_id, b.host, b.port) for b in core.alive_brokers()]
        if not request.topics:
            return MetadataResponse(brokers, [self._topic_metadata(n) for n in sorted(core.topics)])
        topics = []
        seen = set()
        for name in request.topics:
            if name in seen:
                continue
            seen.add(name)
            if name in core.topics:
                topics.append(self._topic_metadata(name))
            elif core.config.auto_create_topics:
                if validate_topic_name(name) is not None:
                    # 0.8.2: the InvalidTopicException escapes getTopicMetadata and
                    # handleError answers every requested topic with its code, no brokers.
                    return MetadataResponse([], [TopicMetadata(INVALID_TOPIC, t, [])
                                                 for t in dict.fromkeys(request.topics)])
                code = LEADER_NOT_AVAILABLE
                try:
                    await core.create_topic(name, cap_replication=True)
                except ConfigError:
                    # Created meanwhile by another request (TopicExistsException: let it go),
                    # or no live broker to place it on.
                    pass
                except ZooKeeperError:
                    # ZooKeeper is down (a test may have stopped it): the creation failed
                    # as it would in 0.8.2, whose handleError answers the exception's code.
                    code = UNKNOWN
                topics.append(TopicMetadata(code, name, []))
            else:
                topics.append(TopicMetadata(UNKNOWN_TOPIC_OR_PARTITION, name, []))
        return MetadataResponse(brokers, topics)

    # -- offsets (v0, ZooKeeper) -------------------------------------------------------

    async def offset_commit(self, header: Any,
                            request: OffsetCommitRequest) -> OffsetCommitResponse:
        core = self.core
        topics = []
        for topic_data in request.topics:
            partitions = []
            for data in topic_data.partitions:
                if topic_data.topic not in core.topics:
                    code = UNKNOWN_TOPIC_OR_PARTITION
                elif data.metadata is not None and \
                        len(data.metadata) > core.config.offset_metadata_max_bytes:
                    code = OFFSET_METADATA_TOO_LARGE
                else:
                    try:
                        await core.commit_offset(request.group_id, topic_data.topic,
                                                 data.partition, data.offset)
                        code = NONE
                    except ZooKeeperError:
                        code = UNKNOWN
                partitions.append(OffsetCommitPartitionResponse(data.partition, code))
            topics.append(OffsetCommitTopicResponse(topic_data.topic, partitions))
        return OffsetCommitResponse(topics)

    async def offset_fetch(self, header: Any, request: OffsetFetchRequest) -> OffsetFetchResponse:
        core = self.core
        topics = []
        for topic_data in request.topics:
            partitions = []
            for partition in topic_data.partitions:
                offset, code = -1, UNKNOWN_TOPIC_OR_PARTITION
                if topic_data.topic in core.topics:
                    try:
                        raw = await core.fetch_offset(request.group_id, topic_data.topic, partition)
                    except ZooKeeperError:
                        raw, code = None, UNKNOWN
                    if raw is not None:
                        try:
                            offset, code = int(raw.decode("ascii").strip()), NONE
                        except (UnicodeDecodeError, ValueError):
                            offset, code = -1, UNKNOWN  # NumberFormatException in 0.8.2
                partitions.append(OffsetFetchPartitionResponse(partition, offset, "", code))
            topics.append(OffsetFetchTopicResponse(topic_data.topic, partitions))
        return OffsetFetchResponse(topics)

    async def group_coordinator(self, header: Any,
                                request: GroupCoordinatorRequest) -> GroupCoordinatorResponse:
        broker = self.core.coordinator_for(request.group_id)
        if broker is None:
            return GroupCoordinatorResponse(COORDINATOR_NOT_AVAILABLE, -1, "", -1)
        return GroupCoordinatorResponse(NONE, broker.broker_id, broker.host, broker.port)

    # -- injected errors -------------------------------------------------------------

    def error_response(self, header: Any, api: Any, request: Any, code: int) -> Any:
        """A response of ``api`` that answers every partition (or the request) with ``code``."""
        key = api.key
        if key == 0:
            if request.required_acks == 0:
                return self.CLOSE
            return ProduceResponse([
                ProduceTopicResponse(t.topic, [ProducePartitionResponse(p.partition, code, -1)
                                               for p in t.partitions])
                for t in request.topics])
        if key == 1:
            parts: list[bytes] = [b"", _i32.pack(header.correlation_id),
                                  _i32.pack(len(request.topics))]
            for t in request.topics:
                name = t.topic.encode("utf-8")
                parts += [_i16.pack(len(name)), name, _i32.pack(len(t.partitions))]
                parts += [_fetch_partition_header.pack(p.partition, code, -1, 0)
                          for p in t.partitions]
            parts[0] = _i32.pack(sum(len(p) for p in parts))
            return b"".join(parts)
        if key == 2:
            return ListOffsetsResponse([
                ListOffsetsTopicResponse(
                    t.topic, [ListOffsetsPartitionResponse(p.partition, code, [])
                              for p in t.partitions])
                for t in request.topics])
        if key == 3:
            names = list(dict.fromkeys(request.topics)) or sorted(self.core.topics)
            brokers = [BrokerMetadata(b.broker_id, b.host, b.port)
                       for b in self.core.alive_brokers()]
            return MetadataResponse(brokers, [TopicMetadata(code, n, []) for n in names])
        if key == 8:
            return OffsetCommitResponse([
                OffsetCommitTopicResponse(t.topic, [OffsetCommitPartitionResponse(p.partition, code)
                                                    for p in t.partitions])
                for t in request.topics])
        if key == 9:
            return OffsetFetchResponse([
                OffsetFetchTopicResponse(t.topic, [OffsetFetchPartitionResponse(p, -1, "", code)
                                                   for p in t.partitions])
                for t in request.topics])
        return GroupCoordinatorResponse(code, -1, "", -1)

