"""Spark configuration parity, end to end: configurations written for Spark's
Kafka source and sink (``kafka.*`` options, ``includeHeaders``, timestamp
positions, ``minOffsetsPerTrigger``) run with only ``format("kiel")`` changed,
on local[2] against the embedded 0.8.2 cluster (over TCP, real ZooKeeper).

The SparkSession fixture is tests/spark/conftest.py's, the helpers
tests/support/spark.py's. pyspark is a
hard requirement: without it this module fails to import, it is never skipped.
"""
import collections
import json
import time

import pyarrow as pa
import pytest

from kiel.spark.datasource import (
    SCHEMA,
    SCHEMA_WITH_HEADERS,
    RowAdapter,
    TriggerGate,
    schema_for,
    to_arrow,
)
from kiel.structs import Record
from tests.conftest import unique
from tests.support import security_fronts
from tests.support.security_fronts import SaslFront, server_context
from tests.support.spark import produce, zk_offsets

# The TLS and SASL test servers' fixtures (pytest finds them among the module's globals).
certificates = security_fronts.certificates
fronted_tansu = security_fronts.fronted_tansu

pytestmark = [pytest.mark.zookeeper]


def kafka_format(builder, options):
    """``builder.format("kiel")`` with ``options``, as a Spark job sets them."""
    builder = builder.format("kiel")
    for key, value in options.items():
        builder = builder.option(key, value)
    return builder


def now_ms():
    return int(time.time() * 1000)


# ----------------------------------------------------------------------
# pure parts (no Spark job)


def test_schema_is_sparks():
    # Column order and types exactly as Spark's Kafka source (KafkaRecordToRowConverter).
    assert SCHEMA.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>"
    )
    assert SCHEMA_WITH_HEADERS.simpleString() == (
        SCHEMA.simpleString()[:-1] + ",headers:array<struct<key:string,value:binary>>>"
    )
    assert all(f.nullable for f in SCHEMA_WITH_HEADERS.fields)
    assert schema_for(True) is SCHEMA_WITH_HEADERS and schema_for(False) is SCHEMA
    records = [Record("t", 1, 7 + i, None, b"v%d" % i, None) for i in range(3)]
    batch = to_arrow(records, headers=True)
    assert batch.schema.names == SCHEMA_WITH_HEADERS.fieldNames()
    assert batch.column(7).null_count == 3
    assert batch.schema.field("headers").type == pa.list_(
        pa.struct([("key", pa.string()), ("value", pa.binary())]))
    assert to_arrow(records).schema.names == SCHEMA.fieldNames()


def test_row_adapter():
    rows = [{"topic": "column", "value": b"a", "headers": None},
            {"topic": None, "value": b"b", "headers": [("k", b"v")]}]
    same = iter(rows)
    assert RowAdapter(None, True)(same) is same  # headers go to the producer as they are
    # The topic option overrides the column (Spark's sink rule).
    assert [r["topic"] for r in RowAdapter("option", True)(iter(rows))] == ["option", "option"]


def test_arrow_rows_carry_headers_and_timestamp_types():
    records = [
        Record("t", 0, 0, None, b"a", 1_700_000_000_000, 0, (("h", b"1"), ("e", None))),
        Record("t", 0, 1, b"k", b"b", 1_700_000_000_001, 1, ()),
        Record("t", 0, 2, None, b"c", None),  # a 0.8 message in the same answer
    ]
    batch = to_arrow(records, headers=True).to_pydict()
    assert batch["timestampType"] == [0, 1, -1]
    assert [None if t is None else int(t.timestamp() * 1000) for t in batch["timestamp"]] \
        == [1_700_000_000_000, 1_700_000_000_001, None]
    # No headers is null, as in Spark's source; headers keep their order.
    assert batch["headers"] == [[{"key": "h", "value": b"1"}, {"key": "e", "value": None}],
                                None, None]


def test_sink_rows_take_sparks_headers_column():
    from kiel.exc import ConfigError
    from kiel.spark.kafka import _headers

    assert _headers(None) is None and _headers([]) is None
    assert _headers([{"key": "a", "value": b"1"}, ("b", "two"), {"key": "c", "value": None}]) \
        == [("a", b"1"), ("b", b"two"), ("c", None)]
    with pytest.raises(ConfigError, match="header key"):
        _headers([{"key": 3, "value": b"x"}])


def test_trigger_gate():
    clock = [100.0]
    gate = TriggerGate(min_offsets=50, max_delay=10.0, clock=lambda: clock[0])
    assert gate.admit(0)  # a query's first trigger is never held (as Spark)
    assert not gate.admit(49)
    clock[0] += 9.9
    assert not gate.admit(49)
    assert gate.admit(50)  # enough offsets: go, and the delay restarts
    clock[0] += 5.0
    assert not gate.admit(10)
    clock[0] += 5.0
    assert gate.admit(10)  # maxTriggerDelay passed: go with what waits
    assert not gate.admit(1)


# ----------------------------------------------------------------------
# configurations copied from Spark's Kafka integration guide


def test_batch_read_with_sparks_options(spark, kafka_cluster, topic_factory):  # noqa: F811
    topic = topic_factory(partitions=3)
    produced = produce(kafka_cluster, topic, 120)
    df = kafka_format(spark.read, {
        "kafka.bootstrap.servers": kafka_cluster.bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "endingOffsets": "latest",
        "includeHeaders": "true",
        "failOnDataLoss": "true",
        "minPartitions": "4",
        "kafka.group.id": "analytics",
        "kafka.client.id": "spark-batch",
        "kafka.request.timeout.ms": "40000",
        "kafka.fetch.max.wait.ms": "200",
        "kafka.max.partition.fetch.bytes": "65536",
        "kafka.retry.backoff.ms": "50",
        "kafka.security.protocol": "PLAINTEXT",
        "kafka.session.timeout.ms": "10000",  # not honoured: a warning, not a failure
        "kafka.isolation.level": "read_uncommitted",  # what kiel does: honoured
    }).load()
    assert df.schema == SCHEMA_WITH_HEADERS
    rows = df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "headers",
                         "partition", "offset").collect()
    assert collections.Counter((r.partition, r.offset, r.key.encode(), r.value.encode())
                               for r in rows) == collections.Counter(produced)
    # A 0.8 message has no headers: null, as Spark shows a record without any.
    assert {r.headers for r in rows} == {None}
    assert df.where("size(headers) > 0").count() == 0


def test_streaming_read_with_sparks_options(spark, kafka_cluster, topic_factory,  # noqa: F811
                                            tmp_path):
    topic = topic_factory(partitions=2)
    group = f"spark-{topic}"
    produced = produce(kafka_cluster, topic, 90)
    df = kafka_format(spark.readStream, {
        "kafka.bootstrap.servers": kafka_cluster.bootstrap,
        "subscribe": topic,
        "includeHeaders": "true",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "30",
        "kafka.group.id": group,
        "kafka.client.id": "spark-stream",
        "kafka.metadata.max.age.ms": "30000",
        "kafka.retries": "4",
        "groupIdPrefix": "spark-kafka-source",  # Spark-only: a warning
    }).load()
    name = "parity_" + topic.replace("-", "_")
    q = (df.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                       "headers", "partition", "offset")
         .writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    rows = spark.sql(f"select * from {name}").collect()
    assert collections.Counter((r.partition, r.offset, r.key.encode(), r.value.encode())
                               for r in rows) == collections.Counter(produced)
    assert {r.headers for r in rows} == {None}
    assert max(p["numInputRows"] for p in q.recentProgress) <= 30
    # kafka.group.id is the group processed offsets are committed to (a
    # commit lags by up to one micro-batch: several batches ran).
    committed = zk_offsets(kafka_cluster, group, topic, range(2))
    assert committed and 0 < sum(committed.values()) <= len(produced)


def test_batch_write_with_sparks_options(spark, kafka_cluster, topic_factory):  # noqa: F811
    topic = topic_factory(partitions=2)
    data = [(f"k{i % 7}", f"value-{i}") for i in range(200)]
    df = spark.createDataFrame(data, "key string, value string").repartition(2)
    writer = kafka_format(df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)").write, {
        "kafka.bootstrap.servers": kafka_cluster.bootstrap,
        "topic": topic,
        "kafka.acks": "all",
        "kafka.compression.type": "gzip",
        "kafka.linger.ms": "5",
        "kafka.batch.size": "16384",
        "kafka.max.request.size": "1048576",
        "kafka.buffer.memory": "33554432",
        "kafka.retries": "3",
        "kafka.client.id": "spark-writer",
        "kafka.enable.idempotence": "false",  # not honoured: a warning
    })
    # Spark's guide calls save() without mode(): Spark itself refuses its
    # default mode (errorifexists) for every Python data source, so a batch
    # write needs mode("append") (the guide says so; this notices if Spark
    # ever lifts it).
    with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
        writer.save()
    writer.mode("append").save()
    back = kafka_format(spark.read, {"kafka.bootstrap.servers": kafka_cluster.bootstrap,
                                     "subscribe": topic}).load().collect()
    assert collections.Counter((bytes(r.key).decode(), bytes(r.value).decode()) for r in back) \
        == collections.Counter(data)

    # The topic option overrides a topic column (Spark's rule); a read with
    # includeHeaders writes back as is (its headers are all null).
    other = topic_factory(partitions=1)
    read = kafka_format(spark.read, {"kafka.bootstrap.servers": kafka_cluster.bootstrap,
                                     "subscribe": topic, "includeHeaders": "true"}).load()
    (kafka_format(read.select("topic", "key", "value", "headers").write,
                  {"kafka.bootstrap.servers": kafka_cluster.bootstrap, "topic": other})
     .mode("append").save())
    copied = kafka_format(spark.read, {"kafka.bootstrap.servers": kafka_cluster.bootstrap,
                                       "subscribe": other}).load()
    assert copied.count() == len(data)
    assert read.count() == len(data)  # nothing went to the column's topic
    # A 0.8 broker cannot store headers: the task fails, nothing is lost silently.
    with pytest.raises(Exception, match="UnsupportedFeatureError|Produce v3"):
        (spark.createDataFrame([("v", [("h", b"x")])],
                               "value string, headers array<struct<key:string,value:binary>>")
         .write.format("kiel").option("kafka.bootstrap.servers", kafka_cluster.bootstrap)
         .option("topic", other).mode("append").save())


# ----------------------------------------------------------------------
# positions given as times: segment granularity on a 0.8 broker


@pytest.fixture
def segmented(kafka_cluster_factory):
    """One broker rolling a segment every 10 messages; a 1-partition topic
    holding three segments written at known times:

    offsets [0, 10) then time ``t1``, [10, 20) then ``t2``, [20, 25) then ``t3``.
    """
    cluster = kafka_cluster_factory(brokers=1, partitions=1, segment_messages=10)
    topic = "timed"
    cluster.create_topic(topic, 1)
    times = {"t0": now_ms()}
    time.sleep(0.01)  # every segment's last write is strictly after t0
    for name, count in (("t1", 10), ("t2", 10), ("t3", 5)):
        produce(cluster, topic, count, prefix=name)
        times[name] = now_ms()
        time.sleep(0.01)  # ... and strictly before the next time
    return cluster, topic, times


def offsets_read(spark, cluster, topic, **options):  # noqa: F811
    df = kafka_format(spark.read, {"kafka.bootstrap.servers": cluster.bootstrap,
                                   "subscribe": topic, **options}).load()
    return sorted(r.offset for r in df.select("offset").collect())


def test_starting_timestamp_picks_the_segment(spark, segmented):  # noqa: F811
    cluster, topic, t = segmented
    state = cluster.describe()["topics"][topic]["0"]
    assert (state["start_offset"], state["end_offset"], state["segments"]) == (0, 25, 3)
    # ListOffsets v0: the first offset of the newest segment last written at
    # or before the time; nothing written after it is ever skipped.
    expected = {"t0": 0, "t1": 0, "t2": 10, "t3": 20}
    for name, first in expected.items():
        got = offsets_read(spark, cluster, topic, startingTimestamp=str(t[name]))
        assert got == list(range(first, 25)), name
    by_partition = json.dumps({topic: {"0": t["t2"]}})
    assert offsets_read(spark, cluster, topic, startingOffsetsByTimestamp=by_partition,
                        startingOffsets="latest") == list(range(10, 25))
    # Ending times: every record before the end was written at or before the time.
    assert offsets_read(spark, cluster, topic, startingTimestamp=str(t["t0"]),
                        endingTimestamp=str(t["t2"])) == list(range(0, 10))
    assert offsets_read(spark, cluster, topic, endingOffsetsByTimestamp=json.dumps(
        {topic: {"0": t["t3"]}})) == list(range(0, 20))
    # A time after every record: the default strategy fails, "latest" starts at the end.
    future = str(now_ms() + 3_600_000)
    with pytest.raises(Exception, match="no record of timed/0 was written at or after"):
        offsets_read(spark, cluster, topic, startingTimestamp=future)
    assert offsets_read(spark, cluster, topic, startingTimestamp=future,
                        startingOffsetsByTimestampStrategy="latest") == []


def test_streaming_starts_at_a_timestamp(spark, segmented, tmp_path):  # noqa: F811
    cluster, topic, t = segmented
    name = "from_t2"
    q = (kafka_format(spark.readStream, {"kafka.bootstrap.servers": cluster.bootstrap,
                                         "subscribe": topic, "startingTimestamp": str(t["t2"])})
         .load().select("offset").writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    got = sorted(r.offset for r in spark.sql(f"select offset from {name}").collect())
    assert got == list(range(10, 25))


# ----------------------------------------------------------------------
# minOffsetsPerTrigger / maxTriggerDelay


def wait_for(condition, what, timeout=90.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def memory_stream(spark, cluster, topic, name, checkpoint, **options):  # noqa: F811
    """A stream of ``topic`` into the memory table ``name``, a trigger every 200 ms."""
    return (kafka_format(spark.readStream, {"kafka.bootstrap.servers": cluster.bootstrap,
                                            "subscribe": topic, **options})
            .load().writeStream.format("memory").queryName(name)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds").start())


def count(spark, name):  # noqa: F811
    return spark.sql(f"select count(*) from {name}").first()[0]


def test_min_offsets_per_trigger_batches(spark, kafka_cluster, topic_factory,  # noqa: F811
                                         tmp_path):
    topic = topic_factory(partitions=2)
    name = "min_" + topic.replace("-", "_")
    # Report every trigger, idle ones too: that is how the test sees triggers pass.
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    q = memory_stream(spark, kafka_cluster, topic, name, tmp_path / "ckpt",
                      startingOffsets="earliest", minOffsetsPerTrigger="100",
                      maxTriggerDelay="1h")
    try:
        wait_for(lambda: q.lastProgress is not None, "the first trigger")
        produce(kafka_cluster, topic, 60, prefix="early")
        seen = len(q.recentProgress)
        wait_for(lambda: len(q.recentProgress) >= seen + 5, "five triggers")
        # 60 offsets wait, fewer than 100: every trigger held the batch back.
        assert count(spark, name) == 0
        assert q.exception() is None
        produce(kafka_cluster, topic, 60, prefix="late")
        wait_for(lambda: count(spark, name) >= 100, "a micro-batch of at least 100 offsets")
    finally:
        q.stop()
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes and all(n >= 100 for n in sizes), sizes

    # maxTriggerDelay: a smaller backlog goes once the delay has passed.
    name = "delay_" + topic.replace("-", "_")
    q = memory_stream(spark, kafka_cluster, topic, name, tmp_path / "ckpt2",
                      startingOffsets="latest", minOffsetsPerTrigger="1000", maxTriggerDelay="1s")
    try:
        wait_for(lambda: q.lastProgress is not None, "the first trigger")
        produce(kafka_cluster, topic, 30, prefix="small")
        wait_for(lambda: count(spark, name) == 30, "the delayed micro-batch")
    finally:
        q.stop()
    assert q.exception() is None


def test_on_a_current_broker_headers_and_timestamps_round_trip(spark, tansu_broker):  # noqa: F811
    """On a broker with record batches (Tansu), a read fills ``timestamp``,
    ``timestampType`` and ``headers``, and a write stores a ``headers``
    column: Spark's Kafka source and sink, unchanged but for the format."""
    import asyncio

    from kiel.consumer import SingleConsumer
    from kiel.producer import Producer
    from tests.conftest import unique

    topic = tansu_broker.create_topic(unique("spark-h"), 1)
    copy = tansu_broker.create_topic(unique("spark-h-copy"), 1)
    base = 1_700_000_000_000

    async def write() -> None:
        # One record per batch: Tansu answers ListOffsets LATEST with the
        # last batch's base offset + 1 (see "Broker quirks" in the guide),
        # which "latest" would otherwise take for the end.
        async with Producer(tansu_broker.bootstrap) as producer:
            for i in range(6):
                await producer.produce(topic, b"v%d" % i, key=b"k%d" % i, timestamp=base + i,
                                       headers=[("i", b"%d" % i)] if i % 2 else None)

    asyncio.run(write())
    options = {"kafka.bootstrap.servers": tansu_broker.bootstrap, "subscribe": topic,
               "includeHeaders": "true", "startingOffsets": "earliest"}
    df = kafka_format(spark.read, options).load()
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [(r.offset, bytes(r.value), int(r.timestamp.timestamp() * 1000), r.timestampType)
            for r in rows] == [(i, b"v%d" % i, base + i, 0) for i in range(6)]
    assert [None if r.headers is None else [(h.key, bytes(h.value)) for h in r.headers]
            for r in rows] == [[("i", b"%d" % i)] if i % 2 else None for i in range(6)]

    (kafka_format(df.select("key", "value", "headers").write,
                  {"kafka.bootstrap.servers": tansu_broker.bootstrap, "topic": copy})
     .mode("append").save())

    async def read() -> list:
        async with SingleConsumer(tansu_broker.bootstrap, max_wait_time=0.2) as consumer:
            got: list = []
            async for record in consumer.stream(copy, start=SingleConsumer.BEGINNING):
                got.append(record)
                if len(got) == 6:
                    return got
        return got

    copied = asyncio.run(asyncio.wait_for(read(), 60))
    assert [(r.key, r.value, r.headers) for r in copied] == [
        (b"k%d" % i, b"v%d" % i, (("i", b"%d" % i),) if i % 2 else ()) for i in range(6)]


# ----------------------------------------------------------------------
# TLS and SASL: Java client options, through a TLS + SCRAM front for Tansu

SCRAM_USERS = {"spark-etl": 'pa"ss;word'}


def secured(broker, certificates, password):  # noqa: F811
    """The options of a SASL_SSL job, as written for Spark's Kafka source."""
    escaped = password.replace("\\", "\\\\").replace('"', '\\"')
    return {
        "kafka.bootstrap.servers": broker.bootstrap,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                  f'required username="spark-etl" password="{escaped}";',
        "kafka.ssl.truststore.location": str(certificates["ca"]),
        "kafka.ssl.truststore.type": "PEM",
    }


def scram_front(certificates, fronted_tansu):  # noqa: F811
    front = SaslFront(ssl_context=server_context(certificates), mechanisms=("SCRAM-SHA-512",),
                      users=SCRAM_USERS)
    return front, fronted_tansu(front)


def test_sasl_ssl_write_and_read(spark, certificates, fronted_tansu):  # noqa: F811
    front, broker = scram_front(certificates, fronted_tansu)
    topic = broker.create_topic(unique("spark-sasl-ssl"), 1)
    options = secured(broker, certificates, SCRAM_USERS["spark-etl"])
    data = [(f"k{i}", f"value-{i}") for i in range(12)]
    df = spark.createDataFrame(data, "key string, value string").coalesce(1)
    # One record per batch: Tansu answers ListOffsets LATEST with the last
    # batch's base offset + 1 (see "Broker quirks" in the current-brokers guide).
    kafka_format(df.write, {**options, "topic": topic, "kafka.batch.size": "1"}) \
        .mode("append").save()
    rows = kafka_format(spark.read, {**options, "subscribe": topic}).load().collect()
    assert sorted((bytes(r.key).decode(), bytes(r.value).decode()) for r in rows) == sorted(data)
    # Every connection (planning and tasks, reads and writes) went through
    # TLS and authenticated with SCRAM before its first other request.
    assert len(front.connections) >= 3, front.connections
    for keys in front.connections:
        start = keys.index(17)
        assert keys[:start] in ([18], []) and keys[start + 1:start + 3] == [36, 36], keys
    assert front.servers and all(server.state == "done" for server in front.servers)


def test_a_wrong_password_fails_the_query(spark, certificates, fronted_tansu):  # noqa: F811
    front, broker = scram_front(certificates, fronted_tansu)
    topic = broker.create_topic(unique("spark-sasl-wrong"), 1)
    wrong = "not-the-pass\"word"
    options = secured(broker, certificates, wrong)
    with pytest.raises(Exception, match="SaslAuthenticationFailedError") as info:
        kafka_format(spark.read, {**options, "subscribe": topic}).load().collect()
    assert "bad credentials" in str(info.value)
    assert "not-the-pass" not in str(info.value)
    assert front.connections and all(36 in keys for keys in front.connections)


# ----------------------------------------------------------------------
# options checked when the source is loaded; Spark's refusals


def test_a_bad_option_fails_at_load_with_kiels_message_alone(spark, kafka_cluster,  # noqa: F811
                                                            topic_factory, tmp_path):
    topic = topic_factory(partitions=1)
    base = {"kafka.bootstrap.servers": kafka_cluster.bootstrap, "subscribe": topic}
    for options, match in [
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be in"),
        ({"kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset is not supported"),
        ({"kafka.isolation.level": "serializable"}, "kafka.isolation.level must be one of"),
    ]:
        for builder in (spark.read, spark.readStream):
            with pytest.raises(Exception, match=match) as info:
                kafka_format(builder, {**base, **options}).load()
            assert "UnboundLocalError" not in str(info.value)
    # A rule of streams only (no endingOffsets) fails the query when it
    # starts, still with kiel's message alone.
    df = kafka_format(spark.readStream, {**base, "endingOffsets": "latest"}).load()
    q = (df.writeStream.format("memory").queryName("refused_" + topic.replace("-", "_"))
         .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    with pytest.raises(Exception, match="endingOffsets is for batch reads only") as info:
        q.awaitTermination(60)
    assert "UnboundLocalError" not in str(info.value)


def test_batch_reads_ignore_stream_options_and_split_by_max_records(
        spark, kafka_cluster, topic_factory):  # noqa: F811
    topic = topic_factory(partitions=2)
    produced = produce(kafka_cluster, topic, 200)
    df = kafka_format(spark.read, {"kafka.bootstrap.servers": kafka_cluster.bootstrap,
                                   "subscribe": topic, "maxOffsetsPerTrigger": "10",
                                   "maxRecordsPerPartition": "30"}).load()
    sizes = collections.Counter(p for p, *_ in produced)
    assert df.rdd.getNumPartitions() == sum(-(-n // 30) for n in sizes.values())
    assert sorted((r.partition, r.offset) for r in df.collect()) == \
        sorted((p, o) for p, o, *_ in produced)
