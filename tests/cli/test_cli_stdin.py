"""``kiel produce`` reads standard input without a lock of ``sys.stdin``'s:
Ctrl-C ends it with 130 every time, never with the interpreter's abort at exit.

One CI run saw ``kiel produce`` die with -6 (``Fatal Python error:
_enter_buffered_busy: could not acquire lock for <_io.BufferedReader
name='<stdin>'> at interpreter shutdown``): its standard-input thread sat in
``sys.stdin.buffer.read1`` on an idle pipe, holding the BufferedReader's
lock, when the exiting interpreter closed ``sys.stdin``. Whether the
interpreter closes it at exit depends on what still refers to it then (a
race in practice); closing it by hand after the command returned makes the
same wait deterministic: with the old reader that close waited for ever.
"""

import signal
import subprocess
import sys
import time
from typing import Any

from tests.conftest import unique

#: Runs of the race: it is one, so once proves little.
RUNS = 20


def _produce(bootstrap: str, topic: str, *prefix: str) -> "subprocess.Popen[bytes]":
    command = list(prefix) or [sys.executable, "-m", "kiel.cli"]
    process = subprocess.Popen([*command, "-b", bootstrap, "produce", topic],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdin is not None
    process.stdin.write(b"a\nb\n")
    process.stdin.flush()  # and the pipe stays open: the command waits for more
    return process


def _interrupt(process: "subprocess.Popen[bytes]", after: float) -> "tuple[int, str]":
    """Ctrl-C after ``after`` seconds; the pipe stays open until the command
    exited (``communicate()`` would close it at once: an end of input that
    ends the reader, which hid the race from tests/cli/test_cli_behaviour.py's
    Ctrl-C test most of the time)."""
    assert process.stdin is not None and process.stderr is not None
    time.sleep(after)
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=60)  # the output is a line or two: no pipe fills
    finally:
        err = process.stderr.read()
        process.stdin.close()
        process.stderr.close()
        if process.stdout is not None:
            process.stdout.close()
    return process.returncode, err.decode()


def test_ctrl_c_ends_produce_cleanly_every_time(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("ctrl-c"))
    outcomes = []
    for run in range(RUNS):
        # Spread the interrupt over the command's life: while it connects,
        # and while its reader waits on the idle pipe.
        code, err = _interrupt(_produce(tansu_broker.bootstrap, topic), 0.3 + 0.1 * (run % 10))
        outcomes.append(code)
        assert "could not acquire lock" not in err and "Fatal Python error" not in err, err
        assert code == 130, (run, code, err)
    assert outcomes == [130] * RUNS


def test_stdin_can_be_closed_once_produce_returns(tansu_broker: Any) -> None:
    """What the interpreter's exit does, done by hand: close ``sys.stdin``
    after Ctrl-C ended the command while the pipe is still open and idle.
    The old reader thread held the BufferedReader's lock in ``read1``: the
    close waited for ever (here: faulthandler ends the process after 20 s,
    exit code 1); now the thread holds no lock of it."""
    topic = tansu_broker.create_topic(unique("stdin-close"))
    script = ("import faulthandler, sys\n"
              "from kiel.cli import main\n"
              "code = main(sys.argv[1:])\n"
              "faulthandler.dump_traceback_later(20, exit=True)\n"
              "sys.stdin.close()\n"
              "faulthandler.cancel_dump_traceback_later()\n"
              "sys.stderr.write('stdin closed\\n')\n"
              "sys.exit(code)\n")
    process = _produce(tansu_broker.bootstrap, topic, sys.executable, "-c", script)
    code, err = _interrupt(process, 2.0)
    assert code == 130, err
    assert err.endswith(f"produced 2 messages to {topic}\nstdin closed\n"), err
