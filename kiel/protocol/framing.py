"""Framing: requests to bytes, bytes to responses, for one connection.

No I/O here (the h11 pattern): the caller owns the socket, hands received
bytes to :meth:`ClientFraming.receive_data` and writes what
:meth:`ClientFraming.send_request` returns.

Correlation ids belong to one framing object (one connection). Kafka answers
the requests of a connection in order, so a response must carry the id of
the oldest request still waiting; anything else means the stream is out of
step and the connection must be closed. One exception is tolerated: some
0.8.2 brokers answer GroupCoordinator v0 with correlation id 0.

Every error raised here is a :class:`kiel.exc.ProtocolError` (or
:class:`kiel.exc.LocalProtocolError` for an unencodable request). After a
``ProtocolError`` the byte stream can no longer be trusted: close the
connection. The framing object remembers the error (``error``) and refuses
any further input with a ``ProtocolError`` caused by it.
"""
import struct
from collections import deque
from collections.abc import Callable
from typing import Any, Optional, TypeVar

from kiel.exc import (
    CorrelationIdError,
    FrameTooLargeError,
    LocalProtocolError,
    NotKafkaError,
    ProtocolError,
    TruncatedError,
    UnsupportedVersionError,
)
from kiel.protocol.api import BY_KEY, BY_REQUEST, BY_RESPONSE, Api, RequestHeader, ResponseHeader
from kiel.protocol.group_coordinator import GROUP_COORDINATOR_V0
from kiel.protocol.primitives import Buffer
from kiel.protocol.schema import struct_type

#: Default cap on one frame (100 MiB, Kafka's ``socket.request.max.bytes``).
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024

_size = struct.Struct(">i")
_response_header = struct.Struct(">i")
_CORRELATION_MAX = 2**31 - 1


#: HTTP's first bytes: a response's, then the methods of a request.
_HTTP = (b"HTTP/", b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ", b"OPTIONS ", b"PATCH ",
         b"CONNECT ", b"PRI * HTTP")
#: A TLS record's content types (alert, handshake) before its major version 3.
_TLS = (0x15, 0x16)


def _looks_like(head: bytes) -> Optional[str]:
    """What protocol other than Kafka's ``head`` (a peer's first bytes) looks like.

    Kafka's frames start with a size far below 16 MiB (a first byte of 0 or
    a little more); the other protocols a wrong port answers with start with
    text or a TLS record, whose first four bytes read as a size of hundreds
    of megabytes.

    Returns:
        a description for the message (``"HTTP"``, ``"a TLS record"``...),
        or ``None`` when nothing is recognised.
    """
    if head.startswith(_HTTP):
        return "HTTP"
    if len(head) >= 2 and head[0] in _TLS and head[1] == 3:
        kind = "alert" if head[0] == 0x15 else "handshake"
        return f"a TLS {kind} record (a TLS listener: connect with ssl_context)"
    if head.startswith(b"SSH-"):
        return "SSH"
    if len(head) >= 4 and all(32 <= b < 127 or b in (9, 10, 13) for b in head[:4]):
        return "text, not a binary protocol"
    return None


class _FrameReader:
    """Splits a byte stream into size-prefixed frames, refusing bad sizes.

    Args:
        max_frame_size: the largest size accepted.
        min_frame_size: the smallest (a header's).
        peer: what the other side should be (``"broker"``, ``"client"``),
            for the message when its bytes look like another protocol.
    """

    def __init__(self, max_frame_size: int, min_frame_size: int, peer: str) -> None:
        self.max_frame_size = max_frame_size
        self.min_frame_size = min_frame_size
        self.peer = peer
        self._buf = bytearray()

    def feed(self, data: Buffer) -> list[bytes]:
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        end = len(buf)
        # Strategy: walk complete frames by position and cut the consumed prefix
        # once at the end; a large frame arriving in many chunks is appended,
        # never re-copied, until it is complete.
        while end - pos >= 4:
            (size,) = _size.unpack_from(buf, pos)
            # Checked as soon as the 4-byte prefix is in, before any of the
            # body is waited for: a hostile size never reserves memory.
            if size < 0 or size > self.max_frame_size:
                raise self._refused(size, bytes(buf[pos : pos + 64]))
            if size < self.min_frame_size:
                raise TruncatedError(
                    f"frame of {size} bytes is shorter than its {self.min_frame_size}-byte header"
                )
            if end - pos - 4 < size:
                break
            with memoryview(buf) as view:
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buf)

    def _refused(self, size: int, head: bytes) -> FrameTooLargeError:
        """The error for a size out of bounds: :class:`NotKafkaError` when
        the bytes look like another protocol, saying which."""
        bounds = f"frame size {size} outside [0, {self.max_frame_size}]"
        other = _looks_like(head)
        if other is None:
            return FrameTooLargeError(bounds)
        shown = head[:8] if other.startswith("a TLS") else head.split(b"\r\n", 1)[0][:40]
        return NotKafkaError(f"not a Kafka {self.peer}? the first bytes look like {other}: "
                             f"{shown!r} ({bounds})")


R = TypeVar("R")


class _Receiver:
    """Latches the first :class:`~kiel.exc.ProtocolError` of a byte stream.

    After the peer sent bytes that do not parse, where the next frame starts
    is unknown: every later ``receive_data`` raises again (with the first
    error as its cause) instead of decoding garbage as if it were in step.
    """

    _reader: _FrameReader

    def __init__(self) -> None:
        self._error: Optional[ProtocolError] = None

    @property
    def error(self) -> Optional[ProtocolError]:
        """The protocol error that broke this stream, or ``None``."""
        return self._error

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return self._reader.buffered

    def _latched(self, receive: Callable[[Buffer], list[R]], data: Buffer) -> list[R]:
        """Run ``receive(data)``, remembering the first ProtocolError for ever."""
        if self._error is not None:
            raise ProtocolError(
                f"stream already broken by: {self._error}; close the connection"
            ) from self._error
        try:
            return receive(data)
        except ProtocolError as e:
            self._error = e
            raise


class ClientFraming(_Receiver):
    """The client side of one broker connection.

    Args:
        client_id: sent in every request header.
        max_frame_size: responses larger than this raise
            :class:`~kiel.exc.FrameTooLargeError` instead of being buffered.
    """

    def __init__(self, client_id: Optional[str] = "kiel",
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        super().__init__()
        self.client_id = client_id
        self._reader = _FrameReader(max_frame_size, min_frame_size=4, peer="broker")
        self._next_id = 0
        self._pending: deque[tuple[int, Api]] = deque()

    @property
    def in_flight(self) -> int:
        """Requests sent whose response has not arrived."""
        return len(self._pending)

    def send_request(self, request: Any) -> tuple[int, bytes, bool]:
        """Encode ``request`` as a frame.

        Args:
            request: an instance of a registered request struct.

        Returns:
            ``(correlation_id, frame_bytes, expects_response)``; when
            ``expects_response`` is False (Produce with acks=0) no response
            will come and none is waited for.

        Raises:
            LocalProtocolError: unknown request type or unencodable field.
        """
        api = BY_REQUEST.get(type(request))
        if api is None:
            raise LocalProtocolError(f"not a registered request: {type(request).__name__}")
        correlation_id = self._next_id
        out = [b"\0\0\0\0"]
        header = api.request_header  # v2 for a flexible version, else v1
        try:
            struct_type(header).encode(
                header(api.key, api.version, correlation_id, self.client_id), out
            )
            struct_type(api.request).encode(request, out)
        except LocalProtocolError as e:
            e.with_context(api=api.name)
            raise
        out[0] = _size.pack(sum(map(len, out)) - 4)
        frame = b"".join(out)
        expects = api.expects_response(request)
        # Only a request that made it to bytes uses up its correlation id.
        self._next_id = 0 if correlation_id >= _CORRELATION_MAX else correlation_id + 1
        if expects:
            self._pending.append((correlation_id, api))
        return correlation_id, frame, expects

    def receive_data(self, data: Buffer) -> list[tuple[int, Any]]:
        """Feed received bytes; get back the responses they complete.

        Returns:
            ``[(correlation_id, response), ...]`` in arrival order (possibly
            empty while a frame is incomplete).

        Raises:
            ProtocolError: a bad frame size, an unexpected correlation id, or
                a response that does not decode; close the connection (every
                later call raises too).
        """
        return self._latched(self._receive, data)

    def _receive(self, data: Buffer) -> list[tuple[int, Any]]:
        results = []
        for frame in self._reader.feed(data):
            if not self._pending:
                raise CorrelationIdError("response received with no request in flight")
            try:
                (cid,) = _response_header.unpack_from(frame, 0)
            except struct.error as e:
                raise TruncatedError("response header runs past the end") from e
            expected_id, api = self._pending[0]
            if cid != expected_id and not (cid == 0 and api is GROUP_COORDINATOR_V0):
                raise CorrelationIdError(
                    f"expected correlation id {expected_id}, got {cid}", api=api.name
                )
            self._pending.popleft()
            offset = 4
            header = api.response_header
            if header is not ResponseHeader:  # v1: skip its tagged fields
                _, offset = struct_type(header).decode(frame, 0)
            results.append((expected_id, decode_body(api, frame, offset)))
        return results


def decode_body(api: Api, frame: Buffer, offset: int, request: bool = False) -> Any:
    """Decode a whole request or response body of ``api`` starting at ``offset``.

    A response that does not parse is read again as ``api.fallback_response``
    when there is one (ApiVersions: a broker answers a version it does not
    know in v0's layout, KIP-511); an instance of that class is returned.

    Raises:
        ProtocolError: the body is malformed or has trailing bytes (the error
            of the first reading, when the fallback fails too).
    """
    cls = api.request if request else api.response
    try:
        return _decode_whole(api, cls, frame, offset)
    except ProtocolError:
        if request or api.fallback_response is None:
            raise
        try:
            return _decode_whole(api, api.fallback_response, frame, offset)
        except ProtocolError:
            pass
        raise


def _decode_whole(api: Api, cls: type, frame: Buffer, offset: int) -> Any:
    try:
        value, end = struct_type(cls).decode(frame, offset)
    except ProtocolError as e:
        e.with_context(api=api.name)
        raise
    if end != len(frame):
        raise ProtocolError(
            f"{len(frame) - end} trailing bytes after {cls.__name__}", api=api.name
        )
    return value


class ServerFraming(_Receiver):
    """The broker side of one connection (used by the embedded broker).

    Args:
        max_frame_size: requests larger than this raise
            :class:`~kiel.exc.FrameTooLargeError` (Kafka's
            ``socket.request.max.bytes``).
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        super().__init__()
        # A request header is at least 10 bytes (int16, int16, int32, string length).
        self._reader = _FrameReader(max_frame_size, min_frame_size=10, peer="client")

    def receive_data(self, data: Buffer) -> list[tuple[RequestHeader, Api, Any]]:
        """Feed received bytes; get back the requests they complete.

        Returns:
            ``[(header, api, request), ...]``.

        Raises:
            UnsupportedVersionError: an API key/version kiel does not know
                (a 0.8.2 broker closes the connection then); the context has
                ``api_key``, ``api_version`` and ``correlation_id``.
            ProtocolError: a malformed frame. Every later call raises too.
        """
        return self._latched(self._receive, data)

    def _receive(self, data: Buffer) -> list[tuple[RequestHeader, Api, Any]]:
        results = []
        header_type = struct_type(RequestHeader)
        for frame in self._reader.feed(data):
            header, offset = header_type.decode(frame, 0)
            api = BY_KEY.get((header.api_key, header.api_version))
            if api is None:
                raise UnsupportedVersionError(
                    f"unsupported api key {header.api_key} version {header.api_version}",
                    api_key=header.api_key, api_version=header.api_version,
                    correlation_id=header.correlation_id,
                )
            if api.flexible:  # header v2: v1 and its tagged fields
                _, offset = struct_type(api.request_header).decode(frame, 0)
            results.append((header, api, decode_body(api, frame, offset, request=True)))
        return results

    @staticmethod
    def send_response(correlation_id: int, response: Any) -> bytes:
        """Encode ``response`` to the request with ``correlation_id`` as a frame.

        Raises:
            LocalProtocolError: unknown response type or unencodable field.
        """
        api = BY_RESPONSE.get(type(response))
        if api is None:
            raise LocalProtocolError(f"not a registered response: {type(response).__name__}")
        out = [b"\0\0\0\0"]
        header = api.response_header
        try:
            struct_type(header).encode(header(correlation_id), out)
            struct_type(api.response).encode(response, out)
        except LocalProtocolError as e:
            e.with_context(api=api.name)
            raise
        out[0] = _size.pack(sum(map(len, out)) - 4)
        return b"".join(out)
