"""The transactional producer's messages and their judges: kafka-python 3's
classes generated from Kafka's JSON definitions (tests/protocol/test_flexible.py
compares the flexible ones byte for byte, both ways;
tests/producer/test_transactions_unit.py the classic v2 ones)."""
from typing import Any

from kafka.protocol.producer import transaction as kp

from kiel.protocol import transactions as tx
from kiel.protocol.primitives import Array
from kiel.protocol.schema import StructType, struct_type

#: kiel's flexible transaction messages -> (kafka-python's class, version).
TXN_FLEXIBLE = [
    (tx.AddPartitionsToTxnRequestV3, kp.AddPartitionsToTxnRequest, 3),
    (tx.AddPartitionsToTxnResponseV3, kp.AddPartitionsToTxnResponse, 3),
    (tx.AddOffsetsToTxnRequestV3, kp.AddOffsetsToTxnRequest, 3),
    (tx.AddOffsetsToTxnResponseV3, kp.AddOffsetsToTxnResponse, 3),
    (tx.EndTxnRequestV3, kp.EndTxnRequest, 3),
    (tx.EndTxnResponseV3, kp.EndTxnResponse, 3),
    (tx.TxnOffsetCommitRequestV3, kp.TxnOffsetCommitRequest, 3),
    (tx.TxnOffsetCommitResponseV3, kp.TxnOffsetCommitResponse, 3),
]
#: The classic ones (v2: PRODUCER_FENCED, KIP-588).
TXN_CLASSIC = [
    (tx.AddPartitionsToTxnRequestV2, kp.AddPartitionsToTxnRequest, 2),
    (tx.AddPartitionsToTxnResponseV2, kp.AddPartitionsToTxnResponse, 2),
    (tx.AddOffsetsToTxnRequestV2, kp.AddOffsetsToTxnRequest, 2),
    (tx.AddOffsetsToTxnResponseV2, kp.AddOffsetsToTxnResponse, 2),
    (tx.EndTxnRequestV2, kp.EndTxnRequest, 2),
    (tx.EndTxnResponseV2, kp.EndTxnResponse, 2),
]

#: kiel's nested structs -> kafka-python's nested class names (Kafka's
#: definitions' names; kiel names them the same).
TXN_NESTED: dict[type, str] = {cls: cls.__name__ for cls in (
    tx.AddPartitionsToTxnTopic, tx.AddPartitionsToTxnTopicResult,
    tx.AddPartitionsToTxnPartitionResult, tx.TxnOffsetCommitRequestTopic,
    tx.TxnOffsetCommitRequestPartition, tx.TxnOffsetCommitResponseTopic,
    tx.TxnOffsetCommitResponsePartition)}

_TOPICS = [tx.AddPartitionsToTxnTopic("out", [0, 1, 2]), tx.AddPartitionsToTxnTopic("\u00e9", [])]
_RESULTS = [tx.AddPartitionsToTxnTopicResult("out", [
    tx.AddPartitionsToTxnPartitionResult(0, 0), tx.AddPartitionsToTxnPartitionResult(1, 90)])]
_OFFSETS = [tx.TxnOffsetCommitRequestTopic("in", [
    tx.TxnOffsetCommitRequestPartition(0, 42),
    tx.TxnOffsetCommitRequestPartition(3, 2**40, 7, None)])]

#: Sample values of every transaction message, flexible and classic.
TXN_SAMPLES = [
    tx.AddPartitionsToTxnRequestV3("txn", 1000, 0, _TOPICS),
    tx.AddPartitionsToTxnRequestV2("t", 2**63 - 1, 2**15 - 1, []),
    tx.AddPartitionsToTxnResponseV3(0, _RESULTS),
    tx.AddPartitionsToTxnResponseV2(5, []),
    tx.AddOffsetsToTxnRequestV3("txn", 7, 1, "group"),
    tx.AddOffsetsToTxnRequestV2("txn", 7, 1, "\u00e9"),
    tx.AddOffsetsToTxnResponseV3(0, 51),
    tx.AddOffsetsToTxnResponseV2(0, 0),
    tx.EndTxnRequestV3("txn", 7, 1, True),
    tx.EndTxnRequestV2("txn", 7, 1, False),
    tx.EndTxnResponseV3(0, 90),
    tx.EndTxnResponseV2(10, 0),
    tx.TxnOffsetCommitRequestV3("txn", "group", 7, 1, 3, "member-1", None, _OFFSETS),
    tx.TxnOffsetCommitRequestV3("txn", "group", 7, 1, -1, "", "static-1", []),
    tx.TxnOffsetCommitResponseV3(0, [tx.TxnOffsetCommitResponseTopic("in", [
        tx.TxnOffsetCommitResponsePartition(0, 0), tx.TxnOffsetCommitResponsePartition(3, 22)])]),
]


def from_kp(kp_value: Any, cls: type) -> Any:
    """kiel's ``cls`` from kafka-python's decoded value, field by field by name."""
    values = []
    for name, wtype in struct_type(cls).fields:
        item = getattr(kp_value, name)
        if isinstance(wtype, Array) and isinstance(wtype.item, StructType):
            item = [from_kp(x, wtype.item.cls) for x in item]
        values.append(item)
    return cls(*values)
