"""The broker membership's group protocol as a state machine (kiel.coordinator.group_protocol).

Pure logic: the transition table is walked pair by pair, every pair it
does not hold is refused with IllegalTransitionError, and the timings
issue 32 asked to be explicit are read from the table itself. Plus the
Generation value commits read (kiel.consumer.offsets).
"""
import asyncio
from collections import deque
from typing import Any, cast

import pytest

from kiel.consumer.offsets import Generation, GroupOffsets
from kiel.coordinator.group_protocol import (
    POLL_JUDGED,
    SESSION_RESTARTS,
    TRANSITIONS,
    Event,
    GroupProtocol,
    IllegalTransitionError,
    State,
)
from kiel.coordinator.requests import GroupRequests
from kiel.coordinator.settings import BrokerSettings
from kiel.protocol.offset_commit import OffsetCommitRequestV2, OffsetCommitRequestV7
from kiel.structs import TopicPartition


def protocol(instance_id: Any = None) -> GroupProtocol:
    settings = BrokerSettings(session_timeout=6.0, heartbeat_interval=1.0,
                              group_instance_id=instance_id)
    # No request is sent here: the table and the session are pure bookkeeping.
    requests = GroupRequests(cast(Any, None), "g", instance_id)
    return GroupProtocol(requests, settings, "g")


def fire_in_loop(p: GroupProtocol, event: Event) -> State:
    async def fire() -> State:
        return p.fire(event)
    return asyncio.run(fire())


@pytest.mark.parametrize("pair", sorted(TRANSITIONS, key=lambda p: (p[0].name, p[1].name)),
                         ids=lambda p: f"{p[0].name}-{p[1].name}")
def test_every_transition_in_the_table_moves_to_its_state(pair: Any) -> None:
    state, event = pair
    p = protocol()
    p.state = state
    assert fire_in_loop(p, event) is TRANSITIONS[pair]
    assert p.state is TRANSITIONS[pair]


def test_every_pair_outside_the_table_is_refused_and_changes_nothing() -> None:
    refused = 0
    for state in State:
        for event in Event:
            if (state, event) in TRANSITIONS:
                continue
            p = protocol()
            p.state = state
            heard = p.session.heard
            with pytest.raises(IllegalTransitionError, match=f"{event.name} from {state.name}"):
                fire_in_loop(p, event)
            assert p.state is state and p.session.heard == heard
            refused += 1
    # Not a vacuous walk: most pairs are illegal (a closed member does nothing).
    assert refused > len(TRANSITIONS)
    assert not any(s is State.CLOSED for s, _ in TRANSITIONS)


def test_every_state_is_reached_from_unjoined_and_every_one_can_close() -> None:
    reached = {State.UNJOINED}
    todo = deque([State.UNJOINED])
    while todo:
        here = todo.popleft()
        for (s, _), t in TRANSITIONS.items():
            if s is here and t not in reached:
                reached.add(t)
                todo.append(t)
    assert reached == set(State)
    assert all((s, Event.CLOSE) in TRANSITIONS for s in State if s is not State.CLOSED)


def test_a_join_to_a_stable_member_walks_the_table() -> None:
    p = protocol()
    path = [Event.JOIN, Event.JOIN_ANSWERED, Event.SYNC, Event.REBALANCING, Event.JOIN,
            Event.JOIN_ANSWERED, Event.SYNC, Event.SYNC_ANSWERED, Event.ASSIGNED]

    async def walk() -> list[State]:
        return [p.fire(e) for e in path]
    states = asyncio.run(walk())
    assert states[-1] is State.STABLE
    assert states[:3] == [State.JOINING, State.JOINING, State.SYNCING]


def test_a_held_join_or_sync_restarts_the_session_when_answered() -> None:
    """Issue 32's first fault, in the table: the answer, not the send, dates the session."""
    assert {Event.JOIN_ANSWERED, Event.SYNC_ANSWERED, Event.REBALANCING} <= SESSION_RESTARTS
    assert not SESSION_RESTARTS & {Event.JOIN, Event.SYNC}

    async def held() -> tuple[float, Any, Any]:
        p = protocol()
        p.fire(Event.JOIN)
        p.fire(Event.JOIN_ANSWERED)
        p.fire(Event.SYNC)
        sent = asyncio.get_running_loop().time()
        await asyncio.sleep(0.05)  # the coordinator holds the SyncGroup
        before = p.session.heard
        p.fire(Event.SYNC_ANSWERED)
        return sent, before, p.session.heard
    sent, before, after = asyncio.run(held())
    assert after is not None and after > sent
    assert before is None or after > before


def test_max_poll_interval_is_judged_in_a_rebalance_and_leaving_goes_through_revoking() -> None:
    """Issue 32's second and third faults, in the table."""
    assert POLL_JUDGED == {State.STABLE, State.REVOKING, State.JOINING, State.SYNCING}
    for state in POLL_JUDGED:
        assert TRANSITIONS[state, Event.POLL_EXPIRED] is State.REVOKING
    assert TRANSITIONS[State.REVOKING, Event.LEFT] is State.LEFT
    # A member that left joins again from LEFT (at the next consume()).
    assert TRANSITIONS[State.LEFT, Event.JOIN] is State.JOINING
    for state in (State.UNJOINED, State.LEFT, State.FAILED, State.CLOSED):
        assert (state, Event.POLL_EXPIRED) not in TRANSITIONS


def test_commits_read_the_current_generation_from_their_provider() -> None:
    p = protocol(instance_id="static-1")
    offsets = GroupOffsets(cast(Any, None), "g")
    assert (offsets.generation_id, offsets.member_id, offsets.group_instance_id) == (-1, "", None)
    offsets.coordinated_by(p.generation_now, p.requests, "group")
    assert offsets.generation == Generation() and offsets.lane == "group"
    p.current = Generation(7, "m-1", "static-1", "range")
    tp = TopicPartition("t", 0)
    v7 = offsets.commit_request(7, {tp: 3})
    assert isinstance(v7, OffsetCommitRequestV7)
    assert (v7.generation_id, v7.member_id, v7.group_instance_id) == (7, "m-1", "static-1")
    v2 = offsets.commit_request(2, {tp: 3})
    assert isinstance(v2, OffsetCommitRequestV2) and (v2.generation_id, v2.member_id) == (7, "m-1")
    p.member_id, p.generation = "m-1", 7
    p.forget()
    # Forgotten: no generation, no member id; a static member keeps its instance id.
    assert (offsets.generation_id, offsets.member_id, offsets.group_instance_id) == (
        -1, "", "static-1")
    with pytest.raises(AttributeError):
        offsets.generation_id = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        p.current.generation_id = 3  # type: ignore[misc]
