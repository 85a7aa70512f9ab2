"""kiel.spark.options: the option parsing of the Spark data source (pure: no
Spark session, no cluster).

A configuration copied from Spark's Kafka source must parse: every ``kafka.*``
key kiel can honour maps to a kiel setting that kiel's clients accept; the
others are accepted with one warning each; unknown non-``kafka.*`` options and
two spellings that disagree are refused; the timestamp positions follow
Spark's precedence.
"""
import logging
import pickle
import ssl
import subprocess

import pytest

from kiel.client import Client
from kiel.consumer import SingleConsumer
from kiel.exc import ConfigError
from kiel.producer import Producer
from kiel.spark.options import (
    CLIENT_SETTINGS,
    SINK_SETTINGS,
    SOURCE_SETTINGS,
    SPARK_ONLY,
    SinkOptions,
    SourceOptions,
    Timestamps,
    include_headers,
)
from kiel.spark.security import LOGIN_MODULES, TlsSettings
from tests.support import security_fronts

certificates = security_fronts.certificates  # the fixture (a CA and a key, made with openssl)

BASE = {"kafka.bootstrap.servers": "k1:9092,k2:9092", "subscribe": "events"}
SINK_BASE = {"kafka.bootstrap.servers": "k1:9092"}
LOGGER = "kiel.spark.options"


def source(streaming=False, **options):
    return SourceOptions.parse({**BASE, **options}, streaming=streaming)


def sink(**options):
    return SinkOptions.parse({**SINK_BASE, **options})


# ----------------------------------------------------------------------
# kafka.* keys kiel honours

#: (key, value, attribute, parsed value) for reads and writes alike.
CLIENT_KEYS = [
    ("kafka.bootstrap.servers", "b1:9092", "brokers", "b1:9092"),
    ("kafka.client.id", "etl-7", "client_id", "etl-7"),
    ("kafka.request.timeout.ms", "45000", "request_timeout", 45.0),
    ("kafka.socket.connection.setup.timeout.ms", "2500", "connect_timeout", 2.5),
    ("kafka.metadata.max.age.ms", "60000", "metadata_max_age", 60.0),
    ("kafka.retry.backoff.ms", "250", "retry_backoff", 0.25),
    ("kafka.retry.backoff.max.ms", "8000", "max_backoff", 8.0),
    ("kafka.retries", "9", "retries", 9),
]
SOURCE_KEYS = CLIENT_KEYS + [
    ("kafka.group.id", "pageviews-job", "group_id", "pageviews-job"),
    ("kafka.fetch.max.wait.ms", "250", "fetch_max_wait", 0.25),
    ("kafka.max.partition.fetch.bytes", "2097152", "fetch_max_bytes", 2 * 1024 * 1024),
    ("kafka.fetch.max.bytes", "52428800", "max_fetch_size", 50 * 1024 * 1024),
]
SINK_KEYS = CLIENT_KEYS + [
    ("kafka.acks", "all", "acks", -1),
    ("kafka.acks", "1", "acks", 1),
    ("kafka.acks", "0", "acks", 0),
    ("kafka.compression.type", "snappy", "compression", "snappy"),
    ("kafka.compression.type", "none", "compression", None),
    ("kafka.linger.ms", "20", "linger_ms", 20),
    ("kafka.batch.size", "32768", "batch_size", 32768),
    ("kafka.max.request.size", "2097152", "max_request_size", 2 * 1024 * 1024),
    ("kafka.buffer.memory", "67108864", "max_pending_bytes", 64 * 1024 * 1024),
    ("kafka.max.block.ms", "1500", "buffer_timeout", 1.5),
]
#: Accepted without a warning: kiel satisfies them by design.
BY_DESIGN = [("kafka.security.protocol", "PLAINTEXT"), ("kafka.connections.max.idle.ms", "540000")]


def test_the_tables_are_all_tested():
    # A kafka.* key added to a table needs a row here (and in the guide).
    tested = {k for k, *_ in SOURCE_KEYS + SINK_KEYS} | {k for k, _ in BY_DESIGN}
    tested |= SECURITY_KEYS | {"kafka.isolation.level"}  # test_isolation_level_is_taken
    mapped = {n for table in (SOURCE_SETTINGS, SINK_SETTINGS) for s in table
              for n in s.names if n.startswith("kafka.")}
    assert mapped == tested
    assert {n for s in CLIENT_SETTINGS for n in s.names} <= \
        {n for s in SOURCE_SETTINGS for n in s.names} & {n for s in SINK_SETTINGS for n in s.names}


@pytest.mark.parametrize("parse, key, value, attr, expected",
                         [(source, *row) for row in SOURCE_KEYS]
                         + [(sink, *row) for row in SINK_KEYS])
def test_kafka_keys_map_to_kiel_settings(parse, key, value, attr, expected, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        opts = parse(**{key: value})
    assert getattr(opts, attr) == expected
    assert opts.ignored == () and not caplog.records


@pytest.mark.parametrize("key, value", BY_DESIGN)
def test_keys_kiel_satisfies_by_design(key, value, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert source(**{key: value}).ignored == ()
        assert sink(**{key: value}).ignored == ()
    assert not caplog.records


def test_mapped_settings_reach_kiels_clients():
    """What the options hand over is what kiel's constructors take."""
    read = source(**{k: v for k, v, *_ in SOURCE_KEYS})
    kwargs = read.client_options()
    assert kwargs == {
        "client_id": "etl-7", "request_timeout": 45.0, "connect_timeout": 2.5,
        "metadata_max_age": 60.0, "retry_backoff": 0.25, "max_backoff": 8.0, "retries": 9,
    }
    Client(read.brokers, **kwargs)
    SingleConsumer(read.brokers, max_wait_time=read.fetch_max_wait,
                   max_bytes=read.fetch_max_bytes, max_fetch_size=read.max_fetch_size, **kwargs)
    write = sink(**{k: v for k, v, *_ in SINK_KEYS if k not in ("kafka.acks",
                                                                "kafka.compression.type")})
    producer_kwargs = write.producer_options()
    assert producer_kwargs == {
        **kwargs, "required_acks": -1, "compression": None, "linger": 0.02,
        "batch_size": 32768, "max_request_size": 2 * 1024 * 1024,
        "max_pending_bytes": 64 * 1024 * 1024, "buffer_timeout": 1.5,
    }
    producer = Producer(write.brokers, **producer_kwargs)
    assert producer.cluster.backoff.retries == 9


def test_defaults_leave_kiels_own():
    read = source()
    assert read.client_options() == {"client_id": "kiel-spark", "request_timeout": 30.0}
    assert (read.fetch_max_bytes, read.max_fetch_size, read.fetch_max_wait) == \
        (1024 * 1024, 16 * 1024 * 1024, 0.5)
    write = sink(topic="t")
    assert write.producer_options() == {
        "client_id": "kiel-spark", "request_timeout": 30.0, "required_acks": -1,
        "compression": None, "linger": 0.005, "batch_size": 64 * 1024,
    }


def test_fetch_sizes_stay_consistent():
    # fetch.max.bytes alone, below kiel's default per-partition fetch size.
    small = source(**{"kafka.fetch.max.bytes": "524288"})
    assert (small.fetch_max_bytes, small.max_fetch_size) == (524288, 524288)
    big = source(**{"kafka.max.partition.fetch.bytes": str(32 * 1024 * 1024)})
    assert big.max_fetch_size == 32 * 1024 * 1024
    with pytest.raises(ConfigError, match="maxFetchSize"):
        source(**{"kafka.max.partition.fetch.bytes": "2048", "kafka.fetch.max.bytes": "1024"})


def test_backoff_bounds_follow_the_java_client():
    # A maximum below the base: the maximum, constant (as the Java client).
    assert source(**{"kafka.retry.backoff.ms": "2000", "kafka.retry.backoff.max.ms": "500"}) \
        .client_options()["retry_backoff"] == 0.5
    # A base above kiel's default maximum lifts the maximum: no ConfigError at connect.
    kwargs = source(**{"kafka.retry.backoff.ms": "10000"}).client_options()
    assert kwargs["max_backoff"] == 10.0
    Client("h", **kwargs)


def test_bad_values_of_honoured_keys_are_refused():
    for options, match in [
        ({"kafka.request.timeout.ms": "soon"}, "kafka.request.timeout.ms must be an integer"),
        ({"kafka.retries": "-1"}, "kafka.retries must be in"),
        ({"kafka.group.id": " "}, "kafka.group.id must not be empty"),
        ({"kafka.security.protocol": "TLS"}, "kafka.security.protocol must be one of "
         "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, got 'TLS'"),
        ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers"),
    ]:
        with pytest.raises(ConfigError, match=match):
            source(**options)
    for options, match in [
        ({"kafka.acks": "2"}, "kafka.acks must be one of"),
        ({"kafka.compression.type": "zstd"}, "kafka.compression.type must be one of"),
        ({"kafka.linger.ms": "-5"}, "kafka.linger.ms"),
    ]:
        with pytest.raises(ConfigError, match=match):
            sink(**options)
    with pytest.raises(ConfigError, match="kafka.bootstrap.servers .or brokers. is required"):
        SinkOptions.parse({"topic": "t"})


# ----------------------------------------------------------------------
# kafka.* keys kiel cannot honour: one warning per key


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_unhonoured_kafka_keys_warn_once_each(caplog):
    options = {
        "kafka.session.timeout.ms": "6000",
        "KAFKA.SESSION.TIMEOUT.MS": "6000",  # the same key (keys are case-insensitive)
        "kafka.fetch.min.bytes": "1024",
        "kafka.heartbeat.interval.ms": "3000",
    }
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        opts = source(**options)
    messages = warnings_of(caplog)
    assert len(messages) == 3
    for key in ("kafka.session.timeout.ms", "kafka.fetch.min.bytes",
                "kafka.heartbeat.interval.ms"):
        assert sum(key in m for m in messages) == 1, messages
    assert any("as soon as any data" in m for m in messages)  # the hint for fetch.min.bytes
    assert {k.lower() for k in opts.ignored} == {
        "kafka.session.timeout.ms", "kafka.fetch.min.bytes", "kafka.heartbeat.interval.ms"}
    assert all(r.levelno == logging.WARNING for r in caplog.records)

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        written = sink(**{"kafka.enable.idempotence": "true", "kafka.delivery.timeout.ms": "1"})
    messages = warnings_of(caplog)
    assert len(messages) == 2 and any("at-least-once" in m for m in messages)
    assert set(written.ignored) == {"kafka.enable.idempotence", "kafka.delivery.timeout.ms"}


def test_options_of_sparks_source_kiel_has_no_use_for(caplog):
    spark_only = {"groupIdPrefix": "etl", "kafkaConsumer.pollTimeoutMs": "512",
                  "fetchOffset.numRetries": "3", "fetchOffset.retryIntervalMs": "10"}
    assert {k.lower() for k in spark_only} == SPARK_ONLY
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        opts = source(**spark_only)
    assert sorted(opts.ignored) == sorted(spark_only)
    assert len(warnings_of(caplog)) == 4
    # They are reading options: a sink refuses them like any unknown option.
    with pytest.raises(ConfigError, match="unknown kiel sink option.*groupIdPrefix"):
        sink(groupIdPrefix="etl")


def test_unknown_options_outside_kafka_are_refused():
    with pytest.raises(ConfigError, match="unknown kiel source option.*subscibe"):
        source(subscibe="typo")
    with pytest.raises(ConfigError, match="unknown kiel source option.*topic"):
        source(topic="t")  # a sink option
    with pytest.raises(ConfigError, match="unknown kiel sink option.*startingOffsets"):
        sink(startingOffsets="earliest")
    with pytest.raises(ConfigError, match="unknown kiel source option.*kafkaa.group.id"):
        source(**{"kafkaa.group.id": "g"})


# ----------------------------------------------------------------------
# two spellings of one setting


@pytest.mark.parametrize("kafka_key, kiel_key, one, other", [
    ("kafka.group.id", "groupId", "a", "b"),
    ("kafka.client.id", "clientId", "a", "b"),
    ("kafka.bootstrap.servers", "brokers", "h1:9092", "h2:9092"),
    ("kafka.request.timeout.ms", "requestTimeoutMs", "1000", "2000"),
    ("kafka.fetch.max.wait.ms", "fetchMaxWaitMs", "100", "200"),
    ("kafka.max.partition.fetch.bytes", "fetchMaxBytes", "1024", "2048"),
    ("kafka.fetch.max.bytes", "maxFetchSize", "1048576", "2097152"),
])
def test_source_spellings_must_agree(kafka_key, kiel_key, one, other):
    opts = source(**{kafka_key: one, kiel_key: one})
    assert opts.raw[kafka_key] == one
    with pytest.raises(ConfigError, match=f"{kafka_key}='{one}' and {kiel_key}='{other}'"):
        source(**{kafka_key: one, kiel_key: other})


@pytest.mark.parametrize("kafka_key, kiel_key, one, other, same", [
    ("kafka.acks", "acks", "1", "all", "-1"),  # all and -1 are one value
    ("kafka.compression.type", "compression", "gzip", "lz4", "GZIP"),
    ("kafka.linger.ms", "lingerMs", "5", "50", " 5"),
    ("kafka.batch.size", "batchSize", "1024", "2048", "1024"),
])
def test_sink_spellings_must_agree(kafka_key, kiel_key, one, other, same):
    sink(**{kafka_key: one, kiel_key: one})
    with pytest.raises(ConfigError, match="set the same thing differently"):
        sink(**{kafka_key: one, kiel_key: other})
    if kafka_key == "kafka.acks":
        assert sink(**{kafka_key: "all", kiel_key: same}).acks == -1
    else:
        sink(**{kafka_key: one, kiel_key: same})


# ----------------------------------------------------------------------
# includeHeaders


def test_include_headers():
    assert source().include_headers is False
    assert source(includeHeaders="true").include_headers is True
    assert source(INCLUDEHEADERS="False").include_headers is False
    assert sink(includeHeaders="true").include_headers is True
    assert include_headers({"includeHeaders": "true"}) and not include_headers({})
    for parse in (lambda: source(includeHeaders="yes"),
                  lambda: include_headers({"includeheaders": "1"})):
        with pytest.raises(ConfigError, match="includeHeaders must be 'true' or 'false'"):
            parse()


# ----------------------------------------------------------------------
# positions given as times


def test_starting_position_precedence():
    by_partition = '{"events": {"0": 1000, "1": 2000}}'
    # startingTimestamp wins over startingOffsetsByTimestamp and startingOffsets.
    for streaming in (False, True):
        opts = source(streaming, startingTimestamp="1500", startingOffsetsByTimestamp=by_partition,
                      startingOffsets="earliest")
        assert opts.starting == Timestamps("startingTimestamp", 1500, None)
    # Then startingOffsetsByTimestamp over startingOffsets.
    opts = source(startingOffsetsByTimestamp=by_partition, startingOffsets="earliest")
    assert opts.starting == Timestamps("startingOffsetsByTimestamp", None,
                                       {"events": {0: 1000, 1: 2000}})
    # Then startingOffsets, then the default.
    assert source(startingOffsets='{"events": {"0": 5}}').starting == {"events": {0: 5}}
    assert source().starting == "earliest"
    assert source(streaming=True).starting == "latest"
    # 'latest' is refused in a batch read only when it is the position used (as Spark).
    assert isinstance(source(startingTimestamp="0", startingOffsets="latest").starting,
                      Timestamps)
    with pytest.raises(ConfigError, match="streaming"):
        source(startingOffsets="latest")


def test_ending_position_precedence():
    by_partition = '{"events": {"0": 1000}}'
    opts = source(endingTimestamp="7", endingOffsetsByTimestamp=by_partition, endingOffsets="x")
    assert opts.ending == Timestamps("endingTimestamp", 7, None)
    opts = source(endingOffsetsByTimestamp=by_partition, endingOffsets="latest")
    assert opts.ending == Timestamps("endingOffsetsByTimestamp", None, {"events": {0: 1000}})
    assert source(endingOffsets='{"events": {"0": -1}}').ending == {"events": {0: -1}}
    assert source().ending == "latest"
    # Ending positions are for batch reads (Spark refuses them in streams too).
    for name, value in (("endingTimestamp", "7"), ("endingOffsetsByTimestamp", by_partition),
                        ("endingOffsets", "latest")):
        with pytest.raises(ConfigError, match=f"{name} is for batch reads only"):
            source(streaming=True, **{name: value})


def test_bad_times_are_refused():
    for options, match in [
        ({"startingTimestamp": "yesterday"}, "startingTimestamp must be an integer"),
        ({"startingTimestamp": "-1"}, "startingTimestamp must be in"),
        ({"endingTimestamp": "1.5"}, "endingTimestamp must be an integer"),
        ({"startingOffsetsByTimestamp": '{"events": {"0": -2}}'},
         "startingOffsetsByTimestamp: offset for events/0 must be >= 0"),
        ({"endingOffsetsByTimestamp": "[1]"}, "endingOffsetsByTimestamp must be a JSON object"),
        ({"startingOffsetsByTimestampStrategy": "earliest"},
         "startingOffsetsByTimestampStrategy must be one of error, latest"),
    ]:
        with pytest.raises(ConfigError, match=match):
            source(**options)


def test_starting_strategy():
    assert source().starting_strategy == "error"
    assert source(startingOffsetsByTimestampStrategy="LATEST").starting_strategy == "latest"
    assert source(streaming=True,
                  startingOffsetsByTimestampStrategy="error").starting_strategy == "error"


# ----------------------------------------------------------------------
# minOffsetsPerTrigger / maxTriggerDelay


def test_trigger_options():
    opts = source(streaming=True, minOffsetsPerTrigger="500")
    assert (opts.min_offsets_per_trigger, opts.max_trigger_delay) == (500, 900.0)
    for text, seconds in [("30s", 30.0), ("15m", 900.0), ("15min", 900.0), ("2h", 7200.0),
                          ("1d", 86400.0), ("250ms", 0.25), ("1000", 1.0), ("5 S", 5.0),
                          ("0", 0.0)]:
        assert source(streaming=True, maxTriggerDelay=text).max_trigger_delay == seconds, text
    opts = source(streaming=True, minOffsetsPerTrigger="10", maxOffsetsPerTrigger="10")
    assert (opts.min_offsets_per_trigger, opts.max_offsets_per_trigger) == (10, 10)
    for options, match in [
        ({"minOffsetsPerTrigger": "11", "maxOffsetsPerTrigger": "10"},
         "above maxOffsetsPerTrigger"),
        ({"minOffsetsPerTrigger": "0"}, "minOffsetsPerTrigger must be in"),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
        ({"maxTriggerDelay": "-1s"}, "maxTriggerDelay must be a duration"),
        ({"maxTriggerDelay": "3 weeks"}, "maxTriggerDelay must be a duration"),
    ]:
        with pytest.raises(ConfigError, match=match):
            source(streaming=True, **options)
    # A batch read ignores them (test_stream_only_options_are_ignored_by_batch_reads).


# ----------------------------------------------------------------------
# a configuration copied from Spark's Kafka integration guide


def test_a_config_from_sparks_guide_parses(caplog):
    stream = {
        "kafka.bootstrap.servers": "host1:port1,host2:port2",
        "subscribe": "topic1,topic2",
        "includeHeaders": "true",
        "startingOffsets": '{"topic1":{"0":23,"1":-2},"topic2":{"0":-2}}',
        "failOnDataLoss": "false",
        "maxOffsetsPerTrigger": "10000",
        "minOffsetsPerTrigger": "1000",
        "maxTriggerDelay": "15m",
        "minPartitions": "8",
        "kafka.group.id": "authorized-group",
        "groupIdPrefix": "spark-kafka-source",
        "kafkaConsumer.pollTimeoutMs": "120000",
        "kafka.session.timeout.ms": "10000",
    }
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        opts = SourceOptions.parse(stream, streaming=True)
    assert opts.topics == ["topic1", "topic2"] and opts.include_headers
    assert opts.group_id == "authorized-group" and not opts.fail_on_data_loss
    assert sorted(opts.ignored) == ["groupIdPrefix", "kafka.session.timeout.ms",
                                    "kafkaConsumer.pollTimeoutMs"]
    assert len(warnings_of(caplog)) == 3
    batch = SourceOptions.parse({
        "kafka.bootstrap.servers": "host1:port1,host2:port2",
        "subscribePattern": "topic.*",
        "startingOffsetsByTimestamp": '{"topic1": {"0": 1000, "1": 1000}}',
        "endingTimestamp": "2000",
        "startingOffsetsByTimestampStrategy": "latest",
    }, streaming=False)
    assert batch.pattern is not None and batch.ending == Timestamps("endingTimestamp", 2000, None)
    write = SinkOptions.parse({"kafka.bootstrap.servers": "host1:port1,host2:port2",
                               "topic": "topic1", "includeHeaders": "true",
                               "checkpointLocation": "/tmp/ck"})
    assert write.topic == "topic1"


# ----------------------------------------------------------------------
# TLS and SASL: the Java client's names (kiel.spark.security)

SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SECRET = 'pa"ss;wo\\rd'  # a quote, a ';' and a backslash: escaped in the JAAS line
SECRET_JAAS = r'password="pa\"ss;wo\\rd"'

#: Every security key, each exercised by a test below.
SECURITY_KEYS = {
    "kafka.security.protocol", "kafka.sasl.mechanism", "kafka.sasl.jaas.config",
    "kafka.ssl.truststore.location", "kafka.ssl.truststore.type",
    "kafka.ssl.truststore.certificates", "kafka.ssl.keystore.location",
    "kafka.ssl.keystore.type", "kafka.ssl.key.password",
    "kafka.ssl.endpoint.identification.algorithm", "kafka.ssl.keystore.key",
    "kafka.ssl.keystore.certificate.chain",
}


def jaas(module=SCRAM_MODULE, rest=f'username="alice" {SECRET_JAAS}'):
    return f"{module} required {rest};"


def sasl(protocol="SASL_PLAINTEXT", mechanism="SCRAM-SHA-512", **options):
    return {"kafka.security.protocol": protocol, "kafka.sasl.mechanism": mechanism,
            "kafka.sasl.jaas.config": jaas(LOGIN_MODULES.get(mechanism, SCRAM_MODULE)),
            **options}


@pytest.fixture(scope="module")
def pem(certificates, tmp_path_factory):
    """PEM files: the CA, a key store (key + chain), the same with an encrypted
    key, a binary (JKS-like) file and a PEM file holding no certificate."""
    d = tmp_path_factory.mktemp("stores")
    key, cert = certificates["key"].read_text(), certificates["cert"].read_text()
    (d / "client.pem").write_text(key + cert)
    encrypted = subprocess.run(
        ["openssl", "pkey", "-in", str(certificates["key"]), "-aes256", "-passout",
         f"pass:{SECRET}"], check=True, capture_output=True, text=True, timeout=60).stdout
    (d / "encrypted.pem").write_text(encrypted + cert)
    (d / "store.jks").write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    (d / "empty.pem").write_text("-----BEGIN NOTHING-----\nAAAA\n-----END NOTHING-----\n")
    return {"ca": str(certificates["ca"]), "client": str(d / "client.pem"),
            "encrypted": str(d / "encrypted.pem"), "jks": str(d / "store.jks"),
            "empty": str(d / "empty.pem"), "missing": str(d / "missing.pem"),
            "ca_text": certificates["ca"].read_text()}


def refused(match, parse=source, **options):
    """The ConfigError ``parse(**options)`` raises; it never shows the secret."""
    with pytest.raises(ConfigError, match=match) as info:
        parse(**options)
    assert SECRET not in str(info.value) and "s3cret" not in str(info.value)
    return info.value


@pytest.mark.parametrize("protocol, tls, authenticates", [
    ("PLAINTEXT", False, False), ("plaintext", False, False), ("SSL", True, False),
    ("ssl", True, False), ("SASL_PLAINTEXT", False, True), ("Sasl_Ssl", True, True),
])
def test_security_protocols(protocol, tls, authenticates):
    extra = sasl(protocol) if authenticates else {"kafka.security.protocol": protocol}
    for opts in (source(**extra), sink(**extra)):
        assert (opts.tls is not None, opts.sasl is not None) == (tls, authenticates)
        kwargs = opts.client_options()
        assert ("ssl_context" in kwargs, "sasl_mechanism" in kwargs) == (tls, authenticates)
    refused("kafka.security.protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, "
            "got 'SASL_TLS'", **{"kafka.security.protocol": "SASL_TLS"})


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "scram-sha-256"])
def test_sasl_mechanisms(mechanism):
    opts = source(**{**sasl(mechanism=mechanism.upper()), "kafka.sasl.mechanism": mechanism})
    assert opts.sasl is not None and opts.sasl.mechanism == mechanism.upper()
    assert (opts.sasl.username, opts.sasl.password) == ("alice", SECRET)
    assert {k: v for k, v in opts.client_options().items() if k.startswith("sasl")} == {
        "sasl_mechanism": mechanism.upper(), "sasl_username": "alice", "sasl_password": SECRET}


def test_unsupported_mechanisms_are_refused_clearly():
    for mechanism, what in (("GSSAPI", "kiel does not implement GSSAPI .Kerberos."),
                            ("oauthbearer", "the Spark source takes no OAUTHBEARER .OAuth 2 "
                                            "tokens.: kiel's clients take it as "
                                            "sasl_oauth_token_provider")):
        refused(f"{what}.*; it speaks PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
                **{**sasl(), "kafka.sasl.mechanism": mechanism})
    refused("kafka.sasl.mechanism must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
            "got 'DIGEST-MD5'", **{**sasl(), "kafka.sasl.mechanism": "DIGEST-MD5"})


def test_a_sasl_protocol_needs_a_mechanism_and_a_jaas_line():
    for protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        options = sasl(protocol)
        del options["kafka.sasl.mechanism"]
        refused(f"{protocol} needs option kafka.sasl.mechanism .*GSSAPI .Kerberos., is not "
                "available in kiel", **options)
        options = sasl(protocol)
        del options["kafka.sasl.jaas.config"]
        refused(f"{protocol} needs option kafka.sasl.jaas.config, e.g. {SCRAM_MODULE} required",
                **options)


@pytest.mark.parametrize("line, username, password", [
    (f'{SCRAM_MODULE} required username="alice" password="s3cret";', "alice", "s3cret"),
    (jaas(), "alice", SECRET),
    # Words unquoted, any spacing and new lines, the flag in any case.
    (f"  {SCRAM_MODULE}\n  REQUIRED\n username = alice\tpassword=s3cret ; ", "alice", "s3cret"),
    (f'{SCRAM_MODULE} required username="a b=c,d" password="x\\\\y\\"";', "a b=c,d", 'x\\y"'),
    # SCRAM's tokenauth=false is the default: accepted.
    (f'{SCRAM_MODULE} required tokenauth="false" username="u" password="p";', "u", "p"),
])
def test_jaas_lines(line, username, password):
    opts = source(**{**sasl(), "kafka.sasl.jaas.config": line})
    assert opts.sasl is not None
    assert (opts.sasl.username, opts.sasl.password) == (username, password)


def test_jaas_options_kiel_does_not_know_are_logged_by_name(caplog):
    line = jaas(rest=f'username="alice" {SECRET_JAAS} serviceName="kafka"')
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        source(**{**sasl(), "kafka.sasl.jaas.config": line})
    messages = warnings_of(caplog)
    assert len(messages) == 1 and "serviceName" in messages[0]
    assert SECRET not in caplog.text


@pytest.mark.parametrize("line, match", [
    (jaas(module=PLAIN_MODULE), f"names the login module {PLAIN_MODULE}, but "
     f"kafka.sasl.mechanism=SCRAM-SHA-512 takes {SCRAM_MODULE}"),
    (jaas(rest=SECRET_JAAS), "needs username"),
    (jaas(rest='username="alice"'), "needs password"),
    (jaas(rest='username="alice" password=""'), "needs password"),
    (jaas(rest=""), "needs username and password"),
    (f'{SCRAM_MODULE} required username="alice" {SECRET_JAAS}', "expected ';'"),
    (f'{SCRAM_MODULE} required username="alice" password="s3cret', "never closed"),
    (f'{SCRAM_MODULE} required username "alice" {SECRET_JAAS};', "expected '=' after username"),
    (f'{SCRAM_MODULE} required username=;', "expected a value for username"),
    (f'{SCRAM_MODULE} required username="a" {SECRET_JAAS}; {SCRAM_MODULE} required;',
     "one login module entry"),
    (f'{SCRAM_MODULE} username="alice" {SECRET_JAAS};', "expected the flag 'required'"),
    (f'{SCRAM_MODULE} required username="a" password="{SECRET}";', "malformed"),  # unescaped
    (f'{SCRAM_MODULE} required username="a" password="s3cret" password="x";', "password twice"),
    (f'{SCRAM_MODULE} required username="a" password=s3cret% ;', "unexpected character"),
    (f'{SCRAM_MODULE} required tokenauth=true username="a" password="s3cret";', "tokenauth"),
    ("", "malformed"),
])
def test_bad_jaas_lines_are_refused_without_showing_the_password(line, match):
    error = refused(match, **{**sasl(), "kafka.sasl.jaas.config": line})
    assert "kafka.sasl.jaas.config" in str(error) or "kafka.sasl.mechanism" in str(error)


def test_tls_trust(pem):
    def tls(**options):
        opts = source(**{"kafka.security.protocol": "SSL", **options})
        context = opts.client_options()["ssl_context"]
        assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED
        return opts, context

    # No trust store: the system's CAs, the host name checked.
    opts, context = tls()
    assert context.check_hostname and opts.tls == TlsSettings()
    # A PEM trust store, with its type or without (read when it is PEM).
    for typed in ({"kafka.ssl.truststore.type": "PEM"}, {"kafka.ssl.truststore.type": "pem"}, {}):
        _, context = tls(**{"kafka.ssl.truststore.location": pem["ca"]}, **typed)
        assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName",
                                                                     "kiel test CA"),),)]
    _, context = tls(**{"kafka.ssl.truststore.certificates": pem["ca_text"],
                        "kafka.ssl.truststore.type": "PEM"})
    assert len(context.get_ca_certs()) == 1
    # The endpoint identification algorithm: "https" (default) or "" (the chain only).
    assert tls(**{"kafka.ssl.endpoint.identification.algorithm": "https"})[1].check_hostname
    _, lenient = tls(**{"kafka.ssl.endpoint.identification.algorithm": ""})
    assert not lenient.check_hostname and lenient.verify_mode == ssl.CERT_REQUIRED
    # Each client gets a context of its own (they are built, not pickled).
    assert opts.client_options()["ssl_context"] is not opts.client_options()["ssl_context"]


def test_bad_trust_stores_are_refused_at_planning(pem):
    ssl_on = {"kafka.security.protocol": "SASL_SSL", **sasl("SASL_SSL")}
    for store in ("JKS", "PKCS12"):
        refused(f"kafka.ssl.truststore.type='{store}': kiel reads PEM only", **ssl_on,
                **{"kafka.ssl.truststore.location": pem["ca"], "kafka.ssl.truststore.type": store})
    refused("no kafka.ssl.truststore.type given, and .* is not PEM; kiel reads PEM only .the "
            "Java client's default type is JKS", **ssl_on,
            **{"kafka.ssl.truststore.location": pem["jks"]})
    refused("kafka.ssl.truststore.type=PEM but .* is not PEM", **ssl_on,
            **{"kafka.ssl.truststore.location": pem["jks"], "kafka.ssl.truststore.type": "PEM"})
    refused("cannot read .*missing.pem.*No such file", **ssl_on,
            **{"kafka.ssl.truststore.location": pem["missing"]})
    refused("kafka.ssl.truststore.location: no trusted certificate could be loaded", **ssl_on,
            **{"kafka.ssl.truststore.location": pem["empty"]})
    refused("kafka.ssl.truststore.certificates: no trusted certificate could be loaded",
            **ssl_on, **{"kafka.ssl.truststore.certificates": "not a certificate"})
    refused("set one, not both", **ssl_on, **{"kafka.ssl.truststore.location": pem["ca"],
                                               "kafka.ssl.truststore.certificates": pem["ca_text"]})
    refused("kafka.ssl.endpoint.identification.algorithm must be 'https'", **ssl_on,
            **{"kafka.ssl.endpoint.identification.algorithm": "http"})


def test_client_certificates(pem):
    ssl_on = {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": pem["ca"]}
    for store in ({"kafka.ssl.keystore.location": pem["client"], "kafka.ssl.keystore.type": "PEM"},
                  {"kafka.ssl.keystore.location": pem["client"]},
                  {"kafka.ssl.keystore.location": pem["encrypted"],
                   "kafka.ssl.keystore.type": "PEM", "kafka.ssl.key.password": SECRET}):
        opts = sink(**ssl_on, **store)
        assert opts.tls is not None and opts.tls.keystore_location == store[
            "kafka.ssl.keystore.location"]
        assert isinstance(opts.producer_options()["ssl_context"], ssl.SSLContext)
        assert SECRET not in repr(opts) and SECRET not in str(opts)
    encrypted = {"kafka.ssl.keystore.location": pem["encrypted"]}
    # A wrong or missing password is a ConfigError (never a prompt on the terminal).
    refused("the key and certificate chain in .* cannot be loaded", sink, **ssl_on, **encrypted,
            **{"kafka.ssl.key.password": SECRET + "-wrong"})
    refused("the key and certificate chain in .* cannot be loaded", sink, **ssl_on, **encrypted)
    refused("kafka.ssl.keystore.type='JKS': kiel reads PEM only", sink, **ssl_on,
            **encrypted, **{"kafka.ssl.keystore.type": "JKS"})
    refused("kafka.ssl.key.password needs kafka.ssl.keystore.location", sink, **ssl_on,
            **{"kafka.ssl.key.password": SECRET})
    for inline in ("kafka.ssl.keystore.key", "kafka.ssl.keystore.certificate.chain"):
        refused(f"{inline}: kiel reads the client's key and certificate chain from one PEM file",
                sink, **ssl_on, **{inline: "-----BEGIN PRIVATE KEY-----"})


def test_security_options_need_a_protocol_that_uses_them(pem):
    ssl_key = {"kafka.ssl.truststore.location": pem["ca"]}
    ignored_ssl_key = {"kafka.ssl.truststore.password": SECRET}  # not honoured, still refused
    for protocol in (None, "PLAINTEXT", "SASL_PLAINTEXT"):
        base = {} if protocol is None else sasl(protocol) if protocol.startswith("SASL") else {
            "kafka.security.protocol": protocol}
        for parse in (source, sink):
            for key in (ssl_key, ignored_ssl_key):
                refused(f"option.s. {next(iter(key))} need a kafka.security.protocol with SSL, "
                        f"got {protocol or 'PLAINTEXT'}", parse, **base, **key)
    for protocol in (None, "PLAINTEXT", "SSL"):
        base = {} if protocol is None else {"kafka.security.protocol": protocol}
        for key in ("kafka.sasl.mechanism", "kafka.sasl.jaas.config", "kafka.sasl.login.class"):
            value = sasl()[key] if key in sasl() else "x"
            refused(f"option.s. {key} need a kafka.security.protocol with SASL, "
                    f"got {protocol or 'PLAINTEXT'}", **base, **{key: value})


def test_secrets_never_show(pem, caplog):
    options = {**sasl("SASL_SSL"), "kafka.ssl.truststore.location": pem["ca"],
               "kafka.ssl.keystore.location": pem["encrypted"], "kafka.ssl.key.password": SECRET,
               "kafka.ssl.truststore.password": SECRET, "kafka.unknown.setting": "x"}
    with caplog.at_level(logging.DEBUG):
        read, write = source(**options), sink(**options)
    assert SECRET not in caplog.text
    assert "ignores option kafka.ssl.truststore.password" in caplog.text  # with why:
    assert "a PEM trust store has no password" in caplog.text
    for opts in (read, write):
        assert SECRET not in repr(opts) and SECRET not in str(opts)
        assert SECRET not in repr(opts.sasl) and SECRET not in repr(opts.tls)
    assert read.raw["kafka.sasl.jaas.config"] == "<hidden>"
    assert read.raw["kafka.ssl.key.password"] == read.raw["kafka.ssl.truststore.password"] \
        == "<hidden>"
    assert SECRET not in repr(read.raw) and SCRAM_MODULE not in repr(read.raw)
    # kiel's clients take them, and hide them too.
    kwargs = write.producer_options()
    assert kwargs["sasl_password"] == SECRET
    producer = Producer(write.brokers, **kwargs)
    consumer = SingleConsumer(read.brokers, **read.client_options())
    for client in (producer, consumer):
        assert client.cluster.ssl_options is not None and client.cluster.sasl is not None
        assert SECRET not in repr(client) and SECRET not in repr(client.cluster.sasl)


def test_secured_options_travel_to_workers_as_strings(pem):
    opts = source(**sasl("SASL_SSL"), **{"kafka.ssl.truststore.location": pem["ca"]})
    again = pickle.loads(pickle.dumps(opts))
    assert again == opts and again.sasl.password == SECRET
    assert isinstance(again.client_options()["ssl_context"], ssl.SSLContext)


# ----------------------------------------------------------------------
# Spark's option table: what Spark's Kafka source refuses, ignores and takes
# (the "Kafka Specific Configurations" and option tables of Spark's Kafka
# integration guide), for a batch read, a stream and a write

#: Keys Spark's source refuses whatever their value, with the word its reason hinges on.
SOURCE_REFUSED = [
    ("kafka.auto.offset.reset", "earliest", "startingOffsets"),
    ("kafka.enable.auto.commit", "true", "commits"),
    ("kafka.key.deserializer",
     "org.apache.kafka.common.serialization.StringDeserializer", "CAST"),
    ("kafka.value.deserializer",
     "org.apache.kafka.common.serialization.StringDeserializer", "CAST"),
    ("kafka.interceptor.classes", "com.example.Audit", "interceptor"),
]
#: Keys Spark's sink refuses.
SINK_REFUSED = [
    ("kafka.key.serializer", "org.apache.kafka.common.serialization.StringSerializer", "bytes"),
    ("kafka.value.serializer", "org.apache.kafka.common.serialization.StringSerializer",
     "bytes"),
]


@pytest.mark.parametrize("streaming", [False, True, None])
@pytest.mark.parametrize("key, value, reason", SOURCE_REFUSED)
def test_keys_sparks_source_refuses(key, value, reason, streaming):
    with pytest.raises(ConfigError, match=rf"option {key} is not supported.*{reason}"):
        SourceOptions.parse({**BASE, key: value}, streaming=streaming)
    with pytest.raises(ConfigError, match=key):  # any spelling of the key
        SourceOptions.parse({**BASE, key.upper(): value}, streaming=streaming)


@pytest.mark.parametrize("key, value, reason", SINK_REFUSED)
def test_keys_sparks_sink_refuses(key, value, reason):
    with pytest.raises(ConfigError, match=rf"option {key} is not supported.*{reason}"):
        sink(**{key: value})


def test_isolation_level_is_taken(caplog):
    # read_uncommitted is the default (and the Java client's).
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        options = source(**{"kafka.isolation.level": "read_uncommitted"})
        assert options.ignored == () and options.read_committed is False
    assert not caplog.records
    assert source().read_committed is False
    # read_committed is honoured (issue 31), in every mode, any case.
    for streaming in (False, True, None):
        parsed = SourceOptions.parse({**BASE, "kafka.isolation.level": "READ_COMMITTED"},
                                     streaming=streaming)
        assert parsed.read_committed is True
    with pytest.raises(ConfigError, match="kafka.isolation.level must be one of"):
        source(**{"kafka.isolation.level": "serializable"})


def test_stream_only_options_are_ignored_by_batch_reads(caplog):
    stream_only = {"maxOffsetsPerTrigger": "100", "minOffsetsPerTrigger": "10",
                   "maxTriggerDelay": "5s"}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        batch = source(**stream_only)
    assert not caplog.records  # as Spark: silently, they mean nothing to a batch read
    assert (batch.max_offsets_per_trigger, batch.min_offsets_per_trigger) == (None, None)
    stream = source(streaming=True, **stream_only)
    assert (stream.max_offsets_per_trigger, stream.min_offsets_per_trigger,
            stream.max_trigger_delay) == (100, 10, 5.0)
    # Their values are still checked (kiel cannot tell a batch read from a
    # stream when the source is loaded).
    with pytest.raises(ConfigError, match="maxOffsetsPerTrigger must be in"):
        source(maxOffsetsPerTrigger="0")


def test_max_records_per_partition():
    assert source(maxRecordsPerPartition="5000").max_records_per_partition == 5000
    assert source(streaming=True).max_records_per_partition is None
    for bad in ("0", "-3", "many"):
        with pytest.raises(ConfigError, match="maxRecordsPerPartition"):
            source(maxRecordsPerPartition=bad)


def test_load_time_checks_every_option_in_either_mode():
    """``streaming=None``: what the source checks when it is loaded, before
    Spark says whether it is a batch read or a stream."""
    checked = SourceOptions.parse({**BASE, "endingOffsets": "latest",
                                   "startingOffsets": "latest"}, streaming=None)
    assert checked.topics == ["events"]
    for options, match in [
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be in"),
        ({"minOffsetsPerTrigger": "5", "maxOffsetsPerTrigger": "4"}, "above"),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
        ({"endingOffsets": "earliest"}, "endingOffsets cannot be 'earliest'"),
        ({"minPartitions": "0"}, "minPartitions"),
        ({"subscibe": "x"}, "unknown kiel source option"),
    ]:
        with pytest.raises(ConfigError, match=match):
            SourceOptions.parse({**BASE, **options}, streaming=None)
