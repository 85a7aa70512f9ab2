"""Real session expiry: the server closes a client's session, nothing is faked."""
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException

from kiel.exc import HarnessError

__all__ = ["expire_session"]


def expire_session(
    hosts: str, client: KazooClient, timeout: float = 15.0, wait_reconnect: bool = False
) -> None:
    """Make the server really expire ``client``'s session, and wait until it sees it.

    Strategy: open a second connection with the same session id and
    password and close it. The close is a real ``closeSession`` on the
    server: the session's ephemeral nodes are deleted and watchers fire,
    and the original connection is told its session expired. Nothing is
    faked on the client side.

    kazoo then reports ``KazooState.LOST`` to its listeners and, by
    default, reconnects with a new session; until it has, requests on the
    client fail with ``SessionExpiredError`` or ``ConnectionLoss``.

    Args:
        hosts: the connection string of the client's ensemble.
        client: a connected kazoo client of that ensemble.
        timeout: seconds to wait for the second connection, for the
            client to see the expiry, and (if asked) for its new session.
        wait_reconnect: also wait until the client is connected again
            with a new session, so it can be used right away.

    Raises:
        HarnessError: the client has no live session, the second
            connection failed, or the client did not see the expiry (or
            reconnect) in time.
    """
    client_id = client.client_id
    if client_id is None or not client.connected:
        raise HarnessError("expire_session needs a connected client with a session")
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
        _close_session(hosts, client_id, timeout)
        deadline = time.monotonic() + timeout
        if not lost.wait(timeout):
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


def _close_session(hosts: str, client_id: tuple[int, bytes], timeout: float) -> None:
    """Connect as session ``client_id`` (id and password) and close it on the server.

    Raises:
        HarnessError: the second connection failed within ``timeout`` seconds.
    """
    twin = KazooClient(hosts=hosts, client_id=client_id, timeout=max(2.0, timeout / 3))
    try:
        twin.start(timeout=timeout)
    except (twin.handler.timeout_exception, KazooException) as exc:
        # KazooException: e.g. ConnectionLoss from start()'s chroot check
        # when the ensemble loses its leader meanwhile.
        raise HarnessError(
            f"could not open a second connection for session 0x{client_id[0]:x} "
            f"within {timeout} s ({exc!r})"
        ) from exc
    finally:
        twin.stop()
        twin.close()
