"""What a new connection says before it carries requests: ApiVersions, then SASL.

Each exchange runs on the bare stream before the connection's reader starts,
with a framing object of its own, so the connection's correlation ids begin
in step: a request is written and its answer read here, one at a time.

These functions raise typed errors without the connection's context; the
:class:`~kiel.connection.Connection` bounds each exchange by its request
timeout, adds its context, and closes itself on any failure (a
half-negotiated or half-authenticated stream is never used).

The password, the SCRAM proof and the OAUTHBEARER token are never logged.
"""

import asyncio
import logging
from typing import Any, Optional

from tornado.iostream import IOStream, StreamClosedError

from kiel.exc import ConnectionClosedError, ProtocolError, UnsupportedFeatureError, for_code
from kiel.protocol.api_versions import (
    API_KEY as API_VERSIONS_KEY,
)
from kiel.protocol.api_versions import (
    API_VERSIONS,
    ApiVersionRange,
    ApiVersionsResponseV0,
    api_versions_request,
    version_ranges,
)
from kiel.protocol.framing import ClientFraming
from kiel.protocol.sasl import (
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    SaslHandshakeRequestV1,
    sasl_authenticate_request,
)
from kiel.protocol.versions import Versions
from kiel.sasl import Credentials

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


#: UNSUPPORTED_VERSION: the broker does not know the ApiVersions version asked.
_UNSUPPORTED_VERSION = 35


async def ask_versions(
    stream: IOStream, framing: ClientFraming
) -> Optional[dict[int, ApiVersionRange]]:
    """Ask ApiVersions on ``stream``: the broker's version of every API.

    Strategy: ask with kiel's highest ApiVersions version (v3, which names
    kiel and its version to the broker, KIP-511). A broker that does not
    know it answers UNSUPPORTED_VERSION (35) in v0's layout: Kafka 2.4+
    lists its ranges there, older brokers list none. Then ask once more, as
    the Java client does, with the highest version both sides know (the
    broker's ApiVersions maximum, v0 when it listed nothing); every broker
    that knows the API knows v0. A broker that closes the connection on the
    first question is Kafka 0.8/0.9 (the caller then speaks the 0.8.2
    versions).

    Returns:
        the broker's ranges, or ``None`` if it closed the connection on the
        first question (a Kafka 0.8/0.9 broker does).

    Raises:
        ProtocolError: the answer did not parse, or came in v0's layout
            without an error.
        ConnectionClosedError: the broker closed the connection on the
            second question.
        BrokerError: an error code and no ranges.
    """
    version = max(API_VERSIONS)
    response = await round_trip(stream, framing, api_versions_request(version))
    if response is None:
        return None
    if response.error_code == _UNSUPPORTED_VERSION and version > 0:
        theirs = version_ranges(response).get(API_VERSIONS_KEY)
        highest = theirs.max_version if theirs is not None else 0
        version = max(v for v in API_VERSIONS if v <= highest and v < version or v == 0)
        log.debug("the broker does not know ApiVersions v%d; asking with v%d",
                  max(API_VERSIONS), version)
        response = await round_trip(stream, framing, api_versions_request(version))
        if response is None:
            raise _closed_during("ApiVersions")
    elif type(response) is ApiVersionsResponseV0 and version > 0 and not response.error_code:
        # Only an error answer may come in v0's layout (KIP-511).
        raise ProtocolError(f"ApiVersions v{version} answered in v0's layout without an error",
                            api="ApiVersions")
    error = for_code(response.error_code)
    # An error that still lists the ranges leaves them usable; one without
    # them cannot be negotiated with.
    if error is not None and not response.api_keys:
        raise error(errno=response.error_code, api="ApiVersions")
    return version_ranges(response)


async def authenticate(
    stream: IOStream, framing: ClientFraming, sasl: Credentials, versions: Versions
) -> None:
    """SaslHandshake v1, then SaslAuthenticate until the mechanism is done.

    OAUTHBEARER's token is asked of its provider (or reused) before the
    handshake: a provider that fails sends nothing to the broker.

    Raises:
        UnsupportedFeatureError: the broker has no SaslHandshake v1 and
            SaslAuthenticate (Kafka 0.8 to 0.11, or the embedded broker).
        AuthenticationError: refused (a wrong password, a mechanism the
            broker does not enable, a token the broker refused: its RFC 7628
            status in the error's ``context["status"]``), the server failed
            SCRAM's check, or the token provider failed.
        ConnectionClosedError: the broker closed the connection meanwhile.
    """
    handshake = versions.get(SASL_HANDSHAKE_KEY)
    version = versions.get(SASL_AUTHENTICATE_KEY)
    if handshake is None or handshake < 1 or version is None:
        raise UnsupportedFeatureError(
            f"SASL {sasl.mechanism} needs SaslHandshake v1 and SaslAuthenticate "
            f"(Kafka 1.0 or later); the broker's versions ({versions.source}) "
            "have none", api="SaslHandshake")
    mechanism = await sasl.start()
    answer = await round_trip(stream, framing, SaslHandshakeRequestV1(sasl.mechanism))
    if answer is None:
        raise _closed_during("SaslHandshake")
    error = for_code(answer.error_code)
    if error is not None:
        raise error(f"the broker enables SASL {list(answer.mechanisms)}, "
                    f"not {sasl.mechanism}", errno=answer.error_code, api="SaslHandshake")
    message: Optional[bytes] = mechanism.first()
    loop = asyncio.get_running_loop()
    while message is not None:
        reply = await round_trip(stream, framing, sasl_authenticate_request(version, message))
        if reply is None:
            raise _closed_during("SaslAuthenticate")
        error = for_code(reply.error_code)
        if error is not None:
            # OAUTHBEARER's refusal: the status of the server's JSON, read
            # by the mechanism (the token is not in it, nor in the message).
            status = getattr(mechanism, "status", None)
            raise error(f"SASL {sasl.mechanism} refused for {sasl.who}: "
                        f"{reply.error_message or 'no reason given'}",
                        errno=reply.error_code, api="SaslAuthenticate", status=status)
        # SCRAM's PBKDF2 takes milliseconds of CPU: off the event loop.
        message = await loop.run_in_executor(None, mechanism.step, bytes(reply.auth_bytes))


def _closed_during(api: str) -> ConnectionClosedError:
    return ConnectionClosedError(f"the broker closed the connection during {api}", api=api)
