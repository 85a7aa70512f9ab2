"""A group's topics and their partition counts, from the brokers' metadata.

On a 0.8 cluster the brokers register in the group's ZooKeeper, and every
ZooKeeper member watches ``/brokers/topics`` there. A current cluster (KRaft,
or any whose brokers live elsewhere) has the counts only in the brokers'
metadata: :class:`MetadataCounts` reads them, again every
``metadata_max_age``, for a ZooKeeper member
(:meth:`~kiel.zookeeper.group.GroupMember.set_partition_counts`; a broker
group's leader reads its own in :mod:`kiel.coordinator`).

Every ZooKeeper member reads the same cluster, so they agree on the counts
once each has read them; while they disagree (a topic just grew), the owner
znodes still keep a partition with one member at a time.
"""

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Optional

from kiel.cluster import Cluster
from kiel.exc import KielError

log = logging.getLogger(__name__)


class MetadataCounts:
    """The subscribed topics' partition counts, read from the brokers' metadata.

    Args:
        cluster: the consumer's cluster.
        topics: the subscribed names, or ``None`` for a pattern subscription
            (then every topic is read, and the member keeps the matches).
    """

    def __init__(self, cluster: Cluster, topics: Optional[list[str]]) -> None:
        self.cluster = cluster
        self.topics = topics

    async def read(self) -> dict[str, int]:
        """The partition count of each topic the cluster has (absent: none).

        Raises:
            NoBrokersError: no broker answered within the retries.
            ClientClosedError: the cluster was closed.
        """
        if self.topics is None:
            return await self.cluster.all_topics()
        await self.cluster.refresh_metadata(self.topics)
        return {t: len(self.cluster.partitions.get(t, {})) for t in self.topics}

    async def follow(self, push: Callable[[Mapping[str, int]], None], interval: float) -> None:
        """Read the counts every ``interval`` seconds and ``push`` them, until cancelled.

        A read that fails keeps the counts the member has (the allocation
        stays as it is) and is logged; the next interval tries again.
        """
        while True:
            await asyncio.sleep(interval)
            try:
                counts = await self.read()
            except KielError as e:
                log.warning("reading partition counts from the brokers failed (%s); "
                            "trying again in %.0f s", e, interval)
                continue
            push(counts)
