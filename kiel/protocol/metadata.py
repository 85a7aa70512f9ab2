"""Metadata v0 and v1 (api key 3): brokers, topics, partition leaders and replicas.

Wire grammar (v0)::

    MetadataRequest  => [TopicName(string)]          (empty: all topics)
    MetadataResponse => [Broker] [TopicMetadata]
      Broker         => NodeId(int32) Host(string) Port(int32)
      TopicMetadata  => TopicErrorCode(int16) TopicName(string) [PartitionMetadata]
      PartitionMetadata => PartitionErrorCode(int16) PartitionId(int32) Leader(int32)
                           Replicas([int32]) Isr([int32])

Wire grammar (v1, Kafka 0.10+)::

    MetadataRequest v1  => [TopicName(string)]   (null: all topics; empty: none)
    MetadataResponse v1 => [Broker] ControllerId(int32) [TopicMetadata]
      Broker         => NodeId(int32) Host(string) Port(int32) Rack(nullable string)
      TopicMetadata  => TopicErrorCode(int16) TopicName(string) IsInternal(boolean)
                        [PartitionMetadata]      (PartitionMetadata as v0)

Mind the change of meaning: an empty topic list asks for every topic in v0
and for none in v1, where ``None`` (a null array) asks for all.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Boolean, Int16, Int32, NullableString, String


class MetadataRequest(NamedTuple):
    topics: Annotated[list[str], Array(String)]


class BrokerMetadata(NamedTuple):
    node_id: Annotated[int, Int32]
    host: Annotated[str, String]
    port: Annotated[int, Int32]


class PartitionMetadata(NamedTuple):
    error_code: Annotated[int, Int16]
    partition_id: Annotated[int, Int32]
    leader: Annotated[int, Int32]
    replicas: Annotated[list[int], Array(Int32)]
    isr: Annotated[list[int], Array(Int32)]


class TopicMetadata(NamedTuple):
    error_code: Annotated[int, Int16]
    topic: Annotated[str, String]
    partitions: Annotated[list[PartitionMetadata], Array(PartitionMetadata)]


class MetadataResponse(NamedTuple):
    brokers: Annotated[list[BrokerMetadata], Array(BrokerMetadata)]
    topics: Annotated[list[TopicMetadata], Array(TopicMetadata)]


METADATA_V0 = register(Api(3, 0, "Metadata", MetadataRequest, MetadataResponse))


class MetadataRequestV1(NamedTuple):
    #: ``None`` asks for every topic.
    topics: Annotated[Optional[list[str]], Array(String)]


class BrokerMetadataV1(NamedTuple):
    node_id: Annotated[int, Int32]
    host: Annotated[str, String]
    port: Annotated[int, Int32]
    rack: Annotated[Optional[str], NullableString]


class TopicMetadataV1(NamedTuple):
    error_code: Annotated[int, Int16]
    topic: Annotated[str, String]
    is_internal: Annotated[bool, Boolean]
    partitions: Annotated[list[PartitionMetadata], Array(PartitionMetadata)]


class MetadataResponseV1(NamedTuple):
    brokers: Annotated[list[BrokerMetadataV1], Array(BrokerMetadataV1)]
    controller_id: Annotated[int, Int32]
    topics: Annotated[list[TopicMetadataV1], Array(TopicMetadataV1)]


METADATA_V1 = register(Api(3, 1, "Metadata", MetadataRequestV1, MetadataResponseV1))
