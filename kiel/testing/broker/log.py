"""Partition logs: message sets kept as the bytes producers sent, sliced for fetches.

A :class:`PartitionLog` is a list of :class:`Segment` objects, each a
``bytearray`` of whole, offset-assigned message sets (exactly Kafka's on-disk
format) plus an index of its outer messages: their offsets and byte positions.
Fetches bisect the index and slice the bytes; nothing is ever re-encoded.

Semantics follow Kafka 0.8.2's ``Log``/``LogSegment``:

* a fetch reads from the one segment holding the first message whose offset
  is >= the fetch offset (a compressed wrapper carries the offset of its
  last inner message, so a fetch inside a wrapper returns the whole wrapper),
  and returns at most ``max_bytes`` bytes of it, cut mid-message if need be;
* segments roll before an append that would push the active segment past
  ``segment_bytes`` (or, for tests, ``segment_messages`` messages);
* :meth:`PartitionLog.offsets_before` answers ListOffsets v0 at segment
  granularity, as ``KafkaApis.fetchOffsetsBefore`` does.

With a ``directory`` each segment is also a file ``<base_offset:020d>.log``;
appends are written before they are acknowledged, so a restarted broker
reloads every acknowledged message (a torn trailing message is cut off, as
Kafka's log recovery does).

Everything here runs on the broker's IOLoop thread; nothing is thread-safe.
"""

import os
import struct
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable
from typing import Optional, Union

from kiel.exc import OffsetOutOfRangeError

__all__ = ["PartitionLog", "Segment", "index_message_set", "DEFAULT_SEGMENT_BYTES"]

#: Kafka 0.8.2's ``log.segment.bytes`` default (1 GiB).
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024

_FILE_SUFFIX = ".log"


_ENTRY_HEADER = struct.Struct(">qi")
_LOG_OVERHEAD = 12
_MIN_MESSAGE_SIZE = 14


def index_message_set(
    buf: Union[bytes, bytearray, memoryview], base_position: int = 0
) -> tuple["array[int]", "array[int]", int, int]:
    """Index the whole top-level messages at the start of ``buf``.

    Stops silently at a torn or impossible entry (log recovery keeps what
    frames); :func:`kiel.protocol.messages.iter_message_boundaries` is the
    general walker, this is the append path's tight loop.

    Args:
        buf: a message set.
        base_position: added to every position (where ``buf`` lands in a segment).

    Returns:
        ``(offsets, positions, valid_bytes, largest_entry)``: each message's
        offset and position, where the whole messages end, and the largest
        entry size (log overhead included).
    """
    offsets = array("q")
    positions = array("q")
    add_offset, add_position = offsets.append, positions.append
    unpack = _ENTRY_HEADER.unpack_from
    pos, end, largest = 0, len(buf), 0
    while end - pos >= _LOG_OVERHEAD:
        offset, size = unpack(buf, pos)
        if size < _MIN_MESSAGE_SIZE or pos + _LOG_OVERHEAD + size > end:
            break
        add_offset(offset)
        add_position(base_position + pos)
        if size > largest:
            largest = size
        pos += _LOG_OVERHEAD + size
    return offsets, positions, pos, largest + _LOG_OVERHEAD if offsets else 0


class Segment:
    """One log segment: message-set bytes plus an index of its outer entries.

    Attributes:
        base_offset: the first offset this segment may hold.
        next_offset: the offset after its last message (``base_offset`` if empty).
        data: the entries, back to back.
        offsets: the offset of each outer entry (ascending).
        positions: the byte position of each outer entry in ``data``.
        messages: how many messages (inner messages counted) it holds.
        last_modified: wall-clock ms of the last append (file mtime when loaded).
    """

    def __init__(self, base_offset: int, path: Optional[str] = None) -> None:
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.data = bytearray()
        self.offsets = array("q")
        self.positions = array("q")
        self.messages = 0
        self.last_modified = int(time.time() * 1000)
        self.path = path
        self._fd: Optional[int] = None
        if path is not None:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    @property
    def size(self) -> int:
        """Bytes held."""
        return len(self.data)

    def append(self, data: bytes, next_offset: int, messages: int) -> None:
        """Append ``data`` (whole messages, offsets assigned) and index it.

        The file (if any) is written before the in-memory copy, so what a
        client saw acknowledged is on disk.
        """
        if self._fd is not None:
            view = memoryview(data)
            written = 0
            while written < len(data):
                written += os.write(self._fd, view[written:])
        offsets, positions, _, _ = index_message_set(data, len(self.data))
        self.data += data
        self.offsets.extend(offsets)
        self.positions.extend(positions)
        self.next_offset = next_offset
        self.messages += messages
        self.last_modified = int(time.time() * 1000)

    def find(self, offset: int) -> int:
        """Index of the first outer entry whose offset is >= ``offset`` (may be ``len``)."""
        return bisect_left(self.offsets, offset)

    def close(self) -> None:
        """Close the segment's file (the data stays readable in memory)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        """Close and remove the segment's file."""
        self.close()
        if self.path is not None and os.path.exists(self.path):
            os.unlink(self.path)

    @classmethod
    def load(cls, path: str, base_offset: int) -> "Segment":
        """Read a segment file back, cutting off a torn or corrupt tail.

        Inner messages of compressed wrappers are counted as the offset span
        the wrapper covers (its offset minus the previous entry's, the first
        entry counting from ``base_offset``).
        """
        with open(path, "rb") as f:
            raw = f.read()
        mtime = int(os.path.getmtime(path) * 1000)
        offsets, positions, valid, _ = index_message_set(raw)
        if valid < len(raw):
            # Strategy: like Kafka's recovery, keep what parses and drop the rest.
            with open(path, "r+b") as f:
                f.truncate(valid)
            raw = raw[:valid]
        segment = cls(base_offset, path)
        if offsets:
            segment.data += raw
            segment.offsets = offsets
            segment.positions = positions
            segment.next_offset = offsets[-1] + 1
            segment.messages = segment.next_offset - base_offset
        segment.last_modified = mtime
        return segment


class PartitionLog:
    """The log of one partition, shared by every replica of the embedded cluster.

    Args:
        topic: topic name (for error context).
        partition: partition id.
        directory: where segment files go (``None``: memory only). Existing
            segment files there are loaded.
        segment_bytes: roll the active segment before an append would push
            it past this size.
        segment_messages: also roll once it holds this many messages (``None``:
            no limit). Kafka has no such setting; it makes segment-granular
            ListOffsets testable with small logs.
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        directory: Optional[str] = None,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        segment_messages: Optional[int] = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.segment_messages = segment_messages
        self.segments: list[Segment] = []
        # Callables run after every append or leadership change (fetch long polls).
        self.waiters: set[Callable[[], None]] = set()
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
            bases = sorted(
                int(name[: -len(_FILE_SUFFIX)])
                for name in os.listdir(directory)
                if name.endswith(_FILE_SUFFIX) and name[: -len(_FILE_SUFFIX)].isdigit()
            )
            for base in bases:
                self.segments.append(Segment.load(os.path.join(
                    directory, f"{base:020d}{_FILE_SUFFIX}"), base))
        if not self.segments:
            self.segments.append(Segment(0, self._segment_path(0)))

    def __repr__(self) -> str:
        return (f"<PartitionLog {self.topic}-{self.partition} "
                f"[{self.start_offset}, {self.end_offset})>")

    def _segment_path(self, base_offset: int) -> Optional[str]:
        if self.directory is None:
            return None
        return os.path.join(self.directory, f"{base_offset:020d}{_FILE_SUFFIX}")

    # -- offsets ---------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """The log start offset (earliest readable offset)."""
        return self.segments[0].base_offset

    @property
    def end_offset(self) -> int:
        """The log end offset (the offset the next message gets); also the high watermark."""
        return self.segments[-1].next_offset

    @property
    def size(self) -> int:
        """Bytes held over all segments."""
        return sum(segment.size for segment in self.segments)

    # -- writes ----------------------------------------------------------

    def append(self, data: bytes, next_offset: int) -> None:
        """Append an offset-assigned message set and wake fetches waiting on this log.

        Args:
            data: whole messages whose offsets start at :attr:`end_offset`.
            next_offset: the offset after the last inner message.
        """
        if not data:
            return
        messages = next_offset - self.end_offset
        active = self.segments[-1]
        if active.size and (
            active.size + len(data) > self.segment_bytes
            or (self.segment_messages is not None
                and active.messages + messages > self.segment_messages)
        ):
            active.close()
            active = Segment(self.end_offset, self._segment_path(self.end_offset))
            self.segments.append(active)
        active.append(data, next_offset, messages)
        self.notify()

    def roll(self) -> None:
        """Start a new segment now (if the active one holds anything)."""
        active = self.segments[-1]
        if active.size:
            active.close()
            self.segments.append(Segment(self.end_offset, self._segment_path(self.end_offset)))

    def delete_before(self, offset: int) -> int:
        """Drop whole segments that end at or before ``offset`` (as retention does).

        The active segment is rolled first when ``offset`` is the end of the
        log, so the log can be emptied. Returns the new log start offset.
        """
        if offset >= self.end_offset:
            self.roll()
        while len(self.segments) > 1 and self.segments[0].next_offset <= offset:
            self.segments.pop(0).delete()
        self.notify()
        return self.start_offset

    def notify(self) -> None:
        """Run (and keep) every waiter: something a fetch may wait for happened."""
        for waiter in list(self.waiters):
            waiter()

    def close(self) -> None:
        """Close segment files (in-memory data stays readable)."""
        for segment in self.segments:
            segment.close()

    # -- reads -----------------------------------------------------------

    def _locate(self, offset: int, max_bytes: int) -> tuple[Optional[Segment], int, int]:
        """Find what a fetch at ``offset`` returns: ``(segment, start, end)`` byte range.

        Raises:
            OffsetOutOfRangeError: ``offset`` is before the log start or after its end.
        """
        end_offset = self.end_offset
        if offset == end_offset:
            return None, 0, 0
        if offset > end_offset or offset < self.start_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self.start_offset}, {end_offset}]",
                topic=self.topic, partition=self.partition, offset=offset,
            )
        # The segment with the greatest base offset <= offset, then onwards
        # until one holds a message at or after it (Log.read).
        if offset >= self.segments[-1].base_offset:
            index = len(self.segments) - 1  # the usual case: a consumer near the end
        else:
            index = bisect_left([s.base_offset for s in self.segments], offset + 1) - 1
        for segment in self.segments[max(index, 0):]:
            i = segment.find(offset)
            if i < len(segment.offsets):
                start = segment.positions[i]
                return segment, start, min(segment.size, start + max(max_bytes, 0))
        return None, 0, 0

    def readable(self, offset: int, max_bytes: int) -> int:
        """How many bytes a fetch at ``offset`` with ``max_bytes`` returns now.

        Raises:
            OffsetOutOfRangeError: as :meth:`read`.
        """
        _, start, end = self._locate(offset, max_bytes)
        return end - start

    def read(self, offset: int, max_bytes: int) -> memoryview:
        """The bytes a fetch at ``offset`` returns, as a view into the segment.

        Use the view at once and release it (do not keep it across an append:
        a live view pins the segment's buffer).

        Raises:
            OffsetOutOfRangeError: ``offset`` is before the log start or after its end.
        """
        segment, start, end = self._locate(offset, max_bytes)
        if segment is None or end <= start:
            return memoryview(b"")
        return memoryview(segment.data)[start:end]

    def offsets_before(self, timestamp: int, max_num_offsets: int) -> list[int]:
        """ListOffsets v0 for this log, as Kafka 0.8.2's ``fetchOffsetsBefore``.

        Args:
            timestamp: -1 (latest), -2 (earliest) or wall-clock ms.
            max_num_offsets: the most offsets to return.

        Returns:
            segment base offsets (and the log end offset when the active
            segment is not empty), newest first.
        """
        pairs = [(s.base_offset, s.last_modified) for s in self.segments]
        if self.segments[-1].size > 0:
            pairs.append((self.end_offset, int(time.time() * 1000)))
        if timestamp == -1:
            start = len(pairs) - 1
        elif timestamp == -2:
            start = 0
        else:
            start = len(pairs) - 1
            while start >= 0 and pairs[start][1] > timestamp:
                start -= 1
        count = max(0, min(max_num_offsets, start + 1))
        return sorted((pairs[start - j][0] for j in range(count)), reverse=True)
