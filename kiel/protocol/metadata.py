"""Metadata v0, v1 and v4 (api key 3): brokers, topics, partition leaders and replicas.

Wire grammar (v0)::

    MetadataRequest  => [TopicName(string)]          (empty: all topics)
    MetadataResponse => [Broker] [TopicMetadata]
      Broker         => NodeId(int32) Host(string) Port(int32)
      TopicMetadata  => TopicErrorCode(int16) TopicName(string) [PartitionMetadata]
      PartitionMetadata => PartitionErrorCode(int16) PartitionId(int32) Leader(int32)
                           Replicas([int32]) Isr([int32])

Wire grammar (v1, Kafka 0.10+)::

    MetadataRequest v1  => [TopicName(string)]   (null: all topics; empty: none)
    MetadataResponse v1 => [Broker] ControllerId(int32) [TopicMetadata]
      Broker         => NodeId(int32) Host(string) Port(int32) Rack(nullable string)
      TopicMetadata  => TopicErrorCode(int16) TopicName(string) IsInternal(boolean)
                        [PartitionMetadata]      (PartitionMetadata as v0)

Wire grammar (v4, Kafka 0.11+)::

    MetadataRequest v4  => [TopicName(string)] AllowAutoTopicCreation(boolean)
    MetadataResponse v4 => ThrottleTimeMs(int32) [Broker] ClusterId(nullable string)
                           ControllerId(int32) [TopicMetadata]   (Broker, TopicMetadata as v1)

Mind the change of meaning: an empty topic list asks for every topic in v0
and for none in v1 and v4, where ``None`` (a null array) asks for all.
``AllowAutoTopicCreation`` false keeps a broker that auto-creates topics
(``auto.create.topics.enable``) from creating the unknown ones named: they
are answered UnknownTopicOrPartition instead. Before v4 a broker that
auto-creates does so for every topic a Metadata request names.

A client that must stay responsive sends :class:`DeferredMetadataRequest`
(the same request on the wire): its answer comes back undecoded
(:class:`DeferredMetadata`), and :func:`decode_metadata` decodes it a slice
at a time (a generator the caller drives, giving its event loop a turn
between slices), within :class:`MetadataLimits`, refusing nonsense (negative
ids, ports outside 0-65535) with :class:`~kiel.exc.InvalidMetadataError`.
"""
import struct
from collections.abc import Callable, Generator
from typing import Annotated, Any, NamedTuple, Optional, Union

from kiel.exc import InvalidMetadataError, ProtocolError
from kiel.protocol.api import BY_REQUEST, Api, register
from kiel.protocol.primitives import (
    Array,
    Boolean,
    Buffer,
    Int16,
    Int32,
    NullableString,
    Out,
    String,
    WireType,
)
from kiel.protocol.schema import struct_type


class MetadataRequest(NamedTuple):
    topics: Annotated[list[str], Array(String)]


class BrokerMetadata(NamedTuple):
    node_id: Annotated[int, Int32]
    host: Annotated[str, String]
    port: Annotated[int, Int32]


class PartitionMetadata(NamedTuple):
    error_code: Annotated[int, Int16]
    partition_id: Annotated[int, Int32]
    leader: Annotated[int, Int32]
    replicas: Annotated[list[int], Array(Int32)]
    isr: Annotated[list[int], Array(Int32)]


class TopicMetadata(NamedTuple):
    error_code: Annotated[int, Int16]
    topic: Annotated[str, String]
    partitions: Annotated[list[PartitionMetadata], Array(PartitionMetadata)]


class MetadataResponse(NamedTuple):
    brokers: Annotated[list[BrokerMetadata], Array(BrokerMetadata)]
    topics: Annotated[list[TopicMetadata], Array(TopicMetadata)]


METADATA_V0 = register(Api(3, 0, "Metadata", MetadataRequest, MetadataResponse))


class MetadataRequestV1(NamedTuple):
    #: ``None`` asks for every topic.
    topics: Annotated[Optional[list[str]], Array(String)]


class BrokerMetadataV1(NamedTuple):
    node_id: Annotated[int, Int32]
    host: Annotated[str, String]
    port: Annotated[int, Int32]
    rack: Annotated[Optional[str], NullableString]


class TopicMetadataV1(NamedTuple):
    error_code: Annotated[int, Int16]
    topic: Annotated[str, String]
    is_internal: Annotated[bool, Boolean]
    partitions: Annotated[list[PartitionMetadata], Array(PartitionMetadata)]


class MetadataResponseV1(NamedTuple):
    brokers: Annotated[list[BrokerMetadataV1], Array(BrokerMetadataV1)]
    controller_id: Annotated[int, Int32]
    topics: Annotated[list[TopicMetadataV1], Array(TopicMetadataV1)]


METADATA_V1 = register(Api(3, 1, "Metadata", MetadataRequestV1, MetadataResponseV1))


class MetadataRequestV4(NamedTuple):
    #: ``None`` asks for every topic.
    topics: Annotated[Optional[list[str]], Array(String)]
    #: False: a broker that auto-creates topics leaves the unknown ones named alone.
    allow_auto_topic_creation: Annotated[bool, Boolean]


class MetadataResponseV4(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    brokers: Annotated[list[BrokerMetadataV1], Array(BrokerMetadataV1)]
    cluster_id: Annotated[Optional[str], NullableString]
    controller_id: Annotated[int, Int32]
    topics: Annotated[list[TopicMetadataV1], Array(TopicMetadataV1)]


METADATA_V4 = register(Api(3, 4, "Metadata", MetadataRequestV4, MetadataResponseV4))


# ---------------------------------------------------------------------------
# Metadata answers decoded a slice at a time, within bounds

#: The default bounds of one Metadata answer: far above the clusters kiel
#: meets (hundreds of brokers; ZooKeeper-era clusters keep under about
#: 200,000 partitions), far below what a broken or hostile broker can pack
#: into a 100 MiB frame (about 4.7 million partitions, a gigabyte once
#: decoded). A larger cluster raises them.
DEFAULT_MAX_METADATA_BROKERS = 10_000
DEFAULT_MAX_METADATA_PARTITIONS = 1_000_000


class MetadataLimits(NamedTuple):
    """What one Metadata answer may hold."""

    #: Brokers listed, at most.
    max_brokers: int = DEFAULT_MAX_METADATA_BROKERS
    #: Partitions of all its topics together (and topics), at most.
    max_partitions: int = DEFAULT_MAX_METADATA_PARTITIONS


class _Rest(WireType):
    """The rest of the frame, as bytes: decoded later by its owner."""

    name = "rest of the frame"

    def encode(self, value: Any, out: Out) -> None:
        out.append(bytes(value))

    def decode(self, buf: Buffer, offset: int) -> tuple[bytes, int]:
        return bytes(buf[offset:]), len(buf)


class DeferredMetadataRequest(NamedTuple):
    """A :class:`MetadataRequest` (v0) whose answer is left undecoded."""

    topics: Annotated[list[str], Array(String)]


class DeferredMetadataRequestV1(NamedTuple):
    """A :class:`MetadataRequestV1` whose answer is left undecoded."""

    #: ``None`` asks for every topic.
    topics: Annotated[Optional[list[str]], Array(String)]


class DeferredMetadataRequestV4(NamedTuple):
    """A :class:`MetadataRequestV4` whose answer is left undecoded."""

    #: ``None`` asks for every topic.
    topics: Annotated[Optional[list[str]], Array(String)]
    allow_auto_topic_creation: Annotated[bool, Boolean]


class DeferredMetadata(NamedTuple):
    """A Metadata answer as received, for :func:`decode_metadata`."""

    #: The answer's body (after its correlation id).
    body: Annotated[bytes, _Rest()]


class DeferredMetadataV1(NamedTuple):
    """A Metadata v1 answer as received, for :func:`decode_metadata`."""

    body: Annotated[bytes, _Rest()]


class DeferredMetadataV4(NamedTuple):
    """A Metadata v4 answer as received, for :func:`decode_metadata`."""

    body: Annotated[bytes, _Rest()]


# Strategy: registered by request class only (not by key, which stays the
# eager classes' for brokers decoding requests): a client framing looks the
# request up by its class and decodes the answer as the rest of the frame.
BY_REQUEST[DeferredMetadataRequest] = Api(
    3, 0, "Metadata", DeferredMetadataRequest, DeferredMetadata)
BY_REQUEST[DeferredMetadataRequestV1] = Api(
    3, 1, "Metadata", DeferredMetadataRequestV1, DeferredMetadataV1)
BY_REQUEST[DeferredMetadataRequestV4] = Api(
    3, 4, "Metadata", DeferredMetadataRequestV4, DeferredMetadataV4)

#: Items decoded between two yields of :func:`decode_metadata`.
METADATA_SLICE = 64

_Answer = Union[MetadataResponse, MetadataResponseV1, MetadataResponseV4]


#: Makes a partition's entry from ``(topic, error_code, partition_id,
#: leader, replicas, isr)``, replicas and isr as tuples.
PartitionFactory = Callable[[str, int, int, int, tuple[int, ...], tuple[int, ...]], Any]


def _partition_metadata(_topic: str, error_code: int, partition_id: int, leader: int,
                        replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionMetadata:
    return PartitionMetadata(error_code, partition_id, leader, list(replicas), list(isr))


_PARTITION_HEAD = struct.Struct(">hii")
_COUNT = struct.Struct(">i")


def decode_metadata(
    answer: Union[DeferredMetadata, DeferredMetadataV1, DeferredMetadataV4],
    limits: Optional[MetadataLimits] = None,
    partition: PartitionFactory = _partition_metadata,
) -> Generator[None, None, _Answer]:
    """Decode a deferred Metadata answer, yielding every :data:`METADATA_SLICE`
    items (brokers, topics or partitions) so the caller can let its event
    loop run; returns the answer (``StopIteration.value``).

    Args:
        answer: what a :class:`DeferredMetadataRequest` (or V1, V4) got back.
        limits: the most brokers and partitions the answer may hold
            (default: :class:`MetadataLimits`'s); counts are checked before
            their items are decoded.
        partition: makes each topic's partition entries (default:
            :class:`PartitionMetadata`); a client that keeps its own record
            per partition makes it here, without an object in between.

    Returns:
        a :class:`MetadataResponse` (or :class:`MetadataResponseV1`,
        :class:`MetadataResponseV4`), as
        the eager request would have got (each topic's partitions made by
        ``partition``).

    Raises:
        InvalidMetadataError: more brokers or partitions than ``limits``
            allow, a negative broker or partition id, a leader below -1, a
            negative replica id, or a port outside 0-65535.
        ProtocolError: the body does not decode.
    """
    if limits is None:
        limits = MetadataLimits()
    v4 = isinstance(answer, DeferredMetadataV4)
    v1 = v4 or isinstance(answer, DeferredMetadataV1)
    buf = answer.body
    broker_type = struct_type(BrokerMetadataV1 if v1 else BrokerMetadata)
    pos = throttle_time_ms = 0
    if v4:
        throttle_time_ms, pos = Int32.decode(buf, pos)
    count, pos = _count(buf, pos, "brokers", limits.max_brokers, "max_metadata_brokers")
    brokers: list[Any] = []
    for i in range(count):
        broker, pos = broker_type.decode(buf, pos)
        if broker.node_id < 0 or not 0 <= broker.port <= 65535:
            raise InvalidMetadataError(
                f"broker {broker.node_id} at port {broker.port}: a broker id must be "
                "non-negative and a port within 0-65535"
            )
        brokers.append(broker)
        if not i % METADATA_SLICE:
            yield
    controller_id = 0
    cluster_id: Optional[str] = None
    if v4:
        cluster_id, pos = NullableString.decode(buf, pos)
    if v1:
        controller_id, pos = Int32.decode(buf, pos)
    count, pos = _count(buf, pos, "topics", limits.max_partitions, "max_metadata_partitions")
    left = limits.max_partitions - count  # a topic counts as one, its partitions too
    topics: list[Any] = []
    for _ in range(count):
        error_code, pos = Int16.decode(buf, pos)
        decoded_name, pos = String.decode(buf, pos)
        name = str(decoded_name)  # String (not nullable) never decodes to None
        internal = False
        if v1:
            internal, pos = Boolean.decode(buf, pos)
        n, pos = _count(buf, pos, f"partitions of topic {name!r}", left,
                        "max_metadata_partitions")
        left -= n
        partitions: list[Any] = []
        for i in range(n):
            error_code_p, partition_id, leader, replicas, isr, pos = _partition(buf, pos)
            if partition_id < 0 or leader < -1 or (replicas and min(replicas) < 0) or (
                isr and min(isr) < 0
            ):
                raise _impossible(name, partition_id, leader, replicas, isr)
            partitions.append(partition(name, error_code_p, partition_id, leader, replicas, isr))
            if not i % METADATA_SLICE:
                yield
        topics.append(TopicMetadataV1(error_code, name, internal, partitions) if v1
                      else TopicMetadata(error_code, name, partitions))
        yield
    if pos != len(buf):
        raise ProtocolError(f"{len(buf) - pos} trailing bytes after the Metadata answer",
                            api="Metadata")
    if v4:
        return MetadataResponseV4(throttle_time_ms, brokers, cluster_id, controller_id, topics)
    if v1:
        return MetadataResponseV1(brokers, controller_id, topics)
    return MetadataResponse(brokers, topics)


def _count(buf: bytes, pos: int, what: str, most: int, setting: str) -> tuple[int, int]:
    """An array's count at ``pos``, checked against ``most`` (``-1``, null: 0).

    Raises:
        InvalidMetadataError: above ``most``.
        ProtocolError: it does not decode.
    """
    count, pos = Int32.decode(buf, pos)
    if count == -1:
        return 0, pos
    if count < 0:
        raise ProtocolError(f"invalid count {count} of {what}", api="Metadata")
    if count > most:
        raise InvalidMetadataError(
            f"the Metadata answer holds {count} {what}, more than {setting} allows "
            f"({most} left)"
        )
    return count, pos


def _partition(
    buf: bytes, pos: int
) -> tuple[int, int, int, tuple[int, ...], tuple[int, ...], int]:
    """One PartitionMetadata at ``pos``, its id lists as tuples (no list in
    between): ``(error_code, partition_id, leader, replicas, isr, end)``.

    Raises:
        ProtocolError: it runs past the end of the answer.
    """
    try:
        error_code, partition_id, leader = _PARTITION_HEAD.unpack_from(buf, pos)
        pos += _PARTITION_HEAD.size
        lists = []
        for _ in range(2):
            (n,) = _COUNT.unpack_from(buf, pos)
            pos += 4
            if n < -1 or 4 * n > len(buf) - pos:
                raise ProtocolError(f"invalid replica count {n} in the Metadata answer",
                                    api="Metadata", offset=pos - 4)
            n = max(n, 0)
            lists.append(struct.unpack_from(f">{n}i", buf, pos))
            pos += 4 * n
    except struct.error as e:
        raise ProtocolError("a partition runs past the end of the Metadata answer",
                            api="Metadata", offset=pos) from e
    return error_code, partition_id, leader, lists[0], lists[1], pos


def _impossible(topic: str, partition_id: int, leader: int, replicas: tuple[int, ...],
                isr: tuple[int, ...]) -> InvalidMetadataError:
    """The error for ids no broker writes (negative partition ids, leaders
    below -1, negative replica ids)."""
    return InvalidMetadataError(
        f"partition {partition_id} of {topic!r} (leader {leader}, replicas "
        f"{list(replicas[:8])}, isr {list(isr[:8])}): ids must be non-negative (a leader "
        "-1 when there is none)",
        topic=topic, partition=partition_id,
    )
