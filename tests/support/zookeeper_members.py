"""GroupMembers of a ZooKeeper group, their recorded fetch state and their sessions."""

import asyncio
from typing import Any, List, Optional, Set, Tuple

from kiel.structs import TopicPartition
from kiel.zookeeper.client import ZooKeeper
from kiel.zookeeper.group import GroupMember, PartitionHooks

TP = TopicPartition


class RecordingHooks(PartitionHooks):
    """Tracks what this member fetches; logs every hook call in a shared list."""

    def __init__(self, name: str, log: List[Tuple[str, str, List[TP]]]) -> None:
        self.name = name
        self.log = log
        #: Partitions handed over as anything but kiel.structs.TopicPartition.
        self.mistyped: List[Any] = []
        self.fetching: Set[TP] = set()
        self.suspended = False
        self.revoke_delay = 0.0

    async def assigned(self, partitions: List[TP]) -> None:
        self.mistyped += [tp for tp in partitions if type(tp) is not TopicPartition]
        self.log.append((self.name, "assigned", partitions))
        self.fetching.update(partitions)

    async def revoked(self, partitions: List[TP]) -> None:
        self.mistyped += [tp for tp in partitions if type(tp) is not TopicPartition]
        self.fetching.difference_update(partitions)
        self.log.append((self.name, "revoked", partitions))
        if self.revoke_delay:
            await asyncio.sleep(self.revoke_delay)  # e.g. a slow async commit

    async def lost(self, partitions: List[TP]) -> None:
        self.mistyped += [tp for tp in partitions if type(tp) is not TopicPartition]
        self.fetching.difference_update(partitions)
        self.log.append((self.name, "lost", partitions))

    def suspend(self) -> None:
        self.suspended = True

    def resume(self) -> None:
        self.suspended = False


def member_tasks(member: GroupMember) -> List[asyncio.Task]:
    """The member's background tasks still alive (named after its group and id)."""
    prefix = f"kiel-group-{member.group}/{member.member_id}:"
    return [t for t in asyncio.all_tasks() if t.get_name().startswith(prefix) and not t.done()]


async def converge(members: List[GroupMember], timeout: float = 30) -> None:
    await asyncio.wait_for(asyncio.gather(*(m.settled() for m in members)), timeout)


class Sessions:
    """The ZooKeeper sessions a test opens, all stopped when it ends, pass or fail.

    A session left open keeps kazoo's threads retrying against a server that
    is gone at exit, and the test process would never end.
    """

    def __init__(self, hosts: Optional[str] = None) -> None:
        self.hosts = hosts
        self.opened: List[ZooKeeper] = []

    async def start(self, hosts: Optional[str] = None, **options: Any) -> ZooKeeper:
        """A started session to ``hosts`` (default: the hosts given at creation)."""
        zk = ZooKeeper(hosts or self.hosts, **options)
        await zk.start()
        self.opened.append(zk)
        return zk

    async def __aenter__(self) -> "Sessions":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        for zk in self.opened:
            await zk.stop()  # stopping twice is harmless

