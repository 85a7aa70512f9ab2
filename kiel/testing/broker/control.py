"""The control channel of a cluster in another process, and the client that drives it.

Protocol: JSON lines over TCP on 127.0.0.1. Each request is one line
``{"op": "stop_broker", "args": [2], "kwargs": {}}``; each answer one line,
``{"ok": true, "result": ...}`` or ``{"ok": false, "type": "HarnessError",
"error": "..."}``. ``op`` is one of
:data:`~kiel.testing.broker.ops.OPERATIONS` (the methods of
:class:`~kiel.testing.broker.ops.ClusterControl`). Try it by hand::

    $ python -m kiel.testing serve --brokers 3
    {"zookeeper": null, "brokers": [...], "control": "127.0.0.1:40123", ...}
    $ echo '{"op": "describe"}' | nc -q1 127.0.0.1 40123

:class:`ClusterProcess` starts ``python -m kiel.testing serve`` and offers the
same synchronous API as :class:`~kiel.testing.broker.cluster.EmbeddedCluster`,
so benchmarks can run the brokers without sharing the client's GIL.
"""

import atexit
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Optional, Union

from tornado.iostream import IOStream, StreamClosedError
from tornado.netutil import bind_sockets
from tornado.tcpserver import TCPServer

from kiel import exc
from kiel.exc import ConfigError, HarnessError, KielError
from kiel.testing.broker.ops import OPERATIONS, ClusterControl, ClusterOps

__all__ = ["ClusterProcess", "ControlServer"]

log = logging.getLogger(__name__)

_MAX_LINE = 1024 * 1024


class ControlServer(TCPServer):
    """Serves :class:`ClusterOps` as JSON lines on a loopback port (on the cluster's loop)."""

    def __init__(self, ops: ClusterOps, port: int = 0) -> None:
        super().__init__(max_buffer_size=_MAX_LINE * 2)
        self.ops = ops
        self.port = port

    @property
    def address(self) -> str:
        """``127.0.0.1:port``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:  # type: ignore[override]
        """Bind and serve (call on the cluster's loop)."""
        sockets = bind_sockets(self.port, "127.0.0.1", family=socket.AF_INET)
        self.port = sockets[0].getsockname()[1]
        self.add_sockets(sockets)

    async def handle_stream(self, stream: IOStream, address: Any) -> None:
        try:
            while True:
                line = await stream.read_until(b"\n", max_bytes=_MAX_LINE)
                answer = await self._answer(line)
                await stream.write(json.dumps(answer).encode("utf-8") + b"\n")
        except StreamClosedError:
            return
        finally:
            stream.close()

    async def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line.decode("utf-8"))
            op = request["op"]
            args = request.get("args") or []
            kwargs = request.get("kwargs") or {}
            if op not in OPERATIONS or not isinstance(args, list) or not isinstance(kwargs, dict):
                raise ConfigError(f"unknown operation or bad arguments: {line[:200]!r}")
        except (ValueError, KeyError, TypeError) as e:
            return {"ok": False, "type": "ConfigError", "error": f"bad request: {e!r}"}
        except ConfigError as e:
            return {"ok": False, "type": "ConfigError", "error": str(e)}
        try:
            result = await getattr(self.ops, op)(*args, **kwargs)
        except KielError as e:
            return {"ok": False, "type": type(e).__name__, "error": str(e)}
        except TypeError as e:  # wrong arguments for the operation
            return {"ok": False, "type": "ConfigError", "error": f"{op}: {e}"}
        return {"ok": True, "result": result}


_RUNNING: "weakref.WeakSet[ClusterProcess]" = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    # A test run that forgot to stop a cluster process must not leave it behind.
    for cluster in list(_RUNNING):
        cluster._kill()


def _error_class(name: str) -> type:
    cls = getattr(exc, name, None)
    if isinstance(cls, type) and issubclass(cls, KielError):
        return cls
    return HarnessError


class ClusterProcess(ClusterControl):
    """An embedded cluster in a ``python -m kiel.testing serve`` subprocess.

    Same synchronous API as :class:`~kiel.testing.broker.cluster.EmbeddedCluster`
    (fault injection included, over the control channel), but the brokers
    run in their own interpreter: benchmarks measure the client, not a
    shared GIL.

    Args:
        brokers: number of brokers.
        zookeeper: ``True`` to have the subprocess start its own ZooKeeper,
            a connection string to use an existing one, ``None`` for none.
        partitions: default partitions per topic.
        replication: default replication.
        topics: topics to create at start (names or ``{name: partitions}``).
        log_dir: on-disk logs.
        extra_args: more ``serve`` arguments.
        start_timeout: seconds to wait for the ready line.
        python: interpreter to run (default: this one).
    """

    def __init__(
        self,
        brokers: int = 3,
        zookeeper: Union[None, bool, str] = None,
        partitions: int = 1,
        replication: Optional[int] = None,
        topics: Union[None, Iterable[str], Mapping[str, int]] = None,
        log_dir: Optional[str] = None,
        extra_args: Iterable[str] = (),
        start_timeout: float = 60.0,
        python: Optional[str] = None,
    ) -> None:
        args = [python or sys.executable, "-m", "kiel.testing", "serve",
                "--brokers", str(brokers), "--partitions", str(partitions)]
        if zookeeper is True:
            args.append("--zookeeper")
        elif zookeeper:
            args += ["--zookeeper-hosts", str(zookeeper)]
        if replication:
            args += ["--replication", str(replication)]
        if topics:
            items = topics.items() if isinstance(topics, Mapping) else ((t, None) for t in topics)
            for name, count in items:
                args += ["--topic", f"{name}:{count}" if count else name]
        if log_dir:
            args += ["--log-dir", log_dir]
        args += list(extra_args)
        self.args = args
        self.start_timeout = start_timeout
        self.process: Optional[subprocess.Popen] = None
        self.info: dict[str, Any] = {}
        self._sock: Optional[socket.socket] = None
        self._file: Any = None
        self._stderr: Any = None

    def __enter__(self) -> "ClusterProcess":
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    @property
    def brokers(self) -> list[str]:
        """Broker addresses from the ready line."""
        return list(self.info.get("brokers", []))

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:p1,..."``."""
        return ",".join(self.brokers)

    @property
    def zookeeper(self) -> Optional[str]:
        """The ZooKeeper connection string the cluster uses (``None``: none)."""
        return self.info.get("zookeeper")

    def start(self) -> None:
        """Spawn ``serve`` and wait for its ready line; connect the control channel.

        Raises:
            HarnessError: the process exited or printed nothing in time (with its stderr).
        """
        if self.process is not None:
            return
        # stderr goes to a file: a pipe nobody reads would block a chatty child.
        self._stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                        stderr=self._stderr, stdin=subprocess.DEVNULL)
        assert self.process.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        line = b""
        fd = self.process.stdout.fileno()
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.process.poll() is not None:
                break
            readable, _, _ = select.select([fd], [], [], min(remaining, 0.5))
            if readable:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                line += chunk
        if not line.endswith(b"\n"):
            stderr = self._kill()
            raise HarnessError(f"serve did not become ready within {self.start_timeout} s: "
                               f"{stderr[-2000:]}")
        _RUNNING.add(self)
        self.info = json.loads(line.decode("utf-8"))
        host, port = self.info["control"].rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=self.start_timeout)
        self._file = self._sock.makefile("rwb")

    def _read_stderr(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace")
        self._stderr.close()
        self._stderr = None
        return text

    def _kill(self) -> str:
        if self.process is not None:
            self.process.kill()
            self.process.communicate(timeout=10)
            self.process = None
        return self._read_stderr()

    def stop(self) -> None:
        """SIGTERM the process (it stops the brokers and its ZooKeeper) and wait.

        Raises:
            HarnessError: it did not exit cleanly (its stderr is in the message).
        """
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        process, self.process = self.process, None
        if process is None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
        stderr = self._read_stderr()
        if process.returncode != 0:
            raise HarnessError(f"serve exited with {process.returncode}: {stderr[-2000:]}")

    def _call(self, op: str, *args: Any, **kwargs: Any) -> Any:
        if self._file is None:
            raise HarnessError("the cluster process is not running")
        self._file.write(json.dumps({"op": op, "args": list(args), "kwargs": kwargs}).encode()
                         + b"\n")
        self._file.flush()
        line = self._file.readline()
        if not line:
            raise HarnessError("the cluster process closed its control channel")
        answer = json.loads(line.decode("utf-8"))
        if answer.get("ok"):
            return answer.get("result")
        raise _error_class(answer.get("type", ""))(answer.get("error", "control call failed"))
