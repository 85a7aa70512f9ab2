"""``make demo``: a tour of kiel against ``kiel.testing``.

1. Starts the real ZooKeeper server (Debian's ``zookeeper`` package) and a
   3-broker embedded Kafka 0.8.2 cluster registered in it.
2. Produces a few thousand keyed JSON messages with kiel's ``Producer``
   (snappy-compressed, many in flight at once).
3. Reads them all back with kiel's ``SingleConsumer`` and checks that every
   message arrived exactly once, in order per partition.
4. Shows what the cluster registered in ZooKeeper, the way 0.8.2 lays it out.
5. Tears everything down.

Then three ``GroupedConsumer`` members split the topic through ZooKeeper,
one leaves half-way, and the demo checks that no message was missed or
processed twice. The second act (:mod:`kiel.demo_current`) runs on current
brokers with no ZooKeeper: a broker-coordinated group shared with a
confluent-kafka member, the idempotent producer, and a transaction committed
and one aborted, read committed. ``make demo`` then runs the Spark page-view pipeline
(``examples/spark_pageviews.py``). Each step prints what it did, and the
demo exits non-zero if any check fails.
"""

import asyncio
import collections
import sys
import time
from typing import Any

from kiel.clients import Producer
from kiel.consumer import GroupedConsumer, SingleConsumer
from kiel.serializers import json_deserializer, json_serializer
from kiel.structs import TopicPartition
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.zookeeper import ZooKeeperServer

TOPIC = "page-views"
PARTITIONS = 6
MESSAGES = 5000
USERS = ["ada", "grace", "alan", "edsger", "barbara", "donald", "frances", "ken"]


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


async def produce(bootstrap: str) -> dict[int, int]:
    per_partition: dict[int, int] = collections.Counter()
    async with Producer(
        bootstrap,
        serializer=json_serializer,
        key_maker=lambda view: view["user"].encode(),
        compression="snappy",
        linger=0.005,
    ) as producer:
        started = time.perf_counter()
        futures = [
            producer.produce(TOPIC, {"user": USERS[n % len(USERS)], "n": n, "page": f"/p/{n % 37}"})
            for n in range(MESSAGES)
        ]
        for meta in await asyncio.gather(*futures):
            per_partition[meta.partition] += 1
        elapsed = time.perf_counter() - started
    print(f"produced {MESSAGES} messages in {elapsed:.2f}s, acknowledged per partition:")
    for partition in sorted(per_partition):
        print(f"  {TOPIC}[{partition}]: {per_partition[partition]}")
    return per_partition


async def consume(bootstrap: str) -> list[Any]:
    seen: list[Any] = []
    async with SingleConsumer(
        bootstrap, deserializer=json_deserializer, max_wait_time=0.5
    ) as consumer:
        started = time.perf_counter()
        empty_rounds = 0
        while len(seen) < MESSAGES and empty_rounds < 20:
            records = await consumer.consume(TOPIC, start=SingleConsumer.BEGINNING)
            empty_rounds = 0 if records else empty_rounds + 1
            seen.extend(r.value for r in records)
        elapsed = time.perf_counter() - started
        print(f"consumed {len(seen)} messages in {elapsed:.2f}s; lag now {consumer.lag(TOPIC)}")
    return seen


class ShowMoves:
    """A rebalance listener that prints the hand-offs as they happen."""

    def __init__(self, name: str) -> None:
        self.name = name

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        print(f"  {self.name}: gives up {[tp.partition for tp in revoked]} (commits first)")

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        print(f"  {self.name}: takes {[tp.partition for tp in assigned]}")


class GroupTour:
    """Three grouped consumers share the topic; one leaves half-way."""

    names = ("alpha", "beta", "gamma")

    def __init__(self, bootstrap: str, zk_hosts: str) -> None:
        self.bootstrap = bootstrap
        self.zk_hosts = zk_hosts
        #: How many times each message number was processed.
        self.counts: dict[int, int] = collections.Counter()
        self.consumers: dict[str, GroupedConsumer] = {}
        self.stops: dict[str, asyncio.Event] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}

    async def run(self) -> bool:
        """Join the three, let beta leave, and check that every message was
        processed exactly once.

        Returns:
            whether none was missed and none processed twice.
        """
        for name in self.names:
            await self.join(name)
            print(f"{name} joined; ownership now {self.ownership(list(self.tasks))}")
        await asyncio.sleep(0.3)
        print("beta leaves (graceful: stops fetching, commits, releases)")
        await self.leave("beta")
        await self.wait_for_the_rest(["alpha", "gamma"])
        print(f"ownership after beta left: {self.ownership(['alpha', 'gamma'])}")
        for name in ("alpha", "gamma"):
            await self.leave(name)
        twice = sum(1 for c in self.counts.values() if c > 1)
        missed = MESSAGES - len(self.counts)
        print(
            f"the group processed {len(self.counts)} of {MESSAGES} messages: "
            f"{missed} missed, {twice} twice"
        )
        return missed == 0 and twice == 0

    async def join(self, name: str) -> None:
        """Start a member and its worker."""
        consumer = self.consumers[name] = GroupedConsumer(
            self.bootstrap,
            "demo-group",
            zk_hosts=self.zk_hosts,
            topics=[TOPIC],
            listener=ShowMoves(name),
            member_id=name,
            deserializer=json_deserializer,
            max_wait_time=0.2,
            offset_reset="earliest",
            zk_session_timeout=6.0,
        )
        await consumer.connect()
        self.stops[name] = asyncio.Event()
        self.tasks[name] = asyncio.create_task(self.work(consumer, self.stops[name]))

    async def work(self, consumer: GroupedConsumer, stop: asyncio.Event) -> None:
        """Process records until told to stop."""
        # Keep asking until told to stop: records returned by one consume()
        # count as in the application's hands until the next call, and a
        # hand-off waits for them.
        while not stop.is_set():
            records = await consumer.consume()
            for record in records:
                view: Any = record.value  # a dict: the deserializer made it
                self.counts[view["n"]] += 1
            if records:
                await asyncio.sleep(0.02)  # a slow worker, so the others get work too

    async def leave(self, name: str) -> None:
        """Stop a member's worker, then close it (it commits and releases)."""
        self.stops[name].set()
        await self.tasks[name]
        await self.consumers[name].close()

    async def wait_for_the_rest(self, names: list[str], timeout: float = 20.0) -> None:
        """Wait (at most ``timeout`` seconds) until ``names`` own every
        partition and every message was processed."""
        for _ in range(int(timeout / 0.05)):
            settled = sum(len(v) for v in self.ownership(names).values()) == PARTITIONS
            if settled and len(self.counts) >= MESSAGES:
                return
            await asyncio.sleep(0.05)

    def ownership(self, names: list[str]) -> dict[str, list[int]]:
        """The partitions each of ``names`` owns."""
        return {
            n: sorted(tp.partition for tp in self.consumers[n].assignment()) for n in names
        }


async def group_tour(bootstrap: str, zk_hosts: str) -> bool:
    """Three grouped consumers share the topic; one leaves half-way.

    Returns:
        whether every message was processed exactly once.
    """
    return await GroupTour(bootstrap, zk_hosts).run()


def check(seen: list[Any]) -> bool:
    numbers = [view["n"] for view in seen]
    ok = sorted(numbers) == list(range(MESSAGES))
    # A user's views share a key, so a partition: they must come in order.
    per_user: dict[str, list[int]] = collections.defaultdict(list)
    for view in seen:
        per_user[view["user"]].append(view["n"])
    in_order = all(ns == sorted(ns) for ns in per_user.values())
    print(f"every message exactly once: {ok}; each user's views in order: {in_order}")
    return ok and in_order


def main() -> int:
    step("starting the real ZooKeeper server and a 3-broker embedded Kafka 0.8.2 cluster")
    with ZooKeeperServer() as zk:
        print(f"ZooKeeper at {zk.hosts}")
        with EmbeddedCluster(brokers=3, zookeeper=zk.hosts, topics={TOPIC: PARTITIONS}) as cluster:
            print(f"brokers at {cluster.bootstrap}")
            step(f"producing {MESSAGES} page views with kiel's Producer (snappy)")
            asyncio.run(produce(cluster.bootstrap))
            step("consuming them back with kiel's SingleConsumer")
            seen = asyncio.run(consume(cluster.bootstrap))
            ok = check(seen)
            step("three grouped consumers share the topic through ZooKeeper; one leaves")
            ok = asyncio.run(group_tour(cluster.bootstrap, zk.hosts)) and ok
            step("what the brokers registered in ZooKeeper (the 0.8.2 layout)")
            client = cluster.zookeeper_client
            if client is not None:
                print("/brokers/ids:", sorted(client.get_children("/brokers/ids")))
                data, _ = client.get(f"/brokers/topics/{TOPIC}")
                print(f"/brokers/topics/{TOPIC}:", data.decode())
            step("tearing down")
    from kiel import demo_current

    ok = demo_current.run() and ok
    print("done" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
