"""Offsets requests: ListOffsets v0/v1, and a group's OffsetCommit v0/v2 and OffsetFetch v0/v1.

The one implementation of these requests in kiel: the consumers, the Spark
data source (:mod:`kiel.spark.kafka`) and the admin tools use it.

* :func:`list_offsets` resolves timestamps (``EARLIEST``, ``LATEST`` or
  epoch milliseconds) to offsets, one request per partition leader: v1
  (exact, by record timestamp) where the leader speaks it, else v0 (by log
  segment).
* :class:`GroupOffsets` commits and fetches a group's offsets through the
  group's coordinator, looked up once and again after a coordinator error.
  A 0.8.2 broker keeps v0 offsets in ZooKeeper under
  ``/consumers/<group>/offsets/<topic>/<partition>``; a current broker
  gets v2 commits (as a standalone member) and keeps them itself.
  :func:`send_commit` and :func:`fetch_committed` are one-shot shortcuts.

Every request is retried with the cluster's backoff (:mod:`kiel.retry`), and
a failure that outlasts the retries, or is not retriable, is raised as its
typed error.
"""

import asyncio
from collections.abc import Iterable, Iterator, Mapping
from typing import (
    Any,
    Callable,
    Optional,
)

from kiel.cluster import Cluster
from kiel.exc import (
    BrokerError,
    ConsumerCoordinatorNotAvailableError,
    KielError,
    LeaderNotAvailableError,
    NotCoordinatorForConsumerError,
    OffsetMetadataTooLargeError,
    OffsetsLoadInProgressError,
    ProtocolError,
    UnknownTopicOrPartitionError,
    for_code,
)
from kiel.protocol import (
    ListOffsetsPartitionData,
    ListOffsetsPartitionDataV1,
    ListOffsetsRequest,
    ListOffsetsRequestV1,
    ListOffsetsTopicData,
    ListOffsetsTopicDataV1,
    OffsetCommitPartitionData,
    OffsetCommitRequest,
    OffsetCommitRequestV2,
    OffsetCommitResponse,
    OffsetCommitTopicData,
    OffsetFetchRequest,
    OffsetFetchRequestV1,
    OffsetFetchResponse,
    OffsetFetchTopicData,
)
from kiel.protocol.fetch import CONSUMER_REPLICA_ID
from kiel.protocol.list_offsets import EARLIEST, LATEST
from kiel.protocol.offset_commit import DEFAULT_RETENTION, STANDALONE_GENERATION
from kiel.protocol.versions import LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, Versions
from kiel.retry import attempts
from kiel.structs import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "GroupOffsets",
    "commit_answers",
    "fetch_answers",
    "fetch_committed",
    "list_offsets",
    "send_commit",
]


#: After these the group's coordinator is looked up again before the retry.
_COORDINATOR_ERRORS: tuple[type[BrokerError], ...] = (
    OffsetsLoadInProgressError,
    ConsumerCoordinatorNotAvailableError,
    NotCoordinatorForConsumerError,
)
#: "No committed offset" besides a plain -1: a 0.8.2 broker answers -1 with
#: UnknownTopicOrPartition for a partition the group never committed.
_NO_OFFSET_ERRORS: tuple[type[BrokerError], ...] = (UnknownTopicOrPartitionError,)

# ----------------------------------------------------------------------
# ListOffsets


async def list_offsets(
    cluster: Cluster, timestamps: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """Resolve timestamps to offsets, one ListOffsets request per leader.

    A leader that speaks ListOffsets v1 (Kafka 0.10.1+) answers exactly: the
    first offset whose record timestamp is at or after the time, or, when no
    record is that recent, nothing; that resolves to the latest offset (the
    end of the log).

    A 0.8 broker (v0) answers a timestamp at log-segment granularity: the base
    offset of the newest segment last written before that time (or the log end
    offset if the active segment qualifies). A time older than every segment
    answers nothing; that resolves to the earliest offset.

    Args:
        cluster: the client's cluster.
        timestamps: ``EARLIEST``, ``LATEST`` or epoch milliseconds per partition.

    Returns:
        the offset per partition.

    Raises:
        BrokerError: a partition error that persisted past the retries (e.g.
            :class:`~kiel.exc.UnknownTopicOrPartitionError`), or that is not
            retriable.
        NoBrokersError, KielConnectionError, RequestTimeoutError: the cluster
            could not be reached within the retries.
        ProtocolError: a broker answered no offset for EARLIEST or LATEST.
    """
    remaining = dict(timestamps)
    result: dict[TopicPartition, int] = {}
    async for attempt in attempts(cluster.backoff):
        found, fallback, errors = await _ask_leaders(cluster, remaining)
        if fallback:  # a time outside every record: ask at once for an end of the log
            remaining.update(fallback)
            again, _, more = await _ask_leaders(cluster, fallback)
            found.update(again)
            errors.extend(more)
        for tp, offset in found.items():
            if offset is not None:
                result[tp] = offset
                del remaining[tp]
        if not remaining:
            break
        fatal = [e for e in errors if not e.retriable]
        if fatal:
            raise fatal[0]
        attempt.failed(errors[0] if errors else ProtocolError(
            "the ListOffsets answer left partitions out", api="ListOffsets"))
        if any(e.invalid_metadata for e in errors) and not attempt.last:
            await cluster.refresh_metadata()
    return result


#: What :func:`_ask_leaders` and :func:`_list_from` find: offsets (``None``
#: for a time outside every record), the end of the log to ask for those
#: instead, and the errors met.
_Found = tuple[dict[TopicPartition, Optional[int]], dict[TopicPartition, int], list[KielError]]


async def _ask_leaders(cluster: Cluster, timestamps: Mapping[TopicPartition, int]) -> _Found:
    """One ListOffsets round: a request per leader, all at once.

    Returns:
        the offsets found (``None``: a time outside every record, with the
        timestamp to ask instead in the second dict) and the errors met (a
        partition without a leader, a failed request, a partition's error code).
    """
    by_leader: dict[int, list[TopicPartition]] = {}
    errors: list[KielError] = []
    for tp in timestamps:
        leader = cluster.leader(tp.topic, tp.partition)
        if leader < 0 or leader not in cluster.brokers:
            errors.append(LeaderNotAvailableError(topic=tp.topic, partition=tp.partition))
        else:
            by_leader.setdefault(leader, []).append(tp)
    answers = await asyncio.gather(
        *(_list_from(cluster, leader, tps, timestamps) for leader, tps in by_leader.items())
    )
    found: dict[TopicPartition, Optional[int]] = {}
    fallback: dict[TopicPartition, int] = {}
    for offsets, ends, errs in answers:
        found.update(offsets)
        fallback.update(ends)
        errors.extend(errs)
    return found, fallback, errors


def _list_request(version: int, tps: list[TopicPartition],
                  timestamps: Mapping[TopicPartition, int]) -> Any:
    """The ListOffsets request for ``tps`` in ``version`` (0 or 1)."""
    if version >= 1:
        by_topic_v1: dict[str, list[ListOffsetsPartitionDataV1]] = {}
        for tp in tps:
            by_topic_v1.setdefault(tp.topic, []).append(
                ListOffsetsPartitionDataV1(tp.partition, timestamps[tp])
            )
        return ListOffsetsRequestV1(
            CONSUMER_REPLICA_ID, [ListOffsetsTopicDataV1(t, ps) for t, ps in by_topic_v1.items()]
        )
    by_topic: dict[str, list[ListOffsetsPartitionData]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(
            ListOffsetsPartitionData(tp.partition, timestamps[tp], 1)
        )
    return ListOffsetsRequest(
        CONSUMER_REPLICA_ID, [ListOffsetsTopicData(t, ps) for t, ps in by_topic.items()]
    )


async def _list_from(
    cluster: Cluster,
    leader: int,
    tps: list[TopicPartition],
    timestamps: Mapping[TopicPartition, int],
) -> _Found:
    found: dict[TopicPartition, Optional[int]] = {}
    fallback: dict[TopicPartition, int] = {}
    errors: list[KielError] = []
    try:
        version = (await cluster.versions(leader)).of(LIST_OFFSETS)
        response: Any = await cluster.send(leader, _list_request(version, tps, timestamps))
    except KielError as e:
        if not e.retriable:
            raise
        return found, fallback, [e]
    wanted = set(tps)
    for tp, part in _answers(response):
        if tp not in wanted:
            continue
        error = for_code(part.error_code)
        if version >= 1:
            # Strategy: for a time, "no record that recent" is offset -1 and
            # timestamp -1. A record found always has a timestamp at or after
            # the time asked (>= 0), so a -1 timestamp alone says it too (some
            # brokers answer offset 0 with it: Tansu does).
            missing = part.offset < 0 or (timestamps[tp] >= 0 and part.timestamp < 0)
            offset: Optional[int] = None if missing else part.offset
        else:
            offset = part.offsets[0] if part.offsets else None
        if error is not None:
            errors.append(error(api="ListOffsets", topic=tp.topic, partition=tp.partition,
                                errno=part.error_code))
        elif offset is not None:
            found[tp] = offset
        elif timestamps[tp] >= 0:
            found[tp] = None
            # v1: no record that recent (the end); v0: no segment that old (the start).
            fallback[tp] = LATEST if version >= 1 else EARLIEST
        else:
            raise ProtocolError(
                "the broker answered no offset for the earliest/latest position",
                api="ListOffsets",
                topic=tp.topic,
                partition=tp.partition,
                broker_id=leader,
            )
    return found, fallback, errors


def _answers(response: Any) -> Iterator[tuple[TopicPartition, Any]]:
    """``(TopicPartition, partition answer)`` for every partition of a response."""
    for topic in response.topics:
        for part in topic.partitions:
            yield TopicPartition(topic.topic, part.partition), part


# ----------------------------------------------------------------------
# OffsetCommit / OffsetFetch


class GroupOffsets:
    """Commit and fetch one group's offsets.

    In the versions the coordinator speaks: OffsetCommit v2 (as a standalone
    member: generation -1, no member id) and OffsetFetch v1 on a current
    broker, which keeps the offsets itself; v0 on a 0.8 broker, which keeps
    them in its ZooKeeper.

    Args:
        cluster: the client's cluster (its backoff bounds the retries).
        group: the consumer group.
    """

    def __init__(self, cluster: Cluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        self._coordinator: Optional[int] = None

    async def coordinator(self) -> int:
        """The broker id of the group's coordinator (looked up when unknown).

        Raises:
            NoBrokersError: no broker is known.
        """
        if self._coordinator is None or self._coordinator not in self.cluster.brokers:
            self._coordinator = await self.cluster.coordinator(self.group)
        return self._coordinator

    async def commit(self, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        """Commit ``offsets`` (the next offset to consume, per partition).

        A broker that finds ``metadata`` too large gets the commit again at
        once without it.

        Raises:
            BrokerError: a partition's error that is not retriable, or that
                persisted past the retries.
            NoBrokersError, KielConnectionError, RequestTimeoutError: the
                coordinator could not be reached within the retries.
        """
        remaining = dict(offsets)
        async for attempt in attempts(self.cluster.backoff):
            error, refused = await self._commit_once(remaining, metadata)
            if refused and metadata:
                metadata = ""
                error, _ = await self._commit_once(remaining, metadata)
            if not remaining:
                return
            attempt.failed(error or self._incomplete())

    async def _commit_once(
        self, remaining: dict[TopicPartition, int], metadata: str
    ) -> tuple[Optional[KielError], bool]:
        """One OffsetCommit of ``remaining``; the committed partitions leave it.

        Returns:
            a retriable error met (or ``None``), and whether the broker
            refused the metadata.

        Raises:
            KielError: an error that is not retriable.
        """
        by_topic: dict[str, list[OffsetCommitPartitionData]] = {}
        for tp, offset in sorted(remaining.items()):
            by_topic.setdefault(tp.topic, []).append(
                OffsetCommitPartitionData(tp.partition, offset, metadata)
            )
        topics = [OffsetCommitTopicData(t, ps) for t, ps in by_topic.items()]

        def request(versions: Versions) -> Any:
            if versions.of(OFFSET_COMMIT) >= 2:
                # A standalone member: ZooKeeper, not the broker, says who
                # owns what, so there is no broker-side generation to give.
                return OffsetCommitRequestV2(self.group, STANDALONE_GENERATION, "",
                                             DEFAULT_RETENTION, topics)
            return OffsetCommitRequest(self.group, topics)

        response: Optional[OffsetCommitResponse]
        response, error = await self._ask(request)
        if response is None:
            return error, False
        errors, refused = commit_answers(response, remaining, metadata, self.group)
        return self._retry_or_raise(errors), refused

    async def fetch(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Optional[int]]:
        """The committed offsets of ``tps``: ``None`` where the group committed none.

        Raises:
            KielError: as for :meth:`commit`.
        """
        tps = list(tps)
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [OffsetFetchTopicData(t, ps) for t, ps in sorted(by_topic.items())]

        def request(versions: Versions) -> Any:
            # v1 reads the broker's storage, where v2 commits go (negotiation
            # pairs them: see kiel.protocol.versions); v0 reads ZooKeeper's
            # on a 0.8 broker.
            if versions.of(OFFSET_FETCH) >= 1:
                return OffsetFetchRequestV1(self.group, topics)
            return OffsetFetchRequest(self.group, topics)

        async for attempt in attempts(self.cluster.backoff):
            response: Optional[OffsetFetchResponse]
            response, error = await self._ask(request)
            if response is not None:
                found, errors = fetch_answers(response, self.group)
                error = self._retry_or_raise(errors)
                if error is None and set(tps) <= set(found):
                    return found
            attempt.failed(error or self._incomplete())
        raise AssertionError("attempts() ended without an answer or an error")  # pragma: no cover

    async def _ask(self, request: Callable[[Versions], Any]) -> tuple[Any, Optional[KielError]]:
        """Send the request that ``request(versions)`` builds for the
        coordinator (in the versions it speaks) once.

        Returns:
            ``(response, None)``, or ``(None, error)`` for a retriable
            failure, after which the coordinator is looked up again.

        Raises:
            KielError: a failure that is not retriable.
        """
        try:
            coordinator = await self.coordinator()
            versions = await self.cluster.versions(coordinator)
            return await self.cluster.send(coordinator, request(versions)), None
        except KielError as e:
            if not e.retriable:
                raise
            self._coordinator = None
            return None, e

    def _retry_or_raise(self, errors: list[BrokerError]) -> Optional[KielError]:
        """Judge partitions' errors: the last one to retry (``None``: none).

        A coordinator error makes the coordinator be looked up again.

        Raises:
            BrokerError: the first error that is not retriable.
        """
        retry: Optional[KielError] = None
        for error in errors:
            if isinstance(error, _COORDINATOR_ERRORS):
                self._coordinator = None
            elif not error.retriable:
                raise error
            retry = error
        return retry

    def _incomplete(self) -> KielError:
        return KielError("the coordinator did not answer for every partition", group=self.group)


def commit_answers(
    response: OffsetCommitResponse,
    remaining: dict[TopicPartition, int],
    metadata: str,
    group: str,
) -> tuple[list[BrokerError], bool]:
    """Read an OffsetCommit v0 answer. Pure.

    Args:
        response: the answer.
        remaining: the offsets sent; the partitions committed leave it.
        metadata: the metadata sent.
        group: for the errors' context.

    Returns:
        the errors of the partitions not committed, and whether the broker
        refused the (non-empty) metadata as too large.
    """
    errors: list[BrokerError] = []
    refused = False
    for tp, part in _answers(response):
        if tp not in remaining:
            continue
        cls = for_code(part.error_code)
        if cls is None:
            del remaining[tp]
        elif cls is OffsetMetadataTooLargeError and metadata:
            refused = True
        else:
            errors.append(_error(cls, "OffsetCommit", tp, group, part.error_code))
    return errors, refused


def fetch_answers(
    response: OffsetFetchResponse, group: str
) -> tuple[dict[TopicPartition, Optional[int]], list[BrokerError]]:
    """Read an OffsetFetch v0 answer. Pure.

    A partition the group never committed reads -1, which a 0.8.2 broker
    sends with UnknownTopicOrPartition: both mean "no committed offset".

    Returns:
        the committed offset per partition (``None``: none), and the errors
        of the partitions that could not be read.
    """
    found: dict[TopicPartition, Optional[int]] = {}
    errors: list[BrokerError] = []
    for tp, part in _answers(response):
        cls = for_code(part.error_code)
        if cls is None or (issubclass(cls, _NO_OFFSET_ERRORS) and part.offset < 0):
            found[tp] = part.offset if part.offset >= 0 else None
        else:
            errors.append(_error(cls, "OffsetFetch", tp, group, part.error_code))
    return found, errors


def _error(
    cls: type[BrokerError], api: str, tp: TopicPartition, group: str, code: int
) -> BrokerError:
    return cls(api=api, topic=tp.topic, partition=tp.partition, group=group, errno=code)


async def send_commit(
    cluster: Cluster,
    group: str,
    offsets: Mapping[TopicPartition, int],
    *,
    metadata: str = "",
) -> None:
    """Commit ``offsets`` for ``group`` once (see :meth:`GroupOffsets.commit`).

    Raises:
        BrokerError, NoBrokersError, KielConnectionError, RequestTimeoutError:
            the commit failed past the retries.
    """
    await GroupOffsets(cluster, group).commit(offsets, metadata)


async def fetch_committed(
    cluster: Cluster, group: str, tps: Iterable[TopicPartition]
) -> dict[TopicPartition, Optional[int]]:
    """The committed offsets of ``group`` (see :meth:`GroupOffsets.fetch`).

    Raises:
        BrokerError, NoBrokersError, KielConnectionError, RequestTimeoutError:
            the fetch failed past the retries.
    """
    return await GroupOffsets(cluster, group).fetch(tps)
