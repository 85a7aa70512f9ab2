"""Producing to and reading committed offsets from the embedded cluster, for the Spark tests."""

import asyncio

from kazoo.client import KazooClient

from kiel.producer import Producer


def produce(cluster, topic, n, prefix="m", keyed=True):
    """Produce n records; return their (partition, offset, key, value)."""

    async def run():
        producer = Producer(cluster.bootstrap, linger=0.002)
        await producer.connect()
        keys = [f"{prefix}-k{i % 17}".encode() if keyed else None for i in range(n)]
        values = [f"{prefix}-{i}".encode() for i in range(n)]
        futures = [producer.produce(topic, v, key=k) for k, v in zip(keys, values)]
        metas = await asyncio.gather(*futures)
        await producer.close()
        return [(m.partition, m.offset, k, v) for m, k, v in zip(metas, keys, values)]

    return asyncio.run(run())


def zk_offsets(cluster, group, topic, partitions):
    client = KazooClient(hosts=cluster.zookeeper, timeout=10.0)
    client.start(timeout=15.0)
    try:
        out = {}
        for p in partitions:
            path = f"/consumers/{group}/offsets/{topic}/{p}"
            if client.exists(path):
                out[p] = int(client.get(path)[0].decode())
        return out
    finally:
        client.stop()
        client.close()

