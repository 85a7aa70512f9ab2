"""kcat (librdkafka) against the embedded 0.8.2 cluster: metadata, produce, consume.

kcat is told the broker is 0.8.2 (no ApiVersions request, legacy protocol).
A missing kcat fails these tests: ``apt-get install kcat``.
"""
import json
import subprocess

import pytest

from kiel.protocol import FetchPartitionData, FetchRequest, FetchTopicData
from kiel.protocol.messages import decode_message_set, iter_message_boundaries
from kiel.testing.broker.rawclient import RawClient

pytestmark = [pytest.mark.interop, pytest.mark.zookeeper]

LEGACY = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.8.2.2"]


def run(kcat, cluster, *args, input=None):
    result = subprocess.run([kcat, "-b", cluster.bootstrap, *args, *LEGACY], input=input,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def consume(kcat, cluster, topic, partition=None):
    args = ["-C", "-t", topic, "-o", "beginning", "-e", "-J"]
    if partition is not None:
        args += ["-p", str(partition)]
    lines = run(kcat, cluster, *args).splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def stored(cluster, topic, partition):
    """The partition's raw log bytes, fetched from its leader."""
    with RawClient(cluster.address(cluster.leader(topic, partition))) as client:
        response = client.request(FetchRequest(-1, 0, 0, [FetchTopicData(topic, [
            FetchPartitionData(partition, 0, 1 << 20)])]))
    return response.topics[0].partitions[0].message_set


def test_kcat_lists_metadata(kcat, kafka_cluster, topic_factory):
    topic = topic_factory(partitions=4)
    meta = json.loads(run(kcat, kafka_cluster, "-L", "-J"))
    assert sorted((b["id"], b["name"]) for b in meta["brokers"]) == \
        [(i, kafka_cluster.address(i)) for i in (1, 2, 3)]
    (listed,) = [t for t in meta["topics"] if t["topic"] == topic]
    described = kafka_cluster.describe()["topics"][topic]
    assert [(p["partition"], p["leader"], [r["id"] for r in p["replicas"]])
            for p in listed["partitions"]] == \
        [(int(p), d["leader"], d["replicas"]) for p, d in described.items()]
    assert {p["leader"] for p in listed["partitions"]} == {1, 2, 3}


@pytest.mark.parametrize("codec,codec_id", [("none", 0), ("gzip", 1), ("snappy", 2)])
def test_kcat_produces_and_consumes_back(kcat, kafka_cluster, topic_factory, codec, codec_id):
    topic = topic_factory(partitions=2)
    lines = [f"key{i}:value-{codec}-{i}" for i in range(50)]
    run(kcat, kafka_cluster, "-P", "-t", topic, "-p", "1", "-K:", "-z", codec,
        input="\n".join(lines) + "\n")
    data = stored(kafka_cluster, topic, 1)
    bounds = list(iter_message_boundaries(data))
    # librdkafka batches: with a codec the broker stored one recompressed wrapper
    # (snappy rewritten in xerial framing, as the 0.8.2 broker's Java codec writes it).
    assert {data[b.start + 17] & 0x07 for b in bounds} == {codec_id}
    if codec == "snappy":
        assert all(data[b.start + 26:b.start + 34] == b"\x82SNAPPY\x00" for b in bounds)
    assert [r.offset for r in decode_message_set(data).records] == list(range(50))

    consumed = consume(kcat, kafka_cluster, topic, 1)
    assert [(m["offset"], m["key"], m["payload"]) for m in consumed] == \
        [(i, f"key{i}", f"value-{codec}-{i}") for i in range(50)]
    assert consume(kcat, kafka_cluster, topic, 0) == []


def test_kcat_consumes_after_a_leader_move(kcat, kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    run(kcat, kafka_cluster, "-P", "-t", topic, "-p", "0", input="a\nb\n")
    old = kafka_cluster.leader(topic, 0)
    kafka_cluster.move_leader(topic, 0, next(b for b in (1, 2, 3) if b != old))
    run(kcat, kafka_cluster, "-P", "-t", topic, "-p", "0", input="c\n")
    assert [m["payload"] for m in consume(kcat, kafka_cluster, topic, 0)] == ["a", "b", "c"]
