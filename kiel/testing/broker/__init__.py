"""An embedded Kafka 0.8.2 cluster for tests: real TCP, real ZooKeeper layout.

No Apache Kafka is needed: :class:`EmbeddedCluster` runs N brokers speaking
the legacy protocol (Produce, Fetch, ListOffsets, Metadata, OffsetCommit,
OffsetFetch and GroupCoordinator, all v0) with 0.8.2 semantics, on its own
thread and IOLoop; :class:`ClusterProcess` runs one in a subprocess (``python
-m kiel.testing serve``). Both offer fault injection (stop/start brokers,
leader moves, hangs, cut responses, injected error codes, latency).

Modules: :mod:`~kiel.testing.broker.log` (partition logs),
:mod:`~kiel.testing.broker.server` and :mod:`~kiel.testing.broker.handlers`
(TCP server and request handlers), :mod:`~kiel.testing.broker.core`
(controller state), :mod:`~kiel.testing.broker.zk` (ZooKeeper layout),
:mod:`~kiel.testing.broker.faults`, :mod:`~kiel.testing.broker.ops`,
:mod:`~kiel.testing.broker.control` and :mod:`~kiel.testing.broker.cli`.
"""
from kiel.testing.broker.cluster import EmbeddedCluster
from kiel.testing.broker.control import ClusterProcess
from kiel.testing.broker.ops import ClusterControl

__all__ = ["ClusterControl", "ClusterProcess", "EmbeddedCluster"]
