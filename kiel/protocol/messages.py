"""The legacy Kafka message set: magic 0 (Kafka 0.8) and magic 1 (0.10, decode only).

Wire grammar (Kafka protocol guide, "Message sets")::

    MessageSet => [Offset MessageSize Message]     # no count: fills the given bytes
      Offset => int64
      MessageSize => int32
    Message => Crc MagicByte Attributes [Timestamp] Key Value
      Crc => int32          # CRC32 of MagicByte .. end of Value
      MagicByte => int8     # 0, or 1 from Kafka 0.10 (adds Timestamp)
      Attributes => int8    # bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4);
                            # bit 3 timestamp type (magic 1: 1 = LogAppendTime)
      Timestamp => int64    # magic 1 only, epoch milliseconds
      Key => bytes          # int32 length, -1 for null
      Value => bytes        # int32 length, -1 for null

A compressed message (a "wrapper") carries a whole message set, compressed, as
its value. In magic 0 the inner messages carry the absolute offsets the broker
assigned; in magic 1 they carry relative offsets 0..n-1 and the wrapper carries
the absolute offset of the last one.

Encoding goes through one :class:`MessageSetBuilder` (magic 0, as a producer
writes): the producer's batches, :func:`encode_message_set` and the embedded
broker's :func:`assign_offsets` all build with it.

Sans-I/O: bytes in, objects out; stdlib plus :mod:`kiel.compression`. Every
decoding failure is a :class:`kiel.exc.ProtocolError` subclass, never
``struct.error``, ``IndexError`` or a huge allocation: every length is checked
against the buffer before anything is sliced.
"""
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import Any, NamedTuple, Optional, Union

import kiel.compression as _compression
from kiel._signature import parameters_of
from kiel.exc import (
    CompressionError,
    ConfigError,
    CorruptMessageError,
    LocalProtocolError,
    ProtocolError,
    UnsupportedVersionError,
)
from kiel.protocol import log_format
from kiel.protocol.log_format import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    LOG_OVERHEAD,
    Buffer,
    corrupt,
    decode_arguments,
)
from kiel.structs import Record

__all__ = [
    "CODEC_NONE",
    "CODEC_GZIP",
    "CODEC_SNAPPY",
    "CODEC_LZ4",
    "LOG_OVERHEAD",
    "MAX_NESTING",
    "MESSAGE_OVERHEAD",
    "MESSAGE_V0_HEADER",
    "MessageSetBuilder",
    "Record",
    "DecodeResult",
    "MessageBoundary",
    "OpenWrapper",
    "open_message_set",
    "WrapperSlice",
    "decode_message_set",
    "decode_wrapper_slice",
    "encode_message_set",
    "assign_offsets",
    "iter_message_boundaries",
    "find_position",
]

_CODEC_MASK = log_format.CODEC_MASK
_TIMESTAMP_TYPE_MASK = log_format.TIMESTAMP_TYPE_BIT

#: How many compressed wrappers may be nested inside one another (Kafka itself
#: writes one level; more is tolerated up to this bound, then it is corrupt).
MAX_NESTING = 4

_LOG_OVERHEAD = LOG_OVERHEAD  # Offset int64 + MessageSize int32
_CRC_START = 16  # the CRC covers from the magic byte: offset + size + crc
_MIN_SIZE = {0: 14, 1: 22}  # MessageSize of an empty message: crc .. value length
_MIN_V0 = 14
_NO_MIN_OFFSET = log_format.NO_MIN_OFFSET

_OFFSET_SIZE = log_format.OFFSET_SIZE
_CRC_MAGIC_ATTRS = struct.Struct(">Ibb")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")

_crc32 = zlib.crc32


# Strategy: building a NamedTuple through its generated ``__new__`` runs a
# Python-level function per record; ``tuple.__new__(Record, fields)`` through
# a C-level partial does the same thing without a Python frame.
_new_record = partial(tuple.__new__, Record)


class OpenWrapper:
    """A compressed message, decompressed, whose inner messages are still to
    decode (see :func:`decode_message_set`'s ``open_compressed`` and
    :func:`decode_wrapper_slice`), or still compressed (:attr:`pending`,
    see :func:`open_message_set`).

    Only what the wire says: the caller keeps where in :attr:`data` decoding
    goes on.
    """

    __slots__ = ("offset", "data", "magic", "delta", "timestamp", "budget", "_packed")

    def __init__(self, offset: int, data: bytes, magic: int, delta: int,
                 timestamp: Optional[int], budget: list[int],
                 packed: Optional[tuple[int, bytes, int]] = None) -> None:
        #: The wrapper's own offset (the last inner message's, as a broker writes it).
        self.offset = offset
        #: The inner message set, decompressed (empty while :attr:`pending`).
        self.data = data
        #: The wrapper's magic byte: every inner message has it too.
        self.magic = magic
        #: Added to every inner offset (a magic-1 wrapper's base; 0 for magic 0).
        self.delta = delta
        #: Every inner message's timestamp (a magic-1 wrapper with
        #: log-append time), or ``None``.
        self.timestamp = timestamp
        #: Decompressed bytes left for the wrappers nested in this one (one
        #: cell, decremented as they decompress).
        self.budget = budget
        # (codec, compressed value, the most bytes it may inflate to) while
        # the caller has yet to decompress it.
        self._packed = packed

    @property
    def pending(self) -> bool:
        """Its inner messages are still compressed: :meth:`decompress` them
        (in any thread), then hand the result to :meth:`inflated`."""
        return self._packed is not None

    def decompress(self) -> tuple[bytes, int]:
        """The inner messages of a :attr:`pending` wrapper, decompressed, and
        the base its inner offsets get (a pure function of the wrapper's
        bytes: safe to run in another thread).

        Raises:
            CompressionError: they do not decompress, or to more bytes than
                the decode's ``max_decoded`` had left.
            CorruptMessageError: the codec library failed on its own.
            ConfigError: the wrapper is not pending.
        """
        if self._packed is None:
            raise ConfigError("the wrapper is not pending: its messages are decompressed")
        codec, packed, cap = self._packed
        inner = log_format.decompress(codec, packed, self.offset, [cap])
        return inner, _inner_base(inner, self.offset) if self.magic == 1 else 0

    def inflated(self, result: tuple[bytes, int]) -> None:
        """Take what :meth:`decompress` returned (its bytes count against the
        wrapper's budget)."""
        self.data, self.delta = result
        self.budget[0] -= len(self.data)
        self._packed = None

    def __repr__(self) -> str:
        state = "pending" if self._packed is not None else f"{len(self.data)} bytes"
        return f"OpenWrapper(offset={self.offset}, magic {self.magic}, {state})"


class DecodeResult(NamedTuple):
    """What :func:`decode_message_set` found in a buffer.

    A fetch response is cut at ``max_bytes``, so a partial trailing message is
    normal: it is dropped and ``truncated`` is set. If not even the *first*
    message fits, ``first_message_too_large`` is set: the consumer must grow its
    fetch size to at least ``first_message_size`` (or it would fetch the same
    bytes forever).
    """

    #: Decoded records in offset order, wrappers unwrapped, below ``min_offset`` dropped.
    records: list[Record]
    #: Offset after the last complete message (dropped ones included); ``None`` if none.
    next_offset: Optional[int]
    #: Bytes taken by complete messages (where a partial trailing message starts).
    valid_bytes: int
    #: A partial trailing message was dropped.
    truncated: bool
    #: The buffer is not empty but holds no complete message.
    first_message_too_large: bool
    #: Bytes the first message needs (offset and size prefix included), when
    #: ``first_message_too_large`` and its 12-byte prefix arrived; else ``None``.
    first_message_size: Optional[int]
    #: With ``open_compressed``: the first top-level compressed message,
    #: decompressed but not decoded (decoding stopped after it); else ``None``.
    opened: Optional[OpenWrapper] = None


class MessageBoundary(NamedTuple):
    """Where one top-level message sits in a message set (see :func:`iter_message_boundaries`)."""

    offset: int
    start: int
    end: int


class WrapperSlice(NamedTuple):
    """What :func:`decode_wrapper_slice` decoded."""

    #: The records of the decoded inner messages, below ``min_offset`` dropped.
    records: list[Record]
    #: The offset of the last decoded inner message (``None``: none decoded).
    last_offset: Optional[int]
    #: Where the next inner message starts in :attr:`OpenWrapper.data`.
    position: int


# ---------------------------------------------------------------------------
# Decoding


def _crc_error(stored: int, computed: int, offset: int) -> CorruptMessageError:
    return CorruptMessageError(
        f"message CRC mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}", offset=offset
    )


#: Speculative header structs by key length (see ``_decode_into``).
_MAX_SPEC_KEY = 1024
_spec_cache: dict[int, tuple[Any, int]] = {}


def _spec(klen: int) -> tuple[Any, int]:
    """(unpack_from, size) of the one-shot magic-0 header for a key of ``klen`` bytes."""
    entry = _spec_cache.get(klen)
    if entry is None:
        # offset, size, crc, magic + attributes, key length, key, value length
        st = struct.Struct(f">qiIhi{max(klen, 0)}si")
        entry = _spec_cache[klen] = (st.unpack_from, st.size)
    return entry


class _Scope:
    """What one :func:`decode_message_set` call shares across nesting levels."""

    __slots__ = ("out", "topic", "partition", "check", "min_offset", "budget", "previous",
                 "opening", "opened", "klen_spec", "inline")

    def __init__(
        self, topic: str, partition: int, check: bool, min_offset: int, max_decoded: int
    ) -> None:
        self.out: list[Record] = []
        self.topic, self.partition = topic, partition
        self.check, self.min_offset = check, min_offset
        #: Decompressed bytes still allowed, one cell shared by every wrapper.
        self.budget = [max_decoded]
        #: The offset of the record handed out before ``out`` starts (for
        #: :func:`_check_nested_offsets` when a set is decoded a slice at a time).
        self.previous = -1
        #: Stop at the first top-level wrapper and open it (``open_compressed``).
        self.opening = False
        self.opened: Optional[OpenWrapper] = None
        #: With ``opening``: the most bytes a top-level wrapper is decompressed
        #: to here; a larger one is opened pending (``None``: no limit).
        self.inline: Optional[int] = None
        #: The key length the next run of plain messages is read with (see
        #: :func:`_decode_into`): the last one met, at every nesting level.
        self.klen_spec = -1


class _Level(NamedTuple):
    """One nesting level: the message set being read and how to read it."""

    data: bytes
    mv: memoryview
    depth: int
    #: Magic of the wrapper this set is inside; ``None`` at the top level.
    inner_magic: Optional[int]
    #: Added to every offset (a magic-1 wrapper's base).
    delta: int
    #: Timestamp of every message (a magic-1 wrapper with log-append time).
    ts_override: Optional[int]


def _decode_into(
    scope: _Scope, level: _Level, pos: int, end: int, stop: Optional[int] = None
) -> tuple[int, Optional[int], Optional[int]]:
    """Decode the messages of ``data[pos:end]`` into ``out`` (with ``stop``:
    those that start before it; the last may end past it).

    Returns ``(pos, last_offset, needed)``: ``pos`` is where decoding stopped
    (``end``, or the start of a partial trailing message at the top level),
    ``last_offset`` the offset of the last complete message (``None`` if none),
    ``needed`` the full size of the partial message if its prefix was readable.
    Inside a wrapper (``inner_magic`` set) a partial message is corrupt.
    """
    last: Optional[int] = None
    stop = end if stop is None else min(stop, end)
    # Strategy: runs of plain magic-0 messages with keys of one length go
    # through _decode_run (one frame, no call per message); the message that
    # ends a run (another key length, magic 1, a wrapper, a null value, a
    # partial message) goes through _decode_one, which says its key length.
    # A run is tried again after that message if the last run decoded any,
    # or if the message has the key length of the one before it: varying
    # key lengths and magic-1 messages then pay no call for runs that end
    # at once. The first run is a guess (the key length last met), so its
    # ending at once does not count.
    start = pos
    try_run = level.inner_magic != 1
    productive = True
    while pos < stop:
        if try_run:
            pos, run_last = _decode_run(scope, level, pos, end, stop)
            productive = run_last is not None or pos == start
            if run_last is not None:
                last = run_last
            if pos >= stop:
                break
        pos_after, one_last, klen = _decode_one(scope, level, pos, end)
        if pos_after < 0:
            return _partial(level, pos, last, -pos_after - 1)
        pos = pos_after
        if one_last is not None:
            last = one_last
        if scope.opened is not None:
            return pos, last, None  # a top-level wrapper, opened for the caller
        try_run = klen is not None and (productive or klen == scope.klen_spec)
        if klen is not None and klen <= _MAX_SPEC_KEY:
            scope.klen_spec = klen
    return pos, last, None


def _decode_run(
    scope: _Scope, level: _Level, pos: int, end: int, stop: int
) -> tuple[int, Optional[int]]:
    """Decode the plain magic-0 messages from ``pos`` whose key is
    ``scope.klen_spec`` bytes long (-1: null), up to the first that is not
    one or starts at ``stop``.

    Returns ``(pos, last_offset)``: where the first message it left starts,
    and the offset of the last one it decoded (``None``: none).
    """
    data = level.data
    mv = level.mv
    topic, partition = scope.topic, scope.partition
    check, min_offset = scope.check, scope.min_offset
    append = scope.out.append
    new = _new_record
    crc32 = _crc32
    klen_spec = scope.klen_spec
    unpack, hsize = _spec(klen_spec)
    nullkey = klen_spec < 0
    last: Optional[int] = None
    # Strategy: this loop is the consumer's hot path. One unpack_from per
    # message reads offset, size, crc, magic and attributes (as one int16:
    # zero for the plain magic-0 case), key length, the key itself (a bytes
    # copy) and the value length, with a struct compiled for the key length
    # *speculated* from the previous message (keys are usually null or of a
    # fixed size). Anything unusual (another key length, magic 1,
    # compression, a null value, a short or partial message) ends the run:
    # _decode_one validates everything and re-speculates. The value length
    # must agree with the message size and stay in the buffer.
    limit = min(end - hsize, stop - 1)
    while pos <= limit:
        offset, size, crc, magic_attrs, klen, key, vlen = unpack(data, pos)
        if klen != klen_spec or magic_attrs:
            break
        p = pos + hsize
        mend = p + vlen
        if vlen < 0 or mend - pos - 12 != size or mend > end:  # 12: _LOG_OVERHEAD
            break
        if check and crc32(mv[pos + 16 : mend]) != crc:  # 16: _CRC_START
            raise _crc_error(crc, crc32(mv[pos + 16 : mend]), offset)
        if nullkey:
            key = None
        last = offset
        if offset >= min_offset:
            append(new((topic, partition, offset, key, data[p:mend], None, None, ())))
        pos = mend
    return pos, last


def _partial(
    level: _Level, pos: int, last: Optional[int], needed: int
) -> tuple[int, Optional[int], Optional[int]]:
    """What :func:`_decode_into` returns for a partial message at ``pos``
    (``needed``: its full size, 0 if not even its prefix is there).

    Raises:
        CorruptMessageError: the partial message is inside a wrapper.
    """
    if level.inner_magic is not None:
        raise corrupt("message truncated inside a compressed message set", last)
    return pos, last, needed or None


def _decode_one(
    scope: _Scope, level: _Level, pos: int, end: int
) -> tuple[int, Optional[int], Optional[int]]:
    """Decode the one message at ``pos``, whatever it is, validating everything.

    Returns ``(end_of_message, last_offset, key_length_to_speculate)``; for a
    partial message ``(-(needed + 1), None, None)`` where ``needed`` is its full
    size, or 0 if not even the 12-byte prefix is there.
    """
    data = level.data
    if end - pos < _LOG_OVERHEAD:
        return -1, None, None
    offset, size = _OFFSET_SIZE.unpack_from(data, pos)
    mend = pos + _LOG_OVERHEAD + size
    if size < _MIN_V0 or mend > end:
        return _short(offset, size), None, None
    crc, magic, attrs = _CRC_MAGIC_ATTRS.unpack_from(data, pos + _LOG_OVERHEAD)
    # The CRC first: a Fetch v0 answer only ever holds magic 0 or 1 (newer
    # brokers convert down), so another magic byte is more likely a flipped
    # bit than a new format, and the CRC says which.
    if scope.check and _crc32(level.mv[pos + _CRC_START : mend]) != crc:
        raise _crc_error(crc, _crc32(level.mv[pos + _CRC_START : mend]), offset)
    timestamp = timestamp_type = None
    if magic == 0 and level.inner_magic != 1:
        kpos = pos + 18
    elif magic == 1 and size >= _MIN_SIZE[1] and level.inner_magic != 0:
        kpos = pos + 26
        # Inside a LogAppendTime wrapper the wrapper's time is every message's.
        ts_override = level.ts_override
        timestamp = _INT64.unpack_from(data, pos + 18)[0] if ts_override is None else ts_override
        timestamp_type = 1 if ts_override is not None or attrs & _TIMESTAMP_TYPE_MASK else 0
    else:
        raise _bad_magic(magic, size, level.inner_magic, offset)
    # Key: kpos + 4 <= mend holds by the minimum sizes checked above.
    (klen,) = _INT32.unpack_from(data, kpos)
    kpos += 4
    key = value = None
    if 0 <= klen <= mend - kpos - 4:
        key = data[kpos : kpos + klen]
        kpos += klen
    elif klen != -1:
        raise corrupt(f"key length {klen} does not fit message size {size}", offset)
    (vlen,) = _INT32.unpack_from(data, kpos)
    kpos += 4
    if vlen == mend - kpos:
        value = data[kpos:mend]
    elif vlen != -1 or kpos != mend:
        raise corrupt(f"value length {vlen} does not match message size {size}", offset)
    offset += level.delta
    if attrs & _CODEC_MASK:
        return mend, _unwrap(scope, level, offset, magic, attrs, timestamp, value), None
    if offset >= scope.min_offset:
        scope.out.append(_new_record(
            (scope.topic, scope.partition, offset, key, value, timestamp, timestamp_type, ())
        ))
    return mend, offset, (klen if magic == 0 else None)


def _short(offset: int, size: int) -> int:
    """:func:`_decode_one`'s answer for a message that does not fit the
    buffer: ``-(its full size + 1)``.

    Raises:
        CorruptMessageError: its size is below the smallest message's.
    """
    if size < _MIN_V0:
        raise corrupt(f"message size {size} is below the minimum of {_MIN_V0}", offset)
    return -(_LOG_OVERHEAD + size + 1)


def _bad_magic(magic: int, size: int, inner_magic: Optional[int], offset: int) -> ProtocolError:
    """The error for a message :func:`_decode_one` cannot read: a short
    magic-1 message, a magic byte it does not know, or a magic other than
    the wrapper's it is in."""
    if magic == 1 and size < _MIN_SIZE[1]:
        return corrupt(f"magic 1 message size {size} is below the minimum of 22", offset)
    if magic not in (0, 1):
        return UnsupportedVersionError(
            f"message magic byte {magic} is not supported (kiel reads 0 and 1)", offset=offset
        )
    return corrupt(f"magic {magic} message inside a magic {inner_magic} compressed message", offset)


def _unwrap(
    scope: _Scope, level: _Level, offset: int, magic: int, attrs: int,
    timestamp: Optional[int], value: Optional[bytes],
) -> Optional[int]:
    """Decompress the wrapper at ``offset`` (its ``value`` is a whole message
    set) and decode its inner messages into ``scope`` (or, at the top level
    with ``scope.opening``, open it for the caller).

    Returns:
        the offset of its last inner message (its own if it holds none;
        ``None`` when opened).

    Raises:
        CorruptMessageError: a null value, nesting past :data:`MAX_NESTING`,
            or bad inner messages.
        CompressionError: the value does not decompress within the budget.
    """
    if value is None:
        raise corrupt("compressed message has a null value", offset)
    depth = level.depth
    if depth >= MAX_NESTING:
        raise corrupt(f"compressed messages nested more than {MAX_NESTING} deep", offset)
    codec = attrs & _CODEC_MASK
    inner_ts = timestamp if magic == 1 and attrs & _TIMESTAMP_TYPE_MASK else None
    inline = scope.inline
    if scope.opening and not depth and inline is not None and inline < scope.budget[0]:
        try:
            # Strategy: as for record batches (open_record_batches), a
            # wrapper that inflates past ``inline`` stops there and is
            # opened pending, for the caller to decompress off its loop.
            inner = log_format.decompress(codec, value, offset, [inline])
        except CompressionError:
            scope.opened = OpenWrapper(offset, b"", magic, 0, inner_ts, scope.budget,
                                       (codec, bytes(value), scope.budget[0]))
            return None
        scope.budget[0] -= len(inner)
    else:
        inner = log_format.decompress(codec, value, offset, scope.budget)
    inner_delta = _inner_base(inner, offset) if magic == 1 else 0
    if scope.opening and not depth and inner:
        # Opened, not decoded: the caller decodes it a slice at a time.
        scope.opened = OpenWrapper(offset, inner, magic, inner_delta, inner_ts, scope.budget)
        return None
    inner_level = _Level(inner, memoryview(inner), depth + 1, magic, inner_delta, inner_ts)
    first_new = len(scope.out)
    _, inner_last, _ = _decode_into(scope, inner_level, 0, len(inner))
    if depth:
        _check_nested_offsets(scope.out, first_new, inner_last, offset, scope.previous)
    return inner_last if inner_last is not None else offset


def _inner_base(inner: bytes, offset: int) -> int:
    """What a magic-1 wrapper at ``offset`` adds to its inner (relative) offsets.

    Inner offsets are relative; the wrapper holds the last one's absolute
    offset. A wrapper a producer built (offset 0, not yet assigned by a
    broker) gives a negative base: the relative offsets are kept then (0
    is returned), as kafka-python and the Java client do.
    """
    bounds = list(iter_message_boundaries(inner))
    if bounds and offset - bounds[-1].offset >= 0:
        return offset - bounds[-1].offset
    return 0


def _check_nested_offsets(
    out: list[Record], first_new: int, inner_last: Optional[int], offset: int, before: int
) -> None:
    """Refuse a nested wrapper whose offsets are not the log's.

    Strategy: a broker numbers one level only (it writes no nested
    wrappers), so a producer's nested set keeps the producer's offsets.
    Handed out, they would move the position past messages never seen, or
    back over messages already handed out; a typed error instead. Checked
    for nested wrappers only, so what brokers write costs nothing.

    Raises:
        CorruptMessageError: an offset past the wrapper's own, or one that
            does not increase.
    """
    if inner_last is not None and inner_last > offset:
        raise corrupt(
            f"a compressed message nested in another holds offset {inner_last}, past its own "
            f"offset {offset}: nested wrappers' offsets are not the log's",
            offset,
        )
    previous = out[first_new - 1].offset if first_new else before
    for record in out[first_new:]:
        if record.offset <= previous:
            raise corrupt(
                f"offsets go backwards inside a nested compressed message ({previous} then "
                f"{record.offset}): nested wrappers' offsets are not the log's",
                offset,
            )
        previous = record.offset


@parameters_of(decode_arguments)
def decode_message_set(*args: Any, **kwargs: Any) -> DecodeResult:
    """Decode a message set (the ``MessageSet`` of a fetch response partition).

    Compressed messages are unwrapped (recursively, up to :data:`MAX_NESTING`)
    with absolute offsets for both magic 0 and magic 1. A partial trailing
    message (the broker cuts at ``max_bytes``) is dropped, see
    :class:`DecodeResult`.

    Args:
        buf: the message set bytes. ``bytes`` is read in place; a ``bytearray``
            or ``memoryview`` is copied once into ``bytes`` (keys and values
            are returned as ``bytes`` copies either way).
        topic: stored in every :class:`Record`.
        partition: stored in every :class:`Record`.
        min_offset: drop records with an offset below this (the fetch offset:
            a compressed wrapper can hold messages before it).
        check_crcs: verify each message's CRC32.
        max_decoded: the most bytes all compressed wrappers of ``buf`` may
            decompress to, together, at every nesting level.
        open_compressed: stop after the first top-level compressed message and
            return it decompressed but not decoded (:attr:`DecodeResult.opened`;
            ``valid_bytes`` then include it, ``next_offset`` does not), for
            :func:`decode_wrapper_slice` to decode a slice at a time.
            Strategy: a wrapper holds up to thousands of messages; decoded
            whole they all come to life at once, opened they come to life as
            the caller asks for them. Its bytes are checked against
            ``max_decoded`` before they are held, and the wrappers nested in
            it share what is left.

    Returns:
        a :class:`DecodeResult`.

    Raises:
        CorruptMessageError: a CRC mismatch (``offset`` in its context), or
            inconsistent framing (sizes, lengths, truncation inside a wrapper).
        UnsupportedVersionError: a magic byte other than 0 or 1.
        CompressionError: a compressed value does not decompress, or the
            wrappers decompress to more than ``max_decoded`` bytes.
        UnsupportedCodecError: an unknown compression codec.
        ConfigError: ``buf`` is not bytes-like.
    """
    buf, topic, partition, min_offset, check_crcs, max_decoded, opening = decode_arguments(
        *args, **kwargs
    )
    data = log_format.as_bytes(buf, "a message set")
    return _decode_top(data, topic, partition, min_offset, check_crcs, [max_decoded], opening)


def decode_within(
    data: bytes, topic: str, partition: int, min_offset: Optional[int], check_crcs: bool,
    budget: list[int],
) -> DecodeResult:
    """:func:`decode_message_set` of ``data`` (``bytes``) within ``budget[0]``
    decompressed bytes, decremented as wrappers decompress: a caller that
    decodes several sets (the old entries of a record-batch answer) shares
    one budget between them.

    Raises:
        as :func:`decode_message_set`.
    """
    return _decode_top(data, topic, partition, min_offset, check_crcs, budget, False)


def open_message_set(
    buf: Buffer,
    topic: str = "",
    partition: int = -1,
    *,
    min_offset: Optional[int] = None,
    max_decoded: int = log_format.DEFAULT_MAX_DECODED,
    inline_decoded: int = 1024 * 1024,
) -> DecodeResult:
    """:func:`decode_message_set` with ``open_compressed``, for a caller that
    must not stall: a top-level wrapper is decompressed here only if it
    inflates to at most ``inline_decoded`` bytes; a larger one is opened
    *pending* (:attr:`OpenWrapper.pending`), for the caller to
    :meth:`~OpenWrapper.decompress` elsewhere (another thread) and hand to
    :meth:`~OpenWrapper.inflated` before :func:`decode_wrapper_slice`.

    Args:
        buf: as for :func:`decode_message_set`.
        topic: as for :func:`decode_message_set`.
        partition: as for :func:`decode_message_set`.
        min_offset: as for :func:`decode_message_set`.
        max_decoded: as for :func:`decode_message_set` (a pending wrapper
            may inflate to what is left of it).
        inline_decoded: the most bytes one wrapper is decompressed to here.

    Returns:
        a :class:`DecodeResult`.

    Raises:
        as :func:`decode_message_set`; a pending wrapper's decompression
        errors come from :meth:`OpenWrapper.decompress`.
    """
    data = log_format.as_bytes(buf, "a message set")
    return _decode_top(data, topic, partition, min_offset, True, [max_decoded], True,
                       inline_decoded)


def _decode_top(
    data: bytes, topic: str, partition: int, min_offset: Optional[int], check_crcs: bool,
    budget: list[int], opening: bool, inline: Optional[int] = None,
) -> DecodeResult:
    end = len(data)
    scope = _Scope(
        topic, partition, bool(check_crcs),
        _NO_MIN_OFFSET if min_offset is None else min_offset, budget[0],
    )
    scope.budget = budget
    scope.opening = opening
    scope.inline = inline
    top = _Level(data, memoryview(data), 0, None, 0, None)
    pos, last, needed = _decode_into(scope, top, 0, end)
    records = scope.out
    truncated = pos < end and scope.opened is None
    too_large = truncated and pos == 0
    return DecodeResult(
        records,
        None if last is None else last + 1,
        pos,
        truncated,
        too_large,
        needed if too_large else None,
        scope.opened,
    )


def decode_wrapper_slice(
    wrapper: OpenWrapper,
    position: int,
    max_bytes: int,
    topic: str = "",
    partition: int = -1,
    *,
    min_offset: Optional[int] = None,
    check_crcs: bool = True,
    previous: int = -1,
) -> WrapperSlice:
    """Decode the inner messages of ``wrapper`` from byte ``position``: whole
    messages, about ``max_bytes`` of them (at least one).

    Offsets and timestamps are what :func:`decode_message_set` gives for
    the same messages (a magic-1 wrapper's relative offsets made absolute,
    its log-append time on every message); wrappers nested in it are
    decoded whole, as there.

    Args:
        wrapper: :attr:`DecodeResult.opened`.
        position: where an inner message starts (0, or a returned ``position``).
        max_bytes: stop after the message that reaches this many bytes.
        topic: stored in every :class:`Record`.
        partition: stored in every :class:`Record`.
        min_offset: drop records with an offset below this.
        check_crcs: verify each message's CRC32.
        previous: the offset of the record handed out before ``position``
            (nested wrappers' offsets must follow it).

    Returns:
        a :class:`WrapperSlice`; its ``position`` is ``len(wrapper.data)``
        once every inner message was decoded.

    Raises:
        CorruptMessageError: a bad inner message (to find the records of
            the inner messages before it, decode one at a time: ``max_bytes=1``).
        UnsupportedVersionError: an inner magic byte other than 0 or 1.
        CompressionError: a nested wrapper does not decompress, or past
            what is left of the wrapper's budget.
        UnsupportedCodecError: a nested wrapper's unknown codec.
    """
    data = wrapper.data
    size = len(data)
    scope = _Scope(
        topic, partition, bool(check_crcs),
        _NO_MIN_OFFSET if min_offset is None else min_offset, 0,
    )
    scope.budget = wrapper.budget
    scope.previous = previous
    level = _Level(data, memoryview(data), 1, wrapper.magic, wrapper.delta, wrapper.timestamp)
    # The slice ends after the message that crosses ``position + max_bytes``.
    end, last, _ = _decode_into(scope, level, position, size, position + max(max_bytes, 1))
    return WrapperSlice(scope.out, last, end)


# ---------------------------------------------------------------------------
# Boundaries (for the embedded broker)


def iter_message_boundaries(buf: Buffer, *, strict: bool = True) -> Iterator[MessageBoundary]:
    """Walk the top-level messages of a message set without decoding them.

    Wrappers are not opened (their offset is the wrapper's: in a set a broker
    wrote, the last inner offset). Neither CRCs nor magic bytes are checked.
    A broker serves a fetch at offset *o* from the ``start`` of the first
    message whose ``offset >= o``, and cuts ``max_bytes`` from there.

    Args:
        buf: a message set.
        strict: raise on a partial trailing message (a log holds whole
            messages); with ``False`` stop before it silently.

    Returns:
        an iterator of :class:`MessageBoundary` ``(offset, start, end)``.

    Raises:
        CorruptMessageError: a size below the minimum, or (``strict``) a
            partial trailing message.
    """
    end = len(buf)
    pos = 0
    unpack = _OFFSET_SIZE.unpack_from
    while pos < end:
        if end - pos < _LOG_OVERHEAD:
            if strict:
                raise corrupt(f"{end - pos} trailing bytes are not a message", None)
            return
        offset, size = unpack(buf, pos)
        if size < _MIN_V0:
            raise corrupt(f"message size {size} is below the minimum of {_MIN_V0}", offset)
        mend = pos + _LOG_OVERHEAD + size
        if mend > end:
            if strict:
                raise corrupt(
                    f"message of {_LOG_OVERHEAD + size} bytes truncated at {end - pos}", offset
                )
            return
        yield MessageBoundary(offset, pos, mend)
        pos = mend


def find_position(buf: Buffer, offset: int) -> Optional[int]:
    """Byte position where a fetch at ``offset`` starts (as Kafka's log search does).

    Args:
        buf: a message set with whole messages (a broker's log segment).
        offset: the fetch offset.

    Returns:
        the ``start`` of the first top-level message whose offset is at least
        ``offset``, or ``None`` if there is none.

    Raises:
        CorruptMessageError: ``buf`` is not a well-framed message set.
    """
    for bound in iter_message_boundaries(buf):
        if bound.offset >= offset:
            return bound.start
    return None


# ---------------------------------------------------------------------------
# Encoding: the one message-set builder

#: Bytes of a magic-0 message around its key and value: crc (4), magic (1),
#: attributes (1), key length (4), value length (4).
MESSAGE_V0_HEADER = 14
#: Bytes one magic-0 message adds to its key and value in a message set (26).
#: A broker's ``message.max.bytes`` counts them too.
MESSAGE_OVERHEAD = LOG_OVERHEAD + MESSAGE_V0_HEADER

_LOG_HEADER = struct.Struct(">qiI")  # offset, size, crc
_BODY_HEAD = struct.Struct(">bbi")  # magic, attributes, key length (the key follows)
_NULL_KEY_BODY_HEAD = struct.Struct(">bbii")  # magic, attributes, key length -1, value length
_NULL_KEY_MESSAGE = struct.Struct(">qiIbbii")  # _LOG_HEADER then _NULL_KEY_BODY_HEAD

#: CRC32 of a null-key message's bytes before its value, by value length
#: (lengths below this bound only, so the cache stays small).
_CRC_CACHE_LIMIT = 1 << 16
_null_key_crcs: dict[int, int] = {}

_TOO_LONG = "a message key or value is longer than an int32 length can say"


def _null_key_crc(vlen: int) -> int:
    """CRC32 of magic, attributes, key length -1 and value length ``vlen``."""
    crc = _crc32(_NULL_KEY_BODY_HEAD.pack(0, 0, -1, vlen))
    if vlen < _CRC_CACHE_LIMIT:
        _null_key_crcs[vlen] = crc
    return crc


def _check_bytes(item: Any, what: str) -> Optional[bytes]:
    if item is None or type(item) is bytes:
        return item
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item)
    raise LocalProtocolError(
        f"message {what}s must be bytes (or None), not {type(item).__name__}"
    )


def _as_pair(m: Any) -> tuple[Any, Any]:
    if isinstance(m, Record):
        return m.key, m.value
    return log_format.as_pair(m, "a message (or a Record)")


def _codec_for(codec: Union[int, _compression.Codec, None],
               compresslevel: Optional[int]) -> Optional[_compression.Codec]:
    """The compressor for a builder: ``None`` for no compression."""
    if codec is None or isinstance(codec, _compression.Codec):
        return None if codec is None or codec.codec_id == CODEC_NONE else codec
    if codec == CODEC_NONE:
        return None
    if compresslevel is not None and codec == CODEC_GZIP:
        return _compression.get_codec(codec, level=compresslevel)
    return _compression.get_codec(codec)


class MessageSetBuilder:
    """Builds one magic-0 message set, a message at a time.

    The only message encoder in kiel: the producer encodes each batch with
    one, :func:`encode_message_set` and the embedded broker use it too.
    :attr:`size` is the exact size of the uncompressed set so far: a message
    takes :data:`MESSAGE_OVERHEAD` bytes plus its key and value, so a batch
    can tell it is full before anything is encoded.

    Example::

        builder = MessageSetBuilder(CODEC_GZIP)
        builder.append(None, b"hello")
        builder.append(b"key", b"world")
        data = builder.build()  # one gzip wrapper holding both messages

    Args:
        codec: a codec id (:data:`CODEC_NONE`, :data:`CODEC_GZIP`,
            :data:`CODEC_SNAPPY`, :data:`CODEC_LZ4`) or a
            :class:`kiel.compression.Codec`. With compression,
            :meth:`build` returns one wrapper message (null key) whose value is
            the whole set, compressed once.
        compresslevel: gzip level for a codec given by id (``None``: the
            default of :mod:`kiel.compression`).
        base_offset: the offset field of the first message (then one more per
            message) and of the wrapper. A producer writes 0: the broker
            assigns the real offsets.

    Raises:
        UnsupportedCodecError: an unknown codec id.
        MissingDependencyError: snappy or lz4 without cramjam.
    """

    __slots__ = ("_parts", "_codec", "_base_offset", "_next_offset", "_size", "_counted")

    def __init__(
        self,
        codec: Union[int, _compression.Codec, None] = CODEC_NONE,
        *,
        compresslevel: Optional[int] = None,
        base_offset: int = 0,
    ) -> None:
        self._codec = _codec_for(codec, compresslevel)
        # Strategy: the encoded pieces (headers, keys, values) are kept as a
        # list and joined once by build(): cheaper than growing a bytearray
        # and copying it out, and the values are not copied until then.
        self._parts: list[bytes] = []
        self._base_offset = base_offset
        self._next_offset = base_offset
        self._size = 0  # bytes of the first _counted parts
        self._counted = 0

    def __len__(self) -> int:
        """How many messages were appended."""
        return self._next_offset - self._base_offset

    @property
    def size(self) -> int:
        """Bytes of the uncompressed set so far (the sum of what :meth:`append` returned)."""
        # Strategy: counted when asked, not per message: appending stays cheap
        # and the parts added since the last call are summed once.
        parts = self._parts
        if self._counted != len(parts):
            self._size += sum(map(len, parts[self._counted:]))
            self._counted = len(parts)
        return self._size

    def append(self, key: Optional[bytes], value: Optional[bytes], attributes: int = 0) -> int:
        """Encode one message at the end of the set.

        Args:
            key: the key (``bytes``-like) or ``None``.
            value: the value (``bytes``-like) or ``None`` for a null value.
            attributes: the attributes byte (the codec id of a wrapper
                message that holds a compressed set; 0 otherwise).

        Returns:
            the bytes the message takes in the set:
            ``MESSAGE_OVERHEAD + len(key) + len(value)`` (a null counts 0).

        Raises:
            LocalProtocolError: a key or value that is not bytes-like, or
                longer than an int32 length can say.
        """
        try:
            size = self._append_checked(self._next_offset, key, value, attributes)
        except struct.error as e:
            raise LocalProtocolError(_TOO_LONG) from e
        self._next_offset += 1
        return size

    def _append_checked(self, offset: int, key: Any, value: Any, attributes: int) -> int:
        """Encode any one message at ``offset``, validating key and value."""
        key = _check_bytes(key, "key")
        value = _check_bytes(value, "value")
        body = b"".join((
            _BODY_HEAD.pack(0, attributes, -1 if key is None else len(key)),
            key or b"",
            _INT32.pack(-1 if value is None else len(value)),
            value or b"",
        ))
        self._parts.append(_LOG_HEADER.pack(offset, len(body) + 4, _crc32(body)))
        self._parts.append(body)
        return LOG_OVERHEAD + 4 + len(body)

    def extend(self, messages: Iterable[Union[tuple[Any, Any], Record]]) -> None:
        """Append many messages: what :meth:`append` does for each, in one loop.

        The fast way to encode: a producer's batch is encoded with one call.

        Args:
            messages: ``(key, value)`` pairs or :class:`~kiel.structs.Record`
                objects.

        Raises:
            LocalProtocolError: an item that is not a pair or a Record, or a
                key or value :meth:`append` refuses; nothing is appended then.
        """
        if not isinstance(messages, (list, tuple)):
            messages = list(messages)
        start = len(self._parts)
        offset = self._next_offset
        try:
            try:
                self._extend_pairs(messages)
            except (TypeError, ValueError):
                # Not all plain pairs (Records, or bad items): start again
                # with every item as a pair.
                del self._parts[start:]
                self._next_offset = offset
                self._extend_pairs([_as_pair(m) for m in messages])
        except (LocalProtocolError, struct.error) as e:
            del self._parts[start:]
            self._next_offset = offset
            if isinstance(e, LocalProtocolError):
                raise
            raise LocalProtocolError(_TOO_LONG) from e

    def _extend_pairs(self, pairs: Sequence[Any]) -> None:
        parts = self._parts
        add = parts.append
        offset = self._next_offset
        head = _LOG_HEADER.pack
        body_head = _BODY_HEAD.pack
        null_key_message = _NULL_KEY_MESSAGE.pack
        i32 = _INT32.pack
        crc32 = _crc32
        crcs = _null_key_crcs
        # Strategy: the common pairs (a bytes value, a bytes key or none)
        # are encoded inline with no call per message: a null key with one
        # pack and one CRC over the value, seeded with the cached CRC of the
        # 10 bytes in front of it; a key with one concatenation and one CRC.
        # Anything else goes through the validating _append_checked.
        for key, value in pairs:
            if type(value) is bytes:
                if key is None:
                    vlen = len(value)
                    crc = crcs.get(vlen)
                    if crc is None:
                        crc = _null_key_crc(vlen)
                    add(null_key_message(
                        offset, MESSAGE_V0_HEADER + vlen, crc32(value, crc), 0, 0, -1, vlen
                    ))
                    add(value)
                    offset += 1
                    continue
                if type(key) is bytes:
                    body = body_head(0, 0, len(key)) + key + i32(len(value)) + value
                    add(head(offset, len(body) + 4, crc32(body)))
                    add(body)
                    offset += 1
                    continue
            self._append_checked(offset, key, value, 0)
            offset += 1
        self._next_offset = offset

    def build(self) -> bytes:
        """The message set: the messages as appended, or with a codec one
        wrapper message (null key, offset ``base_offset``) holding them
        compressed. Empty if nothing was appended.

        Raises:
            CompressionError: the codec failed.
        """
        data = b"".join(self._parts)
        if self._codec is None or not data:
            return data
        return _wrapper(self._codec, data, self._base_offset)


def _wrapper(codec: _compression.Codec, inner: Buffer, offset: int) -> bytes:
    """One wrapper message at ``offset`` whose value is the set ``inner``, compressed."""
    compressed = codec.compress(inner)
    builder = MessageSetBuilder(base_offset=offset)
    builder.append(None, compressed if type(compressed) is bytes else bytes(compressed),
                   codec.codec_id)
    return builder.build()


def encode_message_set(
    messages: Iterable[Union[tuple[Optional[bytes], Optional[bytes]], Record]],
    codec: int = CODEC_NONE,
    *,
    compresslevel: Optional[int] = None,
) -> bytes:
    """Encode messages as a magic-0 message set, as a producer sends it.

    Messages get offsets 0..n-1 (the broker assigns the real ones). With a
    codec, the set is compressed into the value of one wrapper message (magic 0,
    null key, offset 0) -- byte for byte what kafka-python's
    ``LegacyRecordBatchBuilder(magic=0)`` builds from the same input, except
    that a gzip stream's 10-byte header differs (kiel writes mtime 0, so its
    output is reproducible) and kiel's default gzip level is 6, not 9.
    A :class:`MessageSetBuilder` does the work.

    Args:
        messages: ``(key, value)`` pairs or :class:`Record` objects; keys and
            values are ``bytes``-like or ``None``.
        codec: :data:`CODEC_NONE`, :data:`CODEC_GZIP`, :data:`CODEC_SNAPPY` or
            :data:`CODEC_LZ4`.
        compresslevel: gzip level (``None`` for kiel.compression's default).

    Returns:
        the message set bytes (empty for no messages).

    Raises:
        LocalProtocolError: a key or value is not bytes-like or too long.
        UnsupportedCodecError: an unknown codec.
        CompressionError: the codec failed.
    """
    builder = MessageSetBuilder(codec, compresslevel=compresslevel)
    builder.extend(messages)
    return builder.build()


# ---------------------------------------------------------------------------
# Offset assignment (the embedded broker's append path)

_patch_offset = _INT64.pack_into


def _validate_for_append(data: bytes, mv: memoryview, bound: MessageBoundary) -> int:
    """Check one message as a 0.8.2 broker's append does; return its codec."""
    start, mend = bound.start, bound.end
    crc, magic, attrs = _CRC_MAGIC_ATTRS.unpack_from(data, start + _LOG_OVERHEAD)
    computed = _crc32(mv[start + _CRC_START : mend])
    if computed != crc:
        raise _crc_error(crc, computed, bound.offset)
    if magic != 0:
        raise UnsupportedVersionError(
            f"message magic byte {magic}: a 0.8.2 broker takes magic 0 only", offset=bound.offset
        )
    # Framing of key and value, so a bad one is refused now and not served later.
    kpos = start + 18
    (klen,) = _INT32.unpack_from(data, kpos)
    kpos += 4
    if klen >= 0:
        if klen > mend - kpos - 4:
            raise corrupt(f"key length {klen} does not fit the message", bound.offset)
        kpos += klen
    elif klen != -1:
        raise corrupt(f"key length {klen} is invalid", bound.offset)
    (vlen,) = _INT32.unpack_from(data, kpos)
    kpos += 4
    if not ((vlen == -1 and kpos == mend) or vlen == mend - kpos):
        raise corrupt(f"value length {vlen} does not match the message size", bound.offset)
    return attrs & _CODEC_MASK


def _wrapper_value(data: bytes, bound: MessageBoundary) -> bytes:
    # Magic 0, validated: key at start + 18.
    kpos = bound.start + 18
    (klen,) = _INT32.unpack_from(data, kpos)
    kpos += 4 + max(klen, 0)
    (vlen,) = _INT32.unpack_from(data, kpos)
    if vlen < 0:
        raise corrupt("compressed message has a null value", bound.offset)
    return data[kpos + 4 : bound.end]


def assign_offsets(
    buf: Buffer, base_offset: int, *, compresslevel: Optional[int] = None
) -> tuple[bytes, int]:
    """Validate a produced message set and give it log offsets, as Kafka 0.8.2 does.

    Every message must be magic 0 with a good CRC (inner messages of
    compressed wrappers too). Uncompressed sets get offsets ``base_offset``,
    ``base_offset + 1``, ... patched in place. If any message is compressed,
    the broker's 0.8.2 path is followed: every message is taken out of its
    wrapper, numbered, and the lot recompressed into one wrapper with the codec
    of the last compressed message; the wrapper's offset is the last inner one.
    A partial trailing message is trimmed, as the 0.8.2 broker does.

    Args:
        buf: the message set of a produce request.
        base_offset: the partition's next offset (log end offset).
        compresslevel: gzip level for recompression (``None`` for the default).

    Returns:
        ``(message_set, count)``: the bytes to append to the log and how many
        messages they hold (the next base offset is ``base_offset + count``).

    Raises:
        CorruptMessageError: a CRC mismatch or bad framing (a broker answers
            error code 2, InvalidMessage).
        UnsupportedVersionError: a magic byte other than 0.
        CompressionError: a compressed value does not decompress.
        UnsupportedCodecError: an unknown codec.
    """
    data = buf if type(buf) is bytes else bytes(buf)
    mv = memoryview(data)
    bounds = list(iter_message_boundaries(data, strict=False))
    codec = CODEC_NONE
    for bound in bounds:
        msg_codec = _validate_for_append(data, mv, bound)
        if msg_codec:
            codec = msg_codec
    if not bounds:
        return b"", 0
    if not codec:
        out = bytearray(mv[: bounds[-1].end])
        for i, bound in enumerate(bounds):
            _patch_offset(out, bound.start, base_offset + i)
        return bytes(out), len(bounds)

    # Crack every wrapper open (one level, as 0.8.2's deep iterator does) and
    # collect the inner messages' bytes; plain messages are taken as they are.
    pieces: list[bytes] = []
    for bound in bounds:
        msg_codec = data[bound.start + 17] & _CODEC_MASK
        if not msg_codec:
            pieces.append(data[bound.start : bound.end])
            continue
        inner = log_format.decompress(msg_codec, _wrapper_value(data, bound), bound.offset)
        inner_mv = memoryview(inner)
        for inner_bound in iter_message_boundaries(inner):
            _validate_for_append(inner, inner_mv, inner_bound)
            pieces.append(inner[inner_bound.start : inner_bound.end])
    if not pieces:
        return b"", 0
    inner_set = bytearray(b"".join(pieces))
    pos = 0
    for i, piece in enumerate(pieces):
        _patch_offset(inner_set, pos, base_offset + i)
        pos += len(piece)
    count = len(pieces)
    compressor = _codec_for(codec, compresslevel)
    assert compressor is not None  # codec is not CODEC_NONE here
    return _wrapper(compressor, inner_set, base_offset + count - 1), count
