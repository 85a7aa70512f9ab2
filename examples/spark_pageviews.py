"""Page views per user per 5-minute window: a Spark streaming job over Kafka 0.8 with kiel.

Runs as is on local[2] (no Kafka, no ZooKeeper, no Spark cluster needed)::

    pip install 'kiel[spark]'
    python examples/spark_pageviews.py

It starts a 3-broker embedded cluster from ``kiel.testing``, produces JSON
page views (``{"user": ..., "url": ..., "ts": epoch seconds}``) spread over
20 minutes of event time, then runs a streaming query that

- reads the ``pageviews`` topic with the ``kiel`` data source,
- counts views per user per 5-minute window (event time from the JSON: a
  0.8 message has no timestamp),
- writes every micro-batch's updated counts back to Kafka (topic
  ``pageview-counts``, key = user, value = JSON) and appends them to Parquet.

``--brokers`` points it at a real 0.8 cluster instead (the topic must exist
and hold page views). The query uses ``trigger(availableNow=True)`` so the
example ends; drop it for a job that runs for ever. At the end the example
reads both outputs back and checks them against what it produced.
"""
import argparse
import asyncio
import collections
import json
import os
import random
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from kiel.producer import Producer

TOPIC = "pageviews"
COUNTS_TOPIC = "pageview-counts"
WINDOW = "5 minutes"
START = 1_700_000_000  # event time of the first view (a multiple of 300 s)
USERS = [f"user{i}" for i in range(12)]


def produce_views(bootstrap: str, count: int, seed: int = 7) -> Dict[Tuple[int, str], int]:
    """Produce ``count`` page views; return the expected views per (window start, user)."""
    rng = random.Random(seed)
    views: List[Dict[str, Any]] = []
    for _ in range(count):
        ts = START + rng.randrange(20 * 60)
        views.append({"user": rng.choice(USERS), "url": f"/page/{rng.randrange(50)}", "ts": ts})

    async def run() -> None:
        async with Producer(bootstrap, linger=0.005) as producer:
            await asyncio.gather(*(
                producer.produce(TOPIC, json.dumps(v).encode(), key=v["user"].encode())
                for v in views
            ))

    asyncio.run(run())
    expected: Dict[Tuple[int, str], int] = collections.Counter(
        (v["ts"] - v["ts"] % 300, v["user"]) for v in views
    )
    return dict(expected)


def run_job(spark: Any, bootstrap: str, out_dir: str, group_id: Optional[str] = "pageviews-job",
            ) -> None:
    """Run the streaming query until the data available now is processed."""
    from pyspark.sql import functions as F

    from kiel.spark import KielDataSource

    spark.dataSource.register(KielDataSource)
    reader = (spark.readStream.format("kiel")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", TOPIC)
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "2000"))
    if group_id:
        reader = reader.option("groupId", group_id)  # lag monitors see the job's progress
    views = (reader.load()
             .select(F.from_json(F.col("value").cast("string"),
                                 "user string, url string, ts long").alias("v"))
             .select(F.col("v.user").alias("user"),
                     F.col("v.ts").cast("timestamp").alias("event_time")))
    # Views up to an hour late still count; older windows' state is dropped.
    counts = (views.withWatermark("event_time", "1 hour")
              .groupBy(F.window("event_time", WINDOW), "user")
              .count())

    parquet_path = os.path.join(out_dir, "parquet")

    def write_both(batch: Any, batch_id: int) -> None:
        # Update mode: each micro-batch carries the windows it changed, with
        # their new totals. Kafka gets a changelog (latest value per key
        # wins); Parquet keeps every version, with the batch id.
        rows = batch.select(
            F.col("window.start").alias("window_start"), "user", "count",
            F.lit(batch_id).alias("batch_id"),
        )
        rows.write.mode("append").parquet(parquet_path)
        (rows.select(
            F.concat_ws("@", "user", F.col("window_start").cast("long").cast("string"))
            .alias("key"),
            F.to_json(F.struct("window_start", "user", "count")).alias("value"))
         .write.format("kiel")
         .option("kafka.bootstrap.servers", bootstrap)
         .option("topic", COUNTS_TOPIC)
         .option("acks", "all")
         .mode("append").save())

    query = (counts.writeStream.outputMode("update")
             .foreachBatch(write_both)
             .option("checkpointLocation", os.path.join(out_dir, "checkpoint"))
             .trigger(availableNow=True)
             .start())
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")


def final_counts(spark: Any, bootstrap: str, out_dir: str) -> Tuple[Dict[Any, int], Dict[Any, int]]:
    """The latest count per (window start, user) in Parquet and in the counts topic."""
    from pyspark.sql import functions as F

    parquet = (spark.read.parquet(os.path.join(out_dir, "parquet"))
               .groupBy("window_start", "user").agg(F.max("count").alias("count")))
    from_parquet = {(int(r.window_start.timestamp()), r.user): r["count"]
                    for r in parquet.collect()}
    topic = (spark.read.format("kiel").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", COUNTS_TOPIC).load()
             .select(F.col("value").cast("string").alias("json")).collect())
    from_topic: Dict[Any, int] = {}
    for row in topic:
        record = json.loads(row.json)
        window = int(_epoch(record["window_start"]))
        key = (window, record["user"])
        from_topic[key] = max(from_topic.get(key, 0), record["count"])
    return from_parquet, from_topic


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", help="an existing 0.8 cluster (default: an embedded one)")
    parser.add_argument("--messages", type=int, default=5000, help="page views to produce")
    parser.add_argument("--out", help="output directory (default: a temporary one)")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    cluster = None
    if args.brokers:
        bootstrap = args.brokers
        expected = None
    else:
        from kiel.testing.broker import EmbeddedCluster

        cluster = EmbeddedCluster(brokers=3, partitions=4)
        cluster.start()
        bootstrap = cluster.bootstrap
        cluster.create_topic(TOPIC, 4)
        cluster.create_topic(COUNTS_TOPIC, 2)
        expected = produce_views(bootstrap, args.messages)
        print(f"produced {args.messages} page views to {TOPIC} at {bootstrap}")
    spark = (SparkSession.builder.master("local[2]").appName("kiel-pageviews")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out_dir = args.out or tmp
            run_job(spark, bootstrap, out_dir)
            from_parquet, from_topic = final_counts(spark, bootstrap, out_dir)
            top = sorted(from_parquet.items(), key=lambda kv: -kv[1])[:5]
            print("busiest (window, user):")
            for (window, user), count in top:
                print(f"  {window} {user}: {count} views")
            if expected is not None:
                ok = from_parquet == expected and from_topic == expected
                print(f"{len(expected)} window counts; Parquet and {COUNTS_TOPIC} "
                      f"{'match' if ok else 'DO NOT match'} the produced views")
                return 0 if ok else 1
            return 0
    finally:
        spark.stop()
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
