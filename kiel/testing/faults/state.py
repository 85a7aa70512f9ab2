"""What a fault proxy is doing now: the faults in effect, and its counters.

Both live on the proxy's own loop: the pipes read them between two socket
calls, and the control methods change them there (see
:class:`~kiel.testing.faults.proxy.FaultProxy`), so a fault is in effect for
every byte that has not passed yet by the time the control call returns.
"""

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from kiel._aio import Wakeup
from kiel.exc import ConfigError

__all__ = ["DIRECTIONS", "Counters", "Faults", "ProxyStats", "directions", "seconds"]

#: The two directions of a proxied connection: ``"upstream"`` carries what the
#: client sends to the target, ``"downstream"`` what the target answers.
DIRECTIONS: tuple[str, str] = ("upstream", "downstream")


def directions(which: str) -> tuple[str, ...]:
    """The directions ``which`` names.

    Args:
        which: ``"upstream"``, ``"downstream"`` or ``"both"``.

    Returns:
        a tuple of one or both of :data:`DIRECTIONS`.

    Raises:
        ConfigError: any other value.
    """
    if which == "both":
        return DIRECTIONS
    if which in DIRECTIONS:
        return (which,)
    raise ConfigError(f"a direction is 'upstream', 'downstream' or 'both', not {which!r}")


def seconds(value: Any, what: str) -> float:
    """Check a duration.

    Args:
        value: the duration in seconds.
        what: its name, for the error message.

    Returns:
        ``value`` as a float.

    Raises:
        ConfigError: not a finite number of seconds >= 0.
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} is a number of seconds, not {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise ConfigError(f"{what} must be a finite number of seconds >= 0, not {value!r}")
    return number


class Faults:
    """The faults in effect; ``changed`` fires whenever one starts or ends.

    Attributes:
        blackout: nothing passes and new connections are held.
        stalled: per direction, bytes are held (up to the bound) instead of passed.
        delays: per direction, seconds added to every chunk.
    """

    def __init__(self) -> None:
        self.blackout = False
        self.stalled: dict[str, bool] = {d: False for d in DIRECTIONS}
        self.delays: dict[str, float] = {d: 0.0 for d in DIRECTIONS}
        self.changed = Wakeup()

    def passing(self, direction: str) -> bool:
        """Whether bytes may go out in ``direction`` now."""
        return not self.blackout and not self.stalled[direction]

    async def wait_passing(self, direction: str) -> None:
        """Return once bytes may go out in ``direction``.

        Unbounded on purpose: a stall lasts until the test lifts it. The
        proxy's ``stop()`` (or ``cut()``) cancels whoever waits here.
        """
        while not self.passing(direction):
            await self.changed.wait()

    async def wait_no_blackout(self) -> None:
        """Return once no blackout is in effect (cancelled like :meth:`wait_passing`)."""
        while self.blackout:
            await self.changed.wait()

    def set_blackout(self, on: bool) -> None:
        """Start or end the blackout."""
        self.blackout = on
        self.changed.fire()

    def set_stalled(self, which: str, on: bool) -> None:
        """Stall or release ``which`` (a direction or ``"both"``)."""
        for direction in directions(which):
            self.stalled[direction] = on
        self.changed.fire()

    def set_delay(self, which: str, delay: float) -> None:
        """Add ``delay`` seconds to every chunk read from now on in ``which``."""
        for direction in directions(which):
            self.delays[direction] = delay
        self.changed.fire()


@dataclass
class Counters:
    """What a proxy has done so far, summed over its connections (changed on its loop only)."""

    accepted: int = 0
    cut: int = 0
    failed: int = 0
    passed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DIRECTIONS, 0))
    held: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DIRECTIONS, 0))
    peak_held: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DIRECTIONS, 0))

    def hold(self, direction: str, count: int) -> None:
        """``count`` more bytes are held in ``direction`` (negative: released)."""
        held = self.held[direction] = self.held[direction] + count
        if held > self.peak_held[direction]:
            self.peak_held[direction] = held


@dataclass(frozen=True)
class ProxyStats:
    """A snapshot of a proxy's counters and faults (:meth:`FaultProxy.stats`).

    Attributes:
        accepted: client connections accepted since the proxy started.
        cut: connections reset by ``cut()``.
        failed: client connections reset because the target refused them or
            did not answer the connect in time.
        active: client connections open now (``waiting`` ones included).
        waiting: connections accepted during a blackout and held there, not
            connected to the target yet.
        bytes_upstream: bytes passed from clients to the target.
        bytes_downstream: bytes passed from the target to clients.
        held_upstream: bytes read from clients and held in the proxy now
            (stalled, blacked out or delayed).
        held_downstream: the same from the target.
        peak_held_upstream: the most ``held_upstream`` ever was.
        peak_held_downstream: the most ``held_downstream`` ever was.
        blackout: whether a blackout is in effect.
        stalled_upstream: whether the upstream direction is stalled.
        stalled_downstream: whether the downstream direction is stalled.
        delay_upstream: seconds added to each upstream chunk.
        delay_downstream: seconds added to each downstream chunk.
    """

    accepted: int
    cut: int
    failed: int
    active: int
    waiting: int
    bytes_upstream: int
    bytes_downstream: int
    held_upstream: int
    held_downstream: int
    peak_held_upstream: int
    peak_held_downstream: int
    blackout: bool
    stalled_upstream: bool
    stalled_downstream: bool
    delay_upstream: float
    delay_downstream: float

    @classmethod
    def of(cls, counters: Counters, faults: Faults, active: int, waiting: int) -> "ProxyStats":
        """Snapshot ``counters`` and ``faults`` (on the proxy's loop)."""
        per_direction: dict[str, Any] = {}
        for d in DIRECTIONS:
            per_direction.update({
                f"bytes_{d}": counters.passed[d], f"held_{d}": counters.held[d],
                f"peak_held_{d}": counters.peak_held[d], f"stalled_{d}": faults.stalled[d],
                f"delay_{d}": faults.delays[d],
            })
        return cls(accepted=counters.accepted, cut=counters.cut, failed=counters.failed,
                   active=active, waiting=waiting, blackout=faults.blackout, **per_direction)

    def as_dict(self) -> dict[str, Any]:
        """The snapshot as a JSON-ready dict."""
        return asdict(self)
