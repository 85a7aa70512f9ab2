"""Cluster metadata and the connection pool shared by kiel's clients.

:class:`Cluster` bootstraps from a list of ``host[:port]`` strings, keeps a
snapshot of the brokers and partition leaders (Metadata v0, or v1 with a
broker that speaks it), routes requests
to leaders, refreshes metadata when an error says it is stale and every
``metadata_max_age`` seconds, and reconnects with exponential backoff and
jitter. Retries are always bounded and end in a typed error.

Each connection negotiates its API versions when it connects (see
:mod:`kiel.connection`), unless ``api_version`` pins a broker release; the
cluster remembers them per broker address, so reconnecting never asks again.
:meth:`Cluster.versions` tells a caller which version to build a request
with for one broker.
"""

import asyncio
import functools
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Sequence
from typing import (
    Any,
    NamedTuple,
    Optional,
    Union,
)

from tornado.ioloop import IOLoop

from kiel import _options
from kiel._aio import Tasks, Wakeup, within
from kiel.connection import Connection, tls_context
from kiel.exc import (
    ClientClosedError,
    ConfigError,
    KielError,
    NoBrokersError,
    UnknownPartitionError,
    UnknownTopicError,
    UnknownTopicOrPartitionError,
    for_code,
)
from kiel.metrics import ClientMetrics, RequestCounters
from kiel.protocol import (
    FindCoordinatorRequestV1,
    FindCoordinatorRequestV2,
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
    MetadataResponse,
)
from kiel.protocol.framing import DEFAULT_MAX_FRAME_SIZE
from kiel.protocol.group_coordinator import KEY_TYPE_GROUP
from kiel.protocol.metadata import (
    DEFAULT_MAX_METADATA_BROKERS,
    DEFAULT_MAX_METADATA_PARTITIONS,
    METADATA_SLICE,
    DeferredMetadataRequest,
    DeferredMetadataRequestV1,
    DeferredMetadataRequestV4,
    MetadataLimits,
    decode_metadata,
)
from kiel.protocol.versions import (
    GROUP_COORDINATOR,
    METADATA,
    Versions,
    check_api_version,
    for_broker_version,
)
from kiel.retry import Attempt, Backoff, attempts
from kiel.sasl import sasl_credentials

log = logging.getLogger(__name__)

DEFAULT_PORT = 9092
_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]+))(?::(?P<port>\d+))?$")


class BrokerInfo(NamedTuple):
    """A broker as the metadata describes it."""

    node_id: int
    host: str
    port: int


class PartitionInfo(NamedTuple):
    """A partition as the metadata describes it (``leader`` is -1 when there is none)."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int


class PartitionLists(NamedTuple):
    """A topic's partition ids as one metadata snapshot shows them, made
    while the answer is applied a slice at a time, so that a client with
    tables per partition (the producer's routes) need not walk a large
    topic's partitions in one step of the IOLoop."""

    #: The partition map these lists were made from (``Cluster.partitions[topic]``).
    snapshot: dict[int, PartitionInfo]
    #: Every partition id, ascending.
    all: list[int]
    #: The ids of the partitions that have a leader, ascending.
    available: list[int]


def parse_brokers(brokers: Union[str, Sequence[str]]) -> list[tuple[str, int]]:
    """Parse a bootstrap list.

    Args:
        brokers: ``["host", "host:port", "[::1]:9092", ...]`` or one
            comma-separated string of the same.

    Returns:
        ``[(host, port), ...]``, default port 9092.

    Raises:
        ConfigError: an empty list or a malformed entry.
    """
    if isinstance(brokers, str):
        items = brokers.split(",")
    elif isinstance(brokers, (list, tuple)):
        items = list(brokers)
    else:
        # bytes would list ints, None or a number fail in list(): say what to give.
        raise ConfigError("brokers must be 'host:port[,host:port...]' or a list of "
                          f"'host:port' strings, got {brokers!r}")
    result = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"broker address must be a string, got {item!r}")
        match = _HOST_PORT.match(item.strip())
        port = int(match.group("port")) if match and match.group("port") else DEFAULT_PORT
        if not match or not 0 < port < 65536:
            raise ConfigError(f"bad broker address {item!r}: expected host or host:port")
        result.append((match.group("v6") or match.group("host"), port))
    if not result:
        raise ConfigError("the broker list is empty")
    return result


#: Seconds of decoding or applying a Metadata answer before the IOLoop gets a turn.
_METADATA_STEP = 0.005


def _metadata_request(versions: Versions, topics: list[str], auto_create: bool = True,
                      existing: frozenset[str] = frozenset(),
                      listed: Optional[list[bool]] = None) -> Any:
    """The Metadata request for ``topics`` (``[]``: all) in the broker's
    version; its answer comes back undecoded, for :meth:`Cluster._decoded`.

    Args:
        versions: the broker's.
        topics: the topics to ask about (``[]``: every topic).
        auto_create: whether a broker that auto-creates topics may create
            the unknown ones named.
        existing: topics known to exist (naming them creates nothing).
        listed: told whether every topic was asked for instead of
            ``topics`` (``True`` appended), for :meth:`Cluster._apply`.

    Strategy: with ``auto_create`` false, Metadata v4+ says so to the
    broker; before v4 (Kafka 0.8 to 0.10) a broker that auto-creates
    creates every topic a request names, so a request that would name a
    topic not known to exist asks for every topic instead (as ``kiel
    topics`` does), and the caller keeps the ones it named.
    """
    version = versions.of(METADATA)
    if version >= 4:
        return DeferredMetadataRequestV4(topics or None, auto_create)
    if not auto_create and not existing.issuperset(topics):
        topics = []
        if listed is not None:
            listed.append(True)
    if version >= 1:
        # v1 asks for every topic with a null array; an empty one asks for none.
        return DeferredMetadataRequestV1(topics or None)
    return DeferredMetadataRequest(topics)


def _coordinator_request(versions: Versions, group: str) -> Any:
    """The request that finds ``group``'s coordinator, in the broker's version."""
    version = versions.get(GROUP_COORDINATOR) or 0
    if version >= 2:
        return FindCoordinatorRequestV2(group, KEY_TYPE_GROUP)
    if version >= 1:
        return FindCoordinatorRequestV1(group, KEY_TYPE_GROUP)
    return GroupCoordinatorRequest(group)


async def _sliced(steps: Generator[None, None, Any]) -> Any:
    """Run ``steps`` (a generator that yields between slices of its work) to
    its end, giving the IOLoop a turn whenever :data:`_METADATA_STEP` is spent.

    Returns:
        what the generator returned.
    """
    started = time.monotonic()
    try:
        while True:
            next(steps)
            if time.monotonic() - started > _METADATA_STEP:
                await asyncio.sleep(0)
                started = time.monotonic()
    except StopIteration as done:
        return done.value


def _broker_infos(response: MetadataResponse) -> Generator[None, None, dict[int, BrokerInfo]]:
    """The brokers of ``response`` by id, a slice at a time."""
    brokers: dict[int, BrokerInfo] = {}
    for i, b in enumerate(response.brokers):
        brokers[b.node_id] = BrokerInfo(b.node_id, b.host, b.port)
        if not i % METADATA_SLICE:
            yield
    return brokers


def _partition_infos(
    topics: Sequence[Any],
) -> Generator[None, None, dict[str, PartitionLists]]:
    """The partitions of each of ``topics`` (made by :func:`_partition_info`)
    by id, with their :class:`PartitionLists`, a slice at a time."""
    out: dict[str, PartitionLists] = {}
    for topic in topics:
        parts: dict[int, PartitionInfo] = {}
        ids: list[int] = []
        available: list[int] = []
        infos: list[PartitionInfo] = topic.partitions
        for i, info in enumerate(infos):
            parts[info.partition] = info
            ids.append(info.partition)
            if info.leader >= 0:
                available.append(info.partition)
            if not i % METADATA_SLICE:
                yield
        # Brokers list partitions in order: sorting sorted lists is one pass.
        ids.sort()
        yield
        available.sort()
        out[topic.topic] = PartitionLists(parts, ids, available)
        yield
    return out


def _partition_info(topic: str, error_code: int, partition_id: int, leader: int,
                    replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionInfo:
    """A partition's record, made by the Metadata decoder (no object between)."""
    return PartitionInfo(topic, partition_id, leader, replicas, isr, error_code)


def _partition_maker() -> Callable[[str, int, int, int, tuple[int, ...], tuple[int, ...]],
                                   PartitionInfo]:
    """A :func:`_partition_info` that keeps one tuple per distinct replica
    list: a cluster has few (its brokers' combinations) and a large answer
    many partitions, each of whose lists would otherwise be a tuple of its
    own to keep, and to free when the next answer replaces it."""
    shared: dict[tuple[int, ...], tuple[int, ...]] = {}
    one = shared.setdefault

    def make(topic: str, error_code: int, partition_id: int, leader: int,
             replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionInfo:
        return PartitionInfo(topic, partition_id, leader, one(replicas, replicas),
                             one(isr, isr), error_code)

    return make


class Cluster:
    """Metadata, leader routing and one connection per broker.

    Args:
        brokers: bootstrap list (see :func:`parse_brokers`).
        client_id: sent in request headers.
        ssl_options: deprecated name of ``ssl_context`` (warns).
        ssl_context: an ``ssl.SSLContext`` for TLS connections.
        sasl_mechanism: ``"PLAIN"``, ``"SCRAM-SHA-256"``, ``"SCRAM-SHA-512"``
            or ``"OAUTHBEARER"`` to authenticate every connection (:mod:`kiel.sasl`).
        sasl_username: the SASL user.
        sasl_password: the SASL password (never logged or shown).
        sasl_oauth_token_provider: OAUTHBEARER's token provider
            (:data:`kiel.sasl.TokenProvider`; the token is never logged or shown).
        connect_timeout: seconds per connection attempt, until it is ready
            for requests (TCP, TLS, ApiVersions and SASL together).
        request_timeout: default seconds per request, and the bound of
            :meth:`connect` as a whole.
        max_in_flight: pipelined requests per connection.
        metadata_max_age: refresh metadata at least this often (seconds).
        retry_backoff: first backoff delay (seconds); doubles up to ``max_backoff``.
        max_backoff: largest backoff delay (seconds).
        retries: how many times a retriable failure is retried before its
            typed error is raised.
        max_frame_size: the largest response a connection accepts (bytes).
        max_metadata_brokers: the most brokers one Metadata answer may list
            (default 10,000: far above any real cluster).
        max_metadata_partitions: the most partitions (and topics) one
            Metadata answer may hold (default 1,000,000). An answer past
            either bound, or with a negative broker or partition id, is
            refused with :class:`~kiel.exc.InvalidMetadataError` and the
            metadata known before it is kept.
        api_version: ``"auto"`` (default) asks each broker which versions
            it speaks (ApiVersions; a 0.8 broker closes the connection and
            gets the 0.8.2 versions); a broker release such as ``(0, 8, 2)``
            or ``(2, 8)`` pins the versions of that release and asks nothing
            (kafka-python's meaning).
        allow_auto_create_topics: whether a broker that auto-creates topics
            may create one this cluster's Metadata requests name (see
            :attr:`auto_create_topics`).

    Raises:
        ConfigError: a bad setting (durations are seconds, and positive).
    """

    @_options.constructor
    def __init__(
        self,
        brokers: Union[str, Sequence[str]],
        *,
        client_id: str = "kiel",
        ssl_options: Any = None,
        ssl_context: Any = None,
        sasl_mechanism: Optional[str] = None,
        sasl_username: Optional[str] = None,
        sasl_password: Optional[str] = None,
        sasl_oauth_token_provider: Any = None,
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        max_in_flight: int = 64,
        metadata_max_age: float = 300.0,
        retry_backoff: float = 0.1,
        max_backoff: float = 5.0,
        retries: int = 5,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_metadata_brokers: int = DEFAULT_MAX_METADATA_BROKERS,
        max_metadata_partitions: int = DEFAULT_MAX_METADATA_PARTITIONS,
        api_version: Any = "auto",
        allow_auto_create_topics: bool = True,
    ) -> None:
        self.bootstrap = parse_brokers(brokers)
        #: Whether a broker that auto-creates topics may create one a Metadata
        #: request names. False: Metadata v4+ asks the broker not to (an
        #: unknown topic is then UnknownTopicError); an older broker is asked
        #: for every topic whenever a request would name one not known to
        #: exist. The consumers set it false, the producer keeps it true
        #: unless told otherwise.
        self.auto_create_topics = _options.flag("allow_auto_create_topics",
                                                allow_auto_create_topics)
        release = check_api_version(api_version)
        self.api_version = api_version
        #: The versions every connection speaks when ``api_version`` is pinned.
        self.pinned_versions: Optional[Versions] = (
            None if release is None else for_broker_version(release)
        )
        #: Negotiated versions by broker address ``(host, port)``.
        self.known_versions: dict[tuple[str, int], Versions] = {}
        connect_timeout = _options.real("connect_timeout", connect_timeout, above=0)
        request_timeout = _options.real("request_timeout", request_timeout, above=0)
        metadata_max_age = _options.real("metadata_max_age", metadata_max_age, above=0)
        retry_backoff = _options.real("retry_backoff", retry_backoff, above=0)
        max_backoff = _options.real("max_backoff", max_backoff, at_least=retry_backoff)
        retries = _options.integer("retries", retries)
        max_in_flight = _options.integer("max_in_flight", max_in_flight, at_least=1)
        max_frame_size = _options.integer("max_frame_size", max_frame_size, at_least=1024)
        max_metadata_brokers = _options.integer("max_metadata_brokers", max_metadata_brokers,
                                               at_least=1)
        max_metadata_partitions = _options.integer(
            "max_metadata_partitions", max_metadata_partitions, at_least=1)
        client_id = _options.text("client_id", client_id)
        #: What one Metadata answer may hold.
        self.metadata_limits = MetadataLimits(max_metadata_brokers, max_metadata_partitions)
        self.client_id, self.ssl_options = client_id, tls_context(ssl_context, ssl_options)
        self.sasl = sasl_credentials(sasl_mechanism, sasl_username, sasl_password,
                                     sasl_oauth_token_provider)
        self.connect_timeout, self.request_timeout = connect_timeout, request_timeout
        self.max_in_flight, self.max_frame_size = max_in_flight, max_frame_size
        self.metadata_max_age = metadata_max_age
        self.backoff = Backoff(retry_backoff, max_backoff, retries)
        self.brokers: dict[int, BrokerInfo] = {}
        self.partitions: dict[str, dict[int, PartitionInfo]] = {}
        #: Each topic's partition ids as of its entry in :attr:`partitions`
        #: (made with it; check ``snapshot`` before use).
        self.partition_lists: dict[str, PartitionLists] = {}
        #: The last topic-level error code of each topic (0: none).
        self.topic_errors: dict[str, int] = {}
        self._connections: dict[Any, Connection] = {}
        #: Every connection's requests: latency and errors by API.
        self.request_metrics = RequestCounters()
        self._topics: set[str] = set()
        self._tasks = Tasks("kiel-cluster")
        self._refreshing: Optional[asyncio.Task[None]] = None
        self._metadata_time = 0.0
        #: Why the last round of send_any() found no broker (connect() tells it).
        self._last_failures = ""
        self._closed = False
        # Fired by close(): retry delays end at once instead of running out.
        self._closing = Wakeup()

    # ------------------------------------------------------------------
    # connections

    def _new_connection(self, host: str, port: int, broker_id: Optional[int]) -> Connection:
        return Connection(
            host,
            port,
            broker_id=broker_id,
            client_id=self.client_id,
            connect_timeout=self.connect_timeout,
            request_timeout=self.request_timeout,
            max_in_flight=self.max_in_flight,
            ssl_options=self.ssl_options,
            max_frame_size=self.max_frame_size,
            versions=self.pinned_versions,
            known_versions=self.known_versions,
            metrics=self.request_metrics,
            sasl=self.sasl,
        )

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def metrics(self) -> ClientMetrics:
        """Requests answered and failed so far, and the open connections.

        Returns:
            a :class:`~kiel.metrics.ClientMetrics` snapshot.
        """
        return ClientMetrics(**self.metric_fields())

    def metric_fields(self) -> dict[str, Any]:
        """The fields of :class:`~kiel.metrics.ClientMetrics`, for the clients' snapshots."""
        counters = self.request_metrics
        return {
            "requests": {api: s.snapshot() for api, s in counters.latency.items()},
            "request_errors": dict(counters.errors),
            "connections": self.open_connections(),
        }

    def open_connections(self) -> int:
        """How many of the pooled connections are connected now."""
        return sum(1 for conn in self._connections.values() if conn.connected)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the cluster client is closed")

    async def _retry_sleep(self, delay: float) -> None:
        # The pause between retries, cut short by close() (the retry loop then
        # raises ClientClosedError instead of making another attempt).
        if not self._closed:
            await self._closing.wait(delay)

    def connection(self, broker_id: int, lane: str = "") -> Connection:
        """The live connection to ``broker_id``, replacing a closed one.

        Args:
            broker_id: the broker.
            lane: ``""`` for the shared connection; another name for a
                connection of its own. Strategy: a broker answers the
                requests of one connection in order, so a group member's
                heartbeats, joins and commits (lane ``"group"``) would wait
                behind the fetcher's long polls on the shared one.

        Raises:
            NoBrokersError: the broker is not in the metadata.
        """
        self._check_open()
        key: Any = (lane, broker_id) if lane else broker_id
        conn = self._connections.get(key)
        if conn is None or conn.closed:
            info = self.brokers.get(broker_id)
            if info is None:
                raise NoBrokersError(
                    f"broker {broker_id} is not in the cluster metadata", broker_id=broker_id
                )
            conn = self._connections[key] = self._new_connection(
                info.host, info.port, broker_id
            )
        return conn

    async def versions(self, broker_id: int) -> Versions:
        """The API versions to speak with broker ``broker_id`` (connecting to it if needed).

        Returns:
            the connection's :class:`~kiel.protocol.versions.Versions`
            (negotiated, remembered, or pinned).

        Raises:
            NoBrokersError: the broker is not in the metadata.
            KielConnectionError, ConnectTimeoutError: it cannot be reached.
        """
        conn = self.connection(broker_id)
        await conn.connect()
        assert conn.versions is not None  # set by connect()
        return conn.versions

    def highest_known(self, api_key: int) -> Optional[int]:
        """The highest version of ``api_key`` a broker of this cluster is known to speak.

        Known without a request: the pinned ``api_version``, or the versions
        negotiated so far (after :meth:`connect`, at least a bootstrap
        broker's).

        Returns:
            the version, -1 when the known brokers share none with kiel, or
            ``None`` when nothing is known yet.
        """
        known = [self.pinned_versions] if self.pinned_versions is not None else list(
            self.known_versions.values()
        )
        if not known:
            return None
        return max((-1 if v.get(api_key) is None else v.of(api_key)) for v in known)

    async def send(
        self, broker_id: int, request: Any, timeout: Optional[float] = None, lane: str = ""
    ) -> Any:
        """Send ``request`` to broker ``broker_id`` (one attempt).

        Args:
            broker_id: the broker.
            request: the request.
            timeout: seconds to wait for the answer (default: the request timeout).
            lane: the connection to use (see :meth:`connection`).

        Raises:
            KielConnectionError, RequestTimeoutError: the attempt failed; the
                caller decides whether to refresh metadata and retry.
        """
        return await self.connection(broker_id, lane).send(request, timeout=timeout)

    async def send_any(
        self, request: Union[Any, Callable[[Versions], Any]], timeout: Optional[float] = None
    ) -> Any:
        """Send ``request`` to any reachable broker (known brokers, then bootstrap).

        Args:
            request: a request, or a function that builds it from the
                versions of the broker it goes to.
            timeout: seconds to wait for the response.

        Raises:
            NoBrokersError: every broker failed; the message lists why.
        """
        self._check_open()
        errors = []
        candidates: list[tuple[Any, str, int, Optional[int]]] = [
            (b.node_id, b.host, b.port, b.node_id) for b in self.brokers.values()
        ]
        random.shuffle(candidates)
        boot = [(("bootstrap", h, p), h, p, None) for h, p in self.bootstrap]
        random.shuffle(boot)
        # Open connections first: they are the cheapest to use.
        candidates.sort(
            key=lambda c: not (c[0] in self._connections and self._connections[c[0]].connected)
        )
        for key, host, port, broker_id in candidates + boot:
            # close() may have run while the previous candidate was tried:
            # never open a connection for a closed cluster.
            self._check_open()
            conn = self._connections.get(key)
            if conn is None or conn.closed:
                conn = self._connections[key] = self._new_connection(host, port, broker_id)
            try:
                if callable(request):
                    await conn.connect()
                    assert conn.versions is not None  # set by connect()
                    return await conn.send(request(conn.versions), timeout=timeout)
                return await conn.send(request, timeout=timeout)
            except KielError as e:
                if not e.retriable:
                    raise
                errors.append(f"{host}:{port}: {e}")
        self._last_failures = "; ".join(errors)  # for connect()'s deadline
        raise NoBrokersError("no broker answered: " + "; ".join(errors))

    # ------------------------------------------------------------------
    # metadata

    async def connect(self) -> None:
        """Load the metadata from the bootstrap brokers, within ``request_timeout``.

        The bootstrap brokers are tried in turn (each connection attempt,
        TCP, TLS, ApiVersions and SASL together, bounded by
        ``connect_timeout``), and the list again with backoff, up to
        ``retries`` times; the whole ends within ``request_timeout``,
        however many brokers and retries that leaves room for (with the
        defaults, a port that accepts and never answers is tried three
        times in 30 s).

        Raises:
            NoBrokersError: no bootstrap broker answered within
                ``request_timeout``, or the retries ran out sooner; the
                message says why each failed.
            ProtocolError: a broker answered something that is not Kafka
                (:class:`~kiel.exc.NotKafkaError` names what it looks like).
        """
        self._check_open()
        if self._refreshing is None or self._refreshing.done():
            # Its callers receive its error (quiet: not logged a second time).
            self._refreshing = self._tasks.spawn(
                self._bootstrap(), "metadata refresh", quiet=(KielError,)
            )
        await asyncio.shield(self._refreshing)

    async def _bootstrap(self) -> None:
        """The first metadata refresh, bounded by ``request_timeout`` as a whole.

        Raises:
            NoBrokersError: not done in time, with the last round's failures.
        """
        self._last_failures = ""
        try:
            await within(self._refresh(), self.request_timeout)
        except asyncio.TimeoutError as e:
            # The attempt cut short leaves no connection half-open behind it.
            for conn in list(self._connections.values()):
                if not conn.connected:
                    conn.close()
            why = f": {self._last_failures}" if self._last_failures else ""
            raise NoBrokersError(
                f"no bootstrap broker answered within {self.request_timeout}s "
                f"(request_timeout){why}") from e

    @property
    def metadata_age(self) -> float:
        """Seconds since the last successful metadata refresh."""
        return IOLoop.current().time() - self._metadata_time

    async def refresh_metadata(self, topics: Iterable[str] = ()) -> None:
        """Fetch fresh metadata (for the known topics plus ``topics``).

        Concurrent callers share one request. Retried with backoff.

        Raises:
            NoBrokersError: no broker answered within the retries.
            ClientClosedError: the cluster is (or was meanwhile) closed.
        """
        self._check_open()
        self._topics.update(topics)
        if self._refreshing is None or self._refreshing.done():
            # Its callers receive its error (quiet: not logged a second time).
            self._refreshing = self._tasks.spawn(
                self._refresh(), "metadata refresh", quiet=(KielError,)
            )
        await asyncio.shield(self._refreshing)

    async def _refresh(self) -> None:
        async for attempt in self._attempts():
            # An empty list asks for every topic. Once a topic is named, keep
            # every topic we know about in the request so none goes stale.
            topics = sorted(self._topics | set(self.partitions)) if self._topics else []
            listed: list[bool] = []
            try:
                answer = await self.send_any(functools.partial(
                    _metadata_request, topics=topics, auto_create=self.auto_create_topics,
                    existing=self._existing(), listed=listed))
            except NoBrokersError as e:
                attempt.failed(e)
                continue
            response = await self._decoded(answer)
            await self._apply(response, topics if listed and topics else None)
            return

    def _existing(self) -> frozenset[str]:
        """The topics the last answers showed with partitions: naming them
        in a request creates nothing."""
        return frozenset(t for t, parts in self.partitions.items() if parts)

    def _attempts(self) -> AsyncIterator[Attempt]:
        """The retry loop of this cluster: its backoff, stopped by :meth:`close`."""
        return attempts(self.backoff, closed=lambda: self._closed, sleep=self._retry_sleep)

    async def _decoded(self, answer: Any) -> MetadataResponse:
        """Decode a Metadata answer a slice at a time, within
        :attr:`metadata_limits`, giving the IOLoop a turn every few
        milliseconds.

        Raises:
            InvalidMetadataError: the answer breaks the bounds or holds
                impossible ids.
            ProtocolError: it does not decode.
        """
        steps = decode_metadata(answer, self.metadata_limits, _partition_maker())
        response: MetadataResponse = await _sliced(steps)
        return response

    async def _apply(self, response: MetadataResponse,
                     named: Optional[list[str]] = None) -> None:
        """Make ``response`` the metadata (its topics'): built a slice at a
        time, then swapped in at once, so nobody sees half of it.

        Args:
            response: the decoded answer.
            named: when every topic was asked for in place of these (an
                older broker, see :func:`_metadata_request`), the topics
                wanted: only these are kept, and one the answer leaves out
                does not exist. ``None``: the answer's topics are kept.
        """
        topics = response.topics
        if named is not None:
            wanted = set(named)
            topics = [t for t in topics if t.topic in wanted]
        brokers = await _sliced(_broker_infos(response))
        partitions = await _sliced(_partition_infos(topics))
        self.brokers = brokers
        for broker_id, conn in list(self._connections.items()):
            info = self.brokers.get(broker_id) if isinstance(broker_id, int) else None
            if isinstance(broker_id, int) and (
                info is None or (info.host, info.port) != (conn.host, conn.port)
            ):
                conn.close()
                del self._connections[broker_id]
        if named is not None:
            for name in set(named) - {t.topic for t in topics}:
                self.topic_errors[name] = UnknownTopicOrPartitionError.errno
                self.partitions.pop(name, None)
                self.partition_lists.pop(name, None)
        for topic in topics:
            self.topic_errors[topic.topic] = topic.error_code
            if topic.partitions:
                lists = partitions[topic.topic]
                self.partitions[topic.topic] = lists.snapshot
                self.partition_lists[topic.topic] = lists
            elif topic.error_code:
                self.partitions.pop(topic.topic, None)
                self.partition_lists.pop(topic.topic, None)
        self._metadata_time = IOLoop.current().time()

    async def all_topics(self) -> dict[str, int]:
        """Every topic of the cluster and its partition count (one Metadata
        request for all topics, retried; the answer also refreshes what this
        cluster knows).

        Raises:
            NoBrokersError: no broker answered within the retries.
            ClientClosedError: the cluster is closed.
        """
        self._check_open()
        async for attempt in self._attempts():
            try:
                answer = await self.send_any(functools.partial(_metadata_request, topics=[]))
            except NoBrokersError as e:
                attempt.failed(e)
                continue
            response = await self._decoded(answer)
            await self._apply(response)
            return {t.topic: len(t.partitions) for t in response.topics
                    if t.partitions and not t.error_code}
        raise AssertionError("attempts() ended without success or error")  # pragma: no cover

    async def maybe_refresh(self) -> None:
        """Refresh if the metadata is older than ``metadata_max_age``."""
        if self.metadata_age > self.metadata_max_age:
            await self.refresh_metadata()

    async def partitions_for(self, topic: str) -> list[int]:
        """The partition ids of ``topic``, loading its metadata if needed.

        A topic being auto-created answers LeaderNotAvailable first; that is
        retried with backoff.

        Raises:
            UnknownTopicError: the cluster has no such topic.
            BrokerError: another topic-level error persisted past the retries.
            ClientClosedError: the cluster was closed meanwhile.
        """
        await self.maybe_refresh()
        if topic not in self._topics or topic not in self.topic_errors:
            await self.refresh_metadata([topic])
        async for attempt in self._attempts():
            if attempt.number:
                await self.refresh_metadata([topic])
            parts = self.partitions.get(topic)
            if parts:
                return sorted(parts)
            attempt.failed(self._topic_error(topic))
        raise AssertionError("attempts() ended without success or error")  # pragma: no cover

    def _topic_error(self, topic: str) -> KielError:
        """Why ``topic`` has no partitions in the metadata just read.

        Returns:
            a retriable error (LeaderNotAvailable while a topic is created).

        Raises:
            UnknownTopicError: the answer is definitive (no retry helps).
            BrokerError: a topic-level error that retrying cannot fix.
        """
        code = self.topic_errors.get(topic, UnknownTopicOrPartitionError.errno)
        error = for_code(code)
        if error is None or issubclass(error, UnknownTopicOrPartitionError):
            # Topic-level UnknownTopicOrPartition right after a refresh is
            # definitive on 0.8 (auto-creation would answer LeaderNotAvailable).
            raise UnknownTopicError("unknown topic", topic=topic)
        failure = error(errno=code, topic=topic)
        if not failure.retriable:
            raise failure
        return failure

    def leader(self, topic: str, partition: int) -> int:
        """The leader's broker id for a partition, or -1 if it has none right now.

        Raises:
            UnknownTopicError, UnknownPartitionError: not in the metadata.
        """
        parts = self.partitions.get(topic)
        if parts is None:
            raise UnknownTopicError("unknown topic", topic=topic)
        info = parts.get(partition)
        if info is None:
            raise UnknownPartitionError("unknown partition", topic=topic, partition=partition)
        return info.leader

    async def group_coordinator(self, group: str) -> int:
        """The broker id of ``group``'s coordinator, strictly (for a broker group).

        Unlike :meth:`coordinator`, an error is raised, not answered with
        any broker: a group's membership requests must reach its one
        coordinator.

        Raises:
            BrokerError: the broker's answer (coordinator not available:
                retriable).
            NoBrokersError: no broker answered.
        """
        response: GroupCoordinatorResponse = await self.send_any(
            functools.partial(_coordinator_request, group=group)
        )
        cls = for_code(response.error_code)
        if cls is not None:
            raise cls(api="FindCoordinator", group=group, errno=response.error_code)
        info = BrokerInfo(response.coordinator_id, response.host, response.port)
        if self.brokers.get(info.node_id) != info:
            self.brokers[info.node_id] = info
        return info.node_id

    async def coordinator(self, group: str) -> int:
        """The broker id of ``group``'s coordinator (GroupCoordinator v0, or
        FindCoordinator v1 or v2 with a broker that speaks it).

        0.8.1 brokers lack the API and close the connection; then, and when
        the coordinator is not available, any broker is returned, since a 0.8
        broker serves v0 offsets from ZooKeeper on every broker.

        Raises:
            NoBrokersError: no broker is known.
        """
        try:
            response: GroupCoordinatorResponse = await self.send_any(
                functools.partial(_coordinator_request, group=group)
            )
        except KielError as e:
            log.info("GroupCoordinator for %r failed (%s); using any broker", group, e)
            response = None  # type: ignore[assignment]
        if response is not None and for_code(response.error_code) is None:
            info = BrokerInfo(response.coordinator_id, response.host, response.port)
            known = self.brokers.get(info.node_id)
            if known is None or known != info:
                self.brokers[info.node_id] = info
            return info.node_id
        if not self.brokers:
            await self.refresh_metadata()
        if not self.brokers:
            raise NoBrokersError("no broker is known", group=group)
        return random.choice(sorted(self.brokers))

    def close(self) -> None:
        """Close every connection; further use raises :class:`ClientClosedError`.

        A refresh that is retrying stops at once and its callers get
        :class:`ClientClosedError`.
        """
        self._closed = True
        self._closing.fire()
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
