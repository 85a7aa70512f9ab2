"""A broker-group member's heartbeat task: heartbeats, the session and the poll deadline.

Heartbeats run on their own task every ``heartbeat_interval``, whatever the
application does, so a busy application does not lose its session. An
answer REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION starts a rebalance;
UNKNOWN_MEMBER_ID, or no answer for ``session_timeout``, means the
coordinator dropped this member: its partitions are *lost* (no commit:
another member may own them) and it joins again as new. A fatal answer
stops the member.

The same task judges ``max_poll_interval`` in every state of
:data:`kiel.coordinator.group_protocol.POLL_JUDGED` (a rebalance included)
and, past it, makes the member leave.
"""

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Optional

from kiel.coordinator.group_protocol import HEARTBEATING, POLL_JUDGED, State
from kiel.exc import (
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KielError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnsupportedFeatureError,
)

if TYPE_CHECKING:
    from kiel.coordinator.membership import BrokerMembership

__all__ = ["FATAL", "Heartbeats"]

#: The member's one logger, whichever part tells its story: the name users
#: filter on stayed when the membership was split in parts.
log = logging.getLogger("kiel.coordinator.membership")

#: Errors after which the member stops: the application must change something.
FATAL = (FencedInstanceIdError, InconsistentGroupProtocolError, GroupAuthorizationFailedError,
         InvalidSessionTimeoutError, InvalidGroupIdError, GroupMaxSizeReachedError,
         UnsupportedFeatureError)


class Heartbeats:
    """The heartbeat task of one member.

    Args:
        member: the member whose session it keeps.
    """

    def __init__(self, member: "BrokerMembership") -> None:
        self.member = member
        self.protocol = member.protocol
        self.session = member.protocol.session
        self.settings = member.settings
        self.group = member.context.group
        #: Wall-clock time (``time.time()``) of the last heartbeat answered.
        self.last: Optional[float] = None
        #: Leaving for max_poll_interval now.
        self.leaving = False

    def beating(self) -> bool:
        """Whether this member's session is to be kept (and judged) now."""
        member, protocol = self.member, self.protocol
        return protocol.member_id is not None and (
            protocol.state in HEARTBEATING
            # A cooperative member keeps fetching while it rejoins: its
            # session must go on, and be judged, meanwhile.
            or (member.cooperative and bool(member.owned) and protocol.generation >= 0)
        )

    async def run(self) -> None:
        """Heartbeat every ``heartbeat_interval``; judge the session and the poll deadline.

        Strategy: the deadlines are judged on a tick of their own, never
        behind a heartbeat in flight: a coordinator that stopped answering
        (a network partition: no reset, no answer) must not keep this member
        fetching past its session, however long the request waits.
        """
        member = self.member
        interval = self.settings.heartbeat_interval
        tick = min(interval, 0.5)
        beat: Optional[asyncio.Task[None]] = None
        next_beat = _now() + interval
        while not member.closing:
            # The next tick, or the next beat if that comes first: a beat is
            # never later than its interval (one overdue waits for a tick).
            due = next_beat - _now()
            await asyncio.sleep(tick if due <= 0 else min(tick, due))
            now = _now()
            if (self.protocol.state in POLL_JUDGED and not self.leaving
                    and self.session.poll_overdue(now)):
                self.leaving = True
                member.tasks.spawn(self._leave_for_poll(), "leave for max_poll_interval")
                continue
            if not self.beating():
                continue
            if self.session.expired(now):
                if member.owned:
                    log.warning("group %s: no heartbeat answered for session_timeout=%ss; "
                                "the partitions are lost, joining again", self.group,
                                self.settings.session_timeout)
                member.owned.lose()
                member.request_rejoin()
                continue
            if now >= next_beat and (beat is None or beat.done()):
                next_beat = now + interval
                beat = member.tasks.spawn(self.once(now), "heartbeat")

    async def _leave_for_poll(self) -> None:
        try:
            await self.member.leave_for_poll()
        finally:
            self.leaving = False

    async def once(self, sent: float) -> None:
        """One heartbeat, sent at ``sent``, and what its answer means."""
        member, protocol = self.member, self.protocol
        assert protocol.member_id is not None
        try:
            await protocol.requests.heartbeat(protocol.member_id, protocol.generation,
                                              self.settings.session_timeout)
        except RebalanceInProgressError:
            self.session.answered(sent)
            if protocol.state is State.STABLE:
                member.request_rejoin()
        except IllegalGenerationError:
            if member.cooperative and protocol.state is not State.STABLE:
                return  # rejoining already: the generation is moving
            if member.cooperative and member.owned:
                # The group went on to a generation without this member: what
                # it kept may be another's now (Java loses them too).
                log.warning("group %s: member %s is not in the current generation; its "
                            "partitions are lost, joining again", self.group,
                            protocol.member_id)
                member.owned.lose()
            member.request_rejoin()
        except UnknownMemberIdError:
            log.warning("group %s: the coordinator does not know member %s any more; its "
                        "partitions are lost, joining again", self.group, protocol.member_id)
            member.owned.lose()
            member.forget()
            member.request_rejoin()
        except FATAL as e:
            member.fail(e)
        except KielError as e:
            # The coordinator moved or is unreachable: the next beat looks it
            # up again; the session deadline decides when it is too late.
            log.info("group %s: heartbeat failed (%r)", self.group, e)
        else:
            self.session.answered(sent)
            self.last = time.time()


def _now() -> float:
    return asyncio.get_running_loop().time()
