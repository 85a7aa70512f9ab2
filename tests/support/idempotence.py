"""Keyed records for the idempotent producer, Tansu behind a Kafka-frame-aware
fault proxy, and the judge of what was written."""

import time
from collections import Counter
from typing import Any, Dict, Iterator, List, Tuple

import confluent_kafka
import pytest

from kiel.testing.process import free_ports
from kiel.testing.tansu import TansuBroker
from tests.conftest import unique

KEYS = 24
PARTITIONS = 4


@pytest.fixture
def proxied_tansu(fault_proxy: Any) -> Iterator[Tuple[TansuBroker, Any]]:
    """Tansu behind a Kafka-frame-aware fault proxy that it advertises."""
    (port,) = free_ports(1)
    proxy = fault_proxy(("127.0.0.1", port), kafka=True)
    broker = TansuBroker(port=port, advertised_port=proxy.port)
    broker.start()
    yield broker, proxy
    broker.close()


def records(count: int) -> List[Tuple[bytes, bytes]]:
    """``count`` keyed records, ``(key, value)``; the value names key and number."""
    out = []
    for i in range(count):
        key = b"key-%02d" % (i % KEYS)
        out.append((key, key + b":%06d" % (i // KEYS)))
    return out


def confluent_read(bootstrap: str, topic: str, at_least: int, idle: float = 3.0, *,
                   isolation: str = "read_uncommitted",
                   partitions: int = PARTITIONS) -> List[bytes]:
    """Every value of ``topic``'s first ``partitions`` in partition-then-offset
    order, read by confluent-kafka with ``isolation`` until at least
    ``at_least`` came and then ``idle`` seconds passed with nothing new
    (Tansu's latest offset is not to be trusted, so the end is found by
    waiting)."""
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique("ck"),
        "enable.auto.commit": False, "isolation.level": isolation,
    })
    got: Dict[int, List[Tuple[int, bytes]]] = {}
    count = 0
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 60
        last = time.monotonic()
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None or message.error():
                if count >= at_least and time.monotonic() - last > idle:
                    break
                continue
            got.setdefault(message.partition(), []).append((message.offset(), message.value()))
            count += 1
            last = time.monotonic()
    finally:
        consumer.close()
    return [value for p in sorted(got) for _, value in sorted(got[p])]


def judge(values: List[bytes], count: int) -> Dict[str, int]:
    """Duplicates, missing and out-of-order records per key of a read-back log."""
    expected = Counter(value for _, value in records(count))
    seen = Counter(values)
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    missing = sum(1 for value in expected if value not in seen)
    unknown = sum(1 for value in seen if value not in expected)
    # Order per key: within a partition (all of a key's records are in one),
    # each key's numbers must only grow (a duplicate written later counts
    # as out of order only when it goes back).
    out_of_order = 0
    last: Dict[bytes, int] = {}
    for value in values:
        key, number = value.split(b":")
        n = int(number)
        if n < last.get(key, -1):
            out_of_order += 1
        last[key] = max(n, last.get(key, -1))
    return {"duplicates": duplicates, "missing": missing, "unknown": unknown,
            "out_of_order": out_of_order}


CLEAN = {"duplicates": 0, "missing": 0, "unknown": 0, "out_of_order": 0}

