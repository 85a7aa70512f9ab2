"""The producer's settings, checked: what :class:`~kiel.producer.Producer`'s
constructor refuses (a :class:`~kiel.exc.ConfigError`) and what it derives
(the codec, the batches in flight, idempotence on or off by Java 3.x's rules).
"""

import logging
from typing import Optional

from kiel import _options
from kiel import compression as codecs
from kiel.exc import ConfigError
from kiel.producer.idempotence import MAX_IN_FLIGHT, Idempotence
from kiel.protocol.messages import MESSAGE_OVERHEAD

__all__ = [
    "MAX_REQUEST_SIZE",
    "check_ack_timeout",
    "check_acks",
    "check_idempotence",
    "check_sizes",
    "compression_id",
    "linger_seconds",
    "make_codec",
    "positive_int",
]

log = logging.getLogger(__name__)


def compression_id(name: Optional[str]) -> int:
    """Map a ``compression=`` setting to a codec id.

    Args:
        name: ``None``, ``"none"``, ``"gzip"``, ``"snappy"`` or ``"lz4"``.

    Returns:
        the codec id.

    Raises:
        ConfigError: anything else.
    """
    if name is None:
        return codecs.NONE
    if not isinstance(name, str):
        raise ConfigError(f"compression must be a codec name or None, got {name!r}")
    return codecs.codec_id_for(name)


def make_codec(codec_id: int, gzip_level: int) -> Optional[codecs.Codec]:
    if codec_id == codecs.GZIP:
        return codecs.get_codec(codec_id, level=gzip_level)
    if codec_id == codecs.LZ4:
        return codecs.get_codec(codec_id, magic=0)
    if codec_id != codecs.NONE:
        return codecs.get_codec(codec_id)
    return None


def check_idempotence(idempotent: Optional[bool], required_acks: int,
                       max_batches_in_flight: Optional[int]
                       ) -> tuple[Optional[Idempotence], int, int]:
    """Java 3.x's rules: idempotent by default where it can be, off (said
    once) where the application asked for what it cannot give, an error
    where the application asked for both.

    Returns:
        the idempotence state (``None``: off), the batches in flight per
        partition, and that number when idempotence turns out off at connect
        (a Kafka 0.8 broker).

    Raises:
        ConfigError: a bad value, or ``idempotent=True`` with acks other
            than -1 or more than 5 batches in flight.
    """
    if idempotent is not None and type(idempotent) is not bool:
        raise ConfigError(f"idempotent must be None, True or False, got {idempotent!r}")
    if max_batches_in_flight is not None:
        max_batches_in_flight = _options.integer(
            "max_batches_in_flight", max_batches_in_flight, at_least=1)
    if idempotent is True:
        if required_acks != -1:
            raise ConfigError(
                f"idempotent=True needs required_acks=-1 (every in-sync replica), "
                f"got required_acks={required_acks}: a batch only one replica has may be "
                "lost, and its retry written as new")
        if max_batches_in_flight is not None and max_batches_in_flight > MAX_IN_FLIGHT:
            raise ConfigError(
                f"idempotent=True allows at most {MAX_IN_FLIGHT} batches in flight per "
                f"partition (the broker remembers the last {MAX_IN_FLIGHT}), got "
                f"max_batches_in_flight={max_batches_in_flight}")
    if idempotent is None:
        why = None
        if required_acks != -1:
            why = f"required_acks={required_acks} (it needs -1)"
        elif max_batches_in_flight is not None and max_batches_in_flight > MAX_IN_FLIGHT:
            why = f"max_batches_in_flight={max_batches_in_flight} (it allows {MAX_IN_FLIGHT})"
        if why is not None:
            log.info("producer: idempotence is off because of %s; a batch retried after a "
                     "lost answer may be written twice", why)
            idempotent = False
    if idempotent is False:
        plain = 1 if max_batches_in_flight is None else max_batches_in_flight
        return None, plain, plain
    in_flight = MAX_IN_FLIGHT if max_batches_in_flight is None else max_batches_in_flight
    plain = 1 if max_batches_in_flight is None else max_batches_in_flight
    return Idempotence(required=idempotent is True), in_flight, plain


def check_acks(required_acks: int) -> int:
    if required_acks not in (-1, 0, 1) or isinstance(required_acks, bool):
        raise ConfigError(f"required_acks must be -1, 0 or 1, got {required_acks!r}")
    return required_acks


def check_ack_timeout(ack_timeout: Optional[float], required_acks: int,
                       request_timeout: float) -> float:
    if ack_timeout is None:
        ack_timeout = request_timeout / 2
    # The broker takes it as an int32 of milliseconds.
    ack_timeout = _options.real("ack_timeout", ack_timeout, at_least=0, most=(2**31 - 1) / 1000)
    if required_acks == -1 and ack_timeout >= request_timeout:
        raise ConfigError(
            f"ack_timeout ({ack_timeout}s) must be shorter than request_timeout "
            f"({request_timeout}s): the broker may take that long to answer"
        )
    return ack_timeout


#: The largest request a Kafka frame can carry (its size is an int32), less
#: room for the request's header and per-partition fields.
MAX_REQUEST_SIZE = 2**31 - 1 - 64 * 1024


def check_sizes(batch_size: int, max_request_size: int, max_message_size: int,
                 max_pending_bytes: int) -> None:
    """Size settings that could never work together.

    Raises:
        ConfigError: a request larger than a frame can carry, a record
            ``max_message_size`` allows that no request could carry, a
            batch larger than any request, or a buffer smaller than one
            record.
    """
    if max_request_size > MAX_REQUEST_SIZE:
        raise ConfigError(
            f"max_request_size={max_request_size} is larger than any Kafka request can be "
            f"({MAX_REQUEST_SIZE} bytes: a frame's size is an int32)")
    if max_request_size < max_message_size:
        raise ConfigError(
            f"max_request_size={max_request_size} is smaller than max_message_size="
            f"{max_message_size}: a record produce() accepts could never be sent "
            "(lower max_message_size too)")
    if batch_size > max_request_size:
        raise ConfigError(
            f"batch_size={batch_size} is larger than max_request_size={max_request_size}: "
            "a full batch could not go in any request")
    if max_pending_bytes < MESSAGE_OVERHEAD:
        raise ConfigError(
            f"max_pending_bytes={max_pending_bytes} is below one record (the smallest takes "
            f"{MESSAGE_OVERHEAD} bytes)")


def positive_int(name: str, value: int) -> int:
    return _options.integer(name, value, at_least=1)


def linger_seconds(linger: Optional[float], linger_ms: Optional[float]) -> float:
    """``linger`` in seconds, from ``linger`` or the deprecated ``linger_ms``."""
    if linger is not None and linger_ms is not None:
        raise ConfigError("give linger (seconds) or the deprecated linger_ms, not both")
    name, value = ("linger", linger) if linger_ms is None else ("linger_ms", linger_ms)
    if value is None:
        return 0.0
    # NaN once passed "value < 0" and every batch then waited for ever.
    checked = _options.real(name, value, at_least=0,
                            unit="seconds" if name == "linger" else "milliseconds")
    if name == "linger":
        return checked
    _options.deprecated(
        "linger_ms is deprecated: give linger in seconds (linger_ms=5 is linger=0.005)")
    return checked / 1000.0
