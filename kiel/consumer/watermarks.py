"""Where a partition's log ends, as its leader's Fetch reports it (the high watermark).

The ListOffsets answer for LATEST is that end on Kafka, but not on every
broker that speaks the protocol: Tansu answers it with the last record
batch's base offset plus one. The high watermark in a Fetch answer is, by
definition, how far the broker will serve a consumer, on every broker. Its
users: :mod:`kiel.spark` plans a read's ranges up to it (a read that stopped
at the ListOffsets answer lost the rest of the last batch), and
:mod:`kiel.admin` checks a group's committed offset that lies above the
ListOffsets answer against it (past the log end, or the answer short?).

One Fetch per leader asks for one byte at the offset before the ListOffsets
answer (data the broker holds, so it answers at once; a 0.8 broker sends
that byte, a current one its first batch). A partition that ListOffsets
says is empty is not asked: its end is its start.

For a read_committed reader the end is the last stable offset (the first
offset of a transaction still open, else the high watermark): the probe
asks with isolation 1, at each partition's earliest offset, and takes the
answer's LSO.
"""

import asyncio
from collections.abc import Mapping
from typing import Any

from kiel.cluster import Cluster
from kiel.consumer.offsets import judge_round
from kiel.exc import (
    KielError,
    LeaderNotAvailableError,
    OffsetOutOfRangeError,
    for_code,
)
from kiel.protocol import FetchPartitionData, FetchRequest, FetchRequestV4, FetchTopicData
from kiel.protocol.fetch import CONSUMER_REPLICA_ID, READ_COMMITTED, READ_UNCOMMITTED
from kiel.protocol.versions import FETCH
from kiel.retry import attempts
from kiel.structs import TopicPartition

__all__ = ["PROBE_WAIT_MS", "served_ends"]

#: How long a probe may wait at the broker (ms). It asks for data the broker
#: holds, so it is answered at once; Tansu answers a Fetch with no wait at
#: all with no partitions, so it cannot be 0.
PROBE_WAIT_MS = 100


async def served_ends(cluster: Cluster, earliest: Mapping[TopicPartition, int],
                      listed: Mapping[TopicPartition, int], *,
                      read_committed: bool = False) -> dict[TopicPartition, int]:
    """The end of each partition's log as its leader serves it.

    Args:
        cluster: the client's cluster.
        earliest: the ListOffsets EARLIEST answer per partition.
        listed: the ListOffsets LATEST answer per partition (read committed
            when ``read_committed``).
        read_committed: the end a read_committed consumer is served: the
            probe asks with isolation 1 and takes the answer's last stable
            offset (the first offset of a transaction still open, else the
            high watermark).

    Returns:
        the high watermark per partition (``listed`` where the partition is
        empty, or where the probe's offset went out of range meanwhile:
        retention or a truncation moved the log, and the ListOffsets answer
        is the best known).

    Raises:
        BrokerError: a partition error that is not retriable, or persisted
            past the retries.
        KielError: a leader could not be reached within the retries.
    """
    if read_committed:
        # Strategy: a read_committed ListOffsets answer is no measure of
        # where to probe (Tansu answers 0 while a transaction is open), so
        # every partition is probed at its earliest offset, where the
        # broker holds data or its log ends: the answer's LSO is the end.
        result: dict[TopicPartition, int] = {}
        remaining = {tp: earliest.get(tp, listed[tp]) for tp in listed}
    else:
        result = {tp: listed[tp] for tp in listed if listed[tp] <= earliest.get(tp, listed[tp])}
        remaining = {tp: listed[tp] - 1 for tp in listed if tp not in result}
    async for attempt in attempts(cluster.backoff):
        if not remaining:
            break
        errors = await _probe_round(cluster, remaining, listed, result, read_committed)
        if not remaining:
            break
        await judge_round(cluster, attempt, errors, "Fetch")
    return result


async def _probe_round(cluster: Cluster, remaining: dict[TopicPartition, int],
                       listed: Mapping[TopicPartition, int],
                       result: dict[TopicPartition, int],
                       read_committed: bool = False) -> list[KielError]:
    """One probe per leader, all at once; answered partitions leave ``remaining``
    for ``result``. Returns the errors met."""
    by_leader: dict[int, list[TopicPartition]] = {}
    errors: list[KielError] = []
    for tp in remaining:
        leader = cluster.leader(tp.topic, tp.partition)
        if leader < 0 or leader not in cluster.brokers:
            errors.append(LeaderNotAvailableError(topic=tp.topic, partition=tp.partition))
        else:
            by_leader.setdefault(leader, []).append(tp)
    answers = await asyncio.gather(*(_probe(cluster, leader, {tp: remaining[tp] for tp in tps},
                                            read_committed)
                                     for leader, tps in by_leader.items()))
    for found, errs in answers:
        errors.extend(errs)
        for tp, end in found.items():
            result[tp] = listed[tp] if end is None else end
            del remaining[tp]
    return errors


async def _probe(cluster: Cluster, leader: int, offsets: dict[TopicPartition, int],
                 read_committed: bool = False
                 ) -> tuple[dict[TopicPartition, Any], list[KielError]]:
    """Ask ``leader`` for one byte at each offset; the high watermark of each
    answer (read_committed: its last stable offset; None: out of range, keep
    the ListOffsets answer) and the errors."""
    by_topic: dict[str, list[FetchPartitionData]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(FetchPartitionData(tp.partition, offset, 1))
    topics = [FetchTopicData(t, parts) for t, parts in by_topic.items()]
    try:
        version = (await cluster.versions(leader)).of(FETCH)
        request: Any = (
            FetchRequestV4(CONSUMER_REPLICA_ID, PROBE_WAIT_MS, 1, 1,
                           READ_COMMITTED if read_committed else READ_UNCOMMITTED, topics)
            if version >= 4 else FetchRequest(CONSUMER_REPLICA_ID, PROBE_WAIT_MS, 1, topics)
        )
        response: Any = await cluster.send(
            leader, request, timeout=cluster.request_timeout + PROBE_WAIT_MS / 1000)
    except KielError as e:
        if not e.retriable:
            raise
        return {}, [e]
    found: dict[TopicPartition, Any] = {}
    errors: list[KielError] = []
    for topic in response.topics:
        for part in topic.partitions:
            tp = TopicPartition(topic.topic, part.partition)
            if tp not in offsets:
                continue
            error = for_code(part.error_code)
            if error is None:
                found[tp] = part.high_watermark
                stable = getattr(part, "last_stable_offset", -1)
                if read_committed and stable >= 0:
                    found[tp] = min(stable, part.high_watermark)
            elif error is OffsetOutOfRangeError:
                found[tp] = None
            else:
                errors.append(error(api="Fetch", topic=tp.topic, partition=tp.partition,
                                    broker_id=leader, errno=part.error_code))
    return found, errors
