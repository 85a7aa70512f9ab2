"""GroupedConsumer without ZooKeeper: groups the brokers coordinate, judged by Tansu.

Every test runs against Tansu (a current broker we did not write), with real
peers where the group is mixed: kafka-python and confluent-kafka members on
threads of their own, aiokafka on the test's loop. What is checked after
every change of membership: the live members' partitions are disjoint and
complete, every message is consumed (at least once), and the committed
offsets reach the log end once the members are done.

Tansu's ways, tolerated here (see ``docs/guides/grouped_consumer.rst``):
a rebalance takes about 5-8 s, and the first member to join fixes the
group's assignor, so the members of a mixed group offer the same one.
"""
import asyncio
import os
import signal
import subprocess
import sys
import threading
from typing import Any, List, Optional, Set, Tuple

import pytest

from kiel import Producer
from kiel.consumer import GroupedConsumer
from kiel.exc import (
    AllocationError,
    ConfigError,
    InconsistentGroupProtocolError,
    OffsetResetError,
    PollIntervalExceededError,
    UnsupportedFeatureError,
)
from kiel.structs import GroupMetadata
from kiel.structs import TopicPartition as TP
from tests.conftest import run, unique
from tests.support.broker_groups import (
    SETTLE,
    ConfluentPeer,
    KafkaPythonPeer,
    Loop,
    Recorder,
    ThreadMember,
    _peer_tps,
    committed,
    member,
    partitions,
    produce,
    settled,
    split,
)
from tests.support.waiting import until

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --------------------------------------------------------------------------
# kiel members only


CRASHING_MEMBER = """
import asyncio, sys
sys.path.insert(0, {repo!r})
from kiel.consumer import GroupedConsumer

async def main():
    c = GroupedConsumer({bootstrap!r}, {group!r}, topics=[{topic!r}], session_timeout=6.0,
                        heartbeat_interval=1.0, max_wait_time=0.2, commit_interval=0.5)
    await c.connect()
    print("joined", flush=True)
    while True:
        await c.consume()

asyncio.run(main())
"""


def test_kiel_members_share_a_group_through_joins_a_leave_and_a_crash(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("bg"), 6)
    group = unique("g")
    expected = partitions(topic, 6)
    bootstrap = tansu_broker.bootstrap

    async def main() -> None:
        sent = await produce(bootstrap, topic, 300)
        a = await Loop(member(bootstrap, group, [topic])).start()
        assert a.assignment() == expected
        metrics = a.consumer.metrics()
        assert (metrics.coordinator, metrics.group_state, metrics.leader) == (
            "brokers", "STABLE", True)
        assert metrics.generation >= 0 and metrics.member_id
        # What a transactional producer sends with this member's offsets is
        # the generation and member id its own commits carry (KIP-447).
        assert a.consumer.group_metadata() == GroupMetadata(
            group, metrics.generation, metrics.member_id, None)

        b = await Loop(member(bootstrap, group, [topic])).start()
        await settled([a.assignment, b.assignment], expected, "a joined by b")

        # A crash: a member in its own process, killed with SIGKILL. The
        # coordinator drops it after its session; the others take over.
        script = CRASHING_MEMBER.format(repo=REPO, bootstrap=bootstrap, group=group, topic=topic)
        crashing = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        try:
            line = await asyncio.get_running_loop().run_in_executor(
                None, crashing.stdout.readline)  # type: ignore[union-attr]
            assert line.strip() == b"joined"
            await until(lambda: len(a.assignment()) + len(b.assignment()) == 4,
                        timeout=SETTLE, what="the third member took two partitions")
        finally:
            crashing.send_signal(signal.SIGKILL)
            crashing.wait(10)
            crashing.stdout.close()  # type: ignore[union-attr]
        await settled([a.assignment, b.assignment], expected, "after the crash")

        more = await produce(bootstrap, topic, 120, prefix="n")
        await b.stop()  # graceful: revoke, commit, LeaveGroup
        await settled([a.assignment], expected, "b left")
        await until(lambda: set(sent + more) <= set(a.values) | set(b.values), timeout=SETTLE,
                    what="every message consumed")
        await a.stop()
        ends = await committed(bootstrap, group, sorted(expected))
        assert sum(v or 0 for v in ends.values()) == len(sent) + len(more)

    run(main(), timeout=300)


def test_pattern_and_different_subscriptions(tansu_broker: Any) -> None:
    prefix = unique("pat")
    t1 = tansu_broker.create_topic(f"{prefix}-one", 3)
    t2 = tansu_broker.create_topic(f"{prefix}-two", 3)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap

    async def main() -> None:
        await produce(bootstrap, t1, 30)
        await produce(bootstrap, t2, 30)
        a = await Loop(member(bootstrap, group, pattern=f"{prefix}-.*",
                              allocator="roundrobin")).start()
        b = await Loop(member(bootstrap, group, [t2], allocator="roundrobin")).start()
        expected = partitions(t1, 3) | partitions(t2, 3)
        await settled([a.assignment, b.assignment], expected, "a pattern and a list")
        # b subscribes to t2 only: it is never given t1.
        assert {tp.topic for tp in b.assignment()} == {t2}
        assert a.assignment() >= partitions(t1, 3)
        await asyncio.gather(a.stop(), b.stop())

    run(main(), timeout=240)


def test_max_poll_interval_leaves_on_purpose_then_rejoins(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("poll"), 4)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 4)

    async def main() -> None:
        await produce(bootstrap, topic, 40)
        # The other member joins first and leads: Tansu 0.6.0 keeps a leader
        # that left with LeaveGroup as the group's leader, and the group then
        # waits for it for ever (Apache Kafka elects another).
        other = await Loop(member(bootstrap, group, [topic])).start()
        busy = member(bootstrap, group, [topic], max_poll_interval=4.0)
        await busy.connect()
        assert busy.assignment() and not busy.metrics().leader
        # busy never asks for records: past max_poll_interval it leaves, and
        # the other member takes everything instead of waiting for it.
        await until(lambda: other.assignment() == expected and not busy.assignment(),
                    timeout=SETTLE, what="the other member has everything")
        assert busy.metrics().group_state == "LEFT"
        with pytest.raises(PollIntervalExceededError, match="max_poll_interval"):
            await busy.consume()
        # Asking again joins again (an application keeps asking: so does this one).
        loop = Loop(busy)
        loop.task = asyncio.ensure_future(loop._run())
        await until(lambda: loop.assignment(), timeout=SETTLE, what="busy back in the group",
                    interval=0.1)
        await settled([other.assignment, loop.assignment], expected, "busy back")
        assert busy.metrics().group_state == "STABLE"
        await asyncio.gather(loop.stop(), other.stop())

    run(main(), timeout=240)


def test_a_cluster_before_2_4_is_told_the_version_broker_groups_need(tansu_broker: Any) -> None:
    # Pinned to 2.3, the broker offers no LeaveGroup v3: the error must name
    # the release broker groups need, not call the cluster a 0.8 one.
    topic = tansu_broker.create_topic(unique("old"), 1)

    async def main() -> None:
        c = GroupedConsumer(tansu_broker.bootstrap, unique("g"), topics=[topic],
                            api_version=(2, 3, 0))
        try:
            with pytest.raises(UnsupportedFeatureError, match="Kafka 2.4 or later") as e:
                await c.connect()
            assert "0.8 cluster" not in str(e.value)
        finally:
            await c.close()

    run(main())


def test_a_0_8_cluster_says_to_pass_zk_hosts(kafka_cluster: Any, topic_factory: Any) -> None:
    topic = topic_factory(partitions=1)

    async def main() -> None:
        c = GroupedConsumer(kafka_cluster.bootstrap, unique("g"), topics=[topic])
        try:
            with pytest.raises(UnsupportedFeatureError, match="pass zk_hosts"):
                await c.connect()
        finally:
            await c.close()

    run(main())


def test_each_coordinators_options_are_refused_by_the_other() -> None:
    with pytest.raises(ConfigError, match="zk_session_timeout.*pass zk_hosts"):
        GroupedConsumer("127.0.0.1:1", "g", topics=["t"], zk_session_timeout=5.0)
    with pytest.raises(ConfigError, match="session_timeout.*leave zk_hosts out"):
        GroupedConsumer("127.0.0.1:1", "g", zk_hosts="127.0.0.1:2181", topics=["t"],
                        session_timeout=5.0)
    with pytest.raises(ConfigError, match="group_instance_id"):
        GroupedConsumer("127.0.0.1:1", "g", topics=["t"], member_id="me")
    with pytest.raises(ConfigError, match="heartbeat_interval"):
        GroupedConsumer("127.0.0.1:1", "g", topics=["t"], session_timeout=3.0,
                        heartbeat_interval=3.0)
    with pytest.raises(ConfigError, match="10000 ms is 10 s"):
        GroupedConsumer("127.0.0.1:1", "g", topics=["t"], session_timeout=10000)
    with pytest.raises(ConfigError, match="cooperatively.*eagerly"):
        GroupedConsumer("127.0.0.1:1", "g", topics=["t"],
                        allocator=["cooperative-sticky", "roundrobin"])
    with pytest.raises(ConfigError, match="preference list"):
        GroupedConsumer("127.0.0.1:1", "g", zk_hosts="127.0.0.1:2181", topics=["t"],
                        allocator=["range", "sticky"])
    with pytest.raises(ConfigError, match="join_timeout"):
        GroupedConsumer("127.0.0.1:1", "g", zk_hosts="127.0.0.1:2181", topics=["t"],
                        join_timeout=-1)


# --------------------------------------------------------------------------
# mixed groups: kiel beside kafka-python, confluent-kafka and aiokafka


class AioPeer:
    """aiokafka's consumer, on the test's own loop."""

    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        assignor = {"range": RangePartitionAssignor,
                    "roundrobin": RoundRobinPartitionAssignor}[strategy]
        self.consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            partition_assignment_strategy=(assignor,), session_timeout_ms=6000,
            heartbeat_interval_ms=1000, auto_commit_interval_ms=500)
        self.values: List[bytes] = []
        self.task: Optional[asyncio.Task[None]] = None

    async def start(self) -> "AioPeer":
        await self.consumer.start()
        self.task = asyncio.ensure_future(self._run())
        return self

    async def _run(self) -> None:
        while True:
            got = await self.consumer.getmany(timeout_ms=200)
            self.values.extend(r.value for records in got.values() for r in records)

    def assignment(self) -> Set[TP]:
        return {TP(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.consumer.stop()


def _thread_peer(cls: Any, bootstrap: str, group: str, topic: str, strategy: str) -> ThreadMember:
    return ThreadMember(lambda: cls(bootstrap, group, topic, strategy), _peer_tps).start()


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_a_kiel_member_leads_a_mixed_group(tansu_broker: Any, strategy: str) -> None:
    topic = tansu_broker.create_topic(unique(f"mix-{strategy}"), 12)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 12)

    async def main() -> None:
        sent = await produce(bootstrap, topic, 240)
        kiel = await Loop(member(bootstrap, group, [topic], allocator=strategy)).start()
        assert kiel.consumer.metrics().leader  # the first to join leads
        kp = _thread_peer(KafkaPythonPeer, bootstrap, group, topic, strategy)
        cf = _thread_peer(ConfluentPeer, bootstrap, group, topic, strategy)
        aio = await AioPeer(bootstrap, group, topic, strategy).start()
        try:
            parts = [kiel.assignment, kp.assignment, cf.assignment, aio.assignment]
            await settled(parts, expected, f"kiel leading kafka-python, confluent, aiokafka "
                                           f"({strategy})")
            # The kiel leader's assignment is the one those clients compute.
            assert kiel.consumer.metrics().leader
            await until(lambda: set(sent) <= set(kiel.values) | set(kp.values) | set(cf.values)
                        | set(aio.values), timeout=SETTLE, what="every message consumed")
            kp.stop()
            await settled([kiel.assignment, cf.assignment, aio.assignment], expected,
                          "kafka-python left")
        finally:
            kp.stop() if kp._thread.is_alive() else None
            cf.stop()
            await aio.stop()
            await kiel.stop()

    run(main(), timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("leader,strategy", [
    ("kafka-python", "range"), ("kafka-python", "roundrobin"),
    ("confluent-kafka", "roundrobin"), ("aiokafka", "range"),
])
def test_kiel_members_follow_another_clients_leader(
    tansu_broker: Any, leader: str, strategy: str
) -> None:
    topic = tansu_broker.create_topic(unique(f"follow-{strategy}"), 12)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 12)

    async def main() -> None:
        sent = await produce(bootstrap, topic, 240)
        peer: Any
        if leader == "aiokafka":
            peer = await AioPeer(bootstrap, group, topic, strategy).start()
        else:
            cls = KafkaPythonPeer if leader == "kafka-python" else ConfluentPeer
            peer = _thread_peer(cls, bootstrap, group, topic, strategy)
        try:
            await until(lambda: peer.assignment() == expected, timeout=SETTLE,
                        what=f"{leader} alone")
            one = await Loop(member(bootstrap, group, [topic], allocator=strategy)).start()
            two = await Loop(member(bootstrap, group, [topic], allocator=strategy)).start()
            assert not one.consumer.metrics().leader and not two.consumer.metrics().leader
            await settled([peer.assignment, one.assignment, two.assignment], expected,
                          f"kiel following {leader} ({strategy})")
            await until(lambda: set(sent) <= set(peer.values) | set(one.values)
                        | set(two.values), timeout=SETTLE, what="every message consumed")
            await one.stop()
            await settled([peer.assignment, two.assignment], expected, "one kiel member left")
            await two.stop()
        finally:
            if leader == "aiokafka":
                await peer.stop()
            else:
                peer.stop()

    run(main(), timeout=300)


# --------------------------------------------------------------------------
# faults through the fault proxy in front of Tansu


def _owners(loops: List[Loop]) -> List[Set[TP]]:
    return [loop.assignment() for loop in loops]


@pytest.mark.slow
def test_a_coordinator_blackout_longer_than_the_session(proxied_tansu: Any) -> None:
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("dark"), 4)
    group = unique("g")
    expected = partitions(topic, 4)

    async def main() -> None:
        sent = await produce(broker.bootstrap, topic, 80)
        a = await Loop(member(broker.bootstrap, group, [topic])).start()
        b = await Loop(member(broker.bootstrap, group, [topic])).start()
        await settled([a.assignment, b.assignment], expected, "before the blackout")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, proxy.blackout, 14.0)  # > 2 sessions of 6 s
        # Within the session both stop fetching what they may no longer own.
        await until(lambda: not a.assignment() and not b.assignment(), timeout=12,
                    what="both members lost their partitions")
        await settled([a.assignment, b.assignment], expected, "after the blackout")
        await until(lambda: set(sent) <= set(a.values) | set(b.values), timeout=SETTLE,
                    what="every message consumed")
        await asyncio.gather(a.stop(), b.stop())

    run(main(), timeout=240)


@pytest.mark.slow
def test_connections_cut_inside_join_and_sync(proxied_tansu: Any) -> None:
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("cut"), 4)
    group = unique("g")
    expected = partitions(topic, 4)

    async def main() -> None:
        sent = await produce(broker.bootstrap, topic, 80)
        a = await Loop(member(broker.bootstrap, group, [topic])).start()
        loop = asyncio.get_running_loop()
        # Answers held, so b's JoinGroup (and a's rejoin) are in flight when
        # every connection is cut.
        b = Loop(member(broker.bootstrap, group, [topic]))
        joining = asyncio.ensure_future(b.start())
        await until(lambda: b.consumer.membership is not None and
                    b.consumer.metrics().group_state in ("JOINING", "SYNCING"),
                    timeout=30, what="b joining")
        await loop.run_in_executor(None, proxy.stall, "downstream")
        await asyncio.sleep(0.5)
        assert not joining.done()
        cut = await loop.run_in_executor(None, proxy.cut)
        assert cut > 0
        await loop.run_in_executor(None, proxy.unstall)
        await joining
        await settled([a.assignment, b.assignment], expected, "after the cut")
        await until(lambda: set(sent) <= set(a.values) | set(b.values), timeout=SETTLE,
                    what="every message consumed")
        await asyncio.gather(a.stop(), b.stop())

    run(main(), timeout=240)


@pytest.mark.slow
def test_a_restarted_broker_that_forgot_the_group(proxied_tansu: Any) -> None:
    broker, proxy = proxied_tansu
    topic = unique("restart")
    broker.create_topic(topic, 4)
    group = unique("g")
    expected = partitions(topic, 4)

    async def main() -> None:
        await produce(broker.bootstrap, topic, 40)
        a = await Loop(member(broker.bootstrap, group, [topic])).start()
        b = await Loop(member(broker.bootstrap, group, [topic])).start()
        await settled([a.assignment, b.assignment], expected, "before the restart")
        loop = asyncio.get_running_loop()
        # Memory storage: the restarted broker has no group, no topic, no offsets.
        # The members reach it only through the proxy, held dark until the topic
        # is back: Tansu creates a topic any Metadata request names, so a member
        # asking first would make it with one partition (and our create fail).
        await loop.run_in_executor(None, proxy.blackout)
        await loop.run_in_executor(None, broker.restart)
        await loop.run_in_executor(None, broker.create_topic, topic, 4)
        await loop.run_in_executor(None, proxy.restore)
        after = await produce(broker.bootstrap, topic, 40, prefix="after")
        await settled([a.assignment, b.assignment], expected, "after the restart")
        await until(lambda: set(after) <= set(a.values) | set(b.values), timeout=SETTLE,
                    what="the messages after the restart consumed")
        await asyncio.gather(a.stop(), b.stop())

    run(main(), timeout=240)


# --------------------------------------------------------------------------
# graceful changes, refused protocols, static members, the example


def test_graceful_changes_deliver_nothing_twice(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("graceful"), 6)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 6)

    async def main() -> None:
        sent = await produce(bootstrap, topic, 200)
        a = await Loop(member(bootstrap, group, [topic])).start()
        b = await Loop(member(bootstrap, group, [topic])).start()
        await settled([a.assignment, b.assignment], expected, "b joined")
        more = await produce(bootstrap, topic, 200, prefix="n")
        c = await Loop(member(bootstrap, group, [topic])).start()
        await settled([a.assignment, b.assignment, c.assignment], expected, "c joined")
        await c.stop()
        await settled([a.assignment, b.assignment], expected, "c left")
        await until(lambda: len(a.values) + len(b.values) + len(c.values) >= len(sent + more),
                    timeout=SETTLE, what="every message consumed")
        await asyncio.gather(a.stop(), b.stop())
        every = a.values + b.values + c.values
        # Each revoke committed what was finished before the next generation
        # formed, and each new owner read the offsets after it: no duplicate.
        assert sorted(every) == sorted(sent + more)

    run(main(), timeout=240)


def test_a_member_without_the_groups_assignor_is_refused_typed(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("proto"), 2)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap

    async def main() -> None:
        a = await Loop(member(bootstrap, group, [topic], allocator="range")).start()
        b = member(bootstrap, group, [topic], allocator="sticky", join_timeout=30)
        try:
            with pytest.raises(InconsistentGroupProtocolError):
                await b.connect()
        finally:
            await b.close()
        assert a.assignment() == partitions(topic, 2)
        await a.stop()

    run(main(), timeout=120)


def test_a_static_member_sends_no_leave_and_comes_back_as_itself(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("static"), 2)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 2)

    async def main() -> None:
        await produce(bootstrap, topic, 20)
        static = member(bootstrap, group, [topic], group_instance_id="inst-1")
        await static.connect()
        assert set(static.assignment()) == expected
        first = (static.member_id, static.metrics().generation)
        await static.close()  # no LeaveGroup: the instance stays in the group
        again = member(bootstrap, group, [topic], group_instance_id="inst-1")
        await again.connect()
        # The coordinator still knew the instance: the same member id and
        # generation, no rebalance (after a LeaveGroup it would be a new member).
        assert (again.member_id, again.metrics().generation) == first
        assert set(again.assignment()) == expected
        await again.close()
        # A dynamic member leaves: the next one is new.
        dynamic = member(bootstrap, unique("g"), [topic])
        await dynamic.connect()
        gone = dynamic.member_id
        await dynamic.close()
        assert gone and dynamic.member_id is None

    run(main(), timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("options", [[], ["--cooperative"]])
def test_the_broker_group_example_runs(options: List[str]) -> None:
    # This checkout's kiel, not the one the venv installed (the script's own
    # directory comes first on its sys.path, not the working directory).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "broker_group.py"),
                             *options], capture_output=True, text=True, timeout=280, cwd=REPO,
                            env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "kafka-python joined" in result.stdout
    assert "processed 600 of 600 events" in result.stdout


def test_the_consumers_controls_work_in_a_broker_group(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("controls"), 2)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap

    async def main() -> None:
        await produce(bootstrap, topic, 40)
        listener = Recorder()
        c = member(bootstrap, group, [topic], auto_finish=False, commit_interval=None,
                   listener=listener)
        await c.connect()
        assert listener.events == [("assigned", sorted(partitions(topic, 2)))]
        got: List[Any] = []
        while len(got) < 40:
            got.extend(await c.consume())
        # auto_finish=False: only task_done finishes; the commit stores what was finished.
        for record in got[:5]:
            c.task_done(record)
        await c.commit()
        first = got[0]
        assert await c.committed(first.topic, first.partition) == c.finished(
            first.topic, first.partition)
        for record in got:
            c.task_done(record)
        c.pause(topic, 0)
        assert c.paused() == [TP(topic, 0)]
        await produce(bootstrap, topic, 20, prefix="more")
        fresh: List[Any] = []
        for _ in range(20):
            fresh.extend(await c.consume())
        assert fresh and {r.partition for r in fresh} == {1}
        c.resume(topic, 0)
        await c.seek_to(topic, GroupedConsumer.BEGINNING, partition=1)
        assert c.position(topic, 1) == 0
        await c.seek_to(topic, GroupedConsumer.END, partition=1)
        assert set(c.lag(topic)) == {0, 1}
        for record in fresh:
            c.task_done(record)
        await c.close()
        assert listener.events[-1] == ("revoked", sorted(partitions(topic, 2)))
        # The stream() form: a new member of the same group starts from the
        # commits, which close() left at the end of what was finished.
        later = await produce(bootstrap, topic, 20, prefix="later")
        d = member(bootstrap, group, [topic])
        await d.connect()
        streamed: List[bytes] = []
        async for record in d.stream():
            streamed.append(record.value)
            if set(later) <= set(streamed):
                break
        await d.close()
        # What c finished is not delivered again; what it never handed out
        # (partition 0's records while it was paused) is.
        finished = {r.value for r in got + fresh}
        assert not finished & set(streamed)
        assert set(streamed) - set(later) and all(v.startswith(b"more") for v in
                                                   set(streamed) - set(later))

    run(main(), timeout=120)


def test_a_leaders_assignment_of_topics_not_subscribed_is_refused(tansu_broker: Any) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    mine = tansu_broker.create_topic(unique("mine"), 2)
    other = tansu_broker.create_topic(unique("other"), 2)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap

    class RogueRange(RangePartitionAssignor):
        """A leader that also gives every member the other topic (named "range")."""

        @classmethod
        def assign(cls, cluster, members):  # type: ignore[no-untyped-def]
            from kafka.coordinator.assignors.abstract import ConsumerProtocolAssignment
            return {m.member_id: ConsumerProtocolAssignment(0, [(mine, [0, 1]), (other, [0, 1])],
                                                            b"") for m in members}

    async def main() -> None:
        stop = threading.Event()

        def leader() -> None:
            consumer = KafkaConsumer(mine, other, bootstrap_servers=bootstrap, group_id=group,
                                     partition_assignment_strategy=[RogueRange],
                                     session_timeout_ms=6000, heartbeat_interval_ms=1000)
            try:
                while not stop.is_set():
                    consumer.poll(timeout_ms=200)
            finally:
                consumer.close()

        thread = threading.Thread(target=leader, daemon=True)
        thread.start()
        try:
            await asyncio.sleep(4)  # kafka-python joins first and leads
            c = member(bootstrap, group, [mine], allocator="range")
            await c.connect()
            # Only the subscribed topic's partitions are taken; the rest is said.
            assert {tp.topic for tp in c.assignment()} == {mine}
            with pytest.raises(AllocationError, match="does not subscribe"):
                await c.consume()
            await c.close()
        finally:
            stop.set()
            thread.join(30)

    run(main(), timeout=120)


def test_heartbeats_do_not_wait_behind_long_polls(tansu_broker: Any) -> None:
    # A broker answers one connection's requests in order: group requests on
    # the fetcher's connection would wait behind each long poll (4 s here).
    topic = tansu_broker.create_topic(unique("lane"), 2)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap

    async def main() -> None:
        c = member(bootstrap, group, [topic], max_wait_time=4.0, session_timeout=10.0,
                   heartbeat_interval=0.5)
        await c.connect()
        answered: List[float] = []
        polling = asyncio.ensure_future(c.consume())
        loop = asyncio.get_running_loop()
        until_t = loop.time() + 9.0
        while loop.time() < until_t:
            beat = c.metrics().last_heartbeat
            if beat is not None and (not answered or beat != answered[-1]):
                answered.append(beat)
            if polling.done():
                polling = asyncio.ensure_future(c.consume())
            await asyncio.sleep(0.05)
        polling.cancel()
        await asyncio.gather(polling, return_exceptions=True)
        await c.close()
        gaps = [b - a for a, b in zip(answered, answered[1:])]
        assert len(answered) >= 6 and max(gaps) < 2.5, gaps

    run(main(), timeout=120)


def test_offset_reset_in_a_broker_group(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("reset"), 1)
    bootstrap = tansu_broker.bootstrap

    async def main() -> None:
        # One record per batch: Tansu 0.6.0 answers ListOffsets "latest" with
        # the last batch's base offset + 1 (see the current brokers guide).
        old = []
        async with Producer(bootstrap) as producer:
            for i in range(10):
                old.append(b"old%d" % i)
                await producer.produce(topic, old[-1])
        raising = member(bootstrap, unique("g"), [topic], offset_reset="raise")
        await raising.connect()
        try:
            with pytest.raises(OffsetResetError):
                await raising.consume()
            # Owned but not fetched until sought.
            assert raising.assignment() == [TP(topic, 0)] and not raising.fetching()
            raising.seek(topic, 0, 4)
            got: List[bytes] = []
            while len(got) < 6:
                got.extend(r.value for r in await raising.consume())
            assert got == old[4:]
        finally:
            await raising.close()
        latest = member(bootstrap, unique("g"), [topic], offset_reset="latest")
        await latest.connect()
        try:
            new = await produce(bootstrap, topic, 5, prefix="new")
            got = []
            while len(got) < 5:
                got.extend(r.value for r in await latest.consume())
            assert got == new  # nothing from before it joined
        finally:
            await latest.close()

    run(main(), timeout=120)


def test_a_new_topic_matching_the_pattern_joins_the_assignment(tansu_broker: Any) -> None:
    prefix = unique("grow")
    first = tansu_broker.create_topic(f"{prefix}-a", 2)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap

    async def main() -> None:
        a = await Loop(member(bootstrap, group, pattern=f"{prefix}-.*",
                              metadata_max_age=1.0)).start()
        assert a.assignment() == partitions(first, 2)
        second = tansu_broker.create_topic(f"{prefix}-b", 2)
        sent = await produce(bootstrap, second, 10)
        # Seen at the next metadata read: the member rebalances to take it.
        await until(lambda: a.assignment() == partitions(first, 2) | partitions(second, 2),
                    timeout=SETTLE, what="the new topic assigned", interval=0.1)
        await until(lambda: set(sent) <= set(a.values), timeout=SETTLE,
                    what="the new topic consumed")
        await a.stop()

    run(main(), timeout=120)


def test_an_allocator_that_raises_fails_the_leaders_connect(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("broken"), 2)

    def broken(members: Any, partitions: Any) -> Any:
        raise ValueError("my allocator is broken")

    async def main() -> None:
        c = member(tansu_broker.bootstrap, unique("g"), [topic], allocator=broken)
        try:
            with pytest.raises(AllocationError, match="my allocator is broken") as raised:
                await c.connect()
            assert isinstance(raised.value.__cause__, ValueError)
        finally:
            await c.close()

    run(main(), timeout=120)


def test_max_poll_interval_counts_from_when_connect_returns(tansu_broker: Any) -> None:
    # Tansu holds a JoinGroup about 3 s: longer than this max_poll_interval.
    # The application cannot ask for records before connect() returns, so
    # its first interval starts then.
    topic = tansu_broker.create_topic(unique("pollstart"), 1)

    async def main() -> None:
        c = member(tansu_broker.bootstrap, unique("g"), [topic], max_poll_interval=2.0)
        await c.connect()
        try:
            await asyncio.sleep(1.0)  # within 2 s of connect() returning
            assert c.metrics().group_state == "STABLE"
            loop = asyncio.get_running_loop()
            until_t = loop.time() + 3.0
            while loop.time() < until_t:
                await c.consume()  # asks every max_wait_time (0.2 s)
            assert c.metrics().group_state == "STABLE"
            assert c.assignment() == [TP(topic, 0)]
        finally:
            await c.close()

    run(main(), timeout=120)


class TimedRecorder(Recorder):
    """A Recorder that also notes when each call came (the loop's clock)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: List[float] = []

    async def on_partitions_revoked(self, revoked: List[TP]) -> None:
        self.times.append(asyncio.get_running_loop().time())
        await super().on_partitions_revoked(revoked)

    def on_partitions_assigned(self, assigned: List[TP]) -> None:
        self.times.append(asyncio.get_running_loop().time())
        super().on_partitions_assigned(assigned)

    def on_partitions_lost(self, lost: List[TP]) -> None:
        self.times.append(asyncio.get_running_loop().time())
        super().on_partitions_lost(lost)


async def held_then_joined(tansu_broker: Any, prefix: str, **options: Any
                           ) -> Tuple[Set[TP], Loop, GroupedConsumer, TimedRecorder,
                                      List[Any], Loop]:
    """The revocation tests' start: a member holding records when another joins.

    A leader reads another topic, so the slow member (a follower: Tansu
    waits for a leader) owns every partition of a new 4-partition topic; it
    is made with ``options`` and holds the first records it got when a new
    member joins and takes some of them.

    Returns:
        the topic's partitions, the leader, the slow member, its listener,
        the records it holds, and the new member.
    """
    topic = tansu_broker.create_topic(unique(prefix), 4)
    other = tansu_broker.create_topic(unique("other"), 1)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 4)
    leader = await Loop(member(bootstrap, group, [other])).start()
    listener = TimedRecorder()
    slow = member(bootstrap, group, [topic], listener=listener, **options)
    await slow.connect()
    assert set(slow.assignment()) == expected
    await produce(bootstrap, topic, 200)
    held: List[Any] = []
    while not held:
        held = await slow.consume()
    c = await Loop(member(bootstrap, group, [topic])).start()
    return expected, leader, slow, listener, held, c


@pytest.mark.slow
def test_a_revocation_the_group_did_not_wait_for_is_a_loss(tansu_broker: Any) -> None:
    # Found by the chaos suite's brokers mode (seed 10): a member whose
    # application held records through a rebalance revoked them (listener
    # and commit) only when the application asked again, after the
    # coordinator had completed the next generation without it and another
    # member was fetching them. The group did not wait (Tansu never waits for
    # a member's rejoin; Apache Kafka waits max_poll_interval): they were
    # lost, and the member hears so at its next heartbeat (ILLEGAL_GENERATION).
    async def main() -> None:
        # Held: auto_finish finishes them at the slow member's next call.
        expected, leader, slow, listener, _, c = await held_then_joined(
            tansu_broker, "slowhands", max_poll_interval=6.0)
        assert not slow.metrics().leader
        # The group moved on without the slow member.
        assert c.assignment() and c.assignment() <= expected
        moved = asyncio.get_running_loop().time()
        # Its application has not asked for records for max_poll_interval
        # (6 s) while it revoked: it leaves without waiting for the records
        # still in the application's hands (issue 32), and must not call the
        # hand-off graceful (nor commit under a generation that is gone).
        await until(lambda: len(listener.events) > 1, timeout=SETTLE,
                    what="the slow member's revocation ended")
        what, tps = listener.events[1]
        assert (what, tps) == ("lost", sorted(expected)), (listener.events, listener.times,
                                                           moved)
        await until(lambda: slow.metrics().group_state == "LEFT", timeout=SETTLE,
                    what="the slow member left")
        with pytest.raises(PollIntervalExceededError, match="max_poll_interval"):
            await slow.consume()
        loop = Loop(slow)
        loop.task = asyncio.ensure_future(loop._run())
        await settled([c.assignment, loop.assignment], expected, "the slow member back")
        await asyncio.gather(loop.stop(), leader.stop(), c.stop())

    run(main(), timeout=240)



def test_a_revocation_that_outlasts_the_rebalance_timeout_is_a_loss(tansu_broker: Any) -> None:
    # The revocation's own bound, kept testable after issue 32's poll fix:
    # an application that keeps asking for records (so max_poll_interval
    # never expires) but holds records of the revoked partitions unfinished
    # (auto_finish=False) for longer than the rebalance timeout it gave
    # (max_poll_interval) less a heartbeat interval. The coordinator forms the
    # next generation without the member by then (Tansu sooner), so when the
    # records are finished at last the revocation must find it may no longer
    # commit: lost (on_partitions_lost), not revoked, nothing committed.
    async def main() -> None:
        expected, leader, slow, listener, held, c = await held_then_joined(
            tansu_broker, "latehands", max_poll_interval=6.0, revoke_timeout=60.0,
            auto_finish=False)
        assert not slow.metrics().leader
        assert c.assignment() and c.assignment() <= expected
        began = asyncio.get_running_loop().time()
        # Past the rebalance timeout less a heartbeat (5 s), still asking.
        while asyncio.get_running_loop().time() - began < 7.0:
            assert await slow.consume() == []  # the revoked partitions are stopped
            assert slow.metrics().group_state == "REVOKING" and len(listener.events) == 1
        for record in held:
            slow.task_done(record)
        await until(lambda: len(listener.events) > 1, timeout=SETTLE,
                    what="the slow member's revocation ended")
        assert listener.events[1] == ("lost", sorted(expected)), listener.events
        loop = Loop(slow)
        loop.task = asyncio.ensure_future(loop._run())
        await settled([c.assignment, loop.assignment], expected, "the slow member back")
        await asyncio.gather(loop.stop(), leader.stop(), c.stop())

    run(main(), timeout=240)


def test_a_revocation_commit_refused_by_a_group_that_moved_on_is_no_error_of_the_loop(
        tansu_broker: Any) -> None:
    # The member gave a long rebalance timeout (max_poll_interval 60 s), so
    # it may still commit by its own clock while the application finishes
    # its revoked records; Tansu forms the next generation without waiting
    # for it, so the revocation's commit is refused (ILLEGAL_GENERATION or
    # UNKNOWN_MEMBER_ID). That is a rebalance, not a failure of the
    # application's loop: consume() goes on without raising, the refusal is
    # counted, and the records are delivered again by their next owner.
    async def main() -> None:
        expected, leader, slow, listener, held, c = await held_then_joined(
            tansu_broker, "refused", max_poll_interval=60.0, revoke_timeout=60.0,
            auto_finish=False, commit_interval=None)
        await until(lambda: bool(c.assignment()), timeout=SETTLE,
                    what="the new member owns partitions while the slow one still holds")
        assert slow.metrics().group_state == "REVOKING"
        for record in held:
            slow.task_done(record)
        await until(lambda: len(listener.events) > 1, timeout=SETTLE,
                    what="the slow member's revocation ended")
        began = asyncio.get_running_loop().time()
        errors: List[BaseException] = []
        while asyncio.get_running_loop().time() - began < SETTLE:
            try:
                for record in await slow.consume():
                    slow.task_done(record)
            except Exception as e:  # noqa: BLE001 - what the loop would see
                errors.append(e)
            if split([set(slow.assignment()), c.assignment()], expected):
                break
        assert errors == []
        assert split([set(slow.assignment()), c.assignment()], expected), "the group settled"
        assert slow.metrics().commits_refused >= 1
        await asyncio.gather(leader.stop(), c.stop(), slow.close())

    run(main(), timeout=240)
