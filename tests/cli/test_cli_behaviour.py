"""The ``kiel`` command behaves like the tools it stands beside: options
anywhere, ``--version``, exit codes, Ctrl-C, one ``--timeout`` deadline,
no topic created by asking about it, kafka-consumer-groups.sh's reset
options, ``--from -N``, kcat's ``-f`` and quiet logs. Each test runs the
command as a subprocess (``python -m kiel.cli``, as tests/cli/test_cli.py does)
against the embedded 0.8.2 cluster, real ZooKeeper or Tansu."""

import asyncio
import json
import logging
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from kiel.client import Client
from tests.conftest import unique
from tests.support.cli import _table_at, _text_rows, kiel, ok
from tests.support.waiting import wait_until

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "cli.rst"


def _spawn(*args: str, stdin: Any = subprocess.DEVNULL) -> "subprocess.Popen[bytes]":
    return subprocess.Popen([sys.executable, "-m", "kiel.cli", *args], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _timed(*args: str) -> "tuple[Any, float]":
    started = time.monotonic()
    result = kiel(*args, timeout=120)
    return result, time.monotonic() - started


def _produce(bootstrap: str, topic: str, per_partition: Dict[int, int]) -> None:
    for partition, count in per_partition.items():
        ok(kiel("-b", bootstrap, "produce", topic, "-p", str(partition),
                input=b"".join(b"v%d\n" % i for i in range(count))))


def _topic_names(bootstrap: str) -> List[str]:
    listed = ok(kiel("-b", bootstrap, "topics")).stdout.decode()
    return [line.split("\t")[0] for line in listed.splitlines()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ----------------------------------------------------------------------
# options, version, exit codes


def test_version() -> None:
    import kiel as package

    result = ok(kiel("--version"))
    assert result.stdout.decode().strip() == f"kiel {package.__version__}"


def test_exit_codes_usage_is_2_kiel_error_is_1_success_is_0() -> None:
    assert kiel("no-such-command").returncode == 2
    assert kiel("allocate", "--members", "a").returncode == 2  # --partitions missing
    assert kiel("--timeout", "soon", "topics").returncode == 2
    assert kiel("--timeout", "0", "topics", "-b", "h:1").returncode == 2
    failed = kiel("allocate", "--allocator", "nope", "--members", "a", "--partitions", "t:0")
    assert failed.returncode == 1 and failed.stderr.startswith(b"kiel allocate: ")
    assert ok(kiel("allocate", "--members", "a", "--partitions", "t:0")).returncode == 0


@pytest.mark.zookeeper
def test_global_options_work_after_the_command(kafka_cluster: Any, topic_factory: Any) -> None:
    topic = topic_factory(partitions=1)
    bs = kafka_cluster.bootstrap
    ok(kiel("produce", topic, "-b", bs, "--client-id", "after", input=b"a\nb\n"))
    before = ok(kiel("-b", bs, "consume", topic, "-e"))
    after = ok(kiel("consume", "-b", bs, topic, "-e", "--timeout", "20"))
    assert after.stdout == before.stdout == b"a\nb\n"
    listed = ok(kiel("group", "list", "-z", kafka_cluster.zookeeper, "--json"))
    assert isinstance(json.loads(listed.stdout), list)
    listed = ok(kiel("group", "-z", kafka_cluster.zookeeper, "list"))
    described = ok(kiel("topics", topic, "--json", "-b", bs))
    assert json.loads(described.stdout)[0]["topic"] == topic


# ----------------------------------------------------------------------
# Ctrl-C


def _interrupt(process: "subprocess.Popen[bytes]") -> "tuple[int, str]":
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    return process.returncode, err.decode()


@pytest.mark.zookeeper
def test_ctrl_c_ends_consume_quietly_with_a_summary(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    ok(kiel("-b", kafka_cluster.bootstrap, "produce", topic, input=b"x\ny\nz\n"))
    # follows for ever: a quiet topic's empty Fetch answers keep it past --timeout
    process = _spawn("-b", kafka_cluster.bootstrap, "consume", topic, "--timeout", "2")
    assert process.stdout is not None
    lines = [process.stdout.readline() for _ in range(3)]
    assert lines == [b"x\n", b"y\n", b"z\n"]
    time.sleep(4)
    assert process.poll() is None, process.communicate()
    code, err = _interrupt(process)
    assert code == 130, err
    assert err == f"interrupted: consumed 3 messages from {topic}\n"


@pytest.mark.zookeeper
def test_ctrl_c_ends_produce_quietly_with_a_summary(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    topic = topic_factory(partitions=1)
    # waiting for standard input is not waiting on the cluster: no --timeout
    process = _spawn("-b", kafka_cluster.bootstrap, "produce", topic, "--timeout", "2",
                     stdin=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.write(b"a\nb\nc\nd\n")
    process.stdin.flush()  # the pipe stays open: the command waits for more

    def written() -> bool:
        return ok(kiel("-b", kafka_cluster.bootstrap, "consume", topic, "-e")).stdout.count(
            b"\n") == 4

    wait_until(written, 60, "the four lines in the topic", 0.2)
    time.sleep(3)
    assert process.poll() is None, process.communicate()
    code, err = _interrupt(process)
    process.stdin.close()
    assert code == 130, err
    assert err == f"interrupted: produced 4 messages to {topic}\n"


# ----------------------------------------------------------------------
# --timeout: one deadline for the whole command


@pytest.mark.slow
@pytest.mark.zookeeper
def test_timeout_bounds_a_command_whose_broker_hangs_inside_a_request(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    """The brokers take every ListOffsets (then every Fetch) in and never
    answer: ``--timeout 4`` ends the command soon after 4 s (before: each
    attempt waited 4 s, then retried: 27 s; ``consume -e`` never ended)."""
    topic = topic_factory(partitions=2)
    bs = kafka_cluster.bootstrap
    ok(kiel("-b", bs, "produce", topic, input=b"a\nb\n"))
    try:
        kafka_cluster.set_latency(600, "ListOffsets")
        result, took = _timed("-b", bs, "--timeout", "4", "topics", topic)
        assert result.returncode == 1, result.stdout
        assert b"--timeout 4" in result.stderr, result.stderr
        assert took < 4 + 5, took
        kafka_cluster.set_latency(0, "ListOffsets")
        kafka_cluster.set_latency(600, "Fetch")
        result, took = _timed("-b", bs, "consume", topic, "-e", "--timeout", "4")
        # the deadline, before the Fetch's own bound (--timeout plus the
        # fetch's max_wait_time); other answers (metadata) do not count
        assert result.returncode == 1, result.stdout
        assert result.stderr.decode() == (
            f"consumed 0 messages from {topic}\n"
            "kiel consume: no answer from the brokers within --timeout 4 s\n")
        assert took < 4 + 5, took
    finally:
        kafka_cluster.set_latency(0, "ListOffsets")
        kafka_cluster.set_latency(0, "Fetch")


@pytest.mark.slow
@pytest.mark.zookeeper
def test_timeout_bounds_a_command_whose_broker_or_zookeeper_stalls(
    kafka_cluster: Any, fault_proxy: Any
) -> None:
    """A broker (its first Metadata request) and ZooKeeper (every request)
    behind a fault proxy that holds what they are sent: the command ends
    soon after ``--timeout``, with the same deadline for both."""
    broker = fault_proxy(kafka_cluster.brokers[0])
    broker.stall()
    result, took = _timed("--timeout", "4", "-b", broker.address, "topics")
    assert result.returncode == 1 and b"--timeout 4" in result.stderr, result.stderr
    assert took < 4 + 5, took

    host, _, chroot = kafka_cluster.zookeeper.partition("/")
    zookeeper = fault_proxy(host)
    zookeeper.blackout()
    result, took = _timed("--timeout", "4", "-z", f"{zookeeper.address}/{chroot}",
                          "group", "list")
    assert result.stderr == (
        b"kiel group: no answer from the brokers or ZooKeeper within --timeout 4 s\n")
    assert took < 4 + 5, took
    assert b"kazoo" not in result.stderr and result.stderr.count(b"\n") == 1, result.stderr


def test_the_default_timeout_is_the_same_for_brokers_and_zookeeper() -> None:
    import inspect

    from kiel import admin
    from kiel.cli.options import DEFAULTS
    from kiel.cluster import Cluster

    brokers = inspect.signature(Cluster).parameters["request_timeout"].default
    zookeeper = {inspect.signature(f).parameters["timeout"].default
                 for f in (admin.list_groups, admin.describe_group, admin.reset_group,
                           admin.reset_group_offsets)}
    assert zookeeper == {brokers} == {DEFAULTS["timeout"]}
    text = ok(kiel("--help")).stdout.decode()
    assert re.search(r"--timeout SECONDS\s+one deadline", text), text
    assert "(default 30)" in " ".join(text.split())


# ----------------------------------------------------------------------
# asking about a topic never creates it


@pytest.mark.zookeeper
def test_topics_and_reset_never_create_a_topic_on_0_8_with_auto_create(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    """The embedded cluster creates a topic named in a Metadata request (as
    0.8.2 with ``auto.create.topics.enable`` does)."""
    assert kafka_cluster.config.auto_create_topics
    bs = kafka_cluster.bootstrap
    missing = unique("never-created")
    result = kiel("-b", bs, "topics", missing)
    assert result.returncode == 1 and b"unknown topic" in result.stderr, result.stderr
    result = kiel("-b", bs, "-z", kafka_cluster.zookeeper, "group", "reset", unique("g"),
                  "--topic", missing, "--to-earliest", "--execute")
    assert result.returncode == 1 and b"unknown topic" in result.stderr, result.stderr
    assert missing not in _topic_names(bs)
    existing = topic_factory(partitions=1)
    assert existing in _topic_names(bs)


def test_topics_and_reset_never_create_a_topic_on_tansu(tansu_broker: Any) -> None:
    bs = tansu_broker.bootstrap
    missing = unique("never-created")
    result = kiel("-b", bs, "topics", missing)
    assert result.returncode == 1 and b"unknown topic" in result.stderr, result.stderr
    result = kiel("-b", bs, "group", "reset", unique("g"), "--topic", missing, "--to-earliest")
    assert result.returncode == 1 and b"unknown topic" in result.stderr, result.stderr
    assert missing not in _topic_names(bs)


# ----------------------------------------------------------------------
# group reset in kafka-consumer-groups.sh's terms


def _reset_rows(result: Any) -> Dict[int, List[str]]:
    text = ok(result).stdout.decode()
    return {int(row[2]): row for row in _text_rows(text, "GROUP", "TOPIC", "PARTITION",
                                                   "CURRENT-OFFSET", "NEW-OFFSET")}


def _committed(bootstrap: str, zk: str, group: str, topic: str) -> Dict[int, Any]:
    described = json.loads(ok(kiel("-b", bootstrap, "-z", zk, "group", "describe", group,
                                   "--json")).stdout)
    return {r["partition"]: r["committed"] for r in described["partitions"]
            if r["topic"] == topic}


@pytest.mark.zookeeper
def test_group_reset_dry_run_execute_and_every_target_on_zookeeper(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    bs, zk = kafka_cluster.bootstrap, kafka_cluster.zookeeper
    topic = topic_factory(partitions=3)
    other = topic_factory(partitions=1)
    group = unique("reset")
    _produce(bs, topic, {0: 10, 1: 10, 2: 10})
    _produce(bs, other, {0: 5})

    def reset(*args: str) -> Dict[int, List[str]]:
        return _reset_rows(kiel("-b", bs, "-z", zk, "group", "reset", group, *args))

    rows = reset("--topic", topic, "--to-offset", "4", "--execute")
    assert rows == {p: [group, topic, str(p), "-", "4"] for p in range(3)}
    assert _committed(bs, zk, group, topic) == {0: 4, 1: 4, 2: 4}

    # the default is a dry run: it shows old and new, and commits nothing
    dry = kiel("-b", bs, "-z", zk, "group", "reset", group, "--topic", topic, "--to-earliest")
    assert _reset_rows(dry) == {p: [group, topic, str(p), "4", "0"] for p in range(3)}
    assert b"dry run" in dry.stderr and b"--execute" in dry.stderr
    assert _committed(bs, zk, group, topic) == {0: 4, 1: 4, 2: 4}

    rows = reset("--topic", f"{topic}:0,2", "--shift-by", "-1", "--execute")
    assert rows == {0: [group, topic, "0", "4", "3"], 2: [group, topic, "2", "4", "3"]}
    assert _committed(bs, zk, group, topic) == {0: 3, 1: 4, 2: 3}
    # shifting past either end stops at it
    rows = reset("--topic", f"{topic}:1", "--shift-by", "100")
    assert rows == {1: [group, topic, "1", "4", "10"]}
    rows = reset("--topic", topic, "--to-current")
    assert {p: row[3:] for p, row in rows.items()} == {0: ["3", "3"], 1: ["4", "4"],
                                                       2: ["3", "3"]}
    rows = reset("--topic", topic, "--to-datetime", "2000-01-01T00:00:00")
    assert {p: row[4] for p, row in rows.items()} == {0: "0", 1: "0", 2: "0"}

    ok(kiel("-b", bs, "-z", zk, "group", "reset", group, "--topic", other, "--to-offset", "1",
            "--execute"))
    # describe: kafka-consumer-groups.sh's columns, and the total lag (7 + 6 + 7 + 4)
    text = ok(kiel("-b", bs, "-z", zk, "group", "describe", group)).stdout.decode()
    assert _text_rows(text, "GROUP", "#MEMBERS", "TOTAL-LAG") == [[group, "0", "24"]]
    assert text.splitlines()[_table_at(text, "GROUP", "TOPIC")].split() == [
        "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID"]
    assert sorted(r[1:6] for r in _text_rows(text, "GROUP", "TOPIC")) == sorted(
        [[topic, "0", "3", "10", "7"], [topic, "1", "4", "10", "6"], [topic, "2", "3", "10", "7"],
         [other, "0", "1", "5", "4"]])
    described = json.loads(ok(kiel("-b", bs, "-z", zk, "group", "describe", group,
                                   "--json")).stdout)
    assert described["total_lag"] == 24
    text = ok(kiel("-b", bs, "-z", zk, "group", "reset", group, "--all-topics", "--to-latest",
                   "--execute")).stdout.decode()
    rows_all = _text_rows(text, "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
    assert sorted((r[1], int(r[2]), r[3], r[4]) for r in rows_all) == sorted(
        [(topic, 0, "3", "10"), (topic, 1, "4", "10"), (topic, 2, "3", "10"),
         (other, 0, "1", "5")])

    for bad in (("--topic", topic, "--to-offset", "11"), ("--topic", f"{topic}:7", "--to-earliest"),
                ("--topic", topic), ("--to-earliest",),
                ("--topic", topic, "--to-earliest", "--to-latest")):
        result = kiel("-b", bs, "-z", zk, "group", "reset", group, *bad)
        assert result.returncode in (1, 2), (bad, result.stderr)
        assert result.stderr and b"Traceback" not in result.stderr, (bad, result.stderr)
    assert _committed(bs, zk, group, topic) == {0: 10, 1: 10, 2: 10}


def test_group_reset_and_total_lag_on_tansu(tansu_broker: Any) -> None:
    """A broker group with offsets and no members: describe shows its total
    lag; reset dry-runs by default, executes with ``--execute``, selects
    partitions, and shows old and new offsets."""
    from kiel.admin import _commit_from_outside
    from kiel.structs import TopicPartition

    bs = tansu_broker.bootstrap
    topic = tansu_broker.create_topic(unique("reset"), 2)
    group = unique("reset")

    async def setup() -> None:
        from kiel.producer import Producer

        async with Producer(bs, linger=0) as producer:
            for p in range(2):
                for i in range(6):
                    await producer.produce(topic, b"v%d" % i, partition=p)
        async with Client(bs) as client:
            await _commit_from_outside(client.cluster, group, {TopicPartition(topic, 0): 2,
                                                               TopicPartition(topic, 1): 5})

    asyncio.run(asyncio.wait_for(setup(), 60))
    text = ok(kiel("-b", bs, "group", "describe", group)).stdout.decode()
    assert _text_rows(text, "GROUP", "STATE")[0][-1] == "5"  # TOTAL-LAG: 4 + 1
    doc = json.loads(ok(kiel("-b", bs, "group", "describe", group, "--json")).stdout)
    assert doc["total_lag"] == 5

    dry = kiel("-b", bs, "group", "reset", group, "--topic", f"{topic}:1", "--to-earliest")
    assert _reset_rows(dry) == {1: [group, topic, "1", "5", "0"]}
    doc = json.loads(ok(kiel("-b", bs, "group", "describe", group, "--json")).stdout)
    assert [r["committed"] for r in doc["partitions"]] == [2, 5]
    rows = _reset_rows(kiel("-b", bs, "group", "reset", group, "--all-topics", "--shift-by",
                            "-2", "--execute"))
    assert {p: row[3:] for p, row in rows.items()} == {0: ["2", "0"], 1: ["5", "3"]}
    doc = json.loads(ok(kiel("-b", bs, "group", "describe", group, "--json")).stdout)
    assert [r["committed"] for r in doc["partitions"]] == [0, 3]
    assert doc["total_lag"] == 6 + 3


def test_a_committed_offset_past_the_log_end_is_shown_as_such_on_tansu(
    tansu_broker: Any,
) -> None:
    """A group that committed above a partition's log end (the log was lost
    since, as when Tansu restarts with its memory storage) is not caught up:
    ``group describe`` shows ``past-end`` and the JSON a lag of ``None`` with
    ``past_end``, never a lag of 0. And a group caught up after a batch of
    many records is not taken for one past the end, although Tansu's
    ListOffsets LATEST answers the last batch's base offset plus one: the
    leader's Fetch high watermark says where the log ends."""
    from kiel.admin import _commit_from_outside
    from kiel.producer import Producer
    from kiel.structs import TopicPartition

    bs = tansu_broker.bootstrap
    topic = tansu_broker.create_topic(unique("pastend"), 3)
    group = unique("pastend")

    async def setup() -> None:
        async with Producer(bs, linger=0.5) as producer:  # one batch of 6 records
            await asyncio.gather(*(producer.produce(topic, b"%d" % i, partition=0)
                                   for i in range(6)))
        async with Producer(bs, linger=0) as producer:
            for i in range(6):
                await producer.produce(topic, b"%d" % i, partition=1)
                await producer.produce(topic, b"%d" % i, partition=2)
        async with Client(bs) as client:
            await _commit_from_outside(client.cluster, group, {
                TopicPartition(topic, 0): 6, TopicPartition(topic, 1): 20,
                TopicPartition(topic, 2): 4})

    asyncio.run(asyncio.wait_for(setup(), 60))
    doc = json.loads(ok(kiel("-b", bs, "group", "describe", group, "--json")).stdout)
    assert [(r["committed"], r["highwater"], r["lag"], r["past_end"])
            for r in doc["partitions"]] == [(6, 6, 0, False), (20, 6, None, True),
                                            (4, 6, 2, False)]
    assert doc["total_lag"] == 2
    text = ok(kiel("-b", bs, "group", "describe", group)).stdout.decode()
    assert [r[1:6] for r in _text_rows(text, "GROUP", "TOPIC")] == [
        [topic, "0", "6", "6", "0"], [topic, "1", "20", "6", "past-end"],
        [topic, "2", "4", "6", "2"]]
    assert _text_rows(text, "GROUP", "STATE")[0][-1] == "2"  # TOTAL-LAG
    assert "LAG past-end: the committed offset is above the log end" in text


@pytest.mark.zookeeper
def test_a_committed_offset_past_the_log_end_is_shown_as_such_on_zookeeper(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    """The same for a 0.8 group: an offset committed (v0, into ZooKeeper)
    above the log end is ``past-end``, not a lag of 0."""
    from kiel.consumer.offsets import GroupOffsets
    from kiel.structs import TopicPartition

    bs, zk = kafka_cluster.bootstrap, kafka_cluster.zookeeper
    topic = topic_factory(partitions=2)
    group = unique("pastend")
    _produce(bs, topic, {0: 5, 1: 5})

    async def commit() -> None:
        async with Client(bs) as client:
            await GroupOffsets(client.cluster, group).commit(
                {TopicPartition(topic, 0): 9, TopicPartition(topic, 1): 3})

    asyncio.run(asyncio.wait_for(commit(), 60))
    doc = json.loads(ok(kiel("-b", bs, "-z", zk, "group", "describe", group, "--json")).stdout)
    assert [(r["committed"], r["highwater"], r["lag"], r["past_end"])
            for r in doc["partitions"]] == [(9, 5, None, True), (3, 5, 2, False)]
    assert doc["total_lag"] == 2
    text = ok(kiel("-b", bs, "-z", zk, "group", "describe", group)).stdout.decode()
    assert [r[1:6] for r in _text_rows(text, "GROUP", "TOPIC")] == [
        [topic, "0", "9", "5", "past-end"], [topic, "1", "3", "5", "2"]]
    assert "LAG past-end" in text


# ----------------------------------------------------------------------
# consume: --from -N, -f


@pytest.mark.zookeeper
def test_consume_from_minus_n_is_relative_to_the_end(
    kafka_cluster: Any, topic_factory: Any
) -> None:
    bs = kafka_cluster.bootstrap
    topic = topic_factory(partitions=2)
    _produce(bs, topic, {0: 10, 1: 2})
    result = ok(kiel("-b", bs, "consume", topic, "--from", "-3", "-e", "--json"))
    got = sorted((d["partition"], d["offset"]) for d in map(json.loads, result.stdout.splitlines()))
    assert got == [(0, 7), (0, 8), (0, 9), (1, 0), (1, 1)]


@pytest.mark.zookeeper
def test_consume_format_string_like_kcats(kafka_cluster: Any, topic_factory: Any) -> None:
    bs = kafka_cluster.bootstrap
    topic = topic_factory(partitions=1)
    ok(kiel("-b", bs, "produce", topic, "-K", ":", input=b"k1:v1\nk2:v2\n"))
    result = ok(kiel("-b", bs, "consume", topic, "-e", "-f",
                     r"%t|%p|%o|%k|%s|%h|%%\t%T\n"))
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 2
    for offset, line in enumerate(lines):
        fields, _, timestamp = line.partition("\t")
        assert fields == f"{topic}|0|{offset}|k{offset + 1}|v{offset + 1}||%"
        assert timestamp == "-1"  # a 0.8 message has no timestamp
    result = kiel("-b", bs, "consume", topic, "-e", "-f", "%x")
    assert result.returncode == 1 and b"%x" in result.stderr


def test_consume_format_shows_headers_and_timestamps_on_tansu(tansu_broker: Any) -> None:
    from kiel.producer import Producer

    bs = tansu_broker.bootstrap
    topic = tansu_broker.create_topic(unique("fmt"), 1)

    async def produce() -> None:
        async with Producer(bs, linger=0) as producer:
            await producer.produce(topic, b"v", key=b"k", partition=0,
                                   headers=[("h1", b"a"), ("h2", None)])

    asyncio.run(asyncio.wait_for(produce(), 60))
    result = ok(kiel("-b", bs, "consume", topic, "-e", "-f", r"%k=%s %h %T\n"))
    line = result.stdout.decode().rstrip("\n")
    kv, headers, timestamp = line.split(" ")
    assert (kv, headers) == ("k=v", "h1=a,h2")
    assert abs(int(timestamp) / 1000 - time.time()) < 3600


# ----------------------------------------------------------------------
# allocate --allocator weighted


def test_allocate_weighted_with_capacities() -> None:
    result = ok(kiel("allocate", "--allocator", "weighted", "--capacities", "a=3,b=1",
                     "--members", "a,b", "--partitions", "t:8*", "--json"))
    allocation = json.loads(result.stdout)
    assert (len(allocation["a"]["t"]), len(allocation["b"]["t"])) == (6, 2)
    equal = json.loads(ok(kiel("allocate", "--allocator", "weighted", "--members", "a,b",
                               "--partitions", "t:8*", "--json")).stdout)
    assert len(equal["a"]["t"]) == len(equal["b"]["t"]) == 4
    bad = kiel("allocate", "--allocator", "weighted", "--capacities", "a=lots",
               "--members", "a", "--partitions", "t:1*")
    assert bad.returncode == 1 and b"a=lots" in bad.stderr
    only = kiel("allocate", "--capacities", "a=1", "--members", "a", "--partitions", "t:1*")
    assert only.returncode == 1 and b"--capacities" in only.stderr


# ----------------------------------------------------------------------
# the guide's kcat line for 0.8 brokers works


@pytest.mark.zookeeper
def test_the_guides_kcat_flags_for_0_8_brokers_work(
    kafka_cluster: Any, topic_factory: Any, kcat: str
) -> None:
    topic = topic_factory(partitions=1)
    ok(kiel("-b", kafka_cluster.bootstrap, "produce", topic, input=b"from-kiel\n"))
    guide = GUIDE.read_text()
    match = re.search(r"^\s*(kcat -b \S+ (?:-X \S+ )+-C -t \S+ -e)\s*$", guide, re.M)
    assert match, "the guide gives a kcat command line for 0.8 brokers"
    words = shlex.split(match.group(1))
    assert "api.version.request=false" in words and "broker.version.fallback=0.8.2" in words
    words[0], words[2] = kcat, kafka_cluster.bootstrap
    words[words.index("-t") + 1] = topic
    result = subprocess.run(words, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == b"from-kiel\n"


# ----------------------------------------------------------------------
# logs


@pytest.mark.zookeeper
def test_a_0_8_broker_closing_on_apiversions_is_logged_at_debug(
    kafka_cluster: Any, caplog: Any
) -> None:
    async def connect() -> None:
        async with Client(kafka_cluster.bootstrap) as client:
            await client.cluster.all_topics()

    with caplog.at_level(logging.DEBUG, logger="kiel"):
        asyncio.run(asyncio.wait_for(connect(), 60))
    closed = [r for r in caplog.records if "closed the connection on ApiVersions" in r.message]
    assert closed and all(r.levelno == logging.DEBUG for r in closed)
    result = ok(kiel("-b", kafka_cluster.bootstrap, "topics"))
    assert result.stderr == b""


def test_kazoos_lines_reach_stderr_only_with_verbose() -> None:
    port = _free_port()  # nobody listens: kazoo logs every refused attempt
    quiet = kiel("--timeout", "2", "-z", f"127.0.0.1:{port}", "group", "list")
    assert quiet.returncode == 1
    assert quiet.stderr.decode().splitlines() == [
        line for line in quiet.stderr.decode().splitlines() if line.startswith("kiel group")]
    assert quiet.stderr.count(b"\n") == 1, quiet.stderr
    loud = kiel("-v", "--timeout", "2", "-z", f"127.0.0.1:{port}", "group", "list")
    assert loud.returncode == 1
    assert b"kazoo" in loud.stderr and loud.stderr.count(b"\n") > 1, loud.stderr


def test_verbose_is_an_option_anywhere() -> None:
    assert ok(kiel("allocate", "-vv", "--members", "a", "--partitions", "t:0")).stderr == b""

