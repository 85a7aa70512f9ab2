"""The upgrade from kiel 0.9 is safe: a member that finds live kiel 0.9
members of its group in ZooKeeper does not consume alongside them.

kiel 0.9.3 registered each member as an ephemeral, empty znode
``/kiel/groups/<group>/members/<hostname>:<id>`` and kept the partitions it
shared out as a JSON list in ``/kiel/groups/<group>/partitions``; kiel 1.x
registers under ``/consumers/<group>/ids``. The two do not see each other,
so without this check both would consume every partition. The 0.9 member
here is what 0.9.3 made: a kazoo session of its own creating those znodes,
against the real ZooKeeper of the test cluster.
"""
import asyncio
import json
import logging
import re
import socket
from typing import Any

import pytest
from kazoo.client import KazooClient

from kiel.clients import Producer
from kiel.consumer import GroupedConsumer
from kiel.exc import GroupError, KielError, LegacyGroupError
from kiel.structs import TopicPartition
from tests.conftest import run, unique

pytestmark = pytest.mark.zookeeper


class OldMember:
    """A kiel 0.9.3 member's registration: its own session, its ephemeral znode."""

    def __init__(self, zk_hosts: str, group: str, topic: str, partitions: int) -> None:
        self.zk = KazooClient(hosts=zk_hosts, timeout=10.0)
        self.zk.start(15)
        self.name = f"{socket.gethostname()}:{id(self)}"
        root = f"/kiel/groups/{group}"
        self.zk.ensure_path(f"{root}/partitions")
        self.zk.set(f"{root}/partitions",
                    json.dumps([f"{topic}:{p}" for p in range(partitions)]).encode())
        self.path = self.zk.create(f"{root}/members/{self.name}", ephemeral=True,
                                   makepath=True)

    def stop(self) -> None:
        """End the session: the ephemeral znode goes, as when 0.9.3 stopped."""
        self.zk.stop()
        self.zk.close()


def registered(zk_hosts: str, group: str) -> list[str]:
    """The 1.x members registered in ``group`` now."""
    zk = KazooClient(hosts=zk_hosts)
    zk.start(15)
    try:
        return zk.get_children(f"/consumers/{group}/ids") if zk.exists(
            f"/consumers/{group}/ids") else []
    finally:
        zk.stop()
        zk.close()


async def produce(cluster: Any, topic: str, count: int) -> None:
    """``count`` records into each of the topic's two partitions."""
    async with Producer(cluster.bootstrap) as producer:
        await asyncio.gather(*(producer.produce(topic, b"m%d" % i, partition=p)
                               for p in (0, 1) for i in range(count)))


def commit_as_09(cluster: Any, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit as kiel 0.9.3 did: OffsetCommit v0 to the broker, which keeps it
    in ZooKeeper under /consumers/<group>/offsets (kafka-python speaking 0.8.1)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, api_version=(0, 8, 1),
                             group_id=group, enable_auto_commit=False)
    try:
        consumer.commit({KTP(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    finally:
        consumer.close()


def test_a_member_waits_while_kiel_09_members_are_live_then_joins(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    group = unique("g")
    zk_hosts = kafka_cluster.zookeeper
    old = OldMember(zk_hosts, group, topic, 2)
    stopped = False

    async def main() -> None:
        nonlocal stopped
        loop = asyncio.get_running_loop()
        await produce(kafka_cluster, topic, 10)
        # Where the 0.9 members got to: the 1.x member starts there.
        await loop.run_in_executor(None, commit_as_09, kafka_cluster, group, topic, {0: 4, 1: 7})
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=zk_hosts,
                                   topics=[topic],
                                   max_wait_time=0.2, join_timeout=60.0)
        connecting = asyncio.ensure_future(consumer.connect())
        try:
            # While the 0.9 member lives, the new one neither registers nor
            # takes partitions (before: it registered and owned both at once).
            for _ in range(30):
                await asyncio.sleep(0.1)
                assert not connecting.done(), "joined beside a live kiel 0.9 member"
                ids = await loop.run_in_executor(None, registered, zk_hosts, group)
                assert ids == []
                assert consumer.assignment() == []
            await loop.run_in_executor(None, old.stop)
            stopped = True
            await connecting  # within join_timeout of the start
            assert consumer.assignment() == [TopicPartition(topic, 0), TopicPartition(topic, 1)]
            # Exactly what the 0.9 members had not committed, nothing twice.
            seen: list[tuple[int, int]] = []
            while len(seen) < 9:
                seen += [(r.partition, r.offset) for r in await consumer.consume()]
            assert sorted(seen) == [(0, o) for o in range(4, 10)] + [(1, o) for o in range(7, 10)]
        finally:
            connecting.cancel()
            await consumer.close()

    try:
        run(main(), timeout=120)
    finally:
        if not stopped:
            old.stop()


def test_the_wait_is_bounded_by_join_timeout_and_names_the_old_members(
        kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    group = unique("g")
    zk_hosts = kafka_cluster.zookeeper
    old = OldMember(zk_hosts, group, topic, 1)

    async def main() -> None:
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=zk_hosts,
                                   topics=[topic],
                                   join_timeout=2.0)
        try:
            with pytest.raises(LegacyGroupError) as raised:
                await consumer.connect()
            assert isinstance(raised.value, GroupError)
            message = str(raised.value)
            assert old.name in message and f"/kiel/groups/{group}/members" in message
            assert consumer.assignment() == []
        finally:
            await consumer.close()
        assert registered(zk_hosts, group) == []

    try:
        run(main(), timeout=60)
    finally:
        old.stop()


def test_a_09_group_whose_members_all_stopped_is_no_obstacle(kafka_cluster, topic_factory):
    # 0.9.3's persistent znodes (members/, partitions) stay after its members
    # stop; only live members (ephemeral children) count.
    topic = topic_factory(partitions=1)
    group = unique("g")
    zk_hosts = kafka_cluster.zookeeper
    OldMember(zk_hosts, group, topic, 1).stop()

    async def main() -> None:
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=zk_hosts,
                                   topics=[topic],
                                   join_timeout=30.0)
        try:
            await consumer.connect()
            assert consumer.assignment() == [TopicPartition(topic, 0)]
        finally:
            await consumer.close()

    run(main(), timeout=60)


def test_a_read_cut_off_while_waiting_is_made_again_after_the_reconnect(
        kafka_cluster, topic_factory, fault_proxy, caplog):
    """The fault inside the request: the 0.9 member stops, the waiting
    member's read of the members' znode is held by the proxy and its
    connection reset under it (kazoo's ConnectionLoss). The member reads
    again once kazoo has reconnected, finds no 0.9 member and joins (before:
    the ConnectionLoss failed connect() with a ZooKeeperError)."""
    topic = topic_factory(partitions=1)
    group = unique("g")
    old = OldMember(kafka_cluster.zookeeper, group, topic, 1)
    server, slash, chroot = kafka_cluster.zookeeper.partition("/")
    proxy = fault_proxy(server)
    stopped = False

    async def main() -> None:
        nonlocal stopped
        loop = asyncio.get_running_loop()
        # A long session: kazoo's pings (every third of it) stay out of the
        # way of the one read the test holds.
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group,
                                   zk_hosts=proxy.address + slash + chroot,
                                   topics=[topic], zk_session_timeout=30.0, join_timeout=60.0)
        connecting = asyncio.ensure_future(consumer.connect())
        try:
            while "are live under" not in caplog.text:  # it is waiting on its watch
                assert not connecting.done()
                await asyncio.sleep(0.05)
            proxy.stall("upstream")
            await loop.run_in_executor(None, old.stop)
            stopped = True
            while proxy.stats().held_upstream == 0:  # the read, held
                await asyncio.sleep(0.05)
            assert proxy.cut() >= 1
            proxy.unstall("upstream")
            await connecting
            assert consumer.assignment() == [TopicPartition(topic, 0)]
            assert "was cut off" in caplog.text
        finally:
            connecting.cancel()
            await consumer.close()

    caplog.set_level(logging.INFO, logger="kiel.zookeeper.legacy")
    try:
        run(main(), timeout=120)
    finally:
        if not stopped:
            old.stop()


def test_a_read_that_never_answers_is_a_zookeeper_error_within_the_bound(
        kafka_cluster, fault_proxy):
    """ZooKeeper holds the first read (the proxy stalls it) past the bound:
    a ZooKeeperError saying so, not a LegacyGroupError (no member was seen)."""
    from kiel.exc import ZooKeeperError
    from kiel.zookeeper.client import ZooKeeper
    from kiel.zookeeper.legacy import wait_for_legacy_members

    server, slash, chroot = kafka_cluster.zookeeper.partition("/")
    proxy = fault_proxy(server)

    async def main() -> None:
        zk = ZooKeeper(proxy.address + slash + chroot, session_timeout=30.0)
        await zk.start()
        try:
            proxy.stall("upstream")
            with pytest.raises(ZooKeeperError, match="no answer within 1 s"):
                await wait_for_legacy_members(zk, unique("g"), 1.0)
            proxy.unstall("upstream")
        finally:
            await zk.stop()

    run(main(), timeout=60)


def test_a_09_member_started_later_stops_fetching_until_it_goes(kafka_cluster, topic_factory):
    """A kiel 0.9 member that starts while a 1.x member consumes (a host
    rolled back) would consume every partition beside it: the 1.x member
    tells the application once (LegacyGroupError), fetches and commits
    nothing while it lives, and goes on from where it stopped once it is
    gone (before: it went on consuming, and committing, beside it)."""
    topic = topic_factory(partitions=2)
    group = unique("g")
    zk_hosts = kafka_cluster.zookeeper
    old = None

    async def consume_until(consumer, count):
        seen = []
        while len(seen) < count:
            seen += await consumer.consume()
        return seen

    async def main() -> None:
        nonlocal old
        loop = asyncio.get_running_loop()
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=zk_hosts,
                                   topics=[topic],
                                   max_wait_time=0.1, commit_interval=0.2, auto_finish=False)
        await consumer.connect()
        try:
            await produce(kafka_cluster, topic, 3)
            in_hand = await consume_until(consumer, 6)
            assert sorted((r.partition, r.offset) for r in in_hand) == [
                (p, o) for p in (0, 1) for o in range(3)]
            old = await loop.run_in_executor(None, OldMember, zk_hosts, group, topic, 2)
            deadline = loop.time() + 30
            with pytest.raises(LegacyGroupError, match=re.escape(old.name)):
                while loop.time() < deadline:  # told once, at its next call
                    await consumer.consume()
            committed = {p: await consumer.committed(topic, p) for p in (0, 1)}
            for record in in_hand:  # finished now: a timed commit would store them
                consumer.task_done(record)
            await produce(kafka_cluster, topic, 2)  # offsets 3 and 4 of each
            # What a running member fetches and commits within a fraction of
            # this window: nothing while the 0.9 member lives.
            window = loop.time() + 1.5
            while loop.time() < window:
                assert await consumer.consume() == []
                await asyncio.sleep(0.05)
            assert {p: await consumer.committed(topic, p) for p in (0, 1)} == committed
            await loop.run_in_executor(None, old.stop)
            old = None
            rest = await consume_until(consumer, 4)
            assert sorted((r.partition, r.offset) for r in rest) == [
                (p, o) for p in (0, 1) for o in (3, 4)]
            for record in rest:
                consumer.task_done(record)
        finally:
            await consumer.close()

    try:
        run(main(), timeout=120)
    finally:
        if old is not None:
            old.stop()


class Recording:
    """The consumer's side of the hooks, as calls (pure logic: no consumer needed)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def assigned(self, partitions):
        self.calls.append("assigned")

    async def revoked(self, partitions):
        self.calls.append("revoked")

    async def lost(self, partitions):
        self.calls.append("lost")

    def suspend(self):
        self.calls.append("suspend")

    def resume(self):
        self.calls.append("resume")


def test_the_gate_resumes_only_when_connected_and_no_09_member_is_live():
    from kiel.zookeeper.legacy import LegacyGate

    hooks = Recording()
    gate = LegacyGate(hooks)
    tp = [TopicPartition("t", 0)]

    async def ownership() -> None:
        await gate.assigned(tp)
        await gate.revoked(tp)
        await gate.lost(tp)

    asyncio.run(ownership())
    assert hooks.calls == ["assigned", "revoked", "lost"]  # ownership passes through
    hooks.calls.clear()
    gate.hold()
    gate.suspend()   # the connection drops while held
    gate.resume()    # and comes back: still held, no resume
    assert hooks.calls == ["suspend", "suspend"] and gate.held
    gate.suspend()
    gate.release()   # the 0.9 member went while disconnected: no resume yet
    assert hooks.calls[-1] == "suspend"
    gate.resume()    # connected again: now
    assert hooks.calls[-1] == "resume" and not gate.held
    hooks.calls.clear()
    gate.hold()
    gate.release()
    assert hooks.calls == ["suspend", "resume"]


@pytest.mark.slow
def test_a_09_member_that_starts_while_the_session_is_lost_is_seen_after_it(
        kafka_cluster, topic_factory, fault_proxy):
    """The fault: the 1.x member's ZooKeeper is blacked out past its session
    (the server expires it, and its watches with it) while a 0.9 member
    starts. Back on a new session, the member reads the members' znode
    again, holds its fetching and says so; it fetches again once the 0.9
    member is gone."""
    topic = topic_factory(partitions=1)
    group = unique("g")
    server, slash, chroot = kafka_cluster.zookeeper.partition("/")
    proxy = fault_proxy(server)
    old = None

    async def main() -> None:
        nonlocal old
        loop = asyncio.get_running_loop()
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group,
                                   zk_hosts=proxy.address + slash + chroot,
                                   topics=[topic], max_wait_time=0.1, zk_session_timeout=4.0)
        await consumer.connect()
        try:
            proxy.blackout()
            old = await loop.run_in_executor(None, OldMember, kafka_cluster.zookeeper, group,
                                             topic, 1)
            await asyncio.sleep(10)  # past the session: the server expires it
            proxy.restore()
            deadline = loop.time() + 60
            seen: list[BaseException] = []
            while not any(isinstance(e, LegacyGroupError) for e in seen):
                assert loop.time() < deadline, f"no LegacyGroupError; raised: {seen}"
                try:
                    await consumer.consume()
                except KielError as e:  # the lost partitions are told about too
                    seen.append(e)
            await produce_one(kafka_cluster, topic)
            window = loop.time() + 1.5
            while loop.time() < window:
                assert await consumer.consume() == []
                await asyncio.sleep(0.05)
            await loop.run_in_executor(None, old.stop)
            old = None
            got: list = []
            while not got:
                assert loop.time() < deadline + 60
                got = await consumer.consume()
            assert [r.value for r in got] == [b"late"]
        finally:
            await consumer.close()

    try:
        run(main(), timeout=180)
    finally:
        if old is not None:
            old.stop()


async def produce_one(cluster: Any, topic: str) -> None:
    async with Producer(cluster.bootstrap) as producer:
        await producer.produce(topic, b"late", partition=0)


def forbid(zk_hosts: str, group: str) -> None:
    """Make the group's 0.9 members' znode unreadable but to another identity
    (creating it if need be), as a ZooKeeper with ACLs may have it."""
    from kazoo.security import make_digest_acl

    admin = KazooClient(hosts=zk_hosts, auth_data=[("digest", "other:pw")])
    admin.start(15)
    try:
        path = f"/kiel/groups/{group}/members"
        admin.ensure_path(path)
        admin.set_acls(path, [make_digest_acl("other", "pw", all=True)])
    finally:
        admin.stop()
        admin.close()


def test_a_members_znode_the_member_may_not_read_fails_connect(kafka_cluster, topic_factory):
    """ZooKeeper refuses the read (an ACL): connect() fails with a
    ZooKeeperError rather than join without knowing."""
    from kiel.exc import ZooKeeperError

    topic = topic_factory(partitions=1)
    group = unique("g")
    forbid(kafka_cluster.zookeeper, group)

    async def main() -> None:
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=kafka_cluster.zookeeper,
                                   topics=[topic])
        try:
            with pytest.raises(ZooKeeperError, match="NoAuth"):
                await consumer.connect()
            assert consumer.assignment() == []
        finally:
            await consumer.close()

    run(main(), timeout=60)


@pytest.mark.slow
def test_a_refused_read_after_joining_is_said_once_and_consuming_goes_on(
        kafka_cluster, topic_factory, fault_proxy):
    """The fault: the member's session expires (a blackout past it) and, on
    the new session, its read of the 0.9 members' znode is refused (an ACL
    set meanwhile). The next consume() says the check is off, once; the
    member goes on consuming. (ZooKeeper tells no watch of a change to a
    znode its client may not read, so only a new session meets this.)"""
    from kiel.exc import ZooKeeperError

    topic = topic_factory(partitions=1)
    group = unique("g")
    OldMember(kafka_cluster.zookeeper, group, topic, 1).stop()  # members/ exists, readable
    server, slash, chroot = kafka_cluster.zookeeper.partition("/")
    proxy = fault_proxy(server)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group,
                                   zk_hosts=proxy.address + slash + chroot,
                                   topics=[topic], max_wait_time=0.1, zk_session_timeout=4.0)
        await consumer.connect()
        try:
            proxy.blackout()
            await loop.run_in_executor(None, forbid, kafka_cluster.zookeeper, group)
            await asyncio.sleep(10)  # past the session: the server expires it
            proxy.restore()
            deadline = loop.time() + 60
            seen: list[BaseException] = []
            while not any("no longer looked for" in str(e) for e in seen):
                assert loop.time() < deadline, f"not told; raised: {seen}"
                try:
                    await consumer.consume()
                except KielError as e:  # the lost partitions are told about too
                    seen.append(e)
            assert any(isinstance(e, ZooKeeperError) and "NoAuth" in str(e) for e in seen)
            await produce_one(kafka_cluster, topic)
            got: list = []
            while not got:
                assert loop.time() < deadline + 30
                got = await consumer.consume()
            assert [r.value for r in got] == [b"late"]
        finally:
            await consumer.close()

    run(main(), timeout=180)
