"""Produce to an embedded Kafka 0.8.2 cluster with kiel's Producer.

Runs as is (no Kafka, no ZooKeeper needed)::

    python examples/produce.py

It starts a 3-broker embedded cluster from ``kiel.testing``, produces JSON
events keyed by user (one user's events stay in order on one partition),
waits for every acknowledgement, and prints where the records went.
"""
import asyncio
import collections

from kiel.exc import KielError
from kiel.producer import Producer
from kiel.serializers import json_serializer
from kiel.testing.broker import EmbeddedCluster


async def produce_events(bootstrap: str) -> None:
    producer = Producer(
        bootstrap,
        serializer=json_serializer,  # values are dicts here, bytes on the wire
        key_maker=lambda event: event["user"].encode(),  # same user, same partition
        compression="snappy",
        linger=0.005,
    )
    async with producer:  # connect() now, close() (which flushes) at the end
        # One record, waiting for its acknowledgement:
        topic, partition, offset = await producer.produce("events", {"user": "ada", "n": 0})
        print(f"first event: {topic}[{partition}] @ {offset}")

        # Many records in flight at once: produce() returns a future at once.
        futures = [
            producer.produce("events", {"user": user, "n": n})
            for n in range(1, 1001)
            for user in ("ada", "grace", "alan")
        ]
        per_partition = collections.Counter()
        for future in asyncio.as_completed(futures):
            try:
                meta = await future
            except KielError as e:  # every failure is a typed kiel error
                print(f"not delivered: {e}")
            else:
                per_partition[meta.partition] += 1
        print("acknowledged per partition:", dict(sorted(per_partition.items())))


def main() -> None:
    with EmbeddedCluster(brokers=3, partitions=3, topics={"events": 3}) as cluster:
        asyncio.run(produce_events(cluster.bootstrap))
        for partition in range(3):
            start, end = cluster.offsets("events", partition)
            print(f"events[{partition}] holds offsets {start}..{end - 1}")


if __name__ == "__main__":
    main()
