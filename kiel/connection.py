"""One broker connection: a thin adapter between an IOStream and the framing object.

A :class:`Connection` frames requests with :class:`kiel.protocol.framing.ClientFraming`,
writes them, and parks a future per correlation id; one reader coroutine
feeds received bytes back to the framing object and resolves those futures.
Requests are pipelined (up to ``max_in_flight`` at once); Kafka answers them
in order.

Connecting uses :class:`tornado.tcpclient.TCPClient`, whose resolver runs in
a thread pool: a host name never blocks the IOLoop. When the connection
closes, for whatever reason, every pending future fails with a typed error
that names the broker and the :class:`CloseReason`.

Version negotiation happens while connecting, before any request: unless
the versions are given (a pinned ``api_version``, or remembered from an
earlier connection to the same address), the connection asks ApiVersions
v0. A Kafka 0.8 or 0.9 broker closes the connection instead of answering:
the connection then connects again and speaks the 0.8.2 versions
(:data:`kiel.protocol.versions.LEGACY`). Either way the result is
remembered per address, so a reconnect never asks again.

TLS is Tornado's: the :class:`ssl.SSLContext` wraps the socket while
connecting, and checks the broker's certificate and host name as the context
says. A handshake that fails raises :class:`~kiel.exc.TlsError` (not
retriable: the same context fails again).

Connecting is bounded as a whole: the TCP (and TLS) connection, the
ApiVersions exchange (and the reconnect a 0.8 broker needs) and SASL are
all done within ``connect_timeout`` of the start, or the attempt fails with
:class:`~kiel.exc.ConnectTimeoutError`; each exchange also waits at most
``request_timeout``, like any request. A port that accepts and never answers
(a listener of something else, a half-dead broker) thus fails within
``connect_timeout``, and the message names the bound that ran out.

SASL follows the versions, on every new connection and before any other
request (as Kafka's clients do): SaslHandshake v1 names the mechanism, then
SaslAuthenticate carries the messages of :mod:`kiel.sasl`'s state machine
until it is done. Both exchanges are written in :mod:`kiel.handshake`; the
connection bounds each by its request timeout and closes on any failure,
marked ``reason="connect failed"`` (nothing a caller sent was written). A
refusal raises :class:`~kiel.exc.AuthenticationError` (not retriable); a
broker without SaslHandshake v1 (Kafka 0.8 to 0.11) raises
:class:`~kiel.exc.UnsupportedFeatureError`. The password and the SCRAM
proof are never logged.
"""

import asyncio
import enum
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, MutableMapping
from typing import Any, Optional, TypeVar, Union

from tornado import gen
from tornado.iostream import IOStream, StreamClosedError
from tornado.locks import Semaphore
from tornado.tcpclient import TCPClient

from kiel import _options, handshake
from kiel._aio import Tasks, within
from kiel.exc import (
    ConfigError,
    ConnectionClosedError,
    ConnectTimeoutError,
    KielConnectionError,
    KielError,
    ProtocolError,
    RequestTimeoutError,
    TlsError,
)
from kiel.metrics import RequestCounters
from kiel.protocol.framing import DEFAULT_MAX_FRAME_SIZE, ClientFraming
from kiel.protocol.versions import LEGACY, Versions, negotiate
from kiel.sasl import Credentials

log = logging.getLogger(__name__)


_T = TypeVar("_T")


def tls_context(ssl_context: Optional[ssl.SSLContext], ssl_options: Any = None) -> Any:
    """The TLS setting of a client: ``ssl_context``, or the deprecated ``ssl_options``.

    Args:
        ssl_context: an :class:`ssl.SSLContext`, or ``None`` for plain TCP.
        ssl_options: the older name (an ``SSLContext`` or Tornado's dict
            form); warns with :class:`DeprecationWarning`.

    Returns:
        what the connections hand to Tornado, or ``None``.

    Raises:
        ConfigError: both given, or an ``ssl_context`` that is not an
            ``ssl.SSLContext``.
    """
    if ssl_options is not None:
        if ssl_context is not None:
            raise ConfigError("give ssl_context or ssl_options (deprecated), not both")
        _options.deprecated("ssl_options is deprecated: pass ssl_context=ssl.SSLContext(...)")
        return ssl_options
    if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
        raise ConfigError(
            f"ssl_context must be an ssl.SSLContext, got {type(ssl_context).__name__}")
    return ssl_context


def _retrieve(future: "asyncio.Future[Any]") -> None:
    if not future.cancelled():
        future.exception()


def _shielded(future: "asyncio.Future[Any]") -> "asyncio.Future[Any]":
    """``asyncio.shield(future)`` whose outer future never reports its error.

    Strategy: when the caller awaiting the outer future is cancelled, the
    outer future lives on and receives the inner one's error later, with
    nobody left to read it; asyncio would then log "Future exception was
    never retrieved". The error is not lost: whoever still waits on the inner
    future (or the connection's close error) reports it.
    """
    outer = asyncio.shield(future)
    outer.add_done_callback(_retrieve)
    return outer


class CloseReason(enum.Enum):
    """Why a connection closed; carried as ``reason`` in the errors it raises."""

    CONNECT_FAILED = "connect failed"
    CONNECTION_BROKEN = "connection broken"
    REQUEST_TIMEOUT = "request timed out"
    OUT_OF_SYNC = "protocol error"
    SHUTDOWN = "closed by client"


class Connection:
    """A connection to one broker.

    Args:
        host: broker host name or address (resolved off the IOLoop).
        port: broker port.
        broker_id: the broker's node id, for error context (``None`` while
            bootstrapping).
        client_id: sent in every request header.
        connect_timeout: seconds until the connection is ready for requests:
            TCP, TLS, ApiVersions and SASL together.
        request_timeout: default seconds to wait for a response (each
            exchange while connecting waits at most this long too).
        max_in_flight: requests sent and not yet answered, at most; further
            :meth:`send` calls wait for a slot.
        ssl_options: an ``ssl.SSLContext`` (or Tornado's dict form) to use TLS
            (see :func:`tls_context`).
        sasl: the SASL mechanism and credentials to authenticate every new
            connection with; ``None``: no SASL.
        max_frame_size: largest response accepted.
        versions: the API versions to speak (a pinned ``api_version``);
            ``None`` negotiates them while connecting.
        known_versions: versions negotiated before, by ``(host, port)``:
            read before asking, and written after (shared by a cluster's
            connections so that a reconnect does not ask again).
        metrics: where requests' latency and errors are counted (a
            cluster's connections share one); ``None`` counts nothing.
    """

    def __init__(
        self,
        host: str,
        port: int,
        broker_id: Optional[int] = None,
        client_id: str = "kiel",
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        max_in_flight: int = 64,
        ssl_options: Any = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        versions: Optional[Versions] = None,
        known_versions: Optional[MutableMapping[tuple[str, int], Versions]] = None,
        metrics: Optional[RequestCounters] = None,
        sasl: Optional[Credentials] = None,
    ) -> None:
        self.host, self.port, self.broker_id = host, port, broker_id
        self.metrics = metrics
        self.client_id, self.max_frame_size = client_id, max_frame_size
        #: The API versions to speak; set once connected (or given).
        self.versions: Optional[Versions] = versions
        self._known = known_versions
        #: Whether this connection asked the broker for its versions.
        self.probed = False
        self.connect_timeout, self.request_timeout = connect_timeout, request_timeout
        self.ssl_options = ssl_options
        self.sasl = sasl
        self._framing = ClientFraming(client_id, max_frame_size=max_frame_size)
        self._stream: Optional[IOStream] = None
        # The stream being negotiated on, before it becomes ``_stream``.
        self._opening: Optional[IOStream] = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        #: cid -> (deadline on the loop's clock, request name, seconds allowed).
        self._deadlines: dict[int, tuple[float, str, float]] = {}
        #: The one timer checking ``_deadlines`` (see :meth:`_arm`).
        self._timer: Optional[asyncio.TimerHandle] = None
        self._timer_at = 0.0
        self._slots = Semaphore(max_in_flight)
        self._closed = False
        self._close_error: Optional[KielError] = None
        self._connecting: Optional[asyncio.Task[None]] = None
        #: When the connection attempt under way must be ready, on the loop's clock.
        self._ready_by = 0.0
        # The connect attempt and the reader; both end once the stream closes.
        self._tasks = Tasks(f"kiel-connection-{host}:{port}")

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("open" if self._stream else "new")
        return f"<Connection broker={self.broker_id} {self.host}:{self.port} {state}>"

    def _context(self) -> dict[str, Any]:
        return {"broker_id": self.broker_id, "host": self.host, "port": self.port}

    @property
    def closed(self) -> bool:
        """True once the connection has closed (it is never reopened)."""
        return self._closed

    @property
    def connected(self) -> bool:
        """True while the stream is open."""
        return self._stream is not None and not self._closed

    @property
    def in_flight(self) -> int:
        """Requests awaiting a response."""
        return len(self._pending)

    async def connect(self) -> None:
        """Open the TCP (or TLS) connection; concurrent callers share one attempt.

        Raises:
            ConnectTimeoutError: not ready for requests within
                ``connect_timeout`` (TCP, TLS, ApiVersions and SASL together).
            RequestTimeoutError: an exchange while connecting went
                unanswered for ``request_timeout`` (when that is shorter).
            NotKafkaError: the peer answered, but not in Kafka's protocol
                (the message says what its bytes look like).
            KielConnectionError: refused, unreachable, or already closed.
        """
        if self._closed:
            raise self._close_error or ConnectionClosedError("connection closed", **self._context())
        if self._stream is not None:
            return
        if self._connecting is None:
            # Its callers receive its typed error (quiet: not logged twice).
            self._connecting = self._tasks.spawn(self._connect(), "connect", quiet=(KielError,))
        await _shielded(self._connecting)

    async def _connect(self) -> None:
        self._ready_by = asyncio.get_running_loop().time() + self.connect_timeout
        stream = await self._open()
        if self.versions is None:
            known = self._known.get((self.host, self.port)) if self._known is not None else None
            if known is not None:
                self.versions = known
            else:
                stream = await self._negotiate(stream)
        if self.sasl is not None and not self._closed:
            await self._authenticate(stream, self.sasl)
        if self._closed:  # closed while connecting
            stream.close()
            raise self._close_error or ConnectionClosedError("connection closed", **self._context())
        try:
            stream.set_nodelay(True)
            sock = stream.socket
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        except OSError as e:  # the peer closed already; the reader will notice
            log.debug("socket options on %r failed: %s", self, e)
        self._stream = stream
        self._tasks.spawn(self._read_loop(stream), "read")

    async def _open(self) -> IOStream:
        """One TCP (or TLS) connection to the broker.

        Raises:
            ConnectTimeoutError: not connected within ``connect_timeout``.
            KielConnectionError: refused, unreachable, or closed meanwhile.
        """
        # The second open (after a 0.8 broker closed on ApiVersions) gets
        # what is left of the attempt's connect_timeout.
        left = self._ready_by - asyncio.get_running_loop().time()
        try:
            if left <= 0:
                raise gen.TimeoutError()
            stream = await TCPClient().connect(
                self.host, self.port, ssl_options=self.ssl_options, timeout=left
            )
        except gen.TimeoutError as e:
            err: KielError = ConnectTimeoutError(
                f"no connection within {self.connect_timeout}s (connect_timeout)",
                reason=CloseReason.CONNECT_FAILED.value, **self._context()
            )
            self._fail(CloseReason.CONNECT_FAILED, err)
            raise err from e
        except (OSError, StreamClosedError) as e:
            real = getattr(e, "real_error", None) or e
            if isinstance(real, ssl.SSLError) and not isinstance(
                real, (ssl.SSLEOFError, ssl.SSLZeroReturnError)
            ):
                # A peer that hangs up mid-handshake may be restarting (the
                # retriable error below); anything else fails the same way again.
                err = TlsError(f"TLS handshake failed: {real}",
                               reason=CloseReason.CONNECT_FAILED.value, **self._context())
                self._fail(CloseReason.CONNECT_FAILED, err)
                raise err from e
            err = KielConnectionError(
                f"cannot connect: {real}",
                reason=CloseReason.CONNECT_FAILED.value,
                **self._context(),
            )
            self._fail(CloseReason.CONNECT_FAILED, err)
            raise err from e
        if self._closed:  # closed while connecting
            stream.close()
            raise self._close_error or ConnectionClosedError("connection closed", **self._context())
        return stream

    async def _negotiate(self, stream: IOStream) -> IOStream:
        """Ask ApiVersions on ``stream``; set :attr:`versions` and remember them.

        A broker that closes the stream instead is a 0.8/0.9 broker: connect
        again and speak the legacy versions.

        Returns:
            the stream to use (a new one after a legacy broker closed the first).

        Raises:
            RequestTimeoutError: no answer within ``request_timeout``.
            KielConnectionError: the second connection failed.
            ProtocolError: the answer did not parse.
            BrokerError: the broker answered with an error and no versions.
        """
        self.probed = True
        ranges = await self._before_ready(
            stream, handshake.ask_versions(stream, self._own_framing()), "ApiVersions",
            "no ApiVersions answer",
        )
        if ranges is None:
            # DEBUG: every connection to a 0.8 broker meets this, and it is
            # expected there (an application's INFO log is no place for it).
            log.debug("%r closed the connection on ApiVersions: a Kafka 0.8/0.9 broker; "
                      "speaking its versions", self)
            stream.close()
            versions = LEGACY
            stream = await self._open()
        else:
            versions = negotiate(ranges)
            log.debug("%r negotiated %r", self, versions)
        self.versions = versions
        if self._known is not None:
            self._known[(self.host, self.port)] = versions
        return stream

    async def _authenticate(self, stream: IOStream, sasl: Credentials) -> None:
        """Authenticate ``stream`` with SASL (:func:`kiel.handshake.authenticate`).

        Raises:
            UnsupportedFeatureError: the broker has no SaslHandshake v1 and
                SaslAuthenticate (Kafka 0.8 to 0.11, or the embedded broker).
            AuthenticationError: refused (a wrong password, a mechanism the
                broker does not enable) or the server failed SCRAM's check.
            RequestTimeoutError: the exchange took longer than ``request_timeout``.
            ConnectTimeoutError: the connection was not ready within
                ``connect_timeout``.
            KielConnectionError: the broker closed the connection meanwhile.
        """
        assert self.versions is not None  # negotiated, remembered or pinned first
        await self._before_ready(
            stream, handshake.authenticate(stream, self._own_framing(), sasl, self.versions),
            "SaslAuthenticate", f"SASL {sasl.mechanism} not done",
        )
        log.debug("%r authenticated with SASL %s", self, sasl.mechanism)

    def _own_framing(self) -> ClientFraming:
        """A framing object for one exchange before the reader starts (its
        correlation ids are its own, so the connection's begin in step)."""
        return ClientFraming(self.client_id, max_frame_size=self.max_frame_size)

    async def _before_ready(
        self, stream: IOStream, exchange: Awaitable[_T], api: str, too_slow: str
    ) -> _T:
        """Run one exchange of :mod:`kiel.handshake` on ``stream``.

        Strategy: a request like any other, the exchange waits at most
        ``request_timeout``; and it is part of connecting, so it ends by the
        attempt's ``connect_timeout`` too (whichever comes first), and a
        broker that accepts but hangs fails within ``connect_timeout``. Any
        failure closes the stream and the connection, and is marked
        ``reason="connect failed"``: nothing the caller sent was written yet.

        Args:
            stream: the stream being set up.
            exchange: the exchange (a coroutine of :mod:`kiel.handshake`).
            api: the request's name, for the error's context.
            too_slow: what did not happen (``"no ApiVersions answer"``); the
                bound that ran out is added.

        Raises:
            RequestTimeoutError: not done within ``request_timeout``.
            ConnectTimeoutError: not done by the end of ``connect_timeout``.
            KielError: the exchange's typed error, with the connection's context.
        """
        self._opening = stream  # close() closes it too
        left = self._ready_by - asyncio.get_running_loop().time()
        bound = min(self.request_timeout, max(0.0, left))
        try:
            result = await within(exchange, bound)
        except asyncio.TimeoutError as e:
            stream.close()
            err: KielError
            if bound < self.request_timeout:
                # The first request unanswered: the port may not be Kafka's at all.
                hint = (": the peer accepted the connection and answered nothing (is it a "
                        "Kafka listener?)" if api == "ApiVersions" else "")
                err = ConnectTimeoutError(
                    f"{too_slow}: the connection was not ready within {self.connect_timeout}s "
                    f"(connect_timeout){hint}", api=api, reason=CloseReason.CONNECT_FAILED.value,
                    **self._context())
            else:
                err = RequestTimeoutError(
                    f"{too_slow} within {self.request_timeout}s (request_timeout)", api=api,
                    reason=CloseReason.CONNECT_FAILED.value, **self._context())
            self._fail(CloseReason.REQUEST_TIMEOUT, err)
            raise err from e
        except KielError as e:
            stream.close()
            e.with_context(api=api, reason=CloseReason.CONNECT_FAILED.value, **self._context())
            self._fail(
                CloseReason.OUT_OF_SYNC if isinstance(e, ProtocolError)
                else CloseReason.CONNECT_FAILED, e,
            )
            raise
        finally:
            self._opening = None
        if self._closed:  # closed meanwhile (which closed the stream too)
            stream.close()
            raise self._close_error or ConnectionClosedError("connection closed", **self._context())
        return result

    async def send(self, request: Any, timeout: Optional[float] = None) -> Any:
        """Send ``request`` and await its response (counted in :attr:`metrics`).

        Args:
            request: a kiel.protocol request struct.
            timeout: seconds to wait for the response (see :meth:`_send`).

        Returns:
            the decoded response, or ``None`` (see :meth:`_send`).

        Raises:
            KielError: as :meth:`_send`.
        """
        metrics = self.metrics
        if metrics is None:
            return await self._send(request, timeout)
        api = metrics.api_of(request)
        started = time.monotonic()
        try:
            response = await self._send(request, timeout)
        except KielError as e:
            metrics.failed(api, e)
            raise
        metrics.answered(api, time.monotonic() - started)
        return response

    async def _send(self, request: Any, timeout: Optional[float] = None) -> Any:
        """Send ``request`` and await its response.

        Args:
            request: a kiel.protocol request struct.
            timeout: seconds to wait for the response (default
                ``request_timeout``). For a Fetch long poll pass at least its
                ``max_wait_time`` plus a margin.

        Returns:
            the decoded response, or ``None`` for requests the broker never
            answers (Produce with ``required_acks=0``) once written.

        Raises:
            RequestTimeoutError: no response in time; the connection is closed,
                as the stream is now out of step.
            KielConnectionError: the connection failed or closed.
            LocalProtocolError: the request cannot be encoded.
        """
        await self.connect()
        async with self._slots:
            if self._closed or self._stream is None:
                raise self._close_error or ConnectionClosedError(
                    "connection closed", **self._context()
                )
            cid, frame, expects_response = self._framing.send_request(request)
            future: Optional[asyncio.Future[Any]] = None
            if expects_response:
                future = asyncio.get_event_loop().create_future()
                self._pending[cid] = future
            try:
                await self._stream.write(frame)
            except StreamClosedError as e:
                self._fail(CloseReason.CONNECTION_BROKEN, self._broken(e))
            if future is None:
                if self._closed:
                    raise self._close_error or ConnectionClosedError(
                        "connection closed", **self._context()
                    )
                return None
            wait = self.request_timeout if timeout is None else timeout
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait
            self._deadlines[cid] = (deadline, type(request).__name__, wait)
            if self._timer is None or deadline < self._timer_at:
                self._arm(loop)
            try:
                return await future
            except asyncio.CancelledError:
                # The caller went away. The future may hold the response's
                # error already (or get it as the connection closes): retrieve
                # it so asyncio does not report an error nobody waits for.
                self._deadlines.pop(cid, None)
                future.add_done_callback(_retrieve)
                raise

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        """Have the timer fire by the earliest deadline of the requests in flight.

        Strategy: one timer per connection instead of one per request. A
        per-request timer is cancelled when its answer comes, yet stays in
        the loop's heap (with its context) until the loop sweeps it out, long
        enough for the collector to promote it: thousands of fetches a second
        then fed full collections of the whole heap. The timer fires at most
        once per deadline; answered requests just leave ``_deadlines``.
        """
        if not self._deadlines or self._closed:
            return
        earliest = min(d for d, _api, _wait in self._deadlines.values())
        if self._timer is not None:
            if self._timer_at <= earliest:
                return
            self._timer.cancel()  # a shorter deadline came after a longer one
        self._timer, self._timer_at = loop.call_at(earliest, self._expire), earliest

    def _expire(self) -> None:
        """The timer: fail the first overdue request and close, or re-arm."""
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for cid, (deadline, api, wait) in list(self._deadlines.items()):
            future = self._pending.get(cid)
            if future is None or future.done():
                del self._deadlines[cid]  # answered, or its caller went away
            elif deadline <= now:
                # The stream is out of step from here on: close it, failing
                # the other requests in flight too.
                future.set_exception(RequestTimeoutError(
                    f"no response within {wait}s", api=api, **self._context()))
                self._fail(
                    CloseReason.REQUEST_TIMEOUT,
                    ConnectionClosedError(
                        "connection closed after a request timed out",
                        reason=CloseReason.REQUEST_TIMEOUT.value,
                        **self._context(),
                    ),
                )
                return
        self._arm(loop)

    def _broken(self, e: BaseException) -> KielError:
        real = getattr(e, "real_error", None)
        detail = f": {real}" if real else ""
        return ConnectionClosedError(
            f"connection broken{detail}",
            reason=CloseReason.CONNECTION_BROKEN.value,
            **self._context(),
        )

    async def _read_loop(self, stream: IOStream) -> None:
        # Ends when the stream closes, which _fail() (and so close()) does:
        # a pending read_bytes then raises StreamClosedError.
        while not self._closed:
            try:
                data = await stream.read_bytes(handshake.READ_CHUNK, partial=True)
            except StreamClosedError as e:
                self._fail(CloseReason.CONNECTION_BROKEN, self._broken(e))
                return
            try:
                responses = self._framing.receive_data(data)
            except ProtocolError as e:
                e.with_context(**self._context())
                self._fail(CloseReason.OUT_OF_SYNC, e)
                return
            deadlines = self._deadlines
            for cid, response in responses:
                deadlines.pop(cid, None)
                future = self._pending.pop(cid, None)
                if future is not None and not future.done():
                    future.set_result(response)

    def close(self) -> None:
        """Close the connection; pending requests fail with :class:`ConnectionClosedError`."""
        self._fail(
            CloseReason.SHUTDOWN,
            ConnectionClosedError(
                "connection closed by client", reason=CloseReason.SHUTDOWN.value, **self._context()
            ),
        )

    def _fail(self, reason: CloseReason, error: Union[KielError, Exception]) -> None:
        if self._closed:
            return
        self._closed = True
        self._close_error = error if isinstance(error, KielError) else None
        if reason is not CloseReason.SHUTDOWN:
            log.info("%r closed: %s (%s)", self, reason.value, error)
        pending, self._pending = self._pending, {}
        self._deadlines.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        if self._stream is not None:
            self._stream.close()
        if self._opening is not None:
            self._opening.close()
