"""The coordinator as an object the caller passes (issue 32, item 1).

``GroupedConsumer(..., coordinator=BrokerGroup(...))`` or
``coordinator=ZooKeeperGroup(hosts=...)``; kiel 1.x's keywords (``zk_hosts=``,
``session_timeout=`` ...) as a shim that builds the same objects; the typed
group part of the metrics; one admin interface over both kinds of group,
judged on a real ZooKeeper with the embedded 0.8.2 brokers and on Tansu.
"""
import dataclasses
import inspect
import os
import subprocess
import sys
from typing import Any

import pytest

from kiel import BrokerGroup, GroupedConsumer, ZooKeeperGroup
from kiel.admin import (
    BrokerGroupAdmin,
    ListedGroup,
    ShiftBy,
    ZooKeeperGroupAdmin,
    group_admin,
)
from kiel.allocators import kafka_round_robin, round_robin
from kiel.client import Client
from kiel.consumer.membership import (
    COORDINATORS,
    OWN_KEYWORDS,
    SHARED_KEYWORDS,
    GroupCoordinator,
    shim_keywords,
)
from kiel.coordinator.broker_group import BrokerGroupMetrics
from kiel.exc import ArgumentError, ConfigError, NonEmptyGroupError
from kiel.metrics import samples
from kiel.structs import GroupMetadata, TopicPartition
from kiel.zookeeper.group_coordinator import ZooKeeperGroupMetrics, allocator_of
from tests.conftest import run, unique
from tests.support.waiting import until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOOT = "127.0.0.1:1"


# --------------------------------------------------------------------------
# the object form, the shim, and their conflicts (no I/O)


def test_the_consumers_own_signature_holds_no_coordinators_keyword() -> None:
    params = [p for p in inspect.signature(GroupedConsumer.__init__).parameters.values()
              if p.name != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD]
    names = {p.name for p in params}
    # 28 before (12 for one coordinator or the other); now 12, none of them
    # a coordinator's: those are the objects' fields.
    assert len(params) == 12, names
    assert "coordinator" in names
    assert not names & set(shim_keywords()), names & set(shim_keywords())


def test_the_object_given_is_the_consumers_coordinator() -> None:
    brokers = BrokerGroup(session_timeout=6.0, heartbeat_interval=1.0, allocator="range")
    c = GroupedConsumer(BOOT, "g", topics=["t"], coordinator=brokers)
    assert c.coordinator is brokers and c.coordinator.kind == "brokers"
    zookeeper = ZooKeeperGroup(hosts="127.0.0.1:2181", member_id="me", capacity=2.0)
    z = GroupedConsumer(BOOT, "g", topics=["t"], coordinator=zookeeper)
    assert z.coordinator is zookeeper and z.member_id == "me"
    # One object may configure many consumers: it holds no connection.
    again = GroupedConsumer(BOOT, "g2", topics=["t"], coordinator=zookeeper)
    assert again.coordinator is z.coordinator


def test_neither_an_object_nor_zk_hosts_means_the_brokers_default() -> None:
    c = GroupedConsumer(BOOT, "g", topics=["t"])
    assert c.coordinator == BrokerGroup()
    assert GroupedConsumer(BOOT, "g", topics=["t"], zk_hosts=None).coordinator == BrokerGroup()


def test_the_old_keywords_build_the_same_objects() -> None:
    z = GroupedConsumer(BOOT, "g", topics=["t"], zk_hosts="h1:2181,h2:2181/kafka",
                        zk_session_timeout=6.0, zk_chroot="/c", zk_max_retry_delay=2.0,
                        zk_connect_timeout=3.0, zk_auth="u:pw", partitions_from="metadata",
                        acquire_timeout=4.0, allocator="sticky", member_id="m",
                        capacity=3.0, join_timeout=5.0, leave_timeout=6.0)
    assert z.coordinator == ZooKeeperGroup(
        hosts="h1:2181,h2:2181/kafka", session_timeout=6.0, chroot="/c", max_retry_delay=2.0,
        connect_timeout=3.0, auth="u:pw", partitions_from="metadata", acquire_timeout=4.0,
        allocator="sticky", member_id="m", capacity=3.0, join_timeout=5.0, leave_timeout=6.0)
    b = GroupedConsumer(BOOT, "g", topics=["t"], session_timeout=9.0, heartbeat_interval=2.0,
                        max_poll_interval=30.0, group_instance_id="i-1", allocator="roundrobin",
                        capacity=2.0, join_timeout=7.0, leave_timeout=8.0)
    assert b.coordinator == BrokerGroup(
        session_timeout=9.0, heartbeat_interval=2.0, max_poll_interval=30.0,
        group_instance_id="i-1", allocator="roundrobin", capacity=2.0, join_timeout=7.0,
        leave_timeout=8.0)
    assert b.group_settings is b.coordinator  # the earlier attribute's name


@pytest.mark.parametrize("coordinator,keywords", [
    (BrokerGroup(), {"session_timeout": 6.0}),
    (BrokerGroup(), {"allocator": "range"}),
    (BrokerGroup(), {"zk_hosts": "h:2181"}),
    (ZooKeeperGroup(hosts="h:2181"), {"zk_session_timeout": 6.0}),
    (ZooKeeperGroup(hosts="h:2181"), {"heartbeat_interval": 1.0}),
    (ZooKeeperGroup(hosts="h:2181"), {"capacity": 2.0}),
])
def test_an_object_and_old_keywords_together_are_refused(coordinator: Any,
                                                          keywords: Any) -> None:
    with pytest.raises(ArgumentError, match="either to the coordinator object") as e:
        GroupedConsumer(BOOT, "g", topics=["t"], coordinator=coordinator, **keywords)
    assert isinstance(e.value, ConfigError)
    assert next(iter(keywords)) in str(e.value)


def test_a_coordinator_that_is_no_coordinator_object_is_refused() -> None:
    for wrong in ("zookeeper", {"hosts": "h:2181"}, "h:2181"):
        with pytest.raises(ConfigError, match="coordinator must be a coordinator object"):
            GroupedConsumer(BOOT, "g", topics=["t"], coordinator=wrong)  # type: ignore[arg-type]


def test_each_object_refuses_the_others_settings() -> None:
    # The object form of tests/test_broker_groups.py's refusal test: the
    # other coordinator's settings are not this object's fields at all.
    with pytest.raises(TypeError, match="heartbeat_interval"):
        ZooKeeperGroup(hosts="h:2181", heartbeat_interval=1.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="hosts"):
        BrokerGroup(hosts="h:2181")  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="group_instance_id"):
        BrokerGroup(member_id="me")
    with pytest.raises(ConfigError, match="preference list"):
        ZooKeeperGroup(hosts="h:2181", allocator=["range", "roundrobin"])


def test_settings_are_checked_when_the_object_is_built_and_named_as_given() -> None:
    # The object's field names in its own errors; the shim's keyword in the shim's.
    with pytest.raises(ConfigError, match=r"^session_timeout is in seconds.*10 s"):
        ZooKeeperGroup(hosts="h:2181", session_timeout=10000)
    with pytest.raises(ConfigError, match=r"^zk_session_timeout is in seconds"):
        GroupedConsumer(BOOT, "g", topics=["t"], zk_hosts="h:2181", zk_session_timeout=10000)
    with pytest.raises(ConfigError, match=r"^hosts: 'h:x'"):
        ZooKeeperGroup(hosts="h:x")
    with pytest.raises(ConfigError, match=r"^zk_hosts: 'h:x'"):
        GroupedConsumer(BOOT, "g", topics=["t"], zk_hosts="h:x")
    with pytest.raises(ConfigError, match="join_timeout must be seconds > 0"):
        BrokerGroup(join_timeout=0)
    with pytest.raises(ConfigError, match="capacity must be a number > 0"):
        ZooKeeperGroup(hosts="h:2181", capacity=0)
    with pytest.raises(ConfigError, match="heartbeat_interval"):
        BrokerGroup(session_timeout=3.0, heartbeat_interval=3.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        BrokerGroup().session_timeout = 1.0  # type: ignore[misc]
    assert "pw" not in repr(ZooKeeperGroup(hosts="h:2181", auth="u:pw"))


def test_the_registry_names_each_coordinators_keywords() -> None:
    import importlib

    for kind, (module, name) in COORDINATORS.items():
        cls = getattr(importlib.import_module(module), name)
        assert issubclass(cls, GroupCoordinator) and cls.kind == kind
        assert sorted(cls.KEYWORDS) == sorted(OWN_KEYWORDS[kind])
        shared = {f.name for f in dataclasses.fields(GroupCoordinator)}
        assert shared == set(SHARED_KEYWORDS)
        assert shared <= {f.name for f in dataclasses.fields(cls)}
    assert len(shim_keywords()) == 17


def test_naming_the_objects_and_importing_the_admin_load_no_kazoo() -> None:
    code = (
        "import sys\n"
        "from kiel import BrokerGroup, ZooKeeperGroup, GroupedConsumer\n"
        "import kiel.admin, kiel.cli.groups\n"
        "z = ZooKeeperGroup(hosts='127.0.0.1:2181', auth='u:p')\n"
        "kiel.admin.group_admin(z, None)\n"
        "assert 'kazoo' not in sys.modules, 'kazoo imported'\n"
        "GroupedConsumer('127.0.0.1:1', 'g', topics=['t'], coordinator=z)\n"
        "assert 'kazoo' in sys.modules  # its membership adapter, as with zk_hosts\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stderr


def test_one_allocator_name_is_one_algorithm_in_both_coordinators() -> None:
    from kiel.coordinator.assignors import Member, assignors_for

    members = ["m1", "m2", "m3"]
    partitions = [f"t:{p}" for p in range(12)]
    # ZooKeeper: "round_robin" is the string order, "roundrobin" Java's.
    assert allocator_of("round_robin")[0] is round_robin
    assert allocator_of(None)[0] is round_robin  # the default, unchanged
    assert allocator_of("roundrobin")[0] is kafka_round_robin
    assert round_robin(members, partitions)["m1"] == {"t": [0, 4, 7, 11]}
    assert kafka_round_robin(members, partitions)["m1"] == {"t": [0, 3, 6, 9]}
    # Brokers: the same two algorithms under the same two names.
    group = [Member(m, m, ["t"], None) for m in members]
    for name, expected in (("round_robin", [0, 4, 7, 11]), ("roundrobin", [0, 3, 6, 9])):
        (assignor,) = assignors_for(name)
        assert assignor.assign(group, {"t": 12})["m1"] == [TopicPartition("t", p)
                                                             for p in expected]
    assert [a.name for a in assignors_for(["round_robin", "roundrobin"])] == [
        "kiel.round_robin", "roundrobin"]


def test_the_group_part_of_the_metrics_is_typed_before_connect() -> None:
    b = GroupedConsumer(BOOT, "g", topics=["t"]).metrics()
    assert b.membership == BrokerGroupMetrics(coordinator="brokers")
    assert (b.coordinator, b.group_state, b.zookeeper_state, b.generation) == (
        "brokers", "NOT_STARTED", "NOT_USED", -1)
    z = GroupedConsumer(BOOT, "g", topics=["t"],
                        coordinator=ZooKeeperGroup(hosts="h:2181")).metrics()
    assert z.membership == ZooKeeperGroupMetrics(coordinator="zookeeper",
                                                 zookeeper_state="NOT_STARTED")
    assert (z.coordinator, z.group_state, z.zookeeper_state) == (
        "zookeeper", "NOT_STARTED", "NOT_STARTED")
    names = {s.name for s in samples(z)}
    assert "kiel_group_zookeeper_connected" in names and "kiel_group_generation" not in names
    names = {s.name for s in samples(b)}
    assert "kiel_group_generation" in names and "kiel_group_zookeeper_connected" not in names


# --------------------------------------------------------------------------
# on a real ZooKeeper with the embedded 0.8.2 brokers


@pytest.mark.zookeeper
def test_a_zookeeper_group_from_its_object_metrics_and_admin(kafka_cluster: Any,
                                                            topic_factory: Any) -> None:
    topic = topic_factory(partitions=3)
    group = unique("zkobj")
    coordinator = ZooKeeperGroup(hosts=kafka_cluster.zookeeper, allocator="roundrobin",
                                 session_timeout=6.0)

    async def main() -> None:
        from kiel import Producer

        async with Producer(kafka_cluster.bootstrap) as producer:
            for i in range(30):
                await producer.produce(topic, b"v%d" % i, partition=i % 3)
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group, topics=[topic],
                                   coordinator=coordinator, max_wait_time=0.2)
        async with Client(kafka_cluster.bootstrap) as client:
            groups = group_admin(coordinator, client.cluster, timeout=10.0)
            assert isinstance(groups, ZooKeeperGroupAdmin) and groups.can_force
            async with consumer:
                seen = 0
                while seen < 30:
                    seen += len(await consumer.consume())
                await consumer.consume()  # asking for more finishes the last batch
                await consumer.commit()
                part = consumer.metrics().membership
                assert isinstance(part, ZooKeeperGroupMetrics)
                assert (part.state, part.zookeeper_state, part.connected) == (
                    "CONNECTED", "CONNECTED", True)
                assert consumer.group_metadata() == GroupMetadata(group, -1, "", None)
                assert ListedGroup(group, None) in await groups.list_groups()
                described = await groups.describe(group)
                assert described.members == [consumer.member_id]
                assert {(r.partition, r.committed, r.owner) for r in described.partitions} == {
                    (p, 10, consumer.member_id) for p in range(3)}
                with pytest.raises(ConfigError, match="live member"):
                    await groups.reset(group, None, "earliest", execute=False)
            # The member left: the plan is the same shape as a broker group's.
            plan = await groups.reset(group, {topic: [0, 1]}, ShiftBy(-4), execute=True)
            assert [(r.partition, r.current, r.new) for r in plan] == [(0, 10, 6), (1, 10, 6)]
            after = await groups.describe(group)
            assert {r.partition: r.committed for r in after.partitions} == {0: 6, 1: 6, 2: 10}

    run(main(), timeout=180)


# --------------------------------------------------------------------------
# on Tansu, a current broker


def test_a_broker_group_from_its_object_metrics_and_admin(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("bobj"), 2)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    coordinator = BrokerGroup(session_timeout=6.0, heartbeat_interval=1.0, allocator="roundrobin")

    async def main() -> None:
        from kiel import Producer

        async with Producer(bootstrap) as producer:
            for i in range(20):
                await producer.produce(topic, b"v%d" % i, partition=i % 2)
        consumer = GroupedConsumer(bootstrap, group, topics=[topic], coordinator=coordinator,
                                   max_wait_time=0.2, commit_interval=None)
        async with Client(bootstrap) as client:
            groups = group_admin(coordinator, client.cluster)
            assert isinstance(groups, BrokerGroupAdmin) and not groups.can_force
            async with consumer:
                seen = 0
                while seen < 20:
                    seen += len(await consumer.consume())
                await consumer.consume()  # asking for more finishes the last batch
                await consumer.commit()
                part = consumer.metrics().membership
                assert isinstance(part, BrokerGroupMetrics)
                assert (part.state, part.leader, part.assignor) == ("STABLE", True, "roundrobin")
                assert part.generation >= 0 and part.heartbeats
                await until(lambda: consumer.group_metrics().last_heartbeat is not None,
                            timeout=10, what="a heartbeat answered")
                assert consumer.group_metadata() == GroupMetadata(
                    group, part.generation, consumer.member_id, None)
                listed = await groups.list_groups()
                assert group in [g.group for g in listed]
                described = await groups.describe(group)
                assert {r.partition: r.committed for r in described.partitions} == {0: 10, 1: 10}
                with pytest.raises(NonEmptyGroupError):
                    await groups.reset(group, None, "earliest", execute=False)
                with pytest.raises(ConfigError, match="force is for ZooKeeper groups"):
                    await groups.reset(group, None, "earliest", execute=False, force=True)
            # Left: the coordinator lets the group be reset from outside.
            plan = await until_resettable(groups, group, topic)
            assert [(r.partition, r.current, r.new) for r in plan] == [(0, 10, 6)]
            after = await groups.describe(group)
            assert {r.partition: r.committed for r in after.partitions} == {0: 6, 1: 10}

    run(main(), timeout=180)


async def until_resettable(groups: Any, group: str, topic: str) -> Any:
    """Reset once the coordinator says the group is Empty (Tansu may take a moment)."""
    import asyncio

    for _ in range(60):
        try:
            return await groups.reset(group, {topic: [0]}, ShiftBy(-4), execute=True)
        except NonEmptyGroupError:
            await asyncio.sleep(0.5)
    raise AssertionError("the group never became resettable after its member left")


@pytest.mark.zookeeper
def test_listing_zookeeper_groups_reads_zookeeper_alone(kafka_cluster: Any,
                                                         topic_factory: Any) -> None:
    # kiel group list -z asks ZooKeeperGroup's admin, which lists from
    # ZooKeeper only: unreachable brokers given with -b do not matter.
    group = unique("zklist")

    async def main() -> None:
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group,
                                   topics=[topic_factory(partitions=1)], max_wait_time=0.2,
                                   coordinator=ZooKeeperGroup(hosts=kafka_cluster.zookeeper))
        async with consumer:
            env = {**os.environ, "PYTHONPATH": REPO}
            result = subprocess.run(
                [sys.executable, "-m", "kiel.cli", "-b", "127.0.0.1:1", "-z",
                 kafka_cluster.zookeeper, "--timeout", "20", "group", "list"],
                capture_output=True, timeout=60, cwd=REPO, env=env)
            assert result.returncode == 0, result.stderr
            assert group.encode() in result.stdout.split()

    run(main(), timeout=120)
