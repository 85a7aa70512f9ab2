"""``make demo`` runs green end to end (real ZooKeeper, embedded brokers, kiel clients)."""
import subprocess
import sys


def test_demo_runs_green() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kiel.demo"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every message exactly once: True" in result.stdout
    assert "each user's views in order: True" in result.stdout
    assert "0 missed, 0 twice" in result.stdout
    # The current-broker act (kiel.demo_current): Tansu, then noida-db.
    assert "every order exactly once: True" in result.stdout
    assert "read_committed read exactly the committed transaction: True" in result.stdout
    assert "Future exception was never retrieved" not in result.stderr
