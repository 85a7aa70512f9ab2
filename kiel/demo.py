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
processed twice. ``make demo`` then runs the Spark page-view pipeline
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


async def group_tour(bootstrap: str, zk_hosts: str) -> bool:
    """Three grouped consumers share the topic; one leaves half-way."""
    counts: dict[int, int] = collections.Counter()
    stops: dict[str, asyncio.Event] = {}

    def member(name: str) -> GroupedConsumer:
        return GroupedConsumer(
            bootstrap,
            "demo-group",
            zk_hosts,
            topics=[TOPIC],
            listener=ShowMoves(name),
            member_id=name,
            deserializer=json_deserializer,
            max_wait_time=0.2,
            offset_reset="earliest",
            zk_session_timeout=6.0,
        )

    async def work(consumer: GroupedConsumer, stop: asyncio.Event) -> None:
        # Keep asking until told to stop: records returned by one consume()
        # count as in the application's hands until the next call, and a
        # hand-off waits for them.
        while not stop.is_set():
            records = await consumer.consume()
            for record in records:
                view: Any = record.value  # a dict: the deserializer made it
                counts[view["n"]] += 1
            if records:
                await asyncio.sleep(0.02)  # a slow worker, so the others get work too

    def ownership(names: list[str]) -> dict[str, list[int]]:
        return {n: sorted(tp.partition for tp in consumers[n].assignment()) for n in names}

    names = ["alpha", "beta", "gamma"]
    consumers = {name: member(name) for name in names}
    tasks = {}
    for name in names:
        await consumers[name].connect()
        stops[name] = asyncio.Event()
        tasks[name] = asyncio.ensure_future(work(consumers[name], stops[name]))
        print(f"{name} joined; ownership now {ownership(list(tasks))}")
    await asyncio.sleep(0.3)
    print("beta leaves (graceful: stops fetching, commits, releases)")
    stops["beta"].set()
    await tasks["beta"]
    await consumers["beta"].close()
    for _ in range(400):  # the others take beta's partitions over and finish the topic
        settled = sum(len(v) for v in ownership(["alpha", "gamma"]).values()) == PARTITIONS
        if settled and len(counts) >= MESSAGES:
            break
        await asyncio.sleep(0.05)
    print(f"ownership after beta left: {ownership(['alpha', 'gamma'])}")
    for name in ("alpha", "gamma"):
        stops[name].set()
        await tasks[name]
        await consumers[name].close()
    twice = sum(1 for c in counts.values() if c > 1)
    missed = MESSAGES - len(counts)
    print(
        f"the group processed {len(counts)} of {MESSAGES} messages: {missed} missed, {twice} twice"
    )
    return missed == 0 and twice == 0


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
    print("done" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
