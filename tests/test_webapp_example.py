"""examples/webapp.py runs for real: HTTP in, Kafka through, graceful SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

from kiel.testing.process import free_ports
from kiel.testing.tansu import TansuBroker

ROOT = Path(__file__).resolve().parent.parent


def _line(proc: Any) -> Dict[str, Any]:
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    return json.loads(line)


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
        return resp.read().decode()


def _get_typed(port: int, path: str) -> Tuple[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def _samples(content_type: str, body: str) -> Dict[Tuple[str, str, Optional[str]], float]:
    """``/metrics`` as ``{(name, client, partition): value}``, from either format:
    Prometheus text (prometheus_client installed), or the JSON snapshot."""
    out: Dict[Tuple[str, str, Optional[str]], float] = {}
    if content_type.startswith("application/json"):
        for client, metrics in json.loads(body).items():
            for name, values in metrics.items():
                for v in values:
                    out[(name, client, v["labels"].get("partition"))] = v["value"]
        return out
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            name = sample.name[:-len("_total")] if sample.name.endswith("_total") else sample.name
            key = (name, sample.labels["client"], sample.labels.get("partition"))
            out[key] = sample.value
    return out


def _post(port: int, body: bytes) -> Dict[str, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/events", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 201
        return json.loads(resp.read())


@pytest.mark.zookeeper
def test_webapp_produces_consumes_exposes_metrics_and_stops_gracefully() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "webapp.py")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        parts = _line(proc)
        assert {"brokers", "zookeeper"} <= set(parts)
        port = _line(proc)["port"]
        assert _get(port, "/healthz") == "ok\n"

        written = [_post(port, b"event-%d" % i) for i in range(40)]
        assert {w["partition"] for w in written} <= {0, 1, 2, 3}

        deadline = time.monotonic() + 60
        stats = json.loads(_get(port, "/stats"))
        while stats["consumed"] < 40 and time.monotonic() < deadline:
            time.sleep(0.2)
            stats = json.loads(_get(port, "/stats"))
        assert stats["consumed"] == 40 and stats["produced"] == 40
        assert stats["partitions"] == [0, 1, 2, 3]  # the only member owns all

        content_type, body = _get_typed(port, "/metrics")
        samples = _samples(content_type, body)
        assert samples[("kiel_consumer_records", "consumer", None)] == 40
        assert samples[("kiel_producer_records", "producer", None)] == 40
        lags = {key[2]: v for key, v in samples.items() if key[0] == "kiel_consumer_lag"}
        assert lags == {"0": 0, "1": 0, "2": 0, "3": 0}

        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == {"stopped": True, "consumed": 40}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_webapp_metrics_answer_json_without_prometheus_client() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("webapp_example", ROOT / "examples" / "webapp.py")
    assert spec is not None and spec.loader is not None
    webapp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(webapp)
    clients = webapp.Clients("127.0.0.1:1", "127.0.0.1:2", webapp.Stats())
    clients.registry = None  # what _registry() gives without prometheus_client
    content_type, body = clients.metrics()
    samples = _samples(content_type, body.decode())
    assert content_type == "application/json"
    assert samples[("kiel_consumer_records", "consumer", None)] == 0
    assert samples[("kiel_producer_pending_records", "producer", None)] == 0
    assert samples[("kiel_group_zookeeper_connected", "consumer", None)] == 1


def _health(port: int) -> Tuple[int, str]:
    """``/healthz``: its status and body (503 is an answer here, not a failure)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _post_any(port: int, body: bytes) -> Tuple[int, Dict[str, Any]]:
    """A POST that may be refused (503) during an outage."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/events", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.slow
def test_webapp_on_a_current_broker_rides_out_a_20_s_blackout(fault_proxy: Any) -> None:
    # No ZooKeeper: --brokers alone forms a broker group (before issue 35 the
    # example refused to start without --zookeeper). Tansu is reached only
    # through the fault proxy, which goes dark for 20 s.
    import threading

    from kiel.cluster import Cluster
    from kiel.consumer.offsets import GroupOffsets, list_offsets
    from kiel.protocol.list_offsets import LATEST
    from kiel.structs import TopicPartition
    from tests.conftest import run

    (tansu_port,) = free_ports(1)
    proxy = fault_proxy(("127.0.0.1", tansu_port))
    broker = TansuBroker(port=tansu_port, advertised_port=int(proxy.address.rsplit(":", 1)[1]))
    broker.start()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = None
    try:
        broker.create_topic("events", 4)
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "webapp.py"), "--brokers", broker.bootstrap],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        port = _line(proc)["port"]
        assert _health(port) == (200, "ok\n")
        written = [_post(port, b"before-%d" % i) for i in range(20)]

        # POSTs while the network is dark: each waits for the producer and
        # answers 201 once acknowledged, or 503 (the caller is told).
        answers: List[Tuple[int, Dict[str, Any]]] = []
        proxy.blackout()
        dark = time.monotonic()
        posts = [threading.Thread(target=lambda i=i: answers.append(
            _post_any(port, b"dark-%d" % i))) for i in range(5)]
        for thread in posts:
            thread.start()
        health_during = []
        while time.monotonic() - dark < 20:
            health_during.append(_health(port))
            time.sleep(1.0)
        proxy.restore()
        back = time.monotonic()
        for thread in posts:
            thread.join(90)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert any(code == 503 and "unhealthy" in body for code, body in health_during), \
            health_during
        assert all(code in (201, 503) for code, _a in answers), answers
        written += [answer for code, answer in answers if code == 201]
        written += [_post(port, b"after-%d" % i) for i in range(20)]

        # Healthy again, and every acknowledged record consumed: the group's
        # commits reach the end of every partition, past each record written.
        deadline = time.monotonic() + 90
        status = _health(port)
        while status[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.5)
            status = _health(port)
        assert status == (200, "ok\n"), status
        healthy_after = time.monotonic() - back
        tps = [TopicPartition("events", p) for p in range(4)]

        async def positions() -> Tuple[Dict[Any, Any], Dict[Any, Any]]:
            cluster = Cluster(broker.bootstrap)
            try:
                await cluster.connect()
                committed = await GroupOffsets(cluster, "webapp").fetch(tps)
                ends = await list_offsets(cluster, {tp: LATEST for tp in tps})
                return committed, ends
            finally:
                cluster.close()

        committed, ends = run(positions(), timeout=60)
        while committed != ends and time.monotonic() < deadline:
            time.sleep(0.5)
            committed, ends = run(positions(), timeout=60)
        assert committed == ends, (committed, ends)
        for w in written:
            assert w["offset"] < committed[TopicPartition("events", w["partition"])], w
        stats = json.loads(_get(port, "/stats"))
        assert stats["consumed"] >= len(written) and stats["refused"] == len(
            [a for a in answers if a[0] == 503])
        print(f"healthy {healthy_after:.1f} s after the network came back; "
              f"POSTs in the dark: {sorted(code for code, _a in answers)}")

        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["stopped"] is True
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.communicate()
        broker.close()
