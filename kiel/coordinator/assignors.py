"""kiel's allocators as a broker group's assignors: names on the wire, per-member topics.

In a group the brokers coordinate, every member offers the assignors it
knows by name (JoinGroup's protocols, in order of preference), the
coordinator picks one that every member offers, and the member it makes
leader runs that assignor for everyone. Other clients may lead, so a name
must mean the same thing in every client that uses it:

* ``range`` and ``roundrobin`` are Kafka's: Java's ``RangeAssignor`` and
  ``RoundRobinAssignor``, which librdkafka, kafka-python and aiokafka follow.
  kiel's ``"range"`` is Java's (per topic, contiguous ranges over the
  topic's subscribers); ``"roundrobin"`` deals the partitions sorted by
  topic, then partition *number*, to the members in turn, skipping members
  not subscribed to the topic: Java's order (partition 10 after 2), so kiel
  can share a group with those clients. Members are in Java's order too:
  static members first by instance id, then the others by member id.
  A name is one algorithm in every coordinator: ``"round_robin"`` is
  kiel's string order here as in a ZooKeeper group (``kiel.round_robin``
  on the wire), and ``"roundrobin"`` Java's there too.
* kiel's own allocators keep names of their own (``kiel.sticky``,
  ``kiel.weighted``; a registered or callable allocator ``kiel.<name>``):
  other leaders read Java's ``sticky`` as KIP-54 with its own UserData.
  ``kiel.weighted`` sends this member's capacity as its UserData.

Cooperative rebalancing (KIP-429, :mod:`kiel.coordinator.cooperative`):
``cooperative-sticky`` is Java's ``CooperativeStickyAssignor``, and any of
the above runs cooperatively when named ``"cooperative:<name>"`` (on the
wire ``kiel.cooperative.<name>``): its result is handed out in two rounds,
never giving a partition to a new owner while another member still owns
it. A member's assignors are all eager or all cooperative.

A kiel allocator sees what it always saw: sorted member names and sorted
``"topic:partition"`` strings, and must return a valid allocation
(:func:`kiel.allocators.validate`). Members may subscribe to different
topics: the topics are split by the set of members subscribed to them, and
the allocator runs once per set with just those members. Member names are
the members' ``group_instance_id`` when they have one, else the broker's
member id.

Everything here is pure: no I/O, no clock.
"""

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Optional, Union

from kiel.allocators import (
    Allocator,
    allocate,
    get_allocator,
    kafka_round_robin,
    range_allocator,
    round_robin,
    sticky,
    weighted,
)
from kiel.coordinator.cooperative import cooperative_sticky, generation_data, withhold
from kiel.exc import AllocationError, ConfigError
from kiel.structs import TopicPartition

__all__ = [
    "DEFAULT_ASSIGNORS",
    "Assignor",
    "Member",
    "COOPERATIVE_PREFIX",
    "assignors_for",
    "java_cooperative_sticky",
    "java_range",
    "java_round_robin",
]

#: What a broker group offers when the consumer names no allocator: the
#: defaults of kafka-python and librdkafka, so kiel joins their groups as is.
DEFAULT_ASSIGNORS = ("range", "roundrobin")

#: Java's cooperative assignor's name, and kiel's spelling of it.
_COOPERATIVE_STICKY = frozenset({"cooperative_sticky", "cooperative-sticky"})
#: The prefix that runs any of kiel's assignors cooperatively.
COOPERATIVE_PREFIX = "cooperative:"


class Member(NamedTuple):
    """One member as the leader sees it in JoinGroup's answer."""

    #: the broker's member id.
    member_id: str
    #: what allocators see: the instance id when set, else the member id.
    name: str
    #: the topics it subscribes to.
    topics: list[str]
    #: its subscription's UserData (``None``: none).
    user_data: Optional[bytes]
    #: whether it has a ``group_instance_id`` (``name`` is it then).
    static: bool = False
    #: the partitions it owns now (its subscription's OwnedPartitions, v1+).
    owned: tuple[TopicPartition, ...] = ()
    #: the generation it got them in (-1: unknown).
    generation: int = -1

    @property
    def java_order(self) -> tuple[int, str]:
        """The sort key of Java's order: static members first by instance id,
        then the others by member id."""
        return (0, self.name) if self.static else (1, self.member_id)


#: ``{member_id: [TopicPartition, ...]}``
Assignment = dict[str, list[TopicPartition]]


class Assignor:
    """One protocol a member offers: a wire name and how the leader assigns with it.

    Args:
        name: the protocol name sent in JoinGroup.
        assign: ``assign(members, counts) -> {member_id: [TopicPartition]}``.
        user_data: this member's UserData in its subscription.
        cooperative: a cooperative assignor (KIP-429): members keep their
            partitions through a rebalance, and :meth:`assign` hands out
            only what no other member still owns
            (:func:`~kiel.coordinator.cooperative.withhold`).
        generation_data: the UserData carries the member's generation
            (Java's ``cooperative-sticky``), instead of ``user_data``.
    """

    def __init__(
        self,
        name: str,
        assign: "Assign",
        user_data: Optional[bytes] = None,
        *,
        cooperative: bool = False,
        generation_data: bool = False,
    ) -> None:
        self.name = name
        self._assign = assign
        self.user_data = user_data
        self.cooperative = cooperative
        self._generation_data = generation_data

    def subscription_data(self, generation: int) -> Optional[bytes]:
        """This member's UserData, when it owns partitions of ``generation``."""
        return generation_data(generation) if self._generation_data else self.user_data

    def assign(
        self, members: Sequence[Member], counts: Mapping[str, int]
    ) -> dict[str, list[TopicPartition]]:
        """Every member's partitions (every member listed, possibly with none).

        Args:
            members: the group's members and their subscriptions.
            counts: partition counts of the subscribed topics (a topic not
                in it, or with 0, has nothing to assign yet).

        Returns:
            the assignment of this round: a cooperative assignor's leaves out
            what it moves from an owner that still holds it (the next round
            hands those out).

        Raises:
            AllocationError: the allocator's result breaks the contract.
        """
        result = self._assign(members, counts)
        return withhold(result, members, counts) if self.cooperative else result

    def __repr__(self) -> str:
        return f"Assignor({self.name!r})"


def _subscribers(
    members: Sequence[Member], counts: Mapping[str, int]
) -> dict[tuple[str, ...], list[str]]:
    """Topics with partitions, grouped by the sorted names of the members subscribing."""
    by_topic: dict[str, set[str]] = {}
    for m in members:
        for topic in m.topics:
            if counts.get(topic, 0) > 0:
                by_topic.setdefault(topic, set()).add(m.name)
    groups: dict[tuple[str, ...], list[str]] = {}
    for topic, names in sorted(by_topic.items()):
        groups.setdefault(tuple(sorted(names)), []).append(topic)
    return groups


def _by_name(members: Sequence[Member]) -> dict[str, Member]:
    named: dict[str, Member] = {}
    for m in members:
        if m.name in named:
            raise AllocationError(f"two members are named {m.name!r} (one group_instance_id "
                                  "for two members?)", member=m.name)
        named[m.name] = m
    return named


#: ``assign(members, counts) -> {member_id: [TopicPartition]}``
Assign = Callable[[Sequence[Member], Mapping[str, int]], dict[str, list[TopicPartition]]]


def allocator_assign(allocator: Allocator) -> Assign:
    """An assign function running a kiel allocator once per set of subscribers."""

    def assign(members: Sequence[Member], counts: Mapping[str, int]) -> Assignment:
        named = _by_name(members)
        out: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        for names, topics in _subscribers(members, counts).items():
            tps = [TopicPartition(t, p) for t in topics for p in range(counts[t])]
            for name, owned in allocate(allocator, list(names), tps).items():
                out[named[name].member_id].extend(owned)
        return {member_id: sorted(tps) for member_id, tps in out.items()}

    return assign


def java_round_robin(members: Sequence[Member], counts: Mapping[str, int]) -> Assignment:
    """Java's ``RoundRobinAssignor``: partitions by (topic, number), members in turn.

    Each partition goes to the next member (in Java's order, wrapping
    around) that subscribes to its topic.
    """
    _by_name(members)
    order = sorted(members, key=lambda m: m.java_order)
    subscribed = [set(m.topics) for m in order]
    out: Assignment = {m.member_id: [] for m in members}
    topics = sorted({t for m in members for t in m.topics if counts.get(t, 0) > 0})
    turn = 0
    for topic in topics:
        for partition in range(counts[topic]):
            # Some member subscribes to every topic listed, so this ends.
            while topic not in subscribed[turn % len(order)]:
                turn += 1
            out[order[turn % len(order)].member_id].append(TopicPartition(topic, partition))
            turn += 1
    return out


def java_range(members: Sequence[Member], counts: Mapping[str, int]) -> Assignment:
    """Java's ``RangeAssignor``: per topic, contiguous ranges over its subscribers.

    A topic's ``n`` partitions go to its ``m`` subscribers (in Java's order)
    in ranges of ``n // m``, the first ``n % m`` getting one more.
    """
    _by_name(members)
    out: Assignment = {m.member_id: [] for m in members}
    for topic in sorted({t for m in members for t in m.topics if counts.get(t, 0) > 0}):
        subscribers = sorted((m for m in members if topic in m.topics), key=lambda m: m.java_order)
        per, extra = divmod(counts[topic], len(subscribers))
        for i, m in enumerate(subscribers):
            start = per * i + min(i, extra)
            out[m.member_id].extend(
                TopicPartition(topic, p) for p in range(start, start + per + (i < extra))
            )
    return out


def java_cooperative_sticky(members: Sequence[Member], counts: Mapping[str, int]) -> Assignment:
    """Java's ``CooperativeStickyAssignor``'s wanted assignment
    (:func:`~kiel.coordinator.cooperative.cooperative_sticky`)."""
    _by_name(members)
    return cooperative_sticky(members, counts)


def _capacity_data(capacity: float) -> bytes:
    return json.dumps({"capacity": capacity}, sort_keys=True).encode()


def capacity_of(user_data: Optional[bytes]) -> float:
    """The capacity a ``kiel.weighted`` member advertised (1.0 when it says none).

    Raises:
        AllocationError: the UserData is not what ``kiel.weighted`` writes.
    """
    if not user_data:
        return 1.0
    try:
        value = json.loads(user_data.decode())["capacity"]
    except (ValueError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise AllocationError(f"kiel.weighted: a member's UserData is not a capacity: "
                              f"{user_data[:40]!r}") from e
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AllocationError(f"kiel.weighted: capacity {value!r} is not a number")
    return float(value)


def _weighted(capacity: float) -> Assignor:
    def assign(members: Sequence[Member], counts: Mapping[str, int]) -> Assignment:
        capacities = {m.name: capacity_of(m.user_data) for m in members}
        return allocator_assign(weighted(capacities.get))(members, counts)

    return Assignor("kiel.weighted", assign, _capacity_data(capacity))


def _one(setting: Union[str, Callable[..., Any]], capacity: float) -> Assignor:
    """The assignor for one allocator setting (a name or a callable).

    Raises:
        ConfigError: an unknown name, a cooperative one, or neither a name nor a callable.
    """
    if isinstance(setting, str):
        key = setting.strip().lower().replace("-", "_")
        if key in _COOPERATIVE_STICKY:
            return Assignor("cooperative-sticky", java_cooperative_sticky, cooperative=True,
                            generation_data=True)
        if key.startswith(COOPERATIVE_PREFIX):
            inner = _one(setting.strip()[len(COOPERATIVE_PREFIX):], capacity)
            if inner.cooperative:
                raise ConfigError(f"allocator {setting!r}: {inner.name} is cooperative already")
            short = inner.name[len("kiel."):] if inner.name.startswith("kiel.") else inner.name
            return Assignor(f"kiel.cooperative.{short}", inner._assign, inner.user_data,
                            cooperative=True)
        if key == "range":
            return Assignor("range", java_range)
        if key == "roundrobin":
            return Assignor("roundrobin", java_round_robin)
        if key in ("round_robin", "naive"):  # kiel's string order, as in a ZooKeeper group
            return Assignor("kiel.round_robin", allocator_assign(round_robin))
        if key == "weighted":
            return _weighted(capacity)
        found = get_allocator(setting)  # ConfigError for an unknown name
        return Assignor(f"kiel.{key}", allocator_assign(found))
    if callable(setting):
        known = {sticky: "sticky", round_robin: "round_robin", range_allocator: "range",
                 kafka_round_robin: "roundrobin"}
        if setting in known:
            return _one(known[setting], capacity)
        name = getattr(setting, "__name__", None)
        if not name or name == "<lambda>":
            raise ConfigError("a broker group names its allocator on the wire, and every "
                              "member must offer the same name: give the callable a "
                              "__name__, or register it (kiel.allocators.register_allocator)")
        return Assignor(f"kiel.{name}", allocator_assign(setting))
    raise ConfigError(f"an allocator must be a name or a callable, not {type(setting).__name__}")


def assignors_for(setting: Any, capacity: float = 1.0) -> list[Assignor]:
    """The assignors a member offers, in order of preference.

    Args:
        setting: the consumer's ``allocator``: ``None`` (:data:`DEFAULT_ASSIGNORS`),
            a name, a callable, or a list of them (a preference list, as the
            peers' ``partition.assignment.strategy``).
        capacity: this member's capacity (``kiel.weighted`` advertises it).

    Returns:
        the assignors, with no name twice, all eager or all cooperative.

    Raises:
        ConfigError: an unknown name, an empty list, a nameless callable,
            one name twice, or eager and cooperative assignors together (the
            member could not know how to rebalance before the coordinator
            chose).
    """
    if setting is None:
        setting = list(DEFAULT_ASSIGNORS)
    settings = list(setting) if isinstance(setting, (list, tuple)) else [setting]
    if not settings:
        raise ConfigError("allocator: an empty list offers nothing to the group")
    out = [_one(s, capacity) for s in settings]
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"allocator: {names} names one assignor twice")
    kinds = {a.cooperative for a in out}
    if len(kinds) > 1:
        cooperative = [a.name for a in out if a.cooperative]
        eager = [a.name for a in out if not a.cooperative]
        raise ConfigError(f"allocator: {cooperative} rebalance cooperatively and {eager} "
                          "eagerly; one member offers one kind (name the eager ones "
                          "'cooperative:<name>' to run them cooperatively)")
    return out
