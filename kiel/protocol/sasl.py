"""SaslHandshake v0/v1 (api key 17) and SaslAuthenticate v0/v1 (api key 36), Kafka 1.0+.

A client that authenticates with SASL asks SaslHandshake for a mechanism
(the broker answers with the mechanisms it enables), then exchanges the
mechanism's messages wrapped in SaslAuthenticate requests until the broker
says it is done. Wire grammar (Apache Kafka's message definitions)::

    SaslHandshakeRequest v0-v1     => Mechanism(string)
    SaslHandshakeResponse v0-v1    => ErrorCode(int16) [Mechanisms(string)]
    SaslAuthenticateRequest v0-v1  => AuthBytes(bytes)
    SaslAuthenticateResponse v0    => ErrorCode(int16) ErrorMessage(nullable string)
                                      AuthBytes(bytes)
    SaslAuthenticateResponse v1    => v0 SessionLifetimeMs(int64)

SaslHandshake v0 means "the SASL tokens follow as raw, unframed bytes"
(Kafka 0.10); v1 means "they follow inside SaslAuthenticate". kiel speaks
v1 only, so SaslHandshake v0 is registered for decoding and completeness
but the connection refuses a broker that offers no v1. SaslAuthenticate v2
and later are flexible versions, which kiel's framing does not speak.

The authentication bytes carry secrets (PLAIN's password, SCRAM's proof):
the request structs' ``repr()`` hides them, so an error message or a log
line that shows a request never shows a credential.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Bytes, Int16, Int64, NullableString, String

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


class SaslHandshakeRequest(NamedTuple):
    """SaslHandshake v0 request: the mechanism the client wants."""

    mechanism: Annotated[str, String]


class SaslHandshakeRequestV1(SaslHandshakeRequest):
    """SaslHandshake v1 request (the v0 layout; SaslAuthenticate carries the tokens)."""

    __slots__ = ()


class SaslHandshakeResponse(NamedTuple):
    """SaslHandshake response (v0 and v1): the mechanisms the broker enables."""

    error_code: Annotated[int, Int16]
    mechanisms: Annotated[list[str], Array(String)]


class SaslHandshakeResponseV1(SaslHandshakeResponse):
    """SaslHandshake v1 response (the v0 layout; its own class for the registry)."""

    __slots__ = ()


class SaslAuthenticateRequest(NamedTuple):
    """SaslAuthenticate v0 request: one client message of the mechanism."""

    auth_bytes: Annotated[bytes, Bytes]

    def __repr__(self) -> str:
        # The bytes hold a password or a proof: never shown.
        return f"{type(self).__name__}(auth_bytes=<{len(self.auth_bytes)} bytes hidden>)"


class SaslAuthenticateRequestV1(SaslAuthenticateRequest):
    """SaslAuthenticate v1 request (the v0 layout)."""

    __slots__ = ()


class SaslAuthenticateResponse(NamedTuple):
    """SaslAuthenticate v0 response: the server's message, or an error."""

    error_code: Annotated[int, Int16]
    error_message: Annotated[Optional[str], NullableString]
    auth_bytes: Annotated[bytes, Bytes]


class SaslAuthenticateResponseV1(NamedTuple):
    """SaslAuthenticate v1 response: v0 plus the session lifetime (0: unlimited)."""

    error_code: Annotated[int, Int16]
    error_message: Annotated[Optional[str], NullableString]
    auth_bytes: Annotated[bytes, Bytes]
    session_lifetime_ms: Annotated[int, Int64]


SASL_HANDSHAKE_V0 = register(Api(SASL_HANDSHAKE_KEY, 0, "SaslHandshake",
                                 SaslHandshakeRequest, SaslHandshakeResponse))
SASL_HANDSHAKE_V1 = register(Api(SASL_HANDSHAKE_KEY, 1, "SaslHandshake",
                                 SaslHandshakeRequestV1, SaslHandshakeResponseV1))
SASL_AUTHENTICATE_V0 = register(Api(SASL_AUTHENTICATE_KEY, 0, "SaslAuthenticate",
                                    SaslAuthenticateRequest, SaslAuthenticateResponse))
SASL_AUTHENTICATE_V1 = register(Api(SASL_AUTHENTICATE_KEY, 1, "SaslAuthenticate",
                                    SaslAuthenticateRequestV1, SaslAuthenticateResponseV1))


def sasl_authenticate_request(version: int, auth_bytes: bytes) -> SaslAuthenticateRequest:
    """The SaslAuthenticate request of ``version`` (0 or 1) carrying ``auth_bytes``.

    Args:
        version: the negotiated SaslAuthenticate version.
        auth_bytes: the mechanism's client message.

    Returns:
        the request struct.
    """
    cls = SaslAuthenticateRequestV1 if version >= 1 else SaslAuthenticateRequest
    return cls(auth_bytes)
