"""A rebalance shows in the logs and in the metrics, in every kind of group.

Against real brokers: an eager broker group on Tansu (its rebalances take
5-8 s) and a ZooKeeper group on the embedded 0.8 broker, with a listener
slow enough to be seen. What is checked:

* the INFO lines of a rebalance (join, the generation reached, the
  assignment, what moved), once each;
* ``rebalance_seconds_max`` covers the time the member's partitions had no
  owner there: from the start of its revocation (the listener's
  ``on_partitions_revoked`` starts after it) to the new assignment fetching
  (after the listener's ``on_partitions_assigned`` returns). It used to
  time each listener call on its own, a few milliseconds without a listener,
  while partitions waited seconds for their next owner.

The pure parts (the clock, the bounded partition lists) are checked on their own.
"""
import asyncio
import logging
from typing import Any, List, Tuple

import pytest

from kiel.consumer import ConsumerRebalanceListener, GroupedConsumer
from kiel.metrics import Rebalance, RebalanceClock, describe_partitions
from kiel.structs import TopicPartition as TP
from tests.conftest import run, unique
from tests.support.broker_groups import SETTLE, Loop, member, partitions, produce, settled
from tests.support.waiting import until

#: How long the slow listener's callbacks take.
REVOKE_SECONDS = 1.0
ASSIGN_SECONDS = 1.5


class SlowListener(ConsumerRebalanceListener):
    """Takes its time in every callback; notes when each started and ended (loop clock)."""

    def __init__(self) -> None:
        #: (callback, partitions, started, ended)
        self.calls: List[Tuple[str, List[TP], float, float]] = []

    async def _slow(self, name: str, tps: List[TP], seconds: float) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await asyncio.sleep(seconds)
        self.calls.append((name, sorted(tps), started, loop.time()))

    async def on_partitions_revoked(self, revoked: List[TP]) -> None:
        await self._slow("revoked", revoked, REVOKE_SECONDS)

    async def on_partitions_assigned(self, assigned: List[TP]) -> None:
        await self._slow("assigned", assigned, ASSIGN_SECONDS)

    async def on_partitions_lost(self, lost: List[TP]) -> None:
        await self._slow("lost", lost, REVOKE_SECONDS)

    def first(self, name: str, after: float = 0.0) -> Tuple[str, List[TP], float, float]:
        return next(c for c in self.calls if c[0] == name and c[2] >= after)


def messages(caplog: Any, logger: str) -> List[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == logger and r.levelno == logging.INFO]


# --------------------------------------------------------------------------
# an eager broker group (Tansu)


@pytest.mark.slow  # two Tansu rebalances
def test_an_eager_rebalance_is_logged_and_its_pause_measured(tansu_broker: Any,
                                                             caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="kiel")
    topic = tansu_broker.create_topic(unique("visible"), 4)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 4)
    listener = SlowListener()

    async def main() -> Tuple[Any, Any, str, str]:
        await produce(bootstrap, topic, 40)
        a = await Loop(member(bootstrap, group, [topic], listener=listener)).start()
        assert a.assignment() == expected
        joined = a.consumer.metrics()
        # The first join: from JoinGroup to fetching, the listener's time included.
        assert joined.rebalances == 1 and joined.rebalance_seconds_last >= ASSIGN_SECONDS
        b = await Loop(member(bootstrap, group, [topic])).start()
        await settled([a.assignment, b.assignment], expected, "a joined by b")
        first_assigned = listener.first("assigned")
        revoked = listener.first("revoked")
        await until(lambda: any(c[0] == "assigned" and c[2] > revoked[3]
                                for c in listener.calls),
                    timeout=SETTLE, what="a's next assignment")
        assigned = listener.first("assigned", after=revoked[3])
        # The partitions a revoked had no owner at a from before its
        # listener's revoke started until after its next assigned returned.
        gap = assigned[3] - revoked[2]
        assert gap >= REVOKE_SECONDS + ASSIGN_SECONDS, (listener.calls, first_assigned)
        # The rebalance ends when the assignment is fetching, a moment after
        # the assigned listener returned: read the metric once it is counted.
        await until(lambda: a.consumer.metrics().rebalances >= 2,
                    timeout=SETTLE, what="a's second rebalance counted")
        after = a.consumer.metrics()
        ids = a.consumer.member_id, b.consumer.member_id
        await asyncio.gather(a.stop(), b.stop())
        return after, gap, ids[0], ids[1]

    after, gap, a_id, b_id = run(main(), timeout=240)
    # Failed before: it read the longest single listener call (about 1.5 s).
    assert after.rebalance_seconds_max >= gap - 0.01, (after, gap)
    assert after.rebalances >= 2 and after.rebalance_seconds >= after.rebalance_seconds_max

    lines = messages(caplog, "kiel.coordinator.membership")
    a_lines = [m for m in lines if a_id in m]
    # Failed before: an eager rebalance logged nothing at INFO.
    assert "joining as a new member (eager)" in " ".join(lines), lines
    reached = [m for m in a_lines if f"member {a_id} joined generation" in m]
    assert reached and "assignment: 4 (" in reached[0] and "as leader" in reached[0], a_lines
    assert any(f"member {a_id} revoking 4 ({topic}[0-3]) before joining (eager)" in m
               for m in a_lines), a_lines
    assert any(f"member {a_id} joining again, leaving generation" in m for m in a_lines)
    placed = [m for m in a_lines if f"member {a_id} in generation" in m]
    assert placed and "revoked 4 (" in placed[1] and "partitions had no owner here for" in placed[1]
    # One line per generation reached, one "in place" per rebalance that moved something.
    generations = [m.split("joined generation ")[1].split()[0] for m in reached]
    assert len(generations) == len(set(generations)), reached
    assert len(placed) == after.rebalances, (placed, after)
    assert any(f"member {b_id} joined generation" in m for m in lines)


# --------------------------------------------------------------------------
# a ZooKeeper group (the embedded 0.8 broker)


def test_a_zookeeper_rebalance_is_logged_and_its_pause_measured(kafka_cluster: Any,
                                                                 topic_factory: Any,
                                                                 caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="kiel")
    topic = topic_factory(partitions=4)
    group = unique("visible")
    expected = partitions(topic, 4)
    slow_a, slow_b = SlowListener(), SlowListener()

    def zk_member(listener: SlowListener) -> GroupedConsumer:
        return GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=kafka_cluster.zookeeper,
                               topics=[topic], max_wait_time=0.2, listener=listener)

    async def main() -> Tuple[Any, str, str]:
        a = await Loop(zk_member(slow_a)).start()
        assert a.assignment() == expected
        b = await Loop(zk_member(slow_b)).start()
        await settled([a.assignment, b.assignment], expected, "a joined by b")
        await until(lambda: a.consumer.metrics().rebalances == 2, timeout=SETTLE,
                    what="a's rebalance ended")
        ids = a.consumer.member_id, b.consumer.member_id
        metrics = a.consumer.metrics(), b.consumer.metrics()
        await asyncio.gather(a.stop(), b.stop())
        return metrics, ids[0], ids[1]

    (after_a, after_b), a_id, b_id = run(main(), timeout=120)
    revoked = slow_a.first("revoked")
    # Contested partitions are taken one by one, as their owner lets go.
    assigned = [c for c in slow_b.calls if c[0] == "assigned"]
    assert sorted(tp for c in assigned for tp in c[1]) == revoked[1], (slow_a.calls,
                                                                      slow_b.calls)
    assert len(revoked[1]) == 2
    # b's partitions had no owner at b until a revoked them and b's listener
    # returned: failed before (it read b's assigned listener alone, 1.5 s).
    fetching = max(c[3] for c in assigned)
    assert after_b.rebalance_seconds_max >= fetching - revoked[2] - 0.01, (after_b, revoked,
                                                                          assigned)
    assert after_b.rebalances == 1  # one rebalance, not one per listener call
    assert fetching - revoked[2] >= REVOKE_SECONDS + ASSIGN_SECONDS
    # a's: its revocation (listener and commit), nothing assigned.
    assert after_a.rebalance_seconds_last >= REVOKE_SECONDS

    lines = messages(caplog, "kiel.zookeeper.group")
    # Failed before: a ZooKeeper group logged no rebalance at INFO.
    for who in (a_id, b_id):
        assert any(f"member {who} joined (registered under ZooKeeper session 0x" in m
                   for m in lines), lines
    assert any(f"member {a_id} allocated 4 ({topic}[0-3]) among 1 members" in m for m in lines)
    assert any(f"member {a_id} allocated 2 (" in m and "among 2 members" in m
               for m in lines), lines
    moved = describe_partitions(revoked[1])
    assert any(f"member {a_id} revoking {moved} (the allocation moved them)" in m
               for m in lines), lines
    assert any(f"member {a_id}'s allocation in place: assigned 0, revoked {moved}; "
               "partitions had no owner here for" in m for m in lines), lines
    assert any(f"member {b_id}'s allocation in place: assigned {moved}, revoked 0;" in m
               for m in lines), lines


# --------------------------------------------------------------------------
# the pure parts


def test_partition_lists_are_compact_and_bounded() -> None:
    tps = [TP("t", 0), TP("t", 1), TP("t", 2), TP("t", 5), TP("u", 0), TP("t", 1)]
    assert describe_partitions(tps) == "5 (t[0-2,5], u[0])"
    assert describe_partitions([]) == "0"
    every = [TP(f"topic-{i}", p) for i in range(100) for p in range(0, 1000, 2)]
    text = describe_partitions(every)
    assert text.startswith("50000 (topic-0[0,2,4,") and text.endswith(", ... +49970 more)")
    assert len(text) < 200
    assert describe_partitions([TP("t", p) for p in range(10000)]) == "10000 (t[0-9999])"


def test_the_clock_times_from_the_stop_or_the_start_to_the_end() -> None:
    clock = RebalanceClock()
    a, b = TP("t", 0), TP("t", 1)
    # Nothing moved: not a pause.
    clock.began(10.0)
    assert clock.ended(11.0) is None
    # Owned nothing: from the start to the end.
    clock.began(20.0)
    clock.assigned([a])
    assert clock.ended(25.0) == Rebalance(5.0, (), (a,), ())
    # Stopped: from the first stop, even one before the start (a loss, a
    # revocation before JoinGroup), to the end.
    clock.stopped(29.0, [b], lost=True)
    clock.began(30.0)
    clock.stopped(31.0, [a])
    clock.assigned([a, b])
    moved = clock.ended(36.0)
    assert moved == Rebalance(7.0, (a,), (a, b), (b,))
    assert str(moved) == ("assigned 2 (t[0-1]), revoked 1 (t[0]), lost 1 (t[1]); "
                          "partitions had no owner here for 7.00s")
    # A member that left on purpose: what stopped then is not this pause.
    clock.stopped(40.0, [a])
    clock.began(100.0, fresh=True)
    clock.assigned([a])
    assert clock.ended(102.0) == Rebalance(2.0, (), (a,), ())
