"""The ``kiel`` PySpark data source: batch and streaming reads, batch and streaming writes.

Register it once per session, then use it like Spark's Kafka source::

    from kiel.spark import KielDataSource
    spark.dataSource.register(KielDataSource)
    df = (spark.read.format("kiel")
          .option("kafka.bootstrap.servers", "k1:9092,k2:9092")
          .option("subscribe", "events")
          .load())

Where each method runs: ``DataSource.__init__``/``schema``/``reader``/
``streamReader``/``writer`` and the readers' planning methods run in Python
workers that Spark starts next to the driver; ``read`` and the writers'
``write`` run in executor Python workers (one task at a time). Reads and
planning use the client each worker thread keeps between calls
(:mod:`kiel.spark.worker`); a write opens its own producer and closes it
(:mod:`kiel.spark.kafka`).
"""

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Optional

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kiel.consumer.offsets import LATEST as LIST_LATEST
from kiel.consumer.offsets import list_offsets
from kiel.exc import ConfigError
from kiel.spark import kafka
from kiel.spark.columns import coalesce, to_arrow
from kiel.spark.kafka import Range
from kiel.spark.options import (
    OffsetSpec,
    SinkOptions,
    SourceOptions,
    Timestamps,
    include_headers,
    offsets_from_dict,
    offsets_to_json,
)
from kiel.structs import TopicPartition

__all__ = ["HAS_READ_LIMITS", "HEADERS_TYPE", "KielDataSource", "SCHEMA", "SCHEMA_WITH_HEADERS",
           "RefusedStreamReader", "TriggerGate", "schema_for", "to_arrow"]

log = logging.getLogger(__name__)

TP = tuple[str, int]

#: Always true: kiel.spark needs pyspark >= 4.2, whose streaming sources have
#: read limits (admission control) and Trigger.AvailableNow. Kept for code
#: that checked it when older pyspark was accepted.
HAS_READ_LIMITS = True

#: Spark's type of the ``headers`` column: ``array<struct<key:string,value:binary>>``.
HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType(), True),
                                     StructField("value", BinaryType(), True)]), True)

#: The rows a read returns: Spark's Kafka source schema. ``timestamp`` is
#: null and ``timestampType`` -1 for the magic-0 messages of a 0.8 broker.
SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
)

#: :data:`SCHEMA` plus Spark's ``headers`` column (``includeHeaders=true``):
#: null for every row, as Spark shows a record without headers (0.8 messages
#: have none).
SCHEMA_WITH_HEADERS = StructType(SCHEMA.fields + [StructField("headers", HEADERS_TYPE, True)])

def schema_for(headers: bool) -> StructType:
    """:data:`SCHEMA_WITH_HEADERS` when ``headers``, else :data:`SCHEMA`."""
    return SCHEMA_WITH_HEADERS if headers else SCHEMA


class KielDataSource(DataSource):
    """Kafka 0.8.x topics as a Spark source and sink, through kiel.

    Format name ``kiel``. Options (strings, keys case-insensitive) are those
    of Spark's Kafka source where they apply; see ``docs/guides/spark.rst``.
    A bad read option raises :class:`~kiel.exc.ConfigError` when the source
    is loaded (``load()``); a rule that depends on batch or stream, when the
    query is planned.
    """

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.options = dict(options)

    @classmethod
    def name(cls) -> str:
        """The format name: ``spark.read.format("kiel")``."""
        return "kiel"

    def schema(self) -> StructType:
        """Spark's Kafka schema: key, value, topic, partition, offset, timestamp,
        timestampType, and headers with ``includeHeaders=true``.

        Spark asks for it when a read is loaded (``load()``), before it says
        whether the read is a batch or a stream: every read option is
        checked here, so a bad one fails there, with kiel's message alone.

        Raises:
            ConfigError: a missing, unknown, malformed, conflicting or refused option.
        """
        SourceOptions.parse(self.options, streaming=None)
        return schema_for(include_headers(self.options))

    def reader(self, schema: StructType) -> "KielBatchReader":
        """A batch reader (``spark.read``)."""
        opts = SourceOptions.parse(self.options, streaming=False)
        _check_schema(schema, opts)
        return KielBatchReader(opts)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A micro-batch reader (``spark.readStream``).

        Options a stream refuses (``endingOffsets``...) give a reader that
        raises their :class:`~kiel.exc.ConfigError` on its first call.
        Strategy: pyspark's streaming runner stops the reader it tried to
        make in a ``finally``; raising here would bury kiel's message under
        that runner's own ``UnboundLocalError``.
        """
        try:
            opts = SourceOptions.parse(self.options, streaming=True)
            _check_schema(schema, opts)
        except ConfigError as e:
            return RefusedStreamReader(e)
        return KielStreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> "KielBatchWriter":
        """A batch writer (``df.write``); ``overwrite`` is refused (Kafka only appends)."""
        if overwrite:
            raise ConfigError("a Kafka topic can only be appended to: use mode('append')")
        return KielBatchWriter(*_sink_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> "KielStreamWriter":
        """A streaming writer (``df.writeStream``)."""
        return KielStreamWriter(*_sink_options(self.options, schema))


def _check_schema(schema: StructType, opts: SourceOptions) -> None:
    if schema is not None and schema != schema_for(opts.include_headers):
        raise ConfigError(
            "the kiel source has a fixed schema (that of Spark's Kafka source); "
            "do not pass .schema(...)"
        )


def _sink_options(options: Mapping[str, str],
                  schema: StructType) -> tuple[SinkOptions, "RowAdapter"]:
    sink = SinkOptions.parse(options)
    names = set(schema.fieldNames())
    if "value" not in names:
        raise ConfigError(f"writing to Kafka needs a value column; got {sorted(names)}")
    for name in ("key", "value"):
        if name in names and not isinstance(schema[name].dataType, (BinaryType, StringType)):
            raise ConfigError(
                f"column {name} must be binary or string, got {schema[name].dataType}"
            )
    if "topic" in names and not isinstance(schema["topic"].dataType, StringType):
        raise ConfigError("column topic must be a string")
    if "topic" not in names and sink.topic is None:
        raise ConfigError("writing to Kafka needs a topic column or the topic option")
    if "partition" in names and not isinstance(schema["partition"].dataType,
                                               (IntegerType, LongType)):
        raise ConfigError("column partition must be an int")
    if "headers" in names and schema["headers"].dataType.simpleString() != \
            HEADERS_TYPE.simpleString():
        raise ConfigError(f"column headers must be {HEADERS_TYPE.simpleString()}, "
                          f"got {schema['headers'].dataType.simpleString()}")
    topic = sink.topic if "topic" in names else None
    return sink, RowAdapter(topic, "headers" in names)


class RowAdapter:
    """What a write task does to rows before kiel produces them.

    Args:
        topic: the ``topic`` option when the rows also have a ``topic``
            column: the option wins, as in Spark's sink (None: nothing to do).
        headers: the rows have a ``headers`` column. Its headers are
            produced with the record: a broker that speaks Produce v3
            (Kafka 0.11+) stores them; a 0.8 broker cannot, and the task
            fails with :class:`~kiel.exc.UnsupportedFeatureError` rather
            than losing them.
    """

    def __init__(self, topic: Optional[str], headers: bool) -> None:
        self.topic = topic
        self.headers = headers

    def __call__(self, rows: Iterator[Any]) -> Iterator[Any]:
        """The rows, ready for :func:`kiel.spark.kafka.write_rows`."""
        if self.topic is None:
            return rows
        return self._adapt(rows)

    def _adapt(self, rows: Iterator[Any]) -> Iterator[Any]:
        for row in rows:
            fields = row.asDict() if hasattr(row, "asDict") else dict(row)
            fields["topic"] = self.topic
            yield fields


# ----------------------------------------------------------------------
# reading


class KielInputPartition(InputPartition):
    """One Spark task: the offsets ``[start, end)`` of one Kafka partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.range = Range(topic, partition, start, end)

    def __repr__(self) -> str:
        topic, partition, start, end = self.range
        return f"KielInputPartition({topic}/{partition} [{start}, {end}))"


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, KielInputPartition):
        # pyspark stands in one bare InputPartition when partitions() returned
        # none (nothing to read: an empty topic, start == end everywhere).
        return
    yield from coalesce(kafka.read_range(options, partition.range))


def _ranges(start: dict[TP, int], end: dict[TP, int],
            opts: SourceOptions) -> list[KielInputPartition]:
    ranges = [Range(t, p, start[(t, p)], end[(t, p)]) for t, p in sorted(end) if (t, p) in start]
    split = kafka.split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
    return [KielInputPartition(*r) for r in split]


# ----------------------------------------------------------------------
# positions: offsets, earliest/latest, or times


def offsets_for_times(opts: SourceOptions, times: dict[TP, int],
                      latest: dict[TP, int]) -> dict[TP, int]:
    """Resolve epoch-millisecond times to offsets with ListOffsets (v1 where
    the leader speaks it, else v0).

    A 0.8 broker answers at log-segment granularity: the first offset of
    the newest segment last written at or before the time (every record
    before that offset was written at or before it, and every record written
    after it is at or after that offset); the log end offset when the time is
    not in the past; the earliest offset when every segment was last written
    after the time. A current broker answers the first offset whose record
    is at or after the time, or nothing (the end of the log).

    Args:
        opts: the source options.
        times: epoch milliseconds per partition.
        latest: the served ends (:func:`kiel.spark.kafka.list_edges`). An
            answer at or after the ListOffsets end or the served end means
            "no record that recent": it is the served end, which is further
            on a broker that answers ListOffsets LATEST short (Tansu), and
            is the last stable offset with read_committed.

    Returns:
        the offset per partition.

    Raises:
        KielError: the cluster failed past the retries.
    """
    if not times:
        return {}

    async def work(client: Any) -> dict[TP, int]:
        asked = {TopicPartition(t, p): ms for (t, p), ms in times.items()}
        found = await list_offsets(client.cluster, asked)
        listed = await list_offsets(client.cluster, {tp: LIST_LATEST for tp in found})
        out = {}
        for tp, offset in found.items():
            end = latest[(tp.topic, tp.partition)]
            # At or past the served end is "none that recent": with
            # read_committed that end is the last stable offset, and a
            # record of a transaction still open is past it (Kafka's broker
            # answers no offset there; Tansu and noida-db answer it).
            out[(tp.topic, tp.partition)] = end if offset >= min(listed[tp], end) else offset
        return out

    return kafka._run(opts, work)


def _option(spec: OffsetSpec, default: str) -> str:
    return spec.option if isinstance(spec, Timestamps) else default


def _resolve(opts: SourceOptions, spec: OffsetSpec, tps: list[TP], earliest: dict[TP, int],
             latest: dict[TP, int], what: str, strict: bool) -> dict[TP, int]:
    """Offsets for a parsed position option (see :func:`kiel.spark.kafka.resolve`)."""
    if not isinstance(spec, Timestamps):
        return kafka.resolve(spec, tps, earliest, latest, what, strict)
    if spec.every is not None:
        times = {tp: spec.every for tp in tps}
    else:
        # Strategy: kafka.resolve checks that the JSON names exactly the
        # subscribed partitions (Spark's rule for *OffsetsByTimestamp); the
        # times are >= 0, never the symbolic -2/-1, so it returns them as given.
        assert spec.by_partition is not None
        times = kafka.resolve(spec.by_partition, tps, earliest, latest, spec.option, True)
    return offsets_for_times(opts, times, latest)


def _start(opts: SourceOptions, tps: list[TP], earliest: dict[TP, int],
           latest: dict[TP, int]) -> dict[TP, int]:
    """Where a batch read or a new query starts.

    Raises:
        ConfigError: a starting time after every record of a partition with
            ``startingOffsetsByTimestampStrategy=error`` (the default); with
            ``latest`` such a partition starts at its latest offset.
    """
    spec = opts.starting
    start = _resolve(opts, spec, tps, earliest, latest, "startingOffsets", False)
    if isinstance(spec, Timestamps) and opts.starting_strategy == "error":
        for tp in tps:
            if start[tp] >= latest[tp]:
                # read_committed: the end is the last stable offset, so a
                # record written after the time may exist, in a transaction
                # still open (Kafka's broker answers no offset past the LSO).
                what, end = (("committed record", "last stable offset") if opts.read_committed
                             else ("record", "end"))
                raise ConfigError(
                    f"option {spec.option}: no {what} of {tp[0]}/{tp[1]} was written at or "
                    f"after the time (its {end} is {latest[tp]}); set "
                    "startingOffsetsByTimestampStrategy=latest to start there",
                    topic=tp[0], partition=tp[1],
                )
    return start


# ----------------------------------------------------------------------
# batch reads


class KielBatchReader(DataSourceReader):
    """``spark.read.format("kiel")``: the offsets between the starting and ending positions."""

    def __init__(self, options: SourceOptions) -> None:
        self.opts = options

    def partitions(self) -> Sequence[InputPartition]:
        """One split per partition range (more with ``minPartitions``).

        Raises:
            ConfigError: the position options do not fit the subscribed
                partitions, or a starting time has no record after it.
            DataLossError: the start names deleted offsets and
                failOnDataLoss is true.
        """
        opts = self.opts
        tps, earliest, latest = kafka.discover_with_edges(opts)
        start = _start(opts, tps, earliest, latest)
        end = _resolve(opts, opts.ending, tps, earliest, latest, "endingOffsets", True)
        for tp in tps:
            if start[tp] > end[tp]:
                raise ConfigError(
                    f"{_option(opts.starting, 'startingOffsets')} ({start[tp]}) is after "
                    f"{_option(opts.ending, 'endingOffsets')} ({end[tp]}) for {tp[0]}/{tp[1]}"
                )
        start = _check_start(opts, start, earliest)
        parts = _ranges(start, end, opts)
        log.info("kiel batch read: %d splits over %d partitions", len(parts), len(tps))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Fetch one split (in an executor task)."""
        return _read(self.opts, partition)


def _check_start(opts: SourceOptions, start: dict[TP, int],
                 earliest: dict[TP, int]) -> dict[TP, int]:
    """Offsets before the log start are data loss: fail, or warn and start at the log start."""
    out = dict(start)
    for tp, offset in start.items():
        first = earliest.get(tp)
        if first is not None and offset < first:
            message = (
                f"offsets [{offset}, {first}) of {tp[0]}/{tp[1]} were deleted "
                f"before they were read"
            )
            if opts.fail_on_data_loss:
                raise kafka.DataLossError(
                    message + "; set failOnDataLoss=false to skip them",
                    topic=tp[0], partition=tp[1], offset=offset,
                )
            log.warning("data loss, skipping: %s", message)
            out[tp] = first
    return out


# ----------------------------------------------------------------------
# streaming reads


class TriggerGate:
    """``minOffsetsPerTrigger``/``maxTriggerDelay``: may a micro-batch start now?

    Spark's rules: it may when ``max_delay`` seconds have passed since the
    last one started, or when at least ``min_offsets`` offsets wait; the
    first call of a query counts as late (its first micro-batch is never held).

    Args:
        min_offsets: offsets that must wait before a batch starts.
        max_delay: seconds after which a batch starts with whatever waits.
        clock: seconds, monotonic.
    """

    def __init__(self, min_offsets: int, max_delay: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.min_offsets = min_offsets
        self.max_delay = max_delay
        self.clock = clock
        self.last: Optional[float] = None

    def admit(self, waiting: int) -> bool:
        """Whether a batch of the ``waiting`` offsets starts now (if so, the delay restarts)."""
        now = self.clock()
        late = self.last is None or now - self.last >= self.max_delay
        if late or waiting >= self.min_offsets:
            self.last = now
            return True
        return False


class KielStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("kiel")``: micro-batches of offset ranges.

    Offsets (Spark's checkpointed JSON) are ``{topic: {"partition": next offset}}``.
    A partition that appears while the query runs is read from its earliest
    offset. With ``maxOffsetsPerTrigger`` each micro-batch takes at most that
    many offsets, spread over the partitions in proportion to their backlog;
    with ``minOffsetsPerTrigger`` a micro-batch waits for that many (or for
    ``maxTriggerDelay``).
    """

    def __init__(self, options: SourceOptions) -> None:
        self.opts = options
        #: The offsets Trigger.AvailableNow must stop at (None otherwise).
        self.target: Optional[dict[TP, int]] = None
        self._latest: Optional[dict[TP, int]] = None
        self.gate = (None if options.min_offsets_per_trigger is None else
                     TriggerGate(options.min_offsets_per_trigger, options.max_trigger_delay))

    def initialOffset(self) -> dict:
        """Where a new query starts (the starting position options, default latest).

        Raises:
            ConfigError: a starting time has no record after it (strategy error).
        """
        opts = self.opts
        tps, earliest, latest = kafka.discover_with_edges(opts)
        return offsets_to_json(_start(opts, tps, earliest, latest))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)``, else ``ReadMinRows(minOffsetsPerTrigger)``.

        A Python source gets one limit, not Spark's composite: with both
        options, the minimum comes from the options themselves.
        """
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Remember the latest offsets now: an availableNow query stops there."""
        tps, _earliest, latest = kafka.discover_with_edges(self.opts)
        self.target = latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next micro-batch: the latest offsets, capped by the
        read limit and (availableNow) by the target; ``start`` itself while
        ``minOffsetsPerTrigger`` holds the batch back."""
        begin = offsets_from_dict(start)
        tps, earliest, latest = kafka.discover_with_edges(self.opts)
        if self.target is not None:
            latest = {tp: min(o, self.target.get(tp, begin.get(tp, earliest[tp])))
                      for tp, o in latest.items()}
        self._latest = latest
        # A partition new to the query starts at its earliest offset.
        base = {tp: begin.get(tp, earliest[tp]) for tp in tps}
        end = {tp: max(base[tp], latest[tp]) for tp in tps}
        # Trigger.Once passes ReadAllAvailable; availableNow must not wait for
        # data that will never come: neither is held back.
        if not isinstance(limit, ReadAllAvailable):
            waiting = sum(end[tp] - base[tp] for tp in tps)
            if self.gate is not None and self.target is None and not self.gate.admit(waiting):
                return offsets_to_json(begin)
            if isinstance(limit, ReadMaxRows):
                end = cap_offsets(base, end, limit.max_rows)
        # Partitions the query knew and no longer sees keep their offsets.
        for tp, o in begin.items():
            end.setdefault(tp, o)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> Optional[dict]:
        """The latest offsets seen by the last :meth:`latestOffset` (for progress reports)."""
        return None if self._latest is None else offsets_to_json(self._latest)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The splits between two checkpointed offsets.

        Raises:
            DataLossError: the start offsets were deleted, or a partition's
                end is before its start, and failOnDataLoss is true.
        """
        opts = self.opts
        begin = offsets_from_dict(start)
        finish = offsets_from_dict(end)
        missing = [tp for tp in finish if tp not in begin]
        wanted = sorted(set(finish))
        earliest, _latest = kafka.list_edges(opts, wanted) if wanted else ({}, {})
        for tp in missing:
            begin[tp] = min(earliest[tp], finish[tp])
        for tp in wanted:
            if finish[tp] < begin[tp]:
                message = (f"{tp[0]}/{tp[1]} went back from offset {begin[tp]} to {finish[tp]}")
                if opts.fail_on_data_loss:
                    raise kafka.DataLossError(message + "; set failOnDataLoss=false to go on",
                                              topic=tp[0], partition=tp[1])
                log.warning("data loss: %s", message)
                begin[tp] = finish[tp]
        begin = _check_start(opts, {tp: begin[tp] for tp in wanted}, earliest)
        return _ranges(begin, finish, opts)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Fetch one split (in an executor task)."""
        return _read(self.opts, partition)

    def commit(self, end: dict) -> None:
        """Spark finished everything before ``end``: commit it to ``groupId``, if set.

        The committed offset is the next one to read (Kafka's convention),
        stored by a 0.8.2 broker at ``/consumers/<group>/offsets/<topic>/<partition>``
        for lag monitors. The query's own position is Spark's checkpoint, not this.

        Raises:
            KielError: the commit failed past the retries (fails the query).
        """
        if self.opts.group_id is not None:
            kafka.commit_offsets(self.opts, offsets_from_dict(end))

    def stop(self) -> None:
        """Close the client this worker thread kept for the query's planning."""
        kafka.release(self.opts)


class RefusedStreamReader(DataSourceStreamReader):
    """The stream reader of options a stream refuses: its first call raises their error.

    Args:
        error: what :meth:`KielDataSource.streamReader` found wrong.
    """

    def __init__(self, error: ConfigError) -> None:
        self.error = error

    def initialOffset(self) -> dict:
        """Raises the options' error.

        Raises:
            ConfigError: always.
        """
        raise self.error

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Raises the options' error.

        Raises:
            ConfigError: always.
        """
        raise self.error

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """Raises the options' error.

        Raises:
            ConfigError: always.
        """
        raise self.error

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Raises the options' error.

        Raises:
            ConfigError: always.
        """
        raise self.error

    def stop(self) -> None:
        """Nothing to release."""


def cap_offsets(start: dict[TP, int], end: dict[TP, int], max_rows: int) -> dict[TP, int]:
    """Move ``end`` back so that at most ``max_rows`` offsets lie between ``start`` and it.

    The budget is shared in proportion to each partition's backlog (as Spark's
    Kafka source does); rounding down, then the remainder goes one by one to
    the largest backlogs, so the total is exactly ``min(max_rows, backlog)``.
    """
    backlog = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    share = {tp: backlog[tp] * max_rows // total for tp in backlog}
    left = max_rows - sum(share.values())
    for tp in sorted(backlog, key=lambda t: (-(backlog[t] - share[t]), t)):
        if left <= 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            left -= 1
    return {tp: start.get(tp, end[tp]) + share[tp] for tp in end}


# ----------------------------------------------------------------------
# writing


class KielCommitMessage(WriterCommitMessage):
    """What one write task reports: how many records it wrote."""

    def __init__(self, count: int) -> None:
        self.count = count


class _Producing:
    """The write side both writers share: one task's rows through one producer."""

    def __init__(self, options: SinkOptions, adapt: Optional[RowAdapter] = None) -> None:
        self.opts = options
        self.adapt = adapt or RowAdapter(None, False)

    def write(self, iterator: Iterator[Any]) -> KielCommitMessage:
        """Produce one task's rows and wait for their acknowledgements.

        Raises:
            KielError: a record failed past the producer's retries, or a row
                cannot be written (no topic, headers, a bad key or value).
        """
        return KielCommitMessage(kafka.write_rows(self.opts, self.adapt(iterator)))


class KielBatchWriter(_Producing, DataSourceWriter):
    """``df.write.format("kiel")``: every row becomes a message (at-least-once).

    A failed task is retried by Spark and writes its rows again: duplicates,
    never losses (with ``acks`` -1 or 1).
    """

    #: Records written by the whole job (set by :meth:`commit`).
    written = 0

    def commit(self, messages: list[Optional[WriterCommitMessage]]) -> None:
        """Every task succeeded: nothing to do (the messages are already in Kafka)."""
        self.written = sum(getattr(m, "count", 0) for m in messages if m is not None)

    def abort(self, messages: list[Optional[WriterCommitMessage]]) -> None:
        """A task failed: messages already written stay (Kafka cannot take them back)."""
        log.warning("kiel write aborted: messages already acknowledged stay in Kafka")


class KielStreamWriter(_Producing, DataSourceStreamWriter):
    """``df.writeStream.format("kiel")``: each micro-batch's rows become messages.

    At-least-once: a micro-batch replayed after a failure is produced again.
    """

    def commit(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        """The micro-batch is in Kafka: nothing to do."""

    def abort(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        """Messages already acknowledged stay; Spark replays the micro-batch."""
        log.warning("kiel stream write of batch %d aborted: it will be written again", batchId)
