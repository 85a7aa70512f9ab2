"""GroupCoordinator v0 (api key 10, "ConsumerMetadata" in 0.8.2): find a group's coordinator.

Wire grammar::

    GroupCoordinatorRequest  => GroupId(string)
    GroupCoordinatorResponse => ErrorCode(int16) CoordinatorId(int32) CoordinatorHost(string)
                                CoordinatorPort(int32)

0.8.1 brokers lack this API (they close the connection); clients then fall
back to any broker. Some 0.8.2 brokers answer it with correlation id 0:
:class:`kiel.protocol.framing.ClientFraming` accepts that.
"""
from typing import Annotated, NamedTuple

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Int16, Int32, String


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
