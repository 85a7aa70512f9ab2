"""OffsetFetch v0 (api key 9): read a group's committed offsets.

Wire grammar::

    OffsetFetchRequest  => ConsumerGroup(string) [TopicData]
      TopicData         => TopicName(string) [Partition(int32)]
    OffsetFetchResponse => [TopicResponse]
      TopicResponse     => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) Offset(int64) Metadata(string) ErrorCode(int16)

A 0.8.2 broker answers v0 from ZooKeeper; a partition with no committed offset
comes back with offset -1 and an empty metadata string (error code 0 or 3,
depending on the broker version).
"""
from typing import Annotated, List, NamedTuple

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Int16, Int32, Int64, String


class OffsetFetchTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[int], Array(Int32)]


class OffsetFetchRequest(NamedTuple):
    group_id: Annotated[str, String]
    topics: Annotated[List[OffsetFetchTopicData], Array(OffsetFetchTopicData)]


class OffsetFetchPartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    offset: Annotated[int, Int64]
    metadata: Annotated[str, String]
    error_code: Annotated[int, Int16]


class OffsetFetchTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[OffsetFetchPartitionResponse], Array(OffsetFetchPartitionResponse)]


class OffsetFetchResponse(NamedTuple):
    topics: Annotated[List[OffsetFetchTopicResponse], Array(OffsetFetchTopicResponse)]


OFFSET_FETCH_V0 = register(Api(9, 0, "OffsetFetch", OffsetFetchRequest, OffsetFetchResponse))
