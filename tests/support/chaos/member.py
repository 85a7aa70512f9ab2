"""One group member, in a process of its own, reporting as JSON lines.

Run as ``python -m tests.support.chaos.member '<json config>'`` from the repository
root. The config says ``bootstrap``, ``group``, ``topic``, ``member_id``,
``zk_hosts`` (this member's fault proxies, chroot appended: every ZooKeeper
byte of this member passes its own proxies), ``zk_direct`` (the servers
themselves, for the expiry helper only), ``session_timeout``,
``allocator``, ``commit_interval`` and ``workers``.

With ``"coordinator": "brokers"`` the member joins a group the brokers
coordinate (no ``zk_hosts``), with ``max_poll_interval`` and
``heartbeat_interval`` from the config, and every byte it exchanges with
the broker passes its own fault proxy: ``bootstrap`` is that proxy, and
``route`` maps the one address Tansu advertises (``[host, port]``, a
proxy the producer shares) to it through Tornado's ``OverrideResolver``,
configured in this process only. So a fault on a member's proxy hits that
member's group requests, commits and fetches alike, and nobody else's. The
``ready`` line says where the advertised address resolves (``routed``), so
the harness can check the routing held.

Without ``workers`` the consumer uses ``auto_finish=True``: a record counts
as processed when ``consume()`` returned it (it is reported then), and
finished when the loop asks for more. With ``workers`` it uses
``auto_finish=False``: the loop hands each batch to a worker task that
processes its records one by one (a few milliseconds each), reports them
processed when done, and marks each ``task_done``; so a revocation, or
``close()``, finds records in the application's hands. Either way a record
reported by a member that is then SIGKILLed may be delivered again by the
next owner (at-least-once), while a graceful hand-off (the old owner
committed what it finished) must deliver nothing twice, and no partition may
be processed by two live members at once.

Lines written to stdout (``t`` is ``time.monotonic()``, which is one clock
for every process of the machine, so the test can order events of
different members):

* ``{"ev": "ready"}`` once ``connect()`` returned;
* ``{"ev": "recs", "topic", "r": [[partition, offset, value], ...]}`` per
  ``consume()`` that returned records (with ``workers``: per batch the
  worker finished);
* ``{"ev": "work", "p", "s", "e"}`` (with ``workers``): the worker
  processed records of partition ``p`` from ``s`` to ``e``;
* ``{"ev": "fetching", "t", "prev", "set"}`` whenever the fetch set changes:
  ``set`` was observed at ``t``, and the previous set was still observed at
  ``prev`` (the sampler's previous look), so the test knows both ends of
  every run of a partition in the set;
* ``{"ev": "owned", "t", "set"}`` when the assignment changes;
* ``{"ev": "hb", "t", "fetching", "owned", "leader"}`` every quarter second
  (``leader``: this member leads its broker group now);
* ``{"ev": "listener", "what", "ps"}`` for each listener call
  (``assigned``, ``revoked``, ``lost``);
* ``{"ev": "commit", "t", "s", "o", "error"}`` for each commit the group
  sent at ``s`` and that was answered (or failed) at ``t``: ``o`` maps
  partitions to offsets, ``error`` is the failure's type or null;
* ``{"ev": "error", "type", "msg"}`` for each typed error ``consume()``
  raised (the loop carries on);
* ``{"ev": "log", "level", "name", "msg"}`` for every log record at INFO or
  above, from any library, as it is emitted (so one after ``closed`` shows);
* ``{"ev": "expired"}`` after a forced session expiry;
* ``{"ev": "tasks", "stacks"}`` on SIGUSR1: every asyncio task's stack
  (the harness asks when ``close()`` hangs; SIGUSR2 dumps the threads'
  stacks to stderr, for when the IOLoop itself is blocked);
* ``{"ev": "closing"}`` when the command came, ``{"ev": "close_call"}``
  once the consume loop ended and ``close()`` is called, and
  ``{"ev": "closed", "took", "error"}`` when it returned (``error``: what
  it raised, or null).

Commands read from stdin, one a line: ``close`` (leave gracefully, then
exit), ``expire`` (make the server expire this member's session, with the
ZooKeeper launcher's helper), ``slow SECONDS`` (``on_partitions_revoked``
sleeps that long from now on; ``slow 0`` ends it), ``stall SECONDS`` (the
application does not ask for records for that long: past
``max_poll_interval`` a broker-group member leaves on purpose, and the next
``consume()`` raises and joins again).
"""

import asyncio
import faulthandler
import json
import logging
import signal
import sys
import time
from typing import Any, Dict, List, Optional, Set

from tornado.netutil import DefaultExecutorResolver, Resolver

from kiel.consumer import GroupedConsumer
from kiel.exc import ClientClosedError, HarnessError, KielError, ZooKeeperError
from kiel.structs import TopicPartition
from kiel.testing.zookeeper.session import expire_session

#: Seconds between two looks at the fetch set (the resolution of the runs).
SAMPLE_PERIOD = 0.005
#: Seconds between heartbeats.
HEARTBEAT_PERIOD = 0.25
#: Seconds a worker spends on one record.
WORK = 0.002
#: The value of the harness's padding after a Tansu restart (see the harness).
PAD = b"pad"


def emit(event: str, **fields: Any) -> None:
    """Write one report line (synchronous: it is out before anything else runs)."""
    fields["ev"] = event
    fields.setdefault("t", time.monotonic())
    sys.stdout.write(json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class ReportingHandler(logging.Handler):
    """Every log record becomes a ``log`` line."""

    def emit(self, record: logging.LogRecord) -> None:  # noqa: D102 - logging's API
        try:
            message = record.getMessage()
        except (TypeError, ValueError) as e:  # a bad format string in a library
            message = f"{record.msg!r} (unformattable: {e})"
        emit("log", level=record.levelname, name=record.name, msg=message[:500])


class Listener:
    """Reports every call; ``slow`` seconds of sleep in ``on_partitions_revoked``."""

    def __init__(self) -> None:
        self.slow = 0.0

    async def on_partitions_revoked(self, tps: List[TopicPartition]) -> None:
        emit("listener", what="revoked", ps=sorted(tp.partition for tp in tps))
        if self.slow:
            await asyncio.sleep(self.slow)

    def on_partitions_assigned(self, tps: List[TopicPartition]) -> None:
        emit("listener", what="assigned", ps=sorted(tp.partition for tp in tps))

    def on_partitions_lost(self, tps: List[TopicPartition]) -> None:
        emit("listener", what="lost", ps=sorted(tp.partition for tp in tps))


class Member:
    """The consumer, its consume loop, the samplers and the command reader."""

    def __init__(self, config: Dict[str, Any]) -> None:
        self.config = config
        self.listener = Listener()
        self.brokers = config.get("coordinator") == "brokers"
        common: Dict[str, Any] = dict(
            topics=[config["topic"]],
            allocator=config["allocator"],
            listener=self.listener,
            commit_interval=config["commit_interval"],
            max_wait_time=0.2,
            join_timeout=60.0,
            auto_finish=not config.get("workers", False),
        )
        if self.brokers:
            self.consumer = GroupedConsumer(
                config["bootstrap"], config["group"],
                session_timeout=config["session_timeout"],
                heartbeat_interval=config["heartbeat_interval"],
                max_poll_interval=config["max_poll_interval"],
                **common,
            )
        else:
            self.consumer = GroupedConsumer(
                config["bootstrap"], config["group"], zk_hosts=config["zk_hosts"],
                member_id=config["member_id"],
                zk_session_timeout=config["session_timeout"],
                **common,
            )
        #: Seconds the consume loop waits before its next consume() (``stall``).
        self.stall = 0.0
        #: With workers: batches waiting for the worker (bounded: back-pressure).
        self.batches: asyncio.Queue[List[Any]] = asyncio.Queue(maxsize=2)
        self.stopping = False
        self.expiring: Optional[asyncio.Future[None]] = None
        self.last_fetching: Optional[Set[int]] = None
        self.last_owned: Optional[Set[int]] = None
        self.last_look = time.monotonic()
        self.next_beat = self.last_look

    def partitions(self, tps: List[TopicPartition]) -> List[int]:
        return sorted(tp.partition for tp in tps)

    async def consume_loop(self) -> None:
        topic = self.config["topic"]
        while not self.stopping:
            if self.stall:
                stall, self.stall = self.stall, 0.0
                emit("stalled", seconds=stall)
                await asyncio.sleep(stall)
            try:
                records = await self.consumer.consume()
            except ClientClosedError:
                return
            except KielError as e:
                emit("error", type=type(e).__name__, msg=str(e)[:300])
                # Strategy: a short pause, not a synchronisation: a failing
                # broker would otherwise be asked again in a tight loop.
                await asyncio.sleep(0.1)
                continue
            if records and self.config.get("workers"):
                await self.batches.put(records)
            elif records:
                # The harness's padding after a Tansu restart is not reported.
                real = [r for r in records if r.value != PAD]
                if real:
                    emit("recs", topic=topic,
                         r=[[r.partition, r.offset, r.value.decode()] for r in real])

    async def worker(self) -> None:
        """Process each batch record by record, report it, then task_done (until cancelled)."""
        topic = self.config["topic"]
        while True:
            records = await self.batches.get()
            by_partition: Dict[int, List[Any]] = {}
            for record in records:
                by_partition.setdefault(record.partition, []).append(record)
            for partition, some in sorted(by_partition.items()):
                # The harness's padding after a Tansu restart: finished in
                # order with the rest, neither worked on nor reported.
                real = [r for r in some if r.value != PAD]
                if real:
                    started = time.monotonic()
                    for _ in real:
                        await asyncio.sleep(WORK)
                    emit("work", p=partition, s=started, e=time.monotonic())
                    emit("recs", topic=topic,
                         r=[[r.partition, r.offset, r.value.decode()] for r in real])
                for record in some:
                    self.consumer.task_done(record)

    def look(self) -> None:
        """One look at the fetch set and the assignment; report what changed."""
        consumer = self.consumer
        now = time.monotonic()
        fetching = set(self.partitions(consumer.fetching()))
        if fetching != self.last_fetching:
            emit("fetching", t=now, prev=self.last_look, set=sorted(fetching))
            self.last_fetching = fetching
        assignment = set(self.partitions(consumer.assignment()))
        if assignment != self.last_owned:
            emit("owned", t=now, set=sorted(assignment))
            self.last_owned = assignment
        if now >= self.next_beat:
            emit("hb", t=now, fetching=sorted(fetching), owned=sorted(assignment),
                 leader=self.brokers and consumer.metrics().leader)
            self.next_beat = now + HEARTBEAT_PERIOD
        self.last_look = now

    async def sample_loop(self) -> None:
        """Look every SAMPLE_PERIOD until cancelled."""
        while True:
            self.look()
            await asyncio.sleep(SAMPLE_PERIOD)

    async def expire(self) -> None:
        zk = self.consumer.zk
        if zk is None:
            emit("error", type="HarnessError", msg="expire before connect")
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(
                None, expire_session, self.config["zk_direct"], zk.client, 15.0
            )
        except HarnessError as e:
            emit("error", type=type(e).__name__, msg=f"expire: {e}"[:300])
            return
        emit("expired")

    async def commands(self) -> None:
        """Read commands from stdin until ``close`` (or the end of stdin)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while True:
            line = (await reader.readline()).decode().strip()
            if not line or line == "close":
                return
            word, _, arg = line.partition(" ")
            if word == "expire":
                self.expiring = asyncio.ensure_future(self.expire())
            elif word == "slow":
                self.listener.slow = float(arg)
            elif word == "stall":
                self.stall = float(arg)
            else:
                emit("error", type="HarnessError", msg=f"unknown command {line!r}")

    def watch_commits(self) -> None:
        """Report every commit the group sends (``commit``: when sent, when
        answered, the offsets, the error if any).

        An observation only, through the consumer's private offsets object
        (kiel logs no commits): the checker needs to know which member's
        commit wrote an offset it reads (see the checker's stale commits).
        """
        offsets = self.consumer._offsets
        original = offsets.commit

        async def commit(wanted: Dict[TopicPartition, int], metadata: str = "") -> None:
            sent = time.monotonic()
            o = {str(tp.partition): v for tp, v in wanted.items()}
            try:
                await original(wanted, metadata)
            except BaseException as e:
                emit("commit", s=sent, o=o, error=type(e).__name__)
                raise
            emit("commit", s=sent, o=o, error=None)

        offsets.commit = commit  # type: ignore[method-assign]

    def dump_tasks(self) -> None:
        """Report every task's stack (SIGUSR1: the harness asks when close() hangs)."""
        stacks = []
        for task in asyncio.all_tasks():
            # A suspended task's own stack is one frame: follow what each
            # coroutine awaits, down to the innermost one.
            where = []
            awaited: Any = task.get_coro()
            while awaited is not None and len(where) < 20:
                frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "ag_frame", None)
                if frame is None:
                    where.append(type(awaited).__name__)
                    break
                where.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
                awaited = getattr(awaited, "cr_await", None)
            stacks.append(f"{task.get_name()}: " + " > ".join(where))
        emit("tasks", stacks=stacks)

    async def connect(self) -> None:
        """connect(), tried again while ZooKeeper is unreachable, as a supervisor would.

        A replacement started during a server restart or a blackout gets a
        ZooKeeperError after zk_connect_timeout (a broker-group member a
        KielError after join_timeout): that is the bound doing its job, not
        a fault. The harness bounds the whole join (JOIN_BOUND).
        """
        retried = KielError if self.brokers else ZooKeeperError
        while True:
            try:
                await self.consumer.connect()
                return
            except retried as e:
                emit("connect_failed", type=type(e).__name__, msg=str(e)[:300])
                await asyncio.sleep(0.5)

    async def run(self) -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, self.dump_tasks)
        self.watch_commits()
        routed = None
        if self.brokers:
            host, port = self.config["route"]
            found = await Resolver().resolve(host, port)
            routed = sorted({address[1] for _, address in found})
        await self.connect()
        emit("ready", member=self.config["member_id"], routed=routed)
        sampler = asyncio.ensure_future(self.sample_loop())
        consuming = asyncio.ensure_future(self.consume_loop())
        # The worker goes on through close(), which waits for what it holds.
        working = asyncio.ensure_future(self.worker())
        await self.commands()
        emit("closing")
        self.stopping = True
        await consuming
        if self.expiring is not None:
            await self.expiring
        started = time.monotonic()
        emit("close_call", t=started)
        error = None
        try:
            await self.consumer.close()
        except Exception as e:  # noqa: BLE001 - the checker judges any failure of close()
            error = {"type": type(e).__name__, "module": type(e).__module__, "msg": str(e)[:300]}
        took = time.monotonic() - started
        working.cancel()
        sampler.cancel()
        self.look()  # the last look: the runs still open end here
        emit("closed", took=took, error=error)


def route(config: Dict[str, Any]) -> None:
    """Brokers mode: the advertised address leads to this member's own proxy (see the top)."""
    host, port = config["route"]
    proxy_host, proxy_port = config["bootstrap"].rsplit(":", 1)
    Resolver.configure("tornado.netutil.OverrideResolver", resolver=DefaultExecutorResolver(),
                       mapping={(host, port): (proxy_host, int(proxy_port))})


def main() -> None:
    config = json.loads(sys.argv[1])
    if config.get("coordinator") == "brokers":
        route(config)
    handler = ReportingHandler(logging.INFO)
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # The threads' stacks on SIGUSR2, to stderr: what a blocked IOLoop waits for.
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    asyncio.run(Member(config).run())


if __name__ == "__main__":
    main()
