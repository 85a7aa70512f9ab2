"""kafka-python against the embedded 0.8.2 cluster, and kcat <-> kafka-python cross checks.

kafka-python is pinned to the legacy protocol with ``api_version``. With
``(0, 8, 2)`` it commits offsets with OffsetCommit v1 (Kafka storage), which
this broker (like kiel) does not speak; with ``(0, 8, 1)`` it uses v0 commit
and fetch, which a 0.8.2 broker stores in ZooKeeper: the commit tests use that.
"""
import json
import subprocess
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from kazoo.client import KazooClient

pytestmark = [pytest.mark.interop, pytest.mark.zookeeper]

LEGACY = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.8.2.2"]


def producer(cluster, **options):
    return KafkaProducer(bootstrap_servers=cluster.bootstrap, api_version=(0, 8, 2),
                         retries=5, request_timeout_ms=10000, **options)


def consumer(cluster, api_version=(0, 8, 2), **options):
    options.setdefault("auto_offset_reset", "earliest")
    options.setdefault("enable_auto_commit", False)
    return KafkaConsumer(bootstrap_servers=cluster.bootstrap, api_version=api_version,
                         request_timeout_ms=10000, **options)


def drain(c, count, timeout=20.0):
    """Poll until ``count`` records arrived (bounded), then briefly for any extra."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for records in c.poll(timeout_ms=200).values():
            got += records
    for records in c.poll(timeout_ms=300).values():
        got += records
    return sorted(got, key=lambda m: (m.partition, m.offset))


def consume_all(cluster, topic, partitions, count, **options):
    c = consumer(cluster, **options)
    try:
        c.assign([TopicPartition(topic, p) for p in partitions])
        return [(m.partition, m.offset, m.key, m.value) for m in drain(c, count)]
    finally:
        c.close()


@pytest.fixture
def zk(kafka_cluster):
    client = KazooClient(hosts=kafka_cluster.zookeeper)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("acks", [1, "all"])
def test_produce_and_consume_with_manual_assignment(kafka_cluster, topic_factory, compression,
                                                    acks):
    topic = topic_factory(partitions=3)
    p = producer(kafka_cluster, acks=acks, compression_type=compression, linger_ms=5)
    futures = [p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 3)
               for i in range(30)]
    p.flush()
    metadata = [f.get(timeout=10) for f in futures]
    p.close()
    # Offsets the broker assigned, per partition 0..9 in send order.
    assert [(m.partition, m.offset) for m in metadata] == [(i % 3, i // 3) for i in range(30)]
    got = consume_all(kafka_cluster, topic, [0, 1, 2], 30)
    assert sorted(got) == sorted((i % 3, i // 3, b"k%d" % i, b"v%d" % i) for i in range(30))


def test_consumer_reset_latest_and_earliest_use_list_offsets(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    p = producer(kafka_cluster)
    for i in range(5):
        p.send(topic, value=b"old%d" % i, partition=0)
    p.flush()
    tp = TopicPartition(topic, 0)
    c = consumer(kafka_cluster, auto_offset_reset="latest")
    try:
        c.assign([tp])
        assert c.position(tp) == 5
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 5}
        p.send(topic, value=b"new", partition=0)
        p.flush()
        assert [m.value for m in drain(c, 1)] == [b"new"]
    finally:
        c.close()
        p.close()


def test_offset_commit_v0_round_trip_lands_in_zookeeper(kafka_cluster, topic_factory, zk):
    topic = topic_factory(partitions=2)
    p = producer(kafka_cluster)
    for i in range(10):
        p.send(topic, value=b"m%d" % i, partition=1)
    p.close()
    tp = TopicPartition(topic, 1)
    group = f"kp-{topic}"
    c = consumer(kafka_cluster, api_version=(0, 8, 1), group_id=group)
    try:
        c.assign([tp, TopicPartition(topic, 0)])
        # No commit yet: a 0.8.2 broker answers -1 with error 3, kafka-python reads "none".
        assert c.committed(tp) is None
        consumed = [m.offset for m in drain(c, 10)]
        assert consumed == list(range(10))
        c.commit({tp: OffsetAndMetadata(6, "ignored by v0", -1)})
        assert c.committed(tp) == 6
    finally:
        c.close()
    # Stored exactly where and how the 0.8.2 broker writes a v0 commit.
    data, _ = zk.get(f"/consumers/{group}/offsets/{topic}/1")
    assert data == b"6"
    assert kafka_cluster.committed_offset(group, topic, 1) == 6
    # A new member of the group resumes from there.
    c2 = consumer(kafka_cluster, api_version=(0, 8, 1), group_id=group)
    try:
        c2.assign([tp])
        assert [m.value for m in drain(c2, 4)] == [b"m6", b"m7", b"m8", b"m9"]
    finally:
        c2.close()


def test_producer_recovers_from_a_leader_move(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    p = producer(kafka_cluster, acks=1)
    try:
        p.send(topic, value=b"before", partition=0).get(timeout=10)
        old = kafka_cluster.leader(topic, 0)
        kafka_cluster.move_leader(topic, 0, next(b for b in (1, 2, 3) if b != old))
        # The old leader answers NotLeaderForPartition; kafka-python refreshes and retries.
        assert p.send(topic, value=b"after", partition=0).get(timeout=20).offset == 1
    finally:
        p.close()
    assert [v for *_, v in consume_all(kafka_cluster, topic, [0], 2)] == [b"before", b"after"]


def test_kcat_produces_kafka_python_consumes(kcat, kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    for codec in ("none", "gzip"):
        subprocess.run(
            [kcat, "-b", kafka_cluster.bootstrap, "-P", "-t", topic, "-p", "0", "-K:",
             "-z", codec, *LEGACY],
            input="".join(f"{codec}{i}:val-{codec}-{i}\n" for i in range(20)),
            text=True, capture_output=True, timeout=60, check=True)
    got = consume_all(kafka_cluster, topic, [0, 1], 40)
    expected = [(0, n, f"{c}{i}".encode(), f"val-{c}-{i}".encode())
                for n, (c, i) in enumerate((c, i) for c in ("none", "gzip") for i in range(20))]
    assert got == expected


def test_kafka_python_produces_kcat_consumes(kcat, kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    p = producer(kafka_cluster, compression_type="gzip", linger_ms=20)
    for i in range(25):
        p.send(topic, key=b"key%d" % i, value=b"payload %d" % i, partition=0)
    p.close()
    result = subprocess.run(
        [kcat, "-b", kafka_cluster.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning",
         "-e", "-J", *LEGACY], text=True, capture_output=True, timeout=60, check=True)
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [(r["offset"], r["key"], r["payload"]) for r in rows] == \
        [(i, f"key{i}", f"payload {i}") for i in range(25)]
