"""Records that wait, in order, before they are batched: for their topic's
metadata (or behind records that do).

:meth:`~kiel.producer.Producer.produce` never waits: a record that cannot be
batched now is *parked* here with its future, and one task admits parked
records in produce order as metadata arrives. Parked records count against
``max_pending_bytes`` with the batched ones (:meth:`Admission.has_room`):
every record the producer holds is under the one bound, and a record that
does not fit is refused by ``produce()`` (:class:`~kiel.exc.BufferFullError`)
or waited for by :meth:`~kiel.producer.Producer.enqueue` (up to
``buffer_timeout``). Many parked records failing together fail a chunk per
IOLoop step (:func:`~kiel.producer.outcomes.in_chunks`), and many admitted
together are batched a chunk per step.
"""

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import NamedTuple, Optional

from kiel._aio import Tasks, Wakeup
from kiel.cluster import Cluster
from kiel.exc import BufferFullError, KielError
from kiel.producer.accumulator import RecordAccumulator
from kiel.producer.outcomes import FAIL_CHUNK, Outcomes, in_chunks
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
    #: ``None`` for a record of produce_many() (it has none)
    future: "Optional[asyncio.Future[RecordMetadata]]"
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
        place: Callable[
            [TopicRoute, PreparedRecord, "Optional[asyncio.Future[RecordMetadata]]"], None
        ],
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
        #: Bytes of the parked records (their sizes, as batched records count).
        self.parked_bytes = 0
        self._seq = 0
        self._admitting: Optional[asyncio.Task[None]] = None
        #: Fired when bytes were freed or parked records left the queue.
        self.room = Wakeup()
        #: Fired when parked records left the queue, or batches completed.
        self.progress = Wakeup()
        self.closed = False

    def __len__(self) -> int:
        return len(self.parked)

    @property
    def held_bytes(self) -> int:
        """Bytes of every record held: batched (not yet acknowledged or
        failed) and parked."""
        return self._accumulator.pending_bytes + self.parked_bytes

    def has_room(self, size: int) -> bool:
        """Whether a record of ``size`` bytes fits under ``max_pending_bytes``
        with every record held (a record larger than the bound fits when
        nothing else is held)."""
        held = self._accumulator.pending_bytes + self.parked_bytes
        return held + size <= self._accumulator.max_pending_bytes or not held

    def freed(self) -> None:
        """Batches completed or parked records left: wake who waits for that."""
        self.room.fire()
        self.progress.fire()

    def park(self, record: PreparedRecord,
             future: "Optional[asyncio.Future[RecordMetadata]]") -> None:
        """Queue a record behind every record parked before it.

        Args:
            record: the record.
            future: its future, failed here if it cannot be batched
                (``None``: none, the failure is counted for flush()).
        """
        deadline = None
        if self.buffer_timeout is not None:
            deadline = asyncio.get_running_loop().time() + self.buffer_timeout
        self._seq += 1
        self.parked.append(Parked(record, future, deadline, self._seq))
        self.parked_bytes += record.size
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
        # A parked record's bytes are held already: it waits for room among
        # the batched ones only.
        while (not accumulator.has_room(size) if parked
               else not self.has_room(size) or self.parked):
            # Pending bytes only shrink as batches complete: send the open
            # ones now rather than after linger.
            self._expedite()
            timeout = None if deadline is None else deadline - loop.time()
            if timeout is not None and timeout <= 0:
                raise BufferFullError(
                    f"no room in the buffer ({self.held_bytes} of "
                    f"{accumulator.max_pending_bytes} bytes held) within buffer_timeout",
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
        placed = 0
        try:
            while parked:
                if placed >= FAIL_CHUNK:
                    # Many records waited for one topic's metadata: batch
                    # them a chunk per loop step, as many failing ones fail.
                    placed = 0
                    await asyncio.sleep(0)
                    continue
                first = parked[0]
                if first.future is not None and first.future.done():  # cancelled by its owner
                    self._unpark()
                    continue
                route = self._router.route(first.record.topic)
                if route is None:
                    await self._load(first.record.topic)
                    continue
                if not self._accumulator.has_room(first.record.size):
                    await self._room_for(first)
                    continue
                self._unpark()
                self._place(route, first.record, first.future)
                placed += 1
                if not parked:
                    self.room.fire()  # enqueue() callers wait for an empty queue
        finally:
            self._admitting = None
            self.progress.fire()
            if parked and not self.closed:  # defensive: never strand a record
                self._admitting = self._tasks.spawn(self._admit(), "admit")

    def _unpark(self) -> Parked:
        """Take the first parked record off the queue."""
        item = self.parked.popleft()
        self.parked_bytes -= item.record.size
        return item

    async def _load(self, topic: str) -> None:
        """Load ``topic``'s metadata; fail its parked records if that fails."""
        self.progress.fire()
        try:
            await self._cluster.partitions_for(topic)
        except KielError as e:
            await self._fail_topic(topic, e)
        except Exception as e:  # a bug: fail the records, do not strand them
            log.exception("producer: loading metadata of %r failed", topic)
            await self._fail_topic(topic, e)

    async def _room_for(self, first: Parked) -> None:
        """Wait for room for the first parked record; fail it on timeout."""
        self.progress.fire()
        try:
            await self.wait_for_room(first.record.topic, first.record.size, first.deadline,
                                     parked=True)
        except KielError as e:
            self._unpark()
            self._outcomes.fail(first.future, e, first.record.topic, first.record.partition)

    def _take(self, topic: Optional[str] = None) -> list[Parked]:
        """Take the parked records (of ``topic``, or all) off the queue."""
        if topic is None:
            taken = list(self.parked)
            self.parked.clear()
        else:
            taken = [item for item in self.parked if item.record.topic == topic]
            keep = [item for item in self.parked if item.record.topic != topic]
            self.parked.clear()
            self.parked.extend(keep)
        self.parked_bytes -= sum(item.record.size for item in taken)
        return taken

    async def _fail_taken(self, taken: list[Parked], error: BaseException) -> None:
        """Fail records taken off the queue, a chunk per IOLoop step.

        Args:
            error: what they fail with (a copy each with its topic, for a
                :class:`~kiel.exc.KielError`).
        """
        fail = self._outcomes.fail

        def one(item: Parked) -> int:
            topic = item.record.topic
            fail(item.future,
                 copy_error(error, topic=topic) if isinstance(error, KielError) else error,
                 topic, item.record.partition)
            return 1

        await in_chunks(taken, one)

    async def _fail_topic(self, topic: str, error: Exception) -> None:
        """Fail every parked record of ``topic`` (its metadata cannot be had)."""
        taken = self._take(topic)
        self.room.fire()
        await self._fail_taken(taken, error)

    async def fail_all(self, error: KielError) -> None:
        """Stop admitting; fail every parked record, a chunk per IOLoop step.

        Args:
            error: what they fail with (a copy each, with its topic).
        """
        self.closed = True
        if self._admitting is not None:
            self._admitting.cancel()
        taken = self._take()
        self.freed()
        await self._fail_taken(taken, error)
