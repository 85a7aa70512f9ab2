"""The shapes every layer shares: :class:`TopicPartition`, :class:`Record`,
:class:`RecordMetadata`, :class:`GroupMetadata`.

Standard library only, so :mod:`kiel.protocol` can build these very objects
while decoding (no copy between the wire and the application).

A partition has exactly one spelling inside kiel, :class:`TopicPartition`.
The ``"topic:partition"`` strings of the allocator plug-in interface
(compatible with the original kiel) exist only at that boundary; see
:func:`kiel.allocators.format_partition` and
:func:`kiel.allocators.parse_partition`.
"""

import sys
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Optional, TypeVar

__all__ = [
    "GroupMetadata",
    "Header",
    "K",
    "RawRecord",
    "Record",
    "RecordMetadata",
    "TopicPartition",
    "V",
]

#: The type of a record's key once the consumer's key deserializer ran.
K = TypeVar("K")
#: The type of a record's value once the consumer's value deserializer ran.
V = TypeVar("V")

#: One record header (magic 2): a text key and a bytes value, or ``None``.
Header = tuple[str, Optional[bytes]]


class TopicPartition(NamedTuple):
    """One partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}"


class GroupMetadata(NamedTuple):
    """Who consumed the offsets a transaction commits (KIP-447).

    A transactional producer sends it with the offsets
    (``send_offsets_to_transaction``) so the group coordinator can refuse the
    commit of a member that is no longer in the group (a zombie). A broker
    group's consumer gives its own (``GroupedConsumer.group_metadata()``);
    partitions read outside a group protocol give the group id alone, with
    generation -1, as Java's ``ConsumerGroupMetadata(groupId)`` does, and the
    coordinator then checks nothing but the group id.
    """

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: Optional[str] = None


class RecordMetadata(NamedTuple):
    """Where an acknowledged record was written.

    ``offset`` is -1 when the producer does not wait for acknowledgements
    (``required_acks=0``).
    """

    topic: str
    partition: int
    offset: int


# Strategy: a generic NamedTuple (``Record[K, V]``) is what users annotate
# with, so ``record.value`` has the deserializer's type, not ``bytes``.
# Python only accepts Generic in a NamedTuple's bases from 3.11 on; older
# interpreters get the same class without the type parameters, and
# ``Record[...]`` there returns the class itself.
if sys.version_info >= (3, 11) or TYPE_CHECKING:

    class Record(NamedTuple, Generic[K, V]):
        """One consumed message.

        ``key`` and ``value`` are ``bytes`` (copies, never views into a fetch
        buffer) or ``None`` for null, unless the consumer was given
        deserializers: then they are what those return. ``topic`` and
        ``partition`` are always set.

        The fields after ``value`` have defaults, so code that builds a
        ``Record`` positionally from its first five or six fields keeps
        working; code that unpacks one must take all eight (or use names).
        """

        topic: str
        partition: int
        offset: int
        key: K
        value: V
        #: Epoch milliseconds (magic 1 and later; ``None`` for magic-0 messages).
        timestamp: Optional[int] = None
        #: 0 (CreateTime: set by the producer) or 1 (LogAppendTime: set by the
        #: broker); ``None`` for magic-0 messages, which carry no timestamp.
        timestamp_type: Optional[int] = None
        #: The record's headers (magic 2), in order; ``()`` when it has none.
        headers: tuple[Header, ...] = ()

else:  # pragma: no cover - Python < 3.11

    class Record(NamedTuple):
        topic: str
        partition: int
        offset: int
        key: Any
        value: Any
        timestamp: Optional[int] = None
        timestamp_type: Optional[int] = None
        headers: tuple[Header, ...] = ()

    # Set after the class is made: NamedTuple builds its class anew from the
    # fields, and a __class_getitem__ defined in the body would reach it as
    # a plain function, not the implicit classmethod of an ordinary class.
    Record.__class_getitem__ = classmethod(lambda cls, item: cls)  # type: ignore[attr-defined]
    Record.__doc__ = "One consumed message (see the Python 3.11+ definition)."


#: A record as decoded from the wire, before any deserializer.
RawRecord = Record[Optional[bytes], Optional[bytes]]
