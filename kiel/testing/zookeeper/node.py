"""One ZooKeeper server process: start, stop, kill, pause, resume, and how it is."""
import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING, Optional

from kiel.exc import HarnessError
from kiel.testing.process import (
    LOOPBACK,
    STOP_TIMEOUT,
    ProcessOwner,
    end,
    process_state,
    send_signal,
    spawn,
    tail,
)
from kiel.testing.zookeeper.config import java_command
from kiel.testing.zookeeper.fourletter import server_status

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from kiel.testing.zookeeper.ensemble import ZooKeeperEnsemble

__all__ = ["ZooKeeperNode"]

#: Seconds between two readiness polls.
POLL_INTERVAL = 0.05


class ZooKeeperNode(ProcessOwner):
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

    def status(self, timeout: float = 1.0) -> Optional[dict[str, str]]:
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
            last = tail(path, lines)
            if last:
                parts.append(f"--- {path} (last {len(last)} lines)\n" + "\n".join(last))
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
        self._process = spawn(
            java_command(self._launcher, self), self.node_dir, self.console_path
        )
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
            time.sleep(POLL_INTERVAL)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the server with SIGTERM and wait for it to exit (SIGKILL after ``timeout``).

        Data is kept; :meth:`start` brings the node back.

        Args:
            timeout: seconds to wait for a clean exit before killing.
        """
        process, self._process = self._process, None
        paused, self._paused = self._paused, False
        end(process, kill=False, paused=paused, timeout=timeout)

    def kill(self) -> None:
        """Kill the server with SIGKILL (a crash: no clean shutdown) and reap it."""
        process, self._process = self._process, None
        self._paused = False
        end(process, kill=True)

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
            send_signal(self._process, signum)

    def _wait_state(self, stopped: bool, timeout: float = 5.0) -> None:
        # Signals are delivered asynchronously; make pause()/resume() take
        # effect before they return, so callers can rely on them.
        if self._process is None:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = process_state(self._process.pid)
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
            for line in tail(path, 200)
        )
