"""Fault injection for the embedded brokers: errors, latency, cut responses,
corrupt offsets, hangs.

A :class:`Faults` object belongs to one cluster and lives on its IOLoop. Each
rule can target one broker (``broker_id``) or all (``None``), and one API
(by name, ``"Fetch"``, or key, ``1``) or all (``None``). Rules that count
(``count`` requests) are used up in arrival order; a count of ``None`` means
"until cleared".
"""

from dataclasses import dataclass
from typing import Optional, Union

from kiel.exc import ConfigError
from kiel.protocol.api import BY_KEY
from kiel.protocol.versions import FETCH

__all__ = ["Faults", "api_key_for", "ApiSpec"]

ApiSpec = Union[None, int, str]


def api_key_for(api: ApiSpec) -> Optional[int]:
    """Map an API name (``"Fetch"``, any case) or key to its key (``None`` stays ``None``).

    Raises:
        ConfigError: an unknown name or key.
    """
    if api is None:
        return None
    if isinstance(api, int) and not isinstance(api, bool):
        if any(key == api for key, _ in BY_KEY):
            return api
        raise ConfigError(f"unknown api key {api}")
    if isinstance(api, str):
        for (key, _), entry in BY_KEY.items():
            if entry.name.lower() == api.lower():
                return key
    raise ConfigError(f"unknown api {api!r} (use a name such as 'Fetch' or a key)")


@dataclass
class _Rule:
    broker_id: Optional[int]
    api_key: Optional[int]
    remaining: Optional[int]
    value: float = 0.0

    def matches(self, broker_id: int, api_key: int) -> bool:
        return ((self.broker_id is None or self.broker_id == broker_id)
                and (self.api_key is None or self.api_key == api_key))


class Faults:
    """The cluster's fault rules; consulted by every broker for every request."""

    def __init__(self) -> None:
        self._errors: list[_Rule] = []
        self._drops: list[_Rule] = []
        self._latency: list[_Rule] = []
        self._offsets: list[_Rule] = []

    def clear(self) -> None:
        """Remove every rule."""
        self._errors.clear()
        self._drops.clear()
        self._latency.clear()
        self._offsets.clear()

    @property
    def armed(self) -> bool:
        """Whether an error, cut or offset rule is waiting (the broker then
        checks that a request's client is still there before spending one)."""
        return bool(self._errors or self._drops or self._offsets)

    @staticmethod
    def _take(rules: list[_Rule], broker_id: int, api_key: int) -> Optional[_Rule]:
        for rule in rules:
            if rule.matches(broker_id, api_key):
                if rule.remaining is not None:
                    rule.remaining -= 1
                    if rule.remaining <= 0:
                        rules.remove(rule)
                return rule
        return None

    # -- errors ------------------------------------------------------------

    def add_error(self, api: ApiSpec, error_code: int, count: Optional[int] = 1,
                  broker_id: Optional[int] = None) -> None:
        """Answer the next ``count`` requests of ``api`` with ``error_code``."""
        if count is not None and count < 1:
            raise ConfigError(f"count must be at least 1 (or None), not {count}")
        self._errors.append(_Rule(broker_id, api_key_for(api), count, float(error_code)))

    def take_error(self, broker_id: int, api_key: int) -> Optional[int]:
        """The error code to answer this request with, if a rule says so (uses it up)."""
        rule = self._take(self._errors, broker_id, api_key)
        return None if rule is None else int(rule.value)

    # -- cut responses -------------------------------------------------------

    def add_drop(self, api: ApiSpec = None, count: Optional[int] = 1,
                 broker_id: Optional[int] = None) -> None:
        """Cut the next ``count`` responses of ``api`` mid-frame and close their connections."""
        if count is not None and count < 1:
            raise ConfigError(f"count must be at least 1 (or None), not {count}")
        self._drops.append(_Rule(broker_id, api_key_for(api), count))

    def take_drop(self, broker_id: int, api_key: int) -> bool:
        """Whether to cut this response (uses a rule up)."""
        return self._take(self._drops, broker_id, api_key) is not None

    # -- corrupt offsets -----------------------------------------------------

    def add_offset_shift(self, delta: int, count: Optional[int] = 1,
                         broker_id: Optional[int] = None) -> None:
        """Raise the last whole message's offset by ``delta`` in the next
        ``count`` Fetch answers that carry messages."""
        if count is not None and count < 1:
            raise ConfigError(f"count must be at least 1 (or None), not {count}")
        if delta == 0:
            raise ConfigError("an offset shift of 0 changes nothing")
        self._offsets.append(_Rule(broker_id, FETCH, count, float(delta)))

    def take_offset_shift(self, broker_id: int) -> int:
        """How far to shift this Fetch answer's last offset (0: not at all; uses a rule up)."""
        rule = self._take(self._offsets, broker_id, FETCH)
        return 0 if rule is None else int(rule.value)

    # -- latency -------------------------------------------------------------

    def set_latency(self, seconds: float, api: ApiSpec = None,
                    broker_id: Optional[int] = None) -> None:
        """Delay answers by ``seconds`` (0 removes the matching rule)."""
        if seconds < 0:
            raise ConfigError(f"latency cannot be negative: {seconds}")
        key = api_key_for(api)
        self._latency[:] = [r for r in self._latency
                            if not (r.broker_id == broker_id and r.api_key == key)]
        if seconds > 0:
            self._latency.append(_Rule(broker_id, key, None, seconds))

    def latency(self, broker_id: int, api_key: int) -> float:
        """Seconds to delay this request's answer (the largest matching rule)."""
        delays = [r.value for r in self._latency if r.matches(broker_id, api_key)]
        return max(delays, default=0.0)

    def describe(self) -> dict[str, list[dict[str, object]]]:
        """The active rules, for debugging and the control channel."""
        def rows(rules: list[_Rule], value_name: str) -> list[dict[str, object]]:
            return [{"broker_id": r.broker_id, "api_key": r.api_key,
                     "remaining": r.remaining, value_name: r.value} for r in rules]
        return {
            "errors": rows(self._errors, "error_code"),
            "drops": rows(self._drops, "unused"),
            "latency": rows(self._latency, "seconds"),
            "offsets": rows(self._offsets, "delta"),
        }
