"""Hypothesis strategies and helpers derived from kiel's protocol schemas.

Everything here walks ``kiel.protocol.schema.struct_type(cls).fields``, so a
new API module (or a new struct in an old one) is covered by the property and
conformance tests as soon as it registers its :class:`kiel.protocol.api.Api`.
A new *wire type* makes :func:`for_wire_type` raise ``NotImplementedError``:
write its strategy here rather than letting it go untested.
"""
from typing import Any, Iterator, List, Tuple

from hypothesis import strategies as st

import kiel.protocol  # noqa: F401  (registers every API)
from kiel.protocol.api import (
    BY_KEY,
    Api,
    RequestHeader,
    RequestHeaderV2,
    ResponseHeader,
    ResponseHeaderV1,
)
from kiel.protocol.primitives import (
    Array,
    Boolean,
    Bytes,
    CompactBytes,
    CompactNullableBytes,
    CompactNullableString,
    CompactString,
    NullableBytes,
    NullableString,
    String,
    UnsignedVarInt,
    VarInt,
    VarLong,
    WireType,
)
from kiel.protocol.schema import StructType, struct_type

#: Every registered API, in (key, version) order.
ALL_APIS: List[Api] = [BY_KEY[k] for k in sorted(BY_KEY)]


def _collect(cls: type, seen: List[type]) -> None:
    if cls in seen:
        return
    seen.append(cls)
    for _, wtype in struct_type(cls).fields:
        while isinstance(wtype, Array):
            wtype = wtype.item
        if isinstance(wtype, StructType):
            _collect(wtype.cls, seen)


def all_structs() -> List[type]:
    """The headers plus every request/response struct and the structs nested in them."""
    seen: List[type] = []
    for cls in (RequestHeader, ResponseHeader, RequestHeaderV2, ResponseHeaderV1):
        _collect(cls, seen)
    for api in ALL_APIS:
        _collect(api.request, seen)
        _collect(api.response, seen)
    return seen


ALL_STRUCTS = all_structs()


def is_int(wtype: WireType) -> bool:
    """Whether ``wtype`` is one of the fixed-width integer primitives."""
    return hasattr(wtype, "lo") and hasattr(wtype, "hi") and wtype.fixed_format is not None


def for_wire_type(wtype: WireType, max_items: int = 3) -> st.SearchStrategy:
    """A strategy of valid values for ``wtype`` (arrays are never null here).

    Raises:
        NotImplementedError: a wire type this module does not know yet.
    """
    if isinstance(wtype, StructType):
        return for_struct(wtype.cls, max_items)
    if isinstance(wtype, Array):
        return st.lists(for_wire_type(wtype.item, max_items), max_size=max_items)
    if wtype is Boolean:
        return st.booleans()
    if is_int(wtype):
        # Bias towards the edges, where sign and width bugs live.
        edges = st.sampled_from([wtype.lo, wtype.hi, -1, 0, 1])
        return st.one_of(edges, st.integers(wtype.lo, wtype.hi))
    if wtype in (VarInt, VarLong, UnsignedVarInt):
        edges = st.sampled_from([wtype.lo, wtype.hi, 0, 1, 127, 128])  # type: ignore[attr-defined]
        return st.one_of(edges, st.integers(wtype.lo, wtype.hi))  # type: ignore[attr-defined]
    if wtype in (String, CompactString):
        return st.text(max_size=12)
    if wtype in (NullableString, CompactNullableString):
        return st.none() | st.text(max_size=12)
    if wtype in (Bytes, CompactBytes):
        return st.binary(max_size=40)
    if wtype in (NullableBytes, CompactNullableBytes):
        return st.none() | st.binary(max_size=40)
    raise NotImplementedError(f"no strategy for wire type {wtype!r}")


def for_struct(cls: type, max_items: int = 3) -> st.SearchStrategy:
    """A strategy of valid ``cls`` instances."""
    fields = [for_wire_type(wtype, max_items) for _, wtype in struct_type(cls).fields]
    return st.tuples(*fields).map(lambda values: cls(*values))


# --------------------------------------------------------------------------
# Deterministic values and paths, for exhaustive "break one field" tests.


def sample_value(wtype: WireType) -> Any:
    """A small valid value with exactly one element in every array."""
    if isinstance(wtype, StructType):
        return wtype.cls(*(sample_value(t) for _, t in wtype.fields))
    if isinstance(wtype, Array):
        return [sample_value(wtype.item)]
    if wtype is Boolean:
        return True
    if is_int(wtype):
        return 1
    if wtype in (String, NullableString, CompactString, CompactNullableString):
        return "x"
    if wtype in (Bytes, NullableBytes, CompactBytes, CompactNullableBytes):
        return b"x"
    raise NotImplementedError(f"no sample for wire type {wtype!r}")


Path = Tuple[Any, ...]


def paths(wtype: WireType, path: Path = ()) -> Iterator[Tuple[Path, WireType]]:
    """Every ``(path, wire type)`` inside a :func:`sample_value` of ``wtype``.

    A path is a tuple of tuple/list indexes from the root value.
    """
    if isinstance(wtype, StructType):
        for index, (_, ftype) in enumerate(wtype.fields):
            yield (path + (index,), ftype)
            yield from paths(ftype, path + (index,))
    elif isinstance(wtype, Array):
        yield (path + (0,), wtype.item)
        yield from paths(wtype.item, path + (0,))


def replace(value: Any, path: Path, new: Any) -> Any:
    """A copy of ``value`` with the item at ``path`` replaced by ``new``."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        items = list(value)
        items[head] = replace(items[head], rest, new)
        return items
    items = list(value)
    items[head] = replace(items[head], rest, new)
    return type(value)(*items) if hasattr(value, "_fields") else tuple(items)


def field_name(cls: type, path: Path) -> str:
    """A readable name for ``path`` inside ``cls`` (for test ids and messages)."""
    names = [cls.__name__]
    wtype: WireType = struct_type(cls)
    for index in path:
        if isinstance(wtype, StructType):
            name, wtype = wtype.fields[index]
            names.append(name)
        elif isinstance(wtype, Array):
            wtype = wtype.item
            names.append("[]")
    return ".".join(names)
