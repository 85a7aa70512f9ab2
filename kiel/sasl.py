"""SASL client mechanisms, sans I/O: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, 7677)
and OAUTHBEARER (RFC 7628, Kafka's KIP-255 and KIP-342).

A mechanism produces the client's messages and checks the server's; the
connection (:mod:`kiel.connection`) carries them in SaslAuthenticate
requests. Every mechanism has the same two calls::

    mechanism = await credentials.start()  # OAUTHBEARER gets its token here
    message = mechanism.first()           # the client's first message
    while message is not None:
        answer = exchange(message)        # the server's reply (I/O: not here)
        message = mechanism.step(answer)  # the next message, None when done

SCRAM (Salted Challenge Response Authentication Mechanism) never sends the
password: the client proves it knows it (``p=``, the client proof), and the
server proves it knows the salted password too (``v=``, the server
signature), which :meth:`ScramClient.step` checks: a server that cannot
prove it gets an :class:`~kiel.exc.AuthenticationError`, not a session.

What is left out, on purpose:

* No channel binding (``n,,``: the GS2 header of a client that does not
  support it), as Kafka's own clients.
* No SASLprep of the user name or the password (RFC 4013): they are sent as
  UTF-8, as Kafka's Java client does; ASCII credentials are unaffected.
* No authorization identity (the user acts as itself).

OAUTHBEARER sends a bearer token that a token provider of the
application's returns (:class:`OAuthBearerCredentials`, which keeps it for
80% of its lifetime); :func:`unsecured_jwt` makes the unsigned tokens that
Kafka's and librdkafka's test setups accept.

Credentials never reach a log or an error message: :class:`SaslCredentials`
hides the password in ``repr()``, :class:`OAuthBearerToken` the token, and
nothing here logs them.
"""
import asyncio
import base64
import hashlib
import hmac
import inspect
import json
import logging
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Optional, Union

from kiel import _options
from kiel.exc import AuthenticationError, ConfigError
from kiel.retry import Backoff, attempts

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MIN_ITERATIONS",
    "OAuthBearerClient",
    "OAuthBearerCredentials",
    "OAuthBearerToken",
    "PlainClient",
    "SaslCredentials",
    "ScramClient",
    "TokenProvider",
    "sasl_credentials",
    "unsecured_jwt",
    "unsecured_token_provider",
]

log = logging.getLogger(__name__)

#: The mechanisms kiel speaks, by the name SaslHandshake uses.
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: The mechanisms of a user name and a password (:class:`SaslCredentials`).
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

#: The hash function of each SCRAM mechanism.
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

#: Fewest PBKDF2 iterations accepted from a server (RFC 7677 asks for 4096 at least).
MIN_ITERATIONS = 4096
#: Most PBKDF2 iterations accepted from a server: a bound on the work a server
#: can make the client do (Kafka brokers use at most 16384).
MAX_ITERATIONS = 100_000


class SaslCredentials:
    """A SASL mechanism with its user name and password; ``repr()`` hides the password.

    Args:
        mechanism: one of :data:`PASSWORD_MECHANISMS`.
        username: the user.
        password: the password (kept, never shown).

    Raises:
        ConfigError: an unknown mechanism, or a user name or password that
            is not a non-empty string.
    """

    __slots__ = ("mechanism", "username", "_password")

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in PASSWORD_MECHANISMS:
            raise ConfigError(f"sasl_mechanism must be one of {list(MECHANISMS)}, "
                              f"got {mechanism!r}")
        if not isinstance(username, str) or not username:
            raise ConfigError("sasl_username must be a non-empty string")
        if not isinstance(password, str) or not password:
            # The value is not shown: it may be a password of the wrong type.
            raise ConfigError("sasl_password must be a non-empty string")
        if "\0" in username or "\0" in password:
            raise ConfigError("sasl_username and sasl_password must not contain NUL")
        self.mechanism = mechanism
        self.username = username
        self._password = password

    @property
    def password(self) -> str:
        """The password."""
        return self._password

    def __repr__(self) -> str:
        return f"<SaslCredentials {self.mechanism} user={self.username!r} password=<hidden>>"

    @property
    def who(self) -> str:
        """Whom the credentials name, for messages."""
        return f"user {self.username!r}"

    async def start(self) -> Union["PlainClient", "ScramClient"]:
        """:meth:`client`, as :meth:`OAuthBearerCredentials.start` is called."""
        return self.client()

    def client(self) -> Union["PlainClient", "ScramClient"]:
        """A new client state machine for one authentication (one per connection).

        Returns:
            a :class:`PlainClient` or a :class:`ScramClient`.
        """
        if self.mechanism == "PLAIN":
            return PlainClient(self.username, self._password)
        return ScramClient(self.username, self._password, _SCRAM_HASHES[self.mechanism])


#: What authenticates a connection: a user and password, or a token provider.
Credentials = Union[SaslCredentials, "OAuthBearerCredentials"]


def sasl_credentials(mechanism: Optional[str], username: Optional[str],
                     password: Optional[str],
                     token_provider: Optional["TokenProvider"] = None) -> Optional[Credentials]:
    """Check a client's ``sasl_*`` settings.

    Args:
        mechanism: ``sasl_mechanism`` (``None``: no SASL).
        username: ``sasl_username``.
        password: ``sasl_password``.
        token_provider: ``sasl_oauth_token_provider`` (OAUTHBEARER's).

    Returns:
        the credentials, or ``None`` when no setting is given.

    Raises:
        ConfigError: a user name, password or token provider without a
            mechanism, a password mechanism without both a user name and a
            password, OAUTHBEARER without a token provider (or with a user
            name or password), or a bad value (see :class:`SaslCredentials`).
    """
    if mechanism is None:
        if username is not None or password is not None:
            raise ConfigError("sasl_username and sasl_password need a sasl_mechanism")
        if token_provider is not None:
            raise ConfigError("sasl_oauth_token_provider needs sasl_mechanism='OAUTHBEARER'")
        return None
    if mechanism == "OAUTHBEARER":
        if username is not None or password is not None:
            raise ConfigError("sasl_mechanism 'OAUTHBEARER' takes sasl_oauth_token_provider, "
                              "not sasl_username or sasl_password")
        if token_provider is None:
            raise ConfigError("sasl_mechanism 'OAUTHBEARER' needs sasl_oauth_token_provider "
                              "(kiel.sasl.unsecured_token_provider(...) for tests)")
        return OAuthBearerCredentials(token_provider)
    if token_provider is not None:
        raise ConfigError(f"sasl_oauth_token_provider is OAUTHBEARER's, not {mechanism!r}'s")
    if username is None or password is None:
        raise ConfigError(f"sasl_mechanism {mechanism!r} needs sasl_username and sasl_password")
    return SaslCredentials(mechanism, username, password)


class PlainClient:
    """SASL PLAIN: the user name and the password in one message (use it over TLS only).

    Args:
        username: the user.
        password: the password.
    """

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._message = b"\0" + username.encode() + b"\0" + password.encode()
        self._sent = False
        #: True once the server accepted the message.
        self.done = False

    def __repr__(self) -> str:
        return f"<PlainClient {'done' if self.done else 'started' if self._sent else 'new'}>"

    def first(self) -> bytes:
        """The only client message: authorization id (empty), user, password.

        Returns:
            the message.

        Raises:
            AuthenticationError: called twice.
        """
        if self._sent:
            raise AuthenticationError("PLAIN: the message was sent already")
        self._sent = True
        return self._message

    def step(self, server: bytes) -> Optional[bytes]:
        """Take the server's reply (empty for PLAIN).

        Args:
            server: the server's bytes.

        Returns:
            ``None``: nothing more to send.

        Raises:
            AuthenticationError: called before :meth:`first` or after the end.
        """
        if not self._sent or self.done:
            raise AuthenticationError("PLAIN: unexpected server message")
        self.done = True
        return None


def _saslname(name: str) -> str:
    # RFC 5802 section 5.1: "," and "=" are escaped in the user name.
    return name.replace("=", "=3D").replace(",", "=2C")


def _attributes(message: bytes, what: str) -> dict[str, str]:
    """Parse ``a=value,b=value`` (the values may contain ``=``)."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AuthenticationError(f"SCRAM: the {what} is not UTF-8") from e
    out: dict[str, str] = {}
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise AuthenticationError(f"SCRAM: malformed {what}")
        out.setdefault(part[0], part[2:])
    return out


class ScramClient:
    """SCRAM (RFC 5802) client: client-first, client-final with the proof, then the
    server signature checked.

    Args:
        username: the user.
        password: the password.
        hash_name: ``"sha256"`` (SCRAM-SHA-256) or ``"sha512"`` (SCRAM-SHA-512).
        nonce: the client nonce (tests only; default: 32 random printable
            characters).

    Raises:
        ConfigError: an unknown hash or a nonce with a comma.
    """

    def __init__(self, username: str, password: str, hash_name: str,
                 nonce: Optional[str] = None) -> None:
        if hash_name not in ("sha256", "sha512"):
            raise ConfigError(f"SCRAM hash must be sha256 or sha512, got {hash_name!r}")
        if nonce is not None and (not nonce or "," in nonce):
            raise ConfigError("a SCRAM nonce must be non-empty printable text without ','")
        self.hash_name = hash_name
        self.mechanism = "SCRAM-SHA-256" if hash_name == "sha256" else "SCRAM-SHA-512"
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={_saslname(username)},r={self._nonce}"
        self._server_signature: Optional[bytes] = None
        self._state = "new"
        #: True once the server's signature was verified.
        self.done = False

    def __repr__(self) -> str:
        return f"<ScramClient {self.mechanism} {self._state}>"

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def first(self) -> bytes:
        """The client-first message: ``n,,n=user,r=nonce``.

        Returns:
            the message.

        Raises:
            AuthenticationError: called twice.
        """
        if self._state != "new":
            raise AuthenticationError("SCRAM: client-first was sent already")
        self._state = "first sent"
        return ("n,," + self._first_bare).encode()

    def step(self, server: bytes) -> Optional[bytes]:
        """Take the server's message: server-first gives client-final, server-final ends.

        Strategy: the PBKDF2 of the password (thousands of HMAC rounds) runs
        here, on the server-first message; the connection runs this call in
        a worker thread so the event loop does not wait for it.

        Args:
            server: the server's bytes.

        Returns:
            the client-final message (with the proof), or ``None`` once the
            server's signature checked out.

        Raises:
            AuthenticationError: a malformed or unexpected server message, a
                nonce the client did not start, too few or too many
                iterations, a server error (``e=``), or a server signature
                that does not match (the server does not know the password).
        """
        if self._state == "first sent":
            return self._client_final(server)
        if self._state == "final sent":
            self._verify(server)
            return None
        raise AuthenticationError(f"SCRAM: unexpected server message ({self._state})")

    def _client_final(self, server_first: bytes) -> bytes:
        self._state = "failed"
        attrs = _attributes(server_first, "server-first message")
        if "m" in attrs:
            raise AuthenticationError("SCRAM: the server asks for an extension kiel does not know")
        nonce, salt_b64, count = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if nonce is None or salt_b64 is None or count is None:
            raise AuthenticationError("SCRAM: the server-first message lacks r=, s= or i=")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise AuthenticationError("SCRAM: the server's nonce does not extend the client's")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(count)
        except ValueError as e:
            raise AuthenticationError("SCRAM: bad salt or iteration count") from e
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise AuthenticationError(f"SCRAM: {iterations} iterations is outside "
                                      f"{MIN_ITERATIONS} to {MAX_ITERATIONS}")
        salted = hashlib.pbkdf2_hmac(self.hash_name, self._password, salt, iterations)
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = ",".join((self._first_bare, server_first.decode(), without_proof)).encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        self._state = "final sent"
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, server_final: bytes) -> None:
        self._state = "failed"
        attrs = _attributes(server_final, "server-final message")
        if "e" in attrs:
            raise AuthenticationError(f"SCRAM: the server refused: {attrs['e']}")
        verifier = attrs.get("v")
        if verifier is None:
            raise AuthenticationError("SCRAM: the server-final message lacks v=")
        try:
            signature = base64.b64decode(verifier, validate=True)
        except ValueError as e:
            raise AuthenticationError("SCRAM: the server signature is not base64") from e
        assert self._server_signature is not None  # set with client-final
        if not hmac.compare_digest(signature, self._server_signature):
            raise AuthenticationError(
                "SCRAM: the server's signature does not match: it does not know the password")
        self._state = "done"
        self.done = True


# --------------------------------------------------------------------------
# OAUTHBEARER (RFC 7628, Kafka's KIP-255; SASL extensions: KIP-342)

#: What a token may hold: RFC 6750's b64token (JWTs are base64url and dots).
_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: KIP-342: an extension's key is letters only, its value printable ASCII,
#: space and tabs/newlines; ``auth`` is the token's own key.
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_EXTENSION_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")

#: Java's ``sasl.login.refresh.window.factor``: a token is fetched again once
#: this share of its lifetime has passed.
REFRESH_AT = 0.8
#: How many times a failing token provider is called again before the
#: connection fails (with :data:`PROVIDER_BACKOFF` between the calls).
PROVIDER_RETRIES = 2
#: The first delay before calling a failed provider again (doubles, jittered).
PROVIDER_BACKOFF = 0.2


class OAuthBearerToken:
    """An OAuth 2 bearer token and when it expires; ``repr()`` hides the value.

    What a token provider returns (a ``(value, expires_at)`` tuple does as
    well). kiel neither parses nor checks the token: the broker does.

    Args:
        value: the token (a JWT, or any RFC 6750 ``b64token``).
        expires_at: when it expires, seconds since the epoch (``time.time()``'s
            clock, as a JWT's ``exp``).
        principal: whom the token names, for messages (optional: never
            sent, the broker reads the token).
        extensions: SASL extensions (KIP-342) sent with the token, such as
            Confluent Cloud's ``logicalCluster`` and ``identityPoolId``.

    Raises:
        ConfigError: a value that is not a token, an ``expires_at`` that is
            not a finite number, or an extension's key (letters only, not
            ``auth``) or value (printable ASCII) that SASL cannot carry.
    """

    __slots__ = ("_value", "expires_at", "principal", "extensions")

    def __init__(self, value: str, expires_at: float, principal: Optional[str] = None,
                 extensions: Optional[Mapping[str, str]] = None) -> None:
        if not isinstance(value, str) or not _TOKEN.fullmatch(value):
            # The value is not shown: it may be a secret of the wrong form.
            raise ConfigError("an OAuth bearer token must be a non-empty str of "
                              "RFC 6750 token characters (base64url, '.', '~', '+', '/')")
        if (not isinstance(expires_at, (int, float)) or isinstance(expires_at, bool)
                or not math.isfinite(expires_at)):
            raise ConfigError(f"a token's expires_at must be seconds since the epoch, "
                              f"got {type(expires_at).__name__}")
        if principal is not None and not isinstance(principal, str):
            raise ConfigError(f"a token's principal must be a str or None, "
                              f"got {type(principal).__name__}")
        checked: dict[str, str] = {}
        for key, text in (extensions or {}).items():
            if not isinstance(key, str) or not _EXTENSION_KEY.fullmatch(key) or key == "auth":
                raise ConfigError(f"a SASL extension's key must be letters (not 'auth'), "
                                  f"got {key!r}")
            if not isinstance(text, str) or not _EXTENSION_VALUE.fullmatch(text):
                raise ConfigError(f"SASL extension {key!r} must be printable ASCII text")
            checked[key] = text
        self._value = value
        self.expires_at = float(expires_at)
        self.principal = principal
        self.extensions = checked

    @property
    def value(self) -> str:
        """The token."""
        return self._value

    def __repr__(self) -> str:
        who = f" principal={self.principal!r}" if self.principal is not None else ""
        return (f"<OAuthBearerToken{who} expires_at={self.expires_at:.0f} "
                f"extensions={sorted(self.extensions)} value=<hidden>>")


#: A token provider's answer: a token, or ``(value, expires_at)``.
TokenAnswer = Union[OAuthBearerToken, tuple[str, float]]
#: ``sasl_oauth_token_provider``: a plain or an ``async`` function of no
#: arguments returning a :data:`TokenAnswer`.
TokenProvider = Callable[[], Union[TokenAnswer, Awaitable[TokenAnswer]]]


def _b64url(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unsecured_jwt(principal: str, lifetime: float = 3600.0, *, scope: Optional[str] = None,
                  extensions: Optional[Mapping[str, str]] = None,
                  now: Optional[float] = None) -> OAuthBearerToken:
    """An unsecured JWT (RFC 7515's ``alg: none``): for tests and development only.

    What librdkafka makes from ``sasl.oauthbearer.config`` (``principal=...
    lifeSeconds=... scope=...``) with
    ``enable.sasl.oauthbearer.unsecure.jwt``, and what Kafka's
    ``OAuthBearerUnsecuredValidatorCallbackHandler`` accepts: the header
    ``{"alg":"none"}``, the claims ``sub`` (the principal), ``iat`` and
    ``exp`` (and ``scope``), base64url without padding, and an empty
    signature. Any broker that checks signatures refuses it.

    Args:
        principal: the ``sub`` claim.
        lifetime: seconds from ``now`` to ``exp`` (> 0).
        scope: the ``scope`` claim (space-separated), if any.
        extensions: SASL extensions to send with it.
        now: the ``iat`` claim (default: ``time.time()``).

    Returns:
        the token, expiring ``lifetime`` seconds after ``now``.

    Raises:
        ConfigError: an empty principal, or a lifetime that is not > 0.
    """
    principal = _options.text("principal", principal)
    lifetime = _options.real("lifetime", lifetime, above=0)
    issued = time.time() if now is None else _options.real("now", now, unit="a number")
    claims: dict[str, Any] = {"sub": principal, "iat": int(issued),
                              "exp": int(issued + max(lifetime, 1.0))}
    if scope is not None:
        claims["scope"] = _options.text("scope", scope)
    value = f"{_b64url({'alg': 'none'})}.{_b64url(claims)}."
    return OAuthBearerToken(value, issued + lifetime, principal, extensions)


def unsecured_token_provider(principal: str, lifetime: float = 3600.0, *,
                             scope: Optional[str] = None,
                             extensions: Optional[Mapping[str, str]] = None
                             ) -> Callable[[], OAuthBearerToken]:
    """A token provider of :func:`unsecured_jwt` tokens (tests and development only).

    Args:
        principal, lifetime, scope, extensions: as :func:`unsecured_jwt`.

    Returns:
        a function that makes a new token, valid ``lifetime`` seconds, each call.

    Raises:
        ConfigError: a bad argument (checked now, not at the first connection).
    """
    unsecured_jwt(principal, lifetime, scope=scope, extensions=extensions)  # check now

    def provider() -> OAuthBearerToken:
        return unsecured_jwt(principal, lifetime, scope=scope, extensions=extensions)

    provider.__qualname__ = provider.__name__ = f"unsecured_token_provider({principal!r})"
    return provider


def _is_async(function: Any) -> bool:
    """An ``async def`` function, or an object whose ``__call__`` is one."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        type(function).__call__)


def _subject(value: Any) -> Optional[str]:
    """A JWT's ``sub`` claim, for messages (``None`` when the token is no JWT).

    Not a check of the token (the broker does that): the principal it
    names, so that a refusal says whose token it was without showing it.
    """
    parts = value.split(".") if isinstance(value, str) else []
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except ValueError:  # binascii.Error and JSONDecodeError are ValueErrors
        return None
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) else None


def _token(answer: Any) -> OAuthBearerToken:
    """A provider's answer as a token (the answer itself is never shown)."""
    if isinstance(answer, OAuthBearerToken):
        return answer
    if isinstance(answer, tuple) and len(answer) == 2:
        return OAuthBearerToken(answer[0], answer[1], _subject(answer[0]))
    raise ConfigError(f"the token provider returned a {type(answer).__name__}: expected an "
                      "OAuthBearerToken or a (token, expires_at) tuple")


class OAuthBearerCredentials:
    """SASL OAUTHBEARER with a token provider; keeps the token until 80% of its life.

    Strategy: every new connection asks :meth:`start` for a client; the
    token of the last call is reused until :data:`REFRESH_AT` of its
    lifetime has passed (Java's refresh window), then the provider is called
    again, once for all the connections opening meanwhile. A connection
    already authenticated keeps its session: Kafka ends it at the token's
    expiry only with ``connections.max.reauth.ms`` set (KIP-368, which kiel
    does not speak), and a new connection brings a fresh token. A provider
    that fails (raises, or returns something else than a token) is called
    again :data:`PROVIDER_RETRIES` times with a backoff; then the
    connection fails with an :class:`~kiel.exc.AuthenticationError`,
    unless the last token is still valid (it is used, with a warning).

    A plain function runs in the loop's default executor, so one that asks
    an identity provider over HTTP does not block the event loop; an
    ``async`` function runs on the loop.

    Args:
        provider: see :data:`TokenProvider`.

    Raises:
        ConfigError: ``provider`` is not callable.
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, provider: TokenProvider) -> None:
        if not callable(provider):
            raise ConfigError(f"sasl_oauth_token_provider must be a function returning a "
                              f"token, got {type(provider).__name__}")
        self.provider = provider
        self._token: Optional[OAuthBearerToken] = None
        self._refresh_at = 0.0
        self._lock: Optional[asyncio.Lock] = None
        self._lock_loop: Optional[asyncio.AbstractEventLoop] = None
        #: How many times the provider was called (successful or not).
        self.calls = 0

    @property
    def who(self) -> str:
        """Whom the last token names, for messages (never the token)."""
        principal = self._token.principal if self._token is not None else None
        return f"principal {principal!r}" if principal is not None else "the provider's token"

    @property
    def username(self) -> Optional[str]:
        """The last token's principal, if it named one."""
        return self._token.principal if self._token is not None else None

    def __repr__(self) -> str:
        name = getattr(self.provider, "__qualname__", type(self.provider).__name__)
        if self._token is None:
            state = "no token yet"
        else:
            state = f"token=<hidden> expires_at={self._token.expires_at:.0f}"
        return f"<OAuthBearerCredentials provider={name} {state}>"

    def _the_lock(self) -> asyncio.Lock:
        # One lock per event loop: a lock is bound to the loop it first
        # waited on, and a client may be closed and reused on another loop.
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    async def token(self) -> OAuthBearerToken:
        """The token for a new connection: the last one, or a new one once it is due.

        Returns:
            the token.

        Raises:
            AuthenticationError: the provider failed every call (its last
                error is the cause) and no valid token is left.
        """
        async with self._the_lock():
            now = time.time()
            if self._token is not None and now < self._refresh_at:
                return self._token
            try:
                token = await self._fetch()
            except AuthenticationError:
                if self._token is not None and time.time() < self._token.expires_at:
                    log.warning("the OAUTHBEARER token provider failed; the last token is "
                                "used until it expires in %.0f s",
                                self._token.expires_at - time.time())
                    return self._token
                raise
            fetched = time.time()
            self._token = token
            self._refresh_at = fetched + REFRESH_AT * (token.expires_at - fetched)
            return token

    async def _fetch(self) -> OAuthBearerToken:
        loop = asyncio.get_running_loop()
        failures: list[BaseException] = []
        try:
            async for attempt in attempts(Backoff(PROVIDER_BACKOFF, 5.0, PROVIDER_RETRIES)):
                self.calls += 1
                try:
                    if _is_async(self.provider):
                        answer: Any = self.provider()
                    else:
                        answer = await loop.run_in_executor(None, self.provider)
                    if inspect.isawaitable(answer):
                        answer = await answer
                    token = _token(answer)
                    if token.expires_at <= time.time():
                        raise ConfigError("the token provider returned a token that has "
                                          "expired already")
                    return token
                except Exception as e:  # noqa: BLE001 - any failure of the application's code
                    failures.append(e)
                    attempt.failed(e)
        except Exception as last:  # the attempts ran out: raised with the last failure
            raise AuthenticationError(
                f"SASL OAUTHBEARER: the token provider failed {len(failures)} times; "
                f"the last time: {type(last).__name__}: {last}", api="SaslAuthenticate",
            ) from last
        raise AuthenticationError("SASL OAUTHBEARER: no token")  # not reached: attempts raise

    async def start(self) -> "OAuthBearerClient":
        """A client state machine for one new connection, with a valid token.

        Returns:
            the client.

        Raises:
            AuthenticationError: no token (see :meth:`token`).
        """
        return OAuthBearerClient(await self.token())


class OAuthBearerClient:
    """RFC 7628's client: the token (and extensions) in one message; a server's
    error is a JSON status, answered with ``\\x01``, then refused.

    Args:
        token: the token to send.
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, token: OAuthBearerToken) -> None:
        extensions = "".join(f"\x01{k}={v}" for k, v in sorted(token.extensions.items()))
        # GS2 header without authorization id (Kafka's clients send none).
        self._message = f"n,,\x01auth=Bearer {token.value}{extensions}\x01\x01".encode()
        self._state = "new"
        #: The server's error status (RFC 7628 section 3.2.2), once it refused.
        self.status: Optional[str] = None
        #: True once the server accepted the token.
        self.done = False

    def __repr__(self) -> str:
        return f"<OAuthBearerClient {self._state}>"

    def first(self) -> bytes:
        """The client's message: ``n,,\\x01auth=Bearer <token>[\\x01key=value...]\\x01\\x01``.

        Returns:
            the message.

        Raises:
            AuthenticationError: called twice.
        """
        if self._state != "new":
            raise AuthenticationError("OAUTHBEARER: the message was sent already")
        self._state = "sent"
        return self._message

    def step(self, server: bytes) -> Optional[bytes]:
        """Take the server's reply: empty means accepted; a JSON error is
        acknowledged with ``\\x01`` (the server then fails the exchange).

        Args:
            server: the server's bytes.

        Returns:
            ``None`` when accepted, ``b"\\x01"`` after an error status.

        Raises:
            AuthenticationError: a reply out of turn, or a server that
                goes on after its own error.
        """
        if self._state == "sent":
            if not server:
                self._state, self.done = "done", True
                return None
            self.status = _error_status(server)
            self._state = "refused"
            return b"\x01"
        if self._state == "refused":
            raise AuthenticationError(f"SASL OAUTHBEARER: the server refused the token "
                                      f"(status {self.status!r}) and did not end the exchange")
        raise AuthenticationError(f"OAUTHBEARER: unexpected server message ({self._state})")


def _error_status(server: bytes) -> str:
    """The ``status`` of RFC 7628's error JSON (``"invalid_token"``...)."""
    try:
        status = json.loads(server.decode("utf-8")).get("status")
    except (UnicodeDecodeError, ValueError, AttributeError):
        return "unreadable server error"
    return status if isinstance(status, str) else "no status"
