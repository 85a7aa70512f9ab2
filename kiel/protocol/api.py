"""The API registry and the request/response headers.

Each API module declares its request and response structs and registers one
:class:`Api` for them. The framing objects look APIs up here: by request type
when sending, by ``(api_key, api_version)`` when a broker receives.

Wire grammar (Kafka protocol guide)::

    RequestOrResponse => Size(int32) (RequestMessage | ResponseMessage)
    RequestMessage    => RequestHeader Request
    ResponseMessage   => ResponseHeader Response
    RequestHeader v1  => ApiKey(int16) ApiVersion(int16) CorrelationId(int32)
                         ClientId(nullable string)
    RequestHeader v2  => v1 TaggedFields
    ResponseHeader v0 => CorrelationId(int32)
    ResponseHeader v1 => v0 TaggedFields

Flexible versions (KIP-482): each API module declares, once, from which
version its API is flexible (:func:`flexible_versions`, Kafka's
``"flexibleVersions": "N+"``). A flexible version's messages use compact
strings, bytes and arrays and end every struct with tagged fields (see
:mod:`kiel.protocol.schema`), its requests carry header v2 and its responses
header v1, except ApiVersions' responses, whose header stays v0 in every
version: a client that does not yet know what the broker speaks must be able
to read the answer (KIP-511). The client id stays a classic string in header
v2, so a broker of any age can read the header of any request.
"""
from collections.abc import Callable
from typing import Annotated, Any, NamedTuple, Optional

from kiel.protocol.primitives import Int16, Int32, NullableString
from kiel.protocol.schema import NEVER_FLEXIBLE, is_flexible, mark_flexible

#: ApiVersions' key: its responses keep header v0 in flexible versions.
_API_VERSIONS_KEY = 18


class RequestHeader(NamedTuple):
    """The header in front of every request of a classic version (v1)."""

    api_key: Annotated[int, Int16]
    api_version: Annotated[int, Int16]
    correlation_id: Annotated[int, Int32]
    client_id: Annotated[Optional[str], NullableString]


class RequestHeaderV2(NamedTuple):
    """The request header of flexible versions: v1 and a tagged-field section.

    The client id keeps its classic form (int16 length), as Kafka defines it.
    """

    api_key: Annotated[int, Int16]
    api_version: Annotated[int, Int16]
    correlation_id: Annotated[int, Int32]
    client_id: Annotated[Optional[str], NullableString, NEVER_FLEXIBLE]


class ResponseHeader(NamedTuple):
    """The header in front of every response of a classic version (v0)."""

    correlation_id: Annotated[int, Int32]


class ResponseHeaderV1(NamedTuple):
    """The response header of flexible versions: v0 and a tagged-field section."""

    correlation_id: Annotated[int, Int32]


mark_flexible(RequestHeaderV2)
mark_flexible(ResponseHeaderV1)

#: The first flexible version of each API, by key (declared by the API
#: modules with :func:`flexible_versions`); an API absent here has none.
FLEXIBLE_FROM: dict[int, int] = {}


class Api(NamedTuple):
    """One API version: its key, version, name and struct classes.

    ``expects_response(request)`` is False for requests the broker never
    answers (a Produce with ``required_acks=0``).

    ``fallback_response`` is a response class to read a body with when it
    does not parse as ``response``: ApiVersions' v0, since a broker asked
    for an ApiVersions version it does not know answers in v0's layout
    (KIP-511).
    """

    key: int
    version: int
    name: str
    request: type
    response: type
    expects_response: Callable[[Any], bool] = lambda request: True
    fallback_response: Optional[type] = None

    @property
    def flexible(self) -> bool:
        """Whether this version is a flexible one (KIP-482)."""
        first = FLEXIBLE_FROM.get(self.key)
        return first is not None and self.version >= first

    @property
    def request_header(self) -> type:
        """The header class of this version's requests (v2 when flexible, else v1)."""
        return RequestHeaderV2 if self.flexible else RequestHeader

    @property
    def response_header(self) -> type:
        """The header class of this version's responses (v1 when flexible, but
        v0 for ApiVersions in every version)."""
        if self.flexible and self.key != _API_VERSIONS_KEY:
            return ResponseHeaderV1
        return ResponseHeader


BY_KEY: dict[tuple[int, int], Api] = {}
BY_REQUEST: dict[type, Api] = {}
BY_RESPONSE: dict[type, Api] = {}


def flexible_versions(api_key: int, first: int) -> None:
    """Declare that API ``api_key`` is flexible from version ``first`` on.

    Called once per API, before its versions are registered (Kafka's
    ``"flexibleVersions": "N+"`` of the API's message definitions).

    Raises:
        TypeError: declared twice differently, or after a version of the API
            was registered.
    """
    if FLEXIBLE_FROM.get(api_key, first) != first:
        raise TypeError(f"api key {api_key} is already flexible from v{FLEXIBLE_FROM[api_key]}")
    if any(key == api_key for key, _ in BY_KEY):
        raise TypeError(f"declare api key {api_key}'s flexible versions before registering it")
    FLEXIBLE_FROM[api_key] = first


def register(api: Api) -> Api:
    """Add ``api`` to the registry; returns it.

    The request and response classes of a flexible version become flexible
    structs (``struct_type(cls)`` compiles them so); a class cannot serve a
    flexible and a classic version both.

    Raises:
        TypeError: a class registered for a flexible and a classic version.
    """
    for cls in (api.request, api.response):
        other = BY_REQUEST.get(cls) or BY_RESPONSE.get(cls)
        if (other is not None and other.flexible != api.flexible) or (
                not api.flexible and is_flexible(cls)):
            raise TypeError(f"{cls.__name__} cannot serve both a flexible and a classic "
                            f"version ({api.name} v{api.version})")
        if api.flexible:
            mark_flexible(cls)
    BY_KEY[(api.key, api.version)] = api
    BY_REQUEST[api.request] = api
    BY_RESPONSE[api.response] = api
    return api
