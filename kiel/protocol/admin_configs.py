"""Configs: DescribeConfigs v4 (32) and IncrementalAlterConfigs v1 (44), both flexible.

Schemas only (see :class:`kiel.admin.Admin`). A resource is a topic
(:data:`TOPIC`, its name) or a broker (:data:`BROKER`, its id as text; an
empty name is the cluster-wide default of every broker). DescribeConfigs v4
(Kafka 2.4+) and IncrementalAlterConfigs v1 (2.4+) are the first flexible
versions, above Kafka 4.0's floors (DescribeConfigs v1, IncrementalAlterConfigs v0).

Wire grammar (Apache Kafka's message definitions; compact types, tagged
sections)::

    DescribeConfigsRequest v4  => [Resource] IncludeSynonyms(bool)
                                  IncludeDocumentation(bool)
      Resource                 => ResourceType(int8) ResourceName(string)
                                  [ConfigurationKey(string)](nullable: all)
    DescribeConfigsResponse v4 => ThrottleTimeMs(int32) [Result]
      Result                   => ErrorCode(int16) ErrorMessage(nullable string)
                                  ResourceType(int8) ResourceName(string) [Config]
      Config                   => Name(string) Value(nullable string) ReadOnly(bool)
                                  ConfigSource(int8) IsSensitive(bool) [Synonym]
                                  ConfigType(int8) Documentation(nullable string)
      Synonym                  => Name(string) Value(nullable string) Source(int8)

    IncrementalAlterConfigsRequest v1  => [Resource] ValidateOnly(bool)
      Resource                         => ResourceType(int8) ResourceName(string) [Config]
      Config                           => Name(string) ConfigOperation(int8)
                                          Value(nullable string)
    IncrementalAlterConfigsResponse v1 => ThrottleTimeMs(int32) [Response]
      Response                         => ErrorCode(int16) ErrorMessage(nullable string)
                                          ResourceType(int8) ResourceName(string)

``ConfigOperation``: :data:`SET`, :data:`DELETE` (back to the default),
:data:`APPEND` and :data:`SUBTRACT` (list-valued configs). ``ConfigSource``:
see :data:`CONFIG_SOURCES`.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, flexible_versions, register
from kiel.protocol.primitives import Array, Boolean, Int8, Int16, Int32, NullableString, String

DESCRIBE_CONFIGS_KEY = 32
INCREMENTAL_ALTER_CONFIGS_KEY = 44
#: Kafka's ``"flexibleVersions"``: "4+", "1+".
flexible_versions(DESCRIBE_CONFIGS_KEY, 4)
flexible_versions(INCREMENTAL_ALTER_CONFIGS_KEY, 1)

#: Resource types (Kafka's ``ConfigResource.Type``).
TOPIC = 2
BROKER = 4
#: IncrementalAlterConfigs operations (Kafka's ``AlterConfigOp.OpType``).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
#: ``ConfigSource`` codes and their names (Kafka's ``DescribeConfigsResponse.ConfigSource``).
CONFIG_SOURCES = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}


class DescribeConfigsResource(NamedTuple):
    """One resource to describe (``configuration_keys`` ``None``: every config)."""

    resource_type: Annotated[int, Int8]
    resource_name: Annotated[str, String]
    configuration_keys: Annotated[Optional[list[str]], Array(String)]


class DescribeConfigsRequestV4(NamedTuple):
    """DescribeConfigs v4 request."""

    resources: Annotated[list[DescribeConfigsResource], Array(DescribeConfigsResource)]
    include_synonyms: Annotated[bool, Boolean]
    include_documentation: Annotated[bool, Boolean]


class DescribeConfigsSynonym(NamedTuple):
    """Where else a config's value could come from, by precedence."""

    name: Annotated[str, String]
    value: Annotated[Optional[str], NullableString]
    source: Annotated[int, Int8]


class DescribeConfigsResourceResult(NamedTuple):
    """One config of a described resource."""

    name: Annotated[str, String]
    value: Annotated[Optional[str], NullableString]
    read_only: Annotated[bool, Boolean]
    config_source: Annotated[int, Int8]
    is_sensitive: Annotated[bool, Boolean]
    synonyms: Annotated[list[DescribeConfigsSynonym], Array(DescribeConfigsSynonym)]
    config_type: Annotated[int, Int8]
    documentation: Annotated[Optional[str], NullableString]


class DescribeConfigsResult(NamedTuple):
    """One resource's answer: its error, or its configs."""

    error_code: Annotated[int, Int16]
    error_message: Annotated[Optional[str], NullableString]
    resource_type: Annotated[int, Int8]
    resource_name: Annotated[str, String]
    configs: Annotated[list[DescribeConfigsResourceResult], Array(DescribeConfigsResourceResult)]


class DescribeConfigsResponseV4(NamedTuple):
    """DescribeConfigs v4 response."""

    throttle_time_ms: Annotated[int, Int32]
    results: Annotated[list[DescribeConfigsResult], Array(DescribeConfigsResult)]


class AlterableConfig(NamedTuple):
    """One change to one config."""

    name: Annotated[str, String]
    config_operation: Annotated[int, Int8]
    value: Annotated[Optional[str], NullableString]


class AlterConfigsResource(NamedTuple):
    """One resource's changes."""

    resource_type: Annotated[int, Int8]
    resource_name: Annotated[str, String]
    configs: Annotated[list[AlterableConfig], Array(AlterableConfig)]


class IncrementalAlterConfigsRequestV1(NamedTuple):
    """IncrementalAlterConfigs v1 request."""

    resources: Annotated[list[AlterConfigsResource], Array(AlterConfigsResource)]
    validate_only: Annotated[bool, Boolean]


class AlterConfigsResourceResponse(NamedTuple):
    """One resource's answer to IncrementalAlterConfigs."""

    error_code: Annotated[int, Int16]
    error_message: Annotated[Optional[str], NullableString]
    resource_type: Annotated[int, Int8]
    resource_name: Annotated[str, String]


class IncrementalAlterConfigsResponseV1(NamedTuple):
    """IncrementalAlterConfigs v1 response."""

    throttle_time_ms: Annotated[int, Int32]
    responses: Annotated[list[AlterConfigsResourceResponse], Array(AlterConfigsResourceResponse)]


DESCRIBE_CONFIGS_V4 = register(Api(
    DESCRIBE_CONFIGS_KEY, 4, "DescribeConfigs", DescribeConfigsRequestV4,
    DescribeConfigsResponseV4))
INCREMENTAL_ALTER_CONFIGS_V1 = register(Api(
    INCREMENTAL_ALTER_CONFIGS_KEY, 1, "IncrementalAlterConfigs",
    IncrementalAlterConfigsRequestV1, IncrementalAlterConfigsResponseV1))
