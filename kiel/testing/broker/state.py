"""Cluster state of the embedded broker: topics, partitions, leaders, settings.

Pure data and pure functions (replica assignment, topic-name rules, the Java
string hash Kafka uses to pick a group's coordinator); no I/O, no Tornado.
"""

import re
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

from kiel.exc import ConfigError
from kiel.testing.broker.log import DEFAULT_SEGMENT_BYTES, PartitionLog

__all__ = [
    "BrokerConfig",
    "PartitionState",
    "TopicState",
    "assign_replicas",
    "group_partition",
    "java_string_hash",
    "validate_topic_name",
    "NO_LEADER",
]

#: ``leader`` of a partition that has none (Kafka's ``LeaderAndIsr.NoLeader``).
NO_LEADER = -1

#: Kafka 0.8.2 ``message.max.bytes`` default: 1000000 + the 12-byte log overhead.
DEFAULT_MESSAGE_MAX_BYTES = 1000012
#: Kafka 0.8.2 ``offset.metadata.max.bytes`` default.
DEFAULT_OFFSET_METADATA_MAX_BYTES = 4096
#: Kafka 0.8.2 ``socket.request.max.bytes`` default (100 MiB).
DEFAULT_SOCKET_REQUEST_MAX_BYTES = 100 * 1024 * 1024
#: Kafka 0.8.2 ``offsets.topic.num.partitions`` default (used to pick coordinators).
OFFSETS_TOPIC_PARTITIONS = 50

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
_MAX_TOPIC_LENGTH = 255


@dataclass
class BrokerConfig:
    """Settings shared by every broker of an embedded cluster (Kafka's names in brackets).

    Attributes:
        num_partitions: partitions of an auto-created topic [num.partitions].
        default_replication: replicas of an auto-created topic
            [default.replication.factor]; capped at the live brokers.
        auto_create_topics: create unknown topics asked for in Metadata
            [auto.create.topics.enable].
        message_max_bytes: largest message entry accepted [message.max.bytes].
        segment_bytes: roll a log segment at this size [log.segment.bytes].
        segment_messages: also roll at this many messages (kiel only; ``None``: never).
        offset_metadata_max_bytes: largest offset-commit metadata [offset.metadata.max.bytes].
        socket_request_max_bytes: largest request frame [socket.request.max.bytes].
        log_dir: where partition logs live on disk (``None``: memory only) [log.dirs].
        ssl_context: a server-side :class:`ssl.SSLContext`: every broker then
            accepts TLS connections only (kiel only: Kafka 0.8.2 has no TLS;
            it stands in for the SSL listener of Kafka 0.9+ so that clients'
            TLS can be tested over real TCP). ``None``: plain TCP.
    """

    num_partitions: int = 1
    default_replication: int = 1
    auto_create_topics: bool = True
    message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_messages: Optional[int] = None
    offset_metadata_max_bytes: int = DEFAULT_OFFSET_METADATA_MAX_BYTES
    socket_request_max_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES
    log_dir: Optional[str] = None
    ssl_context: Optional[ssl.SSLContext] = None

    def check(self) -> None:
        """Raise :class:`~kiel.exc.ConfigError` for an impossible setting."""
        for name in ("num_partitions", "default_replication", "message_max_bytes",
                     "segment_bytes", "socket_request_max_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.segment_messages is not None and self.segment_messages < 1:
            raise ConfigError(f"segment_messages must be at least 1, not {self.segment_messages}")


@dataclass
class PartitionState:
    """One partition: its replicas, leader, ISR and the (shared) log."""

    topic: str
    partition: int
    replicas: list[int]
    log: PartitionLog
    leader: int = NO_LEADER
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)

    def state_json(self, controller_epoch: int) -> dict[str, object]:
        """The ``/brokers/topics/<t>/partitions/<p>/state`` document."""
        return {
            "controller_epoch": controller_epoch,
            "leader": self.leader,
            "version": 1,
            "leader_epoch": self.leader_epoch,
            "isr": list(self.isr),
        }


@dataclass
class TopicState:
    """One topic and its partitions."""

    name: str
    partitions: dict[int, PartitionState]

    def assignment(self) -> dict[int, list[int]]:
        """``{partition: replicas}``."""
        return {p: list(s.replicas) for p, s in sorted(self.partitions.items())}

    def assignment_json(self) -> dict[str, object]:
        """The ``/brokers/topics/<t>`` document."""
        return {
            "version": 1,
            "partitions": {str(p): replicas for p, replicas in self.assignment().items()},
        }


def validate_topic_name(name: str) -> Optional[str]:
    """Why ``name`` is not a legal Kafka topic name (``None`` if it is).

    Kafka 0.8.2 (``kafka.common.Topic.validate``): 1-255 characters of
    ``[a-zA-Z0-9._-]``, and neither ``.`` nor ``..``.
    """
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > _MAX_TOPIC_LENGTH:
        return f"topic name is longer than {_MAX_TOPIC_LENGTH} characters"
    if not _LEGAL_TOPIC.match(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


def assign_replicas(
    brokers: Sequence[int], partitions: int, replication: int, start_index: int = 0
) -> dict[int, list[int]]:
    """Spread partition replicas over brokers as Kafka 0.8.2's ``AdminUtils`` does.

    The first replica (the preferred leader) of partition ``p`` is broker
    ``(p + start_index) % n``; the others follow at a shift that grows every
    ``n`` partitions, so leaders and followers both spread evenly. Kafka picks
    ``start_index`` at random; callers here pass a counter so runs repeat.

    Args:
        brokers: the live broker ids (sorted).
        partitions: how many partitions.
        replication: replicas per partition.
        start_index: where the round-robin starts.

    Raises:
        ConfigError: ``replication`` exceeds the brokers, or a count is < 1.
    """
    brokers = sorted(brokers)
    n = len(brokers)
    if partitions < 1:
        raise ConfigError(f"a topic needs at least one partition, not {partitions}")
    if replication < 1:
        raise ConfigError(f"replication factor must be at least 1, not {replication}")
    if replication > n:
        raise ConfigError(f"replication factor {replication} larger than available brokers {n}")
    start_index %= n
    shift = start_index
    result: dict[int, list[int]] = {}
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        result[p] = replicas
    return result


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def group_partition(group: str, partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    """The offsets-topic partition of ``group`` (``Utils.abs(group.hashCode) % partitions``)."""
    return (java_string_hash(group) & 0x7FFFFFFF) % partitions
