"""Produce v0 (api key 0): append message sets to partitions.

Wire grammar::

    ProduceRequest  => RequiredAcks(int16) Timeout(int32) [TopicData]
      TopicData     => TopicName(string) [PartitionData]
      PartitionData => Partition(int32) MessageSetSize(int32) MessageSet
    ProduceResponse => [TopicResponse]
      TopicResponse => TopicName(string) [PartitionResponse]
      PartitionResponse => Partition(int32) ErrorCode(int16) Offset(int64)

``message_set`` is the encoded message set (see :mod:`kiel.protocol.messages`)
carried as size-prefixed bytes. With ``required_acks == 0`` the broker sends
no response at all.
"""
from typing import Annotated, List, NamedTuple

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Bytes, Int16, Int32, Int64, String


class ProducePartitionData(NamedTuple):
    partition: Annotated[int, Int32]
    message_set: Annotated[bytes, Bytes]


class ProduceTopicData(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[ProducePartitionData], Array(ProducePartitionData)]


class ProduceRequest(NamedTuple):
    required_acks: Annotated[int, Int16]
    timeout: Annotated[int, Int32]
    topics: Annotated[List[ProduceTopicData], Array(ProduceTopicData)]


class ProducePartitionResponse(NamedTuple):
    partition: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    offset: Annotated[int, Int64]


class ProduceTopicResponse(NamedTuple):
    topic: Annotated[str, String]
    partitions: Annotated[List[ProducePartitionResponse], Array(ProducePartitionResponse)]


class ProduceResponse(NamedTuple):
    topics: Annotated[List[ProduceTopicResponse], Array(ProduceTopicResponse)]


PRODUCE_V0 = register(
    Api(0, 0, "Produce", ProduceRequest, ProduceResponse,
        expects_response=lambda request: request.required_acks != 0)
)
