"""Socket helpers of the fault proxy: readiness, RST, and "has the peer gone?"."""

import asyncio
import logging
import socket
import ssl
import struct
from typing import Optional

__all__ = ["peer_gave_up", "reset", "wait_ready"]

log = logging.getLogger(__name__)

_TCP_CLOSE = 7  # Linux's tcpi_state once the peer reset the connection
_TCP_CLOSE_WAIT = 8  # Linux's tcpi_state once the peer's FIN has arrived
_LINGER_ZERO = struct.pack("ii", 1, 0)  # struct linger {l_onoff = 1, l_linger = 0}


async def wait_ready(sock: socket.socket, write: bool = False) -> None:
    """Return once ``sock`` is readable (or writable, with ``write``).

    Strategy: the proxy makes every ``accept``/``send`` call itself, right
    after this returns, instead of letting ``loop.sock_accept`` or
    ``loop.sock_sendall`` do it. Those finish what they started after their
    caller was cancelled or a fault began: a socket accepted into a cancelled
    future leaks unclosed, the rest of a chunk goes out after a blackout
    started. Cancelling this wait leaves nothing behind.
    """
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    fd = sock.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if write:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if write:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


def reset(sock: Optional[socket.socket]) -> None:
    """Close ``sock`` with an RST instead of a FIN (SO_LINGER on, zero seconds)."""
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
    except OSError as e:  # already reset by the peer: a plain close is all there is
        log.debug("SO_LINGER on a dead socket: %s", e)
    sock.close()


def peer_gave_up(sock: socket.socket) -> bool:
    """Whether the peer of a connected, non-blocking socket closed or reset it.

    Nothing is read: bytes the peer sent stay for the socket's next read. A
    TLS socket cannot peek; its TCP state alone tells (Linux), else it counts
    as connected.
    """
    if not isinstance(sock, ssl.SSLSocket):
        try:
            data = sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return False
        except OSError:
            return True
        if not data:
            return True
    # Data then FIN: the peek sees only the data; the TCP state tells the rest.
    tcp_info = getattr(socket, "TCP_INFO", None)
    if tcp_info is None:
        return False
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, 1)[0]
    except OSError:
        return True
    return state in (_TCP_CLOSE, _TCP_CLOSE_WAIT)
