"""The broker membership's timings, judged by Tansu (issue 32's three faults).

* A request the coordinator holds (a follower's SyncGroup until the leader
  syncs) keeps the member alive: its session restarts when it is answered,
  not when it was sent.
* A member that leaves for ``max_poll_interval`` does not wait for the
  batch that made it late: what the application still holds is lost.
* ``max_poll_interval`` is judged whatever the member is doing, a
  rebalance included.
"""
import asyncio
from typing import Any, List, Optional, Set, Tuple

import pytest

from kiel.consumer import GroupedConsumer
from kiel.coordinator.requests import GroupRequests
from kiel.exc import PollIntervalExceededError
from kiel.structs import TopicPartition as TP
from tests.conftest import run, unique
from tests.support.broker_groups import SETTLE, Loop, Recorder, member, partitions, produce, settled
from tests.support.waiting import until


class SlowRevoke(Recorder):
    """A listener whose ``on_partitions_revoked`` takes ``seconds``."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def on_partitions_revoked(self, revoked: List[TP]) -> None:
        await asyncio.sleep(self.seconds)
        await super().on_partitions_revoked(revoked)


class TimedSync:
    """Notes how long each SyncGroup waited for its answer, by member id."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.waits: List[Tuple[str, float]] = []
        sync = GroupRequests.sync

        async def timed(requests: GroupRequests, member_id: str, *args: Any) -> Any:
            loop = asyncio.get_running_loop()
            sent = loop.time()
            try:
                return await sync(requests, member_id, *args)
            finally:
                self.waits.append((member_id, loop.time() - sent))

        monkeypatch.setattr(GroupRequests, "sync", timed)

    def longest(self, member_id: Optional[str]) -> float:
        return max(w for m, w in self.waits if m == member_id)


@pytest.mark.slow
def test_a_held_sync_group_does_not_count_against_the_session(
        tansu_broker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # The leader's on_partitions_revoked takes 4 s, so its SyncGroup comes
    # that much after the rebalance began; Tansu holds the new follower's
    # SyncGroup meanwhile and answers it with the assignment 5.0 s after it
    # was sent (of a session_timeout of 6 s; the first heartbeat comes one
    # interval after connect() returns). The
    # coordinator counts the follower in all along (a held request keeps a
    # member alive): it must not call its fresh partitions lost.
    topic = tansu_broker.create_topic(unique("heldsync"), 4)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 4)

    timed = TimedSync(monkeypatch)

    async def main() -> None:
        values = await produce(bootstrap, topic, 200)
        leader = await Loop(member(bootstrap, group, [topic], listener=SlowRevoke(4.0))).start()
        await until(lambda: len(leader.values) == 200, timeout=SETTLE, what="the leader read all")
        await produce(bootstrap, topic, 200, prefix="n")
        listener = Recorder()
        consumer = member(bootstrap, group, [topic], listener=listener)
        follower = await Loop(consumer).start()
        assert follower.assignment() and not consumer.metrics().leader
        # The case this test is about: the SyncGroup was held most of the
        # session (Tansu 0.6.0 holds one 5.0 s at most), and the first
        # heartbeat comes one interval after connect() returns.
        assert timed.longest(consumer.member_id) > 4.5, timed.waits
        await settled([leader.assignment, follower.assignment], expected, "two members")
        membership: Any = consumer.membership
        rebalances = membership.rebalances
        await asyncio.sleep(4.0)  # several heartbeats and session checks
        assert [e for e in listener.events if e[0] == "lost"] == [], listener.events
        assert membership.rebalances == rebalances
        await until(lambda: len(leader.values) + len(follower.values) >= 400, timeout=SETTLE,
                    what="every record read")
        every = leader.values + follower.values
        assert sorted(every) == sorted(values + [f"n{i}".encode() for i in range(200)])
        await asyncio.gather(leader.stop(), follower.stop())

    run(main(), timeout=240)


class Stuck:
    """An application that takes one batch and never finishes it (never asks again)."""

    def __init__(self, consumer: GroupedConsumer) -> None:
        self.consumer = consumer
        self.batch: List[Any] = []
        self.asked: Optional[float] = None

    async def take_one_batch(self) -> Set[TP]:
        while not self.batch:
            self.batch = await self.consumer.consume()
            self.asked = asyncio.get_running_loop().time()
        return {TP(r.topic, r.partition) for r in self.batch}


def _left(consumer: GroupedConsumer) -> bool:
    return consumer.metrics().group_state == "LEFT" and not consumer.assignment()


@pytest.mark.slow
def test_leaving_for_max_poll_interval_does_not_wait_for_the_stuck_batch(
        tansu_broker: Any) -> None:
    # A hung handler: the member must leave after max_poll_interval, not
    # after revoke_timeout (which waits for that very batch), and what the
    # application still holds is lost (no commit), not revoked.
    topic = tansu_broker.create_topic(unique("hung"), 4)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 4)

    async def main() -> None:
        # The other member joins first and leads (Tansu keeps a leader that left).
        other = await Loop(member(bootstrap, group, [topic])).start()
        listener = Recorder()
        consumer = member(bootstrap, group, [topic], listener=listener, max_poll_interval=4.0,
                          revoke_timeout=60.0)
        await consumer.connect()
        await settled([other.assignment, lambda: set(consumer.assignment())], expected,
                      "two members")
        await produce(bootstrap, topic, 200, prefix="n")  # for both members
        stuck = Stuck(consumer)
        held = await stuck.take_one_batch()
        assert stuck.asked is not None
        await until(lambda: _left(consumer), timeout=4.0 + 4.0,
                    what="the stuck member left within max_poll_interval and a few ticks")
        assert asyncio.get_running_loop().time() - stuck.asked < 4.0 + 4.0
        # Promptly: one Tansu rebalance (5-8 s), not revoke_timeout.
        await until(lambda: other.assignment() == expected, timeout=30.0,
                    what="the other member has everything")
        lost = {tp for what, tps in listener.events if what == "lost" for tp in tps}
        revoked = {tp for what, tps in listener.events if what == "revoked" for tp in tps}
        assert held <= lost and not held & revoked, (held, listener.events)
        with pytest.raises(PollIntervalExceededError, match="max_poll_interval"):
            await consumer.consume()
        await asyncio.gather(other.stop(), consumer.close())

    run(main(), timeout=240)


@pytest.mark.slow
@pytest.mark.parametrize("allocator", ["range", "cooperative-sticky"])
def test_max_poll_interval_is_judged_during_a_rebalance(tansu_broker: Any, allocator: str) -> None:
    # The application is stuck, holding records of every partition it owns,
    # when a new member starts a rebalance that takes some of them: the
    # revocation waits for the batch (revoke_timeout 60 s), and a
    # cooperative member rejoins first, but past max_poll_interval the
    # member leaves, and the application hears so.
    topic = tansu_broker.create_topic(unique("stuckrebalance"), 4)
    elsewhere = tansu_broker.create_topic(unique("elsewhere"), 1)
    group = unique("g")
    bootstrap = tansu_broker.bootstrap
    expected = partitions(topic, 4)
    interval = 8.0

    async def main() -> None:
        # The leader reads another topic (Tansu keeps the first member as
        # leader), so the stuck member owns every partition of this one and
        # the next member necessarily takes some from it.
        other = await Loop(member(bootstrap, group, [elsewhere], allocator=allocator)).start()
        consumer = member(bootstrap, group, [topic], max_poll_interval=interval,
                          revoke_timeout=60.0, allocator=allocator, auto_finish=False)
        await consumer.connect()
        assert set(consumer.assignment()) == expected
        await produce(bootstrap, topic, 200)
        held: Set[TP] = set()
        loop = asyncio.get_running_loop()
        asked = loop.time()
        while held != expected:  # auto_finish=False: every record taken stays held
            held |= {TP(r.topic, r.partition) for r in await consumer.consume()}
            asked = loop.time()
        # Started aside: the test does not depend on when its connect() returns.
        joining = asyncio.ensure_future(
            Loop(member(bootstrap, group, [topic], allocator=allocator)).start())
        await until(lambda: consumer.metrics().group_state != "STABLE", timeout=SETTLE,
                    what="the stuck member in the rebalance")
        await until(lambda: _left(consumer), timeout=interval + 6.0,
                    what="the stuck member left within max_poll_interval and a few ticks")
        assert loop.time() - asked < interval + 6.0
        third = await joining
        await settled([third.assignment], expected, "the new member has the topic")
        with pytest.raises(PollIntervalExceededError, match="max_poll_interval"):
            await consumer.consume()
        await asyncio.gather(other.stop(), third.stop(), consumer.close())

    run(main(), timeout=240)
