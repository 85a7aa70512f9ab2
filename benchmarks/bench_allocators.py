"""How many partitions each allocator moves when one member joins or leaves.

For random groups (1-30 members with random ids, 1-5 topics of 1-64
partitions) it lets one member join and one leave, and compares the number of
partitions that changed owner with the minimum that balance forces:

* join of a member to M members: ``P // (M + 1)`` (the newcomer's floor share);
* leave of a member: the leaver's own partitions.

The excess is "moved - minimum". Also times one allocation of a large group.
The numbers quoted in ``docs/guides/allocators.rst`` come from this script::

    .venv/bin/python benchmarks/bench_allocators.py [cases] [seed]
"""
import math
import random
import sys
import time
from typing import Callable, Dict, List, Sequence, Tuple

from kiel.allocators import (
    Allocation,
    _scores,  # the same keyed hash sticky uses
    parse_partition,
    range_allocator,
    round_robin,
    sticky,
)

Allocator = Callable[[Sequence[str], Sequence[str]], Allocation]


def _bounded(members: Sequence[str], partitions: Sequence[str], by_pair: bool) -> Allocation:
    """Two textbook variants of rendezvous hashing with bounded loads, for comparison.

    by_pair=False: partitions in name order, each to its best-scoring member
    under its bound. by_pair=True: all (member, partition) pairs by score,
    best first. Bounds: floor(P/M), and ceil for the first P % M to reach it.
    """
    ms, ps = sorted(set(members)), sorted(set(partitions))
    score = {m: dict(zip(ps, _scores(m, [p.encode() for p in ps]))) for m in ms}
    floor, extra = divmod(len(ps), len(ms))
    load = dict.fromkeys(ms, 0)
    owner: Dict[str, str] = {}

    def take(p: str, m: str) -> bool:
        nonlocal extra
        if p in owner or load[m] > floor or (load[m] == floor and not extra):
            return False
        if load[m] == floor:
            extra -= 1
        owner[p] = m
        load[m] += 1
        return True

    if by_pair:
        for _, p, m in sorted((-score[m][p], p, m) for p in ps for m in ms):
            take(p, m)
    else:
        for p in ps:
            for m in sorted(ms, key=lambda m: -score[m][p]):
                if take(p, m):
                    break
    out: Allocation = {m: {} for m in ms}
    for p, m in owner.items():
        topic, pid = parse_partition(p)
        out[m].setdefault(topic, []).append(pid)
    return out


def bounded_by_partition(members: Sequence[str], partitions: Sequence[str]) -> Allocation:
    return _bounded(members, partitions, by_pair=False)


def bounded_by_pair(members: Sequence[str], partitions: Sequence[str]) -> Allocation:
    return _bounded(members, partitions, by_pair=True)


def owners(allocation: Allocation) -> Dict[Tuple[str, int], str]:
    return {(t, p): m for m, topics in allocation.items() for t, ids in topics.items() for p in ids}


def moved(before: Allocation, after: Allocation) -> int:
    a, b = owners(before), owners(after)
    return sum(1 for key, member in a.items() if b[key] != member)


def random_case(rnd: random.Random) -> Tuple[List[str], List[str]]:
    members = sorted({f"host{rnd.randrange(100)}-{rnd.getrandbits(32):08x}"
                      for _ in range(rnd.randint(1, 30))})
    partitions = sorted(f"topic.{t}:{p}" for t in range(rnd.randint(1, 5))
                        for p in range(rnd.randint(1, 64)))
    return members, partitions


def measure(allocator: Allocator, cases: int, seed: int) -> Dict[str, List[Tuple[int, int]]]:
    """(P, excess) per join and per leave event."""
    rnd = random.Random(seed)
    out: Dict[str, List[Tuple[int, int]]] = {"join": [], "leave": []}
    for _ in range(cases):
        members, partitions = random_case(rnd)
        before = allocator(members, partitions)
        newcomer = f"new-{rnd.getrandbits(32):08x}"
        joined = allocator(sorted(members + [newcomer]), partitions)
        minimum = len(partitions) // (len(members) + 1)
        out["join"].append((len(partitions), moved(before, joined) - minimum))
        leaver = rnd.choice(members)
        if len(members) > 1:
            left = allocator([m for m in members if m != leaver], partitions)
            minimum = sum(len(ids) for ids in before[leaver].values())
            out["leave"].append((len(partitions), moved(before, left) - minimum))
    return out


def summary(events: List[Tuple[int, int]]) -> str:
    excess = sorted(e for _, e in events)
    n = len(excess)
    worst_ratio = max(e / math.sqrt(p) for p, e in events)
    return (f"n={n} zero={sum(1 for e in excess if e == 0) / n:.0%} mean={sum(excess) / n:.2f} "
            f"p50={excess[n // 2]} p90={excess[n * 9 // 10]} p99={excess[n * 99 // 100]} "
            f"max={excess[-1]} max(excess/sqrt(P))={worst_ratio:.2f}")


BUCKETS = ((1, 16), (17, 64), (65, 160), (161, 320))


def by_size(events: List[Tuple[int, int]]) -> str:
    parts = []
    for low, high in BUCKETS:
        chosen = [e for p, e in events if low <= p <= high]
        if chosen:
            parts.append(f"P {low}-{high}: mean {sum(chosen) / len(chosen):.2f} max {max(chosen)}")
    return "; ".join(parts)


def main() -> None:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    for name, allocator in (("sticky", sticky), ("round_robin", round_robin),
                            ("range", range_allocator),
                            ("bounded_by_partition", bounded_by_partition),
                            ("bounded_by_pair", bounded_by_pair)):
        result = measure(allocator, cases if name == "sticky" else min(cases, 500), seed)
        for event in ("join", "leave"):
            print(f"{name:20} {event:5} excess: {summary(result[event])}")
            if name == "sticky":
                print(f"{'':20} {event:5} by size: {by_size(result[event])}")
    members = [f"consumer-{i:03d}-{i * 7919:08x}" for i in range(50)]
    partitions = [f"topic.{t}:{p}" for t in range(20) for p in range(50)]
    start = time.perf_counter()
    sticky(members, partitions)
    print(f"sticky, 50 members x 1000 partitions: {time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
