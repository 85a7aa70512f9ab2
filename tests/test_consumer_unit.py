"""The consumer's pure logic, without a broker.

Decoding into a partition's buffer, fetch-size growth, deserializer failures,
start-position arithmetic and settings are plain functions of their input:
they are tested here directly (hypothesis where the input space is large).
Everything that talks to a broker is in ``test_consumer.py``.
"""
import asyncio
import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kiel.clients.fetcher as fetcher_module
from kiel.clients.consumer import SingleConsumer
from kiel.clients.fetcher import Fetcher, to_timestamp
from kiel.clients.records import BEGINNING, END, TopicPartition, lag_of
from kiel.cluster import Cluster
from kiel.exc import (
    ConfigError,
    CorruptMessageError,
    DeserializationError,
    MessageTooLargeError,
)
from kiel.protocol.list_offsets import EARLIEST, LATEST
from kiel.protocol.messages import (
    CODEC_GZIP,
    assign_offsets,
    decode_message_set,
    encode_message_set,
)

TP = TopicPartition("t", 0)


def make_fetcher(**options):
    return Fetcher(Cluster("127.0.0.1:1"), **options)


def log_of(messages, codec=0, base=0):
    """A message set as a broker stores it (offsets assigned from ``base``)."""
    data, _count = assign_offsets(encode_message_set(messages, codec), base)
    return data


def decode(fetcher, data, offset=0):
    async def go():
        st = fetcher.state(TP)
        healthy = await fetcher._decode(st, offset, st.epoch, data)
        return healthy, st

    return asyncio.run(go())


# --------------------------------------------------------------------------
# decoding into the buffer


def test_decode_fills_the_buffer_and_yields_between_slices():
    fetcher = make_fetcher(decode_budget=0)
    messages = [(b"k%d" % i, b"v" * 100) for i in range(5000)]  # ~670 KB: many slices
    fetcher.assign(TP, 0)
    healthy, st = decode(fetcher, log_of(messages))
    assert healthy and st.answered
    assert [(r.key, r.value) for r in st.buffer] == messages
    assert [r.offset for r in st.buffer] == list(range(5000))
    assert st.next_offset == 5000 and st.position == 0  # handed out only by fetch()
    assert fetcher.yields >= 5  # a budget of 0 yields after every 64 KiB slice


def test_decode_drops_a_cut_trailing_message_and_messages_before_the_position():
    fetcher = make_fetcher()
    data = log_of([(None, b"a" * 50)] * 10)
    fetcher.assign(TP, 3)
    healthy, st = decode(fetcher, data[:-7], offset=3)  # the broker cut the last one
    assert healthy
    assert [r.offset for r in st.buffer] == list(range(3, 9))
    assert st.next_offset == 9


def test_a_position_inside_a_compressed_wrapper():
    fetcher = make_fetcher()
    data = log_of([(None, b"m%d" % i) for i in range(10)], codec=CODEC_GZIP, base=100)
    fetcher.assign(TP, 105)
    healthy, st = decode(fetcher, data, offset=105)
    assert healthy and [r.offset for r in st.buffer] == list(range(105, 110))
    # All before the position: the position moves past the wrapper.
    fetcher.seek(TP, 110)
    healthy, st = decode(fetcher, data, offset=110)
    assert healthy and st.buffer == [] and st.position == 110


def test_fetch_size_doubles_then_message_too_large():
    fetcher = make_fetcher(max_bytes=1024, max_fetch_size=8192)
    fetcher.assign(TP, 7)
    big = log_of([(None, b"x" * 5000)], base=7)
    healthy, st = decode(fetcher, big[:1024], offset=7)
    assert not healthy and st.error is None
    assert st.fetch_size == 8192  # doubled until the announced 5 KB fit (cap 8 KiB)
    assert decode(fetcher, big, offset=7)[0]  # now it fits
    huge = log_of([(None, b"x" * 9000)], base=8)
    fetcher.seek(TP, 8)
    healthy, st = decode(fetcher, huge[:8192], offset=8)
    assert not healthy
    assert isinstance(st.error, MessageTooLargeError)
    assert (st.error.topic, st.error.partition, st.error.offset) == ("t", 0, 8)


def test_fetch_size_grows_step_by_step_when_the_size_is_unknown():
    fetcher = make_fetcher(max_bytes=8, max_fetch_size=128)
    fetcher.assign(TP, 0)
    data = log_of([(None, b"x" * 40)])  # 66 bytes with its log overhead
    healthy, st = decode(fetcher, data[:8])
    assert not healthy and st.fetch_size == 16  # not even the size prefix: just double
    healthy, st = decode(fetcher, data[:16])
    assert not healthy and st.fetch_size == 128  # 66 needed: doubled past it
    healthy, st = decode(fetcher, data)
    assert healthy and len(st.buffer) == 1
    small = make_fetcher(max_bytes=8, max_fetch_size=64)
    small.assign(TP, 0)
    decode(small, data[:8])
    healthy, st = decode(small, data[:16])
    assert isinstance(st.error, MessageTooLargeError)  # 66 > 64: no point growing


def test_a_corrupt_message_is_kept_as_the_partition_error():
    fetcher = make_fetcher()
    fetcher.assign(TP, 0)
    data = bytearray(log_of([(None, b"good"), (None, b"evil")]))
    data[-1] ^= 0xFF
    healthy, st = decode(fetcher, bytes(data))
    assert not healthy and st.buffer == []
    assert isinstance(st.error, CorruptMessageError)
    assert (st.error.topic, st.error.partition, st.error.offset) == ("t", 0, 1)


def test_a_failing_deserializer_keeps_the_good_prefix():
    fetcher = make_fetcher(deserializer=lambda v: int(v))
    fetcher.assign(TP, 0)
    healthy, st = decode(fetcher, log_of([(None, b"1"), (None, b"2"), (None, b"x"), (None, b"4")]))
    assert [r.value for r in st.buffer] == [1, 2]
    assert isinstance(st.error, DeserializationError) and st.error.offset == 2
    assert isinstance(st.error.__cause__, ValueError)


def test_results_of_a_sought_partition_are_dropped():
    fetcher = make_fetcher(decode_budget=0)
    fetcher.assign(TP, 0)
    data = log_of([(None, b"v" * 100)] * 3000)

    async def go():
        st = fetcher.state(TP)
        task = asyncio.ensure_future(fetcher._decode(st, 0, st.epoch, data))
        await asyncio.sleep(0)  # the decoder yields after its first slice
        fetcher.seek(TP, 42)
        assert await task is False
        return st

    st = asyncio.run(go())
    assert st.buffer == [] and st.position == 42


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(0, 700), min_size=1, max_size=40),
    keys=st.booleans(),
    cut=st.integers(0, 200),
    chunk=st.integers(16, 900),
    position=st.integers(0, 45),
)
def test_sliced_decode_equals_whole_decode(sizes, keys, cut, chunk, position):
    """Cutting the set into slices anywhere never changes what is decoded."""
    messages = [(b"k%d" % i if keys else None, bytes([i % 251]) * n) for i, n in enumerate(sizes)]
    data = log_of(messages)
    data = data[: max(0, len(data) - cut)]
    expected = decode_message_set(data, "t", 0, min_offset=position)
    names = ("_DECODE_CHUNK", "_MIN_DECODE_CHUNK", "_MAX_DECODE_CHUNK")
    saved = [getattr(fetcher_module, name) for name in names]
    for name in names:
        setattr(fetcher_module, name, chunk)
    try:
        fetcher = make_fetcher(decode_budget=0, max_bytes=1 << 20)
        fetcher.assign(TP, position)
        healthy, state = decode(fetcher, data, offset=position)
    finally:
        for name, value in zip(names, saved):
            setattr(fetcher_module, name, value)
    assert state.buffer == expected.records
    if expected.first_message_too_large:
        assert not healthy
    else:
        assert healthy
        if expected.records:
            assert state.next_offset == expected.records[-1].offset + 1


# --------------------------------------------------------------------------
# start positions, lag, settings


def test_to_timestamp():
    assert to_timestamp(BEGINNING) == EARLIEST
    assert to_timestamp(END) == LATEST
    aware = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    assert to_timestamp(aware) == 1577836800000
    assert to_timestamp(aware.replace(tzinfo=None)) == 1577836800000  # naive means UTC
    tz = datetime.timezone(datetime.timedelta(hours=2))
    assert to_timestamp(datetime.datetime(2020, 1, 1, 2, tzinfo=tz)) == 1577836800000
    assert to_timestamp(datetime.timedelta(minutes=1), now=1000.0) == 940000
    for bad in (datetime.timedelta(seconds=-1), "end", None, 1.5):
        with pytest.raises(ConfigError):
            to_timestamp(bad)


def test_lag_of():
    assert lag_of(None, 3) is None and lag_of(10, None) is None
    assert lag_of(10, 3) == 7 and lag_of(10, 12) == 0


@pytest.mark.parametrize(
    "options",
    [
        {"max_wait_time": -1},
        {"min_bytes": -1},
        {"max_bytes": 0},
        {"max_bytes": 2048, "max_fetch_size": 1024},
        {"offset_reset": "smallest"},
        {"decode_budget": -0.1},
        {"max_bytes": True},
    ],
)
def test_bad_settings(options):
    with pytest.raises(ConfigError):
        SingleConsumer("127.0.0.1:1", **options)


def test_assignment_bookkeeping():
    fetcher = make_fetcher()
    other = TopicPartition("t", 1)
    fetcher.assign(TP, 5)
    fetcher.assign(other, 0)
    assert fetcher.assignment() == [TP, other] and fetcher.is_assigned(other)
    fetcher.pause(other)
    assert fetcher.paused() == [other]
    fetcher.resume(other)
    fetcher.unassign(other)
    assert fetcher.assignment() == [TP] and not fetcher.is_assigned(other)
    assert fetcher.position(TP) == 5 and fetcher.highwater(TP) is None
    with pytest.raises(ConfigError):
        fetcher.seek(TP, -1)
    with pytest.raises(ConfigError):
        fetcher.assign(other, -2)

