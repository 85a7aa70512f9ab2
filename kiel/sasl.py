"""SASL client mechanisms, sans I/O: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, 7677).

A mechanism produces the client's messages and checks the server's; the
connection (:mod:`kiel.connection`) carries them in SaslAuthenticate
requests. Every mechanism has the same two calls::

    mechanism = credentials.client()
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

Credentials never reach a log or an error message: :class:`SaslCredentials`
hides the password in ``repr()``, and nothing here logs.
"""
import base64
import hashlib
import hmac
import secrets
from typing import Optional, Union

from kiel.exc import AuthenticationError, ConfigError

__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MIN_ITERATIONS",
    "PlainClient",
    "SaslCredentials",
    "ScramClient",
    "sasl_credentials",
]

#: The mechanisms kiel speaks, by the name SaslHandshake uses.
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

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
        mechanism: one of :data:`MECHANISMS`.
        username: the user.
        password: the password (kept, never shown).

    Raises:
        ConfigError: an unknown mechanism, or a user name or password that
            is not a non-empty string.
    """

    __slots__ = ("mechanism", "username", "_password")

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in MECHANISMS:
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

    def client(self) -> Union["PlainClient", "ScramClient"]:
        """A new client state machine for one authentication (one per connection).

        Returns:
            a :class:`PlainClient` or a :class:`ScramClient`.
        """
        if self.mechanism == "PLAIN":
            return PlainClient(self.username, self._password)
        return ScramClient(self.username, self._password, _SCRAM_HASHES[self.mechanism])


def sasl_credentials(mechanism: Optional[str], username: Optional[str],
                     password: Optional[str]) -> Optional[SaslCredentials]:
    """Check a client's ``sasl_*`` settings.

    Args:
        mechanism: ``sasl_mechanism`` (``None``: no SASL).
        username: ``sasl_username``.
        password: ``sasl_password``.

    Returns:
        the credentials, or ``None`` when no setting is given.

    Raises:
        ConfigError: a user name or password without a mechanism, a
            mechanism without both, or a bad value (see :class:`SaslCredentials`).
    """
    if mechanism is None:
        if username is not None or password is not None:
            raise ConfigError("sasl_username and sasl_password need a sasl_mechanism")
        return None
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
