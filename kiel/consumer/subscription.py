"""What a consumer knows about each partition it was given: the subscription state.

Pure: no I/O, no clock of its own (callers pass ``now``), no event loop. The
fetcher reads and updates it; the consumers move partitions between states.

One record per partition, :class:`PartitionState`, answers every question
asked of it: is it owned, may it be fetched (:attr:`PartitionState.may_fetch`,
computed from the facts below, never pushed), its position, what the
application holds of it and what was committed (a group member's
:class:`~kiel.consumer.group_state.OwnedPartition` hangs off it as
``ownership``), and what a ``stream()`` loop has on loan (``loan``).

The facts are kept once each: assigned (fetched by this consumer) or not,
the position (-1: awaiting one), ``paused`` (by the application: the one
pause flag), the subscription's ``suspended`` (a group member whose
ownership is uncertain fetches nothing) and what is held back (in flight,
fetched and not handed out, an error kept, a retry pending). Its
:class:`Status` is read from them::

    assign(tp)            assign(tp, offset) / seek        pause / suspend
    ---------> AWAITING_RESET ---------------------> FETCHING <------> PAUSED
                                 seek                       resume / unsuspend
    unassign (from any state) -> UNASSIGNED: a fetch answer that comes back
    for it afterwards is ignored. The record is dropped, unless a group
    member still owns the partition (then it is kept, unassigned, until the
    ownership ends: a pause and what is in hand stay with it).

Besides its status a partition carries its position (the offset of the next
record to hand out), the high watermark of its latest fetch, its fetch size
(grown for large messages), a failure count with the time of the next retry,
and what was fetched but not handed out yet: the raw answer (at most one per
partition) with a cursor into it, the compressed wrapper open in it
(decompressed, with a cursor of its own), and the records decoded so far.
Records are decoded from the raw answer only when they are about to be
handed out, a bounded number at a time (see :mod:`kiel.consumer.decoder`).
"""

import enum
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Optional

from kiel.consumer.positions import check_offset
from kiel.exc import KielError, UnknownPartitionError
from kiel.retry import Backoff
from kiel.structs import Record, TopicPartition

if TYPE_CHECKING:
    from kiel.consumer.group_state import OwnedPartition

__all__ = ["Loan", "PartitionState", "Shared", "Status", "Subscription"]


def _tp(st: "PartitionState") -> TopicPartition:
    return st.tp

#: Records as the fetcher hands them out, per partition.
Batches = dict[TopicPartition, list[Record]]


class Status(enum.Enum):
    """Where a partition stands."""

    #: Assigned without a position yet (a grouped consumer looks up its
    #: committed offset); not fetched until a position is set.
    AWAITING_RESET = "awaiting reset"
    #: Fetched and handed out.
    FETCHING = "fetching"
    #: Not fetched, not handed out; records already fetched are kept.
    PAUSED = "paused"
    #: No longer assigned: whatever is still in flight for it is dropped.
    UNASSIGNED = "unassigned"


class Loan:
    """A partition's records lent to a ``stream()`` loop and not all yielded yet.

    ``next`` is the offset of the first of them not yielded yet.
    """

    __slots__ = ("next",)

    def __init__(self, first: int) -> None:
        self.next = first


class Shared:
    """What a subscription's records share: the marks, the loans and the suspension."""

    __slots__ = ("marked", "lent", "suspended")

    def __init__(self) -> None:
        #: The records that may hold something (see PartitionState.mark).
        self.marked: set[PartitionState] = set()
        #: The records with a loan (see PartitionState.loan).
        self.lent: set[PartitionState] = set()
        #: A group member's ownership is uncertain: nothing is fetched.
        self.suspended = False


class PartitionState:
    """One partition's record.

    Args:
        tp: the partition.
        position: the offset to start from, or -1 when it is not known yet
            (:attr:`Status.AWAITING_RESET`).
        fetch_size: the bytes asked for per fetch (``max_bytes``).
        shared: what the subscription's records share (a record alone
            gets its own).
        assigned: fetched by this consumer (a group member's record is
            made before its partition is assigned, see
            :meth:`Subscription.adopt`).
    """

    __slots__ = (
        "tp",
        "assigned",
        "paused",
        "loan",
        "ownership",
        "shared",
        "position",
        "highwater",
        "fetch_size",
        "_buffer",
        "_raw",
        "raw_pos",
        "raw_batches",
        "inner",
        "inner_pos",
        "inner_index",
        "next_offset",
        "epoch",
        "_error",
        "failures",
        "retry_at",
        "in_flight",
        "answered",
    )

    def __init__(
        self, tp: TopicPartition, position: int, fetch_size: int,
        shared: Optional[Shared] = None, assigned: bool = True,
    ) -> None:
        self.tp = tp
        self.shared = Shared() if shared is None else shared
        #: Fetched by this consumer (unassigned: answers for it are dropped).
        self.assigned = assigned
        #: The application paused it (kept while it is assigned or owned).
        self.paused = False
        #: Records lent to a ``stream()`` loop and not yielded yet, if any.
        self.loan: Optional[Loan] = None
        #: A group member's ownership of it: what is in hand, what was
        #: committed, whether it is being handed over (``None``: not owned
        #: by a group member).
        self.ownership: Optional[OwnedPartition] = None
        #: Bumped on every seek: an answer for an older epoch is dropped.
        self.epoch = 0
        #: The high watermark from the latest fetch response (None until one).
        self.highwater: Optional[int] = None
        self.fetch_size = fetch_size
        self._fresh(position)

    def _fresh(self, position: int) -> None:
        """Start the fetch state over at ``position`` (-1: awaiting one)."""
        #: The offset of the next record to hand out (-1: not known yet).
        self.position = position
        #: Decoded records not handed out yet, and the offset that follows them.
        self._buffer: list[Record] = []
        self.next_offset = position
        #: The fetched message set still to decode (``None``: none), and
        #: where in it decoding goes on.
        self._raw: Optional[bytes] = None
        self.raw_pos = 0
        #: ``raw`` holds record batches (a Fetch v4 answer), not message sets.
        self.raw_batches = False
        #: The compressed wrapper or record batch of ``raw`` being handed out
        #: (decompressed, from :mod:`kiel.protocol`; ``None``: none), and
        #: where in its inner bytes decoding goes on. ``raw`` is kept while
        #: it is open.
        self.inner: Optional[Any] = None
        self.inner_pos = 0
        #: Records of an open record batch read so far (its count says how many it holds).
        self.inner_index = 0
        #: An error to raise to the application (then cleared).
        self._error: Optional[KielError] = None
        #: Consecutive retriable failures, and when the next fetch may go.
        self.failures = 0
        self.retry_at = 0.0
        #: A fetch for this partition is on its way.
        self.in_flight = False
        #: A broker answered for the current position (reset by seeks).
        self.answered = False

    def mark(self) -> None:
        """Note that this partition now holds something besides its position:
        a raw answer, records, an error or a retry. The subscription's
        per-round reads walk the marked partitions only, not every one assigned."""
        self.shared.marked.add(self)

    # ------------------------------------------------------------------
    # the questions asked of a partition, answered from its facts

    @property
    def status(self) -> Status:
        """Where the partition stands, read from its facts."""
        if not self.assigned:
            return Status.UNASSIGNED
        if self.position < 0:
            return Status.AWAITING_RESET
        # Paused by the application or suspended: may_fetch says which is fetched.
        return Status.FETCHING if self.may_fetch else Status.PAUSED

    @property
    def owned(self) -> bool:
        """Whether this consumer has the partition: a group member owns it
        (being handed over included), a single consumer was assigned it."""
        return self.ownership is not None or self.assigned

    @property
    def should_fetch(self) -> bool:
        """Whether the partition ought to be fetched: owned, not paused by
        the application. Whatever else stops it (a suspension, a position
        not known yet) counts as a stall (see :mod:`kiel.consumer.health`)."""
        return not self.paused and self.owned

    @property
    def may_fetch(self) -> bool:
        """Whether the partition may be fetched and handed out: assigned (a
        partition handed over is unassigned at once), its position known,
        not paused by the application, the ownership not suspended."""
        return (
            self.assigned and self.position >= 0 and not self.paused
            and not self.shared.suspended
        )

    def held_back(self, now: float) -> bool:
        """Whether a fetch must wait for what the partition holds: a fetch in
        flight, an answer or records not handed out, an error kept, a retry
        not due yet."""
        return (
            self.in_flight or self.error is not None or bool(self.buffer)
            or self.raw is not None or self.retry_at > now
        )

    def fetch_now(self, now: float) -> bool:
        """Whether a fetch for the partition may go now."""
        return self.may_fetch and not self.held_back(now)

    def draining(self) -> bool:
        """Whether the partition waits for an answer it holds to be handed
        out (its leader's partitions are fetched together, once drained)."""
        return (
            self.may_fetch and not self.in_flight and self.error is None
            and (bool(self.buffer) or self.raw is not None)
        )

    def retry_due(self, now: float) -> Optional[float]:
        """When a retry of the partition may go, if one is pending and nothing else holds it."""
        if (self.retry_at > now and self.may_fetch and not self.in_flight
                and self.error is None):
            return self.retry_at
        return None

    @property
    def in_hand(self) -> bool:
        """Whether the application holds records of it it may still finish
        (a group member's; a single consumer keeps no such account)."""
        return self.ownership is not None and self.ownership.in_hand

    @property
    def committed(self) -> Optional[int]:
        """The offset last committed (or found committed) by a group member, if known."""
        return None if self.ownership is None else self.ownership.committed

    def lend(self, first: int) -> Loan:
        """Lend records from ``first`` on to a ``stream()`` loop (replaces any loan)."""
        loan = self.loan = Loan(first)
        self.shared.lent.add(self)
        return loan

    def take_loan(self) -> Optional[Loan]:
        """End the loan, if any, and return it."""
        loan, self.loan = self.loan, None
        if loan is not None:
            self.shared.lent.discard(self)
        return loan

    @property
    def handed_position(self) -> int:
        """The offset of the next record handed to the application: the
        position, or the first record a ``stream()`` loop has not yielded."""
        loan = self.loan
        return self.position if loan is None else min(loan.next, self.position)

    # Whatever gives the partition something to hold marks it, whoever sets it.

    @property
    def buffer(self) -> list[Record]:
        """Decoded records not handed out yet."""
        return self._buffer

    @buffer.setter
    def buffer(self, records: list[Record]) -> None:
        self._buffer = records
        if records:
            self.mark()

    @property
    def raw(self) -> Optional[bytes]:
        """The fetched message set still to decode (``None``: none)."""
        return self._raw

    @raw.setter
    def raw(self, data: Optional[bytes]) -> None:
        self._raw = data
        if data is not None:
            self.mark()

    @property
    def error(self) -> Optional[KielError]:
        """An error to raise to the application (then cleared)."""
        return self._error

    @error.setter
    def error(self, error: Optional[KielError]) -> None:
        self._error = error
        if error is not None:
            self.mark()

    def holds(self) -> bool:
        """Whether this partition holds a raw answer, records, an error or a retry."""
        return (
            self.raw is not None or bool(self.buffer) or self.error is not None
            or self.failures > 0
        ) and self.assigned

    def current(self, offset: int, epoch: int) -> bool:
        """Whether an answer for ``offset`` asked at ``epoch`` may still land here."""
        return (
            self.assigned
            and self.epoch == epoch
            and self.position == offset
            and not self.buffer
        )

    def seek(self, offset: int) -> None:
        """Make ``offset`` the position: drop buffered records, errors and retries.

        A partition awaiting its position starts fetching; a paused one stays paused.
        """
        self.epoch += 1
        self.answered = False
        self.position = self.next_offset = offset
        self.buffer = []
        self.drop_raw()
        self.error = None
        self.failures = 0
        self.retry_at = 0.0

    def drop_raw(self) -> None:
        """Forget the raw answer and the wrapper open in it."""
        self.raw = None
        self.inner = None

    def raw_bytes(self) -> int:
        """Bytes of the raw answer and of the decompressed wrapper open in it."""
        held = 0
        if self.raw is not None:
            held = len(self.raw)
            if self.inner is not None:
                held += len(self.inner.data)
        return held

    def failed(self, error: KielError, backoff: Backoff, now: float) -> bool:
        """Count a failure: schedule a retry, or keep ``error`` for the application.

        A retriable error (a broker away, a connection lost, a leader
        moving) is retried for as long as it lasts, ``backoff.delay`` apart
        (growing up to the backoff's cap; its ``retries`` do not apply: a
        consumer rides out an outage, see :mod:`kiel.consumer.health`). One
        that is not retriable becomes the partition's error at once, raised
        by the next fetch.

        Returns:
            whether a retry was scheduled.
        """
        tp = self.tp
        error.with_context(topic=tp.topic, partition=tp.partition, offset=self.position)
        self.mark()
        if not error.retriable:
            self.error = error
            return False
        self.failures += 1
        self.retry_at = now + backoff.delay(self.failures)
        return True


class Subscription:
    """The partitions a consumer fetches, by :class:`~kiel.structs.TopicPartition`.

    Args:
        fetch_size: the fetch size a partition starts with (``max_bytes``).
        on_change: called after a change a waiting fetch must see (an
            assignment, a seek, a resume, an unassignment).
    """

    def __init__(self, fetch_size: int, on_change: Callable[[], None] = lambda: None) -> None:
        self.fetch_size = fetch_size
        self._on_change = on_change
        #: The assigned partitions' records.
        self._parts: dict[TopicPartition, PartitionState] = {}
        #: Every record: the assigned ones, and those a group member owns
        #: while they are not assigned (awaiting the listener, left
        #: unstarted, being handed over).
        self._records: dict[TopicPartition, PartitionState] = {}
        self._shared = Shared()
        #: Strategy: the partitions that may hold a raw answer, records, an
        #: error or a retry (PartitionState.mark; pruned as they empty), so a
        #: round's reads follow what was answered, not every partition
        #: assigned (100,000 of them, say). Likewise the records with a loan.
        self._marked = self._shared.marked
        #: The assigned partitions by topic and partition id (for walks in order).
        self._by_topic: dict[str, dict[int, PartitionState]] = {}
        #: Bumped whenever a partition is assigned or unassigned.
        self.version = 0
        self._topics: tuple[int, list[str]] = (-1, [])
        #: assignment()'s sorted partitions, at the version they were sorted.
        self._sorted: tuple[int, list[TopicPartition], list[PartitionState]] = (-1, [], [])
        #: all_answered()'s latest walk: its ``wanted``, the versions it
        #: saw, the states walked and how far they were all answered.
        self._answered_walk: tuple[Any, tuple[int, int], list[PartitionState], int] = (
            None, (-1, -1), [], 0)
        #: Bumped by every seek (a partition awaiting its position gets one).
        self._seeks = 0
        #: The latest wanted(): its argument, the versions it saw, its answer.
        self._wanted: tuple[
            Any, tuple[int, int], set[TopicPartition], list[PartitionState]
        ] = (None, (-1, -1), set(), [])

    # ------------------------------------------------------------------
    # moving partitions between states

    def assign(self, tp: TopicPartition, position: Optional[int] = None) -> None:
        """Assign ``tp``: from ``position``, or awaiting one when it is ``None``.

        Assigning a partition again with a position seeks it; without one
        leaves it as it is.

        Raises:
            ConfigError: a position that is not an ``int >= 0``.
        """
        if position is not None:
            check_offset(position, tp.topic, tp.partition)
        st = self._parts.get(tp)
        if st is None:
            start = -1 if position is None else position
            st = self._records.get(tp)
            if st is None:
                st = self._records[tp] = PartitionState(tp, start, self.fetch_size, self._shared)
            else:  # owned by a group member, not assigned: its fetch state starts over
                st.epoch += 1
                st._fresh(start)
                st.assigned = True
            self._parts[tp] = st
            self._by_topic.setdefault(tp.topic, {})[tp.partition] = st
            self.version += 1
        elif position is not None:
            st.seek(position)
            self._seeks += 1
        else:
            return
        self._on_change()

    def unassign(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` and forget its undelivered records (no-op if
        not assigned). Its record goes too, unless a group member owns it."""
        st = self._parts.pop(tp, None)
        if st is not None:
            by_partition = self._by_topic[tp.topic]
            del by_partition[tp.partition]
            if not by_partition:
                del self._by_topic[tp.topic]
            self.version += 1
            self._drop(st)
            if st.ownership is None:
                del self._records[tp]
            self._on_change()

    def adopt(self, tp: TopicPartition) -> PartitionState:
        """``tp``'s record, made (unassigned, awaiting a position) if there is
        none: a group member's ownership hangs off it from the start."""
        st = self._records.get(tp)
        if st is None:
            st = self._records[tp] = PartitionState(
                tp, -1, self.fetch_size, self._shared, assigned=False)
        return st

    def release(self, tp: TopicPartition) -> None:
        """``tp`` is not owned any more: its record goes, unless it is assigned."""
        st = self._records.get(tp)
        if st is not None:
            st.ownership = None
            if not st.assigned:
                del self._records[tp]

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Make ``offset`` the next offset handed out for ``tp``; drops buffered records.

        Raises:
            ConfigError: a negative offset.
            UnknownPartitionError: ``tp`` is not assigned.
        """
        check_offset(offset, tp.topic, tp.partition)
        self.state(tp).seek(offset)
        self._seeks += 1
        self._on_change()

    def pause(self, tp: TopicPartition) -> None:
        """Stop fetching and handing out ``tp`` (records already fetched are
        kept). The pause lasts while the record does: a seek keeps it.

        Raises:
            UnknownPartitionError: ``tp`` is neither assigned nor owned.
        """
        self.record(tp).paused = True

    def resume(self, tp: TopicPartition) -> None:
        """Undo :meth:`pause` (and wake a waiting fetch).

        Raises:
            UnknownPartitionError: ``tp`` is neither assigned nor owned.
        """
        self.record(tp).paused = False
        self._seeks += 1  # fetched again: all_answered() looks at it again
        self._on_change()

    @property
    def suspended(self) -> bool:
        """Whether fetching is suspended (a group member's ownership is uncertain)."""
        return self._shared.suspended

    def suspend(self) -> None:
        """Fetch nothing until :meth:`unsuspend`; drop what was fetched and
        not handed out (positions are kept; pauses too)."""
        self._shared.suspended = True
        for st in self._parts.values():
            if st.position >= 0:
                st.seek(st.position)
        self._seeks += 1
        self._on_change()

    def unsuspend(self) -> None:
        """Undo :meth:`suspend` (partitions the application paused stay paused)."""
        self._shared.suspended = False
        self._seeks += 1  # fetched again: all_answered() looks at it again
        self._on_change()

    def drop_fetched(self) -> None:
        """Drop every partition's fetched records and what is in flight for it
        (the consumer closes); assignments and positions are kept."""
        # Strategy: only a marked partition holds records or a raw answer
        # (see PartitionState.mark), so only those are emptied; the epoch of
        # every one is bumped (an answer still in flight is dropped), which
        # is one attribute each: with 100,000 partitions, going through the
        # properties for every one held the loop for tens of milliseconds.
        for st in self._parts.values():
            st.epoch += 1
        for st in list(self._marked):
            if st.assigned:
                st.buffer = []
                st.drop_raw()
        self._on_change()

    @staticmethod
    def _drop(st: PartitionState) -> None:
        st.assigned = False
        st.take_loan()
        st.epoch += 1
        st.buffer = []
        st.drop_raw()

    # ------------------------------------------------------------------
    # reading

    def get(self, tp: TopicPartition) -> Optional[PartitionState]:
        """The state of ``tp``, or ``None`` if it is not assigned."""
        return self._parts.get(tp)

    def state(self, tp: TopicPartition) -> PartitionState:
        """The state of an assigned partition.

        Raises:
            UnknownPartitionError: ``tp`` is not assigned.
        """
        st = self._parts.get(tp)
        if st is None:
            raise UnknownPartitionError(
                "partition is not assigned to this consumer", topic=tp.topic, partition=tp.partition
            )
        return st

    def record(self, tp: TopicPartition) -> PartitionState:
        """The record of ``tp``, assigned or only owned by a group member.

        Raises:
            UnknownPartitionError: ``tp`` is neither assigned nor owned.
        """
        st = self._records.get(tp)
        if st is None:
            raise UnknownPartitionError(
                "partition is not assigned to this consumer", topic=tp.topic, partition=tp.partition
            )
        return st

    def status(self, tp: TopicPartition) -> Status:
        """The status of ``tp`` (:attr:`Status.UNASSIGNED` when not assigned)."""
        st = self._parts.get(tp)
        return Status.UNASSIGNED if st is None else st.status

    def is_assigned(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is assigned (in any state)."""
        return tp in self._parts

    def assignment(self) -> list[TopicPartition]:
        """The assigned partitions, sorted (a new list: the caller's to keep).

        Strategy: every consume() asks; sorting 100,000 partitions each time
        held the loop for tens of milliseconds, so the order is kept until
        a partition is assigned or unassigned.
        """
        return list(self._in_order()[0])

    def _in_order(self) -> tuple[list[TopicPartition], list[PartitionState]]:
        """The assigned partitions sorted, and their records in the same order (kept)."""
        if self._sorted[0] != self.version:
            tps = sorted(self._parts)
            parts = self._parts
            self._sorted = (self.version, tps, [parts[tp] for tp in tps])
        return self._sorted[1], self._sorted[2]

    def with_status(self, status: Status) -> list[TopicPartition]:
        """The partitions in ``status``, sorted."""
        return sorted(tp for tp, st in self._parts.items() if st.status is status)

    def paused(self) -> list[TopicPartition]:
        """The assigned partitions the application paused, sorted."""
        return sorted(tp for tp, st in self._parts.items() if st.paused)

    def to_fetch(self) -> list[TopicPartition]:
        """The assigned partitions that ought to be fetched (not paused by the
        application: :attr:`PartitionState.should_fetch`), sorted."""
        # An assigned record is owned: should_fetch is "not paused" (read
        # plainly: every consume() round asks, of 100,000 partitions, say).
        return [st.tp for st in self._in_order()[1] if not st.paused]

    def lent(self) -> list[PartitionState]:
        """The records with a loan (see :meth:`PartitionState.lend`)."""
        return list(self._shared.lent)

    def position(self, tp: TopicPartition) -> int:
        """The offset of the next record handed out for ``tp`` (-1 while awaiting one).

        Raises:
            UnknownPartitionError: ``tp`` is not assigned.
        """
        return self.state(tp).position

    def highwater(self, tp: TopicPartition) -> Optional[int]:
        """The high watermark of ``tp`` from its latest fetch (``None`` before one).

        Raises:
            UnknownPartitionError: ``tp`` is not assigned.
        """
        return self.state(tp).highwater

    # ------------------------------------------------------------------
    # one fetch round (the fetcher's side)

    def wanted(self, partitions: Optional[Iterable[TopicPartition]]) -> set[TopicPartition]:
        """The partitions of ``partitions`` (default: all) that have a position.

        The answer is shared with the next calls for the same ``partitions``
        object while nothing is assigned, unassigned or sought: do not
        change it (a fetch round asks for it several times; with 100,000
        partitions it is worth keeping).
        """
        stamp = (self.version, self._seeks)
        memo_of, memo_stamp, memo, _states = self._wanted
        if memo_of is partitions and memo_stamp == stamp:
            return memo
        for _step in self.wanted_steps(partitions):
            pass
        return self._wanted[2]

    def by_topic(self) -> dict[str, dict[int, PartitionState]]:
        """The assigned partitions' states by topic and partition id (do not change it)."""
        return self._by_topic

    def holding(self, wanted: Optional[Iterable[TopicPartition]] = None) -> list[PartitionState]:
        """The marked partitions (of ``wanted``, if given) that still hold
        something, sorted; those that hold nothing any more are unmarked."""
        marked = self._marked
        empty = [st for st in marked if not st.holds()]
        marked.difference_update(empty)
        if wanted is None:
            return sorted(marked, key=_tp)
        if not isinstance(wanted, (set, frozenset, dict)):
            wanted = set(wanted)
        return sorted((st for st in marked if st.tp in wanted), key=_tp)

    def wanted_steps(self, partitions: Optional[Iterable[TopicPartition]]) -> Iterator[None]:
        """:meth:`wanted`, worked out a step at a time: the caller may do
        something else (give the loop a turn) at each step; when it is
        through, :meth:`wanted` answers for ``partitions`` at once.
        Nothing is kept if the subscription changed meanwhile."""
        stamp = (self.version, self._seeks)
        memo_of, memo_stamp, _memo, _states = self._wanted
        if memo_of is partitions and memo_stamp == stamp:
            return
        parts = self._parts
        awaiting = Status.AWAITING_RESET
        wanted: set[TopicPartition] = set()
        states: list[PartitionState] = []
        for i, tp in enumerate(parts if partitions is None else partitions):
            st = parts.get(tp)
            if st is not None and st.status is not awaiting and tp not in wanted:
                wanted.add(tp)
                states.append(st)
            if not i % 1024:
                yield
        # Kept only if nothing changed meanwhile (always, without yields).
        if (self.version, self._seeks) == stamp:
            self._wanted = (partitions, stamp, wanted, states)
        else:
            self._wanted = (None, (-1, -1), wanted, states)

    def drain(self, wanted: Iterable[TopicPartition], max_records: Optional[int] = None) -> Batches:
        """Hand out the buffered records of the fetching partitions of ``wanted``.

        Args:
            wanted: the partitions to hand out.
            max_records: at most this many records in all (``None``: all).

        Returns:
            records per partition; each partition's position moves past them.
        """
        out: Batches = {}
        # Strategy: partitions in sorted order so a bounded hand-out is
        # deterministic; what does not fit stays buffered with the position at
        # its first record, and a buffered partition is not fetched again
        # (PartitionState.current), so nothing more is held per partition.
        left = max_records
        for st in self.holding(wanted):
            tp = st.tp
            if not st.buffer or not st.may_fetch:
                continue
            if left is not None and left < len(st.buffer):
                if left <= 0:
                    break
                out[tp], st.buffer = st.buffer[:left], st.buffer[left:]
                st.position = st.buffer[0].offset
                break
            out[tp] = st.buffer
            st.buffer = []
            st.position = st.next_offset
            if left is not None:
                left -= len(out[tp])
        return out

    def to_decode(self, wanted: Iterable[TopicPartition]) -> list[PartitionState]:
        """The fetching partitions of ``wanted`` with a raw answer and no
        decoded record left, in order: what to decode before handing out."""
        return [
            st for st in self.holding(wanted)
            if st.raw is not None and not st.buffer and st.may_fetch
        ]

    def buffered(self, wanted: Iterable[TopicPartition]) -> int:
        """Decoded records ready to hand out: in the fetching partitions of ``wanted``.

        A paused partition's records are kept but not counted: they cannot
        be handed out, so they must not fill a round's decode budget (the
        other partitions' answers would then never be decoded).
        """
        return sum(len(st.buffer) for st in self.holding(wanted) if st.may_fetch)

    def held(self) -> tuple[int, int]:
        """What the consumer holds: ``(raw bytes, decoded records)``, all partitions.

        The raw bytes count the answers as fetched and the compressed
        wrapper each one has open, decompressed (its records are decoded a
        slice at a time from those bytes).
        """
        raw = records = 0
        for st in self.holding():
            if st.raw is not None:
                raw += st.raw_bytes()
            records += len(st.buffer)
        return raw, records

    def opened(self) -> int:
        """Bytes of the decompressed wrappers open in the raw answers (counted
        in :meth:`held`'s raw bytes too): at most one per partition."""
        return sum(
            len(st.inner.data) for st in self.holding()
            if st.raw is not None and st.inner is not None
        )

    def take_error(self, wanted: Iterable[TopicPartition]) -> Optional[KielError]:
        """Take the first kept error of a partition of ``wanted`` that is not paused."""
        for st in self.holding(wanted):
            if st.error is not None and st.status is not Status.PAUSED:
                error, st.error = st.error, None
                self._seeks += 1  # all_answered() looks at it again
                return error
        return None

    def all_answered(self, wanted: Iterable[TopicPartition]) -> bool:
        """Whether every fetchable partition of ``wanted`` got an answer at its position."""
        # Strategy: a walk goes on from where the previous one for the same
        # ``wanted`` stopped: the partitions before it were answered, and
        # stay so until a seek, a resume, an error taken or an assignment
        # (which start the walk over). A round then looks at the partitions
        # answered since, not at every wanted one (100,000, say).
        stamp = (self.version, self._seeks)
        of, seen, states, index = self._answered_walk
        if of is not wanted or seen != stamp:
            parts = self._parts
            # The states of wanted(), listed as it worked it out.
            states = self._wanted[3] if wanted is self._wanted[2] else [
                parts[tp] for tp in wanted]
            index = 0
        paused = Status.PAUSED
        count = len(states)
        while index < count:
            st = states[index]
            if not (st.answered or st.error is not None or st.status is paused):
                break
            index += 1
        self._answered_walk = (wanted, stamp, states, index)
        return index == count

    def retry_delay(self, wanted: Iterable[TopicPartition], now: float) -> Optional[float]:
        """Seconds until a partition of ``wanted`` may be fetched again (``None``: none waits)."""
        dues = (st.retry_due(now) for st in self.holding(wanted))
        waits = [at for at in dues if at is not None]
        if not waits:
            return None
        return min(waits) - now

    def topics(self) -> list[str]:
        """The topics of the assigned partitions, sorted."""
        if self._topics[0] != self.version:
            self._topics = (self.version, sorted(self._by_topic))
        return list(self._topics[1])
