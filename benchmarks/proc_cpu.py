"""CPU time of another process (the broker), for the benchmarks' reports."""
import os
from typing import Optional


def cpu_seconds(pid: Optional[int]) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc; 0 for ``None``)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
