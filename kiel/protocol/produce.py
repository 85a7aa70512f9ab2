"""Produce v0 and v3 (api key 0): append message sets / record batches to partitions.

Wire grammar (v0)::

    ProduceRequest  => RequiredAcks(int16) Timeout(int32) [TopicData]
      TopicData     => TopicName(string) [PartitionData]
      PartitionData => Partition(int32) MessageSetSize(int32) MessageSet
    ProduceResponse => [TopicResponse]
      TopicResponse => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) ErrorCode(int16) Offset(int64)

``message_set`` is the encoded message set (see :mod:`kiel.protocol.messages`)
carried as size-prefixed bytes. With ``required_acks == 0`` the broker sends
no response at all.

Wire grammar (v3, Kafka 0.11+)::

    ProduceRequest v3  => TransactionalId(nullable string) RequiredAcks(int16)
                          Timeout(int32) [TopicData]          (TopicData as v0)
    ProduceResponse v3 => [TopicResponse] ThrottleTimeMs(int32)
      TopicResponse => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) ErrorCode(int16) BaseOffset(int64)
                           LogAppendTime(int64)

v3 carries record batches (magic 2, :mod:`kiel.protocol.record_batch`) in
the same size-prefixed bytes field; ``log_append_time`` is -1 unless the
topic uses LogAppendTime. v1 and v2 (throttle time, then the append time)
are not implemented: a broker that speaks v3 is asked v3, an older one v0.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Bytes, Int16, Int32, Int64, NullableString, String


class ProducePartitionData(NamedTuple):
    partition: Annotated[int, Int32]
    message_set: Annotated[bytes, Bytes]


class ProduceTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[ProducePartitionData], Array(ProducePartitionData)]


class ProduceRequest(NamedTuple):
    required_acks: Annotated[int, Int16]
    timeout: Annotated[int, Int32]
    topics: Annotated[list[ProduceTopicData], Array(ProduceTopicData)]


class ProducePartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    offset: Annotated[int, Int64]


class ProduceTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[ProducePartitionResponse], Array(ProducePartitionResponse)]


class ProduceResponse(NamedTuple):
    topics: Annotated[list[ProduceTopicResponse], Array(ProduceTopicResponse)]


PRODUCE_V0 = register(
    Api(0, 0, "Produce", ProduceRequest, ProduceResponse,
        expects_response=lambda request: request.required_acks != 0)
)


class ProduceRequestV3(NamedTuple):
    transactional_id: Annotated[Optional[str], NullableString]
    required_acks: Annotated[int, Int16]
    timeout: Annotated[int, Int32]
    topics: Annotated[list[ProduceTopicData], Array(ProduceTopicData)]


class ProducePartitionResponseV3(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    offset: Annotated[int, Int64]
    log_append_time: Annotated[int, Int64]


class ProduceTopicResponseV3(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[list[ProducePartitionResponseV3], Array(ProducePartitionResponseV3)]


class ProduceResponseV3(NamedTuple):
    topics: Annotated[list[ProduceTopicResponseV3], Array(ProduceTopicResponseV3)]
    throttle_time_ms: Annotated[int, Int32]


PRODUCE_V3 = register(
    Api(0, 3, "Produce", ProduceRequestV3, ProduceResponseV3,
        expects_response=lambda request: request.required_acks != 0)
)
