"""ApiVersions v0-v3: the registry, the helpers for negotiating, the KIP-511 error shape,
and the legacy broker that does not know the API.

Byte-for-byte conformance of every ApiVersions struct with kafka-python runs with
the other APIs in tests/protocol/test_protocol_conformance.py (and the round-trip and
hostile-bytes properties in tests/protocol/test_protocol_properties.py).
"""
import re
import struct
from typing import Any, Callable

import pytest
from kafka.protocol.old.api_versions import ApiVersionsResponse as KpApiVersionsResponse

import kiel
from kiel.exc import (
    ConfigError,
    HarnessError,
    TruncatedError,
    UnsupportedApiVersionError,
    UnsupportedVersionError,
    for_code,
)
from kiel.protocol import (
    API_VERSIONS,
    API_VERSIONS_V0,
    API_VERSIONS_V1,
    API_VERSIONS_V2,
    API_VERSIONS_V3,
    ApiVersionRange,
    ApiVersionsRequestV0,
    ApiVersionsRequestV1,
    ApiVersionsRequestV2,
    ApiVersionsRequestV3,
    ApiVersionsResponseV0,
    ApiVersionsResponseV1,
    ApiVersionsResponseV2,
    ApiVersionsResponseV3,
    MetadataRequest,
)
from kiel.protocol.api import BY_KEY, BY_REQUEST, BY_RESPONSE
from kiel.protocol.api_versions import (
    CLIENT_SOFTWARE_PATTERN,
    api_versions_request,
    client_software,
    pick_version,
    version_ranges,
)
from kiel.protocol.framing import ClientFraming, ServerFraming
from kiel.protocol.schema import encode
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.broker.rawclient import RawClient
from kiel.testing.tansu import api_versions

RANGES = [ApiVersionRange(0, 0, 11), ApiVersionRange(1, 0, 17), ApiVersionRange(18, 0, 4)]


def test_registered_versions() -> None:
    assert sorted(API_VERSIONS) == [0, 1, 2, 3]
    for version, api in API_VERSIONS.items():
        assert (api.key, api.version, api.name) == (18, version, "ApiVersions")
        assert BY_KEY[(18, version)] is api
        assert BY_REQUEST[api.request] is api and BY_RESPONSE[api.response] is api
        # Every version after v0 reads a v0-shaped error answer (KIP-511).
        assert api.fallback_response is (ApiVersionsResponseV0 if version else None)
    assert (API_VERSIONS_V0.request, API_VERSIONS_V1.request, API_VERSIONS_V2.request,
            API_VERSIONS_V3.request) == (
        ApiVersionsRequestV0, ApiVersionsRequestV1, ApiVersionsRequestV2, ApiVersionsRequestV3)
    assert (API_VERSIONS_V0.response, API_VERSIONS_V1.response, API_VERSIONS_V2.response,
            API_VERSIONS_V3.response) == (
        ApiVersionsResponseV0, ApiVersionsResponseV1, ApiVersionsResponseV2,
        ApiVersionsResponseV3)
    # v3 is the first flexible version; its answers keep response header v0.
    assert [api.flexible for api in API_VERSIONS.values()] == [False, False, False, True]
    assert {api.response_header.__name__ for api in API_VERSIONS.values()} == {"ResponseHeader"}
    assert API_VERSIONS_V3.request_header.__name__ == "RequestHeaderV2"


def test_request_builder() -> None:
    for version in (0, 1, 2):
        request = api_versions_request(version)
        assert type(request) is API_VERSIONS[version].request and encode(request) == b""
    request = api_versions_request(3)
    assert type(request) is ApiVersionsRequestV3
    assert request.client_software_name == "kiel"
    assert encode(request) == (b"\x05kiel" + bytes([len(kiel.__version__) + 1])
                               + kiel.__version__.encode() + b"\x00")
    for bad in (4, -1, "0", None, True):
        with pytest.raises(ConfigError):
            api_versions_request(bad)  # type: ignore[arg-type]


def test_request_frames_carry_the_version() -> None:
    framing = ClientFraming(client_id="c")
    for version in (0, 1, 2):
        _, frame, expects = framing.send_request(api_versions_request(version))
        assert expects
        assert frame == struct.pack(">ihhih", 11, 18, version, version, 1) + b"c"
    # v3: request header v2 (the client id still an int16-length string, then
    # an empty tagged section), and a flexible body.
    request = ApiVersionsRequestV3("kiel", "1.0")
    _, frame, _ = framing.send_request(request)
    header = struct.pack(">hhih", 18, 3, 3, 1) + b"c" + b"\x00"
    body = b"\x05kiel\x041.0\x00"
    assert frame == struct.pack(">i", len(header + body)) + header + body


@pytest.mark.parametrize("name, version, expected", [
    ("kiel", "1.0.0.dev0", ("kiel", "1.0.0.dev0")),
    ("kiel", "1.0.0.dev0+g3f2a.d20260101", ("kiel", "1.0.0.dev0-g3f2a.d20260101")),
    ("kiel", "1.0 beta_2", ("kiel", "1.0-beta-2")),
    ("-kiel-", ".1.", ("kiel", "1")),
    ("", "+", ("unknown", "unknown")),
    ("k\u00efel", "2", ("k-el", "2")),
])
def test_client_software_names_match_kafkas_pattern(name: str, version: str,
                                                     expected: Any) -> None:
    got = client_software(name, version)
    assert got == expected
    assert all(CLIENT_SOFTWARE_PATTERN.fullmatch(part) for part in got)


def test_kiels_own_version_is_acceptable_to_kafka() -> None:
    # Kafka answers INVALID_REQUEST to a v3 request whose names do not
    # match this pattern (KIP-511): the one kiel sends always does.
    request = api_versions_request(3)
    pattern = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
    assert pattern.fullmatch(request.client_software_name)
    assert pattern.fullmatch(request.client_software_version)


def test_version_ranges_and_pick_version() -> None:
    ranges = version_ranges(ApiVersionsResponseV1(0, RANGES, 0))
    assert ranges == {0: RANGES[0], 1: RANGES[1], 18: RANGES[2]}
    assert pick_version((0, 4), ranges[1]) == 4  # we know less than the broker
    assert pick_version((0, 20), ranges[1]) == 17  # the broker knows less than we do
    assert pick_version((3, 3), ranges[0]) == 3
    assert pick_version((12, 13), ranges[0]) is None  # no overlap
    assert pick_version((0, 0), ApiVersionRange(5, 1, 3)) is None
    assert pick_version((0, 4), ranges.get(99)) is None  # not listed at all
    assert version_ranges(ApiVersionsResponseV0(0, [])) == {}


def test_v2_response_is_the_v1_layout_under_its_own_class() -> None:
    v1 = ApiVersionsResponseV1(0, RANGES, 100)
    v2 = ApiVersionsResponseV2(0, RANGES, 100)
    assert encode(v1) == encode(v2)
    assert ServerFraming.send_response(1, v2) == ServerFraming.send_response(1, v1)
    framing = ClientFraming()
    framing.send_request(ApiVersionsRequestV2())
    [(_, got)] = framing.receive_data(ServerFraming.send_response(0, v2))
    assert type(got) is ApiVersionsResponseV2 and got.throttle_time_ms == 100


@pytest.mark.parametrize("request_value", [
    ApiVersionsRequestV0(), ApiVersionsRequestV1(), ApiVersionsRequestV2(),
    ApiVersionsRequestV3("kiel", "1")], ids=lambda r: type(r).__name__)
def test_unsupported_version_answer_is_v0_shaped(request_value: Any) -> None:
    # KIP-511: a broker asked with a version it does not speak answers with
    # a v0 body and error 35, listing what it speaks. The layout asked for
    # does not parse, and every version reads it as v0 (the registration's
    # fallback_response), as Kafka's Java client does.
    v0_error = ServerFraming.send_response(0, ApiVersionsResponseV0(35, [RANGES[2]]))
    framing = ClientFraming()
    framing.send_request(request_value)
    [(_, got)] = framing.receive_data(v0_error)
    assert type(got) is ApiVersionsResponseV0
    assert version_ranges(got) == {18: RANGES[2]}
    error = for_code(got.error_code)
    # 35 is registered (kiel acts on it while connecting): a broker error and
    # an unsupported version at once.
    assert error is UnsupportedApiVersionError and issubclass(error, UnsupportedVersionError)
    # kafka-python's KIP-511 fallback reads kiel's v0-shaped error body too.
    kp = KpApiVersionsResponse[2].decode(v0_error[8:])
    assert (kp.error_code, [tuple(k) for k in kp.api_keys]) == (35, [(18, 0, 4)])


def test_a_body_that_fits_neither_layout_raises_the_first_error() -> None:
    # Garbage is not made acceptable by the fallback: the v3 reading's error
    # is raised (the v0 reading failed too).
    framing = ClientFraming()
    framing.send_request(ApiVersionsRequestV3("kiel", "1"))
    with pytest.raises(TruncatedError) as info:
        framing.receive_data(struct.pack(">ii", 8, 0) + b"\x00\x00\x02\x00")
    assert "(flexible)" in str(info.value)  # the v3 reading's error


def test_a_legacy_broker_closes_the_connection(
        kafka_cluster_factory: Callable[..., EmbeddedCluster]) -> None:
    # Kafka 0.8.2 does not know ApiVersions and closes the connection: the
    # embedded broker does the same (it knows the API from kiel.protocol but
    # does not implement it), and records no error of its own.
    cluster = kafka_cluster_factory(brokers=1, zookeeper=False)
    address = cluster.address(1)
    for version in (0, 1, 2, 3):
        with RawClient(address, timeout=5) as client:
            client.send(api_versions_request(version))
            assert client.is_closed_by_peer(timeout=5)
    with pytest.raises(HarnessError, match="no ApiVersions answer"):
        api_versions(address, timeout=5)
    with RawClient(address, timeout=5) as client:  # the broker itself still serves
        response: Any = client.request(MetadataRequest([]))
        assert [b.node_id for b in response.brokers] == [1]
    cluster.check()
