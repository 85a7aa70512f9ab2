"""examples/webapp.py runs for real: HTTP in, Kafka through, graceful SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.zookeeper


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
