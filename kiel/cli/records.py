"""``kiel produce`` and ``kiel consume``: standard input to a topic, a topic to standard output."""

import argparse
import asyncio
import base64
import concurrent.futures
import contextlib
import functools
import json
import os
import select
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, BinaryIO, Optional

from kiel.cli.options import client_options, need, parse_when, unescape
from kiel.cli.run import Run
from kiel.exc import ConfigError

__all__ = ["compile_format", "consume", "produce"]


#: Seconds the standard-input thread waits for bytes before it looks whether
#: the command ended (it then returns instead of reading on).
_STDIN_POLL = 0.25


def _descriptor(stream: BinaryIO) -> Optional[int]:
    """The file descriptor under ``stream``, or ``None`` (an in-memory stream)."""
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.BytesIO: UnsupportedOperation
        return None


def _read_fd(fd: int, stop: threading.Event) -> Any:
    """One chunk of ``fd``: bytes (``b""`` at the end), or ``None`` once ``stop`` is set.

    Strategy: ``os.read`` on the descriptor, never the ``BufferedReader``
    over it: a thread blocked in ``sys.stdin.buffer.read1`` holds that
    object's lock, and an interpreter that closes ``sys.stdin`` at exit
    while the thread still waits on an idle pipe aborts (``Fatal Python
    error: _enter_buffered_busy: could not acquire lock for <stdin>``).
    ``os.read`` takes no Python lock, and ``select`` with a short timeout
    lets the thread see that the command ended and return by itself.
    """
    while not stop.is_set():
        try:
            ready, _, _ = select.select([fd], [], [], _STDIN_POLL)
        except OSError:  # a descriptor select() does not take (Windows' files): block
            ready = [fd]
        except ValueError:  # closed meanwhile
            return b""
        if ready:
            try:
                return os.read(fd, 1 << 16)
            except BlockingIOError:  # a non-blocking descriptor, emptied by someone else
                continue
    return None


async def _read_chunks(stream: BinaryIO) -> AsyncIterator[bytes]:
    """Standard input in chunks, read off the loop (a pipe can block).

    Strategy: a daemon thread of its own, not the loop's executor: a read
    that never returns (an idle pipe at Ctrl-C) must not hold up the end
    of ``asyncio.run``, which waits for the executor's threads. It reads
    the descriptor (see :func:`_read_fd`), so at exit it holds no lock of
    ``sys.stdin``'s, and it returns within ``_STDIN_POLL`` seconds of the
    command's end. A stream without a descriptor (``io.BytesIO``) is read
    with its own ``read1``: it never blocks.
    """
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[Any] = asyncio.Queue(maxsize=4)
    stop = threading.Event()
    fd = _descriptor(stream)

    def read() -> None:
        while not stop.is_set():
            try:
                chunk: Any = (_read_fd(fd, stop) if fd is not None
                              else stream.read1(1 << 16))  # type: ignore[attr-defined]
            except (OSError, ValueError) as e:  # handed to the loop, raised there
                chunk = e
            if chunk is None:  # the command ended
                return
            put = chunks.put(chunk)
            try:
                asyncio.run_coroutine_threadsafe(put, loop).result()
            except RuntimeError:  # the loop is closed: the command ended
                put.close()
                return
            except concurrent.futures.CancelledError:  # the loop was stopping
                return
            if not isinstance(chunk, bytes) or not chunk:
                return

    threading.Thread(target=read, name="kiel-cli-stdin", daemon=True).start()
    try:
        while True:
            chunk = await chunks.get()
            if isinstance(chunk, BaseException):
                raise chunk
            if not chunk:
                return
            yield chunk
    finally:
        stop.set()


async def produce(
    args: argparse.Namespace, stdin: BinaryIO, err: Any, run: Optional[Run] = None
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

    brokers = need(args.brokers, "-b/--brokers", "produce")
    delimiter = unescape(args.delimiter)
    key_delim = unescape(args.key_delimiter) if args.key_delimiter else None
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
                        **client_options(args))
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
    delimiter = unescape(args.delimiter)
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
        out.write((record.key or b"") + unescape(args.key_delimiter))
    out.write((record.value or b"") + delimiter)


#: ``--from -N``: N messages before each partition's end.
class _FromEnd(int):
    pass


def _parse_start(text: str) -> Any:
    """``--from``: a symbol, an offset, ``-N`` (from the end) or an ISO date/time."""
    from kiel.clients import BEGINNING, END

    if text.startswith("-") and text[1:].isdigit():
        return _FromEnd(int(text[1:]))
    return parse_when(text, {"beginning": BEGINNING, "earliest": BEGINNING,
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
    args: argparse.Namespace, out: BinaryIO, err: Any, run: Optional[Run] = None
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

    brokers = need(args.brokers, "-b/--brokers", "consume")
    start = _parse_start(args.start)
    write = _writer(args)
    if args.count is not None and args.count < 0:
        raise ConfigError(f"--count must be >= 0, got {args.count}")
    seen = 0
    try:
        # A quiet topic's Fetch is answered after max_wait_time: well within
        # the deadline, so that a consumer following it is not ended.
        async with SingleConsumer(brokers, max_wait_time=min(1.0, args.timeout / 2),
                                  isolation_level=args.isolation,
                                  **client_options(args)) as consumer:
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
    # The highwater is the last stable offset in read_committed: --exit
    # stops where the committed records end for now.
    for p in partitions:
        highwater = consumer.highwater(topic, p)
        if highwater is None or consumer.position(topic, p) < highwater:
            return False
    return True
