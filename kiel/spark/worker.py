"""One event loop and a few connected clients per Python worker thread, kept across calls.

Spark reuses its Python workers: one runs task after task of a query (and
of the next), and a stream's planning runs in one long-lived worker. A
client per call paid a fresh event loop, a Metadata request, the ApiVersions
probe (which a 0.8 broker answers by closing the connection, so a third
connection) and a TCP connection to each broker, for every task; Spark's own
source keeps a pool of Kafka consumers per executor for the same reason.
Here each thread keeps its event loop and, per set of client options, one
connected :class:`~kiel.client.Client` (its metadata, negotiated versions
and connections) between calls.

Bounds: at most :data:`MAX_CLIENTS` clients per thread (the least recently
used is closed to make room); a client idle longer than its options'
``kafka.connections.max.idle.ms`` is closed and replaced when next wanted; a
call that fails with any error closes the client it used (the next call
starts afresh rather than trust its state); what is left is closed when the
interpreter exits. The loop runs only inside a call: between calls nothing
is scheduled on it, and a connection the broker closed meanwhile fails the
next request, which kiel's retries then reconnect.
"""

import asyncio
import atexit
import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Optional

from kiel._aio import within
from kiel.client import Client

__all__ = ["MAX_CLIENTS", "CLOSE_TIMEOUT", "WorkerClients", "session"]

log = logging.getLogger(__name__)

#: Clients one thread keeps at most.
MAX_CLIENTS = 4
#: Seconds a client may take to close (at eviction and at exit).
CLOSE_TIMEOUT = 5.0


class _Kept:
    """A kept client and when it was last handed out."""

    __slots__ = ("client", "used", "idle")

    def __init__(self, client: Client, idle: float) -> None:
        self.client = client
        self.used = time.monotonic()
        self.idle = idle


class WorkerClients:
    """One thread's event loop and its kept clients.

    Args:
        max_clients: clients kept at most (least recently used closed first).
    """

    def __init__(self, max_clients: int = MAX_CLIENTS) -> None:
        self.loop = asyncio.new_event_loop()
        self.max_clients = max_clients
        self.clients: OrderedDict[Any, _Kept] = OrderedDict()
        #: Clients made (for tests and benchmarks: reuse keeps it low).
        self.made = 0

    def run(self, aw: Any) -> Any:
        """Run ``aw`` to completion on this thread's loop, set as its current loop meanwhile."""
        asyncio.set_event_loop(self.loop)
        try:
            return self.loop.run_until_complete(aw)
        finally:
            asyncio.set_event_loop(None)

    def client(self, key: Any, make: Callable[[], Client], idle: float) -> tuple[Client, bool]:
        """The connected client kept for ``key``, or a new one made with ``make``.

        Args:
            key: what identifies the client's settings.
            make: builds an unconnected client.
            idle: seconds after which an unused client is replaced.

        Returns:
            the client, and whether it was kept from an earlier call.

        Raises:
            KielError: a new client could not connect (it is closed).
        """
        kept = self.clients.get(key)
        if kept is not None:
            if time.monotonic() - kept.used <= kept.idle and not kept.client.closed:
                self.clients.move_to_end(key)
                kept.used = time.monotonic()
                return kept.client, True
            self.drop(key)
        while len(self.clients) >= self.max_clients:
            self.drop(next(iter(self.clients)))
        client = make()
        self.made += 1
        try:
            self.run(client.connect())
        except BaseException:
            self._close(client)
            raise
        self.clients[key] = _Kept(client, idle)
        return client, False

    def drop(self, key: Any) -> None:
        """Close and forget the client kept for ``key`` (if any)."""
        kept = self.clients.pop(key, None)
        if kept is not None:
            self._close(kept.client)

    def _close(self, client: Client) -> None:
        try:
            self.run(within(client.close(), CLOSE_TIMEOUT))
        except (Exception, asyncio.CancelledError) as e:  # noqa: BLE001 -- closing: report, go on
            log.warning("closing a kept kiel client failed: %r", e)

    def close(self) -> None:
        """Close every kept client and the loop."""
        for key in list(self.clients):
            self.drop(key)
        if not self.loop.is_closed():
            try:
                # What asyncio.run() does on the way out: the SASL exchange
                # runs PBKDF2 in the default executor.
                self.run(self.loop.shutdown_asyncgens())
                self.run(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()


_local = threading.local()
_every: list[WorkerClients] = []
_every_lock = threading.Lock()


def worker_clients() -> WorkerClients:
    """This thread's :class:`WorkerClients` (made on first use)."""
    mine: Optional[WorkerClients] = getattr(_local, "clients", None)
    if mine is None or mine.loop.is_closed():
        mine = _local.clients = WorkerClients()
        with _every_lock:
            _every.append(mine)
    return mine


@contextlib.contextmanager
def session(key: Any, make: Callable[[], Client],
            idle: float) -> Iterator[tuple[WorkerClients, Client, bool]]:
    """This thread's loop and the client kept for ``key``; an error inside closes it.

    Yields:
        the thread's :class:`WorkerClients` (``run`` drives the loop), the
        connected client, and whether it was kept from an earlier call.
    """
    clients = worker_clients()
    client, kept = clients.client(key, make, idle)
    try:
        yield clients, client, kept
    except GeneratorExit:
        raise  # a read closed early (Spark's limit): between steps nothing is in flight
    except BaseException:
        clients.drop(key)
        raise


@atexit.register
def _close_all() -> None:
    """Close what every thread kept (best effort: the interpreter is exiting)."""
    with _every_lock:
        every = list(_every)
        _every.clear()
    for clients in every:
        try:
            clients.close()
        except Exception as e:  # noqa: BLE001 -- exiting: report, go on
            log.warning("closing kiel.spark's kept clients at exit failed: %r", e)
