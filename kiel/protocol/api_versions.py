"""ApiVersions v0 to v3 (api key 18, Kafka 0.10+): which API versions a broker speaks.

Wire grammar::

    ApiVersionsRequest v0-v2  => (empty)
    ApiVersionsRequest v3     => ClientSoftwareName(compact string)
                                 ClientSoftwareVersion(compact string) TaggedFields
    ApiVersionsResponse v0    => ErrorCode(int16) [ApiVersion]
    ApiVersionsResponse v1-v2 => ErrorCode(int16) [ApiVersion] ThrottleTimeMs(int32)
    ApiVersionsResponse v3    => ErrorCode(int16) compact[ApiVersion TaggedFields]
                                 ThrottleTimeMs(int32) TaggedFields
      ApiVersion => ApiKey(int16) MinVersion(int16) MaxVersion(int16)
      v3's tagged fields: 0 SupportedFeatures, 1 FinalizedFeaturesEpoch,
      2 FinalizedFeatures, 3 ZkMigrationReady

v2 is v1 again (it only says the broker may throttle before answering).
v3 (Kafka 2.4+, KIP-511) is the first flexible version: the client names
itself (Kafka requires both names to match :data:`CLIENT_SOFTWARE_PATTERN`,
else it answers INVALID_REQUEST), its response header stays v0.

Two broker behaviours shape how a client uses this API:

* Kafka 0.8 and 0.9 brokers do not know it and close the connection: that is
  how a client tells a legacy broker from a current one.
* A broker asked for an ApiVersions version it does not support answers with
  a *v0-shaped* body and error code 35 (UNSUPPORTED_VERSION), listing its
  ranges, whatever version was asked for (KIP-511). A v1 or v2 response
  decoder then runs out of bytes (a :class:`~kiel.exc.TruncatedError`).
  kiel reads such an answer as :class:`ApiVersionsResponseV0` (the
  registration's ``fallback_response``), and :mod:`kiel.handshake` asks
  again with the highest version the broker lists.

Example::

    framing.send_request(api_versions_request(3))
    ...
    ranges = version_ranges(response)       # {api_key: ApiVersionRange}
    fetch_version = pick_version((0, 4), ranges.get(1))
"""
import re
from typing import Annotated, Any, NamedTuple, Optional

from kiel._version import __version__
from kiel.exc import ConfigError
from kiel.protocol.api import Api, flexible_versions, register
from kiel.protocol.primitives import Array, Boolean, Int16, Int32, Int64, String
from kiel.protocol.schema import Tagged

API_KEY = 18
#: Kafka's ``"flexibleVersions": "3+"``.
flexible_versions(API_KEY, 3)

#: What Kafka accepts as a client software name or version (KIP-511).
CLIENT_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


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


class ApiVersionsRequestV3(NamedTuple):
    """ApiVersions v3 request: the client's software name and version.

    Both must match :data:`CLIENT_SOFTWARE_PATTERN`
    (:func:`client_software` makes such names).
    """

    client_software_name: Annotated[str, String]
    client_software_version: Annotated[str, String]


class SupportedFeatureKey(NamedTuple):
    """A feature the broker supports, from ``min_version`` to ``max_version``."""

    name: Annotated[str, String]
    min_version: Annotated[int, Int16]
    max_version: Annotated[int, Int16]


class FinalizedFeatureKey(NamedTuple):
    """A feature finalized cluster-wide, at levels ``min`` to ``max``."""

    name: Annotated[str, String]
    max_version_level: Annotated[int, Int16]
    min_version_level: Annotated[int, Int16]


class ApiVersionsResponseV3(NamedTuple):
    """ApiVersions v3 response: v2's fields and the broker's features as tagged fields."""

    error_code: Annotated[int, Int16]
    api_keys: Annotated[list[ApiVersionRange], Array(ApiVersionRange)]
    throttle_time_ms: Annotated[int, Int32]
    supported_features: Annotated[
        list[SupportedFeatureKey], Array(SupportedFeatureKey), Tagged(0)] = []
    finalized_features_epoch: Annotated[int, Int64, Tagged(1)] = -1
    finalized_features: Annotated[
        list[FinalizedFeatureKey], Array(FinalizedFeatureKey), Tagged(2)] = []
    zk_migration_ready: Annotated[bool, Boolean, Tagged(3)] = False


API_VERSIONS_V0 = register(
    Api(API_KEY, 0, "ApiVersions", ApiVersionsRequestV0, ApiVersionsResponseV0)
)
API_VERSIONS_V1 = register(
    Api(API_KEY, 1, "ApiVersions", ApiVersionsRequestV1, ApiVersionsResponseV1,
        fallback_response=ApiVersionsResponseV0)
)
API_VERSIONS_V2 = register(
    Api(API_KEY, 2, "ApiVersions", ApiVersionsRequestV2, ApiVersionsResponseV2,
        fallback_response=ApiVersionsResponseV0)
)
API_VERSIONS_V3 = register(
    Api(API_KEY, 3, "ApiVersions", ApiVersionsRequestV3, ApiVersionsResponseV3,
        fallback_response=ApiVersionsResponseV0)
)

#: The registered ApiVersions versions, by version.
API_VERSIONS: dict[int, Api] = {api.version: api for api in (
    API_VERSIONS_V0, API_VERSIONS_V1, API_VERSIONS_V2, API_VERSIONS_V3)}


def client_software(name: str, version: str) -> tuple[str, str]:
    """``name`` and ``version`` made acceptable to Kafka (:data:`CLIENT_SOFTWARE_PATTERN`).

    Every character Kafka refuses becomes ``-`` and the ends are trimmed to
    a letter or digit: ``"1.0.0.dev0+g3f2a"`` becomes ``"1.0.0.dev0-g3f2a"``.

    Returns:
        ``(name, version)``; ``"unknown"`` for a part left empty.
    """
    def clean(text: str) -> str:
        text = re.sub(r"[^a-zA-Z0-9\-.]", "-", text)
        text = re.sub(r"^[^a-zA-Z0-9]+|[^a-zA-Z0-9]+$", "", text)
        return text or "unknown"

    return clean(name), clean(version)


def api_versions_request(version: int = 0) -> Any:
    """The ApiVersions request of ``version``.

    Args:
        version: 0 to 3; v3 names kiel and its version (:func:`client_software`).

    Returns:
        an instance of the request struct registered for that version.

    Raises:
        ConfigError: kiel does not speak that version.
    """
    api = API_VERSIONS.get(version) if type(version) is int else None
    if api is None:
        raise ConfigError(f"ApiVersions version {version!r} is not one of {sorted(API_VERSIONS)}")
    if api.request is ApiVersionsRequestV3:
        return ApiVersionsRequestV3(*client_software("kiel", __version__))
    return api.request()


def version_ranges(response: Any) -> dict[int, ApiVersionRange]:
    """Index an ApiVersions response (any version) by API key.

    Args:
        response: an ``ApiVersionsResponseV0``, ``V1``, ``V2`` or ``V3``.

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
