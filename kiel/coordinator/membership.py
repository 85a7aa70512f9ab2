"""A group the brokers coordinate, behind the consumer's Membership interface.

:class:`BrokerMembership` is the adapter a
:class:`~kiel.consumer.grouped.GroupedConsumer` without ``zk_hosts`` uses:
the classic group protocol of the Java consumer, librdkafka, kafka-python
and aiokafka, so kiel members share a group with theirs.

A rebalance (eager) runs on the membership's one group task:

1. revoke everything owned (``hooks.revoked``: stop fetching, wait for the
   records in the application's hands, the listener, the commit under the
   generation that owned them), while heartbeats keep the session;
2. JoinGroup v5 (a new member's first answer is MEMBER_ID_REQUIRED with the
   id to join again with); the coordinator waits for every member and
   makes one the leader;
3. the leader runs the chosen assignor (:mod:`kiel.coordinator.assignors`)
   over every member's subscription and sends the result in SyncGroup v3;
   followers send an empty SyncGroup and get their part;
4. the new generation and member id go to the consumer's commits, then
   ``hooks.assigned`` (listener, committed offsets, fetching).

A cooperative rebalance (KIP-429: ``cooperative-sticky``, or any assignor
named ``"cooperative:<name>"``) keeps what is owned flowing:

1. nothing is revoked before JoinGroup (only partitions of topics no longer
   subscribed to); the subscription (v2) tells the leader what this member
   owns and since which generation;
2. the leader hands no partition to a new owner while another member still
   owns it (:func:`kiel.coordinator.cooperative.withhold`);
3. after SyncGroup, only owned-minus-assigned is revoked (listener, commit
   under the new generation), only assigned-minus-owned is acquired, and
   what is kept is never touched: no listener call, no pause, no fetch from
   the committed offset. A member that revoked something joins again at
   once, and that second round hands the freed partitions to their new owners;
4. heartbeats go on while it rejoins (the coordinator answers
   REBALANCE_IN_PROGRESS, which keeps the session), and a session that
   expires meanwhile, UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION (the group
   went on without this member) make the partitions *lost*: no commit.

Heartbeats run on their own task (:mod:`kiel.coordinator.heartbeat`) every
``heartbeat_interval``, whatever the application does, so a busy
application does not lose its session. An answer REBALANCE_IN_PROGRESS or
ILLEGAL_GENERATION starts a rebalance; UNKNOWN_MEMBER_ID, or no answer for
``session_timeout``, means the coordinator dropped this member: its
partitions are *lost* (no commit: another member may own them) and it joins
again as new. FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL and
GROUP_AUTHORIZATION_FAILED are fatal: the member stops and the consumer
raises the typed error.

An application that does not ask for records for ``max_poll_interval``
makes the member leave on purpose (LeaveGroup): the others take its
partitions instead of waiting. It does not wait for the batch the
application is stuck on: what the application still holds is lost, the rest
revoked and committed as usual. The interval is judged in a rebalance too
(one waiting for the stuck application, or joining): the rebalance is
stopped and the member leaves. Its next
``consume()`` raises :class:`~kiel.exc.PollIntervalExceededError` and the
member joins again.

The parts: :mod:`kiel.coordinator.group_protocol` (the states, their
transition table, JoinGroup/SyncGroup/LeaveGroup and the
:class:`~kiel.consumer.offsets.Generation` commits read),
:mod:`kiel.coordinator.heartbeat`, :mod:`kiel.coordinator.leader` (the
subscription and the leader's assignment) and :mod:`kiel.coordinator.owned`
(what is owned, revoked, lost); :class:`BrokerMembership` composes them.

Safety among kiel members: a partition is assigned only after the
coordinator completed a generation (every member of the previous one has
rejoined, after revoking, or was dropped after its session), and a member
whose session may have ended stops fetching (lost) no later than the
coordinator drops it.
"""

import asyncio
import logging
from typing import Any, Optional

from kiel._aio import Tasks, Wakeup, within
from kiel.consumer.membership import GroupContext
from kiel.coordinator.group_protocol import POLL_JUDGED, Event, GroupProtocol, State
from kiel.coordinator.heartbeat import FATAL, Heartbeats
from kiel.coordinator.leader import Leader
from kiel.coordinator.owned import Owned
from kiel.coordinator.rebalance import Rebalance
from kiel.coordinator.requests import LANE, GroupRequests
from kiel.coordinator.settings import BrokerSettings
from kiel.exc import (
    ClientClosedError,
    GroupError,
    KielError,
    PollIntervalExceededError,
)
from kiel.structs import TopicPartition

__all__ = ["BrokerMembership"]

log = logging.getLogger(__name__)

class BrokerMembership:
    """One member of a group the brokers' coordinator forms.

    Args:
        context: what the consumer gives every membership.
        settings: the checked :class:`~kiel.coordinator.settings.BrokerSettings`.
    """

    def __init__(self, context: GroupContext, settings: BrokerSettings) -> None:
        self.context = context
        self.settings = settings
        self.hooks = context.hooks
        self.requests = GroupRequests(context.cluster, context.group, settings.group_instance_id)
        self.protocol = GroupProtocol(self.requests, settings, context.group)
        # The group's commits read this member's generation, go to the
        # coordinator its requests found (one lookup), on their connection.
        context.offsets.coordinated_by(self.protocol.generation_now, self.requests, LANE)
        self.failure: Optional[BaseException] = None
        #: KIP-429: partitions stay owned through a rebalance (all of this
        #: member's assignors agree: BrokerSettings checked it).
        self.cooperative = settings.assignors[0].cooperative
        self.tasks = Tasks(f"kiel-group-{context.group}")
        self.owned = Owned(context.hooks, self.may_commit, self.tasks, context.group)
        self.leader = Leader(context.cluster, context.group, context.topics, settings.assignors)
        self.heartbeats = Heartbeats(self)
        self.rebalance = Rebalance(self)
        self.closing = False
        self._wake = Wakeup()
        self._rejoin = False
        #: Leaving: what is owned is being handed back.
        self._handing_back = False
        #: The group task (rebalances), which leaving for max_poll_interval stops.
        self._group_task: Optional[asyncio.Task[None]] = None

    @property
    def state(self) -> State:
        """Where this member is (:class:`~kiel.coordinator.group_protocol.State`)."""
        return self.protocol.state

    @property
    def member_id(self) -> Optional[str]:
        """The member id the coordinator gave (``None``: none yet)."""
        return self.protocol.member_id

    @property
    def generation(self) -> int:
        """The generation joined, or being joined (-1: none)."""
        return self.protocol.generation

    @property
    def rebalances(self) -> int:
        """Rebalances this member went through."""
        return self.rebalance.count

    # ------------------------------------------------------------------
    # Membership

    def may_commit(self) -> bool:
        """Owned under a live session of the current generation.

        A cooperative member that leaves while it rejoins still owns what it
        kept, under the generation it was assigned in (its commits carry
        that one until the next SyncGroup): it commits them as it hands them
        back, and the coordinator refuses the commit if that generation is over.

        A revocation that has lasted ``max_poll_interval`` (the rebalance
        timeout this member gave in JoinGroup) less one heartbeat interval
        (the rebalance may have begun that much before this member heard of
        it) may no longer commit: the coordinator waits that long at most
        for the member to join again, then forms the generation without it,
        and another member may be fetching its partitions already. (Tansu
        0.6.0 does not wait even that long, and says nothing: its
        heartbeats answer REBALANCE_IN_PROGRESS meanwhile.)
        """
        now = _now()
        if not self.protocol.session.live(now):
            return False
        since = self.owned.revoking_since
        if since is not None and (
                now - since >= self.settings.max_poll_interval - self.settings.heartbeat_interval):
            return False
        if self.state in (State.STABLE, State.REVOKING):
            return self.generation >= 0
        return self._handing_back and self.cooperative and self.owned.generation >= 0

    async def stored_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """None: a broker group keeps its offsets only with the coordinator."""
        return {}

    def poll(self) -> None:
        """The application asked for records: a member that left for being
        too slow joins again."""
        self.protocol.session.poll(_now())
        if self.state is State.LEFT:
            self.request_rejoin()

    def metrics(self) -> dict[str, Any]:
        """The group's state as this member sees it."""
        return {
            "group_state": self.state.value,
            "member_id": self.member_id,
            "generation": self.generation,
            "leader": self.protocol.leading,
            "assignor": self.protocol.protocol,
            "rebalance_protocol": "cooperative" if self.cooperative else "eager",
            "last_heartbeat": self.heartbeats.last,
            "last_rebalance_seconds": self.rebalance.last_seconds,
        }

    async def join(self) -> None:
        """Join the group and take the first assignment, within ``join_timeout``.

        Raises:
            UnsupportedFeatureError: the brokers do not coordinate groups
                (Kafka 0.8: pass ``zk_hosts``).
            GroupError: not joined within ``join_timeout`` (a typed
                subclass when the coordinator refused: fenced, inconsistent
                protocol, not authorized).
            AllocationError: this member led and its allocator failed.
        """
        session = self.protocol.session
        session.poll(_now())
        try:
            await within(self.rebalance.run(first=True), self.settings.join_timeout)
        except asyncio.TimeoutError as e:
            last = self.rebalance.last_error
            raise GroupError(
                f"did not join group {self.context.group!r} within join_timeout="
                f"{self.settings.join_timeout}s (state {self.state.value}"
                + (f"; last error: {type(last).__name__}: {last}" if last else "") + ")",
                group=self.context.group,
            ) from (last or e)
        # The application could not ask for records while connect() joined:
        # its max_poll_interval starts now.
        session.poll(_now())
        self._group_task = self.tasks.spawn(self._run(), "group")
        self.tasks.spawn(self.heartbeats.run(), "heartbeats")
        self.tasks.spawn(self._watch_metadata(), "group metadata")

    async def leave(self) -> None:
        """Hand everything back (revoke and commit, or lose without a session),
        then LeaveGroup (not for a static member), within ``leave_timeout``."""
        if self.closing:
            return
        self.closing = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.leave_timeout
        await self.tasks.cancel(self.settings.leave_timeout)
        try:
            await within(self._hand_back(), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            log.warning("%s", GroupError(
                f"member {self.member_id} could not leave within leave_timeout="
                f"{self.settings.leave_timeout}s; the coordinator drops it after "
                "session_timeout", group=self.context.group))
        except KielError as e:
            log.warning("%s", GroupError(
                f"member {self.member_id} left uncleanly: {type(e).__name__} {e}; the "
                "coordinator drops it after session_timeout", group=self.context.group))
        self.protocol.fire(Event.CLOSE)

    async def close(self) -> None:
        """Nothing to free: the connections are the consumer's."""

    async def _hand_back(self) -> None:
        self.owned.take_back_moving()  # what a cancelled rebalance was moving goes back too
        self._handing_back = True
        await self.owned.give_up()
        await self.protocol.leave_group(dropped_ok=True)
        self.forget()

    def forget(self) -> None:
        """Forget the member id and generation (left, dropped, fenced)."""
        self.protocol.forget()
        self.owned.generation = -1

    def fail(self, error: BaseException) -> None:
        """A fatal answer: stop, lose what is owned, tell the application."""
        log.error("group %s: %s; the member stops", self.context.group, error)
        self.failure = error
        self.protocol.fire(Event.FAIL)
        self.owned.lose()
        self.forget()

    # ------------------------------------------------------------------
    # the group task

    def request_rejoin(self) -> None:
        """Rebalance on the group task (once, however often asked meanwhile)."""
        self._rejoin = True
        self._wake.fire()

    async def _run(self) -> None:
        """Rebalance whenever asked to, one at a time, until the member leaves or fails."""
        try:
            while not self.closing:
                while not self._rejoin:
                    await self._wake.wait()
                self._rejoin = False
                try:
                    await self.rebalance.run()
                except FATAL as e:
                    self.fail(e)
                    return
        except ClientClosedError:
            return

    # ------------------------------------------------------------------
    # leaving for max_poll_interval, and metadata changes

    async def leave_for_poll(self) -> None:
        """The application went ``max_poll_interval`` without asking for records: leave.

        A rebalance under way is stopped first (it may be waiting for the
        very application that is stuck, or joining a generation this member
        leaves); what it was moving is handed back here, without waiting for
        what the application holds (lost). The group task starts again,
        idle: the member joins again when the application asks.
        """
        try:
            await self._leave_for_poll()
        finally:
            if not self.closing and (self._group_task is None or self._group_task.done()):
                self._rejoin = False  # what was asked before it left is moot
                self._group_task = self.tasks.spawn(self._run(), "group")

    async def _leave_for_poll(self) -> None:
        if self.state not in POLL_JUDGED:
            return
        interval = self.settings.max_poll_interval
        log.warning("group %s: no records asked for in max_poll_interval=%ss; member %s "
                    "leaves the group (its partitions go to others) and joins again at the "
                    "next consume()", self.context.group, interval, self.member_id)
        self.failure = PollIntervalExceededError(
            f"the application did not ask for records within max_poll_interval={interval}s: "
            "this member left the group and its partitions went to others; it joins again "
            "now (raise max_poll_interval, or ask for records more often)",
            group=self.context.group,
        )
        self.owned.take_back_moving()
        group_task = self._group_task
        if group_task is not None and not group_task.done():
            group_task.cancel()
            await asyncio.wait([group_task], timeout=self.settings.leave_timeout)
        if self.state not in POLL_JUDGED:
            return  # failed meanwhile (fatal answer): nothing to leave
        self.protocol.fire(Event.POLL_EXPIRED)
        await self.owned.give_up_stuck(self.member_id)
        try:
            await self.protocol.leave_group()
        except KielError as e:
            log.warning("group %s: LeaveGroup failed (%r); the session ends on its own",
                        self.context.group, e)
        self.forget()
        self.protocol.fire(Event.LEFT)

    async def _watch_metadata(self) -> None:
        """Every ``metadata_max_age``: a pattern's new matches, or (as leader) a
        topic that grew, start a rebalance."""
        while not self.closing:
            await asyncio.sleep(self.context.cluster.metadata_max_age)
            if self.state is not State.STABLE:
                continue
            try:
                changed = await self.leader.changed(self.protocol.leading)
            except KielError as e:
                log.warning("group %s: reading metadata failed (%s)", self.context.group, e)
                continue
            if changed:
                log.info("group %s: subscribed topics or partitions changed; rebalancing",
                         self.context.group)
                self.request_rejoin()


def _now() -> float:
    return asyncio.get_running_loop().time()
