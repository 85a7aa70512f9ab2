"""What consumers hand to the application: records, partitions, start positions."""

import datetime
import enum
from typing import Dict, Optional, Union

from kiel.structs import Record, TopicPartition

__all__ = ["BEGINNING", "END", "Record", "Start", "StartPosition", "TopicPartition", "lag_of"]

# ``Record`` (topic, partition, offset, key, value, timestamp) is the
# protocol's own record type: the decoder builds the very objects consumers
# hand out, with no copy. ``key`` and ``value`` are ``bytes`` or ``None``
# unless a deserializer was given; ``timestamp`` is ``None`` for the magic-0
# messages of a 0.8 broker.


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
Start = Union[StartPosition, int, Dict[int, int], datetime.datetime, datetime.timedelta]


def lag_of(highwater: Optional[int], position: Optional[int]) -> Optional[int]:
    """Messages between ``position`` and the high watermark (never negative).

    Returns:
        ``None`` while either is unknown.
    """
    if highwater is None or position is None:
        return None
    return max(0, highwater - position)
