"""Raw JoinGroup and SyncGroup requests through a Cluster (no membership logic)."""

import asyncio
import time
from typing import List, Tuple

from kiel.cluster import Cluster
from kiel.exc import MemberIdRequiredError, RebalanceInProgressError, for_code
from kiel.protocol import (
    JoinGroupProtocol,
    JoinGroupRequestV5,
    JoinGroupResponseV5,
    SyncGroupAssignment,
    SyncGroupRequestV3,
)
from kiel.protocol.group_membership import CONSUMER_PROTOCOL_TYPE, UNKNOWN_MEMBER_ID

SESSION_MS = 10_000
REBALANCE_MS = 30_000


async def join(cluster: Cluster, coordinator: int, group: str, metadata: bytes,
               member_id: str = UNKNOWN_MEMBER_ID) -> Tuple[JoinGroupResponseV5, float]:
    """Join ``group`` as a consumer with the range protocol; a first join
    (no member id) takes the id the coordinator requires and joins again.

    Returns:
        the answer to the join that counted, and how long it took.
    """
    request = JoinGroupRequestV5(group, SESSION_MS, REBALANCE_MS, member_id, None,
                                 CONSUMER_PROTOCOL_TYPE, [JoinGroupProtocol("range", metadata)])
    started = time.monotonic()
    response = await cluster.send(coordinator, request, timeout=REBALANCE_MS / 1000)
    if response.error_code == MemberIdRequiredError.errno:
        assert response.member_id, "MEMBER_ID_REQUIRED without an id"
        response = await cluster.send(coordinator, request._replace(member_id=response.member_id),
                                      timeout=REBALANCE_MS / 1000)
    return response, time.monotonic() - started


async def sync(cluster: Cluster, coordinator: int, group: str, joined: JoinGroupResponseV5,
               assignments: List[SyncGroupAssignment]) -> bytes:
    """SyncGroup until the assignment arrives (a follower's SyncGroup may be
    answered REBALANCE_IN_PROGRESS until the leader's: bounded, 20 s)."""
    deadline = time.monotonic() + 20
    while True:
        answer = await cluster.send(coordinator, SyncGroupRequestV3(
            group, joined.generation_id, joined.member_id, None, assignments))
        if answer.error_code != RebalanceInProgressError.errno or time.monotonic() > deadline:
            assert answer.error_code == 0, for_code(answer.error_code)
            return answer.assignment
        await asyncio.sleep(0.2)

