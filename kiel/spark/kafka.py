"""The Kafka side of the Spark data source: plain synchronous functions over kiel.

Spark calls a data source from plain threads and Python workers, never from
an IOLoop. Reads and planning run kiel on the worker thread's own event loop
with the client it keeps between calls (:mod:`kiel.spark.worker`), driven
step by step for the generators; a write runs its producer on a short-lived
loop of its own (``_own_loop``) and closes it. No pyspark here.
"""

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from functools import partial
from typing import (
    Any,
    NamedTuple,
    Optional,
    TypeVar,
)

import pyarrow as pa

from kiel.client import Client
from kiel.clients import Producer
from kiel.cluster import Cluster
from kiel.consumer.decoder import past_highwater
from kiel.consumer.offsets import EARLIEST as LIST_EARLIEST
from kiel.consumer.offsets import LATEST as LIST_LATEST
from kiel.consumer.offsets import list_offsets, send_commit
from kiel.consumer.watermarks import served_ends
from kiel.exc import (
    ConfigError,
    CorruptMessageError,
    KielError,
    LeaderNotAvailableError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    ProtocolError,
    UnknownPartitionError,
    UnknownTopicError,
    UnsupportedFeatureError,
    for_code,
)
from kiel.protocol import FetchPartitionData, FetchRequest, FetchRequestV4, FetchTopicData
from kiel.protocol.fetch import CONSUMER_REPLICA_ID, READ_COMMITTED, READ_UNCOMMITTED
from kiel.protocol.record_batch import AbortedFilter
from kiel.protocol.versions import FETCH
from kiel.retry import attempts
from kiel.spark import worker
from kiel.spark.columns import Decoded, decode_answer
from kiel.spark.options import EARLIEST, LATEST, SinkOptions, SourceOptions
from kiel.structs import TopicPartition

__all__ = [
    "DataLossError",
    "Range",
    "commit_offsets",
    "discover",
    "list_edges",
    "read_range",
    "release",
    "resolve",
    "split_ranges",
    "write_rows",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
TP = tuple[str, int]
#: One partition's Fetch answer: its high watermark, its bytes, whether they
#: are record batches (v4), and read_committed, the filter of the aborted
#: transactions it lists (``None``: none listed, or read_uncommitted).
FetchAnswer = tuple[int, bytes, bool, Optional[AbortedFilter]]


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
    """Run ``work(client)`` on the worker's loop with its kept client
    (:mod:`kiel.spark.worker`); a kept client's metadata is refreshed first,
    so planning sees the topics, partitions and leaders as they are now."""
    with worker.session(options.client_key(), partial(_client, options),
                        options.connections_max_idle) as (clients, client, kept):
        if kept:
            clients.run(client.cluster.refresh_metadata())
        return clients.run(work(client))


def _client(options: SourceOptions) -> Client:
    client = Client(options.brokers, **options.client_options())
    # A source reads: a misspelt subscribe topic is UnknownTopicError, never
    # a new empty topic (as the consumers, issue 35).
    client.cluster.auto_create_topics = False
    return client


def release(options: SourceOptions) -> None:
    """Close the client this thread keeps for ``options`` (a stream stopped)."""
    worker.worker_clients().drop(options.client_key())


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


async def _edges(client: Client, tps: Iterable[TP], read_committed: bool = False
                 ) -> tuple[dict[TP, int], dict[TP, int]]:
    """The earliest offsets (ListOffsets) and the served ends (the Fetch high
    watermark, :mod:`kiel.consumer.watermarks`; read_committed: the last
    stable offset) of partitions."""
    wanted = [TopicPartition(t, p) for t, p in tps]
    if not wanted:
        return {}, {}
    earliest = await list_offsets(client.cluster, {tp: LIST_EARLIEST for tp in wanted})
    if read_committed:
        # list_offsets reads the last stable offsets from the leaders' Fetch answers.
        latest = await list_offsets(client.cluster, {tp: LIST_LATEST for tp in wanted},
                                    read_committed=True, earliest=earliest)
    else:
        listed = await list_offsets(client.cluster, {tp: LIST_LATEST for tp in wanted})
        latest = await served_ends(client.cluster, earliest, listed)
    return (
        {(tp.topic, tp.partition): o for tp, o in earliest.items()},
        {(tp.topic, tp.partition): o for tp, o in latest.items()},
    )


def list_edges(options: SourceOptions, tps: Iterable[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
    """The earliest offsets of partitions (ListOffsets) and where their logs
    end as the leaders serve them (the Fetch high watermark: some brokers
    answer ListOffsets LATEST short, see :mod:`kiel.consumer.watermarks`);
    with ``kafka.isolation.level=read_committed``, the last stable offsets."""
    tps = list(tps)
    return _run(options, lambda c: _edges(c, tps, options.read_committed))


def discover_with_edges(
    options: SourceOptions,
) -> tuple[list[TP], dict[TP, int], dict[TP, int]]:
    """:func:`discover` and :func:`list_edges` on one connection."""

    async def work(client: Client) -> tuple[list[TP], dict[TP, int], dict[TP, int]]:
        tps = sorted(await _discover(client, options))
        earliest, latest = await _edges(client, tps, options.read_committed)
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


def read_range(options: SourceOptions, rng: Range) -> Iterator[pa.RecordBatch]:
    """Fetch exactly the offsets ``[start, end)`` of one partition, as Arrow batches.

    A generator driving the worker's event loop (:mod:`kiel.spark.worker`:
    its kept client, so a task opens no connection a previous task of the
    worker opened). The next fetch is sent before Spark takes an answer's
    rows, so the broker serves it meanwhile (one in flight at most);
    closing the generator early (Spark's ``limit``) cancels it, and the
    connection drops its answer. Each fetch goes to the partition's
    leader and asks for about what remains of the range (from the bytes per
    record seen so far in this worker), never more than ``fetchMaxBytes``;
    a message larger than that grows the fetch up to ``maxFetchSize``.
    Answers are decoded straight into Arrow columns
    (:func:`kiel.spark.columns.decode_answer`: every CRC, size and offset
    checked).

    Yields:
        Arrow batches of Spark's Kafka schema (never empty), in offset
        order, every row inside the range.

    Raises:
        DataLossError: offsets of the range were deleted, or the log ends
            before the range does, and ``fail_on_data_loss`` is set.
        MessageTooLargeError: a message does not fit ``maxFetchSize``.
        ProtocolError: an answer does not decode (a CRC mismatch...).
        KielError: the cluster failed past the retries.
    """
    topic, partition, start, end = rng
    if end <= start:
        return
    with worker.session(options.client_key(), partial(_client, options),
                        options.connections_max_idle) as (clients, client, _kept):
        cluster = client.cluster
        tp = TopicPartition(topic, partition)
        position, stalled, floor = start, 0, 0
        # The fetch at ``position`` when it went out before its turn, and its size.
        ahead: Optional[asyncio.Future[FetchAnswer]] = None
        ahead_asked = 0
        try:
            while position < end:
                fetch: Awaitable[FetchAnswer]
                if ahead is not None:
                    fetch, asked, ahead = ahead, ahead_asked, None
                else:
                    asked = _fetch_size(options, topic, end - position, floor)
                    fetch = fetch_partition(cluster, tp, position, asked, options.fetch_max_wait,
                                            options.read_committed)
                try:
                    high_watermark, data, batches, aborted = clients.run(fetch)
                except OffsetOutOfRangeError as e:
                    position = clients.run(_skip_lost(cluster, options, rng, position, e))
                    continue
                if not data:
                    stalled += 1
                    if high_watermark <= position and stalled >= _STALLED_ROUNDS:
                        # The broker holds less than the range promised: the log
                        # was truncated (e.g. an unclean leader change).
                        _lost(options, rng, position, end,
                              f"the partition ends at {high_watermark}")
                        return
                    if stalled >= _EMPTY_ROUNDS:
                        raise ProtocolError(
                            f"{stalled} fetches at offset {position} answered nothing below "
                            f"the high watermark {high_watermark}", api="Fetch", topic=topic,
                            partition=partition, offset=position)
                    continue
                stalled = 0
                decoded = _decode(options, rng, position, high_watermark, data, batches,
                                  aborted)
                if decoded.rows:
                    _BYTES_PER_RECORD[topic] = max(1, decoded.valid_bytes // decoded.rows)
                    following = decoded.next_offset
                    if following is not None and position < following < end:
                        ahead_asked = _fetch_size(options, topic, end - following, 0)
                        ahead = _send_ahead(clients, cluster, tp, following, ahead_asked,
                                            options.fetch_max_wait, options.read_committed)
                    yield from decoded.batches
                elif decoded.needed is not None:
                    floor = _grow(options, tp, position, asked, decoded.needed)
                    continue
                if decoded.next_offset is None or decoded.next_offset <= position:
                    raise CorruptMessageError(
                        f"the answer at offset {position} holds nothing at or after it",
                        topic=topic, partition=partition, offset=position)
                position = decoded.next_offset
        finally:
            if ahead is not None:
                _cancel(clients, ahead)


def _decode(options: SourceOptions, rng: Range, position: int, high_watermark: int,
            data: bytes, batches: bool, aborted: Optional[AbortedFilter] = None) -> Decoded:
    """One answer at ``position`` as the range's Arrow batches, its offsets
    checked against the answer's high watermark (see
    :func:`kiel.consumer.decoder.past_highwater`: one corrupted past it would
    end the range early, without a word).

    Raises:
        CorruptMessageError: a CRC, framing or offset that makes no sense.
        ProtocolError: whatever else kiel's decoders find wrong.
    """
    topic, partition, _start, end = rng
    decoded = decode_answer(data, topic, partition, position, end, batches,
                            options.include_headers, aborted=aborted)
    beyond = past_highwater(decoded.next_offset, high_watermark, topic, partition)
    if beyond is not None:
        raise beyond.with_context(offset=position)
    return decoded


def _send_ahead(clients: worker.WorkerClients, cluster: Cluster, tp: TopicPartition,
                offset: int, size: int, max_wait: float,
                read_committed: bool = False) -> "asyncio.Task[FetchAnswer]":
    """Send the fetch at ``offset`` now, before its turn, and return it.

    Strategy: it goes out before Spark takes the current answer's rows, so
    the broker serves it (and its bytes travel) while Spark works; a read
    keeps one at most in flight.
    """
    task = clients.loop.create_task(
        fetch_partition(cluster, tp, offset, size, max_wait, read_committed))
    clients.run(asyncio.sleep(0))  # its request is written now
    return task


def _cancel(clients: worker.WorkerClients, ahead: "asyncio.Future[Any]") -> None:
    """Cancel a fetch sent ahead (a read closed early by Spark's limit, or
    failed); its answer, if it comes, is dropped by the connection, which
    the worker keeps. Nothing to do once the loop is closed (at exit)."""
    if clients.loop.is_closed():
        return
    ahead.cancel()
    clients.run(asyncio.gather(ahead, return_exceptions=True))


#: Empty rounds at the highwater, below the range's end, before the range is
#: declared truncated; empty rounds below it before the broker is.
_STALLED_ROUNDS = 3
_EMPTY_ROUNDS = 20
#: The smallest fetch a range asks for, and the bytes assumed per record
#: before any was seen.
_MIN_FETCH = 16 * 1024
_FIRST_GUESS = 256
#: Bytes per record last seen per topic in this worker (to size the fetches).
_BYTES_PER_RECORD: dict[str, int] = {}


def _fetch_size(options: SourceOptions, topic: str, remaining: int, floor: int) -> int:
    """Bytes to ask for: about what ``remaining`` records take (and a tenth more),
    within ``[_MIN_FETCH, fetch_max_bytes]``, and at least ``floor`` (a message
    found larger)."""
    per_record = _BYTES_PER_RECORD.get(topic, _FIRST_GUESS)
    wanted = remaining * per_record * 11 // 10 + 1024
    return max(floor, min(options.fetch_max_bytes, max(_MIN_FETCH, wanted)))


def _grow(options: SourceOptions, tp: TopicPartition, offset: int, asked: int,
          needed: int) -> int:
    """The first message did not fit ``asked`` bytes: the size to ask next.

    Raises:
        MessageTooLargeError: it does not fit ``max_fetch_size`` either.
    """
    if asked >= options.max_fetch_size or needed > options.max_fetch_size:
        raise MessageTooLargeError(
            f"a message of {needed or 'more than ' + str(asked)} bytes does not fit "
            f"maxFetchSize={options.max_fetch_size}; raise kafka.fetch.max.bytes (maxFetchSize)",
            topic=tp.topic, partition=tp.partition, offset=offset)
    return min(options.max_fetch_size, max(2 * asked, needed))


async def fetch_partition(cluster: Cluster, tp: TopicPartition, offset: int, size: int,
                          max_wait: float, read_committed: bool = False) -> FetchAnswer:
    """One partition's Fetch at ``offset`` from its leader, retried.

    Fetch v4 where the leader speaks it (record batches), else v0. Retriable
    failures (connections, leadership, timeouts) are retried with the
    cluster's backoff, refreshing the metadata where it is stale.
    ``read_committed``: isolation 1 (the broker answers up to the last
    stable offset), and the aborted transactions it lists come back as an
    :class:`~kiel.protocol.record_batch.AbortedFilter`.

    Returns:
        the high watermark, the answer's bytes (message set or records),
        whether they are record batches (v4), and the aborted transactions'
        filter (``None``: none listed).

    Raises:
        OffsetOutOfRangeError: the broker does not hold ``offset``.
        BrokerError: a partition error that is not retriable, or persisted.
        UnsupportedFeatureError: read_committed and the leader speaks no
            Fetch v4 (no transactions).
        KielError: the leader could not be reached within the retries.
    """
    data = [FetchTopicData(tp.topic, [FetchPartitionData(tp.partition, offset, size)])]
    wait_ms = int(max_wait * 1000)
    if tp.topic not in cluster.partitions:
        await cluster.partitions_for(tp.topic)  # a kept client that never met the topic
    async for attempt in attempts(cluster.backoff):
        try:
            try:
                leader = cluster.leader(tp.topic, tp.partition)
            except (UnknownTopicError, UnknownPartitionError) as e:
                # The kept metadata is older than the partition: look again.
                attempt.failed(e)
                await cluster.refresh_metadata([tp.topic])
                continue
            if leader < 0 or leader not in cluster.brokers:
                raise LeaderNotAvailableError(topic=tp.topic, partition=tp.partition)
            version = (await cluster.versions(leader)).of(FETCH)
            if read_committed and version < 4:
                raise UnsupportedFeatureError(
                    "kafka.isolation.level=read_committed needs a broker with transactions "
                    f"(Fetch v4, Kafka 0.11+); this one speaks Fetch v{version}",
                    api="Fetch", topic=tp.topic, partition=tp.partition)
            isolation = READ_COMMITTED if read_committed else READ_UNCOMMITTED
            request: Any = (
                FetchRequestV4(CONSUMER_REPLICA_ID, wait_ms, 1, size, isolation, data)
                if version >= 4 else FetchRequest(CONSUMER_REPLICA_ID, wait_ms, 1, data))
            response: Any = await cluster.send(leader, request,
                                               timeout=cluster.request_timeout + max_wait)
            part = _answer(response, tp, leader)
            error = for_code(part.error_code)
            if error is None:
                listed = part.aborted_transactions if read_committed and version >= 4 else []
                aborted = AbortedFilter((a[0], a[1]) for a in listed) if listed else None
                return part.high_watermark, part.message_set, version >= 4, aborted
            raise error(api="Fetch", topic=tp.topic, partition=tp.partition, offset=offset,
                        broker_id=leader, errno=part.error_code)
        except OffsetOutOfRangeError:
            raise
        except KielError as e:
            if not e.retriable:
                raise
            attempt.failed(e)
            if e.invalid_metadata and not attempt.last:
                await cluster.refresh_metadata([tp.topic])
    raise AssertionError("attempts() raises when the retries are spent")  # pragma: no cover


def _answer(response: Any, tp: TopicPartition, leader: int) -> Any:
    """The partition's answer in a Fetch response.

    Raises:
        ProtocolError: the response left it out (retriable: asked again).
    """
    for topic in response.topics:
        if topic.topic == tp.topic:
            for part in topic.partitions:
                if part.partition == tp.partition:
                    return part
    raise ProtocolError("the fetch response left the partition out", api="Fetch",
                        topic=tp.topic, partition=tp.partition, broker_id=leader)


def _lost(options: SourceOptions, rng: Range, lo: int, hi: int, why: str) -> None:
    topic, partition = rng[0], rng[1]
    message = (
        f"offsets [{lo}, {hi}) of {topic}/{partition} are no longer available ({why}); "
        "set failOnDataLoss=false to skip them"
    )
    if options.fail_on_data_loss:
        raise DataLossError(message, topic=topic, partition=partition, offset=lo)
    log.warning("data loss, skipping: %s", message.split(";")[0])


async def _skip_lost(cluster: Cluster, options: SourceOptions, rng: Range, position: int,
                     error: KielError) -> int:
    """The broker no longer holds ``position``: fail, or return where to go on."""
    topic, partition, _start, end = rng
    tp = TopicPartition(topic, partition)
    earliest = (await list_offsets(cluster, {tp: LIST_EARLIEST}))[tp]
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

