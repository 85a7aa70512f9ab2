"""A broker group's settings: :class:`~kiel.coordinator.broker_group.BrokerGroup`.

``BrokerSettings`` is its earlier name, kept for the modules that read it.
"""

from kiel.coordinator.broker_group import BrokerGroup

__all__ = ["BrokerSettings"]

#: The earlier name of :class:`~kiel.coordinator.broker_group.BrokerGroup`.
BrokerSettings = BrokerGroup
