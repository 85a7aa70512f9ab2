"""What the clients count, and the snapshot ``metrics()`` returns.

Every client keeps plain integer counters where its work already happens
(one add per request, batch or fetched answer, never one per record, no
locks: everything runs on the IOLoop) and assembles a frozen snapshot only
when asked: :meth:`kiel.producer.Producer.metrics`,
:meth:`kiel.consumer.SingleConsumer.metrics` and
:meth:`kiel.consumer.GroupedConsumer.metrics`.

:data:`METRICS` names every metric with its type, unit and labels;
:func:`samples` turns a snapshot into those samples (what the Prometheus
exporter, :mod:`kiel.metrics_prometheus`, and :func:`as_dict` expose).
"""

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional

from kiel.protocol.api import BY_REQUEST
from kiel.structs import TopicPartition

__all__ = [
    "LATENCY_BUCKETS",
    "METRICS",
    "ClientMetrics",
    "ConsumerMetrics",
    "GroupedConsumerMetrics",
    "Latency",
    "LatencySummary",
    "MetricSpec",
    "ProducerMetrics",
    "RebalanceCounters",
    "RequestCounters",
    "Sample",
    "as_dict",
    "count_error",
    "samples",
]

#: Upper bounds (seconds) of the request latency histogram's buckets; a last
#: bucket (``+Inf``) takes the rest. A Fetch long poll lasts up to the
#: consumer's ``max_wait_time`` when no message comes.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)


def count_error(errors: dict[str, int], error: BaseException) -> None:
    """Count one ``error`` in ``errors``, by its class name.

    Args:
        errors: counts by error class name (changed in place).
        error: what happened.
    """
    name = type(error).__name__
    errors[name] = errors.get(name, 0) + 1


# ----------------------------------------------------------------------
# counters the clients own


@dataclass(frozen=True)
class Latency:
    """A latency summary at one moment.

    ``buckets`` are cumulative ``(upper bound in seconds, count)`` pairs,
    Prometheus' way, the last bound being ``float("inf")``.
    """

    count: int
    sum: float
    max: float
    buckets: tuple[tuple[float, int], ...]


class LatencySummary:
    """Count, sum, max and a fixed histogram (:data:`LATENCY_BUCKETS`) of durations."""

    __slots__ = ("count", "sum", "max", "_counts")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.max = 0.0
        self._counts = [0] * (len(LATENCY_BUCKETS) + 1)

    def observe(self, seconds: float) -> None:
        """Add one duration.

        Args:
            seconds: how long it took.
        """
        self.count += 1
        self.sum += seconds
        if seconds > self.max:
            self.max = seconds
        self._counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1

    def snapshot(self) -> Latency:
        """The summary now.

        Returns:
            a :class:`Latency` with cumulative buckets.
        """
        buckets: list[tuple[float, int]] = []
        total = 0
        for bound, n in zip(LATENCY_BUCKETS + (float("inf"),), self._counts):
            total += n
            buckets.append((bound, total))
        return Latency(self.count, self.sum, self.max, tuple(buckets))


class RequestCounters:
    """Requests of one cluster's connections: latency and errors by API.

    A :class:`~kiel.cluster.Cluster` owns one and every one of its
    :class:`~kiel.connection.Connection` objects counts into it.
    """

    __slots__ = ("latency", "errors")

    def __init__(self) -> None:
        #: Answered requests by API name (``"Fetch"``, ``"Produce"``, ...).
        self.latency: dict[str, LatencySummary] = {}
        #: Failed requests by ``(API name, error class name)``.
        self.errors: dict[tuple[str, str], int] = {}

    @staticmethod
    def api_of(request: Any) -> str:
        """The API name of ``request`` (its class name if it is not registered)."""
        api = BY_REQUEST.get(type(request))
        return type(request).__name__ if api is None else api.name

    def answered(self, api: str, seconds: float) -> None:
        """Count an answered request (or one written that expects no answer).

        Args:
            api: the API name.
            seconds: from the call to the answer.
        """
        summary = self.latency.get(api)
        if summary is None:
            summary = self.latency[api] = LatencySummary()
        summary.observe(seconds)

    def failed(self, api: str, error: BaseException) -> None:
        """Count a request that failed with ``error``.

        Args:
            api: the API name.
            error: what it raised.
        """
        key = (api, type(error).__name__)
        self.errors[key] = self.errors.get(key, 0) + 1


class RebalanceCounters:
    """Changes to a grouped consumer's partitions and how long they took."""

    __slots__ = ("count", "seconds", "last", "max")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.last = 0.0
        self.max = 0.0

    def observe(self, seconds: float) -> None:
        """Count one change that took ``seconds`` (listener, commit, start)."""
        self.count += 1
        self.seconds += seconds
        self.last = seconds
        if seconds > self.max:
            self.max = seconds


# ----------------------------------------------------------------------
# snapshots


@dataclass(frozen=True)
class ClientMetrics:
    """What every client reports (the requests of its cluster)."""

    #: answered requests by API name.
    requests: dict[str, Latency]
    #: failed requests by ``(API name, error class name)``.
    request_errors: dict[tuple[str, str], int]
    #: open broker connections.
    connections: int


@dataclass(frozen=True)
class ProducerMetrics(ClientMetrics):
    """A :class:`~kiel.producer.Producer`'s snapshot."""

    #: records acknowledged by the brokers (written, with ``required_acks=0``).
    records_out: int
    #: bytes of encoded batches (message sets or record batches) sent, retries included.
    bytes_out: int
    #: batches sent, retries included.
    batches_out: int
    #: records whose future failed.
    records_failed: int
    #: errors met sending batches, by error class name (each partition of a
    #: request counts once; a retried error counts each time).
    errors: dict[str, int]
    #: records produced and not yet acknowledged or failed.
    pending_records: int
    #: their bytes.
    pending_bytes: int


@dataclass(frozen=True)
class ConsumerMetrics(ClientMetrics):
    """A :class:`~kiel.consumer.SingleConsumer`'s snapshot."""

    #: records handed out to the application (records a ``stream()`` loop
    #: gave back unseen, on a seek or revocation, count again when handed out again).
    records_in: int
    #: bytes of fetched message sets (record batches) the brokers answered with.
    bytes_in: int
    #: fetch errors, by error class name (per partition; decode errors too).
    fetch_errors: dict[str, int]
    #: messages between position and high watermark (``None`` before the first fetch).
    lag: dict[TopicPartition, Optional[int]]
    #: seconds the IOLoop spent decoding fetched answers.
    decode_seconds: float
    #: times the decoder handed the loop back (``decode_budget`` spent).
    decoder_yields: int
    #: the health rule's answer (:meth:`~kiel.consumer.SingleConsumer.healthy`
    #: with its default ``stall``): whether the consumer is fetching.
    healthy: bool = field(default=True, kw_only=True)
    #: why it is not healthy, for a human (``None`` when it is).
    unhealthy: Optional[str] = field(default=None, kw_only=True)
    #: partitions the consumer should be fetching: assigned (owned by a
    #: group member), not paused by the application.
    fetch_partitions: int = field(default=0, kw_only=True)
    #: Unix time a broker last answered a fetch (``None``: never yet).
    last_fetch: Optional[float] = field(default=None, kw_only=True)
    #: seconds since then (``None``: never yet).
    seconds_since_fetch: Optional[float] = field(default=None, kw_only=True)
    #: the outage conditions under way (retriable failures the consumer
    #: rides out), by error class name, comma-separated; ``None``: none.
    outage: Optional[str] = field(default=None, kw_only=True)
    #: how long the oldest of them has lasted (0.0: none).
    outage_seconds: float = field(default=0.0, kw_only=True)
    #: outage conditions started so far, by error class name.
    outages: dict[str, int] = field(default_factory=dict, kw_only=True)


@dataclass(frozen=True)
class GroupedConsumerMetrics(ConsumerMetrics):
    """A :class:`~kiel.consumer.GroupedConsumer`'s snapshot."""

    #: changes to this member's partitions (each revoke, assign or loss).
    rebalances: int
    #: their total duration (seconds).
    rebalance_seconds: float
    #: the last one's duration.
    rebalance_seconds_last: float
    #: the longest one's.
    rebalance_seconds_max: float
    #: kazoo's connection state (``CONNECTED``, ``SUSPENDED``, ``LOST``), or
    #: ``NOT_STARTED`` before connect (``NOT_USED`` in a broker group).
    zookeeper_state: str
    #: partitions this member owns.
    owned_partitions: int
    #: offset commits completed.
    commits: int
    #: who forms the group: ``"zookeeper"`` or ``"brokers"``.
    coordinator: str = "zookeeper"
    #: a broker group member's state: ``UNJOINED``, ``REVOKING``, ``JOINING``,
    #: ``SYNCING``, ``STABLE``, ``LEFT`` (``max_poll_interval`` passed),
    #: ``FAILED`` or ``CLOSED``; a ZooKeeper member's is its ZooKeeper state.
    group_state: str = "NOT_STARTED"
    #: this member's id in the group (``None`` before it joined).
    member_id: Optional[str] = None
    #: a broker group's generation this member belongs to (-1: none).
    generation: int = -1
    #: whether this member leads its broker group (runs the assignor).
    leader: bool = False
    #: wall-clock time (``time.time()``) of the last heartbeat the
    #: coordinator answered (``None``: none yet, or a ZooKeeper group).
    last_heartbeat: Optional[float] = None
    #: the group's name (the exporter's ``group`` label on every sample).
    group: str = ""


# ----------------------------------------------------------------------
# names and samples


class MetricSpec(NamedTuple):
    """One exported metric."""

    name: str
    #: ``counter``, ``gauge`` or ``histogram``.
    type: str
    unit: str
    labels: tuple[str, ...]
    help: str


_SPECS = (
    MetricSpec("kiel_request_seconds", "histogram", "seconds", ("api",),
               "Requests answered, from send() to the answer (waiting for a "
               "connection and an in-flight slot included)"),
    MetricSpec("kiel_request_seconds_max", "gauge", "seconds", ("api",),
               "The slowest request answered"),
    MetricSpec("kiel_request_errors", "counter", "requests", ("api", "error"),
               "Requests that failed (timeouts, broken connections)"),
    MetricSpec("kiel_connections", "gauge", "connections", (), "Open broker connections"),
    MetricSpec("kiel_producer_records", "counter", "records", (),
               "Records acknowledged by the brokers"),
    MetricSpec("kiel_producer_bytes", "counter", "bytes", (),
               "Bytes of encoded batches sent, retries included"),
    MetricSpec("kiel_producer_batches", "counter", "batches", (),
               "Batches sent, retries included"),
    MetricSpec("kiel_producer_records_failed", "counter", "records", (),
               "Records whose future failed"),
    MetricSpec("kiel_producer_errors", "counter", "errors", ("error",),
               "Errors sending batches, per partition and attempt"),
    MetricSpec("kiel_producer_pending_records", "gauge", "records", (),
               "Records produced, not yet acknowledged or failed"),
    MetricSpec("kiel_producer_pending_bytes", "gauge", "bytes", (),
               "Bytes of records produced, not yet acknowledged or failed"),
    MetricSpec("kiel_consumer_records", "counter", "records", (),
               "Records handed out to the application"),
    MetricSpec("kiel_consumer_bytes", "counter", "bytes", (),
               "Bytes of message sets fetched"),
    MetricSpec("kiel_consumer_fetch_errors", "counter", "errors", ("error",),
               "Fetch and decode errors, per partition"),
    MetricSpec("kiel_consumer_lag", "gauge", "messages", ("topic", "partition"),
               "Messages between the position and the high watermark"),
    MetricSpec("kiel_consumer_decode_seconds", "counter", "seconds", (),
               "Time the IOLoop spent decoding fetched answers"),
    MetricSpec("kiel_consumer_decoder_yields", "counter", "yields", (),
               "Times the decoder handed the IOLoop back"),
    MetricSpec("kiel_consumer_healthy", "gauge", "boolean", (),
               "1 while the consumer is fetching (its health rule)"),
    MetricSpec("kiel_consumer_fetch_partitions", "gauge", "partitions", (),
               "Partitions to fetch: assigned or owned, not paused by the application"),
    MetricSpec("kiel_consumer_seconds_since_fetch", "gauge", "seconds", (),
               "Seconds since a broker last answered a fetch"),
    MetricSpec("kiel_consumer_outage_seconds", "gauge", "seconds", (),
               "How long the outage under way has lasted (0: none)"),
    MetricSpec("kiel_consumer_outages", "counter", "outages", ("error",),
               "Outage conditions (retriable failures ridden out) started, by error"),
    MetricSpec("kiel_group_rebalances", "counter", "rebalances", (),
               "Changes to this member's partitions (revoke, assign, loss)"),
    MetricSpec("kiel_group_rebalance_seconds", "counter", "seconds", (),
               "Time spent in those changes"),
    MetricSpec("kiel_group_rebalance_seconds_last", "gauge", "seconds", (),
               "The last change's duration"),
    MetricSpec("kiel_group_rebalance_seconds_max", "gauge", "seconds", (),
               "The longest change's duration"),
    MetricSpec("kiel_group_zookeeper_connected", "gauge", "boolean", ("state",),
               "1 for ZooKeeper's current connection state"),
    MetricSpec("kiel_group_owned_partitions", "gauge", "partitions", (),
               "Partitions this member owns"),
    MetricSpec("kiel_group_commits", "counter", "commits", (), "Offset commits completed"),
    MetricSpec("kiel_group_state", "gauge", "boolean", ("coordinator", "state"),
               "1 for the member's current group state"),
    MetricSpec("kiel_group_generation", "gauge", "generation", (),
               "The broker group's generation the member belongs to (-1: none)"),
    MetricSpec("kiel_group_leader", "gauge", "boolean", (),
               "1 when the member leads its broker group"),
    MetricSpec("kiel_group_last_heartbeat_timestamp_seconds", "gauge", "seconds", (),
               "When the coordinator last answered a heartbeat (Unix time)"),
)

#: Every metric kiel exports, by name.
METRICS: dict[str, MetricSpec] = {spec.name: spec for spec in _SPECS}


class Sample(NamedTuple):
    """One value of a metric: a number, or a :class:`Latency` for a histogram."""

    name: str
    labels: tuple[str, ...]
    value: Any


def samples(snapshot: ClientMetrics) -> Iterator[Sample]:
    """The samples of ``snapshot``, named as in :data:`METRICS`.

    Args:
        snapshot: what a client's ``metrics()`` returned.

    Returns:
        an iterator of :class:`Sample`; label values are strings, in the
        order of the metric's labels.
    """
    for api, latency in sorted(snapshot.requests.items()):
        yield Sample("kiel_request_seconds", (api,), latency)
        yield Sample("kiel_request_seconds_max", (api,), latency.max)
    for (api, error), n in sorted(snapshot.request_errors.items()):
        yield Sample("kiel_request_errors", (api, error), n)
    yield Sample("kiel_connections", (), snapshot.connections)
    if isinstance(snapshot, ProducerMetrics):
        yield Sample("kiel_producer_records", (), snapshot.records_out)
        yield Sample("kiel_producer_bytes", (), snapshot.bytes_out)
        yield Sample("kiel_producer_batches", (), snapshot.batches_out)
        yield Sample("kiel_producer_records_failed", (), snapshot.records_failed)
        for error, n in sorted(snapshot.errors.items()):
            yield Sample("kiel_producer_errors", (error,), n)
        yield Sample("kiel_producer_pending_records", (), snapshot.pending_records)
        yield Sample("kiel_producer_pending_bytes", (), snapshot.pending_bytes)
    if isinstance(snapshot, ConsumerMetrics):
        yield Sample("kiel_consumer_records", (), snapshot.records_in)
        yield Sample("kiel_consumer_bytes", (), snapshot.bytes_in)
        for error, n in sorted(snapshot.fetch_errors.items()):
            yield Sample("kiel_consumer_fetch_errors", (error,), n)
        for tp, lag in sorted(snapshot.lag.items()):
            if lag is not None:
                yield Sample("kiel_consumer_lag", (tp.topic, str(tp.partition)), lag)
        yield Sample("kiel_consumer_decode_seconds", (), snapshot.decode_seconds)
        yield Sample("kiel_consumer_decoder_yields", (), snapshot.decoder_yields)
        yield Sample("kiel_consumer_healthy", (), int(snapshot.healthy))
        yield Sample("kiel_consumer_fetch_partitions", (), snapshot.fetch_partitions)
        if snapshot.seconds_since_fetch is not None:
            yield Sample("kiel_consumer_seconds_since_fetch", (), snapshot.seconds_since_fetch)
        yield Sample("kiel_consumer_outage_seconds", (), snapshot.outage_seconds)
        for error, n in sorted(snapshot.outages.items()):
            yield Sample("kiel_consumer_outages", (error,), n)
    if isinstance(snapshot, GroupedConsumerMetrics):
        yield Sample("kiel_group_rebalances", (), snapshot.rebalances)
        yield Sample("kiel_group_rebalance_seconds", (), snapshot.rebalance_seconds)
        yield Sample("kiel_group_rebalance_seconds_last", (), snapshot.rebalance_seconds_last)
        yield Sample("kiel_group_rebalance_seconds_max", (), snapshot.rebalance_seconds_max)
        if snapshot.coordinator == "zookeeper":
            yield Sample("kiel_group_zookeeper_connected", (snapshot.zookeeper_state,), 1)
        yield Sample("kiel_group_owned_partitions", (), snapshot.owned_partitions)
        yield Sample("kiel_group_commits", (), snapshot.commits)
        yield Sample("kiel_group_state", (snapshot.coordinator, snapshot.group_state), 1)
        if snapshot.coordinator == "brokers":
            yield Sample("kiel_group_generation", (), snapshot.generation)
            yield Sample("kiel_group_leader", (), int(snapshot.leader))
            if snapshot.last_heartbeat is not None:
                yield Sample("kiel_group_last_heartbeat_timestamp_seconds", (),
                             snapshot.last_heartbeat)


def as_dict(snapshot: ClientMetrics) -> dict[str, list[dict[str, Any]]]:
    """``snapshot`` as JSON-ready data: ``{name: [{"labels": {...}, "value": ...}]}``.

    A histogram's value is ``{"count", "sum", "max", "buckets": [[le, n], ...]}``
    (the last ``le`` is ``"+Inf"``).

    Args:
        snapshot: what a client's ``metrics()`` returned.

    Returns:
        a dict of lists, JSON-serialisable.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for sample in samples(snapshot):
        value = sample.value
        if isinstance(value, Latency):
            value = {
                "count": value.count, "sum": value.sum, "max": value.max,
                "buckets": [[_le(le), n] for le, n in value.buckets],
            }
        labels = dict(zip(METRICS[sample.name].labels, sample.labels))
        out.setdefault(sample.name, []).append({"labels": labels, "value": value})
    return out


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)
