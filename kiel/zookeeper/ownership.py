"""Partition ownership: the owner znodes one group member creates and deletes.

``/consumers/<group>/owners/<topic>/<partition>`` is an ephemeral znode
holding the owner's member id (the Kafka 0.8 consumer layout, so existing
tools see who consumes what). ZooKeeper allows one such znode per partition,
which is what keeps two members from fetching a partition at once.

An owner znode counts as this member's only when its ``ephemeralOwner`` is
the *current* session: one left over from an expired session is not ours,
whatever member id it holds. While the connection is lost, kazoo hides the
session id, so whose a node is cannot be told: that is a
:class:`~kazoo.exceptions.ConnectionLoss`, and the pass is retried.
"""

from typing import Any

from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError

from kiel.structs import TopicPartition
from kiel.zookeeper.client import ZooKeeper

__all__ = ["Owners"]


class Owners:
    """The owner znodes of one group, as seen by one member.

    Args:
        zk: the member's started :class:`~kiel.zookeeper.client.ZooKeeper`.
        base: the group's znode, ``/consumers/<group>``.
        member_id: written into every owner znode this member creates.
    """

    def __init__(self, zk: ZooKeeper, base: str, member_id: str) -> None:
        self.zk = zk
        self.base = base
        self.member_id = member_id

    def path(self, tp: TopicPartition) -> str:
        """The owner znode of ``tp``."""
        return f"{self.base}/owners/{tp.topic}/{tp.partition}"

    async def claim(self, tp: TopicPartition) -> bool:
        """Create ``tp``'s owner znode for the current session.

        Returns:
            True if this session holds it now; False if another session does,
            or if it was deleted between our create and our look (the caller
            waits for it to be free, which then returns at once).

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        path = self.path(tp)
        try:
            await self.zk.create(
                path, self.member_id.encode(), ephemeral=True, makepath=True, protected=True
            )
            return True
        except NodeExistsError:
            pass
        try:
            _, stat = await self.zk.get(path)
        except NoNodeError:
            return False
        # Ours already if kazoo retried a create that had gone through.
        return self.ours(stat)

    async def release(self, tp: TopicPartition) -> None:
        """Delete ``tp``'s owner znode if the current session holds it.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        path = self.path(tp)
        try:
            _, stat = await self.zk.get(path)
            if self.ours(stat):
                await self.zk.delete(path, version=stat.version)
        except NoNodeError:
            pass

    def ours(self, stat: Any) -> bool:
        """Whether the node whose ``stat`` this is belongs to the current session.

        Raises:
            kazoo.exceptions.ConnectionLoss: the connection was lost since
                the read, so the session id is hidden: answering "not ours"
                would forget a node the session still holds (a release that
                never deletes it keeps the next owner waiting for ever).
        """
        session = self.zk.session_id
        if session is None:
            raise ConnectionLoss("connection lost: whose owner znode this is cannot be told")
        return bool(stat.ephemeralOwner == session)

    async def wait_free(self, tp: TopicPartition, timeout: float) -> bool:
        """Wait (on a watch) until ``tp`` has no owner znode.

        Returns:
            True once it has none, False if it still has one after ``timeout`` seconds.

        Raises:
            kazoo.exceptions.KazooException: ZooKeeper failed.
        """
        return await self.zk.wait_deleted(self.path(tp), timeout)
