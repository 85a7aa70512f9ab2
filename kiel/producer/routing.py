"""Which partition a record goes to: a topic's partitions as the metadata
shows them, and the partitioner.

Unkeyed records under the default partitioner go round-robin over the
partitions that have a leader right now (all of them if none has), so that
they are not queued on a partition that cannot take them; keyed records and
custom partitioners see every partition.
"""

import random
from collections.abc import Callable
from typing import Any, Optional

from kiel.cluster import Cluster
from kiel.exc import ConfigError, UnknownPartitionError
from kiel.producer.accumulator import PartitionQueue, RecordAccumulator
from kiel.producer.partitioners import DefaultPartitioner, Partitioner, key_partition
from kiel.structs import TopicPartition

__all__ = ["KEY_CACHE_SIZE", "Router", "TopicRoute"]

#: Most keys a topic's route remembers the partition of: about 1.5 MB at
#: most per topic with short keys (the cache keeps them alive), and a
#: workload cycling through 10,000 keys finds every one after the first.
KEY_CACHE_SIZE = 16384


class TopicRoute:
    """A topic's partitions as of one metadata snapshot, and their queues.

    Attributes:
        snapshot: the cluster's partition map this route was built from (the
            route is current while the cluster holds this very object).
        all: every partition id, sorted.
        available: the ids of the partitions that have a leader.
        queues: the partitions' queues in the accumulator, each made when
            the route first sends a record its way (:meth:`queue`).
        rr_ids: the partitions unkeyed records go to, round-robin.
        rr_queues: their queues, ``None`` until made (:meth:`rr_queue`).
        rr: the round-robin counter.
        by_key: keys seen lately and their partition's queue under the
            default partitioner (at most :data:`KEY_CACHE_SIZE`; emptied
            with each new snapshot).
    """

    __slots__ = ("name", "snapshot", "all", "available", "queues", "rr_ids", "rr_queues", "rr",
                 "by_key", "_make")

    def __init__(self, name: str,
                 make: Callable[[TopicPartition], PartitionQueue] = PartitionQueue) -> None:
        self.name = name
        self._make = make
        self.snapshot: Any = None
        self.all: list[int] = []
        self.available: list[int] = []
        # Strategy: a partition's queue is made when a record first goes its
        # way, not when the metadata shows the partition: a topic of 100,000
        # partitions would otherwise cost 100,000 queues in one step of the
        # IOLoop (issue 35), most of them never used by a keyed producer.
        self.queues: dict[int, PartitionQueue] = {}
        self.rr_ids: list[int] = []
        self.rr_queues: list[Optional[PartitionQueue]] = []
        # A random start, so that producers started together do not all
        # begin with partition 0.
        self.rr = random.randrange(1 << 16)
        self.by_key: dict[bytes, PartitionQueue] = {}

    def queue(self, partition: int) -> PartitionQueue:
        """The queue of ``partition`` (made on first use)."""
        queue = self.queues.get(partition)
        if queue is None:
            queue = self.queues[partition] = self._make(TopicPartition(self.name, partition))
        return queue

    def rr_queue(self, index: int) -> PartitionQueue:
        """The queue of round-robin slot ``index`` (made on first use):
        ``rr_queues[index] or rr_queue(index)`` on the fast paths."""
        queue = self.rr_queues[index]
        if queue is None:
            queue = self.rr_queues[index] = self.queue(self.rr_ids[index])
        return queue


class Router:
    """Maps records to partition queues.

    Args:
        cluster: the metadata source.
        accumulator: owns the partition queues.
        partitioner: ``partitioner(key, partitions) -> partition``, or
            ``None`` for murmur2 of keys and round-robin for unkeyed records.
    """

    def __init__(
        self, cluster: Cluster, accumulator: RecordAccumulator, partitioner: Optional[Partitioner]
    ) -> None:
        self._cluster = cluster
        self._accumulator = accumulator
        self.partitioner: Partitioner = partitioner or DefaultPartitioner()
        #: The default partitioner, which pick() does not call: unkeyed
        #: records go round-robin, keyed ones through keyed() (murmur2, as
        #: it would, remembered per key).
        self.round_robin = partitioner is None
        #: Every topic seen, by name (what a metadata refresh asks about).
        self.routes: dict[str, TopicRoute] = {}

    def route(self, topic: str) -> Optional[TopicRoute]:
        """The topic's route as of the current metadata, or ``None`` if its
        metadata is not loaded."""
        snapshot = self._cluster.partitions.get(topic)
        if snapshot is None:
            return None
        route = self.routes.get(topic)
        if route is None:
            route = self.routes[topic] = TopicRoute(topic, self._accumulator.queue)
        if route.snapshot is not snapshot:
            route.snapshot = snapshot
            lists = self._cluster.partition_lists.get(topic)
            if lists is not None and lists.snapshot is snapshot:
                # Made while the metadata was applied, a slice at a time.
                route.all, route.available = lists.all, lists.available
            else:
                route.all = sorted(snapshot)
                route.available = [p for p in route.all if snapshot[p].leader >= 0]
            route.rr_ids = route.available or route.all
            route.rr_queues = [None] * len(route.rr_ids)
            route.by_key = {}
        return route

    def keyed(self, route: TopicRoute, key: bytes) -> PartitionQueue:
        """The queue of a keyed record under the default partitioner
        (murmur2 of the key over every partition, as the Java client), kept
        in ``route.by_key`` for the next record with that key.

        Args:
            route: the topic's current route.
            key: the serialized key.

        Returns:
            the queue of the key's partition.
        """
        # Strategy: keys repeat (users, devices, orders), and murmur2 in
        # Python costs about a microsecond; the cache is bounded by emptying
        # it when full, which keeps the common keys' cost at one lookup.
        queue = route.queue(key_partition(key, route.all))
        if len(route.by_key) >= KEY_CACHE_SIZE:
            route.by_key.clear()
        route.by_key[key] = queue
        return queue

    def pick(
        self, route: TopicRoute, key: Optional[bytes], partition: Optional[int]
    ) -> PartitionQueue:
        """The queue of the record's partition: ``partition`` if given, else
        the partitioner's choice.

        Raises:
            ConfigError: the partitioner failed.
            UnknownPartitionError: the partition is not one of the topic's.
        """
        if partition is None:
            if self.round_robin:  # the default partitioner
                if key is not None:
                    return route.by_key.get(key) or self.keyed(route, key)
                rr = route.rr_queues
                index = route.rr % len(rr)
                route.rr += 1
                return rr[index] or route.rr_queue(index)
            candidates = route.all if key is not None else (route.available or route.all)
            try:
                partition = self.partitioner(key, candidates)
            except Exception as e:  # user code: surface it on the record
                raise ConfigError(f"partitioner failed: {e!r}", topic=route.name) from e
        found = route.queues.get(partition)
        if found is None and partition in route.snapshot:
            found = route.queue(partition)
        if found is None:
            raise UnknownPartitionError(
                f"the topic has partitions {route.all}", topic=route.name, partition=partition
            )
        return found
