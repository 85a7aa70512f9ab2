"""Style and types are part of the build (what ``tox -e lint`` and ``tox -e types`` run)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def test_ruff_is_clean() -> None:
    result = run("ruff", "check", "kiel", "tests", "benchmarks", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = run("mypy", "kiel")
    assert result.returncode == 0, result.stdout + result.stderr
