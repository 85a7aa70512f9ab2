"""Turn one partition's fetched message set into records, without stalling the IOLoop.

The :class:`Decoder` runs :func:`kiel.protocol.messages.decode_message_set`
(a Fetch v0 answer: magic 0/1 message sets) or
:func:`kiel.protocol.record_batch.decode_record_batches` (a Fetch v4 answer:
record batches, magic 2, with any older entries) over a partition's answer a
slice at a time, yields to the IOLoop whenever
its time budget is spent, grows the partition's fetch size when not even one
message fit, and runs the deserializers. It writes its result into the
partition's :class:`~kiel.consumer.subscription.PartitionState`: the records
to hand out, or the error to raise. No I/O.
"""

import asyncio
import logging
import time
from typing import Any, List, Optional, Tuple

from kiel.consumer.subscription import PartitionState
from kiel.exc import DeserializationError, MessageTooLargeError, ProtocolError
from kiel.protocol.messages import decode_message_set
from kiel.protocol.record_batch import decode_record_batches
from kiel.serializers import Deserializer
from kiel.structs import Record

__all__ = ["Decoder"]

log = logging.getLogger(__name__)

_new_record = tuple.__new__
#: Bytes of the first decode slice; later slices are sized from the measured
#: decode speed, within [_MIN_DECODE_CHUNK, _MAX_DECODE_CHUNK].
_DECODE_CHUNK = 64 * 1024
_MIN_DECODE_CHUNK = 4 * 1024
_MAX_DECODE_CHUNK = 1024 * 1024
#: Shortest time a slice aims at (with a decode budget of 0).
_MIN_SLICE_TIME = 0.0005

#: What the slicing pass found: records, the offset after the last complete
#: message, the bytes of complete messages, and the size the first message needs.
_Sliced = Tuple[List[Record], Optional[int], int, Optional[int]]


class Decoder:
    """Decodes fetched message sets into partitions' buffers, one at a time.

    Args:
        max_fetch_size: the largest fetch size a partition may grow to; a
            message larger than that is a :class:`~kiel.exc.MessageTooLargeError`.
        deserializer: called with each non-null value.
        key_deserializer: called with each non-null key.
        decode_budget: seconds of decoding after which the decoder yields to
            the IOLoop (the loop's worst stall from decoding).
    """

    def __init__(
        self,
        *,
        max_fetch_size: int,
        deserializer: Optional[Deserializer] = None,
        key_deserializer: Optional[Deserializer] = None,
        decode_budget: float = 0.002,
    ) -> None:
        self.max_fetch_size = max_fetch_size
        self.deserializer = deserializer
        self.key_deserializer = key_deserializer
        self.decode_budget = decode_budget
        #: Times the decoder yielded to the IOLoop (for tests and benchmarks).
        self.yields = 0
        self._step_started = 0.0
        self._chunk = _DECODE_CHUNK
        # One decoder at a time: a loop iteration then runs at most one
        # decode budget, not one per leader answering at once.
        self._lock = asyncio.Lock()

    def resumed(self) -> None:
        """A task resumed by the network starts a new loop step (see :meth:`_breathe`)."""
        self._step_started = time.monotonic()

    async def decode(
        self, st: PartitionState, offset: int, epoch: int, data: bytes,
        *, record_batches: bool = False,
    ) -> bool:
        """Decode ``data``, fetched for ``st`` at ``offset``, into its buffer.

        Waits its turn behind another partition's decoding; an answer that
        stopped being current meanwhile (a seek, an unassignment) is dropped.

        Args:
            st: the partition's state.
            offset: the position the fetch asked for.
            epoch: the partition's epoch when the fetch left.
            data: the partition's message set or records.
            record_batches: ``data`` is a Fetch v4 answer (record batches).

        Returns:
            True when the answer counts as a healthy round (records, or an
            empty set); False when the fetch must be retried with a larger
            size, the answer was dropped, or an error was kept in ``st.error``.
        """
        lock = self._lock
        if lock.locked():
            await lock.acquire()
            self._step_started = time.monotonic()
        else:
            await lock.acquire()  # free: returns without suspending
        try:
            return st.current(offset, epoch) and await self._decode(
                st, offset, epoch, data, record_batches
            )
        finally:
            lock.release()

    async def _decode(
        self, st: PartitionState, offset: int, epoch: int, data: bytes, record_batches: bool
    ) -> bool:
        tp = st.tp
        try:
            sliced = await self._slices(st, offset, epoch, data, record_batches)
        except ProtocolError as e:
            e.with_context(api="Fetch", topic=tp.topic, partition=tp.partition)
            if e.offset is None:
                e.with_context(offset=offset)
            st.error = e
            return False
        if sliced is None:
            return False
        records, next_offset, valid, needed = sliced
        if valid == 0 and data:
            return self._grow(st, offset, needed)
        st.failures = 0
        st.answered = True
        if records and (self.deserializer is not None or self.key_deserializer is not None):
            deserialized = await self._deserialize(st, offset, epoch, records)
            if deserialized is None:
                return False
            records = deserialized
        if not st.current(offset, epoch):
            return False
        if records:
            st.buffer = records
            st.next_offset = records[-1].offset + 1
        elif next_offset is not None and next_offset > offset:
            # Only messages before the position (inside a compressed wrapper).
            st.position = st.next_offset = next_offset
        return True

    async def _slices(
        self, st: PartitionState, offset: int, epoch: int, data: bytes,
        record_batches: bool = False,
    ) -> Optional[_Sliced]:
        """Decode ``data`` slice by slice (message sets, or record batches).

        Returns:
            what was decoded, or ``None`` when ``st`` stopped being current
            while the decoder yielded.

        Raises:
            ProtocolError: a message does not decode.
        """
        topic, partition = st.tp
        records: List[Record] = []
        next_offset: Optional[int] = None
        needed: Optional[int] = None
        size = len(data)
        pos = 0
        chunk = self._chunk
        # Strategy: decode a slice at a time (a slice ends wherever a message
        # is cut; ``valid_bytes`` says where the next one starts) and hand the
        # loop back whenever ``decode_budget`` is spent. Slices are sized from
        # the measured decode speed to take about half the budget: bytes are a
        # poor clock, as 64 KiB of compressed wrappers can hold 20,000
        # messages. A 10 MB fetch then never stalls the IOLoop for much more
        # than a budget (or one compressed wrapper, which decodes as a whole).
        clock = time.perf_counter
        while pos < size:
            end = min(size, pos + chunk)
            piece = data if pos == 0 and end == size else data[pos:end]
            started = clock()
            # The magic-2 branch: the same slices and budget, a record batch
            # being the unit that decodes whole (like a compressed wrapper).
            if record_batches:
                batches = decode_record_batches(piece, topic, partition, min_offset=offset)
                too_large, first_size = batches.first_batch_too_large, batches.first_batch_size
                result: Any = batches
            else:
                result = decode_message_set(piece, topic, partition, min_offset=offset)
                too_large, first_size = result.first_message_too_large, result.first_message_size
            if too_large:
                if end < size:  # the message is larger than a slice: widen it
                    chunk = max(2 * chunk, first_size or 0)
                    continue
                needed = first_size
                break
            elapsed = clock() - started
            if result.valid_bytes and elapsed > 0:
                target = max(self.decode_budget / 2, _MIN_SLICE_TIME)
                ideal = int(result.valid_bytes * target / elapsed)
                self._chunk = min(max(ideal, _MIN_DECODE_CHUNK), _MAX_DECODE_CHUNK)
            chunk = self._chunk
            pos += result.valid_bytes
            if result.next_offset is not None:
                next_offset = result.next_offset
            if result.records:
                records.extend(result.records)
            if result.truncated and end >= size:
                break  # the broker cut the last message at max_bytes
            if await self._breathe() and not st.current(offset, epoch):
                return None
        return records, next_offset, pos, needed

    async def _breathe(self) -> bool:
        """Yield to the IOLoop if this step of the loop has used up ``decode_budget``.

        Strategy: the clock is the decoder's, not one decode call's: it starts
        when a fetch task resumes (an answer arrived, or after a yield), so
        finishing one partition and starting the next in the same step still
        counts as one step. Only one partition decodes at a time (``_lock``).

        Returns:
            whether it yielded (the caller re-checks its partition's state).
        """
        if time.monotonic() - self._step_started < self.decode_budget:
            return False
        await asyncio.sleep(0)
        self.yields += 1
        self._step_started = time.monotonic()
        return True

    def _grow(self, st: PartitionState, offset: int, needed: Optional[int]) -> bool:
        """The first message did not fit: double the fetch size, or give up at the cap.

        Returns:
            False (the partition is fetched again, or its error raised).
        """
        tp = st.tp
        if st.fetch_size >= self.max_fetch_size or (needed or 0) > self.max_fetch_size:
            st.error = MessageTooLargeError(
                f"a message of {needed or 'more than ' + str(st.fetch_size)} bytes does not fit "
                f"max_fetch_size={self.max_fetch_size}; raise max_fetch_size or seek past it",
                topic=tp.topic,
                partition=tp.partition,
                offset=offset,
            )
            return False
        size = st.fetch_size
        while size < (needed or 0) or size == st.fetch_size:
            size *= 2
        st.fetch_size = min(size, self.max_fetch_size)
        log.info(
            "message at %s/%d offset %d exceeds the fetch size; fetch size now %d",
            tp.topic,
            tp.partition,
            offset,
            st.fetch_size,
        )
        return False

    async def _deserialize(
        self, st: PartitionState, offset: int, epoch: int, records: List[Record]
    ) -> Optional[List[Record]]:
        """Apply the deserializers; on failure keep the good prefix and the error.

        Returns:
            the deserialized records (a prefix when one failed: the error then
            waits in ``st.error``), or ``None`` when none is left to hand out.
        """
        value_fn = self.deserializer
        key_fn = self.key_deserializer
        out: List[Record[Any, Any]] = []
        append = out.append
        new = _new_record
        record = records[0]
        try:
            for i, record in enumerate(records):
                topic, partition, roff, key, value, ts, ts_type, headers = record
                if key_fn is not None and key is not None:
                    key = key_fn(key)
                if value_fn is not None and value is not None:
                    value = value_fn(value)
                append(new(Record, (topic, partition, roff, key, value, ts, ts_type, headers)))
                if not i & 1023 and await self._breathe():
                    if not st.current(offset, epoch):
                        return None
        except Exception as e:  # noqa: BLE001 -- the application's code: wrap it, keep the cause
            error = DeserializationError(
                f"the deserializer failed: {e!r}",
                topic=record.topic,
                partition=record.partition,
                offset=record.offset,
            )
            error.__cause__ = e
            if not st.current(offset, epoch):
                return None
            # Hand out what was deserialized; the error comes with the next fetch.
            st.error = error
            return out or None
        return out
