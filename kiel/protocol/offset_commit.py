"""OffsetCommit v0 and v2 (api key 8): commit a group's offsets.

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
"""
from typing import Annotated, NamedTuple

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Int16, Int32, Int64, String

#: ``generation_id`` of a commit from outside any broker-side group.
STANDALONE_GENERATION = -1
#: ``retention_time`` that keeps the broker's default retention.
DEFAULT_RETENTION = -1


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
