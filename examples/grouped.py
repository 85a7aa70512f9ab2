"""Split a topic's partitions among grouped consumers coordinated in ZooKeeper.

Needs Java and Debian's ``zookeeper`` package (kiel.testing starts a real
ZooKeeper server); no Kafka is needed::

    python examples/grouped.py

It starts ZooKeeper and a 3-broker embedded Kafka 0.8.2 cluster registered
in it, produces 3000 JSON events to a 6-partition topic, and consumes them
with a group whose membership changes while it works: one member first,
a second joins (partitions move to it after the first one's listener ran and
its offsets were committed), then the first one leaves. Every event is
processed exactly once: the hand-offs are graceful.
"""
import asyncio
from typing import Dict, List

from kiel import GroupedConsumer, TopicPartition, ZooKeeperGroup
from kiel.clients import Producer
from kiel.serializers import json_deserializer, json_serializer
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.zookeeper import ZooKeeperServer

TOPIC = "events"
GROUP = "example"
COUNT = 3000


class PrintingListener:
    """Rebalance callbacks: plain or ``async def`` methods both work."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def on_partitions_revoked(self, revoked: List[TopicPartition]) -> None:
        # Runs before the partitions move; their offsets are committed right after.
        print(f"  {self.name}: revoked {[tp.partition for tp in revoked]}")

    def on_partitions_assigned(self, assigned: List[TopicPartition]) -> None:
        print(f"  {self.name}: assigned {[tp.partition for tp in assigned]}")


async def work(name: str, consumer: GroupedConsumer, seen: Dict[int, int],
               stop: asyncio.Event) -> None:
    """The application: a consume loop. Asking for more finishes the last batch.

    Keep asking while you are a member: records returned by the last call
    count as in your hands until the next one, and a revocation waits for
    them (up to ``revoke_timeout``).
    """
    while not stop.is_set():
        for record in await consumer.consume():
            n = record.value["n"]
            seen[n] = seen.get(n, 0) + 1


def member(bootstrap: str, zk_hosts: str, name: str) -> GroupedConsumer:
    return GroupedConsumer(
        bootstrap,
        GROUP,
        topics=[TOPIC],
        coordinator=ZooKeeperGroup(
            hosts=zk_hosts,  # the ZooKeeper the brokers register in (chroot included)
            allocator="sticky",  # or "round_robin" (default), "range", "weighted", a callable
            member_id=name,
            session_timeout=6.0,
        ),
        listener=PrintingListener(name),
        deserializer=json_deserializer,
        max_wait_time=0.2,
        commit_interval=1.0,  # also commits on revoke and close
    )


async def run(bootstrap: str, zk_hosts: str) -> None:
    async with Producer(bootstrap, serializer=json_serializer) as producer:
        await asyncio.gather(*(producer.produce(TOPIC, {"n": n}) for n in range(COUNT)))
    seen: Dict[int, int] = {}
    print("alice joins")
    alice, alice_stop = member(bootstrap, zk_hosts, "alice"), asyncio.Event()
    await alice.connect()  # returns once its first allocation is owned and fetching
    alice_work = asyncio.ensure_future(work("alice", alice, seen, alice_stop))
    await asyncio.sleep(0.2)

    print("bob joins")
    bob, bob_stop = member(bootstrap, zk_hosts, "bob"), asyncio.Event()
    await bob.connect()
    bob_work = asyncio.ensure_future(work("bob", bob, seen, bob_stop))
    print(f"  alice owns {[tp.partition for tp in alice.assignment()]}, "
          f"bob owns {[tp.partition for tp in bob.assignment()]}")
    await asyncio.sleep(0.2)

    print("alice leaves")
    alice_stop.set()
    await alice_work
    await alice.close()  # revoke (listener + commit), release, deregister
    while len(seen) < COUNT:  # bob takes alice's partitions over
        await asyncio.sleep(0.1)
    bob_stop.set()
    await bob_work
    await bob.close()
    twice = sum(1 for n in seen.values() if n > 1)
    print(f"processed {len(seen)} of {COUNT} events, {twice} twice")


def main() -> None:
    with ZooKeeperServer() as zookeeper:
        zk_hosts = f"{zookeeper.hosts}/example"
        with EmbeddedCluster(brokers=3, zookeeper=zk_hosts, topics={TOPIC: 6}) as cluster:
            asyncio.run(run(cluster.bootstrap, zk_hosts))


if __name__ == "__main__":
    main()
