"""ApiVersions v0 to v2 (api key 18, Kafka 0.10+): which API versions a broker speaks.

Wire grammar::

    ApiVersionsRequest v0-v2  => (empty)
    ApiVersionsResponse v0    => ErrorCode(int16) [ApiVersion]
    ApiVersionsResponse v1-v2 => ErrorCode(int16) [ApiVersion] ThrottleTimeMs(int32)
      ApiVersion => ApiKey(int16) MinVersion(int16) MaxVersion(int16)

v2 is v1 again (it only says the broker may throttle before answering).
v3 and later are "flexible" versions (compact arrays, tagged fields and a
request header with tagged fields), which kiel's framing does not speak.

Two broker behaviours shape how a client uses this API:

* Kafka 0.8 and 0.9 brokers do not know it and close the connection: that is
  how a client tells a legacy broker from a current one.
* A broker asked for an ApiVersions version it does not support answers with
  a *v0-shaped* body and error code 35 (UNSUPPORTED_VERSION), listing its
  ranges, whatever version was asked for (KIP-511). A v1 or v2 response
  decoder then runs out of bytes (a :class:`~kiel.exc.TruncatedError`).
  Asking with v0 first avoids this altogether: every broker that knows the
  API answers v0, and v0 carries all the ranges.

Example::

    framing.send_request(ApiVersionsRequestV0())
    ...
    ranges = version_ranges(response)       # {api_key: ApiVersionRange}
    fetch_version = pick_version((0, 4), ranges.get(1))
"""
from typing import Annotated, Any, NamedTuple, Optional

from kiel.exc import ConfigError
from kiel.protocol.api import Api, register
from kiel.protocol.primitives import Array, Int16, Int32

API_KEY = 18


class ApiVersionRange(NamedTuple):
    """The versions of one API a broker speaks, ``min_version`` to ``max_version``."""

    api_key: Annotated[int, Int16]
    min_version: Annotated[int, Int16]
    max_version: Annotated[int, Int16]


class ApiVersionsRequestV0(NamedTuple):
    """ApiVersions v0 request (no fields)."""


class ApiVersionsRequestV1(NamedTuple):
    """ApiVersions v1 request (no fields)."""


class ApiVersionsRequestV2(NamedTuple):
    """ApiVersions v2 request (no fields)."""


class ApiVersionsResponseV0(NamedTuple):
    """ApiVersions v0 response."""

    error_code: Annotated[int, Int16]
    api_keys: Annotated[list[ApiVersionRange], Array(ApiVersionRange)]


class ApiVersionsResponseV1(NamedTuple):
    """ApiVersions v1 response: v0 plus the time the broker throttled the request."""

    error_code: Annotated[int, Int16]
    api_keys: Annotated[list[ApiVersionRange], Array(ApiVersionRange)]
    throttle_time_ms: Annotated[int, Int32]


class ApiVersionsResponseV2(ApiVersionsResponseV1):
    """ApiVersions v2 response (the v1 layout; its own class for the registry)."""

    __slots__ = ()


API_VERSIONS_V0 = register(
    Api(API_KEY, 0, "ApiVersions", ApiVersionsRequestV0, ApiVersionsResponseV0)
)
API_VERSIONS_V1 = register(
    Api(API_KEY, 1, "ApiVersions", ApiVersionsRequestV1, ApiVersionsResponseV1)
)
API_VERSIONS_V2 = register(
    Api(API_KEY, 2, "ApiVersions", ApiVersionsRequestV2, ApiVersionsResponseV2)
)

#: The registered ApiVersions versions, by version.
API_VERSIONS: dict[int, Api] = {api.version: api for api in (
    API_VERSIONS_V0, API_VERSIONS_V1, API_VERSIONS_V2)}


def api_versions_request(version: int = 0) -> Any:
    """The ApiVersions request of ``version`` (it has no fields).

    Args:
        version: 0, 1 or 2.

    Returns:
        an instance of the request struct registered for that version.

    Raises:
        ConfigError: kiel does not speak that version.
    """
    api = API_VERSIONS.get(version)
    if api is None:
        raise ConfigError(f"ApiVersions version {version!r} is not one of {sorted(API_VERSIONS)}")
    return api.request()


def version_ranges(response: Any) -> dict[int, ApiVersionRange]:
    """Index an ApiVersions response (any version) by API key.

    Args:
        response: an ``ApiVersionsResponseV0``, ``V1`` or ``V2``.

    Returns:
        ``{api_key: ApiVersionRange}`` (a key listed twice keeps its last range).
    """
    return {entry.api_key: entry for entry in response.api_keys}


def pick_version(ours: tuple[int, int], theirs: Optional[ApiVersionRange]) -> Optional[int]:
    """The highest version of one API both sides speak.

    Args:
        ours: the ``(min, max)`` versions the client speaks.
        theirs: the broker's range for that API, ``None`` if it did not list it.

    Returns:
        the version to use, or ``None`` if the ranges do not overlap.
    """
    if theirs is None:
        return None
    low = max(ours[0], theirs.min_version)
    high = min(ours[1], theirs.max_version)
    return high if low <= high else None
