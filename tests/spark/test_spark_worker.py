"""kiel.spark's task read path against the embedded 0.8.2 cluster (over TCP,
real ZooKeeper), without a Spark session: the client a worker keeps across
tasks (kiel.spark.worker), its bounds, and the faults a kept client meets
(the broker closing its connections between tasks, a leader that moved,
errors and cut answers inside a fetch), injected with the embedded broker's
fault hooks; and the fetch sizes a range asks for.
"""
import asyncio

import pytest

from kiel.exc import ConfigError, MessageTooLargeError
from kiel.producer import Producer
from kiel.spark import kafka, worker
from kiel.spark.kafka import Range, _fetch_size, _grow, read_range
from kiel.spark.options import SourceOptions
from kiel.structs import TopicPartition
from tests.support.spark import produce

pytestmark = [pytest.mark.zookeeper]

NOT_LEADER_FOR_PARTITION = 6
OFFSET_OUT_OF_RANGE = 1


def options(cluster, topic, **more):
    return SourceOptions.parse({"kafka.bootstrap.servers": cluster.bootstrap,
                                "subscribe": topic, "fetchMaxWaitMs": "100", **more},
                               streaming=False)


def offsets_read(opts, rng):
    return [o for batch in read_range(opts, rng) for o in batch.column("offset").to_pylist()]


def by_partition(produced):
    out = {}
    for partition, offset, *_ in produced:
        out.setdefault(partition, []).append(offset)
    return {p: sorted(o) for p, o in out.items()}


def test_a_worker_keeps_one_client_across_reads_and_planning(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=2)
    expected = by_partition(produce(kafka_cluster, topic, 200))
    opts = options(kafka_cluster, topic)
    clients = worker.worker_clients()
    made = clients.made
    _tps, _earliest, latest = kafka.discover_with_edges(opts)
    for p in (0, 1):
        assert offsets_read(opts, Range(topic, p, 0, latest[(topic, p)])) == expected[p]
    assert offsets_read(opts, Range(topic, 0, 3, 7)) == [3, 4, 5, 6]
    assert clients.made - made <= 1  # one client (none if an earlier test left one kept)
    kept = clients.clients[opts.client_key()].client
    assert not kept.closed and kept.cluster.open_connections() >= 1
    # Another task and another planning call open no connection.
    opened = kept.cluster.metrics().connections
    requests = sum(s.count for s in kept.cluster.metrics().requests.values())
    assert offsets_read(opts, Range(topic, 1, 0, latest[(topic, 1)])) == expected[1]
    kafka.discover_with_edges(opts)
    assert kept.cluster.metrics().connections == opened
    assert sum(s.count for s in kept.cluster.metrics().requests.values()) > requests


def test_a_kept_client_outlives_connections_the_broker_closed(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    expected = by_partition(produce(kafka_cluster, topic, 50))[0]
    opts = options(kafka_cluster, topic)
    assert offsets_read(opts, Range(topic, 0, 0, 50)) == expected
    made = worker.worker_clients().made
    assert kafka_cluster.close_connections() >= 1  # between two tasks of the worker
    assert offsets_read(opts, Range(topic, 0, 0, 50)) == expected
    assert worker.worker_clients().made == made  # reconnected, not replaced


def test_a_leader_that_moved_between_reads(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    expected = by_partition(produce(kafka_cluster, topic, 40))[0]
    opts = options(kafka_cluster, topic)
    assert offsets_read(opts, Range(topic, 0, 0, 40)) == expected
    leader = kafka_cluster.leader(topic, 0)
    other = next(b for b in (1, 2, 3) if b != leader)
    kafka_cluster.move_leader(topic, 0, other)
    kept = worker.worker_clients().clients[opts.client_key()].client
    assert kept.cluster.leader(topic, 0) == leader
    # The kept metadata names the old leader: NotLeaderForPartition, a refresh, a retry.
    assert offsets_read(opts, Range(topic, 0, 0, 40)) == expected
    assert kept.cluster.leader(topic, 0) == other and not kept.closed


def test_the_next_fetch_goes_out_before_spark_takes_the_rows(kafka_cluster, topic_factory):
    # While Spark works on an answer's rows, the next fetch is in flight (the
    # broker serves it meanwhile); a read closed early (Spark's limit) cancels
    # it, and the kept client reads on, its connection past the stray answer.
    topic = topic_factory(partitions=1)
    expected = by_partition(produce(kafka_cluster, topic, 400))[0]
    opts = options(kafka_cluster, topic, fetchMaxBytes="2048")  # many fetches
    clients = worker.worker_clients()
    rows = read_range(opts, Range(topic, 0, 0, 400))
    # Answers held 2 s: the fetch sent ahead cannot be answered while we look.
    kafka_cluster.set_latency(2.0, "Fetch")
    first = next(rows).column("offset").to_pylist()
    assert first[0] == 0 and first[-1] < 399
    kept = clients.clients[opts.client_key()].client
    made = clients.made
    assert sum(c.in_flight for c in kept.cluster._connections.values()) == 1
    kafka_cluster.set_latency(0, "Fetch")
    rows.close()
    assert not [t for t in asyncio.all_tasks(clients.loop) if not t.done()
                and "fetch_partition" in repr(t.get_coro())]
    assert offsets_read(opts, Range(topic, 0, 0, 400)) == expected
    assert offsets_read(opts, Range(topic, 0, 100, 400)) == expected[100:]
    assert clients.made == made and not kept.closed


@pytest.mark.parametrize("fault", ["not-leader", "cut"])
def test_faults_inside_a_fetch_are_retried(kafka_cluster, topic_factory, fault):
    topic = topic_factory(partitions=1)
    expected = by_partition(produce(kafka_cluster, topic, 30))[0]
    opts = options(kafka_cluster, topic)
    if fault == "not-leader":
        kafka_cluster.inject_error("Fetch", NOT_LEADER_FOR_PARTITION, count=2)
    else:
        kafka_cluster.drop_responses("Fetch", count=2)  # half an answer, then a closed socket
    assert offsets_read(opts, Range(topic, 0, 0, 30)) == expected


def test_a_stopped_stream_closes_the_client_its_planning_kept(kafka_cluster, topic_factory):
    from kiel.spark.datasource import KielStreamReader

    topic = topic_factory(partitions=1)
    opts = SourceOptions.parse({"kafka.bootstrap.servers": kafka_cluster.bootstrap,
                                "subscribe": topic, "startingOffsets": "earliest"},
                               streaming=True)
    reader = KielStreamReader(opts)
    assert reader.initialOffset() == {topic: {"0": 0}}
    kept = worker.worker_clients().clients[opts.client_key()].client
    reader.stop()
    assert kept.closed and opts.client_key() not in worker.worker_clients().clients


def test_a_call_that_fails_closes_its_client(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    opts = SourceOptions.parse({"kafka.bootstrap.servers": kafka_cluster.bootstrap,
                                "assign": f'{{"{topic}": [5]}}'}, streaming=False)
    kafka.discover(options(kafka_cluster, topic))  # keeps a client for these settings
    clients = worker.worker_clients()
    kept = clients.clients[opts.client_key()].client
    with pytest.raises(ConfigError, match="names partitions"):
        kafka.discover(opts)
    assert kept.closed and opts.client_key() not in clients.clients


def test_kept_clients_are_bounded_in_number_and_idle_time(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    clients = worker.WorkerClients(max_clients=2)
    try:
        made = []
        for i in range(3):
            opts = options(kafka_cluster, topic, **{"kafka.client.id": f"bounded-{i}"})
            client, kept = clients.client(opts.client_key(), lambda o=opts: kafka._client(o),
                                          opts.connections_max_idle)
            assert not kept
            made.append(client)
        assert len(clients.clients) == 2 and made[0].closed  # the least recently used went
        again, kept = clients.client(opts.client_key(), lambda: kafka._client(opts), 540.0)
        assert kept and again is made[2]
        # Unused longer than kafka.connections.max.idle.ms: closed and replaced.
        idle = options(kafka_cluster, topic, **{"kafka.connections.max.idle.ms": "1"})
        first, _ = clients.client(idle.client_key(), lambda: kafka._client(idle),
                                  idle.connections_max_idle)
        clients.run(asyncio.sleep(0.01))
        second, kept = clients.client(idle.client_key(), lambda: kafka._client(idle),
                                      idle.connections_max_idle)
        assert not kept and first.closed and second is not first
    finally:
        clients.close()
    assert all(c.closed for c in made) and clients.loop.is_closed()


def test_fetches_ask_for_what_remains_of_the_range():
    opts = SourceOptions.parse({"brokers": "h", "subscribe": "t"}, streaming=False)
    kafka._BYTES_PER_RECORD.pop("sized", None)
    assert _fetch_size(opts, "sized", 10, 0) == 16 * 1024  # the floor
    assert _fetch_size(opts, "sized", 100_000, 0) == opts.fetch_max_bytes  # the cap
    kafka._BYTES_PER_RECORD["sized"] = 130
    assert _fetch_size(opts, "sized", 1000, 0) == 1000 * 130 * 11 // 10 + 1024
    assert _fetch_size(opts, "sized", 10, 300_000) == 300_000  # a large message seen
    tp = TopicPartition("sized", 0)
    assert _grow(opts, tp, 7, 16 * 1024, 50_000) == 50_000
    assert _grow(opts, tp, 7, 16 * 1024, 0) == 32 * 1024
    with pytest.raises(MessageTooLargeError, match="maxFetchSize"):
        _grow(opts, tp, 7, opts.max_fetch_size, 0)


def test_a_message_larger_than_a_fetch(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def write():
        async with Producer(kafka_cluster.bootstrap, max_request_size=2 * 1024 * 1024) as p:
            for value in (b"s" * 10, b"L" * 200_000, b"t" * 10):
                await p.produce(topic, value, partition=0)

    asyncio.run(write())
    opts = options(kafka_cluster, topic, fetchMaxBytes="20000")
    got = [v for batch in read_range(opts, Range(topic, 0, 0, 3))
           for v in batch.column("value").to_pylist()]
    assert [len(v) for v in got] == [10, 200_000, 10]
    small = options(kafka_cluster, topic, fetchMaxBytes="20000", maxFetchSize="100000")
    with pytest.raises(MessageTooLargeError, match="does not fit maxFetchSize=100000"):
        list(read_range(small, Range(topic, 0, 1, 3)))


@pytest.mark.parametrize("code", [NOT_LEADER_FOR_PARTITION, OFFSET_OUT_OF_RANGE])
def test_the_planners_end_probe_survives_fetch_errors(kafka_cluster, topic_factory, code):
    # The planner asks each leader's Fetch where the log ends
    # (kiel.consumer.watermarks): a NotLeader answer is retried after a metadata
    # refresh; an OffsetOutOfRange answer (the log moved under the probe)
    # keeps the ListOffsets end. Either way the ends are the logs' ends.
    topic = topic_factory(partitions=2)
    produced = by_partition(produce(kafka_cluster, topic, 60))
    opts = options(kafka_cluster, topic)
    kafka_cluster.inject_error("Fetch", code, count=1)
    _tps, _earliest, latest = kafka.discover_with_edges(opts)
    assert latest == {(topic, p): 1 + max(offsets) for p, offsets in produced.items()}
