"""Consumers ride out unreachable brokers (issue 35).

The documented consume loops (``docs/guides/grouped_consumer.rst``,
``docs/guides/single_consumer.rst``: no try/except) go on through a broker
outage: a 20 s blackout of the network (the fault proxy in front of Tansu),
and a broker restart (the embedded 0.8.2 broker stopped and started on its
port, its log kept; Tansu's port refusing for a while: Tansu's storage is in
memory, so its own restart would forget the log, see tests/support/chaos). Each
resumes soon after the broker is back, nothing acknowledged is lost, and the
health rule says unhealthy during the outage and healthy after it.

Before issue 35 the loops died 2-3 s into a refusing outage with
KielConnectionError or NoBrokersError (the member then heartbeated on,
owning partitions nobody fetched), and there was no health rule.
"""

import asyncio
import logging
import time
from typing import Any, Callable, List, Optional, Set, Tuple

import pytest

from kiel import Producer
from kiel.consumer import GroupedConsumer, SingleConsumer
from kiel.consumer.health import CLIENT, Health, condition
from kiel.exc import (
    ConnectionClosedError,
    KielConnectionError,
    KielError,
    NoBrokersError,
    TopicAuthorizationFailedError,
)
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.support.waiting import until

#: How soon after the broker is back the loop must hand out records again:
#: one retry backoff (max_backoff, 5 s) plus generous slack for a rejoin
#: (Tansu's rebalances take seconds) on a loaded machine.
RESUME_BOUND = 30.0


# --------------------------------------------------------------------------
# the policy and the conditions (pure)


def test_retriable_failures_are_conditions_logged_once_and_others_are_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    health = Health("consumer 'x'")
    tp = TopicPartition("t", 0)
    with caplog.at_level(logging.INFO, logger="kiel.consumer"):
        for _ in range(5):
            assert health.absorb(ConnectionClosedError("reset"), tp)
            assert health.absorb(KielConnectionError("refused"), tp)  # the same condition
        assert health.absorb(NoBrokersError("none"))
        assert not health.absorb(TopicAuthorizationFailedError())
        assert not health.absorb(ValueError("not kiel's"))
        assert health.outage == "KielConnectionError, NoBrokersError"
        assert health.started == {"KielConnectionError": 1, "NoBrokersError": 1}
        health.answered(tp)  # the partition answers: both clear
        assert health.outage is None and health.outage_seconds() == 0.0
        health.answered(tp)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(warnings) == 2 and "retrying with backoff" in warnings[0].getMessage()
    assert len(infos) == 2 and all("cleared after" in r.getMessage() for r in infos)
    assert condition(ConnectionClosedError()) == "KielConnectionError"


def test_a_condition_held_by_partitions_no_longer_assigned_clears() -> None:
    health = Health()
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    health.failed(KielConnectionError(), a)
    health.failed(KielConnectionError(), b)
    health.keep_only({a})
    assert health.outage == "KielConnectionError"
    health.keep_only(set())
    assert health.outage is None
    health.failed(NoBrokersError(), CLIENT)
    health.keep_only(set())  # the client's own steps are not partitions
    assert health.outage == "NoBrokersError"


def test_the_stall_clock_starts_when_there_is_something_to_fetch() -> None:
    health = Health()
    health.wanting(0, 100.0)
    assert health.stalled_for(200.0) == 0.0
    health.wanting(2, 200.0)
    assert health.stalled_for(205.0) == 5.0
    health.wanting(2, 300.0)  # still wanting: the clock goes on
    assert health.stalled_for(300.0) == 100.0


# --------------------------------------------------------------------------
# Tansu behind the fault proxy


class Producing:
    """Numbered records at a steady pace; remembers which the brokers acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer(bootstrap, linger=0.005)
        self.topic = topic
        self.acked: Set[bytes] = set()
        self.failed = 0
        self._n = 0
        self._pending: List[asyncio.Future[Any]] = []
        self._task: Optional[asyncio.Task[None]] = None

    async def start(self) -> "Producing":
        await self.producer.connect()
        self._task = asyncio.ensure_future(self._run())
        return self

    async def _run(self) -> None:
        while True:
            value = b"r%d" % self._n
            self._n += 1
            try:
                future = self.producer.produce(self.topic, value)
            except KielError:
                self.failed += 1  # refused at once (buffer full): not acknowledged
            else:
                future.add_done_callback(lambda f, v=value: self._done(f, v))
                self._pending.append(future)
            await asyncio.sleep(0.1)

    def _done(self, future: "asyncio.Future[Any]", value: bytes) -> None:
        if future.cancelled() or future.exception() is not None:
            self.failed += 1  # said to the application: not lost silently
        else:
            self.acked.add(value)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.wait_for(asyncio.gather(*self._pending, return_exceptions=True), 90)
        await self.producer.close()


class Sampler:
    """Samples a consumer's health rule every half second."""

    def __init__(self, consumer: Callable[[], Any], stall: Optional[float] = None) -> None:
        self.consumer = consumer
        self.stall = stall
        self.samples: List[Tuple[float, bool, Optional[str]]] = []
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            consumer = self.consumer()
            if consumer is not None:
                reason = consumer.unhealthy(self.stall)
                self.samples.append((time.monotonic(), reason is None, reason))
            await asyncio.sleep(0.5)

    def unhealthy_between(self, start: float, end: float) -> List[str]:
        return [r for t, ok, r in self.samples if start <= t <= end and not ok and r]

    def healthy_after(self, start: float) -> bool:
        return any(ok for t, ok, _r in self.samples if t >= start)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


async def work_on_current_brokers(bootstrap: str, handle: Callable[[Any], None],
                                  running: Callable[[], bool], topic: str, group: str,
                                  consumers: List[GroupedConsumer]) -> None:
    """The loop of ``docs/guides/grouped_consumer.rst`` ("Groups the brokers
    coordinate"), as written there, with the test's topic and group, and one
    line that lets the test look at the consumer."""
    consumer = GroupedConsumer(
        bootstrap,                   # no zk_hosts: the brokers coordinate the group
        group,
        topics=[topic],
        allocator="range",           # or "roundrobin", ["range", "roundrobin"] (default),
                                     # "sticky", "weighted", a callable
        session_timeout=10.0,        # seconds, like every kiel setting
        heartbeat_interval=3.0,      # heartbeats run on their own task
        max_poll_interval=300.0,     # the longest gap between two consume() calls
    )
    await consumer.connect()         # returns once the first assignment is fetching
    consumers.append(consumer)       # (the test's line)
    try:
        while running():
            for record in await consumer.consume():
                handle(record)
    finally:
        await consumer.close()       # revoke (listener + commit), then LeaveGroup


async def _grouped_through(proxied_tansu: Any, outage: Callable[[Any], Any],
                           dark: float) -> None:
    """The guide's grouped loop and a producer through ``outage`` (which
    returns when the broker is back); checks the issue's promises."""
    broker, proxy = proxied_tansu
    topic, group = unique("outage"), unique("g")
    broker.create_topic(topic, 4)
    loop = asyncio.get_running_loop()
    seen: List[Tuple[float, bytes]] = []
    consumers: List[GroupedConsumer] = []
    stop = False
    work = asyncio.ensure_future(work_on_current_brokers(
        broker.bootstrap, lambda r: seen.append((time.monotonic(), r.value)),
        lambda: not stop, topic, group, consumers))
    producing = await Producing(broker.bootstrap, topic).start()
    await until(lambda: consumers and len(seen) >= 10 or work.done(), timeout=60,
                what="consuming before the outage")
    sampler = Sampler(lambda: consumers[0] if consumers else None)
    (consumer,) = consumers
    assert consumer.healthy(), consumer.unhealthy()
    began = time.monotonic()
    await outage(loop)
    back = time.monotonic()
    assert not work.done(), work.exception() if work.done() else None
    # It resumes soon after the broker's return.
    await until(lambda: any(t > back for t, _v in seen) or work.done(),
                timeout=RESUME_BOUND, what="records handed out after the broker's return")
    assert not work.done(), work.exception()
    resumed = min(t for t, _v in seen if t > back) - back
    await producing.stop()
    # Nothing acknowledged is lost.
    await until(lambda: producing.acked <= {v for _t, v in seen} or work.done(),
                timeout=60, what="every acknowledged record consumed")
    await until(lambda: sampler.healthy_after(time.monotonic() - 0.1), timeout=30,
                what="healthy again")
    during = sampler.unhealthy_between(began, back + 1.0)
    metrics = consumer.metrics()
    stop = True
    await asyncio.wait_for(work, 60)
    await sampler.stop()
    assert during, f"never unhealthy during a {dark} s outage: {sampler.samples}"
    assert metrics.healthy and metrics.outage is None, metrics
    print(f"resumed {resumed:.1f} s after the broker's return; unhealthy samples: "
          f"{len(during)}, first: {during[0]!r}; outages: {metrics.outages}; "
          f"acked {len(producing.acked)}, failed produces {producing.failed}")


@pytest.mark.slow
def test_the_guides_grouped_loop_rides_out_a_20_s_blackout(proxied_tansu: Any) -> None:
    _broker, proxy = proxied_tansu

    async def blackout(loop: Any) -> None:
        await loop.run_in_executor(None, proxy.blackout)
        await asyncio.sleep(20.0)
        await loop.run_in_executor(None, proxy.restore)

    run(_grouped_through(proxied_tansu, blackout, 20.0), timeout=240)


@pytest.mark.slow
def test_the_guides_grouped_loop_rides_out_a_broker_that_goes_away(proxied_tansu: Any) -> None:
    # Connections reset, then refused for 12 s, then accepted again: what a
    # restart of a broker with durable storage looks like from the client
    # (Tansu's in-memory storage would forget the log if it restarted itself).
    _broker, proxy = proxied_tansu

    async def away(loop: Any) -> None:
        await loop.run_in_executor(None, proxy.stop)
        await asyncio.sleep(12.0)
        await loop.run_in_executor(None, proxy.start)

    run(_grouped_through(proxied_tansu, away, 12.0), timeout=240)


# --------------------------------------------------------------------------
# the single consumer, through a restart of the embedded 0.8.2 broker


def test_the_guides_single_loop_rides_out_a_broker_restart(kafka_cluster_factory: Any) -> None:
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False, topics={"events": 3})

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with Producer(cluster.bootstrap) as producer:
            await asyncio.gather(*(producer.produce("events", b"%d" % n) for n in range(50)))
        consumer = SingleConsumer(cluster.bootstrap)
        records: List[Any] = []
        times: List[float] = []

        async def the_guides_loop() -> None:
            # As in docs/guides/single_consumer.rst ("A first example").
            async with consumer:  # connect(); close() at the end
                while len(records) < 100:
                    records.extend(await consumer.consume("events",
                                                          start=SingleConsumer.BEGINNING))
                    times.append(time.monotonic())

        work = asyncio.ensure_future(the_guides_loop())
        await until(lambda: len(records) >= 50 or work.done(), timeout=30, what="the first 50")
        began = time.monotonic()
        await loop.run_in_executor(None, cluster.stop_broker, 1)
        await asyncio.sleep(8.0)
        assert not work.done(), work.exception()
        reason = consumer.unhealthy(stall=3.0)
        assert reason is not None and consumer.metrics().outage is not None, reason
        # Each call returned within its wait meanwhile (1 s, plus a second's grace).
        gaps = [b - a for a, b in zip(times, times[1:]) if a >= began]
        assert gaps and max(gaps) < 5.0, gaps
        await loop.run_in_executor(None, cluster.start_broker, 1)
        back = time.monotonic()
        async with Producer(cluster.bootstrap) as producer:
            await asyncio.gather(*(producer.produce("events", b"%d" % n)
                                   for n in range(50, 100)))
        await asyncio.wait_for(work, RESUME_BOUND)
        assert sorted(int(r.value) for r in records) == list(range(100))
        assert consumer.closed
        print(f"the loop ended {time.monotonic() - back:.1f} s after the broker's return")

    run(main(), timeout=120)


def test_a_stream_loop_rides_out_a_broker_restart_and_is_healthy_after(
    kafka_cluster_factory: Any,
) -> None:
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False, topics={"tail": 2})

    async def main() -> None:
        loop = asyncio.get_running_loop()
        consumer = SingleConsumer(cluster.bootstrap, max_wait_time=0.2)
        got: List[bytes] = []

        async def tail() -> None:
            async with consumer:
                async for record in consumer.stream("tail", start=SingleConsumer.BEGINNING):
                    got.append(record.value)

        work = asyncio.ensure_future(tail())
        async with Producer(cluster.bootstrap) as producer:
            await asyncio.gather(*(producer.produce("tail", b"a%d" % n) for n in range(20)))
        await until(lambda: len(got) == 20 or work.done(), timeout=30, what="the first 20")
        assert consumer.healthy(stall=3.0), consumer.unhealthy(stall=3.0)
        await loop.run_in_executor(None, cluster.stop_broker, 1)
        await until(lambda: not consumer.healthy(stall=3.0) or work.done(), timeout=30,
                    what="unhealthy while the broker is away")
        assert not work.done(), work.exception()
        await loop.run_in_executor(None, cluster.start_broker, 1)
        async with Producer(cluster.bootstrap) as producer:
            await asyncio.gather(*(producer.produce("tail", b"b%d" % n) for n in range(20)))
        await until(lambda: len(got) == 40 or work.done(), timeout=RESUME_BOUND,
                    what="the 20 after the restart")
        assert not work.done(), work.exception()
        await until(lambda: consumer.healthy(stall=3.0), timeout=10, what="healthy again")
        metrics = consumer.metrics()
        assert metrics.healthy and metrics.outage is None and metrics.outages
        assert metrics.seconds_since_fetch is not None and metrics.fetch_partitions == 2
        await consumer.close()
        await asyncio.wait_for(work, 10)
        assert sorted(got) == sorted([b"a%d" % n for n in range(20)]
                                     + [b"b%d" % n for n in range(20)])

    run(main(), timeout=120)


# --------------------------------------------------------------------------
# what is ridden out, what is raised


def test_a_leader_moving_is_ridden_out_and_an_authorization_failure_is_raised(
    kafka_cluster_factory: Any,
) -> None:
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False, topics={"acl": 1})

    async def main() -> None:
        async with Producer(cluster.bootstrap) as producer:
            await asyncio.gather(*(producer.produce("acl", b"%d" % n) for n in range(10)))
        async with SingleConsumer(cluster.bootstrap, max_wait_time=0.2,
                                  retries=1, retry_backoff=0.05) as consumer:
            # NotLeaderForPartition, more times than the client's retries:
            # retried for as long as it lasts (before: raised past ``retries``).
            cluster.inject_error("Fetch", 6, count=4)
            got: List[Any] = []
            for _ in range(100):
                got += await consumer.consume("acl", start=SingleConsumer.BEGINNING)
                if len(got) == 10:
                    break
            assert [int(r.value) for r in got] == list(range(10))
            assert consumer.metrics().outages == {"NotLeaderForPartitionError": 1}
            # What the application must act on is raised (by the next call
            # whose fetch it answers: one long poll may be in flight).
            cluster.inject_error("Fetch", 29, count=1)  # TopicAuthorizationFailed
            with pytest.raises(TopicAuthorizationFailedError):
                for _ in range(50):
                    await consumer.consume("acl")

    run(main(), timeout=60)


@pytest.mark.slow
def test_a_member_nobody_polls_leaves_after_max_poll_interval_outage_or_not(
    proxied_tansu: Any,
) -> None:
    # The membership judges max_poll_interval by the application's calls
    # only: a member whose loop stopped (here: cancelled) and that rejoins
    # after an outage does not keep partitions nobody fetches for longer.
    broker, proxy = proxied_tansu
    topic, group = unique("nopoll"), unique("g")
    broker.create_topic(topic, 2)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        consumer = GroupedConsumer(broker.bootstrap, group, topics=[topic], session_timeout=6.0,
                                   heartbeat_interval=1.0, max_poll_interval=15.0,
                                   max_wait_time=0.2)
        await consumer.connect()

        async def consuming() -> None:
            while True:
                await consumer.consume()

        work = asyncio.ensure_future(consuming())
        await asyncio.sleep(1.0)
        work.cancel()  # the application stops asking
        await asyncio.gather(work, return_exceptions=True)
        last_poll = time.monotonic()
        await loop.run_in_executor(None, proxy.stop)
        await asyncio.sleep(8.0)  # past the session: the partitions are lost
        await loop.run_in_executor(None, proxy.start)
        await until(lambda: consumer.metrics().group_state == "LEFT", timeout=60,
                    what="the member left for max_poll_interval", interval=0.1)
        left = time.monotonic() - last_poll
        assert not consumer.assignment()
        assert left < 15.0 + 15.0, left  # max_poll_interval plus generous slack
        await until(lambda: not consumer.healthy(stall=3.0), timeout=30,
                    what="no longer healthy")
        await consumer.close()
        print(f"left {left:.1f} s after the last consume() (max_poll_interval 15 s)")

    run(main(), timeout=120)


def test_a_member_with_nothing_to_fetch_is_healthy_once_its_coordinator_answers(
    tansu_broker: Any,
) -> None:
    # A member that met an outage while it owned partitions (a background
    # commit failed: a condition of the client's own) and came back owning
    # none never fetches again: the coordinator's answers end that condition,
    # or the member would stay unhealthy for ever.
    topic, group = tansu_broker.create_topic(unique("one"), 1), unique("g")

    async def main() -> None:
        options = dict(topics=[topic], session_timeout=6.0, heartbeat_interval=1.0,
                       max_wait_time=0.2)
        a = GroupedConsumer(tansu_broker.bootstrap, group, **options)
        b = GroupedConsumer(tansu_broker.bootstrap, group, **options)
        await a.connect()
        await b.connect()
        try:
            await until(lambda: len(a.assignment()) + len(b.assignment()) == 1
                        and a.metrics().group_state == b.metrics().group_state == "STABLE",
                        timeout=60, what="one member owns the partition")
            idle = a if not a.assignment() else b
            idle.health.failed(NoBrokersError("a commit met the outage"))
            assert idle.health.outage == "NoBrokersError"
            # Heartbeats answered since, and the condition older than stall.
            await asyncio.sleep(3.0)
            assert idle.healthy(stall=2.0), idle.unhealthy(stall=2.0)
            assert idle.metrics().outage is None
        finally:
            await asyncio.gather(a.close(), b.close())

    run(main(), timeout=120)
