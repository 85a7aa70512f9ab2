"""Metadata v0 (api key 3): brokers, topics, partition leaders and replicas.

Wire grammar::

    MetadataRequest  => [TopicName(string)]          (empty: all topics)
    MetadataResponse => [Broker] [TopicMetadata]
      Broker         => NodeId(int32) Host(string) Port(int32)
      TopicMetadata  => TopicErrorCode(int16) TopicName(string) [PartitionMetadata]
      PartitionMetadata => PartitionErrorCode(int16) PartitionId(int32) Leader(int32)
                           Replicas([int32]) Isr([int32])
"""
from typing import Annotated, List, NamedTuple

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Int16, Int32, String


class MetadataRequest(NamedTuple):
    topics: Annotated[List[str], Array(String)]


class BrokerMetadata(NamedTuple):
    node_id: Annotated[int, Int32]
    host: Annotated[str, String]
    port: Annotated[int, Int32]


class PartitionMetadata(NamedTuple):
    error_code: Annotated[int, Int16]
    partition_id: Annotated[int, Int32]
    leader: Annotated[int, Int32]
    replicas: Annotated[List[int], Array(Int32)]
    isr: Annotated[List[int], Array(Int32)]


class TopicMetadata(NamedTuple):
    error_code: Annotated[int, Int16]
    topic: Annotated[str, String]
    partitions: Annotated[List[PartitionMetadata], Array(PartitionMetadata)]


class MetadataResponse(NamedTuple):
    brokers: Annotated[List[BrokerMetadata], Array(BrokerMetadata)]
    topics: Annotated[List[TopicMetadata], Array(TopicMetadata)]


METADATA_V0 = register(Api(3, 0, "Metadata", MetadataRequest, MetadataResponse))
