"""Fetch v0 and v4 (api key 1): read message sets from partitions (a long poll).

Wire grammar (v0)::

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

Wire grammar (v4, Kafka 0.11+)::

    FetchRequest v4  => ReplicaId(int32) MaxWaitTime(int32) MinBytes(int32)
                        MaxBytes(int32) IsolationLevel(int8) [TopicData]   (TopicData as v0)
    FetchResponse v4 => ThrottleTimeMs(int32) [TopicResponse]
      TopicResponse  => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) ErrorCode(int16) HighwaterMarkOffset(int64)
                           LastStableOffset(int64) [AbortedTransaction] Records(bytes)
        AbortedTransaction => ProducerId(int64) FirstOffset(int64)

``max_bytes`` bounds the whole response (each partition still has its own);
``isolation_level`` is :data:`READ_UNCOMMITTED` (0) or :data:`READ_COMMITTED`
(1). ``records`` (null for nothing) holds record batches (magic 2), possibly with older
magic-0/1 entries: decode it with
:func:`kiel.protocol.record_batch.decode_record_batches`. The aborted
transactions array is null (decoded as ``[]``) unless read_committed.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import (
    Array,
    Bytes,
    Int8,
    Int16,
    Int32,
    Int64,
    NullableBytes,
    String,
)

#: ``replica_id`` of an ordinary consumer.
CONSUMER_REPLICA_ID = -1
#: Isolation levels (Fetch v4+): every record, or only committed transactions.
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


class FetchPartitionData(NamedTuple):
    partition: Annotated[int, Int32]
    fetch_offset: Annotated[int, Int64]
    max_bytes: Annotated[int, Int32]


class FetchTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[FetchPartitionData], Array(FetchPartitionData)]


class FetchRequest(NamedTuple):
    replica_id: Annotated[int, Int32]
    max_wait_time: Annotated[int, Int32]
    min_bytes: Annotated[int, Int32]
    topics: Annotated[list[FetchTopicData], Array(FetchTopicData)]


class FetchPartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    high_watermark: Annotated[int, Int64]
    message_set: Annotated[bytes, Bytes]


class FetchTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[FetchPartitionResponse], Array(FetchPartitionResponse)]


class FetchResponse(NamedTuple):
    topics: Annotated[list[FetchTopicResponse], Array(FetchTopicResponse)]


FETCH_V0 = register(Api(1, 0, "Fetch", FetchRequest, FetchResponse))


class FetchRequestV4(NamedTuple):
    replica_id: Annotated[int, Int32]
    max_wait_time: Annotated[int, Int32]
    min_bytes: Annotated[int, Int32]
    max_bytes: Annotated[int, Int32]
    isolation_level: Annotated[int, Int8]
    topics: Annotated[list[FetchTopicData], Array(FetchTopicData)]


class AbortedTransaction(NamedTuple):
    producer_id: Annotated[int, Int64]
    first_offset: Annotated[int, Int64]


class FetchPartitionResponseV4(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    high_watermark: Annotated[int, Int64]
    last_stable_offset: Annotated[int, Int64]
    aborted_transactions: Annotated[list[AbortedTransaction], Array(AbortedTransaction)]
    records: Annotated[Optional[bytes], NullableBytes]

    @property
    def message_set(self) -> bytes:
        """``records`` under its v0 name (``b""`` for null), so one reader
        handles every version."""
        return self.records or b""


class FetchTopicResponseV4(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[FetchPartitionResponseV4], Array(FetchPartitionResponseV4)]


class FetchResponseV4(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    topics: Annotated[list[FetchTopicResponseV4], Array(FetchTopicResponseV4)]


FETCH_V4 = register(Api(1, 4, "Fetch", FetchRequestV4, FetchResponseV4))
