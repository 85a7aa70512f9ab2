"""Turn a partition's fetched message set into records, without stalling the IOLoop.

A fetched answer is kept raw (:meth:`Decoder.received`) and decoded only when
its records are about to be handed out, a bounded number at a time
(:meth:`Decoder.decode`): the records alive at once stay proportional to what
the application asks for, not to ``max_bytes`` times the partitions. The
:class:`Decoder` runs :func:`kiel.protocol.messages.decode_message_set` (a
Fetch v0 answer: magic 0/1 message sets) or
:func:`kiel.protocol.record_batch.decode_record_batches` (a Fetch v4 answer:
record batches, magic 2, with any older entries) a slice at a time,
yields to the IOLoop whenever its time budget is spent, grows the
partition's fetch size when not even one message fit, and runs
the deserializers. A compressed wrapper (magic 0/1) is decompressed when
the decoder reaches it and kept, with a cursor, in the partition's state;
its inner messages are decoded from there a slice at a time
(:func:`kiel.protocol.messages.decode_wrapper_slice`), so the records
alive stay about what was asked for whatever the wrapper's size. A
compressed record batch (magic 2) is opened and decoded the same way
(:func:`kiel.protocol.record_batch.decode_batch_slice`). The decoder writes
its result into the partition's
:class:`~kiel.consumer.subscription.PartitionState`: the records to hand
out and where the raw answer (and its open wrapper) goes on, or the error
to raise. No I/O.

read_committed: the fetcher hands over each answer's aborted transactions
and last stable offset (:meth:`Decoder.committed`); the batches of aborted
transactions are skipped as the answer is decoded
(:class:`kiel.protocol.record_batch.AbortedFilter`, one per answer, kept
across its slices) and nothing at or past the last stable offset is handed
out.
"""

import asyncio
import logging
import time
from typing import Any, Optional

from kiel.compression.offload import off_loop
from kiel.consumer.subscription import PartitionState, Status
from kiel.exc import (
    CorruptMessageError,
    DeserializationError,
    MessageTooLargeError,
    ProtocolError,
)
from kiel.metrics import count_error
from kiel.protocol.messages import (
    decode_message_set,
    decode_wrapper_slice,
    iter_message_boundaries,
    open_message_set,
)
from kiel.protocol.record_batch import (
    AbortedFilter,
    OpenBatch,
    decode_batch_slice,
    open_record_batches,
)
from kiel.serializers import Deserializer
from kiel.structs import Record

__all__ = ["DECODE_RECORDS", "Decoder", "past_highwater"]

log = logging.getLogger(__name__)

_new_record = tuple.__new__
#: Bytes of the first decode slice; later slices are sized from the measured
#: decode speed, within [_MIN_DECODE_CHUNK, _MAX_DECODE_CHUNK].
_DECODE_CHUNK = 64 * 1024
_MIN_DECODE_CHUNK = 4 * 1024
_MAX_DECODE_CHUNK = 1024 * 1024
#: Shortest time a slice aims at (with a decode budget of 0).
_MIN_SLICE_TIME = 0.0005

#: A compressed record batch (or message-set wrapper) that inflates past this
#: is decompressed in kiel's decompression thread, not on the IOLoop (about a
#: millisecond's work).
_INLINE_DECODED = 1024 * 1024

#: Records one :meth:`Decoder.decode` aims at when the caller sets no bound.
DECODE_RECORDS = 1000

#: What the slicing pass found: records, the offset after the last complete
#: message, where decoding stopped, the size the first message needs, and
#: whether complete messages are left after that point.
_Sliced = tuple[list[Record], Optional[int], int, Optional[int], bool]


class _Pass:
    """Where one :meth:`Decoder._slices` pass stands: what it decoded, where
    it goes on, and the bytes of its next slice."""

    __slots__ = ("records", "next_offset", "pos", "needed", "more", "ended", "chunk")

    def __init__(self, pos: int, chunk: int) -> None:
        self.records: list[Record] = []
        #: The offset after the last complete message (``None``: none).
        self.next_offset: Optional[int] = None
        #: Where the top level goes on in the raw answer.
        self.pos = pos
        #: The size the first message needs, when not even it fits.
        self.needed: Optional[int] = None
        #: Complete messages are left after ``pos`` (or in the open wrapper).
        self.more = False
        #: Nothing more to decode in this pass (an error, or the answer's end).
        self.ended = False
        self.chunk = chunk


def past_highwater(after: Optional[int], highwater: Optional[int], topic: str,
                   partition: int) -> Optional[CorruptMessageError]:
    """The error for an answer whose records run up to ``after`` (the offset
    after its last one) past its ``highwater``, else ``None`` (also when
    either is unknown). Shared with kiel.spark's range reads.

    A broker serves a consumer only offsets below its high watermark, and no
    CRC covers a message's offset or a batch's base offset: one corrupted
    upwards is otherwise handed out, and the position jumps past every
    record in between, which the reset policy then skips without a word.
    """
    if highwater is None or highwater < 0 or after is None or after <= highwater:
        return None
    return CorruptMessageError(
        f"the answer holds offset {after - 1}, at or past the high watermark {highwater} it "
        "gave: a corrupt offset (no CRC covers it)",
        api="Fetch", topic=topic, partition=partition)


def _below(records: list[Record], limit: int) -> list[Record]:
    """The records before the first at or past ``limit`` (offsets increase)."""
    for i, record in enumerate(records):
        if record.offset >= limit:
            return records[:i]
    return records


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
        decode_budget: float = 0.0005,
        max_decoded: int = 128 * 1024 * 1024,
    ) -> None:
        self.max_fetch_size = max_fetch_size
        #: Bytes the compressed wrappers of one decoded slice may expand to,
        #: all nesting levels together.
        self.max_decoded = max_decoded
        self.deserializer = deserializer
        self.key_deserializer = key_deserializer
        self.decode_budget = decode_budget
        #: Times the decoder yielded to the IOLoop (for tests, benchmarks and metrics).
        self.yields = 0
        # Counters for the consumer's metrics(): one add per slice or call.
        #: Seconds spent decoding message sets (deserializers not included).
        self.decode_seconds = 0.0
        #: Errors decoding (corrupt, too large, deserializer failed), by class name.
        self.errors: dict[str, int] = {}
        self._step_started = 0.0
        self._chunk = _DECODE_CHUNK
        #: Bytes per record in the last slice (0: none seen yet), to size slices by ``want``.
        self._record_bytes = 0
        self._peak = self._peak_slice = 0
        # One decoder at a time: a loop iteration then runs at most one
        # decode budget, not one per leader answering at once.
        self._lock = asyncio.Lock()
        #: read_committed: per partition, the raw answer (by id) that
        #: :meth:`committed` was told about, its aborted-transactions filter
        #: and its last stable offset (at most one entry per partition: a
        #: new answer replaces it).
        self._committed: dict[Any, tuple[int, AbortedFilter, Optional[int]]] = {}

    def resumed(self) -> None:
        """A task resumed by the network starts a new loop step (see :meth:`breathe`)."""
        self._step_started = time.monotonic()

    @staticmethod
    def received(st: PartitionState, data: bytes, record_batches: bool = False) -> None:
        """Keep ``data``, a fetch answer at ``st``'s position, to decode on demand.

        ``record_batches``: ``data`` is a Fetch v4 answer (record batches).
        """
        if data:
            st.raw, st.raw_pos, st.raw_batches = data, 0, record_batches
            st.inner = None
            st.mark()
        else:
            st.drop_raw()
            st.failures = 0
            st.answered = True

    def committed(
        self, st: PartitionState, aborted: list[Any], stable: Optional[int]
    ) -> None:
        """read_committed: the raw answer :meth:`received` just kept for
        ``st`` comes with the Fetch answer's aborted transactions and last
        stable offset.

        Its batches of aborted transactions are dropped as it is decoded
        (their offsets passed, so the position never stalls on them), and
        no record at or past ``stable`` is handed out.

        Args:
            st: the partition.
            aborted: the answer's ``(producer_id, first_offset)`` entries.
            stable: its last stable offset (``None`` or negative: unknown).
        """
        raw = st.raw
        if raw is None:
            self._committed.pop(st.tp, None)
            return
        self._committed[st.tp] = (
            id(raw), AbortedFilter((a[0], a[1]) for a in aborted),
            stable if stable is not None and stable >= 0 else None,
        )

    def _read_committed(self, st: PartitionState) -> Optional[tuple[AbortedFilter, Optional[int]]]:
        """The filter and last stable offset of ``st``'s raw answer, if read committed."""
        entry = self._committed.get(st.tp)
        if entry is None or st.raw is None or entry[0] != id(st.raw):
            return None
        return entry[1], entry[2]

    @property
    def peak_records(self) -> int:
        """The most records one :meth:`decode` call materialised (for tests and benchmarks)."""
        return self._peak

    @property
    def peak_slice(self) -> int:
        """The most records one slice held (what a call may decode past its ``want``)."""
        return self._peak_slice

    async def decode(self, st: PartitionState, want: int = DECODE_RECORDS) -> None:
        """Decode about ``want`` records of ``st``'s raw answer into its buffer.

        Decoding stops at the first slice boundary past ``want`` records, so a
        call materialises at most ``want`` records plus one slice (slices are
        sized to take about half of ``decode_budget``). Waits its turn behind
        another partition's decoding; nothing happens if ``st`` has records
        buffered, no raw answer, or stopped fetching meanwhile.
        """
        lock = self._lock
        if lock.locked():
            await lock.acquire()
            self._step_started = time.monotonic()
        else:
            await lock.acquire()  # free: returns without suspending
        try:
            if st.raw is not None and not st.buffer and st.status is Status.FETCHING:
                before = st.error
                await self._decode(st, st.position, st.epoch, st.raw, st.raw_pos, want)
                if st.error is not None and st.error is not before:
                    count_error(self.errors, st.error)
        finally:
            lock.release()

    async def _decode(
        self, st: PartitionState, offset: int, epoch: int, data: bytes, start: int, want: int
    ) -> None:
        try:
            sliced = await self._slices(st, offset, epoch, data, start, want)
        except ProtocolError as e:
            self._fail(st, e, offset)
            return
        if sliced is None:
            return  # sought or unassigned meanwhile: the raw answer is gone too
        records, next_offset, pos, needed, more = sliced
        committed = self._read_committed(st)
        stable = None if committed is None else committed[1]
        if stable is not None and (
            (records and records[-1].offset >= stable)
            or (not records and next_offset is not None and next_offset > stable)
        ):
            # read_committed: nothing at or past the last stable offset goes
            # out (brokers stop there; one that does not is not trusted past
            # it). The rest is fetched again once the transactions before it end.
            records, more = _below(records, stable), False
            next_offset = None
            if not records:
                st.drop_raw()
                st.failures = 0
                st.answered = True
                return
        beyond = past_highwater(records[-1].offset + 1 if records else next_offset,
                                st.highwater, st.tp.topic, st.tp.partition)
        if beyond is not None:
            # The records below the high watermark go out first; the error
            # comes with the next call, and the rest is fetched again.
            below = _below(records, st.highwater or 0)
            beyond.with_context(offset=below[-1].offset + 1 if below else offset)
            if not self._cut_short(st, beyond, below, []):
                self._fail(st, beyond, offset)
                return
            records, next_offset, more = below, None, False
        st.raw_pos = pos
        if not more:
            st.drop_raw()
        if not records and self._no_progress(st, offset, start, pos, next_offset, needed):
            return
        st.failures = 0
        st.answered = True
        self._peak = max(self._peak, len(records))
        if records and (self.deserializer is not None or self.key_deserializer is not None):
            deserialized = await self._deserialized(st, offset, epoch, records)
            if deserialized is None:
                return
            records = deserialized
        if not st.current(offset, epoch):
            return
        if records:
            st.buffer = records
            st.next_offset = records[-1].offset + 1
        elif next_offset is not None:
            # Only messages before the position (inside a compressed wrapper),
            # then the position moves past them.
            st.position = st.next_offset = next_offset

    @staticmethod
    def _fail(st: PartitionState, error: ProtocolError, offset: int) -> None:
        """Keep ``error`` (the answer at ``offset`` does not decode) for the
        application, and forget the answer."""
        tp = st.tp
        error.with_context(api="Fetch", topic=tp.topic, partition=tp.partition)
        if error.offset is None:
            error.with_context(offset=offset)
        st.error = error
        st.drop_raw()

    def _no_progress(
        self, st: PartitionState, offset: int, start: int, pos: int,
        next_offset: Optional[int], needed: Optional[int],
    ) -> bool:
        """Whether an answer that gave no record left nothing to do: its first
        message is too large (the fetch size grows), or cut by the broker
        (fetched again), or its offsets do not increase (the error is kept).

        Returns:
            ``False`` when it moves the position (messages before it only).
        """
        if pos == start and next_offset is None:
            if start == 0:
                # Not one complete message: the first one is larger than the fetch size.
                self._grow(st, offset, needed)
            # Else the rest is a message the broker cut at the fetch size: it
            # is fetched again from the position.
            return True
        if next_offset is not None and next_offset > offset:
            return False
        # Complete messages, none at or after the position, and no
        # progress: fetching again would bring the same answer for ever.
        st.drop_raw()
        tp = st.tp
        st.error = CorruptMessageError(
            f"the answer at offset {offset} holds only messages before it "
            f"(up to {None if next_offset is None else next_offset - 1}): "
            "the log's offsets do not increase",
            api="Fetch", topic=tp.topic, partition=tp.partition, offset=offset,
        )
        return True

    async def _deserialized(
        self, st: PartitionState, offset: int, epoch: int, records: list[Record]
    ) -> Optional[list[Record]]:
        """:meth:`_deserialize`, and the raw answer dropped when a record failed.

        Returns:
            the records to hand out, or ``None`` when there are none.
        """
        deserialized = await self._deserialize(st, offset, epoch, records)
        if deserialized is None:
            if st.error is not None and st.current(offset, epoch):
                # The first record failed: the rest of the answer (and of
                # its open wrapper) is past it, so it goes too, as below.
                st.drop_raw()
            return None
        if st.error is not None:
            # Strategy: the records after the failed one are decoded again
            # from the broker once the application seeks or retries.
            st.drop_raw()
        return deserialized

    async def _slices(
        self, st: PartitionState, offset: int, epoch: int, data: bytes, start: int, want: int
    ) -> Optional[_Sliced]:
        """Decode ``data`` from ``start`` slice by slice, until ``want`` records.

        A compressed wrapper open in ``st`` (``st.inner``) is decoded on
        from its cursor first; a wrapper met at the top level is opened and
        its inner messages decoded the same way, a slice at a time.

        Returns:
            what was decoded, or ``None`` when ``st`` stopped being current
            while the decoder yielded.

        Raises:
            ProtocolError: a message does not decode.
        """
        # Strategy: decode a slice at a time (a slice ends wherever a message
        # is cut; ``valid_bytes`` says where the next one starts) and hand the
        # loop back whenever ``decode_budget`` is spent. Slices are sized from
        # the measured decode speed to take about half the budget: bytes are a
        # poor clock, as 64 KiB of compressed wrappers can hold 20,000
        # messages. A 10 MB fetch then never stalls the IOLoop for much more
        # than a budget (or one decompression), and a slice holds about the
        # records still wanted (see _slice_size). A compressed wrapper or
        # record batch is opened (decompressed) when the top level reaches
        # it and kept in ``st.inner``; its inner messages are sliced like the
        # top level's, so the records alive stay proportional to ``want``
        # whatever its size.
        progress = _Pass(start, self._slice_size(want))
        size = len(data)
        while True:
            if st.inner is not None:
                got = self._inner_step(st, offset, progress)
            elif progress.pos < size:
                got = self._top_step(st, data, offset, progress)
                if st.inner is not None and getattr(st.inner, "pending", False):
                    inflated = await self._inflate(st, offset, epoch, progress, got)
                    if inflated is None:
                        return None
                    got = inflated
            else:
                break
            if got:
                progress.records.extend(got)
                if len(got) > self._peak_slice:
                    self._peak_slice = len(got)
            if progress.ended:
                break
            if len(progress.records) >= want and (progress.pos < size or st.inner is not None):
                progress.more = True
                break
            progress.chunk = self._slice_size(want - len(progress.records))
            if await self.breathe() and not st.current(offset, epoch):
                return None
        return progress.records, progress.next_offset, progress.pos, progress.needed, progress.more

    async def _inflate(
        self, st: PartitionState, offset: int, epoch: int, progress: _Pass, got: list[Record]
    ) -> Optional[list[Record]]:
        """Decompress the batch (or wrapper) just opened pending (too large
        to inflate on the IOLoop: see
        :func:`~kiel.protocol.record_batch.open_record_batches`,
        :func:`~kiel.protocol.messages.open_message_set`) in kiel's
        decompression thread.

        Returns:
            ``got`` (the records before the batch), or ``None`` when ``st``
            stopped being current meanwhile; a batch that does not inflate
            ends the pass after ``got``, its error kept.

        Raises:
            ProtocolError: it does not inflate and nothing came before it.
        """
        batch: Any = st.inner  # an OpenBatch or an OpenWrapper, pending
        try:
            data = await off_loop(batch.decompress)
            ours = st.inner is batch  # (not in the condition: mypy would narrow batch)
            if not ours or not st.current(offset, epoch):
                return None  # sought or unassigned meanwhile
            batch.inflated(data)
        except ProtocolError as e:
            st.inner = None
            if not self._cut_short(st, e, progress.records, got):
                raise
            progress.ended = True
            return []
        return got

    def _inner_step(self, st: PartitionState, offset: int, progress: _Pass) -> list[Record]:
        """Decode a slice of the wrapper or batch open in ``st``, from its cursor.

        Returns:
            its records; a bad message ends the pass (``progress.ended``) after
            the records before it.

        Raises:
            ProtocolError: the bad message is the first (nothing to hand out).
        """
        records = progress.records
        started = time.perf_counter()
        inner_pos = st.inner_pos
        try:
            got, after = self._inner_slice(st, progress.chunk, offset, records)
        except ProtocolError as e:
            good, after = self._good_inner(st, offset, records)
            if not self._cut_short(st, e, records, good):
                raise
            progress.next_offset, progress.ended = after, True
            return []
        self._measured(st.inner_pos - inner_pos, time.perf_counter() - started, len(got))
        if after is not None:
            progress.next_offset = after
        return got

    def _top_step(
        self, st: PartitionState, data: bytes, offset: int, progress: _Pass
    ) -> list[Record]:
        """Decode the top-level slice at ``progress.pos`` (widened until its first
        message fits), opening the first compressed wrapper or batch met.

        Returns:
            its records; a bad message, a first message that does not fit
            ``data``, or the broker's cut at its end ends the pass
            (``progress.ended``).

        Raises:
            ProtocolError: the bad message is the first (nothing to hand out).
        """
        topic, partition = st.tp
        batches = st.raw_batches
        committed = self._read_committed(st) if batches else None
        aborted = None if committed is None else committed[0]
        pos, size = progress.pos, len(data)
        while True:
            end = min(size, pos + progress.chunk)
            piece = data if pos == 0 and end == size else data[pos:end]
            started = time.perf_counter()
            try:
                result, too_large, first_size = self._decode_piece(
                    piece, batches, topic, partition, offset, aborted)
            except ProtocolError as e:
                good = [] if batches else self._good_prefix(piece, topic, partition, offset)
                if not self._cut_short(st, e, progress.records, good):
                    raise
                progress.next_offset, progress.ended = None, True
                return []
            if not too_large:
                break
            if end >= size:
                progress.needed, progress.ended = first_size, True
                return []
            # The first message is larger than a slice: widen it.
            progress.chunk = max(2 * progress.chunk, first_size or 0)
        elapsed = time.perf_counter() - started
        progress.pos = pos + result.valid_bytes
        if result.next_offset is not None:
            progress.next_offset = result.next_offset
        if result.opened is not None:
            # Its decompression is no measure of decoding speed.
            self.decode_seconds += elapsed
            st.inner, st.inner_pos, st.inner_index = result.opened, 0, 0
            return result.records
        self._measured(result.valid_bytes, elapsed, len(result.records))
        # A message the broker cut at max_bytes ends the answer: nothing more to decode.
        progress.ended = result.truncated and end >= size
        return result.records

    def _decode_piece(
        self, piece: bytes, batches: bool, topic: str, partition: int, offset: int,
        aborted: Optional[AbortedFilter] = None,
    ) -> tuple[Any, bool, Optional[int]]:
        """Decode one top-level slice, opening (not decoding) the first
        compressed wrapper or record batch met; ``aborted`` (read_committed)
        drops the batches of aborted transactions.

        Returns:
            ``(result, the first entry is larger than the piece, its size)``.
        """
        if batches:
            # The magic-2 branch: the same slices and budget, a compressed
            # batch opened like a wrapper.
            batch_result = open_record_batches(
                piece, topic, partition, min_offset=offset, max_decoded=self.max_decoded,
                inline_decoded=_INLINE_DECODED, aborted=aborted,
            )
            return batch_result, batch_result.first_batch_too_large, batch_result.first_batch_size
        result = open_message_set(
            piece, topic, partition, min_offset=offset, max_decoded=self.max_decoded,
            inline_decoded=_INLINE_DECODED,
        )
        return result, result.first_message_too_large, result.first_message_size

    @staticmethod
    def _cut_short(
        st: PartitionState, error: ProtocolError, records: list[Record], good: list[Record]
    ) -> bool:
        """Hand out the complete messages before a bad one (``good`` after
        ``records``); its error comes with the next call, at its own offset.

        Returns:
            ``False`` when there is nothing to hand out (the caller raises).
        """
        if not records and not good:
            return False
        records.extend(good)
        error.with_context(api="Fetch", topic=st.tp.topic, partition=st.tp.partition)
        st.error = error
        return True

    def _measured(self, decoded: int, elapsed: float, count: int) -> None:
        """Count a slice of ``decoded`` bytes and ``count`` records decoded in
        ``elapsed`` seconds, and size the next slices from its speed."""
        self.decode_seconds += elapsed
        if decoded and elapsed > 0:
            target = max(self.decode_budget / 2, _MIN_SLICE_TIME)
            ideal = int(decoded * target / elapsed)
            self._chunk = min(max(ideal, _MIN_DECODE_CHUNK), _MAX_DECODE_CHUNK)
        if count:
            self._record_bytes = decoded // count + 1

    def _inner_slice(
        self, st: PartitionState, chunk: int, offset: int, records: list[Record]
    ) -> tuple[list[Record], Optional[int]]:
        """Decode about ``chunk`` bytes of the wrapper or batch open in ``st``
        from its cursor, and move the cursor (closing it at the end).

        Returns:
            the records (below ``offset`` dropped) and the offset after the
            last message read (``None``: none read).

        Raises:
            ProtocolError: the next message does not decode (the cursor stays).
        """
        topic, partition = st.tp
        opened: Any = st.inner
        if isinstance(opened, OpenBatch):
            batch = decode_batch_slice(
                opened, st.inner_pos, st.inner_index, chunk, topic, partition,
                min_offset=offset,
            )
            st.inner_pos, st.inner_index = batch.position, batch.read
            if batch.done:
                st.inner = None
            return batch.records, batch.next_offset
        part = decode_wrapper_slice(
            opened, st.inner_pos, chunk, topic, partition, min_offset=offset,
            previous=records[-1].offset if records else offset - 1,
        )
        st.inner_pos = part.position
        if part.position >= len(opened.data):
            st.inner = None
        return part.records, None if part.last_offset is None else part.last_offset + 1

    def _good_inner(
        self, st: PartitionState, offset: int, records: list[Record]
    ) -> tuple[list[Record], Optional[int]]:
        """The records of the open wrapper's (or batch's) messages from its
        cursor before the first that does not decode, and the offset after
        the last one read (the error path only: each is decoded alone)."""
        good: list[Record] = []
        after: Optional[int] = None
        try:
            while st.inner is not None:
                one, one_after = self._inner_slice(st, 1, offset, records + good)
                good.extend(one)
                if one_after is not None:
                    after = one_after
        except ProtocolError:
            pass  # the first bad message: what came before it is the prefix
        return good, after

    def _slice_size(self, want: int) -> int:
        """Bytes of the next slice: what takes about half the budget, and no
        more than about ``want`` records once their size is known.

        Strategy: records decoded ahead stay alive until they are handed out,
        and the collector promotes whatever is alive when it runs; promoted
        objects bring full collections, which walk the application's whole
        heap (8 per million records with time-sized slices, none with this
        cap, measured). A message larger than the slice still widens it.
        """
        if not self._record_bytes:
            return self._chunk
        return min(self._chunk, max(_MIN_DECODE_CHUNK, self._record_bytes * want))

    def _good_prefix(self, piece: bytes, topic: str, partition: int, offset: int) -> list[Record]:
        """The records of ``piece``'s top-level messages before the first
        that does not decode (the error path only: each is decoded alone)."""
        good: list[Record] = []
        try:
            for bound in iter_message_boundaries(piece, strict=False):
                one = decode_message_set(
                    piece[bound.start:bound.end], topic, partition,
                    min_offset=offset, max_decoded=self.max_decoded,
                ).records
                if one and good and one[0].offset <= good[-1].offset:
                    break  # decoded alone, it lost what made it bad: its order
                good.extend(one)
        except ProtocolError:
            pass  # the first bad message: what came before it is the prefix
        return good

    async def breathe(self) -> bool:
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

    def _grow(self, st: PartitionState, offset: int, needed: Optional[int]) -> None:
        """The first message did not fit: double the fetch size, or give up at the cap.

        The partition is fetched again, or its error raised.
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
            return
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

    async def _deserialize(
        self, st: PartitionState, offset: int, epoch: int, records: list[Record]
    ) -> Optional[list[Record]]:
        """Apply the deserializers; on failure keep the good prefix and the error.

        Returns:
            the deserialized records (a prefix when one failed: the error then
            waits in ``st.error``), or ``None`` when none is left to hand out.
        """
        value_fn = self.deserializer
        key_fn = self.key_deserializer
        out: list[Record[Any, Any]] = []
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
                if not i & 1023 and await self.breathe():
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
