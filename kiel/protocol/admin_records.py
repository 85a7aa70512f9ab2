"""Records and offsets for administration: DeleteRecords v2 (21) and
ListOffsets v7 (2), both flexible.

Schemas only (see :class:`kiel.admin.Admin`). DeleteRecords v2 (Kafka 2.4+)
moves a partition's log start offset up to ``offset`` (-1: the high
watermark), making everything before it unreadable; the answer is the new
low watermark. ListOffsets v7 (Kafka 3.0+, KIP-734) adds
:data:`MAX_TIMESTAMP` (-3): the offset and time of the record with the
highest timestamp. The consumers keep speaking ListOffsets v1 (its answer
is the same for earliest, latest and a time); only the admin client builds
v7 requests.

Wire grammar (Apache Kafka's message definitions; compact types, tagged
sections)::

    DeleteRecordsRequest v2  => [Topic] TimeoutMs(int32)
      Topic                  => Name(string) [Partition]
      Partition              => PartitionIndex(int32) Offset(int64)
    DeleteRecordsResponse v2 => ThrottleTimeMs(int32) [Topic]
      Topic                  => Name(string) [Partition]
      Partition              => PartitionIndex(int32) LowWatermark(int64) ErrorCode(int16)

    ListOffsetsRequest v7  => ReplicaId(int32) IsolationLevel(int8) [Topic]
      Topic                => Name(string) [Partition]
      Partition            => PartitionIndex(int32) CurrentLeaderEpoch(int32)
                              Timestamp(int64)
    ListOffsetsResponse v7 => ThrottleTimeMs(int32) [Topic]
      Topic                => Name(string) [Partition]
      Partition            => PartitionIndex(int32) ErrorCode(int16) Timestamp(int64)
                              Offset(int64) LeaderEpoch(int32)
"""
from typing import Annotated, NamedTuple

from kiel.protocol.api import Api, flexible_versions, register

# Imported first: list_offsets declares ListOffsets' flexible versions and
# registers v0 and v1 before v7 joins them here. Re-exported.
from kiel.protocol.list_offsets import EARLIEST, LATEST  # noqa: F401
from kiel.protocol.primitives import Array, Int8, Int16, Int32, Int64, String

DELETE_RECORDS_KEY = 21
LIST_OFFSETS_KEY = 2
#: Kafka's ``"flexibleVersions": "2+"`` (ListOffsets' "6+" is declared in
#: :mod:`kiel.protocol.list_offsets`, which registers its first versions).
flexible_versions(DELETE_RECORDS_KEY, 2)

#: ListOffsets timestamps: the record with the highest timestamp (v7+);
#: :data:`EARLIEST` and :data:`LATEST` as in every version.
MAX_TIMESTAMP = -3
#: DeleteRecords' offset for "up to the high watermark".
HIGH_WATERMARK = -1


class DeleteRecordsPartition(NamedTuple):
    """Delete a partition's records before ``offset``."""

    partition_index: Annotated[int, Int32]
    offset: Annotated[int, Int64]


class DeleteRecordsTopic(NamedTuple):
    """One topic's partitions to delete records of."""

    name: Annotated[str, String]
    partitions: Annotated[list[DeleteRecordsPartition], Array(DeleteRecordsPartition)]


class DeleteRecordsRequestV2(NamedTuple):
    """DeleteRecords v2 request."""

    topics: Annotated[list[DeleteRecordsTopic], Array(DeleteRecordsTopic)]
    timeout_ms: Annotated[int, Int32]


class DeleteRecordsPartitionResult(NamedTuple):
    """One partition's answer: its new low watermark, or its error."""

    partition_index: Annotated[int, Int32]
    low_watermark: Annotated[int, Int64]
    error_code: Annotated[int, Int16]


class DeleteRecordsTopicResult(NamedTuple):
    """One topic's partitions' answers."""

    name: Annotated[str, String]
    partitions: Annotated[list[DeleteRecordsPartitionResult], Array(DeleteRecordsPartitionResult)]


class DeleteRecordsResponseV2(NamedTuple):
    """DeleteRecords v2 response."""

    throttle_time_ms: Annotated[int, Int32]
    topics: Annotated[list[DeleteRecordsTopicResult], Array(DeleteRecordsTopicResult)]


class ListOffsetsPartition(NamedTuple):
    """One partition to look up (``current_leader_epoch`` -1: not checked)."""

    partition_index: Annotated[int, Int32]
    current_leader_epoch: Annotated[int, Int32]
    timestamp: Annotated[int, Int64]


class ListOffsetsTopic(NamedTuple):
    """One topic's partitions to look up."""

    name: Annotated[str, String]
    partitions: Annotated[list[ListOffsetsPartition], Array(ListOffsetsPartition)]


class ListOffsetsRequestV7(NamedTuple):
    """ListOffsets v7 request (isolation level 0: read uncommitted, 1: read committed)."""

    replica_id: Annotated[int, Int32]
    isolation_level: Annotated[int, Int8]
    topics: Annotated[list[ListOffsetsTopic], Array(ListOffsetsTopic)]


class ListOffsetsPartitionResponse(NamedTuple):
    """One partition's answer: the offset and its record's timestamp (-1, -1: none)."""

    partition_index: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    timestamp: Annotated[int, Int64]
    offset: Annotated[int, Int64]
    leader_epoch: Annotated[int, Int32]


class ListOffsetsTopicResponse(NamedTuple):
    """One topic's partitions' answers."""

    name: Annotated[str, String]
    partitions: Annotated[list[ListOffsetsPartitionResponse], Array(ListOffsetsPartitionResponse)]


class ListOffsetsResponseV7(NamedTuple):
    """ListOffsets v7 response."""

    throttle_time_ms: Annotated[int, Int32]
    topics: Annotated[list[ListOffsetsTopicResponse], Array(ListOffsetsTopicResponse)]


DELETE_RECORDS_V2 = register(Api(
    DELETE_RECORDS_KEY, 2, "DeleteRecords", DeleteRecordsRequestV2, DeleteRecordsResponseV2))
LIST_OFFSETS_V7 = register(Api(
    LIST_OFFSETS_KEY, 7, "ListOffsets", ListOffsetsRequestV7, ListOffsetsResponseV7))
