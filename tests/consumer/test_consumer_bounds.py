"""How long consume() waits when the network goes dark under a fetch in
flight: about ``max_wait_time``, never the request's timeout; and nothing is
lost or repeated once the network is back. Tansu behind the fault proxy (it
advertises the proxy, so every connection of the consumer goes through it)."""
import asyncio
import time
from typing import Any, List

import pytest

from kiel import GroupedConsumer, Producer
from kiel.consumer import SingleConsumer
from kiel.consumer.fetcher import ANSWER_GRACE
from tests.conftest import run, unique
from tests.support.broker_groups import produce

MAX_WAIT = 0.5
# Far above what the bound allows: a consume() that waits for the request's
# timeout is told apart from one that gives up at its own deadline.
REQUEST_TIMEOUT = 40.0
#: How long the broker's fault hook holds OffsetFetch answers.
OFFSET_LATENCY = 15.0


def zk_member(cluster: Any, group: str, topic: str) -> GroupedConsumer:
    """A ZooKeeper group member of the embedded cluster, with this file's bounds."""
    return GroupedConsumer(
        cluster.bootstrap, group, zk_hosts=cluster.zookeeper, topics=[topic],
        max_wait_time=MAX_WAIT, request_timeout=REQUEST_TIMEOUT,
        offset_reset="earliest", zk_session_timeout=6.0, auto_finish=True)


@pytest.mark.slow
def test_consume_returns_at_its_deadline_while_a_fetch_is_stuck_in_the_dark(
    proxied_tansu: Any,
) -> None:
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("dark"), 1)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        sent = await produce(broker.bootstrap, topic, 10, "a")
        async with SingleConsumer(broker.bootstrap, max_wait_time=MAX_WAIT,
                                  request_timeout=REQUEST_TIMEOUT) as consumer:
            got: List[bytes] = []
            while len(got) < 10:
                got += [r.value for r in await consumer.consume(
                    topic, start=SingleConsumer.BEGINNING)]
            # A fetch in flight (held by the broker, nothing new) or the next
            # one sent: either is stuck in the dark.
            await loop.run_in_executor(None, proxy.blackout)
            for _ in range(3):
                started = time.monotonic()
                assert await consumer.consume(topic) == []
                waited = time.monotonic() - started
                # Bounded by its own deadline (max_wait_time and the grace
                # for the answer's way back), with room for a busy machine;
                # the request's timeout is far beyond.
                assert waited < MAX_WAIT + ANSWER_GRACE + 3.0, waited
            await loop.run_in_executor(None, proxy.restore)
            sent += await produce(broker.bootstrap, topic, 5, "b")
            deadline = time.monotonic() + 60
            while len(got) < 15 and time.monotonic() < deadline:
                got += [r.value for r in await consumer.consume(topic)]
            assert got == sent  # nothing lost, nothing twice, in order

    run(main(), timeout=120)


@pytest.mark.slow
@pytest.mark.zookeeper
def test_consume_returns_at_its_deadline_while_a_partitions_start_is_slow(
    kafka_cluster: Any, topic_factory: Any,
) -> None:
    # A newly owned partition starts from its committed offset: an
    # OffsetFetch that the broker answers only after OFFSET_LATENCY. consume()
    # must not wait for it past its own deadline; the start goes on, and the
    # records come once it is done.
    topic = topic_factory(partitions=1)

    async def main() -> None:
        async with Producer(kafka_cluster.bootstrap) as producer:
            sent = [b"r%d" % i for i in range(5)]
            await asyncio.gather(*(producer.produce(topic, v) for v in sent))
        group = unique("slow-start")

        first, second = (zk_member(kafka_cluster, group, topic)
                         for _ in range(2))
        await first.connect()
        await second.connect()
        # One partition: one member owns it, and the other waits for it.
        if second.assignment():
            first, second = second, first
        try:
            assert [len(first.assignment()), len(second.assignment())] == [1, 0]
            kafka_cluster.set_latency(OFFSET_LATENCY, api="OffsetFetch")
            await first.close()  # the partition moves to the other member
            got: List[bytes] = []
            deadline = time.monotonic() + OFFSET_LATENCY + 30
            calls = 0
            while len(got) < 5 and time.monotonic() < deadline:
                started = time.monotonic()
                records = await second.consume()
                waited = time.monotonic() - started
                calls += 1
                assert waited < MAX_WAIT + ANSWER_GRACE + 3.0, (calls, waited, len(records))
                got += [r.value for r in records]
            assert got == sent
            assert calls > 2  # it did come back empty while the start was slow
        finally:
            kafka_cluster.set_latency(0, api="OffsetFetch")
            await second.close()

    run(main(), timeout=120)


@pytest.mark.slow
@pytest.mark.zookeeper
def test_partitions_kept_flow_while_a_new_ones_start_is_slow(
    kafka_cluster: Any, topic_factory: Any,
) -> None:
    # The member that stays keeps its partition through the hand-off; the
    # one it takes over starts slowly (OffsetFetch answered after
    # OFFSET_LATENCY). Records of the kept partition must go on coming
    # meanwhile, not wait for the other's start.
    topic = topic_factory(partitions=2)

    async def main() -> None:
        group = unique("kept-flow")

        stays, leaves = (zk_member(kafka_cluster, group, topic)
                         for _ in range(2))
        await stays.connect()
        await leaves.connect()
        try:
            assert len(stays.assignment()) == len(leaves.assignment()) == 1
            kept = stays.assignment()[0].partition
            moved = leaves.assignment()[0].partition
            kafka_cluster.set_latency(OFFSET_LATENCY, api="OffsetFetch")
            await leaves.close()
            async with Producer(kafka_cluster.bootstrap) as producer:
                await producer.produce(topic, b"moved", partition=moved)
                lost_to_start = time.monotonic() + OFFSET_LATENCY - 3.0
                got: List[Any] = []
                i = 0
                while time.monotonic() < lost_to_start:
                    await producer.produce(topic, b"kept-%d" % i, partition=kept)
                    i += 1
                    got += [(r.partition, r.value) for r in await stays.consume()]
                early = [v for p, v in got if p == kept]
                # Kept records arrived while the moved partition was starting.
                assert early, got
                assert (moved, b"moved") not in got  # its start was indeed still slow
                deadline = time.monotonic() + 30
                while (moved, b"moved") not in got and time.monotonic() < deadline:
                    got += [(r.partition, r.value) for r in await stays.consume()]
                assert [v for p, v in got if p == kept] == [b"kept-%d" % n for n in range(i)]
                assert [v for p, v in got if p == moved] == [b"moved"]
        finally:
            kafka_cluster.set_latency(0, api="OffsetFetch")
            await stays.close()

    run(main(), timeout=120)
