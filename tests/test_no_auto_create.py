"""No accidental topics (issue 35, item 5): a consumer, ``kiel consume`` and
a producer told so never create the topic they name; the producer keeps
the broker's auto-creation by default.

Tansu auto-creates a topic named in a Metadata request before v4 and in a
v4+ request that allows it, and honours ``allow_auto_topic_creation=false``
(checked by ``test_tansu_honours_the_flag`` first, so the other Tansu tests
judge kiel, not Tansu). Whether a topic exists is asked of a peer client
(confluent-kafka's admin listing). The embedded 0.8.2 broker (Metadata v0
only) auto-creates by default, as Kafka 0.8 did: there a consumer asks for
every topic rather than naming one it has not seen, and the broker's own
snapshot says what exists.
"""
import subprocess
import sys
from typing import Any, List

import confluent_kafka
import confluent_kafka.admin
import pytest

from kiel.clients import Producer, SingleConsumer
from kiel.cluster import Cluster, _metadata_request
from kiel.connection import Connection
from kiel.exc import ConfigError, UnknownTopicError
from kiel.protocol.metadata import (
    DeferredMetadataRequest,
    DeferredMetadataRequestV1,
    DeferredMetadataRequestV4,
    MetadataRequestV4,
)
from kiel.protocol.versions import LEGACY, for_broker_version
from tests.conftest import run, unique


def peer_topics(bootstrap: str) -> List[str]:
    """Every topic, as confluent-kafka's admin client lists them (a request
    for all topics: it names none, so creates none)."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    return sorted(admin.list_topics(timeout=20).topics)


def kiel_cli(*args: str) -> Any:
    return subprocess.run([sys.executable, "-m", "kiel.cli", *args], capture_output=True,
                          timeout=120)


# --------------------------------------------------------------------------
# which request, by version (pure)


def test_the_request_by_version_and_flag() -> None:
    v4 = for_broker_version((2, 8))
    assert _metadata_request(v4, ["a"], auto_create=False) == DeferredMetadataRequestV4(
        ["a"], False)
    assert _metadata_request(v4, ["a"]) == DeferredMetadataRequestV4(["a"], True)
    assert _metadata_request(v4, [], auto_create=False) == DeferredMetadataRequestV4(
        None, False)
    v1 = for_broker_version((0, 10))
    # Before v4: naming an unknown topic would create it; every topic is asked instead.
    assert _metadata_request(v1, ["a"], auto_create=False) == DeferredMetadataRequestV1(None)
    assert _metadata_request(v1, ["a"], auto_create=False,
                             existing=frozenset({"a"})) == DeferredMetadataRequestV1(["a"])
    assert _metadata_request(v1, ["a"]) == DeferredMetadataRequestV1(["a"])
    assert _metadata_request(LEGACY, ["a", "b"], auto_create=False,
                             existing=frozenset({"a"})) == DeferredMetadataRequest([])
    assert _metadata_request(LEGACY, ["a"]) == DeferredMetadataRequest(["a"])


@pytest.mark.parametrize("value", [None, 0, "no"])
def test_the_option_is_a_flag(value: Any) -> None:
    with pytest.raises(ConfigError, match="allow_auto_create_topics"):
        Producer("localhost:1", allow_auto_create_topics=value)
    with pytest.raises(ConfigError, match="allow_auto_create_topics"):
        Cluster("localhost:1", allow_auto_create_topics=value)


def test_only_the_producer_lets_the_broker_create() -> None:
    assert Producer("localhost:1").cluster.auto_create_topics
    assert not Producer("localhost:1", allow_auto_create_topics=False).cluster.auto_create_topics
    assert not SingleConsumer("localhost:1").cluster.auto_create_topics


# --------------------------------------------------------------------------
# Tansu


def test_tansu_honours_the_flag(tansu_broker: Any) -> None:
    """What the other Tansu tests rely on: Tansu creates a topic named with
    the flag on, and not with it off (UnknownTopicOrPartition instead)."""
    host, port = tansu_broker.address.rsplit(":", 1)
    off, on = unique("flag-off"), unique("flag-on")

    async def main() -> Any:
        conn = Connection(host, int(port))
        try:
            await conn.connect()
            assert conn.versions is not None and conn.versions.of(3) >= 4
            refused = await conn.send(MetadataRequestV4([off], False))
            created = await conn.send(MetadataRequestV4([on], True))
            return refused, created
        finally:
            conn.close()

    refused, created = run(main())
    assert [(t.topic, t.error_code, t.partitions) for t in refused.topics] == [(off, 3, [])]
    assert created.topics[0].error_code == 0 and created.topics[0].partitions
    listed = peer_topics(tansu_broker.bootstrap)
    assert on in listed and off not in listed


def test_a_single_consumer_never_creates_a_topic_on_tansu(tansu_broker: Any) -> None:
    missing = unique("nosuch")

    async def main() -> None:
        async with SingleConsumer(tansu_broker.bootstrap, retries=1) as consumer:
            with pytest.raises(UnknownTopicError) as info:
                await consumer.consume(missing)
            assert info.value.topic == missing

    run(main())
    assert missing not in peer_topics(tansu_broker.bootstrap)


def test_a_grouped_consumer_never_creates_a_topic_on_tansu(tansu_broker: Any) -> None:
    """A broker group subscribed to a topic that exists and one that does
    not: the missing one is said (once) and not created."""
    from kiel.clients import GroupedConsumer
    from kiel.exc import UnknownTopicOrPartitionError

    missing = unique("nosuch")
    existing = tansu_broker.create_topic(unique("exists"), 2)

    async def main() -> None:
        consumer = GroupedConsumer(tansu_broker.bootstrap, unique("g"),
                                   topics=[existing, missing], max_wait_time=0.2,
                                   commit_interval=None)
        async with consumer:
            with pytest.raises(UnknownTopicOrPartitionError) as info:
                for _ in range(50):
                    await consumer.consume()
            assert info.value.topic == missing
            assert await consumer.consume() == []  # said once

    run(main(), timeout=60)
    listed = peer_topics(tansu_broker.bootstrap)
    assert missing not in listed and existing in listed


def test_kiel_consume_says_unknown_topic_on_tansu(tansu_broker: Any) -> None:
    missing = unique("nosuch")
    result = kiel_cli("-b", tansu_broker.bootstrap, "consume", missing, "-e")
    assert result.returncode == 1 and b"unknown topic" in result.stderr, result.stderr
    assert missing not in peer_topics(tansu_broker.bootstrap)


def test_the_producer_auto_creates_by_default_on_tansu(tansu_broker: Any) -> None:
    topic = unique("created")

    async def main() -> Any:
        async with Producer(tansu_broker.bootstrap) as producer:
            return await producer.produce(topic, b"creates the topic")

    meta = run(main())
    assert meta.topic == topic and meta.offset == 0
    assert topic in peer_topics(tansu_broker.bootstrap)


def test_the_producer_told_not_to_never_creates_on_tansu(tansu_broker: Any) -> None:
    missing, existing = unique("nosuch"), unique("exists")

    async def main() -> Any:
        async with Producer(tansu_broker.bootstrap) as producer:
            await producer.produce(existing, b"made by a producer that may")
        async with Producer(tansu_broker.bootstrap, allow_auto_create_topics=False,
                            retries=1) as producer:
            with pytest.raises(UnknownTopicError):
                await producer.produce(missing, b"lost?")
            return await producer.produce(existing, b"an existing topic still works")

    assert run(main()).topic == existing
    listed = peer_topics(tansu_broker.bootstrap)
    assert missing not in listed and existing in listed


# --------------------------------------------------------------------------
# the embedded 0.8.2 broker: Metadata v0 only, auto-creation on (Kafka 0.8's default)


def test_a_consumer_never_creates_a_topic_on_0_8(kafka_cluster_factory: Any) -> None:
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False)
    assert cluster.config.auto_create_topics
    missing = unique("nosuch")
    cluster.create_topic("known", 2)

    async def main() -> None:
        async with SingleConsumer(cluster.bootstrap, retries=1, max_wait_time=0.1) as consumer:
            with pytest.raises(UnknownTopicError):
                await consumer.consume(missing)
            # An existing topic is found, and read, after the listing.
            assert await consumer.consume("known") == []
            assert consumer.partitions("known") == [0, 1]
        async with Producer(cluster.bootstrap, allow_auto_create_topics=False,
                            retries=1) as producer:
            with pytest.raises(UnknownTopicError):
                await producer.produce(missing, b"x")

    run(main())
    assert missing not in cluster.describe()["topics"]


def test_the_producer_still_auto_creates_on_0_8(kafka_cluster_factory: Any) -> None:
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False)
    topic = unique("created")

    async def main() -> Any:
        async with Producer(cluster.bootstrap) as producer:
            return await producer.produce(topic, b"creates the topic")

    assert run(main()).offset == 0
    assert topic in cluster.describe()["topics"]


def test_a_refresh_keeps_only_the_topics_it_named(kafka_cluster_factory: Any) -> None:
    """An older broker asked for every topic instead of naming an unknown
    one: the cluster keeps only the topics it wanted, and says which are
    unknown."""
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False)
    for name in ("a", "b", "c"):
        cluster.create_topic(name, 1)

    async def main() -> None:
        kiel = Cluster(cluster.bootstrap, allow_auto_create_topics=False, retries=0)
        try:
            await kiel.refresh_metadata(["a", "nosuch"])
            assert sorted(kiel.partitions) == ["a"]
            assert kiel.topic_errors["nosuch"] == 3
            with pytest.raises(UnknownTopicError):
                await kiel.partitions_for("nosuch")
        finally:
            kiel.close()

    run(main())
    assert "nosuch" not in cluster.describe()["topics"]

