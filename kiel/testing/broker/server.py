"""One embedded broker: a loopback TCP server speaking the Kafka 0.8.2 protocol.

Each connection is served like Kafka's socket server does it: requests are
handled one at a time, in order (the next one is read only after the
previous response was written), so responses come back in request order and
a slow long poll holds its connection. Bytes that do not frame or decode
(garbage, an oversize length prefix, an unknown API key or version) close
the connection, as a 0.8.2 broker does; the broker itself keeps serving.

Fault injection (see :mod:`kiel.testing.broker.faults`) is applied here,
around each request: hang, latency, injected error codes, corrupt offsets,
cut responses.
Error, offset and cut rules are spent only on clients still connected: the answer to
a fetch whose client closed while it was parked (Tornado cannot tell: nothing
is read while a request is handled) goes nowhere, and spending a rule on it
would take the fault away from the client it was meant for.
"""

import logging
import socket
import ssl
from typing import TYPE_CHECKING, Any, Optional

from tornado import gen
from tornado.iostream import IOStream, StreamClosedError
from tornado.locks import Event
from tornado.netutil import bind_sockets
from tornado.tcpserver import TCPServer

from kiel.exc import HarnessError, ProtocolError
from kiel.protocol.framing import ServerFraming
from kiel.protocol.versions import FETCH
from kiel.testing.faults.sockets import peer_gave_up

if TYPE_CHECKING:  # pragma: no cover
    from kiel.testing.broker.core import ClusterCore

__all__ = ["BrokerServer"]

log = logging.getLogger(__name__)

_READ_CHUNK = 256 * 1024


class _Listener(TCPServer):
    """Tornado's TCP server, handing each accepted stream to its broker."""

    def __init__(self, broker: "BrokerServer", max_buffer_size: int,
                 ssl_options: Optional[ssl.SSLContext] = None) -> None:
        super().__init__(ssl_options=ssl_options, max_buffer_size=max_buffer_size)
        self.broker = broker

    async def handle_stream(self, stream: IOStream, address: Any) -> None:
        await self.broker.serve(stream)


class _Connection:
    """One client connection of a broker."""

    def __init__(self, stream: IOStream) -> None:
        self.stream = stream

    def close(self) -> None:
        self.stream.close()

    @property
    def closed(self) -> bool:
        return self.stream.closed()

    def client_gone(self) -> bool:
        """Whether the client closed or reset its end, though nothing was read.

        Strategy: a connection is read only between requests, so while one
        is handled (a fetch parked for its ``max_wait``) Tornado cannot see
        that the client left; the socket can, without a read.
        """
        sock = self.stream.socket
        return sock is None or peer_gave_up(sock)


class BrokerServer:
    """One broker of the cluster: its listening socket, connections and state.

    Args:
        core: the cluster it belongs to.
        broker_id: its id.
        host: the address to bind (loopback).
        port: the port (0: pick a free one at the first start, then keep it).
    """

    def __init__(self, core: "ClusterCore", broker_id: int, host: str, port: int = 0) -> None:
        # Late import: the handlers import the core's state modules.
        from kiel.testing.broker.handlers import RequestHandlers

        self.core = core
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.running = False
        self.connections: set[_Connection] = set()
        self.handlers = RequestHandlers(core, self)
        self._listener: Optional[_Listener] = None
        self._resume = Event()
        self._resume.set()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<BrokerServer {self.broker_id} {self.host}:{self.port} {state}>"

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"

    @property
    def hung(self) -> bool:
        """Whether the broker holds every request without answering."""
        return not self._resume.is_set()

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Bind the port (the same one after a restart) and accept connections.

        Raises:
            HarnessError: the port cannot be bound.
        """
        if self.running:
            return
        try:
            sockets = bind_sockets(self.port, self.host, family=socket.AF_INET)
        except OSError as e:
            raise HarnessError(f"broker {self.broker_id} cannot bind {self.host}:{self.port}: {e}",
                               broker_id=self.broker_id, host=self.host, port=self.port) from e
        self.port = sockets[0].getsockname()[1]
        # The stream buffer must hold a whole request frame of the largest size.
        self._listener = _Listener(self, self.core.config.socket_request_max_bytes + 1024,
                                   self.core.config.ssl_context)
        self._listener.add_sockets(sockets)
        self.running = True

    def stop(self) -> None:
        """Close the listening socket and every connection (requests in flight are lost)."""
        if self._listener is not None:
            self._listener.stop()
            self._listener = None
        self.running = False
        self.close_connections()
        # Held requests of a hung broker wake up, find their connection closed, end.
        self._resume.set()

    def close_connections(self) -> int:
        """Close every client connection now; returns how many."""
        connections = list(self.connections)
        for connection in connections:
            connection.close()
        return len(connections)

    def hang(self) -> None:
        """Keep accepting and reading, but answer nothing until :meth:`resume`."""
        self._resume.clear()

    def resume(self) -> None:
        """Answer again; requests held meanwhile are answered now, in order."""
        self._resume.set()

    # -- serving ---------------------------------------------------------------

    async def serve(self, stream: IOStream) -> None:
        """Serve one connection until it closes or sends bytes that do not parse."""
        connection = _Connection(stream)
        self.connections.add(connection)
        framing = ServerFraming(max_frame_size=self.core.config.socket_request_max_bytes)
        try:
            while True:
                data = await stream.read_bytes(_READ_CHUNK, partial=True)
                try:
                    requests = framing.receive_data(data)
                except ProtocolError as e:
                    log.info("broker %d closes a connection: %s", self.broker_id, e)
                    return
                for header, api, request in requests:
                    if not await self._handle(connection, header, api, request):
                        return
        except StreamClosedError:
            return
        except Exception as e:  # a bug in the broker: keep it, close this connection only
            self.core.record_error(e)
        finally:
            stream.close()
            self.connections.discard(connection)

    async def _handle(self, connection: _Connection, header: Any, api: Any, request: Any) -> bool:
        """Handle one request; returns False when the connection must close."""
        if not self._resume.is_set():
            await self._resume.wait()
        if connection.closed or not self.running:
            return False
        faults = self.core.faults
        delay = faults.latency(self.broker_id, api.key)
        if delay:
            await gen.sleep(delay)
            if connection.closed or not self.running:
                return False
        # A request read after its client closed (queued behind a parked fetch)
        # is answered to nobody: fault rules are for the clients still connected.
        code = (None if not faults.armed or connection.client_gone()
                else faults.take_error(self.broker_id, api.key))
        if code is not None:
            response = self.handlers.error_response(header, api, request, code)
        else:
            response = await self.handlers.handle(header, api, request)
        if response is None:  # Produce with acks=0: no answer at all
            return True
        if response is self.handlers.CLOSE:
            return False
        if connection.closed:
            return False
        frame = response if isinstance(response, bytes) else ServerFraming.send_response(
            header.correlation_id, response)
        # Nor is the answer to a fetch whose client closed while it was parked.
        if faults.armed and not connection.client_gone():
            if api.key == FETCH:
                frame = self.handlers.corrupt_offsets(frame)
            if faults.take_drop(self.broker_id, api.key):
                await connection.stream.write(frame[: max(1, len(frame) // 2)])
                return False
        await connection.stream.write(frame)
        return True
