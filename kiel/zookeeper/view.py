"""What one member sees of its group, and the partitions that makes its own.

A :class:`GroupView` watches the group's members (``/consumers/<group>/ids``),
the subscribed topics and their partition counts (``/brokers/topics``, or
what the consumer tells it from the brokers' metadata), and reads the other
members' subscriptions and capacities from their registrations. From that
picture :meth:`GroupView.compute_target` asks the allocator (through
:func:`kiel.allocators.allocate`, which validates its answer) which
partitions are this member's.

Every watch reaches the view on the IOLoop through the bridge inside
:class:`~kiel.zookeeper.client.ZooKeeper`; a change that calls for a new
allocation marks the member's :class:`~kiel.zookeeper.changes.Changes` dirty.
"""

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Optional, TypeVar

from kazoo.exceptions import NoNodeError

from kiel._aio import Tasks
from kiel.allocators import Allocator, allocate
from kiel.exc import GroupError
from kiel.structs import TopicPartition
from kiel.zookeeper import registration
from kiel.zookeeper.changes import Changes
from kiel.zookeeper.client import ZooKeeper

__all__ = ["GroupView"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class GroupView:
    """The members, topics and partition counts one member watches.

    Args:
        zk: the member's started :class:`~kiel.zookeeper.client.ZooKeeper`.
        group: the group name.
        member_id: this member's id.
        subscribed: what this member subscribes to.
        allocator: the group's allocator.
        topics_from_zookeeper: read the topics from ``/brokers/topics``;
            ``False``: :meth:`set_partition_counts` tells them.
        changes: the member's changes (marked dirty when the picture changes).
        tasks: the member's background tasks (one watch per topic).
    """

    def __init__(
        self,
        zk: ZooKeeper,
        group: str,
        member_id: str,
        subscribed: registration.Subscription,
        allocator: Allocator,
        topics_from_zookeeper: bool,
        changes: Changes,
        tasks: Tasks,
    ) -> None:
        self.zk = zk
        self.group = group
        #: The group's znode.
        self.base = f"/consumers/{group}"
        self.member_id = member_id
        self.pattern, self.static_topics = subscribed
        self.allocator = allocator
        self.topics_from_zookeeper = topics_from_zookeeper
        self._changes = changes
        self._tasks = tasks
        #: The group's members, sorted (the children of ``ids``).
        self.members: list[str] = []
        #: The subscribed topics and their partition counts.
        self.topic_partitions: dict[str, int] = {}
        #: When not None (the "weighted" allocator), filled with each member's
        #: advertised capacity (from its registration) before every allocation.
        self.capacities: Optional[dict[str, float]] = None
        #: Each member's subscription (from its registration), read once per
        #: member: which topics it takes partitions of.
        self._subscriptions: dict[str, Callable[[str], bool]] = {}
        self._topic_watches: set[str] = set()
        self._watching_members = False
        self._watching_topic_list = False
        # Until the topic list and every topic's partition map have been read
        # once, an allocation would be premature.
        self._topics_listed = False
        self._pending_topics: set[str] = set()

    def complete(self) -> bool:
        """Whether the picture is complete enough to allocate: the topics and
        every partition map read once, and this member among the members.

        When it is not, the watch that completes it marks the member dirty again.
        """
        return (
            self._topics_listed
            and not self._pending_topics
            and self.member_id in self.members
        )

    # ------------------------------------------------------------------
    # watches (their callbacks arrive on the loop via the bridge)

    async def watch(self) -> None:
        """Start watching the members and, from ZooKeeper, the topics.

        Idempotent: a watch already armed is not armed twice (a join cut off
        by a lost connection calls this again).

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        if not self._watching_members:
            await self.zk.children_watch(f"{self.base}/ids", self._on_members)
            self._watching_members = True
        if not self.topics_from_zookeeper:
            pass  # set_partition_counts() tells them
        elif self.pattern is not None:
            if not self._watching_topic_list:
                await self.zk.children_watch("/brokers/topics", self._on_topic_list)
                self._watching_topic_list = True
        else:
            self._on_topic_list(self.static_topics)

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
            self._changes.mark_dirty()

    def _on_members(self, children: list[str]) -> None:
        self.members = sorted(children)
        self._changes.mark_dirty()

    def _on_topic_list(self, topics: list[str]) -> None:
        if self._changes.closing:
            return
        wanted = [t for t in topics if self.pattern is None or self.pattern.fullmatch(t)]
        for topic in wanted:
            if topic not in self._topic_watches:
                self._topic_watches.add(topic)
                self._pending_topics.add(topic)
                self._tasks.spawn(self._watch_topic(topic), f"watch {topic}")
        self._topics_listed = True
        self._changes.mark_dirty()

    async def _watch_topic(self, topic: str) -> None:
        def on_data(data: Optional[bytes], stat: Any, *event: Any) -> None:
            count = _partition_count(topic, data)
            self._pending_topics.discard(topic)
            self._changes.fire()
            if count != self.topic_partitions.get(topic):
                if count:
                    self.topic_partitions[topic] = count
                else:
                    self.topic_partitions.pop(topic, None)
                self._changes.mark_dirty()

        await self.zk.data_watch(f"/brokers/topics/{topic}", on_data)

    # ------------------------------------------------------------------
    # the target

    async def read_registrations(self) -> None:
        """Read what the allocation needs of the members' registrations: each
        member's subscription and, for the "weighted" allocator, its capacity.

        Each is read once per member (a member that leaves is forgotten).

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        if self.capacities is not None:
            await self._cache(self.capacities, registration.capacity_of, self.members)
        others = [m for m in self.members if m != self.member_id]
        # Our own topics are the ones in topic_partitions (see _subscribes).
        await self._cache(self._subscriptions, registration.subscription_of, others)

    async def _cache(
        self, cache: dict[str, T], parse: Callable[[bytes], T], members: list[str]
    ) -> None:
        """Keep ``cache`` to the current members; read the missing ones of ``members``."""
        for member in list(cache):
            if member not in self.members:
                del cache[member]
        for member in members:
            if member in cache:
                continue
            try:
                data, _ = await self.zk.get(f"{self.base}/ids/{member}")
            except NoNodeError:
                continue  # it left; the members watch runs reconcile again
            cache[member] = parse(data)

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


def _partition_count(topic: str, data: Optional[bytes]) -> int:
    """How many partitions ``/brokers/topics/<topic>``'s data lists (0 if none or unreadable)."""
    if not data:
        return 0
    try:
        return len(json.loads(data.decode())["partitions"])
    except (ValueError, KeyError, TypeError) as e:
        log.warning("bad partition map for %s: %s", topic, e)
        return 0
