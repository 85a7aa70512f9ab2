"""A minimal blocking Kafka client over a plain socket, for tests and benchmarks.

:class:`RawClient` sends kiel protocol structs through
:class:`~kiel.protocol.framing.ClientFraming` and waits for the answer:
nothing is hidden (no retries, no metadata), so tests see exactly what the
broker answers. It is synchronous; do not use it on an IOLoop.

Example::

    from kiel.protocol import MetadataRequest
    with RawClient(cluster.address(1)) as client:
        response = client.request(MetadataRequest([]))
"""
import socket
import ssl
from typing import Any, Optional

from kiel.exc import ConnectionClosedError
from kiel.protocol.framing import ClientFraming

__all__ = ["RawClient"]


class RawClient:
    """One blocking connection to a broker.

    Args:
        address: ``"host:port"`` or ``(host, port)``.
        timeout: socket timeout in seconds for connect and every read.
        client_id: the request header's client id.
        ssl_context: speak TLS through this context (``None``: plain TCP).
    """

    def __init__(self, address: Any, timeout: float = 10.0, client_id: str = "kiel-raw",
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        if isinstance(address, str):
            host, port = address.rsplit(":", 1)
            address = (host, int(port))
        self.address: tuple[str, int] = (address[0], int(address[1]))
        sock = socket.create_connection(self.address, timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ssl_context is not None:
            try:
                sock = ssl_context.wrap_socket(sock, server_hostname=self.address[0])
            except OSError:
                sock.close()
                raise
        self.sock = sock
        self.framing = ClientFraming(client_id=client_id)
        self._ready: list[tuple[int, Any]] = []

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def send(self, request: Any) -> tuple[int, bool]:
        """Write one request; returns ``(correlation_id, expects_response)``."""
        correlation_id, frame, expects = self.framing.send_request(request)
        self.sock.sendall(frame)
        return correlation_id, expects

    def receive(self) -> Any:
        """Wait for the next response (in request order).

        Raises:
            ConnectionClosedError: the broker closed the connection first.
            socket.timeout: nothing arrived within the timeout.
        """
        while not self._ready:
            data = self.sock.recv(1024 * 1024)
            if not data:
                raise ConnectionClosedError("broker closed the connection",
                                            host=self.address[0], port=self.address[1])
            self._ready.extend(self.framing.receive_data(data))
        return self._ready.pop(0)[1]

    def request(self, request: Any) -> Optional[Any]:
        """Send ``request`` and return its response (``None`` when none is expected)."""
        _, expects = self.send(request)
        return self.receive() if expects else None

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """Whether the broker closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
