"""Topic administration: CreateTopics v5 (19), DeleteTopics v5 (20) and
CreatePartitions v2 (37), all flexible (KIP-482).

Schemas only: :class:`kiel.admin.Admin` sends them and turns each topic's
answer into that topic's result or typed error. The versions are the first
flexible ones, served by Kafka 2.4+ (CreatePartitions v2, CreateTopics v5),
2.6+ (DeleteTopics v5: an error message per topic), Tansu and noida-db, and
at or above Kafka 4.0's floors (CreateTopics v2, DeleteTopics v1,
CreatePartitions v0).

Wire grammar (Apache Kafka's message definitions; compact types, tagged
sections)::

    CreateTopicsRequest v5  => [Topic] TimeoutMs(int32) ValidateOnly(bool)
      Topic                 => Name(string) NumPartitions(int32)
                               ReplicationFactor(int16) [Assignment] [Config]
      Assignment            => PartitionIndex(int32) [BrokerId(int32)]
      Config                => Name(string) Value(nullable string)
    CreateTopicsResponse v5 => ThrottleTimeMs(int32) [Result]
      Result                => Name(string) ErrorCode(int16)
                               ErrorMessage(nullable string) NumPartitions(int32)
                               ReplicationFactor(int16) [Config](nullable)
                               <tag 0: TopicConfigErrorCode(int16)>
      Config                => Name(string) Value(nullable string) ReadOnly(bool)
                               ConfigSource(int8) IsSensitive(bool)

    DeleteTopicsRequest v5  => [TopicName(string)] TimeoutMs(int32)
    DeleteTopicsResponse v5 => ThrottleTimeMs(int32) [Result]
      Result                => Name(string) ErrorCode(int16) ErrorMessage(nullable string)

    CreatePartitionsRequest v2  => [Topic] TimeoutMs(int32) ValidateOnly(bool)
      Topic                     => Name(string) Count(int32) [Assignment](nullable)
      Assignment                => [BrokerId(int32)]
    CreatePartitionsResponse v2 => ThrottleTimeMs(int32) [Result]
      Result                    => Name(string) ErrorCode(int16) ErrorMessage(nullable string)

A number of partitions or a replication factor of -1 asks for the broker's
default (``num.partitions``, ``default.replication.factor``; KIP-464); a
CreateTopics v5 answer says what the topic got. ``Count`` of CreatePartitions
is the new total, not the number added.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, flexible_versions, register
from kiel.protocol.primitives import Array, Boolean, Int8, Int16, Int32, NullableString, String
from kiel.protocol.schema import Tagged

CREATE_TOPICS_KEY = 19
DELETE_TOPICS_KEY = 20
CREATE_PARTITIONS_KEY = 37
#: Kafka's ``"flexibleVersions"``: "5+", "4+", "2+".
flexible_versions(CREATE_TOPICS_KEY, 5)
flexible_versions(DELETE_TOPICS_KEY, 4)
flexible_versions(CREATE_PARTITIONS_KEY, 2)


class CreatableReplicaAssignment(NamedTuple):
    """The replicas of one partition of a new topic, chosen by hand."""

    partition_index: Annotated[int, Int32]
    broker_ids: Annotated[list[int], Array(Int32)]


class CreatableTopicConfig(NamedTuple):
    """One config of a new topic."""

    name: Annotated[str, String]
    value: Annotated[Optional[str], NullableString]


class CreatableTopic(NamedTuple):
    """One topic to create (-1 partitions or replicas: the broker's default)."""

    name: Annotated[str, String]
    num_partitions: Annotated[int, Int32]
    replication_factor: Annotated[int, Int16]
    assignments: Annotated[list[CreatableReplicaAssignment], Array(CreatableReplicaAssignment)]
    configs: Annotated[list[CreatableTopicConfig], Array(CreatableTopicConfig)]


class CreateTopicsRequestV5(NamedTuple):
    """CreateTopics v5 request."""

    topics: Annotated[list[CreatableTopic], Array(CreatableTopic)]
    timeout_ms: Annotated[int, Int32]
    validate_only: Annotated[bool, Boolean]


class CreatableTopicConfigs(NamedTuple):
    """One config of a created topic, as the broker answers it."""

    name: Annotated[str, String]
    value: Annotated[Optional[str], NullableString]
    read_only: Annotated[bool, Boolean]
    config_source: Annotated[int, Int8]
    is_sensitive: Annotated[bool, Boolean]


class CreatableTopicResult(NamedTuple):
    """One topic's answer: its error, or what it got."""

    name: Annotated[str, String]
    error_code: Annotated[int, Int16]
    error_message: Annotated[Optional[str], NullableString]
    num_partitions: Annotated[int, Int32]
    replication_factor: Annotated[int, Int16]
    configs: Annotated[list[CreatableTopicConfigs], Array(CreatableTopicConfigs)]
    topic_config_error_code: Annotated[int, Int16, Tagged(0)] = 0


class CreateTopicsResponseV5(NamedTuple):
    """CreateTopics v5 response."""

    throttle_time_ms: Annotated[int, Int32]
    topics: Annotated[list[CreatableTopicResult], Array(CreatableTopicResult)]


class DeleteTopicsRequestV5(NamedTuple):
    """DeleteTopics v5 request: topics by name."""

    topic_names: Annotated[list[str], Array(String)]
    timeout_ms: Annotated[int, Int32]


class DeletableTopicResult(NamedTuple):
    """One topic's answer to DeleteTopics."""

    name: Annotated[str, String]
    error_code: Annotated[int, Int16]
    error_message: Annotated[Optional[str], NullableString]


class DeleteTopicsResponseV5(NamedTuple):
    """DeleteTopics v5 response."""

    throttle_time_ms: Annotated[int, Int32]
    responses: Annotated[list[DeletableTopicResult], Array(DeletableTopicResult)]


class CreatePartitionsAssignment(NamedTuple):
    """The replicas of one new partition."""

    broker_ids: Annotated[list[int], Array(Int32)]


class CreatePartitionsTopic(NamedTuple):
    """One topic to grow to ``count`` partitions (``assignments`` ``None``: the broker picks)."""

    name: Annotated[str, String]
    # Kafka's name (it hides tuple.count on this struct).
    count: Annotated[int, Int32]  # type: ignore[assignment]
    assignments: Annotated[Optional[list[CreatePartitionsAssignment]],
                           Array(CreatePartitionsAssignment)]


class CreatePartitionsRequestV2(NamedTuple):
    """CreatePartitions v2 request."""

    topics: Annotated[list[CreatePartitionsTopic], Array(CreatePartitionsTopic)]
    timeout_ms: Annotated[int, Int32]
    validate_only: Annotated[bool, Boolean]


class CreatePartitionsTopicResult(NamedTuple):
    """One topic's answer to CreatePartitions."""

    name: Annotated[str, String]
    error_code: Annotated[int, Int16]
    error_message: Annotated[Optional[str], NullableString]


class CreatePartitionsResponseV2(NamedTuple):
    """CreatePartitions v2 response."""

    throttle_time_ms: Annotated[int, Int32]
    results: Annotated[list[CreatePartitionsTopicResult], Array(CreatePartitionsTopicResult)]


CREATE_TOPICS_V5 = register(Api(
    CREATE_TOPICS_KEY, 5, "CreateTopics", CreateTopicsRequestV5, CreateTopicsResponseV5))
DELETE_TOPICS_V5 = register(Api(
    DELETE_TOPICS_KEY, 5, "DeleteTopics", DeleteTopicsRequestV5, DeleteTopicsResponseV5))
CREATE_PARTITIONS_V2 = register(Api(
    CREATE_PARTITIONS_KEY, 2, "CreatePartitions", CreatePartitionsRequestV2,
    CreatePartitionsResponseV2))
