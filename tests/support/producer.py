"""Reading back what a producer wrote, and running blocking work off the loop."""

import asyncio
import time
from typing import Any, List


def read_back(bootstrap: str, topic: str, partition: int, count: int,
              timeout: float = 30.0) -> List[Any]:
    """The first ``count`` records of a partition, read with kafka-python (api 0.8.2)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        api_version=(0, 8, 2),
        enable_auto_commit=False,
        fetch_max_bytes=8 * 1024 * 1024,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records: List[Any] = []
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200, max_records=100000).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


async def in_thread(func: Any, *args: Any) -> Any:
    """Call a (blocking) harness method without blocking the client's loop."""
    return await asyncio.get_running_loop().run_in_executor(None, func, *args)

