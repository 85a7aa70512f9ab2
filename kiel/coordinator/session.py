"""What a broker-group member knows of its session, and the deadlines that follow.

Pure bookkeeping on the loop's clock, so the rules are testable alone:

* the coordinator drops a member it has not heard from for
  ``session_timeout``. A heartbeat answered counts from when it was *sent*
  (the coordinator got it no earlier), so this member's idea of the expiry
  is never later than the coordinator's: once it passes, another member may
  own these partitions, and they are lost, not revoked;
* a JoinGroup or SyncGroup the coordinator *holds* (until every member
  joined, until the leader synced: seconds, up to the rebalance timeout)
  keeps the member alive meanwhile, and the coordinator starts its session
  again when it answers: so the session restarts when the answer arrives,
  not when the request was sent (dating it from the send would count the
  hold against the session, and a member whose SyncGroup was held most of
  it would call its fresh partitions lost before its first heartbeat). The
  answer's transit is the only slack, as in the Java consumer;
* an application that has not asked for records for ``max_poll_interval``
  is stuck or too slow: the member leaves on purpose, so the group moves
  on instead of waiting for it.
"""

from typing import Optional

__all__ = ["Session"]


class Session:
    """One member's session deadlines.

    Args:
        session_timeout: seconds the coordinator waits for a heartbeat.
        max_poll_interval: seconds the application may go without asking for records.
    """

    __slots__ = ("session_timeout", "max_poll_interval", "heard", "polled")

    def __init__(self, session_timeout: float, max_poll_interval: float) -> None:
        self.session_timeout = session_timeout
        self.max_poll_interval = max_poll_interval
        #: When the last request the coordinator answered as a live member
        #: was sent (``None``: no session).
        self.heard: Optional[float] = None
        #: When the application last asked for records.
        self.polled = 0.0

    def answered(self, sent: float) -> None:
        """The coordinator answered a request sent at ``sent`` as a live member's."""
        if self.heard is None or sent > self.heard:
            self.heard = sent

    def restarted(self, now: float) -> None:
        """The coordinator answered a JoinGroup or SyncGroup (which it may
        have held) at ``now``: the session starts again from its answer."""
        self.answered(now)

    def end(self) -> None:
        """No session any more (left, fenced, forgotten)."""
        self.heard = None

    def live(self, now: float) -> bool:
        """Whether the coordinator surely still counts this member in."""
        return self.heard is not None and now < self.heard + self.session_timeout

    def expired(self, now: float) -> bool:
        """Whether a session this member had has surely ended on the coordinator."""
        return self.heard is not None and now >= self.heard + self.session_timeout

    def poll(self, now: float) -> None:
        """The application asked for records."""
        self.polled = now

    def poll_overdue(self, now: float) -> bool:
        """Whether the application went ``max_poll_interval`` without asking."""
        return now - self.polled > self.max_poll_interval
