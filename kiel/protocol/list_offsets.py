"""ListOffsets v0 and v1 (api key 2, "Offsets"): offsets for a time.

Wire grammar (v0)::

    OffsetRequest  => ReplicaId(int32) [TopicData]
      TopicData    => TopicName(string) [PartitionData]
      PartitionData => Partition(int32) Time(int64) MaxNumberOfOffsets(int32)
    OffsetResponse => [TopicResponse]
      TopicResponse => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) ErrorCode(int16) [Offset(int64)]

``timestamp`` is :data:`LATEST` (-1), :data:`EARLIEST` (-2) or milliseconds
since the epoch; a 0.8 broker answers a timestamp at log-segment granularity
with up to ``max_num_offsets`` segment start offsets, newest first.

Wire grammar (v1, Kafka 0.10.1+)::

    ListOffsetsRequest v1  => ReplicaId(int32) [TopicData]
      TopicData     => TopicName(string) [PartitionData]
      PartitionData => Partition(int32) Timestamp(int64)
    ListOffsetsResponse v1 => [TopicResponse]
      TopicResponse => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) ErrorCode(int16) Timestamp(int64) Offset(int64)

Wire grammar (v2, Kafka 0.11+)::

    ListOffsetsRequest v2  => ReplicaId(int32) IsolationLevel(int8) [TopicData]   (TopicData as v1)
    ListOffsetsResponse v2 => ThrottleTimeMs(int32) [TopicResponse]          (TopicResponse as v1)

v2 adds the isolation level: with 1 (read committed, see
:data:`kiel.protocol.fetch.READ_COMMITTED`) :data:`LATEST` is the last
stable offset (the first offset of a transaction still open, else the high
watermark), not the high watermark.

v1 is exact: the answer is the first offset whose record timestamp is at or
after ``timestamp`` (with that record's timestamp), or offset -1 when no
record is that recent. For :data:`LATEST` and :data:`EARLIEST` the
timestamp answered is -1.
"""
from typing import Annotated, NamedTuple

from kiel.protocol.api import Api, flexible_versions, register
from kiel.protocol.primitives import Array, Int8, Int16, Int32, Int64, String

#: Kafka's ``"flexibleVersions": "6+"`` (v7, the admin client's, is in
#: :mod:`kiel.protocol.admin_records`).
flexible_versions(2, 6)

LATEST = -1
EARLIEST = -2


class ListOffsetsPartitionData(NamedTuple):
    partition: Annotated[int, Int32]
    timestamp: Annotated[int, Int64]
    max_num_offsets: Annotated[int, Int32]


class ListOffsetsTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[ListOffsetsPartitionData], Array(ListOffsetsPartitionData)]


class ListOffsetsRequest(NamedTuple):
    replica_id: Annotated[int, Int32]
    topics: Annotated[list[ListOffsetsTopicData], Array(ListOffsetsTopicData)]


class ListOffsetsPartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    offsets: Annotated[list[int], Array(Int64)]


class ListOffsetsTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[ListOffsetsPartitionResponse], Array(ListOffsetsPartitionResponse)]


class ListOffsetsResponse(NamedTuple):
    topics: Annotated[list[ListOffsetsTopicResponse], Array(ListOffsetsTopicResponse)]


LIST_OFFSETS_V0 = register(Api(2, 0, "ListOffsets", ListOffsetsRequest, ListOffsetsResponse))


class ListOffsetsPartitionDataV1(NamedTuple):
    partition: Annotated[int, Int32]
    timestamp: Annotated[int, Int64]


class ListOffsetsTopicDataV1(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[ListOffsetsPartitionDataV1], Array(ListOffsetsPartitionDataV1)]


class ListOffsetsRequestV1(NamedTuple):
    replica_id: Annotated[int, Int32]
    topics: Annotated[list[ListOffsetsTopicDataV1], Array(ListOffsetsTopicDataV1)]


class ListOffsetsPartitionResponseV1(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    timestamp: Annotated[int, Int64]
    offset: Annotated[int, Int64]


class ListOffsetsTopicResponseV1(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[
        list[ListOffsetsPartitionResponseV1], Array(ListOffsetsPartitionResponseV1)
    ]


class ListOffsetsResponseV1(NamedTuple):
    topics: Annotated[list[ListOffsetsTopicResponseV1], Array(ListOffsetsTopicResponseV1)]


LIST_OFFSETS_V1 = register(
    Api(2, 1, "ListOffsets", ListOffsetsRequestV1, ListOffsetsResponseV1)
)


class ListOffsetsRequestV2(NamedTuple):
    replica_id: Annotated[int, Int32]
    isolation_level: Annotated[int, Int8]
    topics: Annotated[list[ListOffsetsTopicDataV1], Array(ListOffsetsTopicDataV1)]


class ListOffsetsResponseV2(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    topics: Annotated[list[ListOffsetsTopicResponseV1], Array(ListOffsetsTopicResponseV1)]


LIST_OFFSETS_V2 = register(
    Api(2, 2, "ListOffsets", ListOffsetsRequestV2, ListOffsetsResponseV2)
)
