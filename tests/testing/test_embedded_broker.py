"""The embedded Kafka 0.8.2 broker, over real TCP with raw protocol requests.

Each test talks to the brokers through kiel's ClientFraming over a plain
socket (kiel.testing.broker.RawClient): no client library hides what the
broker answers. Most tests run a cluster without ZooKeeper (module fixture
below); the ZooKeeper layout has its own tests at the end.
"""
import json
import socket
import struct
import threading
import time

import pytest

from kiel.exc import ConfigError, ConnectionClosedError, HarnessError
from kiel.protocol import (
    EARLIEST,
    LATEST,
    GroupCoordinatorRequest,
    ListOffsetsPartitionData,
    ListOffsetsRequest,
    ListOffsetsTopicData,
    MetadataRequest,
    OffsetCommitPartitionData,
    OffsetCommitRequest,
    OffsetCommitTopicData,
    OffsetFetchRequest,
    OffsetFetchTopicData,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from kiel.protocol.messages import (
    CODEC_GZIP,
    CODEC_SNAPPY,
    decode_message_set,
    encode_message_set,
    iter_message_boundaries,
)
from kiel.testing.broker import EmbeddedCluster
from kiel.testing.broker.rawclient import RawClient
from kiel.testing.broker.state import assign_replicas, group_partition, java_string_hash
from tests.support.raw_requests import fetch_request, only, produce_request
from tests.support.waiting import wait_until

# -- helpers ---------------------------------------------------------------------------


def list_offsets_request(topic, partition, timestamp, max_num=10, replica_id=-1):
    return ListOffsetsRequest(replica_id, [
        ListOffsetsTopicData(topic, [ListOffsetsPartitionData(partition, timestamp, max_num)])])


def leader_client(cluster, topic, partition):
    return RawClient(cluster.address(cluster.leader(topic, partition)))


def follower_client(cluster, topic, partition):
    leader = cluster.leader(topic, partition)
    other = next(b for b in cluster.broker_ids if b != leader)
    return RawClient(cluster.address(other))


def produce(cluster, topic, partition, values, **kw):
    with leader_client(cluster, topic, partition) as client:
        return only(client.request(produce_request(topic, partition, values, **kw)))


def fetch_values(cluster, topic, partition, offset=0):
    with leader_client(cluster, topic, partition) as client:
        result = only(client.request(fetch_request(topic, partition, offset)))
    assert result.error_code == 0
    return [(r.offset, r.value) for r in decode_message_set(result.message_set,
                                                            min_offset=offset).records]


_counter = iter(range(10**6))


def new_topic(cluster, partitions=1, replication=None):
    name = f"t{next(_counter)}-{int(time.time() * 1000) % 100000}"
    cluster.create_topic(name, partitions, replication)
    return name


@pytest.fixture(scope="module")
def cluster():
    with EmbeddedCluster(brokers=3, partitions=3, segment_messages=None) as c:
        yield c


@pytest.fixture(autouse=True)
def healed(request):
    yield
    if "cluster" in request.fixturenames:
        c = request.getfixturevalue("cluster")
        c.heal()
        c.check()


# -- pure parts ---------------------------------------------------------------------------


def test_replica_assignment_spreads_leaders_like_kafka():
    assignment = assign_replicas([1, 2, 3], 6, 2, start_index=0)
    assert [r[0] for r in assignment.values()] == [1, 2, 3, 1, 2, 3]
    assert all(len(set(r)) == 2 for r in assignment.values())
    # The follower shift grows every n partitions (AdminUtils.assignReplicasToBrokers).
    assert assignment[0] == [1, 2] and assignment[3] == [1, 3]
    with pytest.raises(ConfigError):
        assign_replicas([1, 2], 1, 3)


def test_group_partition_matches_java_hash():
    # Values of Java's "...".hashCode().
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert 0 <= group_partition("my-group") < 50


# -- Metadata --------------------------------------------------------------------------------


def test_metadata_lists_brokers_and_all_topics(cluster):
    topic = new_topic(cluster, partitions=6)
    with RawClient(cluster.address(2)) as client:
        response = client.request(MetadataRequest([]))
    assert [(b.node_id, f"{b.host}:{b.port}") for b in response.brokers] == \
        [(i, cluster.address(i)) for i in (1, 2, 3)]
    meta = {t.topic: t for t in response.topics}[topic]
    assert meta.error_code == 0
    assert [p.partition_id for p in meta.partitions] == list(range(6))
    assert {p.leader for p in meta.partitions} == {1, 2, 3}
    for p in meta.partitions:
        assert p.error_code == 0 and p.leader == p.replicas[0] and sorted(p.isr) == [1, 2, 3]


def test_metadata_auto_creates_topic_answering_leader_not_available_first(cluster):
    name = f"auto-{time.time_ns()}"
    with RawClient(cluster.address(1)) as client:
        first = client.request(MetadataRequest([name]))
        assert [(t.topic, t.error_code, t.partitions) for t in first.topics] == [(name, 5, [])]
        second = client.request(MetadataRequest([name]))
    topic = second.topics[0]
    assert topic.error_code == 0 and len(topic.partitions) == 3  # num.partitions
    assert all(p.leader in (1, 2, 3) for p in topic.partitions)


def test_metadata_without_auto_create_and_invalid_names(kafka_cluster_factory):
    c = kafka_cluster_factory(brokers=1, zookeeper=False, auto_create_topics=False)
    with RawClient(c.address(1)) as client:
        response = client.request(MetadataRequest(["nope"]))
        assert [(t.topic, t.error_code) for t in response.topics] == [("nope", 3)]
        assert len(response.brokers) == 1
    c2 = kafka_cluster_factory(brokers=1, zookeeper=False)
    with RawClient(c2.address(1)) as client:
        response = client.request(MetadataRequest(["bad name!", "fine"]))
    # 0.8.2: the InvalidTopicException fails the whole request: code 17, no brokers.
    assert response.brokers == []
    assert [(t.topic, t.error_code) for t in response.topics] == [("bad name!", 17), ("fine", 17)]


# -- Produce ---------------------------------------------------------------------------------


def test_produce_assigns_offsets_for_each_ack_mode(cluster):
    topic = new_topic(cluster)
    with leader_client(cluster, topic, 0) as client:
        r1 = only(client.request(produce_request(topic, 0, [b"a", b"b", b"c"], acks=1)))
        r2 = only(client.request(produce_request(topic, 0, [b"d"], acks=-1)))
        # acks=0: no response at all; the next response belongs to the next request.
        assert client.request(produce_request(topic, 0, [b"e", b"f"], acks=0)) is None
        r3 = only(client.request(produce_request(topic, 0, [b"g"], acks=1)))
    assert (r1.error_code, r1.offset) == (0, 0)
    assert (r2.error_code, r2.offset) == (0, 3)
    assert (r3.error_code, r3.offset) == (0, 6)
    assert fetch_values(cluster, topic, 0) == list(enumerate([b"a", b"b", b"c", b"d", b"e",
                                                              b"f", b"g"]))


def test_produce_errors_unknown_topic_and_not_leader(cluster):
    topic = new_topic(cluster)
    with follower_client(cluster, topic, 0) as client:
        result = only(client.request(produce_request(topic, 0, [b"x"])))
        assert (result.error_code, result.offset) == (6, -1)
        result = only(client.request(produce_request(topic, 7, [b"x"])))
        assert (result.error_code, result.offset) == (3, -1)
        result = only(client.request(produce_request("no-such-topic", 0, [b"x"])))
        assert (result.error_code, result.offset) == (3, -1)
    assert cluster.offsets(topic, 0) == [0, 0]


def test_produce_bad_crc_is_invalid_message_and_acks0_error_closes(cluster):
    topic = new_topic(cluster)
    good = encode_message_set([(None, b"value")])
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # corrupt the value: the CRC no longer matches
    request = ProduceRequest(1, 1000, [ProduceTopicData(topic, [
        ProducePartitionData(0, bytes(bad))])])
    with leader_client(cluster, topic, 0) as client:
        result = only(client.request(request))
        assert (result.error_code, result.offset) == (2, -1)
        # The same error with acks=0: 0.8.2 closes the connection instead of answering.
        client.send(request._replace(required_acks=0))
        assert client.is_closed_by_peer()
    assert cluster.offsets(topic, 0) == [0, 0]


def test_produce_trims_partial_trailing_message(cluster):
    topic = new_topic(cluster)
    data = encode_message_set([(None, b"one"), (None, b"two")])
    request = ProduceRequest(1, 1000, [ProduceTopicData(topic, [
        ProducePartitionData(0, data[:-3])])])
    with leader_client(cluster, topic, 0) as client:
        assert only(client.request(request)).error_code == 0
    assert fetch_values(cluster, topic, 0) == [(0, b"one")]


def test_produce_message_size_too_large(kafka_cluster_factory):
    c = kafka_cluster_factory(brokers=1, zookeeper=False, message_max_bytes=1000)
    c.create_topic("big")
    with RawClient(c.address(1)) as client:
        # 12 (offset, size) + 14 (header) + value: the entry of a 974-byte value is 1000.
        ok = only(client.request(produce_request("big", 0, [b"x" * 974])))
        too_big = only(client.request(produce_request("big", 0, [b"x" * 975])))
    assert (ok.error_code, ok.offset) == (0, 0)
    assert (too_big.error_code, too_big.offset) == (10, -1)


def test_default_message_max_bytes_is_kafkas(cluster):
    topic = new_topic(cluster)
    # 1000012 bytes per entry: a value of 1000012 - 26 fits, one more does not.
    assert produce(cluster, topic, 0, [b"v" * (1000012 - 26)]).error_code == 0
    assert produce(cluster, topic, 0, [b"v" * (1000012 - 25)]).error_code == 10


@pytest.mark.parametrize("codec", [CODEC_GZIP, CODEC_SNAPPY])
def test_compressed_produce_gets_inner_offsets(cluster, codec):
    topic = new_topic(cluster)
    produce(cluster, topic, 0, [b"p0", b"p1"])
    result = produce(cluster, topic, 0, [b"c0", b"c1", b"c2"], codec=codec)
    assert (result.error_code, result.offset) == (0, 2)
    assert cluster.offsets(topic, 0) == [0, 5]
    with leader_client(cluster, topic, 0) as client:
        data = only(client.request(fetch_request(topic, 0, 0))).message_set
    # The stored wrapper carries the offset of its last inner message, as 0.8.2 writes it.
    assert [b.offset for b in iter_message_boundaries(data)] == [0, 1, 4]
    assert [(r.offset, r.value) for r in decode_message_set(data).records] == \
        [(0, b"p0"), (1, b"p1"), (2, b"c0"), (3, b"c1"), (4, b"c2")]
    # A fetch inside the wrapper returns the whole wrapper.
    with leader_client(cluster, topic, 0) as client:
        mid = only(client.request(fetch_request(topic, 0, 3))).message_set
    assert [b.offset for b in iter_message_boundaries(mid)] == [4]
    assert [r.offset for r in decode_message_set(mid, min_offset=3).records] == [3, 4]


def test_acks_beyond_isr_time_out(kafka_cluster_factory):
    c = kafka_cluster_factory(brokers=2, zookeeper=False, replication=2)
    c.create_topic("acks")
    with leader_client(c, "acks", 0) as client:
        assert only(client.request(produce_request("acks", 0, [b"a"], acks=2))).error_code == 0
        started = time.monotonic()
        result = only(client.request(produce_request("acks", 0, [b"b"], acks=3, timeout=300)))
    # Written, but three acks never come from two replicas: RequestTimedOut after the timeout.
    assert (result.error_code, result.offset) == (7, 1)
    assert time.monotonic() - started >= 0.28
    assert c.offsets("acks", 0) == [0, 2]


# -- Fetch -----------------------------------------------------------------------------------


def test_fetch_returns_high_watermark_and_cuts_at_max_bytes(cluster):
    topic = new_topic(cluster)
    produce(cluster, topic, 0, [b"%03d" % i for i in range(10)])
    with leader_client(cluster, topic, 0) as client:
        full = only(client.request(fetch_request(topic, 0, 0)))
        cut = only(client.request(fetch_request(topic, 0, 0, max_bytes=100)))
        zero = only(client.request(fetch_request(topic, 0, 0, max_bytes=0)))
        at_end = only(client.request(fetch_request(topic, 0, 10)))
    assert full.error_code == 0 and full.high_watermark == 10
    assert len(full.message_set) == 10 * 29
    # Sliced at max_bytes, mid-message, exactly as the 0.8.2 broker sends it.
    assert cut.message_set == full.message_set[:100]
    decoded = decode_message_set(cut.message_set)
    assert decoded.truncated and [r.offset for r in decoded.records] == [0, 1, 2]
    assert (zero.error_code, zero.message_set, zero.high_watermark) == (0, b"", 10)
    assert (at_end.error_code, at_end.message_set, at_end.high_watermark) == (0, b"", 10)


def test_fetch_errors(cluster):
    topic = new_topic(cluster)
    produce(cluster, topic, 0, [b"x"])
    with leader_client(cluster, topic, 0) as client:
        past = only(client.request(fetch_request(topic, 0, 5)))
        unknown = only(client.request(fetch_request("no-such-topic", 0, 0)))
    with follower_client(cluster, topic, 0) as client:
        not_leader = only(client.request(fetch_request(topic, 0, 0)))
    assert (past.error_code, past.high_watermark, past.message_set) == (1, -1, b"")
    assert (unknown.error_code, unknown.high_watermark) == (3, -1)
    assert (not_leader.error_code, not_leader.high_watermark) == (6, -1)


def wait_for_parked_fetch(cluster, topic, partition=0):
    """Wait until a long-polling fetch waits on the partition (the broker says so)."""
    wait_until(
        lambda: cluster.describe()["topics"][topic][str(partition)]["fetch_waiters"] > 0,
        what=f"a fetch parked on {topic}:{partition}",
    )


# A max_wait no test waits out: the client's socket timeout (10 s) runs out
# first, so an answer proves the broker did not wait for max_wait.
NEVER = 120000


def test_fetch_long_poll_is_woken_by_a_produce(cluster):
    topic = new_topic(cluster)
    with leader_client(cluster, topic, 0) as client:
        client.send(fetch_request(topic, 0, 0, max_wait=NEVER, min_bytes=1))
        wait_for_parked_fetch(cluster, topic)
        produce(cluster, topic, 0, [b"wake"])
        result = only(client.receive())
    assert result.error_code == 0 and result.high_watermark == 1
    assert [r.value for r in decode_message_set(result.message_set).records] == [b"wake"]


def test_fetch_long_poll_waits_for_min_bytes_then_max_wait(cluster):
    topic = new_topic(cluster)
    with leader_client(cluster, topic, 0) as client:
        started = time.monotonic()
        empty = only(client.request(fetch_request(topic, 0, 0, max_wait=400, min_bytes=1)))
        waited = time.monotonic() - started
        # min_bytes larger than what arrives: answered at max_wait with what there is.
        started = time.monotonic()
        client.send(fetch_request(topic, 0, 0, max_wait=600, min_bytes=10000))
        produce(cluster, topic, 0, [b"small"])
        partial = only(client.receive())
        waited_partial = time.monotonic() - started
    # Lower bounds only: the broker waited out max_wait. That it answered at
    # all (no hang) is the client's socket timeout's to check.
    assert empty.message_set == b"" and waited >= 0.35
    assert len(partial.message_set) > 0 and waited_partial >= 0.55


def test_fetch_long_poll_returns_at_once_on_error_and_on_leader_move(cluster):
    topic = new_topic(cluster)
    with leader_client(cluster, topic, 0) as client:
        result = only(client.request(fetch_request(topic, 0, 99, max_wait=NEVER, min_bytes=1)))
        assert result.error_code == 1
        old = cluster.leader(topic, 0)
        client.send(fetch_request(topic, 0, 0, max_wait=NEVER, min_bytes=1))
        wait_for_parked_fetch(cluster, topic)
        cluster.move_leader(topic, 0, next(b for b in (1, 2, 3) if b != old))
        moved = only(client.receive())
    assert moved.error_code == 6


# -- ListOffsets -----------------------------------------------------------------------------


def next_millisecond():
    """Wait for the wall clock's next millisecond (segments record ms times); return it."""
    start = int(time.time() * 1000)
    wait_until(lambda: int(time.time() * 1000) > start, what="the clock's next millisecond")
    return int(time.time() * 1000)


def test_list_offsets_latest_earliest_and_segments(kafka_cluster_factory):
    c = kafka_cluster_factory(brokers=1, zookeeper=False, segment_messages=3)
    c.create_topic("segs")
    with RawClient(c.address(1)) as client:
        empty = only(client.request(list_offsets_request("segs", 0, LATEST)))
        assert empty.offsets == [0]
        before_first = int(time.time() * 1000) - 1
        for _i in range(4):  # batches of 2: segments [0,2) [2,4) [4,6) [6,8)
            client.request(produce_request("segs", 0, [b"a", b"b"]))
            next_millisecond()  # each segment its own modification time
        latest = only(client.request(list_offsets_request("segs", 0, LATEST, max_num=10)))
        latest1 = only(client.request(list_offsets_request("segs", 0, LATEST, max_num=1)))
        earliest = only(client.request(list_offsets_request("segs", 0, EARLIEST)))
        old = only(client.request(list_offsets_request("segs", 0, before_first)))
        now = only(client.request(list_offsets_request("segs", 0, int(time.time() * 1000) + 1000)))
    assert c.describe()["topics"]["segs"]["0"]["segments"] == 4
    # Segment base offsets plus the log end offset, newest first (fetchOffsetsBefore).
    assert latest.offsets == [8, 6, 4, 2, 0]
    assert latest1.offsets == [8]
    assert earliest.offsets == [0]
    assert old.offsets == []
    assert now.offsets == [8, 6, 4, 2, 0]


def test_list_offsets_by_time_picks_segments_modified_before(kafka_cluster_factory):
    c = kafka_cluster_factory(brokers=1, zookeeper=False)
    c.create_topic("times")
    with RawClient(c.address(1)) as client:
        client.request(produce_request("times", 0, [b"a"]))
        c.roll_segment("times", 0)
        middle = next_millisecond()  # after the first segment's last write
        next_millisecond()  # the second segment's write comes after ``middle``
        client.request(produce_request("times", 0, [b"b"]))
        result = only(client.request(list_offsets_request("times", 0, middle)))
    # Only the first segment was last modified before ``middle``.
    assert result.offsets == [0]


def test_list_offsets_errors(cluster):
    topic = new_topic(cluster)
    with follower_client(cluster, topic, 0) as client:
        not_leader = only(client.request(list_offsets_request(topic, 0, LATEST)))
        unknown = only(client.request(list_offsets_request("no-such-topic", 0, LATEST)))
        debug = only(client.request(list_offsets_request(topic, 0, LATEST, replica_id=-2)))
    assert (not_leader.error_code, not_leader.offsets) == (6, [])
    assert (unknown.error_code, unknown.offsets) == (3, [])
    assert (debug.error_code, debug.offsets) == (0, [0])


def test_delete_records_makes_old_offsets_out_of_range(kafka_cluster_factory):
    c = kafka_cluster_factory(brokers=1, zookeeper=False, segment_messages=2)
    c.create_topic("ret")
    with RawClient(c.address(1)) as client:
        for _ in range(3):
            client.request(produce_request("ret", 0, [b"a", b"b"]))
        assert c.delete_records("ret", 0, 4) == 4
        gone = only(client.request(fetch_request("ret", 0, 1)))
        kept = only(client.request(fetch_request("ret", 0, 4)))
        earliest = only(client.request(list_offsets_request("ret", 0, EARLIEST)))
    assert gone.error_code == 1
    assert kept.error_code == 0 and kept.message_set
    assert earliest.offsets == [4]


# -- GroupCoordinator and offsets (in memory without ZooKeeper) --------------------------------


def test_group_coordinator_is_stable_across_brokers(cluster):
    answers = set()
    for broker_id in cluster.broker_ids:
        with RawClient(cluster.address(broker_id)) as client:
            response = client.request(GroupCoordinatorRequest("my-group"))
        answers.add((response.error_code, response.coordinator_id, response.host, response.port))
    assert len(answers) == 1
    code, node, host, port = answers.pop()
    assert code == 0 and f"{host}:{port}" == cluster.address(node)


def test_offset_commit_and_fetch_v0_in_memory(cluster):
    topic = new_topic(cluster, partitions=2)
    commit = OffsetCommitRequest("g1", [OffsetCommitTopicData(topic, [
        OffsetCommitPartitionData(0, 42, "some metadata")])])
    fetch = OffsetFetchRequest("g1", [OffsetFetchTopicData(topic, [0, 1]),
                                      OffsetFetchTopicData("no-such-topic", [0])])
    with RawClient(cluster.address(1)) as one, RawClient(cluster.address(3)) as three:
        committed = one.request(commit)
        fetched = three.request(fetch)
        too_large = one.request(OffsetCommitRequest("g1", [OffsetCommitTopicData(topic, [
            OffsetCommitPartitionData(1, 1, "m" * 4097)])]))
        unknown = one.request(OffsetCommitRequest("g1", [OffsetCommitTopicData("nope", [
            OffsetCommitPartitionData(0, 1, "")])]))
    assert only(committed).error_code == 0
    rows = [(t.topic, p.partition, p.offset, p.metadata, p.error_code)
            for t in fetched.topics for p in t.partitions]
    # v0 keeps only the offset (metadata comes back ""); nothing committed: -1, "", error 3.
    assert rows == [(topic, 0, 42, "", 0), (topic, 1, -1, "", 3), ("no-such-topic", 0, -1, "", 3)]
    assert only(too_large).error_code == 12
    assert only(unknown).error_code == 3
    assert cluster.committed_offset("g1", topic, 0) == 42


# -- bad input ---------------------------------------------------------------------------------


def _raw(cluster, broker_id=1):
    host, port = cluster.address(broker_id).rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=5)


def _closed(sock, timeout=5.0):
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize("payload", [
    pytest.param(b"\x00\x00\x00\x0c" + b"\xff" * 12, id="garbage-frame"),
    pytest.param(b"\x7f\xff\xff\xff" + b"x" * 100, id="oversize-prefix"),
    pytest.param(b"\xff\xff\xff\xfe", id="negative-prefix"),
    pytest.param(struct.pack(">ihhih", 10, 99, 0, 1, -1), id="unknown-api-key"),
    pytest.param(struct.pack(">ihhih", 10, 3, 7, 1, -1), id="unknown-api-version"),
    pytest.param(struct.pack(">ihhih", 14, 3, 0, 1, -1) + b"\x00\x00\x00\x09", id="bad-body"),
])
def test_bad_input_closes_the_connection_and_the_broker_keeps_serving(cluster, payload):
    with RawClient(cluster.address(1)) as bystander:
        sock = _raw(cluster)
        sock.sendall(payload)
        assert _closed(sock)
        sock.close()
        assert bystander.request(MetadataRequest([])).brokers
    with RawClient(cluster.address(1)) as fresh:
        assert fresh.request(MetadataRequest([])).brokers


def test_truncated_frame_then_disconnect_is_harmless(cluster):
    sock = _raw(cluster)
    sock.sendall(struct.pack(">i", 1000) + b"\x00" * 10)
    sock.close()
    with RawClient(cluster.address(1)) as client:
        assert client.request(MetadataRequest([])).brokers
    # The broker lets go of both connections, the cut one and the clean one.
    wait_until(
        lambda: cluster.describe()["brokers"]["1"]["connections"] == 0,
        what="broker 1 without connections",
    )


@pytest.mark.slow
def test_garbage_flood_keeps_memory_bounded(kafka_cluster_factory):
    import resource

    c = kafka_cluster_factory(brokers=1, zookeeper=False)
    junk = b"\x00\x01\x00\x00" + b"\xaa" * (4 * 1024 * 1024)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for i in range(40):  # ~160 MB of hostile bytes over 40 connections
        sock = _raw(c)
        try:
            sock.sendall(junk if i % 2 else b"\x7f\xff\xff\xff" + junk)
        except (ConnectionResetError, BrokenPipeError):
            pass
        assert _closed(sock)
        sock.close()
    peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with RawClient(c.address(1)) as client:
        assert client.request(MetadataRequest([])).brokers
    # ru_maxrss is in KiB on Linux: each bad frame is refused at its prefix, never buffered.
    assert peak_after - peak_before < 64 * 1024


# -- fault injection -----------------------------------------------------------------------------


def test_inject_error_for_next_requests(cluster):
    topic = new_topic(cluster)
    produce(cluster, topic, 0, [b"x"])
    cluster.inject_error("Fetch", 9, count=2)
    with leader_client(cluster, topic, 0) as client:
        codes = [only(client.request(fetch_request(topic, 0, 0))).error_code for _ in range(3)]
    assert codes == [9, 9, 0]
    cluster.inject_error("Produce", 6, count=1)
    assert produce(cluster, topic, 0, [b"y"]).error_code == 6
    assert cluster.offsets(topic, 0) == [0, 1]  # the failed produce appended nothing
    cluster.inject_error("GroupCoordinator", 15)
    with RawClient(cluster.address(1)) as client:
        assert client.request(GroupCoordinatorRequest("g")).error_code == 15
        assert client.request(GroupCoordinatorRequest("g")).error_code == 0


def test_drop_responses_cuts_mid_frame(cluster):
    cluster.drop_responses("Metadata", count=1, broker_id=2)
    sock = _raw(cluster, 2)
    from kiel.protocol.framing import ClientFraming

    framing = ClientFraming()
    sock.sendall(framing.send_request(MetadataRequest([]))[1])
    received = b""
    sock.settimeout(5)
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    sock.close()
    (size,) = struct.unpack(">i", received[:4])
    assert 0 < len(received) < size + 4  # part of the frame, then EOF
    with RawClient(cluster.address(2)) as client:
        assert client.request(MetadataRequest([])).brokers


def test_corrupt_offsets_lies_in_answers_only(cluster):
    topic = new_topic(cluster)
    produce(cluster, topic, 0, [b"%03d" % i for i in range(5)])
    with pytest.raises(ConfigError):
        cluster.corrupt_offsets(0)
    cluster.corrupt_offsets(1000, count=1)
    with leader_client(cluster, topic, 0) as client:
        # An answer with no message does not use the rule up.
        assert only(client.request(fetch_request(topic, 0, 5))).message_set == b""
        # Cut mid-message at 100 bytes: the last whole message (offset 2) lies,
        # its CRC still right; the partial one after it is left as it is.
        lied = only(client.request(fetch_request(topic, 0, 0, max_bytes=100)))
        honest = only(client.request(fetch_request(topic, 0, 0, max_bytes=100)))
    decoded = decode_message_set(lied.message_set)
    assert [r.offset for r in decoded.records] == [0, 1, 1002]
    assert decoded.truncated and lied.high_watermark == 5
    assert [r.value for r in decoded.records] == [b"000", b"001", b"002"]
    assert len(lied.message_set) == len(honest.message_set) == 100
    assert [r.offset for r in decode_message_set(honest.message_set).records] == [0, 1, 2]
    assert fetch_values(cluster, topic, 0) == [(i, b"%03d" % i) for i in range(5)]


def leave_with_a_parked_fetch(cluster, topic, queued=()):
    """A client parks a fetch on ``topic``'s leader (``queued`` requests behind
    it) and closes. The broker reads nothing while it handles a request, so
    it answers that fetch at its max_wait into a dead socket, then reads on.

    Returns:
        a function that waits until the broker has ended that connection.
    """
    leader = str(cluster.leader(topic, 0))

    def connections():
        return cluster.describe()["brokers"][leader]["connections"]

    before = connections()
    gone = RawClient(cluster.address(int(leader)))
    gone.send(fetch_request(topic, 0, 0, max_wait=300, min_bytes=1))
    for request in queued:
        gone.send(request)
    wait_for_parked_fetch(cluster, topic)
    gone.close()
    return lambda: wait_until(lambda: connections() == before,
                              what="the broker ended the closed client's connection")


def test_a_cut_is_not_spent_on_a_client_that_has_gone(cluster):
    # Nobody sees the answer to a client that left with its fetch parked: the
    # cut is for the next client. (A CI run's metrics test lost its cut to
    # the fetch the previous test's consumer left parked.)
    topic = new_topic(cluster)
    with leader_client(cluster, topic, 0) as client:
        client.request(MetadataRequest([]))
        ended = leave_with_a_parked_fetch(cluster, topic)
        cluster.drop_responses("Fetch", count=1)
        ended()
        client.send(fetch_request(topic, 0, 0))
        with pytest.raises(ConnectionClosedError):
            client.receive()


def test_an_error_rule_is_not_spent_on_a_client_that_has_gone(cluster):
    # The same for a request read after its client left (queued behind the fetch).
    topic = new_topic(cluster)
    with leader_client(cluster, topic, 0) as client:
        client.request(MetadataRequest([]))
        ended = leave_with_a_parked_fetch(cluster, topic, [GroupCoordinatorRequest("g")])
        cluster.inject_error("GroupCoordinator", 15, count=1)
        ended()
        assert client.request(GroupCoordinatorRequest("g")).error_code == 15
        assert client.request(GroupCoordinatorRequest("g")).error_code == 0


def test_an_offset_rule_is_not_spent_on_a_client_that_has_gone(cluster):
    # The parked fetch of a client that left is woken by a produce, so its
    # answer carries messages: the lie is still for the next client.
    topic = new_topic(cluster)
    ended = leave_with_a_parked_fetch(cluster, topic)
    cluster.corrupt_offsets(1000, count=1)
    produce(cluster, topic, 0, [b"a", b"b"])
    ended()
    with leader_client(cluster, topic, 0) as client:
        lied = only(client.request(fetch_request(topic, 0, 0)))
    assert [r.offset for r in decode_message_set(lied.message_set).records] == [0, 1001]


def test_hang_holds_answers_until_resume(cluster):
    cluster.hang_broker(3)
    with RawClient(cluster.address(3), timeout=0.5) as client:
        client.send(MetadataRequest([]))
        with pytest.raises(socket.timeout):
            client.receive()
        assert cluster.describe()["brokers"]["3"]["hung"]
        cluster.resume_broker(3)
        client.sock.settimeout(5)
        assert client.receive().brokers


def test_latency(cluster):
    cluster.set_latency(0.3, api="Metadata", broker_id=1)
    with RawClient(cluster.address(1)) as client:
        started = time.monotonic()
        client.request(MetadataRequest([]))
        slow = time.monotonic() - started
        client.request(GroupCoordinatorRequest("g"))
        cluster.set_latency(0, api="Metadata", broker_id=1)
        started = time.monotonic()
        client.request(MetadataRequest([]))
        fast = time.monotonic() - started
    assert slow >= 0.3 and fast < 0.25


def test_close_connections(cluster):
    with RawClient(cluster.address(1)) as client:
        client.request(MetadataRequest([]))
        assert cluster.close_connections(1) >= 1
        with pytest.raises((ConnectionClosedError, ConnectionResetError, BrokenPipeError)):
            client.request(MetadataRequest([]))


def test_stop_and_start_broker_fail_over_and_keep_the_port(cluster):
    topic = new_topic(cluster, partitions=3)
    leaders = {p: cluster.leader(topic, p) for p in range(3)}
    victim = leaders[0]
    port = cluster.port(victim)
    produce(cluster, topic, 0, [b"before"])
    cluster.stop_broker(victim)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
    survivor = next(b for b in (1, 2, 3) if b != victim)
    with RawClient(cluster.address(survivor)) as client:
        meta = client.request(MetadataRequest([topic]))
    assert victim not in [b.node_id for b in meta.brokers]
    part0 = meta.topics[0].partitions[0]
    # A replica is down: ReplicaNotAvailable, live replicas only, a new leader.
    assert part0.error_code == 9 and part0.leader != victim and victim not in part0.replicas
    assert produce(cluster, topic, 0, [b"during"]).offset == 1
    cluster.start_broker(victim)
    assert cluster.port(victim) == port
    with RawClient(cluster.address(victim)) as client:
        meta = client.request(MetadataRequest([topic]))
    assert all(p.error_code == 0 and len(p.isr) == 3 for p in meta.topics[0].partitions)
    assert fetch_values(cluster, topic, 0) == [(0, b"before"), (1, b"during")]


def test_partition_without_live_replica_has_no_leader(kafka_cluster_factory):
    c = kafka_cluster_factory(brokers=2, zookeeper=False, replication=1)
    c.create_topic("solo", assignment={0: [2]})
    c.stop_broker(2)
    with RawClient(c.address(1)) as client:
        part = client.request(MetadataRequest(["solo"])).topics[0].partitions[0]
        result = only(client.request(produce_request("solo", 0, [b"x"])))
    assert (part.error_code, part.leader, part.replicas) == (5, -1, [])
    assert result.error_code == 6
    c.start_broker(2)
    assert c.leader("solo", 0) == 2


def test_harness_errors(cluster):
    with pytest.raises(HarnessError):
        cluster.stop_broker(9)
    with pytest.raises(HarnessError):
        cluster.leader("no-such-topic", 0)
    with pytest.raises(ConfigError):
        cluster.create_topic("bad name!")
    topic = new_topic(cluster)
    with pytest.raises(ConfigError):
        cluster.create_topic(topic)


def test_cluster_is_thread_safe(cluster):
    errors = []
    names = []

    def work(i):
        try:
            name = f"threads-{i}-{time.time_ns()}"
            cluster.create_topic(name, 1)
            names.append(name)
            produce(cluster, name, 0, [b"x"])
            cluster.describe()
        except Exception as e:  # collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert all(cluster.offsets(name, 0) == [0, 1] for name in names)


# -- ZooKeeper layout ----------------------------------------------------------------------------


@pytest.mark.zookeeper
def test_zookeeper_registration_as_082(kafka_cluster, topic_factory):
    from kazoo.client import KazooClient

    topic = topic_factory(partitions=2)
    zk = KazooClient(hosts=kafka_cluster.zookeeper)
    zk.start(timeout=15)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        broker = json.loads(zk.get("/brokers/ids/2")[0])
        assert broker == {"jmx_port": -1, "timestamp": broker["timestamp"], "host": "127.0.0.1",
                          "version": 1, "port": kafka_cluster.port(2)}
        assert isinstance(broker["timestamp"], str) and broker["timestamp"].isdigit()
        assignment = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
        described = kafka_cluster.describe()["topics"][topic]
        assert assignment == {"version": 1, "partitions": {
            p: described[p]["replicas"] for p in ("0", "1")}}
        state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])
        assert state == {"controller_epoch": state["controller_epoch"], "version": 1,
                         "leader": described["0"]["leader"],
                         "leader_epoch": described["0"]["leader_epoch"],
                         "isr": described["0"]["isr"]}
        assert json.loads(zk.get("/config/topics/" + topic)[0]) == {"version": 1, "config": {}}
        assert json.loads(zk.get("/controller")[0])["brokerid"] in (1, 2, 3)
        assert int(zk.get("/controller_epoch")[0]) >= 1
        assert zk.exists("/consumers") and zk.exists("/admin/delete_topics")

        kafka_cluster.stop_broker(3)
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
        state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])
        assert 3 not in state["isr"] and state["leader"] != 3
        kafka_cluster.start_broker(3)
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]

        old = kafka_cluster.leader(topic, 1)
        new = next(b for b in (1, 2, 3) if b != old)
        epoch = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/1/state")[0])["leader_epoch"]
        kafka_cluster.move_leader(topic, 1, new)
        state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/1/state")[0])
        assert state["leader"] == new and state["leader_epoch"] == epoch + 1
        assert state["isr"][0] == new
    finally:
        zk.stop()
        zk.close()


@pytest.mark.zookeeper
def test_offsets_v0_stored_in_zookeeper(kafka_cluster, topic_factory):
    from kazoo.client import KazooClient

    topic = topic_factory(partitions=2)
    commit = OffsetCommitRequest("zk-group", [OffsetCommitTopicData(topic, [
        OffsetCommitPartitionData(1, 1234, "meta")])])
    with RawClient(kafka_cluster.address(1)) as client:
        assert only(client.request(commit)).error_code == 0
    zk = KazooClient(hosts=kafka_cluster.zookeeper)
    zk.start(timeout=15)
    try:
        data, _ = zk.get(f"/consumers/zk-group/offsets/{topic}/1")
        assert data == b"1234"
        zk.set(f"/consumers/zk-group/offsets/{topic}/0", b"77") if zk.exists(
            f"/consumers/zk-group/offsets/{topic}/0") else zk.create(
            f"/consumers/zk-group/offsets/{topic}/0", b"77")
    finally:
        zk.stop()
        zk.close()
    # Any broker answers from ZooKeeper, including offsets written by someone else.
    with RawClient(kafka_cluster.address(3)) as client:
        fetched = client.request(OffsetFetchRequest("zk-group", [
            OffsetFetchTopicData(topic, [0, 1])]))
    assert [(p.partition, p.offset, p.metadata, p.error_code)
            for p in fetched.topics[0].partitions] == [(0, 77, "", 0), (1, 1234, "", 0)]


def test_cluster_without_zookeeper_runs_too(kafka_cluster_factory):
    c = kafka_cluster_factory(brokers=1, zookeeper=None, topics={"x": 2})
    assert c.zookeeper is None
    assert sorted(c.describe()["topics"]["x"]) == ["0", "1"]
