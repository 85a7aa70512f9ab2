"""kiel's clients: :class:`Producer`, :class:`SingleConsumer`, :class:`GroupedConsumer`.

Also importable from :mod:`kiel` itself. ``GroupedConsumer`` (which needs
kazoo) is imported on first use, so a producer-only application does not
import kazoo.
"""
from typing import TYPE_CHECKING, Any

from kiel.clients.consumer import SingleConsumer
from kiel.clients.producer import Producer
from kiel.clients.records import BEGINNING, END
from kiel.structs import Record, RecordMetadata, TopicPartition

if TYPE_CHECKING:  # pragma: no cover
    from kiel.clients.grouped import ConsumerRebalanceListener, GroupedConsumer

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
    if name in ("GroupedConsumer", "ConsumerRebalanceListener"):
        from kiel.clients import grouped

        return getattr(grouped, name)
    raise AttributeError(f"module 'kiel.clients' has no attribute {name!r}")
