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

With ``--partitioner explicit`` every record names its partition, record i
partition ``i % 3`` (each client's ``partition=`` argument; kiel-many
passes a slice per partition with ``partition=``).

``--path`` chooses kiel's ways to produce, comma-separated: ``produce``
(row ``kiel``: ``produce()`` per record, ``enqueue()`` only when the buffer
is full), ``enqueue`` (row ``kiel-enqueue``: ``await producer.enqueue()``
per record and nothing else, the producer guide's loop) and ``many`` (row ``kiel-many``);
given alone (without ``--clients``) it runs those and confluent-kafka.
Every kiel row also says how late the IOLoop ran a callback due every 5 ms
while producing (the loop lag: the largest, and the 99th percentile), and
the garbage collections meanwhile (how many, how many full, their time).

``--memory`` measures with tracemalloc the memory each pending record takes
(``produce()``, which makes a future, and ``produce_many()``, which does
not), 100,000 records queued with no acknowledgement in between.

Prints a table and the ratios; never fails (a client that is not installed
or errors out is reported and skipped)::

    .venv/bin/python benchmarks/bench_produce.py [--messages N] [--compression gzip]
                                                 [--clients kiel,kafka-python,confluent]
                                                 [--wait-messages N] [--profile]
                                                 [--broker tansu] [--repeat R] [--keys K]
                                                 [--idempotence] [--partitioner explicit]
                                                 [--path enqueue,produce,many] [--memory]

For the figures of docs/guides/producer.rst ("Performance")::

    python benchmarks/bench_produce.py --broker tansu -n 200000 --repeat 3 \
        --path enqueue,produce,many --partitioner explicit --wait-messages 0
    python benchmarks/bench_produce.py --broker tansu -n 200000 --repeat 3 \
        --path enqueue,produce,many --keys 10000 --wait-messages 0
"""
import argparse
import asyncio
import cProfile
import gc
import logging
import pstats
import sys
import time
import traceback
import tracemalloc
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
#: With --partitioner explicit: record i's partition; None: the partitioner's.
PARTS: Optional[List[int]] = None
PARTITIONS = 3
YIELD_EVERY = 1000
#: acks of every client: 1, or -1 (all) with --idempotence.
ACKS = 1
#: Whether this run's clients produce idempotently (--idempotence rows).
IDEMPOTENT = False
#: How often the loop-lag probe asks to run (seconds).
LAG_INTERVAL = 0.005
#: The last kiel run's loop lag: (largest, 99th percentile), seconds.
LAST_LAG: List[Tuple[float, float]] = []
#: The last kiel run's garbage collections: (count, seconds, full ones).
LAST_GC: List[Tuple[int, float, int]] = []


class LagProbe:
    """How late the IOLoop runs a callback due every :data:`LAG_INTERVAL`,
    and the cyclic garbage collector's collections meanwhile (the usual
    cause of a long lag: a full collection scans every tracked object)."""

    def __init__(self) -> None:
        self.lags: List[float] = []
        self._loop = asyncio.get_running_loop()
        self._handle: Optional[asyncio.TimerHandle] = None
        self._due = 0.0
        self._gc_started = 0.0
        self._gc = [0, 0.0, 0]

    def _collecting(self, phase: str, info: Dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        self._gc[0] += 1
        self._gc[1] += time.perf_counter() - self._gc_started
        self._gc[2] += info["generation"] == 2

    def start(self) -> None:
        gc.callbacks.append(self._collecting)
        self._due = self._loop.time() + LAG_INTERVAL
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        now = self._loop.time()
        self.lags.append(max(0.0, now - self._due))
        self._due = now + LAG_INTERVAL
        self._handle = self._loop.call_at(self._due, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        if self._collecting in gc.callbacks:
            gc.callbacks.remove(self._collecting)
        lags = sorted(self.lags) or [0.0]
        LAST_LAG[:] = [(lags[-1], lags[int(0.99 * (len(lags) - 1))])]
        LAST_GC[:] = [(self._gc[0], self._gc[1], self._gc[2])]


def _records(n: int) -> List[Tuple[Optional[bytes], Optional[int]]]:
    """Each record's (key, partition), made before the clock starts."""
    keys: List[Optional[bytes]] = list(KEYS[:n]) if KEYS is not None else [None] * n
    parts: List[Optional[int]] = list(PARTS[:n]) if PARTS is not None else [None] * n
    return list(zip(keys, parts))


def bench_kiel(bootstrap: str, topic: str, n: int, compression: Optional[str],
               profile: bool, path: str = "produce") -> float:
    """kiel, a record at a time: ``produce()`` (``path="produce"``; the
    buffer full, ``await enqueue()``, which waits for room), yielding to the
    loop every :data:`YIELD_EVERY` records (as any application does, so that
    requests go out while it produces), or ``await enqueue()`` per record
    (``path="enqueue"``, which gives the loop a turn every 1000 records
    itself); then ``flush()``, whose report is checked."""
    async def main() -> float:
        producer = Producer(bootstrap, required_acks=ACKS, compression=compression,
                            linger=0.005, idempotent=IDEMPOTENT)
        await producer.connect()
        await producer.produce(topic, b"warm-up")
        await producer.flush()
        enqueue = producer.enqueue
        produce = producer.produce
        value = VALUE
        records = _records(n)
        profiler = cProfile.Profile() if profile else None
        probe = LagProbe()
        probe.start()
        if profiler:
            profiler.enable()
        start = time.perf_counter()
        sleep = asyncio.sleep
        if path == "enqueue":
            # The producer guide's loop, as it is: enqueue() gives the loop
            # a turn every 1000 records itself.
            for key, part in records:
                await enqueue(topic, value, key, part)
        elif KEYS is None and PARTS is None:
            for i in range(n):
                try:
                    produce(topic, value)
                except BufferFullError:
                    await enqueue(topic, value)
                if not i % YIELD_EVERY:
                    await sleep(0)
        else:
            for i, (key, part) in enumerate(records):
                try:
                    produce(topic, value, key, part)
                except BufferFullError:
                    await enqueue(topic, value, key, part)
                if not i % YIELD_EVERY:
                    await sleep(0)
        report = await producer.flush()
        elapsed = time.perf_counter() - start
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        probe.stop()
        await producer.close()
        if report.delivered != n or report.failed:
            raise RuntimeError(f"{path}: {report.delivered} of {n} delivered, "
                               f"{report.failed} failed")
        return elapsed

    return asyncio.run(main())


def bench_kiel_enqueue(bootstrap: str, topic: str, n: int, compression: Optional[str],
                       profile: bool) -> float:
    return bench_kiel(bootstrap, topic, n, compression, profile, path="enqueue")


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
        probe = LagProbe()
        probe.start()
        if profiler:
            profiler.enable()
        start = time.perf_counter()
        sleep = asyncio.sleep
        for i in range(0, n, YIELD_EVERY):
            values = chunk if i + YIELD_EVERY <= n else chunk[: n - i]
            keys = None if KEYS is None else KEYS[i : i + len(values)]
            if PARTS is None:
                await enqueue_many(topic, values, keys=keys)
            else:
                # Record i to partition PARTS[i] = i % PARTITIONS: a slice each.
                for p in range(PARTITIONS):
                    first = (p - i) % PARTITIONS
                    await enqueue_many(topic, values[first::PARTITIONS], partition=p,
                                       keys=None if keys is None else keys[first::PARTITIONS])
            await sleep(0)
        report = await producer.flush()
        elapsed = time.perf_counter() - start
        if profiler:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        probe.stop()
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
    if KEYS is None and PARTS is None:
        for _ in range(n):
            send(topic, value)
    else:
        for key, part in _records(n):
            send(topic, value, key=key, partition=part)
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
    parts = PARTS[:n] if PARTS is not None else None
    start = time.perf_counter()
    if parts is None:
        for i, key in enumerate(keys):
            while True:
                try:
                    produce(topic, value, key, on_delivery=report)
                    break
                except BufferError:
                    poll(0.01)
            if i % 10000 == 0:
                poll(0)
    else:
        for i, (key, part) in enumerate(zip(keys, parts)):
            while True:
                try:
                    produce(topic, value, key, part, on_delivery=report)
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
            for key, part in _records(n):
                pending.append(await send(topic, value, key=key, partition=part))
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
    "kiel-enqueue": bench_kiel_enqueue,
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
    parser.add_argument("--partitioner", choices=["default", "explicit"], default="default",
                        help="explicit: record i names partition i %% 3")
    parser.add_argument("--path", default=None,
                        help="kiel's ways, comma-separated: produce, enqueue, many "
                             "(alone: those and confluent-kafka)")
    parser.add_argument("--memory", action="store_true",
                        help="also measure the memory of each pending record (tracemalloc)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    global MODERN, KEYS, ACKS, IDEMPOTENT, PARTS
    MODERN = args.broker == "tansu"
    if args.path is not None and args.clients is None:
        named = {"produce": "kiel", "enqueue": "kiel-enqueue", "many": "kiel-many"}
        try:
            args.clients = ",".join([named[p.strip()] for p in args.path.split(",")]
                                    + ["confluent"])
        except KeyError as e:
            parser.error(f"--path: unknown way {e}")
    if args.partitioner == "explicit":
        PARTS = [i % PARTITIONS for i in range(args.messages)]
    modes = [False]
    if args.idempotence:
        ACKS = -1
        modes = [False, True]
        if args.clients is None:
            args.clients = "kiel,kiel-enqueue,kiel-many,confluent"
    if args.keys > 0:
        pool = [b"user-%06d" % k for k in range(args.keys)]
        KEYS = [pool[i % args.keys] for i in range(args.messages)]
    if args.clients is None:
        args.clients = ",".join(c for c in CLIENTS if MODERN or c != "aiokafka")
    n = args.messages
    where = ("Tansu (one broker)" if MODERN
             else "embedded 0.8.2 cluster (3 brokers) in a subprocess")
    keyed = f", keys: {args.keys:,} distinct" if args.keys > 0 else ", unkeyed"
    if PARTS is not None:
        keyed += ", explicit partitions (i % 3)"
    import kiel

    print(f"kiel from {kiel.__file__}")
    print(f"{n:,} messages of {len(VALUE)} bytes{keyed}, acks={ACKS}, "
          f"compression={args.compression}, {PARTITIONS} partitions, {where}")
    results: Dict[str, float] = {}
    #: records per second of client CPU (all the process's threads): what a
    #: loaded machine disturbs less than the rate.
    per_cpu: Dict[str, float] = {}
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
                LAST_LAG.clear()
                LAST_GC.clear()
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
                per_cpu[name] = max(per_cpu.get(name, 0.0), n / max(cpu, 1e-6))
                broker_share = 100 * (cpu_seconds(broker_pid) - broker_cpu) / elapsed
                broker = f", broker CPU {broker_share:.0f}%" if MODERN else ""
                lag = (f", loop lag max {LAST_LAG[0][0] * 1000:.1f} ms "
                       f"p99 {LAST_LAG[0][1] * 1000:.1f} ms") if LAST_LAG else ""
                if LAST_GC:
                    count, spent, full = LAST_GC[0]
                    lag += f", gc {count} ({full} full) {spent * 1000:.0f} ms"
                print(f"  {name:<14} {n / elapsed:>12,.0f} msgs/s  ({elapsed:.2f} s, "
                      f"client CPU {cpu:.2f} s{broker}{lag})")
        if args.wait_messages > 0 and "kiel" in args.clients and not MODERN:
            wait_row(cluster, args.wait_messages)
    if args.repeat > 1:
        print(f"  (ratios: the best of {args.repeat} rounds of each client)")
    for ours in ("kiel", "kiel-enqueue", "kiel-many", "kiel+idem", "kiel-enqueue+idem",
                 "kiel-many+idem"):
        if ours in results:
            for name, rate in results.items():
                if not name.startswith("kiel") and name.endswith("+idem") == ours.endswith(
                        "+idem"):
                    print(f"  {ours} / {name}: {results[ours] / rate:.2f}x (records per "
                          f"client CPU second: {per_cpu[ours] / per_cpu[name]:.2f}x)")
    for suffix in ("", "+idem"):
        if "kiel" + suffix in results and "kiel-enqueue" + suffix in results:
            print(f"  kiel-enqueue{suffix} / kiel{suffix}: "
                  f"{results['kiel-enqueue' + suffix] / results['kiel' + suffix]:.2f}x "
                  f"(per client CPU second: "
                  f"{per_cpu['kiel-enqueue' + suffix] / per_cpu['kiel' + suffix]:.2f}x)")
    for name in results:
        if name + "+idem" in results:
            cost = 100 * (1 - results[name + "+idem"] / results[name])
            print(f"  idempotence costs {name} {cost:.0f}% of its rate")
    if args.memory:
        memory_rows(min(100_000, n))


def memory_rows(n: int = 100_000) -> None:
    """Memory per pending record (tracemalloc), printed: ``n`` records queued
    with ``produce()`` (a future each, kept until all are queued, or
    dropped at once: ``produce-dropped``) and with ``produce_many()``, none
    sent (no broker: the topic's metadata is made up), keys and partitions
    as in the run."""
    from kiel.cluster import PartitionInfo

    async def main(how: str) -> float:
        producer = Producer("127.0.0.1:1", required_acks=ACKS, linger=3600,
                            max_pending_bytes=2**30, idempotent=False)
        topic = "bench-memory"
        producer.cluster.partitions[topic] = {
            p: PartitionInfo(topic, p, 0, (0,), (0,), 0) for p in range(PARTITIONS)}
        producer._sender.wake_at = lambda when: None  # nothing is sent  # noqa: E731
        records = _records(n)
        values = [VALUE] * n
        keys = None if KEYS is None else KEYS[:n]
        producer.produce(topic, VALUE, *records[0])  # the route and queues exist
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        if how == "produce":
            futures = [producer.produce(topic, VALUE, key, part) for key, part in records]
            del futures  # the producer holds them: an application that keeps none
        elif how == "produce-dropped":
            # The futures dropped as the loop goes: a batch that closes lets
            # them go (the producer's unheld check).
            produce = producer.produce
            for key, part in records:
                produce(topic, VALUE, key, part)
        elif PARTS is None:
            producer.produce_many(topic, values, keys=keys)
        else:
            for p in range(PARTITIONS):
                producer.produce_many(topic, values[p::PARTITIONS], partition=p,
                                      keys=None if keys is None else keys[p::PARTITIONS])
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        return used / n

    for how in ("produce", "produce-dropped", "produce_many"):
        try:
            per = asyncio.run(main(how))
        except Exception:  # a benchmark never fails: report and go on
            print(f"  memory of {how}: failed")
            traceback.print_exc(file=sys.stdout)
            continue
        print(f"  memory per pending record, {how}: {per:.0f} bytes "
              f"(the {len(VALUE)}-byte value shared, keys made before)")


if __name__ == "__main__":
    main()
