"""A group member's ownership of each partition it owns.

A grouped consumer asks the same questions of a partition from several
places: do I own it, is it being handed over, which ownership is this (a
start computed for an earlier one must not start a later one), what does
the application still hold of it, what was last committed.
:class:`OwnedPartition` answers them for one partition. It hangs off the
partition's one record, :class:`~kiel.consumer.subscription.PartitionState`
(``record.ownership``), which also answers whether it may be fetched, its
position, its pause and its loans; :class:`GroupState` indexes the owned
ones, so a partition that is forgotten takes all of its state with it.
"""

import collections
import itertools
from collections.abc import Iterator, Sequence
from typing import Optional

from kiel.consumer.subscription import PartitionState, Subscription
from kiel.structs import Record, TopicPartition

__all__ = ["GroupState", "Held", "OwnedPartition"]

#: Ownership numbers: each acquisition of a partition gets a new one.
_OWNERSHIPS = itertools.count(1)


class OwnedPartition:
    """What this member knows of one partition it owns.

    ``pending`` lists the offsets handed out and not finished, in order;
    ``end`` is the offset after the last record handed out. The finished
    position (what a commit stores) is ``pending[0]`` or ``end``.

    Args:
        position: where the partition starts (-1 while that is unknown:
            nothing to commit).
    """

    __slots__ = ("pending", "done", "abandoned", "end", "generation", "revoking",
                 "committed", "record")

    def __init__(self, position: int = -1) -> None:
        self.pending: collections.deque[int] = collections.deque()
        self.done: set[int] = set()
        #: Offsets handed to a task that ended without finishing them (failed
        #: or cancelled): never finished (the next owner delivers them again),
        #: and nothing waits for them.
        self.abandoned: set[int] = set()
        self.end = position
        #: This ownership's number (a new one at every acquisition).
        self.generation = next(_OWNERSHIPS)
        #: Being handed over (fetching stopped, not given back yet): nothing
        #: may fetch it again (seek(), a late start).
        self.revoking = False
        #: The offset last committed (or found committed), if known.
        self.committed: Optional[int] = None
        #: The partition's record this ownership hangs off (its pause, its
        #: fetch state; ``None`` for an ownership kept alone).
        self.record: Optional[PartitionState] = None

    def restart(self, position: int) -> None:
        """The partition starts (again) at ``position``: nothing is in hand."""
        self.pending.clear()
        self.done.clear()
        self.abandoned.clear()
        self.end = position

    @property
    def finished(self) -> int:
        """The finished position: the first offset the application did not finish."""
        return self.pending[0] if self.pending else self.end

    @property
    def in_hand(self) -> bool:
        """Whether the application still holds records of it that it may finish."""
        abandoned = self.abandoned
        return any(o not in abandoned for o in self.pending) if abandoned else bool(self.pending)

    def abandon(self, offsets: Sequence[int]) -> None:
        """The task holding ``offsets`` ended without finishing them."""
        pending = set(self.pending)
        self.abandoned.update(o for o in offsets if o in pending)

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
        self.abandoned.clear()
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


#: The name the hand-out bookkeeping had before it held the rest of the state.
Held = OwnedPartition


class GroupState:
    """The partitions this member owns, one :class:`OwnedPartition` each.

    Args:
        subscription: the consumer's subscription, whose records the
            ownerships hang off (default: one of its own).
    """

    def __init__(self, subscription: Optional[Subscription] = None) -> None:
        self._subscription = Subscription(0) if subscription is None else subscription
        self._parts: dict[TopicPartition, OwnedPartition] = {}

    def own(self, tp: TopicPartition) -> OwnedPartition:
        """``tp`` is owned (a new ownership unless it is owned already)."""
        part = self._parts.get(tp)
        if part is None:
            part = self._parts[tp] = OwnedPartition()
            record = self._subscription.adopt(tp)
            record.ownership = part
            part.record = record
        return part

    def forget(self, tp: TopicPartition) -> None:
        """``tp`` is not owned any more: all of its state goes (its record
        too, once it is not assigned)."""
        if self._parts.pop(tp, None) is not None:
            self._subscription.release(tp)

    def record(self, tp: TopicPartition) -> Optional[PartitionState]:
        """The record of an owned ``tp`` (``None``: not owned)."""
        part = self._parts.get(tp)
        return None if part is None else part.record

    def get(self, tp: TopicPartition) -> Optional[OwnedPartition]:
        """``tp``'s record, or ``None`` when it is not owned."""
        return self._parts.get(tp)

    def __getitem__(self, tp: TopicPartition) -> OwnedPartition:
        return self._parts[tp]

    def __contains__(self, tp: object) -> bool:
        return tp in self._parts

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def items(self) -> Iterator[tuple[TopicPartition, OwnedPartition]]:
        return iter(list(self._parts.items()))

    def generation(self, tp: TopicPartition) -> Optional[int]:
        """The current ownership's number of ``tp`` (``None``: not owned)."""
        part = self._parts.get(tp)
        return None if part is None else part.generation

    def is_revoking(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is being handed over."""
        part = self._parts.get(tp)
        return part is not None and part.revoking

    def is_paused(self, tp: TopicPartition) -> bool:
        """Whether the application paused ``tp`` (and still owns it)."""
        record = self.record(tp)
        return record is not None and record.paused

    def revoking(self) -> set[TopicPartition]:
        """The partitions being handed over."""
        return {tp for tp, part in self._parts.items() if part.revoking}

    def paused(self) -> list[TopicPartition]:
        """The owned partitions the application paused, sorted."""
        return sorted(tp for tp, part in self._parts.items()
                      if part.record is not None and part.record.paused)

    def to_fetch(self) -> list[TopicPartition]:
        """The owned partitions that ought to be fetched (not paused by the
        application: :attr:`PartitionState.should_fetch`), sorted."""
        parts = self._parts
        # An owned record: should_fetch is "not paused" (read plainly: every
        # consume() round asks).
        return [tp for tp in sorted(parts)
                if (record := parts[tp].record) is None or not record.paused]
