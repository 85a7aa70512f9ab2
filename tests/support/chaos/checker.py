"""The history of one schedule, and the one checker that judges it.

Everything here is pure: the harness fills a :class:`History` while the
schedule runs, and :func:`check` reads it afterwards. The checker's rules:

1. **Never two members fetching one partition at once.** Each member
   reports its fetch set when it changes, with the time of the look that saw
   the new set (``t``) and of the previous look, which still saw the old one
   (``prev``). So a partition's *run* in a member is known to be in the set
   at both ends: from the ``t`` of the report that added it to the ``prev``
   of the report that removed it (or the last heartbeat that still showed
   it). Two runs of one partition in two members that overlap are a
   violation. Times are ``time.monotonic()``, one clock for every process of
   the machine.
2. **Fetching only with the owner znode.** The harness reads
   ``owners/<topic>/*`` between ``t0`` and ``t1``; a member whose run
   covers all of ``[t0, t1]`` must be the one the znode names (the read
   happened somewhere in that window, and the member fetched throughout).
3. **Every acknowledged message processed at least once.**
4. **Exactly once where the history holds only graceful moves.** A
   partition is *tainted* when a member reported it lost
   (``on_partitions_lost``: the session expired) or when a member that
   owned or processed it at any time was SIGKILLed. Every other partition
   only moved gracefully (join, leave, a slow revoke) or not at all (cuts,
   short blackouts, a broker restart, a ZooKeeper outage the sessions
   survived), so none of its offsets may be processed twice.
5. **Revoked before assigned.** On every partition, a member's
   ``on_partitions_revoked`` (a graceful release: it commits) happens
   before another member's ``on_partitions_assigned`` for it, unless the
   first member's ownership ended by a loss (it reports
   ``on_partitions_lost`` instead, possibly late, or was SIGKILLed).
6. **Never two live members processing one partition at once.** A member
   with task_done workers reports when it processed a partition's records
   (``work``: from the first record's start to the last one's end); one
   without reports a batch processed when ``consume()`` returned it
   (``recs``, an instant). On a partition that only moved gracefully (not
   tainted), two members' processing may not overlap: the old owner's
   revocation (or ``close()``) waits for what its worker holds before the
   partition moves.
7. **Liveness and close** are measured by the harness while it runs and
   land here as ``problems``: convergence within the session timeout + 10 s
   of the last fault (+ 25 s on Tansu), the drain, ``close()`` within 30 s,
   the process exiting, and nothing logged after ``close()`` returned.

A group the brokers coordinate (the brokers mode, on Tansu) has no owner
znodes: rule 2 is replaced by two rules on the committed offsets, which
the harness reads from outside the group five times a second:

8. **Commits never regress.** Within one *epoch* (see below) a partition's
   committed offset never goes down, nor disappears.
9. **Commits never run ahead of processing.** When a read found offset
   ``c`` committed, every acknowledged message of that partition and epoch
   below ``c`` had been reported processed before the read ended.

Tansu's storage is in memory, so a Tansu restart forgets the log, the
topic, the group and its offsets; the harness holds every client dark until
the topic exists again, and starts a new *epoch*. How the rules treat it:

* messages are keyed by their value (unique), since offsets start at 0
  again in each epoch; the epoch and offset of each acknowledgement are
  kept for rule 9 (the harness pads the new log past the old one's end,
  holding its producer until then, so no old position or commit lands on
  a new message);
* rules 8 and 9 compare commits within an epoch only: the first commits of
  a new epoch are judged by rule 9 alone (one carried over from the old log
  would run ahead of the new one);
* an acknowledged message that no member processed before the restart that
  ended its epoch died with that log: it is counted as *forgotten*, not
  missing (the harness first waits for the group to drain);
* a restart forgets the group: members find out at their next heartbeat,
  and until then (at most their session timeout) may still fetch what a new
  generation gave to another. A run in progress when Tansu went dark that
  ends within ``session_timeout`` + 1 s may overlap a run that began after
  (rule 1), and every partition fetched at the restart is *tainted*
  (rules 4 and 6), like one reported lost.

One more allowance in the brokers mode, for a Tansu quirk: Tansu forms the
next generation without waiting for members that have not joined it again
(Apache Kafka waits up to their rebalance timeout, ``max_poll_interval``,
which the schedules keep above the session), so a member whose network is
blacked out may still be fetching, within its session, what the new
generation gave another. Rule 1 tolerates such an overlap when the earlier
run belongs to a member that was dark when the later run began and whose
run ended with its own ``on_partitions_lost`` within ``session_timeout`` +
1 s of the darkness beginning (the member gave up by its own clock, as it
must); the partition is then tainted like any loss.

And one for another: Tansu accepts a commit of a generation that has ended
(Apache Kafka refuses it with ILLEGAL_GENERATION). A member that sent a
commit while it owned a partition, into a network that then held it past
the member's loss of the partition, has that commit written late, over the
next owner's: a *stale commit*. Members report each commit they send
(``commit`` lines: sent, answered, offsets), so rule 8 tolerates a change
between two reads where either offset is one a stale commit wrote (sent
before that member's ``on_partitions_lost`` of the partition, answered
without error after it), and the schedule's line counts them. The
partition is tainted (it was lost), so the duplicates that follow are
allowed. The other way round, a commit Tansu refuses (a member back from a
blackout revokes, but the next generation formed without it), taints its
partitions too: the next owner starts from the last commit that went
through, so it delivers again (at-least-once, as kiel documents).
"""

import bisect
from typing import Any, Dict, List, Optional, Set, Tuple

#: (start, end) seconds on the monotonic clock.
Run = Tuple[float, float]


class History:
    """What happened in one schedule.

    Args:
        topic: the topic the group consumes.
        partitions: its partition count.
    """

    def __init__(self, topic: str, partitions: int, by_value: bool = False,
                 session_timeout: float = 0.0) -> None:
        self.topic = topic
        self.partitions = partitions
        #: Key messages by (partition, value) instead of (partition, offset):
        #: the brokers mode, where a restart starts the offsets again.
        self.by_value = by_value
        self.session_timeout = session_timeout
        #: Brokers mode: key -> (epoch, offset) of every acknowledgement.
        self.acked_at: Dict[Tuple[int, int], Tuple[int, int]] = {}
        #: Brokers mode: (t0, t1, epoch, {partition: committed offset or None}).
        self.commit_samples: List[Tuple[float, float, int, Dict[int, Optional[int]]]] = []
        #: Brokers mode: (went dark, restored) of every Tansu restart; the
        #: epoch after the i-th restart is i + 1.
        self.restarts: List[Tuple[float, float]] = []
        #: (member, start, end) of every blackout of one member's network.
        self.dark: List[Tuple[str, float, float]] = []
        #: Each member's report lines, in the order it wrote them.
        self.events: Dict[str, List[Dict[str, Any]]] = {}
        #: (partition, offset) -> value, for every acknowledged message (see key()).
        self.acked: Dict[Tuple[int, int], str] = {}
        #: (t0, t1, {partition: member id or None}) samples of the owner znodes.
        self.owner_samples: List[Tuple[float, float, Dict[int, Optional[str]]]] = []
        #: member id -> time of its SIGKILL.
        self.killed: Dict[str, float] = {}
        #: (kind, member or "", start, end) of every fault injected.
        self.faults: List[Tuple[str, str, float, float]] = []
        #: Violations the harness measured while it ran (liveness, close).
        self.problems: List[str] = []
        #: Seconds from the end of the last fault to convergence (None: never).
        self.convergence: Optional[float] = None

    def add(self, member: str, event: Dict[str, Any]) -> None:
        """Record one report line of ``member``."""
        self.events.setdefault(member, []).append(event)

    def key(self, partition: int, offset: int, value: str) -> Tuple[int, int]:
        """A message's identity: (partition, offset), or (partition, value) by value."""
        return (partition, int(value)) if self.by_value else (partition, offset)

    # -- derived views -----------------------------------------------------

    def runs(self, member: str) -> Dict[int, List[Run]]:
        """Each partition's runs in ``member``'s fetch set (see the module's rule 1)."""
        events = self.events.get(member, [])
        changes = [e for e in events if e["ev"] == "fetching"]
        beats = [e for e in events if e["ev"] == "hb"]
        runs: Dict[int, List[Run]] = {}
        open_since: Dict[int, float] = {}
        for change in changes:
            now = set(change["set"])
            for p in list(open_since):
                if p not in now:
                    runs.setdefault(p, []).append((open_since.pop(p), change["prev"]))
            for p in now:
                open_since.setdefault(p, change["t"])
        for p, start in open_since.items():
            seen = [b["t"] for b in beats if b["t"] >= start and p in b["fetching"]]
            runs.setdefault(p, []).append((start, max([start] + seen)))
        return runs

    def processed(self) -> Dict[Tuple[int, int], int]:
        """(partition, offset) -> how many times members reported it processed."""
        counts: Dict[Tuple[int, int], int] = {}
        for events in self.events.values():
            for e in events:
                if e["ev"] == "recs":
                    for p, o, v in e["r"]:
                        k = self.key(p, o, v)
                        counts[k] = counts.get(k, 0) + 1
        return counts

    def first_processed(self) -> Dict[Tuple[int, int], float]:
        """Message key -> when a member first reported it processed."""
        first: Dict[Tuple[int, int], float] = {}
        for events in self.events.values():
            for e in events:
                if e["ev"] == "recs":
                    for p, o, v in e["r"]:
                        k = self.key(p, o, v)
                        first[k] = min(first.get(k, e.get("t", 0.0)), e.get("t", 0.0))
        return first

    def forgotten(self) -> Set[Tuple[int, int]]:
        """Acknowledged messages a Tansu restart forgot before anyone processed them."""
        final = len(self.restarts)
        processed = self.processed()
        return {k for k, (epoch, _) in self.acked_at.items()
                if epoch < final and k not in processed}

    def tainted(self) -> Set[int]:
        """Partitions whose history holds a non-graceful move (rule 4)."""
        tainted: Set[int] = set()
        for member, events in self.events.items():
            for e in events:
                if e["ev"] == "listener" and e["what"] == "lost":
                    tainted.update(e["ps"])
                elif e["ev"] == "commit" and e.get("error") is not None:
                    # A commit refused (Tansu forms the next generation
                    # without waiting for a member that was dark, and refuses
                    # its revocation commit, see the top): the next owner
                    # starts from the last commit that went through.
                    tainted.update(int(p) for p in e["o"])
            for dark, _ in self.restarts:
                for p, spans in self.runs(member).items():
                    if any(s <= dark <= e for s, e in spans):
                        tainted.add(p)
            if member in self.killed:
                for e in events:
                    if e["ev"] == "owned":
                        tainted.update(e["set"])
                    elif e["ev"] == "hb":
                        tainted.update(e["owned"])
                    elif e["ev"] == "recs":
                        tainted.update(p for p, _, _ in e["r"])
        return tainted

    def processing(self) -> Dict[int, List[Tuple[float, float, str]]]:
        """Per partition, ``(start, end, member)`` of every stretch of processing (rule 6)."""
        spans: Dict[int, List[Tuple[float, float, str]]] = {}
        for member, events in self.events.items():
            workers = any(e["ev"] == "work" for e in events)
            for e in events:
                if e["ev"] == "work":
                    spans.setdefault(e["p"], []).append((e["s"], e["e"], member))
                elif e["ev"] == "recs" and not workers and "t" in e:
                    for p in {p for p, _, _ in e["r"]}:
                        spans.setdefault(p, []).append((e["t"], e["t"], member))
        return spans

    def kinds(self, member: str, what: str) -> List[Dict[str, Any]]:
        """``member``'s events of one kind."""
        return [e for e in self.events.get(member, []) if e["ev"] == what]


def check(history: History, limit: int = 5) -> List[str]:
    """Judge a history.

    Args:
        history: the filled history of one schedule.
        limit: at most this many examples per rule.

    Returns:
        one message per violated rule (empty: no violation).
    """
    violations = list(history.problems)
    all_runs = {m: history.runs(m) for m in history.events}
    violations += _double_fetches(all_runs, limit, history)
    violations += _owner_mismatches(history, all_runs, limit)
    violations += _commit_regressions(history, limit)
    violations += _commits_ahead(history, limit)
    processed = history.processed()
    missing = sorted(set(history.acked) - set(processed) - history.forgotten())
    if missing:
        violations.append(
            f"{len(missing)} acknowledged messages never processed, e.g. "
            f"(partition, offset) {missing[:limit]}"
        )
    violations += _late_revokes(history, limit)
    tainted = history.tainted()
    violations += _double_processing(history.processing(), tainted, limit)
    twice = sorted(k for k, n in processed.items() if n > 1 and k[0] not in tainted)
    if twice:
        violations.append(
            f"{len(twice)} messages processed twice on partitions that only moved "
            f"gracefully (tainted: {sorted(tainted)}), e.g. {twice[:limit]}"
        )
    return violations


def _orphaned(history: History, first: Tuple[float, float], second: Tuple[float, float]) -> bool:
    """A run in progress when Tansu went dark, ending within the session, and one begun after."""
    bound = history.session_timeout + 1.0
    return any(first[0] <= dark and first[1] <= dark + bound and second[0] > dark
               for dark, _ in history.restarts)


def _cut_off(history: History, member: str, partition: int, run: Run, later: float) -> bool:
    """The run ended with the member's own loss, in time, while it was dark (see the top)."""
    bound = history.session_timeout + 1.0
    ended_lost = any(
        e["ev"] == "listener" and e["what"] == "lost" and partition in e["ps"]
        and run[1] - 0.1 <= e["t"] <= run[1] + 0.5
        for e in history.events.get(member, [])
    )
    return ended_lost and any(
        who == member and start <= later <= end and run[1] <= start + bound
        for who, start, end in history.dark
    )


def _double_fetches(all_runs: Dict[str, Dict[int, List[Run]]], limit: int,
                    history: Optional[History] = None) -> List[str]:
    by_partition: Dict[int, List[Tuple[float, float, str]]] = {}
    for member, runs in all_runs.items():
        for p, spans in runs.items():
            by_partition.setdefault(p, []).extend((s, e, member) for s, e in spans)
    found: List[str] = []
    for p, spans in sorted(by_partition.items()):
        spans.sort()
        for i, (s1, e1, m1) in enumerate(spans):
            for s2, e2, m2 in spans[i + 1:]:
                if s2 > e1:
                    break  # sorted by start: no later run overlaps this one
                if m1 != m2 and not (history is not None and (
                        _orphaned(history, (s1, e1), (s2, e2))
                        or _orphaned(history, (s2, e2), (s1, e1))
                        or (history.by_value and _cut_off(history, m1, p, (s1, e1), s2)))):
                    found.append(f"partition {p}: {m1} fetched it over [{s1:.3f}, {e1:.3f}] "
                                 f"and {m2} over [{s2:.3f}, {e2:.3f}]")
    if not found:
        return []
    return [f"{len(found)} double fetches: " + "; ".join(found[:limit])]


def _double_processing(
    spans: Dict[int, List[Tuple[float, float, str]]], tainted: Set[int], limit: int
) -> List[str]:
    found: List[str] = []
    for p, runs in sorted(spans.items()):
        if p in tainted:
            continue
        runs.sort()
        for i, (s1, e1, m1) in enumerate(runs):
            for s2, e2, m2 in runs[i + 1:]:
                if s2 > e1:
                    break  # sorted by start: no later stretch overlaps this one
                if m1 != m2:
                    found.append(f"partition {p}: {m1} processed it over [{s1:.3f}, {e1:.3f}] "
                                 f"and {m2} over [{s2:.3f}, {e2:.3f}]")
    if not found:
        return []
    return [f"{len(found)} partitions processed by two live members at once: "
            + "; ".join(found[:limit])]


def _late_revokes(history: History, limit: int) -> List[str]:
    calls: Dict[int, List[Tuple[float, str, str]]] = {}
    for member, events in history.events.items():
        for e in events:
            if e["ev"] == "listener":
                for p in e["ps"]:
                    calls.setdefault(p, []).append((e["t"], member, e["what"]))
    found: List[str] = []
    for p, seq in sorted(calls.items()):
        holders: Dict[str, float] = {}
        #: member -> (when another member was assigned p while it still held p, who)
        overtaken: Dict[str, Tuple[float, str]] = {}
        for t, member, what in sorted(seq):
            if what == "assigned":
                for other in holders:
                    if other != member:
                        overtaken.setdefault(other, (t, member))
                holders[member] = t
                continue
            holders.pop(member, None)
            late = overtaken.pop(member, None)
            if what == "revoked" and late is not None:
                found.append(f"partition {p}: {member} revoked it at {t:.3f}, after "
                             f"{late[1]} was assigned it at {late[0]:.3f}")
    if not found:
        return []
    return [f"{len(found)} revocations after the next owner's assignment: "
            + "; ".join(found[:limit])]


def stale_commits(history: History) -> List[Tuple[str, int, int, float, float]]:
    """(member, partition, offset, sent, answered) of every stale commit (see the top)."""
    found = []
    for member, events in history.events.items():
        lost = [(e["t"], set(e["ps"])) for e in events
                if e["ev"] == "listener" and e["what"] == "lost"]
        for e in events:
            if e["ev"] != "commit" or e["error"] is not None:
                continue
            for p, offset in e["o"].items():
                if any(e["s"] < t < e["t"] and int(p) in ps for t, ps in lost):
                    found.append((member, int(p), offset, e["s"], e["t"]))
    return found


def _commit_regressions(history: History, limit: int) -> List[str]:
    found: List[str] = []
    last: Dict[Tuple[int, int], Tuple[float, int]] = {}
    stale = {(p, offset) for _, p, offset, _, _ in stale_commits(history)}
    for _, t1, epoch, offsets in sorted(history.commit_samples):
        for p, c in sorted(offsets.items()):
            before = last.get((epoch, p))
            if before is not None and (c is None or c < before[1]) and not (
                    (p, c) in stale or (p, before[1]) in stale):
                found.append(f"partition {p} (epoch {epoch}): committed {before[1]} at "
                             f"{before[0]:.3f}, then {c} at {t1:.3f}")
            if c is not None:
                last[(epoch, p)] = (t1, c)
    if not found:
        return []
    return [f"{len(found)} commits that went back: " + "; ".join(found[:limit])]


def _commits_ahead(history: History, limit: int) -> List[str]:
    if not history.commit_samples:
        return []
    # (epoch, partition) -> [(offset, key)] of the acknowledged messages.
    logs: Dict[Tuple[int, int], List[Tuple[int, Tuple[int, int]]]] = {}
    for k, (epoch, offset) in history.acked_at.items():
        logs.setdefault((epoch, k[0]), []).append((offset, k))
    for entries in logs.values():
        entries.sort()
    first = history.first_processed()
    # (epoch, partition) -> the latest first-processing time of the first i messages.
    latest: Dict[Tuple[int, int], List[float]] = {}
    for where, entries in logs.items():
        running, worst = [], 0.0
        for _, k in entries:
            worst = max(worst, first.get(k, float("inf")))
            running.append(worst)
        latest[where] = running
    found: List[str] = []
    seen: Set[Tuple[int, int, int]] = set()
    for _, t1, epoch, offsets in sorted(history.commit_samples):
        for p, c in sorted(offsets.items()):
            if c is None or (epoch, p, c) in seen:
                continue
            seen.add((epoch, p, c))
            entries = logs.get((epoch, p), [])
            below = bisect.bisect_left(entries, (c, (-1, -1)))
            if not below or latest[(epoch, p)][below - 1] <= t1:
                continue
            for offset, k in entries[:below]:
                if first.get(k, float("inf")) > t1:
                    found.append(f"partition {p} (epoch {epoch}): offset {c} committed by "
                                 f"{t1:.3f}, but offset {offset} (message {k[1]}) "
                                 + ("never processed" if k not in first
                                    else f"first processed at {first[k]:.3f}"))
                    break
    if not found:
        return []
    return [f"{len(found)} commits ahead of processing: " + "; ".join(found[:limit])]


def _owner_mismatches(
    history: History, all_runs: Dict[str, Dict[int, List[Run]]], limit: int
) -> List[str]:
    found: List[str] = []
    for t0, t1, owners in history.owner_samples:
        for member, runs in all_runs.items():
            for p, spans in runs.items():
                if any(s <= t0 and e >= t1 for s, e in spans) and owners.get(p) != member:
                    found.append(f"partition {p} fetched by {member} throughout "
                                 f"[{t0:.3f}, {t1:.3f}] while its owner znode said "
                                 f"{owners.get(p)!r}")
    if not found:
        return []
    return [f"{len(found)} fetches without the owner znode: " + "; ".join(found[:limit])]


def stats(history: History) -> Dict[str, Any]:
    """Numbers that show the checker saw real work, for the per-schedule line.

    Returns:
        ``owner_checks`` (owner-znode reads that a fetch run covered, so
        rule 2 judged them), ``handoffs`` (a partition's run in one member followed by a run in
        another), ``min_gap`` (the shortest such hand-off, seconds, None if
        none), ``checked`` (partitions held to exactly-once), ``tainted``,
        and ``twice`` (messages processed more than once, on tainted
        partitions: the at-least-once redeliveries).
    """
    spans: Dict[int, List[Tuple[float, float, str]]] = {}
    for member in history.events:
        for p, runs in history.runs(member).items():
            spans.setdefault(p, []).extend((s, e, member) for s, e in runs)
    gaps: List[float] = []
    for runs in spans.values():
        runs.sort()
        for (_, e1, m1), (s2, _, m2) in zip(runs, runs[1:]):
            if m1 != m2:
                gaps.append(s2 - e1)
    tainted = history.tainted()
    all_runs = {m: history.runs(m) for m in history.events}
    owner_checks = sum(
        1
        for t0, t1, _ in history.owner_samples
        for runs in all_runs.values()
        for spans in runs.values()
        if any(s <= t0 and e >= t1 for s, e in spans)
    )
    commit_checks = sum(1 for _, _, _, offsets in history.commit_samples
                        for c in offsets.values() if c is not None)
    return {
        "owner_checks": owner_checks,
        "commit_checks": commit_checks,
        "stale_commits": len(stale_commits(history)),
        "forgotten": len(history.forgotten()),
        "handoffs": len(gaps),
        "min_gap": min(gaps) if gaps else None,
        "checked": history.partitions - len(tainted & set(range(history.partitions))),
        "tainted": len(tainted),
        "twice": sum(1 for n in history.processed().values() if n > 1),
    }


def dump(history: History) -> Dict[str, Any]:
    """``history`` as plain JSON types (a failing schedule's is kept; see :func:`load`)."""
    return {
        "topic": history.topic, "partitions": history.partitions,
        "by_value": history.by_value, "session_timeout": history.session_timeout,
        "events": history.events,
        "acked": [[p, o, v] for (p, o), v in history.acked.items()],
        "acked_at": [[p, o, e, off] for (p, o), (e, off) in history.acked_at.items()],
        "owner_samples": [[t0, t1, {str(p): m for p, m in owners.items()}]
                          for t0, t1, owners in history.owner_samples],
        "commit_samples": [[t0, t1, epoch, {str(p): c for p, c in offsets.items()}]
                           for t0, t1, epoch, offsets in history.commit_samples],
        "restarts": history.restarts, "dark": history.dark, "killed": history.killed,
        "faults": history.faults, "problems": history.problems,
        "convergence": history.convergence,
    }


def load(data: Dict[str, Any]) -> History:
    """The history :func:`dump` wrote (to run :func:`check` on it again)."""
    h = History(data["topic"], data["partitions"], by_value=data["by_value"],
                session_timeout=data["session_timeout"])
    h.events = data["events"]
    h.acked = {(p, o): v for p, o, v in data["acked"]}
    h.acked_at = {(p, o): (e, off) for p, o, e, off in data["acked_at"]}
    h.owner_samples = [(t0, t1, {int(p): m for p, m in owners.items()})
                       for t0, t1, owners in data["owner_samples"]]
    h.commit_samples = [(t0, t1, epoch, {int(p): c for p, c in offsets.items()})
                        for t0, t1, epoch, offsets in data["commit_samples"]]
    h.restarts = [tuple(r) for r in data["restarts"]]  # type: ignore[misc]
    h.dark = [tuple(d) for d in data["dark"]]  # type: ignore[misc]
    h.killed = data["killed"]
    h.faults = [tuple(f) for f in data["faults"]]  # type: ignore[misc]
    h.problems = data["problems"]
    h.convergence = data["convergence"]
    return h
