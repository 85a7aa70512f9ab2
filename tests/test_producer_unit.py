"""Producer pieces that need no broker: the incremental message encoder (byte
for byte what kiel.protocol.messages and kafka-python write), settings, and
the errors produce() raises before anything is sent."""
import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiel import compression
from kiel.clients.producer import MESSAGE_OVERHEAD, Producer, RecordMetadata, encode_message
from kiel.exc import (
    ClientClosedError,
    ConfigError,
    MessageSizeTooLargeError,
    SerializationError,
)
from kiel.protocol.messages import decode_message_set, encode_message_set

maybe_bytes = st.none() | st.binary(max_size=300)


@given(st.lists(st.tuples(maybe_bytes, maybe_bytes), max_size=20))
@settings(max_examples=300)
def test_incremental_encoder_matches_encode_message_set(messages):
    buf = bytearray()
    for i, (key, value) in enumerate(messages):
        encode_message(buf, i, key, value)
    assert bytes(buf) == encode_message_set(messages)
    for key, value in messages:
        entry = bytearray()
        encode_message(entry, 0, key, value)
        assert len(entry) == MESSAGE_OVERHEAD + len(key or b"") + len(value or b"")


@pytest.mark.parametrize("codec", ["gzip", "snappy"])
def test_batch_payload_matches_encode_message_set(codec):
    messages = [(None, b"v%d" % i) for i in range(50)] + [(b"k", b"keyed"), (b"", None)]
    producer = Producer("127.0.0.1:1", compression=codec)
    batch_buf = bytearray()
    for i, (key, value) in enumerate(messages):
        encode_message(batch_buf, i, key, value)
    wrapper = bytearray()
    encode_message(wrapper, 0, None, producer.codec.compress(batch_buf), producer.codec_id)
    assert bytes(wrapper) == encode_message_set(messages, compression.codec_id_for(codec))
    decoded = decode_message_set(bytes(wrapper))
    assert [(r.key, r.value) for r in decoded.records] == messages


def test_gzip_level_default_and_setting():
    assert Producer("h", compression="gzip").codec.level == 6
    assert Producer("h", compression="gzip", gzip_level=9).codec.level == 9
    with pytest.raises(ConfigError):
        Producer("h", compression="gzip", gzip_level=10)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"required_acks": 2},
        {"required_acks": True},
        {"compression": "zstd"},
        {"compression": 1},
        {"batch_size": 0},
        {"max_pending_bytes": -1},
        {"max_message_size": 1.5},
        {"linger_ms": -1},
        {"buffer_timeout": -0.1},
        {"partitioner": "murmur2"},
        {"serializer": 42},
        {"ack_timeout": 40},  # not shorter than request_timeout (30)
        {"request_timeout": 0},
    ],
)
def test_bad_settings_raise_config_error(kwargs):
    with pytest.raises(ConfigError):
        Producer("127.0.0.1:9092", **kwargs)


def test_ack_timeout_only_matters_with_acks_all():
    assert Producer("h", required_acks=1, ack_timeout=40).ack_timeout == 40
    assert Producer("h", request_timeout=8).ack_timeout == 4


def test_caller_errors_raise_before_anything_is_sent():
    async def main():
        p = Producer("127.0.0.1:1", max_message_size=100)
        with pytest.raises(SerializationError):
            p.produce("t", "str")
        with pytest.raises(SerializationError):
            p.produce("t", b"v", key=1)
        with pytest.raises(MessageSizeTooLargeError):
            p.produce("t", b"x" * 75)
        with pytest.raises(ConfigError):
            p.produce(b"t", b"v")
        assert p.pending_bytes == 0 and p.pending_records == 0
        await p.close()
        with pytest.raises(ClientClosedError):
            p.produce("t", b"v")
        with pytest.raises(ClientClosedError):
            await p.enqueue("t", b"v")

    asyncio.run(main())


def test_serializer_that_returns_text_is_refused():
    async def main():
        p = Producer("127.0.0.1:1", serializer=str)
        with pytest.raises(SerializationError, match="value must be bytes"):
            p.produce("t", 42)
        await p.close()

    asyncio.run(main())


def test_record_metadata_is_a_tuple():
    meta = RecordMetadata("t", 1, 42)
    topic, partition, offset = meta
    assert (topic, partition, offset) == ("t", 1, 42) == meta
