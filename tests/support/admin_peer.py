"""confluent-kafka's AdminClient as the judge of kiel.admin.Admin: helpers
that run one of its calls on the same broker and give back what it
answered, as plain values and Kafka error codes (0: no error)."""
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

TIMEOUT = 30.0


_CLIENTS: dict[str, AdminClient] = {}


def peer(bootstrap: str) -> AdminClient:
    """The confluent-kafka AdminClient on ``bootstrap`` (one per address, kept
    for the session: a client collected while a future is pending ends it
    with "Handle is terminating")."""
    if bootstrap not in _CLIENTS:
        _CLIENTS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap,
                                           "socket.timeout.ms": 10000})
    return _CLIENTS[bootstrap]


def outcome(future: Any) -> tuple[int, Any]:
    """``(0, result)`` or ``(kafka error code, message)`` of one of its futures."""
    try:
        return 0, future.result(timeout=TIMEOUT)
    except KafkaException as e:
        error = e.args[0]
        return error.code(), error.str()


def outcomes(futures: dict) -> dict:
    """Every future's :func:`outcome`, by key."""
    return {key: outcome(f) for key, f in futures.items()}


def code(value: Any) -> int:
    """A kiel result's Kafka error code (0: a result, not an error)."""
    return int(getattr(value, "errno", 0)) if isinstance(value, Exception) else 0
