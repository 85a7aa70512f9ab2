"""kiel's clients: :class:`Producer`, :class:`SingleConsumer`, :class:`GroupedConsumer`.

Also importable from :mod:`kiel` itself. ``GroupedConsumer`` (which needs
kazoo) is imported on first use, so a producer-only application does not
import kazoo.
"""
from typing import TYPE_CHECKING

from kiel._lazy import lazy_exports
from kiel.consumer import BEGINNING, END, ConsumerRebalanceListener, SingleConsumer
from kiel.producer import Producer
from kiel.structs import Record, RecordMetadata, TopicPartition

if TYPE_CHECKING:  # pragma: no cover
    from kiel.consumer.grouped import GroupedConsumer

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

__getattr__ = lazy_exports(__name__, {"GroupedConsumer": "kiel.consumer.grouped"})
