"""close() keeps the promise of a graceful change: it waits for the records the
application holds (within ``revoke_timeout``) before it commits and gives
the partitions up, for the ZooKeeper group and the broker group alike.

A worker with ``auto_finish=False`` processes records slowly and marks each
``task_done``; ``close()`` is called while it holds a batch. The next owner
must start after what the worker finished: no record processed twice, and
no partition processed by two live members at once.
"""
import asyncio
import time
from typing import Any, Dict, List, Tuple

import pytest

from kiel import Producer
from kiel.consumer import GroupedConsumer
from kiel.exc import ClientClosedError
from kiel.structs import TopicPartition as TP
from tests.conftest import run, unique
from tests.support.waiting import until

PARTITIONS = 2
COUNT = 120


class Worker:
    """Takes records with consume() and processes each for a while, then task_done."""

    def __init__(self, name: str, consumer: GroupedConsumer, log: List[Tuple[Any, ...]],
                 pace: float) -> None:
        self.name = name
        self.consumer = consumer
        self.log = log
        self.pace = pace
        self.holding = asyncio.Event()
        self.task = asyncio.ensure_future(self.run())

    async def run(self) -> None:
        while True:
            try:
                records = await self.consumer.consume()
            except ClientClosedError:
                return
            if records:
                self.holding.set()
            for record in records:
                start = time.monotonic()
                await asyncio.sleep(self.pace)
                self.log.append((self.name, TP(record.topic, record.partition), record.offset,
                                 start, time.monotonic()))
                self.consumer.task_done(record)


def check(log: List[Tuple[Any, ...]]) -> None:
    offsets = [(tp, offset) for _, tp, offset, _, _ in log]
    assert len(offsets) == len(set(offsets)), "a record was processed twice"
    assert len(offsets) == COUNT
    by_partition: Dict[TP, List[Tuple[Any, ...]]] = {}
    for entry in log:
        by_partition.setdefault(entry[1], []).append(entry)
    for tp, entries in by_partition.items():
        first_b = min((e[3] for e in entries if e[0] == "b"), default=None)
        last_a = max((e[4] for e in entries if e[0] == "a"), default=None)
        if first_b is not None and last_a is not None:
            assert last_a <= first_b, f"{tp}: a still processing when b started"


async def scenario(make: Any, produce_to: str, topic: str) -> None:
    async with Producer(produce_to) as producer:
        await asyncio.gather(*(producer.produce(topic, b"%d" % i, partition=i % PARTITIONS)
                               for i in range(COUNT)))
    log: List[Tuple[Any, ...]] = []
    # b joins first and leads a broker group (Tansu 0.6.0 keeps a leader that
    # left as the group's leader, and the group then stalls: see the guide).
    b = make(auto_finish=False, commit_interval=0.5)
    await b.connect()
    a = make(auto_finish=False, commit_interval=None, revoke_timeout=30.0, max_records=40)
    await a.connect()
    assert a.assignment() and b.assignment()
    worker_b = Worker("b", b, log, pace=0.0)
    worker_a = Worker("a", a, log, pace=0.03)
    await worker_a.holding.wait()
    # a closes while its worker holds a batch of up to 40 records (~1.2 s):
    # its partitions go to b only after the worker finished them.
    await a.close()
    await worker_a.task
    await until(lambda: len(log) >= COUNT, timeout=60, what="every record processed",
                interval=0.05)
    await asyncio.sleep(0.5)  # anything processed twice shows up meanwhile
    worker_b.task.cancel()
    await asyncio.gather(worker_b.task, return_exceptions=True)
    await b.close()
    check(log)


def test_close_waits_for_held_records_zookeeper(kafka_cluster: Any, topic_factory: Any) -> None:
    topic = topic_factory(partitions=PARTITIONS)
    group = unique("g")

    def make(**options: Any) -> GroupedConsumer:
        return GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=kafka_cluster.zookeeper,
                               topics=[topic], max_wait_time=0.2, zk_session_timeout=6.0,
                               **options)

    run(scenario(make, kafka_cluster.bootstrap, topic), timeout=120)


def test_close_waits_for_held_records_brokers(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("close"), PARTITIONS)
    group = unique("g")

    def make(**options: Any) -> GroupedConsumer:
        return GroupedConsumer(tansu_broker.bootstrap, group, topics=[topic], max_wait_time=0.2,
                               session_timeout=6.0, heartbeat_interval=1.0, **options)

    run(scenario(make, tansu_broker.bootstrap, topic), timeout=120)


@pytest.mark.parametrize("how", ["cancelled", "returned", "stream cancelled"])
def test_close_does_not_wait_for_records_of_a_task_that_ended(
    kafka_cluster: Any, topic_factory: Any, how: str
) -> None:
    # auto_finish: a task that returned is done with its records (finished);
    # one that was cancelled will never finish them (delivered again by the
    # next owner), nor will a stream() loop whose task was cancelled. Either
    # way close() has nothing to wait for.
    cancelled = how != "returned"
    topic = topic_factory(partitions=1)
    group = unique("g")

    async def main() -> None:
        async with Producer(kafka_cluster.bootstrap) as producer:
            await asyncio.gather(*(producer.produce(topic, b"x") for _ in range(10)))
        c = GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=kafka_cluster.zookeeper,
                            topics=[topic], max_wait_time=0.2, zk_session_timeout=6.0,
                            revoke_timeout=30.0, commit_interval=None)
        await c.connect()
        got: List[Any] = []
        gate = asyncio.Event()

        async def take() -> None:
            if how == "stream cancelled":
                async for record in c.stream():
                    got.append(record)
                    await gate.wait()
            while not got:
                got.extend(await c.consume())
            await gate.wait()

        task = asyncio.ensure_future(take())
        await until(lambda: got, timeout=30, what="records in hand")
        if cancelled:
            task.cancel()
        else:
            gate.set()
        await asyncio.gather(task, return_exceptions=True)
        started = time.monotonic()
        await c.close()
        assert time.monotonic() - started < 10, "close() waited for an ended task's records"
        committed = 0 if cancelled else 10
        d = GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=kafka_cluster.zookeeper,
                            topics=[topic], max_wait_time=0.2, zk_session_timeout=6.0)
        async with d:
            assert await d.committed(topic, 0) in ((None, 0) if cancelled else (committed,))

    run(main(), timeout=120)
