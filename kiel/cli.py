"""The ``kiel`` command: produce, consume, inspect topics and groups, dry-run allocators.

::

    kiel -b localhost:9092 produce TOPIC [-K :] < lines
    kiel -b localhost:9092 consume TOPIC [--from beginning|-3] [-c 100] [-K :] [--json|-f FMT]
    kiel -b localhost:9092 topics [TOPIC ...]
    kiel -b localhost:9092 group list
    kiel -b localhost:9092 group describe GROUP
    kiel -b localhost:9092 group reset GROUP --topic T[:0,1] --to-earliest [--execute]
    kiel -z localhost:2181 group list
    kiel -b localhost:9092 -z localhost:2181 group describe GROUP
    kiel -b localhost:9092 -z localhost:2181 group reset GROUP --all-topics --shift-by -10
    kiel allocate --allocator sticky --members a,b,c --partitions t:0,t:1,t:2

The global options (``-b``, ``-z``, ``--timeout``, ``-v``, TLS and SASL)
may come before or after the command. The group commands speak to the
brokers' group coordinator (a current cluster's groups) unless ``-z`` names
ZooKeeper (a 0.8 layout group).

Exit status (:data:`EXIT_OK` and friends): 0 on success (a dry run too), 1
when kiel raised one of its errors (the message goes to standard error;
``--timeout`` passing is one), 2 on a usage error, 130 when interrupted
(Ctrl-C; ``produce`` and ``consume`` first say what they did).
"""

import argparse
import asyncio
import base64
import contextlib
import datetime
import functools
import importlib
import json
import logging
import math
import os
import signal
import ssl
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Optional

from kiel import __version__
from kiel._aio import Tasks
from kiel.exc import ConfigError, KielError, RequestTimeoutError, UnsupportedFeatureError

if TYPE_CHECKING:  # pragma: no cover - kiel.admin loads kazoo: imported where used
    from kiel.admin import BrokerGroupDescription, GroupDescription, ResetRow

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "KEY_PASSWORD_VARIABLE",
    "PASSWORD_VARIABLE",
    "main",
]

#: The environment variable the SASL password is read from.
PASSWORD_VARIABLE = "KIEL_SASL_PASSWORD"
#: The environment variable the password of an encrypted ``--cert-file`` key is read from.
KEY_PASSWORD_VARIABLE = "KIEL_SSL_KEY_PASSWORD"

#: The command did what it was asked (a dry run included).
EXIT_OK = 0
#: kiel raised one of its errors (:class:`~kiel.exc.KielError`), ``--timeout`` included.
EXIT_ERROR = 1
#: The command line was wrong (argparse's status).
EXIT_USAGE = 2
#: Interrupted by Ctrl-C (SIGINT), the shells' 128 + 2.
EXIT_INTERRUPTED = 130

#: The global options' values when not given (they may come before or after
#: the command, so argparse leaves them unset: see :func:`_global_options`).
DEFAULTS: dict[str, Any] = {
    # the same default as kiel.admin's ZooKeeper functions and Cluster's request_timeout
    "brokers": None, "zookeeper": None, "client_id": "kiel-cli", "timeout": 30.0,
    "verbose": 0, "tls": False, "ca_file": None, "cert_file": None, "key_file": None,
    "sasl_mechanism": None, "sasl_username": None,
}


# ----------------------------------------------------------------------
# argument parsing


def _seconds(text: str) -> float:
    """``--timeout``'s type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
    return value


def _global_options() -> argparse.ArgumentParser:
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
        "for topics and group; for consume and produce, how long the cluster may stay "
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
    common = _global_options()
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
    _add_group(add, common)
    _add_allocate(add)
    return parser


def _parse(argv: Optional[Sequence[str]]) -> argparse.Namespace:
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


def _add_topics(add: Callable[..., argparse.ArgumentParser]) -> None:
    topics = add("topics", help="list topics, or describe the ones named (never creating one)")
    topics.add_argument("topics", nargs="*")
    topics.add_argument("--json", action="store_true")


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


# ----------------------------------------------------------------------
# one run: the deadline, Ctrl-C, logging


class _Deadline:
    """``--timeout``: fires (cancels the command) once the command has waited
    on the cluster for ``seconds`` without an answer.

    While *armed*, time counts; each answer to the request the command
    waits on (see :meth:`watch`) starts the count again. ``topics`` and
    ``group`` are armed from start to end and watch nothing: one deadline
    for the whole command.
    ``consume`` is armed throughout and watches its consumer's answers (a
    fetch that finds nothing is answered too, after ``max_wait_time``);
    ``produce`` is armed only while it waits on the cluster, not while it
    waits for standard input.

    Args:
        seconds: the deadline.
        task: the command's task, cancelled when the deadline passes.
        tasks: where the watching task runs.
    """

    #: Seconds between looks at the clock and the answers.
    TICK = 0.1

    def __init__(self, seconds: float, task: "asyncio.Task[Any]", tasks: Tasks) -> None:
        self.seconds = seconds
        #: True once the deadline passed (and the command was cancelled).
        self.expired = False
        self._task = task
        self._armed = 0
        self._since = time.monotonic()
        self._answers: Callable[[], int] = lambda: 0
        self._seen = 0
        tasks.spawn(self._watch(), "deadline")

    def watch(self, client: Any, api: str) -> None:
        """Count the answers to ``api`` requests that ``client``'s connections
        receive as progress.

        Strategy: one API, the one the command waits on (``Fetch``,
        ``Produce``): while a broker hangs inside it, a client still gets
        answers to other requests (a metadata refresh after each timeout),
        which must not keep the command alive.
        """
        latency = client.cluster.request_metrics.latency

        def answers() -> int:
            summary = latency.get(api)
            return 0 if summary is None else summary.count

        self._answers = answers

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        """Count time against the deadline within the block."""
        if not self._armed:
            self._since = time.monotonic()
        self._armed += 1
        try:
            yield
        finally:
            self._armed -= 1

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(min(self.TICK, self.seconds))
            now = time.monotonic()
            answers = self._answers()
            if answers != self._seen:
                self._seen, self._since = answers, now
            if self._armed and now - self._since >= self.seconds:
                self.expired = True
                self._task.cancel()
                return


class _Run:
    """What a command's run shares: its deadline and whether Ctrl-C stopped it."""

    def __init__(self, deadline: _Deadline) -> None:
        self.deadline = deadline
        #: True once SIGINT cancelled the command.
        self.interrupted = False

    def stopped(self) -> str:
        """What a summary says before itself when the command was cut short."""
        return "interrupted: " if self.interrupted else ""


async def _running(
    args: argparse.Namespace, command: Callable[[_Run], Any], *, armed: bool
) -> int:
    """Run ``command`` under ``--timeout`` and Ctrl-C.

    Args:
        armed: the deadline counts for the whole command (else the command
            arms it while it waits on the cluster).

    Returns:
        the command's exit status, or :data:`EXIT_INTERRUPTED` after Ctrl-C.

    Raises:
        RequestTimeoutError: the deadline passed.
        KielError: what the command raised.
    """
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    tasks = Tasks("kiel-cli")
    run = _Run(_Deadline(args.timeout, task, tasks))

    def interrupt() -> None:
        run.interrupted = True
        task.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError):  # not on Windows' loop
        loop.add_signal_handler(signal.SIGINT, interrupt)
    try:
        with run.deadline.armed() if armed else contextlib.nullcontext():
            return int(await command(run))
    except asyncio.CancelledError:
        if run.interrupted:
            return EXIT_INTERRUPTED
        if run.deadline.expired:
            silent = "the brokers or ZooKeeper" if args.zookeeper and args.command == "group" \
                else "the brokers"
            raise RequestTimeoutError(
                f"no answer from {silent} within --timeout {args.timeout:g} s") from None
        raise
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        await tasks.cancel()


def _setup_logging(verbose: int) -> None:
    """Log to standard error: errors only by default; ``-v`` information
    (kazoo's lines too), ``-vv`` debug. Without ``-v`` kazoo says nothing:
    what it would report (a refused connection, each retry) ends as the
    command's own error."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.ERROR if not verbose else logging.INFO if verbose == 1
                  else logging.DEBUG)
    if not verbose:
        logging.getLogger("kazoo").setLevel(logging.CRITICAL + 1)


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


def _capacities(spec: str) -> dict[str, float]:
    """``--capacities a=3,b=1``.

    Raises:
        ConfigError: an item that is not ``member=number``.
    """
    capacities: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        member, sep, value = item.partition("=")
        try:
            if not sep or not member:
                raise ValueError(item)
            capacities[member.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--capacities takes member=number,...; got {item!r}") from None
    return capacities


def allocate(args: argparse.Namespace, out: Any) -> int:
    """Run an allocator on the given members and partitions and print the result.

    Raises:
        ConfigError: an unknown allocator, no member, bad partitions or
            capacities (or capacities for another allocator than ``weighted``).
        AllocationError: the allocation lost or doubled a partition.
    """
    from kiel.allocators import validate, weighted

    if args.allocator.strip().lower() == "weighted":
        # A factory, not an allocator: made here with the capacities given.
        allocator = weighted(_capacities(args.capacities or ""))
    elif args.capacities:
        raise ConfigError("--capacities is for --allocator weighted")
    else:
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


async def _read_chunks(stream: BinaryIO) -> AsyncIterator[bytes]:
    """Standard input in chunks, read off the loop (a pipe can block).

    Strategy: a daemon thread of its own, not the loop's executor: a read
    that never returns (an idle pipe at Ctrl-C) must not hold up the end
    of ``asyncio.run``, which waits for the executor's threads.
    """
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[Any] = asyncio.Queue(maxsize=4)

    def read() -> None:
        while True:
            try:
                chunk: Any = stream.read1(1 << 16)  # type: ignore[attr-defined]
            except (OSError, ValueError) as e:  # handed to the loop, raised there
                chunk = e
            future = asyncio.run_coroutine_threadsafe(chunks.put(chunk), loop)
            try:
                future.result()
            except (RuntimeError, asyncio.CancelledError, OSError):
                return  # the loop is gone or the command ended: stop reading
            if not isinstance(chunk, bytes) or not chunk:
                return

    threading.Thread(target=read, name="kiel-cli-stdin", daemon=True).start()
    while True:
        chunk = await chunks.get()
        if isinstance(chunk, BaseException):
            raise chunk
        if not chunk:
            return
        yield chunk


async def produce(
    args: argparse.Namespace, stdin: BinaryIO, err: Any, run: Optional[_Run] = None
) -> int:
    """Produce standard input, one message per delimiter; print the count to stderr.

    Args:
        run: the run's deadline (armed while waiting on the cluster) and
            Ctrl-C; ``None``: neither.

    Raises:
        ConfigError: bad options or a line without the key delimiter.
        KielError: a message failed (the first failure).
    """
    from kiel.clients import Producer

    brokers = _need(args.brokers, "-b/--brokers", "produce")
    delimiter = _unescape(args.delimiter)
    key_delim = _unescape(args.key_delimiter) if args.key_delimiter else None
    if not delimiter:
        raise ConfigError("the message delimiter must not be empty")
    waiting = run.deadline.armed if run is not None else contextlib.nullcontext
    acknowledged = 0
    failures: list[BaseException] = []

    def done(future: "asyncio.Future[Any]") -> None:
        nonlocal acknowledged
        if future.cancelled():
            return
        if future.exception() is not None:
            failures.append(future.exception())  # type: ignore[arg-type]
        else:
            acknowledged += 1

    producer = Producer(brokers, compression=args.compression, required_acks=args.acks,
                        **_client_options(args))
    try:
        with waiting():
            await producer.connect()
            if run is not None:
                run.deadline.watch(producer, "Produce")
        send = functools.partial(
            _produce_line, producer, args.topic, args.partition, key_delim, done
        )
        pending = b""
        async for chunk in _read_chunks(stdin):
            pending += chunk
            *lines, pending = pending.split(delimiter)
            with waiting():
                for line in lines:
                    await send(line)
            if failures:
                break
        with waiting():
            if pending and not failures:
                await send(pending)
            await producer.flush()
    except asyncio.CancelledError:
        # Ctrl-C or the deadline: what was sent is settled (within the
        # timeout), and counted, before the summary.
        await producer.close(timeout=args.timeout if run is None or run.interrupted else 0)
        err.write(f"{run.stopped() if run else ''}produced {acknowledged} messages "
                  f"to {args.topic}\n")
        raise
    finally:
        await producer.close(timeout=args.timeout)  # done at once after a flush or the above
    if failures:
        raise failures[0]
    err.write(f"produced {acknowledged} messages to {args.topic}\n")
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


#: ``-f``'s backslash escapes.
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "0": b"\0"}


def _size(data: Optional[bytes]) -> bytes:
    return b"-1" if data is None else str(len(data)).encode()


def _headers(record: Any) -> bytes:
    return b",".join(name.encode("utf-8") + (b"" if value is None else b"=" + value)
                     for name, value in record.headers)


#: ``-f``'s fields: what each ``%x`` writes of a record (kcat's letters).
_FIELDS: dict[str, Callable[[Any], bytes]] = {
    "t": lambda r: r.topic.encode("utf-8"),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "k": lambda r: r.key or b"",
    "s": lambda r: r.value or b"",
    "K": lambda r: _size(r.key),
    "S": lambda r: _size(r.value),
    "T": lambda r: b"-1" if r.timestamp is None else str(r.timestamp).encode(),
    "h": _headers,
}


def compile_format(text: str) -> Callable[[Any], bytes]:
    """``-f``: a kcat-style format as a function of a record.

    Args:
        text: the format: ``%t`` topic, ``%p`` partition, ``%o`` offset,
            ``%k`` key, ``%s`` value, ``%K``/``%S`` their sizes (-1: null),
            ``%T`` timestamp (epoch milliseconds; -1: none), ``%h`` headers
            (``name=value,...``), ``%%`` a ``%``; ``\\n``, ``\\t``, ``\\r``,
            ``\\\\``, ``\\0``.

    Returns:
        ``record -> bytes``.

    Raises:
        ConfigError: an unknown ``%`` field or escape.
    """
    parts: list[Callable[[Any], bytes]] = []
    literal = bytearray()

    def flush_literal() -> None:
        if literal:
            constant = bytes(literal)
            parts.append(lambda r: constant)
            literal.clear()

    i = 0
    while i < len(text):
        char, following = text[i], text[i + 1:i + 2]
        if char == "\\" and following in _ESCAPES:
            literal += _ESCAPES[following]
        elif char == "%" and following == "%":
            literal += b"%"
        elif char == "%" and following in _FIELDS:
            flush_literal()
            parts.append(_FIELDS[following])
        elif char in "%\\":
            raise ConfigError(f"-f: unknown {'field' if char == '%' else 'escape'} "
                              f"{char + following!r} in {text!r}")
        else:
            literal += char.encode("utf-8")
            i += 1
            continue
        i += 2
    flush_literal()
    return lambda record: b"".join(part(record) for part in parts)


def _writer(args: argparse.Namespace) -> Callable[[Any, BinaryIO], None]:
    """How ``consume`` writes a record: ``-f``, ``--json`` or value (``-K``: key too).

    Raises:
        ConfigError: ``-f`` with ``--json`` or ``-K``; a bad format.
    """
    if args.format is not None:
        if args.json or args.key_delimiter is not None:
            raise ConfigError("-f/--format goes without --json and -K")
        formatted = compile_format(args.format)

        def write(record: Any, out: BinaryIO) -> None:
            out.write(formatted(record))

        return write
    delimiter = _unescape(args.delimiter)
    return functools.partial(_write_record, args, delimiter=delimiter)


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


#: ``--from -N``: N messages before each partition's end.
class _FromEnd(int):
    pass


def _parse_start(text: str) -> Any:
    """``--from``: a symbol, an offset, ``-N`` (from the end) or an ISO date/time."""
    from kiel.clients import BEGINNING, END

    if text.startswith("-") and text[1:].isdigit():
        return _FromEnd(int(text[1:]))
    return _parse_when(text, {"beginning": BEGINNING, "earliest": BEGINNING,
                              "end": END, "latest": END})


async def _seek_from_end(consumer: Any, topic: str, back: int) -> None:
    """Start every partition of ``topic`` ``back`` messages before its end
    (at its earliest offset if it holds fewer)."""
    from kiel.clients import END
    from kiel.consumer.offsets import EARLIEST, list_offsets
    from kiel.structs import TopicPartition

    await consumer.seek_to(topic, END)
    partitions = consumer.partitions(topic)
    earliest = await list_offsets(consumer.cluster, {
        TopicPartition(topic, p): EARLIEST for p in partitions})
    for p in partitions:
        end = consumer.position(topic, p)
        consumer.seek(topic, p, max(earliest[TopicPartition(topic, p)], end - back))


async def consume(
    args: argparse.Namespace, out: BinaryIO, err: Any, run: Optional[_Run] = None
) -> int:
    """Write a topic's messages to standard output (``--exit``: stop at the end).

    Args:
        run: the run's deadline (the consumer's answers are its progress)
            and Ctrl-C; ``None``: neither.

    Raises:
        ConfigError: bad options; a payload ``--json`` cannot write.
        KielError: the cluster's errors.
    """
    from kiel.clients import SingleConsumer

    brokers = _need(args.brokers, "-b/--brokers", "consume")
    start = _parse_start(args.start)
    write = _writer(args)
    if args.count is not None and args.count < 0:
        raise ConfigError(f"--count must be >= 0, got {args.count}")
    seen = 0
    try:
        # A quiet topic's Fetch is answered after max_wait_time: well within
        # the deadline, so that a consumer following it is not ended.
        async with SingleConsumer(brokers, max_wait_time=min(1.0, args.timeout / 2),
                                  **_client_options(args)) as consumer:
            if run is not None:
                run.deadline.watch(consumer, "Fetch")
            if isinstance(start, _FromEnd):
                await _seek_from_end(consumer, args.topic, int(start))
            else:
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
                    write(record, out)
                    seen += 1
                    if args.count is not None and seen >= args.count:
                        break
                out.flush()
    except asyncio.CancelledError:
        err.write(f"{run.stopped() if run else ''}consumed {seen} messages from {args.topic}\n")
        raise
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


async def group(args: argparse.Namespace, out: Any, err: Any = None) -> int:
    """``group list``, ``group describe GROUP``, ``group reset GROUP``.

    On the groups the brokers coordinate, or with ``-z`` on ZooKeeper's.
    """
    if args.zookeeper:
        return await _zookeeper_group(args, out, err or sys.stderr)
    return await _broker_group(args, out, err or sys.stderr)


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
        when = _parse_when(args.to_datetime, {})
        if not isinstance(when, datetime.datetime):
            raise ConfigError(f"--to-datetime takes an ISO date/time; got {args.to_datetime!r}")
        return when
    return _parse_when(args.to, {"earliest": "earliest", "beginning": "earliest",
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
        (described.group, row.topic, row.partition, row.committed, row.highwater, row.lag,
         row.owner) for row in described.partitions]))
    if not described.members:
        out.write(f"\nConsumer group '{described.group}' has no active members.\n")


async def _zookeeper_group(args: argparse.Namespace, out: Any, err: Any) -> int:
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
        _write_zookeeper_group(args, out, described)
        return 0
    rows = await admin.reset_group_offsets(
        brokers, zk_hosts, args.group, _selection(args), _reset_to(args),
        execute=args.execute, force=args.force, timeout=args.timeout, **_client_options(args),
    )
    _write_reset(args.group, rows, args.execute, out, err)
    return 0


#: The group APIs a 0.8 broker lacks: without them the groups are in ZooKeeper.
_BROKER_GROUP_APIS = ("ListGroups", "DescribeGroups")


async def _broker_group(args: argparse.Namespace, out: Any, err: Any) -> int:
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
                rows = await admin.reset_broker_group_offsets(
                    client.cluster, args.group, _selection(args), _reset_to(args),
                    execute=args.execute)
                _write_reset(args.group, rows, args.execute, out, err)
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
    out.write(_table([("GROUP", "STATE", "ASSIGNMENT-STRATEGY", "#MEMBERS", "TOTAL-LAG"),
                      (group.group, group.state, group.protocol, len(group.members),
                       described.total_lag)]))
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
    """Run the ``kiel`` command.

    Returns:
        the exit status: :data:`EXIT_OK`, :data:`EXIT_ERROR`,
        :data:`EXIT_INTERRUPTED` (a usage error exits with
        :data:`EXIT_USAGE` from argparse).
    """
    args = _parse(argv)
    _setup_logging(args.verbose)
    commands: dict[str, Callable[[_Run], Any]] = {
        "produce": lambda run: produce(args, sys.stdin.buffer, sys.stderr, run),
        "consume": lambda run: consume(args, sys.stdout.buffer, sys.stderr, run),
        "topics": lambda run: topics(args, sys.stdout),
        "group": lambda run: group(args, sys.stdout, sys.stderr),
    }
    try:
        if args.command == "allocate":
            return allocate(args, sys.stdout)
        # produce arms the deadline only while it waits on the cluster, not
        # on standard input; the others wait on the cluster throughout.
        armed = args.command != "produce"
        return asyncio.run(_running(args, commands[args.command], armed=armed))
    except KielError as e:
        sys.stderr.write(f"kiel {args.command}: {e}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:  # before or after the loop ran
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `kiel consume ... | head`: the reader left; that is not an error.
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
