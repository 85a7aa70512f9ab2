"""OffsetFetch v0, v1 and v5 (api key 9): read a group's committed offsets.

Wire grammar (v0 and v1: the same layout)::

    OffsetFetchRequest  => ConsumerGroup(string) [TopicData]
      TopicData         => TopicName(string) [Partition(int32)]
    OffsetFetchResponse => [TopicResponse]
      TopicResponse     => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) Offset(int64) Metadata(string) ErrorCode(int16)

A 0.8.2 broker answers v0 from ZooKeeper; a partition with no committed offset
comes back with offset -1 and an empty metadata string (error code 0 or 3,
depending on the broker version).

v1 (Kafka 0.8.2+) reads the offsets the broker stores itself (OffsetCommit
v1 and later), v0 those in ZooKeeper: pair v1 with OffsetCommit v2, v0 with
OffsetCommit v0.

Wire grammar (v5, Kafka 2.1+)::

    OffsetFetchRequest v5  => ConsumerGroup(string) [TopicData] (a null array: every topic)
    OffsetFetchResponse v5 => ThrottleTimeMs(int32) [TopicResponse] ErrorCode(int16)
      TopicResponse        => TopicName(string) [PartitionResponse]
      PartitionResponse    => Partition(int32) Offset(int64) LeaderEpoch(int32)
                              Metadata(nullable string) ErrorCode(int16)

Since v2 a group-wide error (NOT_COORDINATOR, GROUP_AUTHORIZATION_FAILED,
COORDINATOR_LOAD_IN_PROGRESS...) comes in the top-level ``error_code``, with
no partitions or partitions that carry no error of their own: a reader must
judge it before trusting the offsets.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Int16, Int32, Int64, NullableString, String


class OffsetFetchTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[int], Array(Int32)]


class OffsetFetchRequest(NamedTuple):
    group_id: Annotated[str, String]
    topics: Annotated[list[OffsetFetchTopicData], Array(OffsetFetchTopicData)]


class OffsetFetchPartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    offset: Annotated[int, Int64]
    metadata: Annotated[str, String]
    error_code: Annotated[int, Int16]


class OffsetFetchTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[OffsetFetchPartitionResponse], Array(OffsetFetchPartitionResponse)]


class OffsetFetchResponse(NamedTuple):
    topics: Annotated[list[OffsetFetchTopicResponse], Array(OffsetFetchTopicResponse)]


OFFSET_FETCH_V0 = register(Api(9, 0, "OffsetFetch", OffsetFetchRequest, OffsetFetchResponse))


class OffsetFetchRequestV1(OffsetFetchRequest):
    """OffsetFetch v1 request (the v0 layout; its own class for the registry)."""

    __slots__ = ()


class OffsetFetchResponseV1(OffsetFetchResponse):
    """OffsetFetch v1 response (the v0 layout; its own class for the registry)."""

    __slots__ = ()


OFFSET_FETCH_V1 = register(
    Api(9, 1, "OffsetFetch", OffsetFetchRequestV1, OffsetFetchResponseV1)
)


class OffsetFetchRequestV5(NamedTuple):
    group_id: Annotated[str, String]
    topics: Annotated[Optional[list[OffsetFetchTopicData]], Array(OffsetFetchTopicData)]


class OffsetFetchPartitionResponseV5(NamedTuple):
    partition: Annotated[int, Int32]
    offset: Annotated[int, Int64]
    leader_epoch: Annotated[int, Int32]
    metadata: Annotated[Optional[str], NullableString]
    error_code: Annotated[int, Int16]


class OffsetFetchTopicResponseV5(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[
        list[OffsetFetchPartitionResponseV5], Array(OffsetFetchPartitionResponseV5)
    ]


class OffsetFetchResponseV5(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    topics: Annotated[list[OffsetFetchTopicResponseV5], Array(OffsetFetchTopicResponseV5)]
    error_code: Annotated[int, Int16]


OFFSET_FETCH_V5 = register(
    Api(9, 5, "OffsetFetch", OffsetFetchRequestV5, OffsetFetchResponseV5)
)
