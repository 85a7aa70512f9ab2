"""Inspect and administer topics and ZooKeeper-grouped consumer groups.

What the ``kiel`` command (:mod:`kiel.cli`) runs, usable from code too. For a
0.8 group this shows what Kafka's ``ConsumerOffsetChecker`` and Burrow show:
the members registered under ``/consumers/<group>/ids``, the owner of every
partition (``/consumers/<group>/owners/<topic>/<partition>``), the committed
offset (OffsetFetch v0, which a 0.8 broker reads from
``/consumers/<group>/offsets``), the high watermark and the lag.
"""

import contextlib
import datetime
import json
from collections.abc import AsyncIterator, Sequence
from typing import (
    Any,
    NamedTuple,
    Optional,
    Union,
)

from kazoo.exceptions import KazooException, NoNodeError

from kiel.cluster import Cluster
from kiel.consumer.offsets import EARLIEST, LATEST, fetch_committed, list_offsets, send_commit
from kiel.exc import ConfigError
from kiel.structs import TopicPartition
from kiel.zookeeper.client import ZooKeeper, translate

__all__ = [
    "GroupDescription",
    "GroupPartition",
    "PartitionDescription",
    "TopicDescription",
    "describe_group",
    "describe_topics",
    "list_groups",
    "reset_group",
]

#: Where ``reset_group`` may move a group: a symbol, an offset, or a time.
ResetTo = Union[str, int, datetime.datetime]


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
    """One partition as a group sees it (``None``: unknown or never committed)."""

    topic: str
    partition: int
    owner: Optional[str]
    committed: Optional[int]
    highwater: Optional[int]
    lag: Optional[int]


class GroupDescription(NamedTuple):
    """A group: its live members and every partition of the topics it consumes."""

    group: str
    members: list[str]
    partitions: list[GroupPartition]

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "group": self.group,
            "members": self.members,
            "partitions": [p._asdict() for p in self.partitions],
        }


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
    """A session for the duration of the block; kazoo's errors become ZooKeeperError."""
    zk = ZooKeeper(hosts, connect_timeout=timeout)
    await zk.start()
    try:
        yield zk
    except KazooException as e:
        raise translate(e, "a read") from e
    finally:
        await zk.stop()


async def describe_topics(
    brokers: Union[str, Sequence[str]], topics: Sequence[str] = (), **options: Any
) -> list[TopicDescription]:
    """Leaders, replicas, ISR, earliest offset and high watermark per partition.

    Args:
        brokers: the bootstrap brokers.
        topics: the topics to describe (none: every topic the cluster has).
        **options: :class:`~kiel.cluster.Cluster` settings (``client_id``, ...).

    Raises:
        UnknownTopicError: a named topic does not exist.
        NoBrokersError: the cluster could not be reached.
    """
    async with _cluster(brokers, **options) as cluster:
        if topics:
            for topic in topics:
                await cluster.partitions_for(topic)
        else:
            await cluster.refresh_metadata()
        names = sorted(topics or cluster.partitions)
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


async def list_groups(zk_hosts: str, *, timeout: float = 15.0) -> list[str]:
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


async def describe_group(
    brokers: Union[str, Sequence[str]],
    zk_hosts: str,
    group: str,
    *,
    timeout: float = 15.0,
    **options: Any,
) -> GroupDescription:
    """Members, owners, committed offsets, high watermarks and lag of a group.

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
        tps: list[TopicPartition] = []
        for topic in sorted(await _group_topics(zk, base, members)):
            tps.extend(TopicPartition(topic, p) for p in await cluster.partitions_for(topic))
        owners = await _owners(zk, base, tps)
        committed = await fetch_committed(cluster, group, tps) if tps else {}
        highwater = await list_offsets(cluster, {tp: LATEST for tp in tps}) if tps else {}
        rows = []
        for tp in tps:
            done = committed.get(tp)
            high = highwater.get(tp)
            lag = None if done is None or high is None else max(0, high - done)
            rows.append(GroupPartition(tp.topic, tp.partition, owners.get(tp), done, high, lag))
        return GroupDescription(group, members, rows)


async def reset_group(
    brokers: Union[str, Sequence[str]],
    zk_hosts: str,
    group: str,
    topics: Sequence[str],
    to: ResetTo,
    *,
    force: bool = False,
    timeout: float = 15.0,
    **options: Any,
) -> dict[TopicPartition, int]:
    """Commit new offsets for every partition of ``topics`` in ``group``.

    Args:
        to: ``"earliest"``, ``"latest"``, an offset (for every partition; must
            lie between the partition's earliest offset and its high
            watermark), or a ``datetime`` (ListOffsets by time, at the log
            segment granularity a 0.8 broker offers).
        force: reset even while members are registered (a live member may
            commit over the reset: stop the group first when you can).

    Returns:
        The offset committed per partition.

    Raises:
        ConfigError: members are alive and ``force`` is false; an offset out
            of range; a bad ``to``.
        ZooKeeperError, NoBrokersError: a part could not be reached.
    """
    async with _zookeeper(zk_hosts, timeout) as zk, _cluster(brokers, **options) as cluster:
        members = await _children(zk, f"/consumers/{group}/ids")
        if members and not force:
            raise ConfigError(
                f"group {group!r} has {len(members)} live member(s) ({', '.join(members[:5])}); "
                "stop them first, or pass --force"
            )
        tps = [TopicPartition(t, p) for t in topics for p in await cluster.partitions_for(t)]
        offsets = await _targets(cluster, tps, to)
        await send_commit(cluster, group, offsets)
        return offsets


async def _targets(
    cluster: Cluster, tps: list[TopicPartition], to: ResetTo
) -> dict[TopicPartition, int]:
    if to == "earliest":
        return await list_offsets(cluster, {tp: EARLIEST for tp in tps})
    if to == "latest":
        return await list_offsets(cluster, {tp: LATEST for tp in tps})
    if isinstance(to, datetime.datetime):
        ms = max(0, int(to.timestamp() * 1000))
        return await list_offsets(cluster, {tp: ms for tp in tps})
    if isinstance(to, int) and not isinstance(to, bool):
        low = await list_offsets(cluster, {tp: EARLIEST for tp in tps})
        high = await list_offsets(cluster, {tp: LATEST for tp in tps})
        for tp in tps:
            if not low[tp] <= to <= high[tp]:
                raise ConfigError(
                    f"offset {to} is outside {tp.topic}:{tp.partition}'s range "
                    f"[{low[tp]}, {high[tp]}]"
                )
        return {tp: to for tp in tps}
    raise ConfigError(f"reset to earliest, latest, an offset or a datetime; got {to!r}")
