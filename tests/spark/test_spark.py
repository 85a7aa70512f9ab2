"""kiel.spark: the ``kiel`` PySpark data source on local[2] against the embedded
0.8.2 cluster (over TCP, with real ZooKeeper).

One SparkSession for the module (UI off, 2 shuffle partitions). pyspark is a
hard requirement here: without it this module fails to import (``pip install
'kiel[spark]'``), it is never skipped.
"""
import collections
import json
import os
import subprocess
import sys
import threading
import time

import pyarrow  # noqa: F401 -- fail loudly without the spark extra
import pyspark  # noqa: F401
import pytest

from kiel.exc import ConfigError, CorruptMessageError
from kiel.spark import HAS_READ_LIMITS, SCHEMA, DataLossError
from kiel.spark.datasource import cap_offsets
from kiel.spark.kafka import Range, read_range, split_ranges
from kiel.spark.options import SinkOptions, SourceOptions
from tests.support.spark import produce, zk_offsets

pytestmark = [pytest.mark.zookeeper]

LEGACY = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.8.2.2"]


def rows_of(df):
    return sorted(
        (r.partition, r.offset, None if r.key is None else bytes(r.key), bytes(r.value))
        for r in df.collect()
    )


def reader(spark, cluster, **options):
    r = spark.read.format("kiel").option("kafka.bootstrap.servers", cluster.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def stream(spark, cluster, **options):
    r = spark.readStream.format("kiel").option("kafka.bootstrap.servers", cluster.bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


# ----------------------------------------------------------------------
# pure parts (no Spark job)


def test_options_are_checked():
    ok = SourceOptions.parse({"brokers": "h:1", "subscribe": "a,b"}, streaming=True)
    assert ok.topics == ["a", "b"] and ok.starting == "latest" and ok.fail_on_data_loss
    assert SourceOptions.parse({"brokers": "h", "assign": '{"t": [1, 0]}'},
                               streaming=False).assign == {"t": [0, 1]}
    bad = [
        ({"subscribe": "t"}, "bootstrap"),
        ({"brokers": "h"}, "exactly one"),
        ({"brokers": "h", "subscribe": "t", "assign": '{"t":[0]}'}, "exactly one"),
        ({"brokers": "h", "assign": '{"t": "0"}'}, "assign"),
        ({"brokers": "h", "subscribePattern": "("}, "regex"),
        ({"brokers": "h", "subscribe": "t", "startingOffsets": "{bad"}, "JSON"),
        ({"brokers": "h", "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "offset"),
        ({"brokers": "h", "subscribe": "t", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({"brokers": "h", "subscribe": "t", "failOnDataLoss": "yes"}, "failOnDataLoss"),
        ({"brokers": "h", "subscribe": "t", "minPartitions": "x"}, "minPartitions"),
        ({"brokers": "h", "subscribe": "t", "endingOffsets": "latest"}, "batch reads only"),
        ({"brokers": "h", "subscribe": "t", "fetchMaxBytes": "10", "maxFetchSize": "5"},
         "maxFetchSize"),
        ({"brokers": "h", "subscribe": "t", "subscibe": "x"}, "unknown"),
    ]
    for options, match in bad:
        with pytest.raises(ConfigError, match=match):
            SourceOptions.parse(options, streaming=True)
    with pytest.raises(ConfigError, match="streaming"):
        SourceOptions.parse({"brokers": "h", "subscribe": "t", "startingOffsets": "latest"},
                            streaming=False)
    with pytest.raises(ConfigError, match="earliest"):
        SourceOptions.parse({"brokers": "h", "subscribe": "t", "endingOffsets": "earliest"},
                            streaming=False)
    assert SinkOptions.parse({"brokers": "h", "acks": "all"}).acks == -1
    with pytest.raises(ConfigError, match="acks"):
        SinkOptions.parse({"brokers": "h", "acks": "2"})
    with pytest.raises(ConfigError, match="compression"):
        SinkOptions.parse({"brokers": "h", "compression": "zstd"})


def test_split_ranges_and_caps():
    ranges = [Range("t", 0, 0, 100), Range("t", 1, 10, 40), Range("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    parts = split_ranges(ranges, 8)
    assert len(parts) >= 8
    for tp_range in ranges[:2]:
        mine = [r for r in parts if r.partition == tp_range.partition]
        assert mine[0].start == tp_range.start and mine[-1].end == tp_range.end
        assert all(a.end == b.start for a, b in zip(mine, mine[1:]))
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 7}
    end = {("t", 0): 90, ("t", 1): 10, ("t", 2): 7}
    capped = cap_offsets(start, end, 50)
    assert sum(capped[tp] - start[tp] for tp in end) == 50
    assert all(start[tp] <= capped[tp] <= end[tp] for tp in end)
    assert cap_offsets(start, end, 1000) == end


def test_max_records_per_partition_splits_first():
    ranges = [Range("t", 0, 0, 100), Range("t", 1, 10, 40), Range("t", 2, 5, 5)]
    # Spark's calculator: ceil(size / max) contiguous parts, none above max.
    parts = split_ranges(ranges, None, 30)
    assert [(r.partition, r.start, r.end) for r in parts] == [
        (0, 0, 25), (0, 25, 50), (0, 50, 75), (0, 75, 100), (1, 10, 40)]
    # Then minPartitions, when there are still fewer ranges than it asks.
    assert len(split_ranges(ranges, 5, 30)) == 5
    more = split_ranges(ranges, 10, 50)
    assert len(more) >= 10 and all(r.size <= 50 for r in more)
    assert sum(r.size for r in more) == 130


# ----------------------------------------------------------------------
# batch reads


def test_batch_read_returns_exactly_the_produced_records(spark, kafka_cluster, topic_factory):
    topic = topic_factory(partitions=4)
    produced = produce(kafka_cluster, topic, 600)
    assert {p for p, *_ in produced} == {0, 1, 2, 3}
    df = reader(spark, kafka_cluster, subscribe=topic)
    assert df.schema == SCHEMA
    assert df.rdd.getNumPartitions() == 4
    rows = df.collect()
    assert len(rows) == 600
    assert collections.Counter(
        (r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows
    ) == collections.Counter(produced)
    assert {(r.topic, r.timestamp, r.timestampType) for r in rows} == {(topic, None, -1)}

    # minPartitions splits the ranges; the rows are the same.
    split = reader(spark, kafka_cluster, subscribe=topic, minPartitions="11")
    assert split.rdd.getNumPartitions() >= 11
    assert rows_of(split) == sorted(produced)

    # Explicit per-partition offsets (-2 earliest, -1 latest), and assign.
    ranged = reader(
        spark, kafka_cluster, assign=json.dumps({topic: [0, 2]}),
        startingOffsets=json.dumps({topic: {"0": 3, "2": -2}}),
        endingOffsets=json.dumps({topic: {"0": 10, "2": -1}}),
    )
    expected = sorted(r for r in produced
                      if (r[0] == 0 and 3 <= r[1] < 10) or r[0] == 2)
    assert rows_of(ranged) == expected

    # subscribePattern
    pattern = reader(spark, kafka_cluster, subscribePattern=topic[:-3] + ".*")
    assert pattern.count() == 600


def test_bad_options_fail_at_planning(spark, kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    with pytest.raises(Exception, match="exactly one of the options subscribe"):
        reader(spark, kafka_cluster).collect()
    with pytest.raises(Exception, match="ConfigError"):
        reader(spark, kafka_cluster, subscribe=topic, minPartitions="-1").collect()
    with pytest.raises(Exception, match="names partitions that are not subscribed"):
        reader(spark, kafka_cluster, subscribe=topic,
               endingOffsets=json.dumps({topic: {"1": 0}})).collect()


# ----------------------------------------------------------------------
# data loss


def test_fail_on_data_loss(spark, kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    produced = produce(kafka_cluster, topic, 100)
    end0 = kafka_cluster.offsets(topic, 0)[1]
    kafka_cluster.delete_records(topic, 0, end0)  # partition 0 is emptied
    assert kafka_cluster.offsets(topic, 0)[0] == end0
    produced += produce(kafka_cluster, topic, 40, prefix="later")

    # Batch: starting offsets before the log start.
    start = json.dumps({topic: {"0": 0, "1": 0}})
    with pytest.raises(Exception, match="DataLossError"):
        reader(spark, kafka_cluster, subscribe=topic, startingOffsets=start).collect()
    kept = rows_of(reader(spark, kafka_cluster, subscribe=topic, startingOffsets=start,
                          failOnDataLoss="false"))
    assert kept == sorted(r for r in produced if r[0] == 1 or r[1] >= end0)

    # A task whose range is deleted while it is planned (read_range directly).
    opts = SourceOptions.parse({"brokers": kafka_cluster.bootstrap, "subscribe": topic},
                               streaming=False)
    with pytest.raises(DataLossError, match="were deleted"):
        list(read_range(opts, Range(topic, 0, 0, end0 + 5)))
    opts.fail_on_data_loss = False
    got = [o for batch in read_range(opts, Range(topic, 0, 0, end0 + 5))
           for o in batch.column("offset").to_pylist()]
    assert got == list(range(end0, end0 + 5))


def test_range_past_the_log_end_is_data_loss(kafka_cluster, topic_factory):
    # A task whose range promises offsets the broker does not hold (its log
    # was truncated after planning, e.g. by an unclean leader change): after
    # a few empty rounds at the highwater it fails, or, with
    # failOnDataLoss=false, returns what the log holds.
    topic = topic_factory(partitions=1)
    produce(kafka_cluster, topic, 10)
    end = kafka_cluster.offsets(topic, 0)[1]
    opts = SourceOptions.parse({"brokers": kafka_cluster.bootstrap, "subscribe": topic,
                                "fetchMaxWaitMs": "50"}, streaming=False)
    with pytest.raises(DataLossError, match=rf"\[{end}, {end + 5}\).*the partition ends at {end}"):
        list(read_range(opts, Range(topic, 0, 0, end + 5)))
    opts.fail_on_data_loss = False
    got = [o for batch in read_range(opts, Range(topic, 0, 0, end + 5))
           for o in batch.column("offset").to_pylist()]
    assert got == list(range(end))


def test_an_offset_corrupted_past_the_high_watermark_fails_the_task(kafka_cluster,
                                                                     topic_factory):
    # No CRC covers a message's offset: the broker's answer raises the last
    # message's offset (9) by 1000. Dropped as past the range's end, it would
    # end the range there, one row short and without a word.
    topic = topic_factory(partitions=1)
    produce(kafka_cluster, topic, 10)
    end = kafka_cluster.offsets(topic, 0)[1]
    opts = SourceOptions.parse({"brokers": kafka_cluster.bootstrap, "subscribe": topic},
                               streaming=False)
    kafka_cluster.corrupt_offsets(1000, count=1)
    with pytest.raises(CorruptMessageError, match=f"offset {end + 999}, at or past the high "
                                                  f"watermark {end}"):
        list(read_range(opts, Range(topic, 0, 0, end)))
    got = [o for batch in read_range(opts, Range(topic, 0, 0, end))
           for o in batch.column("offset").to_pylist()]
    assert got == list(range(end))


@pytest.mark.slow
def test_streaming_fail_on_data_loss(spark, kafka_cluster, topic_factory, tmp_path):
    topic = topic_factory(partitions=2)
    produce(kafka_cluster, topic, 60)
    checkpoint = str(tmp_path / "ckpt")
    out = str(tmp_path / "out")

    def run(fail):
        q = (stream(spark, kafka_cluster, subscribe=topic, startingOffsets="earliest",
                    failOnDataLoss=fail)
             .select("partition", "offset").writeStream.format("parquet")
             .option("path", out).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        return q

    run("true")
    assert spark.read.parquet(out).count() == 60
    produced = produce(kafka_cluster, topic, 30, prefix="b")
    kafka_cluster.delete_records(topic, 0, kafka_cluster.offsets(topic, 0)[1])
    with pytest.raises(Exception, match="DataLossError"):
        run("true")
    run("false")
    offsets = {(r.partition, r.offset) for r in spark.read.parquet(out).collect()}
    assert len(offsets) == 60 + sum(1 for p, *_ in produced if p == 1)


# ----------------------------------------------------------------------
# streaming


@pytest.mark.slow
def test_streaming_restart_exactly_once_and_group_commits(
        spark, kafka_cluster, topic_factory, tmp_path):
    topic = topic_factory(partitions=4)
    group = f"spark-{topic}"
    checkpoint = str(tmp_path / "ckpt")
    out = str(tmp_path / "out")
    produced = produce(kafka_cluster, topic, 200, prefix="a")

    def start(trigger):
        df = stream(spark, kafka_cluster, subscribe=topic, startingOffsets="earliest",
                    maxOffsetsPerTrigger="150", groupId=group)
        writer = (df.select("partition", "offset", "key", "value").writeStream
                  .format("parquet").option("path", out)
                  .option("checkpointLocation", checkpoint))
        return writer.trigger(**trigger).start()

    # Produce while the first run streams; stop it in the middle.
    more = []
    stop = threading.Event()

    def keep_producing():
        i = 0
        while not stop.is_set() and i < 10:
            more.extend(produce(kafka_cluster, topic, 40, prefix=f"live{i}"))
            i += 1
            time.sleep(0.3)

    q = start({"processingTime": "500 milliseconds"})
    producer = threading.Thread(target=keep_producing)
    producer.start()
    deadline = time.time() + 90
    while time.time() < deadline and (q.lastProgress is None or q.lastProgress["batchId"] < 2):
        time.sleep(0.2)
    q.stop()
    assert q.exception() is None
    first_run = spark.read.parquet(out).count()
    producer.join(60)
    assert 0 < first_run < len(produced) + len(more)  # stopped in the middle
    more.extend(produce(kafka_cluster, topic, 50, prefix="after"))

    q = start({"availableNow": True})
    assert q.awaitTermination(120)
    assert q.exception() is None
    everything = produced + more
    rows = spark.read.parquet(out).collect()
    seen = collections.Counter((r.partition, r.offset, bytes(r.key), bytes(r.value))
                               for r in rows)
    assert seen == collections.Counter(everything)  # every record exactly once

    # The group's offsets are in ZooKeeper (a commit lags Spark's by at most
    # one micro-batch); a final availableNow run with no data commits the end.
    q = start({"availableNow": True})
    assert q.awaitTermination(120)
    ends = {p: kafka_cluster.offsets(topic, p)[1] for p in range(4)}
    committed = zk_offsets(kafka_cluster, group, topic, range(4))
    assert set(committed) == set(range(4))
    assert all(0 < committed[p] <= ends[p] for p in range(4))
    assert sum(committed.values()) >= sum(ends.values()) - 150


def test_max_offsets_per_trigger_bounds_micro_batches(spark, kafka_cluster, topic_factory,
                                                      tmp_path):
    assert HAS_READ_LIMITS, "pyspark >= 4.2 is needed for maxOffsetsPerTrigger"
    topic = topic_factory(partitions=4)
    produce(kafka_cluster, topic, 330)
    name = "capped_" + topic.replace("-", "_")
    q = (stream(spark, kafka_cluster, subscribe=topic, startingOffsets="earliest",
                maxOffsetsPerTrigger="100")
         .writeStream.format("memory").queryName(name)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [100, 100, 100, 30]
    assert spark.sql(f"select count(distinct partition, offset) from {name}").first()[0] == 330


# ----------------------------------------------------------------------
# writing


def test_writer_round_trip_and_kcat(spark, kafka_cluster, topic_factory, kcat):
    topic = topic_factory(partitions=3)
    data = [(f"k{i % 5}", f"value-{i}") for i in range(300)]
    df = spark.createDataFrame(data, "key string, value string").repartition(3)
    (df.write.format("kiel").option("kafka.bootstrap.servers", kafka_cluster.bootstrap)
     .option("topic", topic).option("acks", "all").mode("append").save())
    back = reader(spark, kafka_cluster, subscribe=topic).collect()
    assert collections.Counter((bytes(r.key).decode(), bytes(r.value).decode())
                               for r in back) == collections.Counter(data)
    # The Java partitioner's choice: one key, one partition.
    assert len({(bytes(r.key), r.partition) for r in back}) == 5

    result = subprocess.run(
        [kcat, "-b", kafka_cluster.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
         "-J", *LEGACY], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    consumed = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert collections.Counter((m["key"], m["payload"]) for m in consumed) == \
        collections.Counter(data)

    # A topic column and a partition column; binary values.
    other = topic_factory(partitions=2)
    rows = [(other, 1, bytes([i % 256]) * 3) for i in range(50)]
    (spark.createDataFrame(rows, "topic string, partition int, value binary")
     .write.format("kiel").option("brokers", kafka_cluster.bootstrap).mode("append").save())
    back = reader(spark, kafka_cluster, subscribe=other).collect()
    assert {r.partition for r in back} == {1}
    assert sorted(bytes(r.value) for r in back) == sorted(v for *_, v in rows)

    with pytest.raises(Exception, match="topic"):
        (spark.createDataFrame([("x",)], "value string").write.format("kiel")
         .option("brokers", kafka_cluster.bootstrap).mode("append").save())


def test_stream_writer_copies_a_topic(spark, kafka_cluster, topic_factory, tmp_path):
    source = topic_factory(partitions=2)
    sink = topic_factory(partitions=2)
    produced = produce(kafka_cluster, source, 120)
    q = (stream(spark, kafka_cluster, subscribe=source, startingOffsets="earliest")
         .selectExpr("key", "upper(cast(value as string)) as value")
         .writeStream.format("kiel").option("kafka.bootstrap.servers", kafka_cluster.bootstrap)
         .option("topic", sink).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    assert q.exception() is None
    back = reader(spark, kafka_cluster, subscribe=sink).collect()
    assert collections.Counter((bytes(r.key), bytes(r.value)) for r in back) == \
        collections.Counter((k, v.upper()) for _p, _o, k, v in produced)


@pytest.mark.slow
def test_pageviews_example(spark, kafka_cluster, tmp_path):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    try:
        import spark_pageviews as example
    finally:
        sys.path.pop(0)
    kafka_cluster.create_topic(example.TOPIC, 4)
    kafka_cluster.create_topic(example.COUNTS_TOPIC, 2)
    expected = example.produce_views(kafka_cluster.bootstrap, 5000)
    example.run_job(spark, kafka_cluster.bootstrap, str(tmp_path))
    from_parquet, from_topic = example.final_counts(spark, kafka_cluster.bootstrap, str(tmp_path))
    assert from_parquet == expected
    assert from_topic == expected
