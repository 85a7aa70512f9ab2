"""The ``kiel`` command's admin verbs (kiel.cli.admin), run as a subprocess
against Tansu (topics create, describe, alter configs, delete; group delete)
and noida-db (create partitions, records delete, offsets --time), each
answer compared with what confluent-kafka's AdminClient or kiel.admin sees
on the same broker; bad input exits 1 (or 2, a usage error) with a clear
message and changes nothing."""

import asyncio
import json
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import ConfigResource, ConfigSource, OffsetSpec, ResourceType

from kiel.admin import Admin
from kiel.clients import GroupedConsumer
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.support.admin_peer import outcome, outcomes, peer
from tests.support.cli import kiel, ok

BASE = 1_700_000_000_000  # record timestamps, ms


def _topics(bootstrap: str) -> set:
    return set(peer(bootstrap).list_topics(timeout=30).topics)


def _ck_configs(bootstrap: str, topic: str) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    code_, entries = outcome(peer(bootstrap).describe_configs([resource])[resource])
    assert code_ == 0, entries
    return {name: entry.value for name, entry in entries.items()}


def _ck_overrides(bootstrap: str, topic: str) -> dict:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    code_, entries = outcome(peer(bootstrap).describe_configs([resource])[resource])
    assert code_ == 0, entries
    return {name: entry.value for name, entry in entries.items()
            if entry.source in (ConfigSource.DYNAMIC_TOPIC_CONFIG,
                                ConfigSource.DYNAMIC_TOPIC_CONFIG.value)}


# ----------------------------------------------------------------------
# Tansu: topics create, describe, alter configs, delete; group delete


def test_topics_create_describe_alter_delete_round_trip_on_tansu(tansu_broker: Any) -> None:
    bs = tansu_broker.bootstrap
    topic = unique("cliadm")
    created = ok(kiel("-b", bs, "topics", "create", topic, "--partitions", "3",
                      "--replication-factor", "1", "--config", "retention.ms=60000"))
    assert created.stdout.decode() == f"Created topic {topic}.\n"
    metadata = peer(bs).list_topics(topic=topic, timeout=30).topics[topic]
    assert len(metadata.partitions) == 3
    assert _ck_configs(bs, topic)["retention.ms"] == "60000"

    # Creating it again: that topic's error, exit 1, the broker's code named.
    again = kiel("-b", bs, "topics", "create", topic, "--partitions", "3")
    assert again.returncode == 1 and again.stdout == b""
    assert f"{topic}: TopicAlreadyExistsError".encode() in again.stderr

    # describe: kafka-topics.sh's lines, and the same facts as confluent's.
    text = ok(kiel("-b", bs, "topics", "describe", topic)).stdout.decode()
    lines = text.splitlines()
    # Configs: the topic's overrides (source DYNAMIC_TOPIC_CONFIG), as
    # confluent sees them; Tansu labels a config it was given DEFAULT_CONFIG,
    # so there the line is empty for both.
    overrides = _ck_overrides(bs, topic)
    assert lines[0].split("\t") == [
        f"Topic: {topic}", "PartitionCount: 3", "ReplicationFactor: 1",
        "Configs: " + ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))]
    for p, line in enumerate(lines[1:]):
        cells = dict(c.split(": ", 1) for c in line.strip().split("\t"))
        ck_p = metadata.partitions[p]
        assert (cells["Topic"], int(cells["Partition"]), int(cells["Leader"]),
                cells["Replicas"], cells["Isr"]) == (
            topic, p, ck_p.leader, ",".join(map(str, ck_p.replicas)),
            ",".join(map(str, ck_p.isrs)))
    assert len(lines) == 4
    described = json.loads(ok(kiel("-b", bs, "topics", "describe", topic, "--json")).stdout)
    assert [(d["topic"], d["partition_count"], d["replication_factor"], d["configs"])
            for d in described] == [(topic, 3, 1, overrides)]
    # today's `kiel topics T` stays as it was
    old = ok(kiel("-b", bs, "topics", topic)).stdout.decode().splitlines()
    assert old[0].split("\t")[:5] == ["topic", "partition", "leader", "replicas", "isr"]

    # alter configs, through `topics alter` and `configs alter`; read back by confluent
    ok(kiel("-b", bs, "topics", "alter", topic, "--config", "retention.ms=120000"))
    assert _ck_configs(bs, topic)["retention.ms"] == "120000"
    altered = ok(kiel("-b", bs, "configs", "alter", "--topic", topic,
                      "--set", "cleanup.policy=compact"))
    assert altered.stdout.decode() == (f"Altered configs of topic {topic}: "
                                       "cleanup.policy=compact.\n")
    assert _ck_configs(bs, topic)["cleanup.policy"] == "compact"
    # --all: Tansu labels every config it lists DEFAULT_CONFIG (it lists
    # only those that were set), which the default view leaves out.
    shown = json.loads(ok(kiel("-b", bs, "configs", "describe", "--topic", topic,
                               "--all", "--json")).stdout)
    ck = _ck_configs(bs, topic)
    assert {c["name"]: c["value"] for c in shown["configs"]} == {
        n: ck[n] for n in ("cleanup.policy", "retention.ms")}
    table = ok(kiel("-b", bs, "configs", "describe", "--topic", topic,
                    "--all")).stdout.decode()
    assert table.splitlines()[0].split() == ["NAME", "VALUE", "SOURCE", "READ-ONLY", "SENSITIVE"]
    assert any(r.split()[:2] == ["retention.ms", "120000"] for r in table.splitlines())

    # delete: a dry run first (nothing deleted), then --execute
    dry = ok(kiel("-b", bs, "topics", "delete", topic))
    assert dry.stdout.decode().split() == ["TOPIC", "PARTITIONS", topic, "3"]
    assert b"dry run: nothing was deleted" in dry.stderr
    assert topic in _topics(bs)
    deleted = ok(kiel("-b", bs, "topics", "delete", topic, "--execute"))
    assert deleted.stdout.decode() == f"Deleted topic {topic}.\n"

    async def listed() -> dict:
        async with Admin(bs) as admin:
            return await admin.cluster.all_topics()

    assert topic not in run(listed())
    assert topic not in _topics(bs)


def test_per_topic_failures_are_printed_and_exit_1_on_tansu(tansu_broker: Any) -> None:
    bs = tansu_broker.bootstrap
    there = tansu_broker.create_topic(unique("there"))
    missing = unique("missing")
    result = kiel("-b", bs, "topics", "delete", there, missing, "--execute", "--json")
    assert result.returncode == 1
    docs = {d["topic"]: d for d in json.loads(result.stdout)["topics"]}
    assert docs[there] == {"topic": there, "deleted": True}
    assert docs[missing]["error"] == "UnknownTopicOrPartitionError" and docs[missing]["errno"] == 3
    assert f"{missing}: UnknownTopicOrPartitionError".encode() in result.stderr
    assert there not in _topics(bs)


def test_bad_input_exits_with_a_clear_message_and_changes_nothing(tansu_broker: Any) -> None:
    bs = tansu_broker.bootstrap
    topic = unique("bad")
    cases = [
        (("topics", "create", topic, "--partitions", "0"), 1, b"partitions must be a positive"),
        (("topics", "create", topic, "--config", "retention.ms=a week"), 1, b"whole number"),
        (("topics", "create", topic, "--config", "retention.ms"), 1, b"NAME=VALUE"),
        (("topics", "create", topic, "--execute"), 1, b"--execute is not an option"),
        (("topics", "create"), 1, b"needs at least one topic"),
        (("topics", "alter", topic), 1, b"needs --partitions"),
        (("topics", topic, "--partitions", "3"), 1, b"goes with a verb"),
        (("topics", "create", topic, "--partitions", "x"), 2, b"invalid int value"),
        (("configs", "describe", "--topic", topic), 1, b"unknown topic"),
        (("configs", "alter", "--topic", topic, "--set", "retention.ms=1"), 1,
         b"unknown topic"),
        (("configs", "alter", "--broker", "one", "--set", "a=b"), 1, b"broker id"),
        (("offsets", topic), 1, b"unknown topic"),
        (("records", "delete", topic, "--before", "soon"), 1, b"--before takes"),
        (("group", "delete", "g", "-z", "localhost:1"), 1, b"not -z"),
    ]
    for argv, status, message in cases:
        result = kiel("-b", bs, *argv)
        assert result.returncode == status, (argv, result.stderr)
        assert message in result.stderr, (argv, result.stderr)
        if status == 1:
            assert result.stderr.startswith(b"kiel "), result.stderr
    assert topic not in _topics(bs)


def test_group_delete_dry_run_refuses_a_live_group_then_deletes_on_tansu(
        tansu_broker: Any) -> None:
    """Tansu deletes a group with live members (Kafka refuses): the command
    refuses it itself, before sending, and deletes it once its member left."""
    bs = tansu_broker.bootstrap
    topic = tansu_broker.create_topic(unique("gdel"))
    group, idle = unique("gdel"), unique("gidle")

    async def scenario() -> None:
        async with Admin(bs) as admin:
            assert dict(await admin.alter_group_offsets(idle, {TopicPartition(topic, 0): 0}))
        consumer = GroupedConsumer(bs, group, topics=[topic], session_timeout=6.0,
                                   heartbeat_interval=1.0, max_wait_time=0.2,
                                   commit_interval=None, auto_finish=False, revoke_timeout=1.0)
        try:
            await consumer.connect()
            await consumer.commit({(topic, 0): 0})
            refused = await asyncio.to_thread(kiel, "-b", bs, "group", "delete", group,
                                              "--execute")
            assert refused.returncode == 1, refused.stdout
            assert f"{group}: NonEmptyGroupError".encode() in refused.stderr
            assert b"stop its members first" in refused.stderr
            async with Admin(bs) as admin:
                assert group in {g for g, _ in await admin.list_groups()}
        finally:
            await consumer.close()

    run(scenario())
    dry = ok(kiel("-b", bs, "group", "delete", idle, "--json"))
    plan = json.loads(dry.stdout)
    assert plan["execute"] is False and [g["group"] for g in plan["groups"]] == [idle]
    assert b"dry run" in dry.stderr

    async def groups() -> set:
        async with Admin(bs) as admin:
            return {g for g, _ in await admin.list_groups()}

    assert idle in run(groups())
    deleted = ok(kiel("-b", bs, "group", "delete", idle, "--execute"))
    assert deleted.stdout.decode() == f"Deleted group {idle}.\n"
    assert idle not in run(groups())
    listed = outcome(peer(bs).list_consumer_groups())
    assert listed[0] == 0 and idle not in {g.group_id for g in listed[1].valid}


# ----------------------------------------------------------------------
# noida-db: create partitions, records delete, offsets --time


def _noida_topic(bootstrap: str, count: int) -> str:
    topic = unique("ndcli")
    # records stamped in 2023: without retention.ms=-1 the broker's retention
    # (7 days by default) deletes them within a second or so
    ok(kiel("-b", bootstrap, "topics", "create", topic, "--partitions", "1",
            "--config", "retention.ms=-1"))
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, b"v%d" % i, partition=0, timestamp=BASE + 1000 * i)
    assert producer.flush(30) == 0
    return topic


def test_topics_alter_partitions_on_noida(noida_broker: Any) -> None:
    bs = noida_broker.bootstrap
    topic = _noida_topic(bs, 0)
    grown = ok(kiel("-b", bs, "topics", "alter", topic, "--partitions", "3"))
    assert grown.stdout.decode() == f"Topic {topic}: 3 partitions.\n"
    assert len(peer(bs).list_topics(topic=topic, timeout=30).topics[topic].partitions) == 3
    # fewer than today: the broker's InvalidPartitions (37), exit 1
    fewer = kiel("-b", bs, "topics", "alter", topic, "--partitions", "2", "--json")
    assert fewer.returncode == 1
    [doc] = json.loads(fewer.stdout)
    assert doc["partitions"]["error"] == "InvalidPartitionsError"
    assert doc["partitions"]["errno"] == 37
    assert f"{topic} (partitions): InvalidPartitionsError".encode() in fewer.stderr


def test_records_delete_before_on_noida(noida_broker: Any) -> None:
    bs = noida_broker.bootstrap
    topic = _noida_topic(bs, 5)
    ck = peer(bs)
    tp = CkTopicPartition(topic, 0)

    def earliest() -> int:
        return int(outcome(ck.list_offsets({tp: OffsetSpec.earliest()})[tp])[1].offset)

    dry = ok(kiel("-b", bs, "records", "delete", topic, "--before", "3"))
    assert [line.split() for line in dry.stdout.decode().splitlines()] == [
        ["TOPIC", "PARTITION", "EARLIEST", "HIGHWATER", "NEW-EARLIEST", "DELETED"],
        [topic, "0", "0", "5", "3", "3"]]
    assert b"dry run: nothing was deleted" in dry.stderr and earliest() == 0
    done = ok(kiel("-b", bs, "records", "delete", f"{topic}:0", "--before", "3", "--execute",
                   "--json"))
    assert json.loads(done.stdout)["partitions"] == [
        {"topic": topic, "partition": 0, "low_watermark": 3}]
    assert earliest() == 3
    # past the high watermark: refused, in the dry run and with --execute
    past = kiel("-b", bs, "records", "delete", topic, "--before", "99")
    assert past.returncode == 1 and b"past the high watermark 5" in past.stderr
    # refused before sending, --execute or not (the broker would answer
    # OffsetOutOfRange, code 1: tests/admin/test_admin_noida.py)
    past = kiel("-b", bs, "records", "delete", topic, "--before", "99", "--execute")
    assert past.returncode == 1 and f"{topic}:0: OffsetOutOfRangeError".encode() in past.stderr
    assert earliest() == 3
    ok(kiel("-b", bs, "records", "delete", topic, "--before", "end", "--execute"))
    assert earliest() == 5


def test_offsets_by_time_earliest_latest_match_confluent_on_noida(noida_broker: Any) -> None:
    bs = noida_broker.bootstrap
    topic = _noida_topic(bs, 5)
    ck = peer(bs)
    tp = CkTopicPartition(topic, 0)
    iso = "2023-11-14T22:13:22.500+00:00"  # BASE + 2500 ms
    cases = {
        "earliest": OffsetSpec.earliest(), "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
        str(BASE + 2500): OffsetSpec.for_timestamp(BASE + 2500),
        iso: OffsetSpec.for_timestamp(BASE + 2500),
        str(BASE + 10**9): OffsetSpec.for_timestamp(BASE + 10**9),
    }
    theirs = {spec: outcomes(ck.list_offsets({tp: s}))[tp] for spec, s in cases.items()}
    for spec, (code_, answer) in theirs.items():
        assert code_ == 0, answer
        [doc] = json.loads(ok(kiel("-b", bs, "offsets", topic, "--time", spec,
                                   "--json")).stdout)
        # kiel says null where no record is that recent; confluent -1.
        assert (-1 if doc["offset"] is None else doc["offset"], doc["timestamp"]) == (
            answer.offset, answer.timestamp), spec
    assert theirs[iso][1].offset == 3
    text = ok(kiel("-b", bs, "offsets", topic, "--time", iso)).stdout.decode()
    assert [line.split() for line in text.splitlines()] == [
        ["TOPIC", "PARTITION", "OFFSET", "TIMESTAMP"], [topic, "0", "3", str(BASE + 3000)]]
    latest = ok(kiel("-b", bs, "offsets", topic)).stdout.decode().splitlines()[1].split()
    assert latest == [topic, "0", "5", "-"]
    bad = kiel("-b", bs, "offsets", topic, "--time", "yesterday")
    assert bad.returncode == 1 and b"--time takes" in bad.stderr


def test_group_offsets_delete_on_noida_and_tansu(noida_broker: Any, tansu_broker: Any) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions

    bs = noida_broker.bootstrap
    topic = _noida_topic(bs, 3)
    group = unique("goffdel")

    async def commit() -> None:
        async with Admin(bs) as admin:
            committed = await admin.alter_group_offsets(group, {TopicPartition(topic, 0): 2})
            committed.raise_for_errors()

    run(commit())

    def ck_committed() -> int:
        code_, answer = outcome(peer(bs).list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [CkTopicPartition(topic, 0)])])[group])
        assert code_ == 0, answer
        return int(answer.topic_partitions[0].offset)

    dry = ok(kiel("-b", bs, "group", "offsets", "delete", group, "--topic", topic))
    assert [line.split() for line in dry.stdout.decode().splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET"], [group, topic, "0", "2"]]
    assert b"dry run" in dry.stderr and ck_committed() == 2
    done = ok(kiel("-b", bs, "group", "offsets", "delete", group, "--topic", f"{topic}:0",
                   "--execute"))
    assert done.stdout.decode() == f"Deleted the offset of group {group} on {topic}:0.\n"
    assert ck_committed() == -1001  # confluent's OFFSET_INVALID: none committed

    # Tansu 0.6 serves no OffsetDelete: exit 1, naming the API and the broker.
    tansu_topic = tansu_broker.create_topic(unique("goffdel"))
    refused = kiel("-b", tansu_broker.bootstrap, "group", "offsets", "delete", group,
                   "--topic", tansu_topic, "--execute")
    assert refused.returncode == 1
    assert b"OffsetDelete" in refused.stderr and b"broker" in refused.stderr


def test_configs_on_noida_broker_configs_and_unknown_names(noida_broker: Any) -> None:
    bs = noida_broker.bootstrap
    ck = peer(bs)
    broker = str(next(iter(ck.list_topics(timeout=30).brokers)))
    resource = ConfigResource(ResourceType.BROKER, broker)
    code_, theirs = outcome(ck.describe_configs([resource])[resource])
    assert code_ == 0, theirs
    ours = json.loads(ok(kiel("-b", bs, "configs", "describe", "--broker", broker, "--all",
                              "--json")).stdout)
    assert ours["kind"] == "broker" and ours["name"] == broker and ours["configs"]
    assert {c["name"]: c["value"] for c in ours["configs"]} == {
        n: e.value for n, e in theirs.items()}
    # an unknown config name: the broker's InvalidConfiguration (40), that resource, exit 1
    topic = _noida_topic(bs, 0)
    bad = kiel("-b", bs, "configs", "alter", "--topic", topic, "--set", "no.such.config=1",
               "--json")
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["errno"] == 40
    assert f"topic {topic}: InvalidConfigurationError".encode() in bad.stderr
    bad = kiel("-b", bs, "topics", "create", unique("ndbad"), "--config", "no.such.config=1")
    assert bad.returncode == 1 and b"InvalidConfigurationError" in bad.stderr


# ----------------------------------------------------------------------
# Kafka 0.8.2 (embedded): no admin APIs; describe still works


@pytest.mark.zookeeper
def test_on_a_0_8_cluster_the_admin_verbs_name_the_missing_api(
        kafka_cluster: Any, topic_factory: Any) -> None:
    bs = kafka_cluster.bootstrap
    topic = topic_factory(partitions=2)
    for argv, api in [(("topics", "create", unique("old")), b"CreateTopics"),
                      (("topics", "delete", topic, "--execute"), b"DeleteTopics"),
                      (("configs", "alter", "--topic", topic, "--set", "retention.ms=1"),
                       b"IncrementalAlterConfigs"),
                      (("offsets", topic), b"ListOffsets")]:
        result = kiel("-b", bs, *argv)
        assert result.returncode == 1, (argv, result.stdout)
        assert api in result.stderr and b"broker" in result.stderr, (argv, result.stderr)
    # describe: the partitions as ever, no Configs (0.8 keeps them in ZooKeeper)
    lines = ok(kiel("-b", bs, "topics", "describe", topic)).stdout.decode().splitlines()
    replicas = [dict(c.split(": ", 1) for c in line.strip().split("\t"))["Replicas"]
                for line in lines[1:]]
    assert len(replicas) == 2
    factor = max(len(r.split(",")) for r in replicas)
    assert lines[0].split("\t")[1:] == ["PartitionCount: 2", f"ReplicationFactor: {factor}",
                                        "Configs: "]
    assert topic in _topics_of(bs)


def _topics_of(bootstrap: str) -> set:
    async def listed() -> set:
        async with Admin(bootstrap) as admin:
            return set(await admin.cluster.all_topics())

    return run(listed())
