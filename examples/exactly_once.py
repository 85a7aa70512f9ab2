"""Consume, transform, produce, exactly once: a Tornado app on a broker group.

Each member reads an input topic in a consumer group the brokers coordinate,
transforms each record, and writes the results to an output topic in a
transaction that also commits the input offsets they came from
(``send_offsets_to_transaction`` with the consumer's ``group_metadata()``).
A crash at any point leaves either the whole transaction (output and
offsets) or none of it: the next owner of a partition starts from the last
committed offset, and a read_committed reader of the output sees each
input's output once. ``tests/producer/test_exactly_once.py`` kills members with
SIGKILL at random points and checks that.

Why it holds, step by step:

* the producer connects **before** the consumer joins: its InitProducerId
  (same ``--transactional-id`` as the member's previous life) aborts a
  transaction the killed process left open, so none of its output counts;
* records are finished (``task_done``) only **after** their transaction
  committed, with ``auto_finish=False`` and no timed commits: a rebalance
  waits (``revoke_timeout``) until the member has committed what it holds
  before the partition moves, so the next owner starts after it;
* a transaction that fails is aborted and the partitions it covered are
  sought back to its first offsets, so their records are done again.

Each member needs its own transactional id, the same for each of its
restarts (here: the member's name).

Run it (needs the Python packages only; kiel.testing starts noida-db)::

    python examples/exactly_once.py                 # a demo: 300 records, one member

or as one member of a real deployment::

    python examples/exactly_once.py --bootstrap kafka1:9092 --input in --output out \\
        --group enricher --transactional-id enricher-1
"""
import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from typing import Any, Optional

from tornado.ioloop import IOLoop

from kiel import GroupedConsumer, Producer
from kiel.exc import KielError, ProducerFencedError


def transform(value: Optional[bytes]) -> bytes:
    """The application's work on one record."""
    return b"out-" + (value or b"")


async def member(bootstrap: str, source: str, sink: str, group: str, transactional_id: str,
                 stop: asyncio.Event, max_records: int = 100, pause: float = 0.0,
                 static: bool = True) -> int:
    """Run one member until ``stop`` is set; returns the transactions committed."""
    producer = Producer(bootstrap, transactional_id=transactional_id)
    # First: fences this member's previous life and aborts what it left open.
    await producer.connect()
    consumer = GroupedConsumer(
        bootstrap, group, topics=[source], auto_finish=False, commit_interval=None,
        session_timeout=6.0, heartbeat_interval=1.0, max_wait_time=0.2,
        max_records=max_records, revoke_timeout=20.0, max_poll_interval=20.0,
        join_timeout=120.0,
        # A restart takes its previous life's place in the group at once
        # (static membership, KIP-345), instead of waiting for its session
        # to expire.
        group_instance_id=transactional_id if static else None)
    committed = 0
    try:
        await consumer.connect()
        print(f"{transactional_id}: joined", flush=True)
        while not stop.is_set():
            records = await consumer.consume()
            if not records:
                continue
            first: dict[tuple[str, int], int] = {}
            offsets: dict[tuple[str, int], int] = {}
            for record in records:
                tp = (record.topic, record.partition)
                first.setdefault(tp, record.offset)
                offsets[tp] = record.offset + 1
            try:
                async with producer.transaction():
                    for record in records:
                        producer.produce(sink, transform(record.value), key=record.key)
                    if pause:
                        await asyncio.sleep(pause)  # a window for the test's kills
                    await producer.send_offsets_to_transaction(
                        offsets, consumer.group_metadata())
            except ProducerFencedError:
                raise  # another process has this member's id: stop
            except KielError as e:
                # Aborted: nothing of it counts. Do these records again.
                print(f"{transactional_id}: transaction aborted ({e}); again", flush=True)
                for (topic, partition), offset in first.items():
                    if (topic, partition) in set(consumer.assignment()):
                        consumer.seek(topic, partition, offset)
                continue
            committed += 1
            for record in records:  # only now may the partitions move on
                consumer.task_done(record)
    finally:
        await producer.close()
        await consumer.close()
    return committed


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap")
    parser.add_argument("--input", default="eo-in")
    parser.add_argument("--output", default="eo-out")
    parser.add_argument("--group", default="eo")
    parser.add_argument("--transactional-id", default="eo-1")
    parser.add_argument("--max-records", type=int, default=100)
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds each transaction stays open (tests)")
    parser.add_argument("--dynamic", action="store_true",
                        help="join as a dynamic member (no group_instance_id)")
    args = parser.parse_args(argv)
    if args.bootstrap is None:
        demo()
        return

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        done = await member(args.bootstrap, args.input, args.output, args.group,
                            args.transactional_id, stop, args.max_records, args.pause,
                            not args.dynamic)
        print(f"{args.transactional_id}: stopped after {done} transactions", flush=True)

    IOLoop.current().run_sync(run)


def demo() -> None:
    """300 input records through one member on noida-db, read committed."""
    import confluent_kafka
    import confluent_kafka.admin

    from kiel.testing.noida import NoidaBroker

    with NoidaBroker() as broker:
        bootstrap = broker.bootstrap

        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([confluent_kafka.admin.NewTopic(name, 3, 1)
                                           for name in ("eo-in", "eo-out")]).values():
            future.result(30)

        async def run() -> int:
            async with Producer(bootstrap) as plain:
                await asyncio.gather(*(plain.produce("eo-in", b"%d" % i) for i in range(300)))
            stop = asyncio.Event()
            task = asyncio.ensure_future(
                member(bootstrap, "eo-in", "eo-out", "eo", "eo-1", stop))
            reader = confluent_kafka.Consumer({
                "bootstrap.servers": bootstrap, "group.id": "eo-reader",
                "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
            reader.subscribe(["eo-out"])
            seen: list[Any] = []
            loop = asyncio.get_running_loop()
            while len(seen) < 300:
                message = await loop.run_in_executor(None, reader.poll, 0.5)
                if message is not None and not message.error():
                    seen.append(message.value())
            reader.close()
            stop.set()
            return await task

        transactions = IOLoop.current().run_sync(run)
        print(f"300 inputs, 300 outputs read committed, in {transactions} transactions")


if __name__ == "__main__":
    main(sys.argv[1:])
