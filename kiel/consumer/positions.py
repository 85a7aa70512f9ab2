"""Where a consumer starts, and how far behind it is.

Pure: no I/O. A start position is resolved to offsets with ListOffsets v0
(:func:`kiel.consumer.offsets.list_offsets`) from the timestamp
:func:`to_timestamp` gives it.
"""

import datetime
import enum
import time
from typing import Any, Optional, Union

from kiel.exc import ConfigError
from kiel.protocol.list_offsets import EARLIEST, LATEST

__all__ = ["BEGINNING", "END", "Start", "StartPosition", "check_offset", "lag_of", "to_timestamp"]


class StartPosition(enum.Enum):
    """Symbolic start positions (also ``SingleConsumer.BEGINNING`` / ``END``)."""

    #: The oldest offset the broker still holds.
    BEGINNING = "beginning"
    #: The next offset to be written: only messages produced from now on.
    END = "end"

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


BEGINNING = StartPosition.BEGINNING
END = StartPosition.END

#: What ``start`` may be: a symbolic position, an offset for every partition,
#: offsets per partition, a point in time, or a time ago.
Start = Union[StartPosition, int, dict[int, int], datetime.datetime, datetime.timedelta]


def to_timestamp(start: Any, now: Optional[float] = None) -> int:
    """The ListOffsets v0 ``timestamp`` for a start position.

    Args:
        start: :data:`BEGINNING`, :data:`END`, a ``datetime`` (naive ones are
            taken as UTC) or a ``timedelta`` (that long ago).
        now: the current time in epoch seconds (default: the wall clock).

    Returns:
        ``EARLIEST`` (-2), ``LATEST`` (-1) or milliseconds since the epoch.

    Raises:
        ConfigError: ``start`` is none of those, or a negative ``timedelta``.
    """
    if start is BEGINNING:
        return EARLIEST
    if start is END:
        return LATEST
    if isinstance(start, datetime.datetime):
        if start.tzinfo is None:
            start = start.replace(tzinfo=datetime.timezone.utc)
        return max(0, int(start.timestamp() * 1000))
    if isinstance(start, datetime.timedelta):
        if start < datetime.timedelta(0):
            raise ConfigError(f"a timedelta start means 'that long ago'; got {start}")
        wall = time.time() if now is None else now
        return max(0, int((wall - start.total_seconds()) * 1000))
    raise ConfigError(
        f"start must be BEGINNING, END, an offset, a dict, a datetime or a timedelta; got {start!r}"
    )


def check_offset(offset: Any, topic: Optional[str] = None, partition: Optional[int] = None) -> int:
    """Check that ``offset`` can be a position.

    Args:
        offset: the value given.
        topic, partition: for the error's context.

    Returns:
        ``offset``, an ``int >= 0``.

    Raises:
        ConfigError: ``offset`` is not an ``int`` (``bool`` is not one), or is negative.
    """
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ConfigError(
            f"offsets are ints >= 0, got {offset!r}", topic=topic, partition=partition
        )
    return offset


def lag_of(highwater: Optional[int], position: Optional[int]) -> Optional[int]:
    """Messages between ``position`` and the high watermark (never negative).

    Returns:
        ``None`` while either is unknown.
    """
    if highwater is None or position is None:
        return None
    return max(0, highwater - position)
