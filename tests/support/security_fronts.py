"""Test servers for TLS and SASL, shared by tests/test_security.py and the Spark tests.

* :class:`ScramServer`, :class:`PlainServer` and :class:`OAuthBearerServer`:
  the server side of SCRAM (RFC 5802), PLAIN (RFC 4616) and OAUTHBEARER
  (RFC 7628 with Kafka's unsecured JWTs, as Kafka's
  ``OAuthBearerUnsecuredValidatorCallbackHandler`` checks them), pure
  logic; :func:`server_for` picks one.
* :class:`SaslFront`: a proxy in front of Tansu (which stores no SCRAM
  credentials and cannot terminate TLS: see tests/test_security.py's
  docstring) that terminates TLS and/or answers SaslHandshake and
  SaslAuthenticate itself, then passes every other request to Tansu.
* The ``certificates`` fixture (a CA and a server certificate for 127.0.0.1,
  made with openssl), :func:`server_context`, :func:`client_context`, and the
  ``fronted_tansu`` fixture (a Tansu broker advertising a front's port).

A test module uses the fixtures by importing them.
"""
import asyncio
import base64
import hashlib
import hmac
import json
import re
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from kiel.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslAuthenticateResponseV1,
    SaslHandshakeRequestV1,
    SaslHandshakeResponseV1,
)
from kiel.protocol.schema import decode, encode
from kiel.testing.tansu import TansuBroker

__all__ = [
    "OAuthBearerServer",
    "PlainServer",
    "SaslFront",
    "ScramServer",
    "certificates",
    "client_context",
    "fronted_tansu",
    "server_context",
    "server_for",
]

# --------------------------------------------------------------------------
# The server side of SCRAM (RFC 5802) and PLAIN (RFC 4616), pure logic


class ScramServer:
    """One SCRAM server exchange: server-first, then server-final (or a refusal).

    Args:
        hash_name: "sha256" or "sha512".
        users: name -> password.
        nonce: the server's part of the nonce.
        salt, iterations: what the server-first message announces.
        forge_signature: answer with a wrong server signature (a server that
            does not know the password).
    """

    def __init__(self, hash_name: str, users: Dict[str, str], nonce: str = "srvNonce",
                 salt: bytes = b"kiel-salt", iterations: int = 4096,
                 forge_signature: bool = False) -> None:
        self.hash_name, self.users = hash_name, users
        self.nonce, self.salt, self.iterations = nonce, salt, iterations
        self.forge = forge_signature
        self.state = "new"
        #: The client proofs received (base64), for the no-secrets-in-logs test.
        self.proofs: List[str] = []

    def _hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def step(self, message: bytes) -> Tuple[bool, bytes]:
        """Take a client message; returns (accepted, reply)."""
        text = message.decode()
        if self.state == "new":
            assert text.startswith("n,,"), text  # no channel binding, no authzid
            self.first_bare = text[3:]
            attrs = dict(part.split("=", 1) for part in self.first_bare.split(","))
            self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            self.full_nonce = attrs["r"] + self.nonce
            self.server_first = (f"r={self.full_nonce},s={base64.b64encode(self.salt).decode()},"
                                 f"i={self.iterations}")
            self.state = "first"
            return True, self.server_first.encode()
        assert self.state == "first"
        self.state = "done"
        without_proof, proof_part = text.rsplit(",p=", 1)
        self.proofs.append(proof_part)
        attrs = dict(part.split("=", 1) for part in without_proof.split(","))
        password = self.users.get(self.user)
        if attrs.get("c") != "biws" or attrs.get("r") != self.full_nonce or password is None:
            return False, b""
        salted = hashlib.pbkdf2_hmac(self.hash_name, password.encode(), self.salt,
                                     self.iterations)
        stored_key = hashlib.new(self.hash_name, self._hmac(salted, b"Client Key")).digest()
        auth_message = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof_part), signature))
        if hashlib.new(self.hash_name, client_key).digest() != stored_key:
            return False, b""
        server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        if self.forge:
            server_signature = bytes(len(server_signature))
        return True, b"v=" + base64.b64encode(server_signature)


class PlainServer:
    """RFC 4616: ``authzid NUL authcid NUL passwd`` in one message."""

    def __init__(self, users: Dict[str, str]) -> None:
        self.users = users
        self.proofs: List[str] = []

    def step(self, message: bytes) -> Tuple[bool, bytes]:
        _, user, password = message.decode().split("\0")
        return self.users.get(user) == password, b""


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


#: RFC 7628 section 3.1's client response after the GS2 header: key=value
#: pairs, each ended by ^A, then a final ^A; KIP-342's extension grammar.
_OAUTH_KEY = re.compile(r"[A-Za-z]+")
_OAUTH_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


class OAuthBearerServer:
    """One OAUTHBEARER exchange (RFC 7628) that accepts unsecured JWTs.

    The client's message is checked to the byte: ``n,,`` (no authorization
    id), then ``\x01auth=Bearer <token>``, KIP-342 extensions
    ``\x01key=value``, and ``\x01\x01``. The token must be an unsecured
    JWS (header ``{"alg":"none"}``, empty signature) whose ``sub`` is one of
    ``principals`` and whose ``exp`` (seconds) is in the future. A refusal
    goes as Kafka's broker sends it: the JSON status as a challenge
    (``{"status":"invalid_token"}``), the client's ``\x01``, then
    SASL_AUTHENTICATION_FAILED (58) with the JSON as the error message.

    Args:
        principals: the ``sub`` values accepted.
        required_extensions: extensions the client must send, with their values.
    """

    def __init__(self, principals: Tuple[str, ...],
                 required_extensions: Optional[Dict[str, str]] = None) -> None:
        self.principals, self.required = principals, required_extensions or {}
        self.state = "new"
        #: The tokens received, for the no-secrets-in-logs test (as ``proofs``).
        self.proofs: List[str] = []
        #: The extensions the client sent.
        self.extensions: Dict[str, str] = {}
        #: The token's claims, once parsed.
        self.claims: Dict[str, Any] = {}
        #: Why the token was refused (for the tests; never sent).
        self.reason: Optional[str] = None
        #: SASL_AUTHENTICATION_FAILED's message after a refusal.
        self.error_text: Optional[str] = None

    def _check(self, message: bytes) -> Optional[str]:
        """Parse and validate the client's message; returns why it is refused."""
        text = message.decode("ascii")
        assert text.startswith("n,,\x01") and text.endswith("\x01\x01"), repr(text[:8])
        pairs = text[len("n,,\x01"):-2].split("\x01")
        fields: Dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            assert sep and key not in fields, "a malformed or repeated key"
            fields[key] = value
        auth = fields.pop("auth")
        assert auth.startswith("Bearer "), "auth= must be 'Bearer <token>'"
        token = auth[len("Bearer "):]
        self.proofs.append(token)
        for key, value in fields.items():
            assert _OAUTH_KEY.fullmatch(key) and _OAUTH_VALUE.fullmatch(value), key
        self.extensions = fields
        for key, value in self.required.items():
            if fields.get(key) != value:
                return f"extension {key} missing or wrong"
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            return "not an unsecured JWS"
        try:
            header = json.loads(_unb64url(parts[0]))
            self.claims = claims = json.loads(_unb64url(parts[1]))
        except ValueError:
            return "not base64url JSON"
        if header.get("alg") != "none":
            return f"alg {header.get('alg')!r}"
        if claims.get("sub") not in self.principals:
            return f"principal {claims.get('sub')!r} unknown"
        expires = claims.get("exp")
        if not isinstance(expires, (int, float)) or expires <= time.time():
            return "expired"
        return None

    def step(self, message: bytes) -> Tuple[bool, bytes]:
        """Take a client message; returns (accepted, reply)."""
        if self.state == "new":
            try:
                self.reason = self._check(message)
            except (AssertionError, KeyError, UnicodeDecodeError) as e:
                # Refused as a bad token: the test reads ``reason``.
                self.reason = f"malformed message: {type(e).__name__} {e}"
            if self.reason is None:
                self.state = "done"
                return True, b""
            self.state = "error sent"
            self.error_text = json.dumps({"status": "invalid_token"})
            return True, self.error_text.encode()
        assert self.state == "error sent" and message == b"\x01", (self.state, message)
        self.state = "refused"
        return False, b""


def server_for(mechanism: str, users: Dict[str, str], forge: bool) -> Any:
    if mechanism == "PLAIN":
        return PlainServer(users)
    if mechanism == "OAUTHBEARER":
        return OAuthBearerServer(tuple(users))
    return ScramServer("sha256" if mechanism == "SCRAM-SHA-256" else "sha512", users,
                       forge_signature=forge)


# --------------------------------------------------------------------------
# A front for Tansu: TLS termination and/or SASL, then Tansu's answers


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def _frame(correlation_id: int, body: Any) -> bytes:
    payload = struct.pack(">i", correlation_id) + encode(body)
    return struct.pack(">i", len(payload)) + payload


async def _server_tls(writer: asyncio.StreamWriter, context: ssl.SSLContext) -> None:
    """The server's side of a TLS handshake on an accepted stream.

    ``StreamWriter.start_tls`` is Python 3.11's; on 3.10 the loop's
    ``start_tls`` does the same, and the stream's transport is swapped for
    the TLS one by hand, as 3.11's method does.
    """
    if hasattr(writer, "start_tls"):
        await writer.start_tls(context)
        return
    transport = writer.transport
    protocol = transport.get_protocol()
    tls = await asyncio.get_running_loop().start_tls(transport, protocol, context,
                                                     server_side=True)
    writer._transport = tls  # type: ignore[attr-defined]
    protocol._transport = tls  # type: ignore[attr-defined]
    protocol._over_ssl = True  # type: ignore[attr-defined]


class SaslFront:
    """A proxy in front of Tansu, on its own thread and event loop.

    Args:
        ssl_context: a server-side context: terminate TLS.
        mechanisms: the SASL mechanisms to enable (none: no SASL).
        users: name -> password (OAUTHBEARER: the principals accepted).
        forge_signature: SCRAM server-final with a wrong signature.
        oauth_extensions: extensions OAUTHBEARER clients must send.
    """

    def __init__(self, ssl_context: Optional[ssl.SSLContext] = None,
                 mechanisms: Tuple[str, ...] = (), users: Optional[Dict[str, str]] = None,
                 forge_signature: bool = False,
                 oauth_extensions: Optional[Dict[str, str]] = None) -> None:
        self.ssl_context, self.mechanisms = ssl_context, mechanisms
        self.users, self.forge = users or {}, forge_signature
        self.oauth_extensions = oauth_extensions
        self.target_port = 0
        #: The API keys each connection sent, in order.
        self.connections: List[List[int]] = []
        #: Every server state machine used, for their recorded proofs.
        self.servers: List[Any] = []
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port: int = self._server.sockets[0].getsockname()[1]
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen: List[int] = []
        self.connections.append(seen)  # counted before TLS: a failed handshake counts too
        if self.ssl_context is not None:
            try:
                await _server_tls(writer, self.ssl_context)
            except (ssl.SSLError, ConnectionError):
                writer.close()
                return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        try:
            if self.mechanisms and not await self._authenticate(reader, writer, up_reader,
                                                                up_writer, seen):
                return
            # Authenticated (or no SASL): Tansu answers everything now.
            await asyncio.gather(self._requests(reader, up_writer, seen),
                                 self._pipe(up_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()
            up_writer.close()

    async def _requests(self, reader: asyncio.StreamReader, up: asyncio.StreamWriter,
                        seen: List[int]) -> None:
        try:
            while True:
                frame = await _read_frame(reader)
                seen.append(struct.unpack_from(">h", frame)[0])
                up.write(struct.pack(">i", len(frame)) + frame)
                await up.drain()
        finally:
            up.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    return
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter,
                            seen: List[int]) -> bool:
        server: Any = None
        while True:
            frame = await _read_frame(reader)
            api_key, version, cid, id_len = struct.unpack_from(">hhih", frame)
            body = 10 + max(id_len, 0)
            seen.append(api_key)
            if api_key == 18:  # ApiVersions: Tansu's answer (it lists the SASL APIs)
                up_writer.write(struct.pack(">i", len(frame)) + frame)
                answer = await _read_frame(up_reader)
                writer.write(struct.pack(">i", len(answer)) + answer)
            elif api_key == 17 and version == 1 and server is None:
                mechanism = decode(SaslHandshakeRequestV1, frame, body)[0].mechanism
                if mechanism not in self.mechanisms:
                    writer.write(_frame(cid, SaslHandshakeResponseV1(33, list(self.mechanisms))))
                    await writer.drain()
                    return False
                server = (OAuthBearerServer(tuple(self.users), self.oauth_extensions)
                          if mechanism == "OAUTHBEARER"
                          else server_for(mechanism, self.users, self.forge))
                self.servers.append(server)
                writer.write(_frame(cid, SaslHandshakeResponseV1(0, list(self.mechanisms))))
            elif api_key == 36 and server is not None:
                message = decode(SaslAuthenticateRequest, frame, body)[0].auth_bytes
                ok, reply = server.step(message)
                failed = getattr(server, "error_text", None) or \
                    "Authentication failed: bad credentials"
                code, text = (0, None) if ok else (58, failed)
                response = (SaslAuthenticateResponseV1(code, text, reply, 0) if version >= 1
                            else SaslAuthenticateResponse(code, text, reply))
                writer.write(_frame(cid, response))
                await writer.drain()
                if not ok:
                    return False
                if isinstance(server, PlainServer) or server.state == "done":
                    return True
            else:  # anything else before authenticating: hang up, as Tansu does
                return False
            await writer.drain()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """A CA and a server certificate for 127.0.0.1 (IP SAN only), made with openssl."""
    d = tmp_path_factory.mktemp("tls")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "ca.key"),
            "-out", str(d / "ca.pem"), "-days", "2", "-subj", "/CN=kiel test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "server.key"),
            "-out", str(d / "server.csr"), "-subj", "/CN=kiel test broker")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
                               "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.pem"),
            "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-out", str(d / "server.pem"),
            "-days", "2", "-extfile", str(d / "ext.cnf"))
    return {"ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key"}


def server_context(certificates: Dict[str, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certificates["cert"]), str(certificates["key"]))
    return context


def client_context(certificates: Dict[str, Path]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certificates["ca"]))


@pytest.fixture
def fronted_tansu(request: pytest.FixtureRequest) -> Iterator[Any]:
    """``fronted_tansu(front)``: a Tansu broker of its own that advertises ``front``'s port."""
    started: List[Tuple[SaslFront, TansuBroker]] = []

    def start(front: SaslFront) -> TansuBroker:
        broker = TansuBroker(advertised_port=front.port)
        started.append((front, broker))
        broker.start()
        front.target_port = broker.port
        return broker

    yield start
    for front, broker in started:
        broker.close()
        front.close()

