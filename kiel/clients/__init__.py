"""kiel's clients: :class:`Producer`, :class:`SingleConsumer`, :class:`GroupedConsumer`."""

from kiel.clients.consumer import SingleConsumer
from kiel.clients.grouped import ConsumerRebalanceListener, GroupedConsumer
from kiel.clients.producer import Producer, RecordMetadata
from kiel.clients.records import BEGINNING, END, Record, TopicPartition

__all__ = [
    "BEGINNING",
    "END",
    "ConsumerRebalanceListener",
    "GroupedConsumer",
    "Producer",
    "Record",
    "RecordMetadata",
    "SingleConsumer",
    "TopicPartition",
]
