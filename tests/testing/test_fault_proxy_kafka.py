"""The fault proxy's Kafka frame rules (``FaultProxy(kafka=True)``): a cut right
after a Produce answer, and a rewritten Produce error code.

Against Tansu (which advertises the proxy) with a producer that neither
retries nor numbers its batches, so what the client sees is what the rule
did; then read back: the broker did write the batch.
"""
import struct
from typing import Any, List

import pytest

from kiel import Producer
from kiel.exc import ConfigError, DeliveryUnknownError, HarnessError, NotLeaderForPartitionError
from kiel.testing.faults import FaultProxy
from kiel.testing.faults.frames import FrameWatch, KafkaRules, _Rule
from tests.conftest import run, unique
from tests.support.idempotence import confluent_read, proxied_tansu

__all__ = ["proxied_tansu"]  # the fixture, used by name


async def produce_one(bootstrap: str, topic: str, value: bytes) -> Any:
    async with Producer(bootstrap, idempotent=False, retries=0) as producer:
        try:
            return await producer.produce(topic, value)
        except Exception as e:  # the test looks at which
            return e


def test_a_cut_after_a_produce_answer(proxied_tansu: Any) -> None:
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("cut-after"), 1)
    proxy.cut_after_produce(1, times=1)
    outcome = run(produce_one(broker.bootstrap, topic, b"written"))
    assert isinstance(outcome, DeliveryUnknownError), outcome
    assert proxy.kafka_stats() == {"produce_answers": 1, "cut": 1, "rewritten": 0,
                                   "answered": 0}
    # The broker wrote it; the next answer passes (times=1).
    second = run(produce_one(broker.bootstrap, topic, b"second"))
    assert second.offset == 1
    assert confluent_read(broker.bootstrap, topic, 2, idle=1.0) == [b"written", b"second"]


def test_a_rewritten_produce_error(proxied_tansu: Any) -> None:
    broker, proxy = proxied_tansu
    topic = broker.create_topic(unique("rewrite"), 1)
    proxy.rewrite_produce_error(NotLeaderForPartitionError.errno, every=2, times=1)
    first = run(produce_one(broker.bootstrap, topic, b"one"))
    second = run(produce_one(broker.bootstrap, topic, b"two"))
    third = run(produce_one(broker.bootstrap, topic, b"three"))
    assert first.offset == 0 and third.offset == 2
    assert isinstance(second, NotLeaderForPartitionError), second
    assert proxy.kafka_stats()["rewritten"] == 1
    assert confluent_read(broker.bootstrap, topic, 3, idle=1.0) == [b"one", b"two", b"three"]


def test_the_rules_need_kafka_true_and_good_arguments() -> None:
    with FaultProxy(("127.0.0.1", 9)) as plain:
        with pytest.raises(HarnessError, match="kafka=True"):
            plain.cut_after_produce(3)
    with FaultProxy(("127.0.0.1", 9), kafka=True) as proxy:
        for bad in (-1, 1.5, "2"):
            with pytest.raises(ConfigError):
                proxy.cut_after_produce(bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            proxy.rewrite_produce_error(2**15)
        with pytest.raises(ConfigError):
            proxy.rewrite_produce_error(45, times=0)
        proxy.cut_after_produce(0)  # clears: fine
        assert proxy.kafka_stats() == {"produce_answers": 0, "cut": 0, "rewritten": 0,
                                       "answered": 0}


def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _produce_request(correlation_id: int, acks: int, version: int = 3) -> bytes:
    header = struct.pack(">hhih", 0, version, correlation_id, 4) + b"kiel"
    body = struct.pack(">h", -1) if version >= 3 else b""  # null transactional id
    return _frame(header + body + struct.pack(">hi", acks, 1000) + b"\0\0\0\0")


def _produce_answer(correlation_id: int, version: int = 3) -> bytes:
    partition = struct.pack(">ihq", 0, 0, 41) + (struct.pack(">q", -1) if version >= 2 else b"")
    body = struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1) + partition
    return _frame(struct.pack(">i", correlation_id) + body + struct.pack(">i", 0))


def test_the_frame_watch_splits_frames_across_chunks_and_rewrites() -> None:
    rules = KafkaRules()
    rules.rewrite_rule = _Rule(every=1, times=None, code=45)
    watch = FrameWatch(rules)
    request = _produce_request(7, acks=-1) + _produce_request(8, acks=0)
    passed: List[bytes] = []
    for i in range(len(request)):  # one byte at a time
        out, reset = watch.upstream(request[i:i + 1])
        assert not reset
        passed.append(out)
    assert b"".join(passed) == request  # unchanged, in whole frames
    answer = _produce_answer(7)
    out, reset = watch.downstream(answer[:5])
    assert (out, reset) == (b"", False)
    out, reset = watch.downstream(answer[5:])
    assert not reset and len(out) == len(answer)
    assert struct.unpack_from(">hq", out, 8 + 4 + 3 + 4 + 4) == (45, -1)
    assert rules.counts() == {"produce_answers": 1, "cut": 0, "rewritten": 1, "answered": 0}


def test_the_frame_watch_cuts_and_gives_up_on_what_is_not_kafka() -> None:
    rules = KafkaRules()
    rules.cut_rule = _Rule(every=2, times=None)
    watch = FrameWatch(rules)
    watch.upstream(_produce_request(1, acks=1) + _produce_request(2, acks=1))
    out, reset = watch.downstream(_produce_answer(1) + _produce_answer(2) + _produce_answer(3))
    assert reset and out == _produce_answer(1)  # the second answer never passes
    other = FrameWatch(KafkaRules())
    garbage = b"\xff\xff\xff\xffnot kafka"
    assert other.upstream(garbage) == (garbage, False)
    assert other.upstream(b"more") == (b"more", False)
