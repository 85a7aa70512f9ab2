"""The grouped consumer off the happy path: faults injected with the real parts.

Each member reaches ZooKeeper through its own fault proxy
(:mod:`kiel.testing.faults`), so one member can be cut off, blacked out or
have its replies lost while the others go on; session expiry and server
stops use the ZooKeeper launcher. Every test here reproduced a defect before
its fix (see the commit that added it).
"""

import asyncio
import json
import logging
import threading
import time
from typing import Any, List, Set, Tuple

import pytest

from kiel.consumer import GroupedConsumer
from kiel.exc import (
    ConfigError,
    GroupError,
    UnknownPartitionError,
    ZooKeeperError,
)
from kiel.structs import TopicPartition
from kiel.zookeeper.client import ZooKeeper
from kiel.zookeeper.group import GroupMember
from tests.conftest import run, unique
from tests.support.waiting import until
from tests.support.zookeeper_members import RecordingHooks, Sessions, converge, member_tasks

pytestmark = pytest.mark.zookeeper

TP = TopicPartition


def proxied_hosts(cluster: Any, proxy: Any) -> str:
    """``cluster.zookeeper`` (``host:port/chroot``) with the proxy in place of the server."""
    _, slash, chroot = cluster.zookeeper.partition("/")
    return proxy.address + slash + chroot


def zk_target(cluster: Any) -> str:
    return cluster.zookeeper.partition("/")[0]


def kazoo_threads() -> Set[threading.Thread]:
    """Threads kazoo started (its connection and worker threads)."""
    return {
        t for t in threading.enumerate()
        if t.is_alive() and "kazoo" in (getattr(t.run, "__module__", "") or "")
        or t.name.startswith("kazoo")
    }


def grouped(
    cluster: Any, zk_hosts: str, group: str, topics: Any, **options: Any
) -> GroupedConsumer:
    options.setdefault("max_wait_time", 0.2)
    options.setdefault("zk_session_timeout", 6.0)
    options.setdefault("commit_interval", 1.0)
    return GroupedConsumer(cluster.bootstrap, group, zk_hosts=zk_hosts, topics=topics, **options)


@pytest.mark.parametrize("noticed", [True, False], ids=["suspended", "unnoticed"])
def test_close_during_a_zookeeper_blackout_returns_within_leave_timeout(
    kafka_cluster: Any, topic_factory: Any, fault_proxy: Any, caplog: Any, noticed: bool
) -> None:
    topic = topic_factory(partitions=2)
    group = unique("g")
    proxy = fault_proxy(zk_target(kafka_cluster))

    async def main() -> None:
        before = kazoo_threads()
        c = grouped(kafka_cluster, proxied_hosts(kafka_cluster, proxy), group, [topic],
                    leave_timeout=2.0)
        await c.connect()
        assert c.assignment() == [TP(topic, 0), TP(topic, 1)]
        proxy.blackout()  # until restored: ZooKeeper never answers again
        if noticed:
            # kazoo notices (SUSPENDED) and keeps trying to reconnect
            # meanwhile: requests queue until it is back.
            await until(lambda: c._ownership.suspended, timeout=30, what="SUSPENDED")
        # else: the release's requests go out and wait for answers that never come.
        loop = asyncio.get_running_loop()
        started = loop.time()
        # Bounded by leave_timeout (2 s) plus stopping kazoo; before the fix
        # it waited for ZooKeeper for ever (the outer bound here is 60 s).
        await asyncio.wait_for(c.close(), 60)
        took = loop.time() - started
        print(f"\nclose() during a blackout: {took:.1f} s (leave_timeout 2 s)")
        assert took < 2.0 + 15.0, "close() waited for ZooKeeper past leave_timeout"
        assert c.member is not None
        assert [t for t in asyncio.all_tasks() if t.get_name().startswith("kiel")
                and not t.done()] == []
        assert kazoo_threads() <= before, "kazoo threads still running after close()"
        with caplog.at_level(logging.DEBUG, logger="kiel"):
            caplog.clear()
            proxy.restore()
            await asyncio.sleep(0.5)  # anything left running would log now
            assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []

    run(main())


def test_connect_during_a_zookeeper_outage_fails_typed_and_can_be_retried(
    kafka_cluster: Any, topic_factory: Any, fault_proxy: Any
) -> None:
    """A member started while ZooKeeper is unreachable (an application
    restarted during an outage) gets a ZooKeeperError after
    ``zk_connect_timeout``, holds no kazoo threads, and the same consumer
    joins once ZooKeeper is back: what a supervisor's retry loop does. Found
    by the randomized fault suite (seed 882290), where a replacement member
    started during a server restart plus a blackout."""
    topic = topic_factory(partitions=2)
    group = unique("g")
    proxy = fault_proxy(zk_target(kafka_cluster))

    async def main() -> None:
        before = kazoo_threads()
        proxy.blackout()
        c = grouped(kafka_cluster, proxied_hosts(kafka_cluster, proxy), group, [topic],
                    zk_connect_timeout=1.0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ZooKeeperError, match="within 1.0s"):
            await c.connect()
        took = loop.time() - started
        assert took < 1.0 + 15.0, f"connect() waited {took:.1f} s past zk_connect_timeout"
        assert kazoo_threads() <= before, "a failed connect() left kazoo threads running"
        proxy.restore()
        await c.connect()
        try:
            assert c.assignment() == [TP(topic, 0), TP(topic, 1)]
        finally:
            await c.close()
        assert kazoo_threads() <= before, "kazoo threads still running after close()"

    run(main())


def test_zk_connect_timeout_is_checked(kafka_cluster: Any) -> None:
    with pytest.raises(ConfigError, match="zk_connect_timeout"):
        grouped(kafka_cluster, kafka_cluster.zookeeper, "g", ["t"], zk_connect_timeout=0)


async def new_group(hosts: str, partitions: int) -> Tuple[ZooKeeper, str, str]:
    """An admin session (straight to the server), a fresh topic and a fresh group name."""
    admin = ZooKeeper(hosts)
    await admin.start()
    topic, group = unique("t"), unique("g")
    data = json.dumps({"version": 1, "partitions": {str(p): [0] for p in range(partitions)}})
    await admin.create(f"/brokers/topics/{topic}", data.encode(), makepath=True)
    return admin, topic, group


async def member_behind(
    sessions: Sessions, zookeeper: Any, proxy: Any, session_timeout: float, **options: Any
) -> Tuple[ZooKeeper, str, GroupMember]:
    """An admin session straight to the server, and member "a" of a fresh
    group of a 2-partition topic, whose session goes through ``proxy``.

    Returns:
        (the admin session, the topic, the member, not joined yet).
    """
    admin, topic, group = await new_group(zookeeper.hosts, 2)
    sessions.opened.append(admin)
    zk = await sessions.start(proxy.address, session_timeout=session_timeout)
    return admin, topic, GroupMember(zk, group, [topic], member_id="a", **options)


def test_a_registration_whose_reply_was_lost_is_recognised_as_ours(
    zookeeper: Any, fault_proxy: Any
) -> None:
    proxy = fault_proxy(zookeeper.hosts)

    async def main() -> None:
        async with Sessions() as sessions:
            admin, topic, member = await member_behind(sessions, zookeeper, proxy, 10.0,
                                                       acquire_timeout=1.0)
            zk, group = member.zk, member.group
            await member._ensure_paths()
            path = f"/consumers/{group}/ids/a"
            session = zk.session_id
            # The create reaches the server; its reply is held, then the
            # connection is cut: kazoo reports ConnectionLoss for it.
            proxy.stall("downstream")
            first = asyncio.ensure_future(member._register())

            async def created() -> bool:
                stat = await admin.exists(path)
                return stat is not None and stat.ephemeralOwner == session

            deadline = asyncio.get_running_loop().time() + 10
            while not await created():
                assert asyncio.get_running_loop().time() < deadline, "create never arrived"
                await asyncio.sleep(0.02)
            proxy.cut()
            proxy.heal()
            with pytest.raises(Exception) as lost:
                await first
            assert type(lost.value).__name__ == "ConnectionLoss"
            await until(lambda: zk.connected, timeout=20, what="reconnected")
            assert zk.session_id == session  # same session: the node is ours
            # The retry meets NodeExists on its own node; before the fix it
            # waited for it to go and raised GroupError.
            await asyncio.wait_for(member._register(), 5)
            assert member._session == session

    run(main())


def test_register_takes_the_current_sessions_own_node_as_done(zookeeper: Any) -> None:
    async def main() -> None:
        async with Sessions() as sessions:
            admin, topic, group = await new_group(zookeeper.hosts, 2)
            sessions.opened.append(admin)
            zk = await sessions.start(zookeeper.hosts, session_timeout=10.0)
            member = GroupMember(zk, group, [topic], member_id="a", acquire_timeout=1.0)
            # What a create whose reply was lost leaves: the node, made by
            # this very session.
            await zk.create(f"/consumers/{group}/ids/a", b"{}", ephemeral=True, makepath=True)
            await asyncio.wait_for(member._register(), 5)
            assert member._session == zk.session_id
            # Another live session's node is not ours: bounded wait, then GroupError.
            other = await sessions.start(zookeeper.hosts, session_timeout=10.0)
            await other.create(f"/consumers/{group}/ids/b", b"{}", ephemeral=True)
            b = GroupMember(zk, group, [topic], member_id="b", acquire_timeout=0.5)
            with pytest.raises(GroupError):
                await asyncio.wait_for(b._register(), 10)

    run(main())


def test_a_second_expiry_during_a_rejoin_starts_no_second_rejoin(zookeeper: Any) -> None:
    """The connection flaps while a member re-registers after an expiry:
    the running rejoin carries on under the newest session, and no second
    one registers beside it (two would race their creates and deletes of
    the member's own node)."""

    async def main() -> None:
        async with Sessions() as sessions:
            admin, topic, group = await new_group(zookeeper.hosts, 4)
            sessions.opened.append(admin)
            log: List[Any] = []
            zk = await sessions.start(zookeeper.hosts, session_timeout=6.0)
            member = GroupMember(zk, group, [topic], hooks=RecordingHooks("a", log),
                                 member_id="a", acquire_timeout=2.0)
            await member.join(timeout=30)
            # Registered after the member's own listener: when this one sees
            # a state, the member has handled it.
            states: List[Tuple[str, Any]] = []
            zk.add_state_listener(lambda s: states.append((s, zk.session_id)))
            register = member._register
            calls, inflight, most = 0, 0, 0
            held, release = asyncio.Event(), asyncio.Event()

            async def counted_register() -> None:
                # Instrumentation only: the real registration runs, the
                # first one after the server has expired the session twice.
                nonlocal calls, inflight, most
                calls += 1
                inflight += 1
                most = max(most, inflight)
                try:
                    if calls == 1:
                        held.set()
                        await release.wait()
                    await register()
                finally:
                    inflight -= 1

            member._register = counted_register  # type: ignore[method-assign]
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, zookeeper.expire_session, zk.client)
            await asyncio.wait_for(held.wait(), 30)
            second = zk.session_id
            await loop.run_in_executor(None, zookeeper.expire_session, zk.client)
            await until(lambda: any(s == "CONNECTED" and sid not in (None, second)
                                    for s, sid in states[-1:]), timeout=30,
                        what="connected under a third session")
            rejoins = [t for t in asyncio.all_tasks()
                       if t.get_name().endswith(":rejoin") and not t.done()]
            assert len(rejoins) == 1, f"{len(rejoins)} rejoins running"
            release.set()
            await until(lambda: member._session == zk.session_id, timeout=30,
                        what="registered under the current session")
            await converge([member], timeout=30)
            assert most == 1, f"{most} registrations ran at once"
            assert member.owned == {TP(topic, p) for p in range(4)}
            ids = await admin.get_children(f"/consumers/{group}/ids")
            assert ids == ["a"]
            stat = await admin.exists(f"/consumers/{group}/ids/a")
            assert stat is not None and stat.ephemeralOwner == zk.session_id
            await member.leave()

    run(main())


def test_a_commit_that_fails_on_revoke_is_said_and_the_next_owner_delivers_again(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    """The coordinator refuses every commit while a revocation runs: the
    partition is still handed over (holding on would stall the group), the
    failure is logged and counted as an outage condition in metrics() (a
    retriable error: since issue 35 consume() rides it out rather than
    raise it and end the application's loop), and the next owner starts
    from the last commit that landed: duplicates, never loss."""
    from tests.support.grouped import drain, produce

    topic = topic_factory(partitions=2)
    group = unique("g")
    hosts = kafka_cluster.zookeeper

    async def main() -> None:
        for p in (0, 1):
            await produce(kafka_cluster, topic, [b"a%d" % i for i in range(5)], partition=p)
        a = grouped(kafka_cluster, hosts, group, [topic], member_id="a",
                    commit_interval=None, retries=2, retry_backoff=0.05)
        await a.connect()
        seen: dict = {}
        await drain([a], 10, seen)
        await a.consume()  # finishes the ten
        await a.commit()
        assert [kafka_cluster.committed_offset(group, topic, p) for p in (0, 1)] == [5, 5]
        for p in (0, 1):
            await produce(kafka_cluster, topic, [b"b%d" % i for i in range(5)], partition=p)
        await drain([a], 20, seen)
        await a.consume()  # finishes all twenty, commits none of the second five
        kafka_cluster.inject_error("OffsetCommit", 16, count=None)
        b = grouped(kafka_cluster, hosts, group, [topic], member_id="b", commit_interval=None)
        try:
            # b's first allocation needs a's release: it must come although
            # a's commit on revocation fails.
            await asyncio.wait_for(b.connect(), 60)
            moved = b.assignment()
            assert len(moved) == 1 and a.assignment() == [TP(topic, 1 - moved[0].partition)]
            for _ in range(50):
                await a.consume()
                if "NotCoordinatorForConsumerError" in a.metrics().outages:
                    break
            assert a.metrics().outages.get("NotCoordinatorForConsumerError") == 1
            assert kafka_cluster.committed_offset(group, topic, moved[0].partition) == 5
            kafka_cluster.clear_faults()
            again: dict = {}
            await drain([b], 5, again)
            assert sorted(again) == [(topic, moved[0].partition, o) for o in range(5, 10)]
        finally:
            kafka_cluster.clear_faults()
            await b.close()
            await a.close()

    run(main())


class CutOnFirstRevoke(RecordingHooks):
    """The first revoke holds the member's requests and then cuts its connection:
    the owner znodes' release that follows fails with ConnectionLoss."""

    def __init__(self, name: str, log: List[Any], proxy: Any) -> None:
        super().__init__(name, log)
        self.proxy = proxy
        self.cut: asyncio.Future[Any] | None = None

    async def revoked(self, partitions: List[TP]) -> None:
        await super().revoked(partitions)
        if self.cut is None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, self.proxy.stall, "upstream")

            def cut_then_heal() -> None:
                time.sleep(0.3)  # the release's request is queued behind the stall by then
                self.proxy.cut()
                self.proxy.heal()

            self.cut = loop.run_in_executor(None, cut_then_heal)


def test_a_join_cut_off_by_a_lost_connection_is_tried_again(
    zookeeper: Any, fault_proxy: Any, caplog: Any
) -> None:
    """A member registering when its ZooKeeper connection drops (a server
    restart while a replacement member joins) goes on once kazoo has
    reconnected, within the join's bound. Found by the randomized fault
    suite (seed 444558): connect() raised kazoo's raw ConnectionLoss."""
    proxy = fault_proxy(zookeeper.hosts)

    async def main() -> None:
        async with Sessions() as sessions:
            # A long session: no ping is in flight during the few seconds here.
            admin, topic, member = await member_behind(sessions, zookeeper, proxy, 30.0)
            proxy.stall("downstream")  # the join's first reply is held...
            joining = asyncio.ensure_future(member.join(timeout=30))
            await until(lambda: proxy.stats().held_downstream > 0, what="a reply held")
            proxy.cut()  # ...and its connection is lost: ConnectionLoss
            proxy.heal()
            with caplog.at_level(logging.WARNING, logger="kiel.zookeeper.group"):
                await asyncio.wait_for(joining, 30)
            assert member.owned == {TP(topic, 0), TP(topic, 1)}
            assert any("ConnectionLoss" in r.getMessage() for r in caplog.records)
            ids = await admin.get_children(f"/consumers/{member.group}/ids")
            assert ids == ["a"]
            await member.leave()

    run(main())


def test_a_join_that_cannot_reach_zookeeper_fails_typed_within_its_bound(
    zookeeper: Any, fault_proxy: Any
) -> None:
    proxy = fault_proxy(zookeeper.hosts)

    async def main() -> None:
        async with Sessions() as sessions:
            _, _, member = await member_behind(sessions, zookeeper, proxy, 30.0)
            proxy.blackout()  # no reply, no reconnection
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(ZooKeeperError, match="within 2.0s"):
                await member.join(timeout=2.0)
            took = loop.time() - started
            assert took < 2.0 + 5.0, f"join() took {took:.1f} s past its bound"
            assert member_tasks(member) == []
            proxy.restore()

    run(main())


def test_a_release_lost_to_connection_loss_is_retried(zookeeper: Any, fault_proxy: Any) -> None:
    proxy = fault_proxy(zookeeper.hosts)

    async def main() -> None:
        async with Sessions() as sessions:
            admin, topic, group = await new_group(zookeeper.hosts, 4)
            sessions.opened.append(admin)
            log: List[Any] = []
            hooks = CutOnFirstRevoke("a", log, proxy)
            zk_a = await sessions.start(proxy.address, session_timeout=10.0)
            a = GroupMember(zk_a, group, [topic], hooks=hooks, member_id="a", acquire_timeout=2)
            await a.join(timeout=30)
            zk_b = await sessions.start(zookeeper.hosts, session_timeout=10.0)
            b = GroupMember(zk_b, group, [topic], hooks=RecordingHooks("b", log), member_id="b",
                            acquire_timeout=2)
            # b's arrival makes a release two partitions; the first release is
            # cut off. Before the fix a forgot them anyway and their owner
            # znodes stayed with a's live session: b never got them.
            await b.join(timeout=60)
            assert hooks.cut is not None
            await hooks.cut
            await converge([a, b], timeout=60)
            assert a.owned | b.owned == {TP(topic, p) for p in range(4)}
            assert len(a.owned) == len(b.owned) == 2
            for tp in a.owned | b.owned:
                data, _ = await admin.get(f"/consumers/{group}/owners/{tp.topic}/{tp.partition}")
                assert data.decode() == ("a" if tp in a.owned else "b")
            await a.leave()
            await b.leave()

    run(main())


@pytest.mark.slow
def test_the_member_is_back_soon_after_a_long_outage() -> None:
    from kiel.testing.zookeeper import ZooKeeperServer

    server = ZooKeeperServer()
    server.start()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with Sessions() as sessions:
            admin, topic, group = await new_group(server.hosts, 2)
            sessions.opened.append(admin)
            zk = await sessions.start(server.hosts, session_timeout=6.0, max_retry_delay=1.0)
            member = GroupMember(zk, group, [topic], member_id="a")
            await member.join(timeout=30)
            await loop.run_in_executor(None, server.stop)
            await until(lambda: not zk.connected, timeout=20, what="disconnected")
            # Long enough for kazoo's own backoff (0.1 s doubling, capped at an
            # hour) to reach pauses of ~25 s: it would sleep past the restart.
            await asyncio.sleep(30)
            await loop.run_in_executor(None, server.start)
            back = loop.time()
            await until(lambda: zk.connected, timeout=60, what="reconnected")
            took = loop.time() - back
            print(f"\nreconnected {took:.1f} s after ZooKeeper was back (max_retry_delay 1 s)")
            # 1 s between attempts at most, and the jitter; kazoo's default
            # would still be in a pause of 25 s or more.
            assert took < 10
            await asyncio.wait_for(member.settled(), 30)
            assert member.owned == {TP(topic, 0), TP(topic, 1)}
            await member.leave()

    try:
        run(main())
    finally:
        server.close()


class HungRevoke:
    """A listener whose on_partitions_revoked never returns (a stuck await)."""

    def __init__(self) -> None:
        self.revoked: List[List[TP]] = []

    async def on_partitions_revoked(self, tps: List[TP]) -> None:
        self.revoked.append(tps)
        await asyncio.Event().wait()


def test_a_hung_revoke_listener_does_not_block_the_hand_off(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    topic = topic_factory(partitions=2)
    group = unique("g")

    async def main() -> None:
        listener = HungRevoke()
        a = grouped(kafka_cluster, kafka_cluster.zookeeper, group, [topic], member_id="a",
                    listener=listener, listener_timeout=1.0)
        await a.connect()
        b = grouped(kafka_cluster, kafka_cluster.zookeeper, group, [topic], member_id="b",
                    acquire_timeout=60)
        try:
            # b's join needs one of a's partitions: before the fix a's hung
            # listener held it for ever and b's join timed out.
            await asyncio.wait_for(b.connect(), 30)
            assert len(a.assignment()) == len(b.assignment()) == 1
            assert listener.revoked
            with pytest.raises(GroupError, match="listener_timeout"):
                await a.consume()
        finally:
            await asyncio.wait_for(b.close(), 30)
            await asyncio.wait_for(a.close(), 30)

    run(main())


class GatedRevoke:
    """on_partitions_revoked waits for the test to open the gate."""

    def __init__(self) -> None:
        self.revoking: List[TP] = []
        self.gate = asyncio.Event()

    async def on_partitions_revoked(self, tps: List[TP]) -> None:
        self.revoking = tps
        await self.gate.wait()


def test_seek_on_a_partition_being_revoked_does_not_fetch_it_again(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    topic = topic_factory(partitions=2)
    group = unique("g")

    async def main() -> None:
        listener = GatedRevoke()
        a = grouped(kafka_cluster, kafka_cluster.zookeeper, group, [topic], member_id="a",
                    listener=listener)
        await a.connect()
        b = grouped(kafka_cluster, kafka_cluster.zookeeper, group, [topic], member_id="b")
        joining = asyncio.ensure_future(b.connect())
        try:
            await until(lambda: listener.revoking, timeout=30, what="a revoking")
            (tp,) = listener.revoking
            with pytest.raises(UnknownPartitionError):
                a.seek(tp.topic, tp.partition, 0)
            assert tp not in a.fetching()
            listener.gate.set()
            await asyncio.wait_for(joining, 30)
            assert b.assignment() == [tp]
            assert tp not in a.fetching() and tp not in a.assignment()
        finally:
            listener.gate.set()
            await asyncio.wait_for(b.close(), 30)
            await asyncio.wait_for(a.close(), 30)

    run(main())


async def produce(cluster: Any, topic: str, values: List[bytes]) -> None:
    from kiel.producer import Producer

    producer = Producer(cluster.bootstrap, linger=0.005)
    await producer.connect()
    try:
        await asyncio.gather(*(producer.produce(topic, v, partition=0) for v in values))
    finally:
        await producer.close()


def test_no_commit_while_the_zookeeper_connection_is_suspended(
    kafka_cluster: Any, topic_factory: Any, fault_proxy: Any
) -> None:
    topic = topic_factory(partitions=1)
    group = unique("g")
    proxy = fault_proxy(zk_target(kafka_cluster))

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"s%d" % i for i in range(10)])
        c = grouped(kafka_cluster, proxied_hosts(kafka_cluster, proxy), group, [topic],
                    commit_interval=None, leave_timeout=2.0)
        await c.connect()
        got: List[Any] = []
        while len(got) < 10:
            got += await c.consume()
        await c.consume()  # finishes them
        proxy.blackout()
        await until(lambda: c._ownership.suspended, timeout=30, what="SUSPENDED")
        # The session may expire and another member take the partition over:
        # a commit now could overwrite its offset.
        with pytest.raises(GroupError, match="suspended"):
            await c.commit()
        assert kafka_cluster.committed_offset(group, topic, 0) is None
        proxy.restore()
        await until(lambda: not c._ownership.suspended, timeout=30, what="connected again")
        await c.commit()
        assert kafka_cluster.committed_offset(group, topic, 0) == 10
        await c.close()

    run(main())


def test_members_with_different_subscriptions_agree(zookeeper: Any) -> None:
    async def main() -> None:
        async with Sessions() as sessions:
            admin, t1, group = await new_group(zookeeper.hosts, 2)
            sessions.opened.append(admin)
            t2 = unique("t")
            data = json.dumps({"version": 1, "partitions": {"0": [0], "1": [0], "2": [0]}})
            await admin.create(f"/brokers/topics/{t2}", data.encode(), makepath=True)
            log: List[Any] = []
            zk_a = await sessions.start(zookeeper.hosts, session_timeout=10.0)
            a = GroupMember(zk_a, group, [t1], hooks=RecordingHooks("a", log), member_id="a")
            await a.join(timeout=30)
            # A rolling deploy: b subscribes to one more topic. Before the fix
            # a and b split different partition lists among both of them and
            # never agreed (b's join never settled).
            zk_b = await sessions.start(zookeeper.hosts, session_timeout=10.0)
            b = GroupMember(zk_b, group, [t1, t2], hooks=RecordingHooks("b", log),
                            member_id="b")
            await b.join(timeout=30)
            await until(lambda: a.members == b.members == ["a", "b"], what="both see both")
            await converge([a, b])
            assert len(a.owned) == 1 and {tp.topic for tp in a.owned} == {t1}
            assert b.owned == ({TP(t1, 0), TP(t1, 1)} - a.owned) | {TP(t2, p) for p in range(3)}
            await a.leave()
            await b.leave()

    run(main())


def test_unknown_topic_from_the_coordinator_is_not_taken_for_no_offset(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    group = unique("g")

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"u%d" % i for i in range(10)])
        c = grouped(kafka_cluster, kafka_cluster.zookeeper, group, [topic])
        await c.connect()
        got: List[Any] = []
        while len(got) < 10:
            got += await c.consume()
        await c.close()  # commits 10
        assert kafka_cluster.committed_offset(group, topic, 0) == 10
        await produce(kafka_cluster, topic, [b"v%d" % i for i in range(5)])
        # What a 0.8.2 coordinator answers for a topic it has not learnt about
        # yet: UnknownTopicOrPartition with offset -1, as for "never committed".
        kafka_cluster.inject_error("OffsetFetch", 3, count=None)
        try:
            c2 = grouped(kafka_cluster, kafka_cluster.zookeeper, group, [topic],
                         offset_reset="latest")
            await c2.connect()
            # Before the fix: 15 (skipped to the end: 5 records lost).
            assert c2.position(topic, 0) == 10
            await c2.close()
        finally:
            kafka_cluster.clear_faults()

    run(main())


def test_auto_finish_finishes_only_the_callers_records(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    group = unique("g")

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"f%d" % i for i in range(10)])
        c = grouped(kafka_cluster, kafka_cluster.zookeeper, group, [topic], commit_interval=None)
        await c.connect()

        async def worker() -> List[Any]:
            got: List[Any] = []
            while not got:
                got = await c.consume()
            return got

        # A task that gets records, handles them and returns.
        first = await asyncio.ensure_future(worker())
        assert first[0].offset == 0
        # A task whose handler fails on what it got.
        taken: List[Any] = []

        async def handler_fails() -> None:
            taken.extend(await c.consume())
            raise RuntimeError("handler failed")

        await produce(kafka_cluster, topic, [b"g%d" % i for i in range(5)])
        failing = asyncio.ensure_future(handler_fails())
        with pytest.raises(RuntimeError):
            await failing
        # The worker returned normally: its records are finished. The failed
        # task's are not, whoever calls consume() next.
        assert taken and taken[0].offset == len(first)
        await c.consume()
        assert c.finished(topic, 0) == len(first)
        # close() in a finally while the handler's exception propagates does
        # not finish the records it got either.
        with pytest.raises(RuntimeError):
            try:
                more = await c.consume()
                raise RuntimeError(f"handler failed on {len(more)}")
            finally:
                await c.close()
        assert kafka_cluster.committed_offset(group, topic, 0) == len(first)

    run(main())


def test_zk_auth_credentials_never_reach_the_log(zookeeper: Any, caplog: Any) -> None:
    async def main() -> None:
        with caplog.at_level(logging.DEBUG):
            zk = ZooKeeper(zookeeper.hosts, auth="tenant:s3cr3t-pw")
            await zk.start()
            try:
                await zk.ensure_path(f"/{unique('auth')}", protected=True)
            finally:
                await zk.stop()
        messages = [r.getMessage() for r in caplog.records]
        assert any("Auth" in m or "Connect" in m for m in messages), "kazoo logged nothing"
        assert not [m for m in messages if "s3cr3t-pw" in m]

    run(main())


@pytest.mark.slow
def test_acceptance_three_members_behind_faulty_links_lose_nothing(
    kafka_cluster: Any, topic_factory: Any, fault_proxy: Any
) -> None:
    """Cuts, short blackouts and one blackout past the session timeout, while a
    producer runs: afterwards nothing is missing, every partition is owned
    by exactly one live member, and every member closes within 30 s."""
    from kiel.exc import KielError
    from kiel.producer import Producer

    topic = topic_factory(partitions=6)
    group = unique("g")
    tps = {TP(topic, p) for p in range(6)}
    proxies = [fault_proxy(zk_target(kafka_cluster)) for _ in range(3)]
    session_timeout = 6.0

    async def main() -> None:
        produced: Set[Tuple[int, int]] = set()
        seen: Set[Tuple[int, int]] = set()
        errors: List[BaseException] = []
        stop = asyncio.Event()
        members = [
            grouped(kafka_cluster, proxied_hosts(kafka_cluster, proxy), group, [topic],
                    member_id=f"m{i}", zk_session_timeout=session_timeout,
                    zk_max_retry_delay=1.0, acquire_timeout=10, leave_timeout=5)
            for i, proxy in enumerate(proxies)
        ]
        for m in members:
            await m.connect()

        async def consume(m: GroupedConsumer) -> None:
            while not stop.is_set():
                try:
                    for r in await m.consume():
                        seen.add((r.partition, r.offset))
                except KielError as e:  # kept and raised once: the group carries on
                    errors.append(e)
                    await asyncio.sleep(0.05)

        async def produce_all() -> None:
            producer = Producer(kafka_cluster.bootstrap, linger=0.005)
            await producer.connect()
            try:
                for chunk in range(40):
                    metas = await asyncio.gather(
                        *(producer.produce(topic, b"%d-%d" % (chunk, i)) for i in range(50))
                    )
                    produced.update((meta.partition, meta.offset) for meta in metas)
                    await asyncio.sleep(0.4)
            finally:
                await producer.close()

        loop = asyncio.get_running_loop()

        async def fault(call: Any, *args: Any) -> None:
            await loop.run_in_executor(None, call, *args)

        consumers = [asyncio.ensure_future(consume(m)) for m in members]
        producing = asyncio.ensure_future(produce_all())
        await fault(proxies[0].cut)
        await asyncio.sleep(1)
        await fault(proxies[1].blackout, 2.0)
        await fault(proxies[2].cut)
        await asyncio.sleep(3)
        # Past the session timeout: m0's session expires, the others take over,
        # m0 comes back with a new session and gets its share again.
        assert members[0].zk is not None
        first_session = members[0].zk.session_id
        await fault(proxies[0].blackout, session_timeout + 4)
        await asyncio.sleep(session_timeout + 5)
        await until(lambda: members[0].zk.session_id not in (None, first_session),
                    timeout=30, what="m0 back with a new session")
        await fault(proxies[1].cut)
        await producing
        await until(lambda: produced <= seen, timeout=90,
                    what=f"every produced record consumed ({len(produced - seen)} missing)")

        def balanced() -> bool:
            owned = [set(m.assignment()) for m in members]
            return (
                set().union(*owned) == tps
                and sum(map(len, owned)) == len(tps)
                and all(owned)
                and all(set(m.fetching()) == o for m, o in zip(members, owned))
            )

        await until(balanced, timeout=60, what="every partition owned by one live member")
        stop.set()
        await asyncio.gather(*consumers)
        for m in members:
            started = loop.time()
            await asyncio.wait_for(m.close(), 60)
            assert loop.time() - started < 30, f"{m.member_id} took past 30 s to close"
        print(f"\n{len(produced)} produced, all consumed; {len(errors)} errors raised "
              f"to the application: {sorted({type(e).__name__ for e in errors})}")

    run(main(), timeout=300)


def test_a_start_read_for_an_earlier_ownership_does_not_start_a_later_one(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    group = unique("g")
    tp = TP(topic, 0)

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"o%d" % i for i in range(10)])
        c = grouped(kafka_cluster, kafka_cluster.zookeeper, group, [topic], commit_interval=None)
        await c.connect()
        ownership = c._ownership
        # Slow answers to the starts' offset reads: each real read's result is
        # held until the test releases it, in the order the test chooses.
        reads: List[Any] = []
        gates = [asyncio.Event(), asyncio.Event()]
        fetch = c._offsets.fetch

        async def slow(tps: Any) -> Any:
            found = await fetch(tps)
            reads.append(found)
            await gates[len(reads) - 1].wait()
            return found

        c._offsets.fetch = slow  # type: ignore[method-assign]
        try:
            await ownership.revoked([tp])  # commits 0
            first = asyncio.ensure_future(ownership.assigned([tp]))  # ownership 1
            await until(lambda: len(reads) == 1, what="ownership 1 read its offset")
            # Meanwhile the partition moves away, its next owner commits 7,
            # and it comes back (ownership 2), whose read is slower still.
            await ownership.revoked([tp])
            await c._offsets.commit({tp: 7})
            second = asyncio.ensure_future(ownership.assigned([tp]))
            await until(lambda: len(reads) == 2, what="ownership 2 read its offset")
            assert reads == [{tp: 0}, {tp: 7}]
            gates[0].set()
            await first
            gates[1].set()
            await second
            # Before the fix ownership 1's stale read (0) started ownership 2.
            assert c.position(topic, 0) == 7
        finally:
            for gate in gates:
                gate.set()
            c._offsets.fetch = fetch  # type: ignore[method-assign]
            await c.close()

    run(main())
