"""GroupCoordinator v0 and FindCoordinator v1 (api key 10, "ConsumerMetadata"
in 0.8.2): find a group's coordinator.

Wire grammar (v0)::

    GroupCoordinatorRequest  => GroupId(string)
    GroupCoordinatorResponse => ErrorCode(int16) CoordinatorId(int32) CoordinatorHost(string)
                                CoordinatorPort(int32)

0.8.1 brokers lack this API (they close the connection); clients then fall
back to any broker. Some 0.8.2 brokers answer it with correlation id 0:
:class:`kiel.protocol.framing.ClientFraming` accepts that.

Wire grammar (v1, "FindCoordinator", Kafka 0.11+)::

    FindCoordinatorRequest v1  => Key(string) KeyType(int8)
    FindCoordinatorResponse v1 => ThrottleTimeMs(int32) ErrorCode(int16)
                                  ErrorMessage(nullable string) NodeId(int32)
                                  Host(string) Port(int32)

``key`` is the group id with :data:`KEY_TYPE_GROUP` (or a transactional id
with :data:`KEY_TYPE_TRANSACTION`).

FindCoordinator v2 (Kafka 2.0+) has the v1 layout; a v2 broker answers before
throttling a client over its quota (KIP-219), where v1 answered after. The
group APIs' versions (:mod:`kiel.protocol.group_membership`) come with it.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Int8, Int16, Int32, NullableString, String

#: FindCoordinator v1 key types.
KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


class GroupCoordinatorRequest(NamedTuple):
    group_id: Annotated[str, String]


class GroupCoordinatorResponse(NamedTuple):
    error_code: Annotated[int, Int16]
    coordinator_id: Annotated[int, Int32]
    host: Annotated[str, String]
    port: Annotated[int, Int32]


GROUP_COORDINATOR_V0 = register(
    Api(10, 0, "GroupCoordinator", GroupCoordinatorRequest, GroupCoordinatorResponse)
)


class FindCoordinatorRequestV1(NamedTuple):
    key: Annotated[str, String]
    key_type: Annotated[int, Int8]


class FindCoordinatorResponseV1(NamedTuple):
    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    error_message: Annotated[Optional[str], NullableString]
    coordinator_id: Annotated[int, Int32]
    host: Annotated[str, String]
    port: Annotated[int, Int32]


FIND_COORDINATOR_V1 = register(
    Api(10, 1, "FindCoordinator", FindCoordinatorRequestV1, FindCoordinatorResponseV1)
)


class FindCoordinatorRequestV2(FindCoordinatorRequestV1):
    """FindCoordinator v2 request (the v1 layout; its own class for the registry)."""

    __slots__ = ()


class FindCoordinatorResponseV2(FindCoordinatorResponseV1):
    """FindCoordinator v2 response (the v1 layout; its own class for the registry)."""

    __slots__ = ()


FIND_COORDINATOR_V2 = register(
    Api(10, 2, "FindCoordinator", FindCoordinatorRequestV2, FindCoordinatorResponseV2)
)
