"""Wire primitives of the Kafka protocol: fixed-width ints, varints, strings, bytes, arrays.

Each wire type is a small object with two symmetric methods:

* ``encode(value, out)`` appends the encoded bytes of ``value`` to the list
  ``out`` (the caller joins once at the end, so nested structures cost no
  intermediate copies);
* ``decode(buf, offset) -> (value, new_offset)`` reads from a ``memoryview``
  (or ``bytes``) in place.

Decoders never raise ``struct.error``, ``IndexError`` or
``UnicodeDecodeError``: running past the end raises
:class:`kiel.exc.TruncatedError`, bad text (or a varint longer than its type
allows) :class:`kiel.exc.ProtocolError`.

Variable-length integers (record batches v2, flexible API versions) are
little-endian base-128: seven bits per byte, the high bit set on every byte
but the last. ``VarInt`` and ``VarLong`` are signed through zig-zag encoding
(0, -1, 1, -2 ... become 0, 1, 2, 3 ...), so small negative numbers stay one
byte; ``UnsignedVarInt`` is not. The module-level functions
(:func:`encode_varint`, :func:`decode_varint`...) are the same codecs for
callers that build records by hand.
Encoders raise :class:`kiel.exc.LocalProtocolError` for values the wire
cannot carry. ``bytes`` stay ``bytes``: payloads are never decoded as text.

Flexible versions (KIP-482) carry strings, bytes and arrays in their
*compact* forms: an unsigned varint of the length plus one, where 0 is null
(:data:`CompactString`, :data:`CompactNullableString`, :data:`CompactBytes`,
:data:`CompactNullableBytes`, ``Array(item, compact=True)``). A schema never
names them: it declares the classic type, and :meth:`WireType.flexible_form`
gives the compact counterpart when a struct is compiled for a flexible
version (see :mod:`kiel.protocol.schema`). Integers keep their form.
"""
import struct
from collections.abc import Sequence
from typing import Any, Optional, Union

from kiel.exc import LocalProtocolError, ProtocolError, TruncatedError

Buffer = Union[bytes, bytearray, memoryview]
Out = list[bytes]


class WireType:
    """Base class of wire types. ``fixed_format`` is set for fixed-width types."""

    #: ``struct`` format of fixed-width types, else ``None``: one character for
    #: the integer primitives, the fields' characters for a struct made only of
    #: fixed-width fields.
    fixed_format: Optional[str] = None
    name = "wire type"

    def encode(self, value: Any, out: Out) -> None:
        raise NotImplementedError

    def decode(self, buf: Buffer, offset: int) -> tuple[Any, int]:
        raise NotImplementedError

    def flexible_form(self) -> "WireType":
        """This type as a flexible version carries it (KIP-482).

        Integers, booleans and varints are the same in every version; strings,
        bytes and arrays override this with their compact forms.
        """
        return self

    def __repr__(self) -> str:
        return self.name


class _Fixed(WireType):
    """A fixed-width big-endian integer."""

    def __init__(self, name: str, fmt: str, lo: int, hi: int) -> None:
        self.name = name
        self.fixed_format = fmt
        self.struct = struct.Struct(">" + fmt)
        self.size = self.struct.size
        self.lo, self.hi = lo, hi
        self._pack = self.struct.pack
        self._unpack_from = self.struct.unpack_from

    def encode(self, value: Any, out: Out) -> None:
        try:
            out.append(self._pack(value))
        except struct.error as e:
            raise LocalProtocolError(
                f"{value!r} does not fit {self.name} [{self.lo}, {self.hi}]"
            ) from e

    def decode(self, buf: Buffer, offset: int) -> tuple[int, int]:
        try:
            return self._unpack_from(buf, offset)[0], offset + self.size
        except struct.error as e:
            raise TruncatedError(f"{self.name} runs past the end", offset=offset) from e


Int8 = _Fixed("int8", "b", -(2**7), 2**7 - 1)
Int16 = _Fixed("int16", "h", -(2**15), 2**15 - 1)
Int32 = _Fixed("int32", "i", -(2**31), 2**31 - 1)
Int64 = _Fixed("int64", "q", -(2**63), 2**63 - 1)
UInt32 = _Fixed("uint32", "I", 0, 2**32 - 1)


class _Boolean(WireType):
    """One byte, 0 for false; any other byte decodes to True (as Kafka reads it).

    Not a fixed-width integer on purpose: a struct never fuses it into a
    ``struct.pack`` run, which would accept any value and pack its truth.
    """

    name = "boolean"

    def encode(self, value: Any, out: Out) -> None:
        if type(value) is not bool:
            raise LocalProtocolError(f"{self.name} needs a bool, got {value!r:.80}")
        out.append(b"\x01" if value else b"\x00")

    def decode(self, buf: Buffer, offset: int) -> tuple[bool, int]:
        if offset >= len(buf):
            raise TruncatedError(f"{self.name} runs past the end", offset=offset)
        return buf[offset] != 0, offset + 1


Boolean = _Boolean()

_int16 = struct.Struct(">h")
_int32 = struct.Struct(">i")
_INT32_MAX = 2**31 - 1


def _take(buf: Buffer, offset: int, length: int, what: str) -> int:
    """Return the end of a ``length``-byte field at ``offset``, checking bounds."""
    end = offset + length
    if end > len(buf):
        raise TruncatedError(
            f"{what} of {length} bytes runs past the end ({len(buf) - offset} left)",
            offset=offset,
        )
    return end


class _String(WireType):
    """A UTF-8 string: int16 length (-1 is null when ``nullable``), or when
    ``compact`` an unsigned varint of the length plus one (0 is null).

    Kafka refuses strings over 32767 bytes in both forms.
    """

    def __init__(self, nullable: bool, compact: bool = False) -> None:
        self.nullable = nullable
        self.compact = compact
        self.name = ("compact_" if compact else "") + (
            "nullable_string" if nullable else "string")

    def flexible_form(self) -> WireType:
        return _COMPACT_STRINGS[self.nullable]

    def encode(self, value: Optional[str], out: Out) -> None:
        if value is None:
            if not self.nullable:
                raise LocalProtocolError(f"{self.name} cannot be null")
            out.append(b"\x00" if self.compact else b"\xff\xff")
            return
        if not isinstance(value, str):
            raise LocalProtocolError(f"{self.name} needs str, got {type(value).__name__}")
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as e:
            # Lone surrogates (e.g. from os.fsdecode) have no UTF-8 form.
            raise LocalProtocolError(f"{self.name} is not encodable as UTF-8: {e.reason}") from e
        if len(data) > 32767:
            raise LocalProtocolError(f"{self.name} of {len(data)} bytes exceeds 32767")
        out.append(encode_unsigned_varint(len(data) + 1) if self.compact
                   else _int16.pack(len(data)))
        out.append(data)

    def decode(self, buf: Buffer, offset: int) -> tuple[Optional[str], int]:
        start = offset
        if self.compact:
            length, offset = decode_unsigned_varint(buf, offset)
            length -= 1
            # Kafka's own decoders refuse a compact string over 32767 bytes.
            if length > 32767:
                raise ProtocolError(f"invalid {self.name} length {length}", offset=start)
        else:
            try:
                (length,) = _int16.unpack_from(buf, offset)
            except struct.error as e:
                raise TruncatedError(f"{self.name} length runs past the end",
                                     offset=offset) from e
            offset += 2
        if length < 0:
            if length == -1 and self.nullable:
                return None, offset
            raise ProtocolError(f"invalid {self.name} length {length}", offset=start)
        end = _take(buf, offset, length, self.name)
        try:
            return str(buf[offset:end], "utf-8"), end
        except UnicodeDecodeError as e:
            raise ProtocolError(f"{self.name} is not valid UTF-8", offset=offset) from e


class _Bytes(WireType):
    """Raw bytes: int32 length (-1 is null when ``nullable``), or when
    ``compact`` an unsigned varint of the length plus one (0 is null).

    Decodes to a ``bytes`` copy of the field (one copy per field, never of the
    whole buffer).
    """

    def __init__(self, nullable: bool, compact: bool = False) -> None:
        self.nullable = nullable
        self.compact = compact
        self.name = ("compact_" if compact else "") + (
            "nullable_bytes" if nullable else "bytes")

    def flexible_form(self) -> WireType:
        return _COMPACT_BYTES[self.nullable]

    def encode(self, value: Optional[Buffer], out: Out) -> None:
        if value is None:
            if not self.nullable:
                raise LocalProtocolError(f"{self.name} cannot be null")
            out.append(b"\x00" if self.compact else b"\xff\xff\xff\xff")
            return
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise LocalProtocolError(f"{self.name} needs bytes, got {type(value).__name__}")
        # bytes() first: len() of a memoryview counts items, not bytes, when
        # its format is wider than "B". (bytes(b) of a bytes object is b itself.)
        data = bytes(value)
        if len(data) > _INT32_MAX - int(self.compact):
            raise LocalProtocolError(f"{self.name} of {len(data)} bytes exceeds {_INT32_MAX}")
        out.append(encode_unsigned_varint(len(data) + 1) if self.compact
                   else _int32.pack(len(data)))
        out.append(data)

    def decode(self, buf: Buffer, offset: int) -> tuple[Optional[bytes], int]:
        start = offset
        if self.compact:
            length, offset = decode_unsigned_varint(buf, offset)
            length -= 1
        else:
            try:
                (length,) = _int32.unpack_from(buf, offset)
            except struct.error as e:
                raise TruncatedError(f"{self.name} length runs past the end",
                                     offset=offset) from e
            offset += 4
        if length < 0:
            if length == -1 and self.nullable:
                return None, offset
            raise ProtocolError(f"invalid {self.name} length {length}", offset=start)
        end = _take(buf, offset, length, self.name)
        return bytes(buf[offset:end]), end


# --------------------------------------------------------------------------
# Variable-length integers

_ONE_BYTE = [bytes((i,)) for i in range(0x80)]
_UINT32_MAX = 2**32 - 1
_UINT64_MAX = 2**64 - 1
_INT32_MIN = -(2**31)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def encode_unsigned_varint(value: int) -> bytes:
    """The unsigned base-128 varint of ``value`` (0 to 2**64 - 1).

    Raises:
        LocalProtocolError: ``value`` is not an int in that range.
    """
    if type(value) is int and 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _UINT64_MAX:
        raise LocalProtocolError(f"{value!r} does not fit an unsigned varint")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """The zig-zag varint of a signed 64-bit ``value`` (``varint`` and ``varlong`` alike).

    Raises:
        LocalProtocolError: ``value`` is not an int that fits 64 bits.
    """
    if type(value) is int and -0x40 <= value < 0x40:
        return _ONE_BYTE[(value << 1) ^ (value >> 63)]
    if not isinstance(value, int) or isinstance(value, bool) or not (
        _INT64_MIN <= value <= _INT64_MAX
    ):
        raise LocalProtocolError(f"{value!r} does not fit a varlong")
    return encode_unsigned_varint(((value << 1) ^ (value >> 63)) & _UINT64_MAX)


def size_of_varint(value: int) -> int:
    """How many bytes :func:`encode_varint` writes for ``value`` (a signed 64-bit int)."""
    zigzag = ((value << 1) ^ (value >> 63)) & _UINT64_MAX
    return max(1, (zigzag.bit_length() + 6) // 7)


def decode_unsigned_varint(buf: Buffer, offset: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read an unsigned varint of at most ``max_bytes`` bytes (5: 32 bits, 10: 64 bits).

    Returns:
        ``(value, offset after it)``.

    Raises:
        TruncatedError: the buffer ends inside the varint.
        ProtocolError: more than ``max_bytes`` bytes, or a value wider than
            ``7 * max_bytes`` rounded down to 32 or 64 bits.
    """
    result = 0
    shift = 0
    end = len(buf)
    pos = offset
    while pos < end:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result > (_UINT32_MAX if max_bytes <= 5 else _UINT64_MAX):
                raise ProtocolError(f"varint value {result} is too wide", offset=offset)
            return result, pos
        shift += 7
        if pos - offset >= max_bytes:
            raise ProtocolError(f"varint longer than {max_bytes} bytes", offset=offset)
    raise TruncatedError("varint runs past the end", offset=offset)


def decode_varint(buf: Buffer, offset: int) -> tuple[int, int]:
    """Read a zig-zag ``varint`` (signed 32 bits, at most 5 bytes).

    Raises:
        TruncatedError: the buffer ends inside the varint.
        ProtocolError: longer than 5 bytes or wider than 32 bits.
    """
    raw, pos = decode_unsigned_varint(buf, offset, 5)
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: Buffer, offset: int) -> tuple[int, int]:
    """Read a zig-zag ``varlong`` (signed 64 bits, at most 10 bytes).

    Raises:
        TruncatedError: the buffer ends inside the varint.
        ProtocolError: longer than 10 bytes or wider than 64 bits.
    """
    raw, pos = decode_unsigned_varint(buf, offset, 10)
    return (raw >> 1) ^ -(raw & 1), pos


class _VarInt(WireType):
    """A varint wire type: zig-zag signed (``varint``/``varlong``) or unsigned."""

    def __init__(self, name: str, lo: int, hi: int, signed: bool, max_bytes: int) -> None:
        self.name = name
        self.lo, self.hi = lo, hi
        self._encode = encode_varint if signed else encode_unsigned_varint
        self._signed = signed
        self._max_bytes = max_bytes

    def encode(self, value: Any, out: Out) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or not (
            self.lo <= value <= self.hi
        ):
            raise LocalProtocolError(f"{value!r} does not fit {self.name} [{self.lo}, {self.hi}]")
        out.append(self._encode(value))

    def decode(self, buf: Buffer, offset: int) -> tuple[int, int]:
        raw, pos = decode_unsigned_varint(buf, offset, self._max_bytes)
        return ((raw >> 1) ^ -(raw & 1) if self._signed else raw), pos


VarInt = _VarInt("varint", _INT32_MIN, _INT32_MAX, signed=True, max_bytes=5)
VarLong = _VarInt("varlong", _INT64_MIN, _INT64_MAX, signed=True, max_bytes=10)
UnsignedVarInt = _VarInt("unsigned_varint", 0, _UINT32_MAX, signed=False, max_bytes=5)


# --------------------------------------------------------------------------
# Strings, bytes, arrays

String = _String(nullable=False)
NullableString = _String(nullable=True)
Bytes = _Bytes(nullable=False)
NullableBytes = _Bytes(nullable=True)
# The compact forms (flexible versions). Schemas declare the classic types;
# these are what a flexible compile turns them into.
CompactString = _String(nullable=False, compact=True)
CompactNullableString = _String(nullable=True, compact=True)
CompactBytes = _Bytes(nullable=False, compact=True)
CompactNullableBytes = _Bytes(nullable=True, compact=True)
_COMPACT_STRINGS = {False: CompactString, True: CompactNullableString}
_COMPACT_BYTES = {False: CompactBytes, True: CompactNullableBytes}


class Array(WireType):
    """A count + that many items of ``item`` type; a null array decodes to ``[]``.

    The count is an int32 (-1 is null), or when ``compact`` (flexible
    versions) an unsigned varint of the count plus one (0 is null).

    Args:
        item: the wire type of each element (a primitive, another ``Array``,
            or a struct class, see :mod:`kiel.protocol.schema`).
        compact: the flexible versions' form (normally made by
            :meth:`flexible_form`, not declared).
    """

    def __init__(self, item: Any, compact: bool = False) -> None:
        # Late import: schema builds on primitives, and arrays of structs are common.
        from kiel.protocol.schema import wire_type

        self.item = wire_type(item)
        self.compact = compact
        self.name = f"{'compact' if compact else ''}[{self.item!r}]"
        self._flexible: Optional[Array] = None
        # Strategy: two fast paths. An array of a fixed-width integer packs and
        # unpacks in one struct call; an array of a struct made only of
        # fixed-width fields (a partition header) costs one precompiled
        # ``unpack_from`` per element. Everything else goes item by item.
        self._scalar: Optional[_Fixed] = self.item if isinstance(self.item, _Fixed) else None
        self._record: Optional[struct.Struct] = getattr(self.item, "fixed_struct", None)

    def flexible_form(self) -> WireType:
        """The compact array of the item's flexible form (built once)."""
        if self.compact:
            return self
        if self._flexible is None:
            self._flexible = Array(self.item.flexible_form(), compact=True)
        return self._flexible

    def _count(self, count: int) -> bytes:
        return encode_unsigned_varint(count + 1) if self.compact else _int32.pack(count)

    def encode(self, value: Optional[Sequence[Any]], out: Out) -> None:
        if value is None:
            out.append(b"\x00" if self.compact else b"\xff\xff\xff\xff")
            return
        if isinstance(value, (str, bytes, bytearray, memoryview, dict)):
            raise LocalProtocolError(f"{self.name} needs a sequence, got {type(value).__name__}")
        try:
            items = list(value)
        except TypeError as e:
            raise LocalProtocolError(
                f"{self.name} needs a sequence, got {type(value).__name__}"
            ) from e
        if len(items) > _INT32_MAX:
            raise LocalProtocolError(f"{self.name} of {len(items)} items exceeds {_INT32_MAX}")
        if self._scalar is not None:
            try:
                if self.compact:
                    packed = struct.pack(f">{len(items)}{self._scalar.fixed_format}", *items)
                    out.append(self._count(len(items)))
                else:  # the count in the same call
                    fmt = f">i{len(items)}{self._scalar.fixed_format}"
                    packed = struct.pack(fmt, len(items), *items)
            except struct.error as e:
                raise LocalProtocolError(f"bad value in {self.name}: {e}") from e
            out.append(packed)
            return
        out.append(self._count(len(items)))
        encode = self.item.encode
        for item in items:
            encode(item, out)

    def decode(self, buf: Buffer, offset: int) -> tuple[list[Any], int]:
        start = offset
        if self.compact:
            count, offset = decode_unsigned_varint(buf, offset)
            count -= 1  # -1: null
        else:
            try:
                (count,) = _int32.unpack_from(buf, offset)
            except struct.error as e:
                raise TruncatedError(f"{self.name} count runs past the end", offset=offset) from e
            offset += 4
        if count < 0:
            if count == -1:
                return [], offset
            raise ProtocolError(f"invalid {self.name} count {count}", offset=start)
        left = len(buf) - offset
        # Every element takes at least one byte: a count beyond what is left is
        # garbage, and we refuse it before looping or allocating.
        if count > left:
            raise TruncatedError(
                f"{self.name} count {count} exceeds the {left} bytes left", offset=start
            )
        if self._scalar is not None:
            size = count * self._scalar.size
            if size > left:
                raise TruncatedError(
                    f"{self.name} of {count} items needs {size} bytes, {left} left",
                    offset=start,
                )
            values = list(struct.unpack_from(f">{count}{self._scalar.fixed_format}", buf, offset))
            return values, offset + size
        if self._record is not None:
            step = self._record.size
            if count * step > left:
                raise TruncatedError(
                    f"{self.name} of {count} items needs {count * step} bytes, {left} left",
                    offset=start,
                )
            unpack_from = self._record.unpack_from
            new = tuple.__new__
            cls = self.item.cls  # type: ignore[attr-defined]
            result = [new(cls, unpack_from(buf, offset + i * step)) for i in range(count)]
            return result, offset + count * step
        decode = self.item.decode
        result = []
        append = result.append
        for _ in range(count):
            value, offset = decode(buf, offset)
            append(value)
        return result, offset
