"""Offsets requests: ListOffsets v0/v1, a group's OffsetCommit v0/v2/v7 and OffsetFetch v0/v1/v5.

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
  gets v2 or v7 commits and keeps them itself: as a standalone member by
  default, as a member of a broker-coordinated group when given its
  generation and member id.
  :func:`send_commit` and :func:`fetch_committed` are one-shot shortcuts.

Every request is retried with the cluster's backoff (:mod:`kiel.retry`), and
a failure that outlasts the retries, or is not retriable, is raised as its
typed error.
"""

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import (
    Any,
    Optional,
    Protocol,
    Union,
)

from kiel._aio import Turns
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
    OffsetCommitPartitionDataV7,
    OffsetCommitRequest,
    OffsetCommitRequestV2,
    OffsetCommitRequestV7,
    OffsetCommitResponse,
    OffsetCommitResponseV7,
    OffsetCommitTopicData,
    OffsetCommitTopicDataV7,
    OffsetFetchRequest,
    OffsetFetchRequestV1,
    OffsetFetchRequestV5,
    OffsetFetchResponse,
    OffsetFetchResponseV5,
    OffsetFetchTopicData,
)
from kiel.protocol.fetch import CONSUMER_REPLICA_ID, READ_COMMITTED
from kiel.protocol.list_offsets import EARLIEST, LATEST, ListOffsetsRequestV2
from kiel.protocol.offset_commit import DEFAULT_RETENTION, NO_LEADER_EPOCH, STANDALONE_GENERATION
from kiel.protocol.versions import LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH, Versions
from kiel.retry import Attempt, attempts
from kiel.structs import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "OFFSETS_LANE",
    "CoordinatorLookup",
    "Generation",
    "GroupOffsets",
    "commit_answers",
    "fetch_answers",
    "fetch_committed",
    "list_offsets",
    "send_commit",
]


#: The connection (:meth:`kiel.cluster.Cluster.connection`'s lane) of a
#: ZooKeeper group's commits and offset lookups: one of their own.
OFFSETS_LANE = "offsets"

#: After these the group's coordinator is looked up again before the retry.
_COORDINATOR_ERRORS: tuple[type[BrokerError], ...] = (
    OffsetsLoadInProgressError,
    ConsumerCoordinatorNotAvailableError,
    NotCoordinatorForConsumerError,
)
#: "No committed offset" besides a plain -1: a 0.8.2 broker answers -1 with
#: UnknownTopicOrPartition for a partition the group never committed.
_NO_OFFSET_ERRORS: tuple[type[BrokerError], ...] = (UnknownTopicOrPartitionError,)

#: Partitions one ListOffsets request asks a leader about: a topic of
#: 100,000 partitions goes in requests of this many, one after the other,
#: so that no request's encoding or answer holds the IOLoop for long.
LIST_OFFSETS_CHUNK = 1000
#: Partitions between two looks at the clock in a long loop (see Turns).
_EVERY = 256

# ----------------------------------------------------------------------
# ListOffsets


async def list_offsets(
    cluster: Cluster, timestamps: Mapping[TopicPartition, int], *, read_committed: bool = False,
    earliest: Optional[Mapping[TopicPartition, int]] = None,
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
        read_committed: ``LATEST`` is the last stable offset, as the
            leader serves it: asked with ListOffsets v2+ (isolation 1), then
            read from a Fetch answer with isolation 1
            (:func:`kiel.consumer.watermarks.served_ends`), since a broker
            may answer that ListOffsets short (Tansu answers 0 while a
            transaction is open).
        earliest: the partitions' earliest offsets, where the caller has
            them already (read_committed: the Fetch probes from there;
            otherwise they are asked).

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
    turns = Turns()
    async for attempt in attempts(cluster.backoff):
        found, fallback, errors = await _ask_leaders(cluster, remaining, read_committed)
        if fallback:  # a time outside every record: ask at once for an end of the log
            remaining.update(fallback)
            again, _, more = await _ask_leaders(cluster, fallback, read_committed)
            found.update(again)
            errors.extend(more)
        for i, (tp, offset) in enumerate(found.items()):
            if offset is not None:
                result[tp] = offset
                del remaining[tp]
            if not i % _EVERY:
                await turns.give()
        if not remaining:
            break
        await judge_round(cluster, attempt, errors, "ListOffsets")
    if read_committed:
        ends = [tp for tp, when in timestamps.items() if when == LATEST]
        if ends:
            result.update(await _stable_ends(cluster, {tp: result[tp] for tp in ends},
                                             earliest))
    return result


async def _stable_ends(cluster: Cluster, listed: dict[TopicPartition, int],
                       earliest: Optional[Mapping[TopicPartition, int]] = None
                       ) -> dict[TopicPartition, int]:
    """The last stable offsets the leaders serve, for partitions whose
    read_committed ListOffsets LATEST answer was ``listed`` (probed from
    ``earliest``, asked where not given).

    Raises:
        as :func:`list_offsets`, and Fetch's errors past the retries.
    """
    # Imported here: watermarks builds on this module (judge_round).
    from kiel.consumer.watermarks import served_ends

    if earliest is None or not all(tp in earliest for tp in listed):
        earliest = await list_offsets(cluster, {tp: EARLIEST for tp in listed})
    return await served_ends(cluster, earliest, listed, read_committed=True)


async def judge_round(
    cluster: Cluster, attempt: Attempt, errors: list[KielError], api: str
) -> None:
    """After a round of requests to leaders that left partitions unanswered.

    Records the retry on ``attempt`` (the first error, or that the answer
    left partitions out) and refreshes the metadata when an error says it
    is stale and another round will come.

    Raises:
        KielError: the first error that is not retriable.
    """
    fatal = [e for e in errors if not e.retriable]
    if fatal:
        raise fatal[0]
    attempt.failed(errors[0] if errors else ProtocolError(
        f"the {api} answer left partitions out", api=api))
    if any(e.invalid_metadata for e in errors) and not attempt.last:
        await cluster.refresh_metadata()


#: What :func:`_ask_leaders` and :func:`_list_from` find: offsets (``None``
#: for a time outside every record), the end of the log to ask for those
#: instead, and the errors met.
_Found = tuple[dict[TopicPartition, Optional[int]], dict[TopicPartition, int], list[KielError]]


async def _ask_leaders(cluster: Cluster, timestamps: Mapping[TopicPartition, int],
                       read_committed: bool = False) -> _Found:
    """One ListOffsets round: a request per leader, all at once.

    Returns:
        the offsets found (``None``: a time outside every record, with the
        timestamp to ask instead in the second dict) and the errors met (a
        partition without a leader, a failed request, a partition's error code).
    """
    by_leader: dict[int, list[TopicPartition]] = {}
    errors: list[KielError] = []
    turns = Turns()
    for i, tp in enumerate(timestamps):
        leader = cluster.leader(tp.topic, tp.partition)
        if leader < 0 or leader not in cluster.brokers:
            errors.append(LeaderNotAvailableError(topic=tp.topic, partition=tp.partition))
        else:
            by_leader.setdefault(leader, []).append(tp)
        if not i % _EVERY:
            await turns.give()
    answers = await asyncio.gather(
        *(_list_chunks(cluster, leader, tps, timestamps, read_committed)
          for leader, tps in by_leader.items())
    )
    found: dict[TopicPartition, Optional[int]] = {}
    fallback: dict[TopicPartition, int] = {}
    for offsets, ends, errs in answers:
        found.update(offsets)
        fallback.update(ends)
        errors.extend(errs)
    return found, fallback, errors


async def _list_chunks(
    cluster: Cluster,
    leader: int,
    tps: list[TopicPartition],
    timestamps: Mapping[TopicPartition, int],
    read_committed: bool = False,
) -> _Found:
    """Ask ``leader`` about ``tps``, :data:`LIST_OFFSETS_CHUNK` at a time;
    a request that fails ends the leader's turn (the partitions left are
    asked again in the next round)."""
    found: dict[TopicPartition, Optional[int]] = {}
    fallback: dict[TopicPartition, int] = {}
    errors: list[KielError] = []
    for start in range(0, len(tps), LIST_OFFSETS_CHUNK):
        offsets, ends, errs = await _list_from(
            cluster, leader, tps[start:start + LIST_OFFSETS_CHUNK], timestamps, read_committed)
        found.update(offsets)
        fallback.update(ends)
        errors.extend(errs)
        if errs and not offsets:
            break  # the request failed (or answered nothing): not 99 more timeouts
    return found, fallback, errors


def _list_request(version: int, tps: list[TopicPartition],
                  timestamps: Mapping[TopicPartition, int], read_committed: bool = False) -> Any:
    """The ListOffsets request for ``tps`` in ``version`` (0 or 1; v2 with
    isolation 1 when ``read_committed`` and the leader speaks it)."""
    if version >= 1:
        by_topic_v1: dict[str, list[ListOffsetsPartitionDataV1]] = {}
        for tp in tps:
            by_topic_v1.setdefault(tp.topic, []).append(
                ListOffsetsPartitionDataV1(tp.partition, timestamps[tp])
            )
        if read_committed and version >= 2:
            return ListOffsetsRequestV2(
                CONSUMER_REPLICA_ID, READ_COMMITTED,
                [ListOffsetsTopicDataV1(t, ps) for t, ps in by_topic_v1.items()],
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
    read_committed: bool = False,
) -> _Found:
    found: dict[TopicPartition, Optional[int]] = {}
    fallback: dict[TopicPartition, int] = {}
    errors: list[KielError] = []
    try:
        version = (await cluster.versions(leader)).of(LIST_OFFSETS)
        response: Any = await cluster.send(
            leader, _list_request(version, tps, timestamps, read_committed))
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


#: An OffsetCommit answer of any version kiel speaks (v2's is v0's class).
CommitResponse = Union[OffsetCommitResponse, OffsetCommitResponseV7]
#: An OffsetFetch answer of any version kiel speaks (v1's is v0's class).
FetchResponse = Union[OffsetFetchResponse, OffsetFetchResponseV5]


@dataclass(frozen=True)
class Generation:
    """Who commits: the generation and member a group's commits are made in.

    A broker group's membership replaces its value after each SyncGroup
    (and when it forgets its member id); :class:`GroupOffsets` reads the
    current one as it builds each commit, so a commit never carries half
    of one generation and half of another.

    Attributes:
        generation_id: the generation (-1: standalone, or no generation).
        member_id: the member id the coordinator gave (``""``: none).
        group_instance_id: a static member's instance id, else ``None``.
        protocol: the assignor the coordinator chose (``None``: none).
    """

    generation_id: int = STANDALONE_GENERATION
    member_id: str = ""
    group_instance_id: Optional[str] = None
    protocol: Optional[str] = None


class CoordinatorLookup(Protocol):
    """Where a group's coordinator is: one lookup and one cache per group.

    A broker group's requests (:class:`kiel.coordinator.requests.GroupRequests`)
    are one; :class:`GroupOffsets` keeps its own otherwise.
    """

    def find(self) -> Awaitable[int]:
        """The coordinator's broker id (looked up when not known)."""

    def forget(self) -> None:
        """Look the coordinator up again at the next :meth:`find`."""


class _AnyBrokerLookup:
    """The lookup of a group without a membership of the brokers': the
    coordinator, or any broker (a 0.8 broker serves v0 offsets from any)."""

    def __init__(self, cluster: Cluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        self.coordinator: Optional[int] = None

    async def find(self) -> int:
        if self.coordinator is None or self.coordinator not in self.cluster.brokers:
            self.coordinator = await self.cluster.coordinator(self.group)
        return self.coordinator

    def forget(self) -> None:
        self.coordinator = None


class GroupOffsets:
    """Commit and fetch one group's offsets.

    In the versions the coordinator speaks: OffsetCommit v7 or v2 and
    OffsetFetch v5 or v1 on a current broker, which keeps the offsets
    itself; v0 on a 0.8 broker, which keeps them in its ZooKeeper
    (negotiation keeps both on one storage: see :mod:`kiel.protocol.versions`).

    A member of a broker-coordinated group gives it (:meth:`coordinated_by`)
    where to read its current :class:`Generation`: commits carry it (v2+,
    the instance id from v7) and the coordinator refuses one from a
    generation the group has left; and its coordinator lookup, so the
    group's coordinator is looked up in one place. The defaults commit as a
    standalone member (the ZooKeeper group, a single consumer): generation
    -1, no member id.

    Args:
        cluster: the client's cluster (its backoff bounds the retries).
        group: the consumer group.
        generation_id: the member's generation (-1: standalone).
        member_id: the member id the coordinator gave (``""``: standalone).
        group_instance_id: a static member's instance id, else ``None``.
    """

    def __init__(self, cluster: Cluster, group: str, *,
                 generation_id: int = STANDALONE_GENERATION, member_id: str = "",
                 group_instance_id: Optional[str] = None) -> None:
        self.cluster = cluster
        self.group = group
        fixed = Generation(generation_id, member_id, group_instance_id)
        #: Reads the generation commits are made in (when each request is built).
        self._generation: Callable[[], Generation] = lambda: fixed
        self._lookup: CoordinatorLookup = _AnyBrokerLookup(cluster, group)
        #: The coordinator connection these requests use (see
        #: :meth:`kiel.cluster.Cluster.connection`): never the shared one,
        #: where a broker answers in order, so that a commit or an offset
        #: lookup never waits behind a fetch held for ``max_wait_time``, and
        #: a slow one never holds the fetches up. A broker group's member
        #: sets its group lane instead.
        self.lane = OFFSETS_LANE

    def coordinated_by(self, generation: Callable[[], Generation],
                       lookup: Optional[CoordinatorLookup] = None,
                       lane: Optional[str] = None) -> None:
        """Commit as a member of a group the brokers coordinate.

        Args:
            generation: reads the member's current generation (at each commit).
            lookup: the group's one coordinator lookup (its cache shared;
                default: keep this one's).
            lane: the coordinator connection of the group's requests
                (default: keep this one's).
        """
        self._generation = generation
        if lookup is not None:
            self._lookup = lookup
        if lane is not None:
            self.lane = lane

    @property
    def generation(self) -> Generation:
        """The generation commits are made in now."""
        return self._generation()

    @property
    def generation_id(self) -> int:
        """The generation commits are made in (-1: standalone)."""
        return self._generation().generation_id

    @property
    def member_id(self) -> str:
        """The member id commits are made as (``""``: standalone)."""
        return self._generation().member_id

    @property
    def group_instance_id(self) -> Optional[str]:
        """A static member's instance id (OffsetCommit v7), else ``None``."""
        return self._generation().group_instance_id

    async def coordinator(self) -> int:
        """The broker id of the group's coordinator (looked up when unknown).

        Raises:
            NoBrokersError: no broker is known.
            BrokerError: a broker group's strict lookup failed.
        """
        return await self._lookup.find()

    async def commit(self, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        """Commit ``offsets`` (the next offset to consume, per partition).

        A broker that finds ``metadata`` too large gets the commit again at
        once without it.

        Raises:
            BrokerError: a partition's error that is not retriable, or that
                persisted past the retries; for a member of a
                broker-coordinated group, at once,
                :class:`~kiel.exc.IllegalGenerationError`,
                :class:`~kiel.exc.UnknownMemberIdError`,
                :class:`~kiel.exc.RebalanceInProgressError` or
                :class:`~kiel.exc.FencedInstanceIdError` (the group moved on:
                the membership decides what to do).
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
        def request(versions: Versions) -> Any:
            return self.commit_request(versions.of(OFFSET_COMMIT), remaining, metadata)

        response: Optional[CommitResponse]
        response, error = await self._ask(request)
        if response is None:
            return error, False
        errors, refused = commit_answers(response, remaining, metadata, self.group)
        return self._retry_or_raise(errors), refused

    def commit_request(self, version: int, offsets: Mapping[TopicPartition, int],
                       metadata: str = "") -> Any:
        """The OffsetCommit request of ``offsets`` in ``version``. Pure.

        Args:
            version: the negotiated OffsetCommit version (0, 2 or 7).
            offsets: the next offset to consume, per partition.
            metadata: the metadata string of every partition.

        Returns:
            the request: v7 with the generation, member id and instance id;
            v2 with the generation and member id; v0 with neither (a 0.8
            broker has no broker-side groups).
        """
        who = self._generation()  # one generation's values, read once
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))
        if version >= 7:
            topics_v7 = [
                OffsetCommitTopicDataV7(topic, [
                    OffsetCommitPartitionDataV7(p, o, NO_LEADER_EPOCH, metadata) for p, o in ps])
                for topic, ps in by_topic.items()
            ]
            return OffsetCommitRequestV7(self.group, who.generation_id, who.member_id,
                                         who.group_instance_id, topics_v7)
        topics = [OffsetCommitTopicData(topic, [OffsetCommitPartitionData(p, o, metadata)
                                                for p, o in ps])
                  for topic, ps in by_topic.items()]
        if version >= 2:
            # No instance id before v7: the generation and member id fence
            # the commit (a static member needs JoinGroup v5, so v7 too).
            return OffsetCommitRequestV2(self.group, who.generation_id, who.member_id,
                                         DEFAULT_RETENTION, topics)
        return OffsetCommitRequest(self.group, topics)

    def fetch_request(self, version: int, tps: Iterable[TopicPartition]) -> Any:
        """The OffsetFetch request of ``tps`` in ``version`` (0, 1 or 5). Pure.

        v1 and v5 read the broker's storage, where v2 and v7 commits go
        (negotiation pairs them: see :mod:`kiel.protocol.versions`); v0 reads
        ZooKeeper's on a 0.8 broker.
        """
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topics = [OffsetFetchTopicData(t, sorted(ps)) for t, ps in sorted(by_topic.items())]
        if version >= 5:
            return OffsetFetchRequestV5(self.group, topics)
        if version >= 1:
            return OffsetFetchRequestV1(self.group, topics)
        return OffsetFetchRequest(self.group, topics)

    async def fetch(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, Optional[int]]:
        """The committed offsets of ``tps``: ``None`` where the group committed none.

        Raises:
            KielError: as for :meth:`commit`; a group-wide error (OffsetFetch
                v2+: :class:`~kiel.exc.GroupAuthorizationFailedError`...) too.
        """
        tps = list(tps)

        def request(versions: Versions) -> Any:
            return self.fetch_request(versions.of(OFFSET_FETCH), tps)

        async for attempt in attempts(self.cluster.backoff):
            response: Optional[FetchResponse]
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
            return await self.cluster.send(coordinator, request(versions), lane=self.lane), None
        except KielError as e:
            if not e.retriable:
                raise
            self._lookup.forget()
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
                self._lookup.forget()
            elif not error.retriable:
                raise error
            retry = error
        return retry

    def _incomplete(self) -> KielError:
        return KielError("the coordinator did not answer for every partition", group=self.group)


def commit_answers(
    response: CommitResponse,
    remaining: dict[TopicPartition, int],
    metadata: str,
    group: str,
) -> tuple[list[BrokerError], bool]:
    """Read an OffsetCommit answer (v0, v2 or v7: the same partitions). Pure.

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
    response: FetchResponse, group: str
) -> tuple[dict[TopicPartition, Optional[int]], list[BrokerError]]:
    """Read an OffsetFetch answer (v0, v1 or v5). Pure.

    A partition the group never committed reads -1, which a 0.8.2 broker
    sends with UnknownTopicOrPartition: both mean "no committed offset".
    A group-wide error (v5's top-level ``error_code``: NOT_COORDINATOR,
    GROUP_AUTHORIZATION_FAILED...) makes every partition unread: their -1
    then says nothing about what the group committed.

    Returns:
        the committed offset per partition (``None``: none), and the errors
        of the partitions that could not be read (or the group-wide one).
    """
    found: dict[TopicPartition, Optional[int]] = {}
    errors: list[BrokerError] = []
    if isinstance(response, OffsetFetchResponseV5):
        group_error = for_code(response.error_code)
        if group_error is not None:
            errors.append(group_error(api="OffsetFetch", group=group, errno=response.error_code))
            return found, errors
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
