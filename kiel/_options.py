"""Typed checks for the clients' options: one place that says what a
number, an int, a string or a flag option must be, and which names a
client takes at all.

Every client checks its options when it is built, so a bad one fails at
construction with a :class:`~kiel.exc.ConfigError` naming it rather than
later inside the I/O (``linger=nan`` once made every batch wait for ever:
``nan`` compares false with everything, so range checks written as
``value < 0`` let it through). Hence these checks are written so that
only a value that *passes* is accepted: NaN and infinity fail them, and a
bool is not a number (``True`` is an ``int`` to Python, never a timeout
to kiel).

The call itself is checked too, before Python binds it (:func:`constructor`
on the clients' ``__init__``, :func:`options_checked` on kiel.admin's
functions): another client's option name (aiokafka's ``bootstrap_servers``
and ``group_id``, kafka-python's, confluent-kafka's dotted ones, kiel 0.9's)
is a :class:`~kiel.exc.ConfigError` that says kiel's spelling, or what to do
when kiel has none, even when the call lacks a required argument; an
argument given by position where it must be named is an
:class:`~kiel.exc.ArgumentError` that says the name to write.
"""

import functools
import inspect
import math
import numbers
import os
import sys
import warnings
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, TypeVar

from kiel.exc import ArgumentError, ConfigError

if TYPE_CHECKING:
    from typing_extensions import ParamSpec

    _P = ParamSpec("_P")

__all__ = ["constructor", "deprecated", "flag", "integer", "optional", "options_checked",
           "real", "text", "unknown"]

T = TypeVar("T")
_R = TypeVar("_R")


def real(name: str, value: Any, *, at_least: Optional[float] = None,
         above: Optional[float] = None, most: Optional[float] = None,
         unit: str = "seconds") -> float:
    """A finite real number (not a bool) within the bounds given.

    Args:
        name: the option's keyword (for the message).
        value: what was given.
        at_least: the smallest value allowed.
        above: the value must be greater than this.
        most: the largest value allowed.
        unit: what the number counts, for the message (``"seconds"``, kiel's
            unit of time, or ``"a number"``).

    Returns:
        ``value`` as a float.

    Raises:
        ConfigError: not a number, NaN, infinite, or out of bounds.
    """
    number = math.nan
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int past the largest float: not finite either
            pass
    # Each comparison must hold: NaN (and anything not a number) fails them all.
    ok = (math.isfinite(number)
          and (at_least is None or number >= at_least)
          and (above is None or number > above)
          and (most is None or number <= most))
    if not ok:
        raise ConfigError(f"{name} must be {unit} {_bounds(at_least, above, most)}, "
                          f"got {value!r}")
    return number


def integer(name: str, value: Any, *, at_least: int = 0, most: Optional[int] = None) -> int:
    """An int (not a bool, nor a float with no fraction) within the bounds given.

    Args:
        name: the option's keyword (for the message).
        value: what was given.
        at_least: the smallest value allowed.
        most: the largest value allowed.

    Returns:
        ``value`` as an int.

    Raises:
        ConfigError: not an int, or out of bounds.
    """
    whole = int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) \
        else None
    if whole is None or whole < at_least or (most is not None and whole > most):
        raise ConfigError(f"{name} must be an int {_bounds(at_least, None, most)}, "
                          f"got {value!r}")
    return whole


def text(name: str, value: Any, *, empty: bool = False) -> str:
    """A str (not bytes), non-empty unless ``empty``.

    Raises:
        ConfigError: not a str, or empty when that is not allowed.
    """
    if not isinstance(value, str) or (not value and not empty):
        raise ConfigError(f"{name} must be a {'' if empty else 'non-empty '}str, got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    """``True`` or ``False`` (not 1, 0, ``None`` or ``"yes"``).

    Raises:
        ConfigError: anything else.
    """
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {value!r}")
    return value


def optional(check: Callable[..., T], name: str, value: Any, **bounds: Any) -> Optional[T]:
    """``None``, or ``value`` passed through ``check`` with ``bounds``.

    Raises:
        ConfigError: what ``check`` raises.
    """
    return None if value is None else check(name, value, **bounds)


def _bounds(at_least: Optional[float], above: Optional[float], most: Optional[float]) -> str:
    """The bounds in words: ``>= 0``, ``> 0``, ``in [0, 60]``, ``in (0, 60]``."""
    low = (f"> {above:g}" if above is not None
           else f">= {at_least:g}" if at_least is not None else "")
    if most is None:
        return low or "(finite)"
    if not low:
        return f"<= {most:g}"
    bracket, bound = ("(", above) if above is not None else ("[", at_least)
    return f"in {bracket}{bound:g}, {most:g}]"


#: Options of kiel 0.9 and of the other clients (aiokafka, kafka-python, and
#: confluent-kafka's with their dots read as underscores), with what to write
#: in kiel. ``group_id`` and ``bootstrap_servers`` are worked out per call
#: (see :func:`_hint`); a ``*_ms`` name whose stem kiel takes gets the stem.
_SPELLINGS = {
    "partition_allocator": "allocator",
    "autocommit": "commit_interval (seconds) or commit_every (records)",
    "metadata_broker_list": "the first argument, brokers",
    "auto_offset_reset": "offset_reset ('earliest', 'latest' or 'raise')",
    "enable_auto_commit": "commit_interval (None: no timed commits)",
    "auto_commit_interval_ms": "commit_interval, in seconds",
    "partition_assignment_strategy": "allocator (a name, a callable or a list)",
    "rebalance_timeout_ms": "max_poll_interval, in seconds (it bounds a rebalance too)",
    "value_deserializer": "deserializer",
    "value_serializer": "serializer",
    "security_protocol": "ssl_context and sasl_mechanism",
    "sasl_mechanisms": "sasl_mechanism",
    "sasl_plain_username": "sasl_username",
    "sasl_plain_password": "sasl_password",
    "oauth_cb": "sasl_oauth_token_provider (it returns a kiel.sasl.OAuthBearerToken or "
                "(token, expires_at))",
    "sasl_oauthbearer_config": "sasl_oauth_token_provider=kiel.sasl.unsecured_token_provider("
                               "principal, lifetime)",
    "ssl_cafile": "ssl_context (ssl.create_default_context(cafile=...))",
    "ssl_ca_location": "ssl_context (ssl.create_default_context(cafile=...))",
    "ssl_certfile": "ssl_context (its load_cert_chain(certfile, keyfile))",
    "ssl_keyfile": "ssl_context (its load_cert_chain(certfile, keyfile))",
    "ssl_certificate_location": "ssl_context (its load_cert_chain(certfile, keyfile))",
    "ssl_key_location": "ssl_context (its load_cert_chain(certfile, keyfile))",
    "ssl_password": "ssl_context (its load_cert_chain(..., password=...))",
    "ssl_check_hostname": "ssl_context (its check_hostname)",
    "max_in_flight_requests_per_connection": "max_in_flight",
    "reconnect_backoff_ms": "retry_backoff, in seconds",
    "reconnect_backoff_max_ms": "max_backoff, in seconds",
    "socket_timeout_ms": "request_timeout, in seconds",
    "api_version_auto_timeout_ms": "connect_timeout, in seconds (ApiVersions is part of "
                                   "connecting)",
    "max_poll_records": "max_records",
    "fetch_max_wait_ms": "max_wait_time, in seconds",
    "fetch_min_bytes": "min_bytes",
    "max_partition_fetch_bytes": "max_bytes (per partition)",
    "fetch_max_bytes": "max_prefetch_bytes (all partitions together; max_bytes is per "
                       "partition)",
    "consumer_timeout_ms": "max_wait_time, in seconds",
    "acks": "required_acks",
    "request_required_acks": "required_acks",
    "compression_type": "compression",
    "compression_codec": "compression",
    "max_batch_size": "batch_size",
    "buffer_memory": "max_pending_bytes",
    "max_block_ms": "buffer_timeout, in seconds",
    "delivery_timeout_ms": "retries and request_timeout (a delivery takes at most about "
                           "(retries + 1) * request_timeout)",
}

#: The other clients' options kiel has no counterpart of, and what to do instead.
_INSTEAD = {
    "loop": "kiel runs on the running event loop: drop it",
    "check_crcs": "kiel always checks CRCs: drop it",
    "enable_idempotence": "kiel's producer is not idempotent (at-least-once, see the "
                          "producer guide): drop it",
    "transactional_id": "only the Producer takes it (see the transactions guide)",
    "sasl_kerberos_service_name": "kiel's SASL is PLAIN, SCRAM or OAUTHBEARER "
                                  "(sasl_mechanism): no GSSAPI",
    "connections_max_idle_ms": "kiel keeps its connections until close(): drop it",
}

_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


def _hint(name: str, client: str, takes: Collection[str], positional: Sequence[str]) -> str:
    """What to write instead of ``name``, an option ``client`` does not take.

    Args:
        name: the option given.
        client: the class or function called (for the message).
        takes: every name the call accepts.
        positional: the names it takes by position, in order.

    Returns:
        ``": kiel's spelling is ..."``, ``": <what to do>"``, or ``""`` when
        there is nothing to say.
    """
    key = name.replace(".", "_").replace("-", "_")

    def argument(param: str) -> str:
        if param in positional[:len(_ORDINALS)]:
            return f"the {_ORDINALS[positional.index(param)]} argument, {param}"
        return f"{param}="

    if key in ("group_id", "group"):
        if "group" in takes:
            return f": kiel's spelling is {argument('group')}"
        return (f": a {client} belongs to no group (a GroupedConsumer's is its second "
                "argument, group): drop it")
    if key in ("bootstrap_servers", "metadata_broker_list") and "brokers" in takes:
        return f": kiel's spelling is {argument('brokers')}"
    if key != name and key in takes:
        return f": kiel's spelling is {key}"
    if key in _SPELLINGS:
        return f": kiel's spelling is {_SPELLINGS[key]}"
    if key in _INSTEAD:
        return f": {_INSTEAD[key]}"
    if key.endswith("_ms") and key[:-3] in takes:
        return f": kiel's spelling is {key[:-3]}, in seconds (kiel's times are seconds)"
    return ""


def unknown(client: str, names: Iterable[str], takes: Collection[str],
             positional: Sequence[str] = ()) -> ConfigError:
    """The error for options no layer of ``client`` takes: each with its hint."""
    return ConfigError("; ".join(
        f"{client} has no option {name!r}{_hint(name, client, takes, positional)}"
        if i == 0 else f"no option {name!r}{_hint(name, client, takes, positional)}"
        for i, name in enumerate(sorted(names))
    ))


class _Shape:
    """What a checked call accepts: its positional names and every option name.

    The check runs before Python binds the arguments, so a call that would
    fail binding (``Producer(bootstrap_servers=...)`` lacks ``brokers``)
    is told kiel's spelling instead of ``missing 1 required positional
    argument``, and an argument given by position that must be named is
    refused with the name to write (:class:`~kiel.exc.ArgumentError`).
    """

    def __init__(self, function: Callable[..., Any], method: bool) -> None:
        params = list(inspect.signature(function).parameters.values())[1 if method else 0:]
        self.positional = [p.name for p in params if p.kind in _POSITIONAL]
        self.named = {p.name for p in params if p.kind not in _VARIADIC}
        # Where **options go on (to a parent class, or to Cluster): the
        # connection settings at least; a class adds its parents' names.
        self.passes_on = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)

    def check(self, client: str, args: tuple[Any, ...], kwargs: Mapping[str, Any],
              takes: Collection[str], misplaced: Optional[Callable[[tuple[Any, ...]], str]]
              ) -> None:
        foreign = set(kwargs) - set(takes)
        if foreign:
            raise unknown(client, foreign, takes, self.positional)
        if len(args) > len(self.positional):
            extra = args[len(self.positional):]
            count = len(self.positional)
            takes_them = (f"{count} positional argument{'s' if count != 1 else ''} "
                          f"({', '.join(self.positional)})")
            how = misplaced(extra) if misplaced is not None else (
                f"give {', '.join(repr(a) for a in extra)} by name")
            raise ArgumentError(f"{client} takes {takes_them}, every other one by name: {how}")

    def takes(self) -> set[str]:
        """The names this function takes itself (and, with ``**options``, the
        connection settings)."""
        return self.named | (_connection_settings() if self.passes_on else set())


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _class_takes(cls: type) -> set[str]:
    """Every option name some ``__init__`` of ``cls``'s classes takes."""
    takes: set[str] = set()
    for klass in cls.__mro__:
        shape = getattr(klass.__dict__.get("__init__"), "_kiel_shape", None)
        if shape is not None:
            takes |= shape.takes()
    return takes


def constructor(init: "Callable[_P, None]") -> "Callable[_P, None]":
    """Decorate a client's ``__init__`` so that a wrong call is told what to write.

    Before the arguments are bound: an option no ``__init__`` of the class
    takes (checked over every decorated class of its MRO, with the
    connection settings) is a :class:`~kiel.exc.ConfigError` naming kiel's
    spelling, whether or not the required arguments are there; more
    positional arguments than the signature has is an
    :class:`~kiel.exc.ArgumentError` (a class may say what the extra ones
    were meant to be with a ``_misplaced(extra) -> str`` static method).
    ``help()``, Sphinx and mypy see ``init``'s own signature.

    Args:
        init: the ``__init__`` to check the calls of.

    Returns:
        the checking ``__init__``.
    """
    shape = _Shape(init, method=True)

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        shape.check(cls.__name__, args, kwargs, _class_takes(cls),
                    getattr(cls, "_misplaced", None))
        init(self, *args, **kwargs)

    checked._kiel_shape = shape  # type: ignore[attr-defined]
    return checked  # type: ignore[return-value]


def options_checked(
    function: "Callable[_P, Awaitable[_R]]",
) -> "Callable[_P, Awaitable[_R]]":
    """:func:`constructor`'s check for a coroutine function that takes
    :class:`~kiel.client.ClientOptions` in its ``**options`` (kiel.admin's).

    Args:
        function: the coroutine function.

    Returns:
        the checking one (same signature).
    """
    shape = _Shape(function, method=False)

    @functools.wraps(function)
    async def checked(*args: Any, **kwargs: Any) -> Any:
        shape.check(function.__name__, args, kwargs, shape.takes(), None)
        return await function(*args, **kwargs)

    return checked



#: The connection settings a ``**options`` passes on (ClientOptions' names):
#: kiel.client registers them when it defines them (it imports this module,
#: which is above it in the layers, so this module cannot import it).
_CONNECTION_SETTINGS: set[str] = set()


def register_connection_settings(names: Iterable[str]) -> None:
    """Name the options a checked ``**options`` passes on to the cluster.

    Args:
        names: :class:`~kiel.client.ClientOptions`' keys.
    """
    _CONNECTION_SETTINGS.update(names)


def _connection_settings() -> set[str]:
    """The names of :class:`~kiel.client.ClientOptions` (registered by kiel.client)."""
    return _CONNECTION_SETTINGS


#: kiel's own directory: frames from files under it are not the caller's.
_KIEL = os.path.dirname(os.path.abspath(__file__)) + os.sep


def deprecated(message: str) -> None:
    """Warn with :class:`DeprecationWarning`, pointing at the application's line.

    Strategy: the warning names the first frame outside kiel, however many
    of kiel's frames lie between (a client's layers, each behind its
    :func:`constructor` check), instead of a fixed ``stacklevel`` that
    every new layer would put off by one.

    Args:
        message: what is deprecated and what to write instead.
    """
    level, frame = 2, sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_KIEL):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, DeprecationWarning, stacklevel=level)
