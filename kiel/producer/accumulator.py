"""Records waiting to be sent, in per-partition batches: pure bookkeeping.

No I/O, no tasks, no event loop: time comes in as numbers (``now``, and a
``clock`` read when a batch opens), leaders as a function, and each record
carries an opaque *payload* (the producer's future) that comes back when its
batch is settled. That is what makes it testable with a fake clock.

The life of a batch::

    append() -> the partition's open batch (a new one when the open one is
    full) -> drain(): the batch closes when full, when ``linger`` has passed
    or when a send is forced -> taken with the partition's other closed
    batches (one request's worth) while no request of that partition is in
    flight -> complete() (acknowledged or failed for good), or requeue() at
    the front of the partition (a retry: order kept).

A batch finishes once: :meth:`~RecordAccumulator.complete` a second time
(a late answer after a timeout, a failure then a retry's answer, a close
failing what is left) returns no payloads and frees no bytes, and a
finished batch is never requeued, taken or filled again.

Back-pressure: :attr:`RecordAccumulator.pending_bytes` counts every record
from :meth:`~RecordAccumulator.append` until its batch completes; it is
always the sum of the sizes of the unfinished batches, so never negative.
"""

import collections
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from itertools import accumulate, repeat
from typing import Any, NamedTuple, Optional

from kiel.compression import ZSTD, Codec
from kiel.exc import UnsupportedFeatureError
from kiel.protocol.messages import MessageSetBuilder
from kiel.protocol.record_batch import RecordBatchBuilder
from kiel.structs import Header, TopicPartition

__all__ = ["Drained", "PartitionQueue", "ProducerBatch", "RecordAccumulator"]

#: A timer may fire up to one clock resolution early: a batch whose linger
#: ends within this many seconds counts as due.
CLOCK_SLACK = 0.001


class ProducerBatch:
    """Records of one partition that travel together: one message set (or
    one compressed wrapper message), or one record batch, in one Produce request.

    Attributes:
        tp: its partition.
        values: the records' values in produce order, kept until the
            batch completes (a retry to a broker of another version encodes
            them again).
        keys: their keys, in the same order, or ``None`` while every key
            is ``None`` (unkeyed records hold no key list at all).
        extras: ``{index: (timestamp, headers)}`` for the records produced
            with an explicit timestamp or headers (record batches only).
        payloads: one opaque payload per record, in the same order
            (``None`` for a record added without one: see ``bare``).
        size: bytes of the encoded (uncompressed) set: what counts against
            ``batch_size`` and ``max_pending_bytes``.
        created: when the batch opened (the accumulator's clock).
        wall: when the batch opened, epoch milliseconds: the CreateTime of
            its records that have no timestamp of their own.
        failures: failed attempts so far (the retry state).
        seq: creation order, across partitions.
        done: it was completed (acknowledged or failed for good).
        unanswered: attempts sent whose answer never came (timed out, cut,
            cancelled): while above 0 the broker may have written the batch.
        producer_id, producer_epoch, base_sequence: the idempotent
            producer's numbering of the batch (-1 each until it is given
            one: see :mod:`kiel.producer.idempotence`); a retry keeps them.
        attempts: times it was taken for a request.
        walls: ``None``, or ``[(first index, wall)]`` when batches that
            opened at different times were joined (:meth:`absorb`): each
            segment's records keep their own batch's CreateTime.
    """

    __slots__ = ("tp", "values", "keys", "extras", "payloads", "bare", "size", "created", "wall",
                 "failures", "seq", "done", "unanswered", "producer_id", "producer_epoch",
                 "base_sequence", "attempts", "walls", "_data", "_format")

    def __init__(self, tp: TopicPartition, created: float, seq: int) -> None:
        self.tp = tp
        # Strategy: values and keys in two lists, not a (key, value) pair
        # per record: one object fewer per record for the allocator and the
        # cyclic garbage collector, which scans every pending record.
        self.values: list[Optional[bytes]] = []
        self.keys: Optional[list[Optional[bytes]]] = None
        self.extras: Optional[dict[int, tuple[Optional[int], tuple[Header, ...]]]] = None
        self.payloads: list[Any] = []
        #: How many of the payloads are ``None`` (records added by
        #: :meth:`RecordAccumulator.extend`, without a payload of their own).
        self.bare = 0
        self.size = 0
        self.created = created
        self.wall = int(time.time() * 1000)
        self.failures = 0
        self.seq = seq
        self.done = False
        self.unanswered = 0
        self.producer_id = self.producer_epoch = self.base_sequence = -1
        self.attempts = 0
        self.walls: Optional[list[tuple[int, int]]] = None
        self._data: Optional[bytes] = None
        self._format = -1

    @property
    def records(self) -> list[tuple[Optional[bytes], Optional[bytes]]]:
        """The ``(key, value)`` pairs, in produce order."""
        return list(self._pairs())

    def _pairs(self) -> Iterator[tuple[Optional[bytes], Optional[bytes]]]:
        keys = self.keys
        return zip(repeat(None) if keys is None else keys, self.values)

    def absorb(self, other: "ProducerBatch") -> None:
        """Append the records of ``other`` (a later batch of the same
        partition, never sent) to this one, which was never sent either.

        Strategy: one batch per partition per request is what Produce v3+
        carries (Apache Kafka refuses more); batches that closed while the
        partition had its requests out go as one, as large as a request
        allows, instead of one small request each.
        """
        n = len(self.values)
        last = self.walls[-1][1] if self.walls else self.wall
        if other.wall != last:
            if self.walls is None:
                self.walls = [(0, self.wall)]
            self.walls.append((n, other.wall))
        if other.keys is not None or self.keys is not None:
            if self.keys is None:
                self.keys = [None] * n
            self.keys.extend(other.keys if other.keys is not None
                             else repeat(None, len(other.values)))
        if other.extras:
            if self.extras is None:
                self.extras = {}
            for index, extra in other.extras.items():
                self.extras[n + index] = extra
        self.values.extend(other.values)
        self.payloads.extend(other.payloads)
        self.bare += other.bare
        self.size += other.size
        self._data = None

    def _wall_of(self, index: int) -> int:
        walls = self.walls
        if walls is None:
            return self.wall
        return walls[bisect_right(walls, (index, 2**63)) - 1][1]

    def number(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Give the batch its idempotent numbering (or take it away with -1,
        -1, -1): its bytes are encoded again with it."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self._data = None

    def encode(self, codec: Optional[Codec], record_batch: bool = False,
               codec_id: int = 0, compresslevel: Optional[int] = None,
               transactional: bool = False) -> bytes:
        """The batch's bytes, encoded (and compressed) once per format: a
        retry in the same format sends the same bytes.

        Args:
            codec: the compression codec of a message set, or ``None``.
            record_batch: build a record batch (magic 2, Produce v3+)
                instead of a magic-0 message set (Produce v0).
            codec_id: the codec id of a record batch.
            compresslevel: the gzip or zstd level of a record batch.
            transactional: set a record batch's transactional bit (a
                transactional producer's batches).

        Returns:
            the message set or record batch bytes.

        Raises:
            UnsupportedFeatureError: a message set was asked for records
                with timestamps or headers, or with zstd compression: the
                broker speaks only Produce v0.
        """
        fmt = 2 if record_batch else 0
        data = self._data
        if data is None or self._format != fmt:
            if record_batch:
                data = self._record_batch(codec_id, compresslevel, transactional)
            else:
                if self.extras:
                    raise UnsupportedFeatureError(
                        "record timestamps and headers need Produce v3 (Kafka 0.11+); "
                        "this broker speaks only v0"
                    )
                if codec is not None and codec.codec_id == ZSTD:
                    raise UnsupportedFeatureError(
                        "zstd compression needs Produce v3 (Kafka 2.1+); "
                        "this broker speaks only v0"
                    )
                builder = MessageSetBuilder(codec)
                builder.extend(self._pairs())
                data = builder.build()
            self._data, self._format = data, fmt
        return data

    def _record_batch(self, codec_id: int, compresslevel: Optional[int],
                      transactional: bool = False) -> bytes:
        builder = RecordBatchBuilder(codec_id, compresslevel=compresslevel,
                                     producer_id=self.producer_id,
                                     producer_epoch=self.producer_epoch,
                                     base_sequence=self.base_sequence,
                                     is_transactional=transactional)
        append = builder.append
        wall = self.wall
        extras = self.extras
        walls = self.walls
        if not extras:
            keys, values = self.keys, self.values
            if walls is None:
                builder.extend_columns(keys, values, timestamp=wall)
            else:
                bounds = [start for start, _ in walls[1:]] + [len(values)]
                for (start, segment_wall), end in zip(walls, bounds):
                    builder.extend_columns(None if keys is None else keys[start:end],
                                           values[start:end], timestamp=segment_wall)
            return builder.build()
        for index, (key, value) in enumerate(self._pairs()):
            timestamp, headers = extras.get(index, (None, ()))
            append(key, value,
                   timestamp=(wall if walls is None else self._wall_of(index))
                   if timestamp is None else timestamp,
                   headers=headers)
        return builder.build()


class PartitionQueue:
    """One partition's batches: the one being filled, closed ones waiting to
    go (retries at the front), and how many of its requests are in flight."""

    __slots__ = ("tp", "open", "ready", "in_flight", "retry_at", "stale", "held",
                 "next_sequence", "unacked")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.open: Optional[ProducerBatch] = None
        self.ready: collections.deque[ProducerBatch] = collections.deque()
        #: requests carrying batches of this partition, out and unsettled
        self.in_flight = 0
        #: a batch was put back for a retry: nothing more goes until every
        #: request of the partition in flight has settled (order kept)
        self.held = False
        #: the idempotent producer's next sequence number for the partition
        self.next_sequence = 0
        #: batches numbered and not completed, in sequence order
        self.unacked: collections.deque[ProducerBatch] = collections.deque()
        #: no send before this time (a retry's backoff)
        self.retry_at = 0.0
        #: no send until the metadata refresh under way ends
        self.stale = False


#: What a partition's share of a request is: its queue and the batches taken.
Taken = tuple[PartitionQueue, list[ProducerBatch]]


class Drained(NamedTuple):
    """What :meth:`RecordAccumulator.drain` took out."""

    #: Batches to send now, by leader broker id; their queues are in flight.
    ready: dict[int, list[Taken]]
    #: Batches of partitions without a usable leader (to retry or fail).
    unroutable: list[Taken]
    #: When something not sendable now becomes sendable (a linger or a
    #: backoff ends), or ``None``.
    next_due: Optional[float]


class RecordAccumulator:
    """Per-partition batches of records, and the bytes they hold.

    Args:
        batch_size: a batch closes when its records reach this many bytes (a
            larger record travels alone).
        linger: seconds a batch that is not full may wait for more records.
        max_request_size: bytes of one partition's batches taken together.
        max_pending_bytes: the back-pressure limit :meth:`has_room` applies.
        max_in_flight: requests of one partition in flight at once.
        one_batch: one batch of a partition per request, the closed ones
            never sent joined into it while they fit in ``max_request_size``
            (what Produce v3+ requires: one record batch per partition);
            without it (message sets only), a request carries as many of the
            partition's closed batches as fit.
        codec: the compression codec message sets are encoded with, or ``None``.
        clock: the current time in seconds, read when a batch opens.
        codec_id: the codec id record batches are compressed with.
        compresslevel: the gzip or zstd level of record batches.
        unheld: ``unheld(payloads) -> bool``, asked of a batch's payloads
            when it closes (it takes no more records): when it says nobody
            but the batch holds them, they are dropped there and then, and
            the batch's records count as ``bare`` from then on. ``None``:
            payloads stay until the batch completes.
    """

    def __init__(
        self,
        *,
        batch_size: int,
        linger: float,
        max_request_size: int,
        max_pending_bytes: int,
        codec: Optional[Codec],
        clock: Callable[[], float],
        codec_id: int = 0,
        compresslevel: Optional[int] = None,
        max_in_flight: int = 1,
        one_batch: bool = False,
        unheld: Optional[Callable[[list[Any]], bool]] = None,
    ) -> None:
        self.batch_size = batch_size
        self._unheld = unheld
        self.max_in_flight = max_in_flight
        self.one_batch = one_batch or max_in_flight > 1
        self.codec_id = codec_id
        self.compresslevel = compresslevel
        self.linger = linger
        self.max_request_size = max_request_size
        self.max_pending_bytes = max_pending_bytes
        self.codec = codec
        self._clock = clock
        #: Bytes of records appended and not yet completed.
        self.pending_bytes = 0
        self._queues: dict[TopicPartition, PartitionQueue] = {}
        self._active: set[PartitionQueue] = set()  # with an open or a closed batch
        # Insertion order is creation order: the first key is the oldest.
        self._unfinished: dict[ProducerBatch, None] = {}
        self._seq = 0
        self._flushes = 0

    # ------------------------------------------------------------------
    # filling

    def queue(self, tp: TopicPartition) -> PartitionQueue:
        """The queue of partition ``tp`` (made on first use)."""
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = PartitionQueue(tp)
        return queue

    def queues(self) -> list[PartitionQueue]:
        """Every partition's queue made so far."""
        return list(self._queues.values())

    def has_room(self, size: int) -> bool:
        """Whether ``size`` more bytes fit under ``max_pending_bytes`` (a
        record larger than the limit fits when nothing else is pending)."""
        return self.pending_bytes + size <= self.max_pending_bytes or not self.pending_bytes

    def append(
        self,
        queue: PartitionQueue,
        key: Optional[bytes],
        value: Optional[bytes],
        size: int,
        payload: Any,
        timestamp: Optional[int] = None,
        headers: tuple[Header, ...] = (),
    ) -> Optional[float]:
        """Add a record to its partition's open batch.

        Args:
            queue: the partition's queue.
            key: the serialized key, or ``None``.
            value: the serialized value, or ``None``.
            size: the record's encoded size, ``MESSAGE_OVERHEAD + len(key) +
                len(value)`` (plus its headers).
            payload: returned by :meth:`complete` with the batch (``None``:
                counted in the batch's ``bare``).
            timestamp: the record's CreateTime (epoch ms), or ``None``: the
                time its batch opened.
            headers: the record's headers.

        Returns:
            ``None``, or when a batch was opened, the time at which the
            sender should next drain (now if a full batch closed or there is
            no linger).
        """
        batch = queue.open
        due = None
        if batch is None or batch.size + size > self.batch_size:
            due = self._open(queue)
            batch = queue.open
            assert batch is not None
        if timestamp is not None or headers:
            if batch.extras is None:
                batch.extras = {}
            batch.extras[len(batch.values)] = (timestamp, headers)
        keys = batch.keys
        if key is not None and keys is None:
            keys = batch.keys = [None] * len(batch.values)
        if keys is not None:
            keys.append(key)
        batch.values.append(value)
        batch.payloads.append(payload)
        if payload is None:
            batch.bare += 1
        batch.size += size
        self.pending_bytes += size
        return due

    def extend(
        self, queue: PartitionQueue, values: list[bytes], sizes: list[int]
    ) -> Optional[float]:
        """Add unkeyed records to a partition, in order, without a payload
        each (their payloads are ``None``): what :meth:`append` does for
        each, in a few steps per batch rather than per record.

        Args:
            queue: the partition's queue.
            values: the records' values.
            sizes: each record's encoded size, as :meth:`append` takes it.

        Returns:
            as :meth:`append`: ``None``, or the earliest time the sender
            should next drain for the batches opened.
        """
        # Strategy: the running total of sizes tells, by bisection, how
        # many of the next records fit the open batch; they are added as
        # one slice.
        total = list(accumulate(sizes, initial=0))
        limit = self.batch_size
        due: Optional[float] = None
        i, n = 0, len(values)
        while i < n:
            batch = queue.open
            if batch is None or batch.size + sizes[i] > limit:
                opened = self._open(queue)
                due = opened if due is None or opened < due else due
                batch = queue.open
                assert batch is not None
            # The records from i that fit (one at least: a record larger
            # than batch_size travels alone, in a batch of its own).
            j = max(bisect_right(total, total[i] + limit - batch.size, i + 1) - 1, i + 1)
            batch.values.extend(values[i:j])
            if batch.keys is not None:
                batch.keys.extend(repeat(None, j - i))
            batch.payloads.extend(repeat(None, j - i))
            batch.bare += j - i
            added = total[j] - total[i]
            batch.size += added
            self.pending_bytes += added
            i = j
        return due

    def _open(self, queue: PartitionQueue) -> float:
        now = self._clock()
        full = queue.open
        if full is not None:
            queue.ready.append(full)
            self._release(full)
        self._seq += 1
        batch = queue.open = ProducerBatch(queue.tp, now, self._seq)
        self._unfinished[batch] = None
        self._active.add(queue)
        return now if full is not None or not self.linger else now + self.linger

    def _release(self, batch: ProducerBatch) -> None:
        """A batch closed: drop its payloads if nobody else holds them.

        Strategy: a record's payload is its future, which the cyclic
        garbage collector scans for as long as it lives. A loop that drops
        the futures it is given (the producer guide's ``enqueue()`` loop,
        ``produce()`` then ``flush()``) left them alive until the
        acknowledgement, long enough to reach the oldest generation, whose
        full collections then took the loop for 10 to 40 ms each and a
        fifth of the producer's CPU. Dropped when the batch closes (well
        under a millisecond after they were made, in such a loop) they die
        young. The records stay: they count as ``bare``, as
        :meth:`extend`'s do.
        """
        unheld = self._unheld
        payloads = batch.payloads
        if unheld is not None and not batch.bare and unheld(payloads):
            batch.payloads = [None] * len(payloads)
            batch.bare = len(payloads)

    # ------------------------------------------------------------------
    # draining

    def drain(
        self, now: float, leader_of: Callable[[TopicPartition], Optional[int]], force: bool = False
    ) -> Drained:
        """Close the batches that are due and take what can be sent now.

        A partition is skipped while ``max_in_flight`` requests of it are in
        flight (or any, after a batch of it was put back for a retry),
        during its backoff and while it waits for fresh metadata. Its open batch
        closes when ``linger`` has passed (or always with ``force``, during
        a flush, or once closed); its closed batches are taken, the first
        always, then more while they fit in ``max_request_size``.

        Args:
            now: the current time (the accumulator's clock).
            leader_of: a partition's leader broker id, or ``None`` if it has
                no usable leader.
            force: close open batches whatever their linger.

        Returns:
            a :class:`Drained`.
        """
        force = force or self._flushes > 0
        due = now - self.linger + CLOCK_SLACK
        ready: dict[int, list[Taken]] = {}
        unroutable: list[Taken] = []
        next_due: Optional[float] = None
        limit = self.max_in_flight
        for queue in list(self._active):
            if queue.in_flight >= limit or queue.stale or (queue.held and queue.in_flight):
                continue
            if queue.retry_at > now + CLOCK_SLACK:
                next_due = _earliest(next_due, queue.retry_at)
                continue
            batch = queue.open
            if batch is not None:
                if force or batch.created <= due:
                    queue.ready.append(batch)
                    queue.open = None
                    self._release(batch)
                else:
                    next_due = _earliest(next_due, batch.created + self.linger)
            if not queue.ready:
                if queue.open is None:
                    self._active.discard(queue)
                continue
            leader = leader_of(queue.tp)
            if leader is None:
                stuck = [batch for batch in queue.ready if not batch.done]
                queue.ready.clear()
                if stuck:
                    unroutable.append((queue, stuck))
                continue
            queue.held = False
            while queue.in_flight < limit:
                taken = self._take(queue)
                if not taken:  # only finished batches were waiting
                    break
                queue.in_flight += 1
                ready.setdefault(leader, []).append((queue, taken))
            if not queue.ready and queue.open is None and not queue.in_flight:
                self._active.discard(queue)
        return Drained(ready, unroutable, next_due)

    def _take(self, queue: PartitionQueue) -> list[ProducerBatch]:
        """The first unfinished batch of ``queue.ready``, then more while they
        fit in ``max_request_size``; finished ones met on the way are dropped.

        Strategy: a batch completed while it waited (a late answer, a close)
        stays in the deque (removing it from the middle costs a scan); it is
        skipped here, where the deque is consumed from the front anyway.
        """
        batches = queue.ready
        taken: list[ProducerBatch] = []
        total = 0
        while batches:
            batch = batches[0]
            if not batch.done:
                if taken and (self.one_batch or total + batch.size > self.max_request_size):
                    break
                taken.append(batch)
                total += batch.size
            batches.popleft()
        if self.one_batch and taken and taken[0].attempts == 0:
            self._coalesce(taken[0], batches)
        for batch in taken:
            batch.attempts += 1
        return taken

    def _coalesce(self, first: ProducerBatch, batches: "collections.deque[ProducerBatch]"
                  ) -> None:
        """Join to ``first`` the batches after it that were never sent, while
        they fit in ``max_request_size`` (see :meth:`ProducerBatch.absorb`)."""
        while batches:
            batch = batches[0]
            if not batch.done:
                if batch.attempts or first.size + batch.size > self.max_request_size:
                    return
                first.absorb(batch)
                # Its records now belong to ``first``: it is finished
                # without settling anything (complete() returns nothing).
                batch.done = True
                batch.payloads = []
                del self._unfinished[batch]
            batches.popleft()

    # ------------------------------------------------------------------
    # settling

    def requeue(self, queue: PartitionQueue, batches: list[ProducerBatch], retry_at: float) -> None:
        """Put batches back at the front of their partition, in their order,
        not to be sent before ``retry_at``; finished ones are left out (a
        finished batch is never sent again)."""
        live = [batch for batch in batches if not batch.done]
        if not live:
            return
        ready = queue.ready
        if ready and ready[0].seq < live[-1].seq:
            # Several requests of the partition were out: a batch put back
            # earlier may be younger than these. Creation order is the
            # order the partition's records were produced in.
            merged = sorted([*live, *ready], key=_creation)
            ready.clear()
            ready.extend(merged)
        else:
            ready.extendleft(reversed(live))
        queue.held = True
        queue.retry_at = retry_at
        self._active.add(queue)

    def complete(self, batch: ProducerBatch) -> list[Any]:
        """Forget a batch that was acknowledged or failed for good.

        Idempotent: a batch finishes once, whatever calls this again.

        Returns:
            its payloads, in record order (empty if it was completed before).
        """
        if batch.done:
            return []
        batch.done = True
        del self._unfinished[batch]
        self.pending_bytes -= batch.size
        queue = self._queues.get(batch.tp)
        if queue is not None:
            if queue.open is batch:
                queue.open = None  # a finished batch takes no more records
            if batch.base_sequence >= 0 and batch in queue.unacked:
                queue.unacked.remove(batch)
        payloads = batch.payloads
        batch.payloads = []
        batch.values = []
        batch.keys = None
        batch.extras = None
        batch._data = None
        return payloads

    def mark_stale(self, queue: PartitionQueue) -> None:
        """Hold a partition back until :meth:`clear_stale` (a metadata refresh)."""
        queue.stale = True
        self._active.add(queue)

    def clear_stale(self) -> None:
        """Release every partition held back by :meth:`mark_stale`."""
        for queue in self._queues.values():
            queue.stale = False

    # ------------------------------------------------------------------
    # flush and close

    def begin_flush(self) -> None:
        """Until :meth:`end_flush`, :meth:`drain` closes every open batch."""
        self._flushes += 1

    def end_flush(self) -> None:
        """Undo one :meth:`begin_flush`."""
        self._flushes -= 1

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the newest batch (0 before the first)."""
        return self._seq

    def oldest_unfinished(self) -> Optional[int]:
        """The ``seq`` of the oldest batch not completed yet, or ``None``."""
        for batch in self._unfinished:
            return batch.seq
        return None

    def unfinished(self) -> list[ProducerBatch]:
        """Every batch not completed yet, oldest first."""
        return list(self._unfinished)

    @property
    def pending_records(self) -> int:
        """Records appended and not yet completed."""
        return sum(len(batch.payloads) for batch in self._unfinished)


def _creation(batch: ProducerBatch) -> int:
    return batch.seq


def _earliest(current: Optional[float], candidate: float) -> float:
    return candidate if current is None or candidate < current else current
