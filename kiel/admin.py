"""Inspect and administer topics and ZooKeeper-grouped consumer groups.

What the ``kiel`` command (:mod:`kiel.cli`) runs, usable from code too. For a
0.8 group this shows what Kafka's ``ConsumerOffsetChecker`` and Burrow show:
the members registered under ``/consumers/<group>/ids``, the owner of every
partition (``/consumers/<group>/owners/<topic>/<partition>``), the committed
offset (OffsetFetch v0, which a 0.8 broker reads from
``/consumers/<group>/offsets``), the high watermark and the lag.

For groups the brokers coordinate (current clusters, no ZooKeeper):
:func:`list_broker_groups` (ListGroups v2, every broker) and
:func:`describe_broker_group` (DescribeGroups v4 or v2 at the group's
coordinator, with each member's subscription and assignment decoded from the
embedded consumer protocol), :func:`describe_broker_group_offsets` (that,
plus the committed offset, log end and lag of every partition the group
consumes or committed) and :func:`reset_broker_group` (refused while the
group is live). They take a connected :class:`~kiel.cluster.Cluster`.
"""

import contextlib
import datetime
import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import (
    Any,
    NamedTuple,
    Optional,
    Union,
)

from kazoo.exceptions import KazooException, NoNodeError

import kiel.client  # noqa: F401  (registers the connection settings options_checked takes)
from kiel import _options
from kiel.cluster import Cluster
from kiel.consumer.offsets import (
    EARLIEST,
    LATEST,
    GroupOffsets,
    fetch_committed,
    list_offsets,
    send_commit,
)
from kiel.consumer.watermarks import served_ends
from kiel.exc import (
    ConfigError,
    ConsumerProtocolError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    KielError,
    NonEmptyGroupError,
    ProtocolError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnknownTopicError,
    for_code,
)
from kiel.protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    DescribeGroupsRequestV2,
    DescribeGroupsRequestV4,
    ListGroupsRequestV2,
    decode_assignment,
    decode_subscription,
)
from kiel.protocol.group_membership import CONSUMER_PROTOCOL_TYPE
from kiel.protocol.versions import DESCRIBE_GROUPS, LIST_GROUPS
from kiel.retry import attempts
from kiel.structs import TopicPartition
from kiel.zookeeper.client import ZooKeeper, translate

__all__ = [
    "CURRENT",
    "DEFAULT_TIMEOUT",
    "INACTIVE_STATES",
    "BrokerGroup",
    "BrokerGroupDescription",
    "BrokerGroupMember",
    "GroupDescription",
    "GroupPartition",
    "PartitionDescription",
    "ResetRow",
    "ShiftBy",
    "TopicDescription",
    "assigned_partitions",
    "check_resettable",
    "describe_broker_group",
    "describe_broker_group_offsets",
    "describe_group",
    "describe_topics",
    "existing_partitions",
    "list_broker_groups",
    "list_groups",
    "reset_broker_group",
    "reset_broker_group_offsets",
    "reset_group",
    "reset_group_offsets",
]

#: Seconds the ZooKeeper functions wait for ZooKeeper by default: the
#: brokers' default request timeout (:class:`~kiel.cluster.Cluster`'s), so
#: one command waits as long for either.
DEFAULT_TIMEOUT = 30.0

#: Where a reset may move a group: ``"earliest"``, ``"latest"``,
#: :data:`CURRENT`, an offset, a time, or a :class:`ShiftBy`.
ResetTo = Union[str, int, datetime.datetime, "ShiftBy"]


#: A selection of partitions: ``{topic: partitions}``, ``None`` for all of a topic's.
Selection = Mapping[str, Optional[Sequence[int]]]


class ShiftBy(NamedTuple):
    """Move each partition's committed offset by ``n`` (negative: back),
    stopping at the earliest offset and the log end, as Kafka's tool does."""

    n: int


#: Reset to the committed offset itself: shows where the group stands.
CURRENT = "current"


class ResetRow(NamedTuple):
    """One partition of a reset: the committed offset (``None``: none) and the new one."""

    topic: str
    partition: int
    current: Optional[int]
    new: int


class PartitionDescription(NamedTuple):
    """One partition: its leader and replicas, and the offsets it holds."""

    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    earliest: int
    highwater: int


class TopicDescription(NamedTuple):
    """One topic and its partitions."""

    topic: str
    partitions: list[PartitionDescription]


class GroupPartition(NamedTuple):
    """One partition as a group sees it (``None``: unknown or never committed).

    ``highwater`` is the log end offset, ``lag`` the log end minus the
    committed offset. ``past_end`` says the committed offset lies above the
    log end (the log was truncated or lost since, as when a broker restarts
    without its data, or the offset was set there): then ``lag`` is
    ``None``, not 0, since the group is not caught up but pointing at
    records that do not exist; a member starting there resets by its
    ``offset_reset``.
    """

    topic: str
    partition: int
    owner: Optional[str]
    committed: Optional[int]
    highwater: Optional[int]
    lag: Optional[int]
    past_end: bool = False


class GroupDescription(NamedTuple):
    """A group: its live members and every partition of the topics it consumes."""

    group: str
    members: list[str]
    partitions: list[GroupPartition]

    @property
    def total_lag(self) -> Optional[int]:
        """The sum of the partitions' lags (``None``: no partition has one)."""
        return _total_lag(self.partitions)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "group": self.group,
            "members": self.members,
            "total_lag": self.total_lag,
            "partitions": [p._asdict() for p in self.partitions],
        }


def _total_lag(rows: Sequence[GroupPartition]) -> Optional[int]:
    lags = [row.lag for row in rows if row.lag is not None]
    return sum(lags) if lags else None


async def _lag_rows(cluster: Cluster, tps: Sequence[TopicPartition],
                    owners: Mapping[TopicPartition, str],
                    committed: Mapping[TopicPartition, Optional[int]]) -> list[GroupPartition]:
    """One row per partition: its owner, committed offset, log end and lag.

    The log end is the ListOffsets LATEST answer, except where the committed
    offset lies above it: there the end is asked of the leader's Fetch
    (:func:`~kiel.consumer.watermarks.served_ends`), since some brokers
    answer ListOffsets short (Tansu: the last batch's base offset plus one,
    so a group caught up after a batch of many records looked past the
    end). A committed offset still above that end is past the log end: lag
    ``None`` and ``past_end``, never a lag of 0 that reads as caught up.

    Raises:
        BrokerError, NoBrokersError, KielConnectionError, RequestTimeoutError:
            as for :func:`~kiel.consumer.offsets.list_offsets`.
    """
    ends = await list_offsets(cluster, {tp: LATEST for tp in tps}) if tps else {}
    above: dict[TopicPartition, int] = {}
    for tp in tps:
        done, end = committed.get(tp), ends.get(tp)
        if done is not None and end is not None and done > end:
            above[tp] = end
    if above:  # a short answer, or truly past the end: the Fetch says which
        earliest = await list_offsets(cluster, {tp: EARLIEST for tp in above})
        ends.update(await served_ends(cluster, earliest, above))
    rows = []
    for tp in tps:
        done, end = committed.get(tp), ends.get(tp)
        past = done is not None and end is not None and done > end
        lag = None if done is None or end is None or past else end - done
        rows.append(GroupPartition(tp.topic, tp.partition, owners.get(tp), done, end, lag, past))
    return rows


@contextlib.asynccontextmanager
async def _cluster(brokers: Union[str, Sequence[str]], **options: Any) -> AsyncIterator[Cluster]:
    cluster = Cluster(brokers, **options)
    try:
        await cluster.connect()
        yield cluster
    finally:
        cluster.close()


@contextlib.asynccontextmanager
async def _zookeeper(hosts: str, timeout: float) -> AsyncIterator[ZooKeeper]:
    """A session for the duration of the block; kazoo's errors become ZooKeeperError.

    ``timeout`` bounds the first connection and is the session timeout too:
    kazoo waits that long (not its default 10 s) for each server's answer
    to a connect, and stopping a start that timed out waits for that attempt.
    """
    zk = ZooKeeper(hosts, session_timeout=timeout, connect_timeout=timeout)
    await zk.start()
    try:
        yield zk
    except KazooException as e:
        raise translate(e, "a read") from e
    finally:
        await zk.stop()


@_options.options_checked
async def describe_topics(
    brokers: Union[str, Sequence[str]], topics: Sequence[str] = (), **options: Any
) -> list[TopicDescription]:
    """Leaders, replicas, ISR, earliest offset and high watermark per partition.

    Args:
        brokers: the bootstrap brokers.
        topics: the topics to describe (none: every topic the cluster has).
        **options: :class:`~kiel.cluster.Cluster` settings (``client_id``, ...).

    Raises:
        UnknownTopicError: a named topic does not exist (it is not created,
            even by a broker that creates topics named in a Metadata request).
        NoBrokersError: the cluster could not be reached.
    """
    async with _cluster(brokers, **options) as cluster:
        # Strategy: ask for every topic, never for the ones named: a broker
        # that auto-creates topics (0.8 by default, Tansu always) would
        # create a misspelt name just because it was asked about.
        await existing_partitions(cluster, topics)
        names = sorted(set(topics) or cluster.partitions)
        tps = [TopicPartition(t, p) for t in names for p in sorted(cluster.partitions[t])]
        earliest = await list_offsets(cluster, {tp: EARLIEST for tp in tps})
        latest = await list_offsets(cluster, {tp: LATEST for tp in tps})
        return [
            TopicDescription(
                topic,
                [
                    PartitionDescription(
                        info.partition,
                        info.leader,
                        info.replicas,
                        info.isr,
                        earliest[TopicPartition(topic, info.partition)],
                        latest[TopicPartition(topic, info.partition)],
                    )
                    for _, info in sorted(cluster.partitions[topic].items())
                ],
            )
            for topic in names
        ]


async def _children(zk: ZooKeeper, path: str) -> list[str]:
    try:
        return sorted(await zk.get_children(path))
    except NoNodeError:
        return []


async def list_groups(zk_hosts: str, *, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    """The groups registered under ``/consumers`` in ZooKeeper, sorted.

    Raises:
        ZooKeeperError: ZooKeeper could not be reached within ``timeout``.
    """
    async with _zookeeper(zk_hosts, timeout) as zk:
        return await _children(zk, "/consumers")


async def _group_topics(zk: ZooKeeper, base: str, members: list[str]) -> set[str]:
    """Topics the group owns, committed, or that a static member subscribes to."""
    topics = set(await _children(zk, f"{base}/owners"))
    topics.update(await _children(zk, f"{base}/offsets"))
    for member in members:
        try:
            data, _ = await zk.get(f"{base}/ids/{member}")
        except NoNodeError:
            continue  # left meanwhile
        try:
            registration = json.loads(data or b"{}")
        except ValueError:
            continue  # not a 0.8-layout registration: owners/offsets still tell
        if registration.get("pattern") == "static":
            topics.update(registration.get("subscription", {}))
    return topics


async def _owners(zk: ZooKeeper, base: str, tps: list[TopicPartition]) -> dict[TopicPartition, str]:
    owners: dict[TopicPartition, str] = {}
    for tp in tps:
        try:
            data, _ = await zk.get(f"{base}/owners/{tp.topic}/{tp.partition}")
        except NoNodeError:
            continue
        owners[tp] = (data or b"").decode("utf-8", "replace")
    return owners


@_options.options_checked
async def describe_group(
    brokers: Union[str, Sequence[str]],
    zk_hosts: str,
    group: str,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    **options: Any,
) -> GroupDescription:
    """Members, owners, committed offsets, high watermarks and lag of a group.

    A committed offset above the log end is shown as such (``past_end``,
    lag ``None``: see :class:`GroupPartition`).

    Raises:
        ConfigError: ZooKeeper has no such group.
        ZooKeeperError: ZooKeeper could not be reached.
        NoBrokersError: the cluster could not be reached.
    """
    async with _zookeeper(zk_hosts, timeout) as zk, _cluster(brokers, **options) as cluster:
        base = f"/consumers/{group}"
        if await zk.exists(base) is None:
            raise ConfigError(f"ZooKeeper has no group {group!r} (no {base})")
        members = await _children(zk, f"{base}/ids")
        every = await cluster.all_topics()  # naming one could auto-create it
        tps = [TopicPartition(topic, p) for topic in sorted(await _group_topics(zk, base, members))
               if topic in every for p in range(every[topic])]
        owners = await _owners(zk, base, tps)
        committed = await fetch_committed(cluster, group, tps) if tps else {}
        return GroupDescription(group, members, await _lag_rows(cluster, tps, owners, committed))


@_options.options_checked
async def reset_group(
    brokers: Union[str, Sequence[str]],
    zk_hosts: str,
    group: str,
    topics: Sequence[str],
    to: ResetTo,
    *,
    force: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    **options: Any,
) -> dict[TopicPartition, int]:
    """Commit new offsets for every partition of ``topics`` in ``group``.

    :func:`reset_group_offsets` with every partition of ``topics``,
    executed; see it for ``to`` and the errors.

    Returns:
        The offset committed per partition.
    """
    rows = await reset_group_offsets(brokers, zk_hosts, group, dict.fromkeys(topics), to,
                                     execute=True, force=force, timeout=timeout, **options)
    return {TopicPartition(r.topic, r.partition): r.new for r in rows}


@_options.options_checked
async def reset_group_offsets(
    brokers: Union[str, Sequence[str]],
    zk_hosts: str,
    group: str,
    selection: Optional[Selection],
    to: ResetTo,
    *,
    execute: bool,
    force: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    **options: Any,
) -> list[ResetRow]:
    """Work out (and with ``execute``, commit) new offsets for a ZooKeeper group.

    Args:
        selection: the partitions to move, ``{topic: partitions}`` (``None``
            for all of a topic's); ``None``: every partition of the topics
            the group owns, committed or statically subscribes to.
        to: ``"earliest"``, ``"latest"``, :data:`CURRENT`, an offset (for
            every partition; must lie between the partition's earliest
            offset and its high watermark), a ``datetime`` (ListOffsets by
            time, at the log segment granularity a 0.8 broker offers) or a
            :class:`ShiftBy` (from the committed offset, stopping at either
            end of the log).
        execute: commit the new offsets; false: a dry run that only shows them.
        force: reset even while members are registered (a live member may
            commit over the reset: stop the group first when you can).

    Returns:
        A row per partition: its committed offset (``None``: none) and the new one.

    Raises:
        ConfigError: members are alive and ``force`` is false; an offset out
            of range; a partition the topic lacks; :data:`CURRENT` or a
            shift for a partition without a committed offset; a bad ``to``.
        UnknownTopicError: a selected topic does not exist (it is not created).
        ZooKeeperError, NoBrokersError: a part could not be reached.
    """
    async with _zookeeper(zk_hosts, timeout) as zk, _cluster(brokers, **options) as cluster:
        base = f"/consumers/{group}"
        members = await _children(zk, f"{base}/ids")
        if members and not force:
            raise ConfigError(
                f"group {group!r} has {len(members)} live member(s) ({', '.join(members[:5])}); "
                "stop them first, or pass --force"
            )
        if selection is None:
            selection = dict.fromkeys(await _group_topics(zk, base, members))
        tps = await _selected(cluster, selection)
        rows = await _plan(cluster, tps, await fetch_committed(cluster, group, tps), to)
        if execute and rows:
            await send_commit(cluster, group, {TopicPartition(r.topic, r.partition): r.new
                                               for r in rows})
        return rows


async def existing_partitions(cluster: Cluster, topics: Iterable[str]) -> dict[str, list[int]]:
    """The partitions of ``topics``, which must exist, asked without naming them.

    Strategy: one Metadata request for every topic. A request naming a topic
    makes a broker that auto-creates topics (Kafka 0.8's default, Tansu
    always) create it; Metadata v4's ``allow_auto_topic_creation=false``
    would stop a current broker only, and 0.8 has no such switch.

    Returns:
        ``{topic: sorted partition ids}`` (the cluster's metadata is
        refreshed for every topic on the way).

    Raises:
        UnknownTopicError: a topic does not exist (the first one missing).
        NoBrokersError: no broker answered within the retries.
    """
    every = await cluster.all_topics()
    found: dict[str, list[int]] = {}
    for topic in topics:
        if topic not in every:
            raise UnknownTopicError(
                "unknown topic (kiel asked for every topic, so none was created)", topic=topic)
        found[topic] = sorted(cluster.partitions[topic])
    return found


async def _selected(cluster: Cluster, selection: Selection) -> list[TopicPartition]:
    """The partitions ``selection`` names, checked against the topics that exist.

    Raises:
        UnknownTopicError: a topic does not exist (it is not created).
        ConfigError: a partition the topic lacks.
    """
    known = await existing_partitions(cluster, sorted(selection))
    tps: list[TopicPartition] = []
    for topic, partitions in sorted(selection.items()):
        wanted = known[topic] if partitions is None else sorted(set(partitions))
        missing = sorted(set(wanted) - set(known[topic]))
        if missing:
            raise ConfigError(f"topic {topic!r} has partitions {known[topic]}, not {missing}",
                              topic=topic, partition=missing[0])
        tps.extend(TopicPartition(topic, p) for p in wanted)
    return tps


async def _plan(
    cluster: Cluster,
    tps: list[TopicPartition],
    committed: Mapping[TopicPartition, Optional[int]],
    to: ResetTo,
) -> list[ResetRow]:
    """The new offset of every partition of ``tps``, beside its committed one.

    Raises:
        ConfigError: an offset outside a partition's range; :data:`CURRENT`
            or a shift where nothing is committed; a bad ``to``.
    """
    if not tps:
        return []
    current = {tp: committed.get(tp) for tp in tps}
    if to in (CURRENT,) or isinstance(to, ShiftBy):
        unknown = [f"{tp.topic}:{tp.partition}" for tp in tps if current[tp] is None]
        if unknown:
            raise ConfigError(
                f"the group committed no offset for {', '.join(unknown[:5])}: nothing to "
                f"{'shift' if isinstance(to, ShiftBy) else 'keep'}; reset those to an offset")
    new: dict[TopicPartition, int]
    if to == CURRENT:
        new = {tp: current[tp] for tp in tps}  # type: ignore[misc]
    elif to == "earliest":
        new = await list_offsets(cluster, {tp: EARLIEST for tp in tps})
    elif to == "latest":
        new = await list_offsets(cluster, {tp: LATEST for tp in tps})
    elif isinstance(to, datetime.datetime):
        ms = max(0, int(to.timestamp() * 1000))
        new = await list_offsets(cluster, {tp: ms for tp in tps})
    elif isinstance(to, ShiftBy) or (isinstance(to, int) and not isinstance(to, bool)):
        low = await list_offsets(cluster, {tp: EARLIEST for tp in tps})
        high = await list_offsets(cluster, {tp: LATEST for tp in tps})
        if isinstance(to, ShiftBy):
            new = {tp: min(high[tp], max(low[tp], current[tp] + to.n))  # type: ignore[operator]
                   for tp in tps}
        else:
            for tp in tps:
                if not low[tp] <= to <= high[tp]:
                    raise ConfigError(
                        f"offset {to} is outside {tp.topic}:{tp.partition}'s range "
                        f"[{low[tp]}, {high[tp]}]", topic=tp.topic, partition=tp.partition)
            new = dict.fromkeys(tps, to)
    else:
        raise ConfigError(
            f"reset to earliest, latest, current, an offset, a datetime or a ShiftBy; got {to!r}")
    return [ResetRow(tp.topic, tp.partition, current[tp], new[tp]) for tp in tps]


# ----------------------------------------------------------------------
# Groups the brokers coordinate


class BrokerGroupMember(NamedTuple):
    """One member of a broker-coordinated group, as its coordinator describes it.

    ``subscription`` and ``assignment`` are decoded from the embedded
    consumer protocol for a ``"consumer"`` group; ``None`` when the
    coordinator sent no bytes (it fills them only while the group is
    stable; Tansu never does) or the group speaks another protocol. The raw
    bytes are kept in ``metadata`` and ``assignment_bytes``.
    """

    member_id: str
    group_instance_id: Optional[str]
    client_id: str
    client_host: str
    subscription: Optional[ConsumerSubscription]
    assignment: Optional[ConsumerAssignment]
    metadata: bytes
    assignment_bytes: bytes


class BrokerGroup(NamedTuple):
    """A broker-coordinated group: its state (``Stable``, ``PreparingRebalance``,
    ``CompletingRebalance``, ``Empty``, ``Dead``), protocol type, the chosen
    protocol (the assignor's name, while stable) and its members."""

    group: str
    state: str
    protocol_type: str
    protocol: str
    members: list[BrokerGroupMember]


async def list_broker_groups(cluster: Cluster) -> list[tuple[str, str]]:
    """Every group the cluster's brokers coordinate (ListGroups v2, asked of each broker).

    Args:
        cluster: a connected cluster (its backoff bounds the retries).

    Returns:
        ``(group_id, protocol_type)`` pairs, sorted (``"consumer"`` for
        consumer groups, ``""`` for a group that has only committed offsets).
        Tansu lists a group only once it has committed offsets.

    Raises:
        UnsupportedFeatureError: a broker speaks no ListGroups kiel knows (a
            0.8 broker: its groups are in ZooKeeper, see :func:`list_groups`).
        BrokerError: a broker's error that is not retriable, or that
            persisted past the retries.
        NoBrokersError, KielConnectionError, RequestTimeoutError: a broker
            could not be reached within the retries.
    """
    if not cluster.brokers:
        await cluster.refresh_metadata()
    found: set[tuple[str, str]] = set()
    for broker in sorted(cluster.brokers):
        async for attempt in attempts(cluster.backoff):
            try:
                (await cluster.versions(broker)).of(LIST_GROUPS)
                response = await cluster.send(broker, ListGroupsRequestV2())
            except KielError as e:
                if not e.retriable:
                    raise
                attempt.failed(e)
                continue
            error = for_code(response.error_code)
            if error is not None:
                failure = error(api="ListGroups", broker_id=broker, errno=response.error_code)
                if not failure.retriable:
                    raise failure
                attempt.failed(failure)
                continue
            found.update((g.group_id, g.protocol_type) for g in response.groups)
    return sorted(found)


async def describe_broker_group(cluster: Cluster, group: str) -> BrokerGroup:
    """A broker-coordinated group's state and members (DescribeGroups at its coordinator).

    DescribeGroups v4 where the coordinator speaks it (members carry their
    instance id), else v2; a coordinator that moved is looked up again.

    Args:
        cluster: a connected cluster (its backoff bounds the retries).
        group: the group id.

    Returns:
        the group; a group the coordinator does not know comes back with no
        members, ``Dead`` (Apache Kafka) or ``Empty`` (Tansu), not an error.

    Raises:
        UnsupportedFeatureError: the coordinator speaks no DescribeGroups
            kiel knows (a 0.8 broker: see :func:`describe_group`).
        ConsumerProtocolError: a member's subscription or assignment bytes
            do not parse (``group`` says which group).
        BrokerError: the group's error (e.g.
            :class:`~kiel.exc.GroupAuthorizationFailedError`), at once, or a
            retriable one that persisted past the retries.
        NoBrokersError, KielConnectionError, RequestTimeoutError: the
            coordinator could not be reached within the retries.
    """
    async for attempt in attempts(cluster.backoff):
        try:
            coordinator = await cluster.coordinator(group)
            version = (await cluster.versions(coordinator)).of(DESCRIBE_GROUPS)
            request: Any = (DescribeGroupsRequestV4([group], False) if version >= 4
                            else DescribeGroupsRequestV2([group]))
            response = await cluster.send(coordinator, request)
        except KielError as e:
            if not e.retriable:
                raise
            attempt.failed(e)
            continue
        answer = next((g for g in response.groups if g.group_id == group), None)
        if answer is None:
            raise ProtocolError("the coordinator's DescribeGroups answer left the group out",
                                api="DescribeGroups", group=group, broker_id=coordinator)
        error = for_code(answer.error_code)
        if error is not None:
            failure = error(api="DescribeGroups", group=group, errno=answer.error_code)
            if not failure.retriable:
                raise failure
            attempt.failed(failure)
            continue
        return _broker_group(answer)
    raise AssertionError("attempts() ended without an answer or an error")  # pragma: no cover


def _broker_group(answer: Any) -> BrokerGroup:
    """A DescribeGroups v2 or v4 group answer as a :class:`BrokerGroup`. Pure.

    Raises:
        ConsumerProtocolError: a consumer member's bytes do not parse.
    """
    consumer = answer.protocol_type == CONSUMER_PROTOCOL_TYPE
    members = []
    for m in answer.members:
        subscription: Optional[ConsumerSubscription] = None
        assignment: Optional[ConsumerAssignment] = None
        # Strategy: empty bytes mean "not given" here (a group between
        # generations), not an empty subscription or assignment.
        try:
            if consumer and m.member_metadata:
                subscription = decode_subscription(m.member_metadata)[1]
            if consumer and m.member_assignment:
                assignment = decode_assignment(m.member_assignment)[1]
        except ConsumerProtocolError as e:
            e.with_context(group=answer.group_id, member=m.member_id)
            raise
        members.append(BrokerGroupMember(
            # DescribeGroups v2 members carry no instance id (v4 does).
            m.member_id, getattr(m, "group_instance_id", None), m.client_id, m.client_host,
            subscription, assignment, m.member_metadata, m.member_assignment,
        ))
    return BrokerGroup(answer.group_id, answer.group_state, answer.protocol_type,
                       answer.protocol_data, members)


# ----------------------------------------------------------------------
# A broker-coordinated group's offsets: describe (with lag) and reset


#: The states of a broker-coordinated group without a live member: only
#: these may have their offsets reset from outside the group.
INACTIVE_STATES = frozenset({"Empty", "Dead"})


class BrokerGroupDescription(NamedTuple):
    """A broker-coordinated group and where it stands on every partition.

    ``group`` is what its coordinator describes (state, members and their
    decoded assignments); ``partitions`` holds every partition of the topics
    the members are assigned or subscribe to, or that the group committed
    offsets for. A row's ``owner`` is the member id the partition is
    assigned to (``None``: nobody, or the coordinator did not send the
    assignment).
    """

    group: BrokerGroup
    partitions: list[GroupPartition]

    @property
    def total_lag(self) -> Optional[int]:
        """The sum of the partitions' lags (``None``: no partition has one)."""
        return _total_lag(self.partitions)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form: the group, its members (subscribed topics and
        assigned partitions decoded, ``None`` where the coordinator sent
        none) and the partitions, each with its owner's host and client id."""
        members = {m.member_id: m for m in self.group.members}
        return {
            "group": self.group.group,
            "state": self.group.state,
            "protocol_type": self.group.protocol_type,
            "protocol": self.group.protocol,
            "members": [_member_dict(m) for m in self.group.members],
            "total_lag": self.total_lag,
            "partitions": [
                dict(row._asdict(),
                     host=members[row.owner].client_host if row.owner in members else None,
                     client_id=members[row.owner].client_id if row.owner in members else None)
                for row in self.partitions
            ],
        }


def _member_dict(member: BrokerGroupMember) -> dict[str, Any]:
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "host": member.client_host,
        "subscription": None if member.subscription is None else list(member.subscription.topics),
        "assignment": None if member.assignment is None else {
            topic: sorted(partitions) for topic, partitions in member.assignment.partitions},
    }


def assigned_partitions(group: BrokerGroup) -> dict[TopicPartition, str]:
    """The member id each partition is assigned to, from the decoded
    assignments (a member whose assignment the coordinator did not send
    owns nothing here). Pure."""
    owners: dict[TopicPartition, str] = {}
    for member in group.members:
        if member.assignment is None:
            continue
        for topic, partitions in member.assignment.partitions:
            for partition in partitions:
                owners[TopicPartition(topic, partition)] = member.member_id
    return owners


async def describe_broker_group_offsets(cluster: Cluster, group: str) -> BrokerGroupDescription:
    """A broker-coordinated group with the committed offset, log end and lag per partition.

    What ``kafka-consumer-groups.sh --describe`` shows. The topics are
    those the members are assigned or subscribe to, and those the group
    committed offsets for: every partition of every topic is asked for in
    one OffsetFetch (in the version the coordinator speaks), since a
    current broker need not answer one that asks for "all topics" (Tansu
    0.6.0 answers it with a body too short to parse).

    Args:
        cluster: a connected cluster (its backoff bounds the retries).
        group: the group id.

    Returns:
        the group and one row per partition, whose lag is the log end
        minus the committed offset (``None`` where the group committed
        nothing, or committed past the log end: ``past_end``, see
        :class:`GroupPartition`).

    Raises:
        GroupIdNotFoundError: the coordinator knows no such group: ``Empty``
            or ``Dead``, no member and no committed offset.
        UnsupportedFeatureError: a 0.8 broker (its groups are in ZooKeeper:
            see :func:`describe_group`).
        BrokerError, NoBrokersError, KielConnectionError, RequestTimeoutError:
            as for :func:`describe_broker_group` and
            :meth:`~kiel.consumer.offsets.GroupOffsets.fetch`.
    """
    described = await describe_broker_group(cluster, group)
    owners = assigned_partitions(described)
    topics = {tp.topic for tp in owners}
    for member in described.members:
        if member.subscription is not None:
            topics.update(member.subscription.topics)
    every = await cluster.all_topics()
    tps = [TopicPartition(t, p) for t in sorted(every) for p in range(every[t])]
    committed = await GroupOffsets(cluster, group).fetch(tps) if tps else {}
    topics.update(tp.topic for tp, offset in committed.items() if offset is not None)
    if not described.members and described.state in INACTIVE_STATES and not topics:
        raise GroupIdNotFoundError(
            f"the brokers know no group {group!r} (state {described.state}, no member, "
            "no committed offset)", api="DescribeGroups", group=group)
    # Only topics that exist: naming a subscribed topic that does not could create it.
    wanted = [TopicPartition(t, p) for t in sorted(topics) if t in every for p in range(every[t])]
    return BrokerGroupDescription(described, await _lag_rows(cluster, wanted, owners, committed))


async def reset_broker_group(
    cluster: Cluster, group: str, topics: Sequence[str], to: ResetTo
) -> dict[TopicPartition, int]:
    """Commit new offsets for every partition of ``topics`` in a broker-coordinated group.

    :func:`reset_broker_group_offsets` with every partition of ``topics``,
    executed; see it for ``to`` and the errors.

    Returns:
        The offset committed per partition.
    """
    rows = await reset_broker_group_offsets(cluster, group, dict.fromkeys(topics), to,
                                            execute=True)
    return {TopicPartition(r.topic, r.partition): r.new for r in rows}


async def reset_broker_group_offsets(
    cluster: Cluster, group: str, selection: Optional[Selection], to: ResetTo, *, execute: bool
) -> list[ResetRow]:
    """Work out (and with ``execute``, commit) new offsets for a broker-coordinated group.

    Only a group without a live member may be reset, dry run or not (as
    Kafka's kafka-consumer-groups.sh): its coordinator must describe it
    ``Empty`` or ``Dead`` with no member listed. A group in any other
    state is live even when no member is listed (Tansu 0.6.0 may list
    none). The commit goes out as a standalone one (generation -1, no
    member id) in the OffsetCommit version the coordinator speaks; a
    coordinator that refuses it because a member joined meanwhile makes it
    a :class:`~kiel.exc.NonEmptyGroupError` too.

    Args:
        cluster: a connected cluster.
        group: the group id.
        selection: the partitions to move, ``{topic: partitions}`` (``None``
            for all of a topic's); ``None``: every partition of the topics
            the group committed offsets for.
        to: as for :func:`reset_group_offsets`.
        execute: commit the new offsets; false: a dry run that only shows them.

    Returns:
        A row per partition: its committed offset (``None``: none) and the new one.

    Raises:
        NonEmptyGroupError: the group is live (its state, its members, or
            the coordinator's answer to the commit say so).
        UnknownTopicError: a selected topic does not exist (it is not created).
        ConfigError: an offset out of range; a partition the topic lacks;
            :data:`CURRENT` or a shift where nothing is committed; a bad ``to``.
        UnsupportedFeatureError: a 0.8 broker (see :func:`reset_group`).
        BrokerError, NoBrokersError, KielConnectionError, RequestTimeoutError:
            a part could not be reached or refused.
    """
    check_resettable(await describe_broker_group(cluster, group))
    offsets = GroupOffsets(cluster, group)
    if selection is None:
        every = await cluster.all_topics()
        everything = [TopicPartition(t, p) for t in sorted(every) for p in range(every[t])]
        committed = await offsets.fetch(everything) if everything else {}
        selection = dict.fromkeys({tp.topic for tp, o in committed.items() if o is not None})
    tps = await _selected(cluster, selection)
    rows = await _plan(cluster, tps, await offsets.fetch(tps) if tps else {}, to)
    if execute and rows:
        await _commit_from_outside(cluster, group, {TopicPartition(r.topic, r.partition): r.new
                                                    for r in rows})
    return rows


def check_resettable(group: BrokerGroup) -> None:
    """Refuse to reset a group that is live. Pure.

    A group is resettable when its coordinator lists no member and says it
    is ``Empty`` or ``Dead``. In any other state (``Stable``,
    ``PreparingRebalance``, ``CompletingRebalance``) it is live even with
    no member listed: a coordinator may leave them out (Tansu 0.6.0 sends
    members without their details), and its members would commit over
    the reset.

    Raises:
        NonEmptyGroupError: the group is live; the message says its state
            and the members listed.
    """
    if group.members or group.state not in INACTIVE_STATES:
        listed = ", ".join(m.member_id for m in group.members[:5]) or "none listed"
        raise NonEmptyGroupError(
            f"group {group.group!r} is {group.state} with {len(group.members)} member(s) "
            f"({listed}): only an Empty or Dead group's offsets can be reset; "
            "stop its members first", api="DescribeGroups", group=group.group)


#: A standalone commit's refusal by a coordinator whose group has members:
#: Apache Kafka answers UNKNOWN_MEMBER_ID (or REBALANCE_IN_PROGRESS,
#: ILLEGAL_GENERATION) to generation -1 unless the group is Empty.
_LIVE_GROUP_ERRORS = (NonEmptyGroupError, UnknownMemberIdError, IllegalGenerationError,
                      RebalanceInProgressError)


async def _commit_from_outside(
    cluster: Cluster, group: str, offsets: dict[TopicPartition, int]
) -> None:
    """Commit ``offsets`` as no member of ``group`` (generation -1).

    Raises:
        NonEmptyGroupError: the coordinator refused it for the group's members.
    """
    try:
        await GroupOffsets(cluster, group).commit(offsets)
    except _LIVE_GROUP_ERRORS as e:
        raise NonEmptyGroupError(
            f"group {group!r} has live members: its coordinator refused the reset "
            f"({type(e).__name__}); stop its members first",
            api="OffsetCommit", group=group) from e
