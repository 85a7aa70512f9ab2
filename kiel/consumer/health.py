"""Riding out unreachable brokers: the consumers' retry policy and health signal.

A consumer's ``consume()`` and ``stream()`` go on through a broker outage:
no broker answering, a connection lost, a request timing out, a leader
moving, the coordinator away. Such failures are *retriable*
(:attr:`kiel.exc.KielError.retriable`); :meth:`Health.absorb` is the one
place that decides, by that flag, whether a failure met on the way to the
application is retried inside the client (noted here) or raised to the
application (what it must act on: configuration, authorization, a corrupt
record, fencing, ``max_poll_interval``...).

What is retried is retried with the cluster's backoff by its owner (the
fetcher per partition, the next ``consume()`` for the rest), never in a loop
inside one call: every call returns within its wait, with what it has.

:class:`Health` keeps the *conditions* under way, one per error class: a
condition starts (logged once at WARNING, counted in ``outages``) when the
first failure of its class is noted, and clears (logged once at INFO) when
whatever held it recovers (a partition is answered again, a step of
``consume()`` succeeds). It also keeps when a fetch was last answered, which
the consumers' health rule (:meth:`kiel.consumer.base._BaseConsumer.healthy`)
reads.
"""

import logging
import time
from collections.abc import Hashable
from typing import Optional

from kiel.exc import KielError

__all__ = ["CLIENT", "HEALTH_STALL", "Health"]

log = logging.getLogger("kiel.consumer")

#: Who holds a condition besides partitions: a step of ``consume()`` itself
#: (metadata, starting a topic or partition, a background commit).
CLIENT = "client"

#: Seconds without an answered fetch (while there are partitions to fetch)
#: after which a consumer is not healthy, unless three fetch rounds take
#: longer (see :meth:`kiel.consumer.base._BaseConsumer.healthy`).
HEALTH_STALL = 10.0


def condition(error: KielError) -> str:
    """The condition ``error`` is part of: its most general retriable error class
    (a refused connect and a reset one are both ``KielConnectionError``)."""
    name = type(error).__name__
    for cls in type(error).__mro__:
        if cls is KielError or not issubclass(cls, KielError):
            continue
        if cls.retriable:
            name = cls.__name__
    return name


class Health:
    """The outage conditions of one consumer and when it last fetched.

    Args:
        name: how the consumer is named in the log lines.
    """

    def __init__(self, name: str = "consumer") -> None:
        self.name = name
        #: Conditions started so far, by :func:`condition` (``outages``).
        self.started: dict[str, int] = {}
        #: Per condition under way: who holds it (partitions, :data:`CLIENT`).
        self._holders: dict[str, set[Hashable]] = {}
        #: Per condition under way: when it started (monotonic) and its latest error.
        self._since: dict[str, float] = {}
        self._latest: dict[str, KielError] = {}
        #: When a broker last answered a fetch: monotonic, and Unix time.
        self.answered_at: Optional[float] = None
        self.answered_wall: Optional[float] = None
        #: Since when the consumer has had partitions to fetch (``None``: none).
        self.wanting_since: Optional[float] = None

    # ------------------------------------------------------------------
    # the policy

    def absorb(self, error: BaseException, holder: Hashable = CLIENT) -> bool:
        """Decide what becomes of ``error``, met on the way to the application.

        Args:
            error: what failed.
            holder: who met it (a partition, or :data:`CLIENT`).

        Returns:
            True when it is retriable: noted as a condition, retried by its
            owner, not raised. False when the caller must raise it.
        """
        if not isinstance(error, KielError) or not error.retriable:
            return False
        self.failed(error, holder)
        return True

    def failed(self, error: KielError, holder: Hashable = CLIENT) -> None:
        """Note a retriable ``error`` met by ``holder``: a condition starts or goes on."""
        name = condition(error)
        self._latest[name] = error
        holders = self._holders.get(name)
        if holders is None:
            holders = self._holders[name] = set()
            self._since[name] = time.monotonic()
            self.started[name] = self.started.get(name, 0) + 1
            log.warning("%s: %s (%s); retrying with backoff, consume() returns what it has "
                        "meanwhile", self.name, name, error)
        holders.add(holder)

    def recovered(self, holder: Hashable = CLIENT) -> None:
        """``holder`` works again: the conditions it alone held clear."""
        if not self._holders:
            return
        for name in [n for n, holders in self._holders.items() if holder in holders]:
            holders = self._holders[name]
            holders.discard(holder)
            if not holders:
                self._clear(name)

    def answered(self, holder: Hashable) -> None:
        """A broker answered a fetch for ``holder`` (a partition) without error."""
        self.answered_at = time.monotonic()
        self.answered_wall = time.time()
        if self._holders:
            self.recovered(holder)
            # A fetch answered: the brokers are back for the client's own steps too.
            self.recovered(CLIENT)

    def keep_only(self, partitions: set[Hashable]) -> None:
        """Forget the partitions not in ``partitions`` (no longer assigned) as
        holders: a condition only they held clears."""
        for name in list(self._holders):
            holders = self._holders[name]
            gone = {h for h in holders if h != CLIENT and h not in partitions}
            if gone:
                holders -= gone
                if not holders:
                    self._clear(name)

    def started_at(self) -> Optional[float]:
        """When the oldest condition under way started (monotonic; ``None``: none)."""
        return min(self._since.values()) if self._since else None

    def _clear(self, name: str) -> None:
        since = self._since.pop(name)
        del self._holders[name]
        self._latest.pop(name, None)
        log.info("%s: %s cleared after %.1f s", self.name, name, time.monotonic() - since)

    # ------------------------------------------------------------------
    # reading

    @property
    def outage(self) -> Optional[str]:
        """The conditions under way, by error class name, comma-separated (``None``: none)."""
        return ", ".join(sorted(self._holders)) or None

    def outage_seconds(self, now: Optional[float] = None) -> float:
        """How long the oldest condition under way has lasted (0.0: none)."""
        if not self._since:
            return 0.0
        return (time.monotonic() if now is None else now) - min(self._since.values())

    def latest(self) -> Optional[KielError]:
        """The latest error of the oldest condition under way, if any."""
        if not self._since:
            return None
        return self._latest.get(min(self._since, key=self._since.__getitem__))

    def wanting(self, partitions: int, now: float) -> None:
        """Say how many partitions the consumer has to fetch now."""
        if partitions <= 0:
            self.wanting_since = None
        elif self.wanting_since is None:
            self.wanting_since = now

    def stalled_for(self, now: float) -> float:
        """Seconds the consumer has had partitions to fetch without an answer (0.0: none)."""
        if self.wanting_since is None:
            return 0.0
        since = self.wanting_since
        if self.answered_at is not None and self.answered_at > since:
            since = self.answered_at
        return max(0.0, now - since)
