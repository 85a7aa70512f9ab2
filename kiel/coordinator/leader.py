"""A member's subscription, and the leader's assignment of the group's partitions.

* :func:`subscription`: this member's JoinGroup metadata for an assignor
  (v0 eager; v2 cooperative, with what it owns and since which generation);
* :class:`Leader`: as leader, every member's assignment from the chosen
  assignor (:mod:`kiel.coordinator.assignors`), and what it was computed
  from, so a change (a pattern's new match, a topic that grew) starts a
  rebalance;
* :func:`mine`: this member's partitions from SyncGroup's answer.
"""

import logging
from collections.abc import Collection
from re import Pattern
from typing import Optional, Union

from kiel.cluster import Cluster
from kiel.coordinator.assignors import Assignor, Member
from kiel.coordinator.cooperative import generation_from
from kiel.exc import AllocationError, GroupError
from kiel.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kiel.protocol.group_membership import JoinGroupResponseV5, SyncGroupAssignment
from kiel.structs import TopicPartition

__all__ = ["Leader", "mine", "subscription"]

#: The member's one logger, whichever part tells its story: the name users
#: filter on stayed when the membership was split in parts.
log = logging.getLogger("kiel.coordinator.membership")

#: Internal topics a pattern never matches.
_INTERNAL = ("__consumer_offsets", "__transaction_state")


def subscription(assignor: Assignor, topics: list[str], owned: Collection[TopicPartition],
                 owned_generation: int) -> bytes:
    """This member's JoinGroup metadata for ``assignor``.

    Eager: v0 (every client reads it). Cooperative: v2, with the
    partitions owned and the generation they were assigned in, so the
    leader keeps them here and hands none of them to another member
    while this one still owns it.
    """
    if not assignor.cooperative:
        return encode_subscription(ConsumerSubscription(topics, assignor.user_data))
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(owned):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    generation = owned_generation if owned else -1
    sub = ConsumerSubscription(topics, assignor.subscription_data(generation),
                               sorted(by_topic.items()), generation)
    return encode_subscription(sub, version=2)


def mine(data: bytes, topics: list[str], leader: Optional[str],
         group: str) -> tuple[list[TopicPartition], Optional[AllocationError]]:
    """This member's partitions from SyncGroup's answer, and the leader's fault if any.

    A leader that gives this member a topic it did not subscribe to broke
    the protocol: those partitions are not taken, and the application
    hears of it (the :class:`~kiel.exc.AllocationError` returned).
    """
    _, assignment = decode_assignment(data)
    tps = sorted(TopicPartition(t, p) for t, ids in assignment.partitions for p in ids)
    wanted = set(topics)
    stray = [tp for tp in tps if tp.topic not in wanted]
    failure = None
    if stray:
        failure = AllocationError(
            f"the group's leader ({leader}) assigned {stray[:5]} of topics this member "
            f"does not subscribe to; they are not consumed", group=group,
            topic=stray[0].topic, partition=stray[0].partition,
        )
        log.error("%s", failure)
    return [tp for tp in tps if tp.topic in wanted], failure


class Leader:
    """The leader's side of a group: the assignment, and what it came from.

    Args:
        cluster: the consumer's cluster.
        group: the group.
        wanted: the topics subscribed to, or a pattern.
        assignors: this member's assignors.
    """

    def __init__(self, cluster: Cluster, group: str, wanted: Union[list[str], "Pattern[str]"],
                 assignors: list[Assignor]) -> None:
        self.cluster = cluster
        self.group = group
        self.wanted = wanted
        self.assignors = {a.name: a for a in assignors}
        #: The topics this member last joined with.
        self.subscribed: list[str] = []
        #: As leader, the topics and partition counts last assigned.
        self.topics: list[str] = []
        self.counts: dict[str, int] = {}

    async def subscribe(self) -> list[str]:
        """The topics this member subscribes to now (a pattern's current
        matches), remembered as the ones it joins with."""
        self.subscribed = await self.current_topics()
        return self.subscribed

    async def current_topics(self) -> list[str]:
        """The topics this member subscribes to now."""
        if isinstance(self.wanted, Pattern):
            every = await self.cluster.all_topics()
            return sorted(t for t in every if t not in _INTERNAL and self.wanted.fullmatch(t))
        return list(self.wanted)

    async def partition_counts(self, topics: list[str]) -> dict[str, int]:
        """The partitions of each topic, from fresh metadata."""
        if topics:
            await self.cluster.refresh_metadata(topics)
        return {t: len(self.cluster.partitions.get(t, {})) for t in topics}

    async def changed(self, leading: bool) -> bool:
        """Whether the subscription, or (as leader) a topic's partitions, changed.

        Raises:
            KielError: the metadata could not be read.
        """
        if await self.current_topics() != self.subscribed:
            return True
        if leading and self.topics:
            return await self.partition_counts(self.topics) != self.counts
        return False

    async def assign(self, response: JoinGroupResponseV5) -> list[SyncGroupAssignment]:
        """As leader: every member's assignment from the chosen assignor.

        Raises:
            GroupError: the coordinator chose an assignor this member did not offer.
            AllocationError: the allocator's result breaks the contract.
            KielError: the partition counts could not be read.
        """
        assignor = self.assignors.get(response.protocol_name)
        if assignor is None:
            raise GroupError(f"the coordinator chose assignor {response.protocol_name!r}, "
                             f"which this member did not offer ({sorted(self.assignors)})",
                             group=self.group)
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
        counts = await self.partition_counts(topics)
        self.topics, self.counts = topics, counts
        result = assignor.assign(members, counts)
        log.debug("group %s generation %s: %s assigned %s from claims %s", self.group,
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
