"""The ``kiel`` command's admin verbs, a thin layer over :class:`kiel.admin.Admin`.

``topics create|delete|alter|describe``, ``configs describe|alter``,
``group delete``, ``group offsets delete``, ``records delete --before`` and
``offsets``. Conventions (see :doc:`/guides/cli`): one ``--timeout``
deadline, ``--json``; a verb that deletes (topics, records, groups, group
offsets) is a dry run unless ``--execute``: it prints what it would delete
and changes nothing. Every resource's failure is printed on standard error
as ``RESOURCE: Error: message`` and makes the exit status 1; the resources
that succeeded are still printed.
"""

import argparse
import datetime
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from kiel.cli.options import client_options, need, parse_when
from kiel.exc import ConfigError, KielError, NonEmptyGroupError, UnknownTopicError

if TYPE_CHECKING:  # pragma: no cover - kiel.admin loads kazoo: imported where used
    from kiel.admin import Admin
    from kiel.structs import TopicPartition

__all__ = ["TOPIC_VERBS", "configs", "group_delete", "group_offsets_delete", "offsets",
           "records_delete", "topics_admin"]

#: The first word of ``kiel topics`` that makes it an admin verb (any
#: other word is a topic to describe, as before).
TOPIC_VERBS = ("create", "delete", "alter", "describe")

#: Printed on standard error after a dry run.
DRY_RUN = "dry run: nothing was deleted; run again with --execute to delete {what}\n"


def _admin(args: argparse.Namespace, command: str) -> "Admin":
    from kiel.admin import Admin

    return Admin(need(args.brokers, "-b/--brokers", command), **client_options(args))


def _table(rows: Sequence[Sequence[Any]]) -> str:
    from kiel.cli.groups import _table as table

    return table(rows)


def _configs(pairs: Optional[Sequence[str]], option: str) -> dict[str, str]:
    """``--config k=v`` (repeatable) as a dict.

    Raises:
        ConfigError: an item without ``=`` or a name given twice.
    """
    out: dict[str, str] = {}
    for item in pairs or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"{option} takes NAME=VALUE; got {item!r}")
        if name in out:
            raise ConfigError(f"{option}: {name!r} is given twice")
        out[name] = value
    return out


def _report(results: Mapping[Any, Any], err: Any, name: Any = str) -> int:
    """Write each failed resource's error on ``err``; the exit status (1 if any failed)."""
    failed = 0
    for key, value in results.items():
        if isinstance(value, KielError):
            failed = 1
            err.write(f"{name(key)}: {type(value).__name__}: {value}\n")
    return failed


def _error_doc(value: Any) -> Optional[dict[str, Any]]:
    if isinstance(value, KielError):
        return {"error": type(value).__name__, "errno": getattr(value, "errno", None),
                "message": str(value)}
    return None


def _tp_name(tp: "TopicPartition") -> str:
    return f"{tp.topic}:{tp.partition}"


async def _partitions(admin: "Admin", specs: Sequence[str], option: str
                      ) -> "list[TopicPartition]":
    """``TOPIC`` (every partition) or ``TOPIC:P,P...``, never naming a topic
    in a Metadata request (a broker that auto-creates topics would create it).

    Raises:
        ConfigError: a partition list that is not numbers.
        UnknownTopicError: a topic the cluster does not have.
    """
    from kiel.structs import TopicPartition

    every = await admin.cluster.all_topics()
    out: list[TopicPartition] = []
    for spec in specs:
        topic, sep, listed = spec.rpartition(":")
        if not sep:
            topic, listed = spec, ""
        try:
            numbers = [int(p) for p in listed.split(",") if p.strip()]
        except ValueError:
            raise ConfigError(f"{option} takes TOPIC or TOPIC:P,P...; got {spec!r}") from None
        if not topic or (sep and not numbers):
            raise ConfigError(f"{option} takes TOPIC or TOPIC:P,P...; got {spec!r}")
        if topic not in every:
            raise UnknownTopicError(f"unknown topic {topic!r} (it is not created)",
                                    topic=topic)
        for p in numbers or range(every[topic]):
            tp = TopicPartition(topic, p)
            if tp not in out:
                out.append(tp)
    return out


# ----------------------------------------------------------------------
# topics


async def topics_admin(args: argparse.Namespace, out: Any, err: Any) -> int:
    """``kiel topics create|delete|alter|describe TOPIC...``; without a verb,
    today's listing or description (:func:`kiel.cli.groups.topics`)."""
    if not args.topics or args.topics[0] not in TOPIC_VERBS:
        stray = [o for o, v in (("--partitions", args.partitions is not None),
                               ("--replication-factor", args.replication_factor is not None),
                               ("--config", args.config), ("--delete-config", args.delete_config),
                               ("--validate-only", args.validate_only),
                               ("--execute", args.execute)) if v]
        if stray:
            raise ConfigError(f"{stray[0]} goes with a verb: kiel topics "
                              f"{{{','.join(TOPIC_VERBS)}}} TOPIC ...")
        from kiel.cli.groups import topics

        return await topics(args, out)
    verb, names = args.topics[0], args.topics[1:]
    if not names:
        raise ConfigError(f"'topics {verb}' needs at least one topic")
    for option, used, allowed in (
        ("--partitions", args.partitions is not None, ("create", "alter")),
        ("--replication-factor", args.replication_factor is not None, ("create",)),
        ("--config", bool(args.config), ("create", "alter")),
        ("--delete-config", bool(args.delete_config), ("alter",)),
        ("--validate-only", args.validate_only, ("create", "alter")),
        ("--execute", args.execute, ("delete",)),
    ):
        if used and verb not in allowed:
            raise ConfigError(f"{option} is not an option of 'topics {verb}' "
                              f"(only of {', '.join('topics ' + v for v in allowed)})")
    async with _admin(args, f"topics {verb}") as admin:
        if verb == "create":
            return await _create(admin, args, names, out, err)
        if verb == "delete":
            return await _delete(admin, args, names, out, err)
        if verb == "alter":
            return await _alter(admin, args, names, out, err)
        return await _describe(admin, args, names, out, err)


async def _create(admin: "Admin", args: argparse.Namespace, names: Sequence[str], out: Any,
                  err: Any) -> int:
    from kiel.admin import NewTopic

    configs = _configs(args.config, "--config")
    results = await admin.create_topics(
        [NewTopic(n, -1 if args.partitions is None else args.partitions,
                  -1 if args.replication_factor is None else args.replication_factor,
                  configs) for n in names], validate_only=args.validate_only)
    if args.json:
        out.write(json.dumps([{"topic": t, **(_error_doc(v) or {
            "partitions": v.partitions, "replication_factor": v.replication_factor,
            "validate_only": args.validate_only})} for t, v in results.items()]) + "\n")
    else:
        done = "Validated" if args.validate_only else "Created"
        for topic in results.ok:
            out.write(f"{done} topic {topic}.\n")
    return _report(results, err)


async def _delete(admin: "Admin", args: argparse.Namespace, names: Sequence[str], out: Any,
                  err: Any) -> int:
    every = await admin.cluster.all_topics()
    if not args.execute:
        unknown = [n for n in names if n not in every]
        rows: list[Sequence[Any]] = [(n, every[n]) for n in names if n in every]
        if args.json:
            out.write(json.dumps({"execute": False, "topics": [
                {"topic": n, "partitions": c} for n, c in rows]}) + "\n")
        else:
            out.write(_table([("TOPIC", "PARTITIONS")] + rows))
        for n in unknown:
            err.write(f"{n}: UnknownTopicError: the cluster has no such topic\n")
        err.write(DRY_RUN.format(what="these topics and their records"))
        return 1 if unknown else 0
    results = await admin.delete_topics(names)
    if args.json:
        out.write(json.dumps({"execute": True, "topics": [
            {"topic": t, **(_error_doc(v) or {"deleted": True})}
            for t, v in results.items()]}) + "\n")
    else:
        for topic in results.ok:
            out.write(f"Deleted topic {topic}.\n")
    return _report(results, err)


async def _alter(admin: "Admin", args: argparse.Namespace, names: Sequence[str], out: Any,
                 err: Any) -> int:
    from kiel.admin import ConfigResource

    changes: dict[str, Optional[str]] = dict(_configs(args.config, "--config"))
    for name in args.delete_config or ():
        if name in changes:
            raise ConfigError(f"{name!r} is both set (--config) and deleted (--delete-config)")
        changes[name] = None
    if args.partitions is None and not changes:
        raise ConfigError("'topics alter' needs --partitions N, --config NAME=VALUE or "
                          "--delete-config NAME")
    status = 0
    docs: dict[str, dict[str, Any]] = {n: {"topic": n} for n in names}
    if args.partitions is not None:
        grown = await admin.create_partitions(dict.fromkeys(names, args.partitions),
                                              validate_only=args.validate_only)
        status |= _report(grown, err, lambda t: f"{t} (partitions)")
        for topic, value in grown.items():
            docs[topic]["partitions"] = _error_doc(value) or value
            if not isinstance(value, KielError) and not args.json:
                out.write(f"Topic {topic}: {value} partitions"
                          f"{' (validated)' if args.validate_only else ''}.\n")
    if changes:
        altered = await admin.incremental_alter_configs(
            {ConfigResource("topic", n): changes for n in names},
            validate_only=args.validate_only)
        status |= _report(altered, err, lambda r: f"{r.name} (configs)")
        for resource, changed in altered.items():
            docs[resource.name]["configs"] = _error_doc(changed) or changes
            if not isinstance(changed, KielError) and not args.json:
                out.write(f"Topic {resource.name}: configs "
                          f"{'validated' if args.validate_only else 'altered'}: "
                          f"{_config_text(changes)}.\n")
    if args.json:
        out.write(json.dumps(list(docs.values())) + "\n")
    return status


def _config_text(changes: Mapping[str, Optional[str]]) -> str:
    return ",".join(f"{k}={v}" if v is not None else f"{k} (deleted)"
                    for k, v in changes.items())


async def _describe(admin: "Admin", args: argparse.Namespace, names: Sequence[str], out: Any,
                    err: Any) -> int:
    """kafka-topics.sh --describe's lines: Topic, PartitionCount,
    ReplicationFactor, Configs (the topic's overrides: source
    DYNAMIC_TOPIC_CONFIG, as kafka-topics.sh shows them); then per
    partition Partition, Leader, Replicas, Isr (and the offsets it holds)."""
    from kiel.admin import ConfigResource, describe_topics
    from kiel.exc import UnsupportedFeatureError

    described = await describe_topics(args.brokers, names, **client_options(args))
    try:
        configs: Mapping[Any, Any] = await admin.describe_configs(
            [ConfigResource("topic", t.topic) for t in described])
    except UnsupportedFeatureError:  # a 0.8 broker: topic configs live in ZooKeeper
        configs = {}
    status = _report(configs, err, lambda r: f"{r.name} (configs)")
    docs = []
    for topic in described:
        entries = configs.get(ConfigResource("topic", topic.topic))
        own = {} if entries is None or isinstance(entries, KielError) else {
            n: e.value for n, e in sorted(entries.items())
            if e.source == "DYNAMIC_TOPIC_CONFIG"}
        factor = max((len(p.replicas) for p in topic.partitions), default=0)
        docs.append({"topic": topic.topic, "partition_count": len(topic.partitions),
                     "replication_factor": factor, "configs": own,
                     "partitions": [p._asdict() for p in topic.partitions]})
        if args.json:
            continue
        out.write(f"Topic: {topic.topic}\tPartitionCount: {len(topic.partitions)}\t"
                  f"ReplicationFactor: {factor}\tConfigs: "
                  f"{','.join(f'{k}={v}' for k, v in own.items())}\n")
        for p in topic.partitions:
            out.write(f"\tTopic: {topic.topic}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                      f"Replicas: {','.join(map(str, p.replicas))}\t"
                      f"Isr: {','.join(map(str, p.isr))}\t"
                      f"Earliest: {p.earliest}\tHighwater: {p.highwater}\n")
    if args.json:
        out.write(json.dumps(docs) + "\n")
    return status


# ----------------------------------------------------------------------
# configs


def _config_resource(args: argparse.Namespace) -> Any:
    from kiel.admin import ConfigResource

    if args.topic is not None:
        return ConfigResource("topic", args.topic)
    if args.broker != "" and not args.broker.isdigit():
        raise ConfigError(f"--broker takes a broker id (a number); got {args.broker!r}")
    return ConfigResource("broker", args.broker)


def _resource_text(resource: Any) -> str:
    return f"{resource.kind} {resource.name or '(default)'}"


async def configs(args: argparse.Namespace, out: Any, err: Any) -> int:
    """``kiel configs describe|alter (--topic T | --broker ID)``."""
    resource = _config_resource(args)
    async with _admin(args, f"configs {args.configs_command}") as admin:
        if args.configs_command == "describe":
            if resource.kind == "topic":
                # never name an unknown topic: some brokers create what they are asked about
                if resource.name not in await admin.cluster.all_topics():
                    raise UnknownTopicError(f"unknown topic {resource.name!r}",
                                            topic=resource.name)
            described = await admin.describe_configs([resource])
            status = _report(described, err, _resource_text)
            entries = described.ok.get(resource, {})
            defaults = ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
            shown = sorted(e for e in entries.values() if args.all or e.source not in defaults)
            if args.json:
                out.write(json.dumps({"kind": resource.kind, "name": resource.name, "configs": [
                    {"name": e.name, "value": e.value, "source": e.source,
                     "read_only": e.read_only, "sensitive": e.sensitive} for e in shown]}) + "\n")
            elif not status:
                out.write(_table([("NAME", "VALUE", "SOURCE", "READ-ONLY", "SENSITIVE")] + [
                    (e.name, "(sensitive)" if e.sensitive else e.value, e.source,
                     str(e.read_only).lower(), str(e.sensitive).lower()) for e in shown]))
            return status
        changes: dict[str, Optional[str]] = dict(_configs(args.set, "--set"))
        for name in args.delete or ():
            if name in changes:
                raise ConfigError(f"{name!r} is both set (--set) and deleted (--delete)")
            changes[name] = None
        if not changes:
            raise ConfigError("'configs alter' needs --set NAME=VALUE or --delete NAME")
        if resource.kind == "topic" and resource.name not in await admin.cluster.all_topics():
            raise UnknownTopicError(f"unknown topic {resource.name!r}", topic=resource.name)
        altered = await admin.incremental_alter_configs({resource: changes},
                                                        validate_only=args.validate_only)
        status = _report(altered, err, _resource_text)
        if args.json:
            out.write(json.dumps({"kind": resource.kind, "name": resource.name,
                                  "validate_only": args.validate_only, "changes": changes,
                                  **(_error_doc(altered[resource]) or {})}) + "\n")
        elif not status:
            out.write(f"{'Validated' if args.validate_only else 'Altered'} configs of "
                      f"{_resource_text(resource)}: {_config_text(changes)}.\n")
        return status


# ----------------------------------------------------------------------
# groups


async def group_delete(args: argparse.Namespace, out: Any, err: Any) -> int:
    """``kiel group delete GROUP... [--execute]``: a group with live members
    is refused here before anything is sent (Kafka refuses it too; some
    brokers, Tansu, would delete it)."""
    from kiel.admin import INACTIVE_STATES

    if args.zookeeper:
        raise ConfigError("'group delete' is for the groups the brokers coordinate, not -z "
                          "(a ZooKeeper group ends when its nodes are removed)")
    async with _admin(args, "group delete") as admin:
        described = await admin.describe_groups(args.groups)
        status = _report(described, err)
        rows: list[Sequence[Any]] = []
        deletable = []
        for group, value in described.ok.items():
            live = value.state not in INACTIVE_STATES or bool(value.members)
            rows.append((group, value.state, len(value.members)))
            if live:
                status = 1
                err.write(f"{group}: {NonEmptyGroupError.__name__}: the group is {value.state} "
                          f"with {len(value.members)} members listed; stop its members "
                          "first (Kafka refuses to delete a group with live members)\n")
            else:
                deletable.append(group)
        if not args.execute:
            if args.json:
                out.write(json.dumps({"execute": False, "groups": [
                    {"group": g, "state": s, "members": m} for g, s, m in rows]}) + "\n")
            else:
                out.write(_table([("GROUP", "STATE", "#MEMBERS")] + rows))
            err.write(DRY_RUN.format(what="the groups without live members"))
            return status
        deleted = await admin.delete_groups(deletable) if deletable else {}
        status |= _report(deleted, err)
        if args.json:
            out.write(json.dumps({"execute": True, "groups": [
                {"group": g, **(_error_doc(v) or {"deleted": True})}
                for g, v in deleted.items()]}) + "\n")
        else:
            for group, outcome in deleted.items():
                if not isinstance(outcome, KielError):
                    out.write(f"Deleted group {group}.\n")
        return status


async def group_offsets_delete(args: argparse.Namespace, out: Any, err: Any) -> int:
    """``kiel group offsets delete GROUP --topic T[:P,P] [--execute]``."""
    if args.zookeeper:
        raise ConfigError("'group offsets delete' is for the groups the brokers coordinate, "
                          "not -z")
    async with _admin(args, "group offsets delete") as admin:
        tps = await _partitions(admin, args.topic, "--topic")
        if not args.execute:
            described = await admin.group_offsets(args.group)
            committed = {(p.topic, p.partition): p.committed for p in described.partitions}
            rows: list[Sequence[Any]] = [(args.group, tp.topic, tp.partition,
                     committed.get((tp.topic, tp.partition))) for tp in tps]
            if args.json:
                out.write(json.dumps({"execute": False, "group": args.group, "partitions": [
                    {"topic": t, "partition": p, "committed": c}
                    for _, t, p, c in rows]}) + "\n")
            else:
                out.write(_table([("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET")] + rows))
            err.write(DRY_RUN.format(what="these committed offsets"))
            return 0
        results = await admin.delete_group_offsets(args.group, tps)
        if args.json:
            out.write(json.dumps({"execute": True, "group": args.group, "partitions": [
                {"topic": tp.topic, "partition": tp.partition,
                 **(_error_doc(v) or {"deleted": True})} for tp, v in results.items()]}) + "\n")
        else:
            for tp in results.ok:
                out.write(f"Deleted the offset of group {args.group} on {_tp_name(tp)}.\n")
        return _report(results, err, _tp_name)


# ----------------------------------------------------------------------
# records and offsets


async def records_delete(args: argparse.Namespace, out: Any, err: Any) -> int:
    """``kiel records delete TOPIC[:P,P]... --before OFFSET|end [--execute]``."""
    from kiel.admin import HIGH_WATERMARK
    from kiel.structs import TopicPartition

    if args.before in ("end", "latest", "-1"):
        before = HIGH_WATERMARK
    else:
        try:
            before = int(args.before)
        except ValueError:
            raise ConfigError(f"--before takes an offset or 'end'; got {args.before!r}") from None
        if before < 0:
            raise ConfigError(f"--before takes an offset >= 0 or 'end'; got {args.before!r}")
    async with _admin(args, "records delete") as admin:
        tps = await _partitions(admin, args.partitions, "TOPIC")
        # Strategy: the plan comes first, dry run or not, so --execute does
        # what the dry run showed: a partition whose --before is past its
        # high watermark is refused here (as the broker would refuse it,
        # OffsetOutOfRange) and never sent; the others go ahead.
        earliest = await admin.list_offsets(dict.fromkeys(tps, "earliest"))
        latest = await admin.list_offsets(dict.fromkeys(tps, "latest"))
        status = _report(earliest, err, _tp_name) | _report(latest, err, _tp_name)
        rows: list[Sequence[Any]] = []
        sendable: list[TopicPartition] = []
        for tp in tps:
            low, high = earliest[tp], latest[tp]
            if isinstance(low, KielError) or isinstance(high, KielError):
                continue
            new = high.offset if before == HIGH_WATERMARK else before
            if high.offset is not None and new is not None and new > high.offset:
                status = 1
                err.write(f"{_tp_name(tp)}: OffsetOutOfRangeError: --before {new} is past "
                          f"the high watermark {high.offset}; nothing deleted there\n")
                continue
            sendable.append(tp)
            rows.append((tp.topic, tp.partition, low.offset, high.offset, new,
                         None if new is None or low.offset is None
                         else max(0, new - low.offset)))
        if not args.execute:
            if args.json:
                out.write(json.dumps({"execute": False, "partitions": [
                    {"topic": r[0], "partition": r[1], "earliest": r[2], "highwater": r[3],
                     "new_earliest": r[4], "deleted": r[5]} for r in rows]}) + "\n")
            else:
                out.write(_table([("TOPIC", "PARTITION", "EARLIEST", "HIGHWATER",
                                   "NEW-EARLIEST", "DELETED")] + rows))
            err.write(DRY_RUN.format(what="these records"))
            return status
        results = await admin.delete_records(dict.fromkeys(sendable, before)) \
            if sendable else {}
        if args.json:
            out.write(json.dumps({"execute": True, "partitions": [
                {"topic": tp.topic, "partition": tp.partition,
                 **(_error_doc(v) or {"low_watermark": v})} for tp, v in results.items()]}) + "\n")
        else:
            out.write(_table([("TOPIC", "PARTITION", "LOW-WATERMARK")] + [
                (tp.topic, tp.partition, v) for tp, v in results.items()
                if not isinstance(v, KielError)]))
        return status | _report(results, err, _tp_name)


def _offset_spec(text: str) -> Any:
    """``--time``: earliest, latest, max_timestamp, milliseconds, or an ISO date/time.

    Raises:
        ConfigError: anything else.
    """
    symbols = {"earliest": "earliest", "beginning": "earliest", "-2": "earliest",
               "latest": "latest", "end": "latest", "-1": "latest",
               "max_timestamp": "max_timestamp", "max-timestamp": "max_timestamp",
               "-3": "max_timestamp"}
    if text in symbols:
        return symbols[text]
    if text.isdigit():
        return int(text)
    try:
        when = parse_when(text, {})
    except ConfigError:
        when = None
    if not isinstance(when, datetime.datetime):
        raise ConfigError("--time takes earliest, latest, max_timestamp, milliseconds since "
                          f"the epoch or an ISO date/time; got {text!r}")
    return when


async def offsets(args: argparse.Namespace, out: Any, err: Any) -> int:
    """``kiel offsets TOPIC[:P,P]... [--time SPEC]``: per partition the offset
    (and its record's timestamp) for a time, or earliest/latest."""
    spec = _offset_spec(args.time)
    async with _admin(args, "offsets") as admin:
        tps = await _partitions(admin, args.partitions, "TOPIC")
        results = await admin.list_offsets(dict.fromkeys(tps, spec))
        if args.json:
            out.write(json.dumps([{"topic": tp.topic, "partition": tp.partition, **(
                _error_doc(v) or {"offset": v.offset, "timestamp": v.timestamp})}
                for tp, v in results.items()]) + "\n")
        else:
            out.write(_table([("TOPIC", "PARTITION", "OFFSET", "TIMESTAMP")] + [
                (tp.topic, tp.partition, v.offset, None if v.timestamp < 0 else v.timestamp)
                for tp, v in results.ok.items()]))
        return _report(results, err, _tp_name)
