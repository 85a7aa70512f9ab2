"""The group requests of one member, sent to its group's coordinator.

:class:`GroupRequests` finds the coordinator (FindCoordinator, strictly:
an error is an error, not "any broker will do" as for 0.8 offsets: the
group's one lookup, which its commits share too), sends
JoinGroup v5, SyncGroup v3, Heartbeat v3 and LeaveGroup v3 to it, and turns
an answer's error code into its typed error. A coordinator that moved,
is not available or cannot be reached is forgotten, so the next request
looks it up again.
"""

from typing import Any, Optional

from kiel.cluster import Cluster
from kiel.exc import (
    ConsumerCoordinatorNotAvailableError,
    KielError,
    MemberIdRequiredError,
    NotCoordinatorForConsumerError,
    UnsupportedFeatureError,
    for_code,
)
from kiel.protocol.group_membership import (
    HeartbeatRequestV3,
    HeartbeatResponseV3,
    JoinGroupProtocol,
    JoinGroupRequestV5,
    JoinGroupResponseV5,
    LeaveGroupMember,
    LeaveGroupRequestV3,
    LeaveGroupResponseV3,
    SyncGroupAssignment,
    SyncGroupRequestV3,
    SyncGroupResponseV3,
)
from kiel.protocol.versions import HEARTBEAT, JOIN_GROUP, LEAVE_GROUP, SYNC_GROUP

__all__ = ["HEARTBEAT_LANE", "LANE", "GroupRequests", "PROTOCOL_TYPE"]

#: JoinGroup's protocol type for consumers (the embedded consumer protocol).
PROTOCOL_TYPE = "consumer"
#: The coordinator connection of a member's group requests and commits: its
#: own, so they never wait behind the fetcher's long polls (a broker answers
#: one connection's requests in order).
LANE = "group"
#: Heartbeats' own coordinator connection: a JoinGroup the coordinator holds
#: (for seconds, while a cooperative member keeps fetching) must not hold
#: the heartbeats that keep, and judge, the member's session.
HEARTBEAT_LANE = "heartbeat"
#: The coordinator errors after which it is looked up again.
_MOVED = (NotCoordinatorForConsumerError, ConsumerCoordinatorNotAvailableError)


class GroupRequests:
    """Send one member's group requests to the coordinator.

    Args:
        cluster: the consumer's cluster.
        group: the group.
        instance_id: the member's ``group_instance_id`` (``None``: dynamic).
    """

    def __init__(self, cluster: Cluster, group: str, instance_id: Optional[str]) -> None:
        self.cluster = cluster
        self.group = group
        self.instance_id = instance_id
        #: The coordinator's broker id, when known.
        self.coordinator: Optional[int] = None

    async def find(self) -> int:
        """The coordinator's broker id (looked up when not known).

        Raises:
            UnsupportedFeatureError: the coordinator serves no group API
                in the versions kiel speaks (Kafka before 2.4; on 0.8 the
                groups live in ZooKeeper).
            BrokerError: the lookup's error (coordinator not available: retriable).
            NoBrokersError: no broker answered.
        """
        if self.coordinator is None or self.coordinator not in self.cluster.brokers:
            self.coordinator = await self.cluster.group_coordinator(self.group)
        versions = await self.cluster.versions(self.coordinator)
        try:
            for api in (JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP):
                versions.of(api)
        except UnsupportedFeatureError as e:
            raise UnsupportedFeatureError(
                f"the brokers do not coordinate groups in the versions kiel speaks ({e}): "
                "broker groups need Kafka 2.4 or later (JoinGroup v5, SyncGroup, Heartbeat "
                "and LeaveGroup v3); on an older cluster keep the group in ZooKeeper: "
                "pass zk_hosts", group=self.group,
            ) from e
        return self.coordinator

    def forget(self) -> None:
        """Look the coordinator up again at the next request (a commit's
        coordinator error says so too: the group's commits share this lookup)."""
        self.coordinator = None

    async def _send(self, request: Any, api: str, timeout: Optional[float] = None,
                    answered: tuple[int, ...] = (), lane: str = LANE) -> Any:
        """Send ``request`` to the coordinator once; its error code raised typed.

        Args:
            request: the request.
            api: its name, for the errors.
            timeout: seconds to wait for the answer (default: the request timeout).
            answered: error codes returned in the answer instead of raised.
            lane: the coordinator connection (default the group's).

        Raises:
            BrokerError: the answer's error (a moved coordinator is forgotten first).
            KielConnectionError, RequestTimeoutError, NoBrokersError: the
                coordinator could not be reached (it is forgotten).
        """
        coordinator = await self.find()
        try:
            response = await self.cluster.send(coordinator, request, timeout=timeout, lane=lane)
        except KielError as e:
            if e.retriable:
                self.forget()
            raise
        if response.error_code not in answered:
            self.check(response.error_code, api)
        return response

    def check(self, code: int, api: str, member_id: Optional[str] = None) -> None:
        """Raise the typed error of ``code`` (nothing for 0).

        Raises:
            BrokerError: the error, with the group, api and member in its context.
        """
        cls = for_code(code)
        if cls is None:
            return
        if issubclass(cls, _MOVED):
            self.forget()
        raise cls(api=api, group=self.group, errno=code, member=member_id)

    async def join(
        self,
        member_id: str,
        protocols: list[JoinGroupProtocol],
        session_timeout: float,
        rebalance_timeout: float,
    ) -> JoinGroupResponseV5:
        """JoinGroup v5: wait (up to ``rebalance_timeout``) for the group's next generation.

        Returns:
            the answer; one with MEMBER_ID_REQUIRED's code (a new member's
            first join) gives the member id to join again with.

        Raises:
            BrokerError, KielConnectionError, RequestTimeoutError: as :meth:`_send`.
        """
        request = JoinGroupRequestV5(
            self.group, int(session_timeout * 1000), int(rebalance_timeout * 1000),
            member_id, self.instance_id, PROTOCOL_TYPE, protocols,
        )
        response: JoinGroupResponseV5 = await self._send(
            request, "JoinGroup", rebalance_timeout + self.cluster.request_timeout,
            answered=(MemberIdRequiredError.errno,),
        )
        return response

    async def sync(
        self, member_id: str, generation: int, assignments: list[SyncGroupAssignment],
        timeout: float,
    ) -> bytes:
        """SyncGroup v3: this member's assignment (the leader sends everyone's).

        Raises:
            BrokerError, KielConnectionError, RequestTimeoutError: as :meth:`_send`.
        """
        response: SyncGroupResponseV3 = await self._send(
            SyncGroupRequestV3(self.group, generation, member_id, self.instance_id, assignments),
            "SyncGroup", timeout + self.cluster.request_timeout,
        )
        return bytes(response.assignment or b"")

    async def heartbeat(self, member_id: str, generation: int, timeout: float) -> None:
        """Heartbeat v3, waiting ``timeout`` seconds at most (past the session it is moot),
        on a connection of its own (:data:`HEARTBEAT_LANE`).

        Raises:
            BrokerError, KielConnectionError, RequestTimeoutError: as :meth:`_send`.
        """
        response: HeartbeatResponseV3 = await self._send(
            HeartbeatRequestV3(self.group, generation, member_id, self.instance_id), "Heartbeat",
            min(timeout, self.cluster.request_timeout), lane=HEARTBEAT_LANE,
        )
        del response

    async def leave(self, member_id: str) -> None:
        """LeaveGroup v3 for this member.

        Raises:
            BrokerError, KielConnectionError, RequestTimeoutError: as :meth:`_send`.
        """
        response: LeaveGroupResponseV3 = await self._send(
            LeaveGroupRequestV3(self.group, [LeaveGroupMember(member_id, self.instance_id)]),
            "LeaveGroup",
        )
        for member in response.members:
            self.check(member.error_code, "LeaveGroup", member.member_id)
