"""ListOffsets v0 (api key 2, "Offsets"): offsets before a time.

Wire grammar::

    OffsetRequest  => ReplicaId(int32) [TopicData]
      TopicData    => TopicName(string) [PartitionData]
      PartitionData => Partition(int32) Time(int64) MaxNumberOfOffsets(int32)
    OffsetResponse => [TopicResponse]
      TopicResponse => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) ErrorCode(int16) [Offset(int64)]

``timestamp`` is :data:`LATEST` (-1), :data:`EARLIEST` (-2) or milliseconds
since the epoch; a 0.8 broker answers a timestamp at log-segment granularity
with up to ``max_num_offsets`` segment start offsets, newest first.
"""
from typing import Annotated, List, NamedTuple

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Int16, Int32, Int64, String

LATEST = -1
EARLIEST = -2


class ListOffsetsPartitionData(NamedTuple):
    partition: Annotated[int, Int32]
    timestamp: Annotated[int, Int64]
    max_num_offsets: Annotated[int, Int32]


class ListOffsetsTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[ListOffsetsPartitionData], Array(ListOffsetsPartitionData)]


class ListOffsetsRequest(NamedTuple):
    replica_id: Annotated[int, Int32]
    topics: Annotated[List[ListOffsetsTopicData], Array(ListOffsetsTopicData)]


class ListOffsetsPartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    offsets: Annotated[List[int], Array(Int64)]


class ListOffsetsTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[ListOffsetsPartitionResponse], Array(ListOffsetsPartitionResponse)]


class ListOffsetsResponse(NamedTuple):
    topics: Annotated[List[ListOffsetsTopicResponse], Array(ListOffsetsTopicResponse)]


LIST_OFFSETS_V0 = register(Api(2, 0, "ListOffsets", ListOffsetsRequest, ListOffsetsResponse))
