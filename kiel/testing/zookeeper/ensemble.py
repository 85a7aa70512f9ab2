"""Launchers: :class:`ZooKeeperEnsemble` (N servers, one quorum) and
:class:`ZooKeeperServer` (one standalone server)."""
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

from kazoo.client import KazooClient

from kiel.exc import ConfigError, HarnessError
from kiel.testing.process import LOOPBACK, free_ports, track, untrack
from kiel.testing.zookeeper.config import write_node_files
from kiel.testing.zookeeper.java import DEFAULT_JAR_DIR, find_java, zookeeper_classpath
from kiel.testing.zookeeper.node import POLL_INTERVAL, ZooKeeperNode
from kiel.testing.zookeeper.session import expire_session

__all__ = ["ZooKeeperEnsemble", "ZooKeeperServer"]

#: Fresh ports are picked this many times when a node could not bind.
MAX_PORT_ATTEMPTS = 3


class ZooKeeperEnsemble:
    """N real ZooKeeper servers forming one quorum on loopback ports.

    Usage::

        with ZooKeeperEnsemble(size=3) as ensemble:
            client = KazooClient(hosts=ensemble.hosts)
            ...
            ensemble.followers[0].kill()

    The constructor checks for Java and the jars but starts nothing;
    :meth:`start` (or ``with``) starts every node and waits until the quorum
    serves. :meth:`close` kills every process and removes the temporary
    directory; an ``atexit`` hook closes whatever is still open, and on Linux
    the Java processes also get SIGKILL if the interpreter dies first.

    Args:
        size: number of servers (1 runs a standalone server).
        java_home: Java home to use (default: ``JAVA_HOME``, then ``PATH``).
        jar_dir: directory with ``zookeeper.jar`` and its dependencies.
        tick_time: ZooKeeper's ``tickTime`` in ms (sessions expire on tick
            boundaries; the quorum's timeouts are counted in ticks).
        min_session_timeout: smallest session timeout in ms a client may get,
            so tests can ask for 1-2 s sessions.
        max_session_timeout: largest session timeout in ms.
        start_timeout: seconds to wait for readiness by default.
        base_dir: parent of the temporary directory (default: the system's).
        jvm_options: extra JVM options (``-D...``), after kiel's defaults.
        extra_config: extra ``zoo.cfg`` settings, overriding kiel's.

    Raises:
        MissingDependencyError: Java or the ZooKeeper jars are missing.
        ConfigError: ``size`` is less than 1.
    """

    _serving_modes: Sequence[str] = ("leader", "follower")

    def __init__(
        self,
        size: int = 3,
        *,
        java_home: Optional[str] = None,
        jar_dir: str = DEFAULT_JAR_DIR,
        tick_time: int = 250,
        min_session_timeout: int = 1000,
        max_session_timeout: int = 60000,
        start_timeout: float = 60.0,
        base_dir: Optional[str] = None,
        jvm_options: Iterable[str] = (),
        extra_config: Optional[Mapping[str, Any]] = None,
    ) -> None:
        if size < 1:
            raise ConfigError(f"an ensemble needs at least one server, not {size}")
        self.size = size
        self.java = find_java(java_home)
        self.classpath = zookeeper_classpath(jar_dir)
        self.tick_time = tick_time
        self.min_session_timeout = min_session_timeout
        self.max_session_timeout = max_session_timeout
        self.start_timeout = start_timeout
        self.jvm_options = list(jvm_options)
        self.extra_config = dict(extra_config or {})
        self._base_dir = base_dir
        self.work_dir: Optional[str] = None
        self.nodes: list[ZooKeeperNode] = []
        self._closed = False
        if size == 1:
            self._serving_modes = ("standalone",)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.hosts or '(not started)'}>"

    def __enter__(self) -> "ZooKeeperEnsemble":
        try:
            self.start()
        except BaseException:
            # __exit__ will not run: clean up here.
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- properties -------------------------------------------------------

    @property
    def hosts(self) -> str:
        """The connection string ``127.0.0.1:p1,127.0.0.1:p2,...`` (empty before start)."""
        return ",".join(node.address for node in self.nodes if node.port)

    @property
    def leader(self) -> Optional[ZooKeeperNode]:
        """The node whose ``srvr`` says ``leader`` now (``None`` if there is none)."""
        for node in self.nodes:
            if node.mode == "leader":
                return node
        return None

    @property
    def followers(self) -> list[ZooKeeperNode]:
        """The nodes whose ``srvr`` says ``follower`` now."""
        return [node for node in self.nodes if node.mode == "follower"]

    # -- whole-ensemble control ------------------------------------------

    def start(self, timeout: Optional[float] = None) -> None:
        """Start every node that is not running and wait until the ensemble serves.

        On the first start, ports are picked and the data dirs created; if a
        port was taken meanwhile, new ports are picked (up to 3 tries).

        Args:
            timeout: seconds to wait (default: ``start_timeout``).

        Raises:
            HarnessError: a node exited or the ensemble was not ready in time
                (the message ends with the tail of the node's log), or the
                launcher is closed.
        """
        self._check_open()
        if self.nodes:
            for node in self.nodes:
                node.start(wait=False)
            self.wait_ready(timeout)
            return
        self._register()
        for attempt in range(1, MAX_PORT_ATTEMPTS + 1):
            self._prepare()
            try:
                for node in self.nodes:
                    node.start(wait=False)
                self._wait_ready(timeout, fail_on_bind_error=True)
                return
            except HarnessError:
                bind_failed = any(node._bind_failed() for node in self.nodes)
                for node in self.nodes:
                    node.kill()
                if not bind_failed or attempt == MAX_PORT_ATTEMPTS:
                    raise
                self._remove_work_dir()

    def wait_ready(self, timeout: Optional[float] = None) -> None:
        """Wait until every running, unpaused node serves.

        For an ensemble that means each answers ``srvr`` with ``leader`` or
        ``follower`` and exactly one of them is the leader. Nodes stopped,
        killed or paused through this launcher are not waited for (a quorum
        of the others must exist); a node that died on its own is an error.

        Args:
            timeout: seconds (default: ``start_timeout``).

        Raises:
            HarnessError: a node that should run has exited, no node runs, or
                the ensemble was not ready in time.
        """
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: Optional[float], fail_on_bind_error: bool = False) -> None:
        limit = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        polls = 0
        while True:
            live = [node for node in self.nodes if node._process is not None and not node._paused]
            if not live:
                raise HarnessError(f"no ZooKeeper node of {self!r} is running")
            for node in live:
                node._check_alive()
            polls += 1
            if fail_on_bind_error and polls % 10 == 0:
                # A node whose port was taken may linger instead of exiting;
                # fail now so start() can retry on fresh ports.
                for node in live:
                    if node._bind_failed():
                        raise node._error("could not bind one of its ports")
            modes = [node.status(timeout=0.5) for node in live]
            got = [status["Mode"] if status else None for status in modes]
            if all(mode in self._serving_modes for mode in got) and (
                self.size == 1 or got.count("leader") == 1
            ):
                return
            if time.monotonic() >= deadline:
                waiting = [i for i, mode in enumerate(got) if mode not in self._serving_modes]
                laggard = live[waiting[0] if waiting else 0]
                raise laggard._error(
                    f"was not ready within {limit:.1f} s (modes of running nodes: {got})"
                )
            time.sleep(POLL_INTERVAL)

    def stop(self) -> None:
        """Stop every node cleanly (SIGTERM); data is kept for :meth:`start`."""
        for node in self.nodes:
            node.stop()

    def kill(self) -> None:
        """Kill every node with SIGKILL; data is kept for :meth:`start`."""
        for node in self.nodes:
            node.kill()

    def restart(self, timeout: Optional[float] = None) -> None:
        """Stop every node, then start them again on the same ports and data.

        Args:
            timeout: seconds to wait for readiness (default: ``start_timeout``).

        Raises:
            HarnessError: the ensemble did not serve again in time.
        """
        self.stop()
        self.start(timeout)

    def pause(self) -> None:
        """Freeze every node with SIGSTOP.

        Raises:
            HarnessError: a node is not running.
        """
        for node in self.nodes:
            node.pause()

    def resume(self) -> None:
        """Continue every paused node with SIGCONT.

        Raises:
            HarnessError: a node is not running.
        """
        for node in self.nodes:
            if node.is_paused:
                node.resume()

    def heal(self, timeout: Optional[float] = None) -> None:
        """Undo faults: resume paused nodes, start stopped ones, wait until all serve.

        Fixtures shared between tests call this so one test's kill or pause
        does not leak into the next.

        Args:
            timeout: seconds to wait (default: ``start_timeout``).

        Raises:
            HarnessError: the ensemble did not serve again in time.
        """
        for node in self.nodes:
            if node.is_paused:
                node.resume()
        self.start(timeout)

    def close(self) -> None:
        """Kill every process this launcher started and remove its temporary directory.

        Idempotent; the launcher cannot be started again afterwards.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self.kill()
        finally:
            self._remove_work_dir()
            untrack(self)

    # -- sessions ---------------------------------------------------------

    def expire_session(
        self, client: KazooClient, timeout: float = 15.0, wait_reconnect: bool = False
    ) -> None:
        """Make the server really expire ``client``'s session, and wait until it sees it.

        See :func:`kiel.testing.zookeeper.session.expire_session` (the
        server closes the session; kazoo reports ``KazooState.LOST``, then
        reconnects with a new session).

        Args:
            client: a connected kazoo client of this ensemble.
            timeout: seconds to wait for each step.
            wait_reconnect: also wait until the client has its new session.

        Raises:
            HarnessError: the client has no live session, or a step did not
                happen in time.
        """
        expire_session(self.hosts, client, timeout, wait_reconnect)

    # -- internals --------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessError(f"{type(self).__name__} is closed")

    def _register(self) -> None:
        track(self)

    def _remove_work_dir(self) -> None:
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        self.work_dir = None
        self.nodes = []

    def _prepare(self) -> None:
        """Create the work dir, pick ports and write every node's files."""
        self.work_dir = tempfile.mkdtemp(prefix="kiel-zookeeper-", dir=self._base_dir)
        ports = free_ports(3 * self.size)
        self.nodes = []
        for index in range(self.size):
            node = ZooKeeperNode(self, index + 1, os.path.join(self.work_dir, f"node{index + 1}"))
            node.port, node.peer_port, node.election_port = ports[3 * index:3 * index + 3]
            os.makedirs(node.data_dir)
            self.nodes.append(node)
        for node in self.nodes:
            write_node_files(self, node)


class ZooKeeperServer(ZooKeeperEnsemble):
    """One real standalone ZooKeeper server on a free loopback port.

    Usage::

        with ZooKeeperServer() as zk:
            client = KazooClient(hosts=zk.hosts)

    ``stop``/``kill``/``start``/``restart``/``pause``/``resume`` act on the
    one server; data and port survive a restart.

    Args:
        java_home: Java home to use (default: ``JAVA_HOME``, then ``PATH``).
        jar_dir: directory with ``zookeeper.jar`` and its dependencies.
        **options: the other keyword arguments of :class:`ZooKeeperEnsemble`.

    Raises:
        MissingDependencyError: Java or the ZooKeeper jars are missing.
    """

    def __init__(
        self,
        *,
        java_home: Optional[str] = None,
        jar_dir: str = DEFAULT_JAR_DIR,
        **options: Any,
    ) -> None:
        super().__init__(1, java_home=java_home, jar_dir=jar_dir, **options)

    def __enter__(self) -> "ZooKeeperServer":
        super().__enter__()
        return self

    @property
    def node(self) -> ZooKeeperNode:
        """The server's :class:`ZooKeeperNode`.

        Raises:
            HarnessError: the server was never started.
        """
        if not self.nodes:
            raise HarnessError("ZooKeeperServer was not started")
        return self.nodes[0]

    @property
    def host(self) -> str:
        """The host the server listens on (``127.0.0.1``)."""
        return LOOPBACK

    @property
    def port(self) -> int:
        """The client port (0 before the first start)."""
        return self.nodes[0].port if self.nodes else 0

    @property
    def mode(self) -> Optional[str]:
        """``standalone`` while the server serves, else ``None``."""
        return self.nodes[0].mode if self.nodes else None
