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

Both kinds behind one interface: :func:`group_admin` turns a consumer's
coordinator object (:class:`~kiel.coordinator.broker_group.BrokerGroup`,
:class:`~kiel.zookeeper.group_coordinator.ZooKeeperGroup`) into its
:class:`GroupAdmin` (list, describe, reset; the reset's plan is common).
kazoo is imported only when a ZooKeeper group is read, never with this module.
"""

import contextlib
import datetime
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    NamedTuple,
    Optional,
    Protocol,
    TypeVar,
    Union,
)

import kiel.client  # noqa: F401  (registers the connection settings options_checked takes)
from kiel import _options
from kiel.client import Client
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
    BrokerError,
    ConfigError,
    ConsumerProtocolError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    KielConnectionError,
    KielError,
    LeaderNotAvailableError,
    NoBrokersError,
    NonEmptyGroupError,
    NotControllerError,
    ProtocolError,
    RebalanceInProgressError,
    RequestTimeoutError,
    UnknownMemberIdError,
    UnknownPartitionError,
    UnknownTopicError,
    UnsupportedFeatureError,
    for_code,
)
from kiel.protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    DescribeGroupsRequestV2,
    DescribeGroupsRequestV4,
    ListGroupsRequestV2,
    admin_cluster,
    admin_configs,
    admin_groups,
    admin_records,
    admin_topics,
    decode_assignment,
    decode_subscription,
)
from kiel.protocol.admin_records import HIGH_WATERMARK, MAX_TIMESTAMP
from kiel.protocol.group_membership import CONSUMER_PROTOCOL_TYPE
from kiel.protocol.versions import (
    API_NAMES,
    CREATE_PARTITIONS,
    CREATE_TOPICS,
    DELETE_GROUPS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    DESCRIBE_CLUSTER,
    DESCRIBE_CONFIGS,
    DESCRIBE_GROUPS,
    INCREMENTAL_ALTER_CONFIGS,
    LIST_GROUPS,
    OFFSET_DELETE,
)
from kiel.protocol.versions import LIST_OFFSETS as LIST_OFFSETS_KEY
from kiel.retry import attempts
from kiel.structs import TopicPartition

if TYPE_CHECKING:  # pragma: no cover - kazoo is loaded only by a ZooKeeper group's functions
    from kiel.consumer.membership import GroupCoordinator
    from kiel.zookeeper.client import ZooKeeper

__all__ = [
    "CURRENT",
    "OFFSET_SPECS",
    "Admin",
    "AlterConfigOp",
    "ClusterBroker",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "CreatedTopic",
    "ListedOffset",
    "NewTopic",
    "Results",
    "DEFAULT_TIMEOUT",
    "INACTIVE_STATES",
    "BrokerGroup",
    "BrokerGroupDescription",
    "BrokerGroupMember",
    "BrokerGroupAdmin",
    "GROUP_ADMINS",
    "GroupAdmin",
    "ListedGroup",
    "ZooKeeperGroupAdmin",
    "group_admin",
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
async def _zookeeper(hosts: str, timeout: float, chroot: Optional[str] = None,
                     auth: Optional[str] = None) -> "AsyncIterator[ZooKeeper]":
    """A session for the duration of the block; kazoo's errors become ZooKeeperError.

    ``timeout`` bounds the first connection and is the session timeout too:
    kazoo waits that long (not its default 10 s) for each server's answer
    to a connect, and stopping a start that timed out waits for that attempt.
    kazoo is imported here, not with the module: only a ZooKeeper group needs it.
    """
    from kazoo.exceptions import KazooException

    from kiel.zookeeper.client import ZooKeeper, translate

    zk = ZooKeeper(hosts, session_timeout=timeout, connect_timeout=timeout, chroot=chroot,
                   auth=auth)
    await zk.start()
    try:
        yield zk
    except KazooException as e:
        raise translate(e, "a read") from e
    finally:
        await zk.stop()


def _no_node() -> type[Exception]:
    """kazoo's NoNodeError (imported when a ZooKeeper group is read)."""
    from kazoo.exceptions import NoNodeError

    return NoNodeError


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


async def _children(zk: "ZooKeeper", path: str) -> list[str]:
    try:
        return sorted(await zk.get_children(path))
    except _no_node():
        return []


async def list_groups(zk_hosts: str, *, timeout: float = DEFAULT_TIMEOUT) -> list[str]:
    """The groups registered under ``/consumers`` in ZooKeeper, sorted.

    Raises:
        ZooKeeperError: ZooKeeper could not be reached within ``timeout``.
    """
    async with _zookeeper(zk_hosts, timeout) as zk:
        return await _children(zk, "/consumers")


async def _describe_zookeeper_group(zk: "ZooKeeper", cluster: Cluster,
                                    group: str) -> GroupDescription:
    """:func:`describe_group` on an open session and a connected cluster."""
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


async def _reset_zookeeper_group(
    zk: "ZooKeeper", cluster: Cluster, group: str, selection: Optional["Selection"],
    to: "ResetTo", *, execute: bool, force: bool,
) -> list[ResetRow]:
    """:func:`reset_group_offsets` on an open session and a connected cluster."""
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


async def _group_topics(zk: "ZooKeeper", base: str, members: list[str]) -> set[str]:
    """Topics the group owns, committed, or that a static member subscribes to."""
    topics = set(await _children(zk, f"{base}/owners"))
    topics.update(await _children(zk, f"{base}/offsets"))
    for member in members:
        try:
            data, _ = await zk.get(f"{base}/ids/{member}")
        except _no_node():
            continue  # left meanwhile
        try:
            registration = json.loads(data or b"{}")
        except ValueError:
            continue  # not a 0.8-layout registration: owners/offsets still tell
        if registration.get("pattern") == "static":
            topics.update(registration.get("subscription", {}))
    return topics


async def _owners(zk: "ZooKeeper", base: str,
                  tps: list[TopicPartition]) -> dict[TopicPartition, str]:
    owners: dict[TopicPartition, str] = {}
    for tp in tps:
        try:
            data, _ = await zk.get(f"{base}/owners/{tp.topic}/{tp.partition}")
        except _no_node():
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
        return await _describe_zookeeper_group(zk, cluster, group)


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
        return await _reset_zookeeper_group(zk, cluster, group, selection, to,
                                            execute=execute, force=force)


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


# ----------------------------------------------------------------------
# One interface over both coordinators' groups


class ListedGroup(NamedTuple):
    """A group :meth:`GroupAdmin.list_groups` found: its id and protocol type
    (``"consumer"``, ``""`` for offsets only; ``None`` in ZooKeeper, which
    keeps consumer groups only)."""

    group: str
    protocol_type: Optional[str]


class GroupAdmin(Protocol):
    """List, describe and reset the groups one coordinator keeps.

    Made by :func:`group_admin` from the coordinator object a consumer
    takes (:class:`~kiel.coordinator.broker_group.BrokerGroup`,
    :class:`~kiel.zookeeper.group_coordinator.ZooKeeperGroup`), so a caller
    asks it instead of branching on the kind of group; the reset's plan
    (selection, target, committed and new offset per partition) is the same
    for both (:class:`ResetRow`).
    """

    #: Whether :meth:`list_groups` reads the brokers (else only the coordinator's own store).
    lists_from_brokers: bool
    #: Whether :meth:`reset` takes ``force`` (reset while members are live).
    can_force: bool

    async def list_groups(self) -> list[ListedGroup]:
        """The groups, sorted."""

    async def describe(self, group: str) -> Union[GroupDescription, "BrokerGroupDescription"]:
        """The group's members, and its committed offset, log end and lag per partition."""

    async def reset(self, group: str, selection: Optional[Selection], to: ResetTo, *,
                    execute: bool, force: bool = False) -> list[ResetRow]:
        """Plan (and with ``execute``, commit) new offsets for the group."""


class BrokerGroupAdmin:
    """:class:`GroupAdmin` of the groups the brokers coordinate.

    Args:
        cluster: a connected cluster (``None``: every call raises ConfigError).
    """

    lists_from_brokers = True
    can_force = False

    def __init__(self, cluster: Optional[Cluster]) -> None:
        self.cluster = cluster

    def _brokers(self) -> Cluster:
        if self.cluster is None:
            raise ConfigError("a group the brokers coordinate is read from the brokers: "
                              "give their bootstrap list")
        return self.cluster

    async def list_groups(self) -> list[ListedGroup]:
        """:func:`list_broker_groups`."""
        return [ListedGroup(g, t) for g, t in await list_broker_groups(self._brokers())]

    async def describe(self, group: str) -> "BrokerGroupDescription":
        """:func:`describe_broker_group_offsets`."""
        return await describe_broker_group_offsets(self._brokers(), group)

    async def reset(self, group: str, selection: Optional[Selection], to: ResetTo, *,
                    execute: bool, force: bool = False) -> list[ResetRow]:
        """:func:`reset_broker_group_offsets`.

        Raises:
            ConfigError: ``force``: the coordinator refuses offsets from
                outside while the group has members, forced or not.
        """
        if force:
            raise ConfigError("force is for ZooKeeper groups: a group's coordinator refuses "
                              "offsets from outside while the group has members")
        return await reset_broker_group_offsets(self._brokers(), group, selection, to,
                                                execute=execute)


class ZooKeeperGroupAdmin:
    """:class:`GroupAdmin` of the groups kept in ZooKeeper (Kafka 0.8's layout).

    Each call opens a ZooKeeper session of its own (kazoo is loaded then).

    Args:
        hosts: the ensemble, ``"host:port,...[/chroot]"``.
        cluster: a connected cluster (``None``: only :meth:`list_groups` works).
        timeout: seconds each ZooKeeper session waits to connect (and its
            session timeout).
        chroot: a chroot added to ``hosts``.
        auth: ``"user:password"`` digest authentication.
    """

    lists_from_brokers = False
    can_force = True

    def __init__(self, hosts: str, cluster: Optional[Cluster], timeout: float = DEFAULT_TIMEOUT,
                 chroot: Optional[str] = None, auth: Optional[str] = None) -> None:
        self.hosts, self.cluster, self.timeout = hosts, cluster, timeout
        self.chroot, self.auth = chroot, auth

    def _session(self) -> Any:
        return _zookeeper(self.hosts, self.timeout, self.chroot, self.auth)

    def _brokers(self) -> Cluster:
        if self.cluster is None:
            raise ConfigError("describing or resetting a ZooKeeper group reads the brokers too: "
                              "give their bootstrap list")
        return self.cluster

    async def list_groups(self) -> list[ListedGroup]:
        """The groups registered under ``/consumers``, sorted."""
        async with self._session() as zk:
            return [ListedGroup(g, None) for g in await _children(zk, "/consumers")]

    async def describe(self, group: str) -> GroupDescription:
        """:func:`describe_group`."""
        cluster = self._brokers()
        async with self._session() as zk:
            return await _describe_zookeeper_group(zk, cluster, group)

    async def reset(self, group: str, selection: Optional[Selection], to: ResetTo, *,
                    execute: bool, force: bool = False) -> list[ResetRow]:
        """:func:`reset_group_offsets`."""
        cluster = self._brokers()
        async with self._session() as zk:
            return await _reset_zookeeper_group(zk, cluster, group, selection, to,
                                                execute=execute, force=force)


def _broker_group_admin(coordinator: Any, cluster: Optional[Cluster],
                        timeout: float) -> GroupAdmin:
    return BrokerGroupAdmin(cluster)


def _zookeeper_group_admin(coordinator: Any, cluster: Optional[Cluster],
                           timeout: float) -> GroupAdmin:
    return ZooKeeperGroupAdmin(coordinator.hosts, cluster, timeout, coordinator.chroot,
                               coordinator.auth)


#: Each coordinator's admin, by the coordinator object's kind.
GROUP_ADMINS: dict[str, Callable[[Any, Optional[Cluster], float], GroupAdmin]] = {
    "brokers": _broker_group_admin,
    "zookeeper": _zookeeper_group_admin,
}


def group_admin(coordinator: "GroupCoordinator", cluster: Optional[Cluster], *,
                timeout: float = DEFAULT_TIMEOUT) -> GroupAdmin:
    """The :class:`GroupAdmin` of the groups ``coordinator`` forms.

    Args:
        coordinator: a coordinator object
            (:class:`~kiel.coordinator.broker_group.BrokerGroup`,
            :class:`~kiel.zookeeper.group_coordinator.ZooKeeperGroup`);
            its settings name where its groups are.
        cluster: a connected cluster (``None``: a ZooKeeper group can still
            be listed).
        timeout: seconds a ZooKeeper session waits to connect.

    Raises:
        ConfigError: no cluster for a group the brokers coordinate; a
            coordinator kiel has no admin for.
    """
    make = GROUP_ADMINS.get(coordinator.kind)
    if make is None:
        raise ConfigError(f"no admin for a {type(coordinator).__name__} group")
    return make(coordinator, cluster, timeout)


# ----------------------------------------------------------------------
# The admin client: topics, partitions, configs, records, offsets, the
# cluster and broker groups, on the cluster and connections the clients share

#: ``list_offsets`` specs besides a time: the log start, the log end, and
#: the record with the highest timestamp (ListOffsets v7, KIP-734).
OFFSET_SPECS = {"earliest": EARLIEST, "latest": LATEST, "max_timestamp": MAX_TIMESTAMP}
#: What :meth:`Admin.list_offsets` takes per partition.
OffsetSpec = Union[str, int, datetime.datetime]

K = TypeVar("K")
V = TypeVar("V")


class Results(dict[K, Union[V, KielError]]):
    """Per-resource results: each key (a topic, a partition, a group...) maps
    to its result, or to its own typed error (an exception instance, not
    raised), as the broker answered for that resource.

    One resource's failure never hides the others' results, and no failure
    is dropped: every resource asked for has an entry. ``errors`` and ``ok``
    split them; ``raise_for_errors()`` raises the first error for callers
    that want all or nothing.
    """

    @property
    def errors(self) -> dict[K, KielError]:
        """The resources that failed, with their errors."""
        return {k: v for k, v in self.items() if isinstance(v, KielError)}

    @property
    def ok(self) -> dict[K, V]:
        """The resources that succeeded, with their results."""
        return {k: v for k, v in self.items() if not isinstance(v, KielError)}

    def raise_for_errors(self) -> None:
        """Raise the first resource's error (in key order), if any failed.

        Raises:
            KielError: that error; the others stay in :attr:`errors`.
        """
        for value in self.values():
            if isinstance(value, KielError):
                raise value


class NewTopic(NamedTuple):
    """A topic to create.

    ``partitions`` and ``replication_factor`` -1 take the broker's defaults
    (``num.partitions``, ``default.replication.factor``; KIP-464).
    ``configs`` are the topic's configs (``{"retention.ms": "60000"}``).
    """

    name: str
    partitions: int = -1
    replication_factor: int = -1
    configs: Optional[Mapping[str, str]] = None


class CreatedTopic(NamedTuple):
    """What a created topic got: its partitions, replication factor and
    configs (a broker may answer -1 and none when it does not say;
    ``validate_only`` creates nothing and answers what it would)."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, Optional[str]]


class ConfigResource(NamedTuple):
    """A resource with configs: ``ConfigResource("topic", name)`` or
    ``ConfigResource("broker", "1")`` (a broker id; ``""``: the default of
    every broker)."""

    kind: str
    name: str


class ConfigEntry(NamedTuple):
    """One config of a resource, as DescribeConfigs answers it.

    ``source`` is Kafka's name for where the value comes from
    (``DYNAMIC_TOPIC_CONFIG``, ``DEFAULT_CONFIG``...); ``value`` is ``None``
    for a sensitive config.
    """

    name: str
    value: Optional[str]
    source: str
    read_only: bool
    sensitive: bool
    synonyms: tuple[tuple[str, Optional[str], str], ...] = ()


class AlterConfigOp(NamedTuple):
    """An IncrementalAlterConfigs operation: ``"set"``, ``"delete"`` (back to
    the default), ``"append"`` or ``"subtract"`` (list-valued configs)."""

    op: str
    value: Optional[str] = None


class ListedOffset(NamedTuple):
    """A ListOffsets answer: the offset and its record's timestamp.

    ``offset`` is ``None`` when no record is that recent (a time after the
    newest record); ``timestamp`` is -1 for earliest and latest.
    """

    offset: Optional[int]
    timestamp: int
    leader_epoch: int


class ClusterBroker(NamedTuple):
    """One broker of the cluster."""

    node_id: int
    host: str
    port: int
    rack: Optional[str]


class ClusterDescription(NamedTuple):
    """The cluster: its id, its controller's broker id and its brokers.

    ``cluster_id`` and ``controller`` are ``None`` when the brokers do not
    say (no DescribeCluster, and a Metadata version without them).
    """

    cluster_id: Optional[str]
    controller: Optional[int]
    brokers: list[ClusterBroker]


_RESOURCE_TYPES = {"topic": admin_configs.TOPIC, "broker": admin_configs.BROKER}
_RESOURCE_KINDS = {code: kind for kind, code in _RESOURCE_TYPES.items()}
_ALTER_OPS = {"set": admin_configs.SET, "delete": admin_configs.DELETE,
              "append": admin_configs.APPEND, "subtract": admin_configs.SUBTRACT}
#: Topic configs whose names end so are numbers (Kafka's topic configs
#: ``*.ms`` and ``*.bytes`` are all longs): a value that is not one is
#: refused before anything is sent.
_NUMERIC_SUFFIXES = (".ms", ".bytes")
_INTEGER = re.compile(r"-?[0-9]+")


def _failure(code: int, message: Optional[str], **context: Any) -> Optional[KielError]:
    """The typed error of a resource's answer (``None`` for code 0), with
    the broker's message when it sent one."""
    cls = for_code(code)
    if cls is None:
        return None
    return cls(message or "", errno=code, **context)


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{what} must be a non-empty str, got {value!r}")
    return value


def _count(value: Any, what: str, *, default_ok: bool) -> int:
    """A positive int (or -1, the broker's default, where allowed)."""
    if type(value) is not int or not (value >= 1 or (default_ok and value == -1)):
        allowed = "a positive int" + (" or -1 (the broker's default)" if default_ok else "")
        raise ConfigError(f"{what} must be {allowed}, got {value!r}")
    return value


def _config_value(name: str, value: Any, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigError(f"{what}: config {name!r} needs a str value, got {value!r}")
    text = str(value)
    if name.endswith(_NUMERIC_SUFFIXES) and not _INTEGER.fullmatch(text):
        raise ConfigError(f"{what}: config {name!r} takes a whole number, got {value!r}")
    return text


def _resource(resource: Any) -> ConfigResource:
    if (not isinstance(resource, tuple) or len(resource) != 2
            or resource[0] not in _RESOURCE_TYPES or not isinstance(resource[1], str)):
        raise ConfigError("a config resource is ConfigResource('topic', name) or "
                          f"ConfigResource('broker', broker_id_as_str), got {resource!r}")
    if resource[0] == "topic":
        _name(resource[1], "a topic resource's name")
    elif resource[1] and not resource[1].isdigit():
        raise ConfigError(f"a broker resource's name is its id as str (or ''), "
                          f"got {resource[1]!r}")
    return ConfigResource(*resource)


def _timestamp(spec: Any, tp: TopicPartition) -> int:
    if isinstance(spec, str) and spec in OFFSET_SPECS:
        return OFFSET_SPECS[spec]
    if isinstance(spec, datetime.datetime):
        if spec.tzinfo is None:
            raise ConfigError(f"{tp}: a time must be timezone-aware, got {spec!r}")
        return int(spec.timestamp() * 1000)
    if type(spec) is int and spec >= 0:
        return spec
    raise ConfigError(f"{tp}: an offset spec is 'earliest', 'latest', 'max_timestamp', "
                      f"milliseconds since the epoch or an aware datetime, got {spec!r}")


def _partitions_of(tps: Iterable[Any]) -> list[TopicPartition]:
    out = []
    for tp in tps:
        if (not isinstance(tp, tuple) or len(tp) != 2 or not isinstance(tp[0], str)
                or type(tp[1]) is not int or tp[1] < 0):
            raise ConfigError(f"a partition is TopicPartition(topic, partition), got {tp!r}")
        out.append(TopicPartition(tp[0], tp[1]))
    return out


def _fixed(request: Any) -> Callable[[int], Any]:
    """A request builder for :meth:`Admin._send` that ignores the version:
    kiel speaks one version of each admin API, checked by ``_send``."""
    return lambda version: request


def _by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in tps:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


class Admin(Client):
    """Administer a cluster of current brokers: topics, partitions, configs,
    records, offsets, the cluster, and the groups the brokers coordinate.

    Built on the :class:`~kiel.cluster.Cluster` and connections every kiel
    client shares (same options, same negotiation, TLS, SASL, retries)::

        async with Admin("localhost:9092") as admin:
            results = await admin.create_topics([NewTopic("events", 6, 3)])
            for name, error in results.errors.items():
                print(name, error)

    Every call that names resources answers per resource (:class:`Results`):
    a topic the broker refused maps to its typed error (e.g.
    :class:`~kiel.exc.TopicAlreadyExistsError` with the broker's message),
    the others to their results. What kiel can check before sending (a
    partition count of 0, a non-numeric ``retention.ms``) raises
    :class:`~kiel.exc.ConfigError` and sends nothing. A broker that serves
    no version of an API kiel speaks raises
    :class:`~kiel.exc.UnsupportedFeatureError` naming the API and the broker
    (a Kafka 0.8 broker serves none of these; see :doc:`/guides/admin`).
    Connection failures are retried within ``retries`` and then raised.

    Args:
        brokers: bootstrap list, as for every client.
        **options: the connection settings (:class:`~kiel.client.ClientOptions`).
    """

    #: The controller's broker id once DescribeCluster said it.
    _controller: Optional[int] = None

    # -- plumbing --------------------------------------------------------

    async def _version(self, broker: int, api_key: int) -> int:
        """The version of ``api_key`` to speak with ``broker``.

        Raises:
            UnsupportedFeatureError: none (naming the API and the broker).
        """
        versions = await self.cluster.versions(broker)
        try:
            return versions.of(api_key)
        except UnsupportedFeatureError as e:
            info = self.cluster.brokers.get(broker)
            where = f"{info.host}:{info.port}" if info else "?"
            e.message = f"{e.message} (broker {broker} at {where})"
            e.with_context(broker_id=broker)
            raise

    async def _send(self, broker: int, api_key: int, build: Callable[[int], Any]) -> Any:
        """Send the request ``build(version)`` to ``broker``, retrying
        connection failures within the cluster's backoff.

        Raises:
            UnsupportedFeatureError: the broker serves no version kiel speaks.
            KielError: a failure that is not retriable, or that persisted.
        """
        timeout = 2 * self.cluster.request_timeout  # the broker's own wait is request_timeout
        async for attempt in attempts(self.cluster.backoff):
            try:
                version = await self._version(broker, api_key)
                return await self.cluster.send(broker, build(version), timeout=timeout)
            except KielError as e:
                if not e.retriable:
                    raise
                attempt.failed(e)
                if e.invalid_metadata or isinstance(e, NoBrokersError):
                    await self.cluster.refresh_metadata()
        raise AssertionError("attempts() ended without an answer or an error")  # pragma: no cover

    async def _any_broker(self) -> int:
        """A broker for cluster-wide requests: the controller when known (a
        ZooKeeper-era cluster needs it; a KRaft cluster forwards), else the
        lowest broker id."""
        if not self.cluster.brokers:
            await self.cluster.refresh_metadata()
        if not self.cluster.brokers:
            raise NoBrokersError("no broker is known")
        if self._controller is not None and self._controller in self.cluster.brokers:
            return self._controller
        return min(self.cluster.brokers)

    @property
    def _timeout_ms(self) -> int:
        return int(self.cluster.request_timeout * 1000)

    async def _per_resource(
        self, keys: Sequence[K], api_key: int, build: Callable[[list[K]], Any],
        answers: Callable[[Any], Iterable[tuple[K, Any, Optional[KielError]]]],
        broker: Optional[int] = None,
    ) -> "Results[K, Any]":
        """Send one request for ``keys`` (to the controller or ``broker``),
        and collect each key's answer; keys the broker answered
        NOT_CONTROLLER go to the controller found afresh, within the retries.

        Raises:
            ProtocolError: the answer left a key out.
        """
        results: Results[K, Any] = Results()
        pending = list(keys)
        async for attempt in attempts(self.cluster.backoff):
            target = broker if broker is not None else await self._any_broker()
            response = await self._send(target, api_key, _fixed(build(pending)))
            moved = []
            for key, value, error in answers(response):
                if key not in pending:
                    continue
                if isinstance(error, NotControllerError) and broker is None:
                    moved.append(key)
                results[key] = error if error is not None else value
            missing = [k for k in pending if k not in results]
            if missing:
                raise ProtocolError(f"the answer left out {missing!r}",
                                    api=API_NAMES.get(api_key), broker_id=target)
            if not moved:
                break
            pending = moved
            self._controller = (await self.describe_cluster()).controller
            attempt.failed(results[moved[0]])
        return Results((k, results[k]) for k in keys)

    # -- topics ------------------------------------------------------------

    async def create_topics(self, topics: Sequence[NewTopic], *,
                            validate_only: bool = False) -> "Results[str, CreatedTopic]":
        """Create topics (CreateTopics v5).

        Args:
            topics: the topics (:class:`NewTopic`; a plain ``(name,
                partitions, replication_factor, configs)`` tuple too).
            validate_only: ask the broker to check, not create. Tansu
                creates the topic anyway (see :doc:`/guides/admin`).

        Returns:
            per topic name, :class:`CreatedTopic` or its error
            (:class:`~kiel.exc.TopicAlreadyExistsError`,
            :class:`~kiel.exc.InvalidPartitionsError`,
            :class:`~kiel.exc.InvalidReplicationFactorError`,
            :class:`~kiel.exc.InvalidConfigurationError`,
            :class:`~kiel.exc.PolicyViolationError`...).

        Raises:
            ConfigError: a name that is empty or given twice, a partition
                count or replication factor that is not positive (or -1),
                a config value that is not a str (or int), a ``*.ms`` or
                ``*.bytes`` config that is not a whole number. Nothing is sent.
            UnsupportedFeatureError: the broker serves no CreateTopics v5.
        """
        wanted: dict[str, admin_topics.CreatableTopic] = {}
        for topic in topics:
            topic = NewTopic(*topic)
            name = _name(topic.name, "a topic name")
            if name in wanted:
                raise ConfigError(f"topic {name!r} is named twice")
            configs = [admin_topics.CreatableTopicConfig(k, _config_value(k, v, name))
                       for k, v in (topic.configs or {}).items()]
            wanted[name] = admin_topics.CreatableTopic(
                name, _count(topic.partitions, f"{name}: partitions", default_ok=True),
                _count(topic.replication_factor, f"{name}: replication_factor",
                       default_ok=True), [], configs)
        if type(validate_only) is not bool:
            raise ConfigError(f"validate_only must be a bool, got {validate_only!r}")

        def answers(response: Any) -> Iterator[tuple[str, Any, Optional[KielError]]]:
            for t in response.topics:
                yield t.name, CreatedTopic(t.name, t.num_partitions, t.replication_factor,
                                           {c.name: c.value for c in t.configs}), \
                    _failure(t.error_code, t.error_message, api="CreateTopics", topic=t.name)

        return await self._per_resource(
            list(wanted), CREATE_TOPICS,
            lambda names: admin_topics.CreateTopicsRequestV5(
                [wanted[n] for n in names], self._timeout_ms, validate_only),
            answers)

    async def delete_topics(self, topics: Sequence[str]) -> "Results[str, None]":
        """Delete topics (DeleteTopics v5).

        Returns:
            per topic, ``None`` (deleted) or its error
            (:class:`~kiel.exc.UnknownTopicOrPartitionError` for a topic the
            cluster does not have).

        Raises:
            ConfigError: an empty name.
            UnsupportedFeatureError: the broker serves no DeleteTopics v5.
        """
        names = list(dict.fromkeys(_name(t, "a topic name") for t in topics))

        def answers(response: Any) -> Iterator[tuple[str, Any, Optional[KielError]]]:
            for t in response.responses:
                yield t.name, None, _failure(t.error_code, t.error_message,
                                             api="DeleteTopics", topic=t.name)

        return await self._per_resource(
            names, DELETE_TOPICS,
            lambda pending: admin_topics.DeleteTopicsRequestV5(pending, self._timeout_ms),
            answers)

    async def create_partitions(self, totals: Mapping[str, int], *,
                                validate_only: bool = False) -> "Results[str, int]":
        """Grow topics to a total number of partitions (CreatePartitions v2).

        Args:
            totals: ``{topic: new total partition count}`` (not the number
                added); the broker places the new partitions.
            validate_only: check, do not change.

        Returns:
            per topic, the new total or its error
            (:class:`~kiel.exc.InvalidPartitionsError` for a total not above
            today's, :class:`~kiel.exc.UnknownTopicOrPartitionError`).

        Raises:
            ConfigError: a total that is not a positive int. Nothing is sent.
            UnsupportedFeatureError: the broker serves no CreatePartitions v2
                (Tansu 0.6 serves none).
        """
        checked = {_name(t, "a topic name"): _count(n, f"{t}: partitions", default_ok=False)
                   for t, n in totals.items()}

        def answers(response: Any) -> Iterator[tuple[str, Any, Optional[KielError]]]:
            for t in response.results:
                yield t.name, checked.get(t.name), _failure(
                    t.error_code, t.error_message, api="CreatePartitions", topic=t.name)

        return await self._per_resource(
            list(checked), CREATE_PARTITIONS,
            lambda names: admin_topics.CreatePartitionsRequestV2(
                [admin_topics.CreatePartitionsTopic(n, checked[n], None) for n in names],
                self._timeout_ms, validate_only),
            answers)

    # -- configs -----------------------------------------------------------

    async def describe_configs(
        self, resources: Sequence[ConfigResource], *, synonyms: bool = False,
    ) -> "Results[ConfigResource, dict[str, ConfigEntry]]":
        """Read configs of topics and brokers (DescribeConfigs v4).

        Topics are asked of the controller (any broker on KRaft), a broker's
        configs of that broker.

        Args:
            resources: :class:`ConfigResource` values.
            synonyms: include where else each value could come from.

        Returns:
            per resource, ``{name: ConfigEntry}`` or its error. Tansu lists
            only the configs that were set.

        Raises:
            ConfigError: a resource that is not a topic or a broker id.
            UnsupportedFeatureError: the broker serves no DescribeConfigs v4.
        """
        checked = list(dict.fromkeys(_resource(r) for r in resources))
        results: Results[ConfigResource, dict[str, ConfigEntry]] = Results()
        for broker, group in (await self._config_routes(checked)).items():

            def answers(response: Any) -> Iterator[tuple[ConfigResource, Any,
                                                         Optional[KielError]]]:
                for r in response.results:
                    key = ConfigResource(_RESOURCE_KINDS.get(r.resource_type, "?"),
                                         r.resource_name)
                    entries = {c.name: ConfigEntry(
                        c.name, c.value, admin_configs.CONFIG_SOURCES.get(
                            c.config_source, str(c.config_source)),
                        c.read_only, c.is_sensitive,
                        tuple((s.name, s.value, admin_configs.CONFIG_SOURCES.get(
                            s.source, str(s.source))) for s in c.synonyms))
                        for c in r.configs}
                    yield key, entries, _failure(
                        r.error_code, r.error_message, api="DescribeConfigs",
                        topic=r.resource_name if key.kind == "topic" else None)

            results.update(await self._per_resource(
                group, DESCRIBE_CONFIGS,
                lambda pending: admin_configs.DescribeConfigsRequestV4(
                    [admin_configs.DescribeConfigsResource(_RESOURCE_TYPES[r.kind], r.name, None)
                     for r in pending], synonyms, False),
                answers, broker))
        return Results((r, results[r]) for r in checked)

    async def _config_routes(self, resources: Sequence[ConfigResource]
                             ) -> dict[Optional[int], list[ConfigResource]]:
        """Topics (and the brokers' default) to the controller (``None``),
        a broker's own configs to that broker."""
        routes: dict[Optional[int], list[ConfigResource]] = {}
        for r in resources:
            broker = int(r.name) if r.kind == "broker" and r.name else None
            if broker is not None and broker not in self.cluster.brokers:
                await self.cluster.refresh_metadata()
            routes.setdefault(broker, []).append(r)
        return routes

    async def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Mapping[str, Union[str, int, None, AlterConfigOp]]],
        *, validate_only: bool = False,
    ) -> "Results[ConfigResource, None]":
        """Change configs of topics and brokers (IncrementalAlterConfigs v1).

        Args:
            changes: ``{resource: {name: change}}``; a change is a value (set
                it), ``None`` (delete it: back to the default) or an
                :class:`AlterConfigOp` (``"append"``, ``"subtract"``...).
            validate_only: check, do not change.

        Returns:
            per resource, ``None`` (changed) or its error
            (:class:`~kiel.exc.InvalidConfigurationError` for an unknown name
            or a bad value, :class:`~kiel.exc.UnknownTopicOrPartitionError`...).

        Raises:
            ConfigError: a bad resource, operation or value (a ``*.ms`` or
                ``*.bytes`` config that is not a whole number). Nothing is sent.
            UnsupportedFeatureError: the broker serves no IncrementalAlterConfigs v1.
        """
        wanted: dict[ConfigResource, list[admin_configs.AlterableConfig]] = {}
        for resource, configs in changes.items():
            key = _resource(resource)
            ops = []
            for name, change in configs.items():
                _name(name, f"{key}: a config name")
                if isinstance(change, AlterConfigOp):
                    if change.op not in _ALTER_OPS:
                        raise ConfigError(f"{key}: {name}: op must be one of "
                                          f"{sorted(_ALTER_OPS)}, got {change.op!r}")
                    value = None if change.value is None else _config_value(name, change.value,
                                                                              str(key))
                    ops.append(admin_configs.AlterableConfig(name, _ALTER_OPS[change.op], value))
                elif change is None:
                    ops.append(admin_configs.AlterableConfig(name, admin_configs.DELETE, None))
                else:
                    ops.append(admin_configs.AlterableConfig(
                        name, admin_configs.SET, _config_value(name, change, str(key))))
            wanted[key] = ops
        results: Results[ConfigResource, None] = Results()
        for broker, group in (await self._config_routes(list(wanted))).items():

            def answers(response: Any) -> Iterator[tuple[ConfigResource, Any,
                                                         Optional[KielError]]]:
                for r in response.responses:
                    key = ConfigResource(_RESOURCE_KINDS.get(r.resource_type, "?"),
                                         r.resource_name)
                    yield key, None, _failure(
                        r.error_code, r.error_message, api="IncrementalAlterConfigs",
                        topic=r.resource_name if key.kind == "topic" else None)

            results.update(await self._per_resource(
                group, INCREMENTAL_ALTER_CONFIGS,
                lambda pending: admin_configs.IncrementalAlterConfigsRequestV1(
                    [admin_configs.AlterConfigsResource(_RESOURCE_TYPES[r.kind], r.name,
                                                        wanted[r]) for r in pending],
                    validate_only),
                answers, broker))
        return Results((r, results[r]) for r in wanted)

    # -- records and offsets -------------------------------------------------

    async def _by_leader(self, tps: Sequence[TopicPartition],
                         results: "Results[TopicPartition, Any]", api: str
                         ) -> dict[int, list[TopicPartition]]:
        """Group partitions by leader; a partition with no leader, or of a
        topic or partition the cluster does not have, gets its error in
        ``results`` (never named in a Metadata request: that could create it)."""
        every = await self.cluster.all_topics()
        leaders: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            if tp.topic not in every:
                results[tp] = UnknownTopicError("unknown topic", api=api, topic=tp.topic)
            elif tp.partition >= every[tp.topic]:
                results[tp] = UnknownPartitionError("unknown partition", api=api,
                                                    topic=tp.topic, partition=tp.partition)
            else:
                leader = self.cluster.leader(tp.topic, tp.partition)
                if leader < 0:
                    results[tp] = LeaderNotAvailableError(
                        "the partition has no leader", api=api, topic=tp.topic,
                        partition=tp.partition)
                else:
                    leaders.setdefault(leader, []).append(tp)
        return leaders

    async def delete_records(self, before: Mapping[TopicPartition, int]
                             ) -> "Results[TopicPartition, int]":
        """Delete every record before an offset (DeleteRecords v2, at each leader).

        Args:
            before: ``{TopicPartition: offset}``; -1 is the high watermark
                (everything written so far).

        Returns:
            per partition, its new low watermark (log start offset) or its
            error (:class:`~kiel.exc.OffsetOutOfRangeError` past the high
            watermark; a leader that cannot be reached: that error, for its
            partitions only).

        Raises:
            ConfigError: a bad partition or offset (below -1). Nothing is sent.
        """
        tps = _partitions_of(before)
        for tp in tps:
            offset = before[tp]
            if type(offset) is not int or offset < HIGH_WATERMARK:
                raise ConfigError(f"{tp}: the offset to delete before must be an int >= 0 "
                                  f"(or -1: the high watermark), got {offset!r}")
        return await self._at_leaders(
            tps, "DeleteRecords", DELETE_RECORDS,
            lambda group, _leader: _fixed(admin_records.DeleteRecordsRequestV2(
                [admin_records.DeleteRecordsTopic(t, [admin_records.DeleteRecordsPartition(
                    p, before[TopicPartition(t, p)]) for p in ps])
                 for t, ps in _by_topic(group).items()], self._timeout_ms)),
            lambda p: p.low_watermark)

    async def _at_leaders(self, tps: Sequence[TopicPartition], api: str, api_key: int,
                          build: Callable[[list[TopicPartition], int], Callable[[int], Any]],
                          value: Callable[[Any], Any]) -> "Results[TopicPartition, Any]":
        """Send each leader one request for its partitions of ``tps``
        (``build(partitions, leader)``) and map each partition's answer: its
        error (as a class), or ``value(answer)``.

        A leader that cannot be reached fails its partitions only; a
        partition its leader's answer leaves out is a ProtocolError.
        """
        results: Results[TopicPartition, Any] = Results()
        for leader, group in (await self._by_leader(tps, results, api)).items():
            try:
                response = await self._send(leader, api_key, build(group, leader))
            except (KielConnectionError, RequestTimeoutError, NoBrokersError) as e:
                results.update(dict.fromkeys(group, e))
                continue
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp in group:
                        results[tp] = _failure(
                            p.error_code, None, api=api, topic=t.name,
                            partition=p.partition_index) or value(p)
            self._left_out(group, results, api, leader)
        return Results((tp, results[tp]) for tp in tps)

    @staticmethod
    def _left_out(group: Iterable[TopicPartition], results: "Results[TopicPartition, Any]",
                  api: str, broker: int) -> None:
        for tp in group:
            if tp not in results:
                results[tp] = ProtocolError("the leader's answer left the partition out",
                                            api=api, topic=tp.topic, partition=tp.partition,
                                            broker_id=broker)

    async def list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec], *,
                           read_committed: bool = False) -> "Results[TopicPartition, ListedOffset]":
        """Look offsets up by position or time (ListOffsets v7, at each leader).

        Args:
            specs: ``{TopicPartition: spec}``: ``"earliest"``, ``"latest"``,
                ``"max_timestamp"`` (the record with the highest timestamp),
                or a time (milliseconds since the epoch, or an aware
                ``datetime``): the first offset whose record is at or after it.
            read_committed: ``"latest"`` is the last stable offset (the end
                of committed transactions) rather than the high watermark.

        Returns:
            per partition, :class:`ListedOffset` or its error.

        Raises:
            ConfigError: a bad partition or spec. Nothing is sent.
            UnsupportedFeatureError: a leader serves no ListOffsets v7 (Kafka 3.0+).
        """
        tps = _partitions_of(specs)
        times = {tp: _timestamp(specs[tp], tp) for tp in tps}
        return await self._at_leaders(
            tps, "ListOffsets", LIST_OFFSETS_KEY,
            lambda group, leader: self._v7(admin_records.ListOffsetsRequestV7(
                -1, 1 if read_committed else 0,
                [admin_records.ListOffsetsTopic(t, [admin_records.ListOffsetsPartition(
                    p, -1, times[TopicPartition(t, p)]) for p in ps])
                 for t, ps in _by_topic(group).items()]), leader),
            lambda p: ListedOffset(None if p.offset < 0 else p.offset, p.timestamp,
                                   p.leader_epoch))

    def _v7(self, request: Any, broker: int) -> Callable[[int], Any]:
        """The ListOffsets v7 builder for :meth:`_send`: kiel's clients speak
        older ListOffsets versions too, so a broker that serves only those
        (Kafka 0.8: v0) negotiates one; sending v7 there would only get the
        connection closed.

        Raises (when called):
            UnsupportedFeatureError: the broker's version is below 7.
        """
        def build(version: int) -> Any:
            if version < 7:
                info = self.cluster.brokers.get(broker)
                where = f"{info.host}:{info.port}" if info else "?"
                raise UnsupportedFeatureError(
                    f"ListOffsets: Admin speaks version 7 (Kafka 3.0+), the broker serves "
                    f"up to {version} (broker {broker} at {where})", api="ListOffsets",
                    broker_id=broker)
            return request
        return build

    # -- the cluster ---------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        """The cluster's id, controller and brokers (DescribeCluster v0).

        A broker that does not serve DescribeCluster (before Kafka 2.8) is
        described from the cluster metadata: its brokers, no cluster id and
        no controller.

        Raises:
            BrokerError: the broker's error answer.
            NoBrokersError, KielConnectionError, RequestTimeoutError: no answer.
        """
        broker = await self._any_broker()
        try:
            await self._version(broker, DESCRIBE_CLUSTER)
        except UnsupportedFeatureError:
            await self.cluster.refresh_metadata()
            return ClusterDescription(None, None, [
                ClusterBroker(b.node_id, b.host, b.port, None)
                for b in sorted(self.cluster.brokers.values())])
        response = await self._send(broker, DESCRIBE_CLUSTER,
                                    _fixed(admin_cluster.DescribeClusterRequestV0(False)))
        error = _failure(response.error_code, response.error_message, api="DescribeCluster",
                         broker_id=broker)
        if error is not None:
            raise error
        controller = response.controller_id if response.controller_id >= 0 else None
        self._controller = controller
        return ClusterDescription(response.cluster_id, controller, [
            ClusterBroker(b.broker_id, b.host, b.port, b.rack)
            for b in sorted(response.brokers)])

    # -- broker groups -------------------------------------------------------

    async def list_groups(self) -> list[tuple[str, str]]:
        """Every group the brokers coordinate: ``(group_id, protocol_type)``
        pairs (:func:`list_broker_groups`)."""
        return await list_broker_groups(self.cluster)

    async def describe_groups(self, groups: Sequence[str]) -> "Results[str, BrokerGroup]":
        """Each group's state and members (DescribeGroups at its coordinator).

        Returns:
            per group, :class:`BrokerGroup` or its error.
        """
        results: Results[str, BrokerGroup] = Results()
        for group in dict.fromkeys(_name(g, "a group id") for g in groups):
            try:
                results[group] = await describe_broker_group(self.cluster, group)
            except (BrokerError, ConsumerProtocolError) as e:
                results[group] = e
        return results

    async def group_offsets(self, group: str) -> BrokerGroupDescription:
        """A group's committed offsets, log ends and lag (:func:`describe_broker_group_offsets`)."""
        return await describe_broker_group_offsets(self.cluster, _name(group, "a group id"))

    async def delete_groups(self, groups: Sequence[str]) -> "Results[str, None]":
        """Delete groups that have no member (DeleteGroups v2 at each coordinator).

        Returns:
            per group, ``None`` (deleted) or its error
            (:class:`~kiel.exc.NonEmptyGroupError` for a group with live
            members on Apache Kafka and noida-db; Tansu deletes it anyway,
            :class:`~kiel.exc.GroupIdNotFoundError` for one it does not know).

        Raises:
            ConfigError: an empty group id.
            UnsupportedFeatureError: a coordinator serves no DeleteGroups v2.
        """
        names = list(dict.fromkeys(_name(g, "a group id") for g in groups))
        by_coordinator: dict[int, list[str]] = {}
        results: Results[str, None] = Results()
        for group in names:
            try:
                by_coordinator.setdefault(await self._coordinator(group), []).append(group)
            except BrokerError as e:
                results[group] = e
        for coordinator, group_ids in by_coordinator.items():

            def answers(response: Any) -> Iterator[tuple[str, Any, Optional[KielError]]]:
                for g in response.results:
                    yield g.group_id, None, _failure(g.error_code, None, api="DeleteGroups",
                                                     group=g.group_id)

            results.update(await self._per_resource(
                group_ids, DELETE_GROUPS,
                lambda pending: admin_groups.DeleteGroupsRequestV2(pending),
                answers, coordinator))
        return Results((g, results[g]) for g in names)

    async def _coordinator(self, group: str) -> int:
        """The group's coordinator, retried while it is not available."""
        async for attempt in attempts(self.cluster.backoff):
            try:
                return await self.cluster.group_coordinator(group)
            except KielError as e:
                if not e.retriable:
                    raise
                attempt.failed(e)
        raise AssertionError("attempts() ended without an answer or an error")  # pragma: no cover

    async def alter_group_offsets(self, group: str, offsets: Mapping[TopicPartition, int]
                                  ) -> "Results[TopicPartition, int]":
        """Commit offsets for a group that has no live member (OffsetCommit, as no member).

        Returns:
            per partition, the committed offset, or the error: a group with
            live members refuses the whole commit
            (:class:`~kiel.exc.NonEmptyGroupError` for every partition).

        Raises:
            ConfigError: a bad partition or a negative offset.
        """
        _name(group, "a group id")
        tps = _partitions_of(offsets)
        for tp in tps:
            if type(offsets[tp]) is not int or offsets[tp] < 0:
                raise ConfigError(f"{tp}: an offset is an int >= 0, got {offsets[tp]!r}")
        try:
            await _commit_from_outside(self.cluster, group, {tp: offsets[tp] for tp in tps})
        except BrokerError as e:
            return Results((tp, e) for tp in tps)
        return Results((tp, offsets[tp]) for tp in tps)

    async def delete_group_offsets(self, group: str, partitions: Sequence[TopicPartition]
                                   ) -> "Results[TopicPartition, None]":
        """Delete a group's committed offsets (OffsetDelete v0 at its coordinator).

        Returns:
            per partition, ``None`` (deleted) or its error
            (:class:`~kiel.exc.GroupSubscribedToTopicError` for a topic a
            live member consumes; a group-level error, such as
            :class:`~kiel.exc.GroupIdNotFoundError`, for every partition).

        Raises:
            ConfigError: a bad group id or partition.
            UnsupportedFeatureError: the coordinator serves no OffsetDelete
                (Tansu 0.6 serves none).
        """
        _name(group, "a group id")
        tps = list(dict.fromkeys(_partitions_of(partitions)))
        coordinator = await self._coordinator(group)
        request = admin_groups.OffsetDeleteRequest(group, [
            admin_groups.OffsetDeleteRequestTopic(t, [
                admin_groups.OffsetDeleteRequestPartition(p) for p in ps])
            for t, ps in _by_topic(tps).items()])
        response = await self._send(coordinator, OFFSET_DELETE, _fixed(request))
        whole = _failure(response.error_code, None, api="OffsetDelete", group=group)
        if whole is not None:
            return Results((tp, whole) for tp in tps)
        results: Results[TopicPartition, None] = Results()
        for t in response.topics:
            for p in t.partitions:
                results[TopicPartition(t.name, p.partition_index)] = _failure(
                    p.error_code, None, api="OffsetDelete", group=group, topic=t.name,
                    partition=p.partition_index)
        self._left_out(tps, results, "OffsetDelete", coordinator)
        return Results((tp, results[tp]) for tp in tps)
