"""The cluster core: brokers, topics, leaders and offsets, on one IOLoop.

:class:`ClusterCore` plays Kafka's controller and every broker's replica
manager at once. Replicas share one :class:`~kiel.testing.broker.log.PartitionLog`
per partition, so every in-sync replica is always caught up (the high
watermark is the log end offset) and a leader move or failover loses nothing.

Every method runs on the core's IOLoop; the ``async`` ones may touch
ZooKeeper, always through :meth:`ClusterCore.zk_call` (an executor thread),
never blocking the loop. :class:`~kiel.testing.broker.cluster.EmbeddedCluster`
is the thread-safe, synchronous face of this object.
"""

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, TypeVar, Union

from tornado import gen
from tornado.ioloop import IOLoop

from kiel.exc import ConfigError, HarnessError, KielError, ZooKeeperError
from kiel.testing.broker.faults import Faults
from kiel.testing.broker.log import PartitionLog
from kiel.testing.broker.server import BrokerServer
from kiel.testing.broker.state import (
    NO_LEADER,
    BrokerConfig,
    PartitionState,
    TopicState,
    assign_replicas,
    group_partition,
    validate_topic_name,
)
from kiel.testing.broker.zk import ZooKeeperLayout

__all__ = ["ClusterCore", "HOST"]

log = logging.getLogger(__name__)

#: The only address the embedded brokers listen on.
HOST = "127.0.0.1"
# Topic assignments of a cluster without ZooKeeper, kept next to the logs.
_TOPICS_FILE = "kiel-topics.json"

T = TypeVar("T")
TopicsSpec = Union[None, Iterable[str], Mapping[str, int]]


class ClusterCore:
    """N brokers sharing partition logs; lives on one IOLoop.

    Args:
        brokers: how many brokers (ids 1..N).
        config: settings shared by all brokers.
        zookeeper: kazoo connection string (optionally with a chroot), or
            ``None`` to run without ZooKeeper (offsets then kept in memory).
        ports: fixed ports per broker (default: free ports picked at start).
    """

    def __init__(self, brokers: int, config: BrokerConfig, zookeeper: Optional[str] = None,
                 ports: Optional[list[int]] = None) -> None:
        if brokers < 1:
            raise ConfigError(f"a cluster needs at least one broker, not {brokers}")
        if ports is not None and len(ports) != brokers:
            raise ConfigError(f"{len(ports)} ports given for {brokers} brokers")
        config.check()
        self.config = config
        self.zookeeper = zookeeper
        self.faults = Faults()
        self.brokers: dict[int, BrokerServer] = {
            i: BrokerServer(self, i, HOST, ports[i - 1] if ports else 0)
            for i in range(1, brokers + 1)
        }
        self.topics: dict[str, TopicState] = {}
        self.memory_offsets: dict[tuple[str, str, int], bytes] = {}
        self.controller_id: Optional[int] = None
        self.controller_epoch = 0
        self.errors: list[BaseException] = []
        self._topic_counter = 0
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kiel-broker-zk")
        self.zk: Optional[ZooKeeperLayout] = None
        self.loop: Optional[IOLoop] = None
        if zookeeper:
            self.zk = ZooKeeperLayout(zookeeper, on_session_restored=self._session_restored)

    # -- plumbing ------------------------------------------------------------

    async def zk_call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking :class:`ZooKeeperLayout` call in the executor.

        Raises:
            ZooKeeperError: kazoo failed (the original error is chained).
        """
        assert self.loop is not None
        try:
            return await self.loop.run_in_executor(self._executor, fn, *args)
        except KielError:
            raise
        except Exception as e:  # kazoo raises many unrelated types; all mean the same here
            raise ZooKeeperError(f"ZooKeeper call {fn.__name__} failed: {e!r}") from e

    def record_error(self, error: BaseException) -> None:
        """Keep an unexpected error (a bug) so the harness can raise it later."""
        log.error("embedded broker error", exc_info=error)
        self.errors.append(error)

    def _session_restored(self) -> None:
        # kazoo thread: hand over to the loop, do nothing else here.
        if self.loop is not None:
            self.loop.add_callback(self._reregister)

    async def _reregister(self) -> None:
        """Write the ephemeral nodes again on a new session (retried, then reported)."""
        assert self.zk is not None
        for attempt in range(5):
            try:
                for broker in self.alive_brokers():
                    await self.zk_call(self.zk.register_broker, broker.broker_id,
                                       broker.host, broker.port)
                await self._write_controller()
                return
            except ZooKeeperError as e:
                if attempt == 4:
                    self.record_error(e)
                    return
                await gen.sleep(0.2 * 2**attempt)

    # -- lifecycle -------------------------------------------------------------

    async def start(self, topics: TopicsSpec = None) -> None:
        """Connect ZooKeeper, load existing topics, bind every broker, create ``topics``.

        Raises:
            ZooKeeperError: ZooKeeper could not be reached.
            HarnessError: a port could not be bound.
        """
        self.loop = IOLoop.current()
        if self.zk is not None:
            await self.zk_call(self.zk.start)
        for broker in self.brokers.values():
            broker.start()
        await self._load_topics()
        if self.zk is not None:
            for broker in self.brokers.values():
                await self.zk_call(self.zk.register_broker, broker.broker_id, broker.host,
                                   broker.port)
        await self._elect_controller()
        if topics is not None:
            items = topics.items() if isinstance(topics, Mapping) else ((t, None) for t in topics)
            for name, partitions in items:
                if name not in self.topics:
                    await self.create_topic(name, partitions)

    async def stop(self) -> None:
        """Stop every broker, close logs, end the ZooKeeper session."""
        for broker in self.brokers.values():
            broker.stop()
        for topic in self.topics.values():
            for state in topic.partitions.values():
                state.log.close()
        if self.zk is not None:
            try:
                await self.zk_call(self.zk.close)
            except ZooKeeperError as e:
                self.record_error(e)
        self._executor.shutdown(wait=False)

    async def _load_topics(self) -> None:
        """Rebuild topics from ZooKeeper (or the log dir's topic file) after a restart."""
        stored: dict[str, tuple[dict[int, list[int]], dict[int, dict[str, Any]]]] = {}
        if self.zk is not None:
            stored = await self.zk_call(self.zk.read_topics)
        elif self.config.log_dir and os.path.exists(self._topics_file()):
            with open(self._topics_file()) as f:
                document = json.load(f)
            stored = {topic: ({int(p): r for p, r in parts.items()}, {})
                      for topic, parts in document.items()}
        for name, (assignment, states) in sorted(stored.items()):
            partitions = {}
            for p, replicas in sorted(assignment.items()):
                state = PartitionState(name, p, list(replicas), self._open_log(name, p))
                saved = states.get(p, {})
                state.leader_epoch = int(saved.get("leader_epoch", 0))
                self._elect(state, preferred=saved.get("leader"))
                partitions[p] = state
            self.topics[name] = TopicState(name, partitions)
            self._topic_counter += 1
        if stored and self.zk is not None:
            for name in stored:
                await self._write_states(self.topics[name].partitions.values())

    def _open_log(self, topic: str, partition: int) -> PartitionLog:
        directory = None
        if self.config.log_dir:
            directory = os.path.join(self.config.log_dir, f"{topic}-{partition}")
        return PartitionLog(topic, partition, directory, self.config.segment_bytes,
                            self.config.segment_messages)

    def _topics_file(self) -> str:
        return os.path.join(self.config.log_dir or ".", _TOPICS_FILE)

    def _save_topics_file(self) -> None:
        if self.zk is None and self.config.log_dir:
            os.makedirs(self.config.log_dir, exist_ok=True)
            path = self._topics_file()
            document = {name: {str(p): r for p, r in t.assignment().items()}
                        for name, t in self.topics.items()}
            with open(path + ".tmp", "w") as f:
                json.dump(document, f)
            os.replace(path + ".tmp", path)

    # -- queries -------------------------------------------------------------

    def alive_brokers(self) -> list[BrokerServer]:
        """Brokers that are running (registered), by id."""
        return [b for _, b in sorted(self.brokers.items()) if b.running]

    def alive_ids(self) -> list[int]:
        """Ids of running brokers."""
        return [b.broker_id for b in self.alive_brokers()]

    def partition(self, topic: str, partition: int) -> Optional[PartitionState]:
        """The partition's state, ``None`` if the topic or partition does not exist."""
        state = self.topics.get(topic)
        return None if state is None else state.partitions.get(partition)

    def require_partition(self, topic: str, partition: int) -> PartitionState:
        """The partition's state.

        Raises:
            HarnessError: no such topic or partition.
        """
        state = self.partition(topic, partition)
        if state is None:
            raise HarnessError(f"no partition {topic}-{partition}", topic=topic,
                               partition=partition)
        return state

    def coordinator_for(self, group: str) -> Optional[BrokerServer]:
        """A stable coordinator for ``group``: a live broker picked by the group's hash.

        Kafka 0.8.2 answers with the leader of the group's ``__consumer_offsets``
        partition; this cluster keeps v0 offsets in ZooKeeper (any broker
        serves them), so it spreads groups over live brokers the same way.
        """
        alive = self.alive_brokers()
        if not alive:
            return None
        return alive[group_partition(group) % len(alive)]

    def describe(self) -> dict[str, Any]:
        """A JSON-shaped snapshot (ids and partitions as string keys, as JSON has them).

        ``{"brokers": {"1": {...}}, "controller": 1, "topics": {name: {"0": {...}}}}``.
        """
        return {
            "brokers": {str(b.broker_id): {"host": b.host, "port": b.port, "running": b.running,
                                           "hung": b.hung, "connections": len(b.connections)}
                        for b in self.brokers.values()},
            "controller": self.controller_id,
            "topics": {
                name: {str(p): {"leader": s.leader, "leader_epoch": s.leader_epoch,
                                "replicas": list(s.replicas), "isr": list(s.isr),
                                "start_offset": s.log.start_offset,
                                "end_offset": s.log.end_offset,
                                "segments": len(s.log.segments),
                                "fetch_waiters": len(s.log.waiters)}
                       for p, s in sorted(t.partitions.items())}
                for name, t in sorted(self.topics.items())
            },
        }

    # -- topics ----------------------------------------------------------------

    async def create_topic(self, name: str, partitions: Optional[int] = None,
                           replication: Optional[int] = None,
                           assignment: Optional[Mapping[int, list[int]]] = None,
                           cap_replication: bool = False) -> TopicState:
        """Create a topic, as ``AdminUtils.createTopic`` and the controller do.

        Args:
            name: topic name.
            partitions: partition count (default ``num_partitions``).
            replication: replicas per partition (default ``default_replication``).
            assignment: explicit ``{partition: [broker ids]}`` (overrides the two above).
            cap_replication: use at most the live brokers instead of failing.

        Raises:
            ConfigError: the name is illegal, the topic exists, or the
                replication cannot be met.
            ZooKeeperError: ZooKeeper did not take the topic (nothing was created).
        """
        problem = validate_topic_name(name)
        if problem:
            raise ConfigError(problem, topic=name)
        if name in self.topics:
            raise ConfigError(f"topic {name!r} already exists", topic=name)
        alive = self.alive_ids()
        if assignment is None:
            replication = replication or self.config.default_replication
            if cap_replication:
                replication = max(1, min(replication, len(alive)))
            if not alive:
                raise ConfigError("no live broker to place the topic on", topic=name)
            assignment = assign_replicas(alive, partitions or self.config.num_partitions,
                                         replication, self._topic_counter)
        else:
            assignment = {int(p): list(r) for p, r in assignment.items()}
            if sorted(assignment) != list(range(len(assignment))) or not assignment:
                raise ConfigError(f"assignment must cover partitions 0..N-1: {assignment}")
            for replicas in assignment.values():
                if not replicas or len(set(replicas)) != len(replicas) or any(
                        r not in self.brokers for r in replicas):
                    raise ConfigError(
                        f"bad replica list {replicas} (brokers: {sorted(self.brokers)})")
        self._topic_counter += 1
        states = {}
        for p, replicas in sorted(assignment.items()):
            state = PartitionState(name, p, list(replicas), self._open_log(name, p))
            self._elect(state)
            state.leader_epoch = 0
            states[p] = state
        topic = TopicState(name, states)
        self.topics[name] = topic
        if self.zk is not None:
            try:
                await self.zk_call(
                    self.zk.write_topic, name, topic.assignment_json(),
                    {p: s.state_json(self.controller_epoch or 1) for p, s in states.items()})
            except ZooKeeperError:
                # Not in ZooKeeper, so not created (as in 0.8.2): roll back.
                if self.topics.get(name) is topic:
                    del self.topics[name]
                for state in states.values():
                    state.log.close()
                raise
        self._save_topics_file()
        return topic

    # -- leadership --------------------------------------------------------------

    def _elect(self, state: PartitionState, preferred: Optional[int] = None) -> bool:
        """Set ISR to the live replicas and pick a leader; returns whether anything changed.

        The current (or ``preferred``) leader stays if alive, else the first
        live replica in replica order takes over (0.8.2 elects from the ISR,
        and here every live replica is in sync). No live replica: no leader.
        """
        alive = set(self.alive_ids())
        isr = [r for r in state.replicas if r in alive]
        if state.leader in alive and state.leader in state.replicas:
            leader = state.leader
        elif preferred is not None and preferred in alive and preferred in state.replicas:
            leader = preferred
        elif isr:
            leader = isr[0]
        else:
            leader = NO_LEADER
        if not isr:
            isr = list(state.isr) or [state.replicas[0]]
        changed = (leader, isr) != (state.leader, state.isr)
        if changed:
            state.leader, state.isr = leader, isr
            state.leader_epoch += 1
            state.log.notify()
        return changed

    async def _write_states(self, states: Iterable[PartitionState]) -> None:
        if self.zk is None:
            return
        for state in states:
            await self.zk_call(self.zk.write_state, state.topic, state.partition,
                               state.state_json(self.controller_epoch or 1))

    async def _elect_controller(self) -> None:
        alive = self.alive_ids()
        wanted = alive[0] if alive else None
        if wanted != self.controller_id:
            self.controller_id = wanted
            if wanted is not None:
                self.controller_epoch += 1
            await self._write_controller()

    async def _write_controller(self) -> None:
        if self.zk is not None:
            await self.zk_call(self.zk.set_controller, self.controller_id,
                               max(self.controller_epoch, 1))

    async def _reelect_all(self) -> None:
        changed = [s for t in self.topics.values() for s in t.partitions.values() if self._elect(s)]
        await self._write_states(changed)

    async def stop_broker(self, broker_id: int) -> None:
        """Stop a broker: close its port and connections, deregister, fail its partitions over.

        Raises:
            HarnessError: no such broker.
        """
        broker = self._broker(broker_id)
        if not broker.running:
            return
        broker.stop()
        if self.zk is not None:
            await self.zk_call(self.zk.unregister_broker, broker_id)
        await self._elect_controller()
        await self._reelect_all()

    async def start_broker(self, broker_id: int) -> None:
        """Start a stopped broker on its old port; it rejoins every ISR at once.

        Raises:
            HarnessError: no such broker, or its port is taken.
        """
        broker = self._broker(broker_id)
        if broker.running:
            return
        broker.start()
        if self.zk is not None:
            await self.zk_call(self.zk.register_broker, broker_id, broker.host, broker.port)
        await self._elect_controller()
        await self._reelect_all()

    async def move_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Make ``broker_id`` the partition's leader (added as a replica if it is not one).

        The old leader answers NotLeaderForPartition from then on, and long
        polls waiting on it return at once, as after a 0.8.2 LeaderAndIsr.

        Raises:
            HarnessError: no such partition or broker, or the broker is stopped.
        """
        state = self.require_partition(topic, partition)
        broker = self._broker(broker_id)
        if not broker.running:
            raise HarnessError(f"broker {broker_id} is stopped", broker_id=broker_id)
        if broker_id not in state.replicas:
            state.replicas.append(broker_id)
            self._save_topics_file()
            if self.zk is not None:
                await self.zk_call(self.zk.write_assignment, topic,
                                   self.topics[topic].assignment_json())
        if state.leader != broker_id:
            state.leader = broker_id
            alive = set(self.alive_ids())
            state.isr = [broker_id] + [r for r in state.replicas if r in alive and r != broker_id]
            state.leader_epoch += 1
            state.log.notify()
            await self._write_states([state])

    async def preferred_leader_election(self) -> None:
        """Move every partition's leader back to its first replica, where that one is alive."""
        alive = set(self.alive_ids())
        for topic in self.topics.values():
            for state in topic.partitions.values():
                if state.replicas[0] in alive and state.leader != state.replicas[0]:
                    await self.move_leader(state.topic, state.partition, state.replicas[0])

    def _broker(self, broker_id: int) -> BrokerServer:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise HarnessError(f"no broker {broker_id} (have {sorted(self.brokers)})",
                               broker_id=broker_id) from None

    # -- offsets (v0: ZooKeeper, or memory without it) ------------------------------

    async def commit_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Store a v0 commit where 0.8.2 does (``/consumers/<g>/offsets/<t>/<p>``)."""
        if self.zk is not None:
            await self.zk_call(self.zk.commit_offset, group, topic, partition, offset)
        else:
            self.memory_offsets[(group, topic, partition)] = str(offset).encode("ascii")

    async def fetch_offset(self, group: str, topic: str, partition: int) -> Optional[bytes]:
        """The stored v0 commit's raw data, ``None`` if there is none."""
        if self.zk is not None:
            return await self.zk_call(self.zk.fetch_offset, group, topic, partition)
        return self.memory_offsets.get((group, topic, partition))
