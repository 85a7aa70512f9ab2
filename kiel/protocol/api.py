"""The API registry and the request/response headers.

Each API module declares its request and response structs and registers one
:class:`Api` for them. The framing objects look APIs up here: by request type
when sending, by ``(api_key, api_version)`` when a broker receives.

Wire grammar (Kafka protocol guide)::

    RequestOrResponse => Size(int32) (RequestMessage | ResponseMessage)
    RequestMessage    => ApiKey(int16) ApiVersion(int16) CorrelationId(int32)
                         ClientId(string) Request
    ResponseMessage   => CorrelationId(int32) Response
"""
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple, Optional

from kiel.protocol.primitives import Int16, Int32, NullableString


class RequestHeader(NamedTuple):
    """The header in front of every request."""

    api_key: Annotated[int, Int16]
    api_version: Annotated[int, Int16]
    correlation_id: Annotated[int, Int32]
    client_id: Annotated[Optional[str], NullableString]


class ResponseHeader(NamedTuple):
    """The header in front of every response."""

    correlation_id: Annotated[int, Int32]


class Api(NamedTuple):
    """One API version: its key, version, name and struct classes.

    ``expects_response(request)`` is False for requests the broker never
    answers (a Produce with ``required_acks=0``).
    """

    key: int
    version: int
    name: str
    request: type
    response: type
    expects_response: Callable[[Any], bool] = lambda request: True


BY_KEY: dict[tuple[int, int], Api] = {}
BY_REQUEST: dict[type, Api] = {}
BY_RESPONSE: dict[type, Api] = {}


def register(api: Api) -> Api:
    """Add ``api`` to the registry; returns it."""
    BY_KEY[(api.key, api.version)] = api
    BY_REQUEST[api.request] = api
    BY_RESPONSE[api.response] = api
    return api
