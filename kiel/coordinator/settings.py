"""A broker group's settings: the consumer's keywords of the same names, checked once."""

import math
from dataclasses import dataclass, fields
from typing import Any, Optional

from kiel._options import real
from kiel.coordinator.assignors import Assignor, assignors_for
from kiel.exc import ConfigError

__all__ = ["BrokerSettings"]


@dataclass(frozen=True)
class BrokerSettings:
    """How a member takes part in a group the brokers coordinate.

    Every time is in seconds (kiel's unit; the peers' ``*_ms`` settings
    divided by 1000). See :class:`~kiel.consumer.grouped.GroupedConsumer` for
    what each means.

    Raises:
        ConfigError: a bad setting (when built).
    """

    allocator: Any = None
    session_timeout: float = 10.0
    heartbeat_interval: float = 3.0
    max_poll_interval: float = 300.0
    group_instance_id: Optional[str] = None
    member_id: Optional[str] = None
    capacity: float = 1.0
    join_timeout: float = 60.0
    leave_timeout: float = 10.0

    def __post_init__(self) -> None:
        self.check()
        # Resolved once: a bad allocator fails here, at construction.
        object.__setattr__(self, "_assignors", assignors_for(self.allocator, self.capacity))

    @property
    def assignors(self) -> list[Assignor]:
        """The assignors this member offers, in order of preference."""
        found: list[Assignor] = getattr(self, "_assignors")  # noqa: B009 - set in __post_init__
        return found

    def check(self) -> None:
        """Refuse a bad setting.

        Raises:
            ConfigError: a bad setting, named with the consumer's keyword.
        """
        for name, most in (("session_timeout", 3600.0), ("heartbeat_interval", 3600.0),
                           ("max_poll_interval", 86400.0), ("join_timeout", math.inf),
                           ("leave_timeout", math.inf)):
            _seconds(name, getattr(self, name), most)
        if self.heartbeat_interval >= self.session_timeout:
            raise ConfigError(
                f"heartbeat_interval ({self.heartbeat_interval} s) must be below "
                f"session_timeout ({self.session_timeout} s); a third of it is usual"
            )
        if self.member_id is not None:
            raise ConfigError(
                "member_id: in a group the brokers coordinate, the coordinator gives the "
                "member ids; for a stable identity across restarts use group_instance_id"
            )
        iid = self.group_instance_id
        if iid is not None and (not isinstance(iid, str) or not iid or len(iid) > 249):
            raise ConfigError(f"group_instance_id must be a non-empty str, got {iid!r}")
        capacity = self.capacity
        if isinstance(capacity, bool) or not isinstance(capacity, (int, float)) or not (
            0 < capacity < math.inf
        ):
            raise ConfigError(f"capacity must be a number > 0, got {capacity!r}")

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return f"BrokerSettings({shown})"


def _seconds(name: str, value: Any, most: float) -> None:
    real(name, value, above=0)  # finite: a wait for ever is not a bound
    if value > most:
        hint = f" ({value} ms is {value / 1000:g} s)" if value / 1000 <= most else ""
        raise ConfigError(f"{name} is in seconds: {value!r} is over {most:g}{hint}")
