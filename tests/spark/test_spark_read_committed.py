"""kiel.spark with ``kafka.isolation.level=read_committed`` (issue 31): a
batch read returns only committed transactions' records and is planned up
to the last stable offset.

Aborted-record filtering is judged on noida-db (it fills Fetch's aborted
transactions list; Tansu never does): confluent-kafka's transactional
producers write, two of them interleaved on one partition with one
aborting. The planned end (the LSO while a transaction is open) is judged
on noida-db and on Tansu. The SparkSession fixture is tests/spark/conftest.py's;
pyspark, noida-db and Tansu are hard requirements (never skipped).
"""
import time
from typing import Any, List

import pytest

from kiel.spark import kafka
from kiel.spark.options import SourceOptions
from tests.support.transactions import (
    batch,
    commit_abort_commit,
    committed_then_open,
    committed_values,
    confluent_txn,
    confluent_write,
    create_topic,
    interleaved,
    write_open,
)


def load(spark: Any, bootstrap: str, topic: str, **options: str) -> List[bytes]:  # noqa: F811
    reader = (spark.read.format("kiel").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    rows = reader.load().select("offset", "value").collect()
    return [bytes(r.value) for r in sorted(rows, key=lambda r: r.offset)]


COMMITTED = {"kafka.isolation.level": "read_committed"}


def test_batch_read_committed_skips_aborted_transactions(spark, noida_broker) -> None:  # noqa: F811
    bootstrap = noida_broker.bootstrap
    mixed = create_topic(bootstrap, prefix="spark-rc")
    want = interleaved(bootstrap, mixed)  # p commits 20, q aborts 20, interleaved
    assert load(spark, bootstrap, mixed, **COMMITTED) == want
    assert len(load(spark, bootstrap, mixed)) == 40  # read_uncommitted: all
    plain = create_topic(bootstrap, prefix="spark-rc")
    commit_abort_commit(bootstrap, plain)
    assert load(spark, bootstrap, plain, **COMMITTED) == committed_values()
    assert len(load(spark, bootstrap, plain)) == 300


def _open_transaction_case(spark: Any, bootstrap: str) -> None:  # noqa: F811
    topic, writer = committed_then_open(bootstrap, "spark-lso", 10, 5)  # 0-9, marker 10
    try:
        opts = SourceOptions.parse({"brokers": bootstrap, "subscribe": topic,
                                    **COMMITTED}, streaming=False)
        _tps, _earliest, latest = kafka.discover_with_edges(opts)
        assert latest == {(topic, 0): 11}  # the LSO: the open transaction's first offset
        assert load(spark, bootstrap, topic, **COMMITTED) == batch("a", 0, 10)
    finally:
        writer.abort_transaction(30)


def test_batch_read_committed_ends_at_the_lso_on_noida(spark, noida_broker) -> None:  # noqa: F811
    _open_transaction_case(spark, noida_broker.bootstrap)


def test_batch_read_committed_ends_at_the_lso_on_tansu(spark, tansu_broker) -> None:  # noqa: F811
    _open_transaction_case(spark, tansu_broker.bootstrap)


def _a_time_before_an_open_transaction(spark: Any, bootstrap: str) -> None:  # noqa: F811
    # A starting time whose first record is in a transaction still open
    # (between the last stable offset and the high watermark): Kafka's
    # broker answers a read_committed ListOffsets by time with no offset
    # past the LSO, so Spark's source fails (or, with the "latest" strategy,
    # starts at the LSO) rather than plan a start after its end.
    topic = create_topic(bootstrap, prefix="spark-lso-time")
    writer = confluent_txn(bootstrap)
    confluent_write(writer, topic, batch("a", 0, 10), commit=True)  # 0-9, marker 10
    time.sleep(0.05)
    after = str(int(time.time() * 1000))
    time.sleep(0.05)
    write_open(writer, topic, batch("open", 0, 3))  # 11-13
    time.sleep(0.05)
    inside = str(int(time.time() * 1000))
    time.sleep(0.05)
    for value in batch("open", 3, 2):  # 14-15
        writer.produce(topic, value, partition=0)
    writer.flush(30)
    try:
        assert load(spark, bootstrap, topic, startingTimestamp=after) == batch("open", 0, 5)
        assert load(spark, bootstrap, topic, startingTimestamp=inside) == batch("open", 3, 2)
        # The broker may answer 14 (past the LSO): the "latest" strategy
        # still starts at the LSO, never after the planned end.
        assert load(spark, bootstrap, topic, startingTimestamp=inside,
                    startingOffsetsByTimestampStrategy="latest", **COMMITTED) == []
        refused = "no committed record of .* at or after the time .its last stable offset is 11"
        with pytest.raises(Exception, match=refused):
            load(spark, bootstrap, topic, startingTimestamp=after, **COMMITTED)
        assert load(spark, bootstrap, topic, startingTimestamp=after,
                    startingOffsetsByTimestampStrategy="latest", **COMMITTED) == []
        # A time before the committed records still starts at the first of them.
        assert load(spark, bootstrap, topic, startingTimestamp="0",
                    **COMMITTED) == batch("a", 0, 10)
    finally:
        writer.abort_transaction(30)


def test_a_starting_time_inside_an_open_transaction_on_noida(spark, noida_broker) -> None:  # noqa: F811
    _a_time_before_an_open_transaction(spark, noida_broker.bootstrap)


def test_a_starting_time_inside_an_open_transaction_on_tansu(spark, tansu_broker) -> None:  # noqa: F811
    _a_time_before_an_open_transaction(spark, tansu_broker.bootstrap)
