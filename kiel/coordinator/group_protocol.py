"""The classic group protocol of one member: its states, its transitions, join/sync/leave.

The member's state is one :class:`State`, changed only by :meth:`GroupProtocol.fire`
with an :class:`Event`, through :data:`TRANSITIONS` (after h11: a table of
``(state, event) -> state``); a pair the table does not hold is a bug in
kiel and raises :class:`IllegalTransitionError` at once, instead of
leaving the member in a state nobody planned for.

The timings the table makes explicit:

* :data:`SESSION_RESTARTS`: a JoinGroup or SyncGroup the coordinator held
  (until every member joined, until the leader synced) kept the member
  alive; its session starts again when the answer arrives
  (:meth:`kiel.coordinator.session.Session.restarted`), so a long hold is
  not counted against it;
* :data:`POLL_JUDGED`: the states with a ``POLL_EXPIRED`` transition, in
  which the application's ``max_poll_interval`` is judged: a rebalance
  (revoking, joining, syncing) as well as a stable member;
* ``POLL_EXPIRED`` leads to ``REVOKING`` and then ``LEFT``: the member
  leaves without waiting for the batch the application is stuck on (what
  it still holds is lost, not revoked: see
  :meth:`kiel.coordinator.owned.Owned.give_up_stuck`).
"""

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Optional, TypeVar

from kiel.consumer.offsets import Generation
from kiel.coordinator.requests import GroupRequests
from kiel.coordinator.session import Session
from kiel.coordinator.settings import BrokerSettings
from kiel.exc import (
    ClientClosedError,
    IllegalGenerationError,
    MemberIdRequiredError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from kiel.protocol.group_membership import (
    JoinGroupProtocol,
    JoinGroupResponseV5,
    SyncGroupAssignment,
)

__all__ = ["Event", "GroupProtocol", "IllegalTransitionError", "POLL_JUDGED",
           "SESSION_RESTARTS", "State", "TRANSITIONS"]

#: The member's one logger, whichever part tells its story: the name users
#: filter on stayed when the membership was split in parts.
log = logging.getLogger("kiel.coordinator.membership")

T = TypeVar("T")


class State(str, Enum):
    """Where a member is in its group (a ``str``: ``metrics()`` shows the value)."""

    UNJOINED = "UNJOINED"  #: not joined yet
    REVOKING = "REVOKING"  #: giving partitions up (listener, commit)
    JOINING = "JOINING"  #: JoinGroup sent, or answered and leading
    SYNCING = "SYNCING"  #: SyncGroup sent or answered, the assignment not taken yet
    STABLE = "STABLE"  #: in a generation, its assignment taken
    LEFT = "LEFT"  #: left for max_poll_interval; joins again at the next consume()
    FAILED = "FAILED"  #: a fatal answer: stopped
    CLOSED = "CLOSED"  #: left for good


class Event(Enum):
    """What happens to a member."""

    REVOKE = "revoke"  #: give partitions up before or after a join
    JOIN = "join"  #: JoinGroup sent
    JOIN_ANSWERED = "join answered"  #: JoinGroup answered (held meanwhile)
    SYNC = "sync"  #: SyncGroup sent
    SYNC_ANSWERED = "sync answered"  #: SyncGroup answered (held meanwhile)
    REBALANCING = "rebalancing"  #: JoinGroup/SyncGroup answered REBALANCE_IN_PROGRESS
    ASSIGNED = "assigned"  #: the assignment taken
    POLL_EXPIRED = "poll expired"  #: max_poll_interval passed: leave, the held lost
    LEFT = "left"  #: LeaveGroup done after POLL_EXPIRED
    FAIL = "fail"  #: a fatal answer
    CLOSE = "close"  #: the consumer closes


_S, _E = State, Event
#: A rebalance may begin (or start over) from these.
_REJOINABLE = (_S.UNJOINED, _S.STABLE, _S.REVOKING, _S.JOINING, _S.SYNCING, _S.LEFT)
#: In the group, or getting into it.
_IN_GROUP = (_S.STABLE, _S.REVOKING, _S.JOINING, _S.SYNCING)

#: Every legal ``(state, event) -> state``.
TRANSITIONS: dict[tuple[State, Event], State] = {
    # Eager: everything before joining; cooperative: topics no longer
    # subscribed to before joining, owned-minus-assigned after syncing.
    (_S.STABLE, _E.REVOKE): _S.REVOKING,
    (_S.REVOKING, _E.REVOKE): _S.REVOKING,
    (_S.JOINING, _E.REVOKE): _S.REVOKING,
    (_S.SYNCING, _E.REVOKE): _S.REVOKING,
    **{(s, _E.JOIN): _S.JOINING for s in _REJOINABLE},
    (_S.JOINING, _E.JOIN_ANSWERED): _S.JOINING,
    (_S.JOINING, _E.SYNC): _S.SYNCING,
    (_S.SYNCING, _E.SYNC_ANSWERED): _S.SYNCING,
    (_S.JOINING, _E.REBALANCING): _S.JOINING,
    (_S.SYNCING, _E.REBALANCING): _S.SYNCING,
    (_S.SYNCING, _E.ASSIGNED): _S.STABLE,
    (_S.REVOKING, _E.ASSIGNED): _S.STABLE,
    # Whatever the member is doing in its group: it stops, hands back
    # without waiting for the stuck application, and leaves.
    **{(s, _E.POLL_EXPIRED): _S.REVOKING for s in _IN_GROUP},
    (_S.REVOKING, _E.LEFT): _S.LEFT,
    **{(s, _E.FAIL): _S.FAILED for s in (*_REJOINABLE, _S.FAILED)},
    **{(s, _E.CLOSE): _S.CLOSED for s in State if s is not _S.CLOSED},
}
#: Events after which the session starts again: the coordinator answered a
#: request it may have held, and counted the member in meanwhile.
SESSION_RESTARTS = frozenset({_E.JOIN_ANSWERED, _E.SYNC_ANSWERED, _E.REBALANCING})
#: States in which max_poll_interval is judged (those that can expire it).
POLL_JUDGED = frozenset(s for (s, e) in TRANSITIONS if e is _E.POLL_EXPIRED)
#: States whose member heartbeats (a cooperative member also while it rejoins).
HEARTBEATING = frozenset({_S.STABLE, _S.REVOKING})


class IllegalTransitionError(RuntimeError):
    """A transition :data:`TRANSITIONS` does not hold: a bug in kiel, not in the application."""


class GroupProtocol:
    """One member's JoinGroup/SyncGroup/LeaveGroup and the state they move.

    Args:
        requests: the member's group requests.
        settings: the member's settings.
        group: the group.
    """

    def __init__(self, requests: GroupRequests, settings: BrokerSettings, group: str) -> None:
        self.requests = requests
        self.settings = settings
        self.group = group
        self.state = State.UNJOINED
        #: The member id the coordinator gave (``None``: none yet).
        self.member_id: Optional[str] = None
        #: The generation being joined or joined (-1: none).
        self.generation = -1
        #: The leader's member id in that generation.
        self.leader: Optional[str] = None
        #: The assignor the coordinator chose.
        self.protocol: Optional[str] = None
        self.session = Session(settings.session_timeout, settings.max_poll_interval)
        #: What commits carry: replaced after each SyncGroup and when forgotten.
        self.current = Generation()

    def fire(self, event: Event) -> State:
        """Move by ``event``; the new state.

        Raises:
            IllegalTransitionError: the table has no such transition.
        """
        try:
            new = TRANSITIONS[self.state, event]
        except KeyError:
            raise IllegalTransitionError(
                f"group {self.group}: member {self.member_id} cannot go by {event.name} "
                f"from {self.state.name} (kiel bug: not in the group protocol's table)"
            ) from None
        if event in SESSION_RESTARTS:
            self.session.restarted(_now())
        self.state = new
        return new

    @property
    def leading(self) -> bool:
        """Whether this member leads its generation."""
        return self.member_id is not None and self.leader == self.member_id

    def generation_now(self) -> Generation:
        """The generation commits are made in (what ``GroupOffsets`` reads)."""
        return self.current

    def forget(self) -> None:
        """Forget the member id and generation (left, dropped, fenced): the
        session ends, and commits carry no generation."""
        self.member_id = None
        self.generation = -1
        self.current = dataclasses.replace(self.current, generation_id=-1, member_id="")
        self.session.end()

    async def join_and_sync(
        self, offer: Callable[[], Awaitable[list[JoinGroupProtocol]]],
        lead: Callable[[JoinGroupResponseV5], Awaitable[list[SyncGroupAssignment]]],
    ) -> bytes:
        """One JoinGroup (two for a new member: KIP-394) and SyncGroup; the
        assignment's bytes. ``offer()`` gives the assignors offered with this
        member's subscription; ``lead`` computes everyone's assignment when
        this member leads.

        Raises:
            BrokerError: the coordinator's answer (the caller decides).
            KielError: the coordinator could not be reached.
            AllocationError: as leader, the allocator failed.
        """
        settings = self.settings
        self.fire(Event.JOIN)
        protocols = await offer()
        for _ in range(2):
            response = await self.requests.join(
                self.member_id or "", protocols, settings.session_timeout,
                settings.max_poll_interval,
            )
            if response.error_code == MemberIdRequiredError.errno:
                self.member_id = response.member_id  # join again with it (KIP-394)
                continue
            break
        else:
            raise MemberIdRequiredError(api="JoinGroup", group=self.group, member=self.member_id)
        self.fire(Event.JOIN_ANSWERED)
        self.member_id = response.member_id
        self.generation = response.generation_id
        self.leader = response.leader
        self.protocol = response.protocol_name
        assignments: list[SyncGroupAssignment] = []
        if response.leader == response.member_id:
            assignments = await lead(response)
        self.fire(Event.SYNC)
        data = await self.requests.sync(self.member_id, self.generation, assignments,
                                        settings.max_poll_interval)
        self.fire(Event.SYNC_ANSWERED)
        self.current = Generation(self.generation, self.member_id,
                                  settings.group_instance_id, self.protocol)
        return data

    async def until_synced(self, one_round: Callable[[], Awaitable[T]],
                           dropped: Callable[[], None], closing: Callable[[], bool]) -> T:
        """Run ``one_round`` until a generation completes with this member in it.

        Strategy: REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION mean a new
        generation is forming; the member joins it again at once (after a
        short pause that doubles up to a second), keeping its member id
        (kafka-python once reset it here: PR #2614). UNKNOWN_MEMBER_ID:
        ``dropped()`` (what a cooperative member kept may be another's now)
        and it joins as a new member. Other failures go to the caller.

        Raises:
            ClientClosedError: the member left meanwhile.
            KielError: as :meth:`join_and_sync`.
        """
        pause = 0.05
        while True:
            if closing():
                raise ClientClosedError("the member left while joining")
            try:
                return await one_round()
            except RebalanceInProgressError as e:
                # The coordinator counts this member in (else:
                # UNKNOWN_MEMBER_ID), and held the request until now.
                self.fire(Event.REBALANCING)
                log.debug("group %s: %s; joining again", self.group, type(e).__name__)
            except IllegalGenerationError as e:
                log.debug("group %s: %s; joining again", self.group, type(e).__name__)
            except UnknownMemberIdError:
                dropped()
                self.forget()
            await asyncio.sleep(pause)
            pause = min(1.0, pause * 2)

    async def leave_group(self, dropped_ok: bool = False) -> None:
        """LeaveGroup, unless static (a static member stays in the group until
        its session ends, so a restart within it gets its partitions back
        without a rebalance) or without a member id.

        Args:
            dropped_ok: UNKNOWN_MEMBER_ID (already dropped) is no error.

        Raises:
            BrokerError, KielConnectionError, RequestTimeoutError: as the request.
        """
        if not self.member_id or self.settings.group_instance_id is not None:
            return
        try:
            await self.requests.leave(self.member_id)
        except UnknownMemberIdError:
            if not dropped_ok:
                raise


def _now() -> float:
    return asyncio.get_running_loop().time()
