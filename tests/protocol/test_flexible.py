"""Flexible versions (KIP-482): compact types, tagged fields, headers v2/v1,
ApiVersions v3 in the handshake, InitProducerId against Tansu.

* The new primitives round-trip (hypothesis) and hostile bytes raise only
  kiel's ProtocolError; compact strings, bytes and arrays have the exact
  bytes of Kafka's definitions (length + 1, 0 for null).
* Tagged fields: known ones decoded, defaults left out, unknown ones skipped
  and counted, sizes checked.
* One declaration gives both forms: a struct compiled flexible turns every
  string/bytes/array at every depth compact and ends each struct with its
  tagged section; the classic compile is unchanged.
* Every flexible message kiel sends or reads (ApiVersions v3, InitProducerId
  v2 to v5, request header v2, response header v1) is byte-for-byte the same
  as kafka-python 3's classes generated from Kafka's JSON definitions, both
  ways, bodies and whole frames (sample values and random ones).
* The handshake asks ApiVersions v3; a broker that answers it with
  UNSUPPORTED_VERSION in v0's layout is asked again with the highest version
  it lists (v0 when it lists none, as before Kafka 2.4); a 0.8 broker still
  closes the connection and gets the 0.8.2 versions (tests/testing/test_embedded_broker.py and
  tests/protocol/test_api_versions.py run that path against the embedded broker).
* Tansu (a broker we did not write) answers kiel's ApiVersions v3 and
  InitProducerId over a real kiel connection with a producer id and epoch.

Random and mutated frames of every registered API, the flexible ones
included, are fed to the framing objects in tests/protocol/test_protocol_properties.py.
"""
import asyncio
import socket
import struct
from typing import Annotated, Any, List, NamedTuple, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_header import RequestHeader as KpRequestHeader
from kafka.protocol.api_header import ResponseHeader as KpResponseHeader
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse
from tornado.iostream import IOStream, StreamClosedError
from tornado.tcpserver import TCPServer

import kiel
from kiel.connection import Connection
from kiel.exc import ConfigError, ProtocolError, TruncatedError, UnsupportedFeatureError
from kiel.protocol import (
    ApiVersionRange,
    ApiVersionsRequestV3,
    ApiVersionsResponseV0,
    ApiVersionsResponseV3,
    FinalizedFeatureKey,
    InitProducerIdRequestV2,
    InitProducerIdRequestV3,
    InitProducerIdRequestV4,
    InitProducerIdRequestV5,
    InitProducerIdResponseV2,
    InitProducerIdResponseV3,
    InitProducerIdResponseV4,
    InitProducerIdResponseV5,
    SupportedFeatureKey,
)
from kiel.protocol.api import (
    BY_KEY,
    BY_REQUEST,
    FLEXIBLE_FROM,
    Api,
    RequestHeader,
    RequestHeaderV2,
    ResponseHeader,
    ResponseHeaderV1,
    flexible_versions,
    register,
)
from kiel.protocol.framing import ClientFraming, ServerFraming
from kiel.protocol.init_producer_id import init_producer_id_request
from kiel.protocol.primitives import (
    Array,
    Bytes,
    CompactBytes,
    CompactNullableBytes,
    CompactNullableString,
    CompactString,
    Int16,
    Int32,
    Int64,
    NullableBytes,
    NullableString,
    String,
    UnsignedVarInt,
    decode_unsigned_varint,
    encode_unsigned_varint,
)
from kiel.protocol.schema import (
    NEVER_FLEXIBLE,
    StructType,
    Tagged,
    decode,
    encode,
    struct_type,
)
from kiel.protocol.versions import INIT_PRODUCER_ID, negotiate
from kiel.testing.tansu import TansuBroker
from tests.conftest import run
from tests.support.admin_counterparts import ADMIN_NESTED, ADMIN_SAMPLES
from tests.support.flexible_counterparts import FLEXIBLE_COUNTERPARTS
from tests.support.protocol_strategies import for_struct, for_wire_type
from tests.support.txn_counterparts import TXN_NESTED, TXN_SAMPLES

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KP = {cls: (kp, version) for cls, kp, version in FLEXIBLE_COUNTERPARTS}
# kiel's nested struct -> the name of kafka-python's nested class.
KP_NESTED = {ApiVersionRange: "ApiVersion", SupportedFeatureKey: "SupportedFeatureKey",
             FinalizedFeatureKey: "FinalizedFeatureKey", **ADMIN_NESTED, **TXN_NESTED}


def only_protocol_errors(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ProtocolError:
        return None


# --------------------------------------------------------------------------
# Primitives


@FAST
@given(value=st.integers(0, 2**32 - 1))
def test_unsigned_varint_round_trip(value: int) -> None:
    data = encode_unsigned_varint(value)
    assert decode_unsigned_varint(data, 0) == (value, len(data))
    out: List[bytes] = []
    UnsignedVarInt.encode(value, out)
    assert UnsignedVarInt.decode(b"".join(out), 0) == (value, len(data))
    assert len(data) == max(1, (value.bit_length() + 6) // 7)


def test_unsigned_varint_bytes() -> None:
    assert [encode_unsigned_varint(v) for v in (0, 1, 127, 128, 300, 2**32 - 1)] == [
        b"\x00", b"\x01", b"\x7f", b"\x80\x01", b"\xac\x02", b"\xff\xff\xff\xff\x0f"]
    with pytest.raises(TruncatedError):
        decode_unsigned_varint(b"\x80\x80", 0)
    with pytest.raises(ProtocolError):
        decode_unsigned_varint(b"\xff\xff\xff\xff\xff\x01", 0)  # 6 bytes
    with pytest.raises(ProtocolError):
        decode_unsigned_varint(b"\xff\xff\xff\xff\x1f", 0)  # 2**33 - 1: over 32 bits


@pytest.mark.parametrize("wtype, value, expected", [
    (CompactString, "", b"\x01"),
    (CompactString, "kiel", b"\x05kiel"),
    (CompactNullableString, None, b"\x00"),
    (CompactNullableString, "\u00e9", b"\x03\xc3\xa9"),
    (CompactBytes, b"", b"\x01"),
    (CompactNullableBytes, None, b"\x00"),
    (CompactBytes, b"x" * 200, b"\xc9\x01" + b"x" * 200),
    (Array(Int32, compact=True), [1, 2], b"\x03\x00\x00\x00\x01\x00\x00\x00\x02"),
    (Array(Int32, compact=True), [], b"\x01"),
    (Array(Int32, compact=True), None, b"\x00"),
    (Array(String, compact=True), ["a"], b"\x02\x00\x01a"),  # item form as given
])
def test_compact_forms_bytes(wtype: Any, value: Any, expected: bytes) -> None:
    out: List[bytes] = []
    wtype.encode(value, out)
    assert b"".join(out) == expected
    got, end = wtype.decode(expected, 0)
    assert end == len(expected)
    assert got == ([] if value is None and isinstance(wtype, Array) else value)


def test_flexible_forms_of_the_classic_types() -> None:
    assert String.flexible_form() is CompactString
    assert NullableString.flexible_form() is CompactNullableString
    assert Bytes.flexible_form() is CompactBytes
    assert NullableBytes.flexible_form() is CompactNullableBytes
    assert Int64.flexible_form() is Int64 and CompactString.flexible_form() is CompactString
    nested = Array(Array(String)).flexible_form()
    assert isinstance(nested, Array) and nested.compact
    assert nested.item.compact and nested.item.item is CompactString  # type: ignore[attr-defined]
    array = Array(String)
    assert array.flexible_form() is array.flexible_form()  # built once


@pytest.mark.parametrize("wtype", [CompactString, CompactNullableString, CompactBytes,
                                   CompactNullableBytes, Array(Int16, compact=True),
                                   Array(CompactString, compact=True)], ids=repr)
@FAST
@given(data=st.data(), prefix=st.binary(max_size=4))
def test_compact_round_trips(wtype: Any, data: Any, prefix: bytes) -> None:
    value = data.draw(for_wire_type(wtype))
    out: List[bytes] = []
    wtype.encode(value, out)
    encoded = prefix + b"".join(out)
    assert wtype.decode(memoryview(encoded), len(prefix)) == (value, len(encoded))


@pytest.mark.parametrize("wtype", [CompactString, CompactNullableString, CompactBytes,
                                   CompactNullableBytes, Array(Int16, compact=True),
                                   Array(CompactString, compact=True), UnsignedVarInt], ids=repr)
@FAST
@given(raw=st.binary(max_size=40))
def test_random_bytes_into_compact_types_raise_only_protocol_errors(wtype: Any,
                                                                   raw: bytes) -> None:
    only_protocol_errors(wtype.decode, raw, 0)


def test_compact_refusals() -> None:
    with pytest.raises(ProtocolError):
        CompactString.decode(b"\x00", 0)  # null in a non-nullable string
    with pytest.raises(ProtocolError):
        CompactBytes.decode(b"\x00", 0)
    with pytest.raises(ProtocolError):  # 32768 bytes: Kafka refuses the length itself
        CompactString.decode(encode_unsigned_varint(32769) + b"x" * 32768, 0)
    with pytest.raises(TruncatedError):
        CompactBytes.decode(encode_unsigned_varint(2**32 - 1), 0)
    with pytest.raises(TruncatedError):  # a count beyond the bytes left, refused at once
        Array(Int64, compact=True).decode(encode_unsigned_varint(2**31), 0)
    with pytest.raises(ProtocolError):
        CompactString.decode(b"\x03\xc3\x28", 0)  # not UTF-8


# --------------------------------------------------------------------------
# Tagged fields and the flexible compile


class _Inner(NamedTuple):
    name: Annotated[str, String]
    blobs: Annotated[List[bytes], Array(Bytes)]


class _Tagged(NamedTuple):
    id: Annotated[int, Int32]
    inner: Annotated[List[_Inner], Array(_Inner)]
    label: Annotated[Optional[str], NullableString, NEVER_FLEXIBLE]
    epoch: Annotated[int, Int64, Tagged(1)] = -1
    note: Annotated[Optional[str], NullableString, Tagged(0)] = None
    items: Annotated[List[_Inner], Array(_Inner), Tagged(5)] = []


def test_a_flexible_compile_makes_every_depth_compact() -> None:
    flexible = struct_type(_Tagged)  # tagged fields: flexible by default
    assert flexible.flexible and struct_type(_Tagged, True) is flexible
    types = dict(flexible.fields)
    assert types["label"] is NullableString  # NEVER_FLEXIBLE
    inner = types["inner"]
    assert isinstance(inner, Array) and inner.compact
    assert isinstance(inner.item, StructType) and inner.item.flexible
    assert dict(inner.item.fields)["name"] is CompactString
    assert dict(inner.item.fields)["blobs"].item is CompactBytes  # type: ignore[attr-defined]
    # The nested class compiled on its own stays classic.
    assert not struct_type(_Inner).flexible and dict(struct_type(_Inner).fields)["name"] is String
    value = _Tagged(7, [_Inner("a", [b"b"])], "l")
    assert encode(value) == (
        b"\x00\x00\x00\x07"                    # id
        b"\x02" b"\x02a" b"\x02\x02b" b"\x00"  # inner: compact array of one flexible _Inner
        b"\x00\x01l"                           # label, classic
        b"\x00")                               # no tagged field differs from its default


def test_tagged_fields_in_tag_order_and_only_when_not_default() -> None:
    value = _Tagged(1, [], None, epoch=3, note="n", items=[_Inner("i", [])])
    encoded = encode(value)
    assert encoded.endswith(
        b"\x03"                                  # three tagged fields
        b"\x00\x02\x02n"                         # tag 0 (note), size 2
        b"\x01\x08\x00\x00\x00\x00\x00\x00\x00\x03"  # tag 1 (epoch), size 8
        b"\x05\x05\x02\x02i\x01\x00")            # tag 5 (items), size 5
    assert decode(_Tagged, encoded) == (value, len(encoded))
    # 0 is not the default False-like value of anything: only equal values of
    # the same type are left out; an empty list is the default of an array.
    assert encode(_Tagged(1, [], None, items=[])) == encode(_Tagged(1, [], None))


def _with_tags(*fields: bytes) -> bytes:
    return b"\x00\x00\x00\x01\x01\xff\xff" + bytes([len(fields)]) + b"".join(fields)


def test_unknown_tags_are_skipped_and_counted() -> None:
    compiled = struct_type(_Tagged)
    before = compiled.unknown_tags
    data = _with_tags(b"\x02\x03abc", b"\x01\x08" + struct.pack(">q", 9), b"\x7f\x00")
    value, end = decode(_Tagged, data)
    assert end == len(data) and value == _Tagged(1, [], None, epoch=9)
    assert compiled.unknown_tags == before + 2
    # Out of order tags are read as the Java client reads them.
    data = _with_tags(b"\x01\x08" + struct.pack(">q", 9), b"\x00\x02\x02n")
    assert decode(_Tagged, data)[0] == _Tagged(1, [], None, epoch=9, note="n")


@pytest.mark.parametrize("data, error", [
    (_with_tags(b"\x01\x09" + struct.pack(">q", 9) + b"\x00"), ProtocolError),  # size too big
    (_with_tags(b"\x01\x04\x00\x00\x00\x09"), TruncatedError),  # int64 in 4 bytes
    (_with_tags(b"\x02\x05ab"), TruncatedError),  # unknown tag past the end
    (b"\x00\x00\x00\x01\x01\xff\xff\x05\x00", TruncatedError),  # 5 tags in 1 byte
    (b"\x00\x00\x00\x01\x01\xff\xff", TruncatedError),  # no tagged section
])
def test_bad_tagged_sections(data: bytes, error: type) -> None:
    with pytest.raises(error):
        decode(_Tagged, data)


@FAST
@given(value=for_struct(_Tagged))
def test_tagged_struct_round_trip(value: Any) -> None:
    encoded = encode(value)
    assert decode(_Tagged, encoded) == (value, len(encoded))


def test_declaration_errors() -> None:
    class NoDefault(NamedTuple):
        a: Annotated[int, Int32, Tagged(0)]

    class TwoTags(NamedTuple):
        a: Annotated[int, Int32, Tagged(0)] = 0
        b: Annotated[int, Int32, Tagged(0)] = 0

    class Plain(NamedTuple):
        a: Annotated[int, Int32]

    for bad in (NoDefault, TwoTags):
        with pytest.raises(TypeError):
            struct_type(bad)
    with pytest.raises(TypeError, match="only in flexible"):
        struct_type(_Tagged, False)
    # A flexible compile of a struct without tagged fields: an empty section.
    assert encode(Plain(1)) == b"\x00\x00\x00\x01"
    out: List[bytes] = []
    struct_type(Plain, True).encode(Plain(1), out)
    assert b"".join(out) == b"\x00\x00\x00\x01\x00"


def test_registry_declares_flexibility_once() -> None:
    assert FLEXIBLE_FROM[18] == 3 and FLEXIBLE_FROM[22] == 2
    with pytest.raises(TypeError):
        flexible_versions(18, 4)  # declared differently
    with pytest.raises(TypeError):
        flexible_versions(18, 3)  # the same, but after its versions were registered
    # A flexible message class cannot serve a classic version.
    with pytest.raises(TypeError):
        register(Api(18, 2, "x", InitProducerIdRequestV2, InitProducerIdResponseV2))
    api = BY_REQUEST[InitProducerIdRequestV3]
    assert api.flexible and api.request_header is RequestHeaderV2
    assert api.response_header is ResponseHeaderV1
    v0 = BY_KEY[(3, 0)]
    assert (v0.flexible, v0.request_header, v0.response_header) == (
        False, RequestHeader, ResponseHeader)


# --------------------------------------------------------------------------
# Byte for byte against kafka-python 3 (generated from Kafka's definitions)


def to_kp(value: Any) -> Any:
    """kafka-python's instance holding the same values as kiel's ``value``."""
    kp, version = KP[type(value)]
    return kp(version=version, **_kp_fields(value, kp))


def _kp_fields(value: Any, kp: Any) -> dict:
    fields = {}
    for (name, wtype), item in zip(struct_type(type(value)).fields, value):
        if isinstance(wtype, Array) and isinstance(wtype.item, StructType):
            nested = getattr(kp, KP_NESTED[wtype.item.cls])
            item = [nested(**_kp_fields(x, nested)) for x in item]
        elif name in KP_BITFIELDS:
            item = _to_bits(item)
        fields[name] = item
    return fields


# Fields kafka-python reads as a set of bit numbers (None for INT32_MIN, "not
# asked"), where kiel keeps Kafka's int32: DescribeCluster's authorized operations.
KP_BITFIELDS = {"authorized_operations"}


def _to_bits(value: int) -> Any:
    unsigned = value & 0xFFFFFFFF
    bits = {b for b in range(32) if unsigned >> b & 1}
    return None if bits == {31} else bits


def _from_bits(bits: Any) -> int:
    unsigned = sum(1 << b for b in ({31} if bits is None else bits))
    return unsigned - (1 << 32) if unsigned >= 1 << 31 else unsigned


def from_kp(kp_value: Any, cls: type) -> Any:
    """kiel's ``cls`` from kafka-python's decoded value, field by field by name."""
    values = []
    for name, wtype in struct_type(cls).fields:
        item = getattr(kp_value, name)
        if isinstance(wtype, Array) and isinstance(wtype.item, StructType):
            item = [from_kp(x, wtype.item.cls) for x in item]
        elif isinstance(item, (bytearray, memoryview)):
            item = bytes(item)
        elif name in KP_BITFIELDS:
            item = _from_bits(item)
        values.append(item)
    return cls(*values)


FEATURES = ApiVersionsResponseV3(
    0, [ApiVersionRange(0, 3, 11), ApiVersionRange(18, 0, 4), ApiVersionRange(22, 0, 5)], 12,
    supported_features=[SupportedFeatureKey("metadata.version", 1, 20),
                        SupportedFeatureKey("kraft.version", 0, 1)],
    finalized_features_epoch=44,
    finalized_features=[FinalizedFeatureKey("metadata.version", 20, 20)],
    zk_migration_ready=True)

SAMPLES = [
    ApiVersionsRequestV3("kiel", kiel.__version__),
    ApiVersionsRequestV3("", "\u00e9t\u00e9"),
    FEATURES,
    ApiVersionsResponseV3(35, [], 0),
    InitProducerIdRequestV2(None, 60000),
    InitProducerIdRequestV2("txn-\u00e9", 2**31 - 1),
    InitProducerIdRequestV3(None, 60000),
    InitProducerIdRequestV4("t", 1, 2**63 - 1, 2**15 - 1),
    InitProducerIdRequestV5(None, 60000, 1000, 3),
    InitProducerIdResponseV2(0, 0, 1000, 0),
    InitProducerIdResponseV3(100, 47, -1, -1),
    InitProducerIdResponseV4(0, 90, 2**63 - 1, 2**15 - 1),
    InitProducerIdResponseV5(0, 0, 7, 1),
    *(v for v in ADMIN_SAMPLES if type(v) in KP),
    *(v for v in TXN_SAMPLES if type(v) in KP),
]
IDS = [f"{type(v).__name__}-{i}" for i, v in enumerate(SAMPLES)]


def test_every_flexible_message_has_a_judge() -> None:
    flexible = [api for api in BY_KEY.values() if api.flexible]
    assert {c for api in flexible for c in (api.request, api.response)} == set(KP)
    assert {type(v) for v in SAMPLES} == set(KP)


def kp_decode(cls: type, data: bytes) -> Any:
    """kafka-python's decode of ``cls``'s counterpart. Its ApiVersions
    response reads every error answer as v0 (KIP-511); kiel keeps that
    fallback in the framing, so bodies are compared by schema alone."""
    kp, version = KP[cls]
    if kp is KpApiVersionsResponse:
        return super(KpApiVersionsResponse, kp).decode(data, version=version, header=False)
    return kp.decode(data, version=version, header=False)


def _check_body(value: Any) -> None:
    kp_bytes = bytes(to_kp(value).encode(header=False))
    assert encode(value) == kp_bytes
    assert decode(type(value), kp_bytes) == (value, len(kp_bytes))
    assert from_kp(kp_decode(type(value), encode(value)), type(value)) == value


@pytest.mark.parametrize("value", SAMPLES, ids=IDS)
def test_bodies_equal_kafka_python(value: Any) -> None:
    _check_body(value)


@pytest.mark.parametrize("cls", list(KP), ids=lambda c: c.__name__)
@FAST
@given(data=st.data())
def test_random_bodies_equal_kafka_python(cls: type, data: Any) -> None:
    _check_body(data.draw(for_struct(cls)))


@pytest.mark.parametrize("value", [v for v in SAMPLES if type(v) in BY_REQUEST],
                         ids=[i for i, v in zip(IDS, SAMPLES) if type(v) in BY_REQUEST])
@pytest.mark.parametrize("client_id", ["kiel", None, "\u00e9"])
def test_request_frames_equal_kafka_python(value: Any, client_id: Any) -> None:
    # Request header v2: the client id stays an int16-length string (Kafka's
    # "flexibleVersions": "none"), then an empty tagged section.
    framing = ClientFraming(client_id=client_id)
    framing._next_id = 2**31 - 1
    cid, frame, expects = framing.send_request(value)
    kp = to_kp(value)
    kp.with_header(correlation_id=cid, client_id=client_id)
    assert frame == bytes(kp.encode(header=True, framed=True))
    assert expects
    # The broker side reads kafka-python's frame back.
    [(header, api, got)] = ServerFraming().receive_data(frame)
    assert got == value and api is BY_REQUEST[type(value)]
    assert tuple(header) == (api.key, api.version, cid, client_id)


@pytest.mark.parametrize("value", [v for v in SAMPLES if type(v) not in BY_REQUEST],
                         ids=[i for i, v in zip(IDS, SAMPLES) if type(v) not in BY_REQUEST])
def test_response_frames_equal_kafka_python(value: Any) -> None:
    # Response header v1 (a tagged section after the correlation id), except
    # ApiVersions, whose header stays v0.
    frame = ServerFraming.send_response(77, value)
    kp = to_kp(value)
    kp.with_header(correlation_id=77)
    assert frame == bytes(kp.encode(header=True, framed=True))
    request = next(v for v in SAMPLES if BY_REQUEST.get(type(v)) is not None
                   and BY_REQUEST[type(v)].response is type(value))
    framing = ClientFraming()
    framing._next_id = 77
    framing.send_request(request)
    assert framing.receive_data(frame) == [(77, value)]


@pytest.mark.parametrize("correlation_id", [0, 1, 2**31 - 1])
@pytest.mark.parametrize("client_id", ["kiel", "", None])
def test_headers_equal_kafka_python(correlation_id: int, client_id: Any) -> None:
    kp = KpRequestHeader(request_api_key=22, request_api_version=3,
                         correlation_id=correlation_id, client_id=client_id)
    header = RequestHeaderV2(22, 3, correlation_id, client_id)
    assert encode(header) == bytes(kp.encode(flexible=True))
    assert encode(RequestHeader(22, 3, correlation_id, client_id)) == bytes(
        kp.encode(flexible=False))
    assert decode(RequestHeaderV2, encode(header)) == (header, len(encode(header)))
    assert encode(ResponseHeaderV1(correlation_id)) == bytes(
        KpResponseHeader(correlation_id=correlation_id).encode(flexible=True))


def test_a_response_header_with_tagged_fields_is_read() -> None:
    # A broker may put tagged fields in response header v1: skipped, counted.
    framing = ClientFraming()
    framing.send_request(InitProducerIdRequestV3(None, 1000))
    body = encode(InitProducerIdResponseV3(0, 0, 5, 1))
    header = struct.pack(">i", 0) + b"\x01\x09\x02hi"
    before = struct_type(ResponseHeaderV1).unknown_tags
    [(_, got)] = framing.receive_data(struct.pack(">i", len(header + body)) + header + body)
    assert got == InitProducerIdResponseV3(0, 0, 5, 1)
    assert struct_type(ResponseHeaderV1).unknown_tags == before + 1


def test_init_producer_id_request_builder() -> None:
    assert init_producer_id_request(2) == InitProducerIdRequestV2(None, 60000)
    assert type(init_producer_id_request(5, "t", 10, 3, 4)) is InitProducerIdRequestV5
    assert init_producer_id_request(3, producer_id=9, producer_epoch=1)[2:] == (9, 1)
    with pytest.raises(UnsupportedFeatureError):
        init_producer_id_request(2, producer_id=9, producer_epoch=1)
    for bad in (0, 1, 6, "3", None):
        with pytest.raises(ConfigError):
            init_producer_id_request(bad)  # type: ignore[arg-type]


def test_negotiation_picks_init_producer_id() -> None:
    def ranges(table: dict) -> dict:
        return {k: ApiVersionRange(k, lo, hi) for k, (lo, hi) in table.items()}

    assert negotiate(ranges({22: (0, 5)})).of(INIT_PRODUCER_ID) == 5
    assert negotiate(ranges({22: (0, 3)})).of(INIT_PRODUCER_ID) == 3
    with pytest.raises(UnsupportedFeatureError):  # a 2.0 broker: v0-v1 only
        negotiate(ranges({22: (0, 1)})).of(INIT_PRODUCER_ID)


# --------------------------------------------------------------------------
# The handshake: ApiVersions v3, and the fallback of older brokers


class OldBroker(TCPServer):
    """A loopback peer speaking kiel's server framing that answers
    ApiVersions as a broker of a given age does: versions above ``max_v``
    get UNSUPPORTED_VERSION in v0's layout, listing the ranges (Kafka 2.4+)
    or not (older); the others get ``ranges``. Records what it was asked."""

    def __init__(self, max_v: int, lists_ranges: bool, ranges: List[ApiVersionRange]) -> None:
        super().__init__()
        self.max_v, self.lists_ranges, self.ranges = max_v, lists_ranges, ranges
        self.asked: List[int] = []
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self.add_sockets([sock])

    async def handle_stream(self, stream: IOStream, address: Any) -> None:
        framing = ServerFraming()
        try:
            while True:
                for header, api, _ in framing.receive_data(
                        await stream.read_bytes(65536, partial=True)):
                    assert api.key == 18
                    self.asked.append(api.version)
                    if api.version > self.max_v:
                        answer: Any = ApiVersionsResponseV0(
                            35, self.ranges if self.lists_ranges else [])
                    else:
                        answer = api.response(0, self.ranges, *(
                            [0] if api.version else []))
                    await stream.write(framing.send_response(header.correlation_id, answer))
        except StreamClosedError:
            pass


RANGES = [ApiVersionRange(0, 0, 7), ApiVersionRange(1, 0, 10), ApiVersionRange(3, 0, 7),
          ApiVersionRange(18, 0, 2)]


@pytest.mark.parametrize("lists_ranges, max_v, asked", [
    (True, 2, [3, 2]),    # Kafka 2.1-2.3 style answer with ranges (KIP-511 shape): v2
    (False, 2, [3, 0]),   # before KIP-511: no ranges, ask v0 as the Java client does
    (False, 0, [3, 0]),   # Kafka 0.10.0: v0 only
])
def test_an_older_broker_is_asked_again(lists_ranges: bool, max_v: int,
                                        asked: List[int]) -> None:
    async def main() -> None:
        broker = OldBroker(max_v, lists_ranges, RANGES)
        conn = Connection("127.0.0.1", broker.port, broker_id=1)
        try:
            await conn.connect()
            assert broker.asked == asked
            assert conn.versions is not None and conn.versions.source == "ApiVersions"
            assert conn.versions.of(0) == 3 and conn.versions.of(1) == 4
            assert conn.versions.of(18) == 2
        finally:
            conn.close()
            broker.stop()

    run(main())


def test_a_current_broker_answers_v3_at_once() -> None:
    async def main() -> None:
        broker = OldBroker(3, True, RANGES[:-1] + [ApiVersionRange(18, 0, 4)])
        conn = Connection("127.0.0.1", broker.port, broker_id=1)
        try:
            await conn.connect()
            assert broker.asked == [3]
            assert conn.versions is not None and conn.versions.of(18) == 3
        finally:
            conn.close()
            broker.stop()

    run(main())


# --------------------------------------------------------------------------
# Tansu


def test_tansu_answers_api_versions_v3_and_init_producer_id(tansu_broker: TansuBroker) -> None:
    async def main() -> None:
        conn = Connection(tansu_broker.host, tansu_broker.port, broker_id=0)
        try:
            await conn.connect()
            versions = conn.versions
            assert versions is not None and versions.source == "ApiVersions"
            assert versions.broker is not None and versions.broker[18].max_version >= 3
            version = versions.of(INIT_PRODUCER_ID)
            assert version >= 3  # Tansu serves InitProducerId from v3 (and lists v0-5)
            first = await conn.send(init_producer_id_request(version))
            second = await conn.send(init_producer_id_request(version))
        finally:
            conn.close()
        for answer in (first, second):
            assert type(answer) is BY_KEY[(22, version)].response
            assert answer.error_code == 0, answer
            assert answer.producer_id >= 0 and answer.producer_epoch >= 0
        assert first.producer_id != second.producer_id  # a new id each time

    run(main())


def test_tansu_reads_api_versions_v3_with_kiels_names(tansu_broker: TansuBroker) -> None:
    # The v3 request as the handshake sends it, and a raw v3 answer: the
    # response header stays v0 and the body parses in the flexible layout.
    async def main() -> None:
        reader, writer = await asyncio.open_connection(tansu_broker.host, tansu_broker.port)
        try:
            framing = ClientFraming("kiel")
            _, frame, _ = framing.send_request(ApiVersionsRequestV3("kiel", "1.0.0"))
            writer.write(frame)
            answers: List[Any] = []
            while not answers:
                answers = framing.receive_data(await asyncio.wait_for(reader.read(65536), 10))
        finally:
            writer.close()
        [(_, answer)] = answers
        assert type(answer) is ApiVersionsResponseV3 and answer.error_code == 0
        assert {r.api_key for r in answer.api_keys} >= {0, 1, 3, 18, 22}

    run(main())

