"""Declarative structs: a ``NamedTuple`` whose fields are annotated with wire types.

A struct is declared once, as data, and both encodes and decodes::

    class Broker(NamedTuple):
        node_id: Annotated[int, Int32]
        host: Annotated[str, String]
        port: Annotated[int, Int32]

    encode(Broker(1, "localhost", 9092))          # -> bytes
    decode(Broker, data)                          # -> Broker(...)

A field whose annotation is itself a struct class needs no ``Annotated``.
Instances are plain tuples, so kafka-python style positional tuples encode too.

Flexible versions (KIP-482) come from the same declaration. A struct is
compiled either classic or flexible (``struct_type(cls, flexible=True)``; a
message class registered for a flexible API version, see
:func:`kiel.protocol.api.register`, is flexible by default). A flexible
compile turns every string, bytes and array field, at every depth, into its
compact form (:meth:`~kiel.protocol.primitives.WireType.flexible_form`), and
ends every struct with its tagged-field section::

    TaggedFields => count(uvarint) [tag(uvarint) size(uvarint) value(size bytes)]

Two markers after the wire type in ``Annotated`` say what Kafka's message
definitions say per field:

* ``Tagged(n)``: a tagged field with tag ``n``, written in the tagged section
  (only when its value is not the default; the field needs a default, ``[]``
  for an array, which a decoded struct never shares: treat structs as
  read-only) and absent from classic versions. Tagged fields come after all
  the others.
* ``NEVER_FLEXIBLE``: keep the classic form in flexible versions too (the
  request header's client id, Kafka's ``"flexibleVersions": "none"``).

A tag the declaration does not know is skipped (its size says how far) and
counted in the compiled type's :attr:`StructType.unknown_tags`: a newer
broker may add tagged fields at any time, and that must not break a client.

Strategy: the first use of a struct compiles it into a :class:`StructType`
whose steps fuse runs of consecutive fixed-width fields into one precompiled
``struct.Struct``, so a partition header like ``(int32, int16, int64)`` costs
one ``unpack_from`` call rather than three.
"""
import struct
from typing import Any, NamedTuple, Optional, TypeVar, Union, get_type_hints

from kiel.exc import LocalProtocolError, ProtocolError, TruncatedError
from kiel.protocol.primitives import (
    Buffer,
    Out,
    WireType,
    decode_unsigned_varint,
    encode_unsigned_varint,
)

T = TypeVar("T")

_COMPILED: dict[tuple[type, bool], "StructType"] = {}
#: Message classes registered for a flexible API version (and the flexible
#: headers): ``struct_type(cls)`` compiles them flexible.
_FLEXIBLE: set[type] = set()
#: Struct classes that declare tagged fields (they exist only in flexible versions).
_HAS_TAGGED: dict[type, bool] = {}


class Tagged(NamedTuple):
    """Field marker (in ``Annotated``, after the wire type): tagged field ``tag``."""

    tag: int


class _NeverFlexible:
    def __repr__(self) -> str:
        return "NEVER_FLEXIBLE"


#: Field marker: the field keeps its classic form in flexible versions.
NEVER_FLEXIBLE = _NeverFlexible()


def is_struct(cls: Any) -> bool:
    """Whether ``cls`` is a struct class (a NamedTuple subclass)."""
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def wire_type(spec: Any) -> WireType:
    """Turn a field spec (a wire type or a struct class) into a wire type.

    Raises:
        TypeError: ``spec`` is neither.
    """
    if isinstance(spec, WireType):
        return spec
    if is_struct(spec):
        return struct_type(spec)
    raise TypeError(f"not a wire type or struct class: {spec!r}")


def mark_flexible(cls: type) -> None:
    """Make ``struct_type(cls)`` compile ``cls`` flexible by default.

    Called by :func:`kiel.protocol.api.register` for the classes of a
    flexible API version.

    Raises:
        TypeError: ``cls`` is not a struct class.
    """
    if not is_struct(cls):
        raise TypeError(f"not a struct class: {cls!r}")
    _FLEXIBLE.add(cls)


def is_flexible(cls: type) -> bool:
    """Whether ``struct_type(cls)`` compiles ``cls`` flexible: a class marked
    by :func:`mark_flexible`, or one that declares tagged fields."""
    if cls in _FLEXIBLE:
        return True
    has = _HAS_TAGGED.get(cls)
    if has is None:
        hints = get_type_hints(cls, include_extras=True)
        has = _HAS_TAGGED[cls] = any(
            isinstance(marker, Tagged)
            for name in cls._fields  # type: ignore[attr-defined]
            for marker in getattr(hints[name], "__metadata__", ())[1:]
        )
    return has


def struct_type(cls: type, flexible: Optional[bool] = None) -> "StructType":
    """The compiled wire type of struct class ``cls`` (cached).

    Args:
        cls: the struct class.
        flexible: compile for a flexible version; ``None``: as
            :func:`is_flexible` says.

    Raises:
        TypeError: ``cls`` is not a struct class, or its declaration is
            inconsistent (see :class:`StructType`).
    """
    if flexible is None:
        flexible = is_struct(cls) and is_flexible(cls)
    compiled = _COMPILED.get((cls, flexible))
    if compiled is None:
        if not is_struct(cls):
            raise TypeError(f"not a struct class: {cls!r}")
        compiled = _COMPILED[(cls, flexible)] = StructType(cls, flexible)
    return compiled


def _is_default(value: Any, default: Any) -> bool:
    """Whether a tagged field's value is its default (so it is not written).

    Same type and equal (so ``0`` is not taken for a default ``False``); any
    empty sequence is an array's empty default.
    """
    if isinstance(default, (list, tuple)) and isinstance(value, (list, tuple)):
        return not value and not default
    return type(value) is type(default) and value == default


class StructType(WireType):
    """The wire type of a struct class; built by :func:`struct_type`.

    Attributes:
        fields: ``[(name, wire type)]`` of every field, tagged ones included,
            in declaration order (the wire types of this compile: compact in
            a flexible one).
        tagged: ``[(index, tag, wire type, default)]`` of the tagged fields.
        flexible: compiled for flexible versions.
        unknown_tags: tagged fields of unknown tags skipped so far while
            decoding with this type (a count for diagnostics and tests).

    Raises:
        TypeError: a tagged field without a default, before an untagged one,
            or with a tag used twice; a flexible-only struct (one with tagged
            fields) compiled classic.
    """

    def __init__(self, cls: type, flexible: bool = False) -> None:
        self.cls = cls
        self.flexible = flexible
        self.name = cls.__name__ + (" (flexible)" if flexible else "")
        self.unknown_tags = 0
        hints = get_type_hints(cls, include_extras=True)
        defaults = cls._field_defaults  # type: ignore[attr-defined]
        fields: list[tuple[str, WireType]] = []
        tagged: list[tuple[int, int, WireType, Any]] = []
        for index, name in enumerate(cls._fields):  # type: ignore[attr-defined]
            hint = hints[name]
            metadata = getattr(hint, "__metadata__", None)
            wtype = wire_type(metadata[0] if metadata else hint)
            markers = metadata[1:] if metadata else ()
            if flexible and NEVER_FLEXIBLE not in markers:
                wtype = wtype.flexible_form()
            tag = next((m.tag for m in markers if isinstance(m, Tagged)), None)
            if tag is not None:
                if name not in defaults:
                    raise TypeError(f"{cls.__name__}.{name}: a tagged field needs a default")
                if any(t == tag for _, t, _, _ in tagged):
                    raise TypeError(f"{cls.__name__}.{name}: tag {tag} used twice")
                tagged.append((index, tag, wtype, defaults[name]))
            elif tagged:
                raise TypeError(f"{cls.__name__}.{name}: untagged field after a tagged one")
            fields.append((name, wtype))
        if tagged and not flexible:
            raise TypeError(f"{cls.__name__} has tagged fields: it exists only in "
                            "flexible versions")
        self.fields = fields
        self.tagged = tagged
        self._by_tag = {tag: (index, wtype) for index, tag, wtype, _ in tagged}
        self._positional = len(fields) - len(tagged)
        # Steps: ("fixed", Struct, first_index, count) or ("var", WireType, index, 1).
        steps: list[tuple[str, Any, int, int]] = []
        run: list[int] = []

        def flush() -> None:
            if run:
                fmt = ">" + "".join(fields[i][1].fixed_format or "" for i in run)
                steps.append(("fixed", struct.Struct(fmt), run[0], len(run)))
                run.clear()

        for index, (_, wtype) in enumerate(fields[: self._positional]):
            # Only scalar fields fuse: a nested fixed-width struct is one tuple
            # value, not a run of flat ones.
            if wtype.fixed_format is not None and not isinstance(wtype, StructType):
                run.append(index)
            else:
                flush()
                steps.append(("var", wtype, index, 1))
        flush()
        self.steps = steps
        #: The precompiled ``struct.Struct`` of a struct made only of
        #: fixed-width fields (``Array`` decodes those in one call per element).
        #: Never for a flexible compile: its tagged section has a varint count.
        self.fixed_struct: Optional[struct.Struct] = None
        if len(steps) == 1 and steps[0][0] == "fixed" and not flexible:
            self.fixed_struct = steps[0][1]
            self.fixed_format = steps[0][1].format[1:]

    def flexible_form(self) -> WireType:
        return struct_type(self.cls, True)

    def encode(self, value: Any, out: Out) -> None:
        if not isinstance(value, tuple) or len(value) != len(self.fields):
            raise LocalProtocolError(
                f"{self.name} needs a tuple of {len(self.fields)} fields, got {value!r:.200}"
            )
        for kind, codec, index, count in self.steps:
            if kind == "fixed":
                try:
                    out.append(codec.pack(*value[index : index + count]))
                except struct.error as e:
                    names = [n for n, _ in self.fields[index : index + count]]
                    raise LocalProtocolError(f"bad value for {self.name}.{names}: {e}") from e
            else:
                try:
                    codec.encode(value[index], out)
                except LocalProtocolError as e:
                    e.message = f"{self.name}.{self.fields[index][0]}: {e.message}"
                    raise
        if self.flexible:
            self._encode_tagged(value, out)

    def _encode_tagged(self, value: Any, out: Out) -> None:
        if not self.tagged:
            out.append(b"\x00")
            return
        present: Out = []
        count = 0
        # Kafka writes tagged fields in ascending tag order, defaults left out.
        for index, tag, wtype, default in sorted(self.tagged, key=lambda t: t[1]):
            item = value[index]
            if _is_default(item, default):
                continue
            body: Out = []
            try:
                wtype.encode(item, body)
            except LocalProtocolError as e:
                e.message = f"{self.name}.{self.fields[index][0]}: {e.message}"
                raise
            data = b"".join(body)
            present += (encode_unsigned_varint(tag), encode_unsigned_varint(len(data)), data)
            count += 1
        out.append(encode_unsigned_varint(count))
        out.extend(present)

    def decode(self, buf: Buffer, offset: int) -> tuple[Any, int]:
        values: list[Any] = []
        for kind, codec, _, _ in self.steps:
            if kind == "fixed":
                try:
                    values.extend(codec.unpack_from(buf, offset))
                except struct.error as e:
                    raise TruncatedError(f"{self.name} runs past the end", offset=offset) from e
                offset += codec.size
            else:
                value, offset = codec.decode(buf, offset)
                values.append(value)
        if self.flexible:
            offset = self._decode_tagged(buf, offset, values)
        return tuple.__new__(self.cls, values), offset

    def _decode_tagged(self, buf: Buffer, offset: int, values: list[Any]) -> int:
        """Read the tagged section into ``values`` (defaults for absent tags)."""
        start = offset
        count, offset = decode_unsigned_varint(buf, offset)
        # Each tagged field takes at least two bytes (its tag and its size).
        if count * 2 > len(buf) - offset:
            raise TruncatedError(f"{self.name}: {count} tagged fields exceed the "
                                 f"{len(buf) - offset} bytes left", offset=start)
        for _, _, _, default in self.tagged:
            # A fresh list for an absent array: decoded values never share one.
            values.append([] if isinstance(default, list) else default)
        for _ in range(count):
            tag, offset = decode_unsigned_varint(buf, offset)
            size, offset = decode_unsigned_varint(buf, offset)
            end = offset + size
            if end > len(buf):
                raise TruncatedError(f"{self.name}: tagged field {tag} of {size} bytes runs "
                                     f"past the end ({len(buf) - offset} left)", offset=offset)
            known = self._by_tag.get(tag)
            if known is None:
                self.unknown_tags += 1
                offset = end
                continue
            index, wtype = known
            # Decoded within its declared size: a value that claims more
            # runs out, one that takes less is refused below.
            with memoryview(buf) as view:
                value, pos = wtype.decode(view[:end], offset)
            if pos != end:
                raise ProtocolError(f"{self.name}.{self.fields[index][0]}: tagged field {tag} "
                                    f"declares {size} bytes, its value took {pos - offset}",
                                    offset=offset)
            values[index] = value
            offset = end
        return offset


def encode(value: Any, cls: Union[type, None] = None) -> bytes:
    """Encode a struct instance (or a plain tuple, given its struct class).

    Raises:
        LocalProtocolError: a field's value cannot be carried by its wire type.
    """
    cls = cls or type(value)
    if not is_struct(cls):
        raise LocalProtocolError(f"not a struct: {cls.__name__}")
    out: Out = []
    struct_type(cls).encode(value, out)
    return b"".join(out)


def decode(cls: type[T], buf: Buffer, offset: int = 0) -> tuple[T, int]:
    """Decode a ``cls`` struct from ``buf`` at ``offset``.

    Returns:
        ``(instance, offset after it)``.

    Raises:
        kiel.exc.ProtocolError: the bytes do not hold a valid ``cls``.
    """
    return struct_type(cls).decode(buf, offset)
