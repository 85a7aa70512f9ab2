"""The ``kiel`` command: produce, consume, inspect topics and groups, dry-run allocators.

::

    kiel -b localhost:9092 produce TOPIC [-K :] < lines
    kiel -b localhost:9092 consume TOPIC [--from beginning|-3] [-c 100] [-K :] [--json|-f FMT]
    kiel -b localhost:9092 consume TOPIC --isolation read_committed -e
    kiel -b localhost:9092 topics [TOPIC ...]
    kiel -b localhost:9092 topics create T --partitions 6 --config retention.ms=60000
    kiel -b localhost:9092 topics alter T --partitions 12 --delete-config retention.ms
    kiel -b localhost:9092 topics describe T
    kiel -b localhost:9092 topics delete T [--execute]
    kiel -b localhost:9092 configs describe|alter --topic T|--broker 1 [--set K=V] [--delete K]
    kiel -b localhost:9092 records delete T[:0,1] --before OFFSET|end [--execute]
    kiel -b localhost:9092 offsets T[:0,1] [--time earliest|latest|max_timestamp|ISO|MS]
    kiel -b localhost:9092 group delete GROUP [--execute]
    kiel -b localhost:9092 group offsets delete GROUP --topic T[:0,1] [--execute]
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

Exit status (:data:`~kiel.cli.run.EXIT_OK` and friends): 0 on success (a dry run too), 1
when kiel raised one of its errors (the message goes to standard error;
``--timeout`` passing is one), 2 on a usage error, 130 when interrupted
(Ctrl-C; ``produce`` and ``consume`` first say what they did).

One module per part: :mod:`kiel.cli.options` (parsing, and what the options
mean), :mod:`kiel.cli.run` (the deadline, Ctrl-C, logging),
:mod:`kiel.cli.records` (produce, consume), :mod:`kiel.cli.groups` (topics,
groups), :mod:`kiel.cli.admin` (the admin verbs over :class:`kiel.admin.Admin`),
:mod:`kiel.cli.allocate`.
"""

import asyncio
import sys
from collections.abc import Callable, Sequence
from typing import Any, Optional

from kiel.cli.admin import (
    configs,
    group_delete,
    group_offsets_delete,
    offsets,
    records_delete,
    topics_admin,
)
from kiel.cli.allocate import allocate, load_allocator
from kiel.cli.groups import group, topics
from kiel.cli.options import KEY_PASSWORD_VARIABLE, PASSWORD_VARIABLE, parse
from kiel.cli.records import compile_format, consume, produce
from kiel.cli.run import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    Run,
    running,
    setup_logging,
)
from kiel.exc import KielError

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "KEY_PASSWORD_VARIABLE",
    "PASSWORD_VARIABLE",
    "allocate",
    "compile_format",
    "consume",
    "group",
    "load_allocator",
    "main",
    "produce",
    "topics",
]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``kiel`` command.

    Returns:
        the exit status: :data:`EXIT_OK`, :data:`EXIT_ERROR`,
        :data:`EXIT_INTERRUPTED` (a usage error exits with
        :data:`EXIT_USAGE` from argparse).
    """
    args = parse(argv)
    setup_logging(args.verbose)
    commands: dict[str, Callable[[Run], Any]] = {
        "produce": lambda run: produce(args, sys.stdin.buffer, sys.stderr, run),
        "consume": lambda run: consume(args, sys.stdout.buffer, sys.stderr, run),
        "topics": lambda run: topics_admin(args, sys.stdout, sys.stderr),
        "configs": lambda run: configs(args, sys.stdout, sys.stderr),
        "records": lambda run: records_delete(args, sys.stdout, sys.stderr),
        "offsets": lambda run: offsets(args, sys.stdout, sys.stderr),
        "group": lambda run: (
            group_delete(args, sys.stdout, sys.stderr) if args.group_command == "delete"
            else group_offsets_delete(args, sys.stdout, sys.stderr)
            if args.group_command == "offsets" else group(args, sys.stdout, sys.stderr)),
    }
    try:
        if args.command == "allocate":
            return allocate(args, sys.stdout)
        # produce arms the deadline only while it waits on the cluster, not
        # on standard input; the others wait on the cluster throughout.
        armed = args.command != "produce"
        return asyncio.run(running(args, commands[args.command], armed=armed))
    except KielError as e:
        sys.stderr.write(f"kiel {args.command}: {e}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:  # before or after the loop ran
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `kiel consume ... | head`: the reader left; that is not an error.
        return EXIT_OK
