"""GroupedConsumer's controls (pause/resume, seek_to, typed lag, committed(),
commit(offsets)) against real ZooKeeper and the embedded 0.8.2 brokers."""
from typing import Dict, List

import pytest

from kiel.consumer import GroupedConsumer
from kiel.exc import ConfigError, UnknownPartitionError
from kiel.structs import Record, TopicPartition
from tests.conftest import run, unique
from tests.support.grouped import grouped, produce
from tests.support.waiting import until

pytestmark = pytest.mark.zookeeper


async def take(consumer: GroupedConsumer, want: int, rounds: int = 100) -> List[Record]:
    got: List[Record] = []
    for _ in range(rounds):
        if len(got) >= want:
            break
        got.extend(await consumer.consume())
    return got


def by_partition(records: List[Record]) -> Dict[int, List[int]]:
    out: Dict[int, List[int]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r.offset)
    return out


def test_pause_resume_seek_to_lag_committed_and_commit_offsets(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)

    async def main() -> None:
        for p in (0, 1):
            await produce(kafka_cluster, topic, [b"a%d" % i for i in range(20)], partition=p)
        # revoke_timeout: close() waits that long for the records left unfinished here.
        consumer = grouped(kafka_cluster, unique("controls"), [topic], auto_finish=False,
                           commit_interval=None, revoke_timeout=1.0)
        async with consumer:
            first = by_partition(await take(consumer, 40))
            assert first == {0: list(range(20)), 1: list(range(20))}
            assert consumer.lag(topic) == {0: 0, 1: 0}
            assert consumer.lag(topic, 1) == 0

            # Back-pressure: a paused partition is neither fetched nor handed out.
            consumer.pause(topic, 0)
            assert consumer.paused() == [TopicPartition(topic, 0)]
            for p in (0, 1):
                await produce(kafka_cluster, topic, [b"b%d" % i for i in range(10)], partition=p)
            more = by_partition(await take(consumer, 10))
            assert more == {1: list(range(20, 30))}
            for _ in range(3):  # nothing from the paused partition, round after round
                assert await consumer.consume() == []
            consumer.resume(topic, 0)
            assert consumer.paused() == []
            assert by_partition(await take(consumer, 10)) == {0: list(range(20, 30))}

            # seek_to: the beginning of one partition, the end of the topic.
            await consumer.seek_to(topic, GroupedConsumer.BEGINNING, partition=0)
            again = by_partition(await take(consumer, 30))
            assert again == {0: list(range(30))}
            await consumer.seek_to(topic, GroupedConsumer.END)
            assert consumer.position(topic, 0) == 30 and consumer.position(topic, 1) == 30
            assert await consumer.consume() == []

            # commit(offsets): exactly what was asked, then read back.
            assert await consumer.committed(topic, 1) is None
            await consumer.commit({(topic, 1): 5})
            assert await consumer.committed(topic, 1) == 5
            assert consumer.finished(topic, 1) == 5
            with pytest.raises(ConfigError):
                await consumer.commit({(topic, 1): 31})  # past the position
            with pytest.raises(UnknownPartitionError):
                await consumer.commit({(topic, 7): 1})
            with pytest.raises(UnknownPartitionError):
                consumer.pause(topic, 7)

    run(main())


def test_a_pause_survives_another_member_joining(kafka_cluster, topic_factory):
    """A paused partition this member keeps through a rebalance stays paused."""
    topic = topic_factory(partitions=4)
    group = unique("paused")

    async def main() -> None:
        first = grouped(kafka_cluster, group, [topic], allocator="sticky")
        async with first:
            await first.consume()
            owned = first.assignment()
            assert len(owned) == 4
            for tp in owned:
                first.pause(tp.topic, tp.partition)
            second = grouped(kafka_cluster, group, [topic], allocator="sticky")
            async with second:
                await until(lambda: len(first.assignment()) == len(second.assignment()) == 2,
                            what="the four partitions split two and two")
                kept = first.assignment()
                assert first.paused() == kept  # revoked ones dropped their pause
                await produce(kafka_cluster, topic, [b"x"] * 8)
                got = await take(second, 1, rounds=20)
                assert got and {r.partition for r in got} <= {tp.partition for tp in
                                                              second.assignment()}
                for _ in range(3):
                    assert await first.consume() == []

    run(main())
