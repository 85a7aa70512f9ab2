"""One proxied connection (:class:`Link`) and its two directions (:class:`Pipe`).

A pipe reads its source socket into a bounded queue and writes the queue
to its sink, checking the faults before every ``send``: a chunk goes out
only once its delay has passed and while its direction is neither stalled
nor blacked out. The end of the source (FIN) is queued like data and passed
the same way (so a blackout holds it too); a reset or a failed write resets
the whole link, both sides.
"""

import asyncio
import errno
import logging
import socket
from collections import deque
from collections.abc import Callable
from typing import Optional

from kiel._aio import Tasks, Wakeup, within
from kiel.testing.faults.frames import FrameWatch, KafkaRules
from kiel.testing.faults.sockets import peer_gave_up, reset, wait_ready
from kiel.testing.faults.state import Counters, Faults

__all__ = ["Link", "Pipe"]

log = logging.getLogger(__name__)

_CHUNK = 64 * 1024
_EOF = b""
#: Queued instead of data when the source was reset: reset the sink too.
_RESET: Optional[bytes] = None


class Pipe:
    """One direction of a link: source -> bounded queue -> sink.

    Args:
        direction: ``"upstream"`` or ``"downstream"``.
        source: the socket read.
        sink: the socket written.
        faults: the proxy's faults.
        counters: the proxy's counters.
        max_held: bytes held at most; reading stops at this bound.
        transform: what the bytes read become before they are queued, and
            whether the link is to be reset after them (a Kafka frame rule:
            see :mod:`~kiel.testing.faults.frames`).
    """

    def __init__(self, direction: str, source: socket.socket, sink: socket.socket,
                 faults: Faults, counters: Counters, max_held: int,
                 transform: Optional[Callable[[bytes], tuple[bytes, bool]]] = None) -> None:
        self.transform = transform
        self.direction, self.source, self.sink = direction, source, sink
        self.faults, self.counters, self.max_held = faults, counters, max_held
        self.held = 0
        self._queue: deque[tuple[float, Optional[bytes]]] = deque()
        self._space = Wakeup()
        self._data = Wakeup()

    def _hold(self, count: int) -> None:
        self.held += count
        self.counters.hold(self.direction, count)

    async def read(self) -> bool:
        """Read the source until its end; returns False if it was reset."""
        loop = asyncio.get_running_loop()
        # Strategy: never read more than fits under the bound, and stop reading
        # at it. Held bytes then never exceed max_held, and what the source
        # sends meanwhile waits in the kernel's buffers until they fill and the
        # sender blocks: back-pressure, as from a slow peer.
        while True:
            while self.held >= self.max_held:
                await self._space.wait()
            try:
                data: Optional[bytes] = await loop.sock_recv(
                    self.source, min(_CHUNK, self.max_held - self.held))
            except OSError:  # reset by the peer: passed on once the queue before it has gone
                data = _RESET
            if data and self.transform is not None:
                data, reset_after = self.transform(data)
                if reset_after:
                    # A frame rule: what came before passes, then the reset.
                    if data:
                        self._hold(len(data))
                        self._queue.append((loop.time() + self.faults.delays[self.direction],
                                            data))
                    self._queue.append((loop.time() + self.faults.delays[self.direction],
                                        _RESET))
                    self._data.fire()
                    return True
                if not data:
                    continue  # a partial frame, held by the transform
            if data:
                self._hold(len(data))
            self._queue.append((loop.time() + self.faults.delays[self.direction], data))
            self._data.fire()
            if not data:
                return True

    async def write(self) -> bool:
        """Pass the queue to the sink; returns False when the link must be reset."""
        loop = asyncio.get_running_loop()
        while True:
            while not self._queue:
                await self._data.wait()
            due, data = self._queue[0]
            while loop.time() < due:
                await asyncio.sleep(due - loop.time())
            await self.faults.wait_passing(self.direction)
            if data is None:  # _RESET
                return False
            if data == _EOF:
                return self._shutdown()
            if not await self._send(memoryview(data)):
                return False
            self._queue.popleft()

    async def _send(self, view: memoryview) -> bool:
        while view:
            await self.faults.wait_passing(self.direction)
            try:
                sent = self.sink.send(view)
            except BlockingIOError:
                await wait_ready(self.sink, write=True)
                continue
            except OSError as e:  # the sink's peer is gone: reset the link
                log.debug("%s send failed: %s", self.direction, e)
                return False
            view = view[sent:]
            self.counters.passed[self.direction] += sent
            self._hold(-sent)
            self._space.fire()
        return True

    def _shutdown(self) -> bool:
        try:
            self.sink.shutdown(socket.SHUT_WR)
        except OSError as e:
            if e.errno != errno.ENOTCONN:
                return False
        return True

    def inject(self, data: bytes) -> None:
        """Queue ``data`` after what was read so far, as if read from the
        source (a frame rule's answer in the broker's place)."""
        loop = asyncio.get_running_loop()
        self._hold(len(data))
        self._queue.append((loop.time() + self.faults.delays[self.direction], data))
        self._data.fire()

    def drop(self) -> None:
        """Forget what is held (the link is gone)."""
        self._queue.clear()
        self._hold(-self.held)


class Link:
    """One client connection, held during a blackout, then joined to the target.

    Args:
        client: the accepted client socket (non-blocking).
        target: ``(host, port)`` to connect to.
        faults: the proxy's faults.
        counters: the proxy's counters.
        max_held: bound of each direction's queue, in bytes.
        connect_timeout: seconds to connect to the target.
    """

    def __init__(self, client: socket.socket, target: tuple[str, int], faults: Faults,
                 counters: Counters, max_held: int, connect_timeout: float,
                 kafka: Optional[KafkaRules] = None) -> None:
        self.kafka = kafka
        self.client = client
        self.target = target
        self.faults = faults
        self.counters = counters
        self.max_held = max_held
        self.connect_timeout = connect_timeout
        self.upstream: Optional[socket.socket] = None
        #: Whether a blackout holds it before it reaches the target.
        self.waiting = faults.blackout
        self.pipes: list[Pipe] = []
        self._tasks = Tasks("kiel-fault-proxy-link")

    async def run(self) -> None:
        """Carry the connection until both sides closed; reset both if cancelled.

        Cancelling this coroutine (``cut()``, ``stop()``) resets both sockets.
        """
        clean = False
        try:
            clean = await self._serve()
        finally:
            await self._tasks.cancel(timeout=5.0)
            self.close(clean)

    def close(self, clean: bool = False) -> None:
        """Close both sockets, with an RST unless ``clean``; idempotent.

        Also for a link whose :meth:`run` was cancelled before it started.
        """
        for pipe in self.pipes:
            pipe.drop()
        self.pipes = []
        for sock in (self.client, self.upstream):
            if sock is None or sock.fileno() < 0:
                continue
            if clean:
                sock.close()
            else:
                reset(sock)

    async def _serve(self) -> bool:
        held = self.waiting = self.faults.blackout
        await self.faults.wait_no_blackout()
        self.waiting = False
        # A client that closed while held never reaches the target: in a real
        # partition its SYN would never have arrived, nor anything after it.
        if held and peer_gave_up(self.client):
            return True
        self.upstream = await self._connect()
        if self.upstream is None:
            return False
        watch = None if self.kafka is None else FrameWatch(self.kafka)
        self.pipes = [
            Pipe("upstream", self.client, self.upstream, self.faults, self.counters,
                 self.max_held, None if watch is None else watch.upstream),
            Pipe("downstream", self.upstream, self.client, self.faults, self.counters,
                 self.max_held, None if watch is None else watch.downstream),
        ]
        if watch is not None:
            watch.inject = self.pipes[1].inject
        pending = {self._tasks.spawn(step(), f"{pipe.direction}-{step.__name__}")
                   for pipe in self.pipes for step in (pipe.read, pipe.write)}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if not all(task.result() for task in done):
                return False
        return True

    async def _connect(self) -> Optional[socket.socket]:
        loop = asyncio.get_running_loop()
        # Kept in self.upstream at once so that a cancelled connect closes it too (run()).
        sock = self.upstream = socket.socket(
            socket.AF_INET6 if ":" in self.target[0] else socket.AF_INET)
        sock.setblocking(False)
        try:
            await within(loop.sock_connect(sock, self.target), self.connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, asyncio.TimeoutError) as e:
            log.info("fault proxy: cannot connect to %s:%d: %r", *self.target, e)
            self.counters.failed += 1
            self.upstream = None
            sock.close()
            return None
        return sock
