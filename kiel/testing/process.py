"""The processes kiel's launchers start (ZooKeeper's Java, Tansu): finding the
executable, ports, spawning, signals, and the safety nets that keep any of
them from outliving the interpreter."""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Optional, Protocol

from kiel.exc import MissingDependencyError

__all__ = ["LOOPBACK"]

#: Host every node binds (client, quorum and election ports).
LOOPBACK = "127.0.0.1"

#: Seconds a process gets to exit after SIGTERM (and to be reaped after SIGKILL).
STOP_TIMEOUT = 10.0


class _Closeable(Protocol):
    def close(self) -> None: ...


class ProcessOwner:
    """What a launcher that runs one process at a time says about it.

    The launcher keeps its ``subprocess.Popen`` in ``_process`` (``None``
    before the first start).
    """

    _process: Optional[subprocess.Popen] = None

    @property
    def pid(self) -> Optional[int]:
        """The process id while it runs, else ``None``."""
        return self._process.pid if self.is_running and self._process else None

    @property
    def is_running(self) -> bool:
        """Whether the process is alive (a paused process counts as running)."""
        return self._process is not None and self._process.poll() is None


def find_executable(name: str, environ: Mapping[str, str], missing: str,
                    dependency: str) -> str:
    """The absolute path of ``name`` on ``environ``'s ``PATH``.

    Raises:
        MissingDependencyError: there is none (with ``missing`` as the message).
    """
    found = shutil.which(name, path=environ.get("PATH", os.defpath))
    if found is None:
        raise MissingDependencyError(missing, dependency=dependency)
    return os.path.abspath(found)


# Safety net 1: every launcher that started something is closed at exit.
_LIVE_LOCK = threading.Lock()
_LIVE: set[Any] = set()


def track(launcher: _Closeable) -> None:
    """Close ``launcher`` at interpreter exit unless :func:`untrack` ran first."""
    with _LIVE_LOCK:
        _LIVE.add(launcher)


def untrack(launcher: _Closeable) -> None:
    """``launcher`` closed itself; forget it."""
    with _LIVE_LOCK:
        _LIVE.discard(launcher)


def _close_all() -> None:
    with _LIVE_LOCK:
        launchers = list(_LIVE)
    for launcher in launchers:
        launcher.close()


atexit.register(_close_all)


def spawn(command: Sequence[str], cwd: str, console_path: str) -> subprocess.Popen:
    """Start ``command`` in its own session, its stdout and stderr appended to ``console_path``.

    Returns:
        the process.

    Raises:
        OSError: the command could not be started.
    """
    argv = list(command)
    # Safety net 2, for when atexit cannot run (os._exit, SIGKILL): the
    # kernel kills the child when the thread that started it dies. Only from
    # the main thread, whose death is the interpreter's.
    setpriv = shutil.which("setpriv")
    if setpriv and threading.current_thread() is threading.main_thread():
        argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
    with open(console_path, "ab") as console:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=console,
            stderr=subprocess.STDOUT,
            # Keep the terminal's Ctrl-C and job control away from Java: we
            # stop it ourselves.
            start_new_session=True,
            close_fds=True,
        )


def free_ports(count: int) -> list[int]:
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


def tail(path: str, lines: int) -> list[str]:
    """The last ``lines`` lines of a log file (of its last 64 KiB; none if unreadable)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]


def send_signal(process: subprocess.Popen, signum: int) -> None:
    """Signal ``process`` if it still runs (a process that just exited is no error)."""
    if process.poll() is None:
        try:
            os.kill(process.pid, signum)
        except ProcessLookupError:
            pass


def process_state(pid: int) -> Optional[str]:
    """The one-letter state of a process from /proc (``T`` = stopped), if known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces.
    return stat.rpartition(")")[2].split()[0]


def end(
    process: Optional[subprocess.Popen],
    kill: bool,
    paused: bool = False,
    timeout: float = STOP_TIMEOUT,
) -> None:
    """Stop ``process`` and reap it: SIGTERM (SIGKILL after ``timeout``), or SIGKILL at once.

    Args:
        process: the process (``None`` or one that exited: nothing to do).
        kill: SIGKILL at once, as a crash would.
        paused: the process is stopped with SIGSTOP.
        timeout: seconds to wait for a clean exit before killing.
    """
    if process is None or process.poll() is not None:
        return
    if not kill:
        process.terminate()
        if paused:
            # A stopped process only acts on SIGTERM once it runs again.
            send_signal(process, signal.SIGCONT)
        try:
            process.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            pass
    process.kill()
    process.wait(STOP_TIMEOUT)
