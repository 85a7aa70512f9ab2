"""The transactional producer's retries, driven by a coordinator's answers.

Neither Tansu nor noida-db answers NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
or CONCURRENT_TRANSACTIONS on cue, so each runs behind the Kafka-frame
fault proxy (every connection of the client goes through it: Tansu
advertises the proxy, and the proxy makes noida-db's Metadata and
FindCoordinator answers name it), and the proxy keeps the chosen request
from the broker and answers it with the code itself
(``FaultProxy.answer_error``): the broker never did it, as a coordinator
answering those codes did not. Each test fails when the retry it names is
taken out of kiel/producer/transactions.py (or, for InitProducerId, the
sender's identity retry). What the log holds is judged by the markers and a
plain read on both, and by a read_committed reader on noida-db (Tansu shows
aborted records to read_committed readers).
"""
import asyncio
from typing import Any, Dict, Iterator, List, Tuple

import confluent_kafka
import pytest

from kiel import Producer
from kiel.exc import (
    ConcurrentTransactionsError,
    NotCoordinatorForConsumerError,
    OffsetsLoadInProgressError,
    TransactionAbortedError,
    TransactionStateError,
)
from kiel.structs import GroupMetadata
from kiel.testing.process import free_ports
from kiel.testing.tansu import TansuBroker
from tests.conftest import run, unique
from tests.support.idempotence import confluent_read
from tests.support.transactions import control_batches, create_topic

FIND_COORDINATOR, INIT_PRODUCER_ID = 10, 22
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
CONCURRENT = 51


@pytest.fixture(params=["tansu", "noida"])
def proxied(request: Any, fault_proxy: Any) -> Iterator[Tuple[Any, Any]]:
    """A broker behind a Kafka-frame fault proxy that every connection of a
    client goes through: Tansu advertises the proxy; noida-db advertises
    itself, and the proxy makes its Metadata and FindCoordinator answers
    name the proxy (``advertise=True``). Yields ``(broker, proxy)``."""
    if request.param == "noida":
        broker = request.getfixturevalue("noida_broker")
        yield broker, fault_proxy(broker.bootstrap, kafka=True, advertise=True)
        return
    (port,) = free_ports(1)
    proxy = fault_proxy(("127.0.0.1", port), kafka=True)
    tansu = TansuBroker(port=port, advertised_port=proxy.port)
    tansu.start()
    yield tansu, proxy
    tansu.close()


def values(prefix: str, count: int = 10) -> List[bytes]:
    return [b"%s-%d" % (prefix.encode(), i) for i in range(count)]


def read_back(bootstrap: str, topic: str, count: int) -> List[bytes]:
    """Every record of ``topic``'s one partition (a plain read: on Tansu the
    markers, not read_committed, say what committed)."""
    return sorted(confluent_read(bootstrap, topic, count, idle=1.0, partitions=1))


def read_committed_is(broker: Any, topic: str, expected: List[bytes]) -> None:
    """On noida-db (which hides aborted records from read_committed readers),
    a read_committed reader reads exactly ``expected``; on Tansu nothing is
    claimed (the markers are)."""
    if isinstance(broker, TansuBroker):
        return
    got = confluent_read(broker.bootstrap, topic, len(expected), idle=1.0,
                         isolation="read_committed", partitions=1)
    assert sorted(got) == sorted(expected)


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "enable.auto.commit": False})
    try:
        [tp] = consumer.committed([confluent_kafka.TopicPartition(topic, 0)], timeout=30)
        return int(tp.offset)
    finally:
        consumer.close()


# --------------------------------------------------------------------------
# a code answered a few times: retried, and the transaction ends right


@pytest.mark.parametrize("times", [1, 3])
def test_an_end_txn_answered_concurrent_transactions_is_retried(
        proxied: Any, times: int) -> None:
    broker, proxy = proxied
    bootstrap = proxy.address
    topic = create_topic(broker.bootstrap, 1, prefix="txn-endtxn")

    async def main() -> Dict[str, Any]:
        async with Producer(bootstrap, transactional_id=unique("tid")) as producer:
            proxy.answer_error(END_TXN, CONCURRENT, times=times)
            producer.begin_transaction()
            futures = [producer.produce(topic, v) for v in values("a")]
            await producer.commit_transaction()
            txn = producer._txn
            assert txn is not None
            return {"offsets": [f.result().offset for f in futures],
                    "ended": (txn.committed, txn.aborted),
                    "in_transaction": producer.in_transaction}

    out = run(main())
    assert proxy.kafka_stats()["answered"] == times
    assert proxy.kafka_requests()[END_TXN] == times + 1  # the last one reached Tansu
    assert out["ended"] == (1, 0) and not out["in_transaction"]
    assert sorted(out["offsets"]) == list(range(10))
    markers = control_batches(bootstrap, topic, 1)
    assert (markers["commit"], markers["abort"]) == (1, 0), markers
    assert read_back(bootstrap, topic, 10) == sorted(values("a"))
    read_committed_is(broker, topic, values("a"))


def test_an_add_partitions_answered_concurrent_transactions_is_retried(
        proxied: Any) -> None:
    broker, proxy = proxied
    bootstrap = proxy.address
    topic = create_topic(broker.bootstrap, 1, prefix="txn-add")

    async def main() -> List[int]:
        async with Producer(bootstrap, transactional_id=unique("tid")) as producer:
            proxy.answer_error(ADD_PARTITIONS, CONCURRENT, times=2)
            async with producer.transaction():
                futures = [producer.produce(topic, v) for v in values("a")]
            # The records went only once the partition was in the transaction.
            return [f.result().offset for f in futures]

    offsets = run(main())
    assert sorted(offsets) == list(range(10))
    assert proxy.kafka_stats()["answered"] == 2
    assert proxy.kafka_requests()[ADD_PARTITIONS] == 3
    markers = control_batches(bootstrap, topic, 1)
    assert (markers["commit"], markers["abort"]) == (1, 0), markers
    assert markers["transactional_batches"] >= 1
    assert read_back(bootstrap, topic, 10) == sorted(values("a"))
    read_committed_is(broker, topic, values("a"))


#: FindCoordinator requests expected after the fault: EndTxn's coordinator
#: found again; AddOffsetsToTxn's found again, then the group's (for
#: TxnOffsetCommit); TxnOffsetCommit's group coordinator, found for each
#: of its two attempts.
FOUND_AGAIN = {END_TXN: 1, ADD_OFFSETS: 2, TXN_OFFSET_COMMIT: 2}


@pytest.mark.parametrize("api_key", [END_TXN, ADD_OFFSETS, TXN_OFFSET_COMMIT],
                         ids=["EndTxn", "AddOffsetsToTxn", "TxnOffsetCommit"])
def test_not_coordinator_makes_the_producer_find_the_coordinator_again(
        proxied: Any, api_key: int) -> None:
    broker, proxy = proxied
    bootstrap = proxy.address
    topic = create_topic(broker.bootstrap, 1, prefix="txn-moved")
    group = unique("g")

    async def main() -> None:
        async with Producer(bootstrap, transactional_id=unique("tid")) as producer:
            producer.begin_transaction()
            await producer.produce(topic, b"before")  # the coordinator is known now
            offsets = producer.send_offsets_to_transaction({(topic, 0): 7},
                                                           GroupMetadata(group))
            if api_key == END_TXN:
                await offsets
            found = proxy.kafka_requests().get(FIND_COORDINATOR, 0)
            proxy.answer_error(api_key, NOT_COORDINATOR, times=1)
            if api_key != END_TXN:
                await offsets
            producer.produce(topic, b"after")
            await producer.commit_transaction()
            # The request answered NOT_COORDINATOR was sent again after a
            # FindCoordinator (TxnOffsetCommit finds its group's every time).
            assert proxy.kafka_requests()[FIND_COORDINATOR] - found == FOUND_AGAIN[api_key]
            assert proxy.kafka_requests()[api_key] == 2
            txn = producer._txn
            assert txn is not None and (txn.committed, txn.aborted) == (1, 0)

    run(main())
    assert proxy.kafka_stats()["answered"] == 1
    markers = control_batches(bootstrap, topic, 1)
    assert (markers["commit"], markers["abort"]) == (1, 0), markers
    assert read_back(bootstrap, topic, 2) == [b"after", b"before"]
    read_committed_is(broker, topic, [b"before", b"after"])
    assert committed_offset(bootstrap, group, topic) == 7


def test_a_coordinator_that_moved_and_is_not_found_at_once(proxied: Any) -> None:
    # EndTxn answered NOT_COORDINATOR, then the FindCoordinator that
    # follows answered COORDINATOR_NOT_AVAILABLE twice: all within the
    # commit's retries.
    broker, proxy = proxied
    bootstrap = proxy.address
    topic = create_topic(broker.bootstrap, 1, prefix="txn-moved")

    async def main() -> None:
        async with Producer(bootstrap, transactional_id=unique("tid")) as producer:
            producer.begin_transaction()
            await producer.produce(topic, b"one")
            proxy.answer_error(END_TXN, NOT_COORDINATOR, times=1)
            proxy.answer_error(FIND_COORDINATOR, NOT_AVAILABLE, times=2)
            await producer.commit_transaction()
            assert not producer.in_transaction

    run(main())
    assert proxy.kafka_stats()["answered"] == 3
    assert proxy.kafka_requests()[END_TXN] == 2
    markers = control_batches(bootstrap, topic, 1)
    assert (markers["commit"], markers["abort"]) == (1, 0), markers
    assert read_back(bootstrap, topic, 1) == [b"one"]


@pytest.mark.parametrize("api_key, code", [
    (INIT_PRODUCER_ID, LOAD_IN_PROGRESS), (INIT_PRODUCER_ID, NOT_COORDINATOR),
    (INIT_PRODUCER_ID, CONCURRENT), (FIND_COORDINATOR, NOT_AVAILABLE)],
    ids=["InitProducerId-LOAD_IN_PROGRESS", "InitProducerId-NOT_COORDINATOR",
         "InitProducerId-CONCURRENT_TRANSACTIONS", "FindCoordinator-NOT_AVAILABLE"])
def test_connect_retries_a_coordinator_loading_or_moved(
        proxied: Any, api_key: int, code: int) -> None:
    broker, proxy = proxied
    bootstrap = proxy.address
    topic = create_topic(broker.bootstrap, 1, prefix="txn-init")
    proxy.answer_error(api_key, code, times=2)

    async def main() -> int:
        async with Producer(bootstrap, transactional_id=unique("tid")) as producer:
            assert producer.producer_id >= 0
            async with producer.transaction():
                producer.produce(topic, b"first")
            return producer.producer_id

    assert run(main()) >= 0
    assert proxy.kafka_stats()["answered"] == 2
    requests = proxy.kafka_requests()
    assert requests[INIT_PRODUCER_ID] == (3 if api_key == INIT_PRODUCER_ID else 1)
    if code == CONCURRENT:  # not a move: the coordinator is kept
        assert requests[FIND_COORDINATOR] == 1
    else:  # found again for each attempt
        assert requests[FIND_COORDINATOR] >= 3
    assert control_batches(bootstrap, topic, 1)["commit"] == 1


# --------------------------------------------------------------------------
# a code answered for ever: the bounded retry ends with the typed error,
# and the state says what is left to do


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_an_end_txn_refused_past_the_retries_raises_and_ending_again_finishes(
        proxied: Any, commit: bool) -> None:
    broker, proxy = proxied
    bootstrap = proxy.address
    topic = create_topic(broker.bootstrap, 1, prefix="txn-forever")
    end, other = (("commit_transaction", "abort_transaction") if commit
                  else ("abort_transaction", "commit_transaction"))
    again = rf"call {end}\(\) again"

    async def main() -> None:
        async with Producer(bootstrap, transactional_id=unique("tid"), retries=2,
                            retry_backoff=0.05) as producer:
            producer.begin_transaction()
            futures = [producer.produce(topic, v) for v in values("a")]
            await asyncio.gather(*futures)
            proxy.answer_error(END_TXN, CONCURRENT, times=None)
            with pytest.raises(ConcurrentTransactionsError, match=again) as raised:
                await getattr(producer, end)()
            assert raised.value.errno == CONCURRENT
            assert ("EndTxn (commit)" if commit else "EndTxn (abort)") in str(raised.value)
            assert proxy.kafka_requests()[END_TXN] == 3  # retries=2: three attempts
            # The records are written; the end is unconfirmed: the
            # transaction is still on, and only the same end may finish it.
            assert all(f.result().offset >= 0 for f in futures)
            assert producer.in_transaction
            with pytest.raises(TransactionStateError, match=again):
                await getattr(producer, other)()
            with pytest.raises(TransactionStateError, match=again):
                producer.begin_transaction()
            with pytest.raises(TransactionStateError, match=again):
                producer.produce(topic, b"not now")
            # The coordinator answers again: the same call finishes it.
            proxy.answer_error(END_TXN, CONCURRENT, every=0)
            await getattr(producer, end)()
            assert not producer.in_transaction
            txn = producer._txn
            assert txn is not None and (txn.committed, txn.aborted) == (
                (1, 0) if commit else (0, 1))
            async with producer.transaction():
                producer.produce(topic, b"next")

    run(main())
    assert proxy.kafka_stats()["answered"] == 3
    markers = control_batches(bootstrap, topic, 1)
    assert (markers["commit"], markers["abort"]) == ((2, 0) if commit else (1, 1)), markers
    assert read_back(bootstrap, topic, 11) == sorted(values("a") + [b"next"])
    read_committed_is(broker, topic, (values("a") if commit else []) + [b"next"])


def test_add_partitions_refused_past_the_retries_fails_the_records_and_aborts(
        proxied: Any) -> None:
    broker, proxy = proxied
    bootstrap = proxy.address
    topic = create_topic(broker.bootstrap, 1, prefix="txn-forever")

    async def main() -> Dict[str, Any]:
        async with Producer(bootstrap, transactional_id=unique("tid"), retries=2,
                            retry_backoff=0.05) as producer:
            proxy.answer_error(ADD_PARTITIONS, CONCURRENT, times=None)
            producer.begin_transaction()
            record = producer.produce(topic, b"never")
            with pytest.raises(ConcurrentTransactionsError):
                await record
            assert proxy.kafka_requests()[ADD_PARTITIONS] == 3
            # The transaction can only abort, and says so.
            with pytest.raises(TransactionStateError, match="only be aborted"):
                producer.produce(topic, b"not now")
            with pytest.raises(TransactionAbortedError) as raised:
                await producer.commit_transaction()
            assert isinstance(raised.value.__cause__, ConcurrentTransactionsError)
            assert not producer.in_transaction
            proxy.answer_error(ADD_PARTITIONS, CONCURRENT, every=0)
            async with producer.transaction():
                producer.produce(topic, b"next")
            txn = producer._txn
            assert txn is not None
            return {"ended": (txn.committed, txn.aborted)}

    out = run(main())
    assert out["ended"] == (1, 1)
    markers = control_batches(bootstrap, topic, 1)
    # Nothing of the first transaction reached the log: no marker for it.
    assert (markers["commit"], markers["abort"]) == (1, 0), markers
    assert read_back(bootstrap, topic, 1) == [b"next"]
    read_committed_is(broker, topic, [b"next"])


def test_init_producer_id_loading_past_the_retries_fails_connect_typed(
        proxied: Any) -> None:
    broker, proxy = proxied
    bootstrap = proxy.address
    topic = create_topic(broker.bootstrap, 1, prefix="txn-forever")

    async def main() -> None:
        producer = Producer(bootstrap, transactional_id=unique("tid"), retries=2,
                            retry_backoff=0.05)
        try:
            proxy.answer_error(INIT_PRODUCER_ID, LOAD_IN_PROGRESS, times=None)
            with pytest.raises(OffsetsLoadInProgressError) as raised:
                await asyncio.wait_for(producer.connect(), 30)
            assert raised.value.errno == LOAD_IN_PROGRESS
            assert proxy.kafka_requests()[INIT_PRODUCER_ID] == 3
            assert producer.producer_id == -1
            with pytest.raises(TransactionStateError, match="connect"):
                producer.begin_transaction()
            # The coordinator has loaded: connect again, and go on.
            proxy.answer_error(INIT_PRODUCER_ID, LOAD_IN_PROGRESS, every=0)
            await producer.connect()
            assert producer.producer_id >= 0
            async with producer.transaction():
                producer.produce(topic, b"first")
        finally:
            await producer.close()

    run(main())
    assert control_batches(bootstrap, topic, 1)["commit"] == 1


def test_not_coordinator_for_ever_on_txn_offset_commit_dooms_the_transaction(
        proxied: Any) -> None:
    broker, proxy = proxied
    bootstrap = proxy.address
    topic = create_topic(broker.bootstrap, 1, prefix="txn-forever")
    group = unique("g")

    async def main() -> None:
        async with Producer(bootstrap, transactional_id=unique("tid"), retries=2,
                            retry_backoff=0.05) as producer:
            producer.begin_transaction()
            await producer.produce(topic, b"aborted")
            proxy.answer_error(TXN_OFFSET_COMMIT, NOT_COORDINATOR, times=None)
            with pytest.raises(NotCoordinatorForConsumerError):
                await producer.send_offsets_to_transaction({(topic, 0): 1},
                                                           GroupMetadata(group))
            assert proxy.kafka_requests()[TXN_OFFSET_COMMIT] == 3
            with pytest.raises(TransactionAbortedError):
                await producer.commit_transaction()
            assert not producer.in_transaction

    run(main())
    markers = control_batches(bootstrap, topic, 1)
    assert (markers["commit"], markers["abort"]) == (0, 1), markers
    assert committed_offset(bootstrap, group, topic) < 0  # no offset committed
    read_committed_is(broker, topic, [])
