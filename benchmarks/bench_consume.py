"""Consumer throughput: kiel's SingleConsumer vs kafka-python vs confluent-kafka.

One embedded 0.8.2 cluster runs in a subprocess (``ClusterProcess``, i.e.
``python -m kiel.testing serve``) so the brokers never share the consumer's
GIL. The topic is filled once with 100-byte values (raw pre-encoded produce
requests), then each client reads every message from the beginning, in a
fresh process state (kiel first, then kafka-python, then confluent-kafka):

* kiel: ``SingleConsumer.consume(topic, start=BEGINNING)`` in a loop, on an
  asyncio/Tornado loop, while a periodic callback measures how late the loop
  runs it (the loop lag: p50 / p99 / max);
* kafka-python: ``KafkaConsumer(api_version=(0, 8, 2))``, manual assignment,
  ``poll()`` in a loop;
* confluent-kafka: ``Consumer`` with ``api.version.request=false``,
  ``broker.version.fallback=0.8.2.2``, ``fetch.queue.backoff.ms=0``, manual
  assignment, ``consume(num_messages=...)`` in a loop (pip install
  confluent-kafka for it; skipped when missing).

With ``--broker tansu`` the broker is Tansu instead (a native Kafka-compatible
broker, see :mod:`kiel.testing.tansu`), filled with record batches by kiel's
Producer; every client negotiates its versions, and aiokafka (which cannot
talk to 0.8) joins: ``AIOKafkaConsumer``, manual assignment, ``getmany()``.
The broker's CPU time is printed beside each client's run, to show whether
the broker or the client is the bottleneck.

Prints only, never fails::

    .venv/bin/python benchmarks/bench_consume.py [--messages 1000000] [--partitions 3]
    .venv/bin/python benchmarks/bench_consume.py --broker tansu [--messages 300000] [--repeat 3]
"""
import argparse
import asyncio
import gc
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

from proc_cpu import cpu_seconds

from kiel.consumer import SingleConsumer
from kiel.protocol import ProducePartitionData, ProduceRequest, ProduceTopicData
from kiel.protocol.messages import encode_message_set
from kiel.testing.broker import ClusterProcess
from kiel.testing.broker.rawclient import RawClient

TOPIC = "bench-consume"
VALUE = b"v" * 100
BATCH = 1000
LAG_INTERVAL = 0.005


def fill(cluster: ClusterProcess, partitions: int, messages: int) -> None:
    """Write ``messages`` 100-byte values, spread evenly over the partitions."""
    per = messages // partitions
    message_set = encode_message_set([(None, VALUE)] * BATCH)
    for partition in range(partitions):
        leader = cluster.leader(TOPIC, partition)
        with RawClient(_address(cluster, leader)) as client:
            written = 0
            while written < per:
                count = min(BATCH, per - written)
                data = message_set if count == BATCH else encode_message_set(
                    [(None, VALUE)] * count)
                client.request(ProduceRequest(1, 30000, [ProduceTopicData(TOPIC, [
                    ProducePartitionData(partition, data)])]))
                written += count


def _address(cluster: ClusterProcess, broker_id: int) -> str:
    broker = cluster.describe()["brokers"][str(broker_id)]
    return f"{broker['host']}:{broker['port']}"


def percentile(samples: List[float], q: float) -> float:
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _kiel(bootstrap: str, total: int) -> Tuple[float, List[float], List[float], int]:
    loop = asyncio.get_running_loop()
    callback_lateness: List[float] = []
    coroutine_lateness: List[float] = []
    running = [True]

    def tick(expected: float) -> None:
        # A plain periodic callback: how long the loop kept it waiting.
        now = loop.time()
        callback_lateness.append(max(0.0, now - expected))
        if running[0]:
            loop.call_at(now + LAG_INTERVAL, tick, now + LAG_INTERVAL)

    async def sleeper() -> None:
        # A coroutine's wake-up: one more loop iteration than a callback.
        while running[0]:
            started = loop.time()
            await asyncio.sleep(LAG_INTERVAL)
            coroutine_lateness.append(max(0.0, loop.time() - started - LAG_INTERVAL))

    async with SingleConsumer(bootstrap, max_wait_time=0.5) as consumer:
        count = 0
        loop.call_at(loop.time() + LAG_INTERVAL, tick, loop.time() + LAG_INTERVAL)
        sleeping = asyncio.ensure_future(sleeper())
        started = time.perf_counter()
        while count < total:
            count += len(await consumer.consume(TOPIC, start=SingleConsumer.BEGINNING))
        elapsed = time.perf_counter() - started
        running[0] = False
        await sleeping
        return elapsed, callback_lateness, coroutine_lateness, consumer.decoder.yields


def _summary(samples: List[float]) -> Dict[str, float]:
    return {
        "p50": percentile(samples, 0.50) * 1000,
        "p99": percentile(samples, 0.99) * 1000,
        "max": max(samples, default=0.0) * 1000,
        "samples": len(samples),
    }


def bench_kiel(bootstrap: str, total: int) -> Tuple[float, Dict[str, Any]]:
    gc_pauses: List[float] = []
    gc_started = [0.0]

    def on_gc(phase: str, info: Dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        elif info["generation"] == 2:
            gc_pauses.append(time.perf_counter() - gc_started[0])

    gc.callbacks.append(on_gc)
    try:
        elapsed, callbacks, coroutines, yields = asyncio.run(_kiel(bootstrap, total))
    finally:
        gc.callbacks.remove(on_gc)
    return total / elapsed, {
        "callback": _summary(callbacks),
        "coroutine": _summary(coroutines),
        "yields": yields,
        "full_gcs": len(gc_pauses),
        "gc_max": max(gc_pauses, default=0.0) * 1000,
    }


def bench_kafka_python(bootstrap: str, partitions: int, total: int,
                       modern: bool = False) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, api_version=None if modern else (0, 8, 2),
        enable_auto_commit=False,
        auto_offset_reset="earliest", fetch_max_bytes=50 * 1024 * 1024,
        max_partition_fetch_bytes=1024 * 1024, max_poll_records=100_000,
    )
    consumer.assign([TopicPartition(TOPIC, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    count = 0
    started = time.perf_counter()
    while count < total:
        for records in consumer.poll(timeout_ms=1000).values():
            count += len(records)
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


def bench_confluent(bootstrap: str, partitions: int, total: int,
                    modern: bool = False) -> Optional[float]:
    try:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    except ImportError:
        return None
    config: Dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": "bench-consume",
        "fetch.queue.backoff.ms": 0,
        "enable.auto.commit": False,
        "log_level": 3,
    }
    if not modern:
        config.update({"api.version.request": False, "broker.version.fallback": "0.8.2.2"})
    consumer = Consumer(config)
    consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
    count = 0
    started = time.perf_counter()
    while count < total:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is None:
                count += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


def bench_aiokafka(bootstrap: str, partitions: int, total: int) -> Optional[float]:
    try:
        from aiokafka import AIOKafkaConsumer, TopicPartition
    except ImportError:
        return None

    async def run() -> float:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest",
                                    max_partition_fetch_bytes=1024 * 1024)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(TOPIC, p) for p in range(partitions)])
            await consumer.seek_to_beginning()
            count = 0
            started = time.perf_counter()
            while count < total:
                batches = await consumer.getmany(timeout_ms=1000, max_records=100_000)
                count += sum(len(records) for records in batches.values())
            return count / (time.perf_counter() - started)
        finally:
            await consumer.stop()

    return asyncio.run(run())


def fill_tansu(bootstrap: str, partitions: int, messages: int) -> None:
    """Write ``messages`` 100-byte values with kiel's Producer (record batches)."""
    from kiel.producer import Producer

    async def run() -> None:
        async with Producer(bootstrap, linger=0.01, batch_size=256 * 1024) as producer:
            for i in range(messages):
                await producer.enqueue(TOPIC, VALUE, partition=i % partitions)
            result = await producer.flush()
            if result.failed:
                raise SystemExit(f"filling Tansu failed: {result.failures[:3]}")

    asyncio.run(run())


def main_tansu(args: argparse.Namespace) -> None:
    from kiel.testing.tansu import TansuBroker

    total = args.messages - args.messages % args.partitions
    with TansuBroker() as broker:
        broker.create_topic(TOPIC, args.partitions)
        started = time.perf_counter()
        fill_tansu(broker.bootstrap, args.partitions, total)
        print(f"Tansu: filled {total:,} messages of {len(VALUE)} bytes in "
              f"{time.perf_counter() - started:.1f} s ({args.partitions} partitions)")
        runs: Dict[str, Any] = {
            "kiel": lambda: bench_kiel(broker.bootstrap, total)[0],
            "kafka-python": lambda: bench_kafka_python(broker.bootstrap, args.partitions, total,
                                                       modern=True),
            "confluent-kafka": lambda: bench_confluent(broker.bootstrap, args.partitions, total,
                                                       modern=True),
            "aiokafka": lambda: bench_aiokafka(broker.bootstrap, args.partitions, total),
        }
        results: Dict[str, Tuple[Optional[float], float, float]] = {}
        skip = {"confluent-kafka" if n == "confluent" else n for n in args.skip}
        # Rounds interleave the clients (each reads every message once per
        # round); the best round of each counts, the least disturbed by
        # load from elsewhere on the machine.
        for _ in range(args.repeat):
            for name, run in runs.items():
                if name in skip:
                    continue
                cpu, started = cpu_seconds(broker.pid), time.perf_counter()
                rate = run()
                wall = time.perf_counter() - started
                best = results.get(name)
                if best is None or (rate or 0.0) > (best[0] or 0.0):
                    results[name] = (rate, cpu_seconds(broker.pid) - cpu, wall)
    kiel_rate = results["kiel"][0] or 0.0
    print()
    print(f"{'client':<16} {'msgs/s':>12} {'MB/s':>8} {'kiel / it':>10} {'broker CPU':>11}")
    for name, (rate, cpu, wall) in results.items():
        if rate is None:
            print(f"{name:<16} {'(not installed)':>12}")
            continue
        print(f"{name:<16} {rate:>12,.0f} {rate * len(VALUE) / 1e6:>8.1f} "
              f"{kiel_rate / rate:>9.2f}x {100 * cpu / wall:>10.0f}%")
    print("(broker CPU: Tansu's CPU time over the client's run, per cent of one core)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--skip", action="append", default=[],
                        choices=["kafka-python", "confluent", "confluent-kafka", "aiokafka"],
                        help="leave a client out")
    parser.add_argument("--broker", choices=["embedded", "tansu"], default="embedded",
                        help="the embedded 0.8.2 cluster (default) or Tansu")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --broker tansu: rounds of every client, the best of each kept")
    args = parser.parse_args()
    if args.broker == "tansu":
        main_tansu(args)
        return
    total = args.messages - args.messages % args.partitions

    started = time.perf_counter()
    with ClusterProcess(brokers=args.brokers, replication=1,
                        topics={TOPIC: args.partitions}) as cluster:
        print(f"cluster process ready in {time.perf_counter() - started:.2f} s "
              f"({args.brokers} brokers, {args.partitions} partitions)")
        started = time.perf_counter()
        fill(cluster, args.partitions, total)
        print(f"filled {total:,} messages of {len(VALUE)} bytes in "
              f"{time.perf_counter() - started:.1f} s")

        results: Dict[str, Optional[float]] = {}
        results["kiel"], lag = bench_kiel(cluster.bootstrap, total)
        if "kafka-python" not in args.skip:
            results["kafka-python"] = bench_kafka_python(cluster.bootstrap, args.partitions, total)
        if "confluent" not in args.skip:
            results["confluent-kafka"] = bench_confluent(cluster.bootstrap, args.partitions, total)

    kiel_rate = results["kiel"] or 0.0
    print()
    print(f"{'client':<16} {'msgs/s':>12} {'MB/s':>8} {'kiel / it':>10}")
    for name, rate in results.items():
        if rate is None:
            print(f"{name:<16} {'(not installed)':>12}")
            continue
        print(f"{name:<16} {rate:>12,.0f} {rate * len(VALUE) / 1e6:>8.1f} "
              f"{kiel_rate / rate:>9.2f}x")
    print()
    print(f"kiel IOLoop lag while consuming ({lag['yields']} decoder yields; "
          f"{lag['full_gcs']} full garbage collections, the longest {lag['gc_max']:.1f} ms):")
    for kind, label in (("callback", "periodic callback lateness"),
                        ("coroutine", "coroutine sleep() lateness")):
        stats = lag[kind]
        print(f"  {label} ({LAG_INTERVAL * 1000:.0f} ms period, {stats['samples']} samples): "
              f"p50 {stats['p50']:.2f} ms, p99 {stats['p99']:.2f} ms, max {stats['max']:.2f} ms")

if __name__ == "__main__":
    sys.exit(main())
