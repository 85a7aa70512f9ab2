"""The one record per partition (kiel.consumer.subscription.PartitionState):
may_fetch and the status are read from its facts, the application's pause is
one flag that outlives seeks and (for a group member) the time a partition is
owned but not assigned, the suspension is one flag of the subscription, and
loans hang off the record. Pure logic: no broker, no loop."""

import itertools
from typing import Any, Optional

import pytest

from kiel.consumer.group_state import GroupState
from kiel.consumer.subscription import PartitionState, Shared, Status, Subscription
from kiel.exc import KielError, UnknownPartitionError
from kiel.structs import TopicPartition

TP = TopicPartition("t", 0)


def record(
    *, assigned: bool = True, position: int = 5, paused: bool = False,
    suspended: bool = False,
) -> PartitionState:
    shared = Shared()
    shared.suspended = suspended
    st = PartitionState(TP, position, 512, shared, assigned=assigned)
    st.paused = paused
    return st


@pytest.mark.parametrize(
    "assigned, position, paused, suspended",
    list(itertools.product([True, False], [-1, 0, 7], [True, False], [True, False])),
)
def test_may_fetch_and_the_status_are_read_from_the_facts(
    assigned: bool, position: int, paused: bool, suspended: bool
) -> None:
    st = record(assigned=assigned, position=position, paused=paused, suspended=suspended)
    expected = assigned and position >= 0 and not paused and not suspended
    assert st.may_fetch is expected
    assert st.fetch_now(now=0.0) is expected  # nothing held back
    if not assigned:
        status = Status.UNASSIGNED
    elif position < 0:
        status = Status.AWAITING_RESET
    elif paused or suspended:
        status = Status.PAUSED
    else:
        status = Status.FETCHING
    assert st.status is status
    assert (st.status is Status.FETCHING) is st.may_fetch
    # Ought to be fetched: owned (here: assigned) and not paused by the application.
    assert st.should_fetch is (assigned and not paused)


def held_back_by(st: PartitionState, what: str) -> None:
    if what == "in flight":
        st.in_flight = True
    elif what == "records":
        st.next_offset = st.position + 1
        st.buffer = [object()]  # type: ignore[list-item]
    elif what == "raw answer":
        st.raw = b"x"
    elif what == "error":
        st.error = KielError("kept for the application")
    elif what == "retry":
        st.retry_at = 10.0
    else:
        raise AssertionError(what)


@pytest.mark.parametrize("what", ["in flight", "records", "raw answer", "error", "retry"])
def test_what_is_held_back_waits_while_may_fetch_stays(what: str) -> None:
    st = record()
    assert st.fetch_now(0.0) and not st.held_back(0.0)
    held_back_by(st, what)
    assert st.may_fetch  # the partition is still one to fetch ...
    assert st.held_back(0.0) and not st.fetch_now(0.0)  # ... not now
    if what == "retry":
        assert st.retry_due(0.0) == 10.0 and st.fetch_now(11.0)
    else:
        assert st.retry_due(0.0) is None
    # Its leader waits for it only while it holds an answer to hand out.
    assert st.draining() is (what in ("records", "raw answer"))


def test_a_pause_outlives_seeks_and_a_position_that_was_awaited() -> None:
    changes = []
    subscription = Subscription(512, on_change=lambda: changes.append(1))
    subscription.assign(TP)
    subscription.pause(TP)  # awaiting its position: the pause is kept for it
    subscription.seek(TP, 3)
    assert subscription.status(TP) is Status.PAUSED and subscription.paused() == [TP]
    assert subscription.wanted(None) == {TP}  # wanted (answers kept), not fetched
    assert subscription.to_fetch() == []
    subscription.resume(TP)
    assert subscription.state(TP).may_fetch and subscription.to_fetch() == [TP]
    assert len(changes) == 3  # assign, seek, resume (a pause wakes nobody)


def test_a_suspension_is_one_flag_and_leaves_the_applications_pauses_alone() -> None:
    changes = []
    subscription = Subscription(512, on_change=lambda: changes.append(1))
    tps = [TopicPartition("t", p) for p in range(3)]
    for tp in tps:
        subscription.assign(tp, 10)
    subscription.assign(TopicPartition("t", 3))  # awaiting its position
    subscription.pause(tps[1])
    st = subscription.state(tps[0])
    st.next_offset = 11
    st.buffer = [object()]  # type: ignore[list-item]
    epoch = st.epoch
    changes.clear()
    subscription.suspend()
    assert subscription.suspended and len(changes) == 1
    assert not any(subscription.state(tp).may_fetch for tp in tps)
    # What was fetched and not handed out is dropped; positions stay.
    assert st.buffer == [] and st.epoch > epoch and st.position == 10
    # A start (or a seek) during the suspension does not fetch either.
    subscription.seek(TopicPartition("t", 3), 0)
    assert subscription.status(TopicPartition("t", 3)) is Status.PAUSED
    subscription.unsuspend()
    assert not subscription.suspended
    fetching = subscription.with_status(Status.FETCHING)
    assert fetching == [tps[0], tps[2], TopicPartition("t", 3)]
    assert subscription.paused() == [tps[1]]  # still the application's pause


def test_a_group_members_record_lives_while_the_partition_is_owned() -> None:
    subscription = Subscription(512)
    state = GroupState(subscription)
    part = state.own(TP)
    st = part.record
    assert st is not None and st.ownership is part
    # Owned, not assigned yet (the listener runs): not fetched, but it can be paused.
    assert st.owned and not st.may_fetch and st.status is Status.UNASSIGNED
    assert not subscription.is_assigned(TP)
    subscription.pause(TP)
    assert state.paused() == [TP] and state.to_fetch() == []
    subscription.assign(TP)  # the start: awaiting its committed offset
    assert subscription.state(TP) is st
    subscription.seek(TP, 4)
    assert st.status is Status.PAUSED  # paused before it started: still paused
    subscription.resume(TP)
    assert st.may_fetch and state.to_fetch() == [TP]
    # offset_reset="raise" leaves it owned, unassigned: the record stays.
    subscription.unassign(TP)
    assert not st.may_fetch and state.record(TP) is st
    subscription.assign(TP, 8)  # seek() starts it again: the same record
    assert subscription.state(TP) is st and st.may_fetch and st.position == 8
    # What the application holds and what was committed are read off it too.
    part.restart(8)
    part.committed = 8
    part.hand_out_one(8)
    assert st.in_hand and st.committed == 8 and st.position == 8
    # Handed over: unassigned, then forgotten: the record goes.
    subscription.unassign(TP)
    state.forget(TP)
    assert state.record(TP) is None and st.ownership is None
    with pytest.raises(UnknownPartitionError):
        subscription.record(TP)
    # A new ownership gets a new record, unpaused.
    again = state.own(TP).record
    assert again is not None and again is not st and not again.paused


def test_a_single_consumers_record_goes_when_unassigned() -> None:
    subscription = Subscription(512)
    subscription.assign(TP, 0)
    st = subscription.state(TP)
    assert st.owned and st.ownership is None and not st.in_hand and st.committed is None
    subscription.unassign(TP)
    assert st.status is Status.UNASSIGNED and not st.owned
    with pytest.raises(UnknownPartitionError):
        subscription.pause(TP)


def test_loans_hang_off_the_record() -> None:
    subscription = Subscription(512)
    subscription.assign(TP, 20)
    other = TopicPartition("t", 1)
    subscription.assign(other, 0)
    st = subscription.state(TP)
    assert subscription.lent() == []
    loan = st.lend(15)  # records 15.. went to a stream() loop; the position moved to 20
    assert st.loan is loan and subscription.lent() == [st]
    assert st.handed_position == 15
    loan.next = 17
    assert st.handed_position == 17
    assert st.take_loan() is loan and st.loan is None and subscription.lent() == []
    assert st.take_loan() is None
    assert st.handed_position == 20
    # An unassigned partition's loan ends with it.
    subscription.state(other).lend(0)
    gone: Optional[Any] = subscription.state(other)
    subscription.unassign(other)
    assert gone is not None and gone.loan is None and subscription.lent() == []
