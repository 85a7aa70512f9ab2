"""The group coordinator's schemas judged by Tansu, a broker we did not write.

Raw requests through a kiel :class:`~kiel.cluster.Cluster` (its negotiated
connections, no membership logic): FindCoordinator v2, JoinGroup v5 (first
answer MEMBER_ID_REQUIRED with an id, then a join with it), SyncGroup v3,
Heartbeat v3, OffsetCommit v7 through :class:`~kiel.consumer.offsets.GroupOffsets`
as a member, ListGroups v2, DescribeGroups v4 and LeaveGroup v3, with the
embedded consumer protocol's bytes carried between members.

Tansu answers like Apache Kafka where these tests look; where it differs
(DescribeGroups carries no member metadata, a JoinGroup takes about 5 s, a
follower's SyncGroup answers REBALANCE_IN_PROGRESS until the leader's
assignment arrives) the tests claim nothing beyond what it does.
"""
import asyncio
import time
from typing import Any, Optional

import pytest

from kiel.client import Client
from kiel.cluster import Cluster
from kiel.consumer.offsets import GroupOffsets
from kiel.exc import (
    IllegalGenerationError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    for_code,
)
from kiel.protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    DescribeGroupsRequestV4,
    FindCoordinatorRequestV2,
    HeartbeatRequestV3,
    JoinGroupProtocol,
    JoinGroupRequestV5,
    JoinGroupResponseV5,
    LeaveGroupMember,
    LeaveGroupMemberResponse,
    LeaveGroupRequestV3,
    ListedGroup,
    ListGroupsRequestV2,
    SyncGroupAssignment,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kiel.protocol.group_coordinator import KEY_TYPE_GROUP
from kiel.protocol.versions import (
    DESCRIBE_GROUPS,
    GROUP_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LIST_GROUPS,
    OFFSET_COMMIT,
    SYNC_GROUP,
)
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.support.group_requests import REBALANCE_MS, SESSION_MS, join, sync

pytestmark = pytest.mark.interop


async def heartbeat(cluster: Cluster, coordinator: int, group: str, generation: int,
                    member_id: str) -> Optional[type]:
    answer = await cluster.send(coordinator, HeartbeatRequestV3(group, generation, member_id,
                                                                None))
    return for_code(answer.error_code)


def test_one_member_through_every_group_api(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("members"), 3)
    group = unique("group")
    subscription = ConsumerSubscription([topic], b"capacity=2")
    assignment = ConsumerAssignment([(topic, [0, 1, 2])], b"")

    async def main() -> None:
        async with Client(tansu_broker.bootstrap) as client:
            cluster = client.cluster
            found = await cluster.send_any(FindCoordinatorRequestV2(group, KEY_TYPE_GROUP))
            assert found.error_code == 0 and found.coordinator_id in cluster.brokers
            coordinator = await cluster.coordinator(group)
            assert coordinator == found.coordinator_id
            versions = await cluster.versions(coordinator)
            assert [versions.of(k) for k in (GROUP_COORDINATOR, JOIN_GROUP, SYNC_GROUP, HEARTBEAT,
                                             LEAVE_GROUP, LIST_GROUPS, DESCRIBE_GROUPS,
                                             OFFSET_COMMIT)] == [2, 5, 3, 3, 3, 2, 4, 7]
            metadata = encode_subscription(subscription)

            # KIP-394: the first join is refused with the id to join with.
            first = await cluster.send(coordinator, JoinGroupRequestV5(
                group, SESSION_MS, REBALANCE_MS, "", None, "consumer",
                [JoinGroupProtocol("range", metadata)]))
            assert for_code(first.error_code) is MemberIdRequiredError
            assert first.member_id and first.generation_id == -1 and first.members == []
            joined, _ = await join(cluster, coordinator, group, metadata, first.member_id)
            assert joined.error_code == 0 and joined.member_id == first.member_id
            # Alone, so the leader: it gets every member's subscription back.
            assert joined.leader == joined.member_id and joined.protocol_name == "range"
            assert [(m.member_id, m.group_instance_id) for m in joined.members] == [
                (joined.member_id, None)]
            assert decode_subscription(joined.members[0].metadata) == (0, subscription)

            mine = await sync(cluster, coordinator, group, joined, [
                SyncGroupAssignment(joined.member_id, encode_assignment(assignment))])
            assert decode_assignment(mine) == (0, assignment)

            generation, member = joined.generation_id, joined.member_id
            assert await heartbeat(cluster, coordinator, group, generation, member) is None
            assert await heartbeat(cluster, coordinator, group, generation + 1,
                                   member) is IllegalGenerationError

            # OffsetCommit v7 as the member: its generation and id are checked.
            tp = TopicPartition(topic, 0)
            offsets = GroupOffsets(cluster, group, generation_id=generation, member_id=member)
            await offsets.commit({tp: 5})
            assert await offsets.fetch([tp]) == {tp: 5}
            offsets.generation_id = generation + 1
            with pytest.raises(IllegalGenerationError) as stale:
                await offsets.commit({tp: 6})
            assert (stale.value.group, stale.value.partition) == (group, 0)
            offsets.generation_id, offsets.member_id = generation, "somebody-else"
            with pytest.raises(UnknownMemberIdError):
                await offsets.commit({tp: 6})
            assert await offsets.fetch([tp]) == {tp: 5}

            listed = await cluster.send(coordinator, ListGroupsRequestV2())
            assert listed.error_code == 0
            assert ListedGroup(group, "consumer") in listed.groups
            described = await cluster.send(coordinator, DescribeGroupsRequestV4([group], False))
            [one] = described.groups
            assert (one.error_code, one.group_id, one.group_state, one.protocol_type) == (
                0, group, "Stable", "consumer")
            # Tansu lists the members without their metadata: only the ids are judged.
            assert {m.member_id for m in one.members} <= {member}

            left = await cluster.send(coordinator, LeaveGroupRequestV3(
                group, [LeaveGroupMember(member, None)]))
            assert left.error_code == 0
            assert left.members == [LeaveGroupMemberResponse(member, None, 0)]
            assert await heartbeat(cluster, coordinator, group, generation,
                                   member) is UnknownMemberIdError

    run(main(), timeout=60)


@pytest.mark.slow  # two Tansu rebalances, about 15 s
def test_a_second_member_rebalances_the_group_and_the_leader_assigns_both(
    tansu_broker: Any,
) -> None:
    # The follower's path: the leader sees both subscriptions (one written by
    # kiel as v0, one as v3 with owned partitions), hands out disjoint
    # partitions, the follower reads its own from SyncGroup; both leave in
    # one LeaveGroup v3 batch.
    topic = tansu_broker.create_topic(unique("two"), 4)
    group = unique("group")
    sub_a = ConsumerSubscription([topic])
    sub_b = ConsumerSubscription([topic], None, [(topic, [3])], 4, "rack-b")

    async def main() -> None:
        async with Client(tansu_broker.bootstrap) as client:
            cluster = client.cluster
            coordinator = await cluster.coordinator(group)
            a, _ = await join(cluster, coordinator, group, encode_subscription(sub_a))
            assert a.error_code == 0 and a.leader == a.member_id
            await sync(cluster, coordinator, group, a, [SyncGroupAssignment(
                a.member_id, encode_assignment(ConsumerAssignment([(topic, [0, 1, 2, 3])])))])

            async def a_notices_and_rejoins() -> JoinGroupResponseV5:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    error = await heartbeat(cluster, coordinator, group, a.generation_id,
                                            a.member_id)
                    if error is RebalanceInProgressError:
                        again, _ = await join(cluster, coordinator, group,
                                              encode_subscription(sub_a), a.member_id)
                        return again
                    assert error is None, error
                    await asyncio.sleep(0.3)
                raise AssertionError("the leader never saw the rebalance")

            (b, _), a2 = await asyncio.gather(
                join(cluster, coordinator, group, encode_subscription(sub_b, 3)),
                a_notices_and_rejoins())
            assert (a2.error_code, b.error_code) == (0, 0)
            assert a2.generation_id == b.generation_id > a.generation_id
            assert a2.leader == b.leader
            leader, follower = (a2, b) if a2.leader == a2.member_id else (b, a2)
            assert follower.members == []
            subscriptions = {m.member_id: decode_subscription(m.metadata) for m in leader.members}
            assert subscriptions == {a2.member_id: (0, sub_a), b.member_id: (3, sub_b)}

            plan = {a2.member_id: [0, 1], b.member_id: [2, 3]}
            got = await asyncio.gather(
                sync(cluster, coordinator, group, leader, [
                    SyncGroupAssignment(member, encode_assignment(
                        ConsumerAssignment([(topic, parts)])))
                    for member, parts in plan.items()]),
                sync(cluster, coordinator, group, follower, []))
            assert [decode_assignment(g)[1] for g in got] == [
                ConsumerAssignment([(topic, plan[leader.member_id])]),
                ConsumerAssignment([(topic, plan[follower.member_id])])]

            left = await cluster.send(coordinator, LeaveGroupRequestV3(group, [
                LeaveGroupMember(a2.member_id, None), LeaveGroupMember(b.member_id, None)]))
            assert left.error_code == 0
            assert sorted(left.members) == sorted([
                LeaveGroupMemberResponse(a2.member_id, None, 0),
                LeaveGroupMemberResponse(b.member_id, None, 0)])

    run(main(), timeout=90)
