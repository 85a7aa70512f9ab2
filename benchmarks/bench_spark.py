"""Batch read throughput of the ``kiel`` Spark data source against one SingleConsumer.

The broker runs in a process of its own, so it never shares a reader's GIL:
an embedded 0.8.2 cluster (``ClusterProcess``: magic-0 message sets, read
with Fetch v0) or, with ``--broker tansu``, Tansu (record batches of magic 2,
read with Fetch v4; filled by kiel's Producer, about 16 KiB per batch). One
partition is filled once with ``--messages`` values of ``--value-size`` bytes
(``--varied``: sizes vary from half to one and a half times that, so no two
neighbours are alike), then read from beginning to end by:

* one SingleConsumer: ``consume()`` in a loop in this process (one core);
* Spark on ``local[1]`` and ``local[2]``, the range cut into 1, 2, 4 and 8
  splits (``minPartitions``), the rows aggregated in the JVM
  (``count(*)``, ``sum(length(value))``) so every row crosses from Python to
  Spark; the best of three runs, after a warm-up read (the JVM and the
  Python workers are up before anything is timed).

and a Python data source handing Spark the same number of rows from Arrow
batches made once in memory, on local[1] with one split and on local[2]
with two: the most any Python source gets through pyspark, its ceiling.
The table gives each rate against the consumer's and against the local[1]
ceiling (times the cores). Then the fixed cost of a task: a read of ``--tasks``
one-record splits against an empty Python data source with as many
partitions (pyspark's own cost of a Python data source task), both on ``local[1]``, alternated, the
best of five each; the difference, per task, is kiel's. The load average is
printed before and after: on a busy machine the figures move. So on Linux
the CPU seconds of each best run are printed too, by part (the reader's
process, the JVM, pyspark's Python workers, the broker), with the most rows
per second that CPU allows on two cores (the consumer: on its one thread):
that moves far less with other load, and shows what two cores can give at
all.

Prints only, never fails::

    .venv/bin/python benchmarks/bench_spark.py [--broker tansu] [--messages N] [--value-size 100]
"""
import argparse
import asyncio
import contextlib
import os
import random
import sys
import time
from collections.abc import Iterator
from functools import partial
from typing import Any, Optional

from kiel.consumer import SingleConsumer
from kiel.producer import Producer
from kiel.protocol import ProducePartitionData, ProduceRequest, ProduceTopicData
from kiel.protocol.messages import encode_message_set
from kiel.testing.broker import ClusterProcess
from kiel.testing.broker.rawclient import RawClient

TOPIC = "bench-spark"
BATCH = 1000
SPLITS = (1, 2, 4, 8)


def values(count: int, size: int, varied: bool, seed: int = 25) -> list[bytes]:
    """``count`` values of ``size`` bytes, or of sizes in [size/2, 3*size/2]."""
    if not varied:
        return [b"v" * size] * count
    rng = random.Random(seed)
    return [b"v" * rng.randint(size // 2, size + size // 2) for _ in range(count)]


def fill(cluster: ClusterProcess, data: list[bytes]) -> None:
    """Write ``data`` to partition 0 of the embedded cluster, ``BATCH`` messages per request."""
    broker = cluster.describe()["brokers"][str(cluster.leader(TOPIC, 0))]
    with RawClient(f"{broker['host']}:{broker['port']}") as client:
        for i in range(0, len(data), BATCH):
            message_set = encode_message_set([(None, v) for v in data[i:i + BATCH]])
            client.request(ProduceRequest(1, 30000, [ProduceTopicData(TOPIC, [
                ProducePartitionData(0, message_set)])]))


def fill_tansu(bootstrap: str, data: list[bytes]) -> None:
    """Write ``data`` to partition 0 with kiel's Producer (record batches of its default size).

    Raises:
        RuntimeError: the producer reported records it could not write.
    """

    async def run() -> None:
        async with Producer(bootstrap) as producer:
            for i in range(0, len(data), BATCH):
                producer.produce_many(TOPIC, data[i:i + BATCH], partition=0)
                await producer.flush()
            result = await producer.flush()
            if result.failed:
                raise RuntimeError(f"{result.failed} records not written: {result.failures[:3]}")

    asyncio.run(run())


@contextlib.contextmanager
def broker(kind: str) -> Iterator[tuple[str, Any]]:
    """A running broker of ``kind`` with the topic, as (bootstrap, filler)."""
    if kind == "tansu":
        from kiel.testing.tansu import TansuBroker

        with TansuBroker() as tansu:
            tansu.create_topic(TOPIC, 1)
            yield tansu.bootstrap, partial(fill_tansu, tansu.bootstrap)
        return
    with ClusterProcess(brokers=1, replication=1, topics={TOPIC: 1}) as cluster:
        yield cluster.bootstrap, partial(fill, cluster)


def bench_single_consumer(bootstrap: str, total: int, label: str) -> float:
    """Rows per second for one SingleConsumer reading everything (the best of three)."""

    async def run() -> int:
        async with SingleConsumer(bootstrap, max_wait_time=0.2) as consumer:
            seen = 0
            while seen < total:
                seen += len(await consumer.consume(TOPIC, start=SingleConsumer.BEGINNING))
            return seen

    elapsed, seen = timed(lambda: asyncio.run(run()), label=label)
    return seen / elapsed


def session(master: str) -> Any:
    """A fresh SparkSession on ``master`` with the kiel source and an empty one registered."""
    from pyspark.sql import SparkSession

    from kiel.spark import KielDataSource

    spark = (SparkSession.builder.master(master).appName("kiel-bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KielDataSource)
    spark.dataSource.register(_memory_source())
    return spark


def _memory_source() -> Any:
    """A Python data source of Spark's Kafka schema whose partitions yield
    nothing (pyspark's own cost per task), or ``rows`` rows each of Arrow
    batches made once in memory (the most any Python source can hand Spark)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from kiel.spark import SCHEMA
    from kiel.spark.columns import COALESCE_ROWS, to_arrow
    from kiel.structs import Record

    class MemoryReader(DataSourceReader):
        def __init__(self, count: int, rows: int, size: int) -> None:
            self.count, self.rows, self.size = count, rows, size

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(self.count)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            if not self.rows:
                return
            # Batches of the size kiel hands Spark (the size pyspark takes best).
            batch = to_arrow([Record(TOPIC, 0, i, None, b"v" * self.size, None)
                              for i in range(min(COALESCE_ROWS, self.rows))])
            left = self.rows
            while left > 0:
                yield batch if left >= batch.num_rows else batch.slice(0, left)
                left -= batch.num_rows

    class MemorySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_memory"

        def schema(self) -> Any:
            return SCHEMA

        def reader(self, schema: Any) -> MemoryReader:
            return MemoryReader(int(self.options["partitions"]), int(self.options.get("rows", 0)),
                                int(self.options.get("size", 100)))

    return MemorySource


def load(spark: Any, bootstrap: str, splits: int, ending: Optional[int] = None) -> Any:
    reader = (spark.read.format("kiel").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", TOPIC))
    if splits > 1:
        reader = reader.option("minPartitions", str(splits))
    if ending is not None:
        reader = reader.option("endingOffsets", f'{{"{TOPIC}": {{"0": {ending}}}}}')
    return reader.load()


#: CPU seconds of the best run of each timed reader, by part (see cpu_seconds).
CPU: dict[str, dict[str, float]] = {}
CPU_PARTS = ("reader", "jvm", "pyspark workers", "broker")


def cpu_seconds() -> Optional[dict[str, float]]:
    """CPU seconds (user + system) used so far by this process and everything
    it started, by part: this process (the reader: the consumer, Spark's
    driver), the JVM, pyspark's Python workers (the JVM's children) and the
    broker (any other child). Linux only (``/proc``); ``None`` elsewhere.

    Strategy: on a machine others share, wall time moves with their load;
    the CPU a read costs moves much less, and it bounds what any number of
    cores could do: on two cores a read cannot take less than half of it.
    """
    if not os.path.isdir("/proc/self"):
        return None
    tick = os.sysconf("SC_CLK_TCK")
    table: dict[int, tuple[int, float, bool]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                program = f.read().split(b"\0")[0]
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick,
                            program.endswith(b"java"))
    me = os.getpid()
    parts = dict.fromkeys(CPU_PARTS, 0.0)
    for pid, (_parent, used, _java) in table.items():
        chain = [pid]
        while chain[-1] in table and chain[-1] != me and table[chain[-1]][0] > 1:
            chain.append(table[chain[-1]][0])
        if chain[-1] != me:
            continue
        javas = [p for p in chain if table[p][2]]
        part = ("reader" if pid == me else "jvm" if javas and javas[0] == pid
                else "pyspark workers" if javas else "broker")
        parts[part] += used
    return parts


def timed(action: Any, runs: int = 3, label: Optional[str] = None) -> tuple[float, Any]:
    """The best time of ``runs`` calls of ``action`` and its last result (with
    ``label``: the CPU its best run used goes to ``CPU[label]``)."""
    best, result = float("inf"), None
    for _ in range(runs):
        before = cpu_seconds()
        started = time.perf_counter()
        result = action()
        elapsed = time.perf_counter() - started
        after = cpu_seconds()
        if elapsed < best:
            best = elapsed
            if label is not None and before is not None and after is not None:
                CPU[label] = {part: after[part] - before[part] for part in CPU_PARTS}
    return best, result


def bench_spark(bootstrap: str, total: int, master: str, size: int,
                ceiling_only: bool = False) -> dict[str, float]:
    """Rows per second of Spark batch reads on ``master``, by split count
    (``ceiling_only``: only pyspark's ceiling)."""
    from pyspark.sql import functions as F

    spark = session(master)
    results: dict[str, float] = {}
    try:
        load(spark, bootstrap, 2, ending=1000).agg(F.count("*")).first()  # warm-up
        # pyspark's ceiling: one split on local[1], two on local[2] (one a core).
        parts = 1 if master == "local[1]" else 2
        memory = (spark.read.format("bench_memory").option("partitions", str(parts))
                  .option("rows", str(total // parts)).option("size", str(size)).load())
        label = f"memory source, {master}, {parts} split{'s' if parts > 1 else ''}"
        elapsed, row = timed(lambda: memory.agg(
            F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).first(),
            label=label)
        results[label] = row.n / elapsed
        print(f"{label} (pyspark's ceiling): {row.n:,} rows in {elapsed:.2f} s")
        for splits in () if ceiling_only else SPLITS:
            df = load(spark, bootstrap, splits)
            label = f"spark {master}, {splits} splits"
            elapsed, row = timed(lambda df=df: df.agg(
                F.count("*").alias("n"), F.sum(F.length("value")).alias("bytes")).first(),
                label=label)
            if row.n != total:
                print(f"  WARNING: Spark read {row.n} rows, expected {total}")
            results[label] = row.n / elapsed
            print(f"{label}: {row.n:,} rows in {elapsed:.2f} s")
    finally:
        spark.stop()
    return results


def bench_task_cost(bootstrap: str, tasks: int) -> tuple[float, float]:
    """Seconds per task on local[1]: (an empty Python data source, kiel reading one record)."""
    from pyspark.sql import functions as F

    spark = session("local[1]")
    try:
        empty = spark.read.format("bench_memory").option("partitions", str(tasks)).load()
        kiel = load(spark, bootstrap, tasks, ending=tasks)
        empty.agg(F.count("*")).first()  # warm-up
        kiel.agg(F.count("*")).first()
        # Alternated, the best of five each: other load on the machine hits both alike.
        empty_time = kiel_time = float("inf")
        for _ in range(5):
            elapsed, _ = timed(lambda: empty.agg(F.count("*")).first(), runs=1)
            empty_time = min(empty_time, elapsed)
            elapsed, row = timed(lambda: kiel.agg(F.count("*")).first(), runs=1)
            kiel_time = min(kiel_time, elapsed)
        if row[0] != tasks:
            print(f"  WARNING: Spark read {row[0]} rows, expected {tasks}")
        # Splits of a thousand records: the last fetch of each must not read far past it.
        small = load(spark, bootstrap, tasks, ending=tasks * 1000)
        small_time, row = timed(lambda: small.agg(F.count("*")).first())
        print(f"{tasks} splits of 1,000 records, local[1]: {row[0]:,} rows in {small_time:.2f} s")
        return empty_time / tasks, kiel_time / tasks
    finally:
        spark.stop()


def print_cpu(rows: int) -> None:
    """The CPU seconds of each reader's best run, by part, and the most rows
    per second that CPU allows on two cores (the consumer: on its one thread;
    pyspark's workers: one per task, as many at once as cores and splits allow)."""
    consumer = CPU.get("SingleConsumer (1 process)")
    if consumer is None:
        return
    own = rows / max(consumer["reader"], 1e-9)
    print()
    print(f"{'CPU seconds of the best run':<36} " + " ".join(f"{p:>8.8}" for p in CPU_PARTS)
          + f" {'total':>7} {'bound rows/s':>13} {'vs consumer':>12}")
    for name, parts in CPU.items():
        total = sum(parts.values())
        # Two cores at best; and pyspark's Python workers run one a task, as
        # many at once as the master has cores and the read has splits.
        cores = 2 if "local[2]" in name else 1
        splits = int(name.rsplit(", ", 1)[1].split()[0]) if ", " in name else 1
        busiest = max(total / 2, parts["pyspark workers"] / min(cores, splits), 1e-9)
        bound = own if parts is consumer else rows / busiest
        print(f"{name:<36} " + " ".join(f"{parts[p]:>8.2f}" for p in CPU_PARTS)
              + f" {total:>7.2f} {bound:>13,.0f} {bound / own:>11.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=None,
                        help="values to write and read (default: 3,000,000 on the embedded "
                             "cluster, 1,000,000 on Tansu)")
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--varied", action="store_true", help="vary the value sizes")
    parser.add_argument("--tasks", type=int, default=64, help="splits of the fixed-cost read")
    parser.add_argument("--broker", choices=("embedded", "tansu"), default="embedded",
                        help="the embedded 0.8.2 cluster (message sets) or Tansu (record batches)")
    parser.add_argument("--ceiling-only", action="store_true",
                        help="time only the consumer and pyspark's ceiling (no kiel reads)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    started = time.perf_counter()
    if args.messages is None:
        # Every Spark query costs about half a second of its own: with fewer
        # rows that is most of a read, and the rates say little. Tansu's
        # memory storage spends CPU per fetch that grows with the log: past a
        # million rows its serving is what every reader measures.
        args.messages = 1_000_000 if args.broker == "tansu" else 3_000_000
    data = values(args.messages, args.value_size, args.varied)
    with broker(args.broker) as (bootstrap, fill_with):
        fill_with(data)
        print(f"filled {len(data):,} messages of {args.value_size} bytes"
              f"{' (varied)' if args.varied else ''} on {args.broker} "
              f"in {time.perf_counter() - started:.1f} s")
        results: dict[str, float] = {}
        results["SingleConsumer (1 process)"] = bench_single_consumer(
            bootstrap, len(data), "SingleConsumer (1 process)")
        for master in ("local[1]", "local[2]"):
            results.update(bench_spark(bootstrap, len(data), master, args.value_size,
                                       args.ceiling_only))
        costs = None if args.ceiling_only else bench_task_cost(bootstrap, args.tasks)

    base = results["SingleConsumer (1 process)"]
    ceiling = results["memory source, local[1], 1 split"]
    print()
    print(f"{'reader':<36} {'rows/s':>12} {'vs consumer':>12} {'vs ceiling/core':>16}")
    for name, rate in results.items():
        cores = 2 if "local[2]" in name else 1
        print(f"{name:<36} {rate:>12,.0f} {rate / base:>11.2f}x "
              f"{rate / (ceiling * cores):>15.2f}x")
    if CPU:
        print_cpu(len(data))
    if costs is not None:
        empty, kiel = costs
        print()
        print(f"fixed cost per task ({args.tasks} one-record splits, local[1]): "
              f"kiel {kiel * 1000:.1f} ms, an empty Python data source {empty * 1000:.1f} ms, "
              f"kiel's own {(kiel - empty) * 1000:.1f} ms")
    print(f"load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
