"""The web-app benchmark runs end to end at a tiny scale (counts checked, no timing)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_webapp_benchmark_runs_and_every_consumer_drains() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_webapp.py"), "--scale", "0.01",
         "--rate", "100"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    table = {line.split()[0]: line.split() for line in lines if line.split()
             and line.split()[0] in ("idle", "plain", "gzip")}
    assert set(table) == {"idle", "plain", "gzip"}
    # The script exits non-zero when a consumer misses or reorders messages;
    # the table shows what each drained.
    assert table["plain"][1] == "10,000" and table["gzip"][1] == "2,000"
