"""GroupedConsumer against real ZooKeeper and the embedded 0.8.2 brokers over TCP.

Messages are written by kiel's Producer; offsets are read back by
kafka-python's v0 OffsetFetch and straight from ZooKeeper. Membership runs
for real (kazoo sessions, owner znodes, forced server-side session expiry).
"""

import asyncio
import time
from typing import Any, Dict, List, Optional, Tuple

import pytest

from kiel.clients import Producer
from kiel.consumer import GroupedConsumer
from kiel.exc import AllocationError, OffsetResetError, UnknownTopicOrPartitionError
from kiel.structs import Record, TopicPartition
from tests.conftest import run, unique
from tests.support.grouped import drain, grouped, produce

pytestmark = pytest.mark.zookeeper


class LoopLag:
    """Samples how late a 5 ms timer fires: the IOLoop's worst stall."""

    def __init__(self, period: float = 0.005) -> None:
        self.period = period
        self.worst = 0.0
        self._task: Optional[asyncio.Future[None]] = None

    async def _run(self) -> None:
        loop = asyncio.get_event_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.period)
            self.worst = max(self.worst, loop.time() - start - self.period)

    def __enter__(self) -> "LoopLag":
        self._task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._task is not None
        self._task.cancel()


class Listener:
    """Records every listener call in a shared log (sync and async flavours)."""

    def __init__(self, name: str, log: List[Tuple[float, str, str, List[TopicPartition]]],
                 slow: float = 0.0) -> None:
        self.name, self.log, self.slow = name, log, slow

    async def on_partitions_revoked(self, tps: List[TopicPartition]) -> None:
        self.log.append((time.monotonic(), self.name, "revoked", tps))
        if self.slow:
            await asyncio.sleep(self.slow)

    def on_partitions_assigned(self, tps: List[TopicPartition]) -> None:
        self.log.append((time.monotonic(), self.name, "assigned", tps))

    def on_partitions_lost(self, tps: List[TopicPartition]) -> None:
        self.log.append((time.monotonic(), self.name, "lost", tps))


def test_commits_land_in_zookeeper_and_kafka_python_reads_them(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=4)
    group = unique("g")

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"m%d" % i for i in range(40)])
        c = grouped(kafka_cluster, group, [topic], commit_metadata="kiel-test")
        with LoopLag() as lag:
            started = time.monotonic()
            await c.connect()
            took = time.monotonic() - started
        print(f"\nconnect(): {took * 1000:.0f} ms, worst IOLoop lag {lag.worst * 1000:.1f} ms")
        assert c.assignment() == [TopicPartition(topic, p) for p in range(4)]
        seen: Dict[Any, int] = {}
        await drain([c], 40, seen)
        assert len(seen) == 40 and set(seen.values()) == {1}
        await c.consume()  # finishes the last batch
        await c.commit()
        positions = {p: c.finished(topic, p) for p in range(4)}
        assert sum(positions.values()) == 40
        assert positions == {p: c.position(topic, p) for p in range(4)}  # nothing in hand
        await c.close()
        return positions

    positions = run(main())
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=kafka_cluster.zookeeper)
    zk.start(15)
    try:
        for p, offset in positions.items():
            data, _ = zk.get(f"/consumers/{group}/offsets/{topic}/{p}")
            assert int(data) == offset
        # Owner znodes and the registration are gone after close().
        assert zk.get_children(f"/consumers/{group}/ids") == []
        assert zk.get_children(f"/consumers/{group}/owners/{topic}") == []
    finally:
        zk.stop()
        zk.close()
    kc = KafkaConsumer(bootstrap_servers=kafka_cluster.bootstrap, api_version=(0, 8, 1),
                       group_id=group, enable_auto_commit=False)
    try:
        for p, offset in positions.items():
            assert kc.committed(KTP(topic, p)) == offset
    finally:
        kc.close()


def test_resumes_from_committed_offsets_and_reset_policies(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    group = unique("g")

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"a%d" % i for i in range(10)], partition=0)
        c = grouped(kafka_cluster, group, [topic], offset_reset="latest")
        await c.connect()
        assert c.position(topic, 0) == 10  # latest: nothing committed yet
        await produce(kafka_cluster, topic, [b"b%d" % i for i in range(5)], partition=0)
        seen: Dict[Any, int] = {}
        await drain([c], 5, seen)
        assert sorted(o for _, _, o in seen) == list(range(10, 15))
        await c.close()  # auto_finish: the last batch counts as finished
        c2 = grouped(kafka_cluster, group, [topic], offset_reset="raise")
        await c2.connect()
        # Partition 1's reset position (0) was committed too.
        assert (c2.position(topic, 0), c2.position(topic, 1)) == (15, 0)
        await c2.close()
        c3 = grouped(kafka_cluster, unique("g"), [topic], offset_reset="raise")
        await c3.connect()
        with pytest.raises(OffsetResetError):  # nothing committed in this group
            await c3.consume()
        assert c3.fetching() == []
        c3.seek(topic, 0, 12)
        seen: Dict[Any, int] = {}
        await drain([c3], 3, seen)
        assert sorted(o for _, _, o in seen) == [12, 13, 14]
        await c3.close()

    run(main())


def test_manual_task_done_commits_only_finished_records(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    group = unique("g")

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"x%d" % i for i in range(6)])
        # close() waits revoke_timeout for the records left unfinished on purpose.
        c = grouped(kafka_cluster, group, [topic], auto_finish=False, commit_interval=None,
                    revoke_timeout=1.0)
        await c.connect()
        records: List[Record] = []
        while len(records) < 6:
            records.extend(await c.consume())
        c.task_done(records[0])
        c.task_done(records[2])  # out of order: the finished position stops at offset 1
        assert c.finished(topic, 0) == 1
        assert c.position(topic, 0) == 6  # the next offset handed out
        c.task_done(records[1])
        assert c.finished(topic, 0) == 3
        await c.commit()
        await c.close()
        c2 = grouped(kafka_cluster, group, [topic])
        await c2.connect()
        assert c2.position(topic, 0) == 3 and c2.finished(topic, 0) == 3
        await c2.close()

    run(main())


def fetching_map(consumers: List[GroupedConsumer]) -> Dict[TopicPartition, List[str]]:
    by_tp: Dict[TopicPartition, List[str]] = {}
    for c in consumers:
        for tp in c.fetching():
            by_tp.setdefault(tp, []).append(str(c.member_id))
    return by_tp


async def converge(consumers: List[GroupedConsumer], tps: List[TopicPartition],
                   timeout: float = 30.0) -> float:
    """Wait until every partition is fetched by exactly one member; returns seconds waited."""
    started = time.monotonic()
    while True:
        by_tp = fetching_map(consumers)
        if (
            sorted(by_tp) == sorted(tps)
            and all(len(v) == 1 for v in by_tp.values())
            and all(c.fetching() for c in consumers[: len(tps)])
        ):
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"no convergence within {timeout}s: {by_tp}")
        await asyncio.sleep(0.01)


def test_listener_order_revoked_before_new_owners_assigned(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=6)
    group = unique("g")
    tps = [TopicPartition(topic, p) for p in range(6)]

    async def main() -> None:
        log: List[Any] = []
        a = grouped(kafka_cluster, group, [topic], listener=Listener("a", log, slow=0.3),
                    member_id="a")
        await a.connect()
        assert log[-1][1:] == ("a", "assigned", tps)
        b = grouped(kafka_cluster, group, [topic], listener=Listener("b", log), member_id="b")
        with LoopLag() as lag:
            started = time.monotonic()
            await b.connect()
            took = await converge([a, b], tps) + time.monotonic() - started
        print(f"\njoin of a 2nd member: all 6 partitions fetching after {took * 1000:.0f} ms; "
              f"worst IOLoop lag {lag.worst * 1000:.1f} ms")
        moved = set(b.assignment())
        assert moved and not moved & set(a.assignment())
        revoked = [(t, parts) for t, who, what, parts in log if who == "a" and what == "revoked"]
        assigned_b = [(t, ps) for t, who, what, ps in log if who == "b" and what == "assigned"]
        assert {tp for _, parts in revoked for tp in parts} == moved
        for tp in moved:
            t_revoke = min(t for t, parts in revoked if tp in parts)
            t_assign = min(t for t, parts in assigned_b if tp in parts)
            assert t_revoke + 0.3 <= t_assign + 0.01  # after the slow listener returned
        # Partitions that stay with a are never revoked.
        assert not {tp for _, parts in revoked for tp in parts} & set(a.assignment())
        await b.close()
        assert log[-1][1:3] == ("b", "revoked") or any(
            e[1:3] == ("b", "revoked") for e in log[-3:])
        await converge([a], tps)
        await a.close()
        assert any(e[1:] == ("a", "revoked", tps) for e in log[-2:])

    run(main())


def test_stream_and_revoke_wait_for_records_in_hand(kafka_cluster, topic_factory):
    """A record the application holds is finished before its partition moves:
    the new owner starts right after it, and nothing is delivered twice."""
    topic = topic_factory(partitions=2)
    group = unique("g")

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"s%d" % i for i in range(200)])
        a = grouped(kafka_cluster, group, [topic], member_id="a", max_bytes=1024)
        await a.connect()
        seen: Dict[Any, int] = {}
        joined = asyncio.Event()
        b = grouped(kafka_cluster, group, [topic], member_id="b")

        async def join_b() -> None:
            await b.connect()
            joined.set()

        it = a.stream().__aiter__()
        waiting_joined = asyncio.ensure_future(joined.wait())
        while not joined.is_set():
            step = asyncio.ensure_future(it.__anext__())
            # a's own partitions may run dry while b joins: do not wait on them alone.
            await asyncio.wait([step, waiting_joined], return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                step.cancel()
                break
            record = step.result()
            key = (record.topic, record.partition, record.offset)
            seen[key] = seen.get(key, 0) + 1
            if len(seen) == 20:
                asyncio.ensure_future(join_b())
                await asyncio.sleep(0.5)  # b waits for this record to be finished
        await waiting_joined
        moved = b.assignment()
        assert len(moved) == 1
        await drain([a, b], 200, seen)
        assert len(seen) == 200 and set(seen.values()) == {1}
        await a.close()
        await b.close()

    run(main())


class Member:
    """A GroupedConsumer with its consume loop, processing into a shared tally."""

    def __init__(self, consumer: GroupedConsumer, seen: Dict[Any, int]) -> None:
        self.consumer = consumer
        self.seen = seen
        self.stopping = False
        self.task: Optional[asyncio.Future[None]] = None

    async def start(self) -> None:
        await self.consumer.connect()
        self.task = asyncio.ensure_future(self._loop())

    async def _loop(self) -> None:
        seen = self.seen
        while not self.stopping:
            for r in await self.consumer.consume():
                key = (r.topic, r.partition, r.offset)
                seen[key] = seen.get(key, 0) + 1

    async def stop(self) -> None:
        self.stopping = True
        assert self.task is not None
        await self.task
        await self.consumer.close()


class Checker:
    """Samples every member's fetching set (atomically, all on this loop) and
    the owner znodes; records any partition fetched by two members."""

    def __init__(self, cluster: Any, group: str, topic: str) -> None:
        self.cluster, self.group, self.topic = cluster, group, topic
        self.members: List[Member] = []
        self.samples = 0
        self.owner_checks = 0
        self.violations: List[Any] = []
        self._task: Optional[asyncio.Future[None]] = None

    async def _run(self) -> None:
        from kiel.zookeeper.client import ZooKeeper

        zk = ZooKeeper(self.cluster.zookeeper)
        await zk.start()
        base = f"/consumers/{self.group}/owners/{self.topic}"
        try:
            while True:
                consumers = [m.consumer for m in self.members if not m.consumer.closed]
                by_tp = fetching_map(consumers)
                self.samples += 1
                for tp, who in by_tp.items():
                    if len(who) > 1:
                        self.violations.append(("double fetch", tp, who))
                # Owner znodes: a member still fetching tp after the read must own it.
                if self.samples % 5 == 0:
                    for tp, who in list(by_tp.items())[:4]:
                        try:
                            data, _ = await zk.get(f"{base}/{tp.partition}")
                        except Exception as e:  # noqa: BLE001 - released meanwhile
                            data = repr(e).encode()
                        self.owner_checks += 1
                        still = fetching_map(consumers).get(tp, [])
                        if who == still and data.decode() != who[0]:
                            self.violations.append(("owner mismatch", tp, who, data))
                await asyncio.sleep(0.01)
        finally:
            await zk.stop()

    def __enter__(self) -> "Checker":
        self._task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._task is not None
        self._task.cancel()


async def feed(cluster: Any, topic: str, total: int, chunk: int, pause: float) -> None:
    producer = Producer(cluster.bootstrap, linger=0.005)
    await producer.connect()
    try:
        for start in range(0, total, chunk):
            await asyncio.gather(*(producer.produce(topic, b"%d" % i)
                                   for i in range(start, min(total, start + chunk))))
            await asyncio.sleep(pause)
    finally:
        await producer.close()


@pytest.mark.slow
def test_no_double_fetching_and_no_duplicates_under_graceful_churn(kafka_cluster, topic_factory):
    total = 100_000
    topic = topic_factory(partitions=12)
    group = unique("g")
    tps = [TopicPartition(topic, p) for p in range(12)]

    async def main() -> None:
        seen: Dict[Any, int] = {}
        members: List[Member] = []
        times: List[Tuple[str, float]] = []
        counter = iter(range(100))

        def new_member() -> Member:
            m = Member(grouped(kafka_cluster, group, [topic], member_id=f"m{next(counter)}",
                               allocator="sticky"), seen)
            checker.members.append(m)
            return m

        with Checker(kafka_cluster, group, topic) as checker, LoopLag() as lag:
            producing = asyncio.ensure_future(feed(kafka_cluster, topic, total, 2000, 0.15))
            for _ in range(3):
                m = new_member()
                await m.start()
                members.append(m)
            await converge([m.consumer for m in members], tps)
            # Join up to 6, leave down to 3, join again: all while messages flow.
            for step in ["join", "join", "join", "leave", "leave", "join", "leave", "leave"]:
                started = time.monotonic()
                if step == "join":
                    m = new_member()
                    await m.start()
                    members.append(m)
                else:
                    m = members.pop(0)
                    await m.stop()
                await converge([m.consumer for m in members], tps)
                times.append((f"{step}->{len(members)}", time.monotonic() - started))
                await asyncio.sleep(0.3)
            during = len(seen)
            await producing
            deadline = time.monotonic() + 60
            while len(seen) < total and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            for m in members:
                await m.stop()
        print("\nrebalance (change -> all 12 fetching): "
              + ", ".join(f"{s} {t * 1000:.0f} ms" for s, t in times))
        print(f"{during} of {total} messages processed when the churn ended")
        print(f"checker: {checker.samples} samples, {checker.owner_checks} owner checks; "
              f"worst IOLoop lag {lag.worst * 1000:.1f} ms")
        assert not checker.violations, checker.violations[:5]
        assert len(seen) == total
        dupes = {k: n for k, n in seen.items() if n > 1}
        assert not dupes, f"{len(dupes)} delivered twice, e.g. {sorted(dupes)[:5]}"

    run(main(), timeout=170)


@pytest.mark.slow
def test_session_expiry_loses_partitions_rejoins_and_converges(
    kafka_cluster, topic_factory, zookeeper
):
    topic = topic_factory(partitions=6)
    group = unique("g")
    tps = [TopicPartition(topic, p) for p in range(6)]

    async def main() -> None:
        log: List[Any] = []
        seen: Dict[Any, int] = {}
        a = Member(grouped(kafka_cluster, group, [topic], member_id="a",
                           listener=Listener("a", log)), seen)
        b = Member(grouped(kafka_cluster, group, [topic], member_id="b",
                           listener=Listener("b", log)), seen)
        await a.start()
        await b.start()
        await converge([a.consumer, b.consumer], tps)
        before = set(a.consumer.assignment())
        producing = asyncio.ensure_future(feed(kafka_cluster, topic, 3000, 100, 0.05))
        await asyncio.sleep(0.3)
        assert a.consumer.zk is not None
        old = a.consumer.zk.session_id
        loop = asyncio.get_event_loop()
        started = time.monotonic()
        await loop.run_in_executor(None, zookeeper.expire_session, a.consumer.zk.client)
        while a.consumer.zk.session_id in (None, old):
            await asyncio.sleep(0.02)
        took = await converge([a.consumer, b.consumer], tps) + time.monotonic() - started
        print(f"\nsession expiry -> converged again in {took * 1000:.0f} ms")
        lost = [parts for _, who, what, parts in log if who == "a" and what == "lost"]
        assert lost and set(lost[0]) == before
        assert a.consumer.assignment() and b.consumer.assignment()
        await producing
        deadline = time.monotonic() + 30
        while len(seen) < 3000 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert len(seen) == 3000  # at-least-once: duplicates allowed after a loss
        await a.stop()
        await b.stop()

    run(main())


@pytest.mark.slow
def test_example_runs() -> None:
    import os
    import subprocess
    import sys

    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "grouped.py")
    # This checkout's kiel, not the one the venv installed (the script's own
    # directory comes first on its sys.path), as the broker groups' example test.
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, example], capture_output=True, text=True, timeout=120,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "processed 3000 of 3000 events, 0 twice" in out.stdout
    assert "bob: assigned" in out.stdout


def test_zk_auth_protects_the_group_znodes_and_offsets_still_commit(kafka_cluster, topic_factory):
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    topic = topic_factory(partitions=2)
    group = unique("g")

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"z%d" % i for i in range(10)])
        c = grouped(kafka_cluster, group, [topic], zk_auth="tenant:secret", member_id="z")
        await c.connect()
        seen: Dict[Any, int] = {}
        await drain([c], 10, seen)
        await c.consume()
        await c.commit()  # the broker writes the offsets under the group's znode
        other = KazooClient(hosts=kafka_cluster.zookeeper, auth_data=[("digest", "other:pw")])
        loop = asyncio.get_event_loop()
        await loop.run_in_executor(None, other.start, 15)
        try:
            owner = f"/consumers/{group}/owners/{topic}/0"
            data, _ = await loop.run_in_executor(None, other.get, owner)
            assert data == b"z"  # readable by anyone
            for call, args in ((other.delete, (owner,)),
                               (other.set, (f"/consumers/{group}/ids/z", b"{}")),
                               (other.create, (f"/consumers/{group}/ids/intruder", b"{}"))):
                with pytest.raises(NoAuthError):
                    await loop.run_in_executor(None, call, *args)
        finally:
            await loop.run_in_executor(None, other.stop)
        await c.close()
        assert sum(kafka_cluster.committed_offset(group, topic, p) for p in range(2)) == 10

    run(main())


def test_weighted_allocator_reads_capacities_from_registrations(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=8)
    group = unique("g")
    tps = [TopicPartition(topic, p) for p in range(8)]

    async def main() -> None:
        big = grouped(kafka_cluster, group, [topic], allocator="weighted", capacity=3.0,
                      member_id="big")
        small = grouped(kafka_cluster, group, [topic], allocator="weighted", capacity=1.0,
                        member_id="small")
        await big.connect()
        await small.connect()
        await converge([big, small], tps)
        assert (len(big.assignment()), len(small.assignment())) == (6, 2)
        await small.close()
        await big.close()

    run(main())


CHILD = r"""
import asyncio, sys
from kiel.consumer import GroupedConsumer

async def main():
    bootstrap, group, zk, topic = sys.argv[1:5]
    c = GroupedConsumer(bootstrap, group, zk_hosts=zk, topics=[topic], member_id="child",
                        zk_session_timeout=4.0, max_wait_time=0.2, commit_interval=0.5,
                        max_bytes=2048)
    await c.connect()
    print("ready", flush=True)
    while True:
        for r in await c.consume():
            print(r.partition, r.offset, flush=True)
        await asyncio.sleep(0.05)  # slow worker: still busy when killed

asyncio.run(main())
"""


@pytest.mark.slow
def test_sigkilled_member_partitions_are_taken_over_at_least_once(kafka_cluster, topic_factory):
    import signal
    import subprocess
    import sys

    topic = topic_factory(partitions=4)
    group = unique("g")
    tps = [TopicPartition(topic, p) for p in range(4)]
    total = 2000

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"k%d" % i for i in range(total)])
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, kafka_cluster.bootstrap, group,
             kafka_cluster.zookeeper, topic],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        loop = asyncio.get_event_loop()
        try:
            line = await loop.run_in_executor(None, child.stdout.readline)
            assert line.strip() == "ready"
            seen: Dict[Any, int] = {}
            m = Member(grouped(kafka_cluster, group, [topic], member_id="parent"), seen)
            await m.start()
            assert len(m.consumer.assignment()) == 2
            await asyncio.sleep(1.0)
            child.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            child.wait(10)
            took = await converge([m.consumer], tps, timeout=30)
            print(f"\nSIGKILLed member: its partitions fetched again after {took:.1f} s "
                  f"(session timeout 4 s)")
            out = child.stdout.read()
            by_child = {(topic, int(p), int(o)) for p, o in
                        (ln.split() for ln in out.splitlines() if ln.strip())}
            deadline = killed + 40
            while len(set(seen) | by_child) < total and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert len(set(seen) | by_child) == total  # nothing lost
            print(f"child processed {len(by_child)}, parent {len(seen)}, "
                  f"{len(set(seen) & by_child)} twice (at-least-once after a crash)")
            await m.stop()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(10)

    run(main())


def test_commit_retries_without_too_large_metadata_and_after_coordinator_errors(
    kafka_cluster, topic_factory
):
    topic = topic_factory(partitions=1)
    group = unique("g")

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"c%d" % i for i in range(5)])
        c = grouped(kafka_cluster, group, [topic], commit_metadata="x" * 5000,
                    commit_interval=None)
        await c.connect()
        seen: Dict[Any, int] = {}
        await drain([c], 5, seen)
        await c.consume()
        await c.commit()  # OffsetMetadataTooLarge (4096 max), then again without metadata
        assert kafka_cluster.committed_offset(group, topic, 0) == 5
        await produce(kafka_cluster, topic, [b"d"])
        await drain([c], 6, seen)
        await c.consume()
        # NotCoordinatorForConsumer twice: the coordinator is looked up again.
        kafka_cluster.inject_error("OffsetCommit", 16, count=2)
        await c.commit()
        assert kafka_cluster.committed_offset(group, topic, 0) == 6
        await c.close()

    run(main())


def test_an_allocator_that_raises_fails_connect_at_once(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)

    def broken(members, partitions):
        raise ValueError("my allocator is broken")

    async def main() -> None:
        c = grouped(kafka_cluster, unique("g"), [topic], allocator=broken, join_timeout=60.0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            with pytest.raises(AllocationError, match="my allocator is broken") as raised:
                await c.connect()
            assert isinstance(raised.value.__cause__, ValueError)
            # At once, not after join_timeout.
            assert loop.time() - started < 30
        finally:
            await c.close()

    run(main(), timeout=120)


def test_a_topic_that_does_not_exist_is_said_not_consumed_in_silence(kafka_cluster_factory):
    cluster = kafka_cluster_factory(brokers=1, auto_create_topics=False)
    real = unique("real")
    cluster.create_topic(real, partitions=1)
    ghost = unique("ghost")

    async def main() -> None:
        c = grouped(cluster, unique("g"), [real, ghost])
        await c.connect()
        try:
            with pytest.raises(UnknownTopicOrPartitionError, match=ghost):
                await c.consume()
            assert await c.consume() == []  # said once; the real topic goes on
            assert c.assignment() == [TopicPartition(real, 0)]
        finally:
            await c.close()

    run(main(), timeout=120)
