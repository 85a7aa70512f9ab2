"""The transactional producer's APIs (KIP-98, KIP-447): AddPartitionsToTxn
(24), AddOffsetsToTxn (25), EndTxn (26) and TxnOffsetCommit (28).

Schemas only (see :mod:`kiel.producer.transactions`). Every one goes to the
transactional id's coordinator (FindCoordinator with
:data:`~kiel.protocol.group_coordinator.KEY_TYPE_TRANSACTION`) except
TxnOffsetCommit, which goes to the consumer group's coordinator.

kiel speaks v2 (classic; the first version that may answer PRODUCER_FENCED,
KIP-588) and v3 (the first flexible one) of the first three, and v3 of
TxnOffsetCommit (flexible; it carries the consumer's generation, member id
and group instance id, so the group coordinator can refuse offsets of a
member that is no longer in the group: KIP-447). AddPartitionsToTxn v4 and
later batch several transactions and are for brokers only (Kafka's
definitions say so; Tansu does not implement them).

Field names are those of Apache Kafka's message definitions, snake case,
including AddPartitionsToTxn's ``v3_and_below_*`` (the fields clients send:
v4 moved them into a list of transactions).

Wire grammar (Apache Kafka's message definitions; v3 flexible)::

    AddPartitionsToTxnRequest v2-v3  => TransactionalId(string) ProducerId(int64)
                                        ProducerEpoch(int16) [Topic]
      Topic                          => Name(string) [PartitionIndex(int32)]
    AddPartitionsToTxnResponse v2-v3 => ThrottleTimeMs(int32) [TopicResult]
      TopicResult                    => Name(string) [PartitionResult]
      PartitionResult                => PartitionIndex(int32) ErrorCode(int16)

    AddOffsetsToTxnRequest v2-v3     => TransactionalId(string) ProducerId(int64)
                                        ProducerEpoch(int16) GroupId(string)
    AddOffsetsToTxnResponse v2-v3    => ThrottleTimeMs(int32) ErrorCode(int16)

    EndTxnRequest v2-v3              => TransactionalId(string) ProducerId(int64)
                                        ProducerEpoch(int16) Committed(bool)
    EndTxnResponse v2-v3             => ThrottleTimeMs(int32) ErrorCode(int16)

    TxnOffsetCommitRequest v3        => TransactionalId(string) GroupId(string)
                                        ProducerId(int64) ProducerEpoch(int16)
                                        GenerationId(int32) MemberId(string)
                                        GroupInstanceId(nullable string) [Topic]
      Topic                          => Name(string) [Partition]
      Partition                      => PartitionIndex(int32) CommittedOffset(int64)
                                        CommittedLeaderEpoch(int32)
                                        CommittedMetadata(nullable string)
    TxnOffsetCommitResponse v3       => ThrottleTimeMs(int32) [Topic]
      Topic                          => Name(string) [Partition]
      Partition                      => PartitionIndex(int32) ErrorCode(int16)
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, flexible_versions, register
from kiel.protocol.primitives import Array, Boolean, Int16, Int32, Int64, NullableString, String

ADD_PARTITIONS_TO_TXN_KEY = 24
ADD_OFFSETS_TO_TXN_KEY = 25
END_TXN_KEY = 26
TXN_OFFSET_COMMIT_KEY = 28
#: Kafka's ``"flexibleVersions": "3+"`` for all four.
for _key in (ADD_PARTITIONS_TO_TXN_KEY, ADD_OFFSETS_TO_TXN_KEY, END_TXN_KEY,
             TXN_OFFSET_COMMIT_KEY):
    flexible_versions(_key, 3)


# --------------------------------------------------------------------------
# AddPartitionsToTxn


class AddPartitionsToTxnTopic(NamedTuple):
    """A topic's partitions to add to the transaction."""

    name: Annotated[str, String]
    partitions: Annotated[list[int], Array(Int32)]


class AddPartitionsToTxnRequestV2(NamedTuple):
    """AddPartitionsToTxn v2 request: add partitions to the producer's transaction."""

    v3_and_below_transactional_id: Annotated[str, String]
    v3_and_below_producer_id: Annotated[int, Int64]
    v3_and_below_producer_epoch: Annotated[int, Int16]
    v3_and_below_topics: Annotated[list[AddPartitionsToTxnTopic], Array(AddPartitionsToTxnTopic)]


class AddPartitionsToTxnRequestV3(AddPartitionsToTxnRequestV2):
    """AddPartitionsToTxn v3 request (v2's fields, flexible)."""

    __slots__ = ()


class AddPartitionsToTxnPartitionResult(NamedTuple):
    """One partition's answer."""

    partition_index: Annotated[int, Int32]
    partition_error_code: Annotated[int, Int16]


class AddPartitionsToTxnTopicResult(NamedTuple):
    """One topic's answers."""

    name: Annotated[str, String]
    results_by_partition: Annotated[list[AddPartitionsToTxnPartitionResult],
                                    Array(AddPartitionsToTxnPartitionResult)]


class AddPartitionsToTxnResponseV2(NamedTuple):
    """AddPartitionsToTxn v2 response: an error code per partition."""

    throttle_time_ms: Annotated[int, Int32]
    results_by_topic_v3_and_below: Annotated[list[AddPartitionsToTxnTopicResult],
                                             Array(AddPartitionsToTxnTopicResult)]


class AddPartitionsToTxnResponseV3(AddPartitionsToTxnResponseV2):
    """AddPartitionsToTxn v3 response (v2's fields, flexible)."""

    __slots__ = ()


# --------------------------------------------------------------------------
# AddOffsetsToTxn


class AddOffsetsToTxnRequestV2(NamedTuple):
    """AddOffsetsToTxn v2 request: the group's offsets will be part of the transaction."""

    transactional_id: Annotated[str, String]
    producer_id: Annotated[int, Int64]
    producer_epoch: Annotated[int, Int16]
    group_id: Annotated[str, String]


class AddOffsetsToTxnRequestV3(AddOffsetsToTxnRequestV2):
    """AddOffsetsToTxn v3 request (v2's fields, flexible)."""

    __slots__ = ()


class AddOffsetsToTxnResponseV2(NamedTuple):
    """AddOffsetsToTxn v2 response."""

    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]


class AddOffsetsToTxnResponseV3(AddOffsetsToTxnResponseV2):
    """AddOffsetsToTxn v3 response (v2's fields, flexible)."""

    __slots__ = ()


# --------------------------------------------------------------------------
# EndTxn


class EndTxnRequestV2(NamedTuple):
    """EndTxn v2 request: commit (``committed=True``) or abort the transaction."""

    transactional_id: Annotated[str, String]
    producer_id: Annotated[int, Int64]
    producer_epoch: Annotated[int, Int16]
    committed: Annotated[bool, Boolean]


class EndTxnRequestV3(EndTxnRequestV2):
    """EndTxn v3 request (v2's fields, flexible)."""

    __slots__ = ()


class EndTxnResponseV2(NamedTuple):
    """EndTxn v2 response."""

    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]


class EndTxnResponseV3(EndTxnResponseV2):
    """EndTxn v3 response (v2's fields, flexible)."""

    __slots__ = ()


# --------------------------------------------------------------------------
# TxnOffsetCommit


class TxnOffsetCommitRequestPartition(NamedTuple):
    """One partition's offset to commit with the transaction."""

    partition_index: Annotated[int, Int32]
    committed_offset: Annotated[int, Int64]
    committed_leader_epoch: Annotated[int, Int32] = -1
    committed_metadata: Annotated[Optional[str], NullableString] = ""


class TxnOffsetCommitRequestTopic(NamedTuple):
    """One topic's offsets."""

    name: Annotated[str, String]
    partitions: Annotated[list[TxnOffsetCommitRequestPartition],
                          Array(TxnOffsetCommitRequestPartition)]


class TxnOffsetCommitRequestV3(NamedTuple):
    """TxnOffsetCommit v3 request: offsets committed with the transaction,
    with the consumer's group metadata (KIP-447)."""

    transactional_id: Annotated[str, String]
    group_id: Annotated[str, String]
    producer_id: Annotated[int, Int64]
    producer_epoch: Annotated[int, Int16]
    generation_id: Annotated[int, Int32]
    member_id: Annotated[str, String]
    group_instance_id: Annotated[Optional[str], NullableString]
    topics: Annotated[list[TxnOffsetCommitRequestTopic], Array(TxnOffsetCommitRequestTopic)]


class TxnOffsetCommitResponsePartition(NamedTuple):
    """One partition's answer."""

    partition_index: Annotated[int, Int32]
    error_code: Annotated[int, Int16]


class TxnOffsetCommitResponseTopic(NamedTuple):
    """One topic's answers."""

    name: Annotated[str, String]
    partitions: Annotated[list[TxnOffsetCommitResponsePartition],
                          Array(TxnOffsetCommitResponsePartition)]


class TxnOffsetCommitResponseV3(NamedTuple):
    """TxnOffsetCommit v3 response: an error code per partition."""

    throttle_time_ms: Annotated[int, Int32]
    topics: Annotated[list[TxnOffsetCommitResponseTopic], Array(TxnOffsetCommitResponseTopic)]


ADD_PARTITIONS_TO_TXN_V2 = register(Api(
    ADD_PARTITIONS_TO_TXN_KEY, 2, "AddPartitionsToTxn", AddPartitionsToTxnRequestV2,
    AddPartitionsToTxnResponseV2))
ADD_PARTITIONS_TO_TXN_V3 = register(Api(
    ADD_PARTITIONS_TO_TXN_KEY, 3, "AddPartitionsToTxn", AddPartitionsToTxnRequestV3,
    AddPartitionsToTxnResponseV3))
ADD_OFFSETS_TO_TXN_V2 = register(Api(
    ADD_OFFSETS_TO_TXN_KEY, 2, "AddOffsetsToTxn", AddOffsetsToTxnRequestV2,
    AddOffsetsToTxnResponseV2))
ADD_OFFSETS_TO_TXN_V3 = register(Api(
    ADD_OFFSETS_TO_TXN_KEY, 3, "AddOffsetsToTxn", AddOffsetsToTxnRequestV3,
    AddOffsetsToTxnResponseV3))
END_TXN_V2 = register(Api(END_TXN_KEY, 2, "EndTxn", EndTxnRequestV2, EndTxnResponseV2))
END_TXN_V3 = register(Api(END_TXN_KEY, 3, "EndTxn", EndTxnRequestV3, EndTxnResponseV3))
TXN_OFFSET_COMMIT_V3 = register(Api(
    TXN_OFFSET_COMMIT_KEY, 3, "TxnOffsetCommit", TxnOffsetCommitRequestV3,
    TxnOffsetCommitResponseV3))

#: The request class of each version kiel speaks, by api key and version.
REQUESTS: dict[int, dict[int, type]] = {
    ADD_PARTITIONS_TO_TXN_KEY: {2: AddPartitionsToTxnRequestV2, 3: AddPartitionsToTxnRequestV3},
    ADD_OFFSETS_TO_TXN_KEY: {2: AddOffsetsToTxnRequestV2, 3: AddOffsetsToTxnRequestV3},
    END_TXN_KEY: {2: EndTxnRequestV2, 3: EndTxnRequestV3},
    TXN_OFFSET_COMMIT_KEY: {3: TxnOffsetCommitRequestV3},
}
