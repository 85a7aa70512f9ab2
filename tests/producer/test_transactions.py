"""The transactional producer on Tansu and noida-db, judged by confluent-kafka.

What each broker judges (../shared/design/EXACTLY_ONCE.md): noida-db fills
Fetch's aborted-transactions list, so a read_committed consumer there sees
exactly the committed records; Tansu never fills it, so on Tansu only the
markers (a COMMIT or ABORT control batch per transaction) and what the
coordinator does (fencing, TxnOffsetCommit) are claimed. Faults inside a
request are judged on Tansu behind the Kafka-frame-aware fault proxy.
"""
import asyncio
import time
from typing import Any, Dict, List

import confluent_kafka
import confluent_kafka.admin
import pytest

from kiel import GroupedConsumer, Producer
from kiel.exc import (
    ProducerFencedError,
    TransactionAbortedError,
    TransactionStateError,
    TransactionTimeoutError,
)
from kiel.structs import GroupMetadata
from tests.conftest import run, unique
from tests.support.idempotence import confluent_read
from tests.support.transactions import control_batches

PARTITIONS = 3


def create_topic(bootstrap: str, partitions: int = PARTITIONS, prefix: str = "txn") -> str:
    name = unique(prefix)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([confluent_kafka.admin.NewTopic(name, partitions, 1)]
                                      ).values():
        future.result(30)
    return name



def values(prefix: str, count: int) -> List[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


async def write_commit_abort_commit(bootstrap: str, topic: str, txn_id: str) -> Producer:
    """kiel commits 100 records, aborts 100, commits 100 (each over every
    partition) and returns the closed producer."""
    producer = Producer(bootstrap, transactional_id=txn_id)
    await producer.connect()
    try:
        for name, commit in (("a", True), ("b", False), ("c", True)):
            producer.begin_transaction()
            futures = [producer.produce(topic, v) for v in values(name, 100)]
            if commit:
                await producer.commit_transaction()
                assert all(f.done() and not f.exception() for f in futures)
            else:
                await asyncio.gather(*futures)  # sent and written, then aborted
                await producer.abort_transaction()
    finally:
        await producer.close()
    return producer


# --------------------------------------------------------------------------
# commit, abort, commit


def test_noida_read_committed_sees_exactly_the_committed_200(noida_broker: Any) -> None:
    bootstrap = noida_broker.bootstrap
    topic = create_topic(bootstrap)
    producer = run(write_commit_abort_commit(bootstrap, topic, unique("tid")))
    assert producer._txn is not None
    assert (producer._txn.committed, producer._txn.aborted) == (2, 1)
    committed = confluent_read(bootstrap, topic, 200, isolation="read_committed",
                               partitions=PARTITIONS)
    assert sorted(committed) == sorted(values("a", 100) + values("c", 100))
    uncommitted = confluent_read(bootstrap, topic, 300, partitions=PARTITIONS)
    assert sorted(uncommitted) == sorted(values("a", 100) + values("b", 100) + values("c", 100))
    markers = control_batches(bootstrap, topic)
    # One marker per partition the transaction wrote to: 3 each.
    assert (markers["commit"], markers["abort"]) == (2 * PARTITIONS, PARTITIONS)


def test_tansu_writes_transactional_batches_and_markers(tansu_broker: Any) -> None:
    # Tansu never fills Fetch's aborted list: only the markers are claimed.
    bootstrap = tansu_broker.bootstrap
    topic = create_topic(bootstrap)
    producer = run(write_commit_abort_commit(bootstrap, topic, unique("tid")))
    assert producer._txn is not None
    assert (producer._txn.committed, producer._txn.aborted) == (2, 1)
    markers = control_batches(bootstrap, topic)
    assert (markers["commit"], markers["abort"]) == (2 * PARTITIONS, PARTITIONS)
    assert markers["transactional_batches"] >= 3 * PARTITIONS
    committed = confluent_read(bootstrap, topic, 300, partitions=PARTITIONS)
    assert len(committed) == 300


def test_async_with_commits_on_exit_and_aborts_on_an_exception(noida_broker: Any) -> None:
    bootstrap = noida_broker.bootstrap
    topic = create_topic(bootstrap, 1)

    async def main() -> None:
        async with Producer(bootstrap, transactional_id=unique("tid")) as producer:
            async with producer.transaction():
                assert producer.in_transaction
                producer.produce(topic, b"kept")
            assert not producer.in_transaction
            with pytest.raises(RuntimeError, match="boom"):
                async with producer.transaction():
                    await producer.produce(topic, b"dropped")
                    raise RuntimeError("boom")
            assert not producer.in_transaction
            txn = producer._txn
            assert txn is not None and (txn.committed, txn.aborted) == (1, 1)

    run(main())
    assert confluent_read(bootstrap, topic, 1, isolation="read_committed",
                          partitions=1) == [b"kept"]


# --------------------------------------------------------------------------
# bad input: typed errors at once, nothing sent


def test_bad_settings_are_config_errors() -> None:
    from kiel.exc import ConfigError

    for options in ({"transactional_id": ""}, {"transactional_id": b"x"},
                    {"transactional_id": "t", "idempotent": False},
                    {"transactional_id": "t", "required_acks": 1},
                    {"transactional_id": "t", "max_batches_in_flight": 6},
                    {"transactional_id": "t", "transaction_timeout": 0},
                    {"transactional_id": "t", "transaction_timeout": 0.0001},
                    {"transactional_id": "t", "transaction_timeout": 901},
                    {"transactional_id": "t", "transaction_timeout": "60"}):
        with pytest.raises(ConfigError):
            Producer("127.0.0.1:1", **options)
    producer = Producer("127.0.0.1:1", transactional_id="t", transaction_timeout=900)
    assert producer.transactional_id == "t" and producer.transaction_timeout == 900


def test_calls_out_of_order_are_refused_and_nothing_is_sent(tansu_broker: Any) -> None:
    bootstrap = tansu_broker.bootstrap
    topic = create_topic(bootstrap, 1)

    async def main() -> None:
        # Not transactional: every transactional call is refused.
        async with Producer(bootstrap) as plain:
            with pytest.raises(TransactionStateError, match="transactional_id"):
                plain.begin_transaction()
            for call in (plain.commit_transaction(), plain.abort_transaction(),
                         plain.send_offsets_to_transaction({(topic, 0): 1}, GroupMetadata("g"))):
                with pytest.raises(TransactionStateError):
                    await call
        producer = Producer(bootstrap, transactional_id=unique("tid"))
        with pytest.raises(TransactionStateError, match="connect"):
            producer.begin_transaction()
        await producer.connect()
        try:
            with pytest.raises(TransactionStateError, match="begin_transaction"):
                producer.produce(topic, b"x")
            with pytest.raises(TransactionStateError):
                producer.produce_many(topic, [b"x", b"y"])
            with pytest.raises(TransactionStateError):
                await producer.enqueue(topic, b"x")
            with pytest.raises(TransactionStateError, match="no transaction"):
                await producer.commit_transaction()
            with pytest.raises(TransactionStateError, match="no transaction"):
                await producer.abort_transaction()
            with pytest.raises(TransactionStateError, match="no transaction"):
                await producer.send_offsets_to_transaction({(topic, 0): 1}, GroupMetadata("g"))
            assert producer.pending_records == 0
            producer.begin_transaction()
            with pytest.raises(TransactionStateError, match="already open"):
                producer.begin_transaction()
            from kiel.exc import ConfigError

            with pytest.raises(ConfigError):
                await producer.send_offsets_to_transaction({(topic, -1): 1}, GroupMetadata("g"))
            with pytest.raises(ConfigError):
                await producer.send_offsets_to_transaction(
                    {(topic, 0): 1}, object())  # type: ignore[arg-type]
            await producer.commit_transaction()  # empty: nothing to end on the broker
        finally:
            await producer.close()
        metrics = producer.metrics()
        assert metrics.records_out == 0

    run(main())
    assert confluent_read(tansu_broker.bootstrap, topic, 0, idle=1.0,
                          partitions=1) == []


# --------------------------------------------------------------------------
# kiel's own bound, and close()


def test_a_transaction_open_past_its_timeout_is_aborted_and_commit_says_so(
        noida_broker: Any) -> None:
    bootstrap = noida_broker.bootstrap
    topic = create_topic(bootstrap, 1)

    async def main() -> None:
        async with Producer(bootstrap, transactional_id=unique("tid"),
                           transaction_timeout=0.5) as producer:
            producer.begin_transaction()
            await producer.produce(topic, b"late")
            await asyncio.sleep(1.5)  # past the bound: the producer aborts it
            txn = producer._txn
            assert txn is not None and txn.aborted == 1 and not producer.in_transaction
            with pytest.raises(TransactionStateError, match="transaction_timeout"):
                producer.produce(topic, b"after")
            with pytest.raises(TransactionTimeoutError):
                await producer.commit_transaction()
            # The producer goes on: the next transaction commits.
            producer.begin_transaction()
            producer.produce(topic, b"next")
            await producer.commit_transaction()
            assert (txn.committed, txn.aborted) == (1, 1)

    run(main())
    assert confluent_read(bootstrap, topic, 1, isolation="read_committed",
                          partitions=1) == [b"next"]
    assert control_batches(bootstrap, topic, 1) == {
        "commit": 1, "abort": 1, "transactional_batches": 2}


def test_close_aborts_an_open_transaction(noida_broker: Any) -> None:
    bootstrap = noida_broker.bootstrap
    topic = create_topic(bootstrap, 1)

    async def main() -> List[BaseException]:
        producer = Producer(bootstrap, transactional_id=unique("tid"), linger=30.0)
        await producer.connect()
        producer.begin_transaction()
        sent = producer.produce(topic, b"sent")
        await producer.flush()
        unsent = producer.produce(topic, b"unsent")  # lingers: never sent
        await producer.close()
        txn = producer._txn
        assert txn is not None and txn.aborted == 1
        assert sent.result().offset >= 0
        return [unsent.exception()]  # type: ignore[list-item]

    [error] = run(main())
    assert isinstance(error, TransactionAbortedError)
    assert confluent_read(bootstrap, topic, 0, isolation="read_committed", idle=1.0,
                          partitions=1) == []
    assert control_batches(bootstrap, topic, 1)["abort"] == 1


# --------------------------------------------------------------------------
# fencing


async def fenced_by(first: Producer, topic: str, take_over: Any) -> BaseException:
    """``first`` commits one transaction, ``take_over()`` initialises another
    producer with the same id, then ``first`` tries again: what it raises."""
    first.begin_transaction()
    first.produce(topic, b"before")
    await first.commit_transaction()
    await take_over()
    first.begin_transaction()
    record = first.produce(topic, b"fenced")
    with pytest.raises(ProducerFencedError) as raised:
        await first.commit_transaction()
    assert isinstance(record.exception(), ProducerFencedError)
    # Unusable from now on, said plainly.
    for call in (first.begin_transaction, lambda: first.produce(topic, b"x")):
        with pytest.raises(ProducerFencedError, match="cannot be used any more"):
            call()
    return raised.value


@pytest.mark.parametrize("broker", ["tansu", "noida"])
def test_a_second_kiel_producer_with_the_same_id_fences_the_first(
        broker: str, request: Any) -> None:
    bootstrap = request.getfixturevalue(f"{broker}_broker").bootstrap
    topic = create_topic(bootstrap, 1)
    txn_id = unique("tid")

    async def main() -> None:
        second = Producer(bootstrap, transactional_id=txn_id)
        async with Producer(bootstrap, transactional_id=txn_id) as first:
            await fenced_by(first, topic, second.connect)
        try:
            async with second.transaction():
                second.produce(topic, b"second")
        finally:
            await second.close()

    run(main())
    if broker == "noida":
        assert confluent_read(bootstrap, topic, 2, isolation="read_committed", partitions=1) == [
            b"before", b"second"]


@pytest.mark.parametrize("broker", ["tansu", "noida"])
def test_confluent_fences_kiel_and_kiel_fences_confluent(broker: str, request: Any) -> None:
    bootstrap = request.getfixturevalue(f"{broker}_broker").bootstrap
    topic = create_topic(bootstrap, 1)
    txn_id = unique("tid")
    outcome: Dict[str, Any] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        ck = confluent_kafka.Producer({"bootstrap.servers": bootstrap,
                                       "transactional.id": txn_id})

        async def confluent_init() -> None:
            await loop.run_in_executor(None, ck.init_transactions, 30)

        async with Producer(bootstrap, transactional_id=txn_id) as kiel_producer:
            outcome["kiel"] = await fenced_by(kiel_producer, topic, confluent_init)

        # Now confluent holds the id, with a transaction open: a kiel
        # producer initialising fences it.
        def confluent_open() -> None:
            ck.begin_transaction()
            ck.produce(topic, b"confluent")
            ck.flush(30)

        await loop.run_in_executor(None, confluent_open)
        async with Producer(bootstrap, transactional_id=txn_id) as again:
            try:
                await loop.run_in_executor(None, ck.commit_transaction, 30)
            except confluent_kafka.KafkaException as e:
                outcome["confluent"] = e.args[0]
            async with again.transaction():
                again.produce(topic, b"kiel-again")

    run(main())
    assert outcome["kiel"].errno in (90, 47)
    error = outcome["confluent"]
    if broker == "tansu":
        # Tansu closes the fenced producer's connection on its EndTxn
        # instead of answering: confluent's commit fails, timed out.
        assert error.code() == confluent_kafka.KafkaError._TIMED_OUT, error
        return
    assert error.code() in (confluent_kafka.KafkaError._FENCED,
                            confluent_kafka.KafkaError.PRODUCER_FENCED,
                            confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH), error


# --------------------------------------------------------------------------
# offsets with the transaction (KIP-447)


@pytest.mark.parametrize("broker", ["tansu", "noida"])
def test_offsets_sent_with_a_grouped_consumers_metadata_commit_with_it(
        broker: str, request: Any) -> None:
    bootstrap = request.getfixturevalue(f"{broker}_broker").bootstrap
    source = create_topic(bootstrap, 2, prefix="txn-in")
    sink = create_topic(bootstrap, 1, prefix="txn-out")
    group = unique("g")

    async def main() -> Dict[str, Any]:
        async with Producer(bootstrap) as plain:
            await asyncio.gather(*(plain.produce(source, b"in-%d" % i, partition=i % 2)
                                   for i in range(20)))
        consumer = GroupedConsumer(bootstrap, group, topics=[source], session_timeout=6.0,
                                   heartbeat_interval=1.0, max_wait_time=0.2,
                                   commit_interval=None, revoke_timeout=1.0)
        await consumer.connect()
        producer = Producer(bootstrap, transactional_id=unique("tid"))
        await producer.connect()
        try:
            got: List[Any] = []
            deadline = time.monotonic() + 60
            while len(got) < 20 and time.monotonic() < deadline:
                got.extend(await consumer.consume())
            assert len(got) == 20
            metadata = consumer.group_metadata()
            assert metadata.generation_id >= 0 and metadata.member_id
            # The first transaction aborts: its offsets do not count.
            producer.begin_transaction()
            producer.produce(sink, b"aborted")
            await producer.send_offsets_to_transaction({(source, 0): 3, (source, 1): 4},
                                                       metadata)
            await producer.abort_transaction()
            after_abort = [await consumer.committed(source, p) for p in (0, 1)]
            # The second commits them, with the records.
            async with producer.transaction():
                for record in got:
                    producer.produce(sink, record.value.upper())
                await producer.send_offsets_to_transaction(
                    {(source, 0): 10, (source, 1): 10}, consumer.group_metadata())
            after_commit = [await consumer.committed(source, p) for p in (0, 1)]
            # (A stale generation is not refused by either broker, which
            # is why no test here claims KIP-447's zombie check.)
        finally:
            await producer.close()
            await consumer.close()
        return {"abort": after_abort, "commit": after_commit}

    out = run(main(), timeout=180)
    assert out["abort"] == [None, None]
    assert out["commit"] == [10, 10]
    if broker == "noida":
        committed = confluent_read(bootstrap, sink, 20, isolation="read_committed", partitions=1)
        assert sorted(committed) == sorted(b"IN-%d" % i for i in range(20))


# --------------------------------------------------------------------------
# a connection lost inside a request (Tansu behind the Kafka-frame proxy)


@pytest.fixture
def framed_tansu(fault_proxy: Any) -> Any:
    """Tansu advertising a Kafka-frame-aware fault proxy (every connection
    goes through it). Yields ``(broker, proxy)``."""
    from kiel.testing.process import free_ports
    from kiel.testing.tansu import TansuBroker

    (port,) = free_ports(1)
    proxy = fault_proxy(("127.0.0.1", port), kafka=True)
    broker = TansuBroker(port=port, advertised_port=int(proxy.address.rsplit(":", 1)[1]))
    broker.start()
    yield broker, proxy
    broker.close()


@pytest.mark.parametrize("api_key, name", [(26, "EndTxn"), (24, "AddPartitionsToTxn")])
def test_an_answer_lost_mid_request_is_retried_and_the_transaction_ends_right(
        framed_tansu: Any, api_key: int, name: str) -> None:
    broker, proxy = framed_tansu
    bootstrap = proxy.address
    topic = create_topic(bootstrap, 1)

    async def main() -> Dict[str, Any]:
        async with Producer(bootstrap, transactional_id=unique("tid")) as producer:
            # First a committed transaction whose answer to the request is
            # lost once: the broker did it, the producer sends it again.
            proxy.cut_after_answer(api_key, every=1, times=1)
            producer.begin_transaction()
            first = [producer.produce(topic, b"one-%d" % i) for i in range(10)]
            await producer.commit_transaction()
            assert proxy.kafka_stats()["cut"] == 1
            # Then an aborted one, the answer lost again.
            proxy.cut_after_answer(api_key, every=1, times=1)
            producer.begin_transaction()
            await asyncio.gather(*(producer.produce(topic, b"two-%d" % i) for i in range(10)))
            await producer.abort_transaction()
            cuts = proxy.kafka_stats()["cut"]  # counted since the proxy started
            txn = producer._txn
            assert txn is not None
            return {"first": [f.result().offset for f in first], "cuts": cuts,
                    "ended": (txn.committed, txn.aborted)}

    out = run(main())
    assert out["cuts"] == 2, out
    assert out["ended"] == (1, 1)
    assert all(offset >= 0 for offset in out["first"])
    markers = control_batches(bootstrap, topic, 1)
    assert (markers["commit"], markers["abort"]) == (1, 1), markers
    values_read = confluent_read(bootstrap, topic, 20, idle=1.0,
                                 partitions=1)
    assert sorted(values_read) == sorted([b"one-%d" % i for i in range(10)]
                                         + [b"two-%d" % i for i in range(10)])


def test_an_abort_right_after_the_first_record_leaves_the_next_transaction_whole(
        noida_broker: Any) -> None:
    # The abort comes before the record went: it fails, typed, and the next
    # transaction is whole. (Whether an AddPartitionsToTxn is still out at
    # the abort depends on timing; here it is not: no ABORT marker.)
    bootstrap = noida_broker.bootstrap
    topic = create_topic(bootstrap, 1)

    async def main() -> List[Any]:
        outcomes = []
        async with Producer(bootstrap, transactional_id=unique("tid")) as producer:
            for _ in range(3):
                producer.begin_transaction()
                record = producer.produce(topic, b"aborted")
                await asyncio.sleep(0)  # the sender starts adding the partition
                await producer.abort_transaction()
                outcomes.append(type(record.exception()).__name__
                                if record.exception() else "written, then aborted")
                async with producer.transaction():
                    producer.produce(topic, b"kept")
        return outcomes

    outcomes = run(main())
    assert confluent_read(bootstrap, topic, 3, isolation="read_committed",
                          partitions=1) == [b"kept"] * 3
    markers = control_batches(bootstrap, topic, 1)
    print(outcomes, markers)
    assert markers["commit"] == 3
    assert outcomes == ["TransactionAbortedError"] * 3
