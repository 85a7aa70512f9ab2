"""Producer throughput: kiel vs kafka-python vs confluent-kafka (librdkafka).

Every client produces the same messages (100-byte values, no key, acks=1,
no compression unless ``--compression``) to its own 3-partition topic on the
same embedded 0.8.2 cluster, which runs in a subprocess (``ClusterProcess``)
so that the brokers do not share the client's GIL. Time runs from the first
produce call to the last acknowledgement (flush), after a warm-up that
loads metadata and opens connections.

* kiel: ``producer.produce()`` per message, and when the buffer is full
  (``BufferFullError``) ``await producer.enqueue()``, which waits for room,
  yielding to the IOLoop every 1000 messages; then ``await producer.flush()``.
* kiel-many: ``await producer.enqueue_many()`` with 1000 messages at a time
  (no future per record: the documented fastest way), yielding to the
  IOLoop after each, then ``await producer.flush()`` and its report.
* kafka-python 3.0 with ``api_version=(0, 8, 2)``: ``send()`` per message,
  then ``flush()``.
* confluent-kafka with ``api.version.request=false`` and
  ``broker.version.fallback=0.8.2.2``: ``produce()`` per message (with
  ``poll(0)`` to serve delivery reports), then ``flush()``.

A last row compares two ways for kiel to wait for ``--wait-messages``
records (default 200,000) produced as above, keeping every future:
``asyncio.gather(*futures)`` against ``await producer.flush()`` and its
report (counts and failures), with the ratio of their client CPU time.

With ``--broker tansu`` the clients produce to Tansu instead (a native
Kafka-compatible broker, :mod:`kiel.testing.tansu`): each negotiates its
versions (kiel and librdkafka write record batches), aiokafka (which cannot
talk to 0.8) joins with ``send()`` per message and one wait for them all,
and the broker's CPU over each run is printed.

With ``--idempotence`` (meant with ``--broker tansu``) every record is
acknowledged by all in-sync replicas (acks=-1/all) and each client runs
twice per round, without and with idempotence (kiel's ``idempotent=False``
and ``True``, librdkafka's ``enable.idempotence``; rows ``name`` and
``name+idem``): what idempotence costs each. kafka-python and aiokafka are
left out of these rows.

With ``--keys K`` every record has a key, the K keys ``user-000000``... in
turn (the same list for every client, made before the clock starts): the
default partitioner of each client hashes them with murmur2 (kiel-many
passes them as ``keys=``).

Prints a table and the ratios; never fails (a client that is not installed
or errors out is reported and skipped)::

    .venv/bin/python benchmarks/bench_produce.py [--messages N] [--compression gzip]
                                                 [--clients kiel,kafka-python,confluent]
                                                 [--wait-messages N] [--profile]
                                                 [--broker tansu] [--repeat R] [--keys K]
                                                 [--idempotence]
"""
import argparse
import asyncio
import cProfile
import logging
import pstats
import sys
import time
import traceback
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

from proc_cpu import cpu_seconds

from kiel.exc import BufferFullError
from kiel.producer import Producer
from kiel.testing.broker import ClusterProcess

VALUE = b"v" * 100
#: Set by ``--broker tansu``: the clients negotiate versions instead of 0.8.2.
MODERN = False
#: With --keys K: record i's key (K distinct keys, as user or device ids
#: repeat), the same list for every client; None: unkeyed records.
KEYS: Optional[List[bytes]] = None
PARTITIONS = 3
YIELD_EVERY = 1000
#: acks of every client: 1, or -1 (all) with --idempotence.
ACKS = 1
#: Whether this run's clients produce idempotently (--idempotence rows).
IDEMPOTENT = False


def bench_kiel(bootstrap: str, topic: str, n: int, compression: Optional[str],
               profile: bool) -> float:
    async def main() -> float:
        producer = Producer(bootstrap, required_acks=ACKS, compression=compression,
                            linger=0.005, idempotent=IDEMPOTENT)
        await producer.connect()
        await producer.produce(topic, b"warm-up")
        enqueue = producer.enqueue
        produce = producer.produce
        value = VALUE
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        start = time.perf_counter()
        sleep = asyncio.sleep
        if KEYS is None:
            for i in range(n):
                # Strategy: the plain produce() while there is room,
                # enqueue() (which waits) when the buffer is full:
                # back-pressure without a coroutine per message. Yielding to
                # the loop now and then (as any application does) lets
                # requests go out while we produce.
                try:
                    produce(topic, value)
                except BufferFullError:
                    await enqueue(topic, value)
                if not i % YIELD_EVERY:
                    await sleep(0)
        else:
            for i, key in enumerate(KEYS[:n]):
                try:
                    produce(topic, value, key)
                except BufferFullError:
                    await enqueue(topic, value, key)
                if not i % YIELD_EVERY:
                    await sleep(0)
        await producer.flush()
        elapsed = time.perf_counter() - start
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
        await producer.close()
        return elapsed

    return asyncio.run(main())


def bench_kiel_many(bootstrap: str, topic: str, n: int, compression: Optional[str],
                    profile: bool) -> float:
    """kiel's documented fastest way: ``enqueue_many()`` a slice of
    ``YIELD_EVERY`` values at a time (no future per record; it waits for
    room when the buffer is full), then ``flush()``, whose report is checked."""
    async def main() -> float:
        producer = Producer(bootstrap, required_acks=ACKS, compression=compression,
                            linger=0.005, idempotent=IDEMPOTENT)
        await producer.connect()
        await producer.produce(topic, b"warm-up")
        await producer.flush()
        enqueue_many = producer.enqueue_many
        chunk = [VALUE] * YIELD_EVERY
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        start = time.perf_counter()
        sleep = asyncio.sleep
        for i in range(0, n, YIELD_EVERY):
            values = chunk if i + YIELD_EVERY <= n else chunk[: n - i]
            keys = None if KEYS is None else KEYS[i : i + len(values)]
            await enqueue_many(topic, values, keys=keys)
            await sleep(0)
        report = await producer.flush()
        elapsed = time.perf_counter() - start
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
        await producer.close()
        if report.delivered != n or report.failed:
            raise RuntimeError(f"produce_many: {report.delivered} of {n} delivered, "
                               f"{report.failed} failed")
        return elapsed

    return asyncio.run(main())


def bench_kiel_wait(bootstrap: str, topic: str, n: int, how: str) -> Tuple[float, float]:
    """Produce ``n`` records keeping their futures, then wait for all of them
    with ``asyncio.gather`` (``how="gather"``) or ``flush()`` (``"flush"``).

    Returns:
        (seconds from the first produce to the last acknowledgement, seconds
        of client CPU spent waiting once the last record was produced).
    """
    async def main() -> Tuple[float, float]:
        async with Producer(bootstrap, required_acks=1, linger=0.005) as producer:
            await producer.produce(topic, b"warm-up")
            await producer.flush()  # the report starts after the warm-up
            produce, enqueue = producer.produce, producer.enqueue
            roomy = producer.max_pending_bytes - 65536
            futures = []
            start = time.perf_counter()
            for i in range(n):
                if producer.pending_bytes < roomy:
                    futures.append(produce(topic, VALUE))
                else:
                    futures.append(await enqueue(topic, VALUE))
                if not i % YIELD_EVERY:
                    await asyncio.sleep(0)
            cpu = time.process_time()
            if how == "gather":
                delivered = len(await asyncio.gather(*futures))
            else:
                report = await producer.flush()
                delivered = report.delivered if not report.failed else -report.failed
            cpu = time.process_time() - cpu
            elapsed = time.perf_counter() - start
            if delivered != n:
                raise RuntimeError(f"{how}: {delivered} of {n} records delivered")
            return elapsed, cpu

    return asyncio.run(main())


def wait_row(cluster: ClusterProcess, n: int) -> None:
    """The row comparing gather with flush() (printed; never raises)."""
    cpus: Dict[str, float] = {}
    for how in ("gather", "flush"):
        topic = f"bench-wait-{how}-{uuid.uuid4().hex[:6]}"
        cluster.create_topic(topic, PARTITIONS)
        try:
            elapsed, cpu = bench_kiel_wait(cluster.bootstrap, topic, n, how)
        except Exception:  # a benchmark never fails: report and go on
            print(f"  kiel + {how}: failed")
            traceback.print_exc(file=sys.stdout)
            return
        cpus[how] = cpu
        label = "asyncio.gather(*futures)" if how == "gather" else "await producer.flush()"
        print(f"  kiel {n:,} + {label:<24} {n / elapsed:>10,.0f} msgs/s  ({elapsed:.2f} s, "
              f"client CPU waiting {cpu:.2f} s)")
    print(f"  waiting CPU gather / flush(): {cpus['gather'] / max(cpus['flush'], 1e-6):.1f}x")


def bench_kafka_python(bootstrap: str, topic: str, n: int, compression: Optional[str],
                       profile: bool) -> float:
    from kafka import KafkaProducer

    if compression == "snappy":
        _kafka_python_snappy_shim()
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        api_version=None if MODERN else (0, 8, 2),
        acks=1,
        linger_ms=5,
        compression_type=compression,
    )
    producer.send(topic, b"warm-up").get(timeout=30)
    send = producer.send
    value = VALUE
    start = time.perf_counter()
    if KEYS is None:
        for _ in range(n):
            send(topic, value)
    else:
        for key in KEYS[:n]:
            send(topic, value, key=key)
    producer.flush()
    elapsed = time.perf_counter() - start
    producer.close()
    return elapsed


def _kafka_python_snappy_shim() -> None:
    """kafka-python compresses snappy with python-snappy, which is not
    installed here; cramjam's raw snappy is what python-snappy >= 0.7 is."""
    from types import SimpleNamespace

    import cramjam
    import kafka.codec

    if kafka.codec.snappy is None:
        kafka.codec.snappy = SimpleNamespace(
            compress=lambda d: bytes(cramjam.snappy.compress_raw(d)),
            decompress=lambda d: bytes(cramjam.snappy.decompress_raw(d)),
        )


def bench_confluent(bootstrap: str, topic: str, n: int, compression: Optional[str],
                    profile: bool) -> float:
    from confluent_kafka import Producer as ConfluentProducer

    errors = []

    def report(err, msg):  # noqa: ANN001 - librdkafka callback
        if err is not None:
            errors.append(err)

    config = {
        "bootstrap.servers": bootstrap,
        "acks": "all" if ACKS == -1 else ACKS,
        "enable.idempotence": IDEMPOTENT,
        "linger.ms": 5,
        "compression.codec": compression or "none",
        "queue.buffering.max.messages": 1000000,
        "log_level": 3,  # no deprecation warnings about the 0.8.2 settings
    }
    if not MODERN:
        config.update({"api.version.request": False, "broker.version.fallback": "0.8.2.2"})
    producer = ConfluentProducer(config)
    producer.produce(topic, b"warm-up", on_delivery=report)
    producer.flush(30)
    produce = producer.produce
    poll = producer.poll
    value = VALUE
    keys = KEYS[:n] if KEYS is not None else [None] * n
    start = time.perf_counter()
    for i, key in enumerate(keys):
        while True:
            try:
                produce(topic, value, key, on_delivery=report)
                break
            except BufferError:
                poll(0.01)
        if i % 10000 == 0:
            poll(0)
    producer.flush(300)
    elapsed = time.perf_counter() - start
    if errors:
        print(f"  confluent-kafka: {len(errors)} delivery errors, first: {errors[0]}")
    return elapsed


def bench_aiokafka(bootstrap: str, topic: str, n: int, compression: Optional[str],
                   profile: bool) -> float:
    from aiokafka import AIOKafkaProducer

    async def main() -> float:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5,
                                    compression_type=compression)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"warm-up")
            send = producer.send
            value = VALUE
            start = time.perf_counter()
            pending = []
            for key in (KEYS[:n] if KEYS is not None else [None] * n):
                pending.append(await send(topic, value, key=key))
                if len(pending) >= 10000:
                    await asyncio.gather(*pending)
                    pending = []
            await asyncio.gather(*pending)
            return time.perf_counter() - start
        finally:
            await producer.stop()

    return asyncio.run(main())


CLIENTS: Dict[str, Callable[..., float]] = {
    "kiel": bench_kiel,
    "kiel-many": bench_kiel_many,
    "kafka-python": bench_kafka_python,
    "confluent": bench_confluent,
    "aiokafka": bench_aiokafka,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", "-n", type=int, default=1_000_000)
    parser.add_argument("--compression", default=None, choices=[None, "gzip", "snappy"])
    parser.add_argument("--clients", default=None,
                        help="comma-separated (default: all; aiokafka only with --broker tansu)")
    parser.add_argument("--broker", choices=["embedded", "tansu"], default="embedded",
                        help="the embedded 0.8.2 cluster (default) or Tansu")
    parser.add_argument("--profile", action="store_true", help="cProfile kiel's run")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of every client, the best of each kept for the ratios")
    parser.add_argument("--wait-messages", type=int, default=200_000,
                        help="records for the gather vs flush() row (0: skip it)")
    parser.add_argument("--keys", type=int, default=0,
                        help="keyed records: this many distinct keys, in turn (0: unkeyed)")
    parser.add_argument("--idempotence", action="store_true",
                        help="acks=all, each client without and with idempotence")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    global MODERN, KEYS, ACKS, IDEMPOTENT
    MODERN = args.broker == "tansu"
    modes = [False]
    if args.idempotence:
        ACKS = -1
        modes = [False, True]
        if args.clients is None:
            args.clients = "kiel,kiel-many,confluent"
    if args.keys > 0:
        pool = [b"user-%06d" % k for k in range(args.keys)]
        KEYS = [pool[i % args.keys] for i in range(args.messages)]
    if args.clients is None:
        args.clients = ",".join(c for c in CLIENTS if MODERN or c != "aiokafka")
    n = args.messages
    where = ("Tansu (one broker)" if MODERN
             else "embedded 0.8.2 cluster (3 brokers) in a subprocess")
    keyed = f", keys: {args.keys:,} distinct" if args.keys > 0 else ", unkeyed"
    print(f"{n:,} messages of {len(VALUE)} bytes{keyed}, acks={ACKS}, "
          f"compression={args.compression}, {PARTITIONS} partitions, {where}")
    results: Dict[str, float] = {}
    if MODERN:
        from kiel.testing.tansu import TansuBroker

        backend: Any = TansuBroker()
    else:
        backend = ClusterProcess(brokers=3, partitions=PARTITIONS, replication=1)
    with backend as cluster:
        # Rounds interleave the clients; the best round of each counts.
        for _ in range(args.repeat):
            for client, mode in [(c, m) for c in args.clients.split(",") for m in modes]:
                IDEMPOTENT = mode
                name = client.strip() + ("+idem" if mode else "")
                bench = CLIENTS.get(client.strip())
                if bench is None:
                    print(f"  {name}: unknown client")
                    continue
                topic = f"bench-{client.strip()}-{uuid.uuid4().hex[:6]}"
                cluster.create_topic(topic, PARTITIONS)
                cpu = time.process_time()
                broker_pid = cluster.pid if MODERN else None
                broker_cpu = cpu_seconds(broker_pid)
                try:
                    elapsed = bench(cluster.bootstrap, topic, n, args.compression, args.profile)
                except ImportError as e:
                    print(f"  {name}: not installed ({e})")
                    continue
                except Exception:  # a benchmark never fails: report and go on
                    print(f"  {name}: failed")
                    traceback.print_exc(file=sys.stdout)
                    continue
                cpu = time.process_time() - cpu
                results[name] = max(results.get(name, 0.0), n / elapsed)
                broker_share = 100 * (cpu_seconds(broker_pid) - broker_cpu) / elapsed
                broker = f", broker CPU {broker_share:.0f}%" if MODERN else ""
                print(f"  {name:<14} {n / elapsed:>12,.0f} msgs/s  ({elapsed:.2f} s, "
                      f"client CPU {cpu:.2f} s{broker})")
        if args.wait_messages > 0 and "kiel" in args.clients and not MODERN:
            wait_row(cluster, args.wait_messages)
    if args.repeat > 1:
        print(f"  (ratios: the best of {args.repeat} rounds of each client)")
    for ours in ("kiel", "kiel-many", "kiel+idem", "kiel-many+idem"):
        if ours in results:
            for name, rate in results.items():
                if not name.startswith("kiel") and name.endswith("+idem") == ours.endswith(
                        "+idem"):
                    print(f"  {ours} / {name}: {results[ours] / rate:.2f}x")
    for name in results:
        if name + "+idem" in results:
            cost = 100 * (1 - results[name + "+idem"] / results[name])
            print(f"  idempotence costs {name} {cost:.0f}% of its rate")


if __name__ == "__main__":
    main()
