"""Run one schedule against real ZooKeeper and the embedded brokers, or on Tansu.

The harness owns the member processes (each behind its own fault proxies),
a producer in the test process, and a sampler (of the owner znodes in
ZooKeeper, or of the group's committed offsets on Tansu); it injects the
schedule's faults and fills a :class:`~tests.support.chaos.checker.History`. It
measures liveness and close itself (they need the clock while things
happen) and leaves every other rule to :func:`tests.support.chaos.checker.check`.

Two backends:

* :class:`Backend`: ZooKeeper (standalone or an ensemble) and three
  embedded 0.8 brokers; each member's proxies stand in front of the
  ZooKeeper nodes (its group).
* :class:`TansuBackend`: one Tansu broker, which is also the group's
  coordinator. Tansu advertises one address, so each member's proxy stands
  in front of the whole broker: the member bootstraps to its proxy and maps
  the advertised address to it in its own process (see
  :mod:`tests.support.chaos.member`); the advertised address itself is a proxy the
  producer and the commit sampler share. A cut or blackout on a member's
  proxy thus hits that member's heartbeats, joins, commits and fetches,
  and no other client's.

A schedule runs in phases: the initial members join and the group settles;
the producer starts; the faults run at their offsets (each in its own task,
so they may overlap); once the last fault has ended the producer stops, the
group must converge within ``session_timeout + 10`` s and then drain; then
every member closes (some with their ZooKeeper blacked out first).
"""

import asyncio
import json
import os
import signal
import sys
import time
import uuid
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from kiel.clients import Producer
from kiel.cluster import Cluster
from kiel.consumer.offsets import GroupOffsets
from kiel.exc import HarnessError, KielError
from kiel.structs import TopicPartition
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.faults import FaultProxy
from kiel.testing.process import free_ports
from kiel.testing.tansu import TansuBroker
from kiel.testing.zookeeper import ZooKeeperEnsemble
from tests.support.chaos.checker import History
from tests.support.chaos.schedule import MAX_MEMBERS, MIN_MEMBERS, Fault, Schedule

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

#: Seconds a member may take to join (connect() returned).
JOIN_BOUND = 60.0
#: Seconds close() may take; then the process must exit within EXIT_BOUND.
CLOSE_BOUND = 30.0
#: Seconds the member's consume loop may take to end once told to close: the
#: consume() in progress returns before close() is called. A fetch stuck in
#: a partition no longer holds it (max_wait_time plus a second), but the
#: offset lookup of a newly owned partition still may, up to the request
#: timeout, 30 s.
CONSUME_BOUND = 40.0
#: Seconds a leader_kill waits for the ensemble to have a leader to kill.
LEADER_BOUND = 20.0
EXIT_BOUND = 10.0
#: After the last fault: convergence within session_timeout + this.
CONVERGE_SLACK = 10.0
#: The same on Tansu: each of its rebalances takes 4-6 s, and a fault's
#: aftermath may take three (a member that lost its partitions joins again,
#: a replacement joins, a stalled member comes back).
BROKER_CONVERGE_SLACK = 25.0
#: Seconds the initial group may take to settle (ZooKeeper, Tansu).
SETTLE_BOUND = {"zookeeper": 30.0, "brokers": 60.0}
#: Brokers mode: seconds between heartbeats.
HEARTBEAT_INTERVAL = 1.0
#: Brokers mode: seconds between two reads of the committed offsets.
COMMIT_SAMPLE_PERIOD = 0.2
#: Brokers mode: pad messages beyond the old log's last acknowledged offset.
PAD_MARGIN = 100
#: Brokers mode: before a Tansu restart, seconds to wait for the group to
#: process what was acknowledged (memory storage: the restart forgets the
#: log, so what is still unprocessed then can never be).
RESTART_DRAIN = 10.0
#: Brokers mode: how long a Tansu restart waits for the producer's batch in
#: flight to settle (a send's own delivery bound is shorter).
PRODUCER_SETTLE = 60.0
#: After convergence: every acknowledged message processed within this.
DRAIN_BOUND = 20.0
#: Seconds the converged assignment must hold before it counts.
STABLE = 1.0
#: Seconds between two reads of the owner znodes.
OWNER_SAMPLE_PERIOD = 0.1
#: Session timeout of the harness's own ZooKeeper session (the owner reads).
OBSERVER_SESSION = 4.0


class Backend:
    """A ZooKeeper (standalone or ensemble) and an embedded cluster registered in it.

    Args:
        zookeeper: a started launcher.
        brokers: embedded brokers to run.
    """

    #: Which coordinator the members use.
    coordinator = "zookeeper"

    def __init__(self, zookeeper: ZooKeeperEnsemble, brokers: int = 3) -> None:
        self.zookeeper = zookeeper
        self.chroot = f"/kiel-chaos-{uuid.uuid4().hex[:8]}"
        self.direct = zookeeper.hosts + self.chroot
        self.cluster = EmbeddedCluster(brokers=brokers, zookeeper=self.direct, partitions=3)

    @property
    def ensemble(self) -> bool:
        return len(self.zookeeper.nodes) > 1

    def start(self) -> None:
        """Start the brokers."""
        self.cluster.start()

    def close(self) -> None:
        """Stop the brokers (the ZooKeeper launcher belongs to the caller)."""
        self.cluster.stop()

    def nodes(self) -> List[Tuple[str, int]]:
        """Every ZooKeeper node's (host, port): one proxy each, per member."""
        return [("127.0.0.1", node.port) for node in self.zookeeper.nodes]

    @property
    def bootstrap(self) -> str:
        """Where the producer (and the members) bootstrap."""
        return self.cluster.bootstrap

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create the schedule's topic (replicated on every broker)."""
        self.cluster.create_topic(topic, partitions, 3)

    def heal(self) -> None:
        """Undo what a schedule may have left broken."""
        self.zookeeper.heal()
        self.cluster.heal()

    def member_config(self, proxies: List[FaultProxy]) -> Dict[str, Any]:
        """A member's connection settings, through its ``proxies``."""
        return {
            "bootstrap": self.cluster.bootstrap,
            "zk_hosts": ",".join(p.address for p in proxies) + self.chroot,
            "zk_direct": self.direct,
        }


class TansuBackend:
    """One Tansu broker, its own group coordinator, behind a shared proxy.

    Tansu listens on a port of its own and advertises the shared proxy's
    (the producer and the commit sampler go through it, and every member
    maps it to its own proxy, see :mod:`tests.support.chaos.member`). Storage is in
    memory: Tansu 0.6.0's build has no persistent engine but S3 and
    PostgreSQL (the latter not compiled in), so a restart forgets the log,
    the topic, the group and its offsets (see :meth:`Runner._restart_tansu`
    for how a schedule lives with that).
    """

    coordinator = "brokers"
    ensemble = False

    def __init__(self) -> None:
        (self.port,) = free_ports(1)
        #: The advertised address: the producer's and the sampler's way in.
        self.shared = FaultProxy(("127.0.0.1", self.port))
        self.broker: Optional[TansuBroker] = None

    def start(self) -> None:
        """Start the shared proxy, then Tansu advertising it."""
        self.shared.start()
        self.broker = TansuBroker(port=self.port, advertised_port=self.shared.port)
        self.broker.start()

    def close(self) -> None:
        """Stop Tansu and the shared proxy."""
        if self.broker is not None:
            self.broker.close()
        self.shared.stop()

    def nodes(self) -> List[Tuple[str, int]]:
        """Tansu itself: one proxy per member in front of it."""
        return [("127.0.0.1", self.port)]

    @property
    def bootstrap(self) -> str:
        """The advertised address (the shared proxy)."""
        return self.shared.address

    def create_topic(self, topic: str, partitions: int) -> None:
        """Create the topic with Tansu's own command (straight to Tansu, no proxy)."""
        assert self.broker is not None
        self.broker.create_topic(topic, partitions)

    def heal(self) -> None:
        """Undo what a schedule may have left broken: the proxy's faults, a stopped Tansu."""
        self.shared.heal()
        assert self.broker is not None
        self.broker.start()

    def member_config(self, proxies: List[FaultProxy]) -> Dict[str, Any]:
        """A member's connection settings: everything through its one proxy."""
        (proxy,) = proxies
        return {
            "coordinator": "brokers",
            "bootstrap": proxy.address,
            "route": ["127.0.0.1", self.shared.port],
            "heartbeat_interval": HEARTBEAT_INTERVAL,
        }


class MemberProcess:
    """One member process, its proxies, and what it reported so far.

    Args:
        runner: the schedule's runner.
        member_id: the member's id.
    """

    def __init__(self, runner: "Runner", member_id: str) -> None:
        self.runner = runner
        self.member_id = member_id
        self.proxies: List[FaultProxy] = []
        self.proc: Optional[asyncio.subprocess.Process] = None
        self.stderr: Optional[IO[bytes]] = None
        self.reader: Optional[asyncio.Future[None]] = None
        self.fetching: List[int] = []
        self.ready = False
        self.killed = False
        self.closing = False
        #: The run is over and stop() ends the process: its end is expected.
        self.stopping = False
        self.closed_at: Optional[float] = None
        #: When the member called close() (its consume loop had ended).
        self.close_called: Optional[float] = None
        self.eof = False
        self.errors: List[str] = []
        #: Until when this member's proxies are blacked out (monotonic).
        self.dark_until = 0.0
        #: Brokers mode: this member led its group at its last heartbeat line.
        self.leader = False

    @property
    def live(self) -> bool:
        """Joined, and neither killed nor leaving."""
        return self.ready and not self.killed and not self.closing and not self.eof

    async def start(self) -> None:
        """Start the proxies and the process (returns at once; see :meth:`wait_ready`)."""
        loop = asyncio.get_running_loop()
        backend = self.runner.backend
        for node in backend.nodes():
            proxy = FaultProxy(node)
            await loop.run_in_executor(None, proxy.start)
            self.proxies.append(proxy)
        schedule = self.runner.schedule
        config = {
            "group": self.runner.group,
            "topic": self.runner.topic,
            "member_id": self.member_id,
            "session_timeout": schedule.session_timeout,
            "max_poll_interval": schedule.max_poll_interval,
            "allocator": schedule.allocator,
            "commit_interval": 0.5,
            # Every other member hands its records to a task_done worker, so
            # revocations and close() find records in the application's hands.
            "workers": int(self.member_id[1:]) % 2 == 1,
            **backend.member_config(self.proxies),
        }
        self.stderr = open(os.path.join(self.runner.workdir, f"{self.member_id}.err"), "w+b")
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.chaos.member", json.dumps(config),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=self.stderr, cwd=ROOT, env=env, limit=64 * 1024 * 1024,
        )
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        history = self.runner.history
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            history.add(self.member_id, event)
            kind = event["ev"]
            if kind == "fetching":
                self.fetching = event["set"]
            elif kind == "hb":
                self.leader = bool(event.get("leader"))
            elif kind == "ready":
                self.ready = True
                routed = event.get("routed")
                if routed is not None and routed != [self.proxies[0].port]:
                    self.runner.problem(f"{self.member_id}: the advertised address led to "
                                        f"ports {routed}, not its proxy's")
            elif kind == "close_call":
                self.close_called = event["t"]
            elif kind == "closed":
                self.closed_at = event["t"]
                if event.get("error"):
                    error = event["error"]
                    self.runner.problem(
                        f"{self.member_id}: close() raised {error['module']}.{error['type']}: "
                        f"{error['msg']}"
                    )
            elif kind == "error":
                self.errors.append(event["type"])
            elif kind == "recs":
                self.runner.processed.update(history.key(p, o, v) for p, o, v in event["r"])
        self.eof = True
        if not (self.killed or self.closing or self.stopping):
            self.runner.problem(f"{self.member_id} ended on its own "
                                f"(stderr: {self.stderr_tail()[-600:]!r})")

    def history_kinds(self, what: str) -> List[Dict[str, Any]]:
        """This member's reported events of one kind."""
        return self.runner.history.kinds(self.member_id, what)

    def stderr_tail(self) -> str:
        """The last lines the process wrote to stderr."""
        if self.stderr is None:
            return ""
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-1500:]

    async def wait_ready(self) -> bool:
        """Wait (bounded by JOIN_BOUND) until connect() returned; False if it did not."""
        deadline = time.monotonic() + JOIN_BOUND
        while not self.ready and not self.eof and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if not self.ready:
            self.runner.problem(f"{self.member_id} did not join within {JOIN_BOUND:.0f} s "
                                f"(stderr: {self.stderr_tail()!r})")
        return self.ready

    async def command(self, line: str) -> None:
        """Send one command line (a dead process is ignored: it is reported elsewhere)."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def proxies_do(self, action: Callable[[FaultProxy], Any]) -> None:
        """Apply ``action`` to each of this member's proxies, off the loop."""
        loop = asyncio.get_running_loop()
        for proxy in self.proxies:
            await loop.run_in_executor(None, action, proxy)

    def kill(self) -> None:
        """SIGKILL the process."""
        assert self.proc is not None
        self.killed = True
        self.runner.history.killed[self.member_id] = time.monotonic()
        self.proc.send_signal(signal.SIGKILL)

    async def close(self) -> None:
        """Ask for a graceful close; check it returns, the process exits, nothing logs after."""
        assert self.proc is not None
        self.closing = True
        started = time.monotonic()
        await self.command("close")
        while (self.close_called is None and not self.eof
               and time.monotonic() - started < CONSUME_BOUND):
            await asyncio.sleep(0.02)
        if self.close_called is not None:
            started = self.close_called
        while self.closed_at is None and not self.eof and time.monotonic() - started < CLOSE_BOUND:
            await asyncio.sleep(0.02)
        if self.closed_at is None:
            logs = [f"{e['name']}: {e['msg']}" for e in self.history_kinds("log")][-2:]
            what = ("close() did not return within" if self.close_called is not None
                    else "the consume loop did not end (consume() did not return) within")
            bound = CLOSE_BOUND if self.close_called is not None else CONSUME_BOUND
            self.runner.problem(
                f"{self.member_id}: {what} {bound:.0f} s "
                f"(last logs: {logs}; tasks: {await self._stacks()}) "
                f"({'the process ended' if self.eof else 'still running'}; "
                f"stderr: {self.stderr_tail()[-600:]!r})"
            )
            # No exit to wait for: a close() that never returned is already judged.
            if self.proc.returncode is None:
                self.proc.kill()
            await self.proc.wait()
        else:
            self.runner.close_times.append(self.closed_at - started)
            try:
                await asyncio.wait_for(self.proc.wait(), EXIT_BOUND)
            except asyncio.TimeoutError:
                self.runner.problem(f"{self.member_id}: the process did not exit within "
                                    f"{EXIT_BOUND:.0f} s of close()")
                self.proc.kill()
                await self.proc.wait()
        if self.closed_at is not None and self.proc.returncode != 0:
            self.runner.problem(f"{self.member_id}: the process exited with "
                                f"{self.proc.returncode} (stderr: {self.stderr_tail()[-600:]!r})")
        assert self.reader is not None
        await self.reader
        if self.closed_at is not None:
            late = [e for e in self.runner.history.kinds(self.member_id, "log")
                    if e["t"] > self.closed_at]
            if late:
                self.runner.problem(f"{self.member_id}: {len(late)} log records after close(), "
                                    f"e.g. {late[:3]}")

    async def _stacks(self) -> List[str]:
        """Ask the process for its tasks' stacks (what a hung close() waits for)."""
        assert self.proc is not None
        if self.eof or self.proc.returncode is not None:
            return []
        before = len(self.history_kinds("tasks"))
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 5.0
        while len(self.history_kinds("tasks")) == before and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        dumps = self.history_kinds("tasks")
        if len(dumps) > before:
            return [s for s in dumps[-1]["stacks"] if "sample_loop" not in s]
        # No answer: the IOLoop itself is stuck. The threads' stacks go to stderr.
        self.proc.send_signal(signal.SIGUSR2)
        await asyncio.sleep(1.0)
        return ["the IOLoop did not answer SIGUSR1 within 5 s; threads: "
                + self.stderr_tail()[-1200:]]

    async def stop(self) -> None:
        """Make sure the process is gone and the proxies are stopped."""
        self.stopping = True
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        if self.reader is not None:
            await self.reader
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
        await self.proxies_do(FaultProxy.stop)
        if self.stderr is not None:
            self.stderr.close()


class Runner:
    """Runs one schedule on a backend and fills its history.

    Args:
        schedule: what to run.
        backend: where (its ZooKeeper kind must match ``schedule.ensemble``).
        workdir: a directory for the members' stderr files.
        counts: fault kind -> how many were injected (updated; shared by a run).
    """

    def __init__(self, schedule: Schedule, backend: Backend, workdir: str,
                 counts: Dict[str, int]) -> None:
        self.schedule = schedule
        self.backend = backend
        self.workdir = workdir
        self.counts = counts
        self.group = f"chaos-{schedule.seed}-{uuid.uuid4().hex[:6]}"
        self.topic = f"chaos-{uuid.uuid4().hex[:10]}"
        self.brokers = backend.coordinator == "brokers"
        self.history = History(self.topic, schedule.partitions, by_value=self.brokers,
                               session_timeout=schedule.session_timeout)
        self.members: List[MemberProcess] = []
        self.processed: Set[Tuple[int, int]] = set()
        self.close_times: List[float] = []
        self._next_id = 0
        self._producing = True
        self._sampling = True
        #: The standalone server is stopped (a zk_restart is under way).
        self.zk_down = False
        #: An embedded broker is starting (a broker_restart's second half).
        self.broker_starting = False
        #: Brokers mode: Tansu's incarnation (a restart forgets everything) ...
        self.epoch = 0
        #: ... and whether a restart is under way (proxies held dark).
        self.restarting = False
        #: Brokers mode: where the pad of the current epoch ends, per partition.
        self._pad_ends: Dict[int, int] = {}
        #: Brokers mode: a restart holds the producer between batches (see
        #: _restart_tansu) ...
        self._hold_producing = False
        #: ... and this is set while no batch of the producer is in flight.
        self._producer_idle = asyncio.Event()
        self._producer_idle.set()

    def problem(self, message: str) -> None:
        """Record a violation the harness measured."""
        self.history.problems.append(message)

    def live(self) -> List[MemberProcess]:
        """Members that joined and are neither killed nor leaving, in join order."""
        return [m for m in self.members if m.live]

    async def spawn(self) -> MemberProcess:
        """Start a new member (returns once its process started).

        Not during a Tansu restart: its proxy would not be held dark, and
        its Metadata could make the topic before the harness does.
        """
        await self._after_restart()
        member = MemberProcess(self, f"m{self._next_id}")
        self._next_id += 1
        self.members.append(member)
        await member.start()
        return member

    async def join(self) -> None:
        """A new member joins; waits until its connect() returned."""
        member = await self.spawn()
        await member.wait_ready()

    # -- the schedule ---------------------------------------------------------

    async def run(self) -> History:
        """Run the schedule; always cleans up. Returns the history."""
        loop = asyncio.get_running_loop()
        schedule = self.schedule
        await loop.run_in_executor(None, self.backend.create_topic, self.topic,
                                   schedule.partitions)
        sample = self._sample_commits if self.brokers else self._sample_owners
        sampler = asyncio.ensure_future(sample())
        settle = SETTLE_BOUND[self.backend.coordinator]
        try:
            for _ in range(schedule.members):
                await self.spawn()
            joined = await asyncio.gather(*(m.wait_ready() for m in self.members))
            if all(joined) and await self._converged(time.monotonic() + settle) is not None:
                await self._faults_and_after()
            else:
                self.problem(f"the initial group did not settle within {settle:.0f} s")
        finally:
            self._producing = False
            self._sampling = False
            await sampler
            for m in self.members:
                await m.stop()
        return self.history

    async def _faults_and_after(self) -> None:
        schedule = self.schedule
        producing = asyncio.ensure_future(self._produce())
        settled = time.monotonic()
        tasks = []
        for fault in schedule.faults:
            delay = settled + fault.at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(self._inject(fault)))
        await asyncio.gather(*tasks)
        last = max([settled] + [end for _, _, _, end in self.history.faults])
        self._producing = False
        await producing
        bound = schedule.session_timeout + (BROKER_CONVERGE_SLACK if self.brokers
                                            else CONVERGE_SLACK)
        converged = await self._converged(last + bound)
        if converged is None:
            samples = self.history.owner_samples
            seen = (f"the last owner sample was read {time.monotonic() - samples[-1][1]:.1f} s "
                    "ago" if samples else "no owner sample was read")
            self.problem(f"no convergence within {bound:.1f} s of the last fault: fetching "
                         f"{ {m.member_id: m.fetching for m in self.live()} }; {seen}")
            return
        self.history.convergence = max(0.0, converged - last)
        deadline = converged + DRAIN_BOUND
        # What a Tansu restart forgot before anyone processed it is gone for good.
        forgotten = self.history.forgotten()
        while (not set(self.history.acked) - forgotten <= self.processed
               and time.monotonic() < deadline):
            await asyncio.sleep(0.05)
        if not set(self.history.acked) - forgotten <= self.processed:
            missing = len(set(self.history.acked) - forgotten - self.processed)
            self.problem(f"the group did not drain within {DRAIN_BOUND:.0f} s of converging "
                         f"({missing} acknowledged messages unprocessed)")
        await self._close_all()

    async def _converged(self, deadline: float) -> Optional[float]:
        """When the group converged for good (None: not by ``deadline``).

        Converged: every partition fetched by exactly one live member, the
        same way for STABLE seconds (a fault's rebalance may still be on its
        way when the fault ends), and (ZooKeeper) an owner-znode sample
        taken meanwhile names the member that fetches each partition. A
        broker group has no owner record to read: the fetch sets alone
        judge it. Returns the start of that stable stretch.
        """
        everything = list(range(self.schedule.partitions))
        current: Optional[Dict[int, str]] = None
        since = time.monotonic()
        while time.monotonic() < deadline + STABLE:
            now = time.monotonic()
            live = self.live()
            fetched = sorted(p for m in live for p in m.fetching)
            snap = ({p: m.member_id for m in live for p in m.fetching}
                    if live and fetched == everything else None)
            if snap is None or snap != current:
                current, since = snap, now
            elif since < deadline and now - since >= STABLE and (self.brokers or any(
                t0 >= since and owners == snap
                for t0, _, owners in self.history.owner_samples[-5:]
            )):
                return since
            await asyncio.sleep(0.02)
        return None

    async def _close_all(self) -> None:
        live = self.live()
        dark = live[: self.schedule.close_blackout]
        for m in dark:
            self.history.dark.append((m.member_id, time.monotonic(), float("inf")))
            await m.proxies_do(FaultProxy.blackout)
        if dark:
            self.counts["close_blackout"] = self.counts.get("close_blackout", 0) + 1
            await asyncio.sleep(self.schedule.close_wait)
        await asyncio.gather(*(m.close() for m in live))

    # -- faults ---------------------------------------------------------------

    def _target(
        self, fault: Fault, exclude: Sequence[MemberProcess] = ()
    ) -> Optional[MemberProcess]:
        live = [m for m in self.live() if m not in exclude]
        return live[fault.target % len(live)] if live else None

    def _leavers(self) -> List[MemberProcess]:
        """Members a graceful leave must not pick: on Tansu, the group's leader.

        Tansu 0.6.0 keeps a leader that left with LeaveGroup as the group's
        leader, and the group then waits for it for ever (Apache Kafka
        elects another): a Tansu defect, not kiel's, that the schedules step
        around. A SIGKILLed leader is fair game (its session ends).
        """
        return [m for m in self.live() if m.leader] if self.brokers else []

    async def _inject(self, fault: Fault) -> None:
        loop = asyncio.get_running_loop()
        start = time.monotonic()
        kind = fault.kind
        who = ""
        if kind in ("leave", "join"):
            count = len(self.live())
            if kind == "leave" and count <= MIN_MEMBERS:
                kind = "join"
            elif kind == "join" and count >= MAX_MEMBERS:
                kind = "leave"
        if kind == "expire":
            # Strategy: a real server expires a session only after its timeout
            # without a heartbeat, and by then the client has suspended (at two
            # thirds of it). A forced expiry while the member is blacked out, or
            # while the server is down, would model what ZooKeeper never does:
            # wait for the server, and pick among the members it can hear.
            deadline = time.monotonic() + JOIN_BOUND
            while self.zk_down and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            now = time.monotonic()
            member = self._target(fault, exclude=[m for m in self.live() if m.dark_until > now])
        elif kind in ("leave", "poll_expiry"):
            member = self._target(fault, exclude=self._leavers())
        else:
            member = self._target(fault)
        if kind in ("blackout", "long_blackout"):
            await self._after_restart()  # its own end would cut the restart's darkness short
        if kind in {"cut", "blackout", "long_blackout", "expire", "kill", "leave",
                    "slow_revoke", "poll_expiry"}:
            if member is None:
                return
            who = member.member_id
        if kind == "cut":
            await member.proxies_do(FaultProxy.cut)
        elif kind in ("blackout", "long_blackout"):
            member.dark_until = time.monotonic() + fault.duration + 0.5
            self.history.dark.append((member.member_id, time.monotonic(), member.dark_until))
            await member.proxies_do(lambda p: p.blackout(fault.duration))
            await asyncio.sleep(fault.duration)
        elif kind == "expire":
            def answers() -> int:
                return len(member.history_kinds("expired")) + sum(
                    1 for e in member.history_kinds("error") if e["msg"].startswith("expire:"))

            before = answers()
            await member.command("expire")
            deadline = time.monotonic() + 20.0
            while answers() == before and time.monotonic() < deadline and not member.eof:
                await asyncio.sleep(0.02)
        elif kind == "zk_restart":
            zookeeper = self.backend.zookeeper
            await self._wait_while(lambda: self.broker_starting)
            self.zk_down = True
            try:
                await loop.run_in_executor(None, zookeeper.stop)
                await asyncio.sleep(fault.duration)
                await loop.run_in_executor(None, zookeeper.start)
            finally:
                self.zk_down = False
        elif kind == "leader_kill":
            # A leader killed just before is still being replaced: the
            # ensemble elects the next within seconds, which is waited for
            # (bounded), not counted against kiel.
            ensemble = self.backend.zookeeper
            try:
                await loop.run_in_executor(None, ensemble.wait_ready, LEADER_BOUND)
            except HarnessError as e:
                self.problem(f"leader_kill: the ensemble elected no leader within "
                             f"{LEADER_BOUND:.0f} s ({e})")
                return
            leader = await loop.run_in_executor(None, lambda: ensemble.leader)
            if leader is None:
                self.problem("leader_kill: the ensemble had no leader")
                return
            who = f"zk{leader.node_id}"
            await loop.run_in_executor(None, leader.kill)
            await asyncio.sleep(fault.duration)
            await loop.run_in_executor(None, leader.start)
        elif kind == "broker_restart":
            cluster = self.backend.cluster
            who = f"broker{fault.broker}"
            await loop.run_in_executor(None, cluster.stop_broker, fault.broker)
            await asyncio.sleep(fault.duration)
            # Strategy: a starting broker registers in ZooKeeper, as 0.8.2's
            # does, and fails its start while the server is down (seed
            # 502341: a zk_restart inside the broker's downtime). That
            # overlap tests the harness, not kiel: the start waits for the
            # server, and a zk_restart for the start.
            await self._wait_while(lambda: self.zk_down)
            self.broker_starting = True
            try:
                await loop.run_in_executor(None, cluster.start_broker, fault.broker)
            finally:
                self.broker_starting = False
        elif kind == "kill":
            member.kill()
            await asyncio.sleep(fault.duration)
            await self.join()
        elif kind == "leave":
            await member.close()
        elif kind == "join":
            await self.join()
        elif kind == "slow_revoke":
            await member.command(f"slow {fault.duration}")
            if len(self.live()) < MAX_MEMBERS:
                await self.join()
            else:
                other = self._target(fault, exclude=[member, *self._leavers()])
                if other is not None:
                    await other.close()
            # The revocation runs during the rebalance; wait for it before normal again.
            await asyncio.sleep(fault.duration)
            await member.command("slow 0")
        elif kind == "poll_expiry":
            # The application stops asking for records past max_poll_interval:
            # the member leaves on purpose, and joins again at the next consume().
            await member.command(f"stall {fault.duration}")
            await asyncio.sleep(fault.duration)
        elif kind == "tansu_restart":
            who = "tansu"
            await self._restart_tansu(fault.duration)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.history.faults.append((kind, who, start, time.monotonic()))

    @staticmethod
    async def _wait_while(busy: Callable[[], bool]) -> None:
        """Wait (at most JOIN_BOUND) while ``busy()``."""
        deadline = time.monotonic() + JOIN_BOUND
        while busy() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    async def _after_restart(self) -> None:
        """Wait (bounded) until no Tansu restart is under way."""
        deadline = time.monotonic() + JOIN_BOUND
        while self.restarting and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    async def _restart_tansu(self, down: float) -> None:
        """Stop Tansu for ``down`` seconds and start it again (memory storage: empty).

        What the schedule does about the forgetting:

        * first it holds the producer between two batches (waiting at most
          PRODUCER_SETTLE for the one in flight) until the members are let
          back: a send still in flight when the proxies went dark would be
          retried into the new log as soon as the shared proxy came back,
          before the pad, where a member's position from the old log skips
          it (seed 2 of the brokers runs: three messages at offsets 0-1 of
          the new log never processed, commits at 62 over them);
        * then it waits (at most RESTART_DRAIN) for the group to process
          what was acknowledged, so that few messages die with the log
          (the checker counts those as *forgotten*, not missing);
        * every proxy (the members' and the shared one) is held dark from
          before the stop until the topic exists again: Tansu creates any
          topic a Metadata request names, with one partition, so a member
          asking first would make the wrong topic;
        * the new topic starts a new *epoch*: the checker compares commits
          within an epoch;
        * before the members are let back, each partition of the new log is
          padded (through the shared proxy, restored first) past the end of
          the old one with ``pad`` messages, which members finish without
          reporting: a durable log never gives an offset twice, and without
          the padding a member's position or commit from the old log would
          skip the new log's first messages (a loss no durable broker
          causes).
        """
        loop = asyncio.get_running_loop()
        backend = self.backend
        assert isinstance(backend, TansuBackend) and backend.broker is not None
        self._hold_producing = True
        try:
            await asyncio.wait_for(self._producer_idle.wait(), PRODUCER_SETTLE)
        except asyncio.TimeoutError:
            self.problem(f"the producer's batch did not settle within {PRODUCER_SETTLE} s "
                         "before a Tansu restart")
        deadline = time.monotonic() + RESTART_DRAIN
        while not set(self.history.acked) <= self.processed and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        self.restarting = True
        dark = time.monotonic()
        proxies = [backend.shared] + [p for m in self.members if not m.eof for p in m.proxies]
        try:
            for proxy in proxies:
                await loop.run_in_executor(None, proxy.blackout)
            await loop.run_in_executor(None, backend.broker.stop)
            await asyncio.sleep(down)
            await loop.run_in_executor(None, backend.broker.start)
            await loop.run_in_executor(None, backend.create_topic, self.topic,
                                       self.schedule.partitions)
            self.epoch += 1
            await loop.run_in_executor(None, backend.shared.restore)
            await self._pad(self.epoch - 1)
        finally:
            if self.epoch == len(self.history.restarts):
                self.epoch += 1  # the restart failed half-way: a new epoch all the same
            now = time.monotonic()
            for proxy in proxies:
                owner = next((m for m in self.members if proxy in m.proxies), None)
                if owner is not None and owner.dark_until > now:
                    # That member's own blackout goes on for its remaining time.
                    await loop.run_in_executor(None, proxy.blackout, owner.dark_until - now)
                else:
                    await loop.run_in_executor(None, proxy.restore)
            self.history.restarts.append((dark, time.monotonic()))
            self.restarting = False
            self._hold_producing = False

    async def _pad(self, old: int) -> None:
        """Fill each partition of the new log past where epoch ``old``'s ended."""
        ends: Dict[int, int] = {}
        for (p, _), (epoch, offset) in self.history.acked_at.items():
            if epoch == old:
                ends[p] = max(ends.get(p, 0), offset + 1)
        for p, end in self._pad_ends.items():
            ends[p] = max(ends.get(p, 0), end)
        self._pad_ends = {}
        # Not idempotent: the restarted Tansu (memory storage) numbers
        # producer ids from 1 again, so an idempotent pad producer could get
        # the load producer's id, and the load producer's retry of a batch
        # in flight at the restart would then be answered "duplicate"
        # against the pad's sequence numbers instead of UNKNOWN_PRODUCER_ID.
        producer = Producer(self.backend.bootstrap, linger=0.005, idempotent=False)
        await asyncio.wait_for(producer.connect(), 30.0)
        try:
            for p in range(self.schedule.partitions):
                # Unacknowledged sends may have landed past the last ack.
                count = ends.get(p, 0) + PAD_MARGIN
                results = await asyncio.wait_for(asyncio.gather(
                    *(producer.produce(self.topic, b"pad", partition=p) for _ in range(count))
                ), 60.0)
                self._pad_ends[p] = max(r.offset for r in results) + 1
        finally:
            await asyncio.wait_for(producer.close(), 30.0)

    # -- load and sampling ----------------------------------------------------

    async def _produce(self) -> None:
        """Numbered messages, round-robin over the partitions, until told to stop."""
        producer = Producer(self.backend.bootstrap, linger=0.005)
        await producer.connect()
        seq = 0
        partitions = self.schedule.partitions
        try:
            while self._producing:
                if self._hold_producing:
                    await asyncio.sleep(0.05)
                    continue
                self._producer_idle.clear()
                batch = list(range(seq, seq + 20))
                seq += 20
                futures = [producer.produce(self.topic, b"%d" % n, partition=n % partitions)
                           for n in batch]
                results = await asyncio.gather(*futures, return_exceptions=True)
                for n, result in zip(batch, results):
                    if isinstance(result, KielError):
                        continue  # not acknowledged: it may or may not be delivered
                    if isinstance(result, BaseException):
                        raise result
                    key = self.history.key(result.partition, result.offset, str(n))
                    self.history.acked[key] = str(n)
                    # Brokers mode: a restart waits for this batch to settle
                    # before it stops Tansu, so this incarnation acknowledged it.
                    self.history.acked_at[key] = (self.epoch, result.offset)
                self._producer_idle.set()
                await asyncio.sleep(0.05)
        finally:
            await asyncio.wait_for(producer.close(), 30.0)

    async def _sample_owners(self) -> None:
        """Read the owner znodes every OWNER_SAMPLE_PERIOD, from a session of our own."""
        loop = asyncio.get_running_loop()
        # Reconnect promptly after a ZooKeeper restart (kazoo's default backoff
        # grows to a minute): the samples around the outage matter most.
        # kazoo waits for the answer to its handshake for as long as the
        # session timeout it asks for: a handshake a restarting server never
        # answered once kept a 30 s observer blind past the convergence
        # bound. A short session (the server caps it at 5 s anyway) gives up
        # on such a handshake in 4 s and tries again; this session's expiry
        # harms nobody, kazoo opens another.
        client = KazooClient(hosts=self.backend.direct, timeout=OBSERVER_SESSION,
                             connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 0.5})
        await loop.run_in_executor(None, client.start, 30.0)
        base = f"/consumers/{self.group}/owners/{self.topic}"
        try:
            while self._sampling:
                sample = await loop.run_in_executor(None, _read_owners, client, base)
                if sample is not None:
                    self.history.owner_samples.append(sample)
                await asyncio.sleep(OWNER_SAMPLE_PERIOD)
        finally:
            await loop.run_in_executor(None, client.stop)
            await loop.run_in_executor(None, client.close)


    async def _sample_commits(self) -> None:
        """Brokers mode: read the group's committed offsets every COMMIT_SAMPLE_PERIOD.

        Through the shared proxy, as a tool outside the group would; none
        during a Tansu restart, and a read that a restart overlapped is
        dropped (it may mix two incarnations).
        """
        cluster = Cluster(self.backend.bootstrap)
        offsets = GroupOffsets(cluster, self.group)
        tps = [TopicPartition(self.topic, p) for p in range(self.schedule.partitions)]
        try:
            await asyncio.wait_for(cluster.connect(), 30.0)
            while self._sampling:
                epoch, restarts = self.epoch, len(self.history.restarts)
                if not self.restarting:
                    t0 = time.monotonic()
                    try:
                        found = await asyncio.wait_for(offsets.fetch(tps), 3.0)
                    except (KielError, asyncio.TimeoutError):
                        found = None
                    if (found is not None and not self.restarting and epoch == self.epoch
                            and restarts == len(self.history.restarts)):
                        self.history.commit_samples.append(
                            (t0, time.monotonic(), epoch,
                             {tp.partition: found.get(tp) for tp in tps}))
                await asyncio.sleep(COMMIT_SAMPLE_PERIOD)
        finally:
            cluster.close()


def _read_owners(
    client: KazooClient, base: str
) -> Optional[Tuple[float, float, Dict[int, Optional[str]]]]:
    """One read of every owner znode: (t0, t1, {partition: member}); None if ZooKeeper failed."""
    t0 = time.monotonic()
    owners: Dict[int, Optional[str]] = {}
    try:
        children = client.get_children_async(base).get(timeout=2.0)
        pending = [(int(c), client.get_async(f"{base}/{c}")) for c in children]
        for p, result in pending:
            try:
                data, _ = result.get(timeout=2.0)
                owners[p] = data.decode()
            except NoNodeError:
                owners[p] = None
    except NoNodeError:
        pass  # nobody owns anything yet
    except (KazooException, KazooTimeoutError):
        return None
    return t0, time.monotonic(), owners
