"""The producer's I/O: Produce requests from drained batches, and every
record's future settled.

Each request is built in the leader's negotiated Produce version: v3 carries
each batch as a record batch (magic 2: timestamps, headers, zstd), v0 as a
magic-0 message set; one encoder per format
(:class:`~kiel.protocol.record_batch.RecordBatchBuilder`,
:class:`~kiel.protocol.messages.MessageSetBuilder`).

One drain runs per IOLoop iteration at most (or when a linger or a backoff
ends): it takes from the accumulator what can go now, groups it into one
ProduceRequest per leader (split at ``max_request_size``) and sends each in
its own task. The answer settles each partition's batches: acknowledged
(futures resolve with their offsets), retried (back at the front of the
partition after a backoff, after a metadata refresh if the error says the
metadata is stale), or failed with the typed error.
"""

import asyncio
import collections
import copy
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from itertools import repeat
from operator import attrgetter
from typing import Any, Optional

from kiel._aio import Tasks
from kiel.cluster import Cluster
from kiel.connection import CloseReason
from kiel.exc import (
    ClientClosedError,
    ConnectTimeoutError,
    DeliveryUnknownError,
    KielError,
    LeaderNotAvailableError,
    ProtocolError,
    UnknownPartitionError,
    UnknownTopicError,
    UnknownTopicOrPartitionError,
    for_code,
)
from kiel.metrics import count_error
from kiel.producer.accumulator import PartitionQueue, ProducerBatch, RecordAccumulator, Taken
from kiel.producer.idempotence import (
    DUPLICATE_SEQUENCE,
    OUT_OF_ORDER_SEQUENCE,
    RENEW_CODES,
    Idempotence,
)
from kiel.producer.outcomes import Outcomes, in_chunks
from kiel.producer.transactions import Transactions
from kiel.protocol import (
    ProducePartitionData,
    ProduceRequest,
    ProduceRequestV3,
    ProduceTopicData,
)
from kiel.protocol.versions import PRODUCE
from kiel.structs import RecordMetadata, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["Sender", "copy_error", "delivery_unknown", "unheld"]

_new_metadata = tuple.__new__
#: Every record future is an asyncio.Future (the producer makes them so).
_set_result = asyncio.Future.set_result
#: deque(iterator, 0) runs an iterator to its end, keeping nothing.
_drain = collections.deque
#: A reference count, where it tells who holds an object (CPython with its
#: GIL: without it another thread may take a reference meanwhile), else None.
_refcount = (sys.getrefcount if sys.implementation.name == "cpython"
             and getattr(sys, "_is_gil_enabled", lambda: True)() else None)
#: What getrefcount says of a future that only the batch's list holds (the
#: list, and getrefcount's own argument).
_UNHELD = 2
#: A future's done callbacks (None, or an empty list, when it has none).
_callbacks_of = attrgetter("_callbacks")


class Sender:
    """Sends what the accumulator holds and settles the records' futures.

    Args:
        cluster: the brokers and their metadata.
        accumulator: where the batches wait; each record's payload is its
            :class:`asyncio.Future` of :class:`~kiel.structs.RecordMetadata`.
        required_acks: -1, 0 or 1.
        ack_timeout: seconds the broker may wait for replicas.
        request_timeout: seconds to wait for each response.
        topics: the topics a metadata refresh asks about.
        settled: called after batches were acknowledged or failed.
        closed: whether the producer is closing (retries stop).
        tasks: where requests and metadata refreshes run.
        outcomes: counts delivered records and fails futures.
        idempotence: the idempotent producer's state, or ``None`` when it
            is off (``idempotent=False``, or acks other than -1).
        in_flight_without: batches in flight per partition if idempotence
            turns out off (the broker does not serve InitProducerId).
    """

    def __init__(
        self,
        cluster: Cluster,
        accumulator: RecordAccumulator,
        *,
        required_acks: int,
        ack_timeout: float,
        request_timeout: float,
        topics: Callable[[], Iterable[str]],
        settled: Callable[[], None],
        closed: Callable[[], bool],
        tasks: Tasks,
        outcomes: Outcomes,
        idempotence: Optional[Idempotence] = None,
        in_flight_without: int = 1,
    ) -> None:
        self._cluster = cluster
        self.idempotence = idempotence
        #: Produce requests out and unsettled (an identity is renewed only
        #: when none is: their answers come under the old one).
        self._requests_out = 0
        self._identity: Optional[asyncio.Task[None]] = None
        #: A transactional producer's transactions (set by the producer), else None.
        self.transactions: Optional[Transactions] = None
        self._in_flight_without = in_flight_without
        self._outcomes = outcomes
        self._accumulator = accumulator
        self._required_acks = required_acks
        self._ack_timeout_ms = int(ack_timeout * 1000)
        self._request_timeout = request_timeout
        self._topics = topics
        self._settled = settled
        self._closed = closed
        self._tasks = tasks
        self._drain_handle: Optional[asyncio.Handle] = None
        self._timer: Optional[asyncio.TimerHandle] = None
        self._timer_due = 0.0
        self._force = False
        self._refreshing: Optional[asyncio.Task[None]] = None
        self._metadata_error: Optional[KielError] = None
        # Counters for Producer.metrics(): one add per batch or partition.
        #: Records acknowledged (written, with required_acks=0).
        self.records_out = 0
        #: Bytes of encoded batches sent, and the batches (retries included).
        self.bytes_out = self.batches_out = 0
        #: Errors sending batches, by class name (per partition and attempt).
        self.errors: dict[str, int] = {}

    # ------------------------------------------------------------------
    # when to drain

    def wake(self, force: bool = False) -> None:
        """Drain on the next IOLoop iteration.

        Args:
            force: close the open batches whatever their linger (once).
        """
        if force:
            self._force = True
        if self._drain_handle is None:
            self._drain_handle = asyncio.get_running_loop().call_soon(self._drain)

    def wake_at(self, when: float) -> None:
        """Drain at ``when`` at the latest.

        Strategy: one timer for the earliest time anything becomes due; each
        drain reports the next such time (see
        :class:`~kiel.producer.accumulator.Drained`), so a batch
        or a backoff needs no timer of its own.

        Args:
            when: a time on the event loop's clock.
        """
        if self._drain_handle is not None:
            return  # a drain is coming, and it looks at everything
        loop = asyncio.get_running_loop()
        if when <= loop.time():
            self._drain_handle = loop.call_soon(self._drain)
            return
        timer = self._timer
        if timer is not None:
            if self._timer_due <= when:
                return
            timer.cancel()
        self._timer_due = when
        self._timer = loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self.wake()

    def _drain(self) -> None:
        """Send everything sendable, one request per leader (or more, split
        at ``max_request_size``)."""
        self._drain_handle = None
        idem = self.idempotence
        if idem is not None and not idem.ready:
            # Nothing goes before the producer has its identity; a renewal
            # waits until every request out has settled.
            if self._requests_out == 0 and self._pending():
                self.identity()
            return
        txn = self.transactions
        if txn is not None and not txn.partitions_added():
            return  # AddPartitionsToTxn under way; it wakes the sender when done
        force, self._force = self._force, False
        accumulator = self._accumulator
        drained = accumulator.drain(asyncio.get_running_loop().time(), self._leader_of, force)
        for queue, batches in drained.unroutable:
            self._retry_or_fail(queue, batches, self._unroutable_error(queue.tp))
        numbered = idem is not None and idem.enabled
        for leader, items in drained.ready.items():
            if numbered:
                assert idem is not None
                # In the order taken: a partition's batches are numbered in
                # the order they were produced (its requests go in that order).
                for queue, batches in items:
                    for batch in batches:
                        idem.number(queue, batch)
            for chunk in _requests(items, accumulator.max_request_size):
                self._requests_out += 1
                self._tasks.spawn(self._send(leader, chunk), "produce")
        if drained.next_due is not None:
            self.wake_at(drained.next_due)
        cluster = self._cluster
        if cluster.metadata_age > cluster.metadata_max_age:
            self.refresh_metadata()

    def _pending(self) -> bool:
        return self._accumulator.oldest_unfinished() is not None

    # ------------------------------------------------------------------
    # the idempotent producer's identity

    def identity(self) -> "asyncio.Task[None]":
        """Get (or renew) the producer id and epoch, unless under way.

        Returns:
            the task doing it (done at once when idempotence is off).
        """
        task = self._identity
        if task is None:
            task = self._identity = self._tasks.spawn(self._acquire(), "producer-id",
                                                      quiet=(KielError,))
        return task

    async def _acquire(self) -> None:
        """Get the identity, retrying with backoff; once retries run out,
        fail the records waiting (not silent) and raise."""
        idem = self.idempotence
        assert idem is not None
        backoff = self._cluster.backoff
        failures = 0
        renewing = idem.producer_id >= 0
        try:
            while True:
                try:
                    await idem.acquire(self._cluster, self._request_timeout)
                    break
                except KielError as e:
                    failures += 1
                    if (not e.retriable or self._closed() or backoff.retries is not None
                            and failures > backoff.retries):
                        log.warning("producer: no producer id: %s", e)
                        self._fail(self._accumulator.unfinished(), e)
                        raise
                    await asyncio.sleep(backoff.delay(failures))
            if renewing and idem.enabled:
                self._renumber()
            elif not idem.enabled:
                # A broker without InitProducerId (Kafka 0.8): batches go
                # as they would without idempotence.
                self._accumulator.max_in_flight = self._in_flight_without
        finally:
            self._identity = None
            self.wake()

    def _renumber(self) -> None:
        """After a renewal: every partition starts again at sequence 0; the
        batches not acknowledged are numbered again when they go, except
        those an unanswered attempt may have written (they fail with
        :class:`~kiel.exc.DeliveryUnknownError`: sent again under a new
        identity, the broker could not tell them from new records)."""
        maybe_written = []
        for queue in self._accumulator.queues():
            queue.next_sequence = 0
            queue.unacked.clear()
        for batch in self._accumulator.unfinished():
            if batch.base_sequence < 0:
                continue
            if batch.unanswered:
                maybe_written.append(batch)
            else:
                batch.number(-1, -1, -1)
        if maybe_written:
            self._fail(maybe_written, KielError(
                "the producer renewed its producer id or epoch, and the broker could not "
                "match a batch sent again under the new one with the earlier attempt"))

    def _leader_of(self, tp: TopicPartition) -> Optional[int]:
        try:
            leader = self._cluster.leader(tp.topic, tp.partition)
        except (UnknownTopicError, UnknownPartitionError):
            return None
        return leader if leader >= 0 and leader in self._cluster.brokers else None

    def _unroutable_error(self, tp: TopicPartition) -> KielError:
        if self._metadata_error is not None:
            # Not dropped: the refresh failure is why there is no leader.
            return copy_error(self._metadata_error)
        try:
            leader = self._cluster.leader(tp.topic, tp.partition)
        except (UnknownTopicError, UnknownPartitionError):
            leader = 0
        if leader < 0:
            return LeaderNotAvailableError("the partition has no leader")
        return UnknownTopicOrPartitionError("the partition is not in the cluster metadata")

    # ------------------------------------------------------------------
    # one request

    async def _send(self, leader: int, chunk: list[Taken]) -> None:
        """Send one ProduceRequest and settle every batch in it."""
        # Strategy: each batch counts its attempts that are out without an
        # answer. An answer (or a failure to even connect) settles the
        # attempt; a timeout, a broken connection or a cancellation (close)
        # leaves it counted: the broker may have written the batch, which
        # stop() must not report as "not sent".
        sent: list[ProducerBatch] = []
        try:
            await self._send_and_settle(leader, chunk, sent)
        finally:
            self._requests_out -= 1
        self.wake()

    async def _send_and_settle(self, leader: int, chunk: list[Taken],
                               sent: list[ProducerBatch]) -> None:
        try:
            version = (await self._cluster.versions(leader)).of(PRODUCE)
            request, chunk = self._request(chunk, version)
            if not chunk:  # every partition failed to encode (and was failed)
                return
            sent.extend(batch for _, batches in chunk for batch in batches)
            for batch in sent:
                batch.unanswered += 1
            response = await self._cluster.send(leader, request, timeout=self._request_timeout)
        except KielError as e:
            if _never_written(e):
                _answered(sent)
            for queue, batches in chunk:
                queue.in_flight -= 1
                self._retry_or_fail(queue, batches, copy_error(e, broker_id=leader))
        except Exception as e:  # a bug: fail the records loudly rather than strand them
            log.exception("producer: unexpected error sending to broker %s", leader)
            for queue, batches in chunk:
                count_error(self.errors, e)
                queue.in_flight -= 1
                self._fail(batches, e)
        else:
            _answered(sent)
            self._settle(leader, chunk, response)

    def _request(self, chunk: list[Taken], version: int) -> tuple[Any, list[Taken]]:
        """The ProduceRequest for ``chunk`` in the leader's ``version``.

        Produce v3 and later carry record batches (magic 2), v0 message sets.
        A partition whose batches the version cannot carry (timestamps or
        headers for a v0 broker) fails here, with its typed error, and is
        left out of the request.

        Returns:
            the request and the part of ``chunk`` it carries.
        """
        accumulator = self._accumulator
        codec = accumulator.codec
        batches_v2 = version >= 3
        txn = self.transactions
        transactional = txn is not None
        topics: dict[str, list[ProducePartitionData]] = {}
        sent: list[Taken] = []
        for queue, batches in chunk:
            try:
                parts = [batch.encode(codec, batches_v2, accumulator.codec_id,
                                      accumulator.compresslevel, transactional)
                         for batch in batches]
            except KielError as e:
                queue.in_flight -= 1
                count_error(self.errors, e)
                self._fail(batches, e.with_context(topic=queue.tp.topic,
                                                   partition=queue.tp.partition))
                continue
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            self.bytes_out += len(data)
            self.batches_out += len(batches)
            topics.setdefault(queue.tp.topic, []).append(
                ProducePartitionData(queue.tp.partition, data)
            )
            sent.append((queue, batches))
        topic_data = [ProduceTopicData(topic, parts) for topic, parts in topics.items()]
        if batches_v2:
            return ProduceRequestV3(
                None if txn is None else txn.transactional_id, self._required_acks,
                self._ack_timeout_ms, topic_data
            ), sent
        return ProduceRequest(self._required_acks, self._ack_timeout_ms, topic_data), sent

    def _settle(self, leader: int, chunk: list[Taken], response: Any) -> None:
        """Each partition's answer: its offset, or its error code as a class."""
        if response is None:  # required_acks=0: written, nothing more to learn
            for queue, batches in chunk:
                queue.in_flight -= 1
                self._complete(queue, batches, -1)
            return
        results = {
            (topic.topic, p.partition): (p.error_code, p.offset)
            for topic in response.topics
            for p in topic.partitions
        }
        idem = self.idempotence
        for queue, batches in chunk:
            queue.in_flight -= 1
            tp = queue.tp
            result = results.get(tp)
            if result is None:
                error = ProtocolError(
                    "the ProduceResponse has no status for this partition",
                    topic=tp.topic, partition=tp.partition, broker_id=leader,
                )
                count_error(self.errors, error)
                self._fail(batches, error)
                continue
            code, offset = result
            error_class = for_code(code)
            if error_class is None:
                self._complete(queue, batches, offset)
            elif idem is not None and idem.enabled and batches[0].base_sequence >= 0 and (
                    code == DUPLICATE_SEQUENCE or code in RENEW_CODES):
                self._numbering_refused(queue, batches, error_class(
                    errno=code, topic=tp.topic, partition=tp.partition, broker_id=leader))
            else:
                self._retry_or_fail(queue, batches, error_class(
                    errno=code, topic=tp.topic, partition=tp.partition, broker_id=leader
                ))

    def _numbering_refused(self, queue: PartitionQueue, batches: list[ProducerBatch],
                           error: KielError) -> None:
        """An idempotent producer's answers about its numbering.

        46 (duplicate sequence): the broker wrote the batch before (an
        earlier attempt's answer was lost): a delivery whose offset the
        broker does not say (-1). Only when an earlier attempt went
        unanswered, though: otherwise nothing of ours can have written it,
        and the broker must have given our producer id to another producer
        too (Tansu with memory storage, restarted, numbers ids from 1
        again), so the answer is a refused numbering like the ones below,
        not a delivery. 45 (out of order) while an earlier batch
        of the partition is unacknowledged: that batch is retried first,
        this one after it (no retry counted). 45 otherwise, 47, 59, 90: the
        broker refused the identity or the numbering: the producer renews
        its identity once every request out has settled, then sends again.
        """
        idem = self.idempotence
        assert idem is not None
        code = getattr(error, "errno", 0)
        if code == DUPLICATE_SEQUENCE and any(batch.unanswered for batch in batches):
            self._complete(queue, batches, -1)
            return
        if self.transactions is not None:  # no new identity in a transaction: fenced
            self._fail(batches, self.transactions.numbering_refused(error))
            return
        count_error(self.errors, error)
        if code == OUT_OF_ORDER_SEQUENCE and idem.earlier_unacked(queue, batches[0]):
            if not self._closed():
                retry_at = asyncio.get_running_loop().time()
                self._accumulator.requeue(queue, batches, retry_at)
                self.wake()
                return
            self._fail(batches, error)
            return
        if not idem.renew:
            log.info("producer: %s refused producer id %d epoch %d (%s): renewing it",
                     queue.tp, idem.producer_id, idem.producer_epoch, type(error).__name__)
        idem.renew = True
        self._retry_or_fail(queue, batches, error, retriable=True, counted=True)

    # ------------------------------------------------------------------
    # settling batches

    def _complete(self, queue: PartitionQueue, batches: list[ProducerBatch], base: int) -> None:
        """Resolve the futures of acknowledged batches; ``base`` is the first
        record's offset (-1 without acknowledgements)."""
        topic, partition = queue.tp
        offset = base
        outcomes = self._outcomes
        for batch in batches:
            bare = batch.bare
            futures = self._accumulator.complete(batch)
            outcomes.delivered += len(futures)
            self.records_out += len(futures)
            if not bare and unheld(futures):
                # Nobody can ever look at these futures: resolving them
                # would make a RecordMetadata each for nobody.
                offset += len(futures)
                continue
            if bare:
                # Records without a future of their own (produce_many()):
                # counted above, for flush()'s report; only the others are
                # resolved.
                if bare < len(futures):
                    for i, future in enumerate(futures, offset):
                        if future is not None and not future.done():
                            future.set_result(_new_metadata(
                                RecordMetadata, (topic, partition, i if base >= 0 else -1)))
                offset += len(futures)
                continue
            if base < 0:
                meta = _new_metadata(RecordMetadata, (topic, partition, -1))
                for future in futures:
                    if not future.done():
                        future.set_result(meta)
                continue
            try:
                # Strategy: each record's metadata made and its future
                # resolved by C-level map, not a Python loop (a few hundred
                # nanoseconds per record less). No done() check per record:
                # a future its owner cancelled makes set_result raise, and
                # then the careful loop below takes over.
                _drain(map(_set_result, futures, map(
                    _new_metadata, repeat(RecordMetadata),
                    zip(repeat(topic), repeat(partition), range(offset, offset + len(futures))),
                )), 0)
            except asyncio.InvalidStateError:
                for i, future in enumerate(futures, offset):
                    if not future.done():
                        future.set_result(_new_metadata(RecordMetadata, (topic, partition, i)))
            offset += len(futures)
        self._settled()

    def _fail(self, batches: list[ProducerBatch], error: BaseException) -> None:
        """Fail every record of ``batches`` with ``error``, or with
        :class:`~kiel.exc.DeliveryUnknownError` for a batch that a request
        carried and that was never answered (see :func:`delivery_unknown`)."""
        fail = self._outcomes.fail
        for batch in batches:
            topic, partition = batch.tp
            reason = delivery_unknown(error, topic, partition) if batch.unanswered else error
            for future in self._accumulator.complete(batch):
                fail(future, reason, topic, partition)
        self._settled()

    def _retry_or_fail(self, queue: PartitionQueue, batches: list[ProducerBatch],
                       error: KielError, retriable: bool = False, counted: bool = False) -> None:
        """Put retriable batches back at the front of their partition (order
        kept) after a backoff; fail the others, and those out of retries.

        Args:
            retriable: retry even if ``error`` is not retriable in general.
            counted: ``error`` was counted in the metrics already.
        """
        error.with_context(topic=queue.tp.topic, partition=queue.tp.partition)
        if not counted:
            count_error(self.errors, error)
        if not (retriable or error.retriable) or self._closed():
            self._fail(batches, error)
            return
        backoff = self._cluster.backoff
        retry: list[ProducerBatch] = []
        delay = 0.0
        for batch in batches:
            batch.failures += 1
            if backoff.retries is not None and batch.failures > backoff.retries:
                self._fail([batch], error)
            else:
                retry.append(batch)
                delay = max(delay, backoff.delay(batch.failures))
        if not retry:
            return
        log.debug("producer: retrying %d batch(es) of %s in %.3fs after %s",
                  len(retry), queue.tp, delay, error)
        retry_at = asyncio.get_running_loop().time() + delay
        self._accumulator.requeue(queue, retry, retry_at)
        self.wake_at(retry_at)
        if error.invalid_metadata and self.refresh_metadata():
            self._accumulator.mark_stale(queue)

    # ------------------------------------------------------------------
    # metadata

    def refresh_metadata(self) -> bool:
        """Start a metadata refresh unless one is under way (or the producer closes).

        Returns:
            whether a refresh is under way now.
        """
        if self._refreshing is None and not self._closed():
            self._refreshing = self._tasks.spawn(self._refresh(), "refresh")
        return self._refreshing is not None

    async def _refresh(self) -> None:
        try:
            # Name our topics: the cluster refreshes only the topics it was
            # asked about, and another client may have asked about others.
            await self._cluster.refresh_metadata(list(self._topics()))
            self._metadata_error = None
        except KielError as e:
            # Not dropped: batches that cannot find a leader fail with it
            # once their retries run out.
            self._metadata_error = e
        finally:
            self._refreshing = None
            self._accumulator.clear_stale()
            self.wake()

    # ------------------------------------------------------------------
    # close

    async def stop(self, error: ClientClosedError) -> None:
        """Stop sending: cancel the tasks and timers, fail every batch left
        (after a flush that ran to its end, none), a chunk of records per
        IOLoop step.

        A batch with an attempt out and unanswered (in flight when the tasks
        were cancelled, or waiting to be retried after a timeout) fails with
        :class:`~kiel.exc.DeliveryUnknownError`: the broker may have written
        it. The others were certainly not written and fail with ``error``.

        Args:
            error: what the records never sent fail with (a copy per
                partition, with its topic and partition).
        """
        await self._tasks.cancel(self._request_timeout)
        for handle in (self._timer, self._drain_handle):
            if handle is not None:
                handle.cancel()
        self._timer = self._drain_handle = None

        # Record by record, not batch by batch: a batch of a partition's
        # joined batches (one record batch per request) may hold tens of
        # thousands of small records, and each chunk must stay a chunk.
        accumulator = self._accumulator
        records: list[tuple[Any, BaseException, str, int]] = []
        for batch in accumulator.unfinished():
            topic, partition = batch.tp
            reason: BaseException = copy_error(error, topic=topic, partition=partition)
            if batch.unanswered:
                reason = delivery_unknown(reason, topic, partition)
            records.extend((future, reason, topic, partition)
                           for future in accumulator.complete(batch))
        fail = self._outcomes.fail

        def settle(record: tuple[Any, BaseException, str, int]) -> int:
            fail(*record)
            return 1

        try:
            await in_chunks(records, settle)
        finally:
            self._settled()


def delivery_unknown(error: BaseException, topic: str, partition: int) -> DeliveryUnknownError:
    """What a record fails with when a request carried it and was never
    answered, whatever ended it (``error``: a timeout, a broken connection,
    retries run out, close): the broker may have written it.

    Strategy: only an answer (or a connection that was never made) tells
    that a record was not written; a plain error here would invite a
    resend that writes it twice.

    Returns:
        a :class:`~kiel.exc.DeliveryUnknownError` whose cause is ``error``,
        with its broker's context.
    """
    if isinstance(error, DeliveryUnknownError):
        return error
    context = dict(error.context) if isinstance(error, KielError) else {}
    context.update(topic=topic, partition=partition)
    if isinstance(error, ClientClosedError):
        why = "the producer closed while a request carrying the record was unanswered"
    else:
        why = (f"a request carrying the record was sent and never answered "
               f"({type(error).__name__}: {getattr(error, 'message', error)})")
    unknown = DeliveryUnknownError(
        f"{why}: the broker may or may not have written it (producing it again may "
        "write it twice)", **context,
    )
    unknown.__cause__ = error
    return unknown


def unheld(futures: list[Any]) -> bool:
    """Whether only ``futures`` (a batch's list, closed or just completed)
    holds each of these futures, and none has a done callback: then nothing
    can ever see whether they were resolved.

    Strategy: a loop that drops the future of each record it produces (the
    producer guide's ``enqueue()`` loop, ``produce()`` for its side effect,
    ``flush()`` for the report) pays for a RecordMetadata and a
    ``set_result`` per record that nobody reads, a few hundred
    nanoseconds, and, while the futures live, for the garbage collector
    scanning them: CPython's reference count tells, in one C-level pass
    over the list. Any future held elsewhere (awaited, gathered, kept in a
    list, in a local variable) or with a callback, and the answer is no.

    Args:
        futures: the futures (no ``None`` among them).

    Returns:
        whether nothing else can reach them (always ``False`` off CPython,
        or on a free-threaded build).
    """
    if _refcount is None or max(map(_refcount, futures), default=_UNHELD + 1) > _UNHELD:
        return False
    return not any(map(_callbacks_of, futures))


def _answered(batches: list[ProducerBatch]) -> None:
    """The attempt that carried ``batches`` is settled: answered, or never written."""
    for batch in batches:
        batch.unanswered -= 1


def _never_written(error: KielError) -> bool:
    """Whether an attempt that failed with ``error`` certainly wrote nothing:
    the connection could not even be made (anything later may have gone
    out; it counts as unanswered)."""
    return isinstance(error, ConnectTimeoutError) or (
        error.context.get("reason") == CloseReason.CONNECT_FAILED.value
    )


def _requests(items: list[Taken], max_request_size: int) -> Iterator[list[Taken]]:
    """Split a leader's partitions into requests of at most
    ``max_request_size`` bytes (each partition's share is already bounded),
    a partition at most once per request (a partition taken several times,
    several requests in flight, goes in as many requests, in order)."""
    chunk: list[Taken] = []
    chunk_size = 0
    in_chunk: set[int] = set()
    if len({id(queue) for queue, _ in items}) < len(items):
        # Rounds: each partition's first batch, then each one's second...
        takes: dict[int, int] = {}
        rounds = []
        for item in items:
            index = takes[id(item[0])] = takes.get(id(item[0]), -1) + 1
            rounds.append((index, item))
        items = [item for _, item in sorted(rounds, key=lambda pair: pair[0])]
    for item in items:
        item_size = sum(batch.size for batch in item[1])
        if chunk and (chunk_size + item_size > max_request_size or id(item[0]) in in_chunk):
            yield chunk
            chunk, chunk_size = [], 0
            in_chunk = set()
        chunk.append(item)
        in_chunk.add(id(item[0]))
        chunk_size += item_size
    if chunk:
        yield chunk


def copy_error(err: KielError, **context: Any) -> KielError:
    """A copy of ``err`` with more context (an error shared by many
    partitions must not collect one partition's context)."""
    new = copy.copy(err)
    new.context = dict(err.context)
    if hasattr(err, "errno"):
        new.errno = err.errno  # type: ignore[attr-defined]
    new.__cause__ = err.__cause__
    return new.with_context(**context)
