"""Group membership in ZooKeeper: one member's life cycle and its reconcile loop.

A :class:`GroupMember` is one member of a consumer group. It registers under
``/consumers/<group>/ids/<member_id>``, follows its ZooKeeper session, and
runs the reconcile loop, one pass at a time, over two parts:

- :class:`~kiel.zookeeper.view.GroupView` watches the other members and the
  subscribed topics' partitions and asks the allocator which partitions this
  member should own;
- :class:`~kiel.zookeeper.handoff.Handoff` moves ownership
  (``/consumers/<group>/owners/<topic>/<partition>``) with a safe hand-off.

It knows nothing about fetching: the consumer plugs in
:class:`~kiel.zookeeper.handoff.PartitionHooks`, which stop and start
fetching and run the listener.

Invariants (see ``docs/guides/grouped_consumer.rst`` for the argument; the
hand-off's own are in :mod:`kiel.zookeeper.handoff`):

1. Reconcile runs one at a time. Changes that arrive meanwhile set a dirty
   flag and reconcile runs again when it finishes.
2. SUSPENDED stops fetching at once (we may no longer own anything); CONNECTED
   on the same session resumes; LOST (session expired) reports the owned
   partitions as lost (no commit), registers again under the new session and
   reconciles.

Everything here runs on the IOLoop; kazoo's threads only reach it through the
bridge inside :class:`~kiel.zookeeper.client.ZooKeeper`.
"""

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Iterable, Mapping
from re import Pattern
from typing import Generic, Optional, TypeVar, Union, cast, overload

from kazoo.client import KazooState
from kazoo.exceptions import (
    KazooException,
    NodeExistsError,
    NoNodeError,
)

from kiel._aio import Tasks, within
from kiel.allocators import Allocator, round_robin
from kiel.exc import AllocationError, ClientClosedError, ConfigError, GroupError, ZooKeeperError
from kiel.metrics import describe_partitions
from kiel.retry import Backoff, attempts
from kiel.structs import TopicPartition
from kiel.zookeeper import registration
from kiel.zookeeper.changes import Changes
from kiel.zookeeper.client import CONNECTION_LOST, ZooKeeper, translate
from kiel.zookeeper.handoff import Handoff, PartitionHooks
from kiel.zookeeper.ownership import Owners
from kiel.zookeeper.view import GroupView

log = logging.getLogger(__name__)

#: Retries of a reconcile pass that failed (ZooKeeper trouble, a failing
#: hook). Unbounded: the group must not stall; they end when the member leaves.
RECONCILE_BACKOFF = Backoff(0.5, 5.0, retries=None)
#: Retries of registering again under a new session after an expiry.
#: Unbounded too, and ended by :meth:`GroupMember.leave` as well.
REJOIN_BACKOFF = Backoff(1.0, 10.0, retries=None)
#: Retries of a first registration that a lost connection cut off; bounded
#: by the join's own timeout.
ENTER_BACKOFF = Backoff(0.1, 2.0, retries=None)

T = TypeVar("T")


def default_member_id() -> str:
    """``<host>-<pid>-<random>``: unique per process, stable for its life."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class _Kept(Generic[T]):
    """A :class:`GroupMember` attribute that one of its parts keeps.

    Strategy: the view and the hand-off own their state; the member's
    attributes of the same name read and write it there, so there is one
    copy of each and the member's public attributes stay what they were.
    """

    def __init__(self, part: str, doc: str) -> None:
        self.part = part
        self.name = ""
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, member: None, owner: Optional[type] = None) -> "_Kept[T]": ...

    @overload
    def __get__(self, member: "GroupMember", owner: Optional[type] = None) -> T: ...

    def __get__(
        self, member: Optional["GroupMember"], owner: Optional[type] = None
    ) -> Union[T, "_Kept[T]"]:
        if member is None:
            return self
        return cast(T, getattr(getattr(member, self.part), self.name))

    def __set__(self, member: "GroupMember", value: T) -> None:
        setattr(getattr(member, self.part), self.name, value)


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

    # What the view keeps (see kiel.zookeeper.view).
    members = _Kept[list[str]]("view", "The group's members, sorted.")
    topic_partitions = _Kept[dict[str, int]]("view", "Subscribed topics -> partition count.")
    capacities = _Kept[Optional[dict[str, float]]](
        "view", "When not None (the \"weighted\" allocator), filled with each member's "
        "advertised capacity before every allocation.",
    )
    pattern = _Kept[Optional[Pattern[str]]]("view", "The subscribed pattern, or None.")
    static_topics = _Kept[list[str]]("view", "The subscribed topic names (none with a pattern).")
    allocator = _Kept[Allocator]("view", "The group's allocator.")
    topics_from_zookeeper = _Kept[bool]("view", "Topics come from ``/brokers/topics``.")
    # What the hand-off keeps (see kiel.zookeeper.handoff).
    target = _Kept[set[TopicPartition]]("handoff", "The partitions of the last allocation.")
    owned = _Kept[set[TopicPartition]](
        "handoff", "Partitions whose owner znode the current session created."
    )
    maybe_held = _Kept[set[TopicPartition]](
        "handoff", "Partitions whose owner znode the current session may hold unused."
    )
    owners = _Kept[Owners]("handoff", "The group's owner znodes.")
    hooks = _Kept[PartitionHooks]("handoff", "The consumer's hooks.")
    acquire_timeout = _Kept[float]("handoff", "Seconds to wait for a previous owner.")

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
        self.member_id = member_id or default_member_id()
        self.capacity = capacity
        self.leave_timeout = leave_timeout
        self._changes = Changes()
        self._tasks = Tasks(f"kiel-group-{group}/{self.member_id}")
        self.view = GroupView(
            zk, group, self.member_id, registration.subscription(topics, pattern),
            allocator, topics_from_zookeeper, self._changes, self._tasks,
        )
        self.base = self.view.base
        self.handoff = Handoff(
            Owners(zk, self.base, self.member_id), hooks or PartitionHooks(), acquire_timeout,
            self._live_session, self._changes, self._tasks,
        )
        # The session the registration was created by (-1: none live).
        self._session: Optional[int] = None
        self._suspended = False
        self._rejoining: Optional[asyncio.Task[None]] = None
        self._reconciled = False  # a reconcile pass has run at least once
        self._in_pass = False  # a reconcile pass is running now
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

        A step that a lost connection to ZooKeeper cut off is tried again
        once kazoo has reconnected (a server restart while a member starts).

        Args:
            timeout: seconds the whole join may take: registering, then the
                first allocation.

        Raises:
            ZooKeeperError: not registered within ``timeout`` (ZooKeeper
                unreachable), or ZooKeeper refused a step (e.g. no permission).
            GroupError: the member id is registered by another session past
                ``acquire_timeout``, or the first allocation did not settle
                within ``timeout``.
            AllocationError: the allocator raised or returned an invalid
                allocation before the first one settled (at once).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        self.zk.add_state_listener(self._on_state)
        try:
            await within(self._enter(), timeout)
        except asyncio.TimeoutError as e:
            raise ZooKeeperError(
                f"member {self.member_id} could not register within {timeout}s "
                "(ZooKeeper unreachable?)", group=self.group,
            ) from e
        # The first allocation's pause runs from here (what stopped before,
        # at a close, went to others).
        self.hooks.rebalance_began(fresh=True)
        self._tasks.spawn(self._reconcile_loop(), "reconcile")
        self._changes.mark_dirty()
        try:
            await within(self._first_allocation(), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError as e:
            raise GroupError(
                f"first allocation did not settle within {timeout}s", group=self.group
            ) from e

    async def _enter(self) -> None:
        """The group's paths, this member's registration and the watches.

        Unbounded on its own (:meth:`join` bounds it): a step cut off by a
        lost connection is tried again, and each step is idempotent, so a
        retry redoes only what did not happen.

        Raises:
            ZooKeeperError: ZooKeeper refused a step.
            GroupError: another session keeps the member id.
        """
        async for attempt in attempts(ENTER_BACKOFF, closed=self._left):
            try:
                await self._ensure_paths()
                await self._register()
                await self.view.watch()
            except CONNECTION_LOST as e:
                log.warning("registering %s was cut off (%r); trying again once "
                            "ZooKeeper is back", self.member_id, e)
                attempt.failed(e)
            except KazooException as e:
                raise translate(e, f"registering member {self.member_id}") from e

    async def _first_allocation(self) -> None:
        """Wait until settled; an allocator that fails before that fails the join at once.

        Raises:
            AllocationError: the allocator raised, or returned an invalid
                allocation (waiting on would only run out ``join_timeout``).
        """
        while True:
            # A pass the allocator failed ends "settled" too, owning nothing.
            if isinstance(self.failure, AllocationError):
                failure, self.failure = self.failure, None
                raise failure
            if self._is_settled():
                return
            await self._changes.wait()

    async def settled(self) -> None:
        """Wait until a reconcile pass finishes with nothing left to do.

        Unbounded on its own: bound it (kiel does with :func:`kiel._aio.within`).
        """
        while not self._is_settled():
            await self._changes.wait()

    def _is_settled(self) -> bool:
        return (
            self._reconciled
            and not self._in_pass
            and not self._changes.dirty
            and self.handoff.settled()
            and self.view.complete()
        )

    def compute_target(self) -> set[TopicPartition]:
        """This member's partitions under the current members and partitions.

        See :meth:`kiel.zookeeper.view.GroupView.compute_target`.

        Raises:
            AllocationError: the allocator's result is invalid.
        """
        return self.view.compute_target()

    def set_partition_counts(self, counts: Mapping[str, int]) -> None:
        """The cluster's topics and their partition counts, when they do not
        come from ZooKeeper (``topics_from_zookeeper=False``).

        See :meth:`kiel.zookeeper.view.GroupView.set_partition_counts`.

        Raises:
            GroupError: the member reads its topics from ZooKeeper.
        """
        self.view.set_partition_counts(counts)

    def may_commit(self) -> bool:
        """Whether what this member owns is surely still its own: connected,
        under the session it registered with. A commit otherwise could
        overwrite the offset of a member that took a partition over."""
        return not self._suspended and self._session_current()

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
        if self._changes.closing:
            return
        self._changes.closing = True
        self.zk.remove_state_listener(self._on_state)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.leave_timeout
        await self._tasks.cancel(self.leave_timeout)
        try:
            await within(self._hand_back(), max(0.0, deadline - loop.time()))
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
        handoff = self.handoff
        if handoff.owned:
            if not self.may_commit():
                await handoff.lose_owned()
                return
            await handoff.revoke(sorted(handoff.owned))
        if handoff.maybe_held and self._session_current():
            await handoff.release(sorted(handoff.maybe_held))
        try:
            await self.zk.delete(f"{self.base}/ids/{self.member_id}")
        except NoNodeError:
            pass

    # ------------------------------------------------------------------
    # registration and session (state changes arrive on the loop via the bridge)

    def _session_current(self) -> bool:
        """Whether this member is registered under the session it has now."""
        return self._session is not None and self._session == self.zk.session_id

    def _live_session(self) -> Optional[int]:
        """The session this member is registered under if it is the current one."""
        return self._session if self._session_current() else None

    def _left(self) -> bool:
        return self._changes.closing

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
        data = registration.encode((self.pattern, self.static_topics), self.capacity)
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
                self._registered()
                return
            except NodeExistsError as e:
                try:
                    _, stat = await self.zk.get(path)
                except NoNodeError:
                    stat = None  # gone between create and get: create again
                if stat is not None and self.owners.ours(stat):  # ConnectionLoss if it cannot tell
                    self._session = stat.ephemeralOwner
                    self._registered()
                    return
                remaining = deadline - loop.time()
                if remaining <= 0 or (
                    stat is not None and not await self.zk.wait_deleted(path, remaining)
                ):
                    raise GroupError(
                        f"member id {self.member_id} is registered by another session",
                        group=self.group,
                    ) from e

    def _registered(self) -> None:
        log.info("group %s: member %s joined (registered under ZooKeeper session %s)",
                 self.group, self.member_id,
                 "?" if self._session is None else f"0x{self._session:x}")

    def _on_state(self, state: str) -> None:
        if self._changes.closing:
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
                self._changes.mark_dirty()
        elif state == KazooState.LOST:
            self._lose_all()

    def _lose_all(self) -> None:
        """The session is gone, and every owner znode with it: report them lost."""
        lost = self.handoff.session_gone()
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
        self._changes.mark_dirty()

    # ------------------------------------------------------------------
    # reconcile

    def _ready(self) -> bool:
        """Whether the picture is complete enough to allocate.

        When it is not, the watch (or reconnect) that completes it marks the
        member dirty again.
        """
        return not self._suspended and self._session_current() and self.view.complete()

    async def _reconcile_loop(self) -> None:
        # Strategy: one pass at a time. Changes that arrive during a pass set
        # ``dirty``, and the loop runs another pass once this one ends.
        changes = self._changes
        try:
            while not changes.closing:
                while not changes.dirty:
                    await changes.wait()
                await self._reconcile_with_retries()
        except ClientClosedError:
            return  # left during a retry

    async def _reconcile_with_retries(self) -> None:
        """One pass, retried (with backoff) while ZooKeeper or a hook fails."""
        async for attempt in attempts(RECONCILE_BACKOFF, closed=self._left):
            self._changes.dirty = False
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
                self._changes.dirty = True  # settled() waits for the retry
            self._changes.fire()

    async def _reconcile(self) -> None:
        """Read the registrations the allocation needs, compute the target, move to it.

        This member's rebalance (what the hooks time) runs over passes until
        its allocation is owned and fetching; the pass that gets there says
        what moved.
        """
        hooks = self.hooks
        hooks.rebalance_began()
        await self.view.read_registrations()
        handoff = self.handoff
        target = self.view.compute_target()
        if target != handoff.target:
            log.info("group %s: member %s allocated %s among %d members", self.group,
                     self.member_id, describe_partitions(target), len(self.members))
        release = handoff.owned - target
        if release:
            log.info("group %s: member %s revoking %s (the allocation moved them)",
                     self.group, self.member_id, describe_partitions(release))
        await handoff.move_to(target)
        if handoff.owned != handoff.target:
            # A partition's wait for its previous owner gave up (a newer
            # allocation, acquire_timeout): the rebalance goes on in the next pass.
            return
        moved = hooks.rebalance_ended()
        if moved is not None:
            log.info("group %s: member %s's allocation in place: %s", self.group,
                     self.member_id, moved)


__all__ = ["GroupMember", "PartitionHooks", "default_member_id"]
