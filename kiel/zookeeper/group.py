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
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Optional,
    Pattern,
    Set,
    Tuple,
    Union,
)

from kazoo.client import KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from kiel.allocators import Allocation, format_partition, round_robin, validate
from kiel.exc import AllocationError, ConfigError, GroupError, ZooKeeperError
from kiel.zookeeper.client import ZooKeeper

log = logging.getLogger(__name__)

TopicPartition = Tuple[str, int]
Allocator = Callable[[List[str], List[str]], Allocation]


class PartitionHooks:
    """What a consumer does when ownership changes. All are awaited on the loop.

    The default implementations do nothing, so a member can be exercised on
    its own (tests, tooling).
    """

    async def assigned(self, partitions: List[TopicPartition]) -> None:
        """Ownership acquired: fetch committed offsets, run the listener, start fetching."""

    async def revoked(self, partitions: List[TopicPartition]) -> None:
        """About to release: stop fetching, wait for in-hand records, run the listener, commit."""

    async def lost(self, partitions: List[TopicPartition]) -> None:
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
        partition_counts: optional callable ``topic -> number of partitions``
            used when ``/brokers/topics/<topic>`` is missing (e.g. a cluster
            without ZooKeeper registration).

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
        self.pattern: Optional[Pattern[str]] = None
        self.static_topics: List[str] = []
        if isinstance(topics, str) and pattern:
            self.pattern = re.compile(topics)
        elif isinstance(topics, re.Pattern):
            self.pattern = topics
        elif isinstance(topics, str):
            self.static_topics = [topics]
        else:
            self.static_topics = sorted(set(topics))
        if self.pattern is None and not self.static_topics:
            raise ConfigError("subscribe to at least one topic or a pattern")
        self.base = f"/consumers/{group}"
        # State, on the loop only.
        self.members: List[str] = []
        self.topic_partitions: Dict[str, int] = {}
        self.target: Set[TopicPartition] = set()
        self.owned: Set[TopicPartition] = set()
        self._session: Optional[int] = None
        self._dirty = asyncio.Event()
        self._task: Optional[asyncio.Future[None]] = None
        self._topic_watches: Set[str] = set()
        # Until the topic list and every topic's partition map have been read
        # once, an allocation would be premature.
        self._topics_listed = False
        self._pending_topics: Set[str] = set()
        self._closing = False
        self._suspended = False
        self._rebalances = 0
        self._changed_waiters: List[asyncio.Future[None]] = []
        #: When not None (the "weighted" allocator), filled with each member's
        #: advertised capacity (from its registration) before every allocation.
        self.capacities: Optional[Dict[str, float]] = None
        #: The last error of a rebalance step (allocator, listener, hook), for
        #: the consumer to raise to the application; it clears it when raised.
        self.failure: Optional[BaseException] = None

    # ------------------------------------------------------------------
    # public

    @property
    def topics(self) -> List[str]:
        """Currently subscribed topics (pattern matches included)."""
        return sorted(self.topic_partitions)

    @property
    def rebalances(self) -> int:
        """Completed reconcile passes (for observability and tests)."""
        return self._rebalances

    async def join(self, timeout: float = 60.0) -> None:
        """Register, start watching, and wait for the first allocation to settle.

        Raises:
            GroupError: the first reconcile did not finish within ``timeout``.
            ZooKeeperError: ZooKeeper failed.
        """
        self.zk.add_state_listener(self._on_state)
        await self._register()
        await self.zk.children_watch(f"{self.base}/ids", self._on_members)
        if self.pattern is not None:
            await self.zk.children_watch("/brokers/topics", self._on_topic_list)
        else:
            self._on_topic_list(self.static_topics)
        self._task = asyncio.ensure_future(self._reconcile_loop())
        self._dirty.set()
        try:
            await asyncio.wait_for(self.settled(), timeout)
        except asyncio.TimeoutError as e:
            raise GroupError(
                f"first allocation did not settle within {timeout}s", group=self.group
            ) from e

    async def settled(self) -> None:
        """Wait until a reconcile pass finishes with nothing left to do."""
        while (
            self._dirty.is_set()
            or self.target != self.owned
            or not self._rebalances
            or self.member_id not in self.members
            or not self._topics_listed
            or self._pending_topics
        ):
            waiter: asyncio.Future[None] = asyncio.get_event_loop().create_future()
            self._changed_waiters.append(waiter)
            await waiter

    async def leave(self) -> None:
        """Leave gracefully: revoke (listener + commit) and release everything, deregister."""
        self._closing = True
        self.zk.remove_state_listener(self._on_state)
        if self._task is not None:
            self._dirty.set()
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self.owned:
            owned = sorted(self.owned)
            await self.hooks.revoked(owned)
            await self._release(owned)
        try:
            await self.zk.delete(f"{self.base}/ids/{self.member_id}")
        except NoNodeError:
            pass
        except KazooException as e:
            log.warning("could not deregister %s: %s", self.member_id, e)

    # ------------------------------------------------------------------
    # registration and watches (callbacks arrive on the loop via the bridge)

    async def _register(self) -> None:
        registration = {
            "version": 1,
            "subscription": {t: 1 for t in self.static_topics},
            "pattern": "static" if self.pattern is None else "white_list",
            "timestamp": str(int(time.time() * 1000)),
            "kiel": {"host": socket.gethostname(), "pid": os.getpid(), "capacity": self.capacity},
        }
        if self.pattern is not None:
            registration["subscription"] = {self.pattern.pattern: 1}
        path = f"{self.base}/ids/{self.member_id}"
        # The group's own znode stays open: the broker writes v0 commits under
        # it (``offsets``) with its own credentials. ``ids`` and ``owners`` are
        # protected (with digest auth, only this identity may change them).
        await self.zk.ensure_path(self.base)
        await self.zk.ensure_path(f"{self.base}/ids", protected=True)
        await self.zk.ensure_path(f"{self.base}/owners", protected=True)
        data = json.dumps(registration).encode()
        try:
            await self.zk.create(path, data, ephemeral=True, protected=True)
        except NodeExistsError as e:
            # Our own node from a previous session may linger until the server
            # expires it; wait for it, then register (bounded).
            if not await self.zk.wait_deleted(path, self.acquire_timeout):
                raise GroupError(
                    f"member id {self.member_id} is registered by someone else", group=self.group
                ) from e
            await self.zk.create(path, data, ephemeral=True, protected=True)
        self._session = self.zk.session_id

    def _on_members(self, children: List[str]) -> None:
        self.members = sorted(children)
        self._mark_dirty()

    def _on_topic_list(self, topics: List[str]) -> None:
        wanted = [t for t in topics if self.pattern is None or self.pattern.fullmatch(t)]
        for topic in wanted:
            if topic not in self._topic_watches:
                self._topic_watches.add(topic)
                self._pending_topics.add(topic)
                asyncio.ensure_future(self._watch_topic(topic))
        self._topics_listed = True
        self._mark_dirty()

    async def _watch_topic(self, topic: str) -> None:
        def on_data(data: Optional[bytes], stat: Any, *event: Any) -> None:
            count = 0
            if data:
                try:
                    count = len(json.loads(data.decode())["partitions"])
                except (ValueError, KeyError, TypeError) as e:
                    log.warning("bad partition map for %s: %s", topic, e)
            self._pending_topics.discard(topic)
            self._notify()
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
                asyncio.ensure_future(self._rejoin())
            else:
                self.hooks.resume()
                self._mark_dirty()
        elif state == KazooState.LOST:
            asyncio.ensure_future(self._lose_all())

    async def _lose_all(self) -> None:
        lost = sorted(self.owned)
        self.owned.clear()
        self._session = -1
        if lost:
            await self.hooks.lost(lost)

    async def _rejoin(self) -> None:
        if self.owned:
            await self._lose_all()
        try:
            await self._register()
        except (KazooException, GroupError) as e:
            log.error("re-registering %s failed: %s; retrying", self.member_id, e)
            asyncio.get_event_loop().call_later(1.0, lambda: asyncio.ensure_future(self._rejoin()))
            return
        self.hooks.resume()
        self._mark_dirty()

    def _mark_dirty(self) -> None:
        self._dirty.set()
        self._notify()

    def _notify(self) -> None:
        waiters, self._changed_waiters = self._changed_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ------------------------------------------------------------------
    # reconcile

    def compute_target(self) -> Set[TopicPartition]:
        """This member's partitions under the current members and partitions.

        Raises:
            AllocationError: the allocator's result is invalid.
        """
        if self.member_id not in self.members:
            return set()
        partitions = sorted(
            format_partition(t, p) for t, n in self.topic_partitions.items() for p in range(n)
        )
        allocation = self.allocator(list(self.members), partitions)
        validate(allocation, self.members, partitions)
        mine = allocation.get(self.member_id, {})
        return {(t, p) for t, ids in mine.items() for p in ids}

    async def _reconcile_loop(self) -> None:
        while not self._closing:
            await self._dirty.wait()
            self._dirty.clear()
            if (
                self._suspended
                or self._session is None
                or self._session != self.zk.session_id
                or not self._topics_listed
                or self._pending_topics
                or self.member_id not in self.members
            ):
                # Not ready to allocate; the watch that completes the picture
                # marks us dirty again.
                self._notify()
                continue
            try:
                await self._reconcile()
            except (KazooException, ZooKeeperError) as e:
                log.warning("reconcile of %s failed (%r); retrying", self.member_id, e)
                await asyncio.sleep(0.5)
                self._dirty.set()
            except AllocationError as e:
                # Keep current ownership; the consumer raises this to the app.
                self.failure = e
                log.error("allocator returned an invalid allocation: %s", e)
            except Exception as e:  # noqa: BLE001 - a listener or hook failed
                # Surfaced by the consumer on its next call; the loop must live
                # on or the group would stall.
                self.failure = e
                log.exception("rebalance step of %s failed", self.member_id)
                await asyncio.sleep(0.5)
                self._dirty.set()
            self._rebalances += 1
            self._notify()

    async def _reconcile(self) -> None:
        if self.capacities is not None:
            await self._read_capacities(self.capacities)
        self.target = self.compute_target()
        release = sorted(self.owned - self.target)
        if release:
            await self.hooks.revoked(release)
            await self._release(release)
        acquire = sorted(self.target - self.owned)
        if acquire:
            await self._acquire(acquire)

    async def _read_capacities(self, capacities: Dict[str, float]) -> None:
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

    async def _release(self, partitions: List[TopicPartition]) -> None:
        for topic, partition in partitions:
            self.owned.discard((topic, partition))
            path = f"{self.base}/owners/{topic}/{partition}"
            try:
                _, stat = await self.zk.get(path)
                if stat.ephemeralOwner == self.zk.session_id:
                    await self.zk.delete(path, version=stat.version)
            except NoNodeError:
                pass

    async def _acquire(self, partitions: List[TopicPartition]) -> None:
        claimed: List[TopicPartition] = []
        waiting: List[TopicPartition] = []
        for tp in partitions:
            if await self._claim(tp):
                claimed.append(tp)
            else:
                waiting.append(tp)
        if claimed:
            self.owned.update(claimed)
            await self.hooks.assigned(claimed)
        if waiting:
            # Incremental: each contested partition waits for its previous
            # owner on a watch; whatever is free is already flowing.
            await asyncio.gather(*(self._acquire_when_free(tp) for tp in waiting))

    async def _claim(self, tp: TopicPartition) -> bool:
        """Create ``tp``'s owner znode for this session; False if someone else holds it."""
        topic, partition = tp
        path = f"{self.base}/owners/{topic}/{partition}"
        for _ in range(3):
            try:
                await self.zk.create(
                    path, self.member_id.encode(), ephemeral=True, makepath=True, protected=True
                )
                return True
            except NodeExistsError:
                try:
                    _, stat = await self.zk.get(path)
                except NoNodeError:
                    continue  # released between our create and get: try again
                # Ours already if a retried create had gone through.
                return bool(stat.ephemeralOwner == self.zk.session_id)
        return False

    async def _acquire_when_free(self, tp: TopicPartition) -> None:
        """Wait on an exists-watch for the previous owner to let go, then claim.

        Gives up (and asks for a new reconcile) when the allocation changes or
        ``acquire_timeout`` passes: the allocation may have moved on.
        """
        path = f"{self.base}/owners/{tp[0]}/{tp[1]}"
        deadline = asyncio.get_event_loop().time() + self.acquire_timeout
        dirty = asyncio.ensure_future(self._dirty.wait())
        try:
            while not self._closing and tp in self.target and not self._dirty.is_set():
                remaining = deadline - asyncio.get_event_loop().time()
                if remaining <= 0:
                    self._dirty.set()
                    return
                freed = asyncio.ensure_future(self.zk.wait_deleted(path, remaining))
                await asyncio.wait([freed, dirty], return_when=asyncio.FIRST_COMPLETED)
                if not freed.done():
                    freed.cancel()
                    return
                if freed.result() and tp in self.target and await self._claim(tp):
                    self.owned.add(tp)
                    await self.hooks.assigned([tp])
                    return
        finally:
            dirty.cancel()


__all__ = ["GroupMember", "PartitionHooks", "default_member_id"]
