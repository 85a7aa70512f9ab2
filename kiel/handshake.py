"""What a new connection says before it carries requests: ApiVersions, then SASL.

Each exchange runs on the bare stream before the connection's reader starts,
with a framing object of its own, so the connection's correlation ids begin
in step: a request is written and its answer read here, one at a time.

These functions raise typed errors without the connection's context; the
:class:`~kiel.connection.Connection` bounds each exchange by its request
timeout, adds its context, and closes itself on any failure (a
half-negotiated or half-authenticated stream is never used).

The password and the SCRAM proof are never logged.
"""

import asyncio
import logging
from typing import Any, Optional

from tornado.iostream import IOStream, StreamClosedError

from kiel.exc import ConnectionClosedError, ProtocolError, UnsupportedFeatureError, for_code
from kiel.protocol.api_versions import ApiVersionRange, ApiVersionsRequestV0, version_ranges
from kiel.protocol.framing import ClientFraming
from kiel.protocol.sasl import (
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    SaslHandshakeRequestV1,
    sasl_authenticate_request,
)
from kiel.protocol.versions import Versions
from kiel.sasl import SaslCredentials

__all__ = ["ask_versions", "authenticate", "round_trip"]

log = logging.getLogger(__name__)

#: Bytes asked of the stream per read (the connection's reader reads the same).
READ_CHUNK = 256 * 1024


async def round_trip(stream: IOStream, framing: ClientFraming, request: Any) -> Any:
    """One request answered on ``stream`` before the connection's reader starts.

    Returns:
        the response, or ``None`` if the broker closed the connection.

    Raises:
        ProtocolError: the answer did not parse, or more bytes came.
    """
    _, frame, _ = framing.send_request(request)
    try:
        await stream.write(frame)
        while True:
            data = await stream.read_bytes(READ_CHUNK, partial=True)
            answers = framing.receive_data(data)
            if answers:
                break
    except StreamClosedError:
        return None
    if len(answers) > 1 or framing.buffered:
        raise ProtocolError(f"bytes after the {type(answers[0][1]).__name__}, unasked for")
    return answers[0][1]


async def ask_versions(
    stream: IOStream, framing: ClientFraming
) -> Optional[dict[int, ApiVersionRange]]:
    """One ApiVersions v0 round trip on ``stream``.

    Returns:
        the broker's ranges, or ``None`` if it closed the connection (a
        Kafka 0.8/0.9 broker does).

    Raises:
        ProtocolError: the answer did not parse.
        BrokerError: an error code and no ranges.
    """
    response = await round_trip(stream, framing, ApiVersionsRequestV0())
    if response is None:
        return None
    error = for_code(response.error_code)
    # UNSUPPORTED_VERSION (35) still lists the ranges (KIP-511).
    if error is not None and not response.api_keys:
        raise error(errno=response.error_code, api="ApiVersions")
    return version_ranges(response)


async def authenticate(
    stream: IOStream, framing: ClientFraming, sasl: SaslCredentials, versions: Versions
) -> None:
    """SaslHandshake v1, then SaslAuthenticate until the mechanism is done.

    Raises:
        UnsupportedFeatureError: the broker has no SaslHandshake v1 and
            SaslAuthenticate (Kafka 0.8 to 0.11, or the embedded broker).
        AuthenticationError: refused (a wrong password, a mechanism the
            broker does not enable) or the server failed SCRAM's check.
        ConnectionClosedError: the broker closed the connection meanwhile.
    """
    handshake = versions.get(SASL_HANDSHAKE_KEY)
    version = versions.get(SASL_AUTHENTICATE_KEY)
    if handshake is None or handshake < 1 or version is None:
        raise UnsupportedFeatureError(
            f"SASL {sasl.mechanism} needs SaslHandshake v1 and SaslAuthenticate "
            f"(Kafka 1.0 or later); the broker's versions ({versions.source}) "
            "have none", api="SaslHandshake")
    answer = await round_trip(stream, framing, SaslHandshakeRequestV1(sasl.mechanism))
    if answer is None:
        raise _closed_during("SaslHandshake")
    error = for_code(answer.error_code)
    if error is not None:
        raise error(f"the broker enables SASL {list(answer.mechanisms)}, "
                    f"not {sasl.mechanism}", errno=answer.error_code, api="SaslHandshake")
    mechanism = sasl.client()
    message: Optional[bytes] = mechanism.first()
    loop = asyncio.get_running_loop()
    while message is not None:
        reply = await round_trip(stream, framing, sasl_authenticate_request(version, message))
        if reply is None:
            raise _closed_during("SaslAuthenticate")
        error = for_code(reply.error_code)
        if error is not None:
            raise error(f"SASL {sasl.mechanism} refused for user {sasl.username!r}: "
                        f"{reply.error_message or 'no reason given'}",
                        errno=reply.error_code, api="SaslAuthenticate")
        # SCRAM's PBKDF2 takes milliseconds of CPU: off the event loop.
        message = await loop.run_in_executor(None, mechanism.step, bytes(reply.auth_bytes))


def _closed_during(api: str) -> ConnectionClosedError:
    return ConnectionClosedError(f"the broker closed the connection during {api}", api=api)
