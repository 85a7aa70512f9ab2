"""metrics(): the clients' counters against the embedded 0.8.2 cluster over TCP,
and the Prometheus exporter exposing the same numbers."""

import dataclasses
import json
import sys
from typing import Any, Dict, List, Tuple

import pytest

from kiel import GroupedConsumer, Producer
from kiel.consumer import BEGINNING, SingleConsumer
from kiel.exc import MissingDependencyError
from kiel.metrics import (
    LATENCY_BUCKETS,
    METRICS,
    ConsumerMetrics,
    GroupedConsumerMetrics,
    LatencySummary,
    ProducerMetrics,
    as_dict,
    samples,
)
from kiel.protocol.messages import encode_message_set
from kiel.structs import GroupMetadata, TopicPartition
from tests.conftest import run, unique
from tests.support.single_consumer import consume_n, produce_raw, values

pytestmark = pytest.mark.zookeeper

NOT_LEADER = 6  # NotLeaderForPartition: retriable for the producer and the fetcher


def _values(n: int, prefix: str = "v") -> List[bytes]:
    return [f"{prefix}-{i:05d}".encode() for i in range(n)]


def _wire_bytes(vals: List[bytes]) -> int:
    """Bytes of the message sets that carry ``vals`` uncompressed (magic 0, no keys)."""
    return len(encode_message_set([(None, v) for v in vals]))


# --------------------------------------------------------------------------
# pure parts


def test_latency_summary_counts_sums_and_cumulates_buckets():
    summary = LatencySummary()
    for seconds in (0.0005, 0.003, 0.003, 0.2, 100.0):
        summary.observe(seconds)
    latency = summary.snapshot()
    assert latency.count == 5
    assert latency.sum == pytest.approx(100.2065)
    assert latency.max == 100.0
    bounds = dict(latency.buckets)
    assert list(bounds) == list(LATENCY_BUCKETS) + [float("inf")]
    assert bounds[0.001] == 1 and bounds[0.0025] == 1 and bounds[0.005] == 3
    assert bounds[0.25] == 4 and bounds[30.0] == 4 and bounds[float("inf")] == 5


def test_every_sample_is_a_named_metric_and_as_dict_is_json():
    from kiel.coordinator.broker_group import BrokerGroupMetrics
    from kiel.zookeeper.group_coordinator import ZooKeeperGroupMetrics

    snapshot = GroupedConsumerMetrics(
        requests={"Fetch": LatencySummary().snapshot()}, request_errors={("Fetch", "X"): 1},
        connections=1, records_in=2, bytes_in=3, fetch_errors={"E": 1},
        lag={TopicPartition("t", 0): 4, TopicPartition("t", 1): None},
        decode_seconds=0.5, decoder_yields=1, rebalances=1, rebalance_seconds=0.1,
        rebalance_seconds_last=0.1, rebalance_seconds_max=0.1, zookeeper_state="CONNECTED",
        owned_partitions=2, commits=3, seconds_since_fetch=0.5,
        outages={"NoBrokersError": 1},
        membership=ZooKeeperGroupMetrics(coordinator="zookeeper", state="CONNECTED",
                                         zookeeper_state="CONNECTED"),
    )
    names = set()
    for sample in samples(snapshot):
        assert len(sample.labels) == len(METRICS[sample.name].labels), sample
        names.add(sample.name)
    # A broker group's member reports its generation, leadership and last
    # heartbeat, and no ZooKeeper state.
    broker_names = set()
    broker = dataclasses.replace(snapshot, coordinator="brokers", group_state="STABLE",
                                 zookeeper_state="NOT_USED", member_id="m-1", generation=4,
                                 leader=True, last_heartbeat=1.7e9,
                                 membership=BrokerGroupMetrics(
                                     coordinator="brokers", state="STABLE", generation=4,
                                     leader=True, heartbeat_at=1.7e9))
    for sample in samples(broker):
        assert len(sample.labels) == len(METRICS[sample.name].labels), sample
        broker_names.add(sample.name)
    assert "kiel_group_zookeeper_connected" not in broker_names
    assert "kiel_group_generation" not in names
    # Every consumer and group metric shows up (the producer's do not apply).
    assert names | broker_names == {n for n in METRICS if not n.startswith("kiel_producer_")}
    assert dict((s.name, s.value) for s in samples(broker))["kiel_group_generation"] == 4
    data = json.loads(json.dumps(as_dict(snapshot)))
    assert data["kiel_consumer_lag"] == [{"labels": {"topic": "t", "partition": "0"}, "value": 4}]
    assert data["kiel_request_seconds"][0]["value"]["buckets"][-1] == ["+Inf", 0]


def test_the_exporter_names_the_extra_when_prometheus_client_is_missing(monkeypatch):
    from kiel.metrics_prometheus import KielCollector

    monkeypatch.setitem(sys.modules, "prometheus_client.core", None)
    with pytest.raises(MissingDependencyError, match=r"pip install kiel\[prometheus\]"):
        KielCollector({})


# --------------------------------------------------------------------------
# over TCP


def test_counts_bytes_and_lag_after_producing_and_consuming(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    sent = _values(300)

    async def main() -> Tuple[ProducerMetrics, ConsumerMetrics, ConsumerMetrics, int]:
        async with Producer(kafka_cluster.bootstrap, linger=0.01) as producer:
            for i, value in enumerate(sent):
                producer.produce(topic, value, partition=i % 3)
            report = await producer.flush()
            assert report.delivered == 300 and report.failed == 0
            produced = producer.metrics()
        async with SingleConsumer(kafka_cluster.bootstrap, max_wait_time=0.2) as consumer:
            got = await consume_n(consumer, topic, 300, start=BEGINNING)
            assert len(got) == 300
            drained = consumer.metrics()
            # 20 more in one request (one append): the next answer brings them all.
            end = consumer.position(topic, 0) + 20
            produce_raw(kafka_cluster, topic, 0, values(20, "late"))
            for _ in range(200):
                if await consumer.consume(topic, max_records=1):
                    break
            assert consumer.highwater(topic, 0) == end
            behind = consumer.metrics()
            position = consumer.position(topic, 0)
        return produced, drained, behind, end - position

    produced, drained, behind, expected_lag = run(main())

    assert produced.records_out == 300
    assert produced.bytes_out == _wire_bytes(sent)  # uncompressed: exact
    assert 3 <= produced.batches_out <= 300
    assert produced.records_failed == 0 and produced.errors == {}
    assert produced.pending_records == 0 and produced.pending_bytes == 0
    assert produced.requests["Produce"].count >= 3
    assert produced.requests["Metadata"].count >= 1
    assert produced.request_errors == {}

    assert drained.records_in == 300
    assert drained.bytes_in == _wire_bytes(sent)
    assert drained.lag == {TopicPartition(topic, p): 0 for p in range(3)}
    assert drained.fetch_errors == {}
    assert drained.decode_seconds > 0
    fetches = drained.requests["Fetch"]
    assert fetches.count >= 3 and fetches.buckets[-1][1] == fetches.count
    assert 0 < fetches.max and fetches.sum <= fetches.count * fetches.max

    assert expected_lag == 19
    assert behind.lag[TopicPartition(topic, 0)] == 19
    assert behind.records_in == 301


def test_injected_errors_show_up_by_type(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main() -> Tuple[ProducerMetrics, ConsumerMetrics]:
        async with Producer(kafka_cluster.bootstrap, linger=0) as producer:
            await producer.produce(topic, b"warm-up")
            kafka_cluster.inject_error("Produce", NOT_LEADER, count=1)
            await producer.produce(topic, b"retried")
            produced = producer.metrics()
        async with SingleConsumer(kafka_cluster.bootstrap, max_wait_time=0.2,
                                  retry_backoff=0.01) as consumer:
            got: List[Any] = []

            async def until(done: Any) -> None:
                for _ in range(200):
                    got.extend(await consumer.consume(topic, start=BEGINNING))
                    if done():
                        return
                raise AssertionError("not within 200 rounds")

            # The consumer's first Fetch is answered with the error.
            kafka_cluster.inject_error("Fetch", NOT_LEADER, count=1)
            await until(lambda: len(got) == 2)
            assert [r.value for r in got] == [b"warm-up", b"retried"]
            assert consumer.metrics().request_errors == {}
            kafka_cluster.drop_responses("Fetch", count=1)
            await until(lambda: bool(consumer.metrics().request_errors))
            consumed = consumer.metrics()
        return produced, consumed

    produced, consumed = run(main())
    assert produced.errors == {"NotLeaderForPartitionError": 1}
    assert produced.records_out == 2 and produced.records_failed == 0
    assert consumed.fetch_errors["NotLeaderForPartitionError"] == 1
    assert consumed.request_errors[("Fetch", "ConnectionClosedError")] == 1
    # The cut closes the connection: a request that shared it (a metadata
    # refresh in flight) fails with it, and is counted as what it was.
    assert {error for _api, error in consumed.request_errors} == {"ConnectionClosedError"}
    assert consumed.records_in == 2


def test_grouped_consumer_reports_rebalances_zookeeper_and_ownership(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=4)

    group = unique("metrics")

    async def main() -> Tuple[Any, GroupedConsumerMetrics]:
        consumer = GroupedConsumer(kafka_cluster.bootstrap, group,
                                   zk_hosts=kafka_cluster.zookeeper, topics=[topic],
                                   max_wait_time=0.2)
        before = consumer.metrics()
        async with consumer:
            await consumer.consume()
            # The broker knows no ZooKeeper generation: the group id alone.
            assert consumer.group_metadata() == GroupMetadata(group, -1, "", None)
            return before, consumer.metrics()

    before, after = run(main())
    assert before.zookeeper_state == "NOT_STARTED" and before.rebalances == 0
    assert after.zookeeper_state == "CONNECTED"
    assert after.owned_partitions == 4
    assert after.rebalances >= 1
    assert 0 < after.rebalance_seconds_max <= after.rebalance_seconds
    assert set(after.lag) == {TopicPartition(topic, p) for p in range(4)}


def test_prometheus_collector_exposes_the_same_numbers(kafka_cluster, topic_factory):
    # The test extra installs prometheus_client: missing, this fails, never skips.
    import prometheus_client
    from prometheus_client.parser import text_string_to_metric_families

    from kiel.metrics_prometheus import export

    topic = topic_factory(partitions=2)

    async def main() -> Tuple[str, ProducerMetrics, ConsumerMetrics]:
        async with Producer(kafka_cluster.bootstrap, linger=0.01) as producer, \
                SingleConsumer(kafka_cluster.bootstrap, max_wait_time=0.2) as consumer:
            for value in _values(50):
                producer.produce(topic, value)
            await producer.flush()
            await consume_n(consumer, topic, 50, start=BEGINNING)
            registry = prometheus_client.CollectorRegistry()
            export(registry, producer=producer, consumer=consumer)
            text = prometheus_client.generate_latest(registry).decode()
            return text, producer.metrics(), consumer.metrics()

    text, produced, consumed = run(main())
    found: Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value

    def value(name: str, client: str, **labels: str) -> float:
        # in no group: the group label is empty
        return found[(name, tuple(sorted(dict(labels, client=client, group="").items())))]

    assert value("kiel_producer_records_total", "producer") == produced.records_out == 50
    assert value("kiel_producer_bytes_total", "producer") == produced.bytes_out
    assert value("kiel_consumer_records_total", "consumer") == consumed.records_in == 50
    assert value("kiel_consumer_bytes_total", "consumer") == consumed.bytes_in
    for p in range(2):
        assert value("kiel_consumer_lag", "consumer", topic=topic, partition=str(p)) == 0
    produce = produced.requests["Produce"]
    api = {"api": "Produce"}
    assert value("kiel_request_seconds_count", "producer", **api) == produce.count
    assert value("kiel_request_seconds_sum", "producer", **api) == pytest.approx(produce.sum)
    assert value("kiel_request_seconds_bucket", "producer", le="+Inf", **api) == produce.count


def test_prometheus_samples_carry_the_groups_name(kafka_cluster, topic_factory):
    """A grouped consumer's samples (its lag, its group state) carry its
    group as the ``group`` label; a producer's have an empty one."""
    import prometheus_client
    from prometheus_client.parser import text_string_to_metric_families

    from kiel.metrics_prometheus import export

    topic = topic_factory(partitions=2)
    group = unique("metrics")

    async def main() -> Tuple[str, GroupedConsumerMetrics]:
        async with Producer(kafka_cluster.bootstrap, linger=0.01) as producer:
            for value in _values(10):
                producer.produce(topic, value)
            await producer.flush()
            consumer = GroupedConsumer(kafka_cluster.bootstrap, group,
                                       zk_hosts=kafka_cluster.zookeeper,
                                       topics=[topic], max_wait_time=0.2)
            async with consumer:
                seen = 0
                while seen < 10:
                    seen += len(await consumer.consume())
                registry = prometheus_client.CollectorRegistry()
                export(registry, producer=producer, members=consumer)
                return prometheus_client.generate_latest(registry).decode(), consumer.metrics()

    text, snapshot = run(main())
    assert snapshot.group == group
    by_client: Dict[Tuple[str, str], set] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            by_client.setdefault((s.labels["client"], s.labels["group"]), set()).add(s.name)
    assert set(by_client) == {("producer", ""), ("members", group)}
    assert {"kiel_consumer_lag", "kiel_group_state", "kiel_request_seconds_count"} <= by_client[
        ("members", group)]
