"""What every kiel client shares: a :class:`kiel.cluster.Cluster`, connect and close."""
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional, TypedDict, TypeVar, Union

from kiel import _options
from kiel.cluster import Cluster

if TYPE_CHECKING:
    # Only the type checker reads it (``typing.Unpack`` needs Python 3.11).
    from typing_extensions import Unpack

C = TypeVar("C", bound="Client")


class ClientOptions(TypedDict, total=False):
    """The connection settings every client takes, keyword-only.

    :class:`~kiel.cluster.Cluster` owns them and their defaults; a client
    passes what it was given straight on, so each setting is declared once
    and a misspelt one is a type error for mypy, and at run time a
    :class:`~kiel.exc.ConfigError` naming kiel's spelling when it is
    kiel 0.9's or another client's (see :func:`check_options`).

    Attributes:
        client_id: sent in every request header (shows up in broker logs;
            default ``"kiel"``).
        connect_timeout: seconds per connection attempt (10), until the
            connection is ready for requests: TCP, TLS, ApiVersions and SASL
            together.
        request_timeout: default seconds to wait for a response (30); also
            the bound of :meth:`Client.connect` as a whole, every bootstrap
            broker and retry included.
        metadata_max_age: refresh cluster metadata at least this often (300 s).
        retry_backoff: first retry delay (0.1 s); doubles up to ``max_backoff``.
        max_backoff: largest retry delay (5 s).
        retries: retriable failures are retried this many times, then raised (5).
        ssl_context: an ``ssl.SSLContext`` to connect with TLS; its
            ``check_hostname`` and ``verify_mode`` decide what is checked.
        ssl_options: the deprecated name of ``ssl_context`` (warns).
        sasl_mechanism: ``"PLAIN"``, ``"SCRAM-SHA-256"``, ``"SCRAM-SHA-512"``
            or ``"OAUTHBEARER"``: authenticate every connection with SASL.
        sasl_username: the SASL user name.
        sasl_password: the SASL password (never logged, not in ``repr()``).
        sasl_oauth_token_provider: OAUTHBEARER's token provider, a plain or
            ``async`` function of no arguments returning a
            :class:`~kiel.sasl.OAuthBearerToken` or ``(token, expires_at)``
            (seconds since the epoch); called again for new connections
            once 80% of the token's lifetime passed (never logged, not in
            ``repr()``). :func:`kiel.sasl.unsecured_token_provider` for tests.
        max_in_flight: pipelined requests per connection (64).
        max_frame_size: the largest response accepted from a broker (bytes);
            a consumer's ``max_fetch_size`` must fit in it.
        max_metadata_brokers: the most brokers one Metadata answer may list
            (10,000); more is an :class:`~kiel.exc.InvalidMetadataError`.
        max_metadata_partitions: the most partitions (and topics) one
            Metadata answer may hold (1,000,000), likewise.
        api_version: ``"auto"`` (default): ask each broker which protocol
            versions it speaks (ApiVersions; a 0.8 broker gets the 0.8.2
            versions); or a broker release such as ``(0, 8, 2)`` or
            ``(2, 8)`` to pin the versions of that release and ask nothing
            (kafka-python's meaning).
    """

    client_id: str
    connect_timeout: float
    request_timeout: float
    metadata_max_age: float
    retry_backoff: float
    max_backoff: float
    retries: int
    ssl_context: Optional[ssl.SSLContext]
    ssl_options: Any
    sasl_mechanism: Optional[str]
    sasl_username: Optional[str]
    sasl_password: Optional[str]
    sasl_oauth_token_provider: Any
    max_in_flight: int
    max_frame_size: int
    max_metadata_brokers: int
    max_metadata_partitions: int
    api_version: Any


_options.register_connection_settings(ClientOptions.__annotations__)


def check_options(client: str, options: Any) -> None:
    """Refuse an option no layer of ``client`` takes, saying what to write instead.

    Args:
        client: the client's class name (for the message).
        options: what reached :class:`Client` unclaimed by the client itself.

    Raises:
        ConfigError: an unknown option (kiel 0.9's and the other clients'
            spellings, and their ``*_ms`` settings, get kiel's name).
    """
    unknown = set(options) - set(ClientOptions.__annotations__)
    if unknown:
        raise _options.unknown(client, unknown, ClientOptions.__annotations__)


class Client:
    """Base of :class:`~kiel.clients.Producer`, :class:`~kiel.clients.SingleConsumer`
    and :class:`~kiel.clients.GroupedConsumer`.

    Args:
        brokers: bootstrap list, ``["host", "host:port", ...]`` or a
            comma-separated string; the default port is 9092.
        **options: the connection settings, :class:`ClientOptions`
            (``client_id``, timeouts, retries, TLS and SASL, ``api_version``...).

    Raises:
        ConfigError: a bad setting.
    """

    @_options.constructor
    def __init__(
        self, brokers: Union[str, Sequence[str]], **options: "Unpack[ClientOptions]"
    ) -> None:
        check_options(type(self).__name__, options)
        self.cluster = Cluster(brokers, **options)
        self.closed = False

    async def connect(self) -> None:
        """Load cluster metadata from the bootstrap brokers.

        Bounded by ``request_timeout`` as a whole; each connection attempt by
        ``connect_timeout`` (see :meth:`kiel.cluster.Cluster.connect`).

        Raises:
            NoBrokersError: no bootstrap broker answered within
                ``request_timeout`` (or the retries ran out sooner).
            NotKafkaError: a bootstrap address answered, but not as Kafka.
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
