"""kiel 0.9's group layout in ZooKeeper, and the wait for its members to go.

kiel 0.9 kept a group under ``/kiel/groups/<group>``: each member an
ephemeral znode under ``members/`` (named ``<hostname>:<id>``, no data), the
partitions it shared out a JSON list in ``partitions``. kiel 1.x keeps its
group where Kafka 0.8's consumers do, ``/consumers/<group>``, so in a
rolling upgrade old and new members would not see each other and both would
consume every partition. A new member therefore looks for live old ones
before it registers, and waits (bounded) for their sessions to end
(:func:`wait_for_legacy_members`); once joined, it holds its fetching and
commits while one is live (:func:`watch_legacy_members`, :class:`LegacyGate`).

Only live members count: 0.9 left its persistent znodes (``members/`` itself,
``partitions``) behind when its members stopped, and they are no obstacle.
"""

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Optional

from kazoo.exceptions import (
    KazooException,
    NoNodeError,
)

from kiel._aio import Wakeup, within
from kiel.consumer.membership import PartitionHooks
from kiel.exc import LegacyGroupError, ZooKeeperError
from kiel.metrics import Rebalance
from kiel.retry import Backoff, attempts
from kiel.structs import TopicPartition
from kiel.zookeeper.client import CONNECTION_LOST, ZooKeeper, translate

__all__ = ["LegacyGate", "members_path", "wait_for_legacy_members", "watch_legacy_members"]

log = logging.getLogger(__name__)

#: Pauses between reads cut off by a lost connection: unbounded on their own,
#: the join's deadline bounds them.
READ_BACKOFF = Backoff(0.1, 2.0, retries=None)


def members_path(group: str) -> str:
    """Where kiel 0.9 registered the members of ``group``."""
    return f"/kiel/groups/{group}/members"


async def wait_for_legacy_members(zk: ZooKeeper, group: str, timeout: float) -> None:
    """Return once no kiel 0.9 member of ``group`` is live (at once if none is).

    Waits on a ZooKeeper watch of the members' znode, never by polling; the
    reads go through the session's bridge, so the IOLoop is never blocked.
    A read cut off by a lost connection is made again once kazoo has
    reconnected (as :meth:`~kiel.zookeeper.group.GroupMember.join` does),
    and a watch set before survives the reconnection (kazoo sets it again).

    Args:
        zk: a started session (with the chroot the group lives under, as the
            0.9 members' connection string had it).
        group: the group's name.
        timeout: seconds to wait for the old members to go.

    Raises:
        LegacyGroupError: old members were still live when last read, after
            ``timeout`` (they are named).
        ZooKeeperError: ZooKeeper refused the read, or never answered it
            within ``timeout``.
    """
    path = members_path(group)
    live: list[str] = []
    try:
        await within(_wait_gone(zk, group, live), timeout)
    except asyncio.TimeoutError as e:
        if not live:
            raise ZooKeeperError(f"reading {path}: no answer within {timeout:g} s",
                                 group=group) from e
        raise LegacyGroupError(
            f"kiel 0.9 members {', '.join(live)} are still live under {path} after "
            f"{timeout:g} s: stop them before starting kiel 1.x members of this group",
            group=group,
        ) from None


async def _wait_gone(zk: ZooKeeper, group: str, live: list[str]) -> None:
    """Wait, unbounded (the caller bounds it), until ``group`` has no live 0.9
    member; ``live`` always holds the members last read, sorted."""
    path = members_path(group)
    changed = Wakeup()
    while True:
        # Strategy: take this round's future before arming the watch, so a
        # change between the read and the wait is not missed (as in
        # ZooKeeper.wait_deleted).
        fired = changed.future()
        live[:] = sorted(await _read(zk, path, lambda event: changed.fire()))
        if not live:
            return
        log.warning("group %s: kiel 0.9 members %s are live under %s; waiting for them to "
                    "stop before joining (a 1.x member never consumes beside them)",
                    group, ", ".join(live), path)
        await fired


async def _read(zk: ZooKeeper, path: str, watch: Callable[[Any], None],
                watch_creation: bool = False) -> list[str]:
    """The children of ``path`` (none if it does not exist), with ``watch`` armed
    on them (and, with ``watch_creation``, on ``path``'s creation when it
    does not exist).

    Raises:
        ZooKeeperError: ZooKeeper refused the read.
    """
    async for attempt in attempts(READ_BACKOFF):
        try:
            try:
                return await zk.get_children(path, watch=watch)
            except NoNodeError:
                if not watch_creation or await zk.exists(path, watch=watch) is None:
                    return []
                attempt.failed(NoNodeError(path))  # created meanwhile: read it again
        except CONNECTION_LOST as e:
            log.info("reading %s was cut off (%r); reading again once ZooKeeper is back",
                     path, e)
            attempt.failed(e)
        except KazooException as e:
            raise translate(e, f"reading {path}") from e
    raise AssertionError("attempts() without a bound never ends")  # pragma: no cover


class LegacyGate(PartitionHooks):
    """The consumer's hooks, held suspended while kiel 0.9 members are live.

    A :class:`~kiel.zookeeper.group.GroupMember` is given this instead of
    the consumer's hooks: ownership changes pass through, and so does a
    suspension for a lost connection, but fetching resumes only when the
    connection is back *and* no 0.9 member is live (:meth:`hold` /
    :meth:`release`, driven by :func:`watch_legacy_members`).

    Args:
        hooks: the consumer's hooks.
    """

    def __init__(self, hooks: PartitionHooks) -> None:
        self._hooks = hooks
        self._connected = True
        #: 0.9 members are live: nothing is fetched or committed.
        self.held = False

    async def assigned(self, partitions: list[TopicPartition]) -> None:
        await self._hooks.assigned(partitions)  # started paused while suspended

    async def revoked(self, partitions: list[TopicPartition]) -> None:
        await self._hooks.revoked(partitions)

    async def lost(self, partitions: list[TopicPartition]) -> None:
        await self._hooks.lost(partitions)

    def rebalance_began(self, fresh: bool = False) -> None:
        self._hooks.rebalance_began(fresh)

    def rebalance_ended(self) -> Optional[Rebalance]:
        return self._hooks.rebalance_ended()

    def suspend(self) -> None:
        self._connected = False
        self._hooks.suspend()

    def resume(self) -> None:
        self._connected = True
        if not self.held:
            self._hooks.resume()

    def hold(self) -> None:
        """Stop fetching everything until :meth:`release`."""
        self.held = True
        self._hooks.suspend()

    def release(self) -> None:
        """Fetch again (once the connection is back, if it is not)."""
        self.held = False
        if self._connected:
            self._hooks.resume()


async def watch_legacy_members(zk: ZooKeeper, group: str, gate: LegacyGate,
                               fail: Callable[[BaseException], None]) -> None:
    """For as long as the member runs: hold ``gate`` while kiel 0.9 members
    of ``group`` are live, and tell the application once each time they appear.

    A member checks for 0.9 members before it joins
    (:func:`wait_for_legacy_members`); this covers one started later (a
    host rolled back, say), which would otherwise consume every partition
    beside it. Driven by watches (an exists watch while ``members/`` does not
    exist yet); when the session is lost kazoo fires every watch, so the
    znode is read again (and the watch set again) on the new session.

    Args:
        zk: the member's session.
        group: the group's name.
        gate: the member's hooks.
        fail: called with a :class:`~kiel.exc.LegacyGroupError` when 0.9
            members appear, or with a :class:`~kiel.exc.ZooKeeperError` when
            ZooKeeper refuses the read (the watch then ends); the consumer
            raises it from its next call.
    """
    path = members_path(group)
    changed = Wakeup()
    while True:
        fired = changed.future()
        try:
            live = sorted(await _read(zk, path, lambda event: changed.fire(),
                                      watch_creation=True))
        except ZooKeeperError as e:
            # Refused (no permission to read it, say): asking again would be
            # refused again. The application learns the check is off.
            refused = ZooKeeperError(f"{e}; kiel 0.9 members of the group are no longer "
                                     "looked for", group=group)
            log.error("%s", refused)
            fail(refused)
            return
        if live and not gate.held:
            gate.hold()
            error = LegacyGroupError(
                f"kiel 0.9 members {', '.join(live)} went live under {path}: this member "
                "stopped fetching and committing until they stop (they cannot see it, "
                "and would consume beside it)", group=group)
            log.error("%s", error)
            fail(error)
        elif not live and gate.held:
            log.warning("group %s: no kiel 0.9 member is live under %s any more; "
                        "fetching again", group, path)
            gate.release()
        await fired
