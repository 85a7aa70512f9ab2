"""Parse the string options of the ``kiel`` Spark data source.

Pure Python (no pyspark): options arrive as strings (keys case-insensitive,
like Spark's), and every bad one raises :class:`~kiel.exc.ConfigError` with a
message naming the option, at planning time, before any task runs.

Offsets travel as JSON, as in Spark's Kafka source::

    {"topic": {"0": 23, "1": -2}}     # -2: earliest, -1: latest
"""

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Pattern, Tuple, Union

from kiel.exc import ConfigError

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "SinkOptions",
    "SourceOptions",
    "offsets_from_json",
    "offsets_to_json",
]

#: Symbolic offsets inside per-partition JSON (Spark's convention).
LATEST = -1
EARLIEST = -2

#: ``"earliest"``, ``"latest"``, or ``{topic: {partition: offset or -2/-1}}``.
OffsetSpec = Union[str, Dict[str, Dict[int, int]]]

_SOURCE_KEYS = {
    "kafka.bootstrap.servers",
    "brokers",
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "maxoffsetspertrigger",
    "minpartitions",
    "failondataloss",
    "fetchmaxbytes",
    "maxfetchsize",
    "fetchmaxwaitms",
    "requesttimeoutms",
    "groupid",
    "clientid",
    "path",
}
_SINK_KEYS = {
    "kafka.bootstrap.servers",
    "brokers",
    "topic",
    "acks",
    "kafka.acks",
    "compression",
    "kafka.compression.type",
    "lingerms",
    "batchsize",
    "requesttimeoutms",
    "clientid",
    "path",
    "checkpointlocation",
}


def _lower(options: Mapping[str, str]) -> Dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _int(opts: Dict[str, str], key: str, default: Optional[int], low: int,
         high: int = 2**63 - 1) -> Optional[int]:
    raw = opts.get(key.lower())
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"option {key} must be an integer, got {raw!r}") from None
    if not low <= value <= high:
        raise ConfigError(f"option {key} must be in [{low}, {high}], got {value}")
    return value


def _bool(opts: Dict[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"option {key} must be 'true' or 'false', got {raw!r}")
    return text == "true"


def _brokers(opts: Dict[str, str]) -> str:
    brokers = opts.get("kafka.bootstrap.servers") or opts.get("brokers")
    if not brokers or not brokers.strip():
        raise ConfigError("option kafka.bootstrap.servers (or brokers) is required")
    return brokers.strip()


def _unknown(opts: Dict[str, str], known: set, what: str) -> None:
    unknown = sorted(k for k in opts if k not in known)
    if unknown:
        raise ConfigError(
            f"unknown {what} option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )


def offsets_from_json(text: str, what: str, allowed: Tuple[int, ...]) -> Dict[str, Dict[int, int]]:
    """Parse ``{"topic": {"0": 23}}``.

    Args:
        text: the JSON text.
        what: the option name, for messages.
        allowed: the negative symbolic offsets allowed (subset of -2, -1).

    Raises:
        ConfigError: not that shape, a bad partition or offset.
    """
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"option {what} is neither earliest/latest nor JSON: {e}") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"option {what} must be a JSON object {{topic: {{partition: offset}}}}")
    out: Dict[str, Dict[int, int]] = {}
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


def offsets_to_json(offsets: Mapping[Tuple[str, int], int]) -> Dict[str, Dict[str, int]]:
    """``{(topic, partition): offset}`` as the JSON-able checkpoint dict."""
    out: Dict[str, Dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_dict(data: Mapping[str, Any]) -> Dict[Tuple[str, int], int]:
    """The inverse of :func:`offsets_to_json` (what Spark hands back from a checkpoint)."""
    return {
        (topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()
    }


def _offset_spec(opts: Dict[str, str], key: str, default: str,
                 allowed: Tuple[int, ...]) -> OffsetSpec:
    raw = opts.get(key.lower())
    if raw is None:
        return default
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    return offsets_from_json(text, key, allowed)


@dataclass
class SourceOptions:
    """The read options, checked.

    Attributes:
        brokers: the bootstrap list.
        topics / pattern / assign: exactly one is set.
        starting: where a new query (or a batch read) starts.
        ending: where a batch read ends (``"latest"`` or per-partition JSON).
        max_offsets_per_trigger: records per micro-batch at most (None: no cap).
        min_partitions: at least this many Spark partitions (None: one per
            Kafka partition range).
        fail_on_data_loss: fail when offsets a query should read were deleted
            (else skip ahead with a warning).
        fetch_max_bytes, max_fetch_size, fetch_max_wait: the consumer's fetch
            settings (``max_bytes``, ``max_fetch_size``, ``max_wait_time``).
        request_timeout: seconds per request.
        group_id: commit processed offsets to this group (OffsetCommit v0).
        client_id: sent in request headers.
    """

    brokers: str
    topics: Optional[List[str]] = None
    pattern: Optional[Pattern[str]] = None
    assign: Optional[Dict[str, List[int]]] = None
    starting: OffsetSpec = "latest"
    ending: OffsetSpec = "latest"
    max_offsets_per_trigger: Optional[int] = None
    min_partitions: Optional[int] = None
    fail_on_data_loss: bool = True
    fetch_max_bytes: int = 1024 * 1024
    max_fetch_size: int = 16 * 1024 * 1024
    fetch_max_wait: float = 0.5
    request_timeout: float = 30.0
    group_id: Optional[str] = None
    client_id: str = "kiel-spark"
    raw: Dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> "SourceOptions":
        """Check ``options`` for a batch (``streaming=False``) or streaming read.

        Raises:
            ConfigError: a missing, unknown or malformed option.
        """
        opts = _lower(options)
        _unknown(opts, _SOURCE_KEYS, "kiel source")
        brokers = _brokers(opts)
        chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
        if len(chosen) != 1:
            raise ConfigError(
                "exactly one of the options subscribe, subscribePattern, assign is required"
                + (f"; got {', '.join(chosen)}" if chosen else "")
            )
        topics = pattern = assign = None
        if chosen[0] == "subscribe":
            topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
            if not topics:
                raise ConfigError("option subscribe must list topics, comma-separated")
        elif chosen[0] == "subscribepattern":
            try:
                pattern = re.compile(opts["subscribepattern"])
            except re.error as e:
                raise ConfigError(f"option subscribePattern is not a regex: {e}") from None
        else:
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
                    'option assign must be JSON {"topic": [partition, ...]}, got '
                    f"{opts['assign']!r}"
                )
            assign = {str(t): sorted(set(ps)) for t, ps in data.items()}
        starting = _offset_spec(
            opts, "startingOffsets", "latest" if streaming else "earliest", (EARLIEST, LATEST)
        )
        if "endingoffsets" in opts and streaming:
            raise ConfigError("option endingOffsets is for batch reads only")
        ending = _offset_spec(opts, "endingOffsets", "latest", (LATEST,))
        if ending == "earliest":
            raise ConfigError("option endingOffsets cannot be 'earliest'")
        if "maxoffsetspertrigger" in opts and not streaming:
            raise ConfigError("option maxOffsetsPerTrigger is for streaming reads only")
        if not streaming and starting == "latest":
            raise ConfigError("option startingOffsets='latest' is for streaming reads only")
        if isinstance(starting, dict) and not streaming:
            for topic, parts in starting.items():
                if LATEST in parts.values():
                    raise ConfigError(
                        f"option startingOffsets: -1 (latest) for {topic} is for streaming only"
                    )
        group_id = opts.get("groupid")
        if group_id is not None and not group_id.strip():
            raise ConfigError("option groupId must not be empty")
        fetch_max_bytes = _int(opts, "fetchMaxBytes", 1024 * 1024, 1, 2**31 - 1)
        max_fetch_size = _int(opts, "maxFetchSize", max(16 * 1024 * 1024, fetch_max_bytes or 0),
                              1, 2**31 - 1)
        assert fetch_max_bytes is not None and max_fetch_size is not None
        if max_fetch_size < fetch_max_bytes:
            raise ConfigError(
                f"option maxFetchSize ({max_fetch_size}) must be >= fetchMaxBytes "
                f"({fetch_max_bytes})"
            )
        wait_ms = _int(opts, "fetchMaxWaitMs", 500, 0, 60_000)
        timeout_ms = _int(opts, "requestTimeoutMs", 30_000, 1, 600_000)
        assert wait_ms is not None and timeout_ms is not None
        return cls(
            brokers=brokers,
            topics=topics,
            pattern=pattern,
            assign=assign,
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", None, 1),
            min_partitions=_int(opts, "minPartitions", None, 1, 1_000_000),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            fetch_max_bytes=fetch_max_bytes,
            max_fetch_size=max_fetch_size,
            fetch_max_wait=wait_ms / 1000.0,
            request_timeout=timeout_ms / 1000.0,
            group_id=group_id,
            client_id=opts.get("clientid", "kiel-spark"),
            raw=opts,
        )

    def client_options(self) -> Dict[str, Any]:
        """Keyword arguments for a kiel client."""
        return {"client_id": self.client_id, "request_timeout": self.request_timeout}


@dataclass
class SinkOptions:
    """The write options, checked.

    Attributes:
        brokers: the bootstrap list.
        topic: the topic for rows whose ``topic`` column is null or absent.
        acks: the producer's ``required_acks`` (-1, 0 or 1; default -1, "all").
        compression: None, gzip, snappy or lz4.
        linger_ms, batch_size, request_timeout, client_id: producer settings.
    """

    brokers: str
    topic: Optional[str] = None
    acks: int = -1
    compression: Optional[str] = None
    linger_ms: float = 5.0
    batch_size: int = 64 * 1024
    request_timeout: float = 30.0
    client_id: str = "kiel-spark"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> "SinkOptions":
        """Check the write ``options``.

        Raises:
            ConfigError: a missing, unknown or malformed option.
        """
        opts = _lower(options)
        _unknown(opts, _SINK_KEYS, "kiel sink")
        brokers = _brokers(opts)
        acks_raw = (opts.get("acks") or opts.get("kafka.acks") or "-1").strip().lower()
        acks_map = {"all": -1, "-1": -1, "0": 0, "1": 1}
        if acks_raw not in acks_map:
            raise ConfigError(f"option acks must be all, -1, 0 or 1, got {acks_raw!r}")
        compression = (opts.get("compression") or opts.get("kafka.compression.type") or "none")
        compression = compression.strip().lower()
        if compression not in ("none", "gzip", "snappy", "lz4"):
            raise ConfigError(
                f"option compression must be none, gzip, snappy or lz4, got {compression!r}"
            )
        topic = opts.get("topic")
        if topic is not None and not topic.strip():
            raise ConfigError("option topic must not be empty")
        linger = _int(opts, "lingerMs", 5, 0, 60_000)
        batch_size = _int(opts, "batchSize", 64 * 1024, 1, 2**31 - 1)
        timeout_ms = _int(opts, "requestTimeoutMs", 30_000, 1, 600_000)
        assert linger is not None and batch_size is not None and timeout_ms is not None
        return cls(
            brokers=brokers,
            topic=topic.strip() if topic else None,
            acks=acks_map[acks_raw],
            compression=None if compression == "none" else compression,
            linger_ms=float(linger),
            batch_size=batch_size,
            request_timeout=timeout_ms / 1000.0,
            client_id=opts.get("clientid", "kiel-spark"),
        )
