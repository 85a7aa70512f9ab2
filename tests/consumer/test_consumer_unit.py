"""The consumer's pure logic, without a broker.

Decoding into a partition's buffer, fetch-size growth, deserializer failures,
the subscription's partition states, start-position arithmetic, reading
offsets answers, finished-offset bookkeeping and settings are plain functions
of their input: they are tested here directly (hypothesis where the input
space is large). Everything that talks to a broker is in ``test_consumer.py``,
``test_grouped.py`` and ``test_offsets.py``.
"""
import ast
import asyncio
import datetime
import os
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kiel.consumer.decoder as decoder_module
from kiel._aio import Wakeup
from kiel.cluster import Cluster
from kiel.consumer import BEGINNING, END, GroupedConsumer, SingleConsumer
from kiel.consumer.commits import Held
from kiel.consumer.decoder import Decoder
from kiel.consumer.fetcher import Fetcher
from kiel.consumer.offsets import GroupOffsets, commit_answers, fetch_answers
from kiel.consumer.positions import check_offset, lag_of, to_timestamp
from kiel.consumer.subscription import PartitionState, Status, Subscription
from kiel.exc import (
    ConfigError,
    CorruptMessageError,
    DeserializationError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    InvalidTopicError,
    MessageTooLargeError,
    NotCoordinatorForConsumerError,
    NotLeaderForPartitionError,
    OffsetMetadataTooLargeError,
    UnknownPartitionError,
    UnknownTopicOrPartitionError,
)
from kiel.protocol import (
    OffsetCommitPartitionData,
    OffsetCommitPartitionDataV7,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitRequestV2,
    OffsetCommitRequestV7,
    OffsetCommitResponse,
    OffsetCommitResponseV7,
    OffsetCommitTopicData,
    OffsetCommitTopicDataV7,
    OffsetCommitTopicResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchPartitionResponseV5,
    OffsetFetchRequest,
    OffsetFetchRequestV1,
    OffsetFetchRequestV5,
    OffsetFetchResponse,
    OffsetFetchResponseV1,
    OffsetFetchResponseV5,
    OffsetFetchTopicData,
    OffsetFetchTopicResponse,
    OffsetFetchTopicResponseV5,
)
from kiel.protocol.list_offsets import EARLIEST, LATEST
from kiel.protocol.messages import (
    CODEC_GZIP,
    assign_offsets,
    decode_message_set,
    encode_message_set,
)
from kiel.retry import Backoff
from kiel.structs import Record, TopicPartition

TP = TopicPartition("t", 0)


def make(position=0, max_bytes=1024 * 1024, max_fetch_size=16 * 1024 * 1024, **options):
    """A decoder and the state of partition ``TP`` at ``position``."""
    decoder = Decoder(max_fetch_size=max_fetch_size, **options)
    return decoder, PartitionState(TP, position, max_bytes)


def log_of(messages, codec=0, base=0):
    """A message set as a broker stores it (offsets assigned from ``base``)."""
    data, _count = assign_offsets(encode_message_set(messages, codec), base)
    return data


def decode(decoder, state, data, want=10**9):
    """Decode ``data`` as the answer to a fetch at the state's position.

    Returns whether the fetcher would count it a healthy round (records, or
    an empty set; not a fetch to grow, a dropped answer or an error).
    """
    Decoder.received(state, data)
    asyncio.run(decoder.decode(state, want))
    return state.answered and state.error is None


def drain_all(decoder, state, want):
    """Decode and hand out ``want`` records at a time until the raw answer is gone."""
    out = []
    rounds = 0
    while True:
        asyncio.run(decoder.decode(state, want))
        if not state.buffer:
            assert state.raw is None
            return out, rounds
        rounds += 1
        out.extend(state.buffer)
        state.buffer = []
        state.position = state.next_offset


def test_decode_materialises_about_what_is_asked_for_not_a_time_slice():
    """Once the decoder knows the records' size, a call decodes about
    ``want`` records, not a slice sized by time (hundreds to thousands):
    the records decoded ahead live until handed out, and whatever is alive
    when the collector runs is promoted and walked by full collections
    (measured: 8 full collections per million records before, none after)."""
    messages = [(None, b"v" * 100) for _ in range(3000)]
    data = log_of(messages)
    decoder, state = make(decode_budget=0)
    Decoder.received(state, data)
    want = 50
    per_record = len(data) // len(messages)
    bound = want + decoder_module._MIN_DECODE_CHUNK // per_record + 1
    sizes = []
    while True:
        asyncio.run(decoder.decode(state, want))
        if not state.buffer:
            break
        sizes.append(len(state.buffer))
        state.position = state.next_offset
        state.buffer = []
    assert sum(sizes) == len(messages)
    # The first call sizes its slice by time (the size is not known yet).
    assert max(sizes[1:]) <= bound, sizes


# --------------------------------------------------------------------------
# decoding into the buffer


def test_decode_fills_the_buffer_and_yields_between_slices():
    decoder, state = make(decode_budget=0)
    messages = [(b"k%d" % i, b"v" * 100) for i in range(5000)]  # ~670 KB: many slices
    assert decode(decoder, state, log_of(messages))
    assert state.answered
    assert [(r.key, r.value) for r in state.buffer] == messages
    assert [r.offset for r in state.buffer] == list(range(5000))
    assert state.next_offset == 5000 and state.position == 0  # handed out only by a drain
    assert decoder.yields >= 5  # a budget of 0 yields after every 64 KiB slice


def test_decode_drops_a_cut_trailing_message_and_messages_before_the_position():
    decoder, state = make(position=3)
    data = log_of([(None, b"a" * 50)] * 10)
    assert decode(decoder, state, data[:-7])  # the broker cut the last one
    assert [r.offset for r in state.buffer] == list(range(3, 9))
    assert state.next_offset == 9


def test_a_position_inside_a_compressed_wrapper():
    decoder, state = make(position=105)
    data = log_of([(None, b"m%d" % i) for i in range(10)], codec=CODEC_GZIP, base=100)
    assert decode(decoder, state, data)
    assert [r.offset for r in state.buffer] == list(range(105, 110))
    # Before the position, with progress: the position moves past them.
    state.seek(103)
    data = log_of([(None, b"m%d" % i) for i in range(3)], codec=CODEC_GZIP, base=100)
    data += log_of([(None, b"n")], base=103)
    assert decode(decoder, state, data)
    assert [r.offset for r in state.buffer] == [103]
    # Only messages before the position and no progress (no broker answers
    # so): a typed error, never the same fetch again and again in silence.
    state.seek(110)
    assert not decode(decoder, state, log_of([(None, b"old")], base=100))
    assert isinstance(state.error, CorruptMessageError) and state.error.offset == 110
    assert state.buffer == [] and state.position == 110 and state.raw is None


def test_fetch_size_doubles_then_message_too_large():
    decoder, state = make(position=7, max_bytes=1024, max_fetch_size=8192)
    big = log_of([(None, b"x" * 5000)], base=7)
    assert not decode(decoder, state, big[:1024])
    assert state.error is None
    assert state.fetch_size == 8192  # doubled until the announced 5 KB fit (cap 8 KiB)
    assert decode(decoder, state, big)  # now it fits
    huge = log_of([(None, b"x" * 9000)], base=8)
    state.seek(8)
    assert not decode(decoder, state, huge[:8192])
    assert isinstance(state.error, MessageTooLargeError)
    assert (state.error.topic, state.error.partition, state.error.offset) == ("t", 0, 8)


def test_fetch_size_grows_step_by_step_when_the_size_is_unknown():
    decoder, state = make(max_bytes=8, max_fetch_size=128)
    data = log_of([(None, b"x" * 40)])  # 66 bytes with its log overhead
    assert not decode(decoder, state, data[:8])
    assert state.fetch_size == 16  # not even the size prefix: just double
    assert not decode(decoder, state, data[:16])
    assert state.fetch_size == 128  # 66 needed: doubled past it
    assert decode(decoder, state, data)
    assert len(state.buffer) == 1
    small, state = make(max_bytes=8, max_fetch_size=64)
    decode(small, state, data[:8])
    decode(small, state, data[:16])
    assert isinstance(state.error, MessageTooLargeError)  # 66 > 64: no point growing


def test_a_corrupt_message_is_kept_as_the_partition_error():
    decoder, state = make()
    data = bytearray(log_of([(None, b"good"), (None, b"evil")]))
    data[-1] ^= 0xFF
    assert not decode(decoder, state, bytes(data))
    # The good message before it is handed out; the error waits at its own offset.
    assert [r.value for r in state.buffer] == [b"good"] and state.raw is None
    assert isinstance(state.error, CorruptMessageError)
    assert (state.error.topic, state.error.partition, state.error.offset) == ("t", 0, 1)


def test_a_failing_deserializer_keeps_the_good_prefix():
    decoder, state = make(deserializer=lambda v: int(v))
    decode(decoder, state, log_of([(None, b"1"), (None, b"2"), (None, b"x"), (None, b"4")]))
    assert [r.value for r in state.buffer] == [1, 2]
    assert isinstance(state.error, DeserializationError) and state.error.offset == 2
    assert isinstance(state.error.__cause__, ValueError)


def test_deserializers_are_not_called_for_nulls():
    decoder, state = make(deserializer=bytes.decode, key_deserializer=bytes.upper)
    assert decode(decoder, state, log_of([(b"k", None), (None, b"v")]))
    assert [(r.key, r.value) for r in state.buffer] == [(b"K", None), (None, "v")]


def test_results_of_a_sought_partition_are_dropped():
    decoder, state = make(decode_budget=0)
    data = log_of([(None, b"v" * 100)] * 3000)

    async def go():
        Decoder.received(state, data)
        task = asyncio.ensure_future(decoder.decode(state))
        await asyncio.sleep(0)  # the decoder yields after its first slice
        state.seek(42)
        await task

    asyncio.run(go())
    assert state.buffer == [] and state.position == 42 and state.raw is None


def test_an_answer_for_an_unassigned_partition_is_dropped():
    decoder = Decoder(max_fetch_size=1 << 20)
    subscription = Subscription(1 << 20)
    subscription.assign(TP, 0)
    state = subscription.state(TP)
    Decoder.received(state, log_of([(None, b"v")]))
    subscription.unassign(TP)
    assert state.status is Status.UNASSIGNED and state.raw is None
    asyncio.run(decoder.decode(state))
    assert state.buffer == []


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
    saved = [getattr(decoder_module, name) for name in names]
    for name in names:
        setattr(decoder_module, name, chunk)
    try:
        decoder, state = make(position=position, decode_budget=0)
        healthy = decode(decoder, state, data)
    finally:
        for name, value in zip(names, saved):
            setattr(decoder_module, name, value)
    assert state.buffer == expected.records
    stuck = not expected.records and expected.next_offset is not None \
        and expected.next_offset <= position
    if expected.first_message_too_large:
        assert not healthy
    elif stuck:  # only messages before the position: an error, not a silent retry
        assert not healthy and isinstance(state.error, CorruptMessageError)
    else:
        assert healthy
        if expected.records:
            assert state.next_offset == expected.records[-1].offset + 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(0, 300), min_size=1, max_size=60),
    cut=st.integers(0, 100),
    chunk=st.integers(16, 900),
    want=st.integers(1, 25),
    gzip_every=st.integers(0, 7),
)
def test_decoding_on_demand_hands_out_the_whole_answer_in_bounded_rounds(
    sizes, cut, chunk, want, gzip_every
):
    """An answer decoded ``want`` records at a time, drained between rounds,
    gives exactly what decoding it whole gives; no round holds more than
    ``want`` records plus one slice."""
    pieces = []
    base = 0
    for start in range(0, len(sizes), 5):
        group = [(None, bytes([(start + i) % 251]) * n)
                 for i, n in enumerate(sizes[start:start + 5])]
        codec = CODEC_GZIP if gzip_every and (start // 5) % gzip_every == 0 else 0
        pieces.append(log_of(group, codec=codec, base=base))
        base += len(group)
    data = b"".join(pieces)
    data = data[: max(0, len(data) - cut)]
    expected = decode_message_set(data, "t", 0)
    names = ("_DECODE_CHUNK", "_MIN_DECODE_CHUNK", "_MAX_DECODE_CHUNK")
    saved = [getattr(decoder_module, name) for name in names]
    for name in names:
        setattr(decoder_module, name, chunk)
    try:
        decoder, state = make(decode_budget=0)
        Decoder.received(state, data)
        records, rounds = drain_all(decoder, state, want)
    finally:
        for name, value in zip(names, saved):
            setattr(decoder_module, name, value)
    # A rest that is only a message cut at the fetch size is no error: it is
    # fetched again from the position.
    assert state.error is None
    if expected.first_message_too_large:
        assert records == []
        return
    assert records == expected.records
    # A slice is ``chunk`` bytes, or widened to twice the largest message:
    # at most that over 26 (the smallest message) plain messages, plus a
    # gzip wrapper of five cut in.
    slice_bytes = max(chunk, 2 * (max(sizes) + 64))
    assert decoder.peak_records <= want + slice_bytes // 26 + 5
    assert rounds >= len(expected.records) / (want + slice_bytes // 26 + 5)


def test_an_answer_is_decoded_only_as_far_as_asked():
    decoder, state = make()
    data = log_of([(None, b"v" * 100)] * 20000)  # ~2.5 MB: many slices
    Decoder.received(state, data)
    asyncio.run(decoder.decode(state, 100))
    assert 100 <= len(state.buffer) < 20000 and state.raw is data
    assert [r.offset for r in state.buffer] == list(range(len(state.buffer)))
    records, rounds = drain_all(decoder, state, 100)
    assert [r.offset for r in records] == list(range(20000))
    assert rounds >= 20000 / (100 + _MAX_SLICE_RECORDS)
    assert decoder.peak_records <= 100 + _MAX_SLICE_RECORDS


#: Records of 126 bytes (100-byte values) in the largest slice (1 MiB).
_MAX_SLICE_RECORDS = 1024 * 1024 // 126 + 1


# --------------------------------------------------------------------------
# the subscription's partition states


def test_partition_states_move_as_documented():
    changes = []
    subscription = Subscription(512, on_change=lambda: changes.append(1))
    subscription.assign(TP)  # no position yet
    assert subscription.status(TP) is Status.AWAITING_RESET
    assert subscription.position(TP) == -1
    assert subscription.wanted(None) == set()  # not fetched until it has a position
    subscription.assign(TP)  # again without a position: left as it is
    assert len(changes) == 1
    subscription.seek(TP, 5)
    assert subscription.status(TP) is Status.FETCHING and subscription.position(TP) == 5
    assert subscription.wanted(None) == {TP} and subscription.wanted([TP, ("u", 1)]) == {TP}
    subscription.pause(TP)
    assert subscription.status(TP) is Status.PAUSED and subscription.paused() == [TP]
    subscription.seek(TP, 6)  # a paused partition stays paused
    assert subscription.status(TP) is Status.PAUSED
    subscription.resume(TP)
    assert subscription.with_status(Status.FETCHING) == [TP]
    state = subscription.state(TP)
    subscription.unassign(TP)
    assert state.status is Status.UNASSIGNED and not state.current(6, state.epoch)
    assert subscription.status(TP) is Status.UNASSIGNED and not subscription.is_assigned(TP)
    subscription.unassign(TP)  # no-op
    # assign, seek, seek, resume, unassign fired; pause and the no-ops did not.
    assert len(changes) == 5
    with pytest.raises(UnknownPartitionError):
        subscription.position(TP)


def test_assigning_again_seeks_and_drops_what_was_fetched():
    subscription = Subscription(512)
    subscription.assign(TP, 3)
    state = subscription.state(TP)
    state.buffer = ["record"]
    state.error = ConfigError("kept")
    state.failures, state.retry_at, state.answered = 2, 99.0, True
    epoch = state.epoch
    subscription.assign(TP, 10)
    assert subscription.state(TP) is state
    assert (state.position, state.next_offset, state.buffer, state.error) == (10, 10, [], None)
    assert (state.failures, state.retry_at, state.answered) == (0, 0.0, False)
    assert state.epoch == epoch + 1 and not state.current(3, epoch)


def test_drain_hands_out_only_fetching_partitions_and_moves_their_position():
    subscription = Subscription(512)
    other = TopicPartition("t", 1)
    for tp in (TP, other):
        subscription.assign(tp, 0)
        state = subscription.state(tp)
        state.buffer, state.next_offset = ["a", "b"], 2
    subscription.pause(other)
    assert subscription.drain({TP, other}) == {TP: ["a", "b"]}
    assert subscription.position(TP) == 2 and subscription.position(other) == 0
    assert subscription.state(other).buffer == ["a", "b"]  # kept while paused


def test_errors_are_taken_once_and_not_from_paused_partitions():
    subscription = Subscription(512)
    other = TopicPartition("t", 1)
    subscription.assign(TP, 0)
    subscription.assign(other, 0)
    subscription.state(TP).error = ConfigError("first")
    subscription.state(other).error = ConfigError("second")
    subscription.pause(TP)
    assert str(subscription.take_error({TP, other})) == "second"
    assert subscription.take_error({TP, other}) is None
    subscription.resume(TP)
    assert str(subscription.take_error({TP, other})) == "first"


def test_retriable_failures_back_off_for_as_long_as_they_last():
    subscription = Subscription(512)
    subscription.assign(TP, 7)
    state = subscription.state(TP)
    backoff = Backoff(base=1.0, cap=4.0, retries=2)
    assert state.failed(NotLeaderForPartitionError(), backoff, now=100.0)
    assert 100.5 <= state.retry_at <= 101.0 and state.failures == 1
    assert subscription.retry_delay({TP}, now=100.0) == pytest.approx(state.retry_at - 100.0)
    assert state.failed(NotLeaderForPartitionError(), backoff, now=100.0)
    assert 101.0 <= state.retry_at <= 102.0  # doubled, with equal jitter
    # Past the backoff's retries a retriable failure is still retried (a
    # consumer rides out an outage), the delay capped; it never becomes the
    # partition's error (before: kept, and raised by consume()).
    for _ in range(5):
        error = NotLeaderForPartitionError()
        assert state.failed(error, backoff, now=100.0)
    assert state.error is None and 102.0 <= state.retry_at <= 104.0
    assert (error.topic, error.partition, error.offset) == ("t", 0, 7)
    fatal = InvalidTopicError()
    assert not state.failed(fatal, backoff, now=100.0)  # not retriable: kept at once
    assert state.error is fatal


def test_a_round_is_answered_when_every_fetchable_partition_was():
    subscription = Subscription(512)
    other = TopicPartition("t", 1)
    subscription.assign(TP, 0)
    subscription.assign(other, 0)
    assert not subscription.all_answered({TP, other})
    subscription.state(TP).answered = True
    subscription.pause(other)
    assert subscription.all_answered({TP, other})


# --------------------------------------------------------------------------
# offsets answers


def test_fetched_offsets_and_the_two_spellings_of_none():
    response = OffsetFetchResponse([OffsetFetchTopicResponse("t", [
        OffsetFetchPartitionResponse(0, 5, "", 0),
        OffsetFetchPartitionResponse(1, -1, "", 0),  # never committed
        OffsetFetchPartitionResponse(2, -1, "", UnknownTopicOrPartitionError.errno),  # 0.8.2
        OffsetFetchPartitionResponse(3, 9, "", UnknownTopicOrPartitionError.errno),
        OffsetFetchPartitionResponse(4, -1, "", NotCoordinatorForConsumerError.errno),
    ])])
    found, errors = fetch_answers(response, "g")
    assert found == {TopicPartition("t", 0): 5, TopicPartition("t", 1): None,
                     TopicPartition("t", 2): None}
    assert [type(e) for e in errors] == [UnknownTopicOrPartitionError,
                                         NotCoordinatorForConsumerError]
    assert (errors[0].group, errors[0].partition, errors[0].api) == ("g", 3, "OffsetFetch")


def test_commit_answers_drop_committed_partitions_and_spot_refused_metadata():
    tps = [TopicPartition("t", p) for p in range(4)]
    response = OffsetCommitResponse([OffsetCommitTopicResponse("t", [
        OffsetCommitPartitionResponse(0, 0),
        OffsetCommitPartitionResponse(1, OffsetMetadataTooLargeError.errno),
        OffsetCommitPartitionResponse(2, NotCoordinatorForConsumerError.errno),
        OffsetCommitPartitionResponse(9, 0),  # not asked for: ignored
    ])])
    remaining = {tp: 10 for tp in tps}
    errors, refused = commit_answers(response, remaining, "meta", "g")
    assert refused and sorted(remaining) == tps[1:]  # partition 3 was left out
    assert [type(e) for e in errors] == [NotCoordinatorForConsumerError]
    # Without metadata to drop, a refusal is an error like any other.
    errors, refused = commit_answers(response, {tps[1]: 10}, "", "g")
    assert not refused and [type(e) for e in errors] == [OffsetMetadataTooLargeError]


def test_commit_requests_in_each_negotiated_version():
    # Standalone by default (the ZooKeeper group: generation -1, no member id).
    offsets = GroupOffsets(Cluster("127.0.0.1:1"), "g")
    assert (offsets.generation_id, offsets.member_id, offsets.group_instance_id) == (-1, "", None)
    wanted = {TopicPartition("u", 1): 7, TopicPartition("t", 0): 5}
    assert offsets.commit_request(0, wanted, "m") == OffsetCommitRequest("g", [
        OffsetCommitTopicData("t", [OffsetCommitPartitionData(0, 5, "m")]),
        OffsetCommitTopicData("u", [OffsetCommitPartitionData(1, 7, "m")])])
    assert offsets.commit_request(2, wanted, "") == OffsetCommitRequestV2("g", -1, "", -1, [
        OffsetCommitTopicData("t", [OffsetCommitPartitionData(0, 5, "")]),
        OffsetCommitTopicData("u", [OffsetCommitPartitionData(1, 7, "")])])
    assert offsets.commit_request(7, wanted, "") == OffsetCommitRequestV7("g", -1, "", None, [
        OffsetCommitTopicDataV7("t", [OffsetCommitPartitionDataV7(0, 5, -1, "")]),
        OffsetCommitTopicDataV7("u", [OffsetCommitPartitionDataV7(1, 7, -1, "")])])
    # A member of a broker-coordinated group: given at construction or set
    # after each join, read when the request is built.
    member = GroupOffsets(Cluster("127.0.0.1:1"), "g", generation_id=3, member_id="m-1",
                          group_instance_id="host-1")
    assert member.commit_request(7, {TP: 1}, "")[:4] == ("g", 3, "m-1", "host-1")
    assert member.commit_request(2, {TP: 1}, "")[:4] == ("g", 3, "m-1", -1)
    member.generation_id, member.member_id, member.group_instance_id = 4, "m-2", None
    assert member.commit_request(7, {TP: 1}, "")[:4] == ("g", 4, "m-2", None)


def test_fetch_requests_in_each_negotiated_version():
    offsets = GroupOffsets(Cluster("127.0.0.1:1"), "g")
    tps = [TopicPartition("u", 1), TopicPartition("t", 0), TopicPartition("t", 2)]
    topics = [OffsetFetchTopicData("t", [0, 2]), OffsetFetchTopicData("u", [1])]
    assert offsets.fetch_request(0, tps) == OffsetFetchRequest("g", topics)
    assert offsets.fetch_request(1, tps) == OffsetFetchRequestV1("g", topics)
    assert type(offsets.fetch_request(1, tps)) is OffsetFetchRequestV1
    assert offsets.fetch_request(5, tps) == OffsetFetchRequestV5("g", topics)


def test_commit_answers_of_v7():
    response = OffsetCommitResponseV7(0, [OffsetCommitTopicResponse("t", [
        OffsetCommitPartitionResponse(0, 0),
        OffsetCommitPartitionResponse(1, IllegalGenerationError.errno)])])
    remaining = {TP: 1, TopicPartition("t", 1): 2}
    errors, refused = commit_answers(response, remaining, "", "g")
    assert remaining == {TopicPartition("t", 1): 2} and not refused
    assert [type(e) for e in errors] == [IllegalGenerationError]
    # A commit from a generation the group has left is not retried.
    with pytest.raises(IllegalGenerationError):
        GroupOffsets(Cluster("127.0.0.1:1"), "g")._retry_or_raise(errors)


def test_fetched_offsets_of_v1_and_v5():
    v1 = OffsetFetchResponseV1([OffsetFetchTopicResponse("t", [
        OffsetFetchPartitionResponse(0, 5, "", 0)])])
    assert fetch_answers(v1, "g") == ({TP: 5}, [])
    v5 = OffsetFetchResponseV5(0, [OffsetFetchTopicResponseV5("t", [
        OffsetFetchPartitionResponseV5(0, 5, 3, "meta", 0),
        OffsetFetchPartitionResponseV5(1, -1, -1, None, 0)])], 0)
    assert fetch_answers(v5, "g") == ({TP: 5, TopicPartition("t", 1): None}, [])


@pytest.mark.parametrize("error", [NotCoordinatorForConsumerError, GroupAuthorizationFailedError])
def test_a_group_wide_fetch_error_is_judged_and_the_offsets_not_trusted(error):
    # Since v2 a group-wide error comes in the top-level error code, with
    # partitions that carry none of their own (their -1 is not "never committed").
    v5 = OffsetFetchResponseV5(0, [OffsetFetchTopicResponseV5("t", [
        OffsetFetchPartitionResponseV5(0, -1, -1, None, 0)])], error.errno)
    found, errors = fetch_answers(v5, "g")
    assert found == {}
    assert [type(e) for e in errors] == [error]
    assert (errors[0].group, errors[0].api, errors[0].partition) == ("g", "OffsetFetch", None)
    offsets = GroupOffsets(Cluster("127.0.0.1:1"), "g")
    offsets._coordinator = 1
    if error.retriable:
        assert offsets._retry_or_raise(errors) is errors[0] and offsets._coordinator is None
    else:
        with pytest.raises(error):
            offsets._retry_or_raise(errors)


def test_coordinator_errors_are_retried_and_forget_the_coordinator():
    offsets = GroupOffsets(Cluster("127.0.0.1:1"), "g")
    offsets._coordinator = 1
    error = NotCoordinatorForConsumerError(group="g")
    assert offsets._retry_or_raise([error]) is error and offsets._coordinator is None
    offsets._coordinator = 1
    assert offsets._retry_or_raise([UnknownTopicOrPartitionError()]) is not None
    assert offsets._coordinator == 1  # retriable, but the coordinator is fine
    with pytest.raises(OffsetMetadataTooLargeError):
        offsets._retry_or_raise([OffsetMetadataTooLargeError()])
    assert offsets._retry_or_raise([]) is None


# --------------------------------------------------------------------------
# finished offsets (a grouped consumer's hand-out bookkeeping)


def test_finished_position_follows_the_first_unfinished_record():
    held = Held(10)
    assert held.finished == 10
    held.hand_out([_record(10), _record(11), _record(12)])
    held.hand_out_one(13)
    assert held.finished == 10 and held.end == 14
    assert held.finish(12) == 0 and held.finished == 10  # out of order: waits
    assert held.finish(10) == 1 and held.finished == 11
    assert held.finish(11) == 2 and held.finished == 13  # 11, then the waiting 12
    assert held.finish(9) == 0
    assert held.finish_through(13) == 1 and held.finished == 14
    held.hand_out([_record(14), _record(15)])
    assert held.finish_all() == 2 and held.finished == 16


def _record(offset):
    return Record("t", 0, offset, None, b"v")


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


def test_lag_of_and_check_offset():
    assert lag_of(None, 3) is None and lag_of(10, None) is None
    assert lag_of(10, 3) == 7 and lag_of(10, 12) == 0
    assert check_offset(0) == 0
    for bad in (-1, True, 1.0, "3"):
        with pytest.raises(ConfigError):
            check_offset(bad, "t", 0)


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


@pytest.mark.parametrize("cls_name", ["SingleConsumer", "GroupedConsumer"])
def test_millisecond_max_wait_time_from_kiel_09_is_refused(cls_name):
    import kiel

    cls = getattr(kiel, cls_name)
    args: tuple = ("127.0.0.1:1",)
    options = {}
    if cls_name == "GroupedConsumer":
        args += ("g",)
        options.update(zk_hosts="127.0.0.1:2181", topics=["t"])
    with pytest.raises(ConfigError, match="kiel 0.9 took milliseconds: 1000 ms is 1 s"):
        cls(*args, max_wait_time=1000, **options)
    cls(*args, max_wait_time=60, **options)  # the largest accepted


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        SingleConsumer("127.0.0.1:1", lambda v: v)  # type: ignore[misc]


def test_importing_the_consumers_does_not_import_kazoo():
    # Only a group kept in ZooKeeper needs kazoo: its adapter is imported when
    # such a consumer is built.
    code = (
        "import sys, kiel.consumer, kiel.consumer.offsets\n"
        "from kiel.consumer import SingleConsumer, ConsumerRebalanceListener, BEGINNING\n"
        "from kiel.consumer import GroupedConsumer\n"
        "assert 'kazoo' not in sys.modules, 'kazoo imported'\n"
        "GroupedConsumer('127.0.0.1:1', 'g', zk_hosts='127.0.0.1:2181', topics=['t'])\n"
        "assert 'kazoo' in sys.modules\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, cwd=root)
    assert result.returncode == 0, result.stderr


def test_nothing_under_kiel_consumer_imports_kazoo_or_an_adapter():
    # The seam: the consumer depends on kiel.consumer.membership alone; the
    # ZooKeeper group is an adapter behind it (found by name when used).
    root = os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "kiel")
    offenders = []
    for dirpath, _, files in os.walk(os.path.join(root, "consumer")):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    modules = [node.module or ""]
                else:
                    continue
                offenders += [f"{name}: {m}" for m in modules
                              if m.split(".")[0] == "kazoo" or m.startswith("kiel.zookeeper")
                              or m.startswith("kiel.coordinator")]
    assert offenders == []


def test_a_partition_unassigned_while_a_round_yielded_is_skipped_not_a_key_error():
    """A rebalance may unassign a partition while consume() yields to the
    loop; the round's decode step then skips it (a KeyError killed a
    grouped member's consume() in the randomized fault suite, seed 522129)."""
    subscription = Subscription(1 << 20)
    other = TopicPartition("t", 1)
    subscription.assign(TP, 0)
    subscription.assign(other, 0)
    wanted = subscription.wanted(None)
    Decoder.received(subscription.state(TP), log_of([(None, b"v")]))
    subscription.unassign(other)
    assert subscription.to_decode(wanted) == [subscription.state(TP)]
    assert subscription.buffered(wanted) == 0


def test_background_errors_kept_for_the_application_are_bounded() -> None:
    from kiel.consumer.base import MAX_PENDING_ERRORS

    consumer = SingleConsumer("127.0.0.1:1")
    for i in range(MAX_PENDING_ERRORS + 5):
        consumer._errors.append(ConfigError(str(i)))
    raised = []
    for _ in range(MAX_PENDING_ERRORS):
        with pytest.raises(ConfigError) as e:
            consumer._raise_pending()
        raised.append(int(str(e.value)))
    consumer._raise_pending()  # nothing left: no error
    # The newest are kept, in the order they happened.
    assert raised == list(range(5, MAX_PENDING_ERRORS + 5))


def test_a_paused_partitions_records_do_not_starve_the_others():
    """Records kept for a paused partition cannot be handed out, so they do
    not count against a round's decode budget: with ``max_records=1`` and a
    paused partition holding more, another partition's raw answer was never
    decoded and its records never came (found by tests/cli/test_cli.py's
    describe-vs-lag() test)."""
    subscription = Subscription(1 << 20)
    other = TopicPartition("t", 1)
    subscription.assign(TP, 0)
    subscription.assign(other, 0)
    subscription.state(TP).buffer = [_record(0), _record(1)]
    subscription.pause(TP)
    Decoder.received(subscription.state(other), log_of([(None, b"v")] * 3))
    assert subscription.buffered({TP, other}) == 0
    fetcher = Fetcher(Cluster("127.0.0.1:1"), subscription, make()[0], Wakeup())
    asyncio.run(fetcher._decode_wanted(None, 1))
    assert [r.offset for r in subscription.drain({TP, other}, 1)[other]] == [0]


@pytest.mark.parametrize("options,message", [
    ({"zk_hosts": "h:notaport"}, "is not 'host:port'"),
    ({"zk_hosts": "h:1,,"}, "is not 'host:port'"),
    ({"zk_hosts": ["h1:2181", "h2:2181"]}, "'h1:2181,h2:2181'"),
    ({"zk_auth": 123}, "zk_auth must be 'user:password'"),
    ({"join_timeout": -1}, "join_timeout must be seconds > 0"),
    ({"join_timeout": float("nan")}, "join_timeout must be seconds > 0"),
    ({"zk_session_timeout": 10000}, "10000 ms would be 10 s"),
    ({"zk_session_timeout": float("inf")}, "zk_session_timeout must be seconds"),
])
def test_a_zookeeper_groups_settings_are_checked_at_construction(options, message):
    options = {"zk_hosts": "127.0.0.1:2181", **options}
    zk_hosts = options.pop("zk_hosts")
    with pytest.raises(ConfigError, match=re.escape(message)):
        GroupedConsumer("127.0.0.1:1", "g", zk_hosts=zk_hosts, topics=["t"], **options)


def test_the_zookeeper_password_stays_out_of_repr():
    consumer = GroupedConsumer("127.0.0.1:1", "g", zk_hosts="127.0.0.1:2181/kiel", topics=["t"],
                               zk_auth="tenant:hunter2")
    assert "hunter2" not in repr(consumer.group_settings)
    assert "tenant:***" in repr(consumer.group_settings)


@pytest.mark.parametrize("subscribed", [{"topics": ["a", "a2"]}, {"pattern": "a.*"}])
def test_consuming_a_topic_the_member_does_not_subscribe_to_is_a_config_error(subscribed):
    # kiel 0.9 took the topic in consume(topic); a 1.x member consumes what
    # topics=/pattern= named, and consume("b") returned nothing for ever.
    consumer = GroupedConsumer("127.0.0.1:1", "g", max_wait_time=0.05, **subscribed)

    async def main() -> None:
        assert await consumer.consume("a") == []  # subscribed: nothing owned yet
        with pytest.raises(ConfigError, match="'b' is not among the topics this member"):
            await consumer.consume("b")
        with pytest.raises(ConfigError, match="'b' is not among"):
            await consumer.consume(["a", "b"])
        with pytest.raises(ConfigError, match="'b' is not among"):
            async for _ in consumer.stream("b"):
                pass

    asyncio.run(main())
