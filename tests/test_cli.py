"""The ``kiel`` command, run as a subprocess against real ZooKeeper and the embedded brokers."""

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

from kiel.clients import GroupedConsumer
from tests.conftest import unique

pytestmark = pytest.mark.zookeeper


def kiel(*args: str, input: bytes = b"", timeout: float = 120, env: Any = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "kiel.cli", *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        env=env,
    )


def ok(result: Any) -> Any:
    assert result.returncode == 0, result.stderr.decode()
    return result


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


def test_consume_json_count_and_partition(kafka_cluster: Any, topic_factory: Any) -> None:
    topic = topic_factory(partitions=2)
    ok(kiel("-b", kafka_cluster.bootstrap, "produce", topic, "-p", "1",
            input=b"a\nb\nc\n"))
    result = ok(kiel("-b", kafka_cluster.bootstrap, "consume", topic, "--from", "beginning",
                     "-p", "1", "-c", "2", "--json"))
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(d["partition"], d["offset"], d["key"], d["value"]) for d in docs] == [
        (1, 0, None, "a"), (1, 1, None, "b")]


def test_consume_json_refuses_binary_unless_base64(kafka_cluster: Any, topic_factory: Any) -> None:
    topic = topic_factory(partitions=1)
    ok(kiel("-b", kafka_cluster.bootstrap, "produce", topic, input=b"\xff\xfe\n"))
    result = kiel("-b", kafka_cluster.bootstrap, "consume", topic, "-e", "--json")
    assert result.returncode == 1 and b"--binary base64" in result.stderr
    result = ok(kiel("-b", kafka_cluster.bootstrap, "consume", topic, "-e", "--json",
                     "--binary", "base64"))
    assert json.loads(result.stdout)["value"] == "//4="


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


def test_unknown_topic_is_a_clear_error(kafka_cluster: Any) -> None:
    result = kiel("-b", kafka_cluster.bootstrap, "topics", "no-such-topic-" + uuid.uuid4().hex)
    # the embedded cluster auto-creates topics: asking creates it, like 0.8 does
    assert result.returncode == 0, result.stderr


def test_missing_brokers_is_a_usage_error() -> None:
    result = kiel("consume", "t")
    assert result.returncode == 1 and b"-b/--brokers" in result.stderr


# ----------------------------------------------------------------------
# groups


async def _run_group(cluster: Any, group: str, topic: str, count: int) -> Dict[str, Any]:
    consumer = GroupedConsumer(cluster.bootstrap, group, cluster.zookeeper, topics=[topic],
                               max_wait_time=0.2, commit_interval=None)
    await consumer.connect()
    seen = 0
    while seen < count:
        seen += len(await consumer.consume())
    # auto_finish: asking for more finishes the last batch handed out
    assert await consumer.consume() == []
    await consumer.commit()
    return {"consumer": consumer, "seen": seen}


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
            "reset", group, "--topic", topic, "--to", "earliest"))
        # the group's next start is the beginning: all 30 again
        again = await _run_group(kafka_cluster, group, topic, 30)
        assert again["seen"] == 30
        await again["consumer"].close()

    asyncio.run(asyncio.wait_for(scenario(), 180))


def test_group_describe_unknown_group(kafka_cluster: Any) -> None:
    result = kiel("-b", kafka_cluster.bootstrap, "-z", kafka_cluster.zookeeper, "group",
                  "describe", "no-such-group-" + uuid.uuid4().hex[:6])
    assert result.returncode == 1 and b"no group" in result.stderr


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
    from kiel.structs import TopicPartition
    from tests.waiting import until

    topic = topic_factory(partitions=4)
    group = unique("cli")
    zk = kafka_cluster.zookeeper

    async def scenario() -> None:
        async with Producer(kafka_cluster.bootstrap, linger=0.005) as producer:
            await asyncio.gather(*(producer.produce(topic, b"v", partition=p)
                                   for p, n in enumerate([3, 6, 9, 12]) for _ in range(n)))
        members = [GroupedConsumer(kafka_cluster.bootstrap, group, zk, topics=[topic],
                                   member_id=name, max_wait_time=0.2, commit_interval=None,
                                   auto_finish=False)
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
