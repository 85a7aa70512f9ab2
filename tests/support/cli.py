"""Running the ``kiel`` command as a subprocess and reading what it printed."""

import subprocess
import sys
from typing import Any, List


def kiel(*args: str, input: bytes = b"", timeout: float = 120, env: Any = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "kiel.cli", *args],
        input=input,
        capture_output=True,
        timeout=timeout,
        env=env,
    )


def ok(result: Any) -> Any:
    assert result.returncode == 0, result.stderr.decode()
    return result


def _table_at(text: str, *header: str) -> int:
    """The line index of the aligned table whose header starts with these words."""
    lines = text.splitlines()
    return next(i for i, line in enumerate(lines) if line.split()[:len(header)] == list(header))


def _text_rows(text: str, *header: str) -> List[List[str]]:
    """The rows of the aligned table whose header starts with these words."""
    rows = []
    for line in text.splitlines()[_table_at(text, *header) + 1:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows

