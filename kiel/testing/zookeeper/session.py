"""Real session expiry: the server closes a client's session, nothing is faked."""
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from socket import create_connection

from kazoo.client import KazooClient, KazooState
from kazoo.protocol.serialization import Connect, int_int_struct, int_struct, reply_header_struct

from kiel.exc import HarnessError

__all__ = ["expire_session"]

#: Seconds the client gets to report its session lost once no server holds
#: a connection of it; then the close and the eviction are done again.
HEARD_WITHIN = 2.0
#: The session timeout, ms, asked for when connecting with the client's
#: session (the session is closed at once; the server clamps it anyway).
_REOPEN_MS = 10_000
#: ZooKeeper's closeSession operation code.
_CLOSE_SESSION = -11


def expire_session(
    hosts: str, client: KazooClient, timeout: float = 15.0, wait_reconnect: bool = False
) -> None:
    """Make the server really expire ``client``'s session, and wait until it sees it.

    Strategy: connect to a server with the same session id and password and
    close the session there. The close is a real ``closeSession`` on the
    server: the session's ephemeral nodes are deleted and watchers fire,
    and the original connection is dropped, so the client learns that its
    session expired when it connects again. Nothing is faked on the client
    side.

    One race needs more: a server that carries out a close does not drop
    the session's connection *on that same server* when it is not the one
    the close came from. That happens when the client, thrown off that
    server by our connection (one connection per session per server), comes
    back to it between our close being read and being carried out. A
    follower then answers that connection's pings for ever, so the client
    stays "connected" to a dead session and never learns it is gone
    (ZooKeeper's own expiry never does this: no connection sends that
    close). So once the close is done, every server is asked for the
    session once more: a server drops the connection it holds for a session
    id before it looks at the session, and the session is over, so the
    client's next connection is told that it expired. If the client has not
    reported the loss within :data:`HEARD_WITHIN` seconds, both steps are
    done again (our close itself may have been cut off by the client's
    return).

    kazoo then reports ``KazooState.LOST`` to its listeners and, by
    default, reconnects with a new session; until it has, requests on the
    client fail with ``SessionExpiredError`` or ``ConnectionLoss``.

    Args:
        hosts: the connection string of the client's ensemble (a chroot is ignored).
        client: a connected kazoo client of that ensemble.
        timeout: seconds to wait for the second connection, for the
            client to see the expiry, and (if asked) for its new session.
        wait_reconnect: also wait until the client is connected again
            with a new session, so it can be used right away.

    Raises:
        HarnessError: the client has no live session, no server could be
            reached with it, or the client did not see the expiry (or
            reconnect) in time.
    """
    client_id = client.client_id
    if client_id is None or not client.connected:
        raise HarnessError("expire_session needs a connected client with a session")
    servers = _servers(hosts)
    lost = threading.Event()
    reconnected = threading.Event()

    def watch(state: str) -> bool:
        if state == KazooState.LOST:
            lost.set()
        elif state == KazooState.CONNECTED and lost.is_set():
            reconnected.set()
            return True  # done: kazoo removes the listener
        return False

    client.add_listener(watch)
    try:
        deadline = time.monotonic() + timeout
        failures: list[str] = []
        closed = False
        while not lost.is_set():
            if _close_session(servers, client_id, deadline, failures):
                closed = True
                _evict(servers, client_id, deadline)
                lost.wait(min(HEARD_WITHIN, max(0.0, deadline - time.monotonic())))
            elif time.monotonic() < deadline:
                time.sleep(min(0.1, deadline - time.monotonic()))  # no server answered yet
            if not lost.is_set() and time.monotonic() >= deadline:
                if not closed:
                    raise HarnessError(
                        f"could not open a second connection for session 0x{client_id[0]:x} "
                        f"within {timeout} s ({'; '.join(failures[-len(servers):])})"
                    )
                raise HarnessError(
                    f"session 0x{client_id[0]:x} was closed on the server but the client "
                    f"did not report it lost within {timeout} s"
                )
        if wait_reconnect and not reconnected.wait(max(0.0, deadline - time.monotonic())):
            raise HarnessError(
                f"the client lost session 0x{client_id[0]:x} but did not connect "
                f"with a new session within {timeout} s"
            )
    finally:
        client.remove_listener(watch)


def _servers(hosts: str) -> list[tuple[str, int]]:
    """``"h1:p1,h2:p2[/chroot]"`` as ``[(h1, p1), (h2, p2)]``."""
    servers = []
    for server in hosts.split("/", 1)[0].split(","):
        host, _, port = server.strip().rpartition(":")
        servers.append((host.strip("[]"), int(port)))
    return servers


def _close_session(
    servers: list[tuple[str, int]], client_id: tuple[int, bytes], deadline: float,
    failures: list[str],
) -> bool:
    """Close the session on the first server that takes a connection with it.

    A server that says the session is over already is as good (a previous
    round closed it).

    Returns:
        whether a server answered; if none did, why is in ``failures``.
    """
    for host, port in servers:
        try:
            with _connected_as(host, port, client_id, deadline) as (sock, alive):
                if alive:
                    _send_close(sock, deadline)
            return True
        except OSError as e:  # unreachable, not serving, or it dropped us (the client came back)
            failures.append(f"{host}:{port}: {e!r}")
    return False


def _evict(servers: list[tuple[str, int]], client_id: tuple[int, bytes], deadline: float) -> None:
    """Have every server drop the connection it may still hold for the session.

    A server drops it on our connection with the session id, then answers
    that the session is over. One that answers it is alive (our close was
    cut off) gets the close, and every server is asked again. A server that
    cannot be reached is skipped: it holds no connection it serves.
    """
    while time.monotonic() < deadline:
        for host, port in servers:
            try:
                with _connected_as(host, port, client_id, deadline) as (sock, alive):
                    if alive:
                        _send_close(sock, deadline)
                        break
            except OSError:
                continue
        else:
            return


@contextlib.contextmanager
def _connected_as(
    host: str, port: int, client_id: tuple[int, bytes], deadline: float
) -> Iterator[tuple[socket.socket, bool]]:
    """A raw connection to one server as the client's session.

    Sends ZooKeeper's connect request with the session id and password and
    reads the answer. Yields ``(socket, alive)``: ``alive`` says the server
    took the session (a time-out above 0) rather than saying it is over.
    Either way the server has dropped any connection it held for that
    session first. The socket is closed on leaving.

    Raises:
        OSError: the server could not be reached or did not answer before
            ``deadline`` (``TimeoutError``), or it closed the connection.
    """
    session_id, password = client_id
    with create_connection((host, port), _remaining(deadline)) as sock:
        request = Connect(0, 0, _REOPEN_MS, session_id, password, False).serialize()
        _send(sock, bytes(request), deadline)
        answer, _ = Connect.deserialize(_receive(sock, deadline), 0)
        yield sock, answer.time_out > 0


def _send_close(sock: socket.socket, deadline: float) -> None:
    """Send closeSession on a connection that holds the session, and wait for its answer.

    Raises:
        OSError: no answer before ``deadline``, or the server dropped us.
    """
    _send(sock, int_int_struct.pack(1, _CLOSE_SESSION), deadline)
    # Any answer will do: an error says the session was over already.
    reply_header_struct.unpack_from(_receive(sock, deadline), 0)


def _remaining(deadline: float) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("out of time")
    return remaining


def _send(sock: socket.socket, payload: bytes, deadline: float) -> None:
    """One length-prefixed frame."""
    sock.settimeout(_remaining(deadline))
    sock.sendall(int_struct.pack(len(payload)) + payload)


def _receive(sock: socket.socket, deadline: float) -> bytes:
    """One length-prefixed frame.

    Raises:
        OSError: it did not come before ``deadline``, or the connection closed.
    """
    (length,) = int_struct.unpack(_read(sock, int_struct.size, deadline))
    return _read(sock, length, deadline)


def _read(sock: socket.socket, count: int, deadline: float) -> bytes:
    data = b""
    while len(data) < count:
        sock.settimeout(_remaining(deadline))
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionResetError("the server closed the connection")
        data += chunk
    return data
