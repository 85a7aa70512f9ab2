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
from typing import NamedTuple, Optional

from kiel.exc import DeliveryUnknownError
from kiel.structs import RecordMetadata

__all__ = ["FailedRecord", "FlushResult", "MAX_LISTED_FAILURES", "Outcomes"]

#: A :class:`FlushResult` lists at most this many failed records (the
#: others are counted, and their futures carry their errors): what is held
#: between two reports stays bounded.
MAX_LISTED_FAILURES = 10000


class FailedRecord(NamedTuple):
    """A record that failed, as :meth:`~kiel.producer.Producer.flush` reports it."""

    topic: str
    #: ``None`` when it failed before a partition was picked.
    partition: Optional[int]
    #: the future :meth:`~kiel.producer.Producer.produce` returned for it:
    #: compare it with the ones you kept to know which record it was.
    future: "asyncio.Future[RecordMetadata]"
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

    def fail(self, future: "asyncio.Future[RecordMetadata]", error: BaseException,
             topic: str, partition: Optional[int] = None) -> None:
        """Fail a record's future (unless its owner cancelled it) and keep it
        for the next report.

        Args:
            future: the record's future.
            error: what it fails with.
            topic: the record's topic.
            partition: its partition, if one was picked.
        """
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
            item.future.exception()
        return result
