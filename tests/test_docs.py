"""The docs build without a warning (what ``tox -e docs`` and ``make docs`` run),
and every example in them runs."""
import os
import re
import subprocess
import sys

import pytest


def test_sphinx_builds_without_warnings(tmp_path) -> None:
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", docs, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.zookeeper
def test_every_example_in_the_docs_runs(tmp_path) -> None:
    """``sphinx-build -b doctest``: every ``testcode`` and ``doctest`` block of
    docs/ runs against kiel.testing (the embedded cluster, the real ZooKeeper,
    Tansu, Spark; see docs/examples_env.py) and its output matches."""
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "doctest", docs, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = (tmp_path / "output.txt").read_text() if (tmp_path / "output.txt").exists() else ""
    assert result.returncode == 0, report + result.stdout[-5000:] + result.stderr[-5000:]
    ran = re.search(r"^\s*(\d+) tests\s*$", report.split("Doctest summary")[-1], re.M)
    assert ran is not None, report
    # Fewer than this means examples stopped being collected (a directive
    # renamed back to code-block, a page left out), not that they pass.
    assert int(ran.group(1)) >= 70, report
    assert "0 failures in tests" in report, report


def test_every_test_file_the_docs_and_code_name_exists() -> None:
    # The docs say what was judged and where ("tests/consumer/test_x.py"):
    # a path left behind by a move of the tests is a claim nobody can check.
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    named = set()
    for top in ("docs", "kiel", "examples", "benchmarks", "README.rst", "README.md"):
        path = os.path.join(root, top)
        files = [path] if os.path.isfile(path) else [
            os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs
            if f.endswith((".rst", ".py", ".md", ".txt"))]
        for name in files:
            with open(name, encoding="utf-8") as f:
                named |= {(m, os.path.relpath(name, root))
                          for m in re.findall(r"\btests/[\w/]+\.py\b", f.read())}
    assert named, "no test file is named anywhere: the pattern is wrong"
    missing = sorted((m, where) for m, where in named if not os.path.exists(os.path.join(root, m)))
    assert missing == []
