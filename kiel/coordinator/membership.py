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

Heartbeats run on their own task every ``heartbeat_interval``, whatever the
application does, so a busy application does not lose its session. An
answer REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION starts a rebalance;
UNKNOWN_MEMBER_ID, or no answer for ``session_timeout``, means the
coordinator dropped this member: its partitions are *lost* (no commit:
another member may own them) and it joins again as new. FENCED_INSTANCE_ID,
INCONSISTENT_GROUP_PROTOCOL and GROUP_AUTHORIZATION_FAILED are fatal: the
member stops and the consumer raises the typed error.

An application that does not ask for records for ``max_poll_interval``
makes the member leave on purpose (LeaveGroup): the others take its
partitions instead of waiting. It does not wait for the batch the
application is stuck on: what the application still holds is lost, the rest
revoked and committed as usual. The interval is judged in a rebalance too
(one waiting for the stuck application, or joining): the rebalance is
stopped and the member leaves. Its next
``consume()`` raises :class:`~kiel.exc.PollIntervalExceededError` and the
member joins again.

Safety among kiel members: a partition is assigned only after the
coordinator completed a generation (every member of the previous one has
rejoined, after revoking, or was dropped after its session), and a member
whose session may have ended stops fetching (lost) no later than the
coordinator drops it.
"""

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import fields
from re import Pattern
from typing import Any, Optional

from kiel._aio import Tasks, Wakeup, within
from kiel.consumer.membership import GroupContext
from kiel.coordinator.assignors import Assignor, Member
from kiel.coordinator.cooperative import generation_from
from kiel.coordinator.requests import LANE, GroupRequests
from kiel.coordinator.session import Session
from kiel.coordinator.settings import BrokerSettings
from kiel.exc import (
    AllocationError,
    ClientClosedError,
    ConfigError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KielError,
    MemberIdRequiredError,
    PollIntervalExceededError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnsupportedFeatureError,
)
from kiel.metrics import describe_partitions
from kiel.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kiel.protocol.group_membership import (
    JoinGroupProtocol,
    JoinGroupResponseV5,
    SyncGroupAssignment,
)
from kiel.retry import Backoff, attempts
from kiel.structs import TopicPartition

__all__ = ["BrokerMembership"]

log = logging.getLogger(__name__)

#: Retries of a rebalance that failed (coordinator moved or unreachable, a
#: rebalance that started again). Unbounded: the member must get back into
#: its group; they end when it leaves (and the first join has join_timeout).
REJOIN_BACKOFF = Backoff(0.1, 5.0, retries=None)
#: Errors after which the member stops: the application must change something.
FATAL = (FencedInstanceIdError, InconsistentGroupProtocolError, GroupAuthorizationFailedError,
         InvalidSessionTimeoutError, InvalidGroupIdError, GroupMaxSizeReachedError,
         UnsupportedFeatureError)
#: States in which the member is in its group (or getting into it): the
#: application's max_poll_interval is judged in each.
_IN_GROUP = ("STABLE", "REVOKING", "JOINING", "SYNCING")
#: Internal topics a pattern never matches.
_INTERNAL = ("__consumer_offsets", "__transaction_state")


class BrokerMembership:
    """One member of a group the brokers' coordinator forms.

    Args:
        context: what the consumer gives every membership.
        settings: the checked :class:`~kiel.coordinator.settings.BrokerSettings`.
    """

    #: The consumer keywords this adapter reads (the shared ones included).
    OPTIONS = tuple(f.name for f in fields(BrokerSettings))

    @classmethod
    def settings_for(cls, options: Mapping[str, Any]) -> BrokerSettings:
        """Check the options given (the others keep their defaults).

        Raises:
            ConfigError: a bad setting, or one only a ZooKeeper group reads.
        """
        unknown = sorted(set(options) - set(cls.OPTIONS))
        if unknown:
            raise ConfigError(f"{', '.join(unknown)}: only for a group kept in ZooKeeper "
                              "(pass zk_hosts)")
        return BrokerSettings(**options)

    def __init__(self, context: GroupContext, settings: BrokerSettings) -> None:
        self.context = context
        self.settings = settings
        self.hooks = context.hooks
        self.requests = GroupRequests(context.cluster, context.group, settings.group_instance_id)
        # The group's commits go on the group's own coordinator connection too.
        context.offsets.lane = LANE
        #: The member id the coordinator gave (``None``: none yet).
        self.member_id: Optional[str] = None
        #: The generation this member's assignment belongs to (-1: none).
        self.generation = -1
        #: The leader's member id in the current generation.
        self.leader: Optional[str] = None
        #: The assignor the coordinator chose.
        self.protocol: Optional[str] = None
        #: ``UNJOINED``, ``REVOKING``, ``JOINING``, ``SYNCING``, ``STABLE``,
        #: ``LEFT`` (max_poll_interval passed), ``FAILED`` or ``CLOSED``.
        self.state = "UNJOINED"
        self.failure: Optional[BaseException] = None
        #: The partitions this member owns now.
        self.owned: list[TopicPartition] = []
        #: Rebalances this member went through, and the last one's seconds.
        self.rebalances = 0
        self.last_rebalance_seconds: Optional[float] = None
        #: Wall-clock time (``time.time()``) of the last heartbeat answered.
        self.last_heartbeat: Optional[float] = None
        self.session = Session(settings.session_timeout, settings.max_poll_interval)
        self._assignors: dict[str, Assignor] = {a.name: a for a in settings.assignors}
        #: KIP-429: partitions stay owned through a rebalance (all of this
        #: member's assignors agree: BrokerSettings checked it).
        self.cooperative = settings.assignors[0].cooperative
        #: The generation :attr:`owned` was assigned in (a cooperative
        #: subscription's claim), -1 when nothing was.
        self._owned_generation = -1
        self._tasks = Tasks(f"kiel-group-{context.group}")
        self._wake = Wakeup()
        self._rejoin = False
        self._closing = False
        #: Partitions being revoked or assigned right now (a leave hands them back too).
        self._moving: list[TopicPartition] = []
        #: What the last assignment was computed from (as leader): rejoin when it changes.
        self._subscribed: list[str] = []
        self._counts: dict[str, int] = {}
        self._leader_topics: list[str] = []
        #: Leaving: what is owned is being handed back.
        self._handing_back = False
        #: The last error a join attempt met (said when the first join times out).
        self._last_error: Optional[KielError] = None
        #: When the revocation under way began (``None``: none is).
        self._revoking_since: Optional[float] = None
        #: The group task (rebalances), which leaving for max_poll_interval stops.
        self._group_task: Optional[asyncio.Task[None]] = None
        #: Leaving for max_poll_interval now.
        self._leaving_for_poll = False

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
        if not self.session.live(now):
            return False
        if self._revoking_since is not None and (
                now - self._revoking_since
                >= self.settings.max_poll_interval - self.settings.heartbeat_interval):
            return False
        if self.state in ("STABLE", "REVOKING"):
            return self.generation >= 0
        return self._handing_back and self.cooperative and self._owned_generation >= 0

    async def stored_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """None: a broker group keeps its offsets only with the coordinator."""
        return {}

    def poll(self) -> None:
        """The application asked for records: a member that left for being
        too slow joins again."""
        self.session.poll(_now())
        if self.state == "LEFT":
            self._request_rejoin()

    def metrics(self) -> dict[str, Any]:
        """The group's state as this member sees it."""
        return {
            "group_state": self.state,
            "member_id": self.member_id,
            "generation": self.generation,
            "leader": self.member_id is not None and self.leader == self.member_id,
            "assignor": self.protocol,
            "rebalance_protocol": "cooperative" if self.cooperative else "eager",
            "last_heartbeat": self.last_heartbeat,
            "last_rebalance_seconds": self.last_rebalance_seconds,
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
        self.session.poll(_now())
        try:
            await within(self._rebalance(first=True), self.settings.join_timeout)
        except asyncio.TimeoutError as e:
            last = self._last_error
            raise GroupError(
                f"did not join group {self.context.group!r} within join_timeout="
                f"{self.settings.join_timeout}s (state {self.state}"
                + (f"; last error: {type(last).__name__}: {last}" if last else "") + ")",
                group=self.context.group,
            ) from (last or e)
        # The application could not ask for records while connect() joined:
        # its max_poll_interval starts now.
        self.session.poll(_now())
        self._group_task = self._tasks.spawn(self._run(), "group")
        self._tasks.spawn(self._heartbeats(), "heartbeats")
        self._tasks.spawn(self._watch_metadata(), "group metadata")

    async def leave(self) -> None:
        """Hand everything back (revoke and commit, or lose without a session),
        then LeaveGroup (not for a static member), within ``leave_timeout``."""
        if self._closing:
            return
        self._closing = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.leave_timeout
        await self._tasks.cancel(self.settings.leave_timeout)
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
        self.state = "CLOSED"

    async def close(self) -> None:
        """Nothing to free: the connections are the consumer's."""

    # ------------------------------------------------------------------
    # leaving

    async def _give_up_owned(self, some: Optional[list[TopicPartition]] = None) -> None:
        """Revoke what is owned (listener, commit) while the session is live, else lose it.

        The partitions leave :attr:`owned` first, and are kept in
        ``_moving`` meanwhile, so a leave that cancels this still hands them back.

        Args:
            some: just these of the owned partitions (default: all).
        """
        if some is None:
            tps, self.owned = self.owned, []
        else:
            gone = set(some)
            tps = sorted(gone & set(self.owned))
            self.owned = [tp for tp in self.owned if tp not in gone]
        if not tps:
            return
        self._moving = tps
        self._revoking_since = _now()
        try:
            if self.may_commit():
                await self.hooks.revoked(tps)
            else:
                await self.hooks.lost(tps)
        finally:
            self._moving = []
            self._revoking_since = None

    async def _give_up_stuck(self) -> None:
        """Give up what is owned without waiting for the application, which is stuck.

        What the application still holds is what made it late: waiting for
        it (``revoke_timeout``) would keep the partitions from the others
        for the very reason this member leaves. Those are *lost* (no
        commit; the next owner delivers them again); the rest are revoked
        as usual (nothing to wait for: listener, commit).
        """
        held = self.hooks.in_hand(self.owned)
        if held:
            log.warning("group %s: member %s leaves with records of %s still in the "
                        "application's hands: lost, not revoked (the next owner delivers "
                        "them again)", self.context.group, self.member_id,
                        describe_partitions(held))
            gone = set(held)
            self.owned = [tp for tp in self.owned if tp not in gone]
            self._moving = held
            try:
                await self.hooks.lost(held)
            finally:
                self._moving = []
        await self._give_up_owned()

    async def _hand_back(self) -> None:
        # What a cancelled rebalance was moving goes back too.
        self.owned = sorted(set(self.owned) | set(self._moving))
        self._handing_back = True
        await self._give_up_owned()
        if self.member_id and self.settings.group_instance_id is None:
            # A static member stays in the group until its session ends, so
            # a restart within it gets its partitions back without a rebalance.
            try:
                await self.requests.leave(self.member_id)
            except UnknownMemberIdError:
                pass  # already dropped
        self._forget_member()

    def _forget_member(self) -> None:
        self.member_id = None
        self.generation = -1
        self._owned_generation = -1
        self.context.offsets.member_id = ""
        self.context.offsets.generation_id = -1
        self.session.end()

    # ------------------------------------------------------------------
    # the group task

    def _request_rejoin(self) -> None:
        self._rejoin = True
        self._wake.fire()

    async def _run(self) -> None:
        """Rebalance whenever asked to, one at a time, until the member leaves or fails."""
        try:
            while not self._closing:
                while not self._rejoin:
                    await self._wake.wait()
                self._rejoin = False
                try:
                    await self._rebalance()
                except FATAL as e:
                    self._fail(e)
                    return
        except ClientClosedError:
            return

    def _fail(self, error: BaseException) -> None:
        """A fatal answer: stop, lose what is owned, tell the application."""
        log.error("group %s: %s; the member stops", self.context.group, error)
        self.failure = error
        self.state = "FAILED"
        self._lose()
        self._forget_member()

    def _lose(self) -> None:
        """The coordinator may have given our partitions to others: lose them (no commit)."""
        tps, self.owned = self.owned, []
        self._owned_generation = -1
        if tps:
            self._tasks.spawn(self.hooks.lost(tps), "lose partitions")

    async def _rebalance(self, first: bool = False) -> None:
        """Revoke what is owned, join, sync, take the new assignment.

        Raises:
            a FATAL error, or (first join only) AllocationError.
            ClientClosedError: the member left meanwhile.
        """
        loop = asyncio.get_running_loop()
        started = loop.time()
        kind = "cooperative" if self.cooperative else "eager"
        if self.member_id is None:
            log.info("group %s: joining as a new member (%s)", self.context.group, kind)
        else:
            log.info("group %s: member %s joining again, leaving generation %s (%s)",
                     self.context.group, self.member_id, self.generation, kind)
        # What stopped before a first join (a close) or before a member left
        # went to others, not nowhere: not part of this rebalance's pause.
        self.hooks.rebalance_began(fresh=first or self.state == "LEFT")
        if self.owned and not self.cooperative:
            self.state = "REVOKING"
            log.info("group %s: member %s revoking %s before joining (eager)",
                     self.context.group, self.member_id, describe_partitions(self.owned))
            await self._give_up_owned()
        elif self.owned:
            # Cooperative: keep what is owned, except topics no longer subscribed to.
            wanted = set(await self._topics())
            gone = [tp for tp in self.owned if tp.topic not in wanted]
            if gone:
                self.state = "REVOKING"
                await self._give_up_owned(gone)
        async for attempt in attempts(REJOIN_BACKOFF, closed=lambda: self._closing):
            try:
                assigned = await self._join_until_synced()
            except FATAL:
                raise
            except AllocationError as e:
                if first:
                    raise
                self.failure = e
                log.error("group %s: the allocator failed: %s", self.context.group, e)
                attempt.failed(e)
                continue
            except KielError as e:
                self._last_error = e
                if not e.retriable:
                    if first:
                        raise
                    # Said to the application, and tried again: the member
                    # must not give its group up on an error it may outlive.
                    self.failure = e
                log.warning("group %s: joining failed (%r); trying again", self.context.group, e)
                attempt.failed(e)
                continue
            break
        if self.cooperative:
            await self._take_cooperatively(assigned)
        else:
            self.state = "STABLE"
            self._moving = assigned
            try:
                await self.hooks.assigned(assigned)
                self.owned = assigned
            finally:
                self._moving = []
        self._owned_generation = self.generation if self.owned else -1
        self.rebalances += 1
        self.last_rebalance_seconds = loop.time() - started
        moved = self.hooks.rebalance_ended()
        if moved is not None:
            log.info("group %s: member %s in generation %s: %s", self.context.group,
                     self.member_id, self.generation, moved)

    async def _take_cooperatively(self, assigned: list[TopicPartition]) -> None:
        """Revoke owned-minus-assigned, acquire assigned-minus-owned; keep the rest as it is.

        A member that revoked something joins again at once: the partitions
        it let go were withheld from their new owners, who get them in that
        next round.
        """
        mine = set(assigned)
        revoked = [tp for tp in self.owned if tp not in mine]
        if revoked:
            self.state = "REVOKING"
            log.info("group %s: member %s revoking %s (cooperative); joining again so "
                     "they move", self.context.group, self.member_id,
                     describe_partitions(revoked))
            await self._give_up_owned(revoked)
        self.state = "STABLE"
        kept = set(self.owned)
        added = [tp for tp in assigned if tp not in kept]
        if added:
            self._moving = added
            try:
                await self.hooks.assigned(added)
                self.owned = sorted(kept | set(added))
            finally:
                self._moving = []
        if revoked:
            self._request_rejoin()

    async def _join_until_synced(self) -> list[TopicPartition]:
        """Join and sync until a generation completes with this member in it.

        Strategy: REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION mean a new
        generation is forming; the member joins it again at once (after a
        short pause that doubles up to a second), keeping its member id
        (kafka-python once reset it here: PR #2614). UNKNOWN_MEMBER_ID: it
        joins as a new member. Other failures go to the caller's backoff.

        Raises:
            ClientClosedError: the member left meanwhile.
            KielError: as :meth:`_join_and_sync`.
        """
        pause = 0.05
        while True:
            if self._closing:
                raise ClientClosedError("the member left while joining")
            try:
                return await self._join_and_sync()
            except RebalanceInProgressError as e:
                # The coordinator counts this member in (else: UNKNOWN_MEMBER_ID),
                # and held the request until now (see Session.restarted).
                self.session.restarted(_now())
                log.debug("group %s: %s; joining again", self.context.group, type(e).__name__)
            except IllegalGenerationError as e:
                log.debug("group %s: %s; joining again", self.context.group, type(e).__name__)
            except UnknownMemberIdError:
                # Dropped: what a cooperative member kept may be another's now.
                self._lose()
                self._forget_member()
            await asyncio.sleep(pause)
            pause = min(1.0, pause * 2)

    async def _join_and_sync(self) -> list[TopicPartition]:
        """One JoinGroup (two for a new member) and SyncGroup; the partitions assigned.

        Raises:
            BrokerError: the coordinator's answer (the caller decides).
            KielError: the coordinator could not be reached.
            AllocationError: as leader, the allocator failed.
        """
        settings = self.settings
        self.state = "JOINING"
        topics = await self._topics()
        self._subscribed = topics
        protocols = [JoinGroupProtocol(a.name, self._subscription(a, topics))
                     for a in settings.assignors]
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
            raise MemberIdRequiredError(api="JoinGroup", group=self.context.group,
                                        member=self.member_id)
        # A JoinGroup the coordinator held (until every member joined) kept
        # this member alive: its session starts again from the answer.
        self.session.restarted(_now())
        self.member_id = response.member_id
        self.generation = response.generation_id
        self.leader = response.leader
        self.protocol = response.protocol_name
        assignments: list[SyncGroupAssignment] = []
        if response.leader == response.member_id:
            assignments = await self._lead(response)
        self.state = "SYNCING"
        data = await self.requests.sync(self.member_id, self.generation, assignments,
                                        settings.max_poll_interval)
        # Held until the leader synced (Tansu: up to 5 s; Apache Kafka: up to
        # the rebalance timeout): the hold does not count against the session.
        self.session.restarted(_now())
        self.last_heartbeat = time.time()
        offsets = self.context.offsets
        offsets.generation_id = self.generation
        offsets.member_id = self.member_id
        offsets.group_instance_id = settings.group_instance_id
        mine = self._mine(data, topics)
        log.info("group %s: member %s joined generation %s as %s (assignor %s); assignment: %s",
                 self.context.group, self.member_id, self.generation,
                 "leader" if self.leader == self.member_id else "follower", self.protocol,
                 describe_partitions(mine))
        return mine

    def _subscription(self, assignor: Assignor, topics: list[str]) -> bytes:
        """This member's JoinGroup metadata for ``assignor``.

        Eager: v0 (every client reads it). Cooperative: v2, with the
        partitions owned and the generation they were assigned in, so the
        leader keeps them here and hands none of them to another member
        while this one still owns it.
        """
        if not assignor.cooperative:
            return encode_subscription(ConsumerSubscription(topics, assignor.user_data))
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(self.owned):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        generation = self._owned_generation if self.owned else -1
        sub = ConsumerSubscription(topics, assignor.subscription_data(generation),
                                   sorted(by_topic.items()), generation)
        return encode_subscription(sub, version=2)

    def _mine(self, data: bytes, topics: list[str]) -> list[TopicPartition]:
        """This member's partitions from SyncGroup's answer.

        A leader that gives this member a topic it did not subscribe to
        broke the protocol: those partitions are not taken, and the
        application hears of it (:class:`~kiel.exc.AllocationError`).
        """
        _, assignment = decode_assignment(data)
        tps = sorted(TopicPartition(t, p) for t, ids in assignment.partitions for p in ids)
        wanted = set(topics)
        stray = [tp for tp in tps if tp.topic not in wanted]
        if stray:
            self.failure = AllocationError(
                f"the group's leader ({self.leader}) assigned {stray[:5]} of topics this member "
                f"does not subscribe to; they are not consumed", group=self.context.group,
                topic=stray[0].topic, partition=stray[0].partition,
            )
            log.error("%s", self.failure)
        return [tp for tp in tps if tp.topic in wanted]

    async def _lead(self, response: JoinGroupResponseV5) -> list[SyncGroupAssignment]:
        """As leader: every member's assignment from the chosen assignor.

        Raises:
            GroupError: the coordinator chose an assignor this member did not offer.
            AllocationError: the allocator's result breaks the contract.
            KielError: the partition counts could not be read.
        """
        assignor = self._assignors.get(response.protocol_name)
        if assignor is None:
            raise GroupError(f"the coordinator chose assignor {response.protocol_name!r}, "
                             f"which this member did not offer ({sorted(self._assignors)})",
                             group=self.context.group)
        members = []
        for m in response.members:
            version, sub = decode_subscription(m.metadata)
            owned = tuple(TopicPartition(t, p) for t, ids in sub.owned_partitions for p in ids)
            members.append(Member(m.member_id, m.group_instance_id or m.member_id,
                                  list(sub.topics), sub.user_data,
                                  static=m.group_instance_id is not None, owned=owned,
                                  generation=generation_from(version, sub.generation_id,
                                                             sub.user_data)))
        topics = sorted({t for m in members for t in m.topics})
        counts = await self._partition_counts(topics)
        self._leader_topics, self._counts = topics, counts
        result = assignor.assign(members, counts)
        log.debug("group %s generation %s: %s assigned %s from claims %s", self.context.group,
                  response.generation_id, assignor.name, result,
                  {m.member_id: (m.generation, m.owned) for m in members})
        out = []
        for member_id, tps in sorted(result.items()):
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            partitions = [(t, sorted(ids)) for t, ids in sorted(by_topic.items())]
            data = encode_assignment(ConsumerAssignment(partitions))
            out.append(SyncGroupAssignment(member_id, data))
        return out

    async def _topics(self) -> list[str]:
        """The topics this member subscribes to now (a pattern's current matches)."""
        wanted = self.context.topics
        if isinstance(wanted, Pattern):
            every = await self.context.cluster.all_topics()
            return sorted(t for t in every if t not in _INTERNAL and wanted.fullmatch(t))
        return list(wanted)

    async def _partition_counts(self, topics: list[str]) -> dict[str, int]:
        cluster = self.context.cluster
        if topics:
            await cluster.refresh_metadata(topics)
        return {t: len(cluster.partitions.get(t, {})) for t in topics}

    # ------------------------------------------------------------------
    # heartbeats and the poll deadline

    async def _heartbeats(self) -> None:
        """Heartbeat every ``heartbeat_interval``; judge the session and the poll deadline.

        Strategy: the deadlines are judged on a tick of their own, never
        behind a heartbeat in flight: a coordinator that stopped answering
        (a network partition: no reset, no answer) must not keep this member
        fetching past its session, however long the request waits.
        """
        interval = self.settings.heartbeat_interval
        tick = min(interval, 0.5)
        beat: Optional[asyncio.Task[None]] = None
        next_beat = _now() + interval
        while not self._closing:
            # The next tick, or the next beat if that comes first: a beat is
            # never later than its interval (one overdue waits for a tick).
            due = next_beat - _now()
            await asyncio.sleep(tick if due <= 0 else min(tick, due))
            now = _now()
            # Judged in a rebalance too: an application stuck when one began
            # would otherwise keep it (and its partitions) waiting.
            if (self.state in _IN_GROUP and not self._leaving_for_poll
                    and self.session.poll_overdue(now)):
                self._leaving_for_poll = True
                self._tasks.spawn(self._leave_for_poll(), "leave for max_poll_interval")
                continue
            if self.member_id is None or not (
                self.state in ("STABLE", "REVOKING")
                # A cooperative member keeps fetching while it rejoins: its
                # session must go on, and be judged, meanwhile.
                or (self.cooperative and self.owned and self.generation >= 0)
            ):
                continue
            if self.session.expired(now):
                if self.owned:
                    log.warning("group %s: no heartbeat answered for session_timeout=%ss; "
                                "the partitions are lost, joining again", self.context.group,
                                self.settings.session_timeout)
                self._lose()
                self._request_rejoin()
                continue
            if now >= next_beat and (beat is None or beat.done()):
                next_beat = now + interval
                beat = self._tasks.spawn(self._heartbeat_once(now), "heartbeat")

    async def _heartbeat_once(self, sent: float) -> None:
        assert self.member_id is not None
        try:
            await self.requests.heartbeat(self.member_id, self.generation,
                                          self.settings.session_timeout)
        except RebalanceInProgressError:
            self.session.answered(sent)
            if self.state == "STABLE":
                self._request_rejoin()
        except IllegalGenerationError:
            if self.cooperative and self.state != "STABLE":
                return  # rejoining already: the generation is moving
            if self.cooperative and self.owned:
                # The group went on to a generation without this member: what
                # it kept may be another's now (Java loses them too).
                log.warning("group %s: member %s is not in the current generation; its "
                            "partitions are lost, joining again", self.context.group,
                            self.member_id)
                self._lose()
            self._request_rejoin()
        except UnknownMemberIdError:
            log.warning("group %s: the coordinator does not know member %s any more; its "
                        "partitions are lost, joining again", self.context.group, self.member_id)
            self._lose()
            self._forget_member()
            self._request_rejoin()
        except FATAL as e:
            self._fail(e)
        except KielError as e:
            # The coordinator moved or is unreachable: the next beat looks it
            # up again; the session deadline decides when it is too late.
            log.info("group %s: heartbeat failed (%r)", self.context.group, e)
        else:
            self.session.answered(sent)
            self.last_heartbeat = time.time()

    async def _leave_for_poll(self) -> None:
        """The application went ``max_poll_interval`` without asking for records: leave.

        A rebalance under way is stopped first (it may be waiting for the
        very application that is stuck, or joining a generation this member
        leaves); what it was moving is handed back here. The group task
        starts again, idle: the member joins again when the application asks.
        """
        try:
            await self._leave_for_poll_now()
        finally:
            self._leaving_for_poll = False
            if not self._closing and (self._group_task is None or self._group_task.done()):
                self._rejoin = False  # what was asked before it left is moot
                self._group_task = self._tasks.spawn(self._run(), "group")

    async def _leave_for_poll_now(self) -> None:
        if self.state not in _IN_GROUP:
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
        # What a rebalance was revoking or assigning is still this member's
        # to hand back (the rebalance's own bookkeeping ends as it is stopped).
        self.owned = sorted(set(self.owned) | set(self._moving))
        group_task = self._group_task
        if group_task is not None and not group_task.done():
            group_task.cancel()
            await asyncio.wait([group_task], timeout=self.settings.leave_timeout)
        self.state = "REVOKING"
        await self._give_up_stuck()
        try:
            if self.member_id and self.settings.group_instance_id is None:
                await self.requests.leave(self.member_id)
        except KielError as e:
            log.warning("group %s: LeaveGroup failed (%r); the session ends on its own",
                        self.context.group, e)
        self._forget_member()
        self.state = "LEFT"

    # ------------------------------------------------------------------
    # subscriptions and partition counts

    async def _watch_metadata(self) -> None:
        """Every ``metadata_max_age``: a pattern's new matches, or (as leader) a
        topic that grew, start a rebalance."""
        cluster = self.context.cluster
        while not self._closing:
            await asyncio.sleep(cluster.metadata_max_age)
            if self.state != "STABLE":
                continue
            try:
                changed = await self._topics() != self._subscribed
                if not changed and self.leader == self.member_id and self._leader_topics:
                    changed = await self._partition_counts(self._leader_topics) != self._counts
            except KielError as e:
                log.warning("group %s: reading metadata failed (%s)", self.context.group, e)
                continue
            if changed:
                log.info("group %s: subscribed topics or partitions changed; rebalancing",
                         self.context.group)
                self._request_rejoin()


def _now() -> float:
    return asyncio.get_running_loop().time()
