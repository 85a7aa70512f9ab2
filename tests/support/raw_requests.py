"""Raw Produce and Fetch requests for the embedded broker, and their one answer."""

from kiel.protocol import (
    FetchPartitionData,
    FetchRequest,
    FetchTopicData,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from kiel.protocol.messages import encode_message_set


def produce_request(topic, partition, values, acks=1, codec=0, timeout=1000):
    message_set = encode_message_set([(None, v) for v in values], codec)
    return ProduceRequest(acks, timeout, [
        ProduceTopicData(topic, [ProducePartitionData(partition, message_set)])])


def fetch_request(topic, partition, offset, max_bytes=1 << 20, max_wait=0, min_bytes=0):
    return FetchRequest(-1, max_wait, min_bytes, [
        FetchTopicData(topic, [FetchPartitionData(partition, offset, max_bytes)])])


def only(response):
    """The single partition response of a one-topic, one-partition response."""
    assert len(response.topics) == 1 and len(response.topics[0].partitions) == 1
    return response.topics[0].partitions[0]

