"""When a group member's reconcile pass is due: the flag and wake-up its parts share.

A :class:`~kiel.zookeeper.group.GroupMember` is made of parts that live on
the IOLoop: its view of the group (:mod:`kiel.zookeeper.view`), the hand-off
of owner znodes (:mod:`kiel.zookeeper.handoff`) and the member's own life
cycle. Each part tells the others of a change through one :class:`Changes`,
never by calling into them.
"""

from kiel._aio import Wakeup

__all__ = ["Changes"]


class Changes(Wakeup):
    """A :class:`~kiel._aio.Wakeup` for every change of a member's state, with its flags.

    Strategy: one flag and one wake-up for every change. ``dirty`` says a
    reconcile pass is due; :meth:`fire` wakes whoever waits on the state now
    (the reconcile loop, :meth:`~kiel.zookeeper.group.GroupMember.settled`,
    a pending acquisition), and each of them re-reads the state it cares about.
    """

    __slots__ = ("closing", "dirty")

    def __init__(self) -> None:
        super().__init__()
        #: A reconcile pass is due.
        self.dirty = False
        #: The member is leaving: nothing new starts.
        self.closing = False

    def mark_dirty(self) -> None:
        """Ask for a reconcile pass, and wake the waiters."""
        self.dirty = True
        self.fire()

    def stale(self) -> bool:
        """Whether what the running pass set out to do may no longer be
        wanted: another pass is due, or the member is leaving."""
        return self.closing or self.dirty
