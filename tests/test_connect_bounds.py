"""Connecting is bounded and says why it failed (issue 35, item 4).

Against real sockets on loopback: a port that accepts and never answers
(a plain asyncio server, and Python's own ``http.server``, which waits for
a request line that never comes) fails within the documented bounds, each
connection attempt within ``connect_timeout`` and ``connect()`` as a whole
within ``request_timeout``, and the message names the bound that ran out
with its real number. A peer that answers something other than Kafka is
named: its first bytes look like HTTP, or a TLS record.
"""
import asyncio
import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable

import pytest

from kiel import admin
from kiel.clients import GroupedConsumer, Producer, SingleConsumer
from kiel.connection import Connection
from kiel.exc import (
    ConnectTimeoutError,
    FrameTooLargeError,
    NoBrokersError,
    NotKafkaError,
    ProtocolError,
)
from kiel.protocol.framing import ClientFraming, ServerFraming
from tests.conftest import run

#: Room for a loaded machine on top of a bound (liveness, not speed).
SLACK = 5.0


class SilentPeer:
    """Accepts every connection and reads what comes, never writing a byte."""

    def __init__(self) -> None:
        self.accepted = 0

    async def __aenter__(self) -> "SilentPeer":
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted += 1
            await reader.read()  # until the client closes
            writer.close()

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"


class AnsweringHttpPeer(SilentPeer):
    """Answers the first bytes of a connection as nginx, Envoy or Node's
    llhttp do when they cannot be an HTTP request line: a 400 at once."""

    async def __aenter__(self) -> "AnsweringHttpPeer":
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted += 1
            await reader.read(1)
            writer.write(b"HTTP/1.1 400 Bad Request\r\nServer: nginx\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")
            await writer.drain()
            writer.close()

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return self


@pytest.fixture
def http_server() -> Iterator[str]:
    """Python's own HTTP server in a thread: it reads a request line up to its
    newline, so Kafka's binary request gets no answer at all."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             http.server.SimpleHTTPRequestHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="http-server", daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


async def _connect_producer(address: str, **options: Any) -> None:
    async with Producer(address, **options):
        pass


async def _connect_single(address: str, **options: Any) -> None:
    async with SingleConsumer(address, **options):
        pass


async def _connect_grouped(address: str, **options: Any) -> None:
    consumer = GroupedConsumer(address, "g", topics=["t"], **options)
    try:
        await consumer.connect()
    finally:
        await consumer.close()


async def _describe(address: str, **options: Any) -> None:
    await admin.describe_topics(address, **options)


CONNECTS = [_connect_producer, _connect_single, _connect_grouped, _describe]


@pytest.mark.parametrize("connect", CONNECTS, ids=lambda f: f.__name__)
def test_a_port_that_accepts_and_never_answers_fails_within_request_timeout(
    connect: Callable[..., Any],
) -> None:
    # Failed before after 6 attempts of request_timeout plus backoff (21 s
    # here; 183 s with the defaults), saying "within 3.0s".
    async def main() -> None:
        async with SilentPeer() as peer:
            started = time.monotonic()
            with pytest.raises(NoBrokersError) as raised:
                await connect(peer.address, request_timeout=3.0, connect_timeout=1.0)
            elapsed = time.monotonic() - started
            message = str(raised.value)
            assert "within 3.0s (request_timeout)" in message, message
            assert "not ready within 1.0s (connect_timeout)" in message, message
            assert "is it a Kafka listener?" in message, message
            assert elapsed < 3.0 + SLACK, elapsed
            # The retries went on while request_timeout lasted.
            assert peer.accepted >= 2, peer.accepted

    run(main(), timeout=60)


def test_one_connection_attempt_is_ready_within_connect_timeout() -> None:
    # ApiVersions waited for request_timeout (30 s here) before.
    async def main() -> None:
        async with SilentPeer() as peer:
            host, port = peer.address.split(":")
            conn = Connection(host, int(port), connect_timeout=0.5, request_timeout=30)
            started = time.monotonic()
            with pytest.raises(ConnectTimeoutError) as raised:
                await asyncio.wait_for(conn.connect(), 10)
            assert time.monotonic() - started < 0.5 + SLACK
            assert "no ApiVersions answer: the connection was not ready within 0.5s " \
                   "(connect_timeout)" in str(raised.value)
            assert raised.value.context["reason"] == "connect failed" and conn.closed

    run(main(), timeout=60)


def test_an_http_server_that_waits_for_a_line_fails_within_the_bounds(http_server: str) -> None:
    async def main() -> None:
        started = time.monotonic()
        with pytest.raises(NoBrokersError, match="is it a Kafka listener") as raised:
            await _connect_producer(http_server, request_timeout=2.0, connect_timeout=0.5)
        assert time.monotonic() - started < 2.0 + SLACK
        assert "2.0s (request_timeout)" in str(raised.value)

    run(main(), timeout=60)


@pytest.mark.parametrize("connect", CONNECTS, ids=lambda f: f.__name__)
def test_an_http_answer_is_named_as_such(connect: Callable[..., Any]) -> None:
    # Was "frame size 1213486160 outside [0, 104857600]", a frame-size error
    # naming no likely cause.
    async def main() -> None:
        async with AnsweringHttpPeer() as peer:
            with pytest.raises(NotKafkaError) as raised:
                await connect(peer.address, request_timeout=10.0)
            message = str(raised.value)
            assert "not a Kafka broker? the first bytes look like HTTP" in message, message
            assert "HTTP/1.1 400 Bad Request" in message
            assert raised.value.context["host"] == "127.0.0.1"
            assert peer.accepted == 1  # not retried: it would answer the same

    run(main(), timeout=60)


@pytest.mark.parametrize("first,named", [
    (b"HTTP/1.1 400 Bad Request\r\nServer: nginx\r\n\r\n", "look like HTTP: b'HTTP/1.1 400"),
    (bytes([0x15, 3, 3, 0, 2, 2, 70]), "look like a TLS alert record (a TLS listener: "
                                       "connect with ssl_context)"),
    (bytes([0x16, 3, 1, 0, 0x50, 2]), "look like a TLS handshake record"),
    (b"SSH-2.0-OpenSSH_9.6\r\n", "look like SSH: b'SSH-2.0-OpenSSH_9.6'"),
    (b"-ERR unknown command\r\n", "look like text"),
])
def test_the_framing_names_another_protocol(first: bytes, named: str) -> None:
    with pytest.raises(NotKafkaError, match="^not a Kafka broker\\?") as raised:
        ClientFraming().receive_data(first)
    assert named in str(raised.value)
    assert isinstance(raised.value, FrameTooLargeError)  # what it was, still


def test_an_oversized_kafka_frame_is_not_called_another_protocol() -> None:
    with pytest.raises(FrameTooLargeError) as raised:
        ClientFraming().receive_data(b"\x07\x00\x00\x00" + b"\x00" * 8)
    assert not isinstance(raised.value, NotKafkaError)
    with pytest.raises(ProtocolError, match="not a Kafka client\\? the first bytes look like "
                                            "HTTP: b'GET / HTTP/1.1'"):
        ServerFraming().receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")


def test_the_attempt_cut_short_by_request_timeout_leaves_no_connection_open() -> None:
    # The first attempt ends at connect_timeout (1.5 s), the second begins
    # a backoff later and would run to 3 s: request_timeout cuts it at 2 s,
    # and its half-open connection is closed then, not a second later.
    async def main() -> None:
        async with SilentPeer() as peer:
            producer = Producer(peer.address, request_timeout=2.0, connect_timeout=1.5)
            with pytest.raises(NoBrokersError, match=r"within 2\.0s \(request_timeout\)"):
                await producer.connect()
            assert all(conn.closed for conn in producer.cluster._connections.values())
            await producer.close()

    run(main(), timeout=60)
