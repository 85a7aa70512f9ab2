"""How long a GroupedConsumer rebalance takes, under either coordinator.

``--coordinator zookeeper``: a member joins a ZooKeeper-coordinated group,
until every partition is owned and fetching again. Runs against
kiel.testing (a real ZooKeeper server, the embedded 0.8.2 brokers over
loopback TCP); every member runs in this one process, each with its own
ZooKeeper session and broker connections. For each group size N it starts
N-1 members, waits until they converge, then times the join of the N-th:
from the start of its ``connect()`` until each partition is fetched by
exactly one member and every member fetches something. It also reports the
IOLoop's worst stall (a 5 ms timer's lateness) during the join.

``--coordinator brokers``: a group the brokers coordinate, on one Tansu
broker started here, for kiel beside confluent-kafka, kafka-python and
aiokafka in the same run (same topic, same ``range`` assignor, same session
timeout and heartbeat). Each round, for each client, a group of that
client's members only:

- join: a 2nd member joins a group of 1, from its start until each
  partition is assigned to exactly one member and both members own some;
- leave: that 2nd member (a follower) closes gracefully, until the 1st
  owns everything;
- crash: a 2nd member in a process of its own is SIGKILLed once the group
  shares the partitions, until the 1st owns everything.

``--coordinator brokers --pauses``: per-partition pauses, eager against
cooperative, on the same Tansu in the same run. A producer writes a record
to every partition every 0.1 s all along; each member notes when it got
records of each partition. For each mode (``--modes``, default kiel with
``range`` (eager) and with ``cooperative-sticky``, confluent-kafka and
kafka-python with ``cooperative-sticky``): a 2nd member joins a group of 1,
then leaves it; for each partition, the longest time no member got a record
of it, from the change until 3 s after the group settled, split into the
partitions that stayed with their owner (*kept*: a cooperative rebalance
should not pause them) and those that changed owner (*moved*).

Assignments are read from each client's own ``assignment()``. It prints the
median and max per client and scenario, and kiel's median over the fastest
peer's. It never fails on a time; a scenario that does not settle within
``--limit`` seconds is counted as stalled::

    python benchmarks/bench_rebalance.py [--coordinator zookeeper|brokers|both]
        [--partitions N] [--rounds 3] [--members 3 6 12]
        [--clients kiel confluent-kafka kafka-python aiokafka]
        [--session-timeout 6] [--heartbeat-interval 1] [--fetch-wait 0.5]
        [--pauses [--modes kiel:range kiel:cooperative-sticky ...]]

(``PYTHONPATH=.`` from a checkout measures that checkout's kiel, not the
installed one.)
"""
import argparse
import asyncio
import logging
import statistics
import subprocess
import time
import uuid
from dataclasses import replace
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from group_members import CLIENTS, MEMBERS, Member, ProcessMember, Receipts, Settings

from kiel import GroupedConsumer, Producer, TopicPartition
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.tansu import TansuBroker
from kiel.testing.zookeeper import ZooKeeperServer

TOPIC = "bench"
SCENARIOS = ("join", "leave", "crash")
#: Said with every broker-group result: what Tansu does that Apache Kafka does not.
TANSU_CAVEAT = """\
Tansu caveat: these are Tansu 0.6.0's rebalances, not Apache Kafka's, and
mostly Tansu's own time. JoinGroup is not a barrier there: Tansu holds every
JoinGroup about 3 s, gathering whoever joins meanwhile, and answers a
follower's SyncGroup on a cycle of about 1 s once the leader's assignment is
in; so a rebalance takes 3-5 s whatever the client and times move in steps of
about 1 s (a join takes 4 s when the leader, told by its next heartbeat,
rejoins within about 1 s of the newcomer, 5 s when later). The first member
to join fixes the group's protocol (Apache Kafka votes), and a leader that
leaves with LeaveGroup stays the leader and the group stalls: the member
that leaves or crashes here is always the follower, the one that joined
second. A crash takes the session timeout plus a rebalance."""


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
        return GroupedConsumer(bootstrap, group, zk_hosts=zk, topics=[TOPIC], member_id=f"m{i:02d}",
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


async def zookeeper_bench(bootstrap: str, zk: str, partitions: int, sizes: List[int],
                          rounds: int) -> None:
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


# --------------------------------------------------------------------------
# groups the brokers coordinate


class Stalled(Exception):
    """A scenario did not settle within the limit."""


def shared(members: Sequence[Member], everything: FrozenSet[int]) -> bool:
    """Each partition owned by exactly one member, and every member owns some."""
    owned = [m.assignment() for m in members]
    return (all(owned) and sum(len(o) for o in owned) == len(everything)
            and frozenset().union(*owned) == everything)


async def settle(condition: Callable[[], bool], limit: float, what: str) -> float:
    """Seconds until ``condition()`` holds, checked every 5 ms.

    Raises:
        Stalled: not within ``limit`` seconds.
    """
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > limit:
            raise Stalled(f"{what}: not within {limit:g} s")
        await asyncio.sleep(0.005)
    return time.monotonic() - started


async def broker_round(client: str, bootstrap: str, topic: str, partitions: int,
                       settings: Settings, limit: float) -> Dict[str, Optional[float]]:
    """One round of join, leave and crash for one client, in a new group.

    Returns:
        seconds per scenario; ``None`` for a scenario that stalled or was
        not reached (the message says which).
    """
    make = MEMBERS[client]
    group = f"bench-{client}-{uuid.uuid4().hex[:8]}"
    everything = frozenset(range(partitions))
    took: Dict[str, Optional[float]] = dict.fromkeys(SCENARIOS)
    # The first member joins alone and leads; it never leaves before the end
    # (Tansu keeps a leader that left as the leader, and the group stalls).
    first = make(bootstrap, group, topic, settings)
    second = make(bootstrap, group, topic, settings)
    crashing = ProcessMember(client, bootstrap, group, topic, settings)
    running: List[Member] = []  # started and not yet closed
    leaving: Optional[asyncio.Future[None]] = None
    try:
        running.append(first)
        await first.start()
        await settle(lambda: first.assignment() == everything, limit, "the first member alone")

        await asyncio.sleep(1.0)
        started = time.monotonic()
        running.append(second)
        await second.start()
        await settle(lambda: shared([first, second], everything), limit, "join")
        took["join"] = time.monotonic() - started

        await asyncio.sleep(1.0)
        started = time.monotonic()
        running.remove(second)
        leaving = asyncio.ensure_future(second.close())
        await settle(lambda: first.assignment() == everything, limit, "leave")
        took["leave"] = time.monotonic() - started
        await leaving

        # Not timed: a member in its own process joins, then is killed.
        running.append(crashing)
        await crashing.start()
        await settle(lambda: shared([first, crashing], everything), limit, "a member to crash")
        await asyncio.sleep(1.0)
        started = time.monotonic()
        crashing.kill()
        await settle(lambda: first.assignment() == everything, limit, "crash")
        took["crash"] = time.monotonic() - started
    except Stalled as e:
        print(f"  {client}: stalled: {e}", flush=True)
    finally:
        closes: List[asyncio.Future[None]] = [asyncio.ensure_future(m.close()) for m in running]
        if leaving is not None and not leaving.done():
            closes.append(leaving)
        for result in await asyncio.gather(*closes, return_exceptions=True):
            if isinstance(result, BaseException):
                print(f"  {client}: closing a member failed: {result!r}", flush=True)
    return took


def describe(times: List[Optional[float]]) -> Tuple[str, str, str]:
    done = [t for t in times if t is not None]
    if not done:
        return "-", "-", f"0/{len(times)}"
    return (f"{statistics.median(done):.2f}", f"{max(done):.2f}", f"{len(done)}/{len(times)}")


async def brokers_bench(broker: TansuBroker, clients: Sequence[str], partitions: int,
                        rounds: int, settings: Settings, limit: float) -> None:
    topic = broker.create_topic(f"{TOPIC}-{uuid.uuid4().hex[:8]}", partitions)
    version = subprocess.run([broker.binary, "--version"], capture_output=True, text=True,
                             timeout=30).stdout.strip() or "tansu"
    print(f"Broker group on one Tansu broker ({version}, {broker.address}): a topic of "
          f"{partitions} partitions, the {settings.assignor} assignor, session_timeout "
          f"{settings.session_timeout:g} s, heartbeat_interval {settings.heartbeat_interval:g} s, "
          f"fetch wait {settings.fetch_wait:g} s, {rounds} rounds; each group has one client's "
          f"members only", flush=True)
    times: Dict[str, Dict[str, List[Optional[float]]]] = {
        c: {s: [] for s in SCENARIOS} for c in clients}
    for r in range(rounds):
        # The clients take turns, in a rotated order each round, so a drift in
        # the machine's load falls on all of them.
        order = list(clients[r % len(clients):]) + list(clients[:r % len(clients)])
        for client in order:
            took = await broker_round(client, broker.bootstrap, topic, partitions, settings,
                                      limit)
            for scenario, seconds in took.items():
                times[client][scenario].append(seconds)
            shown = " ".join(f"{s} {'-' if t is None else f'{t:.2f}'}" for s, t in took.items())
            print(f"  round {r + 1} {client}: {shown}", flush=True)
    print(f"{'scenario':<9}{'client':<17}{'median s':>9}{'max s':>8}{'rounds':>8}")
    for scenario in SCENARIOS:
        for client in clients:
            median, most, count = describe(times[client][scenario])
            print(f"{scenario:<9}{client:<17}{median:>9}{most:>8}{count:>8}")
    if "kiel" in clients and len(clients) > 1:
        print("kiel's median over the fastest peer's median (below 1: kiel faster):")
        for scenario in SCENARIOS:
            medians = {c: statistics.median(done) for c in clients
                       if (done := [t for t in times[c][scenario] if t is not None])}
            peers = {c: m for c, m in medians.items() if c != "kiel"}
            if "kiel" not in medians or not peers:
                print(f"  {scenario:<6} -")
                continue
            fastest = min(peers, key=peers.__getitem__)
            print(f"  {scenario:<6} {medians['kiel'] / peers[fastest]:.2f} "
                  f"(kiel {medians['kiel']:.2f} s, fastest peer {fastest} "
                  f"{peers[fastest]:.2f} s)")
    print(TANSU_CAVEAT)


# --------------------------------------------------------------------------
# per-partition pauses: eager against cooperative

#: What ``--pauses`` compares, ``client:assignor``.
PAUSE_MODES = ("kiel:range", "kiel:cooperative-sticky", "confluent-kafka:cooperative-sticky",
               "kafka-python:cooperative-sticky")
#: Seconds after a change settles that a moved partition's first records may take.
TAIL = 3.0
#: Seconds between two records to each partition.
TRAFFIC_EVERY = 0.1


class Pauses:
    """One scenario's pauses: kept and moved partitions' longest gaps, and the settle time."""

    def __init__(self) -> None:
        self.kept: List[float] = []
        self.moved: List[float] = []
        self.settled: List[float] = []


async def traffic(bootstrap: str, topic: str, partitions: int) -> None:
    """A record to every partition every :data:`TRAFFIC_EVERY` seconds, until cancelled."""
    async with Producer(bootstrap) as producer:
        i = 0
        while True:
            await asyncio.gather(*(producer.produce(topic, f"{i}".encode(), partition=p)
                                   for p in range(partitions)))
            i += 1
            await asyncio.sleep(TRAFFIC_EVERY)


async def pause_round(mode: str, bootstrap: str, topic: str, partitions: int,
                      settings: Settings, limit: float,
                      out: Dict[str, Pauses]) -> None:
    """A 2nd member joins a group of 1, then leaves; the pauses go to ``out``."""
    client, _, assignor = mode.partition(":")
    settings = replace(settings, assignor=assignor)
    receipts = Receipts()
    group = f"pause-{client}-{uuid.uuid4().hex[:8]}"
    everything = frozenset(range(partitions))
    first = MEMBERS[client](bootstrap, group, topic, settings, receipts)
    second = MEMBERS[client](bootstrap, group, topic, settings, receipts)
    running: List[Member] = [first]
    try:
        await first.start()
        await settle(lambda: first.assignment() == everything, limit, "the first member alone")
        await asyncio.sleep(2.0)  # flowing steadily

        for scenario in ("join", "leave"):
            before = first.assignment()
            started = time.monotonic()
            if scenario == "join":
                running.append(second)
                await second.start()
                took = await settle(lambda: shared([first, second], everything), limit, "join")
            else:
                running.remove(second)
                leaving = asyncio.ensure_future(second.close())
                took = await settle(lambda: first.assignment() == everything, limit, "leave")
                await leaving
            await asyncio.sleep(TAIL)
            end = time.monotonic()
            kept = before & first.assignment()
            pauses = out[scenario]
            pauses.settled.append(took)
            for p in sorted(everything):
                gap = receipts.longest_gap(p, started, end)
                (pauses.kept if p in kept else pauses.moved).append(gap)
            await asyncio.sleep(1.0)
    except Stalled as e:
        print(f"  {mode}: stalled: {e}", flush=True)
    finally:
        for result in await asyncio.gather(*(m.close() for m in running),
                                           return_exceptions=True):
            if isinstance(result, BaseException):
                print(f"  {mode}: closing a member failed: {result!r}", flush=True)


def _spread(values: List[float]) -> Tuple[str, str]:
    if not values:
        return "-", "-"
    return f"{statistics.median(values):.2f}", f"{max(values):.2f}"


async def pauses_bench(broker: TansuBroker, modes: Sequence[str], partitions: int,
                       rounds: int, settings: Settings, limit: float) -> None:
    topic = broker.create_topic(f"pause-{uuid.uuid4().hex[:8]}", partitions)
    print(f"Per-partition pauses on one Tansu broker ({broker.address}): {partitions} "
          f"partitions, a record to each every {TRAFFIC_EVERY:g} s, session_timeout "
          f"{settings.session_timeout:g} s, heartbeat_interval {settings.heartbeat_interval:g} s, "
          f"fetch wait {settings.fetch_wait:g} s, {rounds} rounds; a 2nd member joins a group "
          f"of 1, then leaves. Pause = the longest time no member got a record of a partition, "
          f"from the change until {TAIL:g} s after the group settled.", flush=True)
    results = {m: {"join": Pauses(), "leave": Pauses()} for m in modes}
    producing = asyncio.ensure_future(traffic(broker.bootstrap, topic, partitions))
    try:
        for r in range(rounds):
            order = list(modes[r % len(modes):]) + list(modes[:r % len(modes)])
            for mode in order:
                await pause_round(mode, broker.bootstrap, topic, partitions, settings, limit,
                                  results[mode])
                print(f"  round {r + 1} {mode}: " + " ".join(
                    f"{s} settled {p.settled[-1]:.2f} s" if p.settled else f"{s} -"
                    for s, p in results[mode].items()), flush=True)
    finally:
        producing.cancel()
        await asyncio.gather(producing, return_exceptions=True)
    print(f"{'scenario':<9}{'mode':<36}{'settle s':>9}{'kept median':>12}{'kept max':>9}"
          f"{'moved median':>13}{'moved max':>10}{'kept/moved':>11}")
    for scenario in ("join", "leave"):
        for mode in modes:
            p = results[mode][scenario]
            settle_s = f"{statistics.median(p.settled):.2f}" if p.settled else "-"
            km, kx = _spread(p.kept)
            mm, mx = _spread(p.moved)
            print(f"{scenario:<9}{mode:<36}{settle_s:>9}{km:>12}{kx:>9}{mm:>13}{mx:>10}"
                  f"{len(p.kept):>6}/{len(p.moved):<4}")
    print("Kept partitions' median pause, over kiel eager's (below 1: less pause):")
    eager = results.get("kiel:range")
    for scenario in ("join", "leave"):
        if eager is None or not eager[scenario].kept:
            continue
        base = statistics.median(eager[scenario].kept)
        shown = ", ".join(f"{m} {statistics.median(results[m][scenario].kept) / base:.2f}"
                          for m in modes if m != "kiel:range" and results[m][scenario].kept)
        print(f"  {scenario:<6} {shown}")
    print(TANSU_CAVEAT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinator", choices=["zookeeper", "brokers", "both"],
                        default="both")
    parser.add_argument("--partitions", type=int, default=None,
                        help="the topic's partitions (default 48 for zookeeper, 12 for brokers)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--members", type=int, nargs="+", default=[3, 6, 12],
                        help="zookeeper: the group sizes whose last join is timed")
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS),
                        help="brokers: the clients compared")
    parser.add_argument("--session-timeout", type=float, default=6.0, help="brokers: seconds")
    parser.add_argument("--heartbeat-interval", type=float, default=1.0, help="brokers: seconds")
    parser.add_argument("--fetch-wait", type=float, default=0.5,
                        help="brokers: seconds a fetch may wait at the broker, every client")
    parser.add_argument("--pauses", action="store_true",
                        help="brokers: per-partition pauses, eager against cooperative")
    parser.add_argument("--modes", nargs="+", default=list(PAUSE_MODES),
                        help="--pauses: client:assignor pairs compared")
    parser.add_argument("--limit", type=float, default=60.0,
                        help="brokers: seconds a scenario may take before it counts as stalled")
    args = parser.parse_args()
    if args.coordinator in ("zookeeper", "both"):
        partitions = args.partitions or 48
        with ZooKeeperServer() as zookeeper:
            zk = f"{zookeeper.hosts}/bench"
            with EmbeddedCluster(brokers=3, zookeeper=zk, topics={TOPIC: partitions}) as cluster:
                asyncio.run(zookeeper_bench(cluster.bootstrap, zk, partitions, args.members,
                                            args.rounds))
    if args.coordinator in ("brokers", "both"):
        settings = Settings(session_timeout=args.session_timeout,
                            heartbeat_interval=args.heartbeat_interval,
                            fetch_wait=args.fetch_wait)
        # aiokafka warns of every rebalance its heartbeat sees: expected here.
        logging.getLogger("aiokafka.consumer.group_coordinator").setLevel(logging.ERROR)
        with TansuBroker() as broker:
            if args.pauses:
                asyncio.run(pauses_bench(broker, args.modes, args.partitions or 12, args.rounds,
                                         settings, args.limit))
            else:
                asyncio.run(brokers_bench(broker, args.clients, args.partitions or 12,
                                          args.rounds, settings, args.limit))


if __name__ == "__main__":
    main()
