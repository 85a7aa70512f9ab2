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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Optional

from kiel.protocol.api import BY_REQUEST
from kiel.structs import TopicPartition

__all__ = [
    "LATENCY_BUCKETS",
    "METRICS",
    "PARTITIONS_SHOWN",
    "ClientMetrics",
    "ConsumerMetrics",
    "GroupMetrics",
    "GroupedConsumerMetrics",
    "Latency",
    "LatencySummary",
    "MetricSpec",
    "ProducerMetrics",
    "Rebalance",
    "RebalanceClock",
    "RebalanceCounters",
    "RequestCounters",
    "Sample",
    "as_dict",
    "count_error",
    "describe_partitions",
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
    """A grouped consumer's rebalances and how long each paused its partitions.

    One observation per rebalance that moved this member's partitions, of
    its pause (see :class:`RebalanceClock`).
    """

    __slots__ = ("count", "seconds", "last", "max")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.last = 0.0
        self.max = 0.0

    def observe(self, seconds: float) -> None:
        """Count one rebalance whose partitions had no owner here for ``seconds``."""
        self.count += 1
        self.seconds += seconds
        self.last = seconds
        if seconds > self.max:
            self.max = seconds



#: Partitions a log line names at most (the rest are counted).
PARTITIONS_SHOWN = 30


def describe_partitions(tps: Iterable[TopicPartition], limit: int = PARTITIONS_SHOWN) -> str:
    """``tps`` for a log line: the count, then each topic's partition ranges, bounded.

    ``describe_partitions([t:0, t:1, t:2, t:5, u:0])`` is ``"5 (t[0-2,5], u[0])"``;
    past ``limit`` ranges the rest is counted (``"... +N more"``), so a line
    about 10,000 partitions stays short.

    Args:
        tps: the partitions (any order; repeats count once).
        limit: ranges shown at most.

    Returns:
        the text, ``"0"`` for none.
    """
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(set(tps)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    total = sum(len(ids) for ids in by_topic.values())
    if not total:
        return "0"
    shown: list[str] = []
    ranges = hidden = 0
    for topic, ids in by_topic.items():
        spans: list[str] = []
        for first, last in _runs(ids):
            if ranges < limit:
                spans.append(str(first) if first == last else f"{first}-{last}")
                ranges += 1
            else:
                hidden += last - first + 1
        if spans:
            shown.append(f"{topic}[{','.join(spans)}]")
    more = f", ... +{hidden} more" if hidden else ""
    return f"{total} ({', '.join(shown)}{more})"


def _runs(ids: list[int]) -> Iterator[tuple[int, int]]:
    """The runs of consecutive numbers in sorted ``ids``, as ``(first, last)``."""
    first = last = ids[0]
    for p in ids[1:]:
        if p != last + 1:
            yield first, last
            first = p
        last = p
    yield first, last


@dataclass(frozen=True)
class Rebalance:
    """What one rebalance moved at this member, and its pause (:class:`RebalanceClock`)."""

    #: seconds this member's moved partitions had no owner here.
    seconds: float
    #: partitions handed to the listener's ``on_partitions_revoked``.
    revoked: tuple[TopicPartition, ...]
    #: partitions assigned (fetching now).
    assigned: tuple[TopicPartition, ...]
    #: partitions lost (no commit).
    lost: tuple[TopicPartition, ...]

    def __str__(self) -> str:
        parts = [f"assigned {describe_partitions(self.assigned)}",
                 f"revoked {describe_partitions(self.revoked)}"]
        if self.lost:
            parts.append(f"lost {describe_partitions(self.lost)}")
        return ", ".join(parts) + f"; partitions had no owner here for {self.seconds:.2f}s"


class RebalanceClock:
    """Times a member's rebalances as the time its partitions had no owner here.

    A rebalance's *pause* runs from the moment this member stopped fetching
    partitions for it (the start of a revocation or a loss: an eager
    member revokes everything before it joins, a cooperative one only what
    it gives up, after SyncGroup; a ZooKeeper member what its new
    allocation takes away) or, if it stopped nothing, from the moment its
    rebalance began (JoinGroup, a ZooKeeper reconcile pass), to the moment
    the rebalance ended with the partitions assigned to it fetching (their
    listener has run and their committed offsets are read). A rebalance that
    moved none of this member's partitions paused nothing here and is not
    timed.

    The membership says when a rebalance begins and ends; the consumer's
    hooks say when partitions stop and are assigned. Times are
    :func:`time.monotonic` seconds given by the caller.
    """

    __slots__ = ("_began", "_stopped", "_revoked", "_assigned", "_lost")

    def __init__(self) -> None:
        self._began: Optional[float] = None
        self._stopped: Optional[float] = None
        self._revoked: list[TopicPartition] = []
        self._assigned: list[TopicPartition] = []
        self._lost: list[TopicPartition] = []

    def began(self, now: float, fresh: bool = False) -> None:
        """A rebalance begins (a second call keeps the first moment).

        Args:
            now: the moment.
            fresh: forget what stopped earlier (a member that left its group
                on purpose: its partitions went to others, not nowhere).
        """
        if fresh:
            self._reset()
        if self._began is None:
            self._began = now

    def stopped(self, now: float, tps: Iterable[TopicPartition], lost: bool = False) -> None:
        """These partitions stop fetching: revoked, or ``lost`` (no commit)."""
        if self._stopped is None:
            self._stopped = now
        (self._lost if lost else self._revoked).extend(tps)

    def assigned(self, tps: Iterable[TopicPartition]) -> None:
        """These partitions are assigned (fetching once their hook returns)."""
        self._assigned.extend(tps)

    def ended(self, now: float) -> Optional[Rebalance]:
        """The rebalance ended: what it moved and its pause, ``None`` if it moved nothing.

        Args:
            now: the moment (the new assignment is fetching).
        """
        start = self._stopped if self._stopped is not None else self._began
        moved = Rebalance(
            max(0.0, now - start) if start is not None else 0.0,
            tuple(sorted(set(self._revoked))), tuple(sorted(set(self._assigned))),
            tuple(sorted(set(self._lost))),
        )
        self._reset()
        if not (moved.revoked or moved.assigned or moved.lost):
            return None
        return moved

    def _reset(self) -> None:
        self._began = self._stopped = None
        self._revoked, self._assigned, self._lost = [], [], []


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


@dataclass(frozen=True, kw_only=True)
class GroupMetrics:
    """The group's part of a grouped consumer's snapshot, as its coordinator
    reports it (``GroupedConsumerMetrics.membership``).

    Each coordinator has its subclass, with its own fields and samples:
    :class:`kiel.coordinator.broker_group.BrokerGroupMetrics`,
    :class:`kiel.zookeeper.group_coordinator.ZooKeeperGroupMetrics`.
    """

    #: who forms the group: ``"brokers"`` or ``"zookeeper"``.
    coordinator: str
    #: the member's state in its group (``NOT_STARTED`` before connect).
    state: str = "NOT_STARTED"

    #: Whether the coordinator answers heartbeats (:attr:`last_heartbeat`
    #: says when it last did): the health rule's silence clock.
    heartbeats: ClassVar[bool] = False

    @property
    def last_heartbeat(self) -> Optional[float]:
        """Wall-clock time of the last heartbeat the coordinator answered
        (``None``: none yet, or it takes no heartbeats)."""
        return None

    @property
    def connected(self) -> bool:
        """Whether the member is in touch with its coordinator right now, as
        far as a connection state tells (``False`` when none does)."""
        return False

    def samples(self) -> Iterator["Sample"]:
        """This part's samples, named as in :data:`METRICS`."""
        yield Sample("kiel_group_state", (self.coordinator, self.state), 1)

    def flat(self) -> dict[str, Any]:
        """The snapshot's flat fields of kiel 1.x that this part fills
        (``coordinator``, ``group_state``, ``zookeeper_state``,
        ``generation``, ``leader``, ``last_heartbeat``)."""
        return {"coordinator": self.coordinator, "group_state": self.state,
                "zookeeper_state": "NOT_USED", "generation": -1, "leader": False,
                "last_heartbeat": self.last_heartbeat}


@dataclass(frozen=True)
class GroupedConsumerMetrics(ConsumerMetrics):
    """A :class:`~kiel.consumer.GroupedConsumer`'s snapshot."""

    #: rebalances that moved this member's partitions (revoked, lost or assigned any).
    rebalances: int
    #: their pauses' total (seconds): how long their partitions had no owner
    #: at this member, from the moment they stopped fetching (or the
    #: rebalance began) to the new assignment fetching (:class:`RebalanceClock`).
    rebalance_seconds: float
    #: the last one's pause.
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
    #: the member's own commits (timed, by count, on revocation) that the
    #: coordinator refused because the group had moved to a newer
    #: generation: rebalances it learnt of that way; the next owner of those
    #: partitions delivers again from the last commit.
    commits_refused: int = 0
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
    #: the group's state as its coordinator reports it, typed
    #: (a :class:`GroupMetrics` subclass); the flat fields above
    #: (``coordinator`` to ``last_heartbeat``) are copied from it.
    membership: Optional[GroupMetrics] = field(default=None, kw_only=True)


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
               "Rebalances that moved this member's partitions"),
    MetricSpec("kiel_group_rebalance_seconds", "counter", "seconds", (),
               "Time their partitions had no owner at this member: from stopping "
               "(or the rebalance's start) to the new assignment fetching"),
    MetricSpec("kiel_group_rebalance_seconds_last", "gauge", "seconds", (),
               "The last rebalance's pause (partitions without an owner here)"),
    MetricSpec("kiel_group_rebalance_seconds_max", "gauge", "seconds", (),
               "The longest rebalance pause (partitions without an owner here)"),
    MetricSpec("kiel_group_zookeeper_connected", "gauge", "boolean", ("state",),
               "1 for ZooKeeper's current connection state"),
    MetricSpec("kiel_group_owned_partitions", "gauge", "partitions", (),
               "Partitions this member owns"),
    MetricSpec("kiel_group_commits", "counter", "commits", (), "Offset commits completed"),
    MetricSpec("kiel_group_commits_refused", "counter", "commits", (),
               "The member's own commits refused because the group had moved on"),
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
        yield Sample("kiel_group_owned_partitions", (), snapshot.owned_partitions)
        yield Sample("kiel_group_commits", (), snapshot.commits)
        yield Sample("kiel_group_commits_refused", (), snapshot.commits_refused)
        if snapshot.membership is not None:
            # Each coordinator says what its part exports (no branch on its kind here).
            yield from snapshot.membership.samples()


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
