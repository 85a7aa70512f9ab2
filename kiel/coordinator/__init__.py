"""Groups the brokers coordinate (Kafka 0.9+): the adapter behind the grouped consumer.

* :mod:`kiel.coordinator.broker_group` -- :class:`BrokerGroup`, what an
  application passes as ``GroupedConsumer(..., coordinator=BrokerGroup(...))``:
  the group's settings, checked once, and its typed metrics;
* :mod:`kiel.coordinator.membership` -- :class:`BrokerMembership`, the thin
  composition of the parts below;
* :mod:`kiel.coordinator.group_protocol` -- JoinGroup, SyncGroup and
  LeaveGroup, the member's states as an enum and the table of their
  transitions, the current generation;
* :mod:`kiel.coordinator.heartbeat` -- the heartbeat task, judging the
  session and the poll deadline;
* :mod:`kiel.coordinator.leader` -- the subscription and the leader's assignment;
* :mod:`kiel.coordinator.owned` -- owned and moving partitions (revoke, lose, take);
* :mod:`kiel.coordinator.rebalance` -- one rebalance, eager or cooperative;
* :mod:`kiel.coordinator.cooperative` -- the cooperative-sticky assignment;
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
