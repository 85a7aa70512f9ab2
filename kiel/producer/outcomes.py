"""What happened to the records since the last report: the cheap way to wait
for many.

Every record's future is settled in one of two places: acknowledged by the
sender, or failed through :meth:`Outcomes.fail`. Both also count here, so
:meth:`~kiel.producer.Producer.flush` can say how many records were
delivered and which failed without anyone awaiting (or gathering) a future
per record: awaiting 200,000 futures with :func:`asyncio.gather` costs more
CPU than producing them.
"""

import asyncio
from collections.abc import Callable, Sequence
from typing import NamedTuple, Optional, TypeVar

from kiel.exc import DeliveryUnknownError
from kiel.structs import RecordMetadata

__all__ = ["FAIL_CHUNK", "FailedRecord", "FlushResult", "MAX_LISTED_FAILURES", "Outcomes",
           "in_chunks"]

_T = TypeVar("_T")

#: A :class:`FlushResult` lists at most this many failed records (the
#: others are counted, and their futures carry their errors): what is held
#: between two reports stays bounded.
MAX_LISTED_FAILURES = 10000
#: Records settled (or admitted) in one IOLoop step when many fail together
#: (a close, a topic whose metadata cannot be had) or wait for the same
#: metadata, before the loop gets a turn: a few milliseconds of work.
FAIL_CHUNK = 1000


class FailedRecord(NamedTuple):
    """A record that failed, as :meth:`~kiel.producer.Producer.flush` reports it."""

    topic: str
    #: ``None`` when it failed before a partition was picked.
    partition: Optional[int]
    #: the future :meth:`~kiel.producer.Producer.produce` returned for it:
    #: compare it with the ones you kept to know which record it was;
    #: ``None`` for a record of :meth:`~kiel.producer.Producer.produce_many`
    #: (which gives no future), and for one whose future nobody held any
    #: more when its batch closed (the producer let it go then: see
    #: :class:`~kiel.producer.accumulator.RecordAccumulator`'s ``unheld``).
    future: "Optional[asyncio.Future[RecordMetadata]]"
    #: what its future failed with.
    error: BaseException

    @property
    def maybe_written(self) -> bool:
        """Whether the broker may have written it (its error is a
        :class:`~kiel.exc.DeliveryUnknownError`): producing it again may
        write it twice. Otherwise it was certainly not written."""
        return isinstance(self.error, DeliveryUnknownError)


class FlushResult(NamedTuple):
    """Records settled since the previous report.

    A report covers every record settled since the previous one (taken by
    :meth:`~kiel.producer.Producer.flush`), produced by any caller.
    """

    #: records the broker acknowledged (written, with ``required_acks=0``).
    delivered: int
    #: records whose future failed (``unknown`` included).
    failed: int
    #: the first :data:`MAX_LISTED_FAILURES` of them, in the order they failed.
    failures: list[FailedRecord]
    #: of the ``failed``, those the broker may have written
    #: (:class:`~kiel.exc.DeliveryUnknownError`: a request carried them and
    #: was never answered); the other ``failed - unknown`` were certainly
    #: not written.
    unknown: int = 0


class Outcomes:
    """Counts delivered records and fails records' futures, keeping the failures.

    Args:
        max_listed: failures kept for the next report, at most.
    """

    __slots__ = ("delivered", "failed", "failed_total", "failures", "max_listed", "unknown")

    def __init__(self, max_listed: int = MAX_LISTED_FAILURES) -> None:
        self.max_listed = max_listed
        #: records acknowledged since the last :meth:`take`.
        self.delivered = 0
        #: records failed since the last :meth:`take`.
        self.failed = 0
        #: records failed since the start (not reset by :meth:`take`).
        self.failed_total = 0
        #: records failed since the last :meth:`take` that may have been written.
        self.unknown = 0
        self.failures: list[FailedRecord] = []

    def fail(self, future: "Optional[asyncio.Future[RecordMetadata]]", error: BaseException,
             topic: str, partition: Optional[int] = None) -> None:
        """Fail a record's future (unless its owner cancelled it) and keep it
        for the next report.

        Args:
            future: the record's future; ``None`` for a record without one
                (counted and listed all the same).
            error: what it fails with.
            topic: the record's topic.
            partition: its partition, if one was picked.
        """
        if future is not None:
            if future.done():
                return  # cancelled by its owner, who gave up on it
            future.set_exception(error)
        self.failed += 1
        if isinstance(error, DeliveryUnknownError):
            self.unknown += 1
        self.failed_total += 1
        if len(self.failures) < self.max_listed:
            self.failures.append(FailedRecord(topic, partition, future, error))

    def take(self) -> FlushResult:
        """The report since the last one; counting starts again from zero.

        The listed futures' errors count as retrieved (asyncio does not warn
        that nobody read them): the report handed them to the caller.

        Returns:
            a :class:`FlushResult`.
        """
        result = FlushResult(self.delivered, self.failed, self.failures, self.unknown)
        self.delivered = self.failed = self.unknown = 0
        self.failures = []
        for item in result.failures:
            if item.future is not None:
                item.future.exception()
        return result


async def in_chunks(items: Sequence[_T], settle: Callable[[_T], int]) -> None:
    """Call ``settle`` on each item, giving the IOLoop a turn after every
    :data:`FAIL_CHUNK` records settled (``settle`` returns how many it settled).

    Strategy: failing 100,000 futures in one step holds the loop for most of
    a second; a turn every chunk keeps it answering. Cancelled while it
    waits for its turn, it settles the rest at once before the cancellation
    goes on: no record is left pending.

    Args:
        items: what to settle, in order.
        settle: settles one item; returns the records it settled.
    """
    done = 0
    since_turn = 0
    try:
        for item in items:
            done += 1
            since_turn += settle(item)
            if since_turn >= FAIL_CHUNK:
                since_turn = 0
                await asyncio.sleep(0)
    except asyncio.CancelledError:
        for item in items[done:]:
            settle(item)
        raise
