"""What a broker-group member owns, and how it gives partitions up and takes them.

:class:`Owned` keeps the partitions owned, those being moved (revoked or
assigned right now: a leave that cancels the move still hands them back),
the generation they were assigned in, and since when a revocation runs.
Giving up is *revoking* (the listener, the commit) while this member may
commit, else *losing* (no commit: another member may own them already).
"""

import asyncio
import logging
from collections.abc import Callable
from typing import Optional

from kiel._aio import Tasks
from kiel.consumer.membership import PartitionHooks
from kiel.metrics import describe_partitions
from kiel.structs import TopicPartition

__all__ = ["Owned"]

#: The member's one logger, whichever part tells its story: the name users
#: filter on stayed when the membership was split in parts.
log = logging.getLogger("kiel.coordinator.membership")


class Owned:
    """One member's partitions.

    Args:
        hooks: the consumer's partition hooks.
        may_commit: whether this member may commit now (revoke, else lose).
        tasks: the member's tasks (a loss runs on one of its own).
        group: the group, for the logs.
    """

    def __init__(self, hooks: PartitionHooks, may_commit: Callable[[], bool], tasks: Tasks,
                 group: str) -> None:
        self.hooks = hooks
        self.may_commit = may_commit
        self.tasks = tasks
        self.group = group
        #: The partitions this member owns now.
        self.partitions: list[TopicPartition] = []
        #: The generation :attr:`partitions` were assigned in (a cooperative
        #: subscription's claim), -1 when nothing was.
        self.generation = -1
        #: Partitions being revoked or assigned right now.
        self.moving: list[TopicPartition] = []
        #: When the revocation under way began (``None``: none is).
        self.revoking_since: Optional[float] = None

    def __bool__(self) -> bool:
        return bool(self.partitions)

    def take_back_moving(self) -> None:
        """What a stopped rebalance was moving is this member's to hand back."""
        self.partitions = sorted(set(self.partitions) | set(self.moving))

    async def give_up(self, some: Optional[list[TopicPartition]] = None) -> None:
        """Revoke what is owned (listener, commit) while this member may commit, else lose it.

        The partitions leave :attr:`partitions` first, and are kept in
        :attr:`moving` meanwhile, so a leave that cancels this still hands them back.

        Args:
            some: just these of the owned partitions (default: all).
        """
        if some is None:
            tps, self.partitions = self.partitions, []
        else:
            gone = set(some)
            tps = sorted(gone & set(self.partitions))
            self.partitions = [tp for tp in self.partitions if tp not in gone]
        if not tps:
            return
        self.moving = tps
        self.revoking_since = asyncio.get_running_loop().time()
        try:
            if self.may_commit():
                await self.hooks.revoked(tps)
            else:
                await self.hooks.lost(tps)
        finally:
            self.moving = []
            self.revoking_since = None

    async def give_up_stuck(self, member_id: Optional[str]) -> None:
        """Give up what is owned without waiting for the application, which is stuck.

        What the application still holds is what made it late: waiting for
        it (``revoke_timeout``) would keep the partitions from the others
        for the very reason this member leaves. Those are *lost* (no
        commit; the next owner delivers them again); the rest are revoked
        as usual (nothing to wait for: listener, commit).
        """
        held = self.hooks.in_hand(self.partitions)
        if held:
            log.warning("group %s: member %s leaves with records of %s still in the "
                        "application's hands: lost, not revoked (the next owner delivers "
                        "them again)", self.group, member_id, describe_partitions(held))
            gone = set(held)
            self.partitions = [tp for tp in self.partitions if tp not in gone]
            self.moving = held
            try:
                await self.hooks.lost(held)
            finally:
                self.moving = []
        await self.give_up()

    async def take(self, assigned: list[TopicPartition], even_none: bool = False) -> None:
        """Take ``assigned`` besides what is owned (``hooks.assigned``).

        Args:
            assigned: the partitions to take.
            even_none: tell the hooks of an empty assignment too (eager: the
                listener hears of every generation's assignment).
        """
        if not assigned and not even_none:
            return
        self.moving = assigned
        try:
            await self.hooks.assigned(assigned)
            self.partitions = sorted(set(self.partitions) | set(assigned))
        finally:
            self.moving = []

    def lose(self) -> None:
        """The coordinator may have given them to others: lose them (no commit)."""
        tps, self.partitions = self.partitions, []
        self.generation = -1
        if tps:
            self.tasks.spawn(self.hooks.lost(tps), "lose partitions")
