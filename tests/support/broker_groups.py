"""Members of broker groups on Tansu, kiel's and other clients', and the checks
that a group settled (tests/coordinator/)."""

import asyncio
import threading
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from kiel import Producer
from kiel.consumer import GroupedConsumer
from kiel.consumer.offsets import GroupOffsets
from kiel.exc import PollIntervalExceededError
from kiel.structs import TopicPartition as TP
from tests.support.waiting import until

#: Tansu's rebalances take 5-8 s; a change settles well within this.
SETTLE = 60.0


FAST = {"session_timeout": 6.0, "heartbeat_interval": 1.0, "max_wait_time": 0.2,
        "commit_interval": 0.5}


def member(bootstrap: str, group: str, topics: Any = None, **options: Any) -> GroupedConsumer:
    for key, value in FAST.items():
        options.setdefault(key, value)
    if topics is not None:
        options["topics"] = topics
    return GroupedConsumer(bootstrap, group, **options)


async def produce(bootstrap: str, topic: str, n: int, prefix: str = "m") -> List[bytes]:
    values = [f"{prefix}{i}".encode() for i in range(n)]
    async with Producer(bootstrap) as producer:
        await asyncio.gather(*(producer.produce(topic, v) for v in values))
    return values


class Loop:
    """A kiel member consuming on its own task, as an application would."""

    def __init__(self, consumer: GroupedConsumer) -> None:
        self.consumer = consumer
        self.values: List[bytes] = []
        self.errors: List[BaseException] = []
        self.task: Optional[asyncio.Task[None]] = None

    async def start(self) -> "Loop":
        await self.consumer.connect()
        self.task = asyncio.ensure_future(self._run())
        return self

    async def _run(self) -> None:
        while True:
            try:
                for record in await self.consumer.consume():
                    self.values.append(record.value)
            except PollIntervalExceededError as e:
                self.errors.append(e)

    def assignment(self) -> Set[TP]:
        return set(self.consumer.assignment())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.consumer.close()


def split(assignments: List[Set[TP]], expected: Set[TP]) -> bool:
    """Disjoint and complete."""
    every = [tp for owned in assignments for tp in owned]
    return len(every) == len(set(every)) and set(every) == expected


async def settled(parts: List[Callable[[], Set[TP]]], expected: Set[TP], what: str) -> None:
    await until(lambda: split([p() for p in parts], expected), timeout=SETTLE,
                what=f"{what}: disjoint and complete ({[sorted(p()) for p in parts]})",
                interval=0.1)


async def committed(bootstrap: str, group: str, tps: List[TP]) -> Dict[TP, Optional[int]]:
    from kiel.cluster import Cluster
    cluster = Cluster(bootstrap)
    try:
        await cluster.connect()
        return await GroupOffsets(cluster, group).fetch(tps)
    finally:
        cluster.close()


def partitions(topic: str, n: int) -> Set[TP]:
    return {TP(topic, p) for p in range(n)}


class ThreadMember:
    """A peer client's consumer polling on a thread of its own."""

    def __init__(self, make: Callable[[], Any], assignment: Callable[[Any], Set[TP]]) -> None:
        self._make = make
        self._assignment = assignment
        self.owned: Set[TP] = set()
        self.values: List[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: Optional[BaseException] = None

    def start(self) -> "ThreadMember":
        self._thread.start()
        return self

    def _run(self) -> None:
        consumer = self._make()
        try:
            while not self._stop.is_set():
                self.values.extend(consumer.poll_values())
                self.owned = self._assignment(consumer)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e
        finally:
            consumer.close()
            self.owned = set()

    def assignment(self) -> Set[TP]:
        assert self.error is None, f"peer failed: {self.error!r}"
        return self.owned

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()


class KafkaPythonPeer:
    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        assignor = {"range": RangePartitionAssignor,
                    "roundrobin": RoundRobinPartitionAssignor,
                    "cooperative-sticky": CooperativeStickyAssignor}[strategy]
        self.consumer = KafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            partition_assignment_strategy=[assignor], session_timeout_ms=6000,
            heartbeat_interval_ms=1000, enable_auto_commit=True, auto_commit_interval_ms=500)

    def poll_values(self) -> List[bytes]:
        got = self.consumer.poll(timeout_ms=200)
        return [r.value for records in got.values() for r in records]

    def close(self) -> None:
        self.consumer.close()


class ConfluentPeer:
    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        from confluent_kafka import Consumer
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000, "auto.commit.interval.ms": 500,
        })
        self.consumer.subscribe([topic])

    def poll_values(self) -> List[bytes]:
        message = self.consumer.poll(0.2)
        if message is None or message.error():
            return []
        return [message.value()]

    def close(self) -> None:
        self.consumer.close()


def _peer_tps(consumer: Any) -> Set[TP]:
    inner = consumer.consumer
    return {TP(tp.topic, tp.partition) for tp in inner.assignment()}


class Recorder:
    """A listener with a sync and an async callback, recording what it saw."""

    def __init__(self) -> None:
        self.events: List[Tuple[str, List[TP]]] = []

    async def on_partitions_revoked(self, revoked: List[TP]) -> None:
        await asyncio.sleep(0)
        self.events.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned: List[TP]) -> None:
        self.events.append(("assigned", sorted(assigned)))

    def on_partitions_lost(self, lost: List[TP]) -> None:
        self.events.append(("lost", sorted(lost)))

