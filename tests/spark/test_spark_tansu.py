"""kiel.spark on a current broker (Tansu): reads end where the broker's Fetch
says the log ends, never short.

Tansu answers ListOffsets LATEST with the last record batch's base offset
plus one, while its Fetch high watermark is the true end of the log: with
multi-record batches a read that ended at the ListOffsets answer lost the
records of the last batch (issue 25: 20,004 rows of 21,000). These tests
write many records per batch (the producer's linger), then read through
Spark on local[2].

The SparkSession fixture is tests/spark/conftest.py's. pyspark and the Tansu wheel are
hard requirements: without them this module fails, it is never skipped.
"""
import asyncio
import json
import time

import pytest

from kiel.client import Client
from kiel.consumer.offsets import LATEST, list_offsets
from kiel.producer import Producer
from kiel.spark import kafka
from kiel.spark.options import SourceOptions
from kiel.structs import TopicPartition
from tests.conftest import unique


def write(bootstrap, topic, values, partition=None):
    """Produce ``values`` in multi-record batches; return their (partition, offset)."""

    async def run():
        async with Producer(bootstrap, linger=0.01) as producer:
            metas = await asyncio.gather(*(producer.produce(topic, v, partition=partition)
                                           for v in values))
        return [(m.partition, m.offset) for m in metas]

    return asyncio.run(run())


def listed_latest(bootstrap, topic, partitions):
    async def run():
        async with Client(bootstrap) as client:
            asked = {TopicPartition(topic, p): LATEST for p in range(partitions)}
            found = await list_offsets(client.cluster, asked)
        return {tp.partition: o for tp, o in found.items()}

    return asyncio.run(run())


def load(spark, bootstrap, topic, **options):  # noqa: F811
    reader = (spark.read.format("kiel").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_returns_every_row(spark, tansu_broker):  # noqa: F811
    topic = tansu_broker.create_topic(unique("spark-all"), 3)
    written = write(tansu_broker.bootstrap, topic, [b"r%d" % i for i in range(6000)])
    ends = {p: 1 + max(o for q, o in written if q == p) for p in range(3)}
    # The quirk this guards against is there: ListOffsets answers short.
    assert any(listed < ends[p] for p, listed in
               listed_latest(tansu_broker.bootstrap, topic, 3).items())
    rows = load(spark, tansu_broker.bootstrap, topic).select("partition", "offset",
                                                             "value").collect()
    assert len(rows) == 6000
    assert sorted((r.partition, r.offset) for r in rows) == sorted(written)
    # The planner's edges are the served ones.
    opts = SourceOptions.parse({"brokers": tansu_broker.bootstrap, "subscribe": topic},
                               streaming=False)
    _tps, _earliest, latest = kafka.discover_with_edges(opts)
    assert latest == {(topic, p): ends[p] for p in range(3)}


def test_starting_timestamp_returns_every_later_row(spark, tansu_broker):  # noqa: F811
    topic = tansu_broker.create_topic(unique("spark-time"), 1)
    write(tansu_broker.bootstrap, topic, [b"early-%d" % i for i in range(3000)], partition=0)
    time.sleep(0.3)
    mark = int(time.time() * 1000)
    time.sleep(0.3)
    later = write(tansu_broker.bootstrap, topic, [b"late-%d" % i for i in range(1000)],
                  partition=0)
    df = load(spark, tansu_broker.bootstrap, topic, startingTimestamp=str(mark))
    rows = df.select("offset", "value").collect()
    assert sorted(r.offset for r in rows) == sorted(o for _p, o in later)
    assert all(bytes(r.value).startswith(b"late-") for r in rows)

    # A time after every record: no row with strategy latest, an error by default
    # (Tansu answers such a time with the short ListOffsets end).
    future = str(int(time.time() * 1000) + 3_600_000)
    assert load(spark, tansu_broker.bootstrap, topic, startingTimestamp=future,
                startingOffsetsByTimestampStrategy="latest").count() == 0
    with pytest.raises(Exception, match="no record of .* was written at or after"):
        load(spark, tansu_broker.bootstrap, topic, startingTimestamp=future).count()
    # An ending time after every record ends at the served end.
    assert load(spark, tansu_broker.bootstrap, topic,
                endingTimestamp=future).count() == 4000


def test_stream_reads_every_row(spark, tansu_broker, tmp_path):  # noqa: F811
    topic = tansu_broker.create_topic(unique("spark-stream"), 2)
    written = write(tansu_broker.bootstrap, topic, [b"s%d" % i for i in range(3000)])
    name = "tansu_" + topic.replace("-", "_")
    q = (spark.readStream.format("kiel").option("kafka.bootstrap.servers", tansu_broker.bootstrap)
         .option("subscribe", topic).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "1000").load()
         .writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    got = spark.sql(f"select partition, offset from {name}").collect()
    assert sorted((r.partition, r.offset) for r in got) == sorted(written)
    assert json.loads(q.lastProgress["sources"][0]["endOffset"]) == {
        topic: {str(p): 1 + max(o for q_, o in written if q_ == p) for p in range(2)}}
