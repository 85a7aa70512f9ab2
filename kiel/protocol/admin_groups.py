"""Broker groups' administration: DeleteGroups v2 (42, flexible) and OffsetDelete v0 (47).

Schemas only (see :class:`kiel.admin.Admin`); both go to the group's
coordinator. DeleteGroups v2 (Kafka 2.4+) deletes groups that have no
member (a live group answers NON_EMPTY_GROUP, 68); OffsetDelete v0 (Kafka
2.4+, KIP-496, never flexible) deletes a group's committed offsets of
partitions it no longer consumes (GROUP_SUBSCRIBED_TO_TOPIC, 86, for a
topic a live member subscribes to).

Wire grammar (Apache Kafka's message definitions)::

    DeleteGroupsRequest v2  => [GroupName(string)]                 (flexible)
    DeleteGroupsResponse v2 => ThrottleTimeMs(int32) [Result]
      Result                => GroupId(string) ErrorCode(int16)

    OffsetDeleteRequest v0  => GroupId(string) [Topic]
      Topic                 => Name(string) [PartitionIndex(int32)]
    OffsetDeleteResponse v0 => ErrorCode(int16) ThrottleTimeMs(int32) [Topic]
      Topic                 => Name(string) [Partition]
      Partition             => PartitionIndex(int32) ErrorCode(int16)
"""
from typing import Annotated, NamedTuple

from kiel.protocol.api import Api, flexible_versions, register
from kiel.protocol.primitives import Array, Int16, Int32, String

DELETE_GROUPS_KEY = 42
OFFSET_DELETE_KEY = 47
#: Kafka's ``"flexibleVersions": "2+"`` (OffsetDelete: "none").
flexible_versions(DELETE_GROUPS_KEY, 2)


class DeleteGroupsRequestV2(NamedTuple):
    """DeleteGroups v2 request."""

    groups_names: Annotated[list[str], Array(String)]


class DeletableGroupResult(NamedTuple):
    """One group's answer to DeleteGroups."""

    group_id: Annotated[str, String]
    error_code: Annotated[int, Int16]


class DeleteGroupsResponseV2(NamedTuple):
    """DeleteGroups v2 response."""

    throttle_time_ms: Annotated[int, Int32]
    results: Annotated[list[DeletableGroupResult], Array(DeletableGroupResult)]


class OffsetDeleteRequestPartition(NamedTuple):
    """One partition whose committed offset goes."""

    partition_index: Annotated[int, Int32]


class OffsetDeleteRequestTopic(NamedTuple):
    """One topic's partitions whose committed offsets go."""

    name: Annotated[str, String]
    partitions: Annotated[list[OffsetDeleteRequestPartition], Array(OffsetDeleteRequestPartition)]


class OffsetDeleteRequest(NamedTuple):
    """OffsetDelete v0 request."""

    group_id: Annotated[str, String]
    topics: Annotated[list[OffsetDeleteRequestTopic], Array(OffsetDeleteRequestTopic)]


class OffsetDeleteResponsePartition(NamedTuple):
    """One partition's answer to OffsetDelete."""

    partition_index: Annotated[int, Int32]
    error_code: Annotated[int, Int16]


class OffsetDeleteResponseTopic(NamedTuple):
    """One topic's partitions' answers."""

    name: Annotated[str, String]
    partitions: Annotated[list[OffsetDeleteResponsePartition],
                          Array(OffsetDeleteResponsePartition)]


class OffsetDeleteResponse(NamedTuple):
    """OffsetDelete v0 response (a group-level error, then per partition)."""

    error_code: Annotated[int, Int16]
    throttle_time_ms: Annotated[int, Int32]
    topics: Annotated[list[OffsetDeleteResponseTopic], Array(OffsetDeleteResponseTopic)]


DELETE_GROUPS_V2 = register(Api(
    DELETE_GROUPS_KEY, 2, "DeleteGroups", DeleteGroupsRequestV2, DeleteGroupsResponseV2))
OFFSET_DELETE_V0 = register(Api(
    OFFSET_DELETE_KEY, 0, "OffsetDelete", OffsetDeleteRequest, OffsetDeleteResponse))
