"""kiel's clients: :class:`Producer`, :class:`SingleConsumer`, :class:`GroupedConsumer`.

Also importable from :mod:`kiel` itself. ``GroupedConsumer`` (which needs
kazoo) is imported on first use, so a producer-only application does not
import kazoo.
"""
from typing import TYPE_CHECKING, Any

import kiel.consumer
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


def __getattr__(name: str) -> Any:
    if name == "GroupedConsumer":
        return kiel.consumer.GroupedConsumer  # lazy there too
    raise AttributeError(f"module 'kiel.clients' has no attribute {name!r}")
