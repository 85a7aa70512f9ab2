"""SASL OAUTHBEARER (RFC 7628, KIP-255, extensions KIP-342) with a token provider.

Tansu 0.6 has no OAUTHBEARER, so the judge is the SASL front of
tests/support/security_fronts.py (a proxy before Tansu that terminates SASL and
passes every other request on): its :class:`OAuthBearerServer` checks the
client's message to the byte (``n,,\\x01auth=Bearer <token>``, extensions,
``\\x01\\x01``) and the unsecured JWT in it (``alg: none``, ``sub`` among
the principals it knows, ``exp`` in the future), and refuses as Kafka's
broker does: a JSON status, the client's ``\\x01``, then
SASL_AUTHENTICATION_FAILED. confluent-kafka (librdkafka's unsecured JWT
from ``sasl.oauthbearer.config``, and an ``oauth_cb``) signs in through the
same front, so kiel is compared with it.
"""
import asyncio
import base64
import json
import logging
import time
from typing import Any, Dict, List

import pytest

from kiel import sasl as kiel_sasl
from kiel.consumer import BEGINNING, GroupedConsumer, SingleConsumer
from kiel.exc import AuthenticationError, ConfigError, SaslAuthenticationFailedError
from kiel.producer import Producer
from kiel.sasl import (
    MECHANISMS,
    OAuthBearerClient,
    OAuthBearerCredentials,
    OAuthBearerToken,
    sasl_credentials,
    unsecured_jwt,
    unsecured_token_provider,
)
from tests.conftest import run, unique
from tests.support import security_fronts
from tests.support.security_fronts import OAuthBearerServer, SaslFront
from tests.support.single_consumer import consume_n

fronted_tansu = security_fronts.fronted_tansu


class Clock:
    """kiel.sasl's wall clock in the tests of the refresh line.

    The refresh point is decided on that clock; a clock of the test's own
    makes the 80% line exact (sleeping to it on a loaded machine landed
    either side of it).
    """

    now = 1_000_000.0

    def time(self) -> float:
        return self.now

PRINCIPALS = {"alice": "", "bob": ""}  # the front's OAUTHBEARER users: principals only


def _claims(token: str) -> Dict[str, Any]:
    header, claims, signature = token.split(".")
    assert signature == ""
    assert json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4))) == {
        "alg": "none"}
    return json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))


# --------------------------------------------------------------------------
# The client, the token and the provider: pure logic


def test_oauthbearer_is_a_mechanism() -> None:
    assert "OAUTHBEARER" in MECHANISMS


def test_the_client_first_message_is_rfc_7628s() -> None:
    token = OAuthBearerToken("aa.bb.", time.time() + 60, "alice",
                             {"traceId": "t-1", "logicalCluster": "lkc 1"})
    client = OAuthBearerClient(token)
    assert client.first() == (b"n,,\x01auth=Bearer aa.bb.\x01logicalCluster=lkc 1"
                              b"\x01traceId=t-1\x01\x01")
    assert client.step(b"") is None and client.done
    with pytest.raises(AuthenticationError):
        client.step(b"")
    plain = OAuthBearerClient(OAuthBearerToken("aa.bb.", time.time() + 60))
    assert plain.first() == b"n,,\x01auth=Bearer aa.bb.\x01\x01"


def test_the_front_reads_kiels_message_and_its_unsecured_jwt() -> None:
    token = unsecured_jwt("alice", 60, extensions={"traceId": "abc"})
    server = OAuthBearerServer(("alice",), {"traceId": "abc"})
    assert server.step(OAuthBearerClient(token).first()) == (True, b"")
    assert server.state == "done" and server.extensions == {"traceId": "abc"}
    assert server.claims["sub"] == "alice"


def test_a_refusal_is_acknowledged_then_typed() -> None:
    server = OAuthBearerServer(("alice",))
    client = OAuthBearerClient(unsecured_jwt("mallory", 60))
    ok, challenge = server.step(client.first())
    assert ok and json.loads(challenge) == {"status": "invalid_token"}
    assert client.step(challenge) == b"\x01" and client.status == "invalid_token"
    assert server.step(b"\x01") == (False, b"")
    assert not client.done
    with pytest.raises(AuthenticationError, match="invalid_token"):
        client.step(b"")  # a server that goes on after its own error


def test_unsecured_jwt_is_librdkafkas() -> None:
    token = unsecured_jwt("alice", 90, scope="read write", now=1_700_000_000)
    assert _claims(token.value) == {"sub": "alice", "iat": 1_700_000_000,
                                    "exp": 1_700_000_090, "scope": "read write"}
    assert token.expires_at == 1_700_000_090 and token.principal == "alice"
    for bad in ({"principal": ""}, {"principal": "a", "lifetime": 0},
                {"principal": "a", "lifetime": float("nan")}):
        with pytest.raises(ConfigError):
            unsecured_jwt(**bad)


def test_a_token_is_checked_and_hidden() -> None:
    secret = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."
    token = OAuthBearerToken(secret, time.time() + 60, "alice", {"traceId": "x"})
    assert secret not in repr(token) and "alice" in repr(token) and "<hidden>" in repr(token)
    assert token.value == secret
    for value, expires, extensions in [
        ("has space", 1.0, {}), ("ctl\x01", 1.0, {}), ("", 1.0, {}), (b"bytes", 1.0, {}),
        ("ok", float("inf"), {}), ("ok", "soon", {}), ("ok", True, {}),
        ("ok", 1.0, {"auth": "x"}), ("ok", 1.0, {"bad_key": "x"}), ("ok", 1.0, {"k": "\x01"}),
    ]:
        with pytest.raises(ConfigError) as info:
            OAuthBearerToken(value, expires, None, extensions)  # type: ignore[arg-type]
        assert "has space" not in str(info.value) and "ctl" not in str(info.value)


def test_the_settings_are_checked() -> None:
    provider = unsecured_token_provider("alice")
    credentials = sasl_credentials("OAUTHBEARER", None, None, provider)
    assert isinstance(credentials, OAuthBearerCredentials)
    for bad, match in [
        (("OAUTHBEARER", None, None, None), "needs sasl_oauth_token_provider"),
        (("OAUTHBEARER", "u", "p", provider), "not sasl_username"),
        ((None, None, None, provider), "needs sasl_mechanism='OAUTHBEARER'"),
        (("PLAIN", "u", "p", provider), "OAUTHBEARER's, not 'PLAIN'"),
        (("OAUTHBEARER", None, None, "a token"), "must be a function"),
    ]:
        with pytest.raises(ConfigError, match=match):
            sasl_credentials(*bad)  # type: ignore[arg-type]


def test_other_clients_spellings_are_answered() -> None:
    with pytest.raises(ConfigError, match="kiel's spelling is sasl_oauth_token_provider"):
        Producer("h:1", oauth_cb=lambda config: ("t", 1.0))  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="unsecured_token_provider"):
        Producer("h:1", **{"sasl.oauthbearer.config": "principal=alice"})


def test_every_client_takes_the_token_provider_and_hides_the_token() -> None:
    token = unsecured_jwt("alice", 60)
    options: Dict[str, Any] = dict(sasl_mechanism="OAUTHBEARER",
                                   sasl_oauth_token_provider=lambda: token)
    clients = [Producer("h:1", **options), SingleConsumer("h:1", **options),
               GroupedConsumer("h:1", "group", zk_hosts="zk:2181", topics=["t"], **options)]
    for client in clients:
        cluster = client.cluster
        assert isinstance(cluster.sasl, OAuthBearerCredentials)
        connection = cluster._new_connection("h", 1, None)
        assert connection.sasl is cluster.sasl
        run(cluster.sasl.token())  # now it holds the token
        for text in (repr(client), repr(cluster), repr(connection), repr(cluster.sasl),
                     repr(cluster.sasl.provider)):
            assert token.value not in text


def test_the_token_is_kept_until_80_percent_of_its_life(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(kiel_sasl, "time", clock)
    calls: List[float] = []

    async def provider() -> OAuthBearerToken:
        calls.append(clock.now)
        await asyncio.sleep(0.05)  # the connections opening meanwhile wait for this one call
        return unsecured_jwt("alice", 100.0, now=clock.now)

    credentials = OAuthBearerCredentials(provider)

    async def go() -> None:
        first = await asyncio.gather(*(credentials.token() for _ in range(5)))
        assert len(calls) == 1 and len({id(t) for t in first}) == 1
        clock.now += 79.9
        assert await credentials.token() is first[0]  # within its first 80%
        assert len(calls) == 1
        clock.now += 0.2
        again = await credentials.token()
        assert len(calls) == 2 and again is not first[0]
        assert again.expires_at == clock.now + 100.0

    run(go(), timeout=30)


def test_a_failing_provider_is_retried_then_a_typed_error() -> None:
    calls: List[int] = []

    def provider() -> OAuthBearerToken:
        calls.append(1)
        raise RuntimeError("identity provider answered 503")

    with pytest.raises(AuthenticationError, match="failed 3 times.*RuntimeError: identity "
                                                  "provider answered 503") as info:
        run(OAuthBearerCredentials(provider).token(), timeout=30)
    assert len(calls) == 3 and isinstance(info.value.__cause__, RuntimeError)

    secret = "not.a-token-object."
    with pytest.raises(AuthenticationError, match="returned a str: expected an "
                                                  "OAuthBearerToken") as info:
        run(OAuthBearerCredentials(lambda: secret).token(), timeout=30)
    assert secret not in str(info.value)
    expired = OAuthBearerToken("aa.bb.", time.time() - 1)
    with pytest.raises(AuthenticationError, match="expired already"):
        run(OAuthBearerCredentials(lambda: expired).token(), timeout=30)


def test_a_failing_provider_leaves_the_last_valid_token_in_use(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(kiel_sasl, "time", clock)
    answers: List[Any] = [unsecured_jwt("alice", 6.0, now=clock.now)]

    def provider() -> OAuthBearerToken:
        if answers:
            return answers.pop()
        raise RuntimeError("identity provider down")

    credentials = OAuthBearerCredentials(provider)

    async def go() -> None:
        token = await credentials.token()
        clock.now += 5.0  # past 80% of its life (4.8 s): due, and still valid
        with caplog.at_level(logging.WARNING, logger="kiel"):
            assert await credentials.token() is token  # refresh failed, still valid
        assert credentials.calls == 1 + 3  # the first, then the 3 attempts of the refresh
        assert "the last token is used" in caplog.text and token.value not in caplog.text
        clock.now += 1.5  # past its end: the failure is the caller's now
        with pytest.raises(AuthenticationError, match="failed 3 times"):
            await credentials.token()

    run(go(), timeout=30)


# --------------------------------------------------------------------------
# Through the front, in front of Tansu


async def produce_and_consume(bootstrap: str, topic: str, **options: Any) -> List[bytes]:
    async with Producer(bootstrap, **options) as producer:
        for i in range(3):
            await producer.produce(topic, b"v%d" % i)
        await producer.flush()
    async with SingleConsumer(bootstrap, **options) as consumer:
        records = await consume_n(consumer, topic, 3, start=BEGINNING)
    return [r.value for r in records]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_kiel_signs_in_with_a_token_provider(kind: str, fronted_tansu: Any) -> None:
    front = SaslFront(mechanisms=("OAUTHBEARER", "PLAIN"), users=PRINCIPALS,
                      oauth_extensions={"traceId": "kiel-1"})
    broker = fronted_tansu(front)
    topic = broker.create_topic(unique("oauth"))
    calls: List[str] = []

    def sync_provider() -> OAuthBearerToken:
        calls.append(kind)
        return unsecured_jwt("alice", 600, extensions={"traceId": "kiel-1"})

    async def async_provider() -> "tuple[str, float]":
        calls.append(kind)
        await asyncio.sleep(0)
        token = unsecured_jwt("bob", 600)
        return token.value, token.expires_at

    provider: Any = sync_provider if kind == "sync" else async_provider
    if kind == "async":
        front.oauth_extensions = None
    got = run(produce_and_consume(broker.bootstrap, topic, sasl_mechanism="OAUTHBEARER",
                                  sasl_oauth_token_provider=provider))
    assert got == [b"v0", b"v1", b"v2"]
    assert calls == [kind, kind]  # once per client: its connections share the token
    assert len(front.servers) >= 2
    assert all(server.state == "done" for server in front.servers)
    assert {server.claims["sub"] for server in front.servers} == {
        "alice" if kind == "sync" else "bob"}
    for keys in front.connections:  # ApiVersions, SaslHandshake, one SaslAuthenticate, the rest
        start = keys.index(17)
        assert keys[:start] in ([18], []) and keys[start + 1] == 36, keys
        assert 36 not in keys[start + 2:], keys


def test_the_provider_is_called_again_before_expiry_for_a_new_connection(
        fronted_tansu: Any) -> None:
    front = SaslFront(mechanisms=("OAUTHBEARER",), users=PRINCIPALS)
    broker = fronted_tansu(front)
    topic = broker.create_topic(unique("oauth-refresh"))
    lifetime = 5.0  # refreshed from 4.0 s; the new connection opens at 4.4 s
    tokens: List[OAuthBearerToken] = []

    def provider() -> OAuthBearerToken:
        tokens.append(unsecured_jwt("alice", lifetime))
        return tokens[-1]

    async def work() -> None:
        async with Producer(broker.bootstrap, sasl_mechanism="OAUTHBEARER",
                            sasl_oauth_token_provider=provider) as producer:
            await producer.produce(topic, b"first")
            await producer.flush()
            assert len(tokens) == 1
            opened = len(front.connections)
            # Past 80% of the token's life, before its end: a new connection
            # gets a new token (the old one would still be accepted).
            await asyncio.sleep(max(0.0, tokens[0].expires_at - 0.6 - time.time()))
            assert time.time() < tokens[0].expires_at
            for connection in list(producer.cluster._connections.values()):
                connection.close()
            await producer.produce(topic, b"second")
            await producer.flush()
            assert len(front.connections) > opened
            assert len(tokens) == 2

    run(work(), timeout=60)
    sent = [token for server in front.servers for token in server.proofs]
    assert sent[0] == tokens[0].value and sent[-1] == tokens[1].value
    assert tokens[1].expires_at > tokens[0].expires_at
    assert all(server.state == "done" for server in front.servers)


@pytest.mark.parametrize("why", ["principal", "expired"])
def test_a_refused_token_is_a_typed_error_with_the_servers_status(
        why: str, fronted_tansu: Any, caplog: pytest.LogCaptureFixture) -> None:
    front = SaslFront(mechanisms=("OAUTHBEARER",), users=PRINCIPALS)
    broker = fronted_tansu(front)
    if why == "principal":
        token = unsecured_jwt("mallory", 600)
        answer: Any = token
    else:  # the JWT's exp passed; the provider claims a later expiry
        token = unsecured_jwt("alice", 60, now=time.time() - 3600)
        answer = (token.value, time.time() + 600)
    reprs: List[str] = []

    async def connect() -> None:
        producer = Producer(broker.bootstrap, sasl_mechanism="OAUTHBEARER",
                            sasl_oauth_token_provider=lambda: answer, retries=3)
        try:
            await producer.connect()
        finally:
            reprs.extend(repr(x) for x in (producer, producer.cluster, producer.cluster.sasl))
            await producer.close()

    with caplog.at_level(logging.DEBUG, logger="kiel"):
        with pytest.raises(SaslAuthenticationFailedError, match="invalid_token") as info:
            run(connect(), timeout=60)
    error = info.value
    assert error.errno == 58 and error.api == "SaslAuthenticate"
    assert error.context["status"] == "invalid_token"
    assert "refused for principal 'mallory'" in str(error) if why == "principal" else \
        "refused for principal 'alice'" in str(error)  # the tuple's JWT names it too
    assert len(front.connections) == 1  # not retried: the same token fails the same way
    assert front.servers[0].reason.startswith(why), front.servers[0].reason
    assert front.servers[0].proofs == [token.value]
    assert front.connections[0][-2:] == [36, 36]  # the token, then the \x01 acknowledgement
    for text in (str(error), repr(error), caplog.text, *reprs):
        assert token.value not in text


def test_a_failing_provider_sends_nothing_and_is_not_retried(fronted_tansu: Any) -> None:
    front = SaslFront(mechanisms=("OAUTHBEARER",), users=PRINCIPALS)
    broker = fronted_tansu(front)
    calls: List[int] = []

    async def provider() -> OAuthBearerToken:
        calls.append(1)
        raise OSError("no route to the identity provider")

    async def connect() -> None:
        async with Producer(broker.bootstrap, sasl_mechanism="OAUTHBEARER",
                            sasl_oauth_token_provider=provider, retries=5):
            pass

    with pytest.raises(AuthenticationError, match="token provider failed 3 times"):
        run(connect(), timeout=60)
    assert len(calls) == 3
    assert len(front.connections) == 1 and 17 not in front.connections[0]


# --------------------------------------------------------------------------
# confluent-kafka through the same front


def _confluent_produce(bootstrap: str, topic: str, value: bytes,
                       **settings: Any) -> "tuple[List[Any], List[Any]]":
    from confluent_kafka import Producer as Confluent

    errors: List[Any] = []
    delivered: List[Any] = []
    producer = Confluent({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "OAUTHBEARER", "message.timeout.ms": 15000,
                          "error_cb": errors.append, **settings})
    producer.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    return delivered, errors


def test_confluent_kafka_signs_in_through_the_same_front(fronted_tansu: Any) -> None:
    front = SaslFront(mechanisms=("OAUTHBEARER",), users=PRINCIPALS)
    broker = fronted_tansu(front)
    topic = broker.create_topic(unique("oauth-confluent"), partitions=1)
    # librdkafka's own unsecured JWT (sasl.oauthbearer.config), as kiel's helper makes it
    delivered, errors = _confluent_produce(
        broker.bootstrap, topic, b"from-librdkafka",
        **{"sasl.oauthbearer.config": "principal=alice lifeSeconds=600 extension_traceId=c1",
           "enable.sasl.oauthbearer.unsecure.jwt": True})
    assert delivered == [None], (delivered, errors)
    ours = [s for s in front.servers if s.state == "done"]
    assert ours and ours[0].claims["sub"] == "alice" and ours[0].extensions == {"traceId": "c1"}
    librdkafka_claims = set(ours[0].claims)
    # and with an oauth_cb returning what kiel's provider returns
    token = unsecured_jwt("bob", 600)
    delivered, errors = _confluent_produce(
        broker.bootstrap, topic, b"from-oauth-cb",
        oauth_cb=lambda config: (token.value, token.expires_at))
    assert delivered == [None], (delivered, errors)
    assert token.value in [p for s in front.servers for p in s.proofs]
    # kiel's JWT carries the claims librdkafka's does
    assert librdkafka_claims <= set(_claims(unsecured_jwt("alice").value)) | {"scope"}
    # kiel reads both through the front
    got = run(_kiel_reads(broker.bootstrap, topic))
    assert got == [b"from-librdkafka", b"from-oauth-cb"]


async def _kiel_reads(bootstrap: str, topic: str) -> List[bytes]:
    async with SingleConsumer(bootstrap, sasl_mechanism="OAUTHBEARER",
                              sasl_oauth_token_provider=unsecured_token_provider("alice")
                              ) as consumer:
        records = await consume_n(consumer, topic, 2, start=BEGINNING)
    return [r.value for r in records]


def test_confluent_kafka_is_refused_by_the_front_as_kiel_is(fronted_tansu: Any) -> None:
    front = SaslFront(mechanisms=("OAUTHBEARER",), users=PRINCIPALS)
    broker = fronted_tansu(front)
    topic = broker.create_topic(unique("oauth-confluent-refused"), partitions=1)
    delivered, errors = _confluent_produce(
        broker.bootstrap, topic, b"never",
        **{"sasl.oauthbearer.config": "principal=mallory lifeSeconds=600",
           "enable.sasl.oauthbearer.unsecure.jwt": True, "message.timeout.ms": 5000})
    assert delivered and delivered[0] is not None  # not delivered
    assert any("invalid_token" in str(e) or "Authentication" in str(e) for e in errors), errors
    assert front.servers and front.servers[0].reason.startswith("principal")
