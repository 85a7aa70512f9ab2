"""Key placement: kiel's partitioner against kafka-python's DefaultPartitioner (pure logic)."""
import collections
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner as KafkaPythonPartitioner
from kafka.partitioner.default import murmur2 as kafka_murmur2

from kiel.producer.partitioners import (
    DefaultPartitioner,
    key_partition,
    murmur2,
    random_partitioner,
)
from kiel.serializers import json_deserializer, json_serializer, utf8_deserializer, utf8_serializer


class _FakeClusterMetadata:
    """The two calls kafka-python's DefaultPartitioner makes on its cluster."""

    def __init__(self, topic, count):
        self.topic = topic
        self.count = count

    def topics(self):
        return {self.topic}

    def partitions_for_topic(self, topic):
        return set(range(self.count))

    def available_partitions_for_topic(self, topic):
        return set(range(self.count))


# Known answers from the Java client (org.apache.kafka.common.utils.UtilsTest).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key,expected", sorted(JAVA_VECTORS.items()))
def test_murmur2_matches_java_vectors(key, expected):
    assert murmur2(key) == expected & 0xFFFFFFFF


@given(st.binary(max_size=200))
@settings(max_examples=2000)
def test_murmur2_matches_kafka_python(data):
    assert murmur2(data) == kafka_murmur2(data)


def test_placement_equals_kafka_python_for_many_keys():
    rng = random.Random(1234)
    keys = [f"user-{i}".encode() for i in range(5000)]
    keys += [rng.randbytes(rng.randrange(0, 64)) for _ in range(5000)]
    keys += ["ключ-é-😀".encode(), b"", b"\x00", b"\xff" * 7]
    ours = DefaultPartitioner()
    for count in (1, 2, 3, 7, 12, 64, 1000):
        theirs = KafkaPythonPartitioner()
        meta = _FakeClusterMetadata("t", count)
        partitions = list(range(count))
        for key in keys:
            expected = theirs.partition("t", None, key, None, None, meta)
            assert ours(key, partitions) == expected
            assert key_partition(key, partitions) == expected


def test_placement_uses_the_sorted_partition_list():
    # The index picks from the list it is given, as kafka-python's sorted list does.
    assert key_partition(b"foobar", [10, 20, 30]) == [10, 20, 30][
        (murmur2(b"foobar") & 0x7FFFFFFF) % 3
    ]


def test_unkeyed_records_round_robin():
    part = DefaultPartitioner()
    picks = [part(None, [0, 1, 2]) for _ in range(300)]
    assert collections.Counter(picks) == {0: 100, 1: 100, 2: 100}
    # consecutive picks differ
    assert all(a != b for a, b in zip(picks, picks[1:]))
    # only the candidates it is given
    assert {part(None, [5]) for _ in range(10)} == {5}


def test_random_partitioner_stays_in_range():
    assert {random_partitioner(b"k", [3, 4]) for _ in range(200)} == {3, 4}


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.text()
        | st.floats(allow_nan=False, allow_infinity=False),
        lambda children: st.lists(children) | st.dictionaries(st.text(), children),
        max_leaves=20,
    )
)
def test_json_round_trip(value):
    data = json_serializer(value)
    assert isinstance(data, bytes)
    assert json_deserializer(data) == value


def test_json_serializer_is_compact_utf8():
    assert json_serializer({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()
    assert json_deserializer(None) is None
    with pytest.raises(ValueError):
        json_serializer(float("nan"))
    with pytest.raises(TypeError):
        json_serializer(object())
    with pytest.raises(ValueError):
        json_deserializer(b"\xff")


def test_utf8_pair():
    assert utf8_serializer("é") == b"\xc3\xa9"
    assert utf8_deserializer(b"\xc3\xa9") == "é"
    assert utf8_deserializer(None) is None
    with pytest.raises(TypeError):
        utf8_serializer(b"x")
