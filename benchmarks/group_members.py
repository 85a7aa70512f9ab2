"""One member of a group the brokers coordinate, for each client the rebalance benchmark compares.

kiel, aiokafka, kafka-python and confluent-kafka consumers behind one small
interface (:class:`Member`): ``start()`` begins joining and returns at once,
``assignment()`` is what the client's own ``assignment()`` API says right now
(partition numbers), ``close()`` is the client's graceful close (revoke,
commit, LeaveGroup). Every member subscribes to one topic with the same
settings (:class:`Settings`: session timeout, heartbeat interval, poll
interval, fetch wait, the assignor: ``range`` unless told, or
``cooperative-sticky`` for kiel, confluent-kafka and kafka-python) and
consumes all the time, as an application would: kiel and aiokafka on the
caller's event loop, kafka-python and confluent-kafka polling on a thread of
their own. A member given :class:`Receipts` notes when it got records of
each partition (the rebalance benchmark's per-partition pauses).

Run as a script, it is one member in a process of its own (the benchmark
SIGKILLs it to time a crash); it prints ``owned 0,1,2`` each time its
assignment changes::

    python benchmarks/group_members.py CLIENT BOOTSTRAP GROUP TOPIC SESSION HEARTBEAT

:class:`ProcessMember` starts such a process and follows its lines.
"""
import argparse
import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional

#: The clients, in the order the benchmark prints them.
CLIENTS = ("kiel", "confluent-kafka", "kafka-python", "aiokafka")
#: How long a thread's poll() or aiokafka's getmany() waits: the most a
#: change of assignment can go unseen by the application.
POLL = 0.1


@dataclass(frozen=True)
class Settings:
    """What every member is given, in seconds (each client gets its own unit)."""

    session_timeout: float = 6.0
    heartbeat_interval: float = 1.0
    max_poll_interval: float = 300.0
    #: A fetch's longest wait at the broker (every peer's default is 0.5 s).
    fetch_wait: float = 0.5
    assignor: str = "range"


class Receipts:
    """When records of each partition arrived, at any member of a group.

    Members note a time per partition per batch (from their own thread or
    task: a list's append is atomic), so the longest gap between two notes
    is how long that partition went unconsumed.
    """

    def __init__(self) -> None:
        self.times: Dict[int, List[float]] = {}

    def saw(self, partitions: Iterable[int]) -> None:
        now = time.monotonic()
        for p in partitions:
            self.times.setdefault(p, []).append(now)

    def longest_gap(self, partition: int, start: float, end: float) -> float:
        """The longest time within ``[start, end]`` with no record of ``partition``."""
        inside = [t for t in self.times.get(partition, []) if start <= t <= end]
        edges = [start] + inside + [end]
        return max(b - a for a, b in zip(edges, edges[1:]))


class Member:
    """One consumer in the group; subclasses adapt one client."""

    def __init__(self, bootstrap: str, group: str, topic: str, settings: Settings,
                 receipts: Optional[Receipts] = None) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.settings = settings
        self.receipts = receipts

    async def start(self) -> None:
        """Begin joining; return without waiting for an assignment."""
        raise NotImplementedError

    def assignment(self) -> FrozenSet[int]:
        """The partitions of the topic the client's own ``assignment()`` names now."""
        raise NotImplementedError

    async def close(self) -> None:
        """The client's graceful close; bounded."""
        raise NotImplementedError


# --------------------------------------------------------------------------
# on the event loop


class KielMember(Member):
    """kiel's GroupedConsumer without ``zk_hosts``, consuming on a task."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        from kiel.consumer import GroupedConsumer
        s = self.settings
        self.consumer = GroupedConsumer(
            self.bootstrap, self.group, topics=[self.topic], allocator=s.assignor,
            session_timeout=s.session_timeout, heartbeat_interval=s.heartbeat_interval,
            max_poll_interval=s.max_poll_interval, max_wait_time=s.fetch_wait)
        self.task: Optional[asyncio.Task[None]] = None

    async def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        # connect() returns once the first join is done; then consume for ever.
        await self.consumer.connect()
        while True:
            records = await self.consumer.consume()
            if self.receipts is not None and records:
                self.receipts.saw({r.partition for r in records})

    def assignment(self) -> FrozenSet[int]:
        if self.task is not None and self.task.done() and not self.task.cancelled():
            self.task.result()  # a failed member says so instead of looking idle
        return frozenset(tp.partition for tp in self.consumer.assignment())

    async def close(self) -> None:
        await _cancel(self.task)
        await self.consumer.close()


class AiokafkaMember(Member):
    """aiokafka's AIOKafkaConsumer, consuming on a task."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        s = self.settings
        assignor = {"range": RangePartitionAssignor,
                    "roundrobin": RoundRobinPartitionAssignor}[s.assignor]
        self.consumer = AIOKafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
            partition_assignment_strategy=(assignor,), session_timeout_ms=_ms(s.session_timeout),
            heartbeat_interval_ms=_ms(s.heartbeat_interval),
            max_poll_interval_ms=_ms(s.max_poll_interval), fetch_max_wait_ms=_ms(s.fetch_wait))
        self.task: Optional[asyncio.Task[None]] = None

    async def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        await self.consumer.start()
        while True:
            await self.consumer.getmany(timeout_ms=_ms(POLL))

    def assignment(self) -> FrozenSet[int]:
        if self.task is not None and self.task.done() and not self.task.cancelled():
            self.task.result()
        return frozenset(tp.partition for tp in self.consumer.assignment())

    async def close(self) -> None:
        await _cancel(self.task)
        await self.consumer.stop()


async def _cancel(task: Optional["asyncio.Task[None]"]) -> None:
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# --------------------------------------------------------------------------
# on a thread of their own


class ThreadMember(Member):
    """A blocking client built, polled and closed on its own thread.

    ``owned`` is refreshed from the client's ``assignment()`` after every
    poll, on the client's own thread (neither client promises that
    ``assignment()`` may be called from another one).
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.owned: FrozenSet[int] = frozenset()
        self.error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"{type(self).__name__}-{self.group}")

    def make(self) -> Any:
        """Build the client's consumer, subscribed (on the member's thread)."""
        raise NotImplementedError

    def poll(self, consumer: Any) -> "set[int]":
        """One poll of at most :data:`POLL` seconds; the partitions it got records of."""
        raise NotImplementedError

    async def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            consumer = self.make()
        except BaseException as e:  # noqa: BLE001 - raised again by assignment()
            self.error = e
            return
        try:
            while not self._stop.is_set():
                got = self.poll(consumer)
                if self.receipts is not None and got:
                    self.receipts.saw(got)
                self.owned = frozenset(tp.partition for tp in consumer.assignment())
        except BaseException as e:  # noqa: BLE001 - raised again by assignment()
            self.error = e
        finally:
            consumer.close()
            self.owned = frozenset()

    def assignment(self) -> FrozenSet[int]:
        if self.error is not None:
            raise RuntimeError(f"{type(self).__name__} failed: {self.error!r}") from self.error
        return self.owned

    async def close(self) -> None:
        if self._thread.ident is None:
            return  # never started
        self._stop.set()
        joined = asyncio.get_running_loop().run_in_executor(None, self._thread.join, 30.0)
        await joined
        if self._thread.is_alive():
            raise RuntimeError(f"{type(self).__name__} did not close within 30 s")


class KafkaPythonMember(ThreadMember):
    def make(self) -> Any:
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        s = self.settings
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        assignor = {"range": RangePartitionAssignor,
                    "roundrobin": RoundRobinPartitionAssignor,
                    "cooperative-sticky": CooperativeStickyAssignor}[s.assignor]
        return KafkaConsumer(
            self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
            partition_assignment_strategy=[assignor], session_timeout_ms=_ms(s.session_timeout),
            heartbeat_interval_ms=_ms(s.heartbeat_interval),
            max_poll_interval_ms=_ms(s.max_poll_interval), fetch_max_wait_ms=_ms(s.fetch_wait))

    def poll(self, consumer: Any) -> "set[int]":
        got = consumer.poll(timeout_ms=_ms(POLL))
        return {tp.partition for tp, records in got.items() if records}


class ConfluentMember(ThreadMember):
    def make(self) -> Any:
        from confluent_kafka import Consumer
        s = self.settings
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "partition.assignment.strategy": s.assignor,
            "session.timeout.ms": _ms(s.session_timeout),
            "heartbeat.interval.ms": _ms(s.heartbeat_interval),
            "max.poll.interval.ms": _ms(s.max_poll_interval),
            "fetch.wait.max.ms": _ms(s.fetch_wait),
        })
        consumer.subscribe([self.topic])
        return consumer

    def poll(self, consumer: Any) -> "set[int]":
        messages = consumer.consume(500, POLL)
        return {m.partition() for m in messages if not m.error()}


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


MEMBERS: "dict[str, Callable[..., Member]]" = {
    "kiel": KielMember, "confluent-kafka": ConfluentMember, "kafka-python": KafkaPythonMember,
    "aiokafka": AiokafkaMember,
}


# --------------------------------------------------------------------------
# in a process of its own


class ProcessMember(Member):
    """A member of ``client`` in a process of its own (run from this script), to be killed.

    A reader thread follows the process's ``owned ...`` lines; ``assignment()``
    is the last one read.
    """

    def __init__(self, client: str, *args: Any) -> None:
        super().__init__(*args)
        self.client = client
        self.owned: FrozenSet[int] = frozenset()
        self.process: Optional[subprocess.Popen[str]] = None
        self.lines: List[str] = []
        self.killed = False
        self._reader: Optional[threading.Thread] = None

    async def start(self) -> None:
        s = self.settings
        command = [sys.executable, os.path.abspath(__file__), self.client, self.bootstrap,
                   self.group, self.topic, str(s.session_timeout), str(s.heartbeat_interval),
                   str(s.max_poll_interval), str(s.fetch_wait), s.assignor]
        import kiel
        env = dict(os.environ)
        # The kiel this process imported (a worktree's, say), in the child too.
        where = os.path.dirname(os.path.dirname(os.path.abspath(kiel.__file__)))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [where, env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.PIPE, text=True, env=env)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            kind, _, rest = line.strip().partition(" ")
            if kind == "owned":
                self.owned = frozenset(int(p) for p in rest.split(",") if p)

    def assignment(self) -> FrozenSet[int]:
        if self.process is not None and self.process.poll() is not None and not self.killed:
            raise RuntimeError(f"the {self.client} member's process exited with "
                               f"{self.process.returncode}: {self.lines[-5:]}")
        return self.owned

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no commit; the coordinator waits out its session."""
        assert self.process is not None
        self.killed = True
        self.process.send_signal(signal.SIGKILL)

    async def close(self) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            self.kill()
        await asyncio.get_running_loop().run_in_executor(None, process.wait, 10.0)
        if self._reader is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._reader.join, 10.0)
        if process.stdout is not None:
            process.stdout.close()


async def _serve(client: str, bootstrap: str, group: str, topic: str,
                 settings: Settings) -> None:
    """Be one member until killed, printing the assignment each time it changes."""
    member = MEMBERS[client](bootstrap, group, topic, settings)
    await member.start()
    last: Optional[FrozenSet[int]] = None
    while True:
        owned = member.assignment()
        if owned != last:
            print("owned " + ",".join(str(p) for p in sorted(owned)), flush=True)
            last = owned
        await asyncio.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser(description="one group member, until killed")
    parser.add_argument("client", choices=CLIENTS)
    parser.add_argument("bootstrap")
    parser.add_argument("group")
    parser.add_argument("topic")
    parser.add_argument("session_timeout", type=float)
    parser.add_argument("heartbeat_interval", type=float)
    parser.add_argument("max_poll_interval", type=float, nargs="?", default=300.0)
    parser.add_argument("fetch_wait", type=float, nargs="?", default=0.5)
    parser.add_argument("assignor", nargs="?", default="range")
    args = parser.parse_args()
    settings = Settings(args.session_timeout, args.heartbeat_interval, args.max_poll_interval,
                        args.fetch_wait, args.assignor)
    asyncio.run(_serve(args.client, args.bootstrap, args.group, args.topic, settings))


if __name__ == "__main__":
    main()
