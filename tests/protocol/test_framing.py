"""kiel.protocol.framing: correlation ids, chunking, the 0.8.2 quirks, bad frames."""
import os
import re
import struct
import textwrap
from typing import Any, List, Tuple

import pytest

from kiel.exc import (
    CorrelationIdError,
    FrameTooLargeError,
    LocalProtocolError,
    ProtocolError,
    TruncatedError,
    UnsupportedVersionError,
)
from kiel.protocol import (
    GROUP_COORDINATOR_V0,
    METADATA_V0,
    BrokerMetadata,
    FetchPartitionData,
    FetchRequest,
    FetchTopicData,
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetFetchRequest,
    OffsetFetchTopicData,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    RequestHeader,
)
from kiel.protocol.framing import DEFAULT_MAX_FRAME_SIZE, ClientFraming, ServerFraming

METADATA_REQ = MetadataRequest(["t"])
METADATA_RESP = MetadataResponse([BrokerMetadata(1, "localhost", 9092)], [])
GC_REQ = GroupCoordinatorRequest("group")
GC_RESP = GroupCoordinatorResponse(0, 1, "localhost", 9092)
MAX_ID = 2**31 - 1


def response_frame(correlation_id: int, response: Any) -> bytes:
    return ServerFraming.send_response(correlation_id, response)


def raw_frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


# --------------------------------------------------------------------------
# Correlation ids


def test_correlation_ids_are_per_instance() -> None:
    a, b = ClientFraming(), ClientFraming()
    assert [a.send_request(METADATA_REQ)[0] for _ in range(3)] == [0, 1, 2]
    assert b.send_request(METADATA_REQ)[0] == 0
    assert a.send_request(METADATA_REQ)[0] == 3
    assert (a.in_flight, b.in_flight) == (4, 1)


def test_correlation_id_wraps_after_2_31_minus_1() -> None:
    framing = ClientFraming()
    framing._next_id = MAX_ID - 1
    ids = [framing.send_request(METADATA_REQ)[0] for _ in range(3)]
    assert ids == [MAX_ID - 1, MAX_ID, 0]
    # The responses still match, across the wrap.
    data = b"".join(response_frame(cid, METADATA_RESP) for cid in ids)
    assert framing.receive_data(data) == [(cid, METADATA_RESP) for cid in ids]


def test_out_of_order_response_is_refused() -> None:
    framing = ClientFraming()
    framing.send_request(METADATA_REQ)
    framing.send_request(METADATA_REQ)
    with pytest.raises(CorrelationIdError) as info:
        framing.receive_data(response_frame(1, METADATA_RESP))
    assert info.value.api == "Metadata"


def test_unknown_correlation_id_is_refused() -> None:
    framing = ClientFraming()
    framing.send_request(METADATA_REQ)
    with pytest.raises(CorrelationIdError):
        framing.receive_data(response_frame(99, METADATA_RESP))


def test_response_with_nothing_in_flight_is_refused() -> None:
    with pytest.raises(CorrelationIdError):
        ClientFraming().receive_data(response_frame(0, METADATA_RESP))


def test_group_coordinator_quirk_correlation_id_0_is_accepted() -> None:
    # Kafka 0.8.2 can answer GroupCoordinator (ConsumerMetadata) v0 with id 0.
    framing = ClientFraming()
    framing.send_request(METADATA_REQ)
    framing.receive_data(response_frame(0, METADATA_RESP))
    cid, _, _ = framing.send_request(GC_REQ)
    assert cid == 1
    assert framing.receive_data(response_frame(0, GC_RESP)) == [(1, GC_RESP)]
    assert framing.in_flight == 0


def test_correlation_id_0_for_another_api_is_refused() -> None:
    framing = ClientFraming()
    framing.send_request(METADATA_REQ)
    cid, _, _ = framing.send_request(METADATA_REQ)
    framing.receive_data(response_frame(0, METADATA_RESP))
    assert cid == 1
    with pytest.raises(CorrelationIdError):
        framing.receive_data(response_frame(0, METADATA_RESP))


def test_quirk_only_covers_the_oldest_request() -> None:
    # Id 0 stands in for the GroupCoordinator request at the head of the
    # queue, not for one queued behind a Metadata request.
    framing = ClientFraming()
    framing.send_request(METADATA_REQ)
    framing.send_request(METADATA_REQ)
    framing.send_request(GC_REQ)
    framing.receive_data(response_frame(0, METADATA_RESP))
    with pytest.raises(CorrelationIdError):
        framing.receive_data(response_frame(0, GC_RESP))


# --------------------------------------------------------------------------
# Produce with acks=0


def test_acks_0_produce_expects_no_response_and_is_not_tracked() -> None:
    framing = ClientFraming()
    produce = ProduceRequest(0, 1000, [ProduceTopicData("t", [ProducePartitionData(0, b"")])])
    cid0, frame, expects = framing.send_request(produce)
    assert (cid0, expects, framing.in_flight) == (0, False, 0)
    assert frame[4:6] == b"\x00\x00"  # api key 0 (Produce)
    cid1, _, expects = framing.send_request(METADATA_REQ)
    assert (cid1, expects, framing.in_flight) == (1, True, 1)
    assert framing.receive_data(response_frame(1, METADATA_RESP)) == [(1, METADATA_RESP)]


@pytest.mark.parametrize("acks", [1, -1, 2])
def test_acked_produce_is_tracked(acks: int) -> None:
    framing = ClientFraming()
    cid, _, expects = framing.send_request(ProduceRequest(acks, 1000, []))
    assert expects and framing.in_flight == 1
    assert framing.receive_data(response_frame(cid, ProduceResponse([]))) == [
        (cid, ProduceResponse([]))
    ]


# --------------------------------------------------------------------------
# Chunking


def _three_responses() -> Tuple[ClientFraming, bytes, List[Tuple[int, Any]]]:
    framing = ClientFraming()
    expected = []
    for request, response in ((METADATA_REQ, METADATA_RESP), (GC_REQ, GC_RESP),
                              (METADATA_REQ, MetadataResponse([], []))):
        cid, _, _ = framing.send_request(request)
        expected.append((cid, response))
    data = b"".join(response_frame(cid, resp) for cid, resp in expected)
    return framing, data, expected


def test_responses_split_at_every_byte_boundary() -> None:
    _, data, expected = _three_responses()
    for cut in range(len(data) + 1):
        framing, _, _ = _three_responses()
        got = framing.receive_data(data[:cut]) + framing.receive_data(data[cut:])
        assert got == expected, cut
        assert framing.in_flight == 0


def test_responses_one_byte_at_a_time() -> None:
    framing, data, expected = _three_responses()
    got = []
    for i in range(len(data)):
        got += framing.receive_data(data[i:i + 1])
    assert got == expected


def test_responses_coalesced_in_one_chunk() -> None:
    framing, data, expected = _three_responses()
    assert framing.receive_data(memoryview(data)) == expected
    assert framing.receive_data(b"") == []


def test_requests_split_at_every_byte_boundary() -> None:
    client = ClientFraming(client_id="me")
    requests = [METADATA_REQ, GC_REQ,
                FetchRequest(-1, 100, 1, [FetchTopicData("t", [FetchPartitionData(0, 5, 99)])]),
                OffsetFetchRequest("g", [OffsetFetchTopicData("t", [0, 1])])]
    data = b"".join(client.send_request(r)[1] for r in requests)
    for cut in range(len(data) + 1):
        server = ServerFraming()
        got = server.receive_data(data[:cut]) + server.receive_data(data[cut:])
        assert [req for _, _, req in got] == requests
        assert [h.correlation_id for h, _, _ in got] == [0, 1, 2, 3]
        assert {h.client_id for h, _, _ in got} == {"me"}


# --------------------------------------------------------------------------
# Frame sizes and trailing bytes


@pytest.mark.parametrize("make", [ClientFraming, ServerFraming], ids=["client", "server"])
@pytest.mark.parametrize("size", [101, 2**31 - 1, -1, -(2**31)])
def test_bad_frame_size_is_refused_before_the_body(make: Any, size: int) -> None:
    framing = make(max_frame_size=100)
    if isinstance(framing, ClientFraming):
        framing.send_request(METADATA_REQ)
    # Only the 4-byte size prefix has arrived: no body is waited for.
    with pytest.raises(FrameTooLargeError):
        framing.receive_data(struct.pack(">i", size))


def test_frame_at_max_size_is_accepted() -> None:
    framing = ClientFraming(max_frame_size=len(response_frame(0, METADATA_RESP)) - 4)
    framing.send_request(METADATA_REQ)
    assert framing.receive_data(response_frame(0, METADATA_RESP)) == [(0, METADATA_RESP)]


def test_default_max_frame_size() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 100 * 1024 * 1024
    framing = ClientFraming()
    framing.send_request(METADATA_REQ)
    with pytest.raises(FrameTooLargeError):
        framing.receive_data(struct.pack(">i", DEFAULT_MAX_FRAME_SIZE + 1))


@pytest.mark.parametrize("size", [0, 3])
def test_frame_shorter_than_the_response_header(size: int) -> None:
    framing = ClientFraming()
    framing.send_request(METADATA_REQ)
    with pytest.raises(TruncatedError):
        framing.receive_data(struct.pack(">i", size) + b"\x00" * size)


def test_response_with_trailing_bytes_is_refused() -> None:
    framing = ClientFraming()
    framing.send_request(GC_REQ)
    frame = response_frame(0, GC_RESP)
    with pytest.raises(ProtocolError, match="trailing"):
        framing.receive_data(raw_frame(frame[4:] + b"\x00"))


def test_request_with_trailing_bytes_is_refused() -> None:
    _, frame, _ = ClientFraming().send_request(GC_REQ)
    with pytest.raises(ProtocolError, match="trailing"):
        ServerFraming().receive_data(raw_frame(frame[4:] + b"xyz"))


def test_truncated_response_body_is_refused() -> None:
    framing = ClientFraming()
    framing.send_request(GC_REQ)
    frame = response_frame(0, GC_RESP)
    with pytest.raises(TruncatedError) as info:
        framing.receive_data(raw_frame(frame[4:-1]))
    assert info.value.api == "GroupCoordinator"


# --------------------------------------------------------------------------
# Server side


@pytest.mark.parametrize("key,version", [(99, 0), (3, 2), (0, 1), (1, 3), (10, 3), (-1, 0), (8, 1),
                                         (18, 4), (19, 0), (11, 4), (15, 3), (22, 1),
                                         (22, 6)])
def test_unknown_api_key_or_version_on_the_server(key: int, version: int) -> None:
    header = struct.pack(">hhih", key, version, 7, 4) + b"kiel"
    with pytest.raises(UnsupportedVersionError):
        ServerFraming().receive_data(raw_frame(header + b"\x00\x00\x00\x00"))


def test_server_round_trip_and_null_client_id() -> None:
    client = ClientFraming(client_id=None)
    cid, frame, _ = client.send_request(METADATA_REQ)
    [(header, api, request)] = ServerFraming().receive_data(frame)
    assert header == RequestHeader(3, 0, cid, None)
    assert api is METADATA_V0 and request == METADATA_REQ
    assert client.receive_data(ServerFraming.send_response(header.correlation_id,
                                                           METADATA_RESP)) == [(cid, METADATA_RESP)]


def test_server_request_shorter_than_a_header() -> None:
    with pytest.raises(TruncatedError):
        ServerFraming().receive_data(raw_frame(b"\x00\x03\x00\x00\x00\x00\x00\x01"))


def test_send_response_refuses_what_it_cannot_encode() -> None:
    with pytest.raises(LocalProtocolError):
        ServerFraming.send_response(2**31, GC_RESP)
    with pytest.raises(LocalProtocolError):
        ServerFraming.send_response(-(2**31) - 1, GC_RESP)
    with pytest.raises(LocalProtocolError):
        ServerFraming.send_response(0, GC_REQ)  # a request, not a response
    with pytest.raises(LocalProtocolError) as info:
        ServerFraming.send_response(0, GroupCoordinatorResponse(0, 1, None, 1))
    assert info.value.api == GROUP_COORDINATOR_V0.name


def test_send_request_refuses_what_it_cannot_encode() -> None:
    framing = ClientFraming()
    with pytest.raises(LocalProtocolError):
        framing.send_request(GC_RESP)  # a response, not a request
    with pytest.raises(LocalProtocolError):
        framing.send_request(("group",))  # a plain tuple has no API
    with pytest.raises(LocalProtocolError):
        ClientFraming(client_id="x" * 40000).send_request(GC_REQ)
    with pytest.raises(LocalProtocolError):
        framing.send_request(GroupCoordinatorRequest(None))
    # Nothing was put in flight and no correlation id was used up.
    assert framing.in_flight == 0
    assert framing.send_request(GC_REQ)[0] == 0


# --------------------------------------------------------------------------
# After a protocol error the stream stays broken


@pytest.mark.parametrize("make", [ClientFraming, ServerFraming], ids=["client", "server"])
def test_a_broken_stream_stays_broken(make: Any) -> None:
    framing = make(max_frame_size=100)
    assert framing.error is None and framing.buffered == 0
    with pytest.raises(FrameTooLargeError) as first:
        framing.receive_data(struct.pack(">i", 1000))
    assert framing.error is first.value
    # Even bytes that would be a valid frame on a fresh stream are refused.
    with pytest.raises(ProtocolError) as again:
        framing.receive_data(response_frame(0, METADATA_RESP))
    assert again.value.__cause__ is first.value


def test_correlation_error_breaks_the_stream() -> None:
    framing = ClientFraming()
    framing.send_request(METADATA_REQ)
    framing.send_request(METADATA_REQ)
    with pytest.raises(CorrelationIdError):
        framing.receive_data(response_frame(1, METADATA_RESP))
    # The in-order response can no longer be trusted to line up either.
    with pytest.raises(ProtocolError):
        framing.receive_data(response_frame(0, METADATA_RESP))


def test_unsupported_version_carries_the_header() -> None:
    header = struct.pack(">hhih", 3, 9, 1234, 0)
    with pytest.raises(UnsupportedVersionError) as info:
        ServerFraming().receive_data(raw_frame(header))
    assert info.value.context == {"api_key": 3, "api_version": 9, "correlation_id": 1234}


def test_buffered_counts_a_partial_frame() -> None:
    framing = ClientFraming()
    framing.send_request(METADATA_REQ)
    frame = response_frame(0, METADATA_RESP)
    assert framing.receive_data(frame[:-3]) == []
    assert framing.buffered == len(frame) - 3
    assert framing.receive_data(frame[-3:]) == [(0, METADATA_RESP)]
    assert framing.buffered == 0


# --------------------------------------------------------------------------
# The guide's examples are runnable, and run


GUIDE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "docs", "guides", "protocol.rst")


def _guide_blocks() -> List[str]:
    with open(GUIDE, encoding="utf-8") as f:
        text = f.read()
    pattern = r"\.\. testcode::\n\n((?:(?:    .*)?\n)+)"
    return [textwrap.dedent(m.group(1)) for m in re.finditer(pattern, text)]


def test_protocol_guide_examples_run() -> None:
    blocks = _guide_blocks()
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, GUIDE, "exec"), {})
