"""Embedded broker faults that take longer: restarts with on-disk logs, failover under load."""
import os
import socket

import pytest

from kiel.protocol import MetadataRequest
from kiel.protocol.messages import CODEC_GZIP, decode_message_set
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.broker.rawclient import RawClient
from tests.conftest import unique
from tests.support.raw_requests import fetch_request, only, produce_request
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def read_partition(cluster, topic, partition):
    """Every (offset, value) of a partition, fetched from its leader in 4 KiB steps."""
    values = []
    offset = 0
    with RawClient(cluster.address(cluster.leader(topic, partition))) as client:
        while True:
            result = only(client.request(fetch_request(topic, partition, offset, max_bytes=4096)))
            assert result.error_code == 0
            records = decode_message_set(result.message_set, min_offset=offset).records
            if not records:
                assert offset == result.high_watermark
                return values
            values += [(r.offset, r.value) for r in records]
            offset = records[-1].offset + 1


def produce_batches(cluster, topic, partitions, batches, tag):
    """Produce ``batches`` batches per partition (every third gzip); return what was acked."""
    acked = {p: [] for p in range(partitions)}
    clients = {}
    try:
        for b in range(batches):
            for p in range(partitions):
                leader = cluster.leader(topic, p)
                client = clients.get(leader) or clients.setdefault(
                    leader, RawClient(cluster.address(leader)))
                values = [f"{tag}-{p}-{b}-{i}".encode() for i in range(5)]
                result = only(client.request(produce_request(
                    topic, p, values, acks=-1, codec=CODEC_GZIP if b % 3 == 0 else 0)))
                assert result.error_code == 0
                acked[p] += [(result.offset + i, v) for i, v in enumerate(values)]
    finally:
        for client in clients.values():
            client.close()
    return acked


def test_cluster_restart_with_log_dir_loses_no_acked_message(zookeeper, tmp_path):
    hosts = unique(f"{zookeeper.hosts}/kiel-restart")
    options = dict(brokers=3, zookeeper=hosts, log_dir=str(tmp_path), partitions=3,
                   segment_bytes=2048)
    with EmbeddedCluster(**options) as cluster:
        cluster.create_topic("durable", 3)
        acked = produce_batches(cluster, "durable", 3, 20, "first")
        segments = cluster.describe()["topics"]["durable"]["0"]["segments"]
        assert segments > 1
        # A broker restart inside the running cluster keeps everything too.
        cluster.restart_broker(cluster.leader("durable", 0))
        assert read_partition(cluster, "durable", 0) == acked[0]
    # A torn write at the end of a segment file (a crash mid-append) is cut off on load.
    part_dir = tmp_path / "durable-1"
    last = sorted(os.listdir(part_dir))[-1]
    with open(part_dir / last, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x63\x00\x00\x01\x00garbage")
    with EmbeddedCluster(**options) as cluster:
        described = cluster.describe()["topics"]["durable"]
        assert described["0"]["segments"] == segments
        for p in range(3):
            assert read_partition(cluster, "durable", p) == acked[p]
        more = produce_batches(cluster, "durable", 3, 2, "second")
        for p in range(3):
            assert more[p][0][0] == acked[p][-1][0] + 1
            assert read_partition(cluster, "durable", p) == acked[p] + more[p]


def test_restart_without_zookeeper_keeps_topics_and_messages(tmp_path):
    cluster = EmbeddedCluster(brokers=2, log_dir=str(tmp_path), partitions=2)
    with cluster:
        cluster.create_topic("memo", 2, replication=2)
        acked = produce_batches(cluster, "memo", 2, 5, "x")
        ports = cluster.brokers
    cluster.start()  # the same object starts again: same ports, same logs
    try:
        assert cluster.brokers == ports
        for p in range(2):
            assert read_partition(cluster, "memo", p) == acked[p]
    finally:
        cluster.stop()


def test_failover_keeps_acked_messages_while_brokers_stop(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    acked = produce_batches(kafka_cluster, topic, 3, 3, "a")
    for victim in (1, 2):
        kafka_cluster.stop_broker(victim)
        more = produce_batches(kafka_cluster, topic, 3, 2, f"v{victim}")
        for p in range(3):
            acked[p] += more[p]
        kafka_cluster.start_broker(victim)
    kafka_cluster.stop_broker(3)
    with RawClient(kafka_cluster.address(1)) as client:
        meta = client.request(MetadataRequest([topic]))
    assert all(p.leader in (1, 2) for p in meta.topics[0].partitions)
    for p in range(3):
        assert read_partition(kafka_cluster, topic, p) == acked[p]


def test_brokers_register_again_after_session_expiry(zookeeper, kafka_cluster_factory):
    from kazoo.client import KazooClient

    cluster = kafka_cluster_factory(brokers=2)
    zookeeper.expire_session(cluster.zookeeper_client, wait_reconnect=True)
    watcher = KazooClient(hosts=cluster.zookeeper)
    watcher.start(timeout=15)
    try:
        wait_until(
            lambda: sorted(watcher.get_children("/brokers/ids")) == ["1", "2"]
            and watcher.exists("/controller"),
            what="brokers registered again",
        )
    finally:
        watcher.stop()
        watcher.close()


def test_brokers_keep_serving_while_zookeeper_is_down():
    from kiel.testing.zookeeper import ZooKeeperServer

    with ZooKeeperServer() as zk, EmbeddedCluster(brokers=2, zookeeper=zk.hosts,
                                                  topics={"up": 1}) as cluster:
        zk.stop()
        leader = cluster.address(cluster.leader("up", 0))
        with RawClient(leader) as client, RawClient(leader, timeout=0.5) as creator:
            # Data paths and metadata of known topics do not need ZooKeeper.
            assert only(client.request(produce_request("up", 0, [b"x"]))).error_code == 0
            assert client.request(MetadataRequest(["up"])).topics[0].error_code == 0
            # Creating a topic does: like 0.8.2's ZkClient, the broker waits for
            # ZooKeeper to come back (on an executor thread, the IOLoop serves on).
            creator.send(MetadataRequest(["later"]))
            with pytest.raises(socket.timeout):
                creator.receive()
            assert client.request(MetadataRequest(["up"])).topics[0].error_code == 0
            zk.start()
            creator.sock.settimeout(20)
            assert [(t.topic, t.error_code) for t in creator.receive().topics] == [("later", 5)]
            assert client.request(MetadataRequest(["later"])).topics[0].error_code == 0
        assert cluster.errors() == []
