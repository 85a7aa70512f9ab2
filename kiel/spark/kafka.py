"""The Kafka side of the Spark data source: plain synchronous functions over kiel.

Spark calls a data source from plain threads and Python workers, never from
an IOLoop, so each function here runs kiel on its own short-lived event loop
(``_own_loop``: driven step by step for the generators) and closes every
connection before it returns. No pyspark here.
"""

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Iterable, Iterator
from functools import partial
from typing import (
    Any,
    Callable,
    NamedTuple,
    Optional,
    TypeVar,
)

from kiel.client import Client
from kiel.clients import Producer
from kiel.consumer.base import ConsumedRecord
from kiel.consumer.offsets import EARLIEST as LIST_EARLIEST
from kiel.consumer.offsets import LATEST as LIST_LATEST
from kiel.consumer.offsets import list_offsets, send_commit
from kiel.consumer.single import SingleConsumer
from kiel.exc import ConfigError, KielError, OffsetOutOfRangeError
from kiel.spark.options import EARLIEST, LATEST, SinkOptions, SourceOptions
from kiel.spark.watermarks import served_ends
from kiel.structs import TopicPartition

__all__ = [
    "DataLossError",
    "Range",
    "commit_offsets",
    "discover",
    "list_edges",
    "read_range",
    "resolve",
    "split_ranges",
    "write_rows",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
TP = tuple[str, int]


class DataLossError(KielError):
    """Offsets a query had to read are gone (deleted by retention, or truncated).

    Raised when ``failOnDataLoss`` is true (the default); with
    ``failOnDataLoss=false`` the reader logs a warning and skips ahead instead.
    """


class Range(NamedTuple):
    """One input split: the offsets ``[start, end)`` of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Offsets in the range."""
        return self.end - self.start


_C = TypeVar("_C", bound=Client)


@contextlib.contextmanager
def _own_loop(make: Callable[[], _C]) -> Iterator[tuple[asyncio.AbstractEventLoop, _C]]:
    """A private event loop, set as the thread's loop, and a client made and
    connected on it; the client is closed and the loop shut down on the way
    out (also when a generator using it is closed early, e.g. by Spark's
    ``limit``). Every function here runs kiel this way.

    Strategy: the generators drive the loop one step per item (rather than
    :func:`asyncio.run` of the whole read), so Spark consumes a batch while
    the next is not fetched yet.
    """
    loop = asyncio.new_event_loop()
    client: Optional[_C] = None
    try:
        asyncio.set_event_loop(loop)
        client = make()
        loop.run_until_complete(client.connect())
        yield loop, client
    finally:
        try:
            if client is not None:
                loop.run_until_complete(client.close())
        finally:
            try:
                # What asyncio.run() does on the way out: the SASL exchange
                # runs PBKDF2 in the default executor.
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                asyncio.set_event_loop(None)
                loop.close()


def _run(options: SourceOptions, work: Callable[[Client], Awaitable[T]]) -> T:
    """Connect a client, run ``work(client)`` on a private loop, close the client."""
    with _own_loop(partial(Client, options.brokers, **options.client_options())) as (
        loop, client
    ):
        return loop.run_until_complete(work(client))


async def _discover(client: Client, options: SourceOptions) -> list[TP]:
    cluster = client.cluster
    out: list[TP] = []
    if options.assign is not None:
        for topic, parts in sorted(options.assign.items()):
            known = await cluster.partitions_for(topic)
            missing = sorted(set(parts) - set(known))
            if missing:
                raise ConfigError(
                    f"option assign names partitions {missing} of {topic!r}, "
                    f"which has {known}", topic=topic
                )
            out.extend((topic, p) for p in parts)
        return out
    if options.topics is not None:
        for topic in options.topics:
            out.extend((topic, p) for p in await cluster.partitions_for(topic))
        return out
    assert options.pattern is not None
    await cluster.refresh_metadata()  # every topic (nothing named yet)
    return sorted(
        (topic, p)
        for topic, parts in cluster.partitions.items()
        if options.pattern.fullmatch(topic)
        for p in parts
    )


def discover(options: SourceOptions) -> list[TP]:
    """The ``(topic, partition)`` pairs the options subscribe to, sorted.

    Raises:
        UnknownTopicError: a subscribed topic does not exist.
        ConfigError: ``assign`` names a partition the topic lacks.
    """
    return sorted(_run(options, lambda c: _discover(c, options)))


async def _edges(client: Client, tps: Iterable[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
    """The earliest offsets (ListOffsets) and the served ends (the Fetch high
    watermark, :mod:`kiel.spark.watermarks`) of partitions."""
    wanted = [TopicPartition(t, p) for t, p in tps]
    if not wanted:
        return {}, {}
    earliest = await list_offsets(client.cluster, {tp: LIST_EARLIEST for tp in wanted})
    listed = await list_offsets(client.cluster, {tp: LIST_LATEST for tp in wanted})
    latest = await served_ends(client.cluster, earliest, listed)
    return (
        {(tp.topic, tp.partition): o for tp, o in earliest.items()},
        {(tp.topic, tp.partition): o for tp, o in latest.items()},
    )


def list_edges(options: SourceOptions, tps: Iterable[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
    """The earliest offsets of partitions (ListOffsets) and where their logs
    end as the leaders serve them (the Fetch high watermark: some brokers
    answer ListOffsets LATEST short, see :mod:`kiel.spark.watermarks`)."""
    tps = list(tps)
    return _run(options, lambda c: _edges(c, tps))


def discover_with_edges(
    options: SourceOptions,
) -> tuple[list[TP], dict[TP, int], dict[TP, int]]:
    """:func:`discover` and :func:`list_edges` on one connection."""

    async def work(client: Client) -> tuple[list[TP], dict[TP, int], dict[TP, int]]:
        tps = sorted(await _discover(client, options))
        earliest, latest = await _edges(client, tps)
        return tps, earliest, latest

    return _run(options, work)


def resolve(
    spec: Any,
    tps: list[TP],
    earliest: dict[TP, int],
    latest: dict[TP, int],
    what: str,
    strict: bool,
) -> dict[TP, int]:
    """Turn ``"earliest"``/``"latest"``/per-partition JSON into offsets.

    Args:
        spec: the parsed option.
        tps: the subscribed partitions.
        earliest, latest: their edges.
        what: the option name, for messages.
        strict: per-partition JSON must name every subscribed partition
            (Spark's rule for ``endingOffsets``); otherwise unnamed ones
            start at ``earliest``.

    Raises:
        ConfigError: the JSON names a partition that is not subscribed, or
            (strict) leaves one out.
    """
    if spec == "earliest":
        return {tp: earliest[tp] for tp in tps}
    if spec == "latest":
        return {tp: latest[tp] for tp in tps}
    named = {(t, p): o for t, parts in spec.items() for p, o in parts.items()}
    extra = sorted(set(named) - set(tps))
    if extra:
        raise ConfigError(f"option {what} names partitions that are not subscribed: {extra}")
    missing = sorted(set(tps) - set(named))
    if strict and missing:
        raise ConfigError(f"option {what} must name every subscribed partition; missing {missing}")
    out: dict[TP, int] = {}
    for tp in tps:
        o = named.get(tp, EARLIEST)
        out[tp] = earliest[tp] if o == EARLIEST else latest[tp] if o == LATEST else o
    return out


def split_ranges(ranges: list[Range], min_partitions: Optional[int],
                 max_records: Optional[int] = None) -> list[Range]:
    """Split ranges as Spark's KafkaOffsetRangeCalculator does.

    First, with ``max_records``, each range into ``ceil(size / max_records)``
    contiguous parts of at most that many offsets; then, while there are
    fewer than ``min_partitions`` ranges (and they hold that many offsets),
    each range into ``max(1, round(size / total * min_partitions))`` parts.
    Empty ranges are dropped.
    """
    ranges = [r for r in ranges if r.size > 0]
    if max_records:
        ranges = [part for r in ranges for part in _divide(r, -(-r.size // max_records))]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    return [part for r in ranges
            for part in _divide(r, max(1, min(r.size, round(r.size / total * min_partitions))))]


def _divide(r: Range, parts: int) -> list[Range]:
    """``r`` in ``parts`` contiguous, non-empty ranges of (nearly) equal size."""
    topic, partition, start, end = r
    out: list[Range] = []
    for i in range(parts):
        lo = start + r.size * i // parts
        hi = start + r.size * (i + 1) // parts
        if hi > lo:
            out.append(Range(topic, partition, lo, hi))
    return out


# ----------------------------------------------------------------------
# reading one range (runs in a Spark task)


def read_range(
    options: SourceOptions, rng: Range
) -> Iterator[list[ConsumedRecord]]:
    """Fetch exactly the offsets ``[start, end)`` of one partition.

    A generator driving a private event loop one fetch round at a time, so
    Spark consumes a batch while the next is not fetched yet; closing it
    early (Spark's ``limit``) closes the consumer.

    Yields:
        lists of records in offset order (never empty), all inside the range.

    Raises:
        DataLossError: offsets of the range were deleted, and
            ``fail_on_data_loss`` is set.
        KielError: the cluster failed past the consumer's retries.
    """
    topic, partition, start, end = rng
    if end <= start:
        return
    with _own_loop(partial(_range_consumer, options)) as (loop, consumer):
        position, stalled = start, 0
        while position < end:
            try:
                records = loop.run_until_complete(
                    consumer.consume(topic, start={partition: start})
                )
            except OffsetOutOfRangeError as e:
                position = _skip_lost(loop, consumer, options, rng, position, e)
                if position < end:
                    consumer.seek(topic, partition, position)
                continue
            if not records:
                highwater = consumer.highwater(topic, partition)
                if highwater is not None and highwater <= position:
                    stalled += 1
                if stalled >= _STALLED_ROUNDS:
                    # The broker holds less than the range promised: the log
                    # was truncated (e.g. an unclean leader change).
                    _lost(options, rng, position, end, f"the partition ends at {highwater}")
                    return
                continue
            stalled = 0
            if records[-1].offset >= end:
                records = [r for r in records if r.offset < end]
                if not records:
                    return
            position = records[-1].offset + 1
            yield records


#: Empty rounds at the highwater, below the range's end, before the range is
#: declared truncated.
_STALLED_ROUNDS = 3


def _range_consumer(options: SourceOptions) -> SingleConsumer:
    """The consumer of one range: it never resets a lost position by itself
    (:func:`_skip_lost` decides, by ``failOnDataLoss``)."""
    return SingleConsumer(
        options.brokers,
        max_wait_time=options.fetch_max_wait,
        max_bytes=options.fetch_max_bytes,
        max_fetch_size=options.max_fetch_size,
        offset_reset="raise",
        **options.client_options(),
    )


def _lost(options: SourceOptions, rng: Range, lo: int, hi: int, why: str) -> None:
    topic, partition = rng[0], rng[1]
    message = (
        f"offsets [{lo}, {hi}) of {topic}/{partition} are no longer available ({why}); "
        "set failOnDataLoss=false to skip them"
    )
    if options.fail_on_data_loss:
        raise DataLossError(message, topic=topic, partition=partition, offset=lo)
    log.warning("data loss, skipping: %s", message.split(";")[0])


def _skip_lost(
    loop: asyncio.AbstractEventLoop,
    consumer: SingleConsumer,
    options: SourceOptions,
    rng: Range,
    position: int,
    error: KielError,
) -> int:
    """The broker no longer holds ``position``: fail, or return where to go on."""
    topic, partition, _start, end = rng
    tp = TopicPartition(topic, partition)
    earliest = loop.run_until_complete(
        list_offsets(consumer.cluster, {tp: LIST_EARLIEST})
    )[tp]
    if earliest <= position:
        raise error  # not deleted: past the end, a broker inconsistency
    new = min(earliest, end)
    if options.fail_on_data_loss:
        raise DataLossError(
            f"offsets [{position}, {new}) of {topic}/{partition} were deleted "
            f"(the log now starts at {earliest}); set failOnDataLoss=false to skip them",
            topic=topic,
            partition=partition,
            offset=position,
        ) from error
    log.warning(
        "data loss, skipping: offsets [%d, %d) of %s/%d were deleted (log starts at %d)",
        position, new, topic, partition, earliest,
    )
    return new


# ----------------------------------------------------------------------
# committing (the stream reader's commit())


def commit_offsets(options: SourceOptions, offsets: dict[TP, int]) -> None:
    """Commit ``offsets`` (the next offset to read, per partition) for
    ``options.group_id`` with OffsetCommit v0 (0.8.2 keeps them in ZooKeeper).

    Retriable errors are retried with the client's backoff
    (:meth:`kiel.consumer.offsets.GroupOffsets.commit`).

    Raises:
        BrokerError, KielError: the commit failed past the retries.
    """
    group = options.group_id
    assert group is not None
    if not offsets:
        return

    commit = {TopicPartition(t, p): o for (t, p), o in offsets.items()}
    _run(options, lambda client: send_commit(client.cluster, group, commit, metadata="kiel-spark"))


# ----------------------------------------------------------------------
# writing (the writers' write())


def _bytes(value: Any, column: str) -> Optional[bytes]:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise ConfigError(f"column {column} must be binary or string, got {type(value).__name__}")


_Headers = Optional[list[tuple[str, Optional[bytes]]]]
#: A row as the sink produces it: topic, key, value, partition, headers.
_Row = tuple[str, Optional[bytes], Optional[bytes], Optional[int], _Headers]


def _headers(column: Any) -> _Headers:
    """Spark's ``headers`` column (``array<struct<key,value>>``) as kiel's pairs.

    Raises:
        ConfigError: a header is not a (string key, binary value) pair.
    """
    if not column:
        return None
    pairs = []
    for header in column:
        fields = header.asDict() if hasattr(header, "asDict") else header
        key, value = (fields["key"], fields["value"]) if isinstance(fields, dict) else fields
        if not isinstance(key, str):
            raise ConfigError(f"a header key must be a string, got {key!r}")
        pairs.append((key, _bytes(value, "header value")))
    return pairs


def write_rows(options: SinkOptions, rows: Iterable[Any], chunk: int = 2000) -> int:
    """Produce rows (``value``, optional ``key``, ``topic``, ``partition``,
    ``headers`` fields) through one kiel :class:`~kiel.producer.Producer`,
    and wait until every record is acknowledged.

    Returns:
        how many records were written.

    Raises:
        ConfigError: a row has no topic (no column value, no ``topic``
            option), or a key/value that is neither binary nor string.
        KielError: a record failed past the producer's retries (the first
            failure; Spark then retries the task: at-least-once).
    """
    with _own_loop(partial(Producer, options.brokers, **options.producer_options())) as (
        loop, producer
    ):
        futures: list[asyncio.Future[Any]] = []
        count = 0
        prepared = (_row(row, options) for row in rows)
        while batch := list(itertools.islice(prepared, chunk)):
            loop.run_until_complete(_send(producer, batch, futures))
            count += _check(futures)
        loop.run_until_complete(producer.flush())
        return count + _check(futures)


def _row(row: Any, options: SinkOptions) -> _Row:
    """One Spark row as a record to produce.

    Raises:
        ConfigError: no topic (no column value, no ``topic`` option), or a
            key, value or header that is neither binary nor string.
    """
    fields = row.asDict() if hasattr(row, "asDict") else dict(row)
    topic = fields.get("topic") or options.topic
    if not topic:
        raise ConfigError("a row has no topic: add a topic column or the topic option")
    partition = fields.get("partition")
    return (
        str(topic),
        _bytes(fields.get("key"), "key"),
        _bytes(fields.get("value"), "value"),
        None if partition is None else int(partition),
        _headers(fields.get("headers")),
    )


async def _send(
    producer: Producer, batch: list[_Row], futures: list["asyncio.Future[Any]"]
) -> None:
    """Enqueue ``batch`` (waiting for room in the producer's buffer), keeping each future."""
    for topic, key, value, partition, headers in batch:
        futures.append(await producer.enqueue(topic, value, key=key, partition=partition,
                                              headers=headers))


def _check(futures: list["asyncio.Future[Any]"]) -> int:
    """Raise the first failure among finished futures; drop finished ones; count them."""
    done = 0
    keep = []
    for f in futures:
        if f.done():
            error = f.exception()
            if error is not None:
                raise error
            done += 1
        else:
            keep.append(f)
    futures[:] = keep
    return done

