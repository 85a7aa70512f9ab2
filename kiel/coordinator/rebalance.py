"""A broker-group member's rebalance: revoke, join and sync, take the assignment.

Eager: everything owned is revoked before JoinGroup, and the assignment
taken after SyncGroup. Cooperative (KIP-429): only topics no longer
subscribed to are revoked before; after SyncGroup only owned-minus-assigned
is revoked and assigned-minus-owned acquired, and a member that revoked
something joins again at once (see :mod:`kiel.coordinator.membership`).
The states it moves the member through are
:mod:`kiel.coordinator.group_protocol`'s.
"""

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Optional

from kiel.coordinator.group_protocol import Event, State
from kiel.coordinator.heartbeat import FATAL
from kiel.coordinator.leader import mine, subscription
from kiel.exc import AllocationError, KielError
from kiel.metrics import describe_partitions
from kiel.protocol.group_membership import JoinGroupProtocol
from kiel.retry import Backoff, attempts
from kiel.structs import TopicPartition

if TYPE_CHECKING:
    from kiel.coordinator.membership import BrokerMembership

__all__ = ["REJOIN_BACKOFF", "Rebalance"]

#: The member's one logger, whichever part tells its story: the name users
#: filter on stayed when the membership was split in parts.
log = logging.getLogger("kiel.coordinator.membership")

#: Retries of a rebalance that failed (coordinator moved or unreachable, a
#: rebalance that started again). Unbounded: the member must get back into
#: its group; they end when it leaves (and the first join has join_timeout).
REJOIN_BACKOFF = Backoff(0.1, 5.0, retries=None)


class Rebalance:
    """Runs one member's rebalances.

    Args:
        member: the member.
    """

    def __init__(self, member: "BrokerMembership") -> None:
        self.member = member
        self.protocol = member.protocol
        self.owned = member.owned
        self.leader = member.leader
        self.hooks = member.hooks
        self.settings = member.settings
        self.cooperative = member.cooperative
        self.group = member.context.group
        #: Rebalances this member went through, and the last one's seconds.
        self.count = 0
        self.last_seconds: Optional[float] = None
        #: The last error a join attempt met (said when the first join times out).
        self.last_error: Optional[KielError] = None

    async def run(self, first: bool = False) -> None:
        """Revoke what is owned, join, sync, take the new assignment.

        Raises:
            a FATAL error, or (first join only) AllocationError.
            ClientClosedError: the member left meanwhile.
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        kind = "cooperative" if self.cooperative else "eager"
        if self.protocol.member_id is None:
            log.info("group %s: joining as a new member (%s)", self.group, kind)
        else:
            log.info("group %s: member %s joining again, leaving generation %s (%s)",
                     self.group, self.protocol.member_id, self.protocol.generation, kind)
        # What stopped before a first join (a close) or before a member left
        # went to others, not nowhere: not part of this rebalance's pause.
        self.hooks.rebalance_began(fresh=first or self.protocol.state is State.LEFT)
        if self.owned and not self.cooperative:
            self.protocol.fire(Event.REVOKE)
            log.info("group %s: member %s revoking %s before joining (eager)",
                     self.group, self.protocol.member_id,
                     describe_partitions(self.owned.partitions))
            await self.owned.give_up()
        elif self.owned:
            # Cooperative: keep what is owned, except topics no longer subscribed to.
            wanted = set(await self.leader.current_topics())
            gone = [tp for tp in self.owned.partitions if tp.topic not in wanted]
            if gone:
                self.protocol.fire(Event.REVOKE)
                await self.owned.give_up(gone)
        async for attempt in attempts(REJOIN_BACKOFF, closed=lambda: self.member.closing):
            try:
                assigned = await self.protocol.until_synced(
                    self._join_once, self.owned.lose, lambda: self.member.closing)
            except FATAL:
                raise
            except AllocationError as e:
                if first:
                    raise
                self.member.failure = e
                log.error("group %s: the allocator failed: %s", self.group, e)
                attempt.failed(e)
                continue
            except KielError as e:
                self.last_error = e
                if not e.retriable:
                    if first:
                        raise
                    # Said to the application, and tried again: the member
                    # must not give its group up on an error it may outlive.
                    self.member.failure = e
                log.warning("group %s: joining failed (%r); trying again", self.group, e)
                attempt.failed(e)
                continue
            break
        if self.cooperative:
            await self._take_cooperatively(assigned)
        else:
            self.protocol.fire(Event.ASSIGNED)
            await self.owned.take(assigned, even_none=True)
        self.owned.generation = self.protocol.generation if self.owned else -1
        self.count += 1
        self.last_seconds = loop.time() - started
        moved = self.hooks.rebalance_ended()
        if moved is not None:
            log.info("group %s: member %s in generation %s: %s", self.group,
                     self.protocol.member_id, self.protocol.generation, moved)

    async def _take_cooperatively(self, assigned: list[TopicPartition]) -> None:
        """Revoke owned-minus-assigned, acquire assigned-minus-owned; keep the rest as it is.

        A member that revoked something joins again at once: the partitions
        it let go were withheld from their new owners, who get them in that
        next round.
        """
        wanted = set(assigned)
        revoked = [tp for tp in self.owned.partitions if tp not in wanted]
        if revoked:
            self.protocol.fire(Event.REVOKE)
            log.info("group %s: member %s revoking %s (cooperative); joining again so "
                     "they move", self.group, self.protocol.member_id,
                     describe_partitions(revoked))
            await self.owned.give_up(revoked)
        self.protocol.fire(Event.ASSIGNED)
        kept = set(self.owned.partitions)
        await self.owned.take([tp for tp in assigned if tp not in kept])
        if revoked:
            self.member.request_rejoin()

    async def _join_once(self) -> list[TopicPartition]:
        """One join and sync; this member's partitions."""
        data = await self.protocol.join_and_sync(self._offer, self.leader.assign)
        self.member.heartbeats.last = time.time()
        protocol = self.protocol
        taken, failure = mine(data, self.leader.subscribed, protocol.leader, self.group)
        if failure is not None:
            self.member.failure = failure
        log.info("group %s: member %s joined generation %s as %s (assignor %s); assignment: %s",
                 self.group, protocol.member_id, protocol.generation,
                 "leader" if protocol.leading else "follower", protocol.protocol,
                 describe_partitions(taken))
        return taken

    async def _offer(self) -> list[JoinGroupProtocol]:
        """The assignors offered, each with this member's subscription."""
        topics = await self.leader.subscribe()
        return [JoinGroupProtocol(a.name, subscription(a, topics, self.owned.partitions,
                                                       self.owned.generation))
                for a in self.settings.assignors]
