"""The ``kiel`` command: produce, consume, inspect topics and groups, dry-run allocators.

::

    kiel -b localhost:9092 produce TOPIC [-K :] < lines
    kiel -b localhost:9092 consume TOPIC [--from beginning] [-c 100] [-K :] [--json]
    kiel -b localhost:9092 topics [TOPIC ...]
    kiel -b localhost:9092 group list
    kiel -b localhost:9092 group describe GROUP
    kiel -b localhost:9092 group reset GROUP --topic T --to earliest
    kiel -z localhost:2181 group list
    kiel -b localhost:9092 -z localhost:2181 group describe GROUP
    kiel -b localhost:9092 -z localhost:2181 group reset GROUP --topic T --to earliest
    kiel allocate --allocator sticky --members a,b,c --partitions t:0,t:1,t:2

The group commands speak to the brokers' group coordinator (a current
cluster's groups) unless ``-z`` names ZooKeeper (a 0.8 layout group).

Every command exits 0 on success, 1 when kiel raised one of its errors (the
message goes to standard error), 2 on a usage error.
"""

import argparse
import asyncio
import base64
import datetime
import functools
import importlib
import json
import os
import ssl
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Optional

from kiel.exc import ConfigError, KielError, UnsupportedFeatureError

if TYPE_CHECKING:  # pragma: no cover - kiel.admin loads kazoo: imported where used
    from kiel.admin import BrokerGroupDescription

__all__ = ["KEY_PASSWORD_VARIABLE", "PASSWORD_VARIABLE", "main"]

#: The environment variable the SASL password is read from.
PASSWORD_VARIABLE = "KIEL_SASL_PASSWORD"
#: The environment variable the password of an encrypted ``--cert-file`` key is read from.
KEY_PASSWORD_VARIABLE = "KIEL_SSL_KEY_PASSWORD"


# ----------------------------------------------------------------------
# argument parsing


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kiel", description="kiel: produce, consume, inspect topics and groups."
    )
    parser.add_argument("-b", "--brokers", help="bootstrap brokers, host[:port],...")
    parser.add_argument("-z", "--zookeeper",
                        help="ZooKeeper hosts: group commands on ZooKeeper groups "
                        "(default: the groups the brokers coordinate)")
    parser.add_argument("--client-id", default="kiel-cli")
    parser.add_argument(
        "--timeout", type=float, default=30.0, help="seconds to wait for the cluster"
    )
    _add_security(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_produce(commands)
    _add_consume(commands)
    _add_topics(commands)
    _add_group(commands)
    _add_allocate(commands)
    return parser


def _add_security(parser: argparse.ArgumentParser) -> None:
    security = parser.add_argument_group(
        "TLS and SASL", f"the SASL password is read from ${PASSWORD_VARIABLE}, never "
        "from the command line (where other users of the machine can see it)"
    )
    security.add_argument("--tls", action="store_true",
                          help="connect with TLS, trusting the system's CAs")
    security.add_argument("--ca-file", help="connect with TLS, trusting this PEM file's CAs")
    security.add_argument("--cert-file", help="a PEM client certificate (implies TLS)")
    security.add_argument("--key-file", help="its private key, if not in --cert-file "
                          f"(an encrypted key's password: ${KEY_PASSWORD_VARIABLE})")
    security.add_argument("--sasl-mechanism",
                          choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    security.add_argument("--sasl-username")


def _add_produce(commands: Any) -> None:
    produce = commands.add_parser("produce", help="produce standard input, a message per line")
    produce.add_argument("topic")
    produce.add_argument("-K", "--key-delimiter", help="split each line into KEY<delim>VALUE")
    produce.add_argument("-p", "--partition", type=int, help="always this partition")
    produce.add_argument("--compression", choices=["gzip", "snappy", "lz4"])
    produce.add_argument("--acks", type=int, default=-1, choices=[-1, 0, 1])
    produce.add_argument(
        "-D", "--delimiter", default="\n", help="message delimiter (default: newline)"
    )


def _add_consume(commands: Any) -> None:
    consume = commands.add_parser("consume", help="write messages to standard output")
    consume.add_argument("topic")
    consume.add_argument(
        "--from",
        dest="start",
        default="beginning",
        help="beginning, end, an offset, or an ISO date/time (default: beginning)",
    )
    consume.add_argument("-p", "--partition", type=int, action="append", help="only these")
    consume.add_argument("-c", "--count", type=int, help="stop after this many messages")
    consume.add_argument(
        "-e", "--exit", action="store_true", help="stop at the end of every partition"
    )
    consume.add_argument("-K", "--key-delimiter", help="print KEY<delim>VALUE")
    consume.add_argument(
        "-D", "--delimiter", default="\n", help="written after each message (default: newline)"
    )
    consume.add_argument(
        "--json", action="store_true", help="one JSON object per message (keys/values as text)"
    )
    consume.add_argument(
        "--binary",
        choices=["error", "base64"],
        default="error",
        help="with --json: what to do with keys/values that are not UTF-8 (default: error)",
    )


def _add_topics(commands: Any) -> None:
    topics = commands.add_parser("topics", help="list topics, or describe the ones named")
    topics.add_argument("topics", nargs="*")
    topics.add_argument("--json", action="store_true")


def _add_group(commands: Any) -> None:
    group = commands.add_parser(
        "group", help="consumer groups: the brokers' (default) or ZooKeeper's (-z)"
    )
    group_commands = group.add_subparsers(dest="group_command", required=True, metavar="ACTION")
    group_list = group_commands.add_parser(
        "list", help="the groups the brokers coordinate, or (-z) those registered in ZooKeeper"
    )
    group_list.add_argument("--json", action="store_true")
    describe = group_commands.add_parser(
        "describe", help="state, members, owners, committed offsets and lag"
    )
    describe.add_argument("group")
    describe.add_argument("--json", action="store_true")
    reset = group_commands.add_parser("reset", help="move a group's committed offsets")
    reset.add_argument("group")
    reset.add_argument("--topic", action="append", required=True)
    reset.add_argument(
        "--to", required=True, help="earliest, latest, an offset, or an ISO date/time"
    )
    reset.add_argument(
        "--force",
        action="store_true",
        help="with -z only: even while members are alive (they may overwrite)",
    )


def _add_allocate(commands: Any) -> None:
    allocate = commands.add_parser("allocate", help="dry-run an allocator")
    allocate.add_argument(
        "--allocator",
        default="round_robin",
        help="a name, or module:function (default round_robin)",
    )
    allocate.add_argument("--members", required=True, help="comma-separated member ids")
    allocate.add_argument(
        "--partitions",
        required=True,
        help="comma-separated topic:partition, or topic:COUNT* for partitions 0..COUNT-1",
    )
    allocate.add_argument("--json", action="store_true")


def _client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Client settings the global options ask for: client id, timeout, TLS, SASL.

    Raises:
        ConfigError: a CA, certificate or key file that does not load; SASL
            without a user name or without the password variable; a key
            file without a certificate.
    """
    options: dict[str, Any] = {"client_id": args.client_id, "request_timeout": args.timeout}
    if args.key_file and not args.cert_file:
        raise ConfigError("--key-file goes with --cert-file")
    if args.tls or args.ca_file or args.cert_file:
        try:
            context = ssl.create_default_context(cafile=args.ca_file)
            if args.cert_file:
                # Never None: OpenSSL would then prompt on the terminal for
                # an encrypted key (and hang a command fed by a pipe).
                context.load_cert_chain(args.cert_file, args.key_file,
                                        password=os.environ.get(KEY_PASSWORD_VARIABLE, ""))
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"cannot load the TLS files: {e}") from e
        options["ssl_context"] = context
    if args.sasl_mechanism or args.sasl_username:
        password = os.environ.get(PASSWORD_VARIABLE)
        if not args.sasl_mechanism or not args.sasl_username or password is None:
            raise ConfigError(
                "SASL needs --sasl-mechanism, --sasl-username and the password in "
                f"${PASSWORD_VARIABLE}"
            )
        options.update(sasl_mechanism=args.sasl_mechanism,
                       sasl_username=args.sasl_username, sasl_password=password)
    return options


def _unescape(text: str) -> bytes:
    """``\\n``, ``\\t`` and friends as typed on a command line."""
    return text.encode("utf-8").decode("unicode_escape").encode("latin-1")


def _parse_when(text: str, symbols: dict[str, Any]) -> Any:
    """``beginning``/``end`` (or their aliases), an offset, or an ISO date/time."""
    lowered = text.lower()
    if lowered in symbols:
        return symbols[lowered]
    try:
        return int(text)
    except ValueError:
        pass
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"expected {', '.join(sorted(symbols))}, an offset or an ISO date/time; got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when


def _need(value: Optional[str], flag: str, command: str) -> str:
    if not value:
        raise ConfigError(f"'{command}' needs {flag}")
    return value


# ----------------------------------------------------------------------
# allocate (pure)


def load_allocator(name: str) -> Callable[..., Any]:
    """A registered allocator by name, or a user's ``module:function``.

    Raises:
        ConfigError: no such allocator, module or function.
    """
    from kiel.allocators import get_allocator

    if ":" not in name:
        return get_allocator(name)
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigError(f"cannot import allocator module {module_name!r}: {e}") from e
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ConfigError(f"{module_name!r} has no callable {attr!r}")
    return fn


def _expand_partitions(spec: str) -> list[str]:
    from kiel.allocators import format_partition, parse_partition

    out: list[str] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        if item.endswith("*"):
            topic, _, count = item[:-1].rpartition(":")
            if not topic or not count.isdigit():
                raise ConfigError(f"expected topic:COUNT*, got {item!r}")
            out.extend(format_partition(topic, p) for p in range(int(count)))
        else:
            topic, partition = parse_partition(item)
            out.append(format_partition(topic, partition))
    return out


def allocate(args: argparse.Namespace, out: Any) -> int:
    """Run an allocator on the given members and partitions and print the result."""
    from kiel.allocators import validate

    allocator = load_allocator(args.allocator)
    members = sorted(filter(None, (m.strip() for m in args.members.split(","))))
    partitions = sorted(_expand_partitions(args.partitions))
    if not members:
        raise ConfigError("--members names no member")
    allocation = allocator(members, partitions)
    validate(allocation, members, partitions)
    if args.json:
        out.write(json.dumps(allocation, sort_keys=True) + "\n")
        return 0
    for member in members:
        owned = allocation.get(member, {})
        total = sum(len(ps) for ps in owned.values())
        parts = "; ".join(
            f"{t}: {','.join(map(str, sorted(ps)))}" for t, ps in sorted(owned.items())
        )
        out.write(f"{member}\t{total}\t{parts}\n")
    return 0


# ----------------------------------------------------------------------
# produce / consume


async def _read_chunks(stream: BinaryIO) -> Any:
    """Standard input in chunks, read off the loop (a pipe can block)."""
    loop = asyncio.get_running_loop()
    while True:
        chunk = await loop.run_in_executor(None, stream.read1, 1 << 16)  # type: ignore[attr-defined]
        if not chunk:
            return
        yield chunk


async def produce(args: argparse.Namespace, stdin: BinaryIO, err: Any) -> int:
    """Produce standard input, one message per delimiter; print the count to stderr."""
    from kiel.clients import Producer

    brokers = _need(args.brokers, "-b/--brokers", "produce")
    delimiter = _unescape(args.delimiter)
    key_delim = _unescape(args.key_delimiter) if args.key_delimiter else None
    if not delimiter:
        raise ConfigError("the message delimiter must not be empty")
    count = 0
    failures: list[BaseException] = []

    def done(future: "asyncio.Future[Any]") -> None:
        if not future.cancelled() and future.exception() is not None:
            failures.append(future.exception())  # type: ignore[arg-type]

    async with Producer(
        brokers,
        compression=args.compression,
        required_acks=args.acks,
        **_client_options(args),
    ) as producer:
        send = functools.partial(
            _produce_line, producer, args.topic, args.partition, key_delim, done
        )
        pending = b""
        async for chunk in _read_chunks(stdin):
            pending += chunk
            *lines, pending = pending.split(delimiter)
            for line in lines:
                count += await send(line)
            if failures:
                break
        if pending and not failures:
            count += await send(pending)
        await producer.flush()
    if failures:
        raise failures[0]
    err.write(f"produced {count} messages to {args.topic}\n")
    return 0


async def _produce_line(
    producer: Any,
    topic: str,
    partition: Optional[int],
    key_delim: Optional[bytes],
    done: Callable[..., None],
    line: bytes,
) -> int:
    key: Optional[bytes] = None
    if key_delim is not None:
        key, sep, line = line.partition(key_delim)
        if not sep:
            raise ConfigError(f"a line has no key delimiter {key_delim!r}: {key[:60]!r}")
    # enqueue() waits for room: a pipe faster than the cluster is held back,
    # not failed past the producer's max_pending_bytes.
    future = await producer.enqueue(topic, line, key=key, partition=partition)
    future.add_done_callback(done)
    return 1


def _text(data: Optional[bytes], binary: str, what: str, record: Any) -> Any:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if binary == "base64":
            return base64.b64encode(data).decode("ascii")
        raise ConfigError(
            f"the {what} at {record.topic}:{record.partition}@{record.offset} is not UTF-8; "
            "use --binary base64"
        ) from None


def _write_record(args: argparse.Namespace, record: Any, out: BinaryIO, delimiter: bytes) -> None:
    if args.json:
        doc = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": _text(record.key, args.binary, "key", record),
            "value": _text(record.value, args.binary, "value", record),
        }
        out.write(json.dumps(doc, ensure_ascii=False).encode("utf-8") + b"\n")
        return
    if args.key_delimiter is not None:
        out.write((record.key or b"") + _unescape(args.key_delimiter))
    out.write((record.value or b"") + delimiter)


async def consume(args: argparse.Namespace, out: BinaryIO, err: Any) -> int:
    """Write a topic's messages to standard output (``--exit``: stop at the end)."""
    from kiel.clients import BEGINNING, END, SingleConsumer

    brokers = _need(args.brokers, "-b/--brokers", "consume")
    start = _parse_when(args.start, {"beginning": BEGINNING, "earliest": BEGINNING,
                                     "end": END, "latest": END})
    delimiter = _unescape(args.delimiter)
    if args.count is not None and args.count < 0:
        raise ConfigError(f"--count must be >= 0, got {args.count}")
    seen = 0
    async with SingleConsumer(brokers, **_client_options(args)) as consumer:
        await consumer.seek_to(args.topic, start)
        wanted = set(args.partition or consumer.partitions(args.topic))
        unknown = wanted - set(consumer.partitions(args.topic))
        if unknown:
            raise ConfigError(f"{args.topic} has no partition {sorted(unknown)}")
        for p in consumer.partitions(args.topic):
            if p not in wanted:
                consumer.pause(args.topic, p)
        while args.count is None or seen < args.count:
            if args.exit and _at_end(consumer, args.topic, wanted):
                break
            records = await consumer.consume(args.topic)
            for record in records:
                _write_record(args, record, out, delimiter)
                seen += 1
                if args.count is not None and seen >= args.count:
                    break
            out.flush()
    err.write(f"consumed {seen} messages from {args.topic}\n")
    return 0


def _at_end(consumer: Any, topic: str, partitions: Iterable[int]) -> bool:
    for p in partitions:
        highwater = consumer.highwater(topic, p)
        if highwater is None or consumer.position(topic, p) < highwater:
            return False
    return True


# ----------------------------------------------------------------------
# topics


async def topics(args: argparse.Namespace, out: Any) -> int:
    """List topics, or describe the named ones (leaders, replicas, ISR, offsets)."""
    from kiel.admin import describe_topics

    brokers = _need(args.brokers, "-b/--brokers", "topics")
    described = await describe_topics(brokers, args.topics, **_client_options(args))
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


async def group(args: argparse.Namespace, out: Any) -> int:
    """``group list``, ``group describe GROUP``, ``group reset GROUP``.

    On the groups the brokers coordinate, or with ``-z`` on ZooKeeper's.
    """
    if args.zookeeper:
        return await _zookeeper_group(args, out)
    return await _broker_group(args, out)


async def _zookeeper_group(args: argparse.Namespace, out: Any) -> int:
    """The group commands on the 0.8 layout in ZooKeeper (``-z``)."""
    from kiel import admin

    zk_hosts = _need(args.zookeeper, "-z/--zookeeper", f"group {args.group_command}")
    if args.group_command == "list":
        groups = await admin.list_groups(zk_hosts, timeout=args.timeout)
        if args.json:
            out.write(json.dumps(groups) + "\n")
        else:
            out.write("".join(f"{g}\n" for g in groups))
        return 0
    brokers = _need(args.brokers, "-b/--brokers", f"group {args.group_command}")
    if args.group_command == "describe":
        described = await admin.describe_group(
            brokers, zk_hosts, args.group, timeout=args.timeout, **_client_options(args)
        )
        if args.json:
            out.write(json.dumps(described.as_dict()) + "\n")
            return 0
        out.write(f"group {described.group}: {len(described.members)} members\n")
        for member in described.members:
            out.write(f"  member {member}\n")
        out.write("topic\tpartition\towner\tcommitted\thighwater\tlag\n")
        for row in described.partitions:
            out.write(
                f"{row.topic}\t{row.partition}\t{row.owner or '-'}\t"
                f"{'-' if row.committed is None else row.committed}\t"
                f"{'-' if row.highwater is None else row.highwater}\t"
                f"{'-' if row.lag is None else row.lag}\n"
            )
        return 0
    to = _parse_when(args.to, {"earliest": "earliest", "beginning": "earliest",
                               "latest": "latest", "end": "latest"})
    moved = await admin.reset_group(
        brokers, zk_hosts, args.group, args.topic, to, force=args.force,
        timeout=args.timeout, **_client_options(args),
    )
    for tp, offset in sorted(moved.items()):
        out.write(f"{tp.topic}\t{tp.partition}\t{offset}\n")
    return 0


#: The group APIs a 0.8 broker lacks: without them the groups are in ZooKeeper.
_BROKER_GROUP_APIS = ("ListGroups", "DescribeGroups")


async def _broker_group(args: argparse.Namespace, out: Any) -> int:
    """The group commands on the groups the brokers' coordinators keep.

    Raises:
        ConfigError: no ``-b``; ``--force`` (ZooKeeper groups only).
        UnsupportedFeatureError: the brokers coordinate no groups (0.8:
            the message says to pass ``-z``).
    """
    from kiel import admin
    from kiel.client import Client

    command = f"group {args.group_command}"
    if not args.brokers:
        raise ConfigError(f"'{command}' needs -b/--brokers (a group the brokers coordinate) "
                          "or -z/--zookeeper (a ZooKeeper group)")
    if args.group_command == "reset" and args.force:
        raise ConfigError("--force is for ZooKeeper groups (-z): a group's coordinator "
                          "refuses offsets from outside while the group has members")
    async with Client(args.brokers, **_client_options(args)) as client:
        try:
            if args.group_command == "list":
                _write_broker_groups(args, out, await admin.list_broker_groups(client.cluster))
            elif args.group_command == "describe":
                described = await admin.describe_broker_group_offsets(client.cluster, args.group)
                _write_broker_group(args, out, described)
            else:
                to = _parse_when(args.to, {"earliest": "earliest", "beginning": "earliest",
                                           "latest": "latest", "end": "latest"})
                moved = await admin.reset_broker_group(client.cluster, args.group,
                                                       args.topic, to)
                out.write(_table([("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")] + [
                    (args.group, tp.topic, tp.partition, offset)
                    for tp, offset in sorted(moved.items())]))
        except UnsupportedFeatureError as e:
            if e.context.get("api") not in _BROKER_GROUP_APIS:
                raise
            raise UnsupportedFeatureError(
                f"{e.message}; these brokers coordinate no groups (a 0.8 cluster keeps "
                "them in ZooKeeper): pass -z/--zookeeper", **e.context) from e
    return 0


def _table(rows: Sequence[Sequence[Any]]) -> str:
    """Rows in columns aligned as kafka-consumer-groups.sh aligns them (``None``: ``-``)."""
    cells = [["-" if c is None or c == "" else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n" for row in cells
    )


def _write_broker_groups(
    args: argparse.Namespace, out: Any, groups: Sequence[tuple[str, str]]
) -> None:
    if args.json:
        out.write(json.dumps([{"group": g, "protocol_type": t} for g, t in groups]) + "\n")
    else:
        out.write("".join(f"{g}\n" for g, _ in groups))


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
    out.write(_table([("GROUP", "STATE", "ASSIGNMENT-STRATEGY", "#MEMBERS"),
                      (group.group, group.state, group.protocol, len(group.members))]))
    out.write("\n")
    rows: list[Sequence[Any]] = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                  "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")]
    for p in described.partitions:
        owner = members.get(p.owner) if p.owner is not None else None
        rows.append((group.group, p.topic, p.partition, p.committed, p.highwater, p.lag,
                     p.owner, owner and owner.client_host, owner and owner.client_id))
    out.write(_table(rows))
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


# ----------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``kiel`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "allocate":
            return allocate(args, sys.stdout)
        if args.command == "produce":
            return asyncio.run(produce(args, sys.stdin.buffer, sys.stderr))
        if args.command == "consume":
            return asyncio.run(consume(args, sys.stdout.buffer, sys.stderr))
        if args.command == "topics":
            return asyncio.run(topics(args, sys.stdout))
        return asyncio.run(group(args, sys.stdout))
    except KielError as e:
        sys.stderr.write(f"kiel {args.command}: {e}\n")
        return 1
    except BrokenPipeError:
        # `kiel consume ... | head`: the reader left; that is not an error.
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
