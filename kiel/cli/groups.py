"""``kiel topics`` and ``kiel group``: topics, and consumer groups (the brokers' or ZooKeeper's)."""

import argparse
import datetime
import json
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Optional

from kiel.cli.options import client_options, need, parse_when
from kiel.exc import ConfigError, UnsupportedFeatureError

if TYPE_CHECKING:  # pragma: no cover - kiel.admin loads kazoo: imported where used
    from kiel.admin import (
        BrokerGroupDescription,
        GroupDescription,
        GroupPartition,
        ListedGroup,
        ResetRow,
    )

__all__ = ["group", "topics"]


async def topics(args: argparse.Namespace, out: Any) -> int:
    """List topics, or describe the named ones (leaders, replicas, ISR, offsets)."""
    from kiel.admin import describe_topics

    brokers = need(args.brokers, "-b/--brokers", "topics")
    described = await describe_topics(brokers, args.topics, **client_options(args))
    if args.json:
        docs = [
            {"topic": t.topic, "partitions": [p._asdict() for p in t.partitions]}
            for t in described
        ]
        out.write(json.dumps(docs) + "\n")
        return 0
    if not args.topics:
        for topic in described:
            out.write(f"{topic.topic}\t{len(topic.partitions)} partitions\n")
        return 0
    out.write("topic\tpartition\tleader\treplicas\tisr\tearliest\thighwater\n")
    for topic in described:
        for p in topic.partitions:
            out.write(
                f"{topic.topic}\t{p.partition}\t{p.leader}\t{','.join(map(str, p.replicas))}\t"
                f"{','.join(map(str, p.isr))}\t{p.earliest}\t{p.highwater}\n"
            )
    return 0


# ----------------------------------------------------------------------
# groups


async def group(args: argparse.Namespace, out: Any, err: Any = None) -> int:
    """``group list``, ``group describe GROUP``, ``group reset GROUP``.

    On the groups the brokers coordinate, or with ``-z`` on ZooKeeper's: the
    option names the coordinator object, whose admin
    (:func:`kiel.admin.group_admin`) each command then asks.

    Raises:
        ConfigError: no ``-b`` where the command reads the brokers;
            ``--force`` where the coordinator refuses it.
        UnsupportedFeatureError: the brokers coordinate no groups (0.8:
            the message says to pass ``-z``).
    """
    from kiel import admin
    from kiel.client import Client

    err = err or sys.stderr
    coordinator = _coordinator(args)
    groups = admin.group_admin(coordinator, None, timeout=args.timeout)
    command = f"group {args.group_command}"
    if args.group_command == "list" and not groups.lists_from_brokers:
        # Listing a ZooKeeper group's names reads ZooKeeper alone (-b or not).
        _write_groups(args, out, await groups.list_groups())
        return 0
    if not args.brokers:
        raise ConfigError(f"'{command}' needs -b/--brokers" + (
            "" if args.zookeeper else " (a group the brokers coordinate) or -z/--zookeeper "
            "(a ZooKeeper group)"))
    if args.group_command == "reset" and args.force and not groups.can_force:
        raise ConfigError("--force is for ZooKeeper groups (-z): a group's coordinator "
                          "refuses offsets from outside while the group has members")
    async with Client(args.brokers, **client_options(args)) as client:
        groups = admin.group_admin(coordinator, client.cluster, timeout=args.timeout)
        try:
            if args.group_command == "list":
                _write_groups(args, out, await groups.list_groups())
            elif args.group_command == "describe":
                described = await groups.describe(args.group)
                _WRITERS[type(described).__name__](args, out, described)
            else:
                rows = await groups.reset(args.group, _selection(args), _reset_to(args),
                                          execute=args.execute, force=args.force)
                _write_reset(args.group, rows, args.execute, out, err)
        except UnsupportedFeatureError as e:
            if e.context.get("api") not in _BROKER_GROUP_APIS:
                raise
            raise UnsupportedFeatureError(
                f"{e.message}; these brokers coordinate no groups (a 0.8 cluster keeps "
                "them in ZooKeeper): pass -z/--zookeeper", **e.context) from e
    return 0


def _coordinator(args: argparse.Namespace) -> Any:
    """The coordinator object the options name: ZooKeeper's with ``-z``, else the brokers'.

    Raises:
        ConfigError: a bad ``-z``.
    """
    if args.zookeeper:
        from kiel.zookeeper.group_coordinator import ZooKeeperGroup

        return ZooKeeperGroup(hosts=args.zookeeper)
    from kiel.coordinator.broker_group import BrokerGroup

    return BrokerGroup()


def _write_groups(args: argparse.Namespace, out: Any, groups: "Sequence[ListedGroup]") -> None:
    """``group list``: one id a line, or JSON (a ZooKeeper group's ids alone, as
    before; a broker group's with its protocol type)."""
    if args.json:
        out.write(json.dumps([g.group if g.protocol_type is None else
                              {"group": g.group, "protocol_type": g.protocol_type}
                              for g in groups]) + "\n")
    else:
        out.write("".join(f"{g.group}\n" for g in groups))


def _selection(args: argparse.Namespace) -> "Optional[dict[str, Optional[list[int]]]]":
    """``--topic T`` / ``--topic T:0,1`` (repeatable), or ``--all-topics`` (``None``).

    Raises:
        ConfigError: a partition list that is not numbers.
    """
    if args.all_topics:
        return None
    selection: dict[str, Optional[list[int]]] = {}
    for item in args.topic:
        topic, sep, partitions = item.rpartition(":")
        if not sep:
            selection[item] = None
            continue
        try:
            numbers = [int(p) for p in partitions.split(",") if p.strip()]
        except ValueError:
            raise ConfigError(f"--topic takes TOPIC or TOPIC:P,P...; got {item!r}") from None
        if not topic or not numbers:
            raise ConfigError(f"--topic takes TOPIC or TOPIC:P,P...; got {item!r}")
        if topic not in selection or selection[topic] is not None:  # None: all already
            selection[topic] = sorted(set(selection.get(topic) or ()) | set(numbers))
    return selection


def _reset_to(args: argparse.Namespace) -> Any:
    """Where ``group reset`` moves the group (one of the ``--to*``/``--shift-by`` options)."""
    from kiel.admin import ShiftBy

    if args.to_symbol is not None:
        return args.to_symbol
    if args.to_offset is not None:
        return args.to_offset
    if args.shift_by is not None:
        return ShiftBy(args.shift_by)
    if args.to_datetime is not None:
        when = parse_when(args.to_datetime, {})
        if not isinstance(when, datetime.datetime):
            raise ConfigError(f"--to-datetime takes an ISO date/time; got {args.to_datetime!r}")
        return when
    return parse_when(args.to, {"earliest": "earliest", "beginning": "earliest",
                                 "latest": "latest", "end": "latest"})


def _write_reset(group: str, rows: "Sequence[ResetRow]", execute: bool, out: Any,
                 err: Any) -> None:
    out.write(_table([("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")] + [
        (group, r.topic, r.partition, r.current, r.new) for r in rows]))
    if not execute:
        err.write("dry run: nothing was committed; run again with --execute to commit "
                  "these offsets\n")


def _write_zookeeper_group(args: argparse.Namespace, out: Any,
                           described: "GroupDescription") -> None:
    """``group describe -z``: the group, then a row per partition in
    kafka-consumer-groups.sh's columns (a 0.8 member id names its host)."""
    if args.json:
        out.write(json.dumps(described.as_dict()) + "\n")
        return
    out.write(_table([("GROUP", "#MEMBERS", "TOTAL-LAG"),
                      (described.group, len(described.members), described.total_lag)]))
    out.write("\n")
    out.write(_table([("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                       "LAG", "CONSUMER-ID")] + [
        (described.group, row.topic, row.partition, row.committed, row.highwater, _lag(row),
         row.owner) for row in described.partitions]))
    _write_past_end(out, described.partitions)
    if not described.members:
        out.write(f"\nConsumer group '{described.group}' has no active members.\n")


#: The group APIs a 0.8 broker lacks: without them the groups are in ZooKeeper.
_BROKER_GROUP_APIS = ("ListGroups", "DescribeGroups")


#: The LAG cell of a partition whose committed offset is above its log end.
PAST_END = "past-end"


def _lag(row: "GroupPartition") -> Any:
    """A row's LAG cell: the number, ``-`` (unknown), or :data:`PAST_END`."""
    return PAST_END if row.past_end else row.lag


def _write_past_end(out: Any, rows: "Sequence[GroupPartition]") -> None:
    """Say what a ``past-end`` lag means, when a row has one (a lag of 0
    there would read as caught up; the group points at records that do not
    exist)."""
    if any(row.past_end for row in rows):
        out.write(f"\nLAG {PAST_END}: the committed offset is above the log end (the log was "
                  "truncated or lost since, or the offset was set there); a member starting "
                  "there resets by its offset_reset. Not counted in TOTAL-LAG.\n")


def _table(rows: Sequence[Sequence[Any]]) -> str:
    """Rows in columns aligned as kafka-consumer-groups.sh aligns them (``None``: ``-``)."""
    cells = [["-" if c is None or c == "" else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n" for row in cells
    )


def _write_broker_group(
    args: argparse.Namespace, out: Any, described: "BrokerGroupDescription"
) -> None:
    """``group describe`` of a broker group: its state, a row per partition,
    a row per member, and what the coordinator left unsaid."""
    from kiel.admin import INACTIVE_STATES

    if args.json:
        out.write(json.dumps(described.as_dict()) + "\n")
        return
    group = described.group
    members = {m.member_id: m for m in group.members}
    out.write(_table([("GROUP", "STATE", "ASSIGNMENT-STRATEGY", "#MEMBERS", "TOTAL-LAG"),
                      (group.group, group.state, group.protocol, len(group.members),
                       described.total_lag)]))
    out.write("\n")
    rows: list[Sequence[Any]] = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                  "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")]
    for p in described.partitions:
        owner = members.get(p.owner) if p.owner is not None else None
        rows.append((group.group, p.topic, p.partition, p.committed, p.highwater, _lag(p),
                     p.owner, owner and owner.client_host, owner and owner.client_id))
    out.write(_table(rows))
    _write_past_end(out, described.partitions)
    if group.members:
        out.write("\n")
        rows = [("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")]
        for m in group.members:
            assigned = None if m.assignment is None else m.assignment.partitions
            rows.append((group.group, m.member_id, m.client_host, m.client_id,
                         None if assigned is None else sum(len(ps) for _, ps in assigned),
                         None if assigned is None else " ".join(
                             f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in assigned)))
        out.write(_table(rows))
    # Strategy: say what the coordinator did not, so a "-" is not read as
    # "nobody owns it" (Tansu 0.6.0 sends members without their assignment,
    # or none at all, while the group is Stable).
    if group.state in INACTIVE_STATES and not group.members:
        out.write(f"\nConsumer group '{group.group}' has no active members.\n")
    elif not group.members:
        out.write(f"\nThe coordinator lists no members although the group is {group.state}: "
                  "it is live, its owners are unknown.\n")
    elif any(m.assignment is None for m in group.members):
        out.write("\nThe coordinator sent no assignment for some members "
                  "(their partitions show no owner).\n")


#: How ``group describe`` writes each kind of description (by its class name:
#: kiel.admin, which loads the clients, is imported only when a command runs).
_WRITERS: dict[str, Callable[[argparse.Namespace, Any, Any], None]] = {
    "GroupDescription": _write_zookeeper_group,
    "BrokerGroupDescription": _write_broker_group,
}
