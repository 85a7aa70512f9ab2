"""Group membership, allocation and partition ownership in ZooKeeper.

A :class:`GroupMember` is one member of a consumer group. It registers under
``/consumers/<group>/ids/<member_id>``, watches the other members and the
subscribed topics' partitions, asks the allocator which partitions it should
own, and moves ownership (``/consumers/<group>/owners/<topic>/<partition>``)
with a safe hand-off. It knows nothing about fetching: the consumer plugs in
:class:`PartitionHooks`, which stop and start fetching and run the listener.

Invariants (see ``docs/guides/grouped_consumer.rst`` for the argument):

1. A partition is handed to ``hooks.assigned`` only after this member's
   *current* session created its owner znode; it is handed to
   ``hooks.revoked`` (which stops fetching, waits for records in the
   application's hands, runs the listener and commits) *before* the owner
   znode is deleted. ZooKeeper allows one owner znode per partition, so at
   most one member fetches a partition at any instant.
2. Reconcile runs one at a time. Changes that arrive meanwhile set a dirty
   flag and reconcile runs again when it finishes.
3. SUSPENDED stops fetching at once (we may no longer own anything); CONNECTED
   on the same session resumes; LOST (session expired) reports the owned
   partitions as lost (no commit), registers again under the new session and
   reconciles.
4. An owner znode is forgotten only once its delete (or its absence) is
   confirmed: until then it is in ``maybe_held``, which every reconcile and
   :meth:`GroupMember.leave` release again. A create whose reply was lost is
   recognised as ours by its ``ephemeralOwner``.

Everything here runs on the IOLoop; kazoo's threads only reach it through the
bridge inside :class:`~kiel.zookeeper.client.ZooKeeper`.
"""

import asyncio
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from re import Pattern
from typing import (
    Any,
    Callable,
    Optional,
    Union,
)

from kazoo.client import KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from kiel._aio import Tasks, Wakeup
from kiel.allocators import Allocator, allocate, round_robin
from kiel.exc import AllocationError, ClientClosedError, ConfigError, GroupError, ZooKeeperError
from kiel.retry import Backoff, attempts
from kiel.structs import TopicPartition
from kiel.zookeeper.client import ZooKeeper
from kiel.zookeeper.ownership import Owners

log = logging.getLogger(__name__)

#: Retries of a reconcile pass that failed (ZooKeeper trouble, a failing
#: hook). Unbounded: the group must not stall; they end when the member leaves.
RECONCILE_BACKOFF = Backoff(0.5, 5.0, retries=None)
#: Retries of registering again under a new session after an expiry.
#: Unbounded too, and ended by :meth:`GroupMember.leave` as well.
REJOIN_BACKOFF = Backoff(1.0, 10.0, retries=None)


class PartitionHooks:
    """What a consumer does when ownership changes. All are awaited on the loop.

    The default implementations do nothing, so a member can be exercised on
    its own (tests, tooling).
    """

    async def assigned(self, partitions: list[TopicPartition]) -> None:
        """Ownership acquired: fetch committed offsets, run the listener, start fetching."""

    async def revoked(self, partitions: list[TopicPartition]) -> None:
        """About to release: stop fetching, wait for in-hand records, run the listener, commit."""

    async def lost(self, partitions: list[TopicPartition]) -> None:
        """Ownership lost with the session: stop fetching, run the listener, no commit."""

    def suspend(self) -> None:
        """ZooKeeper connection suspended: stop fetching everything at once."""

    def resume(self) -> None:
        """Connection back on the same session: fetch the owned partitions again."""


def default_member_id() -> str:
    """``<host>-<pid>-<random>``: unique per process, stable for its life."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class GroupMember:
    """One member of a ZooKeeper-coordinated consumer group.

    Args:
        zk: a started :class:`~kiel.zookeeper.client.ZooKeeper`.
        group: the group name.
        topics: subscribed topic names, or a compiled regex / pattern string
            (``pattern=True``) matched against ``/brokers/topics``.
        hooks: the consumer's :class:`PartitionHooks`.
        allocator: ``allocator(members, partitions) -> {member: {topic: [ids]}}``;
            its result is checked with :func:`kiel.allocators.validate`.
        member_id: this member's id (default :func:`default_member_id`).
        capacity: advertised in the registration (weighted allocators read it).
        acquire_timeout: seconds to wait for a previous owner to release a
            partition before the allocation is recomputed.
        pattern: ``topics`` is a regular expression (a string).
        leave_timeout: seconds :meth:`leave` takes at most (ZooKeeper may be
            unreachable when the member leaves).
        topics_from_zookeeper: learn the topics and their partition counts
            from ``/brokers/topics`` (the 0.8 layout, where brokers register
            in this ZooKeeper). ``False``: the caller tells them with
            :meth:`set_partition_counts` (from the brokers' metadata, for a
            cluster whose brokers are not in this ZooKeeper), before
            :meth:`join` and whenever they change.

    Raises:
        ConfigError: bad group name, topics or allocator.
    """

    def __init__(
        self,
        zk: ZooKeeper,
        group: str,
        topics: Union[Iterable[str], Pattern[str], str],
        hooks: Optional[PartitionHooks] = None,
        allocator: Allocator = round_robin,
        member_id: Optional[str] = None,
        capacity: float = 1.0,
        acquire_timeout: float = 30.0,
        pattern: bool = False,
        leave_timeout: float = 10.0,
        topics_from_zookeeper: bool = True,
    ) -> None:
        if not group or "/" in group:
            raise ConfigError(f"bad group name {group!r}")
        if not callable(allocator):
            raise ConfigError("allocator must be callable(members, partitions)")
        self.zk = zk
        self.group = group
        self.hooks = hooks or PartitionHooks()
        self.allocator = allocator
        self.member_id = member_id or default_member_id()
        self.capacity = capacity
        self.acquire_timeout = acquire_timeout
        self.leave_timeout = leave_timeout
        self.topics_from_zookeeper = topics_from_zookeeper
        self.pattern, self.static_topics = _subscription(topics, pattern)
        self.base = f"/consumers/{group}"
        self.owners = Owners(zk, self.base, self.member_id)
        # State, on the loop only.
        self.members: list[str] = []
        self.topic_partitions: dict[str, int] = {}
        self.target: set[TopicPartition] = set()
        self.owned: set[TopicPartition] = set()
        #: Partitions whose owner znode the current session may hold without
        #: using it: a release or claim that failed half-way, partitions
        #: claimed when a later claim failed, those of a session that changed
        #: under a claim. Every reconcile releases them (or confirms them
        #: by claiming them when they are wanted); only a confirmed delete
        #: (or NoNode, or another session's node) forgets one.
        self.maybe_held: set[TopicPartition] = set()
        self._session: Optional[int] = None
        # Strategy: one flag and one wake-up for every change. ``_dirty``
        # says a reconcile pass is due; ``_changed`` wakes whoever waits on
        # the state now (the reconcile loop, settled(), a pending acquire),
        # and each of them re-reads the state it cares about.
        self._dirty = False
        self._changed = Wakeup()
        self._tasks = Tasks(f"kiel-group-{group}/{self.member_id}")
        self._rejoining: Optional[asyncio.Task[None]] = None
        self._topic_watches: set[str] = set()
        # Until the topic list and every topic's partition map have been read
        # once, an allocation would be premature.
        self._topics_listed = False
        self._pending_topics: set[str] = set()
        self._reconciled = False  # a reconcile pass has run at least once
        self._in_pass = False  # a reconcile pass is running now
        self._closing = False
        self._suspended = False
        #: Each member's subscription (from its registration), read once per
        #: member: which topics it takes partitions of.
        self._subscriptions: dict[str, Callable[[str], bool]] = {}
        #: When not None (the "weighted" allocator), filled with each member's
        #: advertised capacity (from its registration) before every allocation.
        self.capacities: Optional[dict[str, float]] = None
        #: The last error of a rebalance step (allocator, listener, hook), for
        #: the consumer to raise to the application; it clears it when raised.
        self.failure: Optional[BaseException] = None

    # ------------------------------------------------------------------
    # public

    @property
    def topics(self) -> list[str]:
        """Currently subscribed topics (pattern matches included)."""
        return sorted(self.topic_partitions)

    async def join(self, timeout: float = 60.0) -> None:
        """Register, start watching, and wait for the first allocation to settle.

        Args:
            timeout: seconds to wait for the first allocation.

        Raises:
            GroupError: the first reconcile did not finish within ``timeout``.
            kazoo.exceptions.KazooException: ZooKeeper failed while registering.
        """
        self.zk.add_state_listener(self._on_state)
        await self._ensure_paths()
        await self._register()
        await self.zk.children_watch(f"{self.base}/ids", self._on_members)
        if not self.topics_from_zookeeper:
            pass  # set_partition_counts() tells them
        elif self.pattern is not None:
            await self.zk.children_watch("/brokers/topics", self._on_topic_list)
        else:
            self._on_topic_list(self.static_topics)
        self._tasks.spawn(self._reconcile_loop(), "reconcile")
        self._mark_dirty()
        try:
            await asyncio.wait_for(self.settled(), timeout)
        except asyncio.TimeoutError as e:
            raise GroupError(
                f"first allocation did not settle within {timeout}s", group=self.group
            ) from e

    async def settled(self) -> None:
        """Wait until a reconcile pass finishes with nothing left to do.

        Unbounded on its own: wrap it in :func:`asyncio.wait_for`.
        """
        while not self._is_settled():
            await self._changed.wait()

    def _is_settled(self) -> bool:
        return (
            self._reconciled
            and not self._in_pass
            and not self._dirty
            and self.target == self.owned
            and not self.maybe_held
            and self.member_id in self.members
            and self._topics_listed
            and not self._pending_topics
        )

    async def leave(self) -> None:
        """Leave gracefully: revoke (listener + commit) and release everything, deregister.

        Every background task of this member (reconcile and its retries, a
        re-registration after an expiry, pending acquisitions) is cancelled
        first. The whole leave is bounded by ``leave_timeout``: ZooKeeper
        may be unreachable, and then the owner znodes and the registration
        stay until the server ends the session (stopping the session, or its
        expiry); the next owners wait for them on watches. While the
        connection is suspended (or the session is gone) nothing is
        committed: the partitions are reported lost, since another member
        may own them already.
        """
        if self._closing:
            return
        self._closing = True
        self.zk.remove_state_listener(self._on_state)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.leave_timeout
        await self._tasks.cancel(self.leave_timeout)
        try:
            await asyncio.wait_for(self._hand_back(), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            log.warning(
                "%s", GroupError(
                    f"member {self.member_id} could not leave within leave_timeout="
                    f"{self.leave_timeout}s (ZooKeeper unreachable?); its znodes go when "
                    "its session ends", group=self.group,
                ),
            )
        except (KazooException, ZooKeeperError) as e:
            # The registration and owner znodes are ephemeral: they go with
            # the session, which the caller stops next.
            log.warning("%s", GroupError(
                f"member {self.member_id} left uncleanly: {type(e).__name__} {e}; its znodes "
                "go when its session ends", group=self.group,
            ))

    async def _hand_back(self) -> None:
        """Revoke (or, without a live session, lose) what is owned, release it, deregister."""
        if self.owned:
            owned = sorted(self.owned)
            if self._suspended or not self._session_current():
                self.owned.clear()
                await self.hooks.lost(owned)
                return
            await self.hooks.revoked(owned)
            await self._release(owned)
        if self.maybe_held and self._session_current():
            await self._release(sorted(self.maybe_held))
        try:
            await self.zk.delete(f"{self.base}/ids/{self.member_id}")
        except NoNodeError:
            pass

    def may_commit(self) -> bool:
        """Whether what this member owns is surely still its own: connected,
        under the session it registered with. A commit otherwise could
        overwrite the offset of a member that took a partition over."""
        return not self._suspended and self._session_current()

    def _session_current(self) -> bool:
        """Whether this member is registered under the session it has now."""
        return self._session is not None and self._session == self.zk.session_id

    def _left(self) -> bool:
        return self._closing

    # ------------------------------------------------------------------
    # registration and watches (callbacks arrive on the loop via the bridge)

    async def _ensure_paths(self) -> None:
        """The group's persistent znodes (idempotent)."""
        # The group's own znode stays open: the broker writes v0 commits under
        # it (``offsets``) with its own credentials. ``ids`` and ``owners`` are
        # protected (with digest auth, only this identity may change them).
        await self.zk.ensure_path(self.base)
        await self.zk.ensure_path(f"{self.base}/ids", protected=True)
        await self.zk.ensure_path(f"{self.base}/owners", protected=True)

    async def _register(self) -> None:
        """Create ``ids/<member_id>`` for the current session (idempotent).

        ``_session`` becomes the session that holds the registration, which
        the caller compares with the current one (it may have changed meanwhile).

        Raises:
            GroupError: another session keeps the id past ``acquire_timeout``.
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        path = f"{self.base}/ids/{self.member_id}"
        data = self._registration()
        # Strategy: a create whose reply was lost (ConnectionLoss) may have
        # gone through; retried, it meets NodeExists on our own node. The
        # node's ephemeralOwner tells: the current session's is ours (done);
        # another session's is a previous session of ours not yet expired
        # (or a namesake): wait for it to go, bounded.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout
        while True:
            session = self.zk.session_id
            try:
                await self.zk.create(path, data, ephemeral=True, protected=True)
                self._session = session
                return
            except NodeExistsError as e:
                try:
                    _, stat = await self.zk.get(path)
                except NoNodeError:
                    stat = None  # gone between create and get: create again
                if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                    self._session = stat.ephemeralOwner
                    return
                remaining = deadline - loop.time()
                if remaining <= 0 or (
                    stat is not None and not await self.zk.wait_deleted(path, remaining)
                ):
                    raise GroupError(
                        f"member id {self.member_id} is registered by another session",
                        group=self.group,
                    ) from e

    def _registration(self) -> bytes:
        """This member's ``ids/<member_id>`` data, in the 0.8 consumer's format."""
        if self.pattern is not None:
            subscription, kind = {self.pattern.pattern: 1}, "white_list"
        else:
            subscription, kind = {t: 1 for t in self.static_topics}, "static"
        registration = {
            "version": 1,
            "subscription": subscription,
            "pattern": kind,
            "timestamp": str(int(time.time() * 1000)),
            "kiel": {"host": socket.gethostname(), "pid": os.getpid(), "capacity": self.capacity},
        }
        return json.dumps(registration).encode()

    def set_partition_counts(self, counts: Mapping[str, int]) -> None:
        """The cluster's topics and their partition counts, when they do not
        come from ZooKeeper (``topics_from_zookeeper=False``).

        Only the subscribed topics (names, or pattern matches) are kept; a
        topic missing from ``counts``, or with no partitions, is not
        allocated. A change starts a rebalance.

        Raises:
            GroupError: the member reads its topics from ZooKeeper.
        """
        if self.topics_from_zookeeper:
            raise GroupError("this member reads its topics from ZooKeeper", group=self.group)
        wanted = set(self.static_topics) if self.pattern is None else None
        found = {
            topic: count for topic, count in counts.items()
            if count > 0 and (topic in wanted if wanted is not None
                              else self.pattern is not None and self.pattern.fullmatch(topic))
        }
        first = not self._topics_listed
        self._topics_listed = True
        if found != self.topic_partitions or first:
            self.topic_partitions = found
            self._mark_dirty()

    def _on_members(self, children: list[str]) -> None:
        self.members = sorted(children)
        self._mark_dirty()

    def _on_topic_list(self, topics: list[str]) -> None:
        if self._closing:
            return
        wanted = [t for t in topics if self.pattern is None or self.pattern.fullmatch(t)]
        for topic in wanted:
            if topic not in self._topic_watches:
                self._topic_watches.add(topic)
                self._pending_topics.add(topic)
                self._tasks.spawn(self._watch_topic(topic), f"watch {topic}")
        self._topics_listed = True
        self._mark_dirty()

    async def _watch_topic(self, topic: str) -> None:
        def on_data(data: Optional[bytes], stat: Any, *event: Any) -> None:
            count = _partition_count(topic, data)
            self._pending_topics.discard(topic)
            self._changed.fire()
            if count != self.topic_partitions.get(topic):
                if count:
                    self.topic_partitions[topic] = count
                else:
                    self.topic_partitions.pop(topic, None)
                self._mark_dirty()

        await self.zk.data_watch(f"/brokers/topics/{topic}", on_data)

    def _on_state(self, state: str) -> None:
        if self._closing:
            return
        if state == KazooState.SUSPENDED:
            self._suspended = True
            self.hooks.suspend()
        elif state == KazooState.CONNECTED:
            self._suspended = False
            if self._session is not None and self.zk.session_id != self._session:
                # Expired and reconnected with a new session: register again.
                self._lose_all()
                self._start_rejoin()
            else:
                self.hooks.resume()
                self._mark_dirty()
        elif state == KazooState.LOST:
            self._lose_all()

    def _lose_all(self) -> None:
        """The session is gone, and every owner znode with it: report them lost.

        They stay in ``maybe_held``: a claim queued by kazoo during the outage
        may have been sent under the new session, and the next reconcile
        releases (or confirms) what the current session holds.
        """
        lost = sorted(self.owned)
        self.maybe_held.update(self.owned)
        self.owned.clear()
        if self._session is not None:
            self._session = -1  # registered under no live session
        if lost:
            self._tasks.spawn(self.hooks.lost(lost), "lose partitions")

    def _start_rejoin(self) -> None:
        """Register under the new session: one rejoin at a time (single-flight).

        A rejoin already running goes on until the registration is the
        current session's, so a connection that flaps meanwhile needs no second one.
        """
        if self._rejoining is None or self._rejoining.done():
            self._rejoining = self._tasks.spawn(self._rejoin(), "rejoin")

    async def _rejoin(self) -> None:
        try:
            async for attempt in attempts(REJOIN_BACKOFF, closed=self._left):
                try:
                    await self._ensure_paths()
                    await self._register()
                except (KazooException, ZooKeeperError, GroupError) as e:
                    log.error("re-registering %s failed (%r); retrying", self.member_id, e)
                    attempt.failed(e)
                    continue
                if not self._session_current():
                    # The session changed again while we registered.
                    attempt.failed(GroupError("session changed while registering"))
        except ClientClosedError:
            return  # the member left meanwhile
        if not self._suspended:
            self.hooks.resume()
        self._mark_dirty()

    def _mark_dirty(self) -> None:
        self._dirty = True
        self._changed.fire()

    # ------------------------------------------------------------------
    # reconcile

    def compute_target(self) -> set[TopicPartition]:
        """This member's partitions under the current members and partitions.

        Each topic is split among the members subscribed to it (the 0.8
        Scala consumer's rule), so members whose subscriptions differ (a
        rolling deploy that adds a topic) still agree: topics with the same
        subscribers go to the allocator together, one call per such group.

        Returns:
            the partitions the allocator gives this member (none while it is
            not among the members it has seen).

        Raises:
            AllocationError: the allocator's result is invalid.
        """
        if self.member_id not in self.members:
            return set()
        by_members: dict[tuple[str, ...], list[TopicPartition]] = {}
        for topic, count in sorted(self.topic_partitions.items()):
            subscribers = tuple(m for m in self.members if self._subscribes(m, topic))
            if self.member_id in subscribers:
                by_members.setdefault(subscribers, []).extend(
                    TopicPartition(topic, p) for p in range(count)
                )
        target: set[TopicPartition] = set()
        for members, partitions in sorted(by_members.items()):
            target.update(allocate(self.allocator, list(members), partitions)[self.member_id])
        return target

    def _subscribes(self, member: str, topic: str) -> bool:
        if member == self.member_id:
            return True  # our own topics are the ones in topic_partitions
        subscribes = self._subscriptions.get(member)
        # Not read yet (or unreadable): the old rule, every member takes every topic.
        return True if subscribes is None else subscribes(topic)

    async def _read_subscriptions(self) -> None:
        """Cache each member's subscription from its registration."""
        for member in list(self._subscriptions):
            if member not in self.members:
                del self._subscriptions[member]
        for member in self.members:
            if member in self._subscriptions or member == self.member_id:
                continue
            try:
                data, _ = await self.zk.get(f"{self.base}/ids/{member}")
            except NoNodeError:
                continue  # it left; the members watch runs reconcile again
            self._subscriptions[member] = _subscription_of(data)

    def _ready(self) -> bool:
        """Whether the picture is complete enough to allocate.

        When it is not, the watch (or reconnect) that completes it marks the
        member dirty again.
        """
        return not (
            self._suspended
            or self._session is None
            or self._session != self.zk.session_id
            or not self._topics_listed
            or self._pending_topics
            or self.member_id not in self.members
        )

    async def _reconcile_loop(self) -> None:
        # Strategy: one pass at a time. Changes that arrive during a pass set
        # ``_dirty``, and the loop runs another pass once this one ends.
        try:
            while not self._closing:
                while not self._dirty:
                    await self._changed.wait()
                await self._reconcile_with_retries()
        except ClientClosedError:
            return  # left during a retry

    async def _reconcile_with_retries(self) -> None:
        """One pass, retried (with backoff) while ZooKeeper or a hook fails."""
        async for attempt in attempts(RECONCILE_BACKOFF, closed=self._left):
            self._dirty = False
            try:
                if self._ready():
                    self._reconciled = True
                    self._in_pass = True
                    try:
                        await self._reconcile()
                    finally:
                        self._in_pass = False
            except (KazooException, ZooKeeperError) as e:
                log.warning("reconcile of %s failed (%r); retrying", self.member_id, e)
                attempt.failed(e)
            except AllocationError as e:
                # Keep current ownership; the consumer raises this to the app.
                self.failure = e
                log.error("allocator returned an invalid allocation: %s", e)
            except Exception as e:  # noqa: BLE001 - a listener or hook failed
                # Surfaced by the consumer on its next call; the loop must live
                # on or the group would stall.
                self.failure = e
                log.exception("rebalance step of %s failed", self.member_id)
                attempt.failed(e)
            if attempt.error is not None:
                self._dirty = True  # settled() waits for the retry
            self._changed.fire()

    async def _reconcile(self) -> None:
        if self.capacities is not None:
            await self._read_capacities(self.capacities)
        await self._read_subscriptions()
        self.target = self.compute_target()
        release = sorted(self.owned - self.target)
        if release:
            await self.hooks.revoked(release)
            await self._release(release)
        unsure = sorted(self.maybe_held - self.target)
        if unsure:
            await self._release(unsure)
        acquire = sorted(self.target - self.owned)
        if acquire:
            await self._acquire(acquire)

    async def _read_capacities(self, capacities: dict[str, float]) -> None:
        """Cache each member's ``kiel.capacity`` (1.0 for members that do not say)."""
        for member in list(capacities):
            if member not in self.members:
                del capacities[member]
        for member in list(self.members):
            if member in capacities:
                continue
            try:
                data, _ = await self.zk.get(f"{self.base}/ids/{member}")
            except NoNodeError:
                continue  # it left; the members watch runs reconcile again
            try:
                capacities[member] = float(json.loads(data.decode())["kiel"]["capacity"])
            except (ValueError, KeyError, TypeError, AttributeError):
                capacities[member] = 1.0

    async def _release(self, partitions: list[TopicPartition]) -> None:
        """Delete the owner znodes of ``partitions`` (already revoked, or never used).

        Each stays in ``maybe_held`` until its delete is confirmed, so a
        release that fails half-way is retried by the next reconcile.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        for tp in partitions:
            self.owned.discard(tp)
            self.maybe_held.add(tp)
        for tp in partitions:
            await self.owners.release(tp)
            self.maybe_held.discard(tp)

    async def _claim(self, tp: TopicPartition) -> bool:
        """Claim ``tp`` for the current session; True once it is confirmed ours.

        A claim whose outcome is unknown (ZooKeeper failed, or the session
        changed under it) leaves ``tp`` in ``maybe_held``.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
            ZooKeeperError: the session changed during the claim.
        """
        session = self._session
        self.maybe_held.add(tp)
        claimed = await self.owners.claim(tp)
        if session != self._session or not self._session_current():
            raise ZooKeeperError(f"the session changed while claiming {tp}")
        # Claimed: confirmed ours (it goes to ``owned``). Not claimed:
        # another session's node, nothing of ours to release.
        self.maybe_held.discard(tp)
        return claimed

    async def _acquire(self, partitions: list[TopicPartition]) -> None:
        claimed: list[TopicPartition] = []
        waiting: list[TopicPartition] = []
        try:
            for tp in partitions:
                (claimed if await self._claim(tp) else waiting).append(tp)
        finally:
            # The ones confirmed before a failure are ours: use them (the
            # failure is re-raised and the reconcile retried).
            if claimed and not self._session_current():
                self.maybe_held.update(claimed)  # the session they were claimed by is gone
            elif claimed:
                self.owned.update(claimed)
                await self.hooks.assigned(claimed)
        if waiting:
            # Incremental: each contested partition waits for its previous
            # owner on a watch; whatever is free is already flowing.
            await asyncio.gather(*(self._acquire_when_free(tp) for tp in waiting))

    def _still_wanted(self, tp: TopicPartition) -> bool:
        return not self._closing and tp in self.target and not self._dirty

    async def _acquire_when_free(self, tp: TopicPartition) -> None:
        """Wait on an exists-watch for the previous owner to let go, then claim.

        Gives up (and asks for a new reconcile) when the allocation changes or
        ``acquire_timeout`` passes: the allocation may have moved on.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout
        while self._still_wanted(tp):
            remaining = deadline - loop.time()
            if remaining <= 0:
                self._mark_dirty()
                return
            if (
                await self._wait_freed(tp, remaining)
                and self._still_wanted(tp)
                and await self._claim(tp)
            ):
                self.owned.add(tp)
                await self.hooks.assigned([tp])
                return

    async def _wait_freed(self, tp: TopicPartition, timeout: float) -> bool:
        """True once ``tp`` has no owner; False after ``timeout`` or once it is no longer wanted.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        # The caller receives a ZooKeeper failure (quiet: not logged twice).
        freed = self._tasks.spawn(
            self.owners.wait_free(tp, timeout), f"wait for {tp}", quiet=(KazooException,)
        )
        try:
            while not freed.done():
                if not self._still_wanted(tp):
                    return False
                changed: asyncio.Future[Any] = self._changed.future()
                await asyncio.wait([freed, changed], return_when=asyncio.FIRST_COMPLETED)
            return freed.result()
        finally:
            freed.cancel()


def _subscription(
    topics: Union[Iterable[str], Pattern[str], str], pattern: bool
) -> "tuple[Optional[Pattern[str]], list[str]]":
    """``(pattern, static topics)`` from :class:`GroupMember`'s ``topics`` and ``pattern``.

    Raises:
        ConfigError: neither a topic nor a pattern.
    """
    if isinstance(topics, str) and pattern:
        return re.compile(topics), []
    if isinstance(topics, re.Pattern):
        return topics, []
    static = [topics] if isinstance(topics, str) else sorted(set(topics))
    if not static:
        raise ConfigError("subscribe to at least one topic or a pattern")
    return None, static


def _subscription_of(data: bytes) -> Callable[[str], bool]:
    """Which topics a registration (0.8 consumer format) subscribes to.

    ``static`` lists topics; ``white_list`` / ``black_list`` hold a regex.
    A registration that says nothing readable subscribes to every topic.
    """
    try:
        registration = json.loads(data.decode())
        subscription = dict(registration["subscription"])
        kind = registration.get("pattern", "static")
        if kind == "static":
            topics = frozenset(subscription)
            return topics.__contains__
        patterns = [re.compile(p) for p in subscription]
    except (ValueError, KeyError, TypeError, AttributeError, re.error) as e:
        log.warning("unreadable member registration (%s); counting it in for every topic", e)
        return lambda topic: True
    if kind == "white_list":
        return lambda topic: any(p.fullmatch(topic) for p in patterns)
    if kind == "black_list":
        return lambda topic: not any(p.fullmatch(topic) for p in patterns)
    return lambda topic: True


def _partition_count(topic: str, data: Optional[bytes]) -> int:
    """How many partitions ``/brokers/topics/<topic>``'s data lists (0 if none or unreadable)."""
    if not data:
        return 0
    try:
        return len(json.loads(data.decode())["partitions"])
    except (ValueError, KeyError, TypeError) as e:
        log.warning("bad partition map for %s: %s", topic, e)
        return 0


__all__ = ["GroupMember", "PartitionHooks", "default_member_id"]
