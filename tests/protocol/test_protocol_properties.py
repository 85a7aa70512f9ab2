"""Property tests of kiel.protocol: round trips, hostile bytes, bad values.

Strategies come from the schemas themselves (tests/support/protocol_strategies.py),
so every struct of every registered API -- and any API added later -- is
covered without touching this file.

Contracts checked:

* ``decode(encode(x)) == x`` for every struct, at any offset, from ``bytes``,
  ``bytearray`` or ``memoryview``.
* ``decode``, ``ClientFraming.receive_data`` and ``ServerFraming.receive_data``
  fed random, truncated or mutated bytes only ever raise
  :class:`kiel.exc.ProtocolError` (never ``struct.error``, ``IndexError``,
  ``UnicodeDecodeError``, ``MemoryError``, ``RecursionError``...), and a count
  or length of 2**31-1 is refused before anything is allocated for it.
* Encoders raise :class:`kiel.exc.LocalProtocolError` for out-of-range
  integers, wrong types and over-long strings.
"""
import struct
import tracemalloc
from typing import Annotated, Any, Callable, List, NamedTuple, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiel.exc import FrameTooLargeError, LocalProtocolError, ProtocolError, TruncatedError
from kiel.protocol.api import (
    BY_REQUEST,
    BY_RESPONSE,
    RequestHeader,
    RequestHeaderV2,
    ResponseHeader,
    ResponseHeaderV1,
)
from kiel.protocol.framing import ClientFraming, ServerFraming
from kiel.protocol.primitives import (
    Array,
    Boolean,
    Bytes,
    CompactBytes,
    CompactNullableBytes,
    CompactNullableString,
    CompactString,
    Int8,
    Int16,
    Int32,
    Int64,
    NullableBytes,
    NullableString,
    String,
)
from kiel.protocol.schema import StructType, decode, encode, struct_type
from tests.support.protocol_strategies import (
    ALL_APIS,
    ALL_STRUCTS,
    field_name,
    for_struct,
    is_int,
    paths,
    replace,
    sample_value,
)

FAST = settings(max_examples=20, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
STRUCT_IDS = [cls.__name__ for cls in ALL_STRUCTS]
REQUESTS = [api.request for api in ALL_APIS]
RESPONSES = [api.response for api in ALL_APIS]
MESSAGES = [RequestHeader, ResponseHeader, RequestHeaderV2, ResponseHeaderV1] + REQUESTS + RESPONSES


def only_protocol_errors(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``; a ProtocolError is fine, any other exception fails the test."""
    try:
        return fn(*args)
    except ProtocolError:
        return None


def test_every_struct_is_covered() -> None:
    # A guard on the generic walk itself: the seven v0 APIs, ApiVersions v0
    # to v2, Produce v3, Fetch v4, ListOffsets v1, Metadata v1, OffsetCommit
    # v2 and v7, OffsetFetch v1 and v5, FindCoordinator v1 and v2,
    # SaslHandshake and SaslAuthenticate v0 and v1, JoinGroup v5, Heartbeat
    # v3, LeaveGroup v3, SyncGroup v3, DescribeGroups v2 and v4, ListGroups
    # v2, the flexible ApiVersions v3 and InitProducerId v2 to v5, the admin
    # client's ten (kiel/protocol/admin_*.py), ListOffsets v2 (read_committed),
    # the transactional producer's seven (AddPartitionsToTxn, AddOffsetsToTxn,
    # EndTxn v2 and v3, TxnOffsetCommit v3), and their nesting.
    assert len(ALL_APIS) == 55
    assert len(ALL_STRUCTS) >= 100
    for cls in ALL_STRUCTS:
        struct_type(cls)


# --------------------------------------------------------------------------
# Round trips


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=STRUCT_IDS)
@FAST
@given(data=st.data(), prefix=st.binary(max_size=6), suffix=st.binary(max_size=6))
def test_round_trip(cls: type, data: Any, prefix: bytes, suffix: bytes) -> None:
    value = data.draw(for_struct(cls))
    encoded = encode(value)
    assert isinstance(encoded, bytes)
    assert decode(cls, encoded) == (value, len(encoded))
    framed = prefix + encoded + suffix
    for buf in (framed, bytearray(framed), memoryview(framed)):
        got, end = decode(cls, buf, len(prefix))
        assert got == value and type(got) is cls
        assert end == len(prefix) + len(encoded)
    # Plain tuples encode the same as the NamedTuple, given the class.
    assert encode(tuple(value), cls) == encoded


# Schema features the seven v0 APIs do not use yet: a struct field that is a
# struct (fixed-width or not, no Annotated needed), arrays of arrays.
class _Point(NamedTuple):
    x: Annotated[int, Int8]
    y: Annotated[int, Int64]


class _Named(NamedTuple):
    name: Annotated[Optional[str], NullableString]
    blob: Annotated[Optional[bytes], NullableBytes]


class _Nested(NamedTuple):
    tag: Annotated[int, Int16]
    point: _Point
    named: _Named
    grid: Annotated[List[List[int]], Array(Array(Int32))]
    points: Annotated[List[_Point], Array(_Point)]
    after: Annotated[int, Int32]


@FAST
@given(value=for_struct(_Nested))
def test_nested_struct_features_round_trip(value: Any) -> None:
    encoded = encode(value)
    assert decode(_Nested, encoded) == (value, len(encoded))
    only_protocol_errors(decode, _Nested, encoded[:-1])


def test_nested_fixed_struct_field_is_not_flattened() -> None:
    value = _Nested(1, _Point(2, 3), _Named(None, b""), [[4], []], [_Point(5, 6)], 7)
    encoded = encode(value)
    assert encoded == struct.pack(
        ">hbqhiiiiiibqi", 1, 2, 3, -1, 0, 2, 1, 4, 0, 1, 5, 6, 7
    )
    decoded, _ = decode(_Nested, encoded)
    assert decoded.point == _Point(2, 3) and type(decoded.point) is _Point
    assert type(decoded.points[0]) is _Point


def test_null_array_decodes_as_empty_list() -> None:
    out: List[bytes] = []
    Array(Int32).encode(None, out)
    assert out == [b"\xff\xff\xff\xff"]
    assert Array(Int32).decode(b"\xff\xff\xff\xff", 0) == ([], 4)


def test_null_strings_and_bytes() -> None:
    for wtype, null in ((NullableString, b"\xff\xff"), (NullableBytes, b"\xff\xff\xff\xff")):
        out: List[bytes] = []
        wtype.encode(None, out)
        assert out == [null]
        assert wtype.decode(null, 0) == (None, len(null))
    with pytest.raises(ProtocolError):
        String.decode(b"\xff\xff", 0)
    with pytest.raises(ProtocolError):
        Bytes.decode(b"\xff\xff\xff\xff", 0)


def test_bytes_stay_bytes() -> None:
    value, _ = Bytes.decode(b"\x00\x00\x00\x02\xc3\x28", 0)
    assert value == b"\xc3\x28" and type(value) is bytes
    out: List[bytes] = []
    Bytes.encode(memoryview(b"abc"), out)
    Bytes.encode(bytearray(b"de"), out)
    assert b"".join(out) == b"\x00\x00\x00\x03abc\x00\x00\x00\x02de"


def test_wide_memoryview_is_measured_in_bytes() -> None:
    view = memoryview(struct.pack(">2i", 1, 2)).cast("i")
    assert len(view) == 2
    out: List[bytes] = []
    Bytes.encode(view, out)
    assert out[0] == b"\x00\x00\x00\x08" and len(out[1]) == 8


# --------------------------------------------------------------------------
# Hostile bytes into decode


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=STRUCT_IDS)
@FAST
@given(raw=st.binary(max_size=120))
def test_random_bytes_only_raise_protocol_errors(cls: type, raw: bytes) -> None:
    only_protocol_errors(decode, cls, raw)


INTERESTING = [b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xff",
               b"\xff\xff\xff\xfe", b"\x00\x00\x00\x00", b"\x7f\xff", b"\xff\xfe",
               b"\xc3\x28", b"\xed\xa0\x80"]


@st.composite
def mutated(draw: Any, encoded: bytes) -> bytes:
    """``encoded`` with a few random edits: flips, overwrites, cuts, inserts."""
    data = bytearray(encoded)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "overwrite", "truncate", "insert", "delete"]))
        pos = draw(st.integers(0, len(data)))
        if kind == "flip" and pos < len(data):
            data[pos] ^= draw(st.integers(1, 255))
        elif kind == "overwrite":
            patch = draw(st.sampled_from(INTERESTING))
            data[pos:pos + len(patch)] = patch
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        else:
            del data[pos:pos + draw(st.integers(1, 4))]
    return bytes(data)


# Top-level messages only: nested structs are mutated inside them.
@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
@FAST
@given(data=st.data())
def test_mutated_encodings_only_raise_protocol_errors(cls: type, data: Any) -> None:
    encoded = encode(data.draw(for_struct(cls)))
    only_protocol_errors(decode, cls, data.draw(mutated(encoded)))


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=STRUCT_IDS)
def test_every_truncation_is_a_truncated_error(cls: type) -> None:
    encoded = encode(sample_value(struct_type(cls)))
    for cut in range(len(encoded)):
        with pytest.raises(TruncatedError):
            decode(cls, encoded[:cut])


def _peak_bytes(fn: Callable[..., Any], *args: Any) -> int:
    tracemalloc.start()
    try:
        only_protocol_errors(fn, *args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=STRUCT_IDS)
def test_huge_counts_and_lengths_are_refused_before_allocating(cls: type) -> None:
    # Put 2**31-1 (and 32767) in every int32 (int16) window of a valid
    # encoding: wherever it lands on a count or length, it must be refused
    # without looping over or allocating for it.
    encoded = encode(sample_value(struct_type(cls)))
    for patch in (b"\x7f\xff\xff\xff", b"\x7f\xff"):
        for pos in range(len(encoded) - len(patch) + 1):
            data = encoded[:pos] + patch + encoded[pos + len(patch):]
            peak = _peak_bytes(decode, cls, data)
            assert peak < 64 * 1024, (cls.__name__, pos, patch, peak)


@pytest.mark.parametrize("item", [Int16, Int64, String, Bytes, Array(Int32)],
                         ids=["int16", "int64", "string", "bytes", "array"])
def test_array_count_of_2_31_minus_1(item: Any) -> None:
    data = b"\x7f\xff\xff\xff" + b"\x00" * 16
    assert _peak_bytes(Array(item).decode, data, 0) < 64 * 1024
    with pytest.raises(TruncatedError):
        Array(item).decode(data, 0)


def test_bytes_length_of_2_31_minus_1() -> None:
    with pytest.raises(TruncatedError):
        Bytes.decode(b"\x7f\xff\xff\xff" + b"x" * 10, 0)
    with pytest.raises(ProtocolError):
        Array(Int32).decode(b"\xff\xff\xff\xfe", 0)  # count -2 is not null


# --------------------------------------------------------------------------
# Hostile bytes into the framing objects


def _client_with_everything_in_flight() -> ClientFraming:
    framing = ClientFraming()
    for api in ALL_APIS:
        request = sample_value(struct_type(api.request))
        if api.expects_response(request):
            framing.send_request(request)
    return framing


def _feed(receive: Callable[[bytes], Any], data: bytes, cuts: List[int]) -> None:
    pos = 0
    for cut in sorted(cuts) + [len(data)]:
        receive(data[pos:cut])
        pos = max(pos, cut)


@FAST
@given(raw=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=4))
def test_client_framing_random_bytes(raw: bytes, cuts: List[int]) -> None:
    framing = _client_with_everything_in_flight()
    only_protocol_errors(_feed, framing.receive_data, raw, cuts)


@FAST
@given(raw=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=4))
def test_server_framing_random_bytes(raw: bytes, cuts: List[int]) -> None:
    only_protocol_errors(_feed, ServerFraming().receive_data, raw, cuts)


@pytest.mark.parametrize("cls", RESPONSES, ids=lambda c: c.__name__)
@FAST
@given(data=st.data())
def test_client_framing_mutated_response_frames(cls: type, data: Any) -> None:
    api = BY_RESPONSE[cls]
    framing = ClientFraming()
    request = sample_value(struct_type(api.request))
    if not api.expects_response(request):  # pragma: no cover - samples use acks=1
        return
    cid, _, _ = framing.send_request(request)
    frame = ServerFraming.send_response(cid, data.draw(for_struct(cls)))
    only_protocol_errors(framing.receive_data, data.draw(mutated(frame)))


@pytest.mark.parametrize("cls", REQUESTS, ids=lambda c: c.__name__)
@FAST
@given(data=st.data())
def test_server_framing_mutated_request_frames(cls: type, data: Any) -> None:
    _, frame, _ = ClientFraming().send_request(data.draw(for_struct(cls)))
    only_protocol_errors(ServerFraming().receive_data, data.draw(mutated(frame)))


@pytest.mark.parametrize("make", [_client_with_everything_in_flight, ServerFraming],
                         ids=["client", "server"])
def test_frame_size_2_31_minus_1_is_refused_at_once(make: Callable[[], Any]) -> None:
    framing = make()
    peak = _peak_bytes(framing.receive_data, b"\x7f\xff\xff\xff")
    assert peak < 64 * 1024
    with pytest.raises(FrameTooLargeError):
        make().receive_data(b"\x7f\xff\xff\xff")


# --------------------------------------------------------------------------
# Encoders refuse what the wire cannot carry


def _bad_values(wtype: Any) -> List[Any]:
    if wtype is Boolean:
        return [0, 1, None, "1", b"\x01"]
    if is_int(wtype):
        return [wtype.lo - 1, wtype.hi + 1, "1", 1.0, None, b"\x01"]
    if wtype in (String, CompactString):
        return [None, 1, b"x", "x" * 32768, "\u00e9" * 16384, "\ud800"]
    if wtype in (NullableString, CompactNullableString):
        return [1, b"x", "x" * 32768, "\U0001f600" * 8192, "a\udfffb"]
    if wtype in (Bytes, NullableBytes, CompactBytes, CompactNullableBytes):
        nullable = wtype in (NullableBytes, CompactNullableBytes)
        return ([] if nullable else [None]) + ["x", 1, [1, 2]]
    if isinstance(wtype, Array):
        return [1, "abc", b"abc", {"a": 1}, object()]
    if isinstance(wtype, StructType):
        return [None, 5, "x", (), tuple(range(len(wtype.fields) + 1))]
    raise NotImplementedError(repr(wtype))


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=STRUCT_IDS)
def test_encoders_refuse_bad_values(cls: type) -> None:
    # Break one field at a time, at every depth, with every kind of bad value.
    sample = sample_value(struct_type(cls))
    encode(sample)
    accepted = []
    for path, wtype in paths(struct_type(cls)):
        for bad in _bad_values(wtype):
            try:
                encode(replace(sample, path, bad))
            except LocalProtocolError:
                continue
            accepted.append(f"{field_name(cls, path)}={bad!r:.30}")
    assert not accepted, f"encoded without LocalProtocolError: {accepted}"


@pytest.mark.parametrize("cls", ALL_STRUCTS, ids=STRUCT_IDS)
def test_whole_struct_of_wrong_shape(cls: type) -> None:
    sample = tuple(sample_value(struct_type(cls)))
    # One field short; for a struct without fields (ApiVersions requests), one too many.
    with pytest.raises(LocalProtocolError):
        encode(sample[:-1] if sample else (1,), cls)
    with pytest.raises(LocalProtocolError):
        encode([1, 2, 3], cls)


@pytest.mark.parametrize("value", [5, "x", (1, 2), None], ids=repr)
def test_encode_needs_a_struct(value: Any) -> None:
    with pytest.raises(LocalProtocolError):
        encode(value)


def test_int_edges_encode() -> None:
    for wtype in (Int16, Int32, Int64):
        for ok in (wtype.lo, wtype.hi):
            out: List[bytes] = []
            wtype.encode(ok, out)
            assert wtype.decode(out[0], 0) == (ok, wtype.size)


def test_longest_strings_encode() -> None:
    for text in ("x" * 32767, "\u00e9" * 16383 + "x"):
        out: List[bytes] = []
        String.encode(text, out)
        assert String.decode(b"".join(out), 0) == (text, 32769)


# (A request without fields, such as ApiVersions v0-v2, has nothing to break.)
@pytest.mark.parametrize("cls", [c for c in REQUESTS if struct_type(c).fields],
                         ids=lambda c: c.__name__)
def test_unencodable_request_leaves_framing_untouched(cls: type) -> None:
    framing = ClientFraming()
    bad = replace(sample_value(struct_type(cls)), (0,), object())
    with pytest.raises(LocalProtocolError) as info:
        framing.send_request(bad)
    assert info.value.api == BY_REQUEST[cls].name
    assert framing.in_flight == 0
    cid, _, _ = framing.send_request(sample_value(struct_type(cls)))
    assert cid == 0
