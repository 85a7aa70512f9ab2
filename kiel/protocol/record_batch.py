"""Record batches (magic 2): the message format of Kafka 0.11 and later.

Wire grammar (Kafka protocol guide, "Record Batch")::

    RecordBatch => BaseOffset BatchLength PartitionLeaderEpoch Magic Crc
                   Attributes LastOffsetDelta BaseTimestamp MaxTimestamp
                   ProducerId ProducerEpoch BaseSequence RecordCount Records
      BaseOffset => int64
      BatchLength => int32            # bytes after this field
      PartitionLeaderEpoch => int32   # set by the broker (-1 from producers)
      Magic => int8                   # 2
      Crc => uint32                   # CRC-32C of Attributes .. end of batch
      Attributes => int16             # bits 0-2 codec (0 none, 1 gzip,
                                      #   2 snappy, 3 lz4, 4 zstd)
                                      # bit 3 timestamp type (1 = LogAppendTime)
                                      # bit 4 transactional, bit 5 control,
                                      # bit 6 has a delete horizon (compaction)
      LastOffsetDelta => int32
      BaseTimestamp => int64          # the first record's timestamp
      MaxTimestamp => int64
      ProducerId => int64             # -1 unless idempotent or transactional
      ProducerEpoch => int16
      BaseSequence => int32
      RecordCount => int32
      Records => [Record]             # RecordCount of them, all compressed
                                      # together when the codec is not 0
    Record => Length Attributes TimestampDelta OffsetDelta Key Value Headers
      Length => varint                # bytes after this field
      Attributes => int8              # unused (0)
      TimestampDelta => varlong       # from BaseTimestamp
      OffsetDelta => varint           # from BaseOffset
      Key => varint length (-1 for null), bytes
      Value => varint length (-1 for null), bytes
      Headers => varint count, [HeaderKey HeaderValue]
        HeaderKey => varint length, UTF-8 text
        HeaderValue => varint length (-1 for null), bytes

The magic byte sits at the same place as in the older message sets (byte 16
of an entry), so :func:`decode_record_batches` also reads magic-0 and magic-1
entries in the same buffer (a broker serves old segments as they are), with
:func:`kiel.protocol.messages.decode_message_set`.

Sans-I/O: bytes in, objects out; stdlib plus :mod:`kiel.compression` and
:mod:`kiel.protocol.crc32c`. Decoding is bounded: every length is checked
against the buffer before anything is sliced, and every failure is a
:class:`kiel.exc.ProtocolError` subclass.

Records come back as :class:`kiel.structs.Record` with their headers and
timestamp type; :class:`BatchDecodeResult` also lists both in lists parallel
to ``records`` (the shape callers of the first version used).
"""
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, repeat
from operator import itemgetter
from typing import (
    Any,
    NamedTuple,
    Optional,
    Union,
)

import kiel.compression as _compression
from kiel._signature import parameters_of
from kiel.exc import (
    CompressionError,
    ConfigError,
    LocalProtocolError,
    ProtocolError,
    UnsupportedVersionError,
)
from kiel.protocol import log_format
from kiel.protocol.crc32c import crc32c
from kiel.protocol.log_format import CODEC_ZSTD, Buffer, corrupt, decode_arguments
from kiel.protocol.messages import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, decode_within
from kiel.protocol.primitives import decode_varint, decode_varlong, encode_varint
from kiel.structs import Header, Record

__all__ = [
    "ABORT",
    "COMMIT",
    "AbortedFilter",
    "CODEC_NONE",
    "CODEC_GZIP",
    "CODEC_SNAPPY",
    "CODEC_LZ4",
    "CODEC_ZSTD",
    "CREATE_TIME",
    "HEADER_SIZE",
    "LOG_APPEND_TIME",
    "BatchDecodeResult",
    "BatchHeader",
    "BatchSlice",
    "OpenBatch",
    "ControlMarker",
    "Header",
    "RecordBatchBuilder",
    "decode_batch_slice",
    "decode_committed",
    "decode_record_batches",
    "encode_record_batch",
    "open_record_batches",
]

#: Timestamp types (attribute bit 3).
CREATE_TIME = 0
LOG_APPEND_TIME = 1
#: Control record types (the key of a control batch's record).
ABORT = 0
COMMIT = 1

_CODEC_MASK = log_format.CODEC_MASK
_TIMESTAMP_TYPE_BIT = log_format.TIMESTAMP_TYPE_BIT
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

#: Bytes of a batch before its first record.
HEADER_SIZE = 61
_LOG_OVERHEAD = log_format.LOG_OVERHEAD  # BaseOffset + BatchLength
_CRC_START = 21  # the CRC covers from Attributes on
_MIN_BATCH_LENGTH = HEADER_SIZE - _LOG_OVERHEAD
_MIN_LEGACY_SIZE = 14  # the smallest magic-0 message after its 12-byte prefix
_MIN_RECORD_BODY = 6  # attributes, timestamp delta, offset delta, key, value, header count
_NO_MIN_OFFSET = log_format.NO_MIN_OFFSET
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_OFFSET_LENGTH = log_format.OFFSET_SIZE
_HEADER = struct.Struct(">qiibIhiqqqhii")
_HEAD = struct.Struct(">qiibI")  # BaseOffset .. Crc (encode)
_TAIL = struct.Struct(">hiqqqhii")  # Attributes .. RecordCount (encode)
_CONTROL_KEY = struct.Struct(">hh")

_NO_HEADERS: tuple[Header, ...] = ()
_HEADERS_OF = itemgetter(7)  # a Record's headers
#: The value of every one- and two-byte zig-zag varint: ``_ZIGZAG[b]`` for
#: one byte ``b`` (below 0x80), ``_ZIGZAG[b + (c << 7)]`` for ``b`` (0x80 and
#: up) then ``c`` (below 0x80), whose raw value is ``b - 0x80 + (c << 7)``.
_ZIGZAG = tuple((raw >> 1) ^ -(raw & 1) for raw in chain(range(0x80), range(1 << 14)))


class BatchHeader(NamedTuple):
    """The 61-byte header of one record batch, field by field as on the wire."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def codec(self) -> int:
        """The compression codec id (attribute bits 0-2)."""
        return self.attributes & _CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        """:data:`CREATE_TIME` or :data:`LOG_APPEND_TIME`."""
        return LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        """Whether the batch belongs to a transaction."""
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        """Whether the batch holds a transaction marker rather than data."""
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def last_offset(self) -> int:
        """The offset of the batch's last record (compaction may have removed it)."""
        return self.base_offset + self.last_offset_delta


class ControlMarker(NamedTuple):
    """A transaction marker found in a control batch."""

    offset: int
    producer_id: int
    producer_epoch: int
    #: :data:`COMMIT` or :data:`ABORT` (other values are kept as they are).
    control_type: int


class AbortedFilter:
    """read_committed: which data batches of one Fetch answer belong to
    aborted transactions, from the answer's aborted-transactions list.

    Each entry ``(producer_id, first_offset)`` says that producer's
    transaction that began at ``first_offset`` was aborted: its
    transactional batches from there on are dropped until that producer's
    ABORT marker (Kafka's rule, KIP-98). Batches must be shown in log
    order, each once (:meth:`skips`, then :meth:`ended` for a marker).

    Args:
        aborted: the answer's ``(producer_id, first_offset)`` pairs, in any order.
    """

    __slots__ = ("_pending", "_open")

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        # Smallest first offset last: popped as batches reach it.
        self._pending = sorted(((first, pid) for pid, first in aborted), reverse=True)
        #: Producers whose aborted transaction is under way at this point of the log.
        self._open: set[int] = set()

    def skips(self, batch: "BatchHeader") -> bool:
        """Whether ``batch``, the next in log order, is aborted data to drop."""
        producer_id = batch.producer_id
        if producer_id < 0:
            return False  # neither idempotent nor transactional
        pending = self._pending
        last = batch.base_offset + batch.last_offset_delta
        while pending and pending[-1][0] <= last:
            self._open.add(pending.pop()[1])
        attributes = batch.attributes
        return (not attributes & _CONTROL_BIT and bool(attributes & _TRANSACTIONAL_BIT)
                and producer_id in self._open)

    def ended(self, marker: "ControlMarker") -> None:
        """A marker met: an ABORT ends its producer's aborted transaction."""
        if marker.control_type == ABORT:
            self._open.discard(marker.producer_id)


class OpenBatch:
    """A record batch whose records are still to decode, a slice at a time
    (see :func:`decode_record_batches`' ``open_compressed`` and
    :func:`decode_batch_slice`): a compressed batch, decompressed, or a
    batch with a bad record, so that the records before it come out first.
    The caller keeps where in :attr:`data` decoding goes on.

    Args:
        header: the batch's header.
        data: its records' bytes (decompressed).
    """

    __slots__ = ("header", "data", "_resume", "_packed")

    def __init__(self, header: BatchHeader, data: bytes,
                 packed: Optional[tuple[int, bytes, int]] = None) -> None:
        #: The batch's header: base offset and timestamp, attributes, record count.
        self.header = header
        #: The batch's records, decompressed (empty while :attr:`pending`).
        self.data = data
        # (index, offset delta of the record before it) where the last slice
        # ended: the next slice checks that offsets go on increasing.
        self._resume = (0, -1)
        # (codec, compressed records, the most bytes they may inflate to)
        # while the caller has yet to decompress them.
        self._packed = packed

    @property
    def pending(self) -> bool:
        """Its records are still compressed: :meth:`decompress` them (in any
        thread), then hand the result to :meth:`inflated`, before slicing."""
        return self._packed is not None

    def decompress(self) -> bytes:
        """The records of a :attr:`pending` batch, decompressed.

        A pure function of the batch's compressed bytes: safe to run in
        another thread (it changes nothing).

        Raises:
            CompressionError: they do not decompress, or to more bytes than
                the decode's ``max_decoded`` had left.
            CorruptMessageError: the codec library failed on its own.
            UnsupportedCodecError: an unknown codec.
            ConfigError: the batch is not pending.
        """
        if self._packed is None:
            raise ConfigError("the batch is not pending: its records are decompressed")
        codec, packed, cap = self._packed
        return log_format.decompress(codec, packed, self.header.base_offset, [cap])

    def inflated(self, data: bytes) -> None:
        """Take the records :meth:`decompress` returned.

        Raises:
            CorruptMessageError: they cannot hold the batch's record count.
        """
        _check_count(self.header, len(data))
        self.data = data
        self._packed = None

    def __repr__(self) -> str:
        state = "pending" if self._packed is not None else f"{len(self.data)} bytes"
        return f"OpenBatch(base_offset={self.header.base_offset}, {state})"


class BatchDecodeResult(NamedTuple):
    """What :func:`decode_record_batches` found in a buffer.

    ``records``, ``headers`` and ``timestamp_types`` are parallel: the i-th
    record's headers are ``headers[i]``. A fetch response is cut at
    ``max_bytes``, so a partial trailing batch is normal: it is dropped and
    ``truncated`` is set; if not even the first one fits,
    ``first_batch_too_large`` says so and ``first_batch_size`` (when its
    12-byte prefix arrived) how many bytes it needs.
    """

    #: Decoded records in offset order, control records and those below ``min_offset`` dropped.
    records: list[Record]
    #: Each record's headers: a tuple of ``(key, value)`` pairs, ``()`` for none.
    headers: list[tuple[Header, ...]]
    #: Each record's timestamp type (``None`` for magic-0 messages).
    timestamp_types: list[Optional[int]]
    #: The header of every complete v2 batch, control batches included.
    batches: list[BatchHeader]
    #: The transaction markers of the control batches.
    markers: list[ControlMarker]
    #: Offset after the last complete batch; ``None`` if there is none.
    next_offset: Optional[int]
    #: Bytes taken by complete batches (where a partial trailing batch starts).
    valid_bytes: int
    #: A partial trailing batch was dropped.
    truncated: bool
    #: The buffer is not empty but holds no complete batch.
    first_batch_too_large: bool
    #: Bytes the first batch needs, when ``first_batch_too_large`` and its prefix arrived.
    first_batch_size: Optional[int]
    #: With ``open_compressed``: the first compressed data batch, decompressed
    #: but not decoded, or the first batch with a bad record (decoding
    #: stopped after it); else ``None``.
    opened: Optional[OpenBatch] = None


class BatchSlice(NamedTuple):
    """What :func:`decode_batch_slice` decoded."""

    #: The records read, below ``min_offset`` dropped.
    records: list[Record]
    #: Where the next record starts.
    position: int
    #: How many records of the batch were read, these included.
    read: int
    #: Every record of the batch was read.
    done: bool
    #: The offset after the last record read (the batch's once ``done``).
    next_offset: Optional[int]


# ---------------------------------------------------------------------------
# Decoding




class _Sink:
    """The lists a decode fills, and what it was asked to keep."""

    def __init__(self, topic: str, partition: int, min_offset: int, check: bool,
                 max_decoded: int = log_format.DEFAULT_MAX_DECODED,
                 inline: Optional[int] = None) -> None:
        self.topic = topic
        self.partition = partition
        self.min_offset = min_offset
        self.check = check
        #: Decompressed bytes left for this decode (one list: shared, decremented).
        self.budget = [max_decoded]
        self.records: list[Record] = []
        self.headers: list[tuple[Header, ...]] = []
        self.timestamp_types: list[Optional[int]] = []
        self.batches: list[BatchHeader] = []
        self.markers: list[ControlMarker] = []
        #: Stop at the first compressed data batch and open it
        #: (``open_compressed``).
        self.opening = False
        self.opened: Optional[OpenBatch] = None
        #: With ``opening``: the most bytes a batch is decompressed to here;
        #: a larger one is opened pending (``None``: no limit).
        self.inline = inline
        #: read_committed: drops the batches of aborted transactions (``None``: keep all).
        self.aborted: Optional[AbortedFilter] = None


def _read_headers(data: bytes, p: int, rend: int, offset: int) -> tuple[tuple[Header, ...], int]:
    """The headers of one record, starting at their count."""
    count, p = decode_varint(data, p)
    # Every header takes at least two bytes (two lengths).
    if count < 0 or 2 * count > rend - p:
        raise corrupt(f"record header count {count} does not fit the record", offset)
    headers: list[Header] = []
    for _ in range(count):
        klen, p = decode_varint(data, p)
        if klen < 0 or p + klen > rend:
            raise corrupt(f"record header key length {klen} does not fit the record", offset)
        try:
            key = str(data[p : p + klen], "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError("record header key is not valid UTF-8", offset=offset) from e
        p += klen
        vlen, p = decode_varint(data, p)
        if vlen < -1 or p + vlen > rend:
            raise corrupt(f"record header value length {vlen} does not fit the record", offset)
        if vlen < 0:
            headers.append((key, None))
        else:
            headers.append((key, data[p : p + vlen]))
            p += vlen
    return tuple(headers), p


def _varint(
    data: bytes, p: int, general: Callable[[Buffer, int], tuple[int, int]] = decode_varint
) -> tuple[int, int]:
    """The zig-zag varint at ``p``: ``(value, offset after it)``; one- and
    two-byte ones read here, longer ones by ``general`` (which checks their
    width: ``decode_varint`` or ``decode_varlong``).

    Raises:
        IndexError: ``data`` ends inside it.
        ProtocolError: ``general`` found it too long or too wide.
    """
    b = data[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    c = data[p + 1]
    if c < 0x80:
        raw = (b & 0x7F) | (c << 7)
        return (raw >> 1) ^ -(raw & 1), p + 2
    return general(data, p)


def _read_records(sink: _Sink, data: bytes, p: int, end: int, batch: BatchHeader) -> None:
    """Decode the ``batch.record_count`` records of ``data[p:end]`` into
    ``sink``; a control batch's into its marker instead."""
    _check_count(batch, end - p)
    # Strategy: a control record is read like any other, into a sink of its
    # own (it is never handed out): the hot loop of _read_some has no
    # branch for the rare control batch.
    control = batch.attributes & _CONTROL_BIT
    into = _Sink(sink.topic, sink.partition, _NO_MIN_OFFSET, sink.check) if control else sink
    p, index, _last = _read_some(into, data, p, end, batch, 0, end, -1)
    _check_end(batch, index, p, end)
    if control and into.records:
        _add_marker(sink, batch, into.records[0])


def _check_end(batch: BatchHeader, index: int, p: int, end: int) -> None:
    """Every record of ``batch`` read (``index`` of them) and its bytes too."""
    if index < batch.record_count:
        raise corrupt("record runs past the end of its batch", batch.base_offset)
    if p != end:
        raise corrupt(f"{end - p} bytes after the last record of the batch", batch.base_offset)


def _check_count(batch: BatchHeader, size: int) -> None:
    count = batch.record_count
    if count < 0 or count * (_MIN_RECORD_BODY + 1) > size:
        raise corrupt(f"record count {count} does not fit the batch", batch.base_offset)


def _read_some(
    sink: _Sink, data: bytes, p: int, end: int, batch: BatchHeader, index: int, stop: int,
    previous: int,
) -> tuple[int, int, Optional[int]]:
    """Decode the records of ``batch`` from the ``index``-th, at ``p``, into
    ``sink``: all of them, or those that start before ``stop``.

    ``previous`` is the offset delta of the record before the ``index``-th
    (-1 for the first): each record's must be above the one before it and
    no more than the header's last offset delta.

    Returns ``(p, index, last offset)`` after the last record read (``None``:
    none read).

    Raises:
        CorruptMessageError: at the first record that does not decode or
            whose offset does not fit (its offset: where the good ones end).
    """
    count = batch.record_count
    base_offset = batch.base_offset
    ts_type = batch.timestamp_type
    base_ts = batch.base_timestamp
    min_offset = sink.min_offset
    topic, partition = sink.topic, sink.partition
    records = sink.records
    before = len(records)
    append, new, record_type = records.append, tuple.__new__, Record
    varint, zz, no_headers, min_body = _varint, _ZIGZAG, _NO_HEADERS, _MIN_RECORD_BODY
    last_delta = batch.last_offset_delta
    offset: Optional[int] = None
    # Records below min_offset (a fetch answers from the start of the batch
    # that holds the offset asked for) can only be in a batch that starts
    # below it; they are read like the others and dropped after the loop,
    # which then needs no test per record.
    trim = base_offset < min_offset
    read = index
    # Strategy: this loop is the consumer's hot path (one to two microseconds a
    # record), so it is written out flat: no call per field. A record's
    # varints are nearly all one or two bytes (lengths under 8 KiB, deltas
    # under 8192): those are read here, with a table for the zig-zag step;
    # longer ones go to _varint, which hands them to the general readers
    # (those check their width). Reading past the record's end is caught by
    # the check that each record ends exactly where its length says;
    # reading past the buffer by IndexError. ``read`` counts the records
    # read, the one being read included.
    try:
        for read in range(index + 1, count + 1):
            if p >= stop:
                read -= 1
                break
            b = data[p]
            if b < 0x80:
                length = zz[b]
                p += 1
            elif (c := data[p + 1]) < 0x80:
                length = zz[b + (c << 7)]
                p += 2
            else:
                length, p = varint(data, p)
            rend = p + length
            if length < min_body or rend > end:
                raise corrupt(f"record length {length} does not fit the batch", base_offset)
            # After the unused attributes byte: the timestamp and offset deltas.
            b = data[p + 1]
            if b < 0x80:
                delta = zz[b]
                p += 2
            elif (c := data[p + 2]) < 0x80:
                delta = zz[b + (c << 7)]
                p += 3
            else:
                delta, p = varint(data, p + 1, decode_varlong)
            b = data[p]
            if b < 0x80:
                offset_delta = zz[b]
                p += 1
            elif (c := data[p + 1]) < 0x80:
                offset_delta = zz[b + (c << 7)]
                p += 2
            else:
                offset_delta, p = varint(data, p)
            if not previous < offset_delta <= last_delta:
                # Strategy: offsets that repeat, go back or pass the batch's
                # last would move the consumer's position back over records
                # handed out, or far past records never seen.
                raise _bad_offset(batch, previous, offset_delta)
            previous = offset_delta
            offset = base_offset + offset_delta
            # The key: nearly always null (a zig-zag -1 is byte 1) or short.
            b = data[p]
            if b == 1:
                key = None
                p += 1
            else:
                if b < 0x80:
                    n = zz[b]
                    p += 1
                elif (c := data[p + 1]) < 0x80:
                    n = zz[b + (c << 7)]
                    p += 2
                else:
                    n, p = varint(data, p)
                if n < 0:
                    raise corrupt(f"record key length {n} is invalid", offset)
                key = data[p : p + n]
                p += n
            b = data[p]
            if b < 0x80:
                n = zz[b]
                p += 1
            elif (c := data[p + 1]) < 0x80:
                n = zz[b + (c << 7)]
                p += 2
            else:
                n, p = varint(data, p)
            if n >= 0:
                value: Optional[bytes] = data[p : p + n]
                p += n
            elif n == -1:
                value = None
            else:
                raise corrupt(f"record value length {n} is invalid", offset)
            if data[p] == 0:
                headers = no_headers
                p += 1
            else:
                headers, p = _read_headers(data, p, rend, offset)
            if p != rend:
                raise corrupt(f"record of {length} bytes does not end at its length", offset)
            append(new(record_type, (topic, partition, offset, key, value, base_ts + delta,
                                     ts_type, headers)))
    except IndexError as e:
        raise corrupt("record runs past the end of its batch", base_offset) from e
    finally:
        if trim:
            kept = before
            while kept < len(records) and records[kept][2] < min_offset:
                kept += 1
            del records[before:kept]
        # The records kept (also those before a bad one: the caller may
        # hand them out): with LogAppendTime each one's timestamp is the
        # batch's max timestamp (the rare case, set here rather than
        # tested per record); and the parallel list of their headers.
        if batch.attributes & _TIMESTAMP_TYPE_BIT:
            records[before:] = [record._replace(timestamp=batch.max_timestamp)
                                for record in records[before:]]
        sink.headers.extend(map(_HEADERS_OF, records[before:]))
    return p, read, offset


def _bad_offset(batch: BatchHeader, previous: int, offset_delta: int) -> ProtocolError:
    """The error for a record whose offset delta does not follow ``previous``;
    its offset is where the good records end."""
    if offset_delta < 0:
        why = f"offset delta {offset_delta} is negative"
    elif offset_delta <= previous:
        why = f"offset deltas do not increase ({previous} then {offset_delta})"
    else:
        why = (f"offset delta {offset_delta} is past the batch's last offset delta "
               f"{batch.last_offset_delta}")
    return corrupt(f"record {why} (batch at offset {batch.base_offset})",
                   batch.base_offset + previous + 1)


def _decode_batch(sink: _Sink, data: bytes, mv: memoryview, pos: int, bend: int) -> int:
    """Decode the v2 batch ``data[pos:bend]`` into ``sink``; returns its next offset."""
    batch = tuple.__new__(BatchHeader, _HEADER.unpack_from(data, pos))
    base_offset = batch.base_offset
    if sink.check:
        computed = crc32c(mv[pos + _CRC_START : bend])
        if computed != batch.crc:
            raise corrupt(
                f"record batch CRC mismatch: stored 0x{batch.crc:08x}, computed 0x{computed:08x}",
                base_offset,
            )
    if batch.last_offset_delta < 0:
        raise corrupt(f"last offset delta {batch.last_offset_delta} is negative", base_offset)
    if sink.aborted is not None and sink.aborted.skips(batch):
        # An aborted transaction's batch: never decompressed nor decoded,
        # but its offsets are passed (the position moves past it).
        sink.batches.append(batch)
        return base_offset + batch.last_offset_delta + 1
    codec = batch.attributes & _CODEC_MASK
    start = pos + HEADER_SIZE
    before = len(sink.records)
    if codec:
        opening = sink.opening and not batch.attributes & _CONTROL_BIT
        inline = sink.inline
        if opening and inline is not None and inline < sink.budget[0]:
            try:
                # Strategy: small batches (nearly all) decompress here; one
                # that inflates past ``inline`` stops there (every codec
                # checks the bound as it goes) and is opened pending, for
                # the caller to decompress where it blocks nothing.
                records = log_format.decompress(codec, mv[start:bend], base_offset, [inline])
            except CompressionError:
                sink.batches.append(batch)
                sink.opened = OpenBatch(batch, b"", (codec, bytes(mv[start:bend]),
                                                     sink.budget[0]))
                return base_offset + batch.last_offset_delta + 1
            sink.budget[0] -= len(records)
        else:
            # One budget for every compressed batch of the answer (and the
            # old wrappers among them): a per-call cap would let many
            # batches, each under it, decompress to any size together.
            records = log_format.decompress(codec, mv[start:bend], base_offset, sink.budget)
        if opening:
            # Opened, not decoded: the caller decodes it a slice at a time.
            _check_count(batch, len(records))
            sink.batches.append(batch)
            sink.opened = OpenBatch(batch, records)
            return base_offset + batch.last_offset_delta + 1
        _read_records(sink, records, 0, len(records), batch)
    elif sink.opening and not batch.attributes & _CONTROL_BIT:
        try:
            _read_records(sink, data, start, bend, batch)
        except ProtocolError:
            # A bad record: the batch is opened instead, so that the caller
            # decodes the records before it (and hands them out) and meets
            # the error at the bad one, as in a compressed batch.
            del sink.records[before:]
            del sink.headers[before:]
            sink.batches.append(batch)
            sink.opened = OpenBatch(batch, data[start:bend])
            return base_offset + batch.last_offset_delta + 1
    else:
        _read_records(sink, data, start, bend, batch)
    sink.batches.append(batch)
    added = len(sink.records) - before
    if added:
        sink.timestamp_types.extend([batch.timestamp_type] * added)
    return base_offset + batch.last_offset_delta + 1


def _add_marker(sink: _Sink, batch: BatchHeader, first: Record) -> None:
    """Record the marker of a control batch from its first record's key."""
    offset, key = first.offset, first.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise corrupt("control record without a version and type key", offset)
    _, control_type = _CONTROL_KEY.unpack_from(key)
    marker = ControlMarker(offset, batch.producer_id, batch.producer_epoch, control_type)
    sink.markers.append(marker)
    if sink.aborted is not None:
        sink.aborted.ended(marker)


def _decode_legacy(sink: _Sink, data: bytes, pos: int, bend: int, magic: int) -> Optional[int]:
    """Decode one magic-0 or magic-1 entry into ``sink``; returns its next offset."""
    legacy = decode_within(
        data[pos:bend], sink.topic, sink.partition, sink.min_offset, sink.check, sink.budget
    )
    count = len(legacy.records)
    sink.records.extend(legacy.records)
    sink.headers.extend([_NO_HEADERS] * count)
    timestamp_type = None if magic == 0 else int(bool(data[pos + 17] & _TIMESTAMP_TYPE_BIT))
    sink.timestamp_types.extend([timestamp_type] * count)
    return legacy.next_offset


@parameters_of(decode_arguments)
def decode_record_batches(*args: Any, **kwargs: Any) -> BatchDecodeResult:
    """Decode the record batches of a fetch response partition (magic 2, and 0/1 entries).

    Control batches are skipped (their markers are in
    :attr:`BatchDecodeResult.markers`); records of transactional batches are
    returned whatever their transaction's outcome (``read_uncommitted``;
    :func:`decode_committed` skips the aborted ones, from the Fetch
    response's aborted transactions).
    A partial trailing batch (the broker cuts at ``max_bytes``) is dropped.

    Args:
        buf: the records bytes. ``bytes`` is read in place; a ``bytearray``
            or ``memoryview`` is copied once into ``bytes``.
        topic: stored in every :class:`~kiel.structs.Record`.
        partition: stored in every :class:`~kiel.structs.Record`.
        min_offset: drop records with an offset below this (the fetch offset:
            a batch can start before it).
        check_crcs: verify each batch's CRC-32C (and each old message's CRC32).
        max_decoded: the most bytes all compressed batches of ``buf`` (and
            the old compressed wrappers among them) may decompress to, together.
        open_compressed: stop after the first compressed data batch and
            return it decompressed but not decoded
            (:attr:`BatchDecodeResult.opened`; ``valid_bytes`` and ``batches``
            then include it, ``next_offset`` and ``timestamp_types`` do not),
            for :func:`decode_batch_slice` to decode a slice at a time, as
            :func:`kiel.protocol.messages.decode_message_set` opens wrappers.
            An uncompressed batch with a bad record is opened the same way
            (not raised), so the records before the bad one come out first.
            Control batches and old (magic 0/1) entries decode as usual.

    Returns:
        a :class:`BatchDecodeResult`.

    Raises:
        CorruptMessageError: a CRC mismatch, inconsistent framing, or record
            offsets that repeat, go backwards or pass the batch's last
            offset delta (the error's ``offset``: where the good records end).
        UnsupportedVersionError: a magic byte above 2.
        CompressionError: a compressed batch does not decompress, or the
            compressed batches decompress to more than ``max_decoded`` bytes.
        UnsupportedCodecError: an unknown compression codec.
        ProtocolError: a header key that is not UTF-8, a bad varint.
        ConfigError: ``buf`` is not bytes-like.
    """
    return _decode_batches(*decode_arguments(*args, **kwargs))


def decode_committed(
    buf: Buffer,
    topic: str = "",
    partition: int = -1,
    *,
    aborted: AbortedFilter,
    min_offset: Optional[int] = None,
    max_decoded: int = log_format.DEFAULT_MAX_DECODED,
) -> BatchDecodeResult:
    """:func:`decode_record_batches` for a read_committed Fetch answer: the
    batches of its aborted transactions skipped (see :class:`AbortedFilter`;
    their offsets still count in ``next_offset``).

    Args:
        buf: as for :func:`decode_record_batches`.
        topic: as for :func:`decode_record_batches`.
        partition: as for :func:`decode_record_batches`.
        aborted: the answer's filter (from its aborted-transactions list).
        min_offset: as for :func:`decode_record_batches`.
        max_decoded: as for :func:`decode_record_batches`.

    Returns:
        a :class:`BatchDecodeResult`.

    Raises:
        as :func:`decode_record_batches`.
    """
    return _decode_batches(buf, topic, partition, min_offset, True, max_decoded, False,
                           None, aborted)


def open_record_batches(
    buf: Buffer,
    topic: str = "",
    partition: int = -1,
    *,
    min_offset: Optional[int] = None,
    max_decoded: int = log_format.DEFAULT_MAX_DECODED,
    inline_decoded: int = 1024 * 1024,
    aborted: Optional[AbortedFilter] = None,
) -> BatchDecodeResult:
    """:func:`decode_record_batches` with ``open_compressed``, for a caller
    that must not stall: a compressed batch is decompressed here only if it
    inflates to at most ``inline_decoded`` bytes; a larger one is opened
    *pending* (:attr:`OpenBatch.pending`), for the caller to
    :meth:`~OpenBatch.decompress` elsewhere (another thread) and hand to
    :meth:`~OpenBatch.inflated` before :func:`decode_batch_slice`.

    Args:
        buf: as for :func:`decode_record_batches`.
        topic: as for :func:`decode_record_batches`.
        partition: as for :func:`decode_record_batches`.
        min_offset: as for :func:`decode_record_batches`.
        max_decoded: as for :func:`decode_record_batches` (a pending batch
            may inflate to what is left of it).
        inline_decoded: the most bytes one batch is decompressed to here
            (work that stops at that bound: about a millisecond per MiB).
        aborted: read_committed: the answer's :class:`AbortedFilter`, kept
            by the caller across the calls that decode one answer. The
            batches of aborted transactions are skipped (their offsets
            still count in ``next_offset``). ``None``: every batch is read.

    Returns:
        a :class:`BatchDecodeResult`.

    Raises:
        as :func:`decode_record_batches`; a pending batch's decompression
        errors come from :meth:`OpenBatch.decompress`.
    """
    return _decode_batches(buf, topic, partition, min_offset, True, max_decoded, True,
                           inline_decoded, aborted)


def _decode_batches(
    buf: Buffer, topic: str, partition: int, min_offset: Optional[int], check_crcs: bool,
    max_decoded: int, opening: bool, inline: Optional[int] = None,
    aborted: Optional[AbortedFilter] = None,
) -> BatchDecodeResult:
    data = log_format.as_bytes(buf, "record batches")
    sink = _Sink(topic, partition, _NO_MIN_OFFSET if min_offset is None else min_offset,
                 bool(check_crcs), max_decoded, inline)
    sink.opening = opening
    sink.aborted = aborted
    mv = memoryview(data)
    end = len(data)
    pos = 0
    next_offset: Optional[int] = None
    needed: Optional[int] = None
    while end - pos >= _LOG_OVERHEAD:
        base_offset, length = _OFFSET_LENGTH.unpack_from(data, pos)
        if length < _MIN_LEGACY_SIZE:
            raise corrupt(f"batch length {length} is below the minimum", base_offset)
        bend = pos + _LOG_OVERHEAD + length
        if bend > end:
            needed = _LOG_OVERHEAD + length
            break
        entry_next = _decode_entry(sink, data, mv, pos, bend, next_offset)
        pos = bend
        if sink.opened is not None:
            break  # the records are the caller's to decode
        next_offset = entry_next
    truncated = pos < end and sink.opened is None
    too_large = truncated and pos == 0
    return BatchDecodeResult(
        sink.records, sink.headers, sink.timestamp_types, sink.batches, sink.markers,
        next_offset, pos, truncated, too_large, needed if too_large else None, sink.opened,
    )


def _decode_entry(
    sink: _Sink, data: bytes, mv: memoryview, pos: int, bend: int, next_offset: Optional[int]
) -> Optional[int]:
    """Decode the entry ``data[pos:bend]``, a v2 batch or an old message,
    into ``sink``; returns the offset after it (``next_offset`` when an old
    entry says none).

    Raises:
        CorruptMessageError: a v2 batch shorter than its header.
        UnsupportedVersionError: a magic byte above 2.
    """
    magic = data[pos + 16]
    if magic < 2:
        return _decode_legacy(sink, data, pos, bend, magic) or next_offset
    base_offset, length = _OFFSET_LENGTH.unpack_from(data, pos)
    if magic > 2:
        raise UnsupportedVersionError(
            f"record batch magic byte {magic} is not supported (kiel reads 0 to 2)",
            offset=base_offset,
        )
    if length < _MIN_BATCH_LENGTH:
        raise corrupt(f"batch length {length} is below the minimum", base_offset)
    return _decode_batch(sink, data, mv, pos, bend)


def decode_batch_slice(
    batch: "OpenBatch",
    position: int,
    index: int,
    max_bytes: int,
    topic: str = "",
    partition: int = -1,
    *,
    min_offset: Optional[int] = None,
) -> BatchSlice:
    """Decode the records of an opened batch from the ``index``-th (at byte
    ``position`` of its records): about ``max_bytes`` of them, at least one.

    Args:
        batch: :attr:`BatchDecodeResult.opened`.
        position: where the ``index``-th record starts (0 for the first).
        index: how many records come before it.
        max_bytes: stop after the record that starts before ``position + max_bytes``.
        topic: stored in every :class:`~kiel.structs.Record`.
        partition: stored in every :class:`~kiel.structs.Record`.
        min_offset: drop records with an offset below this.

    Returns:
        a :class:`BatchSlice`; once every record was read its ``next_offset``
        is the batch's (its last offset delta's, past records compacted away).

    Raises:
        CorruptMessageError: a record's framing is inconsistent, its offset
            does not follow the one before it, or the records do not fill
            the batch as its count says.
        ProtocolError: a header key that is not UTF-8, a bad varint.
    """
    header, data = batch.header, batch.data
    end = len(data)
    count = header.record_count
    if index >= count or position >= end:
        # Strategy: a count the records do not match is raised by the call
        # after the last record read, so the records before it come out.
        _check_end(header, index, position, end)
        return BatchSlice([], position, index, True, header.last_offset + 1)
    sink = _Sink(topic, partition, _NO_MIN_OFFSET if min_offset is None else min_offset, True)
    resume_index, previous = batch._resume
    if resume_index != index:
        previous = _delta_before(batch, position, index)
    p, read, last = _read_some(
        sink, data, position, end, header, index, position + max(max_bytes, 1), previous
    )
    index = read
    if last is not None:
        batch._resume = (read, last - header.base_offset)
    if index >= count and p == end:
        return BatchSlice(sink.records, p, index, True, header.last_offset + 1)
    return BatchSlice(sink.records, p, index, False, None if last is None else last + 1)


def _delta_before(batch: OpenBatch, position: int, index: int) -> int:
    """The offset delta of the record before the ``index``-th (at byte
    ``position``), for a slice that does not start where the last one ended.

    Strategy: the rare path (the decoder always goes on where it stopped):
    the records before it are read again, their offsets only.

    Raises:
        CorruptMessageError: the records before it do not decode.
    """
    if not index:
        return -1
    probe = _Sink("", -1, _INT64_MAX, False)
    _p, _read, last = _read_some(probe, batch.data, 0, len(batch.data), batch.header, 0,
                                 position, -1)
    return -1 if last is None else last - batch.header.base_offset


# ---------------------------------------------------------------------------
# Encoding

#: Pre-encoded zig-zag varints of 0..8191 (every value up to two bytes).
_SMALL_VARINTS = [encode_varint(v) for v in range(8192)]
_NULL_LENGTH = encode_varint(-1)
_codecs: dict[tuple[int, Optional[int]], _compression.Codec] = {}


def _batch_codec(codec: int, compresslevel: Optional[int]) -> Optional[_compression.Codec]:
    """The codec object a batch compresses with (lz4 with the spec's header checksum)."""
    if not codec:
        return None
    cached = _codecs.get((codec, compresslevel))
    if cached is None:
        options: dict[str, Any] = {}
        if codec == CODEC_LZ4:
            options["magic"] = 1
        if compresslevel is not None and codec in (CODEC_GZIP, CODEC_ZSTD):
            options["level"] = compresslevel
        cached = _codecs[(codec, compresslevel)] = _compression.get_codec(codec, **options)
    return cached


def _as_bytes(data: Any, what: str) -> bytes:
    """Bytes-like ``data`` as ``bytes``.

    Raises:
        LocalProtocolError: it is not bytes-like.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise LocalProtocolError(
            f"record {what}s must be bytes (or None), not {type(data).__name__}"
        )
    return bytes(data)


def _length_prefixed(data: Any, what: str) -> bytes:
    """``data`` (bytes-like or None) with its varint length in front."""
    if data is None:
        return _NULL_LENGTH
    if type(data) is not bytes:
        data = _as_bytes(data, what)
    n = len(data)
    return (_SMALL_VARINTS[n] if n < 8192 else encode_varint(n)) + data


def _encode_headers(headers: Sequence[Header]) -> bytes:
    try:
        items = list(headers)
    except TypeError as e:
        raise LocalProtocolError(f"record headers must be (key, value) pairs: {e}") from e
    parts = [encode_varint(len(items))]
    for item in items:
        key, value = log_format.as_pair(item, "a record header")
        if not isinstance(key, str):
            raise LocalProtocolError(f"record header keys must be str, not {type(key).__name__}")
        try:
            parts.append(_length_prefixed(key.encode("utf-8"), "header key"))
        except UnicodeEncodeError as e:
            raise LocalProtocolError(
                f"record header key is not encodable as UTF-8: {e.reason}"
            ) from e
        parts.append(_length_prefixed(value, "header value"))
    return b"".join(parts)


class RecordBatchBuilder:
    """Build one record batch (magic 2), one record at a time, as a producer does.

    Records get offset deltas 0, 1, 2...; the first record's timestamp is
    the batch's base timestamp. :attr:`size` tells the uncompressed size of
    the batch so far, so a producer can stop appending at its batch size.

    Args:
        codec: :data:`CODEC_NONE`, :data:`CODEC_GZIP`, :data:`CODEC_SNAPPY`,
            :data:`CODEC_LZ4` or :data:`CODEC_ZSTD`.
        compresslevel: gzip or zstd level (``None`` for kiel.compression's default).
        base_offset: the batch's base offset (0 from a producer: the broker
            assigns offsets).
        partition_leader_epoch: -1 from a producer (the broker sets it).
        producer_id: -1 unless idempotent or transactional.
        producer_epoch: -1 unless idempotent or transactional.
        base_sequence: -1 unless idempotent or transactional.
        is_transactional: set the transactional attribute bit.
        timestamp_type: :data:`CREATE_TIME` (producers) or
            :data:`LOG_APPEND_TIME` (brokers).

    Raises:
        UnsupportedCodecError: an unknown codec.
        MissingDependencyError: the codec needs cramjam, which is not installed.
        ConfigError: a bad ``compresslevel`` or ``timestamp_type``.
    """

    def __init__(
        self,
        codec: int = CODEC_NONE,
        *,
        compresslevel: Optional[int] = None,
        base_offset: int = 0,
        partition_leader_epoch: int = -1,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        timestamp_type: int = CREATE_TIME,
    ) -> None:
        if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ConfigError(
                f"timestamp_type must be CREATE_TIME or LOG_APPEND_TIME, not {timestamp_type!r}"
            )
        self._codec = _batch_codec(codec, compresslevel)
        self._attributes = (
            (_TIMESTAMP_TYPE_BIT if timestamp_type else 0)
            | (_TRANSACTIONAL_BIT if is_transactional else 0)
        )
        self._fields = (base_offset, partition_leader_epoch, producer_id, producer_epoch,
                        base_sequence)
        # The records' bytes in pieces, joined once by build().
        self._parts: list[bytes] = []
        self._count = 0
        self._records_size = 0
        self._base_timestamp = 0
        self._max_timestamp = 0

    def __len__(self) -> int:
        return self._count

    @property
    def size(self) -> int:
        """Bytes of the batch built now, before compression (0 while empty)."""
        return HEADER_SIZE + self._records_size if self._count else 0

    def _timestamp_delta(self, timestamp: Optional[int]) -> int:
        """Check a record's timestamp (default: now), keep the batch's first
        and largest, and return its delta from the first.

        Raises:
            LocalProtocolError: not an int64.
        """
        if timestamp is None:
            timestamp = int(time.time() * 1000)
        elif type(timestamp) is not int or not _INT64_MIN <= timestamp <= _INT64_MAX:
            raise LocalProtocolError(f"a record timestamp must be an int64, not {timestamp!r}")
        if not self._count:
            self._base_timestamp = self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return timestamp - self._base_timestamp

    def append(
        self,
        key: Optional[bytes],
        value: Optional[bytes],
        *,
        timestamp: Optional[int] = None,
        headers: Sequence[Header] = (),
    ) -> int:
        """Add one record.

        Args:
            key: bytes-like or ``None``.
            value: bytes-like or ``None``.
            timestamp: epoch milliseconds (default: now).
            headers: ``(key, value)`` pairs: ``str`` keys, bytes-like or
                ``None`` values.

        Returns:
            the bytes the record adds to the batch.

        Raises:
            LocalProtocolError: a key, value, header or timestamp the wire cannot carry.
        """
        index = self._count
        delta = self._timestamp_delta(timestamp)
        body = b"".join((
            b"\x00",
            _SMALL_VARINTS[delta] if 0 <= delta < 8192 else encode_varint(delta),
            _SMALL_VARINTS[index] if index < 8192 else encode_varint(index),
            _length_prefixed(key, "key"),
            _length_prefixed(value, "value"),
            _encode_headers(headers) if headers else b"\x00",
        ))
        n = len(body)
        record = (_SMALL_VARINTS[n] if n < 8192 else encode_varint(n)) + body
        self._parts.append(record)
        self._count = index + 1
        self._records_size += len(record)
        return len(record)

    def extend(
        self,
        records: Iterable[tuple[Optional[bytes], Optional[bytes]]],
        *,
        timestamp: Optional[int] = None,
    ) -> int:
        """Add ``(key, value)`` pairs without headers, all with one timestamp:
        what :meth:`append` does for each, in fewer steps (a producer's
        batch of plain records).

        Args:
            records: ``(key, value)`` pairs, each bytes-like or ``None``.
            timestamp: epoch milliseconds (default: now).

        Returns:
            the bytes the records add to the batch.

        Raises:
            LocalProtocolError: a key, value or timestamp the wire cannot
                carry, or an item that is not a pair (the records before it
                are added).
        """
        index = self._count
        delta = self._timestamp_delta(timestamp)
        # Attributes, then the timestamp delta: the same for every record.
        head = b"\x00" + (_SMALL_VARINTS[delta] if 0 <= delta < 8192 else encode_varint(delta))
        fixed = len(head) + 1  # and the header count, 0
        small, null, push = _SMALL_VARINTS, _NULL_LENGTH, self._parts.extend
        added = 0
        # Strategy: a record is pushed as its pieces (the value is copied
        # once, when build() joins them all) and its length is summed from
        # theirs, not measured on bytes made for the purpose.
        try:
            for key, value in records:
                kp = null if key is None else _length_prefixed(key, "key")
                if value is None:
                    vh, value = null, b""
                else:
                    if type(value) is not bytes:
                        value = _as_bytes(value, "value")
                    n = len(value)
                    vh = small[n] if n < 8192 else encode_varint(n)
                od = small[index] if index < 8192 else encode_varint(index)
                body = fixed + len(od) + len(kp) + len(vh) + len(value)
                lh = small[body] if body < 8192 else encode_varint(body)
                push((lh, head, od, kp, vh, value, b"\x00"))
                added += len(lh) + body
                index += 1
        except (TypeError, ValueError) as e:
            raise LocalProtocolError(f"records must be (key, value) pairs: {e}") from e
        finally:
            self._count = index
            self._records_size += added
        return added

    def extend_columns(
        self,
        keys: Optional[Sequence[Optional[bytes]]],
        values: Sequence[Optional[bytes]],
        *,
        timestamp: Optional[int] = None,
    ) -> int:
        """Add records given as columns: what :meth:`extend` does with
        ``zip(keys, values)`` (``keys`` ``None``: every key ``None``).

        Records whose values are ``bytes`` of one length, and whose keys
        are all ``None`` or all ``bytes`` of one length (a producer's
        batch, often), are pushed as a few pieces each without a
        Python-level step per record; the others go through :meth:`extend`.

        Args:
            keys: the records' keys, as many as values, or ``None``.
            values: the records' values.
            timestamp: epoch milliseconds (default: now).

        Returns:
            the bytes the records add to the batch.

        Raises:
            LocalProtocolError: as :meth:`extend`, or keys and values
                differ in length (nothing added).
        """
        n = len(values)
        if keys is not None and len(keys) != n:
            raise LocalProtocolError(f"{len(keys)} keys for {n} values")
        if keys is not None and set(map(type, keys)) == {type(None)}:
            keys = None
        index = self._count
        if (not n or index + n > len(_SMALL_VARINTS) or set(map(type, values)) != {bytes}
                or (keys is not None and set(map(type, keys)) != {bytes})):
            return self.extend(zip(repeat(None) if keys is None else keys, values),
                               timestamp=timestamp)
        # Checked above: bytes only.
        values_: Sequence[bytes] = values  # type: ignore[assignment]
        keys_: Optional[Sequence[bytes]] = keys  # type: ignore[assignment]
        value_lengths = set(map(len, values_))
        key_lengths = {-1} if keys_ is None else set(map(len, keys_))
        if len(value_lengths) != 1 or len(key_lengths) != 1:
            return self.extend(zip(repeat(None) if keys is None else keys, values),
                               timestamp=timestamp)
        # Strategy: records of one shape differ only in their offset delta
        # and their key and value: each record is pushed as the constant
        # pieces around those (the last byte of a record, its header count,
        # joined to the next one's length and head), and its length is
        # known from the shape: a C-level pass over the lists, not a
        # Python-level step per record.
        delta = self._timestamp_delta(timestamp)
        head = b"\x00" + (_SMALL_VARINTS[delta] if 0 <= delta < 8192 else encode_varint(delta))
        length = value_lengths.pop()
        key_length = key_lengths.pop()
        value_head = encode_varint(length)
        key_head = encode_varint(key_length)
        # The record after its offset delta: the key, the value, no header.
        rest = len(key_head) + max(key_length, 0) + len(value_head) + length + 1
        parts = self._parts
        added = 0
        start = 0
        # Offset deltas of 1 byte below 64, of 2 from there to 8191.
        for end in (64 - index, n):
            end = min(max(end, start), n)
            if end == start:
                continue
            width = len(_SMALL_VARINTS[index + start])
            body = len(head) + width + rest
            front = encode_varint(body) + head
            offsets = _SMALL_VARINTS[index + start:index + end]
            if start == 0:
                # The first record: no header count of a record before it.
                parts.append(front)
                parts.append(offsets[0])
                if keys_ is None:
                    parts.append(_NULL_LENGTH + value_head)
                else:
                    parts += (key_head, keys_[0], value_head)
                parts.append(values_[0])
                first = 1
            else:
                first = 0
            joined = b"\x00" + front
            segment_keys = None if keys_ is None else keys_[start + first:end]
            segment_values = values_[start + first:end]
            if keys is None:
                parts += chain.from_iterable(zip(
                    repeat(joined), offsets[first:], repeat(_NULL_LENGTH + value_head),
                    segment_values))
            else:
                assert segment_keys is not None
                parts += chain.from_iterable(zip(
                    repeat(joined), offsets[first:], repeat(key_head), segment_keys,
                    repeat(value_head), segment_values))
            added += (end - start) * (len(front) - len(head) + body)
            start = end
        parts.append(b"\x00")
        self._count = index + n
        self._records_size += added
        return added

    def build(self) -> bytes:
        """The batch's bytes (empty if no record was appended).

        The records are compressed with the builder's codec unless that does
        not make them smaller (then the batch says codec 0, as kafka-python's
        and aiokafka's builders do).

        Raises:
            LocalProtocolError: a header field does not fit its width.
            CompressionError: the codec failed.
        """
        if not self._count:
            return b""
        records = b"".join(self._parts)
        attributes = self._attributes
        if self._codec is not None:
            packed = self._codec.compress(records)
            if len(packed) < len(records):
                records = packed
                attributes |= self._codec.codec_id
        base_offset, epoch, producer_id, producer_epoch, base_sequence = self._fields
        count = self._count
        try:
            tail = _TAIL.pack(attributes, count - 1, self._base_timestamp, self._max_timestamp,
                              producer_id, producer_epoch, base_sequence, count)
            head = _HEAD.pack(base_offset, HEADER_SIZE - _LOG_OVERHEAD + len(records), epoch, 2,
                              crc32c(records, crc32c(tail)))
        except struct.error as e:
            raise LocalProtocolError(f"a record batch header field does not fit: {e}") from e
        return b"".join((head, tail, records))


def encode_record_batch(
    records: Iterable[Union[tuple[Optional[bytes], Optional[bytes]], Record]],
    codec: int = CODEC_NONE,
    *,
    timestamp: Optional[int] = None,
    compresslevel: Optional[int] = None,
) -> bytes:
    """Encode ``(key, value)`` pairs (or :class:`~kiel.structs.Record`\\ s) as one batch.

    Args:
        records: the records; a :class:`~kiel.structs.Record` with a
            ``timestamp`` keeps it.
        codec: the compression codec id.
        timestamp: epoch milliseconds for records without one (default: now).
        compresslevel: gzip or zstd level.

    Returns:
        the batch bytes (empty for no records).

    Raises:
        LocalProtocolError: a key or value is not bytes-like, or a pair is not a pair.
        UnsupportedCodecError: an unknown codec.
        CompressionError: the codec failed.
    """
    builder = RecordBatchBuilder(codec, compresslevel=compresslevel)
    now = int(time.time() * 1000) if timestamp is None else timestamp
    append = builder.append
    for item in records:
        if isinstance(item, Record):
            append(item.key, item.value,
                   timestamp=now if item.timestamp is None else item.timestamp)
            continue
        key, value = log_format.as_pair(item, "a record (or a Record)")
        append(key, value, timestamp=now)
    return builder.build()
