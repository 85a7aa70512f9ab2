"""The ``kiel`` command's options: parsing them, and what they mean for a client."""

import argparse
import datetime
import functools
import math
import os
import ssl
from collections.abc import Callable, Sequence
from typing import Any, Optional

from kiel import __version__
from kiel.exc import ConfigError

__all__ = ["DEFAULTS", "KEY_PASSWORD_VARIABLE", "PASSWORD_VARIABLE", "client_options", "need",
           "parse", "parse_when", "unescape"]

#: The environment variable the SASL password is read from.
PASSWORD_VARIABLE = "KIEL_SASL_PASSWORD"
#: The environment variable the password of an encrypted ``--cert-file`` key is read from.
KEY_PASSWORD_VARIABLE = "KIEL_SSL_KEY_PASSWORD"

#: The global options' values when not given (they may come before or after
#: the command, so argparse leaves them unset: see :func:`global_options`).
DEFAULTS: dict[str, Any] = {
    # the same default as kiel.admin's ZooKeeper functions and Cluster's request_timeout
    "brokers": None, "zookeeper": None, "client_id": "kiel-cli", "timeout": 30.0,
    "verbose": 0, "tls": False, "ca_file": None, "cert_file": None, "key_file": None,
    "sasl_mechanism": None, "sasl_username": None,
}


def _seconds(text: str) -> float:
    """``--timeout``'s type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
    return value


def global_options() -> argparse.ArgumentParser:
    """The options every command takes, before or after its name.

    Strategy: one parent parser given to the top parser and to every
    command's; its options default to ``SUPPRESS`` so a value given in one
    place is not overwritten by the other's default. :data:`DEFAULTS`
    fills in what was not given.
    """
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("-b", "--brokers", help="bootstrap brokers, host[:port],...")
    common.add_argument("-z", "--zookeeper",
                        help="ZooKeeper hosts: group commands on ZooKeeper groups "
                        "(default: the groups the brokers coordinate)")
    common.add_argument("--client-id", help="sent to the brokers (default kiel-cli)")
    common.add_argument(
        "--timeout", type=_seconds, metavar="SECONDS",
        help="one deadline for waiting on the brokers and ZooKeeper: the whole command "
        "for topics, configs, records, offsets and group; for consume and produce, how "
        "long the cluster may stay "
        f"silent while the command waits on it (default {DEFAULTS['timeout']:g})")
    common.add_argument("-v", "--verbose", action="count",
                        help="log to standard error: -v information (kazoo's too), -vv debug")
    security = common.add_argument_group(
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
    return common


def _parser() -> argparse.ArgumentParser:
    common = global_options()
    parser = argparse.ArgumentParser(
        prog="kiel", description="kiel: produce, consume, inspect topics and groups.",
        parents=[common], epilog="Exit status: 0 success (a dry run too), 1 an error "
        "(the message on standard error), 2 a usage error, 130 interrupted (Ctrl-C).",
    )
    parser.add_argument("--version", action="version", version=f"kiel {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = functools.partial(commands.add_parser, parents=[common])
    _add_produce(add)
    _add_consume(add)
    _add_topics(add)
    _add_configs(add, common)
    _add_records(add, common)
    _add_offsets(add)
    _add_group(add, common)
    _add_allocate(add)
    return parser


def parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """The command line, with :data:`DEFAULTS` for the global options not given."""
    args = _parser().parse_args(argv)
    for name, value in DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, value)
    return args


def _add_produce(add: Callable[..., argparse.ArgumentParser]) -> None:
    produce = add("produce", help="produce standard input, a message per line")
    produce.add_argument("topic")
    produce.add_argument("-K", "--key-delimiter", help="split each line into KEY<delim>VALUE")
    produce.add_argument("-p", "--partition", type=int, help="always this partition")
    produce.add_argument("--compression", choices=["gzip", "snappy", "lz4"])
    produce.add_argument("--acks", type=int, default=-1, choices=[-1, 0, 1])
    produce.add_argument(
        "-D", "--delimiter", default="\n", help="message delimiter (default: newline)"
    )


def _add_consume(add: Callable[..., argparse.ArgumentParser]) -> None:
    consume = add("consume", help="write messages to standard output")
    consume.add_argument("topic")
    consume.add_argument(
        "--from",
        dest="start",
        default="beginning",
        help="beginning, end, an offset, -N (N before each partition's end), or an ISO "
        "date/time (default: beginning)",
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
        "-f", "--format", help="each message as this format, like kcat's -f: %%t topic, "
        "%%p partition, %%o offset, %%k key, %%s value, %%K/%%S their sizes, %%T timestamp, "
        "%%h headers, %%%% a %%; \\n \\t \\r \\\\ escapes (no delimiter is added)"
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
    consume.add_argument(
        "--isolation",
        choices=["read_uncommitted", "read_committed"],
        default="read_uncommitted",
        help="read_committed: only committed transactions' records, up to the last stable "
        "offset (--exit stops there); default read_uncommitted: every record",
    )


def _add_topics(add: Callable[..., argparse.ArgumentParser]) -> None:
    # Strategy: one parser, the verb as the first positional, so that
    # `kiel topics T ...` (describe, as before) keeps working beside
    # `kiel topics create T ...`; kiel.cli.admin refuses an option that
    # is not its verb's.
    topics = add(
        "topics", help="list topics, describe the ones named, or "
        "create|delete|alter|describe TOPIC...",
        usage="kiel topics [TOPIC ...] | kiel topics {create,delete,alter,describe} TOPIC ...",
        description="With no verb: list topics, or describe the named ones (never creating "
        "one). create: --partitions, --replication-factor (default: the broker's), --config "
        "NAME=VALUE, --validate-only. alter: --partitions (the new total), --config, "
        "--delete-config NAME, --validate-only. delete: a dry run unless --execute. "
        "describe: kafka-topics.sh --describe's lines.",
    )
    topics.add_argument("topics", nargs="*", metavar="[VERB] TOPIC")
    topics.add_argument("--json", action="store_true")
    topics.add_argument("--partitions", type=int, metavar="N",
                        help="create: the partition count; alter: the new total")
    topics.add_argument("--replication-factor", type=int, metavar="N", help="create only")
    topics.add_argument("--config", action="append", metavar="NAME=VALUE",
                        help="create, alter: a topic config (repeatable)")
    topics.add_argument("--delete-config", action="append", metavar="NAME",
                        help="alter: back to the default (repeatable)")
    topics.add_argument("--validate-only", action="store_true",
                        help="create, alter: the broker checks, changes nothing")
    topics.add_argument("--execute", action="store_true",
                        help="delete: delete (without it, a dry run)")


def _add_configs(add: Callable[..., argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    configs = add("configs", help="describe or alter a topic's or a broker's configs")
    actions = configs.add_subparsers(dest="configs_command", required=True, metavar="ACTION")
    for action in ("describe", "alter"):
        parser = actions.add_parser(action, parents=[common], help=(
            "the configs set (--all: every one)" if action == "describe" else
            "set or delete configs (IncrementalAlterConfigs)"))
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--topic", metavar="TOPIC")
        which.add_argument("--broker", metavar="ID",
                           help="a broker id ('' : the default of every broker)")
        parser.add_argument("--json", action="store_true")
        if action == "describe":
            parser.add_argument("--all", action="store_true",
                                help="the defaults too, not only what was set")
        else:
            parser.add_argument("--set", action="append", metavar="NAME=VALUE")
            parser.add_argument("--delete", action="append", metavar="NAME",
                                help="back to the default")
            parser.add_argument("--validate-only", action="store_true",
                                help="the broker checks, changes nothing")


def _add_records(add: Callable[..., argparse.ArgumentParser],
                 common: argparse.ArgumentParser) -> None:
    records = add("records", help="delete records before an offset")
    actions = records.add_subparsers(dest="records_command", required=True, metavar="ACTION")
    delete = actions.add_parser(
        "delete", parents=[common], help="delete every record before an offset "
        "(a dry run unless --execute)")
    delete.add_argument("partitions", nargs="+", metavar="TOPIC[:P,P...]")
    delete.add_argument("--before", required=True, metavar="OFFSET|end",
                        help="the new earliest offset; end: the high watermark")
    delete.add_argument("--execute", action="store_true", help="delete (without it, a dry run)")
    delete.add_argument("--json", action="store_true")


def _add_offsets(add: Callable[..., argparse.ArgumentParser]) -> None:
    offsets = add("offsets", help="offsets by time, or earliest/latest (ListOffsets)")
    offsets.add_argument("partitions", nargs="+", metavar="TOPIC[:P,P...]")
    offsets.add_argument(
        "--time", default="latest", metavar="SPEC",
        help="earliest, latest (default), max_timestamp, milliseconds since the epoch, or "
        "an ISO date/time (UTC unless it says): the first offset at or after it")
    offsets.add_argument("--json", action="store_true")


def _add_group(add: Callable[..., argparse.ArgumentParser],
               common: argparse.ArgumentParser) -> None:
    group = add("group", help="consumer groups: the brokers' (default) or ZooKeeper's (-z)")
    group_commands = group.add_subparsers(dest="group_command", required=True, metavar="ACTION")
    group_add = functools.partial(group_commands.add_parser, parents=[common])
    group_list = group_add(
        "list", help="the groups the brokers coordinate, or (-z) those registered in ZooKeeper"
    )
    group_list.add_argument("--json", action="store_true")
    describe = group_add(
        "describe", help="state, members, owners, committed offsets and lag"
    )
    describe.add_argument("group")
    describe.add_argument("--json", action="store_true")
    reset = group_add(
        "reset", help="move a group's committed offsets (a dry run unless --execute)",
        description="Show (and with --execute, commit) new offsets for a group without "
        "live members, as kafka-consumer-groups.sh --reset-offsets does.",
    )
    reset.add_argument("group")
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", action="append", metavar="TOPIC[:P,P...]",
                       help="a topic, or some of its partitions (repeatable)")
    which.add_argument("--all-topics", action="store_true",
                       help="every topic the group committed offsets for")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", dest="to_symbol", action="store_const", const="earliest")
    to.add_argument("--to-latest", dest="to_symbol", action="store_const", const="latest")
    to.add_argument("--to-current", dest="to_symbol", action="store_const", const="current",
                    help="the committed offset (shows where the group stands)")
    to.add_argument("--to-offset", type=int, metavar="OFFSET")
    to.add_argument("--to-datetime", metavar="ISO", help="an ISO date/time (UTC unless it says)")
    to.add_argument("--shift-by", type=int, metavar="N",
                    help="N after (or, negative, before) the committed offset, within the log")
    to.add_argument("--to", help="earliest, latest, an offset, or an ISO date/time")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true",
                      help="show the new offsets, commit nothing (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.add_argument(
        "--force",
        action="store_true",
        help="with -z only: even while members are alive (they may overwrite)",
    )
    delete = group_add(
        "delete", help="delete groups without live members (a dry run unless --execute)")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.add_argument("--execute", action="store_true", help="delete (without it, a dry run)")
    delete.add_argument("--json", action="store_true")
    offsets = group_add("offsets", help="a group's committed offsets: delete")
    offsets_actions = offsets.add_subparsers(dest="offsets_command", required=True,
                                             metavar="ACTION")
    offsets_delete = offsets_actions.add_parser(
        "delete", parents=[common], help="delete committed offsets (a dry run unless --execute)")
    offsets_delete.add_argument("group")
    offsets_delete.add_argument("--topic", action="append", required=True,
                                metavar="TOPIC[:P,P...]",
                                help="a topic, or some of its partitions (repeatable)")
    offsets_delete.add_argument("--execute", action="store_true",
                                help="delete (without it, a dry run)")
    offsets_delete.add_argument("--json", action="store_true")


def _add_allocate(add: Callable[..., argparse.ArgumentParser]) -> None:
    allocate = add("allocate", help="dry-run an allocator")
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
    allocate.add_argument(
        "--capacities", help="with --allocator weighted: member=capacity,... (default 1 each)"
    )
    allocate.add_argument("--json", action="store_true")


def client_options(args: argparse.Namespace) -> dict[str, Any]:
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


def unescape(text: str) -> bytes:
    """``\\n``, ``\\t`` and friends as typed on a command line."""
    return text.encode("utf-8").decode("unicode_escape").encode("latin-1")


def parse_when(text: str, symbols: dict[str, Any]) -> Any:
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


def need(value: Optional[str], flag: str, command: str) -> str:
    if not value:
        raise ConfigError(f"'{command}' needs {flag}")
    return value


