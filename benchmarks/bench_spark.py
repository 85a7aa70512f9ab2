"""Batch read throughput: the ``kiel`` Spark data source on local[2] vs one SingleConsumer.

One embedded 0.8.2 cluster runs in a subprocess (``ClusterProcess``) so the
brokers never share a reader's GIL. The topic is filled once with 100-byte
values, then read from the beginning to the end:

* SingleConsumer: ``consume()`` in a loop in this process (one core);
* Spark: ``spark.read.format("kiel")`` on local[2] (two executor Python
  workers, one Arrow batch per fetch), the rows aggregated in the JVM
  (``sum(length(value))``) so every row crosses from Python to Spark (the
  better of two runs). The
  SparkSession and its Python workers are warmed up first (a small read),
  so the figure is the read, not the JVM start. With ``--min-partitions``
  the ranges are also split further.

Prints only, never fails::

    .venv/bin/python benchmarks/bench_spark.py [--messages 500000] [--partitions 4]
"""
import argparse
import asyncio
import json
import os
import sys
import time
from typing import Dict, List, Optional

from kiel.consumer import SingleConsumer
from kiel.protocol import ProducePartitionData, ProduceRequest, ProduceTopicData
from kiel.protocol.messages import encode_message_set
from kiel.testing.broker import ClusterProcess
from kiel.testing.broker.rawclient import RawClient

TOPIC = "bench-spark"
VALUE = b"v" * 100
BATCH = 1000


def fill(cluster: ClusterProcess, partitions: int, messages: int) -> None:
    """Write ``messages`` 100-byte values, spread evenly over the partitions."""
    per = messages // partitions
    message_set = encode_message_set([(None, VALUE)] * BATCH)
    brokers = cluster.describe()["brokers"]
    for partition in range(partitions):
        broker = brokers[str(cluster.leader(TOPIC, partition))]
        with RawClient(f"{broker['host']}:{broker['port']}") as client:
            written = 0
            while written < per:
                count = min(BATCH, per - written)
                data = message_set if count == BATCH else encode_message_set(
                    [(None, VALUE)] * count)
                client.request(ProduceRequest(1, 30000, [ProduceTopicData(TOPIC, [
                    ProducePartitionData(partition, data)])]))
                written += count


def bench_single_consumer(bootstrap: str, total: int) -> float:
    """Messages per second for one SingleConsumer reading everything."""

    async def run() -> float:
        async with SingleConsumer(bootstrap, max_wait_time=0.2) as consumer:
            seen = 0
            started = time.perf_counter()
            while seen < total:
                seen += len(await consumer.consume(TOPIC, start=SingleConsumer.BEGINNING))
            return seen / (time.perf_counter() - started)

    return asyncio.run(run())


def bench_spark(bootstrap: str, total: int, partitions: int,
                min_partitions: List[Optional[int]]) -> Dict[str, float]:
    """Rows per second for Spark batch reads, after a warm-up."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from kiel.spark import KielDataSource

    started = time.perf_counter()
    spark = (SparkSession.builder.master("local[2]").appName("kiel-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KielDataSource)
    print(f"SparkSession up in {time.perf_counter() - started:.1f} s")
    results: Dict[str, float] = {}
    try:
        def load(mp: Optional[int], ending: Optional[str] = None):  # type: ignore[no-untyped-def]
            reader = (spark.read.format("kiel").option("kafka.bootstrap.servers", bootstrap)
                      .option("subscribe", TOPIC))
            if mp:
                reader = reader.option("minPartitions", str(mp))
            if ending:
                reader = reader.option("endingOffsets", ending)
            return reader.load()

        # Warm-up: start the planner and executor Python workers.
        small = json.dumps({TOPIC: {str(p): 1000 for p in range(partitions)}})
        load(None, small).agg(F.count("*")).first()
        for mp in min_partitions:
            df = load(mp)
            splits = df.rdd.getNumPartitions()
            elapsed = float("inf")
            for _ in range(2):  # the better of two runs
                started = time.perf_counter()
                row = df.agg(F.count("*").alias("n"),
                             F.sum(F.length("value")).alias("bytes")).first()
                elapsed = min(elapsed, time.perf_counter() - started)
            if row.n != total:
                print(f"  WARNING: Spark read {row.n} rows, expected {total}")
            label = f"spark local[2], {splits} splits"
            results[label] = row.n / elapsed
            print(f"{label}: {row.n:,} rows in {elapsed:.2f} s")
    finally:
        spark.stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--min-partitions", type=int, default=8,
                        help="also read with this minPartitions (0: skip)")
    args = parser.parse_args()
    total = args.messages - args.messages % args.partitions

    started = time.perf_counter()
    with ClusterProcess(brokers=3, replication=1, topics={TOPIC: args.partitions}) as cluster:
        print(f"cluster process ready in {time.perf_counter() - started:.2f} s")
        started = time.perf_counter()
        fill(cluster, args.partitions, total)
        print(f"filled {total:,} messages of {len(VALUE)} bytes over {args.partitions} "
              f"partitions in {time.perf_counter() - started:.1f} s")
        results: Dict[str, float] = {}
        results["SingleConsumer (1 process)"] = bench_single_consumer(cluster.bootstrap, total)
        results.update(bench_spark(cluster.bootstrap, total, args.partitions,
                                   [None] + ([args.min_partitions] if args.min_partitions else [])))

    base = results["SingleConsumer (1 process)"]
    print()
    print(f"{'reader':<34} {'rows/s':>12} {'vs consumer':>12}")
    for name, rate in results.items():
        print(f"{name:<34} {rate:>12,.0f} {rate / base:>11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
