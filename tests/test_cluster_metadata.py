"""Metadata answers a broken or hostile broker may send (issue #23, defect 5):
bounded (``max_metadata_brokers``, ``max_metadata_partitions``), impossible
ids refused with a typed error, the metadata known before kept. The answers
come from a loopback peer over real TCP (tests/support/metadata_peer.py); the sliced
decoder is checked against the eager one."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kiel.cluster import Cluster
from kiel.exc import ConfigError, InvalidMetadataError
from kiel.protocol.metadata import (
    BrokerMetadata,
    BrokerMetadataV1,
    DeferredMetadata,
    DeferredMetadataV1,
    DeferredMetadataV4,
    MetadataLimits,
    MetadataResponse,
    MetadataResponseV1,
    MetadataResponseV4,
    PartitionMetadata,
    TopicMetadata,
    TopicMetadataV1,
    decode_metadata,
)
from kiel.protocol.schema import decode, encode
from tests.conftest import run
from tests.support.metadata_peer import MetadataPeer, answer_with, topic


def run_steps(steps):
    """Drive a decode_metadata generator to its end."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


ids = st.integers(0, 2**31 - 1)
partitions = st.lists(st.builds(PartitionMetadata, st.integers(-32768, 32767), ids,
                                st.integers(-1, 2**31 - 1), st.lists(ids, max_size=4),
                                st.lists(ids, max_size=4)), max_size=20)


@settings(max_examples=60, deadline=None)
@given(brokers=st.lists(st.builds(BrokerMetadata, ids, st.text(max_size=10),
                                  st.integers(0, 65535)), max_size=5),
       topics=st.lists(st.builds(TopicMetadata, st.integers(-32768, 32767),
                                 st.text(max_size=10), partitions), max_size=5))
def test_the_sliced_decoder_equals_the_eager_one(brokers, topics):
    body = encode(MetadataResponse(brokers, topics))
    eager, _ = decode(MetadataResponse, body)
    assert run_steps(decode_metadata(DeferredMetadata(body))) == eager
    v1 = MetadataResponseV1([BrokerMetadataV1(*b, "rack") for b in brokers], 3,
                            [TopicMetadataV1(t.error_code, t.topic, True, t.partitions)
                             for t in topics])
    body = encode(v1)
    assert run_steps(decode_metadata(DeferredMetadataV1(body))) == decode(
        MetadataResponseV1, body)[0]
    v4 = MetadataResponseV4(5, v1.brokers, "cluster" if brokers else None, 3, v1.topics)
    body = encode(v4)
    assert run_steps(decode_metadata(DeferredMetadataV4(body))) == decode(
        MetadataResponseV4, body)[0]


@pytest.mark.parametrize("response, match", [
    (MetadataResponse([BrokerMetadata(-2, "h", 1)], []), "broker id"),
    (MetadataResponse([BrokerMetadata(1, "h", 70000)], []), "port"),
    (MetadataResponse([], [TopicMetadata(0, "t", [PartitionMetadata(0, -3, 0, [0], [0])])]),
     "ids must be non-negative"),
    (MetadataResponse([], [TopicMetadata(0, "t", [PartitionMetadata(0, 1, -2, [0], [0])])]),
     "ids must be non-negative"),
    (MetadataResponse([], [TopicMetadata(0, "t", [PartitionMetadata(0, 1, 0, [0, -1], [0])])]),
     "ids must be non-negative"),
    (MetadataResponse([BrokerMetadata(i, "h", 1) for i in range(11)], []),
     "11 brokers, more than max_metadata_brokers"),
    (MetadataResponse([], [topic("a", 60), topic("b", 40)]), "max_metadata_partitions"),
])
def test_nonsense_and_oversized_answers_are_refused(response, match):
    limits = MetadataLimits(max_brokers=10, max_partitions=100)
    with pytest.raises(InvalidMetadataError, match=match):
        run_steps(decode_metadata(DeferredMetadata(encode(response)), limits))


def test_the_bounds_are_checked_before_the_items_are_decoded():
    # 100,000 brokers: refused at their count, not after decoding them.
    body = encode(MetadataResponse([BrokerMetadata(i, "h", 1) for i in range(100_000)], []))
    steps = decode_metadata(DeferredMetadata(body))
    with pytest.raises(InvalidMetadataError, match="100000 brokers"):
        next(steps)


def test_a_cluster_refuses_an_impossible_partition_id_and_keeps_what_it_knew():
    state = {"bad": False}

    def answer(request, port):
        topics = [topic("t", 2)]
        if state["bad"]:
            topics = [topic("t", 1, first=-3)]  # partition -3
        return answer_with(topics)(request, port)

    async def main():
        async with MetadataPeer(answer) as peer:
            cluster = Cluster(peer.bootstrap, api_version=(0, 8, 2), retries=0)
            try:
                assert await cluster.partitions_for("t") == [0, 1]
                state["bad"] = True
                with pytest.raises(InvalidMetadataError) as info:
                    await cluster.refresh_metadata(["t"])
                assert info.value.partition == -3 and info.value.topic == "t"
                # Nothing of the bad answer was applied.
                assert sorted(cluster.partitions["t"]) == [0, 1]
            finally:
                cluster.close()

    run(main(), timeout=30)


def test_a_cluster_refuses_an_answer_past_its_bounds():
    async def main():
        async with MetadataPeer(answer_with(
            brokers=[BrokerMetadata(i, "127.0.0.1", 1) for i in range(1, 100_000)]
        )) as peer:
            cluster = Cluster(peer.bootstrap, api_version=(0, 8, 2), retries=0)
            try:
                with pytest.raises(InvalidMetadataError, match="max_metadata_brokers"):
                    await cluster.connect()
                assert cluster.brokers == {}
            finally:
                cluster.close()
        async with MetadataPeer(answer_with([topic("t", 3)])) as peer:
            cluster = Cluster(peer.bootstrap, api_version=(0, 8, 2), retries=0,
                              max_metadata_partitions=2)
            try:
                with pytest.raises(InvalidMetadataError, match="max_metadata_partitions"):
                    await cluster.partitions_for("t")
            finally:
                cluster.close()

    run(main(), timeout=30)


@pytest.mark.parametrize("option", ["max_metadata_brokers", "max_metadata_partitions"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True, "10"])
def test_the_bounds_are_checked(option, value):
    with pytest.raises(ConfigError, match=option):
        Cluster("localhost:1", **{option: value})
