"""kiel.admin.Admin judged on noida-db, next to confluent-kafka's AdminClient
on the same broker: what Tansu does not serve or answers wrong (create
partitions, delete records, offset delete, time lookups, unknown config
names, deleting a live group)."""
import time

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    OffsetSpec,
    ResourceType,
)
from confluent_kafka.admin import NewTopic as CkNewTopic

from kiel.admin import Admin, NewTopic
from kiel.admin import ConfigResource as KielResource
from kiel.exc import (
    ConfigError,
    InvalidConfigurationError,
    InvalidPartitionsError,
    NonEmptyGroupError,
    OffsetOutOfRangeError,
)
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.support.admin_peer import code, outcome, outcomes, peer

BASE = 1_700_000_000_000  # record timestamps, ms


def _topic(bootstrap: str, partitions: int = 1) -> str:
    name = unique("nd")
    # Records are stamped in 2023 (BASE): without retention.ms=-1, noida-db's
    # default retention may delete them within a second of their writing.
    code_, message = outcome(peer(bootstrap).create_topics(
        [CkNewTopic(name, partitions, 1, config={"retention.ms": "-1"})])[name])
    assert code_ == 0, message
    return name


def _produce(bootstrap: str, topic: str, count: int) -> None:
    """``count`` records on partition 0, record i stamped ``BASE + 1000 * i``."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, b"v%d" % i, partition=0, timestamp=BASE + 1000 * i)
    assert producer.flush(30) == 0


def test_create_partitions_matches_confluent(noida_broker) -> None:
    bootstrap = noida_broker.bootstrap
    ours, theirs = _topic(bootstrap), _topic(bootstrap)
    ck = peer(bootstrap)

    async def grow(totals: dict) -> dict:
        async with Admin(bootstrap) as admin:
            return dict(await admin.create_partitions(totals))

    assert run(grow({ours: 3})) == {ours: 3}
    assert outcome(ck.create_partitions([NewPartitions(theirs, 3)])[theirs]) == (0, None)
    topics = ck.list_topics(timeout=30).topics
    assert len(topics[ours].partitions) == len(topics[theirs].partitions) == 3
    # Fewer than today: the broker's InvalidPartitions (37), per topic, for both.
    fewer = run(grow({ours: 2, theirs: 4}))
    assert isinstance(fewer[ours], InvalidPartitionsError) and str(fewer[ours])
    assert fewer[theirs] == 4
    ck_code, _ = outcome(ck.create_partitions([NewPartitions(ours, 2)])[ours])
    assert ck_code == code(fewer[ours]) == 37
    for bad in (0, -1):
        with pytest.raises(ConfigError):
            run(grow({ours: bad}))


def test_delete_records_matches_confluent(noida_broker) -> None:
    bootstrap = noida_broker.bootstrap
    ours, theirs = _topic(bootstrap), _topic(bootstrap)
    for topic in (ours, theirs):
        _produce(bootstrap, topic, 5)
    ck = peer(bootstrap)

    async def delete(before: dict) -> dict:
        async with Admin(bootstrap) as admin:
            return dict(await admin.delete_records(before))

    assert run(delete({TopicPartition(ours, 0): 3})) == {TopicPartition(ours, 0): 3}
    [(code_, deleted)] = outcomes(ck.delete_records([CkTopicPartition(theirs, 0, 3)])).values()
    assert code_ == 0 and deleted.low_watermark == 3
    low = outcomes(ck.list_offsets({CkTopicPartition(t, 0): OffsetSpec.earliest()
                                    for t in (ours, theirs)}))
    assert {k.topic: v[1].offset for k, v in low.items()} == {ours: 3, theirs: 3}
    # Past the high watermark: OffsetOutOfRange (1) for that partition, both.
    past = run(delete({TopicPartition(ours, 0): 99}))
    assert isinstance(past[TopicPartition(ours, 0)], OffsetOutOfRangeError)
    [(ck_code, _)] = outcomes(ck.delete_records([CkTopicPartition(theirs, 0, 99)])).values()
    assert ck_code == code(past[TopicPartition(ours, 0)]) == 1


def test_list_offsets_by_position_and_time_match_confluent(noida_broker) -> None:
    bootstrap = noida_broker.bootstrap
    topic = _topic(bootstrap)
    _produce(bootstrap, topic, 5)
    ck = peer(bootstrap)
    tp, ck_tp = TopicPartition(topic, 0), CkTopicPartition(topic, 0)
    cases = {
        "earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
        BASE + 2500: OffsetSpec.for_timestamp(BASE + 2500),
        BASE + 10**9: OffsetSpec.for_timestamp(BASE + 10**9),  # after every record
    }

    async def listed(spec: object) -> object:
        async with Admin(bootstrap) as admin:
            return (await admin.list_offsets({tp: spec}))[tp]

    for spec, ck_spec in cases.items():
        ours = run(listed(spec))
        code_, theirs = outcome(ck.list_offsets({ck_tp: ck_spec})[ck_tp])
        assert code_ == 0, theirs
        # kiel says None where no record is that recent; confluent -1.
        assert (-1 if ours.offset is None else ours.offset, ours.timestamp) == (
            theirs.offset, theirs.timestamp), spec
    assert run(listed("max_timestamp")).offset == 4
    assert run(listed(BASE + 2500)).offset == 3
    with pytest.raises(ConfigError):
        run(listed("newest"))


def test_unknown_config_names_are_the_topics_error_as_for_confluent(noida_broker) -> None:
    bootstrap = noida_broker.bootstrap
    topic = _topic(bootstrap)
    ck = peer(bootstrap)
    name = unique("cfg")

    async def main() -> tuple:
        async with Admin(bootstrap) as admin:
            created = await admin.create_topics([NewTopic(name, 1, 1, {"no.such.config": "1"})])
            altered = await admin.incremental_alter_configs(
                {KielResource("topic", topic): {"no.such.config": "1"}})
            return created[name], altered[KielResource("topic", topic)]

    created, altered = run(main())
    assert isinstance(created, InvalidConfigurationError) and "no.such.config" in str(created)
    assert isinstance(altered, InvalidConfigurationError)
    ck_created = outcome(ck.create_topics(
        [CkNewTopic(name, 1, 1, config={"no.such.config": "1"})])[name])
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    ck_altered = outcome(ck.incremental_alter_configs([resource])[resource])
    assert ck_created[0] == ck_altered[0] == code(created) == code(altered) == 40


def test_offset_delete_is_judged_by_confluent(noida_broker) -> None:
    bootstrap = noida_broker.bootstrap
    topic = _topic(bootstrap, partitions=2)
    group = unique("od")
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]

    async def main() -> dict:
        async with Admin(bootstrap) as admin:
            assert dict(await admin.alter_group_offsets(group, dict.fromkeys(tps, 0))) == \
                dict.fromkeys(tps, 0)
            return dict(await admin.delete_group_offsets(group, tps[:1]))

    assert run(main()) == {tps[0]: None}
    ck = peer(bootstrap)
    code_, read = outcome(ck.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [CkTopicPartition(topic, 0),
                                              CkTopicPartition(topic, 1)])])[group])
    assert code_ == 0
    # -1001: confluent's "no committed offset".
    assert sorted((p.partition, p.offset) for p in read.topic_partitions) == [(0, -1001), (1, 0)]


def test_deleting_a_live_group_is_refused_as_for_confluent(noida_broker) -> None:
    from confluent_kafka import Consumer

    bootstrap = noida_broker.bootstrap
    topic = _topic(bootstrap)
    group = unique("live")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "session.timeout.ms": 30000})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer never got its assignment"
            consumer.poll(0.2)

        async def delete() -> dict:
            async with Admin(bootstrap) as admin:
                return dict(await admin.delete_groups([group]))

        ours = run(delete())[group]
        assert isinstance(ours, NonEmptyGroupError)
        ck_code, _ = outcome(peer(bootstrap).delete_consumer_groups([group])[group])
        assert ck_code == code(ours) == 68
    finally:
        consumer.close()
