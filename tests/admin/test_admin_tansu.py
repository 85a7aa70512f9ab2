"""kiel.admin.Admin judged on Tansu, next to confluent-kafka's AdminClient on
the same broker: topics, incremental configs, the cluster, group offsets
and group deletion (what Tansu serves; ../shared EXACTLY_ONCE's table).

Tansu is lenient where these tests claim nothing: it creates a topic asked
with ``validate_only``, accepts unknown config names, lists only the
configs that were set, and deletes a group with live members; CreatePartitions
and OffsetDelete it does not serve (an UnsupportedFeatureError naming the
API and the broker, checked here), DeleteRecords and ListOffsets'
MAX_TIMESTAMP break its connection (judged on noida-db:
tests/admin/test_admin_noida.py).
"""
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from confluent_kafka.admin import (
    NewTopic as CkNewTopic,
)

from kiel.admin import Admin, NewTopic
from kiel.admin import ConfigResource as KielResource
from kiel.exc import (
    ConfigError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedFeatureError,
)
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.support.admin_peer import code, outcome, outcomes, peer


def test_create_topics_and_their_errors_match_confluent(tansu_broker) -> None:
    ours, theirs = unique("admin-k"), unique("admin-c")
    ck = peer(tansu_broker.bootstrap)

    async def create(topics: list) -> dict:
        async with Admin(tansu_broker.bootstrap) as admin:
            return dict(await admin.create_topics(topics))

    created = run(create([NewTopic(ours, 3, 1, {"retention.ms": "60000"})]))
    assert created[ours].partitions == 3 and created[ours].replication_factor == 1
    assert outcome(ck.create_topics([CkNewTopic(theirs, 3, 1, config={"retention.ms": "60000"})])
                   [theirs]) == (0, None)
    listed = ck.list_topics(timeout=30).topics
    assert len(listed[ours].partitions) == len(listed[theirs].partitions) == 3
    # Both again: each topic's own error, the broker's code and message.
    again = run(create([NewTopic(ours, 3, 1), NewTopic(unique("admin-k"), 1, 1)]))
    assert isinstance(again[ours], TopicAlreadyExistsError) and again[ours].errno == 36
    assert str(again[ours])  # the broker's message
    assert sum(not isinstance(v, Exception) for v in again.values()) == 1  # the other: created
    ck_code, ck_message = outcome(ck.create_topics([CkNewTopic(ours, 3, 1)])[ours])
    assert ck_code == code(again[ours]) == 36


def test_bad_topic_input_is_refused_before_anything_is_sent(tansu_broker) -> None:
    name = unique("admin-bad")

    async def main() -> None:
        async with Admin(tansu_broker.bootstrap) as admin:
            for bad in (NewTopic(name, 0, 1), NewTopic(name, -2, 1), NewTopic(name, 1, 0),
                        NewTopic(name, 1, 1, {"retention.ms": "a week"}),
                        NewTopic("", 1, 1)):
                with pytest.raises(ConfigError):
                    await admin.create_topics([bad])
            with pytest.raises(ConfigError, match="twice"):
                await admin.create_topics([NewTopic(name, 1, 1), NewTopic(name, 2, 1)])

    run(main())
    assert name not in peer(tansu_broker.bootstrap).list_topics(timeout=30).topics


def test_delete_topics_matches_confluent(tansu_broker) -> None:
    ours, theirs, missing = unique("del-k"), unique("del-c"), unique("del-missing")
    tansu_broker.create_topic(ours)
    tansu_broker.create_topic(theirs)
    ck = peer(tansu_broker.bootstrap)

    async def main() -> dict:
        async with Admin(tansu_broker.bootstrap) as admin:
            return dict(await admin.delete_topics([ours, missing]))

    deleted = run(main())
    assert deleted[ours] is None
    assert isinstance(deleted[missing], UnknownTopicOrPartitionError)
    theirs_out = outcomes(ck.delete_topics([theirs, missing]))
    assert theirs_out[theirs] == (0, None)
    assert theirs_out[missing][0] == code(deleted[missing]) == 3
    assert not {ours, theirs} & set(ck.list_topics(timeout=30).topics)


def test_incremental_configs_round_trip_with_confluent(tansu_broker) -> None:
    topic = tansu_broker.create_topic(unique("cfg"))
    ck = peer(tansu_broker.bootstrap)
    resource = KielResource("topic", topic)

    async def alter(changes: dict) -> dict:
        async with Admin(tansu_broker.bootstrap) as admin:
            return dict(await admin.incremental_alter_configs({resource: changes}))

    async def describe() -> dict:
        async with Admin(tansu_broker.bootstrap) as admin:
            return dict(await admin.describe_configs([resource]))[resource]

    assert run(alter({"retention.ms": "120000"})) == {resource: None}
    theirs = outcome(ck.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])[
        ConfigResource(ResourceType.TOPIC, topic)])
    assert theirs[0] == 0 and theirs[1]["retention.ms"].value == "120000"
    # confluent sets one, kiel reads it: the same value both ways.
    ck_resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact",
                    incremental_operation=AlterConfigOpType.SET)])
    assert outcome(ck.incremental_alter_configs([ck_resource])[ck_resource])[0] == 0
    ours = run(describe())
    assert ours["retention.ms"].value == "120000"
    assert ours["cleanup.policy"].value == "compact"
    # What kiel refuses locally never reaches the broker.
    with pytest.raises(ConfigError, match="whole number"):
        run(alter({"retention.ms": "forever"}))


def test_describe_cluster_matches_confluent(tansu_broker) -> None:
    async def main():
        async with Admin(tansu_broker.bootstrap) as admin:
            return await admin.describe_cluster()

    ours = run(main())
    ck = peer(tansu_broker.bootstrap)  # kept: a collected client ends its futures
    code_, theirs = outcome(ck.describe_cluster())
    assert code_ == 0, theirs
    assert ours.cluster_id == theirs.cluster_id == tansu_broker.cluster_id
    assert ours.controller == theirs.controller.id
    assert [(b.node_id, b.host, b.port) for b in ours.brokers] == sorted(
        (n.id, n.host, n.port) for n in theirs.nodes)


def test_an_api_tansu_does_not_serve_names_the_api_and_the_broker(tansu_broker) -> None:
    topic = tansu_broker.create_topic(unique("grow"))

    async def main() -> None:
        async with Admin(tansu_broker.bootstrap) as admin:
            with pytest.raises(UnsupportedFeatureError, match="CreatePartitions") as info:
                await admin.create_partitions({topic: 2})
            assert info.value.broker_id is not None
            assert f"127.0.0.1:{tansu_broker.port}" in str(info.value)
            with pytest.raises(UnsupportedFeatureError, match="OffsetDelete"):
                await admin.delete_group_offsets(unique("g"), [TopicPartition(topic, 0)])

    run(main())


def test_group_offsets_and_deletion_match_confluent(tansu_broker) -> None:
    topic = tansu_broker.create_topic(unique("goff"), partitions=2)
    ours, theirs = unique("g-k"), unique("g-c")
    ck = peer(tansu_broker.bootstrap)

    async def alter() -> dict:
        async with Admin(tansu_broker.bootstrap) as admin:
            return dict(await admin.alter_group_offsets(
                ours, {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0}))

    assert run(alter()) == {TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0}
    request = ConsumerGroupTopicPartitions(theirs, [CkTopicPartition(topic, 0, 0),
                                                    CkTopicPartition(topic, 1, 0)])
    assert outcome(ck.alter_consumer_group_offsets([request])[theirs])[0] == 0
    # Each reads what the other committed.
    read = outcome(ck.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(ours)])[ours])
    assert read[0] == 0 and sorted((p.partition, p.offset) for p in
                                   read[1].topic_partitions) == [(0, 0), (1, 0)]

    async def delete() -> dict:
        async with Admin(tansu_broker.bootstrap) as admin:
            described = await admin.group_offsets(theirs)
            assert {(r.partition, r.committed) for r in described.partitions} == {(0, 0),
                                                                                  (1, 0)}
            return dict(await admin.delete_groups([ours]))

    assert run(delete()) == {ours: None}
    assert outcome(ck.delete_consumer_groups([theirs])[theirs]) == (0, None)

    async def listed() -> list:
        async with Admin(tansu_broker.bootstrap) as admin:
            return [g for g, _ in await admin.list_groups()]

    assert not {ours, theirs} & set(run(listed()))
