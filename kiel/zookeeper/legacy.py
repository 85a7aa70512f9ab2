"""kiel 0.9's group layout in ZooKeeper, and the wait for its members to go.

kiel 0.9 kept a group under ``/kiel/groups/<group>``: each member an
ephemeral znode under ``members/`` (named ``<hostname>:<id>``, no data), the
partitions it shared out a JSON list in ``partitions``. kiel 1.x keeps its
group where Kafka 0.8's consumers do, ``/consumers/<group>``, so in a
rolling upgrade old and new members would not see each other and both would
consume every partition. A new member therefore looks for live old ones
before it registers, and waits (bounded) for their sessions to end.

Only live members count: 0.9 left its persistent znodes (``members/`` itself,
``partitions``) behind when its members stopped, and they are no obstacle.
"""

import asyncio
import logging

from kazoo.exceptions import KazooException, NoNodeError

from kiel._aio import Wakeup, within
from kiel.exc import LegacyGroupError, ZooKeeperError
from kiel.zookeeper.client import ZooKeeper, translate

__all__ = ["members_path", "wait_for_legacy_members"]

log = logging.getLogger(__name__)


def members_path(group: str) -> str:
    """Where kiel 0.9 registered the members of ``group``."""
    return f"/kiel/groups/{group}/members"


async def wait_for_legacy_members(zk: ZooKeeper, group: str, timeout: float) -> None:
    """Return once no kiel 0.9 member of ``group`` is live (at once if none is).

    Waits on a ZooKeeper watch of the members' znode, never by polling; the
    reads go through the session's bridge, so the IOLoop is never blocked.

    Args:
        zk: a started session (with the chroot the group lives under, as the
            0.9 members' connection string had it).
        group: the group's name.
        timeout: seconds to wait for the old members to go.

    Raises:
        LegacyGroupError: old members were still live after ``timeout``
            (they are named).
        ZooKeeperError: ZooKeeper failed, or a read did not answer in time.
    """
    path = members_path(group)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    changed = Wakeup()
    live: list[str] = []
    while True:
        # Strategy: take this round's future before arming the watch, so a
        # change between the read and the wait is not missed (as in
        # ZooKeeper.wait_deleted).
        fired = changed.future()
        read = zk.get_children(path, watch=lambda event: changed.fire())
        try:
            live = await within(read, max(deadline - loop.time(), 1.0))
        except NoNodeError:
            live = []
        except asyncio.TimeoutError as e:
            raise ZooKeeperError(f"reading {path} timed out", group=group) from e
        except KazooException as e:
            raise translate(e, f"reading {path}") from e
        if not live:
            return
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        log.warning("group %s: kiel 0.9 members %s are live under %s; waiting up to %.0f s "
                    "for them to stop before joining (a 1.x member never consumes beside "
                    "them)", group, ", ".join(sorted(live)), path, remaining)
        await asyncio.wait([fired], timeout=remaining)
    raise LegacyGroupError(
        f"kiel 0.9 members {', '.join(sorted(live))} are still live under {path} after "
        f"{timeout:g} s: stop them before starting kiel 1.x members of this group",
        group=group,
    )
