"""SingleConsumer: consume topics with no coordination between consumers.

A :class:`SingleConsumer` fetches every partition of the topics it is asked
for, from a start position of its choosing, and keeps its positions in
memory (nothing is committed). What it shares with the grouped consumer
(fetching, decoding, handing out, closing) is in :mod:`kiel.consumer.base`.

Example::

    from kiel.consumer import SingleConsumer

    async def tail(brokers):
        async with SingleConsumer(brokers) as consumer:
            async for record in consumer.stream("events", start=SingleConsumer.BEGINNING):
                print(record.partition, record.offset, record.value)
"""

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, Optional, Union

from kiel import _options
from kiel._aio import Turns
from kiel.consumer.base import ConsumedBatches, ConsumedRecord, Topics, _BaseConsumer, topic_list
from kiel.consumer.offsets import EARLIEST, list_offsets
from kiel.consumer.positions import BEGINNING, END, Start, check_offset, to_timestamp
from kiel.exc import UnknownPartitionError, UnknownTopicError
from kiel.structs import TopicPartition

__all__ = ["SingleConsumer"]

log = logging.getLogger(__name__)


class SingleConsumer(_BaseConsumer):
    """Consume topics on its own: every partition, positions kept in memory.

    Args:
        brokers: bootstrap list, ``["host", "host:port", ...]`` or a
            comma-separated string.
        **options: keyword-only: the fetch options (``deserializer``,
            ``key_deserializer``, ``max_wait_time``, ``min_bytes``,
            ``max_bytes``, ``max_fetch_size``, ``offset_reset``,
            ``decode_budget``; see :class:`~kiel.consumer.base._BaseConsumer`)
            and the :class:`~kiel.client.Client` settings (``client_id``,
            ``request_timeout``, ``retries``, ...).

    Raises:
        ConfigError: a bad setting.
    """

    #: Start at the oldest offset the broker still holds.
    BEGINNING = BEGINNING
    #: Start with the messages produced from now on (the default).
    END = END

    @_options.constructor
    def __init__(self, brokers: Union[str, Sequence[str]], **options: Any) -> None:
        super().__init__(brokers, **options)
        #: Topics being consumed, and whether new partitions join automatically.
        self._topics: dict[str, bool] = {}
        #: Each followed topic's partition map (the cluster's) last looked
        #: through for new partitions: looked through again only when a
        #: metadata refresh replaced it, not on every consume().
        self._looked: dict[str, Any] = {}
        self._adding = asyncio.Lock()

    # ------------------------------------------------------------------
    # consuming

    async def consume(
        self, topics: Topics, start: Start = END, *, max_records: Optional[int] = None
    ) -> list[ConsumedRecord]:
        """Return the records one fetch round brought for ``topics``.

        The first call for a topic resolves ``start`` for each of its
        partitions; later calls go on from the current positions (use
        :meth:`seek` or :meth:`seek_to` to move).

        Args:
            topics: a topic name, or a list of them.
            start: where a topic starts the first time it is consumed:
                :attr:`BEGINNING`, :attr:`END` (default), an offset for every
                partition, a dict ``{partition: offset}`` (consumes only those
                partitions), a ``datetime`` (naive means UTC) or a
                ``timedelta`` (that long ago). Times resolve at log-segment
                granularity on a 0.8 broker: expect to start somewhat earlier.
            max_records: at most this many records (default: the consumer's
                ``max_records``); the rest are returned by the next calls.

        Returns:
            records ordered by offset within each partition; empty when no
            message arrived within ``max_wait_time`` (about that long, plus
            at most a second for answers on their way). Through a broker
            outage (no broker answering, connections lost, requests timing
            out, leaders moving) it goes on returning what it has, or
            ``[]``, within that wait: the client retries with backoff and
            fetches again as soon as the brokers are back; the outage is
            logged once and shown by :meth:`healthy` and ``metrics()``.

        Raises:
            UnknownTopicError: a topic does not exist.
            UnknownPartitionError: ``start`` names a partition the topic lacks.
            OffsetOutOfRangeError: ``offset_reset="raise"`` and a position is
                out of range.
            MessageTooLargeError: a message does not fit ``max_fetch_size``.
            DeserializationError: the deserializer failed (``offset`` says on
                which message; :meth:`seek` past it to go on).
            CorruptMessageError, CompressionError: a record at the position
                cannot be read (:meth:`seek` past it to go on).
            BrokerError: a refusal retrying cannot mend (authorization, an
                invalid topic...); retriable ones are never raised.
            ClientClosedError: the consumer is closed.
        """
        return self._flatten(await self._fetch(topics, start, self._limit(max_records)))

    async def stream(self, topics: Topics, start: Start = END) -> AsyncIterator[ConsumedRecord]:
        """Iterate over the records of ``topics``, one at a time, for ever.

        ``async for record in consumer.stream("events"): ...`` -- the
        iteration ends when the consumer is closed. Arguments and errors are
        those of :meth:`consume`.

        Leaving the loop early (``break``, an exception) loses nothing: the
        next :meth:`consume` or :meth:`stream` goes on right after the last
        record the loop received, and :meth:`position` counts only records
        the loop received.

        Yields:
            the records, in offset order within each partition.
        """
        async for record in self._stream(lambda: self._fetch(topics, start, self._stream_records)):
            yield record

    async def _fetch(
        self, topics: Topics, start: Start, max_records: Optional[int]
    ) -> ConsumedBatches:
        names = topic_list(topics)
        self._check_open()
        deadline = self._deadline()
        # Strategy: a step the brokers cannot answer now (an outage) is noted
        # and tried again by the next call; the partitions already known are
        # fetched meanwhile (the fetcher rides the outage out per partition).
        # The steps are bounded (kiel._aio.within: a task of their own) only
        # when they have I/O to do: most calls have none.
        cluster = self.cluster
        if cluster.metadata_age <= cluster.metadata_max_age or await self._step(
                cluster.maybe_refresh(), deadline, "a metadata refresh"):
            for topic in names:
                if self._to_start(topic) and not await self._step(
                        self._add_topic(topic, start), deadline, f"starting topic {topic!r}"):
                    break
        wanted = [tp for tp in self.subscription.assignment() if tp.topic in names]
        self._reclaim(wanted)
        self._observe(time.monotonic())
        return await self.fetcher.fetch(wanted, max_records, deadline)

    # ------------------------------------------------------------------
    # topics and start positions

    def _to_start(self, topic: str) -> bool:
        """Whether :meth:`_add_topic` has work for ``topic``: its start, or
        partitions it grew that are not consumed yet."""
        follow = self._topics.get(topic)
        if follow is None:
            return True
        if not follow:
            return False
        known = self.cluster.partitions.get(topic, {})
        if self._looked.get(topic) is known:
            return False  # looked through since the metadata last changed
        is_assigned = self.subscription.is_assigned
        return any(not is_assigned(TopicPartition(topic, p)) for p in known)

    async def _add_topic(self, topic: str, start: Start) -> None:
        if topic not in self._topics:
            # One start per topic: concurrent first calls wait for it.
            async with self._adding:
                if topic not in self._topics:
                    await self._start_topic(topic, start)
        elif self._topics[topic]:
            await self._add_new_partitions(topic)

    async def _start_topic(self, topic: str, start: Start) -> None:
        partitions = await self.cluster.partitions_for(topic)
        snapshot = self.cluster.partitions.get(topic)
        # A topic of 100,000 partitions: every loop over them gives the
        # IOLoop a turn every few milliseconds (issue 35).
        turns = Turns()
        follow = True
        if isinstance(start, dict):
            offsets = {int(p): o for p, o in start.items()}
            unknown = sorted(set(offsets) - set(partitions))
            if unknown:
                raise UnknownPartitionError(
                    f"topic has partitions {partitions}, not {unknown}",
                    topic=topic,
                    partition=unknown[0],
                )
            for i, (p, o) in enumerate(offsets.items()):
                check_offset(o, topic, p)
                if not i % 256:
                    await turns.give()
            follow = False
        elif isinstance(start, int) and not isinstance(start, bool):
            check_offset(start, topic)
            offsets = {p: start for p in partitions}
        else:
            timestamp = to_timestamp(start)
            tps: dict[TopicPartition, int] = {}
            for i, p in enumerate(partitions):
                tps[TopicPartition(topic, p)] = timestamp
                if not i % 256:
                    await turns.give()
            found = await list_offsets(self.cluster, tps, read_committed=self._read_committed)
            offsets = {}
            for i, (tp, o) in enumerate(found.items()):
                offsets[tp.partition] = o
                if not i % 256:
                    await turns.give()
        for i, (p, o) in enumerate(sorted(offsets.items())):
            self.subscription.assign(TopicPartition(topic, p), o)
            if not i % 256:
                await turns.give()
        self._topics[topic] = follow
        if follow:
            # Every partition of that map is assigned: no need to look through
            # it for new ones (a refresh meanwhile replaced it: then they are).
            self._looked[topic] = snapshot
        # A large topic's offsets are counted, not listed (one line, one step).
        shown: Any = offsets if len(offsets) <= 16 else f"{len(offsets)} partitions"
        log.debug("consuming %s from %s: %s", topic, start, shown)

    async def _add_new_partitions(self, topic: str) -> None:
        subscription = self.subscription
        known = self.cluster.partitions.get(topic, {})
        if self._looked.get(topic) is known:
            return  # looked through already: the metadata has not changed since
        new = [p for p in known if not subscription.is_assigned(TopicPartition(topic, p))]
        if not new:
            self._looked[topic] = known
            return
        # Partitions added while we consume hold only new messages: read them all.
        tps = {TopicPartition(topic, p): EARLIEST for p in new}
        for tp, offset in (await list_offsets(self.cluster, tps)).items():
            if not subscription.is_assigned(tp):
                log.info(
                    "topic %s grew: consuming new partition %d from %d", topic, tp.partition, offset
                )
                subscription.assign(tp, offset)

    # ------------------------------------------------------------------
    # partitions and positions

    def _tps(self, topic: str, partition: Optional[int]) -> list[TopicPartition]:
        if topic not in self._topics:
            raise UnknownTopicError("the consumer has not consumed this topic yet", topic=topic)
        if partition is None:
            # That topic's partitions only: the whole assignment, sorted, of a
            # consumer of 100,000 partitions held the loop for milliseconds.
            return [TopicPartition(topic, p) for p in self._partition_ids(topic)]
        tp = TopicPartition(topic, partition)
        self.subscription.state(tp)  # raises UnknownPartitionError
        return [tp]

    def partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic`` this consumer fetches.

        Raises:
            UnknownTopicError: the topic was never consumed.
        """
        if topic not in self._topics:
            raise UnknownTopicError("the consumer has not consumed this topic yet", topic=topic)
        return self._partition_ids(topic)

    def _partition_ids(self, topic: str) -> list[int]:
        """The assigned partitions of ``topic``, sorted (assigned in order: the sort
        has nothing to do)."""
        return sorted(self.subscription.by_topic().get(topic, ()))

    def pause(self, topic: str, partition: Optional[int] = None) -> None:
        """Stop fetching and returning a partition (or every partition of ``topic``).

        Records already fetched are kept and returned after :meth:`resume`.

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        for tp in self._tps(topic, partition):
            self.subscription.pause(tp)

    def resume(self, topic: str, partition: Optional[int] = None) -> None:
        """Undo :meth:`pause` for a partition (or every partition of ``topic``).

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        for tp in self._tps(topic, partition):
            self.subscription.resume(tp)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Make ``offset`` the next offset consumed from a partition.

        Records fetched but not yet returned are dropped. An offset outside
        the broker's range is handled by ``offset_reset`` on the next fetch.

        Raises:
            ConfigError: a negative offset.
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        (tp,) = self._tps(topic, partition)
        self.subscription.state(tp).take_loan()
        self.subscription.seek(tp, offset)

    async def seek_to(self, topic: str, start: Start, partition: Optional[int] = None) -> None:
        """Move a partition (or every partition of ``topic``) to a start position.

        A topic not consumed yet starts being consumed from ``start``, as by a
        first :meth:`consume` (without ``partition``).

        Args:
            topic: a topic.
            start: as for :meth:`consume` (a dict applies to the partitions it
                names).
            partition: one partition, or ``None`` for all of the topic's.

        Raises:
            UnknownTopicError: the topic does not exist (or, with
                ``partition``, is not consumed yet).
            UnknownPartitionError: the partition is not consumed.
            ConfigError: a bad ``start``.
            BrokerError, NoBrokersError: the offsets could not be resolved.
        """
        if partition is None and topic not in self._topics:
            self._check_open()
            await self._add_topic(topic, start)
            return
        await self._seek_all(topic, self._tps(topic, partition), start)
