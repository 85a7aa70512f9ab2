"""Fetched message sets straight into Arrow columns (a Spark task's decoder).

A task hands Spark Arrow record batches. Decoding a fetch answer into
:class:`~kiel.structs.Record` tuples and then building Arrow arrays from
Python lists of them paid twice per message: once for the objects, once to
copy them into Arrow. Here the plain messages of a Fetch v0 answer (magic 0,
uncompressed: what a 0.8 broker stores) are read in place: one pass notes
where each key and value starts and ends in the answer, and Arrow cuts them
out of it in C (``take`` over a binary array laid on the answer itself).

Every check of :func:`kiel.protocol.messages.decode_message_set` stays: the
CRC of each message, its size against the buffer, the key and value lengths
against the message size, offsets that increase. Anything else (a compressed
wrapper, magic 1, a message that fails a check, a record-batch answer of
Fetch v4) goes through kiel's own decoders from where the plain run stopped,
which raise their typed errors or decode it (wrappers within the
``max_decoded`` bound), and :func:`to_arrow` builds its columns.
"""

import struct
import sys
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import NamedTuple, Optional

import pyarrow as pa
import pyarrow.compute as pc

from kiel.exc import CorruptMessageError, ProtocolError
from kiel.protocol.crc32c import crc32c
from kiel.protocol.log_format import DEFAULT_MAX_DECODED, LOG_OVERHEAD
from kiel.protocol.messages import decode_message_set
from kiel.protocol.primitives import decode_varint, decode_varlong
from kiel.protocol.record_batch import AbortedFilter, decode_committed, decode_record_batches
from kiel.structs import Record

__all__ = ["ARROW_HEADERS", "ARROW_SCHEMA", "ARROW_SCHEMA_WITH_HEADERS", "COALESCE_BYTES",
           "COALESCE_ROWS", "Decoded", "coalesce", "decode_answer", "to_arrow"]

ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
)
ARROW_HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()),
                                    pa.field("value", pa.binary())]))
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", ARROW_HEADERS))

# The magic-0 header after the log overhead: crc, magic and attributes as one
# int16 (zero for a plain magic-0 message), key length.
_HEADER = struct.Struct(">qiIhi")
_HEADER_SIZE = _HEADER.size  # 22: offset, size, crc, magic + attributes, key length
_INT32 = struct.Struct(">i")
# The same, then the value length that follows a null key.
_HEADER_NULL_KEY = struct.Struct(">qiIhii")
_CRC_START = 16  # the CRC covers from the magic byte on
_MIN_V0 = 14  # crc, magic, attributes, key length, value length
#: Messages a uniform run needs before it is worth its fixed cost.
_MIN_UNIFORM = 16
#: Arrow's buffers are little-endian: the uniform run builds them in place.
_LITTLE_ENDIAN = sys.byteorder == "little"

# A record batch's (magic 2) header, BaseOffset .. RecordCount: 61 bytes.
_BATCH = struct.Struct(">qiibIhiqqqhii")
_BATCH_SIZE = _BATCH.size
_BATCH_CRC_START = 21  # the CRC-32C covers from the attributes on
_BATCH_MIN_LENGTH = _BATCH_SIZE - LOG_OVERHEAD
#: Attributes the batch run does not read: the codec (bits 0-2) and control (bit 5).
_BATCH_NOT_PLAIN = 0x07 | 0x20
_LOG_APPEND_TIME = 0x08
_MIN_RECORD = 7  # length, attributes, the two deltas, key, value, header count: a byte each
#: The value of every one- and two-byte zig-zag varint: ``_ZIGZAG[b]`` for one
#: byte ``b`` (below 0x80), ``_ZIGZAG[b + (c << 7)]`` for ``b`` (0x80 and up)
#: then ``c`` (below 0x80).
_ZIGZAG = tuple((raw >> 1) ^ -(raw & 1) for raw in chain(range(0x80), range(1 << 14)))
#: The largest timestamp in milliseconds whose microseconds fit an int64.
_MAX_MS = (2**63 - 1) // 1000


class Decoded(NamedTuple):
    """What :func:`decode_answer` found in one fetch answer."""

    #: Arrow batches of the records in ``[min_offset, end)``, in offset order (may be empty).
    batches: list[pa.RecordBatch]
    #: Records in ``batches``.
    rows: int
    #: The offset after the last complete message or batch (``None``: none).
    next_offset: Optional[int]
    #: Bytes taken by complete messages or batches.
    valid_bytes: int
    #: The answer holds no complete message: the bytes its first one needs (0: unknown).
    needed: Optional[int]


def decode_answer(data: bytes, topic: str, partition: int, min_offset: int, end: int,
                  record_batches: bool, headers: bool,
                  max_decoded: int = DEFAULT_MAX_DECODED,
                  aborted: Optional[AbortedFilter] = None) -> Decoded:
    """Decode one partition's fetch answer into Arrow batches of the range's rows.

    Args:
        data: the answer's message set (Fetch v0) or records (v4).
        topic, partition: the partition fetched.
        min_offset: the fetch offset: records before it are dropped (a
            compressed wrapper or batch can start before it).
        end: records at or after it are dropped (the range's end).
        record_batches: ``data`` is a Fetch v4 answer.
        headers: add the ``headers`` column.
        max_decoded: the most bytes compressed wrappers or batches may
            decompress to, together.
        aborted: read_committed, an answer (v4) that lists aborted
            transactions: their batches are skipped, their offsets passed.

    Returns:
        a :class:`Decoded`.

    Raises:
        CorruptMessageError: a CRC mismatch, inconsistent framing, or
            offsets that do not increase.
        ProtocolError: whatever else kiel's decoders find wrong.
    """
    if record_batches:
        return _decode_batches(data, topic, partition, min_offset, end, headers, max_decoded,
                               aborted)
    pos, count, last = 0, 0, None
    plain: list[pa.RecordBatch] = []
    if _LITTLE_ENDIAN:
        pos, count, last, plain = _uniform_run(data, topic, partition, min_offset, end, headers)
    if last is None or last + 1 < end:
        pos, more, last, batches = _plain_run(data, pos, last, topic, partition, min_offset, end,
                                              headers)
        count += more
        plain += batches
    if pos >= len(data) or last is not None and last + 1 >= end:
        return Decoded(plain, count, None if last is None else last + 1, pos, None)
    # Strategy: the plain run stopped at something it does not read (a wrapper,
    # magic 1, a partial or bad message): kiel's decoder takes the rest, from
    # there, and raises what is wrong with it.
    rest = decode_message_set(data[pos:] if pos else data, topic, partition,
                              min_offset=min_offset, max_decoded=max_decoded)
    if last is not None and rest.records and rest.records[0].offset <= last:
        raise CorruptMessageError(
            f"offset {rest.records[0].offset} follows offset {last}: the log's offsets do "
            "not increase", topic=topic, partition=partition, offset=rest.records[0].offset)
    needed = None
    if rest.first_message_too_large and last is None:
        needed = rest.first_message_size or 0
    tail = _from_records(rest.records, rest.next_offset, pos + rest.valid_bytes, needed, end,
                         headers)
    next_offset = tail.next_offset if tail.next_offset is not None else (
        None if last is None else last + 1)
    return Decoded(plain + tail.batches, count + tail.rows, next_offset, tail.valid_bytes,
                   tail.needed)


def _decode_batches(data: bytes, topic: str, partition: int, min_offset: int, end: int,
                    headers: bool, max_decoded: int,
                    aborted: Optional[AbortedFilter] = None) -> Decoded:
    """:func:`decode_answer` of a Fetch v4 answer (record batches)."""
    if aborted is not None:
        # Strategy: an answer with aborted transactions goes whole to kiel's
        # decoder, which skips their batches (the batch run knows nothing of
        # producers); answers without any keep the batch run.
        rest = decode_committed(data, topic, partition, aborted=aborted,
                                min_offset=min_offset, max_decoded=max_decoded)
        needed = (rest.first_batch_size or 0) if rest.first_batch_too_large else None
        tail = _from_records(rest.records, rest.next_offset, rest.valid_bytes, needed, end,
                             headers)
        return Decoded(tail.batches, tail.rows, tail.next_offset, tail.valid_bytes, tail.needed)
    pos, count, next_offset, batches = _batch_run(data, topic, partition, min_offset, end,
                                                  headers)
    if pos >= len(data) or next_offset is not None and next_offset >= end:
        return Decoded(batches, count, next_offset, pos, None)
    # Strategy: as for message sets, kiel's decoder takes the rest from where
    # the batch run stopped (a compressed or control batch, headers, old
    # messages, a partial or bad batch) and raises what is wrong with it.
    rest = decode_record_batches(data[pos:] if pos else data, topic, partition,
                                 min_offset=min_offset, max_decoded=max_decoded)
    needed = None
    if rest.first_batch_too_large and next_offset is None:
        needed = rest.first_batch_size or 0
    tail = _from_records(rest.records, rest.next_offset, pos + rest.valid_bytes, needed, end,
                         headers)
    return Decoded(batches + tail.batches, count + tail.rows,
                   next_offset if tail.next_offset is None else tail.next_offset,
                   tail.valid_bytes, tail.needed)


class _Rows:
    """The columns a batch run gathers: where each key and value lies in the
    answer (start, end), the offsets, the timestamps in milliseconds, their
    types, and how many keys and values are null."""

    __slots__ = ("offsets", "stamps", "keys", "values", "types", "null_keys", "null_values")

    def __init__(self) -> None:
        self.offsets = array("q")
        self.stamps = array("q")
        self.keys = array("i")
        self.values = array("i")
        self.types = array("i")
        self.null_keys = self.null_values = 0

    def mark(self) -> tuple[int, int, int]:
        return len(self.offsets), self.null_keys, self.null_values

    def rollback(self, mark: tuple[int, int, int]) -> None:
        """Forget the rows added since ``mark``."""
        kept, self.null_keys, self.null_values = mark
        del self.offsets[kept:], self.stamps[kept:], self.types[kept:]
        del self.keys[2 * kept:], self.values[2 * kept:]


def _batch_run(data: bytes, topic: str, partition: int, min_offset: int, end: int,
               headers: bool) -> tuple[int, int, Optional[int], list[pa.RecordBatch]]:
    """Read the plain record batches (magic 2) at the start of ``data`` into Arrow.

    Strategy: the consumer's record loop (:mod:`kiel.protocol.record_batch`)
    without the objects: per record, only where its key and value lie, its
    offset and its timestamp go into arrays; Arrow cuts the keys and values
    out of the answer (:func:`_cut`). Records of one layout, as a producer
    writes them, are read by strided slices instead (:func:`_uniform_records`).
    A batch is taken whole or not at all, and only when it is what most
    batches are: magic 2, uncompressed, not a control batch, its CRC-32C
    right, every record decoding with the decoder's checks (lengths within
    the record and the batch, offset deltas increasing up to the last one,
    the record count, no byte left over) and no record carrying headers. At
    the first batch that is not, the run stops and :func:`_decode_batches`
    hands the rest to kiel's decoder, which reads it or raises its typed
    error: a bad batch is never half taken, and what the run takes is what
    that decoder would have made.

    Returns:
        where the run stopped (the first batch it did not take, or the
        end), how many rows it made, the offset after its last batch
        (``None``: none taken), and the rows as Arrow batches (at most one).
    """
    unpack = _BATCH.unpack_from
    size_all = len(data)
    out = _Rows()
    pos = 0
    next_offset: Optional[int] = None
    while pos + _BATCH_SIZE <= size_all:
        (base, length, _leader_epoch, magic, crc, attributes, last_delta, base_stamp,
         max_stamp, _producer_id, _producer_epoch, _sequence, count) = unpack(data, pos)
        if base >= end:
            # Past the range (what follows a gap at its end): nothing here is
            # read, and nothing of the range lies before this batch. The
            # offset after it, so that a base offset corrupted past the high
            # watermark shows (read_range checks).
            next_offset = base + max(last_delta, 0) + 1
            break
        bend = pos + LOG_OVERHEAD + length
        start = pos + _BATCH_SIZE
        if (magic != 2 or attributes & _BATCH_NOT_PLAIN or length < _BATCH_MIN_LENGTH
                or bend > size_all or last_delta < 0 or count < 0
                or count * _MIN_RECORD > bend - start
                or crc32c(data[pos + _BATCH_CRC_START:bend]) != crc):
            break
        log_append = attributes & _LOG_APPEND_TIME
        mark = out.mark()
        batch = (base, last_delta, base_stamp, max_stamp if log_append else None,
                 min_offset, end)
        p, index = start, 0
        if last_delta >= count - 1:  # offset deltas 0, 1, 2...: as a producer writes them
            p, index = _uniform_records(data, out, p, bend, count, batch)
        good = True
        if index < count:
            p, good = _record_loop(data, out, p, bend, index, count, batch)
        if not good or p != bend:
            # Not taken: kiel's decoder reads this batch again and says what is wrong.
            out.rollback(mark)
            break
        out.types.extend(array("i", [1 if log_append else 0]) * (len(out.offsets) - mark[0]))
        pos = bend
        next_offset = base + last_delta + 1
    rows = len(out.offsets)
    if not rows:
        return pos, 0, next_offset, []
    buffer = pa.py_buffer(data)
    offset_column = pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(out.offsets)])
    key_column = _cut(buffer, out.keys, rows, _varint_nulls(data, out.keys, out.null_keys, rows))
    value_column = _cut(buffer, out.values, rows,
                        _varint_nulls(data, out.values, out.null_values, rows))
    stamp_column, type_column = _stamps(out.stamps, out.types)
    return pos, rows, next_offset, [_batch(key_column, value_column, offset_column, topic,
                                           partition, headers, stamp_column, type_column)]


#: What a batch's records need to place them: base offset, last offset
#: delta, base timestamp, the timestamp of every record (LogAppendTime;
#: ``None``: each its own), and the range ``[min_offset, end)``.
_BatchPlace = tuple[int, int, int, Optional[int], int, int]


def _record_loop(data: bytes, out: _Rows, p: int, bend: int, index: int, count: int,
                 batch: _BatchPlace) -> tuple[int, bool]:
    """Read the records of a batch from the ``index``-th (at ``p``) one by one.

    Returns:
        where the last one read ends, and whether every one was read (``False``:
        one is not as the batch run takes it).
    """
    base, last_delta, base_stamp, stamp_all, min_offset, end = batch
    zz = _ZIGZAG
    add_offset, add_stamp = out.offsets.append, out.stamps.append
    add_key, add_value = out.keys.append, out.values.append
    null_keys = null_values = 0
    previous = index - 1
    try:
        while index < count:
            index += 1
            b = data[p]
            if b < 0x80:
                size = zz[b]
                p += 1
            elif (c := data[p + 1]) < 0x80:
                size = zz[b + (c << 7)]
                p += 2
            else:
                size, p = decode_varint(data, p)
            rend = p + size
            if size < _MIN_RECORD - 1 or rend > bend:  # a record's body: 6 bytes or more
                return p, False
            b = data[p + 1]  # after the unused attributes byte: the timestamp delta
            if b < 0x80:
                delta = zz[b]
                p += 2
            elif (c := data[p + 2]) < 0x80:
                delta = zz[b + (c << 7)]
                p += 3
            else:
                delta, p = decode_varlong(data, p + 1)
            b = data[p]
            if b < 0x80:
                offset_delta = zz[b]
                p += 1
            elif (c := data[p + 1]) < 0x80:
                offset_delta = zz[b + (c << 7)]
                p += 2
            else:
                offset_delta, p = decode_varint(data, p)
            if not previous < offset_delta <= last_delta:
                return p, False
            previous = offset_delta
            b = data[p]
            if b == 1:  # a null key (zig-zag -1), the common case
                p += 1
                kpos = kend = p
                null_key = True
            else:
                if b < 0x80:
                    n = zz[b]
                    p += 1
                elif (c := data[p + 1]) < 0x80:
                    n = zz[b + (c << 7)]
                    p += 2
                else:
                    n, p = decode_varint(data, p)
                if n < 0:
                    return p, False
                kpos = p
                kend = p = p + n
                null_key = False
            b = data[p]
            if b < 0x80:
                n = zz[b]
                p += 1
            elif (c := data[p + 1]) < 0x80:
                n = zz[b + (c << 7)]
                p += 2
            else:
                n, p = decode_varint(data, p)
            vpos = p
            if n >= 0:
                p += n
            elif n != -1:
                return p, False
            # No headers: their count, zero, is the record's last byte.
            if p + 1 != rend or data[p]:
                return p, False
            offset = base + offset_delta
            if min_offset <= offset < end:
                add_offset(offset)
                add_stamp(base_stamp + delta if stamp_all is None else stamp_all)
                add_key(kpos)
                add_key(kend)
                add_value(vpos)
                add_value(p)
                if null_key:
                    null_keys += 1
                if n == -1:
                    null_values += 1
            p = rend
    except (IndexError, ProtocolError):
        return p, False  # past the buffer, or a varint too long: kiel's decoder says which
    finally:
        out.null_keys += null_keys
        out.null_values += null_values
    return p, True


def _uniform_records(data: bytes, out: _Rows, p: int, bend: int, count: int,
                     batch: _BatchPlace) -> tuple[int, int]:
    """Read the records of a batch whose offset deltas are 0, 1, 2... by
    strided slices, as far as they have one layout.

    Strategy: a producer's records of one size (a null or fixed-size key,
    fixed-size values, no headers, timestamps within 63 ms of the batch's)
    differ only in their deltas, and the width of the offset delta changes
    at record 64 and 8192: from the first record of each stretch on,
    records then sit every ``stride`` bytes, as in a message set's uniform
    run. The stretch is taken only if every byte that frames a record (its
    length, attributes, key and value lengths, the empty header count) is
    the first record's, every timestamp delta is one byte, and the offset
    deltas are exactly their indexes; otherwise the records are left to
    :func:`_record_loop` from the stretch on.

    Returns:
        where the records read end, and how many of the batch were read.
    """
    index = 0
    while index < count and index < _ONE_BYTE_DELTAS + _TWO_BYTE_DELTAS:
        stop = min(count, _ONE_BYTE_DELTAS if index < _ONE_BYTE_DELTAS
                   else _ONE_BYTE_DELTAS + _TWO_BYTE_DELTAS)
        after = _uniform_stretch(data, out, p, bend, index, stop, batch)
        if after < 0:
            break
        p, index = after, stop
    return p, index


_ONE_BYTE_DELTAS = 64  # zig-zag 0..126: one byte
_TWO_BYTE_DELTAS = 8192 - 64
#: Offset deltas 0..63 as one-byte zig-zag varints; 64..8191 as two bytes (low, high).
_DELTA_1 = bytes(2 * i for i in range(_ONE_BYTE_DELTAS))
_DELTA_2_LOW = bytes(((2 * i) & 0x7F) | 0x80 for i in range(_ONE_BYTE_DELTAS, 8192))
_DELTA_2_HIGH = bytes((2 * i) >> 7 for i in range(_ONE_BYTE_DELTAS, 8192))
#: A one-byte zig-zag varint b (below 0x80) to its value plus 64 (bytes.translate).
_ZIGZAG_PLUS_64 = bytes(((b >> 1) ^ -(b & 1)) + 64 if b < 0x80 else 0 for b in range(256))


def _uniform_stretch(data: bytes, out: _Rows, p: int, bend: int, first: int, stop: int,
                     batch: _BatchPlace) -> int:
    """Read records ``first`` to ``stop`` of a batch (at ``p``) if they have one layout.

    Returns:
        where they end (-1: they do not have one layout; nothing was read).
    """
    base, _last_delta, base_stamp, stamp_all, min_offset, end = batch
    zz = _ZIGZAG
    try:
        b = data[p]
        if b < 0x80:
            size, q = zz[b], p + 1
        elif (c := data[p + 1]) < 0x80:
            size, q = zz[b + (c << 7)], p + 2
        else:
            return -1
        stride = q - p + size
        records = stop - first
        last = p + records * stride
        if size < _MIN_RECORD - 1 or last > bend or data[q + 1] >= 0x80:
            return -1
        kq = q + (3 if first < _ONE_BYTE_DELTAS else 4)  # attributes, timestamp, offset deltas
        b = data[kq]
        null_key = b == 1
        if null_key:
            kpos = kend = kq + 1
        elif b < 0x80:
            kpos = kq + 1
            kend = kpos + zz[b]
        elif (c := data[kq + 1]) < 0x80:
            kpos = kq + 2
            kend = kpos + zz[b + (c << 7)]
        else:
            return -1
        b = data[kend]
        if b < 0x80:
            vpos, vlen = kend + 1, zz[b]
        elif (c := data[kend + 1]) < 0x80:
            vpos, vlen = kend + 2, zz[b + (c << 7)]
        else:
            return -1
        vend = vpos + max(vlen, 0)
        if vlen < -1 or vend + 1 != p + stride or data[vend]:
            return -1
    except IndexError:
        return -1
    # Every framing byte (length, attributes, key and value lengths, header
    # count) is the first record's in all of them.
    for lo, hi in ((p, q + 1), (kq, kpos), (kend, vpos), (vend, vend + 1)):
        for i in range(lo, hi):
            if data[i:last:stride] != data[i:i + 1] * records:
                return -1
    stamp_deltas = data[q + 1:last:stride]
    if max(stamp_deltas) >= 0x80:
        return -1
    if first < _ONE_BYTE_DELTAS:
        if data[q + 2:last:stride] != _DELTA_1[first:stop]:
            return -1
    elif (data[q + 2:last:stride] != _DELTA_2_LOW[first - 64:stop - 64]
          or data[q + 3:last:stride] != _DELTA_2_HIGH[first - 64:stop - 64]):
        return -1
    lo = max(first, min_offset - base)
    hi = min(stop, end - base)
    if hi > lo:
        kept = hi - lo
        r0 = p + (lo - first) * stride
        r1 = r0 + kept * stride
        out.offsets.extend(array("q", range(base + lo, base + hi)))
        if stamp_all is None and stamp_deltas != stamp_deltas[:1] * records:
            out.stamps.extend(map((base_stamp - 64).__add__, stamp_deltas[
                lo - first:hi - first].translate(_ZIGZAG_PLUS_64)))
        else:  # one timestamp for all (a batch made within a millisecond, or LogAppendTime)
            stamp = base_stamp + zz[stamp_deltas[0]] if stamp_all is None else stamp_all
            out.stamps.extend(array("q", [stamp]) * kept)
        for bounds, start, finish in ((out.keys, kpos, kend), (out.values, vpos, vend)):
            pairs = array("i", bytes(8 * kept))
            pairs[0::2] = array("i", range(r0 + start - p, r1 + start - p, stride))
            pairs[1::2] = array("i", range(r0 + finish - p, r1 + finish - p, stride))
            bounds.extend(pairs)
        if null_key:
            out.null_keys += kept
        if vlen == -1:
            out.null_values += kept
    return last


def _varint_nulls(data: bytes, bounds: array, nulls: int, count: int) -> list[int]:
    """Which of ``count`` record keys or values are null, given how many are.

    A null one and an empty one both have no bytes; the varint length just
    before them tells them apart (zig-zag -1 is the byte 1, 0 the byte 0).
    """
    if nulls == 0:
        return []
    if nulls == count:
        return list(range(count))
    return [i for i in range(count)
            if bounds[2 * i] == bounds[2 * i + 1] and data[bounds[2 * i] - 1] == 1]


def _stamps(stamps: array, types: array) -> tuple[pa.Array, pa.Array]:
    """The timestamp and timestampType columns of record timestamps in
    milliseconds, as :func:`to_arrow` makes them (a negative one: null, type -1)."""
    count = len(stamps)
    millis = pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(stamps)])
    low, high = pc.min_max(millis).values()
    if low.as_py() >= 0 and high.as_py() <= _MAX_MS:
        micros = pc.multiply(millis, 1000)
        return (pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), count, micros.buffers()),
                pa.Array.from_buffers(pa.int32(), count, [None, pa.py_buffer(types)]))
    # Rare: as to_arrow does it, one by one (which also refuses what does not fit).
    return (_micros([None if s < 0 else s * 1000 for s in stamps]),
            pa.array([-1 if s < 0 else t for s, t in zip(stamps, types)], pa.int32()))


def _micros(stamps: list[Optional[int]]) -> pa.Array:
    """Spark's timestamp column of record timestamps in microseconds.

    Raises:
        CorruptMessageError: one is past what Spark's timestamps hold (an
            int64 of microseconds: the year 294,000 or so).
    """
    try:
        return pa.array(stamps, pa.timestamp("us", tz="UTC"))
    except (OverflowError, pa.ArrowInvalid) as e:
        raise CorruptMessageError(
            f"a record timestamp does not fit Spark's timestamp (microseconds in an int64): "
            f"{max(s for s in stamps if s is not None) // 1000} ms") from e


def _uniform_run(data: bytes, topic: str, partition: int, min_offset: int, end: int,
                 headers: bool) -> tuple[int, int, Optional[int], list[pa.RecordBatch]]:
    """Read a run of plain magic-0 messages that all have the first one's layout.

    Strategy: records of one size (fixed-size values, null or fixed-size
    keys) are common, and then the messages sit every ``stride`` bytes: each
    field of all of them is one strided slice of ``data``, which CPython
    copies in C. The run is taken only if every message has the first one's
    size, attributes (none: plain magic 0), key and value lengths, its own
    correct CRC (computed by ``zlib.crc32`` over each message, through C-level
    ``map``), and the offsets follow each other one by one; otherwise
    nothing is taken here and :func:`_plain_run` reads message by message.
    A misaligned stride cannot pass: its CRCs would not match.

    Returns:
        as :func:`_plain_run` (``(0, 0, None, [])``: no uniform run).
    """
    size_all = len(data)
    if size_all < _HEADER_SIZE + 4:
        return 0, 0, None, []
    first, size, _crc, magic_attrs, klen = _HEADER.unpack_from(data, 0)
    stride = LOG_OVERHEAD + size
    count = size_all // stride
    kend = _HEADER_SIZE + max(klen, 0)
    if (magic_attrs or size < _MIN_V0 or count < _MIN_UNIFORM or klen < -1
            or kend + 4 > stride or first + count <= min_offset):
        return 0, 0, None, []
    (vlen,) = _INT32.unpack_from(data, kend)
    if vlen != stride - kend - 4:
        return 0, 0, None, []  # a null value, or lengths that do not add up
    total = count * stride
    # Every message's size, attributes, key length and value length are the first one's.
    for lo, hi in ((8, 12), (16, _HEADER_SIZE), (kend, kend + 4)):
        for i in range(lo, hi):
            if data[i:total:stride] != data[i:i + 1] * count:
                return 0, 0, None, []
    # Offsets one after the other, from the first (big-endian on the wire).
    offsets = bytearray(8 * count)
    for j in range(8):
        offsets[j::8] = data[7 - j:total:stride]
    if offsets != array("q", range(first, first + count)).tobytes():
        return 0, 0, None, []
    stored = bytearray(4 * count)
    for j in range(4):
        stored[j::4] = data[15 - j:total:stride]
    computed = array("I", map(zlib.crc32, map(data.__getitem__, map(
        slice, range(_CRC_START, total, stride), range(stride, total + 1, stride)))))
    if computed.tobytes() != stored:
        return 0, 0, None, []  # message by message: the bad one is found and refused
    skip = max(0, min_offset - first)
    keep = min(count, end - first)
    rows = keep - skip
    if rows <= 0:
        return total, 0, first + count - 1, []
    base = skip * stride
    stop = keep * stride
    values = array("i", bytes(8 * rows))
    values[0::2] = array("i", range(base + kend + 4, stop, stride))
    values[1::2] = array("i", range(base + stride, stop + 1, stride))
    buffer = pa.py_buffer(data)
    if klen < 0:
        key_column = pa.nulls(rows, pa.binary())
    else:
        keys = array("i", bytes(8 * rows))
        keys[0::2] = array("i", range(base + _HEADER_SIZE, stop, stride))
        keys[1::2] = array("i", range(base + kend, stop, stride))
        key_column = _cut(buffer, keys, rows, [])
    offset_column = pa.Array.from_buffers(pa.int64(), rows,
                                          [None, pa.py_buffer(offsets[8 * skip:8 * keep])])
    batch = _batch(key_column, _cut(buffer, values, rows, []), offset_column, topic, partition,
                   headers)
    return (total if keep == count else stop), rows, first + keep - 1, [batch]


def _batch(keys: pa.Array, values: pa.Array, offsets: pa.Array, topic: str, partition: int,
           headers: bool, stamps: Optional[pa.Array] = None,
           types: Optional[pa.Array] = None) -> pa.RecordBatch:
    """The Arrow batch of rows without headers (and without timestamps: magic 0)."""
    count = len(offsets)
    columns = [
        keys,
        values,
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        offsets,
        pa.nulls(count, pa.timestamp("us", tz="UTC")) if stamps is None else stamps,
        pa.repeat(pa.scalar(-1, pa.int32()), count) if types is None else types,
    ]
    if headers:
        columns.append(pa.nulls(count, ARROW_HEADERS))
    return pa.RecordBatch.from_arrays(
        columns, schema=ARROW_SCHEMA_WITH_HEADERS if headers else ARROW_SCHEMA)


def _plain_run(data: bytes, pos: int, last: Optional[int], topic: str, partition: int,
               min_offset: int, end: int,
               headers: bool) -> tuple[int, int, Optional[int], list[pa.RecordBatch]]:
    """Read the plain magic-0 messages of ``data`` from ``pos`` (``last``: the
    offset of the message before it, ``None``: none).

    Returns:
        where the run stopped (the first message it does not read, or the
        end), how many rows it made, the offset of the last message read
        (``None``: none), and the rows as Arrow batches (at most one).
    """
    unpack = _HEADER_NULL_KEY.unpack_from
    unpack_int = _INT32.unpack_from
    crc32 = zlib.crc32
    size_all = len(data)
    offsets = array("q")
    values = array("i")
    keys = array("i")
    null_keys = null_values = 0
    add_offset, add_value, add_key = offsets.append, values.append, keys.append
    last_offset = -1 if last is None else last
    # Strategy: the consumer's hot path, without the objects. One unpack per
    # message reads its header and, when the key is null (the common case),
    # the value length after it; every length is checked against the message
    # before it is used, and the message is not read (the run stops) at the
    # first thing that is not a complete, plain, CRC-correct magic-0 message
    # with an offset after the last one, or at the range's end. Null keys and
    # values are only counted here: which rows they are is found afterwards,
    # and only when an answer mixes them with others.
    while pos + _HEADER_SIZE + 4 <= size_all:
        offset, size, crc, magic_attrs, klen, vlen = unpack(data, pos)
        mend = pos + LOG_OVERHEAD + size
        if (magic_attrs or size < _MIN_V0 or mend > size_all or offset >= end
                or offset <= last_offset or crc32(data[pos + _CRC_START:mend]) != crc):
            break
        kpos = pos + _HEADER_SIZE
        if klen == -1:
            kend = kpos
            null_keys += 1
        elif klen >= 0:
            kend = kpos + klen
            if kend + 4 > mend:
                break
            (vlen,) = unpack_int(data, kend)
        else:
            break
        vpos = kend + 4
        if vlen >= 0:
            if vpos + vlen != mend:
                break
        elif vlen != -1 or vpos != mend:
            break
        else:
            null_values += 1
        last_offset = offset
        pos = mend
        if offset < min_offset:
            if klen == -1:
                null_keys -= 1
            if vlen == -1:
                null_values -= 1
            continue
        add_offset(offset)
        add_key(kpos)
        add_key(kend)
        add_value(vpos)
        add_value(mend)
    last = None if last_offset < 0 and last is None else last_offset
    count = len(offsets)
    if not count:
        return pos, 0, last, []
    buffer = pa.py_buffer(data)
    offset_column = pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(offsets)])
    key_column = _cut(buffer, keys, count, _nulls(data, keys, null_keys, count))
    value_column = _cut(buffer, values, count, _nulls(data, values, null_values, count))
    batch = _batch(key_column, value_column, offset_column, topic, partition, headers)
    return pos, count, last, [batch]


def _nulls(data: bytes, bounds: array, nulls: int, count: int) -> list[int]:
    """Which of ``count`` fields (keys or values) are null, given how many are.

    The length of a field is the int32 before it: -1 for null (an empty one,
    with the same bounds, has 0). Read again only when some are null and
    some are not.
    """
    if nulls == 0:
        return []
    if nulls == count:
        return list(range(count))
    unpack_int = _INT32.unpack_from
    return [i for i in range(count) if unpack_int(data, bounds[2 * i] - 4)[0] < 0]


def _cut(buffer: pa.Buffer, bounds: array, count: int, nulls: list[int]) -> pa.Array:
    """The ``count`` byte strings ``buffer[bounds[2i]:bounds[2i+1]]`` as a binary array.

    Strategy: the bounds, in order, are the offsets of a binary array laid
    on the buffer whose even elements are the strings and odd ones the bytes
    between them; ``take`` of the even ones copies them out in C.
    """
    if len(nulls) == count:
        return pa.nulls(count, pa.binary())
    laid = pa.Array.from_buffers(pa.binary(), 2 * count - 1, [None, pa.py_buffer(bounds), buffer])
    evens = pa.Array.from_buffers(pa.int32(), count,
                                  [None, pa.py_buffer(array("i", range(0, 2 * count, 2)))])
    out = laid.take(evens)
    if nulls:
        valid = [True] * count
        for i in nulls:
            valid[i] = False
        out = pa.Array.from_buffers(pa.binary(), count, [
            pa.array(valid, pa.bool_()).buffers()[1], *out.buffers()[1:]])
    return out


def _from_records(records: Sequence[Record], next_offset: Optional[int], valid_bytes: int,
                  needed: Optional[int], end: int, headers: bool) -> Decoded:
    """A :class:`Decoded` of records kiel's decoders made (cut at ``end``)."""
    keep = len(records)
    while keep and records[keep - 1].offset >= end:
        keep -= 1
    if keep < len(records):
        records = records[:keep]
    batches = [to_arrow(records, headers)] if records else []
    return Decoded(batches, len(records), next_offset, valid_bytes, needed)


def to_arrow(records: Sequence[Record], headers: bool = False) -> pa.RecordBatch:
    """Records of one partition as an Arrow batch of Spark's Kafka schema (with
    ``headers``: plus the headers column; a record without headers, such as
    every 0.8 message, has null there, as in Spark's own source)."""
    # Strategy: columns that are constant in a partition's batch (topic,
    # partition, and on 0.8 the null timestamps, keys and headers) are built
    # without touching each record; only values, offsets and non-null keys are lists.
    n = len(records)
    first = records[0]
    values = pa.array([r[4] for r in records], pa.binary())
    keys = [r[3] for r in records]
    key_array = (pa.nulls(n, pa.binary()) if keys.count(None) == n
                 else pa.array(keys, pa.binary()))
    offsets = pa.array([r[2] for r in records], pa.int64())
    stamps = [r[5] for r in records]
    if stamps.count(None) == n:
        stamp_array = pa.nulls(n, pa.timestamp("us", tz="UTC"))
        type_array = pa.repeat(pa.scalar(-1, pa.int32()), n)
    else:
        stamp_array = _micros([None if s is None or s < 0 else s * 1000 for s in stamps])
        # 0: CreateTime, 1: LogAppendTime (the broker's clock), as Spark shows them.
        type_array = pa.array([-1 if s is None or s < 0 else (r[6] or 0)
                               for s, r in zip(stamps, records)], pa.int32())
    columns = [
        key_array,
        values,
        pa.repeat(pa.scalar(first[0], pa.string()), n),
        pa.repeat(pa.scalar(first[1], pa.int32()), n),
        offsets,
        stamp_array,
        type_array,
    ]
    if headers:
        pairs = [r[7] for r in records]
        if any(pairs):
            columns.append(pa.array(
                [[{"key": k, "value": v} for k, v in h] if h else None for h in pairs],
                ARROW_HEADERS,
            ))
        else:
            columns.append(pa.nulls(n, ARROW_HEADERS))
    return pa.RecordBatch.from_arrays(
        columns, schema=ARROW_SCHEMA_WITH_HEADERS if headers else ARROW_SCHEMA
    )


#: What :func:`coalesce` gathers before it hands a batch on: rows, and bytes at most.
COALESCE_ROWS = 64 * 1024
COALESCE_BYTES = 16 * 1024 * 1024


def coalesce(batches: Iterable[pa.RecordBatch], rows: int = COALESCE_ROWS,
             max_bytes: int = COALESCE_BYTES) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches``, in order, in batches of about ``rows`` rows.

    Strategy: a fetch answer makes a batch of a few thousand rows, and
    Spark's side of a Python data source pays per batch it takes in (measured
    on pyspark 4.3: 64k-row batches go through about 1.5 times faster than
    8k-row ones). Batches are gathered until ``rows`` rows or ``max_bytes``
    bytes wait (the bound on what is held), then handed on as one.

    Yields:
        the batches, gathered (a single small one as it is).
    """
    held: list[pa.RecordBatch] = []
    count = size = 0
    for batch in batches:
        held.append(batch)
        count += batch.num_rows
        size += batch.nbytes
        if count >= rows or size >= max_bytes:
            yield _gathered(held)
            held, count, size = [], 0, 0
    if held:
        yield _gathered(held)


def _gathered(held: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(held) == 1:
        return held[0]
    # One chunk per column, then one batch (pa.concat_batches needs pyarrow 19).
    (batch,) = pa.Table.from_batches(held).combine_chunks().to_batches()
    return batch
