"""Cooperative rebalancing (KIP-429) as the leader sees it: claims, withholding, cooperative-sticky.

In a cooperative group a member keeps its partitions while the group
rebalances, and tells the leader which it owns (its subscription's
``OwnedPartitions``, v1+) and in which generation it got them
(``GenerationId``, v2+). The leader must then never hand a partition to a
new owner in the same round in which another member still owns it:

1. :func:`previous_owners` resolves the claims: a partition belongs to the
   member claiming it in the highest generation (an older claim is stale:
   that member missed a generation and lost the partition since); two
   claims in the same, highest generation are a conflict, and neither is
   trusted.
2. :func:`withhold` takes any assignor's result and removes every partition
   it gives to a member other than its owner (and every conflicting one):
   the owner sees its assignment shrink, revokes just those partitions,
   commits them and joins again at once; in that second round nobody claims
   them and they go to their new owner.

Because (2) applies to any result, every assignor can run cooperatively;
an assignor that keeps partitions where they are moves (and so pauses) few,
one that reshuffles pauses many, over two rounds.

:func:`cooperative_sticky` is Java's ``CooperativeStickyAssignor`` in
behaviour: every member keeps the partitions it validly owns as far as
balance allows, the rest go to the members with fewest, and partitions move
only from a member with at least two more than another that may take them,
so that members subscribing to the same topics end within one partition of
each other. Its UserData is Java's: the member's generation as an int32.

Everything here is pure: no I/O, no clock.
"""

import struct
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Optional

from kiel.structs import TopicPartition

if TYPE_CHECKING:  # assignors imports this module
    from kiel.coordinator.assignors import Assignment, Member

__all__ = [
    "cooperative_sticky",
    "generation_data",
    "generation_from",
    "previous_owners",
    "withhold",
]

_INT32 = struct.Struct(">i")


def generation_data(generation: int) -> bytes:
    """``cooperative-sticky``'s UserData: the member's generation (Java writes the same)."""
    return _INT32.pack(generation)


def generation_from(version: int, generation_id: int, user_data: Optional[bytes]) -> int:
    """The generation a member's owned partitions belong to.

    The subscription's ``GenerationId`` from v2; before v2, Java's
    ``cooperative-sticky`` UserData (an int32) when that is what it holds;
    else -1 (unknown: kafka-python writes v1 with no generation).
    """
    if version >= 2:
        return generation_id
    if user_data is not None and len(user_data) == _INT32.size:
        return int(_INT32.unpack(user_data)[0])
    return -1


def previous_owners(
    members: Sequence["Member"], counts: Mapping[str, int]
) -> tuple[dict[TopicPartition, str], set[TopicPartition]]:
    """Who owns what now, from the members' claims.

    Args:
        members: the members, with their ``owned`` partitions and ``generation``.
        counts: the partition counts (a claim on a partition that does not
            exist is ignored).

    Returns:
        ``(owners, conflicts)``: the member id owning each claimed partition
        (the one claim of the highest generation), and the partitions two
        members claim in the same, highest generation.
    """
    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for m in members:
        for tp in m.owned:
            if not 0 <= tp.partition < counts.get(tp.topic, 0):
                continue
            seen = best.get(tp)
            if seen is None or m.generation > seen[0]:
                best[tp] = (m.generation, [m.member_id])
            elif m.generation == seen[0] and m.member_id not in seen[1]:
                seen[1].append(m.member_id)
    owners = {tp: ids[0] for tp, (_, ids) in best.items() if len(ids) == 1}
    conflicts = {tp for tp, (_, ids) in best.items() if len(ids) > 1}
    return owners, conflicts


def withhold(
    result: Mapping[str, Sequence[TopicPartition]],
    members: Sequence["Member"],
    counts: Mapping[str, int],
) -> "Assignment":
    """The first round of ``result``: what may be handed out while owners still hold it.

    Args:
        result: the assignor's wanted assignment, ``{member_id: [TopicPartition]}``.
        members: the members and their claims.
        counts: the partition counts.

    Returns:
        ``result`` without the partitions it moves to a new owner (and
        without contested ones): those go in the next round, after their
        owner revoked them.
    """
    owners, conflicts = previous_owners(members, counts)
    out: Assignment = {}
    for member_id, tps in result.items():
        out[member_id] = sorted(
            tp for tp in tps
            if tp not in conflicts and owners.get(tp, member_id) == member_id
        )
    return out


def cooperative_sticky(members: Sequence["Member"], counts: Mapping[str, int]) -> "Assignment":
    """Java's ``cooperative-sticky``: balanced, keeping owned partitions where balance allows.

    This is the wanted (final) assignment; :func:`withhold` makes its first
    round. The result does not depend on the order of ``members``.

    Args:
        members: the members, with their subscriptions and claims.
        counts: the partition counts of the subscribed topics.

    Returns:
        ``{member_id: sorted partitions}``, every member listed.

    The caller checks the member names (:mod:`kiel.coordinator.assignors`).
    """
    if not members:
        return {}
    order = [m.member_id for m in sorted(members, key=lambda m: m.java_order)]
    rank = {member_id: i for i, member_id in enumerate(order)}
    wants = {m.member_id: {t for t in m.topics if counts.get(t, 0) > 0} for m in members}
    out: dict[str, list[TopicPartition]] = {member_id: [] for member_id in order}
    owners, _ = previous_owners(members, counts)
    for tp, member_id in sorted(owners.items()):
        if tp.topic in wants[member_id]:
            out[member_id].append(tp)  # kept, for now
    taken = {tp for tps in out.values() for tp in tps}
    every = sorted(TopicPartition(t, p) for t in set().union(*wants.values())
                   for p in range(counts[t]))
    # Strategy: what nobody keeps goes to the member with fewest that may
    # take it; then partitions move one at a time, from the fullest member
    # to the emptiest that may take one of them, only while the two differ
    # by two or more. Each move lowers the sum of squared counts, so this
    # ends, and it moves nothing a balanced group does not need moved.
    for tp in every:
        if tp in taken:
            continue
        takers = [member_id for member_id in order if tp.topic in wants[member_id]]
        member_id = min(takers, key=lambda m: (len(out[m]), rank[m]))
        out[member_id].append(tp)
    while _move_one(out, wants, rank):
        pass
    return {member_id: sorted(tps) for member_id, tps in out.items()}


def _move_one(
    out: dict[str, list[TopicPartition]], wants: Mapping[str, set[str]], rank: Mapping[str, int]
) -> bool:
    """Move one partition from a fuller member to one with two fewer; whether one moved."""
    fullest = sorted(out, key=lambda m: (-len(out[m]), rank[m]))
    emptiest = sorted(out, key=lambda m: (len(out[m]), rank[m]))
    for giver in fullest:
        for taker in emptiest:
            if len(out[giver]) - len(out[taker]) < 2:
                break
            # The giver's last partition the taker may take (the ones it
            # got most recently, or the highest numbers, move first).
            for i in range(len(out[giver]) - 1, -1, -1):
                if out[giver][i].topic in wants[taker]:
                    out[taker].append(out[giver].pop(i))
                    return True
    return False
