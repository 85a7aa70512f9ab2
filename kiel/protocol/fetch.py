"""Fetch v0 (api key 1): read message sets from partitions (a long poll).

Wire grammar::

    FetchRequest  => ReplicaId(int32) MaxWaitTime(int32) MinBytes(int32) [TopicData]
      TopicData   => TopicName(string) [PartitionData]
      PartitionData => Partition(int32) FetchOffset(int64) MaxBytes(int32)
    FetchResponse => [TopicResponse]
      TopicResponse => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) ErrorCode(int16) HighwaterMarkOffset(int64)
                           MessageSetSize(int32) MessageSet

Consumers send ``replica_id = -1``. The message set may end in a truncated
message (the broker cuts at ``max_bytes``); :mod:`kiel.protocol.messages`
handles that.
"""
from typing import Annotated, List, NamedTuple

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Bytes, Int16, Int32, Int64, String

#: ``replica_id`` of an ordinary consumer.
CONSUMER_REPLICA_ID = -1


class FetchPartitionData(NamedTuple):
    partition: Annotated[int, Int32]
    fetch_offset: Annotated[int, Int64]
    max_bytes: Annotated[int, Int32]


class FetchTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[FetchPartitionData], Array(FetchPartitionData)]


class FetchRequest(NamedTuple):
    replica_id: Annotated[int, Int32]
    max_wait_time: Annotated[int, Int32]
    min_bytes: Annotated[int, Int32]
    topics: Annotated[List[FetchTopicData], Array(FetchTopicData)]


class FetchPartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    high_watermark: Annotated[int, Int64]
    message_set: Annotated[bytes, Bytes]


class FetchTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[FetchPartitionResponse], Array(FetchPartitionResponse)]


class FetchResponse(NamedTuple):
    topics: Annotated[List[FetchTopicResponse], Array(FetchTopicResponse)]


FETCH_V0 = register(Api(1, 0, "Fetch", FetchRequest, FetchResponse))
