"""kiel's allocators as a broker group's assignors (kiel.coordinator.assignors): pure logic.

``range`` and ``roundrobin`` must assign exactly as the other clients'
assignors of those names do, since any member may lead a mixed group:
kafka-python's RangePartitionAssignor and RoundRobinPartitionAssignor are
the oracle (dynamic members with the same subscriptions, where its own
implementation is exact), and Java's documented examples are checked by hand.
"""
from collections import namedtuple
from typing import Dict, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

from kiel import allocators
from kiel.allocators import register_allocator
from kiel.coordinator.assignors import (
    DEFAULT_ASSIGNORS,
    Member,
    assignors_for,
    capacity_of,
)
from kiel.exc import AllocationError, ConfigError
from kiel.structs import TopicPartition as TP

_KPMember = namedtuple("_KPMember", "member_id group_instance_id metadata")
_KPMetadata = namedtuple("_KPMetadata", "topics")


class _Cluster:
    def __init__(self, counts: Dict[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str):  # kafka-python's ClusterMetadata method
        n = self.counts.get(topic)
        return None if n is None else set(range(n))


def _assign(name: str, members: List[Member], counts: Dict[str, int]) -> Dict[str, List[TP]]:
    (assignor,) = assignors_for(name)
    return assignor.assign(members, counts)


def _oracle(cls, members: List[Member], counts: Dict[str, int]) -> Dict[str, List[TP]]:
    kp = [_KPMember(m.member_id, None, _KPMetadata(m.topics)) for m in members]
    result = cls.assign(_Cluster(counts), kp)
    return {mid: sorted(TP(t, p) for t, ps in a.assigned_partitions for p in ps)
            for mid, a in result.items()}


member_ids = st.lists(st.text("abcdefgh-0123456789", min_size=1, max_size=12),
                      min_size=1, max_size=6, unique=True)
topic_counts = st.dictionaries(st.sampled_from(["a", "b", "c.d", "e_f"]),
                               st.integers(1, 25), min_size=1)


@settings(max_examples=200, deadline=None)
@given(member_ids, topic_counts)
def test_roundrobin_matches_the_other_clients_with_the_same_subscriptions(ids, counts):
    members = [Member(i, i, sorted(counts), None) for i in ids]
    assert _assign("roundrobin", members, counts) == _oracle(
        RoundRobinPartitionAssignor, members, counts)


@settings(max_examples=200, deadline=None)
@given(member_ids, topic_counts, st.data())
def test_range_matches_the_other_clients_with_any_subscriptions(ids, counts, data):
    topics = sorted(counts)
    members = [Member(i, i, sorted(data.draw(st.sets(st.sampled_from(topics), min_size=1))),
                      None) for i in ids]
    ours = _assign("range", members, counts)
    assert ours == _oracle(RangePartitionAssignor, members, counts)
    # Disjoint and complete over the subscribed topics.
    given_out = [tp for tps in ours.values() for tp in tps]
    subscribed = {t for m in members for t in m.topics}
    assert sorted(given_out) == sorted(TP(t, p) for t in subscribed for p in range(counts[t]))


def test_roundrobin_is_javas_order_partition_10_after_2():
    members = [Member("m1", "m1", ["t"], None), Member("m2", "m2", ["t"], None)]
    out = _assign("roundrobin", members, {"t": 12})
    # Java deals 0, 1, 2, ..., 10, 11; kiel's round_robin deals
    # "t:0", "t:1", "t:10", "t:11", "t:2", ... (string order), in a broker
    # group as in a ZooKeeper one (one name, one algorithm).
    assert out["m1"] == [TP("t", p) for p in (0, 2, 4, 6, 8, 10)]
    three = members + [Member("m3", "m3", ["t"], None)]
    assert _assign("roundrobin", three, {"t": 12})["m1"] == [TP("t", p) for p in (0, 3, 6, 9)]
    # "t:0", "t:11", "t:4", "t:7": the string order's every third.
    assert _assign("round_robin", three, {"t": 12})["m1"] == [TP("t", p) for p in (0, 4, 7, 11)]


def test_roundrobin_skips_members_not_subscribed_as_javas_example():
    # RoundRobinAssignor's documented example with different subscriptions.
    members = [Member("C0", "C0", ["t0"], None), Member("C1", "C1", ["t0", "t1"], None),
               Member("C2", "C2", ["t0", "t1", "t2"], None)]
    out = _assign("roundrobin", members, {"t0": 1, "t1": 2, "t2": 3})
    assert out == {"C0": [TP("t0", 0)], "C1": [TP("t1", 0)],
                   "C2": [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)]}


def test_static_members_come_first_by_instance_id():
    members = [Member("a-dynamic", "a-dynamic", ["t"], None),
               Member("z-1", "inst-b", ["t"], None, static=True),
               Member("y-1", "inst-a", ["t"], None, static=True)]
    out = _assign("range", members, {"t": 3})
    assert out == {"y-1": [TP("t", 0)], "z-1": [TP("t", 1)], "a-dynamic": [TP("t", 2)]}


def test_kiel_allocators_run_per_set_of_subscribers_and_keep_their_names():
    (sticky,) = assignors_for("sticky")
    assert sticky.name == "kiel.sticky"
    members = [Member("m1", "m1", ["a", "b"], None), Member("m2", "m2", ["a"], None),
               Member("m3", "m3", ["b"], None)]
    out = sticky.assign(members, {"a": 6, "b": 6})
    assert {tp.topic for tp in out["m2"]} <= {"a"} and {tp.topic for tp in out["m3"]} <= {"b"}
    given_out = sorted(tp for tps in out.values() for tp in tps)
    assert given_out == sorted([TP("a", p) for p in range(6)] + [TP("b", p) for p in range(6)])


def test_weighted_reads_the_capacities_the_members_advertise():
    (assignor,) = assignors_for("weighted", capacity=3.0)
    assert assignor.name == "kiel.weighted" and capacity_of(assignor.user_data) == 3.0
    (light,) = assignors_for("weighted", capacity=1.0)
    members = [Member("big", "big", ["t"], assignor.user_data),
               Member("small", "small", ["t"], light.user_data)]
    out = assignor.assign(members, {"t": 8})
    assert (len(out["big"]), len(out["small"])) == (6, 2)
    with pytest.raises(AllocationError, match="not a capacity"):
        capacity_of(b"junk")


def test_a_callable_allocator_is_named_on_the_wire_and_validated():
    def everything_to_the_first(members, partitions):
        first = sorted(members)[0]
        out = {m: {} for m in members}
        for p in partitions:
            t, _, i = p.rpartition(":")
            out[first].setdefault(t, []).append(int(i))
        return out

    (assignor,) = assignors_for(everything_to_the_first)
    assert assignor.name == "kiel.everything_to_the_first"
    out = assignor.assign([Member("b", "b", ["t"], None), Member("a", "a", ["t"], None)], {"t": 2})
    assert out == {"a": [TP("t", 0), TP("t", 1)], "b": []}

    def broken(members, partitions):
        return {m: {} for m in members}  # allocates nothing

    (bad,) = assignors_for(broken)
    with pytest.raises(AllocationError, match="not allocated"):
        bad.assign([Member("a", "a", ["t"], None)], {"t": 2})


def test_a_registered_allocator_goes_by_its_name(monkeypatch):
    # A registry of this test's own: the name must not outlive it (the
    # registry test lists the known names).
    monkeypatch.setattr(allocators, "_REGISTRY", dict(allocators._REGISTRY))
    register_allocator("broker-test-first", lambda ms, ps: {
        m: ({} if i else {p.rpartition(":")[0]: sorted(int(q.rpartition(":")[2]) for q in ps
                                                         if q.rpartition(":")[0] ==
                                                         p.rpartition(":")[0])
                          for p in ps})
        for i, m in enumerate(sorted(ms))}, replace=True)
    (assignor,) = assignors_for("broker-test-first")
    assert assignor.name == "kiel.broker_test_first"


def test_preference_lists_and_bad_settings():
    assert [a.name for a in assignors_for(None)] == list(DEFAULT_ASSIGNORS)
    assert [a.name for a in assignors_for(["sticky", "range"])] == ["kiel.sticky", "range"]
    with pytest.raises(ConfigError, match="twice"):
        assignors_for(["roundrobin", "RoundRobin"])
    with pytest.raises(ConfigError, match="unknown allocator"):
        assignors_for("nonesuch")
    with pytest.raises(ConfigError, match="cooperatively.*eagerly"):
        assignors_for(["cooperative-sticky", "range"])
    with pytest.raises(ConfigError, match="empty"):
        assignors_for([])
    with pytest.raises(ConfigError, match="__name__"):
        assignors_for(lambda ms, ps: {})
    with pytest.raises(AllocationError, match="two members are named"):
        _assign("range", [Member("a", "x", ["t"], None, static=True),
                          Member("b", "x", ["t"], None, static=True)], {"t": 1})
