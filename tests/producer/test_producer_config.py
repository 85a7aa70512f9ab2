"""Producer settings refused at construction (issue 30 items 3 and 6), and the
idempotence defaults: on where it can be, off (said once) where the
application asked for what it cannot give, an error where it asked for both.

Construction needs no broker; the 0.8 behaviour runs on the embedded broker.
"""
import logging
from typing import Any

import pytest

from kiel import Producer
from kiel.exc import ConfigError, UnsupportedFeatureError
from kiel.protocol.messages import MESSAGE_OVERHEAD
from tests.conftest import run


def producer(**options: Any) -> Producer:
    return Producer("127.0.0.1:1", **options)


@pytest.mark.parametrize("options, words", [
    ({"batch_size": 2**40}, "larger than max_request_size"),
    ({"batch_size": 2 * 1048576}, "larger than max_request_size"),
    ({"max_request_size": 1}, "smaller than max_message_size"),
    ({"max_request_size": 2**31}, "larger than any Kafka request"),
    ({"max_request_size": 2**40, "batch_size": 2**40}, "larger than any Kafka request"),
    ({"max_pending_bytes": 1}, "below one record"),
    ({"max_pending_bytes": MESSAGE_OVERHEAD - 1}, "below one record"),
])
def test_sizes_that_could_never_work_are_config_errors(options: Any, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        producer(**options)


def test_sizes_at_their_bounds_are_fine() -> None:
    producer(batch_size=1048576)
    producer(max_pending_bytes=MESSAGE_OVERHEAD)
    producer(max_request_size=100, max_message_size=100, batch_size=100)


@pytest.mark.parametrize("acks", [0, 1])
def test_idempotent_true_with_other_acks_is_a_config_error(acks: int) -> None:
    with pytest.raises(ConfigError, match="required_acks=-1"):
        producer(idempotent=True, required_acks=acks)


def test_idempotent_true_with_more_than_5_in_flight_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="at most 5"):
        producer(idempotent=True, max_batches_in_flight=6)
    assert producer(idempotent=True, max_batches_in_flight=5).max_batches_in_flight == 5


@pytest.mark.parametrize("bad", ["yes", 1, 0.0])
def test_idempotent_takes_none_true_or_false(bad: Any) -> None:
    with pytest.raises(ConfigError, match="idempotent"):
        producer(idempotent=bad)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "5"])
def test_max_batches_in_flight_is_a_positive_int(bad: Any) -> None:
    with pytest.raises(ConfigError, match="max_batches_in_flight"):
        producer(max_batches_in_flight=bad)


def test_the_default_is_idempotent_until_a_broker_says_otherwise() -> None:
    p = producer()
    assert p.idempotent is None  # undecided: no broker asked yet
    assert p.max_batches_in_flight == 5 and p.producer_id == -1
    assert producer(idempotent=False).idempotent is False
    assert producer(idempotent=False).max_batches_in_flight == 1


@pytest.mark.parametrize("options, why", [
    ({"required_acks": 1}, "required_acks=1"),
    ({"required_acks": 0}, "required_acks=0"),
    ({"max_batches_in_flight": 8}, "max_batches_in_flight=8"),
])
def test_other_acks_turn_idempotence_off_said_once_at_info(
        caplog: pytest.LogCaptureFixture, options: Any, why: str) -> None:
    with caplog.at_level(logging.INFO, logger="kiel.producer"):
        p = producer(**options)
    assert p.idempotent is False
    said = [r for r in caplog.records if "idempotence is off" in r.getMessage()]
    assert len(said) == 1 and why in said[0].getMessage() and said[0].levelno == logging.INFO


def test_idempotence_asked_off_is_not_announced(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kiel.producer"):
        producer(idempotent=False, required_acks=1)
    assert not [r for r in caplog.records if "idempotence" in r.getMessage()]


def test_on_kafka_0_8_idempotence_is_off_without_a_word(
        kafka_cluster: Any, topic_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    topic = topic_factory(partitions=2)

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap) as p:
            assert p.idempotent is False and p.producer_id == -1
            assert p.max_batches_in_flight == 1  # as before idempotence existed
            return await p.produce(topic, b"plain", key=b"k")

    with caplog.at_level(logging.INFO, logger="kiel.producer"):
        meta = run(main())
    assert meta.offset >= 0
    assert not [r for r in caplog.records if "idempot" in r.getMessage()]


def test_on_kafka_0_8_idempotent_true_fails_at_connect(kafka_cluster: Any) -> None:
    async def main() -> None:
        p = Producer(kafka_cluster.bootstrap, idempotent=True)
        try:
            await p.connect()
        finally:
            await p.close()

    with pytest.raises(UnsupportedFeatureError, match="InitProducerId"):
        run(main())


def test_on_tansu_the_default_is_idempotent(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic("cfg-idem-default", 1)

    async def main() -> Any:
        async with Producer(tansu_broker.bootstrap) as p:
            assert p.idempotent is True and p.producer_id >= 0 and p.producer_epoch >= 0
            return await p.produce(topic, b"once")

    assert run(main()).offset >= 0
