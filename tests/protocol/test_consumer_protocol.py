"""The embedded consumer protocol (kiel.protocol.consumer_protocol), pure logic:
round trips per version, what a newer version or an empty assignment reads as,
and hostile bytes that only ever raise kiel's ConsumerProtocolError. Byte
conformance with kafka-python's encoders is in tests/protocol/test_protocol_conformance.py;
Tansu carrying these bytes between members is in tests/protocol/test_group_protocol_tansu.py."""
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiel.exc import ConsumerProtocolError, LocalProtocolError, ProtocolError
from kiel.protocol.consumer_protocol import (
    LATEST_VERSION,
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

FAST = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])

TOPIC_PARTITIONS = st.lists(st.tuples(st.text(max_size=8),
                                      st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4)),
                            max_size=3)


def subscriptions(version: int) -> st.SearchStrategy:
    """Subscriptions ``version`` can carry whole (later fields at their defaults)."""
    return st.builds(
        ConsumerSubscription,
        topics=st.lists(st.text(max_size=8), max_size=4),
        user_data=st.none() | st.binary(max_size=20),
        owned_partitions=TOPIC_PARTITIONS if version >= 1 else st.just([]),
        generation_id=st.integers(-(2**31), 2**31 - 1) if version >= 2 else st.just(-1),
        rack_id=(st.none() | st.text(max_size=8)) if version >= 3 else st.just(None),
    )


ASSIGNMENTS = st.builds(ConsumerAssignment, partitions=TOPIC_PARTITIONS,
                        user_data=st.none() | st.binary(max_size=20))


def only_consumer_protocol_errors(fn: Any, data: bytes) -> Any:
    try:
        return fn(data)
    except ConsumerProtocolError:
        return None


@pytest.mark.parametrize("version", range(LATEST_VERSION + 1))
@FAST
@given(data=st.data())
def test_subscription_round_trip(version: int, data: Any) -> None:
    sub = data.draw(subscriptions(version))
    encoded = encode_subscription(sub, version)
    assert encoded[:2] == struct.pack(">h", version)
    assert decode_subscription(encoded) == (version, sub)
    # Any buffer type reads the same.
    assert decode_subscription(memoryview(bytearray(encoded))) == (version, sub)


@pytest.mark.parametrize("version", range(LATEST_VERSION + 1))
@FAST
@given(assignment=ASSIGNMENTS)
def test_assignment_round_trip(version: int, assignment: ConsumerAssignment) -> None:
    encoded = encode_assignment(assignment, version)
    assert decode_assignment(encoded) == (version, assignment)


@FAST
@given(sub=subscriptions(3), future=st.integers(4, 2**15 - 1), extra=st.binary(max_size=12))
def test_a_newer_subscription_reads_with_the_newest_layout(
    sub: ConsumerSubscription, future: int, extra: bytes
) -> None:
    # A later client adds fields after v3's: read them as v3, keep the version.
    data = struct.pack(">h", future) + encode_subscription(sub, 3)[2:] + extra
    assert decode_subscription(data) == (future, sub)


@FAST
@given(assignment=ASSIGNMENTS, future=st.integers(4, 2**15 - 1), extra=st.binary(max_size=12))
def test_a_newer_assignment_reads_with_the_newest_layout(
    assignment: ConsumerAssignment, future: int, extra: bytes
) -> None:
    data = struct.pack(">h", future) + encode_assignment(assignment)[2:] + extra
    assert decode_assignment(data) == (future, assignment)


def test_trailing_bytes_after_a_known_version_are_ignored() -> None:
    sub = ConsumerSubscription(["t"], b"u")
    assert decode_subscription(encode_subscription(sub, 0) + b"\x00\x01junk") == (0, sub)


def test_an_old_version_reads_the_defaults_of_later_fields() -> None:
    version, sub = decode_subscription(encode_subscription(ConsumerSubscription(["a"]), 0))
    assert version == 0
    assert (sub.owned_partitions, sub.generation_id, sub.rack_id) == ([], -1, None)
    # Each decoded subscription has a list of its own, not the class default.
    other = decode_subscription(encode_subscription(ConsumerSubscription(["a"]), 0))[1]
    assert sub.owned_partitions is not other.owned_partitions
    assert sub.owned_partitions is not ConsumerSubscription([]).owned_partitions


def test_an_empty_assignment_is_no_partitions() -> None:
    assert decode_assignment(b"") == (0, ConsumerAssignment([], None))
    assert decode_assignment(memoryview(b"")) == (0, ConsumerAssignment([], None))


@pytest.mark.parametrize("decoder", [decode_subscription, decode_assignment])
@pytest.mark.parametrize("data", [b"\x00", b"\x00\x00", b"\x00\x00\x00\x00\x00\x01",
                                  b"\x00\x01\x7f\xff\xff\xff", b"\xff\xff\x00\x00\x00\x00\xff\xff"
                                  b"\xff\xff", b"\x80\x00"])
def test_truncated_or_garbage_bytes_raise_consumer_protocol_error(decoder: Any,
                                                                  data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError):
        decoder(data)


def test_an_empty_subscription_is_refused() -> None:
    # A member of a "consumer" group always writes at least a version and topics.
    with pytest.raises(ConsumerProtocolError, match="no version"):
        decode_subscription(b"")


def test_a_negative_version_is_refused() -> None:
    data = struct.pack(">h", -1) + encode_subscription(ConsumerSubscription(["t"]))[2:]
    with pytest.raises(ConsumerProtocolError, match="negative version -1"):
        decode_subscription(data)


def test_consumer_protocol_error_is_a_protocol_error() -> None:
    assert issubclass(ConsumerProtocolError, ProtocolError)


@settings(max_examples=300, deadline=None, database=None)
@given(data=st.binary(max_size=64))
def test_random_bytes_raise_only_kiels_error(data: bytes) -> None:
    only_consumer_protocol_errors(decode_subscription, data)
    only_consumer_protocol_errors(decode_assignment, data)


@pytest.mark.parametrize("version", range(LATEST_VERSION + 1))
@settings(max_examples=40, deadline=None, database=None)
@given(data=st.data())
def test_every_cut_and_flip_raises_only_kiels_error(version: int, data: Any) -> None:
    sub = data.draw(subscriptions(version))
    encoded = encode_subscription(sub, version)
    cut = data.draw(st.integers(0, len(encoded)))
    only_consumer_protocol_errors(decode_subscription, encoded[:cut])
    at = data.draw(st.integers(0, len(encoded) - 1))
    flipped = bytearray(encoded)
    flipped[at] ^= data.draw(st.integers(1, 255))
    only_consumer_protocol_errors(decode_subscription, bytes(flipped))
    assignment = encode_assignment(ConsumerAssignment(sub.owned_partitions, sub.user_data))
    only_consumer_protocol_errors(decode_assignment, assignment[:cut])


@pytest.mark.parametrize("version", [-1, 4, 1.0, None, True])
def test_encoding_refuses_an_unknown_version(version: Any) -> None:
    with pytest.raises(LocalProtocolError, match="version must be 0 to 3"):
        encode_subscription(ConsumerSubscription(["t"]), version)
    with pytest.raises(LocalProtocolError, match="version must be 0 to 3"):
        encode_assignment(ConsumerAssignment([]), version)


@pytest.mark.parametrize("sub,version,field", [
    (ConsumerSubscription(["t"], owned_partitions=[("t", [0])]), 0, "owned_partitions"),
    (ConsumerSubscription(["t"], generation_id=3), 1, "generation_id"),
    (ConsumerSubscription(["t"], rack_id="r1"), 2, "rack_id"),
])
def test_encoding_refuses_to_drop_what_the_version_cannot_carry(
    sub: ConsumerSubscription, version: int, field: str
) -> None:
    with pytest.raises(LocalProtocolError, match=f"cannot carry {field}"):
        encode_subscription(sub, version)
    # The next version up carries it.
    assert decode_subscription(encode_subscription(sub, version + 1))[1] == sub


@pytest.mark.parametrize("bad", [
    ConsumerSubscription("topic"),  # a str, not a list of topics
    ConsumerSubscription(["t"], user_data="text"),
    ConsumerSubscription(["t"], owned_partitions={"t": [0]}, generation_id=1),
    ConsumerSubscription(["t"], owned_partitions=[("t", ["0"])]),
    ConsumerSubscription(["t"], owned_partitions=[("t",)]),
    ConsumerSubscription(["t"], generation_id=2**31),
])
def test_encoding_bad_values_is_a_local_protocol_error(bad: ConsumerSubscription) -> None:
    with pytest.raises(LocalProtocolError):
        encode_subscription(bad, 3)


@pytest.mark.parametrize("bad", [
    ConsumerAssignment({"t": [0]}), ConsumerAssignment([("t", [2**31])]),
    ConsumerAssignment([("t", [0])], user_data="text"), ConsumerAssignment([("t", 0)]),
])
def test_encoding_a_bad_assignment_is_a_local_protocol_error(bad: ConsumerAssignment) -> None:
    with pytest.raises(LocalProtocolError):
        encode_assignment(bad)
