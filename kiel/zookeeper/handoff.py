"""The hand-off: moving a member's owner znodes towards its target, in a safe order.

A :class:`Handoff` holds what one member owns and moves it, one reconcile
pass at a time (:meth:`Handoff.move_to`): revoke and release what is no
longer its own, release what it may hold unknowingly, then acquire what is
new, each contested partition waiting on a watch for its previous owner. It
drives the consumer through :class:`PartitionHooks` and ZooKeeper through
:class:`~kiel.zookeeper.ownership.Owners`.

Its invariants (see ``docs/guides/grouped_consumer.rst`` for the argument):

1. A partition is handed to ``hooks.assigned`` only after this member's
   *current* session created its owner znode; it is handed to
   ``hooks.revoked`` (which stops fetching, waits for records in the
   application's hands, runs the listener and commits) *before* the owner
   znode is deleted. ZooKeeper allows one owner znode per partition, so at
   most one member fetches a partition at any instant.
2. An owner znode is forgotten only once its delete (or its absence) is
   confirmed: until then it is in ``maybe_held``, which every pass (and the
   member's leave) releases again. A create whose reply was lost is
   recognised as ours by its ``ephemeralOwner``.
"""

import asyncio
from collections.abc import Callable
from typing import Any, Optional

from kazoo.exceptions import KazooException

from kiel._aio import Tasks
from kiel.consumer.membership import PartitionHooks
from kiel.exc import ZooKeeperError
from kiel.structs import TopicPartition
from kiel.zookeeper.changes import Changes
from kiel.zookeeper.ownership import Owners

__all__ = ["Handoff", "PartitionHooks"]


class Handoff:
    """The partitions one member owns, wants and may hold, and how they move.

    Args:
        owners: the group's owner znodes, as this member sees them.
        hooks: the consumer's :class:`PartitionHooks`.
        acquire_timeout: seconds to wait for a previous owner to release a
            partition before a new pass is asked for.
        session: the session the member is registered under when it is the
            current one, else ``None``.
        changes: the member's changes (read to stop waiting for a partition
            that is no longer wanted; marked dirty when an acquisition gives up).
        tasks: the member's background tasks (the waits for a previous owner).
    """

    def __init__(
        self,
        owners: Owners,
        hooks: PartitionHooks,
        acquire_timeout: float,
        session: Callable[[], Optional[int]],
        changes: Changes,
        tasks: Tasks,
    ) -> None:
        self.owners = owners
        self.hooks = hooks
        self.acquire_timeout = acquire_timeout
        self._session = session
        self._changes = changes
        self._tasks = tasks
        #: The partitions the last allocation gave this member.
        self.target: set[TopicPartition] = set()
        #: Partitions whose owner znode the current session created, handed
        #: to ``hooks.assigned``.
        self.owned: set[TopicPartition] = set()
        #: Partitions whose owner znode the current session may hold without
        #: using it: a release or claim that failed half-way, partitions
        #: claimed when a later claim failed, those of a session that changed
        #: under a claim. Every pass releases them (or confirms them
        #: by claiming them when they are wanted); only a confirmed delete
        #: (or NoNode, or another session's node) forgets one.
        self.maybe_held: set[TopicPartition] = set()

    def settled(self) -> bool:
        """Whether exactly the target is owned, and nothing else may be held."""
        return self.target == self.owned and not self.maybe_held

    async def move_to(self, target: set[TopicPartition]) -> None:
        """One pass: revoke and release ``owned - target``, release what may
        be held and is not wanted, then acquire ``target - owned``.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
            ZooKeeperError: the session changed during a claim.
            Exception: whatever a hook raised.
        """
        self.target = target
        release = sorted(self.owned - self.target)
        if release:
            await self.revoke(release)
        unsure = sorted(self.maybe_held - self.target)
        if unsure:
            await self.release(unsure)
        acquire = sorted(self.target - self.owned)
        if acquire:
            await self._acquire(acquire)

    async def revoke(self, partitions: list[TopicPartition]) -> None:
        """``hooks.revoked`` (fetching stops, the listener runs, a commit), then release.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
            Exception: whatever the hook raised (nothing is released then).
        """
        await self.hooks.revoked(partitions)
        await self.release(partitions)

    async def lose_owned(self) -> None:
        """Report what is owned lost (no commit) and forget it: the member
        leaves without a session it can be sure of."""
        owned = sorted(self.owned)
        self.owned.clear()
        await self.hooks.lost(owned)

    def session_gone(self) -> list[TopicPartition]:
        """The session is gone, and every owner znode with it: nothing is owned now.

        The partitions stay in ``maybe_held``: a claim queued by kazoo during
        the outage may have been sent under the new session, and the next
        pass releases (or confirms) what the current session holds.

        Returns:
            the partitions that were owned, sorted, for ``hooks.lost``.
        """
        lost = sorted(self.owned)
        self.maybe_held.update(self.owned)
        self.owned.clear()
        return lost

    async def release(self, partitions: list[TopicPartition]) -> None:
        """Delete the owner znodes of ``partitions`` (already revoked, or never used).

        Each stays in ``maybe_held`` until its delete is confirmed, so a
        release that fails half-way is retried by the next pass.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        for tp in partitions:
            self.owned.discard(tp)
            self.maybe_held.add(tp)
        for tp in partitions:
            await self.owners.release(tp)
            self.maybe_held.discard(tp)

    async def _claim(self, tp: TopicPartition) -> bool:
        """Claim ``tp`` for the current session; True once it is confirmed ours.

        A claim whose outcome is unknown (ZooKeeper failed, or the session
        changed under it) leaves ``tp`` in ``maybe_held``.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
            ZooKeeperError: the session changed during the claim.
        """
        session = self._session()
        self.maybe_held.add(tp)
        claimed = await self.owners.claim(tp)
        if session is None or session != self._session():
            raise ZooKeeperError(f"the session changed while claiming {tp}")
        # Claimed: confirmed ours (it goes to ``owned``). Not claimed:
        # another session's node, nothing of ours to release.
        self.maybe_held.discard(tp)
        return claimed

    async def _acquire(self, partitions: list[TopicPartition]) -> None:
        claimed: list[TopicPartition] = []
        waiting: list[TopicPartition] = []
        try:
            for tp in partitions:
                (claimed if await self._claim(tp) else waiting).append(tp)
        finally:
            # The ones confirmed before a failure are ours: use them (the
            # failure is re-raised and the pass retried).
            if claimed and self._session() is None:
                self.maybe_held.update(claimed)  # the session they were claimed by is gone
            elif claimed:
                self.owned.update(claimed)
                await self.hooks.assigned(claimed)
        if waiting:
            # Incremental: each contested partition waits for its previous
            # owner on a watch; whatever is free is already flowing.
            await self._acquire_each(waiting)

    async def _acquire_each(self, waiting: list[TopicPartition]) -> None:
        """Wait for each contested partition on its own; end only when every wait has.

        Strategy: one wait that fails ends the pass, and the pass ends only
        once the others have: they stop waiting (the pass is marked stale),
        and one already claiming or handing its partition over finishes
        first. A wait left running would claim, or run ``hooks.assigned``,
        beside the next pass, which may revoke that very partition meanwhile.

        Raises:
            BaseException: the first wait's failure, once every wait ended.
        """
        waits = [asyncio.ensure_future(self._acquire_when_free(tp)) for tp in waiting]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_EXCEPTION)
            if any(w.done() and w.exception() is not None for w in waits):
                self._changes.mark_dirty()  # the others stop waiting
                await asyncio.wait(waits)
        except asyncio.CancelledError:
            for w in waits:
                w.cancel()  # the pass is cancelled (the member leaves): so are its waits
            raise
        for w in waits:
            error = w.exception()
            if error is not None:
                raise error

    def _still_wanted(self, tp: TopicPartition) -> bool:
        return tp in self.target and not self._changes.stale()

    async def _acquire_when_free(self, tp: TopicPartition) -> None:
        """Wait on an exists-watch for the previous owner to let go, then claim.

        Gives up (and asks for a new pass) when the allocation changes or
        ``acquire_timeout`` passes: the allocation may have moved on.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout
        while self._still_wanted(tp):
            remaining = deadline - loop.time()
            if remaining <= 0:
                self._changes.mark_dirty()
                return
            if (
                await self._wait_freed(tp, remaining)
                and self._still_wanted(tp)
                and await self._claim(tp)
            ):
                self.owned.add(tp)
                await self.hooks.assigned([tp])
                return

    async def _wait_freed(self, tp: TopicPartition, timeout: float) -> bool:
        """True once ``tp`` has no owner; False after ``timeout`` or once it is no longer wanted.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        # The caller receives a ZooKeeper failure (quiet: not logged twice).
        freed = self._tasks.spawn(
            self.owners.wait_free(tp, timeout), f"wait for {tp}", quiet=(KazooException,)
        )
        try:
            while not freed.done():
                if not self._still_wanted(tp):
                    return False
                changed: asyncio.Future[Any] = self._changes.future()
                await asyncio.wait([freed, changed], return_when=asyncio.FIRST_COMPLETED)
            return freed.result()
        finally:
            freed.cancel()
