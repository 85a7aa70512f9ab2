"""What the application finished of each owned partition, and committing it.

A grouped consumer delivers at least once: a record is *finished* when the
application is done with it (it asks for more, or calls ``task_done()``),
and only finished offsets are committed. Each owned partition's
:class:`~kiel.consumer.group_state.OwnedPartition` tracks its records in the
application's hands; :class:`Commits` commits their finished positions
(through :class:`~kiel.consumer.offsets.GroupOffsets`, in the version the
coordinator speaks): on demand, every ``commit_every`` finished records,
every ``commit_interval`` seconds, and on every revocation.
"""

import asyncio
import collections
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Optional

from kiel._aio import Tasks, Wakeup
from kiel.consumer.group_state import GroupState, Held
from kiel.consumer.offsets import GroupOffsets
from kiel.exc import (
    GroupError,
    IllegalGenerationError,
    KielError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kiel.structs import TopicPartition

__all__ = ["MOVED_ON", "Commits", "Held"]

log = logging.getLogger(__name__)

#: A coordinator's refusals of a commit that mean the group formed (or is
#: forming) a generation this member does not know of yet: a rebalance, not
#: a failure. The membership learns it from its next heartbeat and joins
#: again; the refused positions are delivered again by their next owner.
MOVED_ON = (IllegalGenerationError, UnknownMemberIdError, RebalanceInProgressError)


class Commits:
    """The owned partitions' finished positions, and their commits.

    Args:
        offsets: the group's offsets requests.
        state: the owned partitions' records (shared with the consumer).
        tasks: where background commits run (cancelled when the consumer closes).
        errors: where a background commit's failure is kept for the application.
        metadata: stored with each commit (dropped if the broker finds it too large).
        every: also commit after this many records were finished (``None``: not by count).
        interval: seconds between timed commits (``None``: none).
        may_commit: asked before every commit: false while this member may
            not own its partitions any more (ZooKeeper connection suspended or
            session lost; a broker group rebalancing, fenced or its session
            expired), when a commit could overwrite the next owner's.
    """

    def __init__(
        self,
        offsets: GroupOffsets,
        state: GroupState,
        tasks: Tasks,
        errors: collections.deque[BaseException],
        *,
        metadata: str = "",
        every: Optional[int] = None,
        interval: Optional[float] = None,
        may_commit: Callable[[], bool] = lambda: True,
    ) -> None:
        self.offsets = offsets
        self.metadata = metadata
        self.every = every
        self.interval = interval
        self.may_commit = may_commit
        #: The owned partitions, with what the application holds of each.
        self.held = state
        #: Fired whenever records were finished (a revocation waits for it).
        self.finished = Wakeup()
        #: Completed commits (for tests and metrics).
        self.count = 0
        #: Commits of the consumer's own (timed, by count, on revocation)
        #: that the coordinator refused because the group had moved on
        #: (:data:`MOVED_ON`).
        self.refused = 0
        self._tasks = tasks
        self._errors = errors
        self._lock = asyncio.Lock()
        self._since_commit = 0
        self._background: Optional[asyncio.Task[None]] = None
        self._timer: Optional[asyncio.Task[None]] = None

    # ------------------------------------------------------------------
    # ownership

    def own(self, tp: TopicPartition) -> None:
        """``tp`` is owned now; where it starts is not known yet."""
        self.held.own(tp)

    def start(self, tp: TopicPartition, position: int, committed: Optional[int]) -> None:
        """``tp`` starts at ``position``; ``committed`` is what the group had stored."""
        part = self.held[tp]
        part.restart(position)
        part.committed = committed

    def forget(self, tp: TopicPartition) -> None:
        """``tp`` is not owned any more."""
        self.held.forget(tp)

    # ------------------------------------------------------------------
    # finishing

    def finish(self, tp: TopicPartition, offset: int) -> None:
        """The application finished the record at ``offset`` (in any order)."""
        held = self.held.get(tp)
        if held is not None:
            self._count(held.finish(offset))

    def finish_through(self, tp: TopicPartition, offset: int) -> None:
        """The application finished every record of ``tp`` up to ``offset``."""
        held = self.held.get(tp)
        if held is not None:
            self._count(held.finish_through(offset))

    def abandon(self, tp: TopicPartition, offsets: Sequence[int]) -> None:
        """A task that held ``offsets`` of ``tp`` ended without finishing them.

        They stay unfinished (the committed position stays before them, and
        the next owner delivers them again), and nothing waits for them any more.
        """
        held = self.held.get(tp)
        if held is not None:
            held.abandon(offsets)
            self.finished.fire()

    def finish_all(self) -> None:
        """The application finished every record handed out."""
        self._count(sum(held.finish_all() for _, held in self.held.items() if held.pending))

    def _count(self, n: int) -> None:
        if not n:
            return
        self._since_commit += n
        self.finished.fire()
        if self.every and self._since_commit >= self.every:
            self._since_commit = 0
            self._commit_soon()

    async def wait_finished(
        self, tps: Sequence[TopicPartition], timeout: float, stop: Callable[[], bool]
    ) -> list[TopicPartition]:
        """Wait until the application holds no record of ``tps``.

        Args:
            tps: the partitions.
            timeout: seconds to wait at most.
            stop: asked at every wake-up: true ends the wait (the consumer closes).

        Returns:
            the partitions still held when the wait ended (empty: none).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            held = [tp for tp in tps if tp in self.held and self.held[tp].in_hand]
            remaining = deadline - loop.time()
            if not held or remaining <= 0 or stop():
                return held
            await self.finished.wait(remaining)

    # ------------------------------------------------------------------
    # committing

    async def commit(self, tps: Iterable[TopicPartition]) -> None:
        """Commit the finished positions of ``tps`` that changed since their last commit.

        Raises:
            GroupError: this member may not own them any more (see ``may_commit``).
            BrokerError, NoBrokersError, KielConnectionError,
            RequestTimeoutError: the commit failed past the retries.
        """
        async with self._lock:
            offsets = {}
            for tp in tps:
                held = self.held.get(tp)
                finished = -1 if held is None else held.finished
                if finished >= 0 and held is not None and held.committed != finished:
                    offsets[tp] = finished
            if offsets:
                if not self.may_commit():
                    raise GroupError(
                        "not committing: this member may not own these partitions now "
                        "(a rebalance in progress, or its ZooKeeper or group session "
                        "suspended or lost): another member may own them",
                        group=self.offsets.group,
                    )
                await self.offsets.commit(offsets, self.metadata)
                for tp, offset in offsets.items():
                    part = self.held.get(tp)
                    if part is not None:
                        part.committed = offset
                self.count += 1

    def _commit_soon(self) -> None:
        """Commit every owned partition in a background task (unless one runs)."""
        if self._background is None or self._background.done():
            self._background = self._tasks.spawn(self._commit_in_background(), "commit")

    async def _commit_in_background(self) -> None:
        if not self.may_commit():
            return  # the next timed (or revocation) commit takes it, if still owned
        try:
            await self.commit(sorted(self.held))
        except MOVED_ON as e:
            self.moved_on(e, "a background commit")
        except KielError as e:
            # Raised to the application by its next consume().
            self._errors.append(e)

    def moved_on(self, error: KielError, what: str) -> None:
        """A commit of the consumer's own was refused because the group moved on.

        Counted and said, never raised to the application: a member learns of
        a new generation this way whenever its coordinator forms one without
        waiting for it (Tansu does not wait out the rebalance timeout), and
        what it could not commit is delivered again by the next owner, as
        at-least-once promises. Java's consumer likewise only logs its
        automatic commits' failures.
        """
        self.refused += 1
        log.warning("%s was refused: the group %s moved to a newer generation (%s); the "
                    "member joins again and the partitions' next owner delivers again "
                    "from the last commit", what, self.offsets.group, type(error).__name__)

    def start_timer(self) -> None:
        """Commit every ``interval`` seconds from now on (if an interval is set)."""
        if self.interval:
            self._timer = self._tasks.spawn(self._every_interval(), "commit timer")

    def stop_timer(self) -> None:
        """No more timed commits (one in progress goes on)."""
        if self._timer is not None:
            self._timer.cancel()

    async def _every_interval(self) -> None:
        assert self.interval
        while True:
            await asyncio.sleep(self.interval)
            # In its own task: stopping the timer never cuts a commit short.
            self._commit_soon()
