"""A group member's pause lives on the partition's one record: pausing in
``on_partitions_assigned`` (before the partition is started) holds, against
real ZooKeeper and the embedded 0.8.2 brokers."""
from typing import Any, List, Optional

import pytest

from kiel.consumer import GroupedConsumer
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.support.grouped import grouped, produce

pytestmark = pytest.mark.zookeeper


class PauseOnAssign:
    """Pauses partition 0 of every assignment, as an application holding it back would."""

    def __init__(self) -> None:
        self.consumer: Optional[GroupedConsumer] = None
        self.assigned: List[TopicPartition] = []

    def on_partitions_assigned(self, assigned: List[TopicPartition]) -> None:
        assert self.consumer is not None
        self.assigned.extend(assigned)
        for tp in assigned:
            if tp.partition == 0:
                # Owned, not started yet: the pause is kept for its start.
                self.consumer.pause(tp.topic, tp.partition)


def test_a_pause_made_in_on_partitions_assigned_holds(kafka_cluster: Any,
                                                      topic_factory: Any) -> None:
    topic = topic_factory(partitions=2)

    async def main() -> None:
        for p in (0, 1):
            await produce(kafka_cluster, topic, [b"v%d" % i for i in range(5)], partition=p)
        listener = PauseOnAssign()
        consumer = grouped(kafka_cluster, unique("pause-record"), [topic], listener=listener,
                           offset_reset="earliest")
        listener.consumer = consumer
        async with consumer:
            got: List[Any] = []
            for _ in range(30):
                got.extend(await consumer.consume())
                if len(got) >= 5:
                    break
            assert sorted({r.partition for r in got}) == [1]
            assert consumer.paused() == [TopicPartition(topic, 0)]
            assert consumer.fetching() == [TopicPartition(topic, 1)]
            for _ in range(3):  # nothing from the paused partition, round after round
                assert await consumer.consume() == []
            consumer.resume(topic, 0)
            more: List[Any] = []
            for _ in range(30):
                more.extend(await consumer.consume())
                if len(more) >= 5:
                    break
            assert [(r.partition, r.offset) for r in more] == [(0, i) for i in range(5)]

    run(main(), timeout=60)
