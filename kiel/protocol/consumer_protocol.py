"""The embedded "consumer" protocol: what members of a consumer group put in
JoinGroup's ``metadata`` (their subscription) and the leader in SyncGroup's
``assignment`` (each member's partitions). Sans I/O: bytes in, values out.

A group whose ``protocol_type`` is ``"consumer"`` (every Kafka client's
consumer groups) carries these as opaque bytes; the coordinator never reads
them, so every member must read what every other client writes. Each starts
with its own int16 version.

Wire grammar (Apache Kafka's ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment``)::

    Subscription => Version(int16) [Topic(string)] UserData(nullable bytes)
                    [OwnedPartitions]       (v1+)
                    GenerationId(int32)     (v2+, -1 when unknown)
                    RackId(nullable string) (v3+)
      OwnedPartitions => Topic(string) [Partition(int32)]
    Assignment   => Version(int16) [AssignedPartitions] UserData(nullable bytes)
      AssignedPartitions => Topic(string) [Partition(int32)]

The assignment's layout is the same in v0 to v3. Who writes which version:
aiokafka and kafka-python v0 (kafka-python v1 for cooperative-sticky), the
Java client and librdkafka the newest they know (v3). A version newer than
v3 is read with the v3 layout, ignoring the bytes after it (Kafka's rule:
new versions only add fields at the end); bytes after a known version's
fields are ignored too. An empty assignment (``b""``, what a coordinator
hands a member the leader gave nothing) reads as no partitions.

Decoding never raises anything but :class:`kiel.exc.ConsumerProtocolError`
(a :class:`~kiel.exc.ProtocolError`); encoding raises
:class:`kiel.exc.LocalProtocolError` for values the wire cannot carry and
for fields the asked-for version has no room for (rather than dropping
them).

Example::

    data = encode_subscription(ConsumerSubscription(["orders"]), version=0)
    version, subscription = decode_subscription(data)
"""
from typing import Annotated, Any, NamedTuple, Optional

from kiel.exc import ConsumerProtocolError, LocalProtocolError, ProtocolError
from kiel.protocol.primitives import (
    Array,
    Buffer,
    Int16,
    Int32,
    NullableBytes,
    NullableString,
    String,
)
from kiel.protocol.schema import decode, encode

__all__ = [
    "LATEST_VERSION",
    "ConsumerAssignment",
    "ConsumerSubscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

#: The newest version of both layouts kiel knows.
LATEST_VERSION = 3

#: Topic partitions as the protocol carries them: ``[(topic, [partition, ...]), ...]``.
TopicPartitions = list[tuple[str, list[int]]]


class ConsumerSubscription(NamedTuple):
    """A member's subscription (JoinGroup metadata).

    ``owned_partitions`` (v1+, cooperative rebalancing) and ``generation_id``
    (v2+, the generation they were owned in) let the leader keep partitions
    where they are; ``rack_id`` (v3+) is the member's rack. (The default
    ``owned_partitions`` is one list shared by every instance built without
    it: replace it, never append to it.)
    """

    topics: list[str]
    user_data: Optional[bytes] = None
    owned_partitions: TopicPartitions = []
    generation_id: int = -1
    rack_id: Optional[str] = None


class ConsumerAssignment(NamedTuple):
    """What the leader gives one member (SyncGroup assignment)."""

    partitions: TopicPartitions
    user_data: Optional[bytes] = None


# --------------------------------------------------------------------------
# The wire layouts, one struct per version (the version itself comes first).


class _Header(NamedTuple):
    version: Annotated[int, Int16]


class _TopicPartitions(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[int], Array(Int32)]


class _SubscriptionV0(NamedTuple):
    topics: Annotated[list[str], Array(String)]
    user_data: Annotated[Optional[bytes], NullableBytes]


class _SubscriptionV1(NamedTuple):
    topics: Annotated[list[str], Array(String)]
    user_data: Annotated[Optional[bytes], NullableBytes]
    owned_partitions: Annotated[list[_TopicPartitions], Array(_TopicPartitions)]


class _SubscriptionV2(NamedTuple):
    topics: Annotated[list[str], Array(String)]
    user_data: Annotated[Optional[bytes], NullableBytes]
    owned_partitions: Annotated[list[_TopicPartitions], Array(_TopicPartitions)]
    generation_id: Annotated[int, Int32]


class _SubscriptionV3(NamedTuple):
    topics: Annotated[list[str], Array(String)]
    user_data: Annotated[Optional[bytes], NullableBytes]
    owned_partitions: Annotated[list[_TopicPartitions], Array(_TopicPartitions)]
    generation_id: Annotated[int, Int32]
    rack_id: Annotated[Optional[str], NullableString]


class _Assignment(NamedTuple):
    partitions: Annotated[list[_TopicPartitions], Array(_TopicPartitions)]
    user_data: Annotated[Optional[bytes], NullableBytes]


_SUBSCRIPTIONS: tuple[type, ...] = (
    _SubscriptionV0, _SubscriptionV1, _SubscriptionV2, _SubscriptionV3,
)
#: ConsumerSubscription's defaults: what a version without the field reads as.
_DEFAULTS = ConsumerSubscription([])


def _check_version(version: int, what: str) -> None:
    if type(version) is not int or not 0 <= version <= LATEST_VERSION:
        raise LocalProtocolError(
            f"{what} version must be 0 to {LATEST_VERSION}, got {version!r}"
        )


def _pairs(what: str, value: TopicPartitions) -> list[_TopicPartitions]:
    """``[(topic, partitions)]`` as wire structs (a dict is refused, not iterated)."""
    if not isinstance(value, (list, tuple)):
        raise LocalProtocolError(f"{what} must be a list of (topic, partitions) pairs, "
                                 f"got {type(value).__name__}")
    try:
        return [_TopicPartitions(topic, list(parts)) for topic, parts in value]
    except (TypeError, ValueError) as e:
        raise LocalProtocolError(f"{what} must be (topic, partitions) pairs: {e}") from e


def encode_subscription(sub: ConsumerSubscription, version: int = 0) -> bytes:
    """The JoinGroup metadata of ``sub`` in ``version``'s layout.

    Args:
        sub: the subscription.
        version: 0 to 3; v0 is what every client reads, v1 carries owned
            partitions (cooperative rebalancing), v2 their generation, v3 the rack.

    Returns:
        the bytes, starting with the int16 version.

    Raises:
        LocalProtocolError: an unknown version, a value the wire cannot
            carry, or a field set to other than its default that ``version``
            has no room for (owned partitions in v0, a generation before v2,
            a rack before v3): nothing is dropped silently.
    """
    _check_version(version, "subscription")
    for index, name in ((1, "owned_partitions"), (2, "generation_id"), (3, "rack_id")):
        value = getattr(sub, name)
        is_set = bool(value) if name == "owned_partitions" else value != getattr(_DEFAULTS, name)
        if version < index and is_set:
            raise LocalProtocolError(
                f"subscription v{version} cannot carry {name} (v{index}+): {value!r:.80}"
            )
    fields: list = [sub.topics, sub.user_data]
    if version >= 1:
        fields.append(_pairs("owned_partitions", sub.owned_partitions))
    if version >= 2:
        fields.append(sub.generation_id)
    if version >= 3:
        fields.append(sub.rack_id)
    return encode(_Header(version)) + encode(_SUBSCRIPTIONS[version](*fields))


def encode_assignment(assignment: ConsumerAssignment, version: int = 0) -> bytes:
    """The SyncGroup assignment bytes of ``assignment`` (the same layout in v0 to v3).

    Raises:
        LocalProtocolError: an unknown version or a value the wire cannot carry.
    """
    _check_version(version, "assignment")
    body = _Assignment(_pairs("partitions", assignment.partitions), assignment.user_data)
    return encode(_Header(version)) + encode(body)


def _read_version(data: Buffer, what: str) -> tuple[int, int]:
    """The version at the start of ``data`` and where the layout starts.

    Raises:
        ConsumerProtocolError: no version, or a negative one.
    """
    try:
        header, offset = decode(_Header, data)
    except ProtocolError as e:
        raise ConsumerProtocolError(f"{what} has no version: {e.message}") from e
    if header.version < 0:
        raise ConsumerProtocolError(f"{what} has a negative version {header.version}")
    return header.version, offset


def decode_subscription(data: Buffer) -> tuple[int, ConsumerSubscription]:
    """Read a member's JoinGroup metadata.

    Args:
        data: the bytes (``bytes``, ``bytearray`` or ``memoryview``).

    Returns:
        ``(version, subscription)``: the version the member wrote, and the
        subscription with the defaults for what that version does not carry.

    Raises:
        ConsumerProtocolError: truncated bytes, a negative version, or garbage.
    """
    version, offset = _read_version(data, "subscription")
    layout = _SUBSCRIPTIONS[min(version, LATEST_VERSION)]
    try:
        body: Any
        body, _ = decode(layout, data, offset)
    except ProtocolError as e:
        raise ConsumerProtocolError(f"subscription v{version} does not parse: {e.message}",
                                    offset=e.context.get("offset")) from e
    values = body._asdict()
    # A list of its own even in v0 (the class default is one shared list).
    values["owned_partitions"] = [(tp.topic, tp.partitions)
                                  for tp in values.get("owned_partitions", [])]
    return version, ConsumerSubscription(**values)


def decode_assignment(data: Buffer) -> tuple[int, ConsumerAssignment]:
    """Read the assignment the leader gave a member.

    Args:
        data: the bytes; empty bytes read as no partitions (v0).

    Returns:
        ``(version, assignment)``.

    Raises:
        ConsumerProtocolError: truncated bytes, a negative version, or garbage.
    """
    if len(data) == 0:
        return 0, ConsumerAssignment([])
    version, offset = _read_version(data, "assignment")
    try:
        body: _Assignment
        body, _ = decode(_Assignment, data, offset)
    except ProtocolError as e:
        raise ConsumerProtocolError(f"assignment v{version} does not parse: {e.message}",
                                    offset=e.context.get("offset")) from e
    return version, ConsumerAssignment(
        [(tp.topic, tp.partitions) for tp in body.partitions], body.user_data
    )
