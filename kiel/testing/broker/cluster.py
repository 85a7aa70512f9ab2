"""EmbeddedCluster: N Kafka 0.8.2 brokers on their own thread and IOLoop, for tests.

Usage::

    from kiel.testing.broker import EmbeddedCluster

    with EmbeddedCluster(brokers=3, zookeeper=zk.hosts, partitions=3) as cluster:
        client = make_client(cluster.bootstrap)      # "127.0.0.1:p1,127.0.0.1:p2,..."
        cluster.create_topic("events", partitions=6)
        cluster.stop_broker(2)                       # fault injection
        cluster.move_leader("events", 0, 3)

The cluster runs on its own thread with its own Tornado IOLoop, so a test's
IOLoop talks to it over real TCP exactly as to remote brokers. Every method
is thread-safe: it runs the operation on the cluster's loop and waits for it.
Do not call the synchronous methods from the cluster's own thread.
"""

import asyncio
import ssl
import threading
from collections.abc import Coroutine, Iterable, Mapping
from concurrent.futures import Future as ConcurrentFuture
from concurrent.futures import TimeoutError as ConcurrentTimeoutError
from typing import Any, Optional, Union

from kiel.exc import ConfigError, HarnessError
from kiel.testing.broker.control import ControlServer
from kiel.testing.broker.core import ClusterCore
from kiel.testing.broker.log import DEFAULT_SEGMENT_BYTES
from kiel.testing.broker.ops import OPERATIONS, ClusterControl, ClusterOps
from kiel.testing.broker.state import DEFAULT_MESSAGE_MAX_BYTES, BrokerConfig

__all__ = ["EmbeddedCluster"]

TopicsSpec = Union[None, Iterable[str], Mapping[str, int]]


class EmbeddedCluster(ClusterControl):
    """An in-process cluster of embedded Kafka 0.8.2 brokers on loopback ports.

    Args:
        brokers: number of brokers (ids 1..N), each on its own 127.0.0.1 port.
        zookeeper: ZooKeeper connection string (may end in a chroot such as
            ``"127.0.0.1:2181/cluster-a"``, created if missing). The cluster
            registers there as 0.8.2 does and stores v0 offsets there.
            ``None``: no ZooKeeper, offsets kept in memory.
        partitions: partitions of topics created without a count (and of
            auto-created topics, Kafka's ``num.partitions``).
        topics: topics to create at start: names, or ``{name: partitions}``.
        log_dir: keep partition logs on disk there; a cluster started again
            on the same ``log_dir`` (and ZooKeeper) finds every acknowledged
            message. ``None``: memory only.
        auto_create_topics: create unknown topics named in a Metadata request
            (answering LeaderNotAvailable first), as Kafka does by default.
        replication: replicas per partition by default (Kafka's
            ``default.replication.factor``); default ``min(3, brokers)`` so
            that stopping a broker fails over. Use 1 for Kafka's own default.
        message_max_bytes: largest message entry accepted (``message.max.bytes``).
        segment_bytes: roll log segments at this size (``log.segment.bytes``).
        segment_messages: also roll every this many messages (kiel only).
        ports: fixed ports (one per broker); default: free ports.
        ssl_context: a server-side :class:`ssl.SSLContext`: the brokers then
            speak TLS only (kiel only, standing in for Kafka 0.9+'s SSL
            listener; see :class:`~kiel.testing.broker.state.BrokerConfig`).
        control_port: also serve the JSON-lines control channel on this
            port (0: any free port; ``None``: no control channel).
        start_timeout: seconds to wait for the cluster to come up.

    Raises:
        ConfigError: bad arguments.
    """

    def __init__(
        self,
        brokers: int = 3,
        zookeeper: Optional[str] = None,
        partitions: int = 1,
        topics: TopicsSpec = None,
        log_dir: Optional[str] = None,
        auto_create_topics: bool = True,
        replication: Optional[int] = None,
        message_max_bytes: int = DEFAULT_MESSAGE_MAX_BYTES,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_messages: Optional[int] = None,
        ports: Optional[list[int]] = None,
        control_port: Optional[int] = None,
        start_timeout: float = 30.0,
        ssl_context: Optional[ssl.SSLContext] = None,
    ) -> None:
        if brokers < 1:
            raise ConfigError(f"a cluster needs at least one broker, not {brokers}")
        self.config = BrokerConfig(
            num_partitions=partitions,
            default_replication=replication or min(3, brokers),
            auto_create_topics=auto_create_topics,
            message_max_bytes=message_max_bytes,
            segment_bytes=segment_bytes,
            segment_messages=segment_messages,
            log_dir=log_dir,
            ssl_context=ssl_context,
        )
        self.config.check()
        self.broker_count = brokers
        self.zookeeper = zookeeper or None
        self.initial_topics = topics
        self.start_timeout = start_timeout
        self._ports = list(ports) if ports else None
        self._control_port = control_port
        self.control_address: Optional[str] = None
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._aloop: Optional[asyncio.AbstractEventLoop] = None
        self._core: Optional[ClusterCore] = None
        self._ops: Optional[ClusterOps] = None
        self._control: Optional[ControlServer] = None
        self._addresses: dict[int, str] = {}

    def __repr__(self) -> str:
        return f"<EmbeddedCluster {self.bootstrap or '(stopped)'}>"

    def __enter__(self) -> "EmbeddedCluster":
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the cluster's loop is up."""
        return self._core is not None

    @property
    def brokers(self) -> list[str]:
        """``["127.0.0.1:p1", ...]`` in broker-id order (stopped brokers included)."""
        return [self._addresses[i] for i in sorted(self._addresses)]

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:p1,127.0.0.1:p2,..."``: every broker, for a client's bootstrap list."""
        return ",".join(self.brokers)

    @property
    def broker_ids(self) -> list[int]:
        """``[1, ..., N]``."""
        return sorted(self._addresses)

    def address(self, broker_id: int) -> str:
        """``"127.0.0.1:port"`` of one broker.

        Raises:
            HarnessError: no such broker (or the cluster never started).
        """
        try:
            return self._addresses[broker_id]
        except KeyError:
            raise HarnessError(f"no broker {broker_id}", broker_id=broker_id) from None

    @property
    def zookeeper_client(self) -> Any:
        """The cluster's own kazoo client (``None`` without ZooKeeper), e.g. for
        :meth:`kiel.testing.zookeeper.ZooKeeperServer.expire_session`; the brokers
        register again when kazoo opens a new session, as 0.8.2 brokers do."""
        core = self._core
        return core.zk.client if core is not None and core.zk is not None else None

    def port(self, broker_id: int) -> int:
        """The port of one broker."""
        return int(self.address(broker_id).rsplit(":", 1)[1])

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        """Start the loop thread, ZooKeeper registration and every broker; return when serving.

        A stopped cluster can be started again: it keeps its ports, and with a
        ``log_dir`` (and ZooKeeper) its topics and messages.

        Raises:
            HarnessError: the cluster did not come up in time or a port was taken.
            ZooKeeperError: ZooKeeper could not be reached.
        """
        with self._lock:
            if self._core is not None:
                return
            ready = threading.Event()
            failure: list[BaseException] = []
            self._thread = threading.Thread(target=self._run, args=(ready, failure),
                                            name="kiel-embedded-cluster", daemon=True)
            self._thread.start()
            if not ready.wait(self.start_timeout):
                raise HarnessError(f"embedded cluster did not start within {self.start_timeout} s")
            if failure:
                self._thread.join(5)
                self._thread = None
                raise failure[0]

    def _run(self, ready: threading.Event, failure: list[BaseException]) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        core = ClusterCore(self.broker_count, self.config, self.zookeeper, self._ports)
        try:
            loop.run_until_complete(self._startup(core))
        except BaseException as e:  # handed to the starting thread, which raises it
            failure.append(e)
            loop.run_until_complete(core.stop())
            loop.close()
            ready.set()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _startup(self, core: ClusterCore) -> None:
        await core.start(self.initial_topics)
        ops = ClusterOps(core)
        if self._control_port is not None:
            self._control = ControlServer(ops, self._control_port)
            self._control.start()
            self._control_port = self._control.port
            self.control_address = self._control.address
        self._ports = [b.port for _, b in sorted(core.brokers.items())]
        self._addresses = {i: b.address for i, b in core.brokers.items()}
        self._aloop = asyncio.get_running_loop()
        self._core, self._ops = core, ops

    def stop(self) -> None:
        """Stop every broker and the loop thread (idempotent).

        Raises:
            HarnessError: the brokers recorded an unexpected error meanwhile.
        """
        with self._lock:
            core, aloop, thread = self._core, self._aloop, self._thread
            if core is None or aloop is None or thread is None:
                return
            errors = list(core.errors)
            try:
                self._submit(self._shutdown(core)).result(self.start_timeout)
            finally:
                aloop.call_soon_threadsafe(aloop.stop)
                thread.join(self.start_timeout)
                self._core = self._ops = None
                self._aloop = self._thread = None
        if errors:
            raise HarnessError("embedded broker errors: " + "; ".join(map(repr, errors)))

    async def _shutdown(self, core: ClusterCore) -> None:
        if self._control is not None:
            self._control.stop()
            self._control = None
        await core.stop()

    def restart(self) -> None:
        """Stop and start the whole cluster (same ports; data survives only with ``log_dir``)."""
        self.stop()
        self.start()

    # -- running operations on the loop ------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, Any]) -> "ConcurrentFuture[Any]":
        if self._aloop is None:
            coro.close()
            raise HarnessError("the embedded cluster is not running")
        if threading.current_thread() is self._thread:
            coro.close()
            raise HarnessError("synchronous EmbeddedCluster calls cannot run on its own loop")
        return asyncio.run_coroutine_threadsafe(coro, self._aloop)

    def _call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        if op not in OPERATIONS or self._ops is None:
            raise HarnessError(f"unknown operation {op!r}" if op not in OPERATIONS
                               else "the embedded cluster is not running")
        future = self._submit(getattr(self._ops, op)(*args, **kwargs))
        try:
            return future.result(self.start_timeout)
        except ConcurrentTimeoutError:
            future.cancel()
            raise HarnessError(f"{op} did not finish within {self.start_timeout} s") from None

    def submit(self, op: str, *args: Any, **kwargs: Any) -> "ConcurrentFuture[Any]":
        """Start operation ``op`` (a :class:`ClusterControl` method name) without waiting.

        For coroutines on another loop: ``await asyncio.wrap_future(cluster.submit(
        "stop_broker", 2))`` does not block that loop.
        """
        if op not in OPERATIONS or self._ops is None:
            raise HarnessError(f"cannot submit {op!r}")
        return self._submit(getattr(self._ops, op)(*args, **kwargs))
