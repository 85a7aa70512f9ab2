"""A randomized fault suite for the grouped consumer: many seeded schedules, one checker.

Each schedule (see :mod:`tests.support.chaos`) starts 3-5 member processes, each
talking to ZooKeeper through its own fault proxies, produces numbered
messages throughout, injects 2-4 random faults (cuts, blackouts shorter and
longer than the session, forced expiry, a ZooKeeper restart longer than the
session or the ensemble leader's death, a broker restart, SIGKILL and
replacement, graceful leave and join, a slow ``on_partitions_revoked``),
then checks the history: no partition fetched twice at once nor without its
owner znode, every acknowledged message processed (exactly once where the
partition only moved gracefully), convergence within the session timeout +
10 s of the last fault, the drain, and a bounded, quiet ``close()``.

The brokers mode runs the same kind of schedules against a group the
brokers coordinate, on Tansu (``generate_brokers``): 3-4 members, each
behind its own fault proxy in front of the broker (which is the
coordinator), producer traffic throughout, and 2-3 faults drawn from cuts,
blackouts shorter and longer than the session, Tansu restarts (memory
storage: it forgets everything, see :mod:`tests.support.chaos.checker`), SIGKILL
with a replacement, graceful leave and join, slow revocations and
``max_poll_interval`` expiries. Its checker swaps the owner-znode rule for
two on the committed offsets (never back, never ahead of processing).

Environment:

* ``KIEL_CHAOS_SEED=<n>`` runs (replays) that one schedule (in each mode run);
* ``KIEL_CHAOS_SCHEDULES=<k>`` runs k ZooKeeper schedules (default 20) with
  seeds ``base .. base+k-1``; ``KIEL_CHAOS_BASE=<n>`` fixes the base
  (default: random, printed);
* ``KIEL_CHAOS_BROKER_SCHEDULES=<k>`` runs k brokers-mode schedules from the
  same base instead of the fixed :data:`BROKER_SEEDS` (which CI runs: a
  Tansu rebalance takes 4-6 s, so each schedule takes about a minute);
* ``KIEL_CHAOS_MODE=zookeeper`` or ``brokers`` runs one mode only;
* ``KIEL_CHAOS_ALLOCATOR=<name>`` forces the brokers-mode assignor (default:
  :data:`BROKER_ALLOCATORS`, an eager one each seed draws and
  ``cooperative-sticky``: the fixed seeds take turns with them, other seeds
  run with each).

Every schedule prints its seed and description (live in a serial run); the
totals (schedules, faults by kind, violations, convergence p50/max, close
times) are printed in the run's summary, one set per mode, with every
schedule's line when pytest-xdist ran them (see :mod:`tests.support.chaos.totals`).
The run's header names the seed base (``KIEL_CHAOS_BASE``, drawn in
tests/conftest.py so that every xdist worker collects the same seeds).

Under pytest-xdist (``make test``: ``--dist loadfile``) this file runs on
one worker, so its schedules run one at a time, as in a serial run: each
holds 3-5 member processes, a producer, fault proxies and its brokers busy,
and judges its convergence bound on the wall clock, so two schedules must
not compete for the 2 cores. tests/conftest.py hands it out first.
"""

import asyncio
import json
import os
import random
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest

from tests.conftest import run
from tests.support.chaos.checker import History, check, dump, load, stats
from tests.support.chaos.harness import Backend, Runner, TansuBackend
from tests.support.chaos.schedule import (
    BROKER_KINDS,
    MAX_MEMBERS,
    MIN_MEMBERS,
    ZK_KINDS,
    Schedule,
    generate,
    generate_brokers,
)
from tests.support.chaos.totals import PROPERTY, record

#: The brokers-mode seeds CI runs: together they inject every brokers-mode
#: fault kind (checked below), in about four minutes.
BROKER_SEEDS = (2, 3, 12, 23, 25)
#: The brokers-mode assignors (``None``: the seed's draw among the eager
#: ones): the fixed seeds take turns with them; other seeds run with each.
BROKER_ALLOCATORS: Tuple[Optional[str], ...] = (None, "cooperative-sticky")

BASE = int(os.environ.get("KIEL_CHAOS_BASE") or random.SystemRandom().randrange(10**6))
MODES = {os.environ.get("KIEL_CHAOS_MODE") or "zookeeper",
         os.environ.get("KIEL_CHAOS_MODE") or "brokers"}


def _seeds() -> List[int]:
    if "zookeeper" not in MODES:
        return []
    if os.environ.get("KIEL_CHAOS_SEED"):
        return [int(os.environ["KIEL_CHAOS_SEED"])]
    count = int(os.environ.get("KIEL_CHAOS_SCHEDULES", "20"))
    return [BASE + i for i in range(count)]


def _broker_runs() -> List[Tuple[Optional[str], int]]:
    if "brokers" not in MODES:
        return []
    if os.environ.get("KIEL_CHAOS_SEED"):
        seeds: Sequence[int] = [int(os.environ["KIEL_CHAOS_SEED"])]
    elif os.environ.get("KIEL_CHAOS_BROKER_SCHEDULES"):
        seeds = [BASE + i for i in range(int(os.environ["KIEL_CHAOS_BROKER_SCHEDULES"]))]
    else:
        seeds = BROKER_SEEDS
    forced = os.environ.get("KIEL_CHAOS_ALLOCATOR")
    if forced:
        return [(forced, s) for s in seeds]
    if seeds is BROKER_SEEDS:
        # CI: the fixed seeds take turns with the assignors, so both rebalance
        # protocols meet faults within the suite's time (each seed alone
        # takes 20-70 s on Tansu).
        return [(BROKER_ALLOCATORS[i % len(BROKER_ALLOCATORS)], s) for i, s in enumerate(seeds)]
    return [(a, s) for a in BROKER_ALLOCATORS for s in seeds]


SEEDS = _seeds()
BROKER_RUNS = _broker_runs()


def _writer(request: pytest.FixtureRequest) -> Any:
    """A line writer that reaches the terminal even with output captured.

    A schedule's lines show live in a run without pytest-xdist (whose
    workers' output is not shown); the run's summary has them either way
    (:mod:`tests.support.chaos.totals`).
    """
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is None or capture is None:
        return print

    def write(line: str) -> None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    return write


@pytest.fixture(scope="module")
def chaos_standalone() -> Iterator[Backend]:
    """A standalone ZooKeeper of this module's own (schedules stop it) and 3 brokers."""
    from kiel.testing.zookeeper import ZooKeeperServer

    with ZooKeeperServer() as server:
        backend = Backend(server)
        backend.start()
        try:
            yield backend
        finally:
            backend.close()


@pytest.fixture(scope="module")
def chaos_ensemble() -> Iterator[Backend]:
    """A 3-node ensemble and 3 brokers, started only if a schedule needs them."""
    from kiel.testing.zookeeper import ZooKeeperEnsemble

    with ZooKeeperEnsemble(size=3) as ensemble:
        backend = Backend(ensemble)
        backend.start()
        try:
            yield backend
        finally:
            backend.close()


@pytest.fixture(scope="module")
def chaos_tansu() -> Iterator[TansuBackend]:
    """One Tansu broker behind its shared proxy, for every brokers-mode schedule."""
    backend = TansuBackend()
    backend.start()
    try:
        yield backend
    finally:
        backend.close()


@pytest.mark.slow
@pytest.mark.zookeeper
@pytest.mark.parametrize("seed", SEEDS, ids=[f"seed{s}" for s in SEEDS])
def test_random_fault_schedule(seed: int, request: pytest.FixtureRequest, tmp_path: Any) -> None:
    schedule = generate(seed)
    backend: Backend = request.getfixturevalue(
        "chaos_ensemble" if schedule.ensemble else "chaos_standalone"
    )
    _run_schedule(schedule, backend, str(tmp_path), request, "chaos")


@pytest.mark.slow
@pytest.mark.parametrize("allocator,seed", BROKER_RUNS,
                         ids=[f"{a or 'drawn'}-seed{s}" for a, s in BROKER_RUNS])
def test_random_fault_schedule_on_brokers(allocator: Optional[str], seed: int, tmp_path: Any,
                                          request: pytest.FixtureRequest,
                                          chaos_tansu: TansuBackend) -> None:
    _run_schedule(generate_brokers(seed, allocator), chaos_tansu, str(tmp_path), request,
                  "chaos (brokers)")


@pytest.mark.slow
def test_a_tansu_restart_lets_no_send_into_the_new_log_before_its_pad(
        tmp_path: Any, chaos_tansu: TansuBackend) -> None:
    """The harness itself: a batch the producer has in flight when a Tansu
    restart begins must not land in the new log before the pad (a member's
    position from the old log would skip it; CI's seed 2 lost three messages
    so). Answers held 1 s on the shared proxy keep the second batch in
    flight when the restart begins, half-way through it."""
    schedule = generate_brokers(2)._replace(partitions=2)
    runner = Runner(schedule, chaos_tansu, str(tmp_path), {})
    chaos_tansu.heal()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, chaos_tansu.create_topic, runner.topic, 2)
        chaos_tansu.shared.delay(1.0, "downstream")
        producing = asyncio.ensure_future(runner._produce())
        try:
            deadline = time.monotonic() + 30.0
            while not runner.history.acked and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert runner.history.acked, "no acknowledgement within 30 s"
            await asyncio.sleep(0.5)  # the second batch is half-way
            await runner._restart_tansu(0.5)
            chaos_tansu.shared.heal()
            deadline = time.monotonic() + 30.0
            while (not any(epoch == 1 for epoch, _ in runner.history.acked_at.values())
                   and time.monotonic() < deadline):
                await asyncio.sleep(0.05)
        finally:
            runner._producing = False
            await producing

    try:
        run(scenario(), timeout=120)
    finally:
        chaos_tansu.shared.heal()
    new = {k: offset for k, (epoch, offset) in runner.history.acked_at.items() if epoch == 1}
    assert new, "nothing acknowledged by the new incarnation"
    early = sorted((k[0], offset) for k, offset in new.items()
                   if offset < runner._pad_ends[k[0]])
    assert not early, f"acknowledged inside the new log's pad (partition, offset): {early}"
    assert not runner.history.problems


def _run_schedule(schedule: Schedule, backend: Any, workdir: str,
                  request: pytest.FixtureRequest, label: str) -> None:
    """Run one schedule, check it, write its line, attach its figures to the
    test's report (for the run's totals) and fail on any violation."""
    seed = schedule.seed
    write = _writer(request)
    backend.heal()
    write(f"\nchaos {schedule.describe()}")
    started = time.monotonic()
    counts: Dict[str, int] = {}
    runner = Runner(schedule, backend, workdir, counts)
    history = run(runner.run(), timeout=240)
    took = time.monotonic() - started
    violations = check(history)
    convergence = "never" if history.convergence is None else f"{history.convergence:.2f} s"
    numbers = stats(history)
    gap = "-" if numbers["min_gap"] is None else f"{numbers['min_gap'] * 1000:.0f} ms"
    if schedule.coordinator == "brokers":
        samples = (f"{len(history.commit_samples)} commit samples "
                   f"({numbers['commit_checks']} partition checks), "
                   f"{numbers['stale_commits']} stale commits accepted, "
                   f"{numbers['forgotten']} acked messages forgotten by "
                   f"{len(history.restarts)} Tansu restarts, ")
    else:
        samples = (f"{len(history.owner_samples)} owner samples "
                   f"({numbers['owner_checks']} partition checks), ")
    line = (
        f"chaos seed={seed}: {took:.1f} s, {len(history.acked)} acked, "
        f"{sum(history.processed().values())} processed ({numbers['twice']} twice, on "
        f"{numbers['tainted']} tainted partitions; {numbers['checked']} held to exactly-once), "
        f"{numbers['handoffs']} hand-offs (shortest gap {gap}), converged {convergence} after "
        f"the last fault, {samples}"
        f"{len(violations)} violations"
    )
    write(line)
    violation = (f"seed={seed} [{schedule.describe()}]: " + " | ".join(violations)
                 if violations else None)
    if violations:
        # Kept beside the members' stderr files: a rare failure's history
        # (every report line, the owner samples, the faults) is what tells a
        # kiel fault from a harness or checker one, and a replay rarely fails.
        kept = os.path.join(workdir, "history.json")
        with open(kept, "w") as out:
            json.dump(dump(history), out)
        write(f"chaos seed={seed}: history kept in {kept}")
    request.node.user_properties.append((PROPERTY, record(
        label, seed, line, counts, took, history.convergence, runner.close_times,
        numbers["handoffs"], violation)))
    assert not violations, (f"seed {seed} ({schedule.describe()}) violated:\n"
                            + "\n".join(violations))


# --------------------------------------------------------------------------
# The checker and the generator on their own (pure logic, hand-made histories):
# each rule must be able to fail.


def _history(partitions: int = 4) -> History:
    return History("t", partitions)


def _fetching(h: History, member: str, t: float, prev: float, ps: List[int]) -> None:
    h.add(member, {"ev": "fetching", "t": t, "prev": prev, "set": ps})


def test_checker_passes_a_clean_hand_off() -> None:
    h = _history()
    _fetching(h, "a", 1.0, 0.99, [0, 1])
    _fetching(h, "a", 2.0, 1.99, [1])  # 0 released, last seen at 1.99
    _fetching(h, "b", 2.5, 2.49, [0])
    h.owner_samples.append((1.2, 1.3, {0: "a", 1: "a"}))
    h.owner_samples.append((2.6, 2.7, {0: "b", 1: "a"}))
    h.acked = {(0, 0): "0", (1, 0): "1"}
    h.add("a", {"ev": "recs", "r": [[0, 0, "0"], [1, 0, "1"]]})
    assert check(h) == []


def test_checker_finds_a_double_fetch() -> None:
    h = _history()
    _fetching(h, "a", 1.0, 0.99, [0])
    _fetching(h, "a", 2.0, 1.99, [])
    _fetching(h, "b", 1.5, 1.49, [0])  # overlaps a's run [1.0, 1.99]
    (violation,) = check(h)
    assert "double fetches" in violation and "partition 0" in violation


def test_checker_reads_open_runs_up_to_the_last_heartbeat() -> None:
    h = _history()
    _fetching(h, "a", 1.0, 0.99, [0])
    h.add("a", {"ev": "hb", "t": 3.0, "fetching": [0], "owned": [0]})  # killed after this
    _fetching(h, "b", 2.0, 1.99, [0])
    assert any("double fetches" in v for v in check(h))


def test_checker_finds_fetching_without_the_owner_znode() -> None:
    h = _history()
    _fetching(h, "a", 1.0, 0.99, [0])
    _fetching(h, "a", 3.0, 2.99, [])
    h.owner_samples.append((1.5, 1.6, {0: "b"}))
    h.owner_samples.append((2.0, 2.1, {}))
    (violation,) = check(h)
    assert "2 fetches without the owner znode" in violation


def test_checker_finds_lost_messages_and_duplicates_after_graceful_moves() -> None:
    h = _history()
    h.acked = {(0, 0): "0", (0, 1): "1", (1, 0): "2"}
    h.add("a", {"ev": "recs", "r": [[0, 0, "0"], [1, 0, "2"]]})
    h.add("b", {"ev": "recs", "r": [[0, 0, "0"]]})
    violations = check(h)
    assert any("1 acknowledged messages never processed" in v for v in violations)
    assert any("1 messages processed twice" in v for v in violations)


def test_checker_allows_duplicates_after_a_loss_or_a_kill() -> None:
    h = _history()
    h.add("a", {"ev": "recs", "r": [[0, 0, "0"], [1, 0, "1"]]})
    h.add("a", {"ev": "listener", "t": 1.5, "what": "lost", "ps": [0]})
    h.add("c", {"ev": "owned", "t": 1.0, "set": [1]})
    h.killed["c"] = 2.0
    h.add("b", {"ev": "recs", "r": [[0, 0, "0"], [1, 0, "1"]]})
    assert check(h) == []


def test_checker_allows_duplicates_after_a_refused_commit() -> None:
    # Brokers seed 25 in a CI rehearsal: a member back from a blackout
    # revoked its partition, but Tansu had formed the next generation without
    # it and refused the revocation's commit (IllegalGeneration): the next
    # owner delivered again from the last commit. Duplicates, not a loss.
    def history(error: Optional[str]) -> History:
        h = _history()
        h.add("a", {"ev": "recs", "r": [[0, 0, "0"]]})
        h.add("a", {"ev": "commit", "s": 1.0, "t": 1.1, "o": {"0": 1}, "error": error})
        h.add("a", {"ev": "listener", "t": 1.5, "what": "revoked", "ps": [0]})
        h.add("b", {"ev": "recs", "r": [[0, 0, "0"]]})
        return h

    assert check(history("IllegalGenerationError")) == []
    (twice,) = check(history(None))
    assert "processed twice" in twice


def test_checker_finds_two_members_processing_a_partition_at_once() -> None:
    h = _history()
    h.acked = {(0, 0): "0", (0, 1): "1"}
    # a's worker still processes partition 0 when b, its next owner, starts.
    h.add("a", {"ev": "work", "p": 0, "s": 1.0, "e": 2.0})
    h.add("a", {"ev": "recs", "t": 2.0, "r": [[0, 0, "0"]]})
    h.add("b", {"ev": "recs", "t": 1.5, "r": [[0, 1, "1"]]})
    (violation,) = check(h)
    assert "processed by two live members at once" in violation and "partition 0" in violation
    # After a loss the overlap is the at-least-once limit, not a violation.
    h.add("a", {"ev": "listener", "t": 1.2, "what": "lost", "ps": [0]})
    assert check(h) == []
    # One after the other is a clean hand-off.
    h2 = _history()
    h2.acked = {(0, 0): "0", (0, 1): "1"}
    h2.add("a", {"ev": "work", "p": 0, "s": 1.0, "e": 2.0})
    h2.add("a", {"ev": "recs", "t": 2.0, "r": [[0, 0, "0"]]})
    h2.add("b", {"ev": "recs", "t": 2.5, "r": [[0, 1, "1"]]})
    assert check(h2) == []


def _listener(h: History, member: str, t: float, what: str, ps: List[int]) -> None:
    h.add(member, {"ev": "listener", "t": t, "what": what, "ps": ps})


def test_checker_finds_a_revocation_after_the_next_owner_was_assigned() -> None:
    h = _history()
    _listener(h, "a", 1.0, "assigned", [0, 1])
    _listener(h, "a", 2.0, "revoked", [1])
    _listener(h, "b", 2.1, "assigned", [1])  # after a's revoke: fine
    _listener(h, "b", 3.0, "assigned", [0])  # a still holds 0 ...
    _listener(h, "a", 3.5, "revoked", [0])  # ... and commits it afterwards
    (violation,) = check(h)
    assert "1 revocations after the next owner's assignment" in violation
    assert "partition 0: a revoked it at 3.500" in violation


def test_checker_allows_a_late_loss() -> None:
    h = _history()
    _listener(h, "a", 1.0, "assigned", [0])
    _listener(h, "b", 3.0, "assigned", [0])  # a's session expired unheard
    _listener(h, "a", 4.0, "lost", [0])  # it learns later
    _listener(h, "b", 5.0, "revoked", [0])
    _listener(h, "a", 5.1, "assigned", [0])
    assert check(h) == []


def test_checker_reports_the_harness_problems() -> None:
    h = _history()
    h.problems.append("m0: close() did not return within 30 s")
    assert check(h) == ["m0: close() did not return within 30 s"]


def test_schedules_are_a_function_of_the_seed() -> None:
    assert generate(7) == generate(7)
    drawn = [generate(seed) for seed in range(200)]
    assert len({s.describe() for s in drawn}) > 150
    kinds = {f.kind for s in drawn for f in s.faults}
    assert kinds == set(ZK_KINDS)
    for s in drawn:
        assert 3 <= s.members <= 5 and 12 <= s.partitions <= 48
        assert 4.0 <= s.session_timeout <= 6.0
        assert ("leader_kill" in {f.kind for f in s.faults}) <= s.ensemble
        assert ("zk_restart" in {f.kind for f in s.faults}) <= (not s.ensemble)
    assert any(s.close_blackout for s in drawn) and any(s.ensemble for s in drawn)



def test_brokers_mode_schedules() -> None:
    assert generate_brokers(7) == generate_brokers(7)
    assert generate_brokers(7, "cooperative-sticky").allocator == "cooperative-sticky"
    drawn = [generate_brokers(seed) for seed in range(200)]
    assert {f.kind for s in drawn for f in s.faults} == set(BROKER_KINDS)
    for s in drawn:
        assert s.coordinator == "brokers" and not s.ensemble
        assert 3 <= s.members <= 4 and s.max_poll_interval > 0
        for f in s.faults:
            if f.kind == "long_blackout":
                assert f.duration > s.session_timeout
            elif f.kind == "blackout":
                assert f.duration < s.session_timeout
            elif f.kind == "poll_expiry":
                assert f.duration > s.max_poll_interval
    # The fixed seeds CI runs inject every brokers-mode kind between them (as
    # the harness turns a leave at the fewest members into a join, and back).
    fixed = set()
    for seed in BROKER_SEEDS:
        schedule = generate_brokers(seed)
        live = schedule.members
        for f in schedule.faults:
            kind = f.kind
            if kind == "leave" and live <= MIN_MEMBERS:
                kind = "join"
            elif kind == "join" and live >= MAX_MEMBERS:
                kind = "leave"
            live += {"join": 1, "leave": -1}.get(kind, 0)
            fixed.add(kind)
    assert fixed == set(BROKER_KINDS), set(BROKER_KINDS) - fixed


def test_checker_judges_commits_within_an_epoch() -> None:
    h = History("t", 2, by_value=True, session_timeout=6.0)
    for n, (p, o) in enumerate([(0, 0), (0, 1), (0, 2)]):
        h.acked[(p, n)] = str(n)
        h.acked_at[(p, n)] = (0, o)
    h.add("a", {"ev": "recs", "t": 1.0, "r": [[0, 0, "0"], [0, 1, "1"]]})
    h.add("a", {"ev": "recs", "t": 3.0, "r": [[0, 2, "2"]]})
    h.commit_samples.append((1.5, 1.6, 0, {0: 2, 1: None}))
    assert check(h) == []
    # Ahead: offset 3 committed at 2.1, but offset 2 was processed only at 3.0.
    h.commit_samples.append((2.0, 2.1, 0, {0: 3, 1: None}))
    (ahead,) = check(h)
    assert "1 commits ahead of processing" in ahead and "offset 2 (message 2)" in ahead
    h.commit_samples.pop()
    # Back: 2, then 1 in the same epoch.
    h.commit_samples.append((4.0, 4.1, 0, {0: 1, 1: None}))
    (back,) = check(h)
    assert "1 commits that went back" in back
    # After a restart (epoch 1) the log and the offsets start again: no regression.
    h.commit_samples.pop()
    h.restarts.append((5.0, 6.0))
    h.commit_samples.append((7.0, 7.1, 1, {0: None, 1: None}))
    assert check(h) == []


def test_checker_counts_what_a_restart_forgot_and_tolerates_its_orphans() -> None:
    h = History("t", 2, by_value=True, session_timeout=6.0)
    for n, (p, o, epoch) in enumerate([(0, 0, 0), (0, 1, 0), (0, 0, 1)]):
        h.acked[(p, n)] = str(n)
        h.acked_at[(p, n)] = (epoch, o)
    h.restarts.append((2.0, 3.0))
    _fetching(h, "a", 1.0, 0.99, [0])
    _fetching(h, "a", 6.0, 5.99, [])  # went on fetching until it heard, within the session
    _fetching(h, "b", 4.0, 3.99, [0])  # the new generation's owner
    h.add("a", {"ev": "recs", "t": 1.5, "r": [[0, 0, "0"]]})
    h.add("b", {"ev": "recs", "t": 4.5, "r": [[0, 0, "2"]]})
    # Message 1 died with the first log; partition 0 was fetched at the restart.
    assert check(h) == []
    assert h.forgotten() == {(0, 1)} and 0 in h.tainted()
    # A message of the last epoch unprocessed is missing, as ever.
    h.acked[(0, 9)] = "9"
    h.acked_at[(0, 9)] = (1, 1)
    assert any("1 acknowledged messages never processed" in v for v in check(h))
    # An orphan that fetched past its session is a double fetch.
    h2 = History("t", 2, by_value=True, session_timeout=6.0)
    h2.restarts.append((2.0, 3.0))
    _fetching(h2, "a", 1.0, 0.99, [0])
    _fetching(h2, "a", 9.5, 9.49, [])
    _fetching(h2, "b", 4.0, 3.99, [0])
    assert any("double fetches" in v for v in check(h2))


def test_checker_tolerates_a_cut_off_member_that_gave_up_in_time() -> None:
    def history(lost_at: float, dark: bool = True) -> History:
        h = History("t", 2, by_value=True, session_timeout=6.0)
        if dark:
            h.dark.append(("a", 2.0, 11.0))
        _fetching(h, "a", 1.0, 0.99, [0])
        _fetching(h, "a", lost_at, lost_at - 0.01, [])
        _listener(h, "a", lost_at - 0.01, "lost", [0])
        _fetching(h, "b", 5.0, 4.99, [0])  # Tansu did not wait for a's session
        return h

    assert check(history(7.5)) == []
    # Past its session (2.0 + 6.0 + 1.0), or without a blackout: a violation.
    assert any("double fetches" in v for v in check(history(9.5)))
    assert any("double fetches" in v for v in check(history(7.5, dark=False)))


def test_checker_tolerates_a_stale_commit_only_where_a_member_reported() -> None:
    def history(stale: bool) -> History:
        h = History("t", 1, by_value=True, session_timeout=6.0)
        h.commit_samples.append((1.0, 1.1, 0, {0: 50}))
        h.commit_samples.append((4.0, 4.1, 0, {0: 220}))  # the next owner's
        h.commit_samples.append((5.0, 5.1, 0, {0: 54}))  # a's, held in the network
        h.add("a", {"ev": "commit", "s": 0.9, "t": 0.95, "o": {"0": 50}, "error": None})
        h.add("a", {"ev": "commit", "s": 1.5, "t": 4.9, "o": {"0": 54}, "error": None})
        if stale:
            _listener(h, "a", 3.0, "lost", [0])
        return h

    assert check(history(stale=True)) == []
    assert stats(history(stale=True))["stale_commits"] == 1
    (back,) = check(history(stale=False))
    assert "1 commits that went back" in back


def test_a_kept_history_judges_the_same_when_loaded_again() -> None:
    h = History("t", 2, by_value=True, session_timeout=6.0)
    _fetching(h, "a", 1.0, 0.99, [0])
    _fetching(h, "b", 1.5, 1.49, [0])
    _fetching(h, "a", 1.8, 1.79, [])  # a double fetch over [1.5, 1.79]
    h.acked[(0, 7)] = "7"  # never processed, of the last epoch
    h.acked_at[(0, 7)] = (1, 3)
    h.owner_samples.append((1.2, 1.3, {0: "a", 1: None}))
    h.commit_samples.append((1.0, 1.1, 0, {0: 5, 1: None}))
    h.restarts.append((2.0, 3.0))
    h.dark.append(("a", 2.0, float("inf")))
    h.killed["b"] = 4.0
    h.faults.append(("kill", "b", 4.0, 4.5))
    h.problems.append("a harness problem")
    kept = json.loads(json.dumps(dump(h)))
    assert check(load(kept)) == check(h) and len(check(h)) == 3
    assert stats(load(kept)) == stats(h)
