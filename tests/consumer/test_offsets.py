"""kiel.consumer.offsets against the embedded 0.8.2 cluster over real TCP.

ListOffsets, OffsetCommit v0 and OffsetFetch v0 are the one implementation
the consumers, the Spark data source and the admin tools share. Commits are
checked where a 0.8.2 broker keeps them (the cluster reads them back), and
the broker's error injection stands in for a coordinator that moved.
"""

import asyncio
from typing import Any, List

import pytest

from kiel.clients import Producer
from kiel.cluster import Cluster
from kiel.consumer.offsets import (
    EARLIEST,
    LATEST,
    GroupOffsets,
    fetch_committed,
    list_offsets,
    send_commit,
)
from kiel.exc import InvalidTopicError, NotCoordinatorForConsumerError, OffsetMetadataTooLargeError
from kiel.structs import TopicPartition
from tests.conftest import run, unique

pytestmark = pytest.mark.zookeeper


async def cluster_for(kafka_cluster: Any, **options: Any) -> Cluster:
    cluster = Cluster(kafka_cluster.bootstrap, **options)
    await cluster.connect()
    return cluster


async def produce(kafka_cluster: Any, topic: str, values: List[bytes], partition: int) -> None:
    async with Producer(kafka_cluster.bootstrap, linger=0.005) as producer:
        await asyncio.gather(*(producer.produce(topic, v, partition=partition) for v in values))


def test_list_offsets_resolves_edges_and_times(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    tps = [TopicPartition(topic, p) for p in range(2)]

    async def main() -> None:
        await produce(kafka_cluster, topic, [b"a"] * 7, partition=0)
        cluster = await cluster_for(kafka_cluster)
        try:
            assert await list_offsets(cluster, {tp: EARLIEST for tp in tps}) == {
                tps[0]: 0, tps[1]: 0}
            assert await list_offsets(cluster, {tp: LATEST for tp in tps}) == {
                tps[0]: 7, tps[1]: 0}
            # A time before every segment answers nothing: the earliest offset.
            assert await list_offsets(cluster, {tps[0]: 1}) == {tps[0]: 0}
            assert await list_offsets(cluster, {}) == {}
        finally:
            cluster.close()

    run(main())


def test_commit_then_fetch_and_never_committed_reads_none(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    group = unique("g")
    tps = [TopicPartition(topic, p) for p in range(3)]

    async def main() -> None:
        cluster = await cluster_for(kafka_cluster)
        try:
            assert await fetch_committed(cluster, group, tps) == {tp: None for tp in tps}
            await send_commit(cluster, group, {tps[0]: 12, tps[2]: 3}, metadata="m")
            assert await fetch_committed(cluster, group, tps) == {
                tps[0]: 12, tps[1]: None, tps[2]: 3}
        finally:
            cluster.close()

    run(main())
    assert kafka_cluster.committed_offset(group, topic, 0) == 12
    assert kafka_cluster.committed_offset(group, topic, 1) is None


def test_commits_survive_a_moved_coordinator_and_too_large_metadata(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    group = unique("g")
    tp = TopicPartition(topic, 0)

    async def main() -> int:
        cluster = await cluster_for(kafka_cluster, retry_backoff=0.01)
        offsets = GroupOffsets(cluster, group)
        try:
            kafka_cluster.inject_error("OffsetCommit", NotCoordinatorForConsumerError.errno,
                                       count=2)
            await offsets.commit({tp: 4})
            await offsets.commit({tp: 5}, metadata="x" * 5000)  # refused, then sent without it
            kafka_cluster.inject_error("OffsetFetch", NotCoordinatorForConsumerError.errno,
                                       count=1)
            return (await offsets.fetch([tp]))[tp]
        finally:
            cluster.close()

    assert run(main()) == 5
    assert kafka_cluster.committed_offset(group, topic, 0) == 5


def test_errors_that_are_not_retriable_are_raised_at_once(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    tp = TopicPartition(topic, 0)

    async def main() -> None:
        cluster = await cluster_for(kafka_cluster, retry_backoff=5.0)  # a retry would time out
        try:
            kafka_cluster.inject_error("OffsetCommit", InvalidTopicError.errno, count=1)
            with pytest.raises(InvalidTopicError) as caught:
                await send_commit(cluster, "g", {tp: 1})
            assert (caught.value.group, caught.value.topic) == ("g", topic)
            kafka_cluster.inject_error("OffsetCommit", OffsetMetadataTooLargeError.errno,
                                       count=1)
            with pytest.raises(OffsetMetadataTooLargeError):  # no metadata left to drop
                await send_commit(cluster, "g", {tp: 1})
        finally:
            cluster.close()

    run(main(), timeout=4)
