"""Groups the brokers coordinate (Kafka 0.9+): the adapter behind the grouped consumer.

* :mod:`kiel.coordinator.broker_group` -- :class:`BrokerGroup`, what an
  application passes as ``GroupedConsumer(..., coordinator=BrokerGroup(...))``:
  the group's settings, checked once, and its typed metrics;
* :mod:`kiel.coordinator.membership` -- :class:`BrokerMembership`: join,
  sync, heartbeats, rebalances and leaving;
* :mod:`kiel.coordinator.requests` -- the group requests to the coordinator;
* :mod:`kiel.coordinator.session` -- the session and poll deadlines;
* :mod:`kiel.coordinator.assignors` -- kiel's allocators as assignors, and
  Java's ``range`` and ``roundrobin``;
* :mod:`kiel.coordinator.settings` -- ``BrokerSettings``, BrokerGroup's earlier name.

The protocol's schemas are in :mod:`kiel.protocol.group_membership` and
:mod:`kiel.protocol.consumer_protocol`.
"""

from kiel.coordinator.broker_group import BrokerGroup, BrokerGroupMetrics

__all__ = ["BrokerGroup", "BrokerGroupMetrics"]
