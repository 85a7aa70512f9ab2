"""One run of the ``kiel`` command: the ``--timeout`` deadline, Ctrl-C, logging."""

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from kiel._aio import Tasks
from kiel.exc import RequestTimeoutError

__all__ = ["EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "Run", "running",
           "setup_logging"]

#: The command did what it was asked (a dry run included).
EXIT_OK = 0
#: kiel raised one of its errors (:class:`~kiel.exc.KielError`), ``--timeout`` included.
EXIT_ERROR = 1
#: The command line was wrong (argparse's status).
EXIT_USAGE = 2
#: Interrupted by Ctrl-C (SIGINT), the shells' 128 + 2.
EXIT_INTERRUPTED = 130


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


class Run:
    """What a command's run shares: its deadline and whether Ctrl-C stopped it."""

    def __init__(self, deadline: _Deadline) -> None:
        self.deadline = deadline
        #: True once SIGINT cancelled the command.
        self.interrupted = False

    def stopped(self) -> str:
        """What a summary says before itself when the command was cut short."""
        return "interrupted: " if self.interrupted else ""


async def running(
    args: argparse.Namespace, command: Callable[[Run], Any], *, armed: bool
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
    run = Run(_Deadline(args.timeout, task, tasks))

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


def setup_logging(verbose: int) -> None:
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


