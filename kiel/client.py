"""What every kiel client shares: a :class:`kiel.cluster.Cluster`, connect and close."""
import ssl
from collections.abc import Sequence
from typing import Any, Optional, TypeVar, Union

from kiel.cluster import Cluster
from kiel.protocol.framing import DEFAULT_MAX_FRAME_SIZE

C = TypeVar("C", bound="Client")


class Client:
    """Base of :class:`~kiel.clients.Producer`, :class:`~kiel.clients.SingleConsumer`
    and :class:`~kiel.clients.GroupedConsumer`.

    Args:
        brokers: bootstrap list, ``["host", "host:port", ...]`` or a
            comma-separated string; the default port is 9092.
        client_id: sent in every request header (shows up in broker logs).
        connect_timeout: seconds per connection attempt.
        request_timeout: default seconds to wait for a response.
        metadata_max_age: refresh cluster metadata at least this often (s).
        retry_backoff: first retry delay (s); doubles up to ``max_backoff``.
        max_backoff: largest retry delay (s).
        retries: retriable failures are retried this many times, then raised.
        ssl_context: an ``ssl.SSLContext`` to connect with TLS; its
            ``check_hostname`` and ``verify_mode`` decide what is checked.
        ssl_options: the deprecated name of ``ssl_context`` (warns).
        sasl_mechanism: ``"PLAIN"``, ``"SCRAM-SHA-256"`` or
            ``"SCRAM-SHA-512"``: authenticate every connection with SASL.
        sasl_username: the SASL user name.
        sasl_password: the SASL password (never logged, not in ``repr()``).
        max_frame_size: the largest response accepted from a broker (bytes);
            a consumer's ``max_fetch_size`` must fit in it.
        api_version: ``"auto"`` (default): ask each broker which protocol
            versions it speaks (a Kafka 0.8 broker closes the connection on
            the question and gets the 0.8.2 versions); or a broker release
            such as ``(0, 8, 2)`` or ``(2, 8)``: speak that release's
            versions without asking (kafka-python's meaning).

    Raises:
        ConfigError: a bad setting.
    """

    def __init__(
        self,
        brokers: Union[str, Sequence[str]],
        *,
        client_id: str = "kiel",
        connect_timeout: float = 10.0,
        request_timeout: float = 30.0,
        metadata_max_age: float = 300.0,
        retry_backoff: float = 0.1,
        max_backoff: float = 5.0,
        retries: int = 5,
        ssl_context: Optional[ssl.SSLContext] = None,
        ssl_options: Any = None,
        sasl_mechanism: Optional[str] = None,
        sasl_username: Optional[str] = None,
        sasl_password: Optional[str] = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        api_version: Any = "auto",
    ) -> None:
        self.cluster = Cluster(
            brokers,
            client_id=client_id,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            metadata_max_age=metadata_max_age,
            retry_backoff=retry_backoff,
            max_backoff=max_backoff,
            retries=retries,
            ssl_options=ssl_options,
            ssl_context=ssl_context,
            sasl_mechanism=sasl_mechanism,
            sasl_username=sasl_username,
            sasl_password=sasl_password,
            max_frame_size=max_frame_size,
            api_version=api_version,
        )
        self.closed = False

    async def connect(self) -> None:
        """Load cluster metadata from the bootstrap brokers.

        Raises:
            NoBrokersError: no bootstrap broker answered within the retries.
        """
        await self.cluster.connect()

    async def close(self) -> None:
        """Close every connection. Subclasses drain their own work first."""
        self.closed = True
        self.cluster.close()

    async def __aenter__(self: C) -> C:
        await self.connect()
        return self

    async def __aexit__(self, exc_type: Optional[type[BaseException]], exc: Any, tb: Any) -> None:
        await self.close()
