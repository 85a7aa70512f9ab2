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

import os
import signal
import subprocess
import sys
import time
from typing import Any

import confluent_kafka

from tests.conftest import unique

#: Runs of the race: it is one, so once proves little.
RUNS = 20


def _produce(bootstrap: str, topic: str, *prefix: str) -> "subprocess.Popen[bytes]":
    command = list(prefix) or [sys.executable, "-m", "kiel.cli"]
    process = subprocess.Popen([*command, "-b", bootstrap, "produce", topic],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    assert process.stdin is not None
    process.stdin.write(b"a\nb\n")
    process.stdin.flush()  # and the pipe stays open: the command waits for more
    return process


def _running(process: "subprocess.Popen[bytes]", bound: float = 60.0) -> None:
    """Wait until the command runs its event loop: a socket among its
    descriptors (the loop's self-pipe; its standard streams are pipes).

    Before that the interpreter starts and imports: a Ctrl-C there is the
    interpreter's (a KeyboardInterrupt traceback mid-import, killed by
    SIGINT), as for any Python program, not the command's. A fixed delay
    landed there on a loaded machine (the imports took over 0.3 s)."""
    fds = f"/proc/{process.pid}/fd"
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the command ended first ({process.returncode})"
        try:
            if any(os.readlink(os.path.join(fds, fd)).startswith("socket:")
                   for fd in os.listdir(fds)):
                return
        except FileNotFoundError:  # a descriptor closed while listed
            pass
        time.sleep(0.005)
    raise AssertionError(f"the command started no event loop within {bound} s")


def _interrupt(process: "subprocess.Popen[bytes]", after: float) -> "tuple[int, str]":
    """Ctrl-C ``after`` seconds into the command's event loop; the pipe stays
    open until the command exited (``communicate()`` would close it at once:
    an end of input that ends the reader, which hid the race from
    tests/cli/test_cli_behaviour.py's Ctrl-C test most of the time). A
    command still alive a minute later is made to dump its threads' stacks
    (faulthandler, on SIGABRT) into the failure."""
    assert process.stdin is not None and process.stderr is not None
    _running(process)
    time.sleep(after)
    process.send_signal(signal.SIGINT)
    try:
        try:
            process.wait(timeout=60)  # the output is a line or two: no pipe fills
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            process.wait(timeout=30)
            raise AssertionError("Ctrl-C did not end the command within 60 s; its stacks:\n"
                                 + process.stderr.read().decode()) from None
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
        # Spread the interrupt over the command's life: as its loop starts,
        # while it connects, and while its reader waits on the idle pipe.
        code, err = _interrupt(_produce(tansu_broker.bootstrap, topic), 0.05 * (run % 10))
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
    _running(process)
    # Both lines written (the reader then waits on the idle pipe), however
    # slow the machine: then Ctrl-C.
    reader = confluent_kafka.Consumer({"bootstrap.servers": tansu_broker.bootstrap,
                                       "group.id": unique("watch")})
    try:
        reader.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        read = 0
        deadline = time.monotonic() + 60
        while read < 2:
            assert time.monotonic() < deadline, "the two lines were not produced within 60 s"
            message = reader.poll(1.0)
            read += message is not None and message.error() is None
    finally:
        reader.close()
    code, err = _interrupt(process, 0.2)
    assert code == 130, err
    assert err.endswith(f"produced 2 messages to {topic}\nstdin closed\n"), err
