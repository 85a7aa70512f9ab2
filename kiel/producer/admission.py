"""Records that wait, in order, before they are batched: for their topic's
metadata, or for room under ``max_pending_bytes``.

:meth:`~kiel.producer.Producer.produce` never waits: a record that cannot be
batched now is *parked* here with its future, and one task admits parked
records in produce order as metadata arrives and room frees up (a record
waiting for room longer than ``buffer_timeout`` fails with
:class:`~kiel.exc.BufferFullError`). :meth:`~kiel.producer.Producer.enqueue`
waits for room itself instead.
"""

import asyncio
import collections
import logging
from typing import Callable, NamedTuple, Optional

from kiel._aio import Tasks, Wakeup
from kiel.cluster import Cluster
from kiel.exc import BufferFullError, KielError
from kiel.producer.accumulator import RecordAccumulator
from kiel.producer.outcomes import Outcomes
from kiel.producer.routing import Router, TopicRoute
from kiel.producer.sender import copy_error
from kiel.structs import Header, RecordMetadata

log = logging.getLogger(__name__)

__all__ = ["Admission", "Parked", "PreparedRecord"]


class PreparedRecord(NamedTuple):
    """A record checked and serialized by ``produce()``, not batched yet."""

    topic: str
    key: Optional[bytes]
    value: Optional[bytes]
    #: the partition asked for, or ``None`` for the partitioner's choice
    partition: Optional[int]
    #: its encoded size (key + value + MESSAGE_OVERHEAD, plus its headers)
    size: int
    #: its CreateTime (epoch ms), or ``None`` for the time its batch opens
    timestamp: Optional[int] = None
    #: its headers (record batches only)
    headers: tuple[Header, ...] = ()


class Parked(NamedTuple):
    """A record waiting for topic metadata or for room in the buffer."""

    record: PreparedRecord
    future: "asyncio.Future[RecordMetadata]"
    #: when waiting for room fails with BufferFullError (the loop's clock)
    deadline: Optional[float]
    #: produce order, for flush()
    seq: int


class Admission:
    """The queue of parked records and the waits for room.

    Args:
        cluster: loads a topic's metadata.
        router: a topic's route once its metadata is loaded.
        accumulator: tells whether a record fits.
        place: batches an admitted record (on its topic's route).
        expedite: asks the sender to send open batches now (room is made by
            batches completing).
        tasks: where the admitting task runs.
        buffer_timeout: seconds a record may wait for room, or ``None``.
        outcomes: fails the futures of records that cannot be batched.
    """

    def __init__(
        self,
        *,
        cluster: Cluster,
        router: Router,
        accumulator: RecordAccumulator,
        place: Callable[[TopicRoute, PreparedRecord, "asyncio.Future[RecordMetadata]"], None],
        expedite: Callable[[], None],
        tasks: Tasks,
        buffer_timeout: Optional[float],
        outcomes: Outcomes,
    ) -> None:
        self._cluster = cluster
        self._outcomes = outcomes
        self._router = router
        self._accumulator = accumulator
        self._place = place
        self._expedite = expedite
        self._tasks = tasks
        self.buffer_timeout = buffer_timeout
        self.parked: collections.deque[Parked] = collections.deque()
        self._seq = 0
        self._admitting: Optional[asyncio.Task[None]] = None
        #: Fired when bytes were freed or parked records left the queue.
        self.room = Wakeup()
        #: Fired when parked records left the queue, or batches completed.
        self.progress = Wakeup()
        self.closed = False

    def __len__(self) -> int:
        return len(self.parked)

    def freed(self) -> None:
        """Batches completed or parked records left: wake who waits for that."""
        self.room.fire()
        self.progress.fire()

    def park(self, record: PreparedRecord, future: "asyncio.Future[RecordMetadata]") -> None:
        """Queue a record behind every record parked before it.

        Args:
            record: the record.
            future: its future, failed here if it cannot be batched.
        """
        deadline = None
        if self.buffer_timeout is not None:
            deadline = asyncio.get_running_loop().time() + self.buffer_timeout
        self._seq += 1
        self.parked.append(Parked(record, future, deadline, self._seq))
        if self._admitting is None:
            self._admitting = self._tasks.spawn(self._admit(), "admit")

    async def wait_for_room(self, topic: Optional[str], size: int,
                            deadline: Optional[float] = None, parked: bool = False) -> None:
        """Wait until ``size`` bytes fit (and, unless ``parked``, no record is parked).

        Args:
            topic: for the error's context.
            size: the bytes that must fit.
            deadline: when to give up (the loop's clock); default: after
                ``buffer_timeout``, or never.
            parked: the waiter is the first parked record itself.

        Raises:
            BufferFullError: not within ``buffer_timeout`` (or by ``deadline``).
        """
        loop = asyncio.get_running_loop()
        if deadline is None and self.buffer_timeout is not None:
            deadline = loop.time() + self.buffer_timeout
        accumulator = self._accumulator
        while not accumulator.has_room(size) or (not parked and self.parked):
            # Pending bytes only shrink as batches complete: send the open
            # ones now rather than after linger.
            self._expedite()
            timeout = None if deadline is None else deadline - loop.time()
            if timeout is not None and timeout <= 0:
                raise BufferFullError(
                    f"no room in the buffer ({accumulator.pending_bytes} of "
                    f"{accumulator.max_pending_bytes} bytes pending) within buffer_timeout",
                    topic=topic,
                )
            await self.room.wait(timeout)

    async def wait_admitted(self) -> None:
        """Wait until every record parked so far has left the queue."""
        target = self._seq
        parked = self.parked
        while parked and parked[0].seq <= target:
            self._expedite()
            await self.progress.wait()

    async def _admit(self) -> None:
        """Move parked records into batches, in order, as metadata and room allow."""
        parked = self.parked
        try:
            while parked:
                first = parked[0]
                if first.future.done():  # cancelled by its owner
                    parked.popleft()
                    continue
                route = self._router.route(first.record.topic)
                if route is None:
                    await self._load(first.record.topic)
                    continue
                if not self._accumulator.has_room(first.record.size):
                    await self._room_for(first)
                    continue
                parked.popleft()
                self._place(route, first.record, first.future)
                if not parked:
                    self.room.fire()  # enqueue() callers wait for an empty queue
        finally:
            self._admitting = None
            self.progress.fire()
            if parked and not self.closed:  # defensive: never strand a record
                self._admitting = self._tasks.spawn(self._admit(), "admit")

    async def _load(self, topic: str) -> None:
        """Load ``topic``'s metadata; fail its parked records if that fails."""
        self.progress.fire()
        try:
            await self._cluster.partitions_for(topic)
        except KielError as e:
            self._fail_topic(topic, e)
        except Exception as e:  # a bug: fail the records, do not strand them
            log.exception("producer: loading metadata of %r failed", topic)
            self._fail_topic(topic, e)

    async def _room_for(self, first: Parked) -> None:
        """Wait for room for the first parked record; fail it on timeout."""
        self.progress.fire()
        try:
            await self.wait_for_room(first.record.topic, first.record.size, first.deadline,
                                     parked=True)
        except KielError as e:
            self.parked.popleft()
            self._outcomes.fail(first.future, e, first.record.topic, first.record.partition)

    def _fail_topic(self, topic: str, error: Exception) -> None:
        """Fail every parked record of ``topic`` (its metadata cannot be had)."""
        keep: collections.deque[Parked] = collections.deque()
        for item in self.parked:
            if item.record.topic != topic:
                keep.append(item)
            else:
                self._outcomes.fail(
                    item.future,
                    copy_error(error, topic=topic) if isinstance(error, KielError) else error,
                    topic, item.record.partition,
                )
        self.parked.clear()
        self.parked.extend(keep)
        self.room.fire()

    def fail_all(self, error: KielError) -> None:
        """Stop admitting; fail every parked record.

        Args:
            error: what they fail with (a copy each, with its topic).
        """
        self.closed = True
        if self._admitting is not None:
            self._admitting.cancel()
        for item in self.parked:
            topic = item.record.topic
            self._outcomes.fail(item.future, copy_error(error, topic=topic), topic,
                                item.record.partition)
        self.parked.clear()
        self.freed()
