"""OffsetCommit v0 (api key 8): commit a group's offsets (stored in ZooKeeper by 0.8.x).

Wire grammar::

    OffsetCommitRequest  => ConsumerGroup(string) [TopicData]
      TopicData          => TopicName(string) [PartitionData]
      PartitionData      => Partition(int32) Offset(int64) Metadata(string)
    OffsetCommitResponse => [TopicResponse]
      TopicResponse      => TopicName(string) [PartitionResponse]
      PartitionResponse  => Partition(int32) ErrorCode(int16)

A 0.8.2 broker writes v0 commits to
``/consumers/<group>/offsets/<topic>/<partition>`` in ZooKeeper.
"""
from typing import Annotated, List, NamedTuple

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Int16, Int32, Int64, String


class OffsetCommitPartitionData(NamedTuple):
    partition: Annotated[int, Int32]
    offset: Annotated[int, Int64]
    metadata: Annotated[str, String]


class OffsetCommitTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[OffsetCommitPartitionData], Array(OffsetCommitPartitionData)]


class OffsetCommitRequest(NamedTuple):
    group_id: Annotated[str, String]
    topics: Annotated[List[OffsetCommitTopicData], Array(OffsetCommitTopicData)]


class OffsetCommitPartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]


class OffsetCommitTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[OffsetCommitPartitionResponse], Array(OffsetCommitPartitionResponse)]


class OffsetCommitResponse(NamedTuple):
    topics: Annotated[List[OffsetCommitTopicResponse], Array(OffsetCommitTopicResponse)]


OFFSET_COMMIT_V0 = register(Api(8, 0, "OffsetCommit", OffsetCommitRequest, OffsetCommitResponse))
