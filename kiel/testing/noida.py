"""Run one noida-db broker for tests: its Kafka front only, a free loopback port.

noida-db (MIT) is a database shipped as one static binary in the PyPI wheel
``noida-db``; ``noida-db start --only kafka`` serves the Kafka protocol and
keeps its data on disk. It judges what Tansu cannot: CreatePartitions,
DeleteRecords, AlterConfigs, OffsetDelete, and ListOffsets by time (see
:doc:`/guides/admin`). It advertises the port it listens on and has no
advertised-listener option.

:class:`NoidaBroker` starts it in the foreground, waits until it answers a
real ApiVersions request, and stops it with SIGTERM (SIGKILL after a
timeout), reaping the process; an ``atexit`` hook stops whatever a test
forgot. Synchronous and bounded; do not call it from a running IOLoop.
"""
import importlib.util
import os
import shutil
import subprocess
import tempfile
import time
from typing import Optional

from kiel.exc import ConfigError, HarnessError, KielError, MissingDependencyError
from kiel.protocol.api_versions import ApiVersionRange
from kiel.testing.process import (
    LOOPBACK,
    ProcessOwner,
    end,
    free_ports,
    spawn,
    tail,
    track,
    untrack,
)
from kiel.testing.tansu.probe import api_versions

__all__ = ["INSTALL_HINT", "NoidaBroker", "find_noida"]

#: What to install when noida-db is missing.
INSTALL_HINT = "pip install noida-db==0.2.3"
_PORT_ATTEMPTS = 3


def find_noida(binary: Optional[str] = None) -> str:
    """The ``noida-db`` binary: ``binary``, else the one in the installed wheel.

    Strategy: the wheel's ``noida-db`` script is a Python wrapper that runs
    the binary in a child process; the launcher runs the binary itself, so
    a signal reaches the broker and nothing is left behind.

    Raises:
        MissingDependencyError: there is none; the message says what to install.
    """
    if binary is not None:
        if not os.path.isfile(binary):
            raise MissingDependencyError(f"noida-db binary {binary!r} does not exist",
                                         dependency="noida-db")
        return binary
    try:
        spec = importlib.util.find_spec("noida_db")
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(location, "noida-db")
        if os.path.isfile(path):
            return path
    raise MissingDependencyError(
        f"noida-db is not installed: {INSTALL_HINT} (the test extra has it)",
        dependency="noida-db")


class NoidaBroker(ProcessOwner):
    """One noida-db process serving the Kafka protocol, data in a temporary directory.

    Args:
        binary: the ``noida-db`` executable (default: :func:`find_noida`).
        start_timeout: seconds :meth:`start` waits for ApiVersions to answer.

    Raises:
        MissingDependencyError: no noida-db binary.
        ConfigError: a bad timeout.

    Example::

        with NoidaBroker() as broker:
            admin = Admin(broker.bootstrap)
    """

    def __init__(self, binary: Optional[str] = None, *, start_timeout: float = 30.0) -> None:
        if not start_timeout > 0:
            raise ConfigError(f"start_timeout must be positive, got {start_timeout!r}")
        self.binary = find_noida(binary)
        if not os.access(self.binary, os.X_OK):
            os.chmod(self.binary, 0o755)  # a wheel unpacks it without its executable bit
        self.host = LOOPBACK
        self.port = 0
        self.start_timeout = start_timeout
        self.work_dir = tempfile.mkdtemp(prefix="kiel-noida-")
        self.data_dir = os.path.join(self.work_dir, "data")
        #: The broker's stdout and stderr.
        self.log_path = os.path.join(self.work_dir, "noida.log")
        self._process: Optional[subprocess.Popen[bytes]] = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<NoidaBroker {self.bootstrap} {'running' if self.is_running else 'stopped'}>"

    def __enter__(self) -> "NoidaBroker":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def bootstrap(self) -> str:
        """``host:port`` for clients (what the broker listens on and advertises)."""
        return f"{self.host}:{self.port}"

    def start(self) -> "NoidaBroker":
        """Start the broker and wait until it answers ApiVersions (no-op if running).

        Returns:
            the broker itself.

        Raises:
            HarnessError: it exited or did not answer in time (the message
                ends with its log's tail), or it was closed.
        """
        if self._closed:
            raise HarnessError("this NoidaBroker was closed", host=self.host, port=self.port)
        if self.is_running:
            return self
        for attempt in range(_PORT_ATTEMPTS):
            if attempt or not self.port:
                self.port = free_ports(1)[0]
            self._process = spawn([self.binary, "start", "--only", "kafka", "--kafka-port",
                                   str(self.port), "--data-dir", self.data_dir],
                                  self.work_dir, self.log_path)
            track(self)
            try:
                self._wait_ready()
                return self
            except HarnessError:
                self.stop()
                # Most likely another process took the port between
                # free_ports() and the bind: try a new one.
                if attempt + 1 == _PORT_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self._process is None or self._process.poll() is not None:
                raise self._error("exited while starting")
            try:
                api_versions((self.host, self.port), timeout=2.0)
                return
            except KielError as e:
                if time.monotonic() > deadline:
                    raise self._error(f"did not answer ApiVersions within "
                                      f"{self.start_timeout} s ({e})") from e
            time.sleep(0.1)

    def _error(self, what: str) -> HarnessError:
        log = "\n".join(tail(self.log_path, 20))
        return HarnessError(f"noida-db {what}; its log ends:\n{log}",
                            host=self.host, port=self.port)

    def api_versions(self) -> dict[int, ApiVersionRange]:
        """What the broker lists in ApiVersions (a real round trip).

        Raises:
            HarnessError: no answer.
        """
        return api_versions((self.host, self.port))

    def stop(self) -> None:
        """Stop the broker (SIGTERM, SIGKILL after a timeout) and reap it; its data stays."""
        process, self._process = self._process, None
        untrack(self)
        end(process, kill=False)

    def close(self) -> None:
        """Stop the broker for good and remove its directory (data and log)."""
        self.stop()
        self._closed = True
        shutil.rmtree(self.work_dir, ignore_errors=True)
