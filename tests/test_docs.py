"""The docs build without a warning (what ``tox -e docs`` and ``make docs`` run)."""
import os
import subprocess
import sys


def test_sphinx_builds_without_warnings(tmp_path) -> None:
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", docs, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
