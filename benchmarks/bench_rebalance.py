"""How long a GroupedConsumer rebalance takes: a member joins a group, until
every partition is owned and fetching again.

Runs against kiel.testing (a real ZooKeeper server, the embedded 0.8.2
brokers over loopback TCP); every member runs in this one process, each with
its own ZooKeeper session and broker connections::

    python benchmarks/bench_rebalance.py [--partitions 48] [--members 3 6 12] [--rounds 3]

For each group size N it starts N-1 members, waits until they converge, then
times the join of the N-th: from the start of its ``connect()`` until each
partition is fetched by exactly one member and every member fetches
something. It also reports the IOLoop's worst stall (a 5 ms timer's
lateness) during the join.
"""
import argparse
import asyncio
import statistics
import time
from typing import Dict, List, Tuple

from kiel import GroupedConsumer, TopicPartition
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.zookeeper import ZooKeeperServer

TOPIC = "bench"


def converged(consumers: List[GroupedConsumer], tps: List[TopicPartition]) -> bool:
    seen: Dict[TopicPartition, int] = {}
    for c in consumers:
        fetching = c.fetching()
        if not fetching:
            return False
        for tp in fetching:
            seen[tp] = seen.get(tp, 0) + 1
    return sorted(seen) == tps and all(n == 1 for n in seen.values())


async def lag_sampler(worst: List[float]) -> None:
    loop = asyncio.get_event_loop()
    while True:
        start = loop.time()
        await asyncio.sleep(0.005)
        worst[0] = max(worst[0], loop.time() - start - 0.005)


async def join_time(bootstrap: str, zk: str, group: str, n: int,
                    tps: List[TopicPartition]) -> Tuple[float, float]:
    def make(i: int) -> GroupedConsumer:
        return GroupedConsumer(bootstrap, group, zk, topics=[TOPIC], member_id=f"m{i:02d}",
                               max_wait_time=0.2, commit_interval=None)

    members = [make(i) for i in range(n - 1)]
    await asyncio.gather(*(m.connect() for m in members))
    while not converged(members, tps):
        await asyncio.sleep(0.005)
    worst = [0.0]
    sampler = asyncio.ensure_future(lag_sampler(worst))
    newcomer = make(n - 1)
    started = time.monotonic()
    await newcomer.connect()
    members.append(newcomer)
    while not converged(members, tps):
        await asyncio.sleep(0.002)
    took = time.monotonic() - started
    sampler.cancel()
    await asyncio.gather(*(m.close() for m in members))
    return took, worst[0]


async def bench(bootstrap: str, zk: str, partitions: int, sizes: List[int], rounds: int) -> None:
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    print(f"{partitions} partitions; join of the N-th member until all fetch again")
    print(f"{'members':>8} {'median ms':>10} {'max ms':>8} {'worst loop lag ms':>18}")
    for n in sizes:
        times, lags = [], []
        for r in range(rounds):
            took, lag = await join_time(bootstrap, zk, f"bench-{n}-{r}", n, tps)
            times.append(took)
            lags.append(lag)
        print(f"{n:>8} {statistics.median(times) * 1000:>10.0f} {max(times) * 1000:>8.0f} "
              f"{max(lags) * 1000:>18.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=48)
    parser.add_argument("--members", type=int, nargs="+", default=[3, 6, 12])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with ZooKeeperServer() as zookeeper:
        zk = f"{zookeeper.hosts}/bench"
        with EmbeddedCluster(brokers=3, zookeeper=zk, topics={TOPIC: args.partitions}) as cluster:
            asyncio.run(bench(cluster.bootstrap, zk, args.partitions, args.members, args.rounds))


if __name__ == "__main__":
    main()
