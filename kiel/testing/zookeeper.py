"""Launch the real ZooKeeper server (Debian's ``zookeeper`` package) for tests.

:class:`ZooKeeperServer` runs one standalone server, :class:`ZooKeeperEnsemble`
runs an N-node quorum. Each node is a real Java process
(``org.apache.zookeeper.server.ZooKeeperServerMain`` for a standalone server,
``org.apache.zookeeper.server.quorum.QuorumPeerMain`` for an ensemble member)
on free ports bound to 127.0.0.1 only, with its own temporary data dir and
log file. Single nodes can be stopped, killed, restarted (same port, same
data), paused (SIGSTOP) and resumed (SIGCONT), and :meth:`expire_session`
makes the server really expire a client's session.

Needs Java and the ZooKeeper jars: ``apt-get install zookeeper
openjdk-17-jre-headless``. Without them the constructors raise
:class:`~kiel.exc.MissingDependencyError` saying so.

This module is test-side and synchronous: it polls with short sleeps and
every wait is bounded. Do not call it from a running Tornado IOLoop.
"""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import zipfile
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from kazoo.client import KazooClient, KazooState

from kiel.exc import ConfigError, HarnessError, MissingDependencyError

__all__ = [
    "DEFAULT_JAR_DIR",
    "INSTALL_HINT",
    "ZooKeeperEnsemble",
    "ZooKeeperNode",
    "ZooKeeperServer",
    "find_java",
    "four_letter_word",
    "server_status",
    "zookeeper_classpath",
]

#: Where Debian's ``libzookeeper-java`` puts its jar and the jars it needs.
DEFAULT_JAR_DIR = "/usr/share/java"
#: What to install when Java or ZooKeeper is missing.
INSTALL_HINT = "apt-get install zookeeper openjdk-17-jre-headless"
#: Host every node binds (client, quorum and election ports).
LOOPBACK = "127.0.0.1"

#: Four-letter words the servers answer (``srvr`` is what readiness uses).
FOUR_LETTER_WORDS = ("srvr", "stat", "mntr", "ruok", "conf", "cons", "envi", "dirs", "wchs")

# Jars without which the server cannot start at all.
_REQUIRED_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar")
# Debian's zookeeper.jar manifest lists netty-handler and netty-transport but
# not what they need in turn: netty-codec (SslHandler extends its
# ByteToMessageDecoder, so the Netty connection factory and TLS fail with
# NoClassDefFoundError), netty-resolver (Bootstrap) and the native-epoll
# helper jar.
_NETTY_EXTRA_JARS = (
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-unix-common.jar",
)
# slf4j binding: log4j 1.2 (what Debian's package uses), so logs go to a
# file we configure; slf4j-simple as a fallback.
_LOG4J_JARS = ("slf4j-log4j12.jar", "log4j-1.2.jar")
_SIMPLE_LOGGER_JAR = "slf4j-simple.jar"

_DEFAULT_JVM_OPTIONS = (
    "-Xms16m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    # Tests want a server now, not peak throughput in ten minutes.
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.jmx.log4j.disable=true",
    "-Dzookeeper.admin.enableServer=false",
)

_POLL_INTERVAL = 0.05
_STOP_TIMEOUT = 10.0
_MAX_PORT_ATTEMPTS = 3


# --------------------------------------------------------------------------
# Dependencies


def find_java(java_home: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> str:
    """Find the ``java`` executable the way ZooKeeper's own scripts do.

    Args:
        java_home: a Java home directory to use (its ``bin/java``). Without it,
            ``JAVA_HOME`` from ``environ`` is used if set, else ``java`` on
            ``PATH``.
        environ: the environment to read ``JAVA_HOME`` and ``PATH`` from
            (default: ``os.environ``).

    Returns:
        the absolute path of the ``java`` executable.

    Raises:
        MissingDependencyError: the Java home has no executable ``bin/java``,
            or there is no ``java`` on ``PATH``; the message says what to install.
    """
    env = os.environ if environ is None else environ
    source = "java_home argument"
    if java_home is None and env.get("JAVA_HOME"):
        java_home, source = env["JAVA_HOME"], "JAVA_HOME"
    if java_home is not None:
        java = os.path.join(java_home, "bin", "java")
        if os.path.isfile(java) and os.access(java, os.X_OK):
            return os.path.abspath(java)
        raise MissingDependencyError(
            f"Java not found: {source}={java_home!r} has no executable bin/java. "
            f"Point it at a Java 11+ runtime, or unset it and install one: {INSTALL_HINT}",
            dependency="java",
        )
    found = shutil.which("java", path=env.get("PATH", os.defpath))
    if found is None:
        raise MissingDependencyError(
            "Java not found: JAVA_HOME is not set and there is no `java` on PATH. "
            f"The real ZooKeeper server needs a Java runtime: {INSTALL_HINT}",
            dependency="java",
        )
    return os.path.abspath(found)


def _manifest_class_path(jar: str) -> List[str]:
    """The ``Class-Path`` entries of a jar's manifest (empty if it has none)."""
    try:
        with zipfile.ZipFile(jar) as archive:
            text = archive.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return []
    # Manifest lines are wrapped at 72 bytes; a continuation starts with one space.
    unwrapped = text.replace("\r\n", "\n").replace("\n ", "")
    for line in unwrapped.splitlines():
        if line.startswith("Class-Path:"):
            return line[len("Class-Path:"):].split()
    return []


def zookeeper_classpath(jar_dir: str = DEFAULT_JAR_DIR) -> List[str]:
    """Build the classpath for the ZooKeeper server from a directory of jars.

    ``zookeeper.jar`` plus the jars its manifest names (each looked up in
    ``jar_dir`` first), plus the Netty jars the manifest forgets, plus an
    slf4j binding (log4j 1.2) so the server logs to the file we configure.

    Args:
        jar_dir: the directory holding ``zookeeper.jar`` and its dependencies.

    Returns:
        the jar paths, in order, without duplicates.

    Raises:
        MissingDependencyError: ``zookeeper.jar`` or another jar the server
            cannot start without is missing; the message says what to install.
    """
    missing = [name for name in _REQUIRED_JARS if not os.path.isfile(os.path.join(jar_dir, name))]
    if missing:
        raise MissingDependencyError(
            f"ZooKeeper jars not found in {jar_dir!r} (missing: {', '.join(missing)}). "
            f"Install Debian's ZooKeeper server and a Java runtime: {INSTALL_HINT}",
            dependency="zookeeper",
        )
    main_jar = os.path.join(jar_dir, "zookeeper.jar")
    candidates = [main_jar]
    for entry in _manifest_class_path(main_jar):
        local = os.path.join(jar_dir, os.path.basename(entry))
        candidates.append(local if os.path.isfile(local) else entry)
    candidates += [os.path.join(jar_dir, name) for name in _REQUIRED_JARS + _NETTY_EXTRA_JARS]
    binding = [os.path.join(jar_dir, name) for name in _LOG4J_JARS]
    if not all(os.path.isfile(jar) for jar in binding):
        binding = [os.path.join(jar_dir, _SIMPLE_LOGGER_JAR)]
    candidates += binding
    classpath: List[str] = []
    for jar in candidates:
        if os.path.isfile(jar) and jar not in classpath:
            classpath.append(jar)
    return classpath


# --------------------------------------------------------------------------
# Four-letter words


def four_letter_word(host: str, port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """Send a four-letter word to a ZooKeeper server and return its answer.

    Args:
        host: server host.
        port: server client port.
        word: the command (it must be in the server's
            ``4lw.commands.whitelist``).
        timeout: seconds for connecting and for each read.

    Returns:
        the answer, decoded as text.

    Raises:
        OSError: the server could not be reached or did not answer in time.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def server_status(host: str, port: int, timeout: float = 1.0) -> Optional[Dict[str, str]]:
    """Ask a server ``srvr`` and parse the answer.

    Args:
        host: server host.
        port: server client port.
        timeout: seconds for connecting and for each read.

    Returns:
        the ``Key: value`` lines as a dict (``Mode`` is ``standalone``,
        ``leader`` or ``follower``), or ``None`` if the server cannot be
        reached or is up but not serving requests (no quorum yet).
    """
    try:
        answer = four_letter_word(host, port, "srvr", timeout)
    except OSError:
        return None
    status: Dict[str, str] = {}
    for line in answer.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            status[key.strip()] = value.strip()
    return status if "Mode" in status else None


# --------------------------------------------------------------------------
# Safety net: nothing we start outlives the interpreter.

_LIVE_LOCK = threading.Lock()
_LIVE: "Set[ZooKeeperEnsemble]" = set()


def _close_all() -> None:
    with _LIVE_LOCK:
        launchers = list(_LIVE)
    for launcher in launchers:
        launcher.close()


atexit.register(_close_all)


def _free_ports(count: int) -> List[int]:
    """``count`` distinct free TCP ports on the loopback interface.

    Strategy: hold every socket open until all are bound, so the kernel cannot
    hand out the same port twice; the window between closing them and Java
    binding is what the start retry covers.
    """
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((LOOPBACK, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _tail(path: str, lines: int) -> List[str]:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]


def _signal(process: subprocess.Popen, signum: int) -> None:
    if process.poll() is None:
        try:
            os.kill(process.pid, signum)
        except ProcessLookupError:
            pass


def _process_state(pid: int) -> Optional[str]:
    """The one-letter state of a process from /proc (``T`` = stopped), if known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces.
    return stat.rpartition(")")[2].split()[0]


# --------------------------------------------------------------------------
# One server process


class ZooKeeperNode:
    """One ZooKeeper server process of a :class:`ZooKeeperEnsemble`.

    Created by the ensemble; keeps its ports and data dir across stops and
    restarts. Not thread-safe.

    Attributes:
        node_id: the server's ``myid`` (1-based).
        host: the address every port is bound to (``127.0.0.1``).
        node_dir: the node's directory (config, ``data/``, logs).
        log_path: the server's log file.
        console_path: the Java process's stdout and stderr.
    """

    def __init__(self, launcher: "ZooKeeperEnsemble", node_id: int, node_dir: str) -> None:
        self._launcher = launcher
        self.node_id = node_id
        self.host = LOOPBACK
        self.node_dir = node_dir
        self.data_dir = os.path.join(node_dir, "data")
        self.config_path = os.path.join(node_dir, "zoo.cfg")
        self.log_path = os.path.join(node_dir, "zookeeper.log")
        self.console_path = os.path.join(node_dir, "console.log")
        self.port = 0
        self.peer_port = 0
        self.election_port = 0
        self._process: Optional[subprocess.Popen] = None
        self._paused = False

    def __repr__(self) -> str:
        state = "paused" if self.is_paused else "running" if self.is_running else "stopped"
        return f"<ZooKeeperNode {self.node_id} {self.address} {state}>"

    # -- properties -------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port`` of the client port."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> Optional[int]:
        """The Java process id while it runs, else ``None``."""
        return self._process.pid if self.is_running and self._process else None

    @property
    def is_running(self) -> bool:
        """Whether the process is alive (a paused process counts as running)."""
        return self._process is not None and self._process.poll() is None

    @property
    def is_paused(self) -> bool:
        """Whether the process is stopped with SIGSTOP."""
        return self._paused and self.is_running

    @property
    def mode(self) -> Optional[str]:
        """``standalone``, ``leader`` or ``follower`` as ``srvr`` says now.

        ``None`` if the node is stopped, paused, or not serving (no quorum).
        """
        if not self.is_running or self.is_paused:
            return None
        status = self.status()
        return status["Mode"] if status else None

    # -- queries ----------------------------------------------------------

    def status(self, timeout: float = 1.0) -> Optional[Dict[str, str]]:
        """The parsed ``srvr`` answer (see :func:`server_status`).

        Args:
            timeout: seconds for connecting and reading.

        Returns:
            a dict with ``Mode``, ``Zxid``, ``Node count``..., or ``None``.
        """
        return server_status(self.host, self.port, timeout)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server log and of the process's console output.

        Args:
            lines: how many lines of each to keep.

        Returns:
            the text, one section per file.
        """
        parts = []
        for path in (self.log_path, self.console_path):
            tail = _tail(path, lines)
            if tail:
                parts.append(f"--- {path} (last {len(tail)} lines)\n" + "\n".join(tail))
        return "\n".join(parts) or f"(no output in {self.node_dir})"

    # -- control ----------------------------------------------------------

    def start(self, wait: bool = True, timeout: Optional[float] = None) -> None:
        """Start the server process (same ports, same data dir as before).

        Does nothing if it is already running.

        Args:
            wait: wait until ``srvr`` reports a serving mode (for an ensemble
                member this needs a quorum of running nodes).
            timeout: seconds to wait (default: the launcher's ``start_timeout``).

        Raises:
            HarnessError: the process exited or was not ready in time (the
                message ends with the tail of its log).
        """
        if self.is_running:
            return
        self._launcher._check_open()
        self._paused = False
        self._process = self._launcher._spawn(self)
        if wait:
            self.wait_ready(timeout)

    def wait_ready(self, timeout: Optional[float] = None) -> None:
        """Wait until this node answers ``srvr`` with a serving mode.

        Args:
            timeout: seconds (default: the launcher's ``start_timeout``).

        Raises:
            HarnessError: the node is not running, exited while waiting, or
                was not ready in time.
        """
        limit = self._launcher.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            self._check_alive()
            status = self.status(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
            if status and status["Mode"] in self._launcher._serving_modes:
                return
            if time.monotonic() >= deadline:
                raise self._error(f"was not ready within {limit:.1f} s (srvr: {status!r})")
            time.sleep(_POLL_INTERVAL)

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """Stop the server with SIGTERM and wait for it to exit (SIGKILL after ``timeout``).

        Data is kept; :meth:`start` brings the node back.

        Args:
            timeout: seconds to wait for a clean exit before killing.
        """
        process, self._process = self._process, None
        paused, self._paused = self._paused, False
        if process is None or process.poll() is not None:
            return
        process.terminate()
        if paused:
            # A stopped process only acts on SIGTERM once it runs again.
            _signal(process, signal.SIGCONT)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(_STOP_TIMEOUT)

    def kill(self) -> None:
        """Kill the server with SIGKILL (a crash: no clean shutdown) and reap it."""
        process, self._process = self._process, None
        self._paused = False
        if process is None or process.poll() is not None:
            return
        process.kill()
        process.wait(_STOP_TIMEOUT)

    def restart(self, wait: bool = True, timeout: Optional[float] = None) -> None:
        """:meth:`stop`, then :meth:`start` on the same port and data dir.

        Args:
            wait: wait until the node serves again.
            timeout: seconds to wait (default: the launcher's ``start_timeout``).

        Raises:
            HarnessError: the node did not come back in time.
        """
        self.stop()
        self.start(wait=wait, timeout=timeout)

    def pause(self) -> None:
        """Freeze the process with SIGSTOP: its sockets stay open but nothing answers.

        Raises:
            HarnessError: the node is not running.
        """
        self._check_alive()
        if self._paused:
            return
        self._send(signal.SIGSTOP)
        self._paused = True
        self._wait_state(stopped=True)

    def resume(self) -> None:
        """Let a paused process run again with SIGCONT.

        Raises:
            HarnessError: the node is not running.
        """
        self._check_alive()
        if not self._paused:
            return
        self._send(signal.SIGCONT)
        self._paused = False
        self._wait_state(stopped=False)

    # -- internals --------------------------------------------------------

    def _send(self, signum: int) -> None:
        if self._process is not None:
            _signal(self._process, signum)

    def _wait_state(self, stopped: bool, timeout: float = 5.0) -> None:
        # Signals are delivered asynchronously; make pause()/resume() take
        # effect before they return, so callers can rely on them.
        if self._process is None:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = _process_state(self._process.pid)
            if state is None or (state in ("T", "t")) == stopped:
                return
            time.sleep(0.005)
        raise self._error(f"did not {'stop' if stopped else 'continue'} within {timeout} s")

    def _check_alive(self) -> None:
        if self._process is None:
            raise self._error("is not running (never started or stopped)")
        code = self._process.poll()
        if code is not None:
            raise self._error(f"exited with status {code}")

    def _error(self, what: str) -> HarnessError:
        return HarnessError(
            f"ZooKeeper node {self.node_id} ({self.address}) {what}\n{self.log_tail()}",
            host=self.host,
            port=self.port,
        )

    def _bind_failed(self) -> bool:
        return any(
            "Address already in use" in line
            for path in (self.log_path, self.console_path)
            for line in _tail(path, 200)
        )


# --------------------------------------------------------------------------
# Launchers


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
        self.nodes: List[ZooKeeperNode] = []
        self._closed = False
        if size == 1:
            self._serving_modes = ("standalone",)
            self._main_class = "org.apache.zookeeper.server.ZooKeeperServerMain"
        else:
            self._main_class = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

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
    def followers(self) -> List[ZooKeeperNode]:
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
        for attempt in range(1, _MAX_PORT_ATTEMPTS + 1):
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
                if not bind_failed or attempt == _MAX_PORT_ATTEMPTS:
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
            time.sleep(_POLL_INTERVAL)

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
            with _LIVE_LOCK:
                _LIVE.discard(self)

    # -- sessions ---------------------------------------------------------

    def expire_session(
        self, client: KazooClient, timeout: float = 15.0, wait_reconnect: bool = False
    ) -> None:
        """Make the server really expire ``client``'s session, and wait until it sees it.

        Strategy: open a second connection with the same session id and
        password and close it. The close is a real ``closeSession`` on the
        server: the session's ephemeral nodes are deleted and watchers fire,
        and the original connection is told its session expired. Nothing is
        faked on the client side.

        kazoo then reports ``KazooState.LOST`` to its listeners and, by
        default, reconnects with a new session; until it has, requests on the
        client fail with ``SessionExpiredError`` or ``ConnectionLoss``.

        Args:
            client: a connected kazoo client of this ensemble.
            timeout: seconds to wait for the second connection, for the
                client to see the expiry, and (if asked) for its new session.
            wait_reconnect: also wait until the client is connected again
                with a new session, so it can be used right away.

        Raises:
            HarnessError: the client has no live session, the second
                connection failed, or the client did not see the expiry (or
                reconnect) in time.
        """
        client_id = client.client_id
        if client_id is None or not client.connected:
            raise HarnessError("expire_session needs a connected client with a session")
        lost = threading.Event()
        reconnected = threading.Event()

        def watch(state: str) -> bool:
            if state == KazooState.LOST:
                lost.set()
            elif state == KazooState.CONNECTED and lost.is_set():
                reconnected.set()
                return True  # done: kazoo removes the listener
            return False

        client.add_listener(watch)
        try:
            twin = KazooClient(hosts=self.hosts, client_id=client_id, timeout=max(2.0, timeout / 3))
            try:
                twin.start(timeout=timeout)
            except twin.handler.timeout_exception as exc:
                raise HarnessError(
                    f"could not open a second connection for session 0x{client_id[0]:x} "
                    f"within {timeout} s ({exc})"
                ) from exc
            finally:
                twin.stop()
                twin.close()
            deadline = time.monotonic() + timeout
            if not lost.wait(timeout):
                raise HarnessError(
                    f"session 0x{client_id[0]:x} was closed on the server but the client "
                    f"did not report it lost within {timeout} s"
                )
            if wait_reconnect and not reconnected.wait(max(0.0, deadline - time.monotonic())):
                raise HarnessError(
                    f"the client lost session 0x{client_id[0]:x} but did not connect "
                    f"with a new session within {timeout} s"
                )
        finally:
            client.remove_listener(watch)

    # -- internals --------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessError(f"{type(self).__name__} is closed")

    def _register(self) -> None:
        with _LIVE_LOCK:
            _LIVE.add(self)

    def _remove_work_dir(self) -> None:
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        self.work_dir = None
        self.nodes = []

    def _prepare(self) -> None:
        """Create the work dir, pick ports and write every node's files."""
        self.work_dir = tempfile.mkdtemp(prefix="kiel-zookeeper-", dir=self._base_dir)
        ports = _free_ports(3 * self.size)
        self.nodes = []
        for index in range(self.size):
            node = ZooKeeperNode(self, index + 1, os.path.join(self.work_dir, f"node{index + 1}"))
            node.port, node.peer_port, node.election_port = ports[3 * index:3 * index + 3]
            os.makedirs(node.data_dir)
            self.nodes.append(node)
        for node in self.nodes:
            self._write_files(node)

    def _config(self, node: ZooKeeperNode) -> Dict[str, Any]:
        config: Dict[str, Any] = {
            "tickTime": self.tick_time,
            "initLimit": 20,
            "syncLimit": 10,
            "dataDir": node.data_dir,
            "clientPort": node.port,
            "clientPortAddress": node.host,
            "maxClientCnxns": 0,
            "minSessionTimeout": self.min_session_timeout,
            "maxSessionTimeout": self.max_session_timeout,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": ",".join(FOUR_LETTER_WORDS),
            # Small, unsynced transaction logs: tests need speed, not durability
            # against power loss (data still survives a process kill).
            "preAllocSize": 1024,
            "forceSync": "no",
            "autopurge.purgeInterval": 0,
            "reconfigEnabled": "false",
        }
        if self.size > 1:
            config["quorumListenOnAllIPs"] = "false"
            for other in self.nodes:
                config[f"server.{other.node_id}"] = (
                    f"{other.host}:{other.peer_port}:{other.election_port}"
                )
        config.update(self.extra_config)
        return config

    def _write_files(self, node: ZooKeeperNode) -> None:
        with open(node.config_path, "w", encoding="utf-8") as handle:
            for key, value in self._config(node).items():
                handle.write(f"{key}={value}\n")
        if self.size > 1:
            with open(os.path.join(node.data_dir, "myid"), "w", encoding="ascii") as handle:
                handle.write(f"{node.node_id}\n")
        with open(os.path.join(node.node_dir, "log4j.properties"), "w", encoding="utf-8") as handle:
            handle.write(
                "log4j.rootLogger=INFO, FILE\n"
                "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
                f"log4j.appender.FILE.File={node.log_path}\n"
                "log4j.appender.FILE.Append=true\n"
                "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.FILE.layout.ConversionPattern="
                "%d{ISO8601} %-5p [myid:" + str(node.node_id) + "] [%t:%C{1}@%L] - %m%n\n"
            )

    def _command(self, node: ZooKeeperNode) -> List[str]:
        logging_options = [
            "-Dlog4j.configuration=file:" + os.path.join(node.node_dir, "log4j.properties"),
            "-Dzookeeper.log.dir=" + node.node_dir,
            # Used only when the log4j binding is missing and slf4j-simple is on the path.
            "-Dorg.slf4j.simpleLogger.logFile=" + node.log_path,
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
        ]
        return [
            self.java,
            *_DEFAULT_JVM_OPTIONS,
            *logging_options,
            *self.jvm_options,
            "-cp",
            os.pathsep.join(self.classpath),
            self._main_class,
            node.config_path,
        ]

    def _spawn(self, node: ZooKeeperNode) -> subprocess.Popen:
        command = self._command(node)
        # Second safety net for when atexit cannot run (os._exit, SIGKILL):
        # the kernel kills Java when the thread that started it dies. Only
        # from the main thread, whose death is the interpreter's.
        setpriv = shutil.which("setpriv")
        if setpriv and threading.current_thread() is threading.main_thread():
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        with open(node.console_path, "ab") as console:
            return subprocess.Popen(
                command,
                cwd=node.node_dir,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                # Keep the terminal's Ctrl-C and job control away from Java:
                # we stop it ourselves.
                start_new_session=True,
                close_fds=True,
            )


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
