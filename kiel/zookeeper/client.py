"""An async facade over kazoo for code that lives on the IOLoop.

Every call here is awaitable and never blocks the loop: reads and writes use
kazoo's ``*_async`` API awaited through the :class:`~kiel.zookeeper.bridge.Bridge`;
``start``/``stop`` and the recipe constructors (which read synchronously) run
in an executor. Connection-state changes and watches are delivered on the
loop, through the bridge.
"""

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Optional

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    KazooException,
    OperationTimeoutError,
    SessionExpiredError,
    WriterNotClosedException,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.serialization import Auth
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.security import ACL, make_acl, make_digest_acl

from kiel._aio import Wakeup
from kiel.exc import ConfigError, ZooKeeperError
from kiel.zookeeper.bridge import Bridge

#: What a lost connection to ZooKeeper (kazoo reconnects by itself) raises
#: for a request in flight or made meanwhile: worth trying again.
CONNECTION_LOST = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)

log = logging.getLogger(__name__)


class _RedactAuth(logging.Filter):
    """Hides the credentials of kazoo's ``Auth`` requests, which it logs at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(isinstance(a, Auth) for a in args):
            record.args = tuple(
                f"Auth(auth_type={a.auth_type}, scheme={a.scheme!r}, auth=<redacted>)"
                if isinstance(a, Auth) else a
                for a in args
            )
        return True


#: The logger kiel's kazoo clients log to: a child of kazoo's own (so logging
#: set up for ``kazoo`` still applies) that never shows ``zk_auth`` secrets.
#: kazoo's other users keep their logger untouched.
kazoo_log = logging.getLogger("kazoo.client.kiel")
kazoo_log.addFilter(_RedactAuth())

StateListener = Callable[[str], Any]


def digest_acls(auth: str) -> list[ACL]:
    """ACLs that let only the ``user:password`` identity change a znode; anyone may read it.

    Reading stays open so 0.8 tooling (offset checkers, lag monitors) can see
    the group; only the owner can create, change or delete.

    Raises:
        ConfigError: ``auth`` is not ``user:password``.
    """
    user, sep, password = auth.partition(":")
    if not sep or not user:
        raise ConfigError("ZooKeeper digest auth must be 'user:password'")
    return [make_digest_acl(user, password, all=True), make_acl("world", "anyone", read=True)]


class ZooKeeper:
    """One ZooKeeper session used from one IOLoop.

    Args:
        hosts: ``"host:port,host:port[/chroot]"``.
        session_timeout: requested session timeout, seconds (the server clamps
            it to its own min/max).
        chroot: optional path prefix for everything (alternative to ``/chroot``
            in ``hosts``).
        auth: ``"user:password"`` for digest authentication; znodes created with
            ``protected=True`` then get :func:`digest_acls`.
        connect_timeout: seconds :meth:`start` waits for the first connection.
        max_retry_delay: the longest pause, seconds, between kazoo's attempts
            to reconnect (it backs off exponentially up to it). kazoo's own
            cap is an hour: after a long outage a member would idle for
            minutes once ZooKeeper is back.

    Raises:
        ConfigError: bad hosts or auth.
    """

    def __init__(
        self,
        hosts: str,
        session_timeout: float = 10.0,
        chroot: Optional[str] = None,
        auth: Optional[str] = None,
        connect_timeout: float = 15.0,
        max_retry_delay: float = 5.0,
    ) -> None:
        if not hosts or not isinstance(hosts, str):
            raise ConfigError(f"ZooKeeper hosts must be 'host:port[,...]', got {hosts!r}")
        if chroot:
            if not chroot.startswith("/"):
                raise ConfigError(f"chroot must start with '/', got {chroot!r}")
            hosts = hosts.rstrip("/") + chroot.rstrip("/")
        self.hosts = hosts
        self.connect_timeout = connect_timeout
        self.acls: Optional[list[ACL]] = digest_acls(auth) if auth else None
        auth_data = [("digest", auth)] if auth else None
        if not isinstance(max_retry_delay, (int, float)) or not 0 < max_retry_delay < 3600:
            raise ConfigError(
                f"max_retry_delay must be seconds in (0, 3600), got {max_retry_delay!r}"
            )
        # Unbounded tries (kazoo's default), jittered, capped at max_retry_delay.
        connection_retry = {"max_tries": -1, "delay": 0.1, "backoff": 2,
                            "max_delay": float(max_retry_delay)}
        self.client = KazooClient(hosts=hosts, timeout=session_timeout, auth_data=auth_data,
                                  connection_retry=connection_retry, logger=kazoo_log)
        self.bridge = Bridge()
        self._listeners: list[StateListener] = []
        self.client.add_listener(self._on_state_thread)

    # ------------------------------------------------------------------
    # session

    def _on_state_thread(self, state: str) -> None:  # on a kazoo thread
        self.bridge.post(self._on_state, state)

    def _on_state(self, state: str) -> None:  # on the loop
        for listener in list(self._listeners):
            listener(state)

    def add_state_listener(self, listener: StateListener) -> None:
        """Call ``listener(state)`` on the loop for each ``KazooState`` change
        (``"SUSPENDED"``, ``"CONNECTED"``, ``"LOST"``)."""
        self._listeners.append(listener)

    def remove_state_listener(self, listener: StateListener) -> None:
        """Stop calling ``listener``."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    @property
    def session_id(self) -> Optional[int]:
        """The current session id (changes after an expiry), or ``None``."""
        client_id = self.client.client_id
        return client_id[0] if client_id else None

    @property
    def connected(self) -> bool:
        """Whether the session is connected right now."""
        return bool(self.client.state == KazooState.CONNECTED)

    async def start(self) -> None:
        """Connect and authenticate (off the loop).

        On failure kazoo's threads are freed before the error is raised.

        Raises:
            ZooKeeperError: not connected within ``connect_timeout``.
        """
        try:
            await self.bridge.run_blocking(self.client.start, self.connect_timeout)
        except KazooTimeoutError as e:
            await self._abandon()
            raise ZooKeeperError(
                f"cannot reach ZooKeeper at {self.hosts} within {self.connect_timeout}s"
            ) from e
        except BaseException:
            await self._abandon()
            raise

    async def _abandon(self) -> None:
        # kazoo keeps trying to connect after start() gave up: stop that
        # attempt and free its threads (a client that never connected has
        # nothing to tell the server).
        await self.bridge.run_blocking(self.client.stop)
        await self.bridge.run_blocking(self.client.close)

    async def stop(self) -> None:
        """Close the session (ephemeral znodes go at once) and free kazoo's threads.

        Also during an outage: kazoo then cannot tell the server, and the
        session (with its ephemeral znodes) ends when the server expires it.
        Requests still pending fail with kazoo's ``ConnectionClosedError``.
        Idempotent.

        Raises:
            ZooKeeperError: kazoo's connection thread did not end (kazoo
                waits for it at most ``max(10 s, session_timeout)``).
        """
        try:
            await self.bridge.run_blocking(self.client.stop)
        except WriterNotClosedException as e:
            raise translate(e, "stop") from e
        finally:
            await self.bridge.run_blocking(self.client.close)

    # ------------------------------------------------------------------
    # operations

    async def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        makepath: bool = False,
        protected: bool = False,
    ) -> str:
        """Create ``path``; ``protected`` applies the digest ACLs (when auth is set).

        Raises:
            kazoo.exceptions.NodeExistsError, NoNodeError, ConnectionLoss...
        """
        acl = self.acls if protected else None
        return str(
            await self.bridge.result(
                self.client.create_async(
                    path, value, acl=acl, ephemeral=ephemeral, makepath=makepath
                )
            )
        )

    async def ensure_path(self, path: str, protected: bool = False) -> None:
        """Create ``path`` and its parents if missing."""
        acl = self.acls if protected else None
        await self.bridge.result(self.client.ensure_path_async(path, acl=acl))

    async def get(
        self, path: str, watch: Optional[Callable[[WatchedEvent], Any]] = None
    ) -> tuple[bytes, ZnodeStat]:
        """Data and stat of ``path``; ``watch`` (called on the loop) fires once on change."""
        w = self.bridge.wrap(watch) if watch else None
        data, stat = await self.bridge.result(self.client.get_async(path, watch=w))
        return data, stat

    async def get_children(
        self, path: str, watch: Optional[Callable[[WatchedEvent], Any]] = None
    ) -> list[str]:
        """Children names of ``path``; ``watch`` (called on the loop) fires once
        when they change or ``path`` is deleted."""
        w = self.bridge.wrap(watch) if watch else None
        return list(await self.bridge.result(self.client.get_children_async(path, watch=w)))

    async def exists(
        self, path: str, watch: Optional[Callable[[WatchedEvent], Any]] = None
    ) -> Optional[ZnodeStat]:
        """Stat of ``path`` or ``None``; ``watch`` (on the loop) fires once on any change."""
        w = self.bridge.wrap(watch) if watch else None
        return await self.bridge.result(self.client.exists_async(path, watch=w))

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        """Set ``path``'s data."""
        return await self.bridge.result(self.client.set_async(path, value, version))

    async def delete(self, path: str, version: int = -1) -> None:
        """Delete ``path`` (only at ``version`` unless -1)."""
        await self.bridge.result(self.client.delete_async(path, version))

    async def wait_deleted(self, path: str, timeout: float) -> bool:
        """Wait (with a watch, no polling) until ``path`` does not exist.

        Returns:
            ``True`` once it is gone, ``False`` if it still exists after ``timeout``.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        changed = Wakeup()
        while True:
            # Strategy: take this round's future before arming the watch, so a
            # change reported between exists() and the wait below is not
            # missed. A watch left from an earlier round may wake a later one:
            # that costs one more exists(), nothing else.
            fired = changed.future()
            if await self.exists(path, watch=lambda event: changed.fire()) is None:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.wait([fired], timeout=remaining)
            if not fired.done():
                return False

    async def children_watch(self, path: str, func: Callable[[list[str]], Any]) -> ChildrenWatch:
        """Call ``func(children)`` on the loop now and on every change of ``path``'s
        children (kazoo's ChildrenWatch, re-armed across reconnects and expiry)."""
        await self.ensure_path(path)
        return await self.bridge.run_blocking(
            ChildrenWatch, self.client, path, self.bridge.wrap(func)
        )

    async def data_watch(self, path: str, func: Callable[[Optional[bytes], Any], Any]) -> DataWatch:
        """Call ``func(data, stat)`` on the loop now and on every change of ``path``."""
        return await self.bridge.run_blocking(DataWatch, self.client, path, self.bridge.wrap(func))


def translate(error: KazooException, what: str) -> ZooKeeperError:
    """A kiel :class:`ZooKeeperError` for a kazoo failure (kept as ``__cause__``)."""
    err = ZooKeeperError(f"ZooKeeper {what} failed: {type(error).__name__} {error}")
    err.__cause__ = error
    return err


__all__: Sequence[str] = ("ZooKeeper", "digest_acls", "translate", "KazooState")
