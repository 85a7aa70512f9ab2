"""GroupedConsumer against real ZooKeeper and the embedded 0.8.2 brokers over TCP.

Messages are written by kiel's Producer; offsets are read back by
kafka-python's v0 OffsetFetch and straight from ZooKeeper. Membership runs
for real (kazoo sessions, owner znodes, forced server-side session expiry).
"""

import asyncio
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

import pytest

from kiel.clients import GroupedConsumer, Producer, Record, TopicPartition
from kiel.exc import OffsetResetError

pytestmark = pytest.mark.zookeeper


def run(coro: Any, timeout: float = 120) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def produce(cluster: Any, topic: str, values: List[bytes],
                  partition: Optional[int] = None) -> None:
    producer = Producer(cluster.bootstrap, linger_ms=5)
    await producer.connect()
    try:
        futures = [producer.produce(topic, v, partition=partition) for v in values]
        await asyncio.gather(*futures)
    finally:
        await producer.close()


def grouped(cluster: Any, group: str, topics: Any, **options: Any) -> GroupedConsumer:
    options.setdefault("max_wait_time", 0.2)
    options.setdefault("zk_session_timeout", 6.0)
    options.setdefault("commit_interval", 1.0)
    return GroupedConsumer(cluster.bootstrap, group, cluster.zookeeper, topics=topics, **options)


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


async def drain(consumers: List[GroupedConsumer], want: int, seen: Dict[Tuple[str, int, int], int],
                timeout: float = 30.0) -> None:
    """Consume with every consumer concurrently until ``want`` distinct records were seen."""
    deadline = time.monotonic() + timeout

    async def one(c: GroupedConsumer) -> None:
        while len(seen) < want and time.monotonic() < deadline:
            for r in await c.consume():
                key = (r.topic, r.partition, r.offset)
                seen[key] = seen.get(key, 0) + 1

    await asyncio.gather(*(one(c) for c in consumers))


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
        positions = {p: c.position(topic, p) for p in range(4)}
        assert sum(positions.values()) == 40
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
        c = grouped(kafka_cluster, group, [topic], auto_finish=False, commit_interval=None)
        await c.connect()
        records: List[Record] = []
        while len(records) < 6:
            records.extend(await c.consume())
        c.task_done(records[0])
        c.task_done(records[2])  # out of order: the position stops at offset 1
        assert c.position(topic, 0) == 1
        c.task_done(records[1])
        assert c.position(topic, 0) == 3
        await c.commit()
        await c.close()
        c2 = grouped(kafka_cluster, group, [topic])
        await c2.connect()
        assert c2.position(topic, 0) == 3
        await c2.close()

    run(main())
