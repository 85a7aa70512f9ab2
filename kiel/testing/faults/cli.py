"""``python -m kiel.testing proxy``: a fault proxy in its own process, driven through stdin.

Prints ONE JSON line on stdout once it listens, then reads commands from
stdin, one a line, and answers each with one JSON line on stdout::

    $ python -m kiel.testing proxy --target 127.0.0.1:2181
    {"proxy": "127.0.0.1:40001", "target": "127.0.0.1:2181", "pid": 1234}
    blackout 5
    {"ok": true, "result": null, "stats": {"accepted": 1, ..., "blackout": true, ...}}
    cut
    {"ok": true, "result": 1, "stats": {...}}
    delay nonsense
    {"ok": false, "type": "ConfigError", "error": "a delay is a number of seconds, ..."}

Commands (durations in seconds; DIRECTION is ``upstream``, ``downstream`` or
``both``, the default): ``cut``, ``blackout [SECONDS]``, ``restore``,
``delay SECONDS [DIRECTION]``, ``stall [DIRECTION]``, ``unstall [DIRECTION]``,
``heal``, ``stats`` and ``stop``. The proxy runs until ``stop``, SIGTERM or
SIGINT; the end of stdin does not stop it (so it can run in the background
with no stdin at all), and what it carries is reset when it stops.
"""

import argparse
import json
import os
import signal
import sys
import threading
from typing import IO, Any

from kiel.exc import ConfigError, KielError
from kiel.testing.faults.proxy import FaultProxy
from kiel.testing.faults.state import seconds

__all__ = ["COMMANDS", "add_proxy_parser", "execute", "run_proxy"]

#: command -> (fewest, most) arguments; the first argument of ``blackout``
#: and ``delay`` is in seconds.
COMMANDS: dict[str, tuple[int, int]] = {
    "cut": (0, 0), "blackout": (0, 1), "restore": (0, 0), "delay": (1, 2),
    "stall": (0, 1), "unstall": (0, 1), "heal": (0, 0), "stats": (0, 0), "stop": (0, 0),
}


def add_proxy_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``proxy`` sub-command to an ``argparse`` sub-parser set.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers()`` returned.

    Returns:
        the new sub-parser (its ``func`` default is :func:`run_proxy`).
    """
    parser = subparsers.add_parser(
        "proxy", help="run a fault proxy in front of HOST:PORT, driven by commands on stdin")
    parser.add_argument("--target", required=True, metavar="HOST:PORT",
                        help="where to relay to (a loopback address)")
    parser.add_argument("--listen-port", type=int, default=0,
                        help="port to listen on, on 127.0.0.1 (default: any free one)")
    parser.add_argument("--max-held", type=int, default=None, metavar="BYTES",
                        help="bytes each direction of a connection holds at most")
    parser.set_defaults(func=run_proxy)
    return parser


def execute(proxy: FaultProxy, line: str) -> dict[str, Any]:
    """Run one command line on ``proxy``.

    Args:
        proxy: a running proxy.
        line: e.g. ``"blackout 5"`` or ``"delay 0.1 upstream"``.

    Returns:
        ``{"ok": True, "result": ..., "stats": {...}}`` (``result`` is what
        the method returned: the connections reset, for ``cut``), or
        ``{"ok": False, "type": ..., "error": ...}``.
    """
    words = line.split()
    try:
        if not words or words[0] not in COMMANDS:
            raise ConfigError(f"unknown command {line.strip()!r}; commands: {', '.join(COMMANDS)}")
        name, args = words[0], words[1:]
        fewest, most = COMMANDS[name]
        if not fewest <= len(args) <= most:
            raise ConfigError(f"{name} takes {fewest} to {most} arguments, not {len(args)}")
        values: list[Any] = list(args)
        if name in ("blackout", "delay") and values:
            values[0] = seconds(values[0], f"a {name}")
        result = None if name in ("stop", "stats") else getattr(proxy, name)(*values)
        return {"ok": True, "result": result, "stats": proxy.stats().as_dict()}
    except KielError as e:
        return {"ok": False, "type": type(e).__name__, "error": str(e)}


def _serve_commands(proxy: FaultProxy, stdin: IO[str], stdout: IO[str],
                    stop: threading.Event) -> None:
    for line in stdin:
        if not line.strip():
            continue
        answer = execute(proxy, line)
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()
        if answer["ok"] and line.split()[0] == "stop":
            stop.set()
            return


def run_proxy(args: argparse.Namespace) -> int:
    """Run the ``proxy`` command until ``stop``, SIGTERM or SIGINT.

    Args:
        args: the parsed ``proxy`` arguments.

    Returns:
        the exit status: 0, or 1 if the proxy could not start (bad target,
        port taken) or stopped with an error (printed on stderr).
    """
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    options: dict[str, Any] = {"listen_port": args.listen_port}
    if args.max_held is not None:
        options["max_held"] = args.max_held
    try:
        proxy = FaultProxy(args.target, **options)
        proxy.start()
    except KielError as e:
        print(f"kiel.testing proxy: {e}", file=sys.stderr)
        return 1
    status = 0
    try:
        target = f"{proxy.target[0]}:{proxy.target[1]}"
        sys.stdout.write(json.dumps({"proxy": proxy.address, "target": target,
                                     "pid": os.getpid()}) + "\n")
        sys.stdout.flush()
        # Daemon: a reader blocked on an idle stdin must not keep the process alive.
        threading.Thread(target=_serve_commands, args=(proxy, sys.stdin, sys.stdout, stop),
                         name="kiel-fault-proxy-commands", daemon=True).start()
        while not stop.wait(0.5):
            pass
    finally:
        try:
            proxy.stop()
        except KielError as e:
            print(f"kiel.testing proxy: {e}", file=sys.stderr)
            status = 1
    return status
