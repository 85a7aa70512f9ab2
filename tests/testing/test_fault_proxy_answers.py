"""The fault proxy's own answers (``FaultProxy.answer_error``), judged by
kafka-python 3's classes (generated from Kafka's message definitions): for
every API and version the proxy answers, a request kafka-python encodes
gets the answer kafka-python encodes for that error, byte for byte (each
partition of the request answered, for the APIs that answer per
partition). Then the frame watch: the
request is kept from the broker, the answer passes after the broker's
answers to the requests before it."""
import struct
from typing import Any, List

import pytest
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.producer import transaction as kp

from kiel.exc import ConfigError, HarnessError
from kiel.testing.faults import FaultProxy
from kiel.testing.faults.answers import ANSWERABLE, error_answer
from kiel.testing.faults.frames import FrameWatch, KafkaRules, _Rule

CODE = 51  # CONCURRENT_TRANSACTIONS
#: Kafka's first flexible version of each (its definitions' flexibleVersions).
FLEXIBLE = {10: 3, 22: 2, 24: 3, 25: 3, 26: 3, 28: 3}


def _find_coordinator(version: int) -> Any:
    return FindCoordinatorRequest[version](key="txn-\u00e9", key_type=1)


def _init_producer_id(version: int) -> Any:
    return kp.InitProducerIdRequest[version](
        transactional_id="txn", transaction_timeout_ms=60000, producer_id=7, producer_epoch=2)


def _add_partitions(version: int) -> Any:
    cls = kp.AddPartitionsToTxnRequest[version]
    return cls(v3_and_below_transactional_id="txn", v3_and_below_producer_id=7,
               v3_and_below_producer_epoch=2, v3_and_below_topics=[
                   cls.AddPartitionsToTxnTopic(name="out", partitions=[0, 2, 5]),
                   cls.AddPartitionsToTxnTopic(name="\u00e9" * 70, partitions=[]),
                   cls.AddPartitionsToTxnTopic(name="b", partitions=list(range(130)))])


def _add_offsets(version: int) -> Any:
    return kp.AddOffsetsToTxnRequest[version](
        transactional_id="txn", producer_id=7, producer_epoch=2, group_id="group")


def _end_txn(version: int) -> Any:
    return kp.EndTxnRequest[version](
        transactional_id="txn", producer_id=7, producer_epoch=2, committed=True)


def _txn_offset_commit(version: int) -> Any:
    cls = kp.TxnOffsetCommitRequest[version]
    topic, partition = cls.TxnOffsetCommitRequestTopic, \
        cls.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition
    return cls(transactional_id="txn", group_id="group", producer_id=7, producer_epoch=2,
               generation_id=3, member_id="member-1", group_instance_id=None, topics=[
                   topic(name="in", partitions=[
                       partition(partition_index=0, committed_offset=42,
                                 committed_leader_epoch=-1, committed_metadata=""),
                       partition(partition_index=3, committed_offset=2**40,
                                 committed_leader_epoch=7, committed_metadata=None)]),
                   topic(name="other", partitions=[])])


def _topics(request: Any, api_key: int) -> List[Any]:
    """(name, partition indexes) of each topic of an AddPartitionsToTxn or
    TxnOffsetCommit request."""
    if api_key == 24:
        return [(t.name, list(t.partitions)) for t in request.v3_and_below_topics]
    return [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]


def expected_answer(api_key: int, version: int, request: Any, code: int) -> Any:
    """What a coordinator answering ``code`` sends, made by kafka-python."""
    if api_key == 10:
        return FindCoordinatorResponse[version](
            throttle_time_ms=0, error_code=code, error_message=None, node_id=-1, host="",
            port=-1)
    if api_key == 22:
        return kp.InitProducerIdResponse[version](
            throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    if api_key in (25, 26):
        cls = kp.AddOffsetsToTxnResponse if api_key == 25 else kp.EndTxnResponse
        return cls[version](throttle_time_ms=0, error_code=code)
    if api_key == 24:
        add = kp.AddPartitionsToTxnResponse[version]
        topic = add.AddPartitionsToTxnTopicResult
        partition = topic.AddPartitionsToTxnPartitionResult
        return add(throttle_time_ms=0, results_by_topic_v3_and_below=[
            topic(name=name, results_by_partition=[
                partition(partition_index=p, partition_error_code=code) for p in partitions])
            for name, partitions in _topics(request, 24)])
    commit = kp.TxnOffsetCommitResponse[version]
    topic = commit.TxnOffsetCommitResponseTopic
    partition = topic.TxnOffsetCommitResponsePartition
    return commit(throttle_time_ms=0, topics=[
        topic(name=name, partitions=[partition(partition_index=p, error_code=code)
                                     for p in partitions])
        for name, partitions in _topics(request, 28)])


#: api key -> (request maker, kafka-python's response class)
CASES = {
    10: (_find_coordinator, FindCoordinatorResponse),
    22: (_init_producer_id, kp.InitProducerIdResponse),
    24: (_add_partitions, kp.AddPartitionsToTxnResponse),
    25: (_add_offsets, kp.AddOffsetsToTxnResponse),
    26: (_end_txn, kp.EndTxnResponse),
    28: (_txn_offset_commit, kp.TxnOffsetCommitResponse),
}


def encoded_request(request: Any, version: int, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="kiel-test")
    return bytes(request.encode(version=version, header=True, framed=True))


@pytest.mark.parametrize("api_key, version", [
    (key, version) for key, (first, last) in sorted(ANSWERABLE.items())
    for version in range(first, last + 1)])
def test_each_answer_is_kafka_pythons_byte_for_byte(api_key: int, version: int) -> None:
    make, response_class = CASES[api_key]
    request = make(version)
    answer = error_answer(encoded_request(request, version, 123456), CODE)
    assert answer is not None
    expected = expected_answer(api_key, version, request, CODE)
    expected.with_header(correlation_id=123456)
    assert answer == bytes(expected.encode(header=True, framed=True))
    # The response header is v1 (tagged fields) for the flexible versions.
    decoded = response_class.decode(answer[4:], version=version, header=True)
    assert decoded.header.version == (1 if version >= FLEXIBLE[api_key] else 0)
    assert decoded.header.correlation_id == 123456


def test_what_it_cannot_answer_is_none() -> None:
    end_txn_v5 = encoded_request(_end_txn(5), 5, 1)
    assert error_answer(end_txn_v5, CODE) is None  # a version it does not know
    add_v4 = kp.AddPartitionsToTxnRequest[4](transactions=[])
    assert error_answer(encoded_request(add_v4, 4, 1), CODE) is None
    truncated = encoded_request(_add_partitions(3), 3, 1)[:-7]
    assert error_answer(truncated, CODE) is None  # not laid out as v3 says
    assert error_answer(b"\0\0\0\2\0\0", CODE) is None


def _answer(correlation_id: int) -> bytes:
    """A broker's answer (any API: only the correlation id is read)."""
    return struct.pack(">ii", 8, correlation_id) + b"\0\0\0\0"


def test_the_watch_keeps_the_request_and_answers_it_in_order() -> None:
    rules = KafkaRules()
    rules.answer_rules[26] = _Rule(every=2, times=None, code=CODE, api_key=26)
    injected: List[bytes] = []
    watch = FrameWatch(rules, inject=injected.append)
    first, second, third = (encoded_request(_end_txn(3), 3, cid) for cid in (1, 2, 3))
    add = encoded_request(_add_offsets(3), 3, 4)
    # 1 passes; 2 is answered by the proxy, after the broker's answer to 1.
    out, reset = watch.upstream(first + second)
    assert (out, reset) == (first, False)
    assert injected == []
    out, _ = watch.downstream(_answer(1))
    assert out[:12] == _answer(1)
    mine = kp.EndTxnResponse.decode(out[12 + 4:], version=3, header=True)
    assert (mine.header.correlation_id, mine.error_code) == (2, CODE)
    # Nothing pending: the proxy answers at once (4 passes, then 3 is kept
    # and answered after the broker's answer to 4).
    out, _ = watch.upstream(third)
    assert out == third  # the rule's 3rd request: passes
    out, _ = watch.downstream(_answer(3))
    out, _ = watch.upstream(add + encoded_request(_end_txn(3), 3, 5))
    assert out == add
    out, _ = watch.downstream(_answer(4))
    assert struct.unpack_from(">i", out, 12 + 4)[0] == 5
    assert injected == []
    out, _ = watch.upstream(encoded_request(_end_txn(3), 3, 6))  # 5th: passes
    out, _ = watch.downstream(_answer(6))
    out, _ = watch.upstream(encoded_request(_end_txn(3), 3, 7))  # 6th: answered now
    assert out == b"" and len(injected) == 1
    assert struct.unpack_from(">i", injected[0], 4)[0] == 7
    assert rules.answered == 3
    assert rules.requests == {26: 6, 25: 1}


def test_answer_error_needs_an_answerable_api_and_kafka_true() -> None:
    with FaultProxy(("127.0.0.1", 9)) as plain:
        with pytest.raises(HarnessError, match="kafka=True"):
            plain.answer_error(26, CODE)
        with pytest.raises(HarnessError, match="kafka=True"):
            plain.kafka_requests()
    with FaultProxy(("127.0.0.1", 9), kafka=True) as proxy:
        for bad_key in (0, 3, -1, "26", 26.0):
            with pytest.raises(ConfigError, match="api_key"):
                proxy.answer_error(bad_key, CODE)  # type: ignore[arg-type]
        for bad_code in (0, 2**15, -(2**15) - 1, "51", None):
            with pytest.raises(ConfigError, match="code"):
                proxy.answer_error(26, bad_code)  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            proxy.answer_error(26, CODE, every=-1)
        with pytest.raises(ConfigError):
            proxy.answer_error(26, CODE, times=0)
        proxy.answer_error(26, CODE, every=0)  # clears: fine
        assert proxy.kafka_requests() == {}
        assert proxy.kafka_stats()["answered"] == 0


# --------------------------------------------------------------------------
# advertise=True: answers that say where a broker is name the proxy


def _metadata_answer(version: int, ports: List[int]) -> Any:
    from kafka.protocol.metadata.metadata import MetadataResponse

    cls = MetadataResponse[version]
    broker = cls.MetadataResponseBroker
    return cls(throttle_time_ms=7, brokers=[
        broker(node_id=i, host="127.0.0.1", port=port, rack="r" if i else None)
        for i, port in enumerate(ports)], cluster_id="c", controller_id=0, topics=[],
        authorized_operations=set(), error_code=0)


def _find_coordinator_answer(version: int, port: int) -> Any:
    cls = FindCoordinatorResponse[version]
    if version <= 3:
        return cls(throttle_time_ms=0, error_code=0, error_message=None, node_id=1,
                   host="localhost", port=port)
    return cls(throttle_time_ms=0, coordinators=[
        cls.Coordinator(key=key, node_id=1, host="localhost", port=port, error_code=0,
                        error_message=None) for key in ("a", "b")])


def _framed(answer: Any, correlation_id: int = 3) -> bytes:
    answer.with_header(correlation_id=correlation_id)
    return bytes(answer.encode(header=True, framed=True))


@pytest.mark.parametrize("version", range(14))
def test_metadata_answers_name_the_proxy(version: int) -> None:
    from kiel.testing.faults.answers import readvertise

    frame = _framed(_metadata_answer(version, [9092, 9093, 9092]))
    out = readvertise(frame, 3, version, 9092, 40000)
    assert out == _framed(_metadata_answer(version, [40000, 9093, 40000]))
    assert readvertise(frame[:-30], 3, version, 9092, 40000) == frame[:-30]  # cut short


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_answers_name_the_proxy(version: int) -> None:
    from kiel.testing.faults.answers import readvertise

    frame = _framed(_find_coordinator_answer(version, 9092))
    assert readvertise(frame, 10, version, 9092, 40000) == _framed(
        _find_coordinator_answer(version, 40000))
    assert readvertise(frame, 10, version, 1234, 40000) == frame  # another broker's
    assert readvertise(frame, 10, 7, 9092, 40000) == frame  # a version it does not know


def test_the_watch_readvertises_only_metadata_and_find_coordinator() -> None:
    rules = KafkaRules()
    rules.advertise = (9092, 40000)
    watch = FrameWatch(rules)
    from kafka.protocol.metadata.metadata import MetadataRequest

    request = MetadataRequest[4](topics=[], allow_auto_topic_creation=False)
    watch.upstream(encoded_request(request, 4, 3) + encoded_request(_end_txn(3), 3, 4))
    metadata = _framed(_metadata_answer(4, [9092]))
    end_txn = kp.EndTxnResponse[3](throttle_time_ms=9092, error_code=0)
    out, _ = watch.downstream(metadata + _framed(end_txn, 4))
    assert out == _framed(_metadata_answer(4, [40000])) + _framed(end_txn, 4)


def test_advertise_needs_kafka_true() -> None:
    with pytest.raises(ConfigError, match="kafka=True"):
        FaultProxy(("127.0.0.1", 9), advertise=True)
