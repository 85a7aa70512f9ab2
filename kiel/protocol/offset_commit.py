"""OffsetCommit v0, v2 and v7 (api key 8): commit a group's offsets.

Wire grammar (v0)::

    OffsetCommitRequest  => ConsumerGroup(string) [TopicData]
      TopicData          => TopicName(string) [PartitionData]
      PartitionData      => Partition(int32) Offset(int64) Metadata(string)
    OffsetCommitResponse => [TopicResponse]
      TopicResponse      => TopicName(string) [PartitionResponse]
      PartitionResponse  => Partition(int32) ErrorCode(int16)

A 0.8.2 broker writes v0 commits to
``/consumers/<group>/offsets/<topic>/<partition>`` in ZooKeeper.

Wire grammar (v2, Kafka 0.9+)::

    OffsetCommitRequest v2 => ConsumerGroup(string) GenerationId(int32)
                              MemberId(string) RetentionTime(int64) [TopicData]
                              (TopicData as v0)
    OffsetCommitResponse v2 => (as v0)

v2 commits are stored by the broker (the offsets topic), not in ZooKeeper.
A member outside any broker-side group (kiel's grouped consumer splits
partitions through ZooKeeper) commits with :data:`STANDALONE_GENERATION`
and an empty member id; ``retention_time`` -1 keeps the broker's default.

Wire grammar (v7, Kafka 2.3+)::

    OffsetCommitRequest v7  => ConsumerGroup(string) GenerationId(int32)
                               MemberId(string) GroupInstanceId(nullable string)
                               [TopicData]
      TopicData             => TopicName(string) [PartitionData]
      PartitionData         => Partition(int32) Offset(int64) LeaderEpoch(int32)
                               Metadata(nullable string)
    OffsetCommitResponse v7 => ThrottleTimeMs(int32) (as v0)

No retention time since v5 (the broker's ``offsets.retention.minutes``
alone); ``leader_epoch`` -1 when unknown (:data:`NO_LEADER_EPOCH`); a member
of a broker-coordinated group gives its generation, member id and, when
static, its instance id, so a commit from a member the group has moved past
is refused (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID).
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Int16, Int32, Int64, NullableString, String

#: ``generation_id`` of a commit from outside any broker-side group.
STANDALONE_GENERATION = -1
#: ``retention_time`` that keeps the broker's default retention.
DEFAULT_RETENTION = -1
#: ``leader_epoch`` of a commit that does not know the leader's epoch.
NO_LEADER_EPOCH = -1


class OffsetCommitPartitionData(NamedTuple):
    partition: Annotated[int, Int32]
    offset: Annotated[int, Int64]
    metadata: Annotated[str, String]


class OffsetCommitTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[OffsetCommitPartitionData], Array(OffsetCommitPartitionData)]


class OffsetCommitRequest(NamedTuple):
    group_id: Annotated[str, String]
    topics: Annotated[list[OffsetCommitTopicData], Array(OffsetCommitTopicData)]


class OffsetCommitPartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]


class OffsetCommitTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[OffsetCommitPartitionResponse], Array(OffsetCommitPartitionResponse)]


class OffsetCommitResponse(NamedTuple):
    topics: Annotated[list[OffsetCommitTopicResponse], Array(OffsetCommitTopicResponse)]


OFFSET_COMMIT_V0 = register(Api(8, 0, "OffsetCommit", OffsetCommitRequest, OffsetCommitResponse))


class OffsetCommitRequestV2(NamedTuple):
    group_id: Annotated[str, String]
    generation_id: Annotated[int, Int32]
    member_id: Annotated[str, String]
    retention_time: Annotated[int, Int64]
    topics: Annotated[list[OffsetCommitTopicData], Array(OffsetCommitTopicData)]


class OffsetCommitResponseV2(OffsetCommitResponse):
    """OffsetCommit v2 response (the v0 layout; its own class for the registry)."""

    __slots__ = ()


OFFSET_COMMIT_V2 = register(
    Api(8, 2, "OffsetCommit", OffsetCommitRequestV2, OffsetCommitResponseV2)
)


class OffsetCommitPartitionDataV7(NamedTuple):
    partition: Annotated[int, Int32]
    offset: Annotated[int, Int64]
    leader_epoch: Annotated[int, Int32]
    metadata: Annotated[Optional[str], NullableString]


class OffsetCommitTopicDataV7(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[OffsetCommitPartitionDataV7], Array(OffsetCommitPartitionDataV7)]


class OffsetCommitRequestV7(NamedTuple):
    group_id: Annotated[str, String]
    generation_id: Annotated[int, Int32]
    member_id: Annotated[str, String]
    group_instance_id: Annotated[Optional[str], NullableString]
    topics: Annotated[list[OffsetCommitTopicDataV7], Array(OffsetCommitTopicDataV7)]


class OffsetCommitResponseV7(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    topics: Annotated[list[OffsetCommitTopicResponse], Array(OffsetCommitTopicResponse)]


OFFSET_COMMIT_V7 = register(
    Api(8, 7, "OffsetCommit", OffsetCommitRequestV7, OffsetCommitResponseV7)
)
