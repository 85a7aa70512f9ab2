"""GroupMember's parts, as pure logic: the registration format and the
attributes the member keeps in its view and hand-off.

The parts' behaviour against ZooKeeper is tested with the member itself
(tests/zookeeper/test_group_member.py, tests/zookeeper/test_group_faults.py).
"""

import json
import re
from typing import Any

import pytest

from kiel.allocators import round_robin
from kiel.exc import ConfigError
from kiel.zookeeper import registration
from kiel.zookeeper.group import GroupMember, PartitionHooks


class _NoZooKeeper:
    """Stands in for a ZooKeeper the member never calls here (nothing is joined)."""

    session_id = None


def member(**kwargs: Any) -> GroupMember:
    return GroupMember(_NoZooKeeper(), "g", ["t"], member_id="m", **kwargs)  # type: ignore[arg-type]


def test_a_static_registration_reads_back_as_its_topics_and_capacity() -> None:
    data = registration.encode(registration.subscription(["b", "a", "a"], False), 2.5)
    decoded = json.loads(data.decode())
    assert decoded["pattern"] == "static"
    assert decoded["subscription"] == {"a": 1, "b": 1}
    subscribes = registration.subscription_of(data)
    assert [subscribes(t) for t in ("a", "b", "c")] == [True, True, False]
    assert registration.capacity_of(data) == 2.5


def test_a_pattern_registration_is_a_white_list_matched_in_full() -> None:
    data = registration.encode(registration.subscription("ev.*", True), 1.0)
    assert json.loads(data.decode())["pattern"] == "white_list"
    subscribes = registration.subscription_of(data)
    assert subscribes("events") and not subscribes("xevents")


def test_an_unreadable_registration_takes_every_topic_with_capacity_one() -> None:
    for data in (b"not json", b"{}", json.dumps({"subscription": {"(": 1},
                                                  "pattern": "white_list"}).encode()):
        assert registration.subscription_of(data)("anything")
        assert registration.capacity_of(data) == 1.0
    black = json.dumps({"subscription": {"a.*": 1}, "pattern": "black_list"}).encode()
    blacklisted = registration.subscription_of(black)
    assert blacklisted("b") and not blacklisted("ab")


def test_no_topics_and_no_pattern_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        registration.subscription([], False)
    pattern = re.compile("x")
    assert registration.subscription(pattern, False) == (pattern, [])


def test_the_member_reads_and_writes_its_attributes_where_its_parts_keep_them() -> None:
    m = member(acquire_timeout=7.0)
    capacities: dict = {}
    m.capacities = capacities  # what GroupedConsumer does for "weighted"
    assert m.view.capacities is capacities
    m.acquire_timeout = 3.0
    assert m.handoff.acquire_timeout == 3.0
    assert m.owned is m.handoff.owned and m.maybe_held is m.handoff.maybe_held
    assert m.members is m.view.members and m.allocator is round_robin
    assert type(m.hooks) is PartitionHooks
    assert (m.pattern, m.static_topics, m.base) == (None, ["t"], "/consumers/g")
    m.view.members = ["m"]
    m.view.topic_partitions = {"t": 2}
    assert m.topics == ["t"] and m.members == ["m"]
    assert m.compute_target() == {("t", 0), ("t", 1)}
