"""The ZooKeeper group behind the consumer's :class:`~kiel.consumer.membership.Membership`.

:class:`ZooKeeperMembership` is the adapter a
:class:`~kiel.consumer.grouped.GroupedConsumer` given ``zk_hosts`` uses: it
starts a ZooKeeper session, learns where the partition counts come from
(``/brokers/topics`` where 0.8 brokers register, else the brokers'
metadata), and runs a :class:`~kiel.zookeeper.group.GroupMember` that drives
the consumer's hooks. Its settings are the application's
:class:`~kiel.zookeeper.group_coordinator.ZooKeeperGroup`, checked once
when built.
"""

import asyncio
import logging
from typing import Any, Optional

from kazoo.exceptions import KazooException, NoNodeError

from kiel._aio import within
from kiel.consumer.membership import GroupContext
from kiel.exc import ZooKeeperError
from kiel.structs import TopicPartition
from kiel.zookeeper.client import ZooKeeper, translate
from kiel.zookeeper.group import GroupMember
from kiel.zookeeper.group_coordinator import SOURCES, ZooKeeperGroup, allocator_of
from kiel.zookeeper.legacy import LegacyGate, wait_for_legacy_members, watch_legacy_members
from kiel.zookeeper.partition_counts import MetadataCounts

__all__ = ["SOURCES", "ZooKeeperMembership", "ZooKeeperSettings", "allocator_of",
           "brokers_registered"]

log = logging.getLogger(__name__)

#: The earlier name of :class:`~kiel.zookeeper.group_coordinator.ZooKeeperGroup`.
ZooKeeperSettings = ZooKeeperGroup

async def brokers_registered(zk: ZooKeeper) -> bool:
    """Whether brokers register in this ZooKeeper (``/brokers/ids`` has children).

    Raises:
        ZooKeeperError: ZooKeeper failed.
    """
    try:
        return bool(await zk.get_children("/brokers/ids"))
    except NoNodeError:
        return False
    except KazooException as e:
        raise translate(e, "reading /brokers/ids") from e


class ZooKeeperMembership:
    """A member of a group kept in ZooKeeper (Kafka 0.8's layout).

    Args:
        context: what the consumer gives every membership.
        settings: the group's coordinator object (its settings, checked).
    """

    def __init__(self, context: GroupContext, settings: ZooKeeperGroup) -> None:
        self.context = context
        self.settings = settings
        self.zk: Optional[ZooKeeper] = None
        self.member: Optional[GroupMember] = None
        #: The consumer's hooks as the member sees them: held while kiel 0.9
        #: members are live (see kiel.zookeeper.legacy).
        self.gate = LegacyGate(context.hooks)
        self._watching: Optional[asyncio.Future[None]] = None

    @property
    def member_id(self) -> Optional[str]:
        """The member's id (``<host>-<pid>-<random>`` unless the settings name one)."""
        return self.member.member_id if self.member is not None else self.settings.member_id

    @property
    def failure(self) -> Optional[BaseException]:
        return self.member.failure if self.member is not None else None

    @failure.setter
    def failure(self, value: Optional[BaseException]) -> None:
        if self.member is not None:
            self.member.failure = value

    async def join(self) -> None:
        """Start ZooKeeper, find the offsets coordinator, register and take the first allocation.

        ZooKeeper starts in an executor: the IOLoop keeps serving meanwhile.

        Raises:
            ZooKeeperError: ZooKeeper could not be reached (then nothing is
                left running: joining again makes a fresh session).
            LegacyGroupError: kiel 0.9 members of the group stayed live
                through ``join_timeout`` (nothing was registered).
            GroupError: the first allocation did not settle within ``join_timeout``.
        """
        zk = self.zk = self.settings.zookeeper()
        try:
            await zk.start()
        except BaseException:
            # start() freed kazoo's threads; nothing is left to stop.
            self.zk = None
            raise
        try:
            await self.context.offsets.coordinator()
            await self._enter(zk)
        except BaseException:
            await zk.stop()
            raise

    async def _enter(self, zk: ZooKeeper) -> None:
        """Learn where the partition counts come from, then join as a GroupMember.

        Raises:
            LegacyGroupError: kiel 0.9 members of the group stayed live
                through ``join_timeout``.
            GroupError: the first allocation did not settle within ``join_timeout``.
            kazoo.exceptions.KazooException, ZooKeeperError: ZooKeeper failed.
        """
        settings, context = self.settings, self.context
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.join_timeout
        # Never beside kiel 0.9 members: they cannot see this one (legacy.py).
        await wait_for_legacy_members(zk, context.group, settings.join_timeout)
        from_zookeeper = settings.partitions_from == "zookeeper" or (
            settings.partitions_from == "auto" and await brokers_registered(zk)
        )
        allocator, capacities = allocator_of(settings.allocator)
        member = self.member = GroupMember(
            zk, context.group, context.topics, hooks=self.gate,
            allocator=allocator, member_id=self.member_id,
            capacity=settings.capacity, acquire_timeout=settings.acquire_timeout,
            leave_timeout=settings.leave_timeout, topics_from_zookeeper=from_zookeeper,
        )
        member.capacities = capacities  # "weighted" reads them; None otherwise
        if not from_zookeeper:
            wanted = context.topics
            counts = MetadataCounts(context.cluster, wanted if isinstance(wanted, list) else None)
            member.set_partition_counts(await counts.read())
            context.tasks.spawn(
                counts.follow(member.set_partition_counts, context.cluster.metadata_max_age),
                "partition counts",
            )
        # One join_timeout for the whole join, the wait for 0.9 members included.
        await member.join(timeout=max(0.0, deadline - loop.time()))
        # And a 0.9 member started later is not consumed beside either.
        self._watching = context.tasks.spawn(
            watch_legacy_members(zk, context.group, self.gate, self._fail), "kiel 0.9 members")

    def _fail(self, error: BaseException) -> None:
        """Keep ``error`` for the consumer's next call."""
        if self.member is not None:
            self.member.failure = error

    async def leave(self) -> None:
        """Revoke, commit and release everything, deregister: bounded by ``leave_timeout``."""
        if self._watching is not None:
            self._watching.cancel()  # the session ends next: nothing more to watch
        if self.member is not None:
            await self.member.leave()

    async def close(self) -> None:
        """Stop the ZooKeeper session (its ephemeral znodes go with it).

        Raises:
            ZooKeeperError: stopping failed (the session ends on the server anyway).
        """
        if self.zk is not None:
            await self.zk.stop()

    def may_commit(self) -> bool:
        """Connected, under the session the member registered with, and no
        kiel 0.9 member live (its commits would be overwritten with older ones)."""
        return self.member is not None and self.member.may_commit() and not self.gate.held

    def poll(self) -> None:
        """Nothing: a ZooKeeper group has no poll deadline (its session is kazoo's)."""

    async def stored_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The offsets a 0.8 broker stored for ``tps`` in ZooKeeper, where there are any.

        A v0 commit is a znode ``/consumers/<group>/offsets/<topic>/<partition>``:
        read through our own session, a missing znode is an unambiguous
        "none" (brokers that keep offsets elsewhere have no such znode).

        Raises:
            ZooKeeperError: ZooKeeper failed or did not answer within the
                request timeout.
        """
        zk = self.zk
        found: dict[TopicPartition, int] = {}
        if zk is None:
            return found
        group, timeout = self.context.group, self.context.cluster.request_timeout
        for tp in tps:
            path = f"/consumers/{group}/offsets/{tp.topic}/{tp.partition}"
            try:
                data, _ = await within(zk.get(path), timeout)
            except NoNodeError:
                continue
            except asyncio.TimeoutError as e:
                raise ZooKeeperError(f"reading {path} timed out", group=group) from e
            except KazooException as e:
                raise translate(e, f"reading {path}") from e
            try:
                found[tp] = int(data.decode())
            except (ValueError, UnicodeDecodeError) as e:
                raise ZooKeeperError(f"{path} holds no offset: {data[:40]!r}", group=group) from e
        return found

    def metrics(self) -> dict[str, Any]:
        """kazoo's connection state (``NOT_STARTED`` before the first join)."""
        return {"zookeeper_state": "NOT_STARTED" if self.zk is None else str(self.zk.client.state)}
