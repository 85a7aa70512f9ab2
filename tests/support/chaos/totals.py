"""The chaos suite's totals: what its schedules did, summed over a run.

Each schedule test attaches what it measured to its own report (the user
property :data:`PROPERTY`), and :func:`terminal_summary` sums those reports
where pytest prints the run's summary. With pytest-xdist the schedules run
in worker processes whose terminal output nobody sees, and a module's
schedules may be split between workers; their reports, properties included,
all come back to the process that prints the summary, so the totals are the
whole run's either way.
"""

import statistics
from typing import Any, Dict, List, Optional

from tests.support.chaos.schedule import KINDS

#: The user property that carries one schedule's record.
PROPERTY = "kiel_chaos"


def record(label: str, seed: int, line: str, counts: Dict[str, int], seconds: float,
           convergence: Optional[float], close_times: List[float], handoffs: int,
           violation: Optional[str]) -> Dict[str, Any]:
    """One schedule's figures, as a user property value (plain types only: it
    travels from a worker to the main process).

    Args:
        label: the mode's label (``chaos`` or ``chaos (brokers)``).
        seed: the schedule's seed.
        line: the schedule's one-line account.
        counts: fault kind -> how many were injected.
        seconds: how long the schedule ran.
        convergence: seconds from the last fault to convergence (``None``: never).
        close_times: each member's close() time in seconds.
        handoffs: hand-offs the checker checked.
        violation: the seed, schedule and violations, or ``None``.

    Returns:
        the record.
    """
    return {"label": label, "seed": seed, "line": line, "counts": dict(counts),
            "seconds": seconds, "convergence": convergence,
            "close_times": list(close_times), "handoffs": handoffs, "violation": violation}


class Totals:
    """What one mode's schedules did, for the summary at the end of the run."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.schedules = 0
        self.counts: Dict[str, int] = {}
        self.violations: List[str] = []
        self.convergence: List[float] = []
        self.close_times: List[float] = []
        self.seconds: List[float] = []
        self.handoffs = 0

    def add(self, one: Dict[str, Any]) -> None:
        """Add one schedule's :func:`record`."""
        self.schedules += 1
        for kind, count in one["counts"].items():
            self.counts[kind] = self.counts.get(kind, 0) + count
        if one["violation"]:
            self.violations.append(one["violation"])
        if one["convergence"] is not None:
            self.convergence.append(one["convergence"])
        self.close_times.extend(one["close_times"])
        self.seconds.append(one["seconds"])
        self.handoffs += one["handoffs"]

    def summary(self) -> List[str]:
        kinds = ", ".join(f"{k} {self.counts[k]}" for k in (*KINDS, "close_blackout")
                          if self.counts.get(k))
        label = self.label
        lines = [f"{label} totals: {self.schedules} schedules, {sum(self.seconds):.0f} s, "
                 f"{self.handoffs} hand-offs checked; faults: {kinds or 'none'}",
                 f"{label} totals: {len(self.violations)} schedules with violations"
                 + "".join(f"\n  {v}" for v in self.violations)]
        if self.convergence:
            lines.append(
                f"{label} totals: convergence after the last fault p50 "
                f"{statistics.median(self.convergence):.2f} s, max {max(self.convergence):.2f} s"
            )
        if self.close_times:
            lines.append(f"{label} totals: close() p50 "
                         f"{statistics.median(self.close_times):.2f} s, "
                         f"max {max(self.close_times):.2f} s")
        return lines


def terminal_summary(reporter: Any) -> None:
    """Write the totals of every mode that ran (a ``pytest_terminal_summary`` hook's body).

    Under pytest-xdist each schedule's own line is written here as well:
    the workers' live output is not shown.
    """
    records: List[Dict[str, Any]] = []
    for reports in reporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            records.extend(value for name, value in getattr(report, "user_properties", ())
                           if name == PROPERTY)
    if not records:
        return
    reporter.write_sep("-", "chaos totals")
    distributed = getattr(reporter.config.option, "dist", "no") != "no"
    by_label: Dict[str, Totals] = {}
    for one in sorted(records, key=lambda r: (r["label"], r["seed"])):
        by_label.setdefault(one["label"], Totals(one["label"])).add(one)
        if distributed:
            reporter.write_line(one["line"])
    for totals in by_label.values():
        for line in totals.summary():
            reporter.write_line(line)
