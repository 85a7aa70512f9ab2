"""Connection and Cluster against a real loopback peer that speaks kiel's server framing.

The peer is a few lines of Tornado TCPServer around ``ServerFraming`` whose
behaviour each test scripts (answer, hang, close mid-response, send garbage):
connection-level faults need a peer that misbehaves on cue. Broker semantics
are tested against the embedded broker elsewhere.
"""
import asyncio
import gc
import socket
from typing import Any, Callable, List, Optional

import pytest
from tornado.iostream import IOStream, StreamClosedError
from tornado.tcpserver import TCPServer

from kiel.cluster import Cluster, parse_brokers
from kiel.connection import Connection
from kiel.exc import (
    ClientClosedError,
    ConfigError,
    ConnectionClosedError,
    CorrelationIdError,
    InvalidTopicError,
    KielConnectionError,
    LeaderNotAvailableError,
    NoBrokersError,
    ProtocolError,
    RequestTimeoutError,
    UnknownBrokerError,
    UnknownTopicError,
    UnsupportedApiVersionError,
)
from kiel.protocol import (
    ApiVersionsResponseV0,
    BrokerMetadata,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    TopicMetadata,
)
from kiel.protocol.framing import ServerFraming
from tests.conftest import run
from tests.support.waiting import until

Handler = Callable[[Any, Any, IOStream], Any]


class Peer(TCPServer):
    """A scripted loopback peer: ``handler(header, request, stream)`` returns a
    response struct, ``None`` (no answer), or bytes to write verbatim.

    Like a Kafka 0.8 broker, it closes a connection that asks ApiVersions
    (counted in ``probes``; not a request the handler sees)."""

    def __init__(self, handler: Handler, versions_answer: Any = None) -> None:
        super().__init__()
        self.handler = handler
        #: Answer ApiVersions with this (a response struct) instead of closing.
        self.versions_answer = versions_answer
        self.requests: List[Any] = []
        self.streams: List[IOStream] = []
        self.probes = 0
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self.add_sockets([sock])

    async def handle_stream(self, stream: IOStream, address: Any) -> None:
        self.streams.append(stream)
        framing = ServerFraming()
        try:
            while True:
                data = await stream.read_bytes(65536, partial=True)
                for header, _api, request in framing.receive_data(data):
                    if _api.key == 18:  # ApiVersions, any version
                        self.probes += 1
                        if self.versions_answer is not None:
                            await stream.write(framing.send_response(
                                header.correlation_id, self.versions_answer))
                            continue
                        self.streams.remove(stream)
                        stream.close()
                        return
                    self.requests.append(request)
                    result = self.handler(header, request, stream)
                    if asyncio.iscoroutine(result):
                        result = await result
                    if isinstance(result, bytes):
                        await stream.write(result)
                    elif result is not None:
                        await stream.write(framing.send_response(header.correlation_id, result))
        except (StreamClosedError, ProtocolError):
            stream.close()


def metadata_for(port: int, topics: Optional[List[str]] = None) -> MetadataResponse:
    return MetadataResponse(
        [BrokerMetadata(7, "127.0.0.1", port)],
        [
            TopicMetadata(0, t, [PartitionMetadata(0, p, 7, [7], [7]) for p in range(2)])
            for t in (topics or [])
        ],
    )


def answer_metadata(header: Any, request: Any, stream: IOStream) -> Any:
    return metadata_for(stream.socket.getsockname()[1], ["known"])


def test_pipelined_requests_resolve_in_order() -> None:
    async def main() -> None:
        peer = Peer(answer_metadata)
        conn = Connection("127.0.0.1", peer.port, broker_id=7)
        results = await asyncio.gather(*(conn.send(MetadataRequest([f"t{i}"])) for i in range(50)))
        assert all(isinstance(r, MetadataResponse) for r in results)
        assert [r.topics[0].topic for r in results] == ["known"] * 50
        assert [r.topics for r in peer.requests] == [[f"t{i}"] for i in range(50)]
        assert conn.in_flight == 0
        conn.close()
        peer.stop()

    run(main())


def test_acks_zero_produce_needs_no_response() -> None:
    async def main() -> None:
        peer = Peer(lambda h, r, s: None)
        conn = Connection("127.0.0.1", peer.port)
        request = ProduceRequest(0, 1000, [ProduceTopicData("t", [ProducePartitionData(0, b"")])])
        assert await conn.send(request, timeout=1) is None
        assert conn.in_flight == 0
        conn.close()
        peer.stop()

    run(main())


def test_timeout_fails_the_request_and_every_pending_one() -> None:
    async def main() -> None:
        peer = Peer(lambda h, r, s: None)  # a hung broker: reads, never answers
        conn = Connection("127.0.0.1", peer.port, broker_id=3, request_timeout=0.3)
        first = asyncio.ensure_future(conn.send(MetadataRequest([])))
        await until(lambda: conn.in_flight == 1, what="the first request on the wire")
        second = asyncio.ensure_future(conn.send(MetadataRequest([]), timeout=10))
        with pytest.raises(RequestTimeoutError) as info:
            await first
        assert info.value.broker_id == 3 and info.value.port == peer.port
        # The stream is out of step now: the other request fails at once, typed.
        with pytest.raises(ConnectionClosedError) as info2:
            await asyncio.wait_for(second, 2)
        assert info2.value.context["reason"] == "request timed out"
        assert conn.closed
        peer.stop()

    run(main())


def test_a_shorter_timeout_sent_later_fires_first() -> None:
    """The connection's one timer is re-armed for a request whose deadline
    comes before those already in flight: that request is the one that
    times out, the longer one fails with the close."""
    async def main() -> None:
        peer = Peer(lambda h, r, s: None)  # a hung broker
        conn = Connection("127.0.0.1", peer.port, request_timeout=30)
        patient = asyncio.ensure_future(conn.send(MetadataRequest([]), timeout=30))
        await until(lambda: conn.in_flight == 1, what="the first request on the wire")
        hasty = asyncio.ensure_future(conn.send(MetadataRequest([]), timeout=0.2))
        with pytest.raises(RequestTimeoutError, match="within 0.2s"):
            await asyncio.wait_for(hasty, 10)
        with pytest.raises(ConnectionClosedError):
            await asyncio.wait_for(patient, 2)
        peer.stop()

    run(main())


def test_answered_requests_leave_no_timers_behind() -> None:
    """Each request's deadline is checked by the connection's one timer:
    thousands of answered requests leave no cancelled timer handles in the
    loop (they lingered until the loop swept them, long enough to be
    promoted by the collector and bring full collections)."""
    async def main() -> None:
        peer = Peer(lambda h, r, s: metadata_for(1, ["x"]))
        conn = Connection("127.0.0.1", peer.port)
        loop = asyncio.get_running_loop()
        await conn.send(MetadataRequest([]))
        scheduled = loop._scheduled  # type: ignore[attr-defined]
        before, most = len(scheduled), 0
        for _ in range(40):
            await asyncio.gather(*(conn.send(MetadataRequest([])) for _ in range(4)))
            most = max(most, len(scheduled))
        assert most <= before + 1, f"{most - before} timer handles left by 160 requests"
        assert [getattr(h, "_callback", None) for h in scheduled].count(conn._expire) <= 1
        conn.close()
        peer.stop()

    run(main())


def test_peer_closing_mid_response_fails_pending_with_context() -> None:
    async def main() -> None:
        def half_then_close(header: Any, request: Any, stream: IOStream) -> Any:
            frame = ServerFraming.send_response(header.correlation_id, metadata_for(1, ["x"]))
            stream.write(frame[: len(frame) // 2])
            asyncio.get_event_loop().call_later(0.05, stream.close)
            return None

        peer = Peer(half_then_close)
        conn = Connection("127.0.0.1", peer.port, broker_id=5)
        with pytest.raises(ConnectionClosedError) as info:
            await conn.send(MetadataRequest([]))
        assert info.value.broker_id == 5
        assert info.value.host == "127.0.0.1"
        assert info.value.retriable
        peer.stop()

    run(main())


def test_garbage_from_peer_is_a_protocol_error() -> None:
    async def main() -> None:
        # A well-formed frame answering a correlation id we never sent...
        peer = Peer(lambda h, r, s: b"\x00\x00\x00\x0c\x00\x00\x30\x39garbage!")
        conn = Connection("127.0.0.1", peer.port)
        with pytest.raises(CorrelationIdError):
            await conn.send(MetadataRequest([]))
        assert conn.closed
        # ...and a size prefix no broker would send.
        peer.handler = lambda h, r, s: b"garbage!"
        conn = Connection("127.0.0.1", peer.port)
        with pytest.raises(ProtocolError):
            await conn.send(MetadataRequest([]))
        assert conn.closed
        peer.stop()

    run(main())


def test_connect_refused_is_typed() -> None:
    async def main() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()  # nothing listens there now
        conn = Connection("127.0.0.1", port, broker_id=1, connect_timeout=2)
        with pytest.raises(KielConnectionError) as info:
            await conn.send(MetadataRequest([]))
        assert info.value.port == port

    run(main())


@pytest.mark.parametrize("code, error", [
    (35, UnsupportedApiVersionError),  # UNSUPPORTED_VERSION, and no ranges
    (-1, UnknownBrokerError),  # UNKNOWN_SERVER_ERROR
])
def test_an_apiversions_error_without_ranges_closes_the_connection(
    code: int, error: type
) -> None:
    # The broker answers ApiVersions with an error and no ranges: connecting
    # fails with the typed error, and the half-open stream is not kept (with
    # an error that was not a ProtocolError, it was: the socket stayed open
    # and the connection never closed).
    async def main() -> None:
        peer = Peer(answer_metadata, versions_answer=ApiVersionsResponseV0(code, []))
        conn = Connection("127.0.0.1", peer.port, broker_id=1)
        with pytest.raises(error) as info:
            await conn.connect()
        assert info.value.api == "ApiVersions" and info.value.port == peer.port
        assert info.value.errno == code
        # Nothing a caller sent was written: a producer may resend safely.
        assert info.value.context["reason"] == "connect failed"
        assert conn.closed
        with pytest.raises(error):
            await conn.send(MetadataRequest([]))
        await until(lambda: all(s.closed() for s in peer.streams))
        assert peer.requests == []
        peer.stop()

    run(main())


def test_parse_brokers() -> None:
    assert parse_brokers("a,b:1234") == [("a", 9092), ("b", 1234)]
    assert parse_brokers(["[::1]:9093", "h"]) == [("::1", 9093), ("h", 9092)]
    for bad in ([], "a:99999", ["a:b"], [5], "a::1"):
        with pytest.raises(ConfigError):
            parse_brokers(bad)  # type: ignore[arg-type]


def test_cluster_metadata_routing_and_unknown_topic() -> None:
    async def main() -> None:
        peer = Peer(answer_metadata)
        cluster = Cluster([f"127.0.0.1:{peer.port}"], retry_backoff=0.01, retries=2)
        await cluster.connect()
        assert await cluster.partitions_for("known") == [0, 1]
        assert cluster.leader("known", 1) == 7
        assert cluster.brokers[7].port == peer.port
        with pytest.raises(UnknownTopicError) as info:
            await cluster.partitions_for("nope")
        assert info.value.topic == "nope"
        cluster.close()
        peer.stop()

    run(main())


def test_cluster_with_no_reachable_broker_gives_up_with_reasons() -> None:
    async def main() -> None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        cluster = Cluster([f"127.0.0.1:{port}"], retry_backoff=0.01, retries=2, connect_timeout=1)
        with pytest.raises(NoBrokersError) as info:
            await cluster.connect()
        assert str(port) in str(info.value)

    run(main())


def test_closing_the_cluster_stops_a_retrying_refresh() -> None:
    async def main() -> None:
        # A broker that hangs up on every request: each metadata attempt fails.
        peer = Peer(lambda h, r, s: s.close())
        # Long delays between many attempts: only close() can end this soon.
        cluster = Cluster([f"127.0.0.1:{peer.port}"], retry_backoff=30, max_backoff=30, retries=50)
        refresh = asyncio.ensure_future(cluster.connect())
        await until(lambda: len(peer.requests) == 1, what="the first metadata attempt")
        # The attempt has failed once its connection is closed: the refresh
        # is in its backoff delay now.
        await until(
            lambda: all(c.closed for c in cluster._connections.values()),
            what="the first attempt failed",
        )
        cluster.close()
        with pytest.raises(ClientClosedError) as info:
            await asyncio.wait_for(refresh, 10)  # far below one 15-30 s backoff delay
        assert isinstance(info.value.__cause__, NoBrokersError)
        assert len(peer.requests) == 1  # no attempt after close()
        with pytest.raises(ClientClosedError):
            await cluster.refresh_metadata()
        peer.stop()

    run(main())


def topic_metadata(port: int, topic: str, error_code: int, partitions: int) -> MetadataResponse:
    return MetadataResponse(
        [BrokerMetadata(7, "127.0.0.1", port)],
        [TopicMetadata(error_code, topic, [
            PartitionMetadata(0, p, 7, [7], [7]) for p in range(partitions)
        ])],
    )


def test_partitions_for_retries_leader_not_available_then_raises_it() -> None:
    async def main() -> None:
        answers = {"new": 0}

        def creating(header: Any, request: Any, stream: IOStream) -> Any:
            port = stream.socket.getsockname()[1]
            if "new" in request.topics:
                answers["new"] += 1
                # Being auto-created: LeaderNotAvailable twice, then there.
                if answers["new"] <= 2:
                    return topic_metadata(port, "new", LeaderNotAvailableError.errno, 0)
                return topic_metadata(port, "new", 0, 3)
            return topic_metadata(port, "stuck", LeaderNotAvailableError.errno, 0)

        peer = Peer(creating)
        cluster = Cluster([f"127.0.0.1:{peer.port}"], retry_backoff=0.01, retries=3)
        assert await cluster.partitions_for("new") == [0, 1, 2]
        assert answers["new"] == 3
        asked = len(peer.requests)
        with pytest.raises(LeaderNotAvailableError) as info:
            await cluster.partitions_for("stuck")
        assert info.value.topic == "stuck" and info.value.errno == 5
        assert len(peer.requests) - asked == 1 + 3  # the first look and three retries
        cluster.close()
        peer.stop()

    run(main())


def test_partitions_for_raises_a_non_retriable_topic_error_at_once() -> None:
    async def main() -> None:
        peer = Peer(lambda h, r, s: topic_metadata(
            s.socket.getsockname()[1], "bad!", InvalidTopicError.errno, 0))
        cluster = Cluster([f"127.0.0.1:{peer.port}"], retry_backoff=0.01, retries=3)
        await cluster.connect()
        asked = len(peer.requests)
        with pytest.raises(InvalidTopicError) as info:
            await cluster.partitions_for("bad!")
        assert info.value.topic == "bad!"
        assert len(peer.requests) - asked == 1  # no retry
        cluster.close()
        peer.stop()

    run(main())


def test_a_cancelled_caller_leaves_no_unretrieved_error_behind() -> None:
    """A caller cancelled mid-request, then the connection fails: the error
    that arrives for nobody must not surface as "Future exception was never
    retrieved" (the demo printed it about one run in four)."""

    async def main() -> None:
        loop = asyncio.get_event_loop()
        reported: List[Any] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        peer = Peer(lambda h, r, s: None)  # reads, never answers
        conn = Connection("127.0.0.1", peer.port, broker_id=1)
        caller = asyncio.ensure_future(conn.send(MetadataRequest([])))
        await until(lambda: conn.in_flight == 1, what="the request on the wire")
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        conn.close()  # the pending future fails with ConnectionClosedError
        peer.stop()
        del caller
        for _ in range(3):
            await asyncio.sleep(0)
        gc.collect()  # an unretrieved exception is reported when its future dies
        await asyncio.sleep(0)
        assert [c.get("message") for c in reported] == []

    run(main())
