"""Where a grouped consumer learns its topics and their partition counts.

On a 0.8 cluster the brokers register in the group's ZooKeeper, and every
member watches ``/brokers/topics`` there (:class:`~kiel.zookeeper.group.GroupMember`
does). A current cluster (KRaft, or any whose brokers live elsewhere) leaves
the group's ZooKeeper with only the group in it: then the counts come from
the brokers' metadata, read again every ``metadata_max_age``, and are given
to the member (:meth:`~kiel.zookeeper.group.GroupMember.set_partition_counts`).

Every member reads the same cluster, so they agree on the counts once each
has read them; while they disagree (a topic just grew), the owner znodes
still keep a partition with one member at a time.
"""

import asyncio
import logging
from collections.abc import Mapping
from typing import Callable, Optional

from kazoo.exceptions import KazooException, NoNodeError

from kiel.cluster import Cluster
from kiel.exc import ConfigError, KielError
from kiel.zookeeper.client import ZooKeeper, translate

log = logging.getLogger(__name__)

#: The values of ``GroupedConsumer(partitions_from=...)``.
SOURCES = ("auto", "zookeeper", "metadata")


def check_source(source: object) -> None:
    """Refuse a ``partitions_from`` that is not one of :data:`SOURCES`.

    Raises:
        ConfigError: it is not.
    """
    if source not in SOURCES:
        raise ConfigError(f"partitions_from must be one of {', '.join(SOURCES)}, got {source!r}")


async def brokers_registered(zk: ZooKeeper) -> bool:
    """Whether brokers register in this ZooKeeper (``/brokers/ids`` has children).

    Raises:
        ZooKeeperError: ZooKeeper failed.
    """
    try:
        return bool(await zk.get_children("/brokers/ids"))
    except NoNodeError:
        return False
    except KazooException as e:
        raise translate(e, "reading /brokers/ids") from e


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
