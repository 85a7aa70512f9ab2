"""kiel.admin's helpers for broker-coordinated groups: list_broker_groups
(ListGroups v2 on every broker) and describe_broker_group (DescribeGroups at
the coordinator, members' subscriptions and assignments decoded).

Decoding is checked on bytes kafka-python's own encoders wrote; the requests
against Tansu (which lists a group only once it has committed offsets, and
describes members without their metadata) and the embedded 0.8.2 broker
(which has no group APIs: a typed error that says so)."""
from typing import Any

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from kiel.admin import (
    BrokerGroup,
    BrokerGroupMember,
    _broker_group,
    describe_broker_group,
    list_broker_groups,
)
from kiel.client import Client
from kiel.consumer.offsets import GroupOffsets
from kiel.exc import ConsumerProtocolError, UnsupportedFeatureError
from kiel.protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    DescribedGroup,
    DescribedGroupV4,
    DescribedMember,
    DescribedMemberV4,
    LeaveGroupMember,
    LeaveGroupRequestV3,
    SyncGroupAssignment,
    encode_assignment,
    encode_subscription,
)
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.support.group_requests import join, sync


def kafka_python_member(member_id: str, instance: Any = None) -> DescribedMemberV4:
    """A member as the coordinator describes one that kafka-python runs
    (cooperative-sticky: subscription v1 with owned partitions)."""
    sub = KpSubscription(version=1, topics=["t", "u"], user_data=b"",
                         owned_partitions=[("t", [0])])
    assignment = KpAssignment(version=1, assigned_partitions=[("t", [0, 1])], user_data=b"")
    return DescribedMemberV4(member_id, instance, "kafka-python-3", "/10.0.0.1",
                             bytes(sub.encode()), bytes(assignment.encode()))


def test_members_bytes_are_decoded() -> None:
    answer = DescribedGroupV4(0, "g", "Stable", "consumer", "cooperative-sticky", [
        kafka_python_member("m-1", "host-1"),
        # Between generations the coordinator gives no bytes: unknown, not empty.
        DescribedMemberV4("m-2", None, "kiel", "/10.0.0.2", b"", b""),
    ], -(2**31))
    group = _broker_group(answer)
    assert (group.group, group.state, group.protocol_type, group.protocol) == (
        "g", "Stable", "consumer", "cooperative-sticky")
    first, second = group.members
    assert first[:4] == ("m-1", "host-1", "kafka-python-3", "/10.0.0.1")
    assert first.subscription == ConsumerSubscription(["t", "u"], b"", [("t", [0])])
    assert first.assignment == ConsumerAssignment([("t", [0, 1])], b"")
    assert first.metadata == answer.members[0].member_metadata
    assert (second.subscription, second.assignment) == (None, None)


def test_a_v2_answer_has_no_instance_ids() -> None:
    v4 = kafka_python_member("m-1")
    v2 = DescribedGroup(0, "g", "Stable", "consumer", "range", [DescribedMember(
        v4.member_id, v4.client_id, v4.client_host, v4.member_metadata, v4.member_assignment)])
    [member] = _broker_group(v2).members
    assert member.group_instance_id is None
    assert member.subscription == ConsumerSubscription(["t", "u"], b"", [("t", [0])])


def test_another_protocol_keeps_its_bytes_undecoded() -> None:
    answer = DescribedGroup(0, "connect", "Stable", "connect", "sessioned", [
        DescribedMember("w-1", "worker", "/h", b"\x00\x01anything", b"\x00")])
    [member] = _broker_group(answer).members
    assert (member.subscription, member.assignment) == (None, None)
    assert (member.metadata, member.assignment_bytes) == (b"\x00\x01anything", b"\x00")


def test_a_members_garbage_bytes_are_a_typed_error_naming_it() -> None:
    answer = DescribedGroup(0, "g", "Stable", "consumer", "range", [
        DescribedMember("m-1", "c", "/h", b"\x00\x00\x00\x00\x00\x09", b"")])
    with pytest.raises(ConsumerProtocolError) as info:
        _broker_group(answer)
    assert (info.value.group, info.value.context["member"]) == ("g", "m-1")


@pytest.mark.interop
def test_list_and_describe_a_group_on_tansu(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("admin"), 2)
    group = unique("admin")
    sub = ConsumerSubscription([topic])

    async def main() -> None:
        async with Client(tansu_broker.bootstrap) as client:
            cluster = client.cluster
            coordinator = await cluster.coordinator(group)
            joined, _ = await join(cluster, coordinator, group, encode_subscription(sub))
            assert joined.error_code == 0
            await sync(cluster, coordinator, group, joined, [SyncGroupAssignment(
                joined.member_id, encode_assignment(ConsumerAssignment([(topic, [0, 1])])))])
            await GroupOffsets(cluster, group, generation_id=joined.generation_id,
                               member_id=joined.member_id).commit({TopicPartition(topic, 0): 1})

            assert (group, "consumer") in await list_broker_groups(cluster)
            described = await describe_broker_group(cluster, group)
            assert isinstance(described, BrokerGroup)
            assert (described.group, described.state, described.protocol_type) == (
                group, "Stable", "consumer")
            # Tansu describes the member without its bytes: only the id is judged.
            assert all(isinstance(m, BrokerGroupMember) for m in described.members)
            assert {m.member_id for m in described.members} <= {joined.member_id}
            unknown = await describe_broker_group(cluster, unique("nobody"))
            assert unknown.members == [] and unknown.state in ("Dead", "Empty")
            await cluster.send(coordinator, LeaveGroupRequestV3(
                group, [LeaveGroupMember(joined.member_id, None)]))

    run(main(), timeout=60)


@pytest.mark.zookeeper
def test_a_0_8_broker_has_no_broker_groups(kafka_cluster: Any) -> None:
    async def main() -> None:
        async with Client(kafka_cluster.bootstrap) as client:
            with pytest.raises(UnsupportedFeatureError, match="ListGroups"):
                await list_broker_groups(client.cluster)
            with pytest.raises(UnsupportedFeatureError, match="DescribeGroups"):
                await describe_broker_group(client.cluster, "g")

    run(main())
