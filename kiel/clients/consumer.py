"""SingleConsumer: consume topics with no coordination between consumers.

A :class:`SingleConsumer` fetches every partition of the topics it is asked
for, from a start position of its choosing, and keeps its positions in
memory (nothing is committed). The fetch machinery lives in
:class:`kiel.clients.fetcher.Fetcher`, which the grouped consumer shares.

Example::

    from kiel.clients.consumer import SingleConsumer

    async def tail(brokers):
        async with SingleConsumer(brokers) as consumer:
            async for record in consumer.stream("events", start=SingleConsumer.BEGINNING):
                print(record.partition, record.offset, record.value)
"""

import asyncio
import logging
from typing import (
    Any,
    AsyncIterator,
    Dict,
    List,
    Optional,
    Sequence,
    Union,
)

from kiel.client import Client
from kiel.clients.fetcher import Deserializer, Fetcher, list_offsets, to_timestamp
from kiel.clients.records import (
    BEGINNING,
    END,
    Record,
    Start,
    TopicPartition,
    lag_of,
)
from kiel.exc import ClientClosedError, ConfigError, UnknownPartitionError, UnknownTopicError
from kiel.protocol.list_offsets import EARLIEST

__all__ = ["BEGINNING", "END", "Record", "SingleConsumer", "TopicPartition"]

log = logging.getLogger(__name__)

Topics = Union[str, Sequence[str]]


class SingleConsumer(Client):
    """Consume topics on its own: every partition, positions kept in memory.

    Args:
        brokers: bootstrap list, ``["host", "host:port", ...]`` or a
            comma-separated string.
        deserializer: called with each non-null value (``bytes``); its
            result becomes ``Record.value`` (default: raw ``bytes``).
        key_deserializer: the same for keys (default: raw ``bytes``).
        max_wait_time: seconds a broker may hold a fetch while it has less
            than ``min_bytes`` for it; :meth:`consume` returns an empty list
            after about that long when no message arrives.
        min_bytes: bytes a broker waits for before answering a fetch.
        max_bytes: bytes fetched per partition per request.
        max_fetch_size: a message larger than ``max_bytes`` doubles that
            partition's fetch size, up to this cap; a message larger still
            raises :class:`~kiel.exc.MessageTooLargeError`.
        offset_reset: when the broker answers OffsetOutOfRange (the position
            was deleted by retention, or lies past the end): ``"earliest"``,
            ``"latest"``, or ``"raise"`` to raise
            :class:`~kiel.exc.OffsetOutOfRangeError`.
        decode_budget: seconds of decoding after which the consumer yields to
            the IOLoop (bounds how long decoding a big fetch stalls the loop).
        **client_options: the :class:`~kiel.client.Client` settings
            (``client_id``, ``connect_timeout``, ``request_timeout``,
            ``retry_backoff``, ``max_backoff``, ``retries``, ...).

    Raises:
        ConfigError: a bad setting.
    """

    #: Start at the oldest offset the broker still holds.
    BEGINNING = BEGINNING
    #: Start with the messages produced from now on (the default).
    END = END

    def __init__(
        self,
        brokers: Union[str, Sequence[str]],
        deserializer: Optional[Deserializer] = None,
        key_deserializer: Optional[Deserializer] = None,
        max_wait_time: float = 1.0,
        min_bytes: int = 1,
        max_bytes: int = 1024 * 1024,
        max_fetch_size: int = 16 * 1024 * 1024,
        offset_reset: str = "earliest",
        decode_budget: float = 0.002,
        **client_options: Any,
    ) -> None:
        super().__init__(brokers, **client_options)
        self.fetcher = Fetcher(
            self.cluster,
            max_wait_time=max_wait_time,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            max_fetch_size=max_fetch_size,
            offset_reset=offset_reset,
            deserializer=deserializer,
            key_deserializer=key_deserializer,
            decode_budget=decode_budget,
        )
        #: Topics being consumed, and whether new partitions join automatically.
        self._topics: Dict[str, bool] = {}
        self._adding: Dict[str, asyncio.Future[None]] = {}
        #: Records handed to stream() loops and not yielded yet:
        #: partition -> [first offset not yielded, the loop's token].
        self._loans: Dict[TopicPartition, List[Any]] = {}

    # ------------------------------------------------------------------
    # consuming

    async def consume(self, topics: Topics, start: Start = END) -> List[Record]:
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

        Returns:
            records ordered by offset within each partition; empty when no
            message arrived within ``max_wait_time``.

        Raises:
            UnknownTopicError: a topic does not exist.
            UnknownPartitionError: ``start`` names a partition the topic lacks.
            OffsetOutOfRangeError: ``offset_reset="raise"`` and a position is
                out of range.
            MessageTooLargeError: a message does not fit ``max_fetch_size``.
            DeserializationError: the deserializer failed (``offset`` says on
                which message; :meth:`seek` past it to go on).
            KielConnectionError, RequestTimeoutError, NoBrokersError,
            BrokerError: a retriable failure persisted past ``retries``; the
                next call tries again.
            ClientClosedError: the consumer is closed.
        """
        batches = await self._fetch(topics, start)
        if len(batches) == 1:
            return next(iter(batches.values()))
        records: List[Record] = []
        for tp in sorted(batches):
            records.extend(batches[tp])
        return records

    async def _fetch(self, topics: Topics, start: Start) -> Dict[TopicPartition, List[Record]]:
        names = self._topic_list(topics)
        self._check_open()
        await self.cluster.maybe_refresh()
        for topic in names:
            await self._add_topic(topic, start)
        wanted = [tp for tp in self.fetcher.assignment() if tp.topic in names]
        self._reclaim(wanted)
        return await self.fetcher.fetch(wanted)

    async def stream(self, topics: Topics, start: Start = END) -> AsyncIterator[Record]:
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
        loans = self._loans
        while True:
            try:
                batches = await self._fetch(topics, start)
            except ClientClosedError:
                return
            # Strategy: a batch's positions already moved past it in the
            # fetcher; each partition's records are on loan to this loop
            # until yielded. A consume()/seek() while some are not yet
            # yielded (the loop was left, or runs alongside) takes the loan
            # back: the partition is sought to its first record not yielded,
            # and this loop skips the rest of that partition's batch.
            token = object()
            for tp, records in batches.items():
                loans[tp] = [records[0].offset, token]
            for tp in sorted(batches):
                loan = loans.get(tp)
                for record in batches[tp]:
                    if loan is None or loan[1] is not token:
                        break
                    loan[0] = record.offset + 1
                    yield record
                    loan = loans.get(tp)
                if loan is not None and loan[1] is token:
                    del loans[tp]

    def _reclaim(self, tps: Any) -> None:
        """Take back records a stream() loop has not yielded (see :meth:`stream`)."""
        loans = self._loans
        if not loans:
            return
        for tp in list(tps):
            loan = loans.pop(tp, None)
            if loan is not None and self.fetcher.is_assigned(tp):
                if loan[0] < self.fetcher.position(tp):
                    self.fetcher.seek(tp, loan[0])

    # ------------------------------------------------------------------
    # topics and start positions

    @staticmethod
    def _topic_list(topics: Topics) -> List[str]:
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names or not all(isinstance(t, str) and t for t in names):
            raise ConfigError(f"topics must be a name or a list of names, got {topics!r}")
        return names

    def _check_open(self) -> None:
        if self.closed:
            raise ClientClosedError("the consumer is closed")

    async def _add_topic(self, topic: str, start: Start) -> None:
        if topic in self._topics:
            if self._topics[topic]:
                await self._add_new_partitions(topic)
            return
        pending = self._adding.get(topic)
        if pending is None:
            pending = self._adding[topic] = asyncio.ensure_future(self._start_topic(topic, start))
            pending.add_done_callback(lambda _f: self._adding.pop(topic, None))
        await asyncio.shield(pending)

    async def _start_topic(self, topic: str, start: Start) -> None:
        partitions = await self.cluster.partitions_for(topic)
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
            for p, o in offsets.items():
                _check_offset(o, topic, p)
            follow = False
        elif isinstance(start, int) and not isinstance(start, bool):
            _check_offset(start, topic, None)
            offsets = {p: start for p in partitions}
        else:
            timestamp = to_timestamp(start)
            tps = {TopicPartition(topic, p): timestamp for p in partitions}
            offsets = {tp.partition: o for tp, o in (await list_offsets(self.cluster, tps)).items()}
        for p, o in sorted(offsets.items()):
            self.fetcher.assign(TopicPartition(topic, p), o)
        self._topics[topic] = follow
        log.debug("consuming %s from %s: %s", topic, start, offsets)

    async def _add_new_partitions(self, topic: str) -> None:
        known = self.cluster.partitions.get(topic, {})
        new = [p for p in known if not self.fetcher.is_assigned(TopicPartition(topic, p))]
        if not new:
            return
        # Partitions added while we consume hold only new messages: read them all.
        tps = {TopicPartition(topic, p): EARLIEST for p in new}
        for tp, offset in (await list_offsets(self.cluster, tps)).items():
            if not self.fetcher.is_assigned(tp):
                log.info(
                    "topic %s grew: consuming new partition %d from %d", topic, tp.partition, offset
                )
                self.fetcher.assign(tp, offset)

    # ------------------------------------------------------------------
    # positions

    def _tps(self, topic: str, partition: Optional[int]) -> List[TopicPartition]:
        if topic not in self._topics:
            raise UnknownTopicError("the consumer has not consumed this topic yet", topic=topic)
        if partition is None:
            return [tp for tp in self.fetcher.assignment() if tp.topic == topic]
        return [TopicPartition(topic, partition)]

    def partitions(self, topic: str) -> List[int]:
        """The partitions of ``topic`` this consumer fetches.

        Raises:
            UnknownTopicError: the topic was never consumed.
        """
        return [tp.partition for tp in self._tps(topic, None)]

    def pause(self, topic: str, partition: Optional[int] = None) -> None:
        """Stop fetching and returning a partition (or every partition of ``topic``).

        Records already fetched are kept and returned after :meth:`resume`.

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        for tp in self._tps(topic, partition):
            self.fetcher.pause(tp)

    def resume(self, topic: str, partition: Optional[int] = None) -> None:
        """Undo :meth:`pause` for a partition (or every partition of ``topic``).

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        for tp in self._tps(topic, partition):
            self.fetcher.resume(tp)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Make ``offset`` the next offset consumed from a partition.

        Records fetched but not yet returned are dropped. An offset outside
        the broker's range is handled by ``offset_reset`` on the next fetch.

        Raises:
            ConfigError: a negative offset.
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        (tp,) = self._tps(topic, partition)
        self._loans.pop(tp, None)
        self.fetcher.seek(tp, offset)

    async def seek_to(self, topic: str, start: Start, partition: Optional[int] = None) -> None:
        """Move a partition (or every partition of ``topic``) to a start position.

        Args:
            topic: a topic being consumed.
            start: as for :meth:`consume` (a dict applies to the partitions it
                names).
            partition: one partition, or ``None`` for all of the topic's.

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
            ConfigError: a bad ``start``.
            BrokerError, NoBrokersError: the offsets could not be resolved.
        """
        tps = self._tps(topic, partition)
        for tp in tps:
            self.fetcher.state(tp)
            self._loans.pop(tp, None)
        if isinstance(start, dict):
            for p, o in start.items():
                self.seek(topic, int(p), o)
            return
        if isinstance(start, int) and not isinstance(start, bool):
            for tp in tps:
                self.fetcher.seek(tp, start)
            return
        timestamp = to_timestamp(start)
        offsets = await list_offsets(self.cluster, {tp: timestamp for tp in tps})
        for tp, offset in offsets.items():
            self.fetcher.seek(tp, offset)

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record :meth:`consume` returns for a partition.

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        (tp,) = self._tps(topic, partition)
        loan = self._loans.get(tp)
        position = self.fetcher.position(tp)
        return position if loan is None else min(loan[0], position)

    def highwater(self, topic: str, partition: int) -> Optional[int]:
        """A partition's high watermark (the offset the next message will get)
        as of the latest fetch, or ``None`` before the first one.

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        (tp,) = self._tps(topic, partition)
        return self.fetcher.highwater(tp)

    def lag(self, topic: str, partition: Optional[int] = None) -> Any:
        """Messages between the position and the high watermark.

        Args:
            topic: a topic being consumed.
            partition: one partition, or ``None`` for a dict of all of them.

        Returns:
            the lag (``Optional[int]``, ``None`` before the first fetch), or a
            dict ``{partition: lag}`` when ``partition`` is ``None``.

        Raises:
            UnknownTopicError, UnknownPartitionError: not consumed.
        """
        tps = self._tps(topic, partition)
        lags = {
            tp.partition: lag_of(self.fetcher.highwater(tp), self.position(tp.topic, tp.partition))
            for tp in tps
        }
        return lags if partition is None else lags[partition]

    # ------------------------------------------------------------------

    async def close(self) -> None:
        """Stop fetching and close every connection; pending calls raise ClientClosedError."""
        self.fetcher.close()
        await super().close()
        await self.fetcher.wait_closed()


def _check_offset(offset: Any, topic: str, partition: Optional[int]) -> None:
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ConfigError(
            f"a start offset must be an int >= 0, got {offset!r}", topic=topic, partition=partition
        )

