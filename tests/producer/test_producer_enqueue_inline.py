"""enqueue() takes produce()'s inlined path written out again (issue 34,
second round: a call less per record): with room in the buffer, a record
enqueued goes where produce() would send it, shares its round-robin and key
cache, fills the same batches in the same order, and refuses the same way.
Against the embedded cluster, read back with kafka-python."""
import asyncio
from typing import Any, List, Optional, Tuple

import pytest

from kiel.exc import ConfigError, MessageSizeTooLargeError, SerializationError
from kiel.producer import Producer
from kiel.producer.partitioners import key_partition
from tests.conftest import run
from tests.support.producer import read_back


def _mixed(n: int) -> List[Tuple[Optional[bytes], bytes, Optional[int]]]:
    """(key, value, partition): unkeyed round-robin, keyed, named, mixed."""
    records: List[Tuple[Optional[bytes], bytes, Optional[int]]] = []
    for i in range(n):
        kind = i % 4
        key = b"user-%d" % (i % 37) if kind == 1 else None
        partition = i % 3 if kind == 2 else None
        records.append((key, b"v%05d" % i, partition))
    return records


def test_produce_and_enqueue_interleaved_place_records_alike(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    records = _mixed(4000)

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, batch_size=2048, linger=0.002) as p:
            await p.connect()
            futures = []
            for i, (key, value, partition) in enumerate(records):
                if (i // 5) % 2:
                    futures.append(await p.enqueue(topic, value, key, partition))
                else:
                    futures.append(p.produce(topic, value, key, partition))
                if i % 700 == 0:
                    await asyncio.sleep(0)
            return await asyncio.gather(*futures)

    metas = run(main())
    # Unkeyed records take the partitions in turn, whichever call queued
    # them: one round-robin counter.
    unkeyed = [m.partition for m, (k, _, p) in zip(metas, records) if k is None and p is None]
    assert all((b - a) % 3 == 1 for a, b in zip(unkeyed, unkeyed[1:]))
    for meta, (key, _, partition) in zip(metas, records):
        if key is not None:
            assert meta.partition == key_partition(key, [0, 1, 2])
        elif partition is not None:
            assert meta.partition == partition
    for partition in range(3):
        mine = sorted((m.offset, v) for m, (_, v, _) in zip(metas, records)
                      if m.partition == partition)
        assert [o for o, _ in mine] == list(range(len(mine)))
        got = read_back(kafka_cluster.bootstrap, topic, partition, len(mine))
        # produce order within the partition, whichever call queued it
        assert [m.value for m in got] == [v for _, v in mine]
        assert [m.value for m in got] == [
            v for m, (_, v, _) in zip(metas, records) if m.partition == partition]


@pytest.mark.parametrize("args, error", [
    ((b"x" * 2000,), MessageSizeTooLargeError),
    (("text",), SerializationError),
    ((b"x", None, -1), ConfigError),
    ((b"x", None, True), ConfigError),
])
def test_enqueue_refuses_what_produce_refuses(kafka_cluster, topic_factory, args, error):
    topic = topic_factory(partitions=2)

    async def main() -> Tuple[Any, Any]:
        async with Producer(kafka_cluster.bootstrap, max_message_size=1000) as p:
            await p.connect()
            await p.produce(topic, b"warm")  # the route is loaded: the inlined path
            caught = []
            for call in (p.produce, p.enqueue):
                try:
                    result = call(topic, *args)
                    if asyncio.iscoroutine(result):
                        await result
                except Exception as exc:  # noqa: BLE001 - compared below
                    caught.append(type(exc))
            return caught, p.pending_records

    caught, pending = run(main())
    assert caught == [error, error]
    assert pending == 0
