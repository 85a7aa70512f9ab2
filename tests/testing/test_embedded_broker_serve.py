"""``python -m kiel.testing serve`` and ClusterProcess: the cluster in a subprocess."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from kazoo.client import KazooClient

from kiel.exc import ConfigError, HarnessError
from kiel.protocol import MetadataRequest
from kiel.testing.broker import ClusterProcess
from kiel.testing.broker.rawclient import RawClient
from tests.support.raw_requests import fetch_request, only, produce_request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def port_open(address):
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def start_serve(*args):
    process = subprocess.Popen([sys.executable, "-m", "kiel.testing", "serve", *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    started = time.monotonic()
    line = process.stdout.readline()
    return process, json.loads(line), time.monotonic() - started


def stop_serve(process):
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    assert out == b""  # exactly one line was printed, at start


def test_serve_prints_one_ready_line_and_stops_on_sigterm():
    process, ready, _ = start_serve("--brokers", "2", "--topic", "events:4", "--partitions", "2")
    try:
        assert set(ready) == {"zookeeper", "brokers", "control", "pid"}
        assert ready["zookeeper"] is None and len(ready["brokers"]) == 2
        with RawClient(ready["brokers"][0]) as client:
            meta = client.request(MetadataRequest([]))
        assert [(t.topic, len(t.partitions)) for t in meta.topics] == [("events", 4)]
    finally:
        stop_serve(process)
    assert not any(port_open(a) for a in ready["brokers"])


@pytest.mark.zookeeper
@pytest.mark.slow
def test_serve_with_its_own_zookeeper():
    process, ready, elapsed = start_serve("--brokers", "3", "--zookeeper", "--topic", "t")
    try:
        zk = KazooClient(hosts=ready["zookeeper"])
        zk.start(timeout=15)
        try:
            assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
            assert zk.exists("/brokers/topics/t")
        finally:
            zk.stop()
            zk.close()
    finally:
        stop_serve(process)
    assert elapsed < 30
    # Everything it started is gone, ZooKeeper included.
    assert not port_open(ready["zookeeper"])
    assert not any(port_open(a) for a in ready["brokers"])


def test_sigint_also_stops_serve():
    process, ready, _ = start_serve("--brokers", "1")
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=30)
    assert process.returncode == 0
    assert not port_open(ready["brokers"][0])


def test_cluster_process_fault_injection_over_the_control_channel():
    with ClusterProcess(brokers=3, partitions=3, topics={"p": 3}) as cluster:
        assert len(cluster.brokers) == 3 and cluster.zookeeper is None
        described = cluster.describe()
        assert sorted(described["topics"]["p"]) == ["0", "1", "2"]
        leader = cluster.leader("p", 0)
        address = cluster.brokers[leader - 1]
        with RawClient(address) as client:
            assert only(client.request(produce_request("p", 0, [b"a", b"b"]))).offset == 0
        assert cluster.offsets("p", 0) == [0, 2]

        cluster.inject_error("Fetch", 7, count=1)
        with RawClient(address) as client:
            assert only(client.request(fetch_request("p", 0, 0))).error_code == 7
            assert only(client.request(fetch_request("p", 0, 0))).error_code == 0

        cluster.stop_broker(leader)
        assert not port_open(address)
        assert cluster.leader("p", 0) != leader
        cluster.start_broker(leader)
        assert port_open(address)

        with pytest.raises(HarnessError):
            cluster.stop_broker(42)
        with pytest.raises(ConfigError):
            cluster.create_topic("p")
        assert cluster.errors() == []
