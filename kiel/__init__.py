"""kiel: a pure-Python Kafka client for Tornado applications, from Kafka 0.8 to 4.x.

Consumer groups are formed by the brokers' group coordinator on current
clusters (Kafka 2.4 and later, KRaft included: no ZooKeeper), or kept in
ZooKeeper on Kafka 0.8: ``GroupedConsumer(..., coordinator=BrokerGroup(...))``
(the default) or ``coordinator=ZooKeeperGroup(hosts=...)``.

The clients and the types applications annotate with are importable from here::

    from kiel import Producer, Record, SingleConsumer, TopicPartition

Strategy: every name is imported on first use (PEP 562 ``__getattr__``), so
``import kiel.protocol`` stays free of Tornado, and a producer-only
application never imports kazoo (only a ZooKeeper group loads it).
"""
from typing import TYPE_CHECKING

from kiel._lazy import lazy_exports
from kiel._version import __version__

# name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "Producer": "kiel.producer",
    "SingleConsumer": "kiel.consumer",
    "GroupedConsumer": "kiel.consumer.grouped",
    "BrokerGroup": "kiel.coordinator.broker_group",
    "ZooKeeperGroup": "kiel.zookeeper.group_coordinator",
    "ConsumerRebalanceListener": "kiel.consumer.listener",
    "BEGINNING": "kiel.consumer.positions",
    "END": "kiel.consumer.positions",
    "StartPosition": "kiel.consumer.positions",
    "GroupMetadata": "kiel.structs",
    "Record": "kiel.structs",
    "RecordMetadata": "kiel.structs",
    "TopicPartition": "kiel.structs",
    "Partitioner": "kiel.producer.partitioners",
    "Serializer": "kiel.serializers",
    "Deserializer": "kiel.serializers",
    "Allocator": "kiel.allocators",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from kiel.allocators import Allocator
    from kiel.consumer import SingleConsumer
    from kiel.consumer.grouped import GroupedConsumer
    from kiel.consumer.listener import ConsumerRebalanceListener
    from kiel.consumer.positions import BEGINNING, END, StartPosition
    from kiel.coordinator.broker_group import BrokerGroup
    from kiel.producer import Producer
    from kiel.producer.partitioners import Partitioner
    from kiel.serializers import Deserializer, Serializer
    from kiel.structs import GroupMetadata, Record, RecordMetadata, TopicPartition
    from kiel.zookeeper.group_coordinator import ZooKeeperGroup


__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(__all__)
