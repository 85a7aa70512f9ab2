"""Consume from an embedded Kafka 0.8.2 cluster with kiel's SingleConsumer.

Runs as is (no Kafka, no ZooKeeper needed)::

    python examples/consume.py

It starts a 3-broker embedded cluster from ``kiel.testing``, produces JSON
events, then reads them back: a batch at a time with ``consume()``, record
by record with ``async for ... in stream()``, then again after
``seek_to(BEGINNING)`` and ``seek()``. It prints positions and lag on the way.
"""
import asyncio

from kiel import SingleConsumer
from kiel.clients import Producer
from kiel.exc import KielError
from kiel.serializers import json_deserializer, json_serializer
from kiel.testing.broker import EmbeddedCluster

TOPIC = "events"


async def produce(bootstrap: str, count: int, start: int = 0) -> None:
    async with Producer(bootstrap, serializer=json_serializer) as producer:
        await asyncio.gather(
            *(producer.produce(TOPIC, {"n": n}) for n in range(start, start + count))
        )


async def consume_events(bootstrap: str) -> None:
    await produce(bootstrap, 1000)
    consumer = SingleConsumer(
        bootstrap,
        deserializer=json_deserializer,  # bytes on the wire, dicts here
        max_wait_time=0.5,  # seconds a fetch may wait for data
    )
    async with consumer:  # connect() now, close() at the end
        # A batch at a time: each call returns what one fetch round brought.
        seen = 0
        while seen < 1000:
            try:
                records = await consumer.consume(TOPIC, start=SingleConsumer.BEGINNING)
            except KielError as e:  # every failure is a typed kiel error
                print(f"consume failed: {e}")
                raise
            seen += len(records)
        print(f"read {seen} events; lag per partition: {consumer.lag(TOPIC)}")
        for partition in consumer.partitions(TOPIC):
            print(
                f"  {TOPIC}[{partition}]: position {consumer.position(TOPIC, partition)}, "
                f"high watermark {consumer.highwater(TOPIC, partition)}"
            )

        # An empty round: nothing new arrives within max_wait_time.
        print("nothing new:", await consumer.consume(TOPIC))

        # Record by record, as new events arrive. Leaving the loop loses
        # nothing: the next consume() goes on after the last record received.
        producing = asyncio.ensure_future(produce(bootstrap, 5, start=1000))
        streamed = 0
        async for record in consumer.stream(TOPIC):
            print(f"  streamed {record.value} from {TOPIC}[{record.partition}] @ {record.offset}")
            streamed += 1
            if streamed == 5:
                break
        await producing

        # Back to the beginning of every partition, and read it all again.
        await consumer.seek_to(TOPIC, SingleConsumer.BEGINNING)
        again = 0
        while again < 1005:
            again += len(await consumer.consume(TOPIC))
        print(f"read all {again} events again after seek_to(BEGINNING)")

        # One partition from an offset.
        consumer.seek(TOPIC, 0, 330)
        records = await consumer.consume(TOPIC)
        print("partition 0 from offset 330:", [(r.offset, r.value) for r in records])

def main() -> None:
    with EmbeddedCluster(brokers=3, partitions=3, topics={TOPIC: 3}) as cluster:
        asyncio.run(consume_events(cluster.bootstrap))


if __name__ == "__main__":
    main()
