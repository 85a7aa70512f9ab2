"""GroupedConsumers of a ZooKeeper group on the embedded cluster, and what they drained."""

import asyncio
import time
from typing import Any, Dict, List, Optional, Tuple

from kiel.clients import Producer
from kiel.consumer import GroupedConsumer


async def produce(cluster: Any, topic: str, values: List[bytes],
                  partition: Optional[int] = None) -> None:
    producer = Producer(cluster.bootstrap, linger=0.005)
    await producer.connect()
    try:
        futures = [producer.produce(topic, v, partition=partition) for v in values]
        await asyncio.gather(*futures)
    finally:
        await producer.close()


def grouped(cluster: Any, group: str, topics: Any, **options: Any) -> GroupedConsumer:
    options.setdefault("max_wait_time", 0.2)
    options.setdefault("zk_session_timeout", 6.0)
    options.setdefault("commit_interval", 1.0)
    return GroupedConsumer(cluster.bootstrap, group, zk_hosts=cluster.zookeeper, topics=topics,
                           **options)


async def drain(consumers: List[GroupedConsumer], want: int, seen: Dict[Tuple[str, int, int], int],
                timeout: float = 30.0) -> None:
    """Consume with every consumer concurrently until ``want`` distinct records were seen."""
    deadline = time.monotonic() + timeout

    async def one(c: GroupedConsumer) -> None:
        while len(seen) < want and time.monotonic() < deadline:
            for r in await c.consume():
                key = (r.topic, r.partition, r.offset)
                seen[key] = seen.get(key, 0) + 1

    await asyncio.gather(*(one(c) for c in consumers))

