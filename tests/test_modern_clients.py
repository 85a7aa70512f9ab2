"""The same Producer and SingleConsumer on a Kafka 0.8.2 broker and on a current one.

Every test of the first part runs twice, through the ``broker`` fixture: on
the embedded 0.8.2 cluster (3 brokers, ZooKeeper; kiel negotiates the legacy
v0 versions because the brokers close the connection on ApiVersions) and on
Tansu, a broker we did not write (ApiVersions answered: Produce v3 with
record batches, Fetch v4, ListOffsets v1, Metadata v1).

Then what only one side has: headers and timestamps refused with a typed
error on 0.8.2, a pinned ``api_version`` that skips the probe (counted
through a fault proxy), third-party clients reading what kiel writes on
Tansu and the other way round, and the consumer's magic-2 decoding path
staying within its time budget.
"""
import asyncio
import datetime
import logging
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import aiokafka
import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from kiel.client import Client
from kiel.connection import Connection
from kiel.consumer import BEGINNING, END, SingleConsumer
from kiel.consumer.decoder import Decoder
from kiel.consumer.subscription import PartitionState
from kiel.exc import (
    ConfigError,
    ConnectionClosedError,
    ProtocolError,
    RequestTimeoutError,
    UnsupportedFeatureError,
)
from kiel.producer import Producer
from kiel.protocol import (
    FetchPartitionData,
    FetchRequestV4,
    FetchTopicData,
    MetadataRequest,
    OffsetCommitPartitionData,
    OffsetCommitRequestV2,
    OffsetCommitTopicData,
    OffsetFetchRequestV1,
    OffsetFetchTopicData,
    ProducePartitionData,
    ProduceRequestV3,
    ProduceTopicData,
)
from kiel.protocol.offset_commit import DEFAULT_RETENTION, STANDALONE_GENERATION
from kiel.protocol.record_batch import CODEC_GZIP, RecordBatchBuilder
from kiel.protocol.versions import (
    FETCH,
    GROUP_COORDINATOR,
    LEGACY,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    for_broker_version,
)
from kiel.structs import Record, TopicPartition
from tests.conftest import run, unique
from tests.support.single_consumer import consume_n
from tests.support.waiting import until

LEGACY_V0 = {PRODUCE: 0, FETCH: 0, LIST_OFFSETS: 0, METADATA: 0}
# ListOffsets v7 is the admin's (the consumers send v1 where it is 1 or more).
MODERN = {PRODUCE: 3, FETCH: 4, LIST_OFFSETS: 7, METADATA: 4}
TS = 1_700_000_000_000


class Target:
    """One broker kind under test: where to connect, and how to make topics."""

    def __init__(self, kind: str, bootstrap: str, create: Callable[[str, int], None]) -> None:
        self.kind = kind
        self.bootstrap = bootstrap
        self._create = create

    @property
    def modern(self) -> bool:
        return self.kind == "tansu"

    def topic(self, partitions: int = 1) -> str:
        name = unique(f"modern-{self.kind}")
        self._create(name, partitions)
        return name


@pytest.fixture(params=["embedded-0.8.2", "tansu"])
def broker(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "tansu":
        tansu = request.getfixturevalue("tansu_broker")
        yield Target("tansu", tansu.bootstrap,
                     lambda name, partitions: tansu.create_topic(name, partitions))
    else:
        cluster = request.getfixturevalue("kafka_cluster")
        yield Target("embedded", cluster.bootstrap,
                     lambda name, partitions: cluster.create_topic(name, partitions))


def producer_for(target: Target, **options: Any) -> Producer:
    options.setdefault("linger", 0.005)
    return Producer(target.bootstrap, **options)


def consumer_for(target: Target, **options: Any) -> SingleConsumer:
    options.setdefault("max_wait_time", 0.2)
    return SingleConsumer(target.bootstrap, **options)


async def one_by_one(producer: Producer, topic: str, values: List[bytes],
                     partition: Optional[int] = None) -> None:
    """Produce ``values`` one record per batch.

    Tansu (0.5) answers ListOffsets LATEST with the last batch's base offset
    plus one, not the log end offset, so a test that checks the end of a log
    writes batches of one record (its Fetch high watermark is right).
    """
    for value in values:
        await producer.produce(topic, value, partition=partition)


# --------------------------------------------------------------------------
# Both brokers


def test_negotiated_versions(broker: Target) -> None:
    async def main() -> Dict[str, Any]:
        async with Client(broker.bootstrap) as client:
            cluster = client.cluster
            per_broker = {b: await cluster.versions(b) for b in cluster.brokers}
            return {"per_broker": per_broker, "known": dict(cluster.known_versions),
                    "highest": cluster.highest_known(PRODUCE)}

    got = run(main())
    expected = MODERN if broker.modern else LEGACY_V0
    assert got["per_broker"], "no broker in the metadata"
    for versions in list(got["per_broker"].values()) + list(got["known"].values()):
        assert {k: versions.chosen[k] for k in expected} == expected
        assert versions.source == ("ApiVersions" if broker.modern else "legacy")
    assert got["highest"] == expected[PRODUCE]


def test_produce_and_consume(broker: Target) -> None:
    topic = broker.topic(partitions=2)
    n = 30

    def extras(i: int) -> Dict[str, Any]:
        if not broker.modern:
            return {}
        return {"timestamp": TS + i, "headers": [("i", b"%d" % i), ("none", None)]
                if i % 3 == 0 else []}

    async def main() -> Tuple[List[Any], List[Record]]:
        async with producer_for(broker) as producer:
            futures = [producer.produce(topic, b"value-%d" % i,
                                        key=None if i % 4 == 0 else b"key-%d" % i,
                                        partition=i % 2, **extras(i)) for i in range(n)]
            metadata = await asyncio.gather(*futures)
        async with consumer_for(broker) as consumer:
            records = await consume_n(consumer, topic, n)
        return metadata, records

    metadata, records = run(main())
    assert sorted((m.partition, m.offset) for m in metadata) == sorted(
        (p, o) for p in (0, 1) for o in range(n // 2))
    assert len(records) == n
    got = {(r.partition, r.offset): r for r in records}
    for i, meta in enumerate(metadata):
        record = got[(meta.partition, meta.offset)]
        assert record.value == b"value-%d" % i
        assert record.key == (None if i % 4 == 0 else b"key-%d" % i)
        if broker.modern:
            assert record.timestamp == TS + i and record.timestamp_type == 0
            assert record.headers == ((("i", b"%d" % i), ("none", None)) if i % 3 == 0 else ())
        else:
            # Magic 0: no timestamp, no type, no headers.
            assert (record.timestamp, record.timestamp_type, record.headers) == (None, None, ())


@pytest.mark.interop
def test_records_without_a_timestamp_get_their_create_time(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("create-time"), 1)
    before = int(time.time() * 1000)

    async def main() -> List[Record]:
        async with Producer(tansu_broker.bootstrap) as producer:
            await producer.produce(topic, b"now")
            await producer.produce(topic, b"then",
                                   timestamp=datetime.datetime(2020, 1, 2, 3, 4, 5))
        async with SingleConsumer(tansu_broker.bootstrap, max_wait_time=0.2) as consumer:
            return await consume_n(consumer, topic, 2)

    now, then = run(main())
    after = int(time.time() * 1000)
    assert before <= now.timestamp <= after and now.timestamp_type == 0
    naive_is_utc = datetime.datetime(2020, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    assert then.timestamp == int(naive_is_utc.timestamp() * 1000)


def test_start_positions(broker: Target) -> None:
    topic = broker.topic(partitions=1)
    utc = datetime.timezone.utc

    async def produce(values: List[bytes]) -> float:
        async with producer_for(broker) as producer:
            await one_by_one(producer, topic, values)
        return time.time()

    async def main() -> None:
        acked = await produce([b"a%d" % i for i in range(5)])
        # The time to start from: after the first records were acknowledged
        # (so after the broker appended them), before the next ones exist.
        middle = acked + 0.002
        await until(lambda: time.time() > middle + 0.002, what="the clock to pass the middle")
        await produce([b"b%d" % i for i in range(5)])

        async def first(start: Any) -> Optional[int]:
            async with consumer_for(broker) as consumer:
                records = await consumer.consume(topic, start=start)
                return records[0].offset if records else consumer.position(topic, 0)

        assert await first(BEGINNING) == 0
        assert await first(END) == 10
        assert await first(3) == 3
        at = await first(datetime.datetime.fromtimestamp(middle, utc))
        if broker.modern:
            # ListOffsets v1 is exact (Tansu answers by the time it appended).
            assert at == 5
        else:
            # v0 resolves at log-segment granularity: one segment here, so
            # the start comes before the time, never after it.
            assert at is not None and at <= 5
        assert await first(datetime.datetime.now(utc) + datetime.timedelta(hours=1)) == 10

    run(main())


def test_pause_resume_seek(broker: Target) -> None:
    topic = broker.topic(partitions=2)

    async def main() -> None:
        async with producer_for(broker) as producer:
            for p in (0, 1):
                await one_by_one(producer, topic, [b"p%d-%d" % (p, i) for i in range(10)], p)
        async with consumer_for(broker) as consumer:
            got = await consumer.consume(topic, start={0: 0, 1: 0})
            consumer.pause(topic, 1)
            paused_at = consumer.position(topic, 1)
            while consumer.position(topic, 0) < 10:
                batch = await consumer.consume(topic)
                assert {r.partition for r in batch} <= {0}
                got += batch
            assert consumer.position(topic, 1) == paused_at
            consumer.resume(topic, 1)
            while consumer.position(topic, 1) < 10:
                got += await consumer.consume(topic)
            assert sorted((r.partition, r.offset) for r in got) == sorted(
                (p, o) for p in (0, 1) for o in range(10))
            consumer.seek(topic, 0, 7)
            again = await consumer.consume(topic)
            assert again[0].offset == 7 and again[0].value == b"p0-7"
            await consumer.seek_to(topic, BEGINNING, partition=1)
            assert consumer.position(topic, 1) == 0
            await consumer.seek_to(topic, END)
            assert consumer.position(topic, 0) == 10 and consumer.position(topic, 1) == 10
            assert consumer.highwater(topic, 0) == 10

    run(main())


def test_bad_headers_and_timestamps_are_config_errors(broker: Target) -> None:
    topic = broker.topic()

    async def main() -> None:
        async with producer_for(broker) as producer:
            for bad in ({"headers": "h=1"}, {"headers": [("k",)]}, {"headers": [(1, b"v")]},
                        {"headers": [("k", "text")]}, {"headers": {"k": b"v"}},
                        {"timestamp": 1.5}, {"timestamp": "now"}, {"timestamp": 2**63}):
                with pytest.raises(ConfigError):
                    producer.produce(topic, b"v", **bad)

    run(main())


# --------------------------------------------------------------------------
# The 0.8.2 broker: headers and timestamps are refused, never dropped


@pytest.mark.zookeeper
def test_headers_and_timestamps_on_0_8_raise(kafka_cluster: Any) -> None:
    topic = unique("legacy")
    kafka_cluster.create_topic(topic, 2)

    async def main() -> None:
        async with Producer(kafka_cluster.bootstrap) as producer:
            # Connected: the cluster is known to speak Produce v0 only.
            with pytest.raises(UnsupportedFeatureError, match="Produce v3"):
                producer.produce(topic, b"v", headers=[("k", b"v")], partition=0)
            with pytest.raises(UnsupportedFeatureError):
                producer.produce(topic, b"v", timestamp=TS, partition=0)
            assert (await producer.produce(topic, b"plain", partition=0)).offset == 0
        # Not connected yet: nothing is known at produce() time, so the
        # record's future fails when its batch meets the v0 leader.
        producer = Producer(kafka_cluster.bootstrap)
        try:
            future = producer.produce(topic, b"v", headers=[("k", b"v")], partition=0)
            plain = producer.produce(topic, b"plain", partition=1)
            with pytest.raises(UnsupportedFeatureError):
                await future
            # Another partition's records are not harmed.
            assert (await plain).offset == 0
        finally:
            await producer.close()

    run(main())


@pytest.mark.zookeeper
def test_pinned_api_version_skips_the_probe(kafka_cluster: Any, fault_proxy: Any) -> None:
    proxy = fault_proxy(kafka_cluster.brokers[0])
    host, port = proxy.address.rsplit(":", 1)

    async def main() -> None:
        # auto: the broker closes the probe's connection; kiel connects again.
        async with Client(proxy.address) as client:
            assert proxy.stats().accepted == 2
            versions = client.cluster.known_versions[(host, int(port))]
            assert versions.source == "legacy" and versions.chosen == LEGACY.chosen
            # A new connection to the same address does not ask again.
            conn = Connection(host, int(port), known_versions=client.cluster.known_versions)
            try:
                await conn.connect()
                assert not conn.probed and conn.versions is versions
                # A round trip through the proxy: it has seen this connection.
                assert (await conn.send(MetadataRequest([]))).brokers
                assert proxy.stats().accepted == 3
            finally:
                conn.close()
        # pinned: one connection, no question.
        async with Client(proxy.address, api_version=(0, 8, 2)) as client:
            assert proxy.stats().accepted == 4
            assert client.cluster.known_versions == {}
            assert client.cluster.highest_known(PRODUCE) == 0

    run(main())


@pytest.mark.zookeeper
def test_the_embedded_broker_closes_on_versions_it_does_not_speak(kafka_cluster: Any) -> None:
    # As 0.8.2 does: a client pinned to a newer release gets its connection
    # closed, never an answer in the wrong shape.
    host, port = kafka_cluster.brokers[0].rsplit(":", 1)
    topic = unique("pinned-too-new")
    kafka_cluster.create_topic(topic, 1)

    async def main() -> None:
        for request in (
            ProduceRequestV3(None, 1, 1000, [ProduceTopicData(topic, [
                ProducePartitionData(0, RecordBatchBuilder().build())])]),
            FetchRequestV4(-1, 10, 1, 1 << 20, 0, [FetchTopicData(topic, [
                FetchPartitionData(0, 0, 1 << 20)])]),
        ):
            conn = Connection(host, int(port), versions=for_broker_version((2, 8)))
            try:
                with pytest.raises(ConnectionClosedError):
                    await conn.send(request)
            finally:
                conn.close()

    run(main())


class SilentPeer:
    """A loopback server that accepts, reads, and answers ``reply`` (or nothing)."""

    def __init__(self, reply: Optional[bytes] = None) -> None:
        self.reply = reply
        self.accepted = 0
        self.server: Any = None

    async def __aenter__(self) -> "SilentPeer":
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.accepted += 1
            await reader.read(1024)
            if self.reply is not None:
                writer.write(self.reply)
                await writer.drain()
            await reader.read()  # until the client closes
            writer.close()

        self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.server.close()

    @property
    def port(self) -> int:
        return int(self.server.sockets[0].getsockname()[1])


def test_a_broker_that_never_answers_the_probe_fails_in_time() -> None:
    async def main() -> None:
        async with SilentPeer() as peer:
            known: Dict[Any, Any] = {}
            conn = Connection("127.0.0.1", peer.port, request_timeout=0.3, known_versions=known)
            with pytest.raises(RequestTimeoutError, match="ApiVersions") as info:
                await conn.connect()
            assert conn.closed and known == {}
            assert info.value.context["reason"] == "connect failed"  # nothing was written

    run(main())


def test_close_during_the_probe_ends_it() -> None:
    async def main() -> None:
        async with SilentPeer() as peer:
            known: Dict[Any, Any] = {}
            # A long timeout: only close() can end this connect.
            conn = Connection("127.0.0.1", peer.port, request_timeout=600, known_versions=known)
            connecting = asyncio.ensure_future(conn.connect())
            await until(lambda: peer.accepted == 1, what="the probe's connection")
            conn.close()
            with pytest.raises(ConnectionClosedError):
                await asyncio.wait_for(connecting, 30)
            # Not mistaken for a legacy broker, and no second connection.
            assert known == {} and peer.accepted == 1

    run(main())


def test_garbage_for_an_answer_is_a_protocol_error() -> None:
    async def main() -> None:
        # A frame with the right correlation id and a body that does not parse.
        async with SilentPeer(reply=b"\x00\x00\x00\x06\x00\x00\x00\x00\xff\xff") as peer:
            conn = Connection("127.0.0.1", peer.port, request_timeout=30)
            with pytest.raises(ProtocolError):
                await conn.connect()
            assert conn.closed

    run(main())


def test_bad_api_version_setting() -> None:
    with pytest.raises(ConfigError):
        Client("localhost:9092", api_version="0.8.2")
    with pytest.raises(ConfigError):
        Producer("localhost:9092", api_version=(0, 7))


# --------------------------------------------------------------------------
# Tansu: pinned versions, and third-party clients both ways


@pytest.mark.interop
def test_pinned_modern_release_on_tansu(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("pinned"), 1)

    async def main() -> Tuple[List[Record], List[Dict[Any, Any]]]:
        async with Producer(tansu_broker.bootstrap, api_version=(2, 8)) as producer:
            await producer.produce(topic, b"v", headers=[("h", b"1")], timestamp=TS)
            # Nothing negotiated: every connection spoke the pinned versions.
            negotiated = [dict(producer.cluster.known_versions)]
        async with SingleConsumer(tansu_broker.bootstrap, api_version=(2, 8),
                                  max_wait_time=0.2) as consumer:
            records = await consume_n(consumer, topic, 1)
            negotiated.append(dict(consumer.cluster.known_versions))
            return records, negotiated

    [record], negotiated = run(main())
    assert negotiated == [{}, {}]
    assert (record.value, record.timestamp, record.headers) == (b"v", TS, (("h", b"1"),))


def test_group_coordinator(broker: Target, caplog: pytest.LogCaptureFixture) -> None:
    # FindCoordinator v2 on Tansu, GroupCoordinator v0 on 0.8.2: answered
    # (not the any-broker fallback), a broker of the metadata either way.
    caplog.set_level(logging.INFO, logger="kiel.cluster")
    async def main() -> Tuple[int, Dict[int, Any], Any]:
        async with Client(broker.bootstrap) as client:
            coordinator = await client.cluster.coordinator(unique("group"))
            versions = await client.cluster.versions(coordinator)
            return coordinator, dict(client.cluster.brokers), versions

    coordinator, brokers, versions = run(main())
    assert not [r for r in caplog.records if "using any broker" in r.getMessage()]
    assert coordinator in brokers
    assert versions.get(GROUP_COORDINATOR) == (2 if broker.modern else 0)


def test_the_coordinator_lookup_speaks_the_negotiated_version() -> None:
    from kiel.cluster import _coordinator_request
    from kiel.protocol import (
        FindCoordinatorRequestV1,
        FindCoordinatorRequestV2,
        GroupCoordinatorRequest,
    )

    expected = {(0, 8, 2): GroupCoordinatorRequest("g"), (1, 0): FindCoordinatorRequestV1("g", 0),
                (2, 0): FindCoordinatorRequestV2("g", 0), (3, 7): FindCoordinatorRequestV2("g", 0)}
    for release, request in expected.items():
        built = _coordinator_request(for_broker_version(release), "g")
        assert (type(built), built) == (type(request), request), release


@pytest.mark.interop
def test_standalone_offset_commit_v2_and_fetch_v1_on_tansu(tansu_broker: Any) -> None:
    # Judged by Tansu: a commit from outside any broker-side group
    # (generation -1, no member id) reads back with OffsetFetch v1; v0 keeps
    # working beside it. (Tansu does not keep the commit's metadata string:
    # not compared.) kiel negotiates v7 and v5 now; v2 and v1 still work.
    topic = tansu_broker.create_topic(unique("offsets"), 2)
    group = unique("standalone")

    async def main() -> Tuple[Any, Any, Any]:
        async with Client(tansu_broker.bootstrap) as client:
            cluster = client.cluster
            coordinator = await cluster.coordinator(group)
            versions = await cluster.versions(coordinator)
            committed = await cluster.send(coordinator, OffsetCommitRequestV2(
                group, STANDALONE_GENERATION, "", DEFAULT_RETENTION,
                [OffsetCommitTopicData(topic, [OffsetCommitPartitionData(0, 42, "m"),
                                               OffsetCommitPartitionData(1, 7, "")])]))
            fetched = await cluster.send(coordinator, OffsetFetchRequestV1(
                group, [OffsetFetchTopicData(topic, [0, 1])]))
            return versions, committed, fetched

    versions, committed, fetched = run(main())
    assert (versions.of(OFFSET_COMMIT), versions.of(OFFSET_FETCH)) == (7, 5)
    assert [p.error_code for p in committed.topics[0].partitions] == [0, 0]
    assert [(p.partition, p.offset, p.error_code) for p in fetched.topics[0].partitions] == [
        (0, 42, 0), (1, 7, 0)]


@pytest.mark.interop
def test_group_offsets_commit_v7_and_fetch_v5_on_tansu(tansu_broker: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # GroupOffsets in the versions negotiated with Tansu (v7, v5), as a
    # standalone member; what it writes kafka-python's consumer reads as the
    # group's committed offsets, and what kafka-python commits GroupOffsets reads.
    from kiel.cluster import Cluster
    from kiel.consumer.offsets import GroupOffsets

    sent: List[str] = []
    real_send = Cluster.send

    async def recording_send(self: Cluster, broker_id: int, request: Any, **kw: Any) -> Any:
        sent.append(type(request).__name__)  # what went on the wire; sent as it is
        return await real_send(self, broker_id, request, **kw)

    monkeypatch.setattr(Cluster, "send", recording_send)

    topic = tansu_broker.create_topic(unique("offsets-v7"), 2)
    group = unique("v7")
    tps = [TopicPartition(topic, p) for p in range(2)]

    async def main() -> Tuple[Any, Any, Any]:
        async with Client(tansu_broker.bootstrap) as client:
            offsets = GroupOffsets(client.cluster, group)
            versions = await client.cluster.versions(await offsets.coordinator())
            before = await offsets.fetch(tps)
            await offsets.commit({tps[0]: 42, tps[1]: 7}, metadata="m")
            return versions, before, await offsets.fetch(tps)

    versions, before, after = run(main())
    assert (versions.of(OFFSET_COMMIT), versions.of(OFFSET_FETCH)) == (7, 5)
    assert [name for name in sent if name.startswith("Offset")] == [
        "OffsetFetchRequestV5", "OffsetCommitRequestV7", "OffsetFetchRequestV5"]
    assert before == {tps[0]: None, tps[1]: None}
    assert after == {tps[0]: 42, tps[1]: 7}
    kp = KafkaConsumer(bootstrap_servers=tansu_broker.bootstrap, group_id=group,
                       enable_auto_commit=False)
    try:
        kp_tps = [KpTopicPartition(topic, p) for p in range(2)]
        assert [kp.committed(tp) for tp in kp_tps] == [42, 7]
        kp.assign(kp_tps)
        from kafka.structs import OffsetAndMetadata
        kp.commit({kp_tps[0]: OffsetAndMetadata(50, "", -1)})
    finally:
        kp.close()

    async def read_back() -> Any:
        async with Client(tansu_broker.bootstrap) as client:
            return await GroupOffsets(client.cluster, group).fetch(tps)

    assert run(read_back()) == {tps[0]: 50, tps[1]: 7}


@pytest.mark.interop
def test_kafka_python_reads_what_kiel_writes(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("kiel-to-kp"), 2)
    sent = [(i % 2, None if i % 5 == 0 else b"k%d" % i, b"value %d" % i, TS + 7 * i,
             [("n", b"%d" % i), ("e", b"")] if i % 2 else []) for i in range(40)]

    async def main() -> None:
        async with Producer(tansu_broker.bootstrap, compression="gzip", linger=0.01) as producer:
            await asyncio.gather(*(producer.produce(topic, value, key=key, partition=p,
                                                    timestamp=ts, headers=headers)
                                   for p, key, value, ts, headers in sent))

    run(main())
    consumer = KafkaConsumer(bootstrap_servers=tansu_broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        consumer.assign([KpTopicPartition(topic, 0), KpTopicPartition(topic, 1)])
        got = []
        for message in consumer:
            got.append((message.partition, message.key, message.value, message.timestamp,
                        message.timestamp_type, list(message.headers)))
            if len(got) == len(sent):
                break
    finally:
        consumer.close()
    assert sorted(got, key=repr) == sorted(
        [(p, k, v, ts, 0, h) for p, k, v, ts, h in sent], key=repr)


@pytest.mark.interop
def test_kiel_reads_what_kafka_python_writes(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("kp-to-kiel"), 1)
    producer = KafkaProducer(bootstrap_servers=tansu_broker.bootstrap, linger_ms=10,
                             compression_type="gzip")
    try:
        for i in range(25):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0,
                          timestamp_ms=TS + i, headers=[("i", b"%d" % i)])
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)

    assert_kiel_reads_the_numbered_records(tansu_broker, topic, 25)


def assert_kiel_reads_the_numbered_records(tansu_broker: Any, topic: str, count: int) -> None:
    """kiel reads back partition 0 of ``topic`` as another client wrote it:
    record ``i`` has key ``k<i>``, value ``v<i>``, CreateTime ``TS + i`` and
    the header ``("i", b"<i>")``."""

    async def main() -> List[Record]:
        async with SingleConsumer(tansu_broker.bootstrap, max_wait_time=0.2) as consumer:
            return await consume_n(consumer, topic, count)

    records = run(main())
    assert [(r.offset, r.key, r.value, r.timestamp, r.timestamp_type, r.headers)
            for r in records] == [
        (i, b"k%d" % i, b"v%d" % i, TS + i, 0, (("i", b"%d" % i),)) for i in range(count)]


@pytest.mark.interop
def test_confluent_kafka_reads_what_kiel_writes(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("kiel-to-ck"), 1)

    async def main() -> None:
        async with Producer(tansu_broker.bootstrap) as producer:
            await asyncio.gather(*(producer.produce(topic, b"v%d" % i, key=b"k%d" % i,
                                                    timestamp=TS + i,
                                                    headers=[("i", b"%d" % i)])
                                   for i in range(10)))

    run(main())
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": tansu_broker.bootstrap, "group.id": unique("ck"),
        "enable.auto.commit": False,
    })
    got = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            got.append((message.offset(), message.key(), message.value(),
                        message.timestamp(), message.headers()))
    finally:
        consumer.close()
    assert got == [(i, b"k%d" % i, b"v%d" % i, (1, TS + i), [("i", b"%d" % i)])
                   for i in range(10)]


@pytest.mark.interop
def test_kiel_reads_what_confluent_kafka_writes(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("ck-to-kiel"), 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": tansu_broker.bootstrap,
                                         "linger.ms": 10, "compression.type": "lz4"})
    for i in range(20):
        producer.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=0,
                         timestamp=TS + i, headers=[("i", b"%d" % i)])
    assert producer.flush(30) == 0

    assert_kiel_reads_the_numbered_records(tansu_broker, topic, 20)


@pytest.mark.interop
def test_aiokafka_reads_what_kiel_writes(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("kiel-to-aio"), 2)
    sent = [(i % 2, None if i % 4 == 0 else b"k%d" % i, b"value %d" % i, TS + 3 * i,
             [("n", b"%d" % i)] if i % 3 else []) for i in range(30)]

    async def main() -> List[Tuple[Any, ...]]:
        async with Producer(tansu_broker.bootstrap, compression="lz4", linger=0.01) as producer:
            await asyncio.gather(*(producer.produce(topic, value, key=key, partition=p,
                                                    timestamp=ts, headers=headers)
                                   for p, key, value, ts, headers in sent))
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=tansu_broker.bootstrap,
                                             auto_offset_reset="earliest",
                                             enable_auto_commit=False)
        await consumer.start()
        got: List[Tuple[Any, ...]] = []
        try:
            consumer.assign([aiokafka.TopicPartition(topic, 0), aiokafka.TopicPartition(topic, 1)])
            deadline = time.monotonic() + 30
            while len(got) < len(sent) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for messages in batches.values():
                    got.extend((m.partition, m.key, m.value, m.timestamp, m.timestamp_type,
                                list(m.headers)) for m in messages)
        finally:
            await consumer.stop()
        return got

    got = run(main())
    assert sorted(got, key=repr) == sorted(
        [(p, k, v, ts, 0, h) for p, k, v, ts, h in sent], key=repr)


@pytest.mark.interop
def test_kiel_reads_what_aiokafka_writes(tansu_broker: Any) -> None:
    topic = tansu_broker.create_topic(unique("aio-to-kiel"), 1)

    async def main() -> None:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=tansu_broker.bootstrap,
                                             linger_ms=10, compression_type="gzip")
        await producer.start()
        try:
            sends = [await producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0,
                                         timestamp_ms=TS + i, headers=[("i", b"%d" % i)])
                     for i in range(20)]
            await asyncio.gather(*sends)
        finally:
            await producer.stop()

    run(main())
    assert_kiel_reads_the_numbered_records(tansu_broker, topic, 20)


# --------------------------------------------------------------------------
# The grouped consumer on a current broker: a ZooKeeper only for the group


@pytest.mark.zookeeper
def test_grouped_consumer_on_tansu_with_a_zookeeper_only_for_the_group(
    tansu_broker: Any, zookeeper: Any
) -> None:
    """No broker registers in the group's ZooKeeper: the members take the
    partition counts from the brokers' metadata, split them, hand them over
    when a member joins, and commit with OffsetCommit v7 (a standalone
    member), read back with OffsetFetch v5 from the broker's storage."""
    from kiel.consumer import GroupedConsumer
    from kiel.consumer.offsets import GroupOffsets

    topic = tansu_broker.create_topic(unique("grouped"), 4)
    group = unique("g")
    hosts = f"{zookeeper.hosts}/{unique('kiel-groups')}"

    def member(name: str) -> GroupedConsumer:
        return GroupedConsumer(tansu_broker.bootstrap, group, zk_hosts=hosts, topics=[topic],
                               member_id=name, max_wait_time=0.2, commit_interval=None,
                               zk_session_timeout=6.0)

    async def main() -> None:
        async with producer_for(Target("tansu", tansu_broker.bootstrap, lambda *a: None)) as p:
            for i in range(40):
                await p.produce(topic, b"m%d" % i, partition=i % 4)
        seen: Dict[Tuple[int, int], int] = {}

        async def take(c: GroupedConsumer, until_total: int) -> None:
            deadline = time.monotonic() + 30
            while len(seen) < until_total and time.monotonic() < deadline:
                for r in await c.consume():
                    seen[(r.partition, r.offset)] = seen.get((r.partition, r.offset), 0) + 1

        a = member("a")
        await a.connect()
        assert a.member is not None and not a.member.topics_from_zookeeper
        assert a.assignment() == [TopicPartition(topic, p) for p in range(4)]
        await take(a, 20)
        await a.consume()  # finishes what the last call returned
        await a.commit()
        b = member("b")
        try:
            await asyncio.gather(b.connect(), take(a, 40))
            await until(lambda: len(a.assignment()) == 2 == len(b.assignment()), timeout=30,
                        what="two partitions each")
            await asyncio.gather(take(a, 40), take(b, 40))
            assert sorted(seen) == sorted((p, o) for p in range(4) for o in range(10))
        finally:
            await b.close()
            await a.close()
        async with Client(tansu_broker.bootstrap) as client:
            committed = await GroupOffsets(client.cluster, group).fetch(
                [TopicPartition(topic, p) for p in range(4)])
        # Closing commits what was finished: every record, in the broker.
        assert committed == {TopicPartition(topic, p): 10 for p in range(4)}

    run(main())


def test_partitions_from_is_checked() -> None:
    from kiel.consumer import GroupedConsumer

    with pytest.raises(ConfigError, match="partitions_from"):
        GroupedConsumer("127.0.0.1:1", "g", zk_hosts="127.0.0.1:2", topics=["t"],
                        partitions_from="kafka")


# --------------------------------------------------------------------------
# The decoder's magic-2 branch: bounded like the magic-0 one


def test_record_batches_decode_in_budgeted_slices() -> None:
    tp = TopicPartition("t", 0)
    data = b""
    base = 0
    # 40 batches of 100 records, one gzip batch among them: ~400 KiB.
    for b in range(40):
        builder = RecordBatchBuilder(CODEC_GZIP if b == 7 else 0)
        for i in range(100):
            builder.append(b"k", b"x" * 90 + b"%d" % (base + i), timestamp=TS + base + i,
                           headers=[("b", b"%d" % b)])
        batch = bytearray(builder.build())
        batch[0:8] = base.to_bytes(8, "big")  # the offsets a broker assigns
        data += bytes(batch)
        base += 100
    decoder = Decoder(max_fetch_size=1 << 24, decode_budget=0)

    def decode(state: PartitionState, answer: bytes) -> bool:
        """Decode the whole answer at once; whether it was a healthy round."""
        Decoder.received(state, answer, record_batches=True)
        asyncio.run(decoder.decode(state, 10**9))
        return state.answered and state.error is None

    state = PartitionState(tp, 150, 1 << 20)
    assert decode(state, data)
    assert decoder.yields >= 5  # a budget of 0 yields after every slice
    assert [r.offset for r in state.buffer] == list(range(150, 4000))
    first = state.buffer[0]
    assert (first.timestamp, first.timestamp_type, first.headers) == (TS + 150, 0, (("b", b"1"),))
    # Decoded on demand, a bounded number at a time, from where it stopped.
    state = PartitionState(tp, 150, 1 << 20)
    Decoder.received(state, data, record_batches=True)
    handed = []
    while True:
        asyncio.run(decoder.decode(state, 250))
        if not state.buffer:
            break
        assert len(state.buffer) <= 250 + decoder.peak_slice  # one slice past the ask at most
        handed.extend(r.offset for r in state.buffer)
        state.buffer, state.position = [], state.next_offset
    assert handed == list(range(150, 4000)) and state.error is None
    # A partial trailing batch is dropped, not an error; a first batch larger
    # than the answer grows the fetch size.
    state = PartitionState(tp, 0, 1 << 20)
    assert decode(state, data[:-10])
    assert state.buffer[-1].offset == 3899
    state = PartitionState(tp, 0, 1000)
    assert not decode(state, data[:900])
    assert state.fetch_size > 1000 and state.error is None
