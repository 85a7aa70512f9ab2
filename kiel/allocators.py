"""Partition allocators: who in a consumer group consumes which partition.

Every member of a group computes the allocation on its own, from the same
inputs, so an allocator must be a *pure, deterministic* function: no I/O, no
clock, no randomness, nothing that depends on the process (never Python's
``hash()`` of a ``str``, which is salted per process). This module has no
kazoo and no Tornado in it.

The contract (the same as the original kiel's)::

    allocator(members, partitions) -> {member: {topic: [partition_id, ...]}}

* ``members``: the member names, sorted.
* ``partitions``: ``"<topic>:<partition_id>"`` strings, sorted (as strings).
  Topic names may contain ``.``, ``_`` and ``-``; the id is after the *last*
  ``:`` (:func:`parse_partition`, :func:`format_partition`).
* The result names every member (a member with nothing gets ``{}``), gives
  every partition to exactly one member, and lists partition ids in ascending
  order.

The built-ins sort and de-duplicate their inputs themselves, so they give the
same answer for any order of the same members and partitions.
:func:`validate` checks any allocator's result against the contract; the
grouped consumer runs it on every result, including your own allocator's.

Built-ins (also by name through :func:`get_allocator`):

* :func:`round_robin` (``"round_robin"``) -- the default; deals the
  partitions out in turn in string order, exactly like the original kiel's
  allocator.
* :func:`kafka_round_robin` (``"roundrobin"``, Kafka's name) -- deals them
  out in Java's ``RoundRobinAssignor`` order: by topic, then partition
  *number*. A name is one algorithm whichever coordinator forms the group.
* :func:`range_allocator` -- per topic, contiguous ranges, like the Scala 0.8
  consumer's ``range`` assignor.
* :func:`sticky` -- balanced, and moves few partitions when a member joins or
  leaves (rendezvous hashing with bounded loads).
* :func:`weighted` -- a factory: like :func:`sticky`, but in proportion to
  each member's capacity.

See ``docs/guides/allocators.rst`` for the movement measurements and the proof
that no pure allocator can be exactly minimal.
"""
import hashlib
import math
import numbers
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType
from typing import (
    Any,
    Optional,
    Union,
)

from kiel.exc import AllocationError, ConfigError
from kiel.structs import TopicPartition

#: ``{member: {topic: [partition_id, ...]}}``
Allocation = dict[str, dict[str, list[int]]]
#: ``allocator(members, partitions) -> Allocation``
Allocator = Callable[[Sequence[str], Sequence[str]], Allocation]
#: What :func:`weighted` accepts: ``member -> capacity`` as a mapping or a callable.
Capacities = Union[Mapping[str, Any], Callable[[str], Any]]

# A parsed partition: (its "topic:id" name, topic, partition id).
_Partition = tuple[str, str, int]

__all__ = [
    "ALLOCATORS",
    "Allocation",
    "Allocator",
    "Capacities",
    "allocate",
    "format_partition",
    "get_allocator",
    "parse_partition",
    "range_allocator",
    "register_allocator",
    "round_robin",
    "kafka_round_robin",
    "sticky",
    "validate",
    "weighted",
]


# --------------------------------------------------------------------------
# Partition names


def parse_partition(name: str) -> tuple[str, int]:
    """Split a ``"topic:partition_id"`` string.

    The id is what follows the *last* ``:``; it must be a canonical decimal
    (``"0"``, ``"12"``; not ``"-1"``, ``"07"`` or ``" 3"``), so that one
    partition has exactly one name.

    Args:
        name: e.g. ``"events.v2:3"``.

    Returns:
        ``(topic, partition_id)``, e.g. ``("events.v2", 3)``.

    Raises:
        ConfigError: ``name`` is not a str of that form.
    """
    if not isinstance(name, str):
        raise ConfigError(
            f"a partition name must be a str like 'topic:3', not {type(name).__name__}: {name!r}"
        )
    topic, sep, digits = name.rpartition(":")
    if (
        not sep
        or not topic
        or not digits.isascii()
        or not digits.isdigit()
        or (len(digits) > 1 and digits[0] == "0")
    ):
        raise ConfigError(
            f"bad partition name {name!r}: expected '<topic>:<partition id>', e.g. 'events:3'"
        )
    return topic, int(digits)


def format_partition(topic: str, partition_id: int) -> str:
    """The inverse of :func:`parse_partition`.

    Args:
        topic: a non-empty topic name.
        partition_id: a partition id, ``>= 0``.

    Returns:
        ``"topic:partition_id"``.

    Raises:
        ConfigError: an empty or non-str topic, or a negative or non-int id.
    """
    if not isinstance(topic, str) or not topic:
        raise ConfigError(f"a topic must be a non-empty str, not {topic!r}")
    if isinstance(partition_id, bool) or not isinstance(partition_id, int) or partition_id < 0:
        raise ConfigError(f"a partition id must be an int >= 0, not {partition_id!r}")
    return f"{topic}:{partition_id}"


# --------------------------------------------------------------------------
# Input and output helpers shared by the built-ins


def _members(members: Iterable[str]) -> list[str]:
    if isinstance(members, str):
        raise ConfigError(f"members must be a collection of member names, not the str {members!r}")
    out = set()
    for member in members:
        if not isinstance(member, str):
            raise ConfigError(
                f"a member name must be a str, not {type(member).__name__}: {member!r}"
            )
        out.add(member)
    return sorted(out)


def _partitions(partitions: Iterable[str]) -> list[_Partition]:
    if isinstance(partitions, str):
        raise ConfigError(
            f"partitions must be a collection of 'topic:id' names, not the str {partitions!r}"
        )
    return [(name, *parse_partition(name)) for name in sorted(set(partitions))]


def _prepare(
    members: Iterable[str], partitions: Iterable[str]
) -> tuple[list[str], list[_Partition]]:
    ms, ps = _members(members), _partitions(partitions)
    if ps and not ms:
        raise AllocationError(f"cannot allocate {len(ps)} partition(s): the group has no members")
    return ms, ps


def _build(members: list[str], owned: Iterable[tuple[str, str, int]]) -> Allocation:
    """``{member: {topic: sorted ids}}`` from (member, topic, id) triples."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    for member, topic, pid in owned:
        out[member].setdefault(topic, []).append(pid)
    return {m: {t: sorted(ids) for t, ids in sorted(topics.items())} for m, topics in out.items()}


# --------------------------------------------------------------------------
# round robin


def round_robin(members: Sequence[str], partitions: Sequence[str]) -> Allocation:
    """Deal the partitions out to the members in turn (the default).

    Partitions are taken in string order (so ``"t:10"`` comes before
    ``"t:2"``, as in the original kiel, whose allocator received
    ``sorted()`` strings) and dealt to the sorted members: the first partition
    to the first member, the second to the second, and so on, wrapping
    around. Each member gets ``floor(P/M)`` or ``ceil(P/M)`` partitions, but
    topics are not spread on purpose, and a join or leave shifts almost every
    partition.

    Args:
        members: member names (any order; sorted here).
        partitions: ``"topic:id"`` names (any order; sorted here).

    Returns:
        The allocation; identical, member for member, to the original kiel's
        ``naive_allocator`` on the same input (plus ``{}`` for idle members).

    Raises:
        ConfigError: a malformed member or partition name.
        AllocationError: partitions but no members.
    """
    ms, ps = _prepare(members, partitions)
    return _build(ms, ((ms[i % len(ms)], topic, pid) for i, (_, topic, pid) in enumerate(ps)))


def kafka_round_robin(members: Sequence[str], partitions: Sequence[str]) -> Allocation:
    """Deal the partitions out in turn in Java's order (Kafka's ``roundrobin``).

    As Java's ``RoundRobinAssignor`` when every member subscribes to every
    topic: partitions sorted by topic, then by partition *number* (``t:2``
    before ``t:10``), dealt to the sorted members in turn. It differs from
    :func:`round_robin` (string order) once a topic has more than ten
    partitions, or a topic's name sorts differently from its
    ``"topic:id"`` strings. In a group the brokers coordinate, the name
    ``"roundrobin"`` is Java's assignor itself
    (:mod:`kiel.coordinator.assignors`), which also skips members not
    subscribed to a topic.

    Args:
        members: member names (any order; sorted here).
        partitions: ``"topic:id"`` names (any order).

    Returns:
        The allocation.

    Raises:
        ConfigError: a malformed member or partition name.
        AllocationError: partitions but no members.
    """
    ms, ps = _prepare(members, partitions)
    ordered = sorted(ps, key=lambda p: (p[1], p[2]))
    return _build(ms, ((ms[i % len(ms)], topic, pid)
                       for i, (_, topic, pid) in enumerate(ordered)))


# --------------------------------------------------------------------------
# range


def range_allocator(members: Sequence[str], partitions: Sequence[str]) -> Allocation:
    """Per topic, give each member a contiguous range of partition ids.

    The Scala 0.8 consumer's ``range`` assignor: for each topic, its ``n``
    partitions (sorted by id) are split among the ``m`` sorted members into
    ranges of ``n // m``, and the first ``n % m`` members get one more. For
    ``C1-0, C1-1, C2-0, C2-1`` and partitions ``0..4`` that is
    ``0,1 -> C1-0; 2 -> C1-1; 3 -> C2-0; 4 -> C2-1``.

    Each topic is balanced on its own, but the extra partitions of every topic
    go to the same first members, so over many topics the first members can
    carry noticeably more.

    Args:
        members: member names (any order; sorted here).
        partitions: ``"topic:id"`` names (any order).

    Returns:
        The allocation: one contiguous run of ids per member and topic.

    Raises:
        ConfigError: a malformed member or partition name.
        AllocationError: partitions but no members.
    """
    ms, ps = _prepare(members, partitions)
    by_topic: dict[str, list[int]] = {}
    for _, topic, pid in ps:
        by_topic.setdefault(topic, []).append(pid)
    owned: list[tuple[str, str, int]] = []
    for topic, ids in by_topic.items():
        ids.sort()
        per, extra = divmod(len(ids), len(ms))
        for pos, member in enumerate(ms):
            start = per * pos + min(pos, extra)
            count = per + (1 if pos < extra else 0)
            owned.extend((member, topic, pid) for pid in ids[start:start + count])
    return _build(ms, owned)


# --------------------------------------------------------------------------
# sticky and weighted: rendezvous hashing with bounded loads


def _scores(member: str, names: list[bytes]) -> list[int]:
    """The member's rendezvous score for each partition: 64 bits of BLAKE2b.

    The same on every machine and in every process (unlike ``hash()``).
    """
    prefix = hashlib.blake2b(member.encode("utf-8", "surrogatepass") + b"\x00", digest_size=8)
    out = []
    for name in names:
        h = prefix.copy()
        h.update(name)
        out.append(int.from_bytes(h.digest(), "big"))
    return out


def _rendezvous(members: list[str], ps: list[_Partition], weights: list[Fraction]) -> Allocation:
    """Allocate ``ps`` to ``members`` in proportion to ``weights``.

    Strategy: every member ranks every partition by a keyed hash of
    (member, partition) -- its rendezvous preference list -- and walks down
    its list at a speed proportional to its share. All the (member, rank)
    steps are merged in the order ``(rank + 1/2) / share``, ties broken by the
    hash itself, and a step takes its partition if the partition is still free
    and the member is under its bound. Bounds come from the largest-remainder
    rounding of the exact shares; members tied at the rounding cut-off race
    for the last extra partitions (the first to reach its bound while an
    extra is left gets it).

    A member that joins or leaves only changes the steps that involve it (and
    the bounds), so most partitions stay where they were: the rendezvous
    property. The bounds are what keeps it balanced, and also what sometimes
    moves a few more partitions than the minimum; see the guide for the
    numbers and why no pure function can avoid that entirely.
    """
    P = len(ps)
    total = sum(weights, Fraction(0))
    if P and total <= 0:
        raise AllocationError(
            f"cannot allocate {P} partition(s): every member has capacity 0"
        )
    if not P:
        return _build(members, ())
    shares = [P * w / total for w in weights]
    caps, tied, extra = _bounds(shares, P)
    names = [name.encode("utf-8", "surrogatepass") for name, _, _ in ps]
    steps = _steps(members, names, shares, caps, tied)
    owner = _walk(steps, caps, tied, extra, P)
    return _build(members, ((members[o], topic, pid) for o, (_, topic, pid) in zip(owner, ps)))


def _bounds(shares: list[Fraction], P: int) -> tuple[list[int], list[bool], int]:
    """The largest-remainder rounding of ``shares`` (which add up to ``P``).

    Returns:
        ``(caps, tied, extra)``: each member's bound rounded down, or up when
        its remainder is above the cut-off; which members are tied at the
        cut-off; and how many extra partitions those tied members race for.
    """
    caps = [math.floor(s) for s in shares]
    extra = P - sum(caps)
    tied = [False] * len(shares)
    if extra:
        remainders = [s - c for s, c in zip(shares, caps)]
        cutoff = sorted(remainders, reverse=True)[extra - 1]
        for i, r in enumerate(remainders):
            if r > cutoff:
                caps[i] += 1
                extra -= 1
            elif r == cutoff:
                tied[i] = True
    return caps, tied, extra


def _steps(
    members: list[str], names: list[bytes], shares: list[Fraction], caps: list[int],
    tied: list[bool],
) -> list[tuple[float, int, int, int]]:
    """Every member's walk down its preference list, merged and sorted.

    Returns:
        ``(when, -score, member index, partition index)`` tuples in the
        order they are taken: ``(rank + 1/2) / share``, ties by the hash.
    """
    steps: list[tuple[float, int, int, int]] = []
    for i, member in enumerate(members):
        if caps[i] == 0 and not tied[i]:
            continue  # can never take anything
        scores = _scores(member, names)
        order = sorted(range(len(names)), key=lambda j: (-scores[j], j))
        num, den = shares[i].numerator, shares[i].denominator
        # (rank + 1/2) / share == (2 rank + 1) * den / (2 num): int / int is
        # correctly rounded, so every machine computes the same floats.
        for rank, j in enumerate(order):
            steps.append((((2 * rank + 1) * den) / (2 * num), -scores[j], i, j))
    steps.sort()
    return steps


def _walk(
    steps: list[tuple[float, int, int, int]], caps: list[int], tied: list[bool], extra: int,
    P: int,
) -> list[int]:
    """Take the steps in order: a free partition goes to a member under its bound.

    A tied member at its bound takes one of the ``extra`` partitions while
    any is left (the first to get there wins it).

    Returns:
        the owner (member index) of each partition.

    Raises:
        AllocationError: a partition is left over (cannot happen: the
            bounds add up to ``P``).
    """
    caps = list(caps)
    tied = list(tied)
    owner = [-1] * P
    load = [0] * len(caps)
    left = P
    for _, _, i, j in steps:
        if owner[j] >= 0:
            continue
        if load[i] >= caps[i]:
            if not (tied[i] and extra > 0):
                continue
            caps[i] += 1
            tied[i] = False
            extra -= 1
        owner[j] = i
        load[i] += 1
        left -= 1
        if not left:
            break
    if left:  # pragma: no cover - the bounds add up to P, so this cannot happen
        raise AllocationError(f"internal error: {left} partition(s) left unallocated")
    return owner


def sticky(members: Sequence[str], partitions: Sequence[str]) -> Allocation:
    """Balanced, and moves few partitions when a member joins or leaves.

    Rendezvous (highest-random-weight) hashing with bounded loads: each
    member gets ``floor(P/M)`` or ``ceil(P/M)`` partitions (over all topics
    together), and a partition stays with its member across a membership
    change unless the new member takes it, the old member left, or the bounds
    force it to move. With ``M`` members and ``P`` partitions, at least
    ``P // (M + 1)`` partitions must move when a member joins and at least
    the leaver's when one leaves; the guide shows how close this gets (a few
    partitions over, growing like the square root of ``P``) and proves that
    no pure function can always hit the minimum.

    Args:
        members: member names (any order; sorted here).
        partitions: ``"topic:id"`` names (any order).

    Returns:
        The allocation, balanced over all topics together.

    Raises:
        ConfigError: a malformed member or partition name.
        AllocationError: partitions but no members.
    """
    ms, ps = _prepare(members, partitions)
    return _rendezvous(ms, ps, [Fraction(1)] * len(ms))


def _capacity(value: Any, member: str, error: type) -> Fraction:
    """An exact, finite, non-negative capacity (``None`` means the default)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Decimal)):
        raise error(
            f"capacity of member {member!r} must be a number, not "
            f"{type(value).__name__}: {value!r}",
            member=member,
        )
    not_finite = f"capacity of member {member!r} must be finite, not {value!r}"
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise error(not_finite, member=member)
        exact = Fraction(value)
    elif isinstance(value, numbers.Rational):
        exact = Fraction(int(value.numerator), int(value.denominator))
    else:
        as_float = float(value)
        if not math.isfinite(as_float):
            raise error(not_finite, member=member)
        exact = Fraction(as_float)
    if exact < 0:
        raise error(f"capacity of member {member!r} must be >= 0, not {value!r}", member=member)
    return exact


def weighted(capacities: Optional[Capacities] = None, default: float = 1.0) -> Allocator:
    """Make an allocator that splits partitions in proportion to capacity.

    Member ``m`` gets ``P * c(m) / sum(c)`` partitions rounded by largest
    remainder, so it is always within one partition of its exact share; which
    partitions it gets is chosen as in :func:`sticky` (rendezvous hashing, a
    faster walk for a bigger share), so membership changes move few of them.
    With equal capacities the result is exactly :func:`sticky`'s. A member
    with capacity 0 gets nothing (unless every member has 0: an error).

    The grouped consumer reads each member's capacity from its registration;
    every member must see the same capacities, or their allocations disagree.

    Args:
        capacities: ``member -> capacity``: a mapping (copied now; missing
            members get ``default``) or a callable (called on every
            allocation; returning ``None`` means ``default``). ``None``: every
            member has ``default``.
        default: the capacity of a member the mapping does not name.

    Returns:
        An allocator ``(members, partitions) -> Allocation``.

    Raises:
        ConfigError: ``capacities`` is neither a mapping nor a callable, or it
            (or ``default``) holds a negative, infinite, NaN or non-numeric
            capacity. The returned allocator raises
            :class:`~kiel.exc.AllocationError` if the callable returns one,
            or if every member's capacity is 0.
    """
    default_exact = _capacity(default, "<default>", ConfigError)
    lookup: Callable[[str], Any]
    if capacities is None:
        def lookup(member: str) -> Any:
            return default_exact
    elif isinstance(capacities, Mapping):
        frozen = {
            m: _capacity(c, m, ConfigError) for m, c in capacities.items() if c is not None
        }
        lookup = frozen.get
    elif callable(capacities):
        lookup = capacities
    else:
        raise ConfigError(
            f"capacities must be a mapping or a callable member -> capacity, not "
            f"{type(capacities).__name__}"
        )

    def weighted_allocator(members: Sequence[str], partitions: Sequence[str]) -> Allocation:
        """Allocate in proportion to capacity (made by :func:`kiel.allocators.weighted`)."""
        ms, ps = _prepare(members, partitions)
        weights = []
        for member in ms:
            value = lookup(member)
            weights.append(
                default_exact if value is None else _capacity(value, member, AllocationError)
            )
        return _rendezvous(ms, ps, weights)

    return weighted_allocator


# --------------------------------------------------------------------------
# The checker


def _preview(items: Collection[Any], limit: int = 5) -> str:
    shown = ", ".join(repr(i) for i in list(items)[:limit])
    more = len(items) - limit
    return f"{shown} and {more} more" if more > 0 else shown


def validate(
    allocation: Any, members: Iterable[str], partitions: Iterable[str]
) -> None:
    """Check an allocator's result against the contract.

    The grouped consumer calls this on every allocation, the built-ins' and
    yours alike, before acting on it.

    Checks that ``allocation`` is a dict of member name to a dict of topic
    name to a list (or tuple/set) of int partition ids; that it names only
    known members and every one of them (an idle member maps to ``{}``); and
    that it gives every partition to exactly one member and nothing else.
    The order of the ids is not checked (the built-ins sort them).

    Args:
        allocation: what the allocator returned.
        members: the members it was given.
        partitions: the ``"topic:id"`` names it was given.

    Raises:
        AllocationError: the first problem found, with the member, topic and
            partition in the message and as context attributes.
        ConfigError: ``members`` or ``partitions`` themselves are malformed.
    """
    known = set(_members(members))
    expected: set[tuple[str, int]] = {(topic, pid) for _, topic, pid in _partitions(partitions)}
    if not isinstance(allocation, Mapping):
        raise AllocationError(
            "an allocation must be a dict {member: {topic: [partition ids]}}, not "
            f"{type(allocation).__name__}"
        )
    owner_of: dict[tuple[str, int], str] = {}
    for member, topics in allocation.items():
        _check_member(member, topics, known)
        for topic, ids in topics.items():
            _check_topic(member, topic, ids)
            for pid in ids:
                _check_partition(member, topic, pid, expected, owner_of)
                owner_of[(topic, pid)] = member
    absent = sorted(known.difference(allocation))
    if absent:
        raise AllocationError(
            f"member(s) {_preview(absent)} missing from the allocation "
            "(a member with no partitions maps to {})",
            member=absent[0],
        )
    missing = sorted(expected.difference(owner_of))
    if missing:
        names = [format_partition(t, p) for t, p in missing]
        raise AllocationError(
            f"{len(missing)} partition(s) not allocated to any member: {_preview(names)}",
            topic=missing[0][0],
            partition=missing[0][1],
        )


# --------------------------------------------------------------------------
# The boundary between kiel's partitions and the plug-in interface


def _check_member(member: Any, topics: Any, known: set[str]) -> None:
    """One allocation key and its value: a known member name mapping to a dict."""
    if not isinstance(member, str):
        raise AllocationError(
            f"allocation key {member!r} is not a member name (a str)", member=member
        )
    if member not in known:
        raise AllocationError(
            f"allocation names unknown member {member!r}; the members are "
            f"{_preview(sorted(known))}",
            member=member,
        )
    if not isinstance(topics, Mapping):
        raise AllocationError(
            f"member {member!r} maps to a {type(topics).__name__}, expected a dict "
            "{topic: [partition ids]}",
            member=member,
        )


def _check_topic(member: str, topic: Any, ids: Any) -> None:
    """One topic of a member: a name mapping to a collection of ids."""
    if not isinstance(topic, str):
        raise AllocationError(
            f"member {member!r} has topic key {topic!r}, which is not a str", member=member
        )
    if isinstance(ids, (str, bytes, Mapping)) or not isinstance(ids, Collection):
        raise AllocationError(
            f"member {member!r}, topic {topic!r}: expected a list of partition ids, "
            f"not {type(ids).__name__}",
            member=member,
            topic=topic,
        )


def _check_partition(member: str, topic: str, pid: Any, expected: set[tuple[str, int]],
                     owner_of: dict[tuple[str, int], str]) -> None:
    """One partition id: an int naming a partition to allocate, given to no one yet."""
    if isinstance(pid, bool) or not isinstance(pid, int):
        raise AllocationError(
            f"member {member!r}, topic {topic!r}: partition id {pid!r} is not an int",
            member=member,
            topic=topic,
        )
    key = (topic, pid)
    if key not in expected:
        raise AllocationError(
            f"member {member!r} is given {topic}:{pid}, which is not one of the "
            "partitions to allocate",
            member=member,
            topic=topic,
            partition=pid,
        )
    if key in owner_of:
        other = owner_of[key]
        where = f"twice to {member!r}" if other == member else f"to both {other!r} and {member!r}"
        raise AllocationError(
            f"partition {topic}:{pid} is allocated {where}",
            member=member,
            topic=topic,
            partition=pid,
        )


def allocate(
    allocator: Allocator, members: Sequence[str], partitions: Iterable[TopicPartition]
) -> dict[str, list[TopicPartition]]:
    """Run ``allocator`` for kiel code, which speaks :class:`~kiel.structs.TopicPartition`.

    The one place where partitions become the plug-in interface's
    ``"topic:id"`` names and come back: the names are made here, the
    allocator's result is checked with :func:`validate`, and its
    ``{topic: [ids]}`` maps are turned into partitions again.

    Args:
        allocator: any allocator (a built-in or the application's).
        members: the group's members.
        partitions: every partition to allocate.

    Returns:
        ``{member: [TopicPartition, ...]}``, sorted, for every member.

    Raises:
        AllocationError: the allocator raised (its exception is the cause),
            or its result breaks the contract.
        ConfigError: a malformed member name or partition.
    """
    names = sorted(format_partition(tp.topic, tp.partition) for tp in partitions)
    ms = sorted(members)
    try:
        allocation = allocator(ms, names)
    except (AllocationError, ConfigError):
        raise
    except Exception as e:  # noqa: BLE001 - the application's code: said typed, with its cause
        name = getattr(allocator, "__name__", type(allocator).__name__)
        raise AllocationError(f"allocator {name} raised {type(e).__name__}: {e}") from e
    validate(allocation, ms, names)
    return {
        member: sorted(TopicPartition(t, p) for t, ids in topics.items() for p in ids)
        for member, topics in allocation.items()
    }


# --------------------------------------------------------------------------
# Registry by name


_REGISTRY: dict[str, Allocator] = {
    "round_robin": round_robin,
    "roundrobin": kafka_round_robin,
    "range": range_allocator,
    "sticky": sticky,
}
# The original kiel's name for the round-robin function. ("roundrobin" was
# an alias of "round_robin" too, before a name meant one algorithm in every
# coordinator: it is Kafka's, Java's order; see the allocators guide.)
_ALIASES = {"naive": "round_robin"}

#: The allocators known by name (read-only view; add with :func:`register_allocator`).
ALLOCATORS: Mapping[str, Allocator] = MappingProxyType(_REGISTRY)


def _normalize(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    return _ALIASES.get(key, key)


def get_allocator(name: Union[str, Allocator]) -> Allocator:
    """Look an allocator up by name, so that configs can name one.

    Names are case-insensitive and ``-`` equals ``_``: ``"round_robin"``
    (also ``"naive"``), ``"roundrobin"`` (Java's order:
    :func:`kafka_round_robin`), ``"range"``, ``"sticky"``, and
    whatever :func:`register_allocator` added. A callable is returned as is,
    so ``get_allocator(config.get("allocator", "round_robin"))`` accepts both.

    Args:
        name: an allocator name, or an allocator.

    Returns:
        The allocator.

    Raises:
        ConfigError: an unknown name, or neither a str nor a callable.
    """
    if isinstance(name, str):
        allocator = _REGISTRY.get(_normalize(name))
        if allocator is None:
            raise ConfigError(
                f"unknown allocator {name!r}; known: {', '.join(sorted(_REGISTRY))}"
            )
        return allocator
    if callable(name):
        return name
    raise ConfigError(f"an allocator must be a name or a callable, not {type(name).__name__}")


def register_allocator(name: str, allocator: Allocator, replace: bool = False) -> None:
    """Make an allocator available to :func:`get_allocator` under ``name``.

    Args:
        name: the name (normalized as :func:`get_allocator` does).
        allocator: ``(members, partitions) -> Allocation``.
        replace: allow replacing an existing name.

    Raises:
        ConfigError: an empty name, a non-callable allocator, or a name that
            is taken (and ``replace`` is false).
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"an allocator name must be a non-empty str, not {name!r}")
    if not callable(allocator):
        raise ConfigError(f"allocator {name!r} must be callable, not {type(allocator).__name__}")
    key = _normalize(name)
    if key in _REGISTRY and not replace:
        raise ConfigError(f"an allocator named {key!r} is already registered")
    _REGISTRY[key] = allocator
