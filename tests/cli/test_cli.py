"""The ``kiel`` command, run as a subprocess against real ZooKeeper and the
embedded brokers (ZooKeeper groups with ``-z``), and against Tansu (groups
the brokers coordinate, the default)."""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, List

import pytest

from kiel.admin import BrokerGroup, BrokerGroupMember, _commit_from_outside, check_resettable
from kiel.client import Client
from kiel.clients import GroupedConsumer
from kiel.exc import NonEmptyGroupError
from kiel.structs import TopicPartition
from tests.conftest import unique
from tests.support.cli import _table_at, _text_rows, kiel, ok
from tests.support.waiting import until, wait_until

# ----------------------------------------------------------------------
# allocate: pure, no cluster


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "kiel"
    assert script.exists() or shutil.which("kiel"), "setup.cfg's console_scripts entry"
    result = subprocess.run([str(script) if script.exists() else "kiel", "--help"],
                            capture_output=True, timeout=60)
    assert result.returncode == 0
    assert b"produce" in result.stdout and b"group" in result.stdout


def test_allocate_builtin_json() -> None:
    result = ok(kiel("allocate", "--allocator", "round_robin", "--members", "b,a",
                     "--partitions", "t:4*,u:0", "--json"))
    allocation = json.loads(result.stdout)
    assert set(allocation) == {"a", "b"}
    owned = sorted((t, p) for m in allocation.values() for t, ps in m.items() for p in ps)
    assert owned == [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 0)]


def test_allocate_users_own_function(tmp_path: Path) -> None:
    (tmp_path / "my_alloc.py").write_text(
        "def everything_to_first(members, partitions):\n"
        "    out = {m: {} for m in members}\n"
        "    for name in partitions:\n"
        "        topic, _, p = name.rpartition(':')\n"
        "        out[members[0]].setdefault(topic, []).append(int(p))\n"
        "    return out\n"
    )
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    result = ok(kiel("allocate", "--allocator", "my_alloc:everything_to_first",
                     "--members", "x,y", "--partitions", "t:3*", env=env))
    lines = result.stdout.decode().splitlines()
    assert lines[0].split("\t")[:2] == ["x", "3"]
    assert lines[1].split("\t")[:2] == ["y", "0"]


def test_allocate_refuses_an_invalid_allocation(tmp_path: Path) -> None:
    (tmp_path / "bad_alloc.py").write_text(
        "def drops_one(members, partitions):\n"
        "    return {m: {} for m in members}\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = kiel("allocate", "--allocator", "bad_alloc:drops_one", "--members", "x",
                  "--partitions", "t:0", env=env)
    assert result.returncode == 1
    assert b"kiel allocate:" in result.stderr


def test_allocate_unknown_allocator_is_a_clear_error() -> None:
    result = kiel("allocate", "--allocator", "no_such_allocator", "--members", "x",
                  "--partitions", "t:0")
    assert result.returncode == 1
    assert b"no_such_allocator" in result.stderr


# ----------------------------------------------------------------------
# produce / consume / topics against the embedded cluster


@pytest.mark.zookeeper
def test_produce_then_consume_round_trips_10000_keyed_messages(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    topic = topic_factory(partitions=4)
    lines = [f"key-{i % 97}:value-{i}" for i in range(10_000)]
    result = ok(kiel("-b", kafka_cluster.bootstrap, "produce", topic, "-K", ":",
                     input="\n".join(lines).encode() + b"\n"))
    assert b"produced 10000 messages" in result.stderr

    result = ok(kiel("-b", kafka_cluster.bootstrap, "consume", topic, "--from", "beginning",
                     "-K", ":", "-e"))
    out = result.stdout.decode().splitlines()
    assert sorted(out) == sorted(lines)
    # per key (so per partition), the order produced is the order consumed
    by_key: Dict[str, List[str]] = {}
    for line in out:
        key, _, value = line.partition(":")
        by_key.setdefault(key, []).append(value)
    for key, values in by_key.items():
        expected = [ln.partition(":")[2] for ln in lines if ln.partition(":")[0] == key]
        assert values == expected


@pytest.mark.zookeeper
def test_consume_json_count_and_partition(kafka_cluster: Any, topic_factory: Any) -> None:
    topic = topic_factory(partitions=2)
    ok(kiel("-b", kafka_cluster.bootstrap, "produce", topic, "-p", "1",
            input=b"a\nb\nc\n"))
    result = ok(kiel("-b", kafka_cluster.bootstrap, "consume", topic, "--from", "beginning",
                     "-p", "1", "-c", "2", "--json"))
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(d["partition"], d["offset"], d["key"], d["value"]) for d in docs] == [
        (1, 0, None, "a"), (1, 1, None, "b")]


@pytest.mark.zookeeper
def test_consume_json_refuses_binary_unless_base64(kafka_cluster: Any, topic_factory: Any) -> None:
    topic = topic_factory(partitions=1)
    ok(kiel("-b", kafka_cluster.bootstrap, "produce", topic, input=b"\xff\xfe\n"))
    result = kiel("-b", kafka_cluster.bootstrap, "consume", topic, "-e", "--json")
    assert result.returncode == 1 and b"--binary base64" in result.stderr
    result = ok(kiel("-b", kafka_cluster.bootstrap, "consume", topic, "-e", "--json",
                     "--binary", "base64"))
    assert json.loads(result.stdout)["value"] == "//4="


@pytest.mark.zookeeper
def test_topics_list_and_describe(kafka_cluster: Any, topic_factory: Any) -> None:
    topic = topic_factory(partitions=3)
    ok(kiel("-b", kafka_cluster.bootstrap, "produce", topic, "-p", "2", input=b"x\ny\n"))
    listed = ok(kiel("-b", kafka_cluster.bootstrap, "topics")).stdout.decode()
    assert f"{topic}\t3 partitions" in listed
    described = json.loads(ok(kiel("-b", kafka_cluster.bootstrap, "topics", topic,
                                   "--json")).stdout)
    (only,) = described
    assert only["topic"] == topic
    parts = {p["partition"]: p for p in only["partitions"]}
    assert sorted(parts) == [0, 1, 2]
    assert parts[2]["highwater"] == 2 and parts[0]["highwater"] == 0
    assert all(p["earliest"] == 0 for p in parts.values())
    for p in parts.values():  # a live leader each, one of its replicas and in sync
        assert p["leader"] in p["replicas"] and p["leader"] in p["isr"]


@pytest.mark.zookeeper
def test_unknown_topic_is_a_clear_error(kafka_cluster: Any) -> None:
    # the embedded cluster auto-creates topics named in a Metadata request,
    # as 0.8 does: kiel never names one (tests/cli/test_cli_behaviour.py checks
    # that it is not created)
    result = kiel("-b", kafka_cluster.bootstrap, "topics", "no-such-topic-" + uuid.uuid4().hex)
    assert result.returncode == 1 and b"unknown topic" in result.stderr, result.stderr


def test_missing_brokers_is_a_usage_error() -> None:
    result = kiel("consume", "t")
    assert result.returncode == 1 and b"-b/--brokers" in result.stderr


# ----------------------------------------------------------------------
# groups


async def _run_group(cluster: Any, group: str, topic: str, count: int) -> Dict[str, Any]:
    consumer = GroupedConsumer(cluster.bootstrap, group, zk_hosts=cluster.zookeeper, topics=[topic],
                               max_wait_time=0.2, commit_interval=None)
    await consumer.connect()
    seen = 0
    while seen < count:
        seen += len(await consumer.consume())
    # auto_finish: asking for more finishes the last batch handed out
    assert await consumer.consume() == []
    await consumer.commit()
    return {"consumer": consumer, "seen": seen}


@pytest.mark.zookeeper
def test_group_list_describe_reset(kafka_cluster: Any, topic_factory: Any) -> None:
    topic = topic_factory(partitions=3)
    group = unique("cli")
    ok(kiel("-b", kafka_cluster.bootstrap, "produce", topic,
            input=b"".join(b"m%d\n" % i for i in range(30))))

    async def scenario() -> None:
        state = await _run_group(kafka_cluster, group, topic, 30)
        consumer = state["consumer"]
        try:
            # the group is live: list shows it, describe shows its owner and lag
            zk = kafka_cluster.zookeeper
            listed = await asyncio.to_thread(
                kiel, "-z", zk, "group", "list", "--json")
            assert group in json.loads(ok(listed).stdout)
            described = json.loads(ok(await asyncio.to_thread(
                kiel, "-b", kafka_cluster.bootstrap, "-z", zk, "group", "describe", group,
                "--json")).stdout)
            assert described["members"] == [consumer.member_id]
            rows = {(r["topic"], r["partition"]): r for r in described["partitions"]}
            assert sorted(rows) == [(topic, 0), (topic, 1), (topic, 2)]
            for row in rows.values():
                assert row["owner"] == consumer.member_id
                assert row["lag"] == 0 and row["committed"] == row["highwater"]
            assert sum(r["highwater"] for r in rows.values()) == 30

            # a reset is refused while a member is alive
            refused = await asyncio.to_thread(
                kiel, "-b", kafka_cluster.bootstrap, "-z", zk, "group", "reset", group,
                "--topic", topic, "--to", "earliest")
            assert refused.returncode == 1 and b"live member" in refused.stderr
        finally:
            await consumer.close()

        ok(await asyncio.to_thread(
            kiel, "-b", kafka_cluster.bootstrap, "-z", kafka_cluster.zookeeper, "group",
            "reset", group, "--topic", topic, "--to", "earliest", "--execute"))
        # the group's next start is the beginning: all 30 again
        again = await _run_group(kafka_cluster, group, topic, 30)
        assert again["seen"] == 30
        await again["consumer"].close()

    asyncio.run(asyncio.wait_for(scenario(), 180))


@pytest.mark.zookeeper
def test_group_describe_unknown_group(kafka_cluster: Any) -> None:
    result = kiel("-b", kafka_cluster.bootstrap, "-z", kafka_cluster.zookeeper, "group",
                  "describe", "no-such-group-" + uuid.uuid4().hex[:6])
    assert result.returncode == 1 and b"no group" in result.stderr


@pytest.mark.zookeeper
def test_group_describe_agrees_with_the_members_own_views(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    """Two live members, lags that differ per partition and are not zero:
    ``kiel group describe`` shows, per partition, the owner whose
    assignment() holds it, the member's committed() offset and highwater(),
    and the lag that the member's lag() and metrics() report (they agree
    the position is the commit: describe measures from the commit, lag()
    from the position)."""
    from kiel.producer import Producer

    topic = topic_factory(partitions=4)
    group = unique("cli")
    zk = kafka_cluster.zookeeper

    async def scenario() -> None:
        async with Producer(kafka_cluster.bootstrap, linger=0.005) as producer:
            await asyncio.gather(*(producer.produce(topic, b"v", partition=p)
                                   for p, n in enumerate([3, 6, 9, 12]) for _ in range(n)))
        members = [GroupedConsumer(kafka_cluster.bootstrap, group, zk_hosts=zk, topics=[topic],
                                   member_id=name, max_wait_time=0.2, commit_interval=None,
                                   auto_finish=False, revoke_timeout=1.0)
                   for name in ("a", "b")]
        try:
            await members[0].connect()
            await members[1].connect()
            await until(lambda: all(len(m.assignment()) == 2 for m in members), timeout=30,
                        what="two partitions each")
            seen = 0
            while seen < 30:
                for m in members:
                    seen += len(await m.consume())
            # Partition p is p + 1 records behind: committed there (the
            # records below count as finished), and read from there again.
            ends = [3, 6, 9, 12]
            want = {p: p + 1 for p in range(4)}
            for m in members:
                back = {(topic, tp.partition): ends[tp.partition] - want[tp.partition]
                        for tp in m.assignment()}
                await m.commit(back)
                for (_, partition), offset in back.items():
                    m.seek(topic, partition, offset)
            described = json.loads(ok(await asyncio.to_thread(
                kiel, "-b", kafka_cluster.bootstrap, "-z", zk, "group", "describe", group,
                "--json")).stdout)
            assert sorted(described["members"]) == ["a", "b"]
            rows = {r["partition"]: r for r in described["partitions"] if r["topic"] == topic}
            assert sorted(rows) == [0, 1, 2, 3]
            for m in members:
                metric_lags = m.metrics().lag
                for tp in m.assignment():
                    row = rows[tp.partition]
                    assert row["owner"] == m.member_id
                    assert row["committed"] == await m.committed(topic, tp.partition)
                    assert row["highwater"] == m.highwater(topic, tp.partition)
                    assert row["lag"] == m.lag(topic, tp.partition) == want[tp.partition]
                    assert metric_lags[TopicPartition(topic, tp.partition)] == row["lag"]
        finally:
            for m in members:
                await m.close()

    asyncio.run(asyncio.wait_for(scenario(), 180))


# ----------------------------------------------------------------------
# groups the brokers coordinate (no -z), judged by Tansu

#: Records per partition, and how far behind the log end each is committed.
ENDS = [4, 6, 8]
LAG_BEHIND = [1, 2, 3]
#: The states of a group with members (Tansu's rebalances take 5-8 s).
LIVE = ("Stable", "PreparingRebalance", "CompletingRebalance")


async def _produce_singly(bootstrap: str, topic: str) -> None:
    """ENDS[p] records to each partition p, one batch each: Tansu answers
    ListOffsets LATEST with the last batch's base offset plus one, which is
    the log end only for one-record batches (docs/guides/current_brokers.rst)."""
    from kiel.producer import Producer

    async with Producer(bootstrap, linger=0) as producer:
        for p, n in enumerate(ENDS):
            for i in range(n):
                await producer.produce(topic, b"v%d" % i, partition=p)


def _broker_member(bootstrap: str, group: str, topic: str) -> GroupedConsumer:
    return GroupedConsumer(bootstrap, group, topics=[topic], session_timeout=6.0,
                           heartbeat_interval=1.0, max_wait_time=0.2, commit_interval=None,
                           auto_finish=False, revoke_timeout=1.0)


async def _consume(consumer: GroupedConsumer, count: int) -> int:
    seen = 0
    while seen < count:
        seen += len(await consumer.consume())
    return seen


def _describe(bootstrap: str, group: str) -> Dict[str, Any]:
    return json.loads(ok(kiel("-b", bootstrap, "group", "describe", group, "--json")).stdout)


def test_broker_group_list_describe_reset_on_tansu(tansu_broker: Any) -> None:
    """A live kiel member of a broker group: ``group list`` shows the group,
    ``group describe`` its committed offset, log end and lag per partition
    (JSON and aligned text), ``group reset`` is refused while it lives (and
    a commit from outside, should one slip past the check, is refused by
    the coordinator as NonEmptyGroupError); once it closed the reset goes
    through, describe shows the new offsets, and the next member starts there."""
    bs = tansu_broker.bootstrap
    topic = tansu_broker.create_topic(unique("cli"), 3)
    group = unique("cli")

    async def scenario() -> None:
        await _produce_singly(bs, topic)
        consumer = _broker_member(bs, group, topic)
        try:
            await consumer.connect()
            assert await _consume(consumer, sum(ENDS)) == sum(ENDS)
            await consumer.commit({(topic, p): ENDS[p] - LAG_BEHIND[p] for p in range(3)})

            listed = ok(await asyncio.to_thread(kiel, "-b", bs, "group", "list"))
            assert group in listed.stdout.decode().splitlines()
            listed = ok(await asyncio.to_thread(kiel, "-b", bs, "group", "list", "--json"))
            assert {"group": group, "protocol_type": "consumer"} in json.loads(listed.stdout)

            described = await asyncio.to_thread(_describe, bs, group)
            assert described["state"] in LIVE
            # Tansu lists members by id alone (no host, client id or assignment).
            assert {m["member_id"] for m in described["members"]} <= {consumer.member_id}
            rows = {(r["topic"], r["partition"]): r for r in described["partitions"]}
            assert sorted(rows) == [(topic, 0), (topic, 1), (topic, 2)]
            for p in range(3):
                row = rows[(topic, p)]
                assert (row["committed"], row["highwater"], row["lag"]) == (
                    ENDS[p] - LAG_BEHIND[p], ENDS[p], LAG_BEHIND[p])
                assert row["committed"] == await consumer.committed(topic, p)

            text = ok(await asyncio.to_thread(
                kiel, "-b", bs, "group", "describe", group)).stdout.decode()
            at = _table_at(text, "GROUP", "TOPIC")
            lines = text.splitlines()
            assert lines[at].split() == [
                "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                "CONSUMER-ID", "HOST", "CLIENT-ID"]
            assert [r[:6] for r in _text_rows(text, "GROUP", "TOPIC")] == [
                [group, topic, str(p), str(ENDS[p] - LAG_BEHIND[p]), str(ENDS[p]),
                 str(LAG_BEHIND[p])] for p in range(3)]
            # aligned: each row's LOG-END-OFFSET starts under its header
            column = lines[at].index("LOG-END-OFFSET")
            for line in lines[at + 1:at + 4]:
                assert line[column - 2:column] == "  " and line[column] != " ", line

            refused = await asyncio.to_thread(
                kiel, "-b", bs, "group", "reset", group, "--topic", topic, "--to", "earliest")
            assert refused.returncode == 1, refused.stdout
            assert b"stop its members first" in refused.stderr
            forced = await asyncio.to_thread(
                kiel, "-b", bs, "group", "reset", group, "--topic", topic, "--to", "earliest",
                "--force")
            assert forced.returncode == 1 and b"--force is for ZooKeeper groups" in forced.stderr

            # Past the check (a member joining between it and the commit):
            # the coordinator refuses a standalone commit to a live group.
            async with Client(bs) as client:
                with pytest.raises(NonEmptyGroupError, match="refused the reset"):
                    await _commit_from_outside(client.cluster, group,
                                               {TopicPartition(topic, 0): 0})
            assert await consumer.committed(topic, 0) == ENDS[0] - LAG_BEHIND[0]
        finally:
            await consumer.close()

        def inactive() -> bool:
            return _describe(bs, group)["state"] in ("Empty", "Dead")

        await asyncio.to_thread(wait_until, inactive, 30, "the group Empty once its member left",
                                0.2)

        moved = ok(await asyncio.to_thread(
            kiel, "-b", bs, "group", "reset", group, "--topic", topic, "--to", "earliest",
            "--execute"))
        assert _text_rows(moved.stdout.decode(), "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                          "NEW-OFFSET") == [
            [group, topic, str(p), str(ENDS[p] - LAG_BEHIND[p]), "0"] for p in range(3)]
        described = await asyncio.to_thread(_describe, bs, group)
        assert described["members"] == []
        assert [(r["committed"], r["lag"]) for r in described["partitions"]] == [
            (0, end) for end in ENDS]

        ok(await asyncio.to_thread(
            kiel, "-b", bs, "group", "reset", group, "--topic", topic, "--to-offset", "2",
            "--execute"))
        described = await asyncio.to_thread(_describe, bs, group)
        assert [r["committed"] for r in described["partitions"]] == [2, 2, 2]
        text = ok(await asyncio.to_thread(kiel, "-b", bs, "group", "describe", group)).stdout
        assert f"Consumer group '{group}' has no active members." in text.decode()

        # The group's next member starts where the reset put it.
        again = _broker_member(bs, group, topic)
        try:
            await again.connect()
            assert await _consume(again, sum(ENDS) - 6) == sum(ENDS) - 6
            assert [again.position(topic, p) for p in range(3)] == ENDS
        finally:
            await again.close()

    asyncio.run(asyncio.wait_for(scenario(), 240))


def test_broker_group_describe_unknown_group_on_tansu(tansu_broker: Any) -> None:
    result = kiel("-b", tansu_broker.bootstrap, "group", "describe", unique("nobody"))
    assert result.returncode == 1 and b"know no group" in result.stderr


@pytest.mark.parametrize("state", LIVE)
def test_a_live_state_is_not_resettable_even_without_members(state: str) -> None:
    """Tansu may describe a live group without its members: the state decides."""
    with pytest.raises(NonEmptyGroupError, match=f"is {state} with 0 member"):
        check_resettable(BrokerGroup("g", state, "consumer", "range", []))


def test_only_an_empty_or_dead_group_without_members_is_resettable() -> None:
    check_resettable(BrokerGroup("g", "Empty", "consumer", "", []))
    check_resettable(BrokerGroup("g", "Dead", "", "", []))
    member = BrokerGroupMember("m-1", None, "c", "/h", None, None, b"", b"")
    with pytest.raises(NonEmptyGroupError, match="m-1"):
        check_resettable(BrokerGroup("g", "Empty", "consumer", "", [member]))


def test_group_commands_need_brokers_or_zookeeper() -> None:
    result = kiel("group", "list")
    assert result.returncode == 1
    assert b"-b/--brokers" in result.stderr and b"-z/--zookeeper" in result.stderr


@pytest.mark.zookeeper
def test_broker_group_commands_on_a_0_8_cluster_say_to_pass_zookeeper(
    kafka_cluster: Any
) -> None:
    for args in (("list",), ("describe", "g"), ("reset", "g", "--topic", "t", "--to", "0")):
        result = kiel("-b", kafka_cluster.bootstrap, "group", *args)
        assert result.returncode == 1, result.stdout
        assert b"pass -z/--zookeeper" in result.stderr, result.stderr


def _render(described: Any, as_json: bool = False) -> str:
    import argparse
    import io

    from kiel.cli.groups import _write_broker_group

    out = io.StringIO()
    _write_broker_group(argparse.Namespace(json=as_json), out, described)
    return out.getvalue()


def test_describe_shows_decoded_members_and_their_partitions() -> None:
    """What a coordinator that sends the members' bytes (Apache Kafka) gets:
    owners, hosts and client ids per partition, and each member's assignment."""
    from kiel.admin import BrokerGroupDescription, GroupPartition
    from kiel.protocol import ConsumerAssignment, ConsumerSubscription

    members = [
        BrokerGroupMember("m-1", None, "kiel", "/10.0.0.1", ConsumerSubscription(["t", "u"]),
                          ConsumerAssignment([("t", [1, 0]), ("u", [0])]), b"", b""),
        BrokerGroupMember("m-2", "i-2", "rdkafka", "/10.0.0.2", ConsumerSubscription(["t"]),
                          ConsumerAssignment([("t", [2])]), b"", b""),
    ]
    rows = [GroupPartition("t", 0, "m-1", 5, 9, 4), GroupPartition("t", 1, "m-1", None, 3, None),
            GroupPartition("t", 2, "m-2", 7, 7, 0), GroupPartition("u", 0, "m-1", 0, 0, 0)]
    described = BrokerGroupDescription(
        BrokerGroup("g", "Stable", "consumer", "range", members), rows)
    text = _render(described)
    assert _text_rows(text, "GROUP", "STATE") == [["g", "Stable", "range", "2", "4"]]
    assert _text_rows(text, "GROUP", "TOPIC") == [
        ["g", "t", "0", "5", "9", "4", "m-1", "/10.0.0.1", "kiel"],
        ["g", "t", "1", "-", "3", "-", "m-1", "/10.0.0.1", "kiel"],
        ["g", "t", "2", "7", "7", "0", "m-2", "/10.0.0.2", "rdkafka"],
        ["g", "u", "0", "0", "0", "0", "m-1", "/10.0.0.1", "kiel"]]
    assert _text_rows(text, "GROUP", "CONSUMER-ID") == [
        ["g", "m-1", "/10.0.0.1", "kiel", "3", "t(0,1)", "u(0)"],
        ["g", "m-2", "/10.0.0.2", "rdkafka", "1", "t(2)"]]
    assert "no active members" not in text and "coordinator" not in text

    doc = json.loads(_render(described, as_json=True))
    assert doc["members"][1] == {"member_id": "m-2", "group_instance_id": "i-2",
                                 "client_id": "rdkafka", "host": "/10.0.0.2",
                                 "subscription": ["t"], "assignment": {"t": [2]}}
    assert doc["partitions"][1] == {"topic": "t", "partition": 1, "owner": "m-1",
                                    "committed": None, "highwater": 3, "lag": None,
                                    "past_end": False, "host": "/10.0.0.1",
                                    "client_id": "kiel"}


def test_describe_says_when_a_live_group_lists_no_members() -> None:
    """A live group described without members: no member table, no owners,
    and a sentence that says the owners are unknown (not that nobody owns)."""
    from kiel.admin import BrokerGroupDescription, GroupPartition

    described = BrokerGroupDescription(BrokerGroup("g", "Stable", "consumer", "", []),
                                       [GroupPartition("t", 0, None, 3, 5, 2)])
    text = _render(described)
    assert _text_rows(text, "GROUP", "TOPIC") == [["g", "t", "0", "3", "5", "2", "-", "-", "-"]]
    assert "#PARTITIONS" not in text
    assert "lists no members although the group is Stable" in text
    assert json.loads(_render(described, as_json=True))["members"] == []


def test_produce_waits_for_room_instead_of_failing_past_the_producers_bound(
    kafka_cluster: Any, topic_factory: Any, monkeypatch: Any
) -> None:
    # Every record the producer holds counts against max_pending_bytes and
    # produce() fails fast past it: the command must wait for room (enqueue).
    import argparse
    import functools
    import io

    import kiel.clients
    from kiel import cli

    topic = topic_factory(partitions=1)
    monkeypatch.setattr(kiel.clients, "Producer",
                        functools.partial(kiel.clients.Producer, max_pending_bytes=64 * 1024))
    args = argparse.Namespace(
        brokers=kafka_cluster.bootstrap, topic=topic, partition=None, delimiter="\\n",
        key_delimiter=None, compression=None, acks=1, client_id="kiel-cli-test", timeout=30.0,
        tls=False, ca_file=None, cert_file=None, key_file=None, sasl_mechanism=None,
        sasl_username=None,
    )
    lines = b"".join(b"%06d " % i + b"x" * 1000 + b"\n" for i in range(400))  # ~400 KB
    err = io.StringIO()

    async def main() -> int:
        kafka_cluster.set_latency(0.2, "Produce")
        try:
            return await cli.produce(args, io.BytesIO(lines), err)
        finally:
            kafka_cluster.set_latency(0.0, "Produce")

    assert asyncio.run(asyncio.wait_for(main(), 120)) == 0
    assert err.getvalue() == f"produced 400 messages to {topic}\n"
