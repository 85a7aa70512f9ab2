"""One ApiVersions round trip over TCP: how the launcher knows a broker serves.

Blocking (a plain socket through :class:`~kiel.testing.broker.rawclient.RawClient`,
framed by :class:`~kiel.protocol.framing.ClientFraming`); do not call it on
an IOLoop.
"""
import ssl
from typing import Any, Optional

from kiel.exc import HarnessError, KielConnectionError, for_code
from kiel.protocol.api_versions import ApiVersionRange, api_versions_request, version_ranges
from kiel.testing.broker.rawclient import RawClient

__all__ = ["api_versions"]


def api_versions(address: Any, *, version: int = 0, timeout: float = 5.0,
                 client_id: str = "kiel-probe",
                 ssl_context: Optional[ssl.SSLContext] = None) -> dict[int, ApiVersionRange]:
    """Ask a broker which API versions it speaks.

    Args:
        address: ``"host:port"`` or ``(host, port)``.
        version: the ApiVersions version to ask with (0, 1 or 2).
        timeout: seconds for connecting and for each read.
        client_id: the request header's client id.
        ssl_context: ask over TLS through this context.

    Returns:
        ``{api_key: ApiVersionRange}`` as the broker listed them.

    Raises:
        HarnessError: the broker could not be reached, closed the connection
            (a Kafka 0.8 broker does), or did not answer in time.
        BrokerError: it answered with an error code (35 when it does not
            speak ``version``).
        ProtocolError: its answer did not parse.
        ConfigError: ``version`` is not 0, 1 or 2.
    """
    request = api_versions_request(version)
    try:
        with RawClient(address, timeout=timeout, client_id=client_id,
                       ssl_context=ssl_context) as client:
            client.send(request)
            response = client.receive()
    except (OSError, KielConnectionError) as e:
        raise HarnessError(f"no ApiVersions answer from {address}: {e!r}") from e
    error = for_code(response.error_code)
    if error is not None:
        raise error(errno=response.error_code, api="ApiVersions")
    return version_ranges(response)
