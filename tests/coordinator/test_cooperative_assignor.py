"""Cooperative rebalancing as the leader computes it (kiel.coordinator.cooperative): pure logic.

``cooperative-sticky`` must be balanced (within one partition for members
with the same topics), sticky (a member never both gives up and gains
partitions; only surplus moves), resolve claims by generation (the highest
wins; a tie in the highest trusts neither), and its first round must never
give a partition to a new owner while another member still owns it. The
two-round hand-over is simulated to the end for any assignor named
``cooperative:<name>`` too.
"""
from typing import Dict, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiel.coordinator.assignors import Member, assignors_for
from kiel.coordinator.cooperative import (
    cooperative_sticky,
    generation_data,
    generation_from,
    previous_owners,
    withhold,
)
from kiel.exc import ConfigError
from kiel.structs import TopicPartition as TP


def _member(mid: str, topics: List[str], owned=(), generation: int = -1) -> Member:
    return Member(mid, mid, topics, None, owned=tuple(owned), generation=generation)


def _tps(topic: str, *ids: int) -> List[TP]:
    return [TP(topic, i) for i in ids]


def test_new_members_get_a_balanced_share_without_taking_from_owners_in_round_one():
    owned = _tps("t", *range(7))
    members = [_member("a", ["t"], owned, 3), _member("b", ["t"]), _member("c", ["t"])]
    wanted = cooperative_sticky(members, {"t": 7})
    assert sorted(len(v) for v in wanted.values()) == [2, 2, 3]
    assert len(wanted["a"]) == 3 and set(wanted["a"]) <= set(owned)
    (assignor,) = assignors_for("cooperative-sticky")
    first = assignor.assign(members, {"t": 7})
    # Round one: a keeps its three, nothing moves to b or c while a owns it.
    assert first == {"a": wanted["a"], "b": [], "c": []}


def test_claims_go_to_the_highest_generation_and_a_tie_trusts_neither():
    members = [
        _member("a", ["t"], _tps("t", 0, 1), 5),
        _member("b", ["t"], _tps("t", 1, 2), 4),  # 1: stale (a claims it in 5)
        _member("c", ["t"], _tps("t", 3), 5),
        _member("d", ["t"], _tps("t", 3), 5),  # 3: two claims in generation 5
    ]
    owners, conflicts = previous_owners(members, {"t": 4})
    assert owners == {TP("t", 0): "a", TP("t", 1): "a", TP("t", 2): "b"}
    assert conflicts == {TP("t", 3)}
    first = withhold({"a": _tps("t", 0), "b": _tps("t", 1, 2), "c": _tps("t", 3), "d": []},
                     members, {"t": 4})
    assert first == {"a": _tps("t", 0), "b": _tps("t", 2), "c": [], "d": []}


def test_claims_on_partitions_that_do_not_exist_are_ignored():
    members = [_member("a", ["t"], _tps("t", 0, 9), 1), _member("b", ["t"])]
    owners, _ = previous_owners(members, {"t": 2})
    assert owners == {TP("t", 0): "a"}


def test_the_generation_comes_from_the_field_or_javas_user_data():
    assert generation_from(2, 7, None) == 7
    assert generation_from(1, -1, generation_data(9)) == 9
    assert generation_from(1, -1, b"") == -1  # kafka-python: v1, no generation
    assert generation_from(0, -1, b"not a generation") == -1
    (assignor,) = assignors_for("cooperative-sticky")
    assert assignor.cooperative and assignor.subscription_data(4) == generation_data(4)


def test_any_kiel_allocator_runs_cooperatively_under_a_name_of_its_own():
    assert [a.name for a in assignors_for(["cooperative:sticky", "cooperative:range"])] == [
        "kiel.cooperative.sticky", "kiel.cooperative.range"]
    (weighted,) = assignors_for("cooperative:weighted", capacity=2.0)
    assert weighted.cooperative and weighted.name == "kiel.cooperative.weighted"
    assert weighted.subscription_data(3) == weighted.user_data  # its capacity, as eager
    with pytest.raises(ConfigError, match="cooperatively.*eagerly"):
        assignors_for(["cooperative:sticky", "sticky"])
    with pytest.raises(ConfigError, match="cooperative already"):
        assignors_for("cooperative:cooperative-sticky")


# --------------------------------------------------------------------------
# properties

names = st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=6, unique=True)
counts_st = st.dictionaries(st.sampled_from(["x", "y", "z"]), st.integers(0, 13), min_size=1)


@st.composite
def groups(draw, same_topics: bool = True):
    """Members (some owning a disjoint part of a previous assignment) and partition counts."""
    counts = draw(counts_st)
    topics = sorted(counts)
    every = [TP(t, p) for t in topics for p in range(counts[t])]
    members = []
    for mid in draw(names):
        subscribed = topics if same_topics else draw(
            st.lists(st.sampled_from(topics), min_size=1, unique=True))
        members.append((mid, sorted(subscribed)))
    owner_of = {tp: draw(st.sampled_from([None] + [m for m, _ in members])) for tp in every}
    gen = draw(st.integers(0, 5))
    out = []
    for mid, subscribed in members:
        owned = [tp for tp, o in owner_of.items() if o == mid and tp.topic in subscribed]
        out.append(_member(mid, subscribed, owned, gen if owned else -1))
    return out, counts


def _complete_and_disjoint(result: Dict[str, List[TP]], members, counts) -> None:
    seen = [tp for tps in result.values() for tp in tps]
    assert len(seen) == len(set(seen))
    wanted = {TP(t, p) for m in members for t in m.topics for p in range(counts.get(t, 0))}
    assert set(seen) == wanted
    for m in members:
        assert all(tp.topic in m.topics for tp in result[m.member_id])


@settings(max_examples=300, deadline=None)
@given(groups())
def test_cooperative_sticky_is_complete_balanced_and_sticky(group):
    members, counts = group
    wanted = cooperative_sticky(members, counts)
    _complete_and_disjoint(wanted, members, counts)
    sizes = [len(v) for v in wanted.values()]
    assert max(sizes) - min(sizes) <= 1
    total = sum(sizes)
    for m in members:
        kept = set(m.owned) & set(wanted[m.member_id])
        lost = set(m.owned) - kept
        gained = set(wanted[m.member_id]) - set(m.owned)
        # Only surplus moves: a member never both gives up and gains, and
        # one that gives up ends with no less than its fair share.
        assert not (lost and gained)
        if lost:
            assert len(wanted[m.member_id]) >= total // len(members)
    # The result does not depend on the order the coordinator listed members in.
    assert cooperative_sticky(list(reversed(members)), counts) == wanted


@settings(max_examples=200, deadline=None)
@given(groups(same_topics=False))
def test_cooperative_sticky_with_different_subscriptions(group):
    members, counts = group
    wanted = cooperative_sticky(members, counts)
    _complete_and_disjoint(wanted, members, counts)
    # No single move between two members subscribed to its topic would
    # bring them closer than two apart.
    for tps in wanted.values():
        for m in members:
            if len(tps) - len(wanted[m.member_id]) >= 2:
                assert not any(tp.topic in m.topics for tp in tps)


@settings(max_examples=200, deadline=None)
@given(groups(), st.sampled_from(["cooperative-sticky", "cooperative:sticky",
                                  "cooperative:range", "cooperative:roundrobin"]))
def test_two_rounds_hand_everything_over_and_nobody_shares_a_partition(group, name):
    """Round one withholds what moves; owners revoke it and rejoin; round two hands it out."""
    members, counts = group
    (assignor,) = assignors_for(name)
    generation = max((m.generation for m in members), default=0) + 1
    for _ in range(2):
        result = assignor.assign(members, counts)
        owned_now = {m.member_id: set(m.owned) for m in members}
        for mid, tps in result.items():
            for tp in tps:
                others = [o for o, own in owned_now.items() if o != mid and tp in own]
                assert not others, f"{tp} given to {mid} while {others} own it"
        members = [m._replace(owned=tuple(result[m.member_id]), generation=generation)
                   for m in members]
        generation += 1
    _complete_and_disjoint({m.member_id: list(m.owned) for m in members}, members, counts)
