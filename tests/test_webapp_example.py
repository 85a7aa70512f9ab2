"""examples/webapp.py runs for real: HTTP in, Kafka through, graceful SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict

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

        metrics = _get(port, "/metrics")
        assert "kiel_consumer_records_total 40" in metrics
        lags = [line for line in metrics.splitlines() if line.startswith("kiel_consumer_lag{")]
        assert len(lags) == 4 and all(line.endswith(" 0") for line in lags)

        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == {"stopped": True, "consumed": 40}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
