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

Prints only, never fails::

    .venv/bin/python benchmarks/bench_consume.py [--messages 1000000] [--partitions 3]
"""
import argparse
import asyncio
import gc
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

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


def bench_kafka_python(bootstrap: str, partitions: int, total: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, api_version=(0, 8, 2), enable_auto_commit=False,
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


def bench_confluent(bootstrap: str, partitions: int, total: int) -> Optional[float]:
    try:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    except ImportError:
        return None
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "bench-consume",
        "api.version.request": False,
        "broker.version.fallback": "0.8.2.2",
        "fetch.queue.backoff.ms": 0,
        "enable.auto.commit": False,
        "log_level": 3,
    })
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--skip", action="append", default=[],
                        choices=["kafka-python", "confluent"], help="leave a client out")
    args = parser.parse_args()
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
