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

Strategy: the first use of a struct compiles it into a :class:`StructType`
whose steps fuse runs of consecutive fixed-width fields into one precompiled
``struct.Struct``, so a partition header like ``(int32, int16, int64)`` costs
one ``unpack_from`` call rather than three.
"""
import struct
from typing import Any, Optional, TypeVar, Union, get_type_hints

from kiel.exc import LocalProtocolError, TruncatedError
from kiel.protocol.primitives import Buffer, Out, WireType

T = TypeVar("T")

_COMPILED: dict[type, "StructType"] = {}


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


def struct_type(cls: type) -> "StructType":
    """The compiled wire type of struct class ``cls`` (cached).

    Raises:
        TypeError: ``cls`` is not a struct class.
    """
    compiled = _COMPILED.get(cls)
    if compiled is None:
        if not is_struct(cls):
            raise TypeError(f"not a struct class: {cls!r}")
        compiled = _COMPILED[cls] = StructType(cls)
    return compiled


class StructType(WireType):
    """The wire type of a struct class; built by :func:`struct_type`."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.name = cls.__name__
        hints = get_type_hints(cls, include_extras=True)
        fields: list[tuple[str, WireType]] = []
        for name in cls._fields:  # type: ignore[attr-defined]
            hint = hints[name]
            metadata = getattr(hint, "__metadata__", None)
            fields.append((name, wire_type(metadata[0] if metadata else hint)))
        self.fields = fields
        # Steps: ("fixed", Struct, first_index, count) or ("var", WireType, index, 1).
        steps: list[tuple[str, Any, int, int]] = []
        run: list[int] = []

        def flush() -> None:
            if run:
                fmt = ">" + "".join(fields[i][1].fixed_format or "" for i in run)
                steps.append(("fixed", struct.Struct(fmt), run[0], len(run)))
                run.clear()

        for index, (_, wtype) in enumerate(fields):
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
        self.fixed_struct: Optional[struct.Struct] = None
        if len(steps) == 1 and steps[0][0] == "fixed":
            self.fixed_struct = steps[0][1]
            self.fixed_format = steps[0][1].format[1:]

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
        return tuple.__new__(self.cls, values), offset


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
