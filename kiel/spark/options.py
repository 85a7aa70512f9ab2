"""Parse the string options of the ``kiel`` Spark data source.

Pure Python (no pyspark, no I/O): options arrive as strings (keys
case-insensitive, like Spark's), and every bad one raises
:class:`~kiel.exc.ConfigError` with a message naming the option, at planning
time, before any task runs.

Three kinds of keys, so that a configuration copied from Spark's Kafka source
runs once its format is changed to ``kiel``:

* the source's and sink's own options (``subscribe``, ``startingOffsets``,
  ``topic``...), Spark's names first; an unknown one is refused;
* ``kafka.*`` keys, which Spark passes to the Java client: those kiel can
  honour are mapped to kiel's settings (the ``*_SETTINGS`` tables below, one
  row per setting with every spelling of it); the others are accepted, with
  one warning per key naming it on the ``kiel.spark.options`` logger each
  time the options are parsed, that is when Spark asks for a reader or a
  writer while it plans a query (it plans in Python workers, where a log
  record reaches the console and Python's ``warnings`` would not);
* a few options of Spark's source that kiel has no use for
  (:data:`SPARK_ONLY`): accepted with the same warning.

TLS and SASL keys (``kafka.security.protocol``, ``kafka.sasl.*``,
``kafka.ssl.*``) are rows of :data:`CLIENT_SETTINGS` too, parsed and checked
together by :mod:`kiel.spark.security`; secrets never reach a ``repr()``, a
log line or a message.

Two spellings of one setting (``kafka.group.id`` and ``groupId``) must agree.

Offsets travel as JSON, as in Spark's Kafka source::

    {"topic": {"0": 23, "1": -2}}     # -2: earliest, -1: latest
"""

import json
import logging
import pickle
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from re import Pattern
from typing import (
    Any,
    NamedTuple,
    Optional,
    Union,
)

from kiel.cluster import Cluster
from kiel.exc import ConfigError
from kiel.spark import security
from kiel.spark.security import SaslLogin, TlsSettings

__all__ = [
    "CLIENT_SETTINGS",
    "EARLIEST",
    "LATEST",
    "SINK_SETTINGS",
    "SOURCE_SETTINGS",
    "SINK_REFUSED",
    "SOURCE_REFUSED",
    "SPARK_ONLY",
    "OffsetSpec",
    "Setting",
    "SinkOptions",
    "SourceOptions",
    "Timestamps",
    "include_headers",
    "offsets_from_dict",
    "offsets_from_json",
    "offsets_to_json",
]

log = logging.getLogger(__name__)

#: Symbolic offsets inside per-partition JSON (Spark's convention).
LATEST = -1
EARLIEST = -2

_INT32 = 2**31 - 1
_INT64 = 2**63 - 1


class Timestamps(NamedTuple):
    """A position given as a time (epoch milliseconds), resolved by ListOffsets.

    Attributes:
        option: the option it came from, for messages.
        every: one time for every partition (``startingTimestamp``), or None.
        by_partition: ``{topic: {partition: ms}}`` naming every subscribed
            partition (``startingOffsetsByTimestamp``), or None.
    """

    option: str
    every: Optional[int]
    by_partition: Optional[dict[str, dict[int, int]]]


#: ``"earliest"``, ``"latest"``, ``{topic: {partition: offset or -2/-1}}``, or
#: :class:`Timestamps`.
OffsetSpec = Union[str, dict[str, dict[int, int]], Timestamps]

# ----------------------------------------------------------------------
# value parsers: (option name, raw string) -> value, or ConfigError


def _text(name: str, raw: str) -> str:
    text = raw.strip()
    if not text:
        raise ConfigError(f"option {name} must not be empty")
    return text


def _integer(low: int, high: int) -> Callable[[str, str], int]:
    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(f"option {name} must be an integer, got {raw!r}") from None
        if not low <= value <= high:
            raise ConfigError(f"option {name} must be in [{low}, {high}], got {value}")
        return value

    return parse


def _millis(low: int, high: int) -> Callable[[str, str], float]:
    """Milliseconds in the option, seconds in kiel."""
    whole = _integer(low, high)
    return lambda name, raw: whole(name, raw) / 1000.0


def _boolean(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"option {name} must be 'true' or 'false', got {raw!r}")
    return text == "true"


def _choice(mapping: Mapping[str, Any]) -> Callable[[str, str], Any]:
    def parse(name: str, raw: str) -> Any:
        text = raw.strip().lower()
        if text not in mapping:
            raise ConfigError(f"option {name} must be one of {', '.join(mapping)}, got {raw!r}")
        return mapping[text]

    return parse


_DURATION = re.compile(r"(\d+)\s*(us|ms|s|m|min|h|d)?")
_UNIT_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0,
                 "d": 86400.0}


def _duration(name: str, raw: str) -> float:
    """Spark's time strings (``15m``, ``30s``, ``500ms``; a bare number is ms), in seconds."""
    match = _DURATION.fullmatch(raw.strip().lower())
    if match is None:
        raise ConfigError(f"option {name} must be a duration such as 30s, 15m or 500ms, "
                          f"got {raw!r}")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2) or "ms"]


def _anything(name: str, raw: str) -> None:
    """A setting kiel satisfies by design: nothing to set."""


def _idle(name: str, raw: str) -> float:
    """``kafka.connections.max.idle.ms`` in seconds; -1 (no limit) as infinity."""
    ms = _integer(-1, _INT64)(name, raw)
    return float("inf") if ms == -1 else ms / 1000.0


def _isolation(name: str, raw: str) -> bool:
    """``kafka.isolation.level``: ``read_uncommitted`` (every record a
    broker serves, the Java client's default) or ``read_committed`` (only
    committed transactions' records, reads planned up to the last stable
    offset). Returns whether it is read_committed."""
    level = _choice({"read_uncommitted": "read_uncommitted",
                     "read_committed": "read_committed"})(name, raw)
    return level == "read_committed"


# ----------------------------------------------------------------------
# the tables: every option that sets something, with all its spellings


class Setting(NamedTuple):
    """One setting and the option names that set it.

    Attributes:
        attr: the :class:`SourceOptions`/:class:`SinkOptions` field it sets
            (None: checked, but kiel has nothing to set).
        names: its spellings, ``kafka.*`` (the Java client's name) first.
        parse: ``parse(name, raw) -> value``; raises ConfigError.
    """

    attr: Optional[str]
    names: tuple[str, ...]
    parse: Callable[[str, str], Any]


#: Settings of every kiel client (source and sink).
CLIENT_SETTINGS: tuple[Setting, ...] = (
    Setting("brokers", ("kafka.bootstrap.servers", "brokers"), _text),
    Setting("client_id", ("kafka.client.id", "clientId"), _text),
    Setting("request_timeout", ("kafka.request.timeout.ms", "requestTimeoutMs"),
            _millis(1, 600_000)),
    Setting("connect_timeout", ("kafka.socket.connection.setup.timeout.ms",), _millis(1, _INT32)),
    Setting("metadata_max_age", ("kafka.metadata.max.age.ms",), _millis(1, _INT32)),
    Setting("retry_backoff", ("kafka.retry.backoff.ms",), _millis(1, _INT32)),
    Setting("max_backoff", ("kafka.retry.backoff.max.ms",), _millis(1, _INT32)),
    Setting("retries", ("kafka.retries",), _integer(0, _INT32)),
    # Security (checked together by kiel.spark.security.check_security).
    Setting("security_protocol", ("kafka.security.protocol",), security.security_protocol),
    Setting("sasl_mechanism", ("kafka.sasl.mechanism",), security.sasl_mechanism),
    Setting("sasl_jaas", ("kafka.sasl.jaas.config",), security.parse_jaas),
    Setting("ssl_truststore_location", ("kafka.ssl.truststore.location",), _text),
    Setting("ssl_truststore_type", ("kafka.ssl.truststore.type",), security.store_type),
    Setting("ssl_truststore_certificates", ("kafka.ssl.truststore.certificates",), _text),
    Setting("ssl_keystore_location", ("kafka.ssl.keystore.location",), _text),
    Setting("ssl_keystore_type", ("kafka.ssl.keystore.type",), security.store_type),
    Setting("ssl_key_password", ("kafka.ssl.key.password",), security.secret),
    Setting("ssl_check_hostname", ("kafka.ssl.endpoint.identification.algorithm",),
            security.endpoint_identification),
    Setting(None, ("kafka.ssl.keystore.key",), security.inline_key),
    Setting(None, ("kafka.ssl.keystore.certificate.chain",), security.inline_key),
    # How long a worker keeps an unused client (kiel.spark.worker); -1: no limit.
    Setting("connections_max_idle", ("kafka.connections.max.idle.ms",), _idle),
)

#: Settings of reads (``spark.read``/``spark.readStream``).
SOURCE_SETTINGS: tuple[Setting, ...] = CLIENT_SETTINGS + (
    Setting("group_id", ("kafka.group.id", "groupId"), _text),
    Setting("fetch_max_wait", ("kafka.fetch.max.wait.ms", "fetchMaxWaitMs"), _millis(0, 60_000)),
    Setting("fetch_max_bytes", ("kafka.max.partition.fetch.bytes", "fetchMaxBytes"),
            _integer(1, _INT32)),
    Setting("max_fetch_size", ("kafka.fetch.max.bytes", "maxFetchSize"), _integer(1, _INT32)),
    Setting("include_headers", ("includeHeaders",), _boolean),
    Setting("fail_on_data_loss", ("failOnDataLoss",), _boolean),
    Setting("min_partitions", ("minPartitions",), _integer(1, 1_000_000)),
    Setting("max_records_per_partition", ("maxRecordsPerPartition",), _integer(1, _INT64)),
    Setting("read_committed", ("kafka.isolation.level",), _isolation),
    Setting("max_offsets_per_trigger", ("maxOffsetsPerTrigger",), _integer(1, _INT64)),
    Setting("min_offsets_per_trigger", ("minOffsetsPerTrigger",), _integer(1, _INT64)),
    Setting("max_trigger_delay", ("maxTriggerDelay",), _duration),
    Setting("starting_strategy", ("startingOffsetsByTimestampStrategy",),
            _choice({"error": "error", "latest": "latest"})),
)

#: Settings of writes (``df.write``/``df.writeStream``).
SINK_SETTINGS: tuple[Setting, ...] = CLIENT_SETTINGS + (
    Setting("topic", ("topic",), _text),
    Setting("acks", ("kafka.acks", "acks"), _choice({"all": -1, "-1": -1, "0": 0, "1": 1})),
    Setting("compression", ("kafka.compression.type", "compression"),
            _choice({"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4"})),
    Setting("linger_ms", ("kafka.linger.ms", "lingerMs"), _integer(0, 60_000)),
    Setting("batch_size", ("kafka.batch.size", "batchSize"), _integer(1, _INT32)),
    Setting("max_request_size", ("kafka.max.request.size",), _integer(1, _INT32)),
    Setting("max_pending_bytes", ("kafka.buffer.memory",), _integer(1, _INT64)),
    Setting("buffer_timeout", ("kafka.max.block.ms",), _millis(0, _INT64)),
    Setting("include_headers", ("includeHeaders",), _boolean),
)

#: ``kafka.*`` keys Spark's Kafka source refuses (its integration guide, "Kafka
#: Specific Configurations"), each with the reason, in kiel's words.
SOURCE_REFUSED: dict[str, str] = {
    "kafka.auto.offset.reset": (
        "where a read starts is the source's startingOffsets (or a stream's "
        "checkpoint), never the consumer's reset policy, so that no record is skipped; "
        "set startingOffsets to earliest or latest instead"),
    "kafka.enable.auto.commit": (
        "the source never commits on the consumer's behalf: a stream's position is its "
        "checkpoint (with groupId, kiel commits processed offsets after each micro-batch)"),
    "kafka.key.deserializer": (
        "keys are always read as bytes; turn them into other types with DataFrame "
        "operations (CAST(key AS STRING), from_json)"),
    "kafka.value.deserializer": (
        "values are always read as bytes; turn them into other types with DataFrame "
        "operations (CAST(value AS STRING), from_json)"),
    "kafka.interceptor.classes": (
        "an interceptor may change or drop records before the source sees them, which "
        "breaks the query's offsets and results"),
}

#: ``kafka.*`` keys Spark's Kafka sink refuses, with the reason.
SINK_REFUSED: dict[str, str] = {
    "kafka.key.serializer": (
        "keys are written as bytes (a string column as UTF-8); serialize them with "
        "DataFrame operations (CAST, to_json) into a string or binary key column"),
    "kafka.value.serializer": (
        "values are written as bytes (a string column as UTF-8); serialize them with "
        "DataFrame operations (CAST, to_json) into a string or binary value column"),
}

#: Options of Spark's Kafka source that kiel accepts and ignores (with a warning).
SPARK_ONLY: frozenset[str] = frozenset({
    "groupidprefix", "kafkaconsumer.polltimeoutms", "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
})

#: Why a common key is ignored, appended to its warning.
_HINTS = {
    "kafka.enable.idempotence": "Kafka 0.8 has no idempotent producer: writes are at-least-once",
    "kafka.partitioner.class": "keys are hashed with murmur2, as the Java default partitioner does",
    "kafka.fetch.min.bytes": "each fetch returns as soon as any data is there",
    "kafkaconsumer.polltimeoutms": "tasks fetch with kafka.request.timeout.ms",
    "fetchoffset.numretries": "offset lookups retry kafka.retries times",
    "fetchoffset.retryintervalms": "offset lookups back off by kafka.retry.backoff.ms",
    "groupidprefix": "kiel reads without joining a consumer group",
    "kafka.ssl.truststore.password": "a PEM trust store has no password",
    "kafka.ssl.keystore.password": "a PEM key store has none; the key's is kafka.ssl.key.password",
}

#: Client keyword arguments passed only when an option set them (kiel's defaults otherwise).
_CLIENT_KWARGS = ("connect_timeout", "metadata_max_age", "retry_backoff", "max_backoff", "retries")

# ----------------------------------------------------------------------
# reading the tables


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _read_settings(options: Mapping[str, str], settings: tuple[Setting, ...],
                   structural: frozenset[str], what: str,
                   refused: Mapping[str, str], quiet: bool = False) -> dict[str, Any]:
    """Parse every option the table knows; refuse unknown ones; warn about ignored ones.

    Args:
        options: the options as Spark passed them.
        settings: the table of the source or the sink.
        structural: other known option names (lowercase), parsed by the caller.
        what: "kiel source" or "kiel sink", for messages.
        refused: ``kafka.*`` keys refused whatever their value, with why.
        quiet: log no warning (a check before the options are parsed for use).

    Returns:
        ``{attr: value}`` for every setting some option set.

    Raises:
        ConfigError: a malformed value, two spellings that disagree, or an
            unknown option outside ``kafka.*``.
    """
    opts = _lower(options)
    for key, why in refused.items():
        if key in opts:
            raise ConfigError(f"option {key} is not supported (as in Spark's Kafka {what[5:]}): "
                              f"{why}")
    values: dict[str, Any] = {}
    for setting in settings:
        found = [(name, setting.parse(name, opts[name.lower()]))
                 for name in setting.names if name.lower() in opts]
        if len({value for _name, value in found}) > 1:
            spelled = " and ".join(f"{name}={opts[name.lower()]!r}" for name, _ in found)
            raise ConfigError(f"options {spelled} set the same thing differently")
        if found and setting.attr is not None:
            values[setting.attr] = found[0][1]
    known = {name.lower() for setting in settings for name in setting.names} | structural
    extra = [key for key in options if str(key).lower() not in known]
    unknown = sorted(k for k in extra if not _ignorable(str(k).lower(), what))
    if unknown:
        names = sorted({n for s in settings for n in s.names if not n.startswith("kafka.")})
        raise ConfigError(
            f"unknown {what} option(s) {', '.join(unknown)}; known: {', '.join(names)}, "
            "the offset options and kafka.* client settings"
        )
    values["ignored"] = _warn_ignored(extra, quiet)
    return values


def _ignorable(key: str, what: str) -> bool:
    return key.startswith("kafka.") or (key in SPARK_ONLY and what == "kiel source")


def _warn_ignored(keys: list[str], quiet: bool = False) -> tuple[str, ...]:
    """Log one warning per ignored key (keys differing only in case are one
    key; none when ``quiet``)."""
    seen: dict[str, str] = {}
    for key in keys:
        lowered = str(key).lower()
        if lowered in seen:
            continue
        seen[lowered] = str(key)
        if quiet:
            continue
        hint = _HINTS.get(lowered)
        log.warning("kiel.spark ignores option %s: kiel cannot honour it%s",
                    key, f" ({hint})" if hint else "")
    return tuple(seen.values())


def _client_kwargs(values: dict[str, Any]) -> dict[str, Any]:
    """The optional Client settings, with the backoff bounds made consistent.

    Like the Java client, a ``retry.backoff.max.ms`` below ``retry.backoff.ms``
    makes the maximum a constant backoff; a ``retry.backoff.ms`` alone above
    kiel's default maximum raises the maximum to it.
    """
    out = {k: values[k] for k in _CLIENT_KWARGS if k in values}
    base, cap = out.get("retry_backoff"), out.get("max_backoff")
    if base is not None and cap is not None and cap < base:
        out["retry_backoff"] = cap
    elif base is not None and cap is None:
        default_cap = (Cluster.__init__.__kwdefaults__ or {}).get("max_backoff", base)
        out["max_backoff"] = max(base, default_cap)
    return out


def include_headers(options: Mapping[str, str]) -> bool:
    """The ``includeHeaders`` option alone (what the schema depends on).

    Raises:
        ConfigError: neither true nor false.
    """
    raw = _lower(options).get("includeheaders")
    return False if raw is None else _boolean("includeHeaders", raw)


# ----------------------------------------------------------------------
# offsets


def offsets_from_json(text: str, what: str, allowed: tuple[int, ...]) -> dict[str, dict[int, int]]:
    """Parse ``{"topic": {"0": 23}}``.

    Args:
        text: the JSON text.
        what: the option name, for messages.
        allowed: the negative symbolic offsets allowed (subset of -2, -1).

    Returns:
        ``{topic: {partition: offset}}``.

    Raises:
        ConfigError: not that shape, a bad partition or offset.
    """
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"option {what} is neither earliest/latest nor JSON: {e}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"option {what} must be a JSON object {{topic: {{partition: offset}}}}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict) or not parts:
            raise ConfigError(f"option {what}: topic {topic!r} needs {{partition: offset}}")
        for p, o in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise ConfigError(f"option {what}: bad partition {p!r} of {topic!r}") from None
            if partition < 0:
                raise ConfigError(f"option {what}: bad partition {p!r} of {topic!r}")
            if not isinstance(o, int) or isinstance(o, bool) or (o < 0 and o not in allowed):
                raise ConfigError(
                    f"option {what}: offset for {topic}/{partition} must be >= 0"
                    + (f" or one of {allowed}" if allowed else "")
                    + f", got {o!r}"
                )
            out.setdefault(topic, {})[partition] = o
    return out


def offsets_to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """``{(topic, partition): offset}`` as the JSON-able checkpoint dict."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_dict(data: Mapping[str, Any]) -> dict[tuple[str, int], int]:
    """The inverse of :func:`offsets_to_json` (what Spark hands back from a checkpoint)."""
    return {
        (topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()
    }


def _position(opts: dict[str, str], names: tuple[str, str, str], default: str,
              allowed: tuple[int, ...]) -> OffsetSpec:
    """The position set by the first present of ``(xTimestamp, xOffsetsByTimestamp,
    xOffsets)``: Spark's precedence, the others are ignored as in Spark."""
    by_time, by_partition_time, by_offset = names
    if by_time.lower() in opts:
        every = _integer(0, _INT64)(by_time, opts[by_time.lower()])
        return Timestamps(by_time, every, None)
    if by_partition_time.lower() in opts:
        times = offsets_from_json(opts[by_partition_time.lower()], by_partition_time, ())
        return Timestamps(by_partition_time, None, times)
    raw = opts.get(by_offset.lower())
    if raw is None:
        return default
    if raw.strip().lower() in ("earliest", "latest"):
        return raw.strip().lower()
    return offsets_from_json(raw.strip(), by_offset, allowed)


_STARTING = ("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets")
_ENDING = ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets")
#: The settings only a stream uses: a batch read checks, then ignores them (as Spark).
_STREAM_ONLY_ATTRS = ("max_offsets_per_trigger", "min_offsets_per_trigger", "max_trigger_delay")
_SOURCE_STRUCTURE = frozenset(
    n.lower() for n in ("subscribe", "subscribePattern", "assign", "path") + _STARTING + _ENDING
)


def _check_positions(opts: dict[str, str], starting: OffsetSpec,
                     streaming: Optional[bool]) -> None:
    """The rules that depend on batch vs. streaming (Spark's); none when the
    mode is not known yet (``streaming`` None)."""
    if streaming:
        for name in _ENDING:
            if name.lower() in opts:
                raise ConfigError(f"option {name} is for batch reads only")
        return
    if streaming is None:
        return
    if starting == "latest":
        raise ConfigError("option startingOffsets='latest' is for streaming reads only")
    if isinstance(starting, dict):
        for topic, parts in starting.items():
            if LATEST in parts.values():
                raise ConfigError(
                    f"option startingOffsets: -1 (latest) for {topic} is for streaming only"
                )


def _subscription(opts: dict[str, str]) -> dict[str, Any]:
    """``topics``, ``pattern`` or ``assign``: exactly one of the three options."""
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(chosen) != 1:
        raise ConfigError(
            "exactly one of the options subscribe, subscribePattern, assign is required"
            + (f"; got {', '.join(chosen)}" if chosen else "")
        )
    if chosen[0] == "subscribe":
        topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not topics:
            raise ConfigError("option subscribe must list topics, comma-separated")
        return {"topics": topics}
    if chosen[0] == "subscribepattern":
        try:
            return {"pattern": re.compile(opts["subscribepattern"])}
        except re.error as e:
            raise ConfigError(f"option subscribePattern is not a regex: {e}") from None
    try:
        data = json.loads(opts["assign"])
    except ValueError as e:
        raise ConfigError(f"option assign is not JSON: {e}") from None
    if not isinstance(data, dict) or not data or not all(
        isinstance(ps, list) and ps and all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in ps)
        for ps in data.values()
    ):
        raise ConfigError(
            f'option assign must be JSON {{"topic": [partition, ...]}}, got {opts["assign"]!r}'
        )
    return {"assign": {str(t): sorted(set(ps)) for t, ps in data.items()}}


# ----------------------------------------------------------------------
# the parsed options


@dataclass
class _ClientOptions:
    """What every kiel client of the data source is given.

    Attributes:
        brokers: the bootstrap list.
        client_id: sent in request headers.
        request_timeout: seconds per request.
        connect_timeout, metadata_max_age, retry_backoff, max_backoff, retries:
            the :class:`~kiel.client.Client` settings, None where no option set
            them (kiel's defaults apply).
        ignored: the options accepted but not honoured (each was logged).
        tls: the TLS settings (None: no TLS); each client builds its
            :class:`ssl.SSLContext` from them (:func:`kiel.spark.security.ssl_context`).
        sasl: the SASL mechanism and credentials (None: no SASL); the
            password is not in ``repr()``.
        connections_max_idle: seconds a worker keeps a client nobody used
            (``kafka.connections.max.idle.ms``, the Java default 9 minutes).
    """

    brokers: str
    client_id: str = "kiel-spark"
    request_timeout: float = 30.0
    connect_timeout: Optional[float] = None
    metadata_max_age: Optional[float] = None
    retry_backoff: Optional[float] = None
    max_backoff: Optional[float] = None
    retries: Optional[int] = None
    ignored: tuple[str, ...] = ()
    tls: Optional[TlsSettings] = None
    sasl: Optional[SaslLogin] = None
    connections_max_idle: float = 540.0

    def client_key(self) -> bytes:
        """What identifies a client these options make (to keep one per worker).

        The settings a client is made from, pickled: two option sets with
        the same key make the same client (secrets included, so a
        different password never shares one).
        """
        return pickle.dumps((self.brokers, self.client_id, self.request_timeout,
                             *(getattr(self, k) for k in _CLIENT_KWARGS), self.tls, self.sasl))

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for a kiel client (a new ``ssl_context`` each call).

        Raises:
            ConfigError: a TLS file became unreadable since the options were parsed.
        """
        values = {k: getattr(self, k) for k in _CLIENT_KWARGS if getattr(self, k) is not None}
        out = {"client_id": self.client_id, "request_timeout": self.request_timeout,
               **_client_kwargs(values)}
        if self.tls is not None:
            out["ssl_context"] = security.ssl_context(self.tls)
        if self.sasl is not None:
            out.update(self.sasl.client_options())
        return out


def _require_brokers(values: dict[str, Any]) -> None:
    if "brokers" not in values:
        raise ConfigError("option kafka.bootstrap.servers (or brokers) is required")


def _security(values: dict[str, Any], options: Mapping[str, str]) -> None:
    """Replace the security settings in ``values`` by ``tls`` and ``sasl``."""
    values["tls"], values["sasl"] = security.check_security(values, _lower(options))


@dataclass
class SourceOptions(_ClientOptions):
    """The read options, checked.

    Attributes:
        topics / pattern / assign: exactly one is set.
        starting: where a new query (or a batch read) starts: ``"earliest"``,
            ``"latest"``, per-partition JSON or :class:`Timestamps`.
        ending: where a batch read ends (``"latest"``, JSON or :class:`Timestamps`).
        starting_strategy: ``"error"`` (fail) or ``"latest"`` when no record
            is at or after a starting timestamp.
        max_offsets_per_trigger: records per micro-batch at most (None: no cap).
        min_offsets_per_trigger: hold a micro-batch back until this many
            records wait, or ``max_trigger_delay`` seconds passed since the last.
        min_partitions: at least this many Spark partitions (None: one per
            Kafka partition range).
        max_records_per_partition: at most this many offsets per Spark
            partition (None: no bound); ranges are split first by this, then
            by ``min_partitions``, as Spark's source does.
        fail_on_data_loss: fail when offsets a query should read were deleted
            (else skip ahead with a warning).
        fetch_max_bytes, max_fetch_size, fetch_max_wait: a task's fetches:
            the most bytes one asks for, how far one may grow for a large
            message, how long a broker may hold one (seconds).
        group_id: commit processed offsets to this group (OffsetCommit v0).
        include_headers: add Spark's ``headers`` column.
        read_committed: ``kafka.isolation.level=read_committed``: fetches
            with isolation 1, aborted transactions' records skipped, and the
            ends planned by (``latest``) are the last stable offsets.
        raw: the options, keys lowercased, secrets (the JAAS line, passwords)
            replaced by ``<hidden>``.
    """

    topics: Optional[list[str]] = None
    pattern: Optional[Pattern[str]] = None
    assign: Optional[dict[str, list[int]]] = None
    starting: OffsetSpec = "latest"
    ending: OffsetSpec = "latest"
    starting_strategy: str = "error"
    max_offsets_per_trigger: Optional[int] = None
    min_offsets_per_trigger: Optional[int] = None
    max_trigger_delay: float = 15 * 60.0
    min_partitions: Optional[int] = None
    max_records_per_partition: Optional[int] = None
    fail_on_data_loss: bool = True
    fetch_max_bytes: int = 1024 * 1024
    max_fetch_size: int = 16 * 1024 * 1024
    fetch_max_wait: float = 0.5
    group_id: Optional[str] = None
    include_headers: bool = False
    read_committed: bool = False
    raw: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: Optional[bool]) -> "SourceOptions":
        """Check ``options`` for a batch (``streaming=False``) or streaming read.

        ``streaming=None`` is the check when the source is loaded, before
        Spark says which it is: every option's value and every rule that
        holds in both modes, quietly (the ignored keys are logged once the
        options are parsed for the read itself).

        Stream-only options (``maxOffsetsPerTrigger``,
        ``minOffsetsPerTrigger``, ``maxTriggerDelay``) are checked, then
        ignored by a batch read, as Spark's source ignores them.

        Returns:
            the checked options.

        Raises:
            ConfigError: a missing, unknown, malformed, conflicting or
                refused option.
        """
        values = _read_settings(options, SOURCE_SETTINGS, _SOURCE_STRUCTURE, "kiel source",
                                SOURCE_REFUSED, quiet=streaming is None)
        _require_brokers(values)
        _security(values, options)
        opts = _lower(options)
        starting = _position(opts, _STARTING, "earliest" if streaming is False else "latest",
                             (EARLIEST, LATEST))
        _check_positions(opts, starting, streaming)
        ending = _position(opts, _ENDING, "latest", (LATEST,))
        if ending == "earliest":
            raise ConfigError("option endingOffsets cannot be 'earliest'")
        low, high = values.get("min_offsets_per_trigger"), values.get("max_offsets_per_trigger")
        if low is not None and high is not None and low > high:
            raise ConfigError(f"option minOffsetsPerTrigger ({low}) is above "
                              f"maxOffsetsPerTrigger ({high})")
        if streaming is False:
            for attr in _STREAM_ONLY_ATTRS:
                values.pop(attr, None)
        _fetch_sizes(values)
        return cls(**values, **_subscription(opts), starting=starting, ending=ending,
                   raw=security.mask(opts))


def _fetch_sizes(values: dict[str, Any]) -> None:
    """Fill in the fetch sizes: a larger message may grow a fetch up to
    ``max_fetch_size``, which must hold at least ``fetch_max_bytes``."""
    per_fetch, largest = values.get("fetch_max_bytes"), values.get("max_fetch_size")
    if per_fetch is not None and largest is not None and largest < per_fetch:
        raise ConfigError(f"option maxFetchSize ({largest}) must be >= fetchMaxBytes "
                          f"({per_fetch})")
    if largest is None:
        values["max_fetch_size"] = max(16 * 1024 * 1024, per_fetch or 0)
    elif per_fetch is None:
        values["fetch_max_bytes"] = min(1024 * 1024, largest)


@dataclass
class SinkOptions(_ClientOptions):
    """The write options, checked.

    Attributes:
        topic: the topic of every row (Spark's rule: it overrides a ``topic``
            column); None: each row's ``topic`` column.
        acks: the producer's ``required_acks`` (-1, 0 or 1; default -1, "all").
        compression: None, gzip, snappy or lz4.
        linger_ms, batch_size, max_request_size, max_pending_bytes,
            buffer_timeout: producer settings (the last three None where no
            option set them).
        include_headers: accepted as Spark's sink does; a row's non-empty
            ``headers`` cannot be written to Kafka 0.8 either way.
    """

    topic: Optional[str] = None
    acks: int = -1
    compression: Optional[str] = None
    linger_ms: int = 5
    batch_size: int = 64 * 1024
    max_request_size: Optional[int] = None
    max_pending_bytes: Optional[int] = None
    buffer_timeout: Optional[float] = None
    include_headers: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SinkOptions":
        """Check the write ``options``.

        Returns:
            the checked options.

        Raises:
            ConfigError: a missing, unknown, malformed or conflicting option.
        """
        values = _read_settings(options, SINK_SETTINGS, frozenset({"path", "checkpointlocation"}),
                                "kiel sink", SINK_REFUSED)
        _require_brokers(values)
        _security(values, options)
        return cls(**values)

    def producer_options(self) -> dict[str, Any]:
        """Keyword arguments for the :class:`~kiel.producer.Producer` of a write task."""
        optional = {"max_request_size": self.max_request_size,
                    "max_pending_bytes": self.max_pending_bytes,
                    "buffer_timeout": self.buffer_timeout}
        return {
            "required_acks": self.acks,
            "compression": self.compression,
            # Spark and Kafka spell it in milliseconds; the Producer takes seconds.
            "linger": self.linger_ms / 1000,
            "batch_size": self.batch_size,
            **{k: v for k, v in optional.items() if v is not None},
            **self.client_options(),
        }
