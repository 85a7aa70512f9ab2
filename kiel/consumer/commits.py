"""What the application finished of each owned partition, and committing it.

A grouped consumer delivers at least once: a record is *finished* when the
application is done with it (it asks for more, or calls ``task_done()``),
and only finished offsets are committed. :class:`Held` tracks one
partition's records in the application's hands; :class:`Commits` keeps one
per owned partition and commits their finished positions (OffsetCommit v0,
through :class:`~kiel.consumer.offsets.GroupOffsets`): on demand, every
``commit_every`` finished records, every ``commit_interval`` seconds, and on
every revocation.
"""

import asyncio
import collections
from collections.abc import Iterable, Sequence
from typing import Callable, Optional

from kiel._aio import Tasks, Wakeup
from kiel.consumer.offsets import GroupOffsets
from kiel.exc import GroupError, KielError
from kiel.structs import Record, TopicPartition

__all__ = ["Commits", "Held"]


class Held:
    """What the application holds of one owned partition.

    ``pending`` lists the offsets handed out and not finished, in order;
    ``end`` is the offset after the last record handed out. The finished
    position (what a commit stores) is ``pending[0]`` or ``end``.

    Args:
        position: where the partition starts (-1 while that is unknown:
            nothing to commit).
    """

    __slots__ = ("pending", "done", "end")

    def __init__(self, position: int) -> None:
        self.pending: collections.deque[int] = collections.deque()
        self.done: set[int] = set()
        self.end = position

    @property
    def finished(self) -> int:
        """The finished position: the first offset the application did not finish."""
        return self.pending[0] if self.pending else self.end

    def hand_out(self, records: Sequence[Record]) -> None:
        """``records`` (in offset order) go to the application."""
        self.pending.extend(r.offset for r in records)
        self.end = records[-1].offset + 1

    def hand_out_one(self, offset: int) -> None:
        """The record at ``offset`` goes to the application."""
        self.pending.append(offset)
        self.end = offset + 1

    def finish_all(self) -> int:
        """Every record handed out is finished; returns how many were pending."""
        n = len(self.pending)
        self.pending.clear()
        self.done.clear()
        return n

    def finish(self, offset: int) -> int:
        """Mark ``offset`` finished; returns how many leading offsets became finished."""
        pending = self.pending
        if not pending or offset < pending[0]:
            return 0
        if offset != pending[0]:
            self.done.add(offset)
            return 0
        pending.popleft()
        n = 1
        done = self.done
        while pending and pending[0] in done:
            done.discard(pending.popleft())
            n += 1
        return n

    def finish_through(self, offset: int) -> int:
        """Mark every handed-out offset up to ``offset`` finished (in-order consumers)."""
        pending = self.pending
        n = 0
        while pending and pending[0] <= offset:
            self.done.discard(pending.popleft())
            n += 1
        return n


class Commits:
    """The owned partitions' finished positions, and their commits.

    Args:
        offsets: the group's offsets requests.
        tasks: where background commits run (cancelled when the consumer closes).
        errors: where a background commit's failure is kept for the application.
        metadata: stored with each commit (dropped if the broker finds it too large).
        every: also commit after this many records were finished (``None``: not by count).
        interval: seconds between timed commits (``None``: none).
        may_commit: asked before every commit: false while this member may
            not own its partitions any more (ZooKeeper connection suspended,
            session lost), when a commit could overwrite the next owner's.
    """

    def __init__(
        self,
        offsets: GroupOffsets,
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
        #: Per partition, how many times it was acquired: a start computed
        #: for an earlier ownership must not start a later one.
        self.generation: dict[TopicPartition, int] = {}
        #: The owned partitions, with what the application holds of each.
        self.held: dict[TopicPartition, Held] = {}
        #: The offset last committed (or found committed) per owned partition.
        self.committed: dict[TopicPartition, int] = {}
        #: Fired whenever records were finished (a revocation waits for it).
        self.finished = Wakeup()
        #: Completed commits (for tests and metrics).
        self.count = 0
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
        if tp not in self.held:
            self.generation[tp] = self.generation.get(tp, 0) + 1
        self.held.setdefault(tp, Held(-1))

    def start(self, tp: TopicPartition, position: int, committed: Optional[int]) -> None:
        """``tp`` starts at ``position``; ``committed`` is what the group had stored."""
        self.held[tp] = Held(position)
        if committed is None:
            self.committed.pop(tp, None)
        else:
            self.committed[tp] = committed

    def forget(self, tp: TopicPartition) -> None:
        """``tp`` is not owned any more."""
        self.held.pop(tp, None)
        self.committed.pop(tp, None)

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

    def finish_all(self) -> None:
        """The application finished every record handed out."""
        self._count(sum(held.finish_all() for held in self.held.values() if held.pending))

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
            held = [tp for tp in tps if tp in self.held and self.held[tp].pending]
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
                if finished >= 0 and self.committed.get(tp) != finished:
                    offsets[tp] = finished
            if offsets:
                if not self.may_commit():
                    raise GroupError(
                        "not committing: ZooKeeper connection suspended or session lost, "
                        "another member may own these partitions now",
                        group=self.offsets.group,
                    )
                await self.offsets.commit(offsets, self.metadata)
                self.committed.update(offsets)
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
        except KielError as e:
            # Raised to the application by its next consume().
            self._errors.append(e)

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
