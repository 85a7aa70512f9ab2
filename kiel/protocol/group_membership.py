"""The group coordinator's membership APIs: JoinGroup v5 (11), Heartbeat v3 (12),
LeaveGroup v3 (13), SyncGroup v3 (14), DescribeGroups v2 and v4 (15) and
ListGroups v2 (16).

The classic group protocol of Kafka 0.9+ in the versions Kafka 2.3/2.4 brought
(static membership, KIP-345) and that current brokers (Kafka 4, Tansu) still
accept; all non-flexible. Schemas only: what a member does with the answers
lives in the membership that sends them.

Wire grammar (Apache Kafka's message definitions)::

    JoinGroupRequest v5  => GroupId(string) SessionTimeoutMs(int32)
                            RebalanceTimeoutMs(int32) MemberId(string)
                            GroupInstanceId(nullable string) ProtocolType(string)
                            [Protocol]
      Protocol           => Name(string) Metadata(bytes)
    JoinGroupResponse v5 => ThrottleTimeMs(int32) ErrorCode(int16) GenerationId(int32)
                            ProtocolName(string) Leader(string) MemberId(string)
                            [Member]
      Member             => MemberId(string) GroupInstanceId(nullable string)
                            Metadata(bytes)

    SyncGroupRequest v3  => GroupId(string) GenerationId(int32) MemberId(string)
                            GroupInstanceId(nullable string) [Assignment]
      Assignment         => MemberId(string) Assignment(bytes)
    SyncGroupResponse v3 => ThrottleTimeMs(int32) ErrorCode(int16) Assignment(bytes)

    HeartbeatRequest v3  => GroupId(string) GenerationId(int32) MemberId(string)
                            GroupInstanceId(nullable string)
    HeartbeatResponse v3 => ThrottleTimeMs(int32) ErrorCode(int16)

    LeaveGroupRequest v3  => GroupId(string) [Member]
      Member              => MemberId(string) GroupInstanceId(nullable string)
    LeaveGroupResponse v3 => ThrottleTimeMs(int32) ErrorCode(int16) [MemberResponse]
      MemberResponse      => MemberId(string) GroupInstanceId(nullable string)
                             ErrorCode(int16)

    ListGroupsRequest v2  => (empty)
    ListGroupsResponse v2 => ThrottleTimeMs(int32) ErrorCode(int16) [Group]
      Group               => GroupId(string) ProtocolType(string)

    DescribeGroupsRequest v2  => [GroupId(string)]
    DescribeGroupsResponse v2 => ThrottleTimeMs(int32) [Group]
      Group                   => ErrorCode(int16) GroupId(string) GroupState(string)
                                 ProtocolType(string) ProtocolData(string) [Member]
      Member                  => MemberId(string) ClientId(string) ClientHost(string)
                                 MemberMetadata(bytes) MemberAssignment(bytes)
    DescribeGroupsRequest v4  => [GroupId(string)] IncludeAuthorizedOperations(boolean)
    DescribeGroupsResponse v4 => ThrottleTimeMs(int32) [Group]
      Group                   => (as v2) AuthorizedOperations(int32)
      Member                  => MemberId(string) GroupInstanceId(nullable string)
                                 (then as v2)

A first JoinGroup goes with an empty ``member_id``; since v4 the coordinator
answers MEMBER_ID_REQUIRED (79) with the id it chose in ``member_id``, and the
member joins again with it (KIP-394). ``protocol_data`` of DescribeGroups is
the chosen protocol's name (the allocator), ``member_metadata`` and
``member_assignment`` the embedded protocol's bytes
(:mod:`kiel.protocol.consumer_protocol`), filled only in a stable group.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import (
    Array,
    Boolean,
    Bytes,
    Int16,
    Int32,
    NullableString,
    String,
)

#: ``protocol_type`` of consumer groups (the embedded protocol of
#: :mod:`kiel.protocol.consumer_protocol`).
CONSUMER_PROTOCOL_TYPE = "consumer"
#: ``generation_id`` before a member has joined (and of a standalone commit).
NO_GENERATION = -1
#: ``member_id`` of a member's first JoinGroup.
UNKNOWN_MEMBER_ID = ""
#: ``authorized_operations`` when they were not asked for.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


# --------------------------------------------------------------------------
# JoinGroup (11)


class JoinGroupProtocol(NamedTuple):
    name: Annotated[str, String]
    metadata: Annotated[bytes, Bytes]


class JoinGroupRequestV5(NamedTuple):
    group_id: Annotated[str, String]
    session_timeout_ms: Annotated[int, Int32]
    rebalance_timeout_ms: Annotated[int, Int32]
    member_id: Annotated[str, String]
    group_instance_id: Annotated[Optional[str], NullableString]
    protocol_type: Annotated[str, String]
    protocols: Annotated[list[JoinGroupProtocol], Array(JoinGroupProtocol)]


class JoinGroupMember(NamedTuple):
    member_id: Annotated[str, String]
    group_instance_id: Annotated[Optional[str], NullableString]
    metadata: Annotated[bytes, Bytes]


class JoinGroupResponseV5(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    generation_id: Annotated[int, Int32]
    protocol_name: Annotated[str, String]
    leader: Annotated[str, String]
    member_id: Annotated[str, String]
    members: Annotated[list[JoinGroupMember], Array(JoinGroupMember)]


JOIN_GROUP_V5 = register(Api(11, 5, "JoinGroup", JoinGroupRequestV5, JoinGroupResponseV5))


# --------------------------------------------------------------------------
# Heartbeat (12)


class HeartbeatRequestV3(NamedTuple):
    group_id: Annotated[str, String]
    generation_id: Annotated[int, Int32]
    member_id: Annotated[str, String]
    group_instance_id: Annotated[Optional[str], NullableString]


class HeartbeatResponseV3(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]


HEARTBEAT_V3 = register(Api(12, 3, "Heartbeat", HeartbeatRequestV3, HeartbeatResponseV3))


# --------------------------------------------------------------------------
# LeaveGroup (13)


class LeaveGroupMember(NamedTuple):
    member_id: Annotated[str, String]
    group_instance_id: Annotated[Optional[str], NullableString]


class LeaveGroupRequestV3(NamedTuple):
    group_id: Annotated[str, String]
    members: Annotated[list[LeaveGroupMember], Array(LeaveGroupMember)]


class LeaveGroupMemberResponse(NamedTuple):
    member_id: Annotated[str, String]
    group_instance_id: Annotated[Optional[str], NullableString]
    error_code: Annotated[int, Int16]


class LeaveGroupResponseV3(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    members: Annotated[list[LeaveGroupMemberResponse], Array(LeaveGroupMemberResponse)]


LEAVE_GROUP_V3 = register(Api(13, 3, "LeaveGroup", LeaveGroupRequestV3, LeaveGroupResponseV3))


# --------------------------------------------------------------------------
# SyncGroup (14)


class SyncGroupAssignment(NamedTuple):
    member_id: Annotated[str, String]
    assignment: Annotated[bytes, Bytes]


class SyncGroupRequestV3(NamedTuple):
    group_id: Annotated[str, String]
    generation_id: Annotated[int, Int32]
    member_id: Annotated[str, String]
    group_instance_id: Annotated[Optional[str], NullableString]
    assignments: Annotated[list[SyncGroupAssignment], Array(SyncGroupAssignment)]


class SyncGroupResponseV3(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    assignment: Annotated[bytes, Bytes]


SYNC_GROUP_V3 = register(Api(14, 3, "SyncGroup", SyncGroupRequestV3, SyncGroupResponseV3))


# --------------------------------------------------------------------------
# DescribeGroups (15)


class DescribeGroupsRequestV2(NamedTuple):
    groups: Annotated[list[str], Array(String)]


class DescribedMember(NamedTuple):
    member_id: Annotated[str, String]
    client_id: Annotated[str, String]
    client_host: Annotated[str, String]
    member_metadata: Annotated[bytes, Bytes]
    member_assignment: Annotated[bytes, Bytes]


class DescribedGroup(NamedTuple):
    error_code: Annotated[int, Int16]
    group_id: Annotated[str, String]
    group_state: Annotated[str, String]
    protocol_type: Annotated[str, String]
    protocol_data: Annotated[str, String]
    members: Annotated[list[DescribedMember], Array(DescribedMember)]


class DescribeGroupsResponseV2(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    groups: Annotated[list[DescribedGroup], Array(DescribedGroup)]


DESCRIBE_GROUPS_V2 = register(
    Api(15, 2, "DescribeGroups", DescribeGroupsRequestV2, DescribeGroupsResponseV2)
)


class DescribeGroupsRequestV4(NamedTuple):
    groups: Annotated[list[str], Array(String)]
    include_authorized_operations: Annotated[bool, Boolean]


class DescribedMemberV4(NamedTuple):
    member_id: Annotated[str, String]
    group_instance_id: Annotated[Optional[str], NullableString]
    client_id: Annotated[str, String]
    client_host: Annotated[str, String]
    member_metadata: Annotated[bytes, Bytes]
    member_assignment: Annotated[bytes, Bytes]


class DescribedGroupV4(NamedTuple):
    error_code: Annotated[int, Int16]
    group_id: Annotated[str, String]
    group_state: Annotated[str, String]
    protocol_type: Annotated[str, String]
    protocol_data: Annotated[str, String]
    members: Annotated[list[DescribedMemberV4], Array(DescribedMemberV4)]
    authorized_operations: Annotated[int, Int32]


class DescribeGroupsResponseV4(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    groups: Annotated[list[DescribedGroupV4], Array(DescribedGroupV4)]


DESCRIBE_GROUPS_V4 = register(
    Api(15, 4, "DescribeGroups", DescribeGroupsRequestV4, DescribeGroupsResponseV4)
)


# --------------------------------------------------------------------------
# ListGroups (16)


class ListGroupsRequestV2(NamedTuple):
    """ListGroups v2 request (no fields: every group the broker coordinates)."""


class ListedGroup(NamedTuple):
    group_id: Annotated[str, String]
    protocol_type: Annotated[str, String]


class ListGroupsResponseV2(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    groups: Annotated[list[ListedGroup], Array(ListedGroup)]


LIST_GROUPS_V2 = register(Api(16, 2, "ListGroups", ListGroupsRequestV2, ListGroupsResponseV2))
