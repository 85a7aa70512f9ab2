"""Throughput of the embedded 0.8.2 broker serving one client.

The cluster runs in a subprocess (``ClusterProcess``, i.e. ``python -m
kiel.testing serve``) so the broker does not share this client's GIL. The
client is a minimal raw-socket one: it sends pre-encoded requests and reads
frames with ``recv_into``, doing as little work as possible so the numbers are
the broker's, not the client's.

* produce: pre-encoded batches of ``BATCH`` messages (100-byte values),
  acks=1, ``DEPTH`` requests in flight; the broker checks every CRC, patches
  every offset and appends.
* fetch: the whole partition read back with 1 MiB ``max_bytes`` fetches;
  the broker bisects its index and slices the stored bytes.
* kafka-python: the same partition consumed by kafka-python (client-bound,
  for scale).

Prints only::

    .venv/bin/python benchmarks/bench_broker.py [messages]
"""
import socket
import struct
import sys
import time

from kiel.protocol import (
    FetchPartitionData,
    FetchRequest,
    FetchTopicData,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from kiel.protocol.framing import ClientFraming
from kiel.protocol.messages import encode_message_set
from kiel.testing.broker import ClusterProcess

BATCH = 1000
DEPTH = 4
VALUE = b"v" * 100
ENTRY = 12 + 14 + len(VALUE)  # offset + size, message header, value (null key)
TOPIC = "bench"

_size = struct.Struct(">i")
_partition_header = struct.Struct(">ihqi")


class Wire:
    """Frames out, frames in, over one blocking socket."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray(8 * 1024 * 1024)
        self.framing = ClientFraming(client_id="bench")

    def frame(self, request) -> bytes:
        return self.framing.send_request(request)[1]

    def read_frame(self) -> memoryview:
        view = memoryview(self.buf)
        self._read_exactly(view[:4])
        (size,) = _size.unpack_from(self.buf, 0)
        if size > len(self.buf):
            self.buf = bytearray(size)
            view = memoryview(self.buf)
        self._read_exactly(view[:size])
        return view[:size]

    def _read_exactly(self, view: memoryview) -> None:
        got = 0
        while got < len(view):
            n = self.sock.recv_into(view[got:])
            if not n:
                raise ConnectionError("broker closed the connection")
            got += n


def bench_produce(address: str, messages: int) -> float:
    wire = Wire(address)
    message_set = encode_message_set([(None, VALUE)] * BATCH)
    frame = wire.frame(ProduceRequest(1, 10000, [ProduceTopicData(TOPIC, [
        ProducePartitionData(0, message_set)])]))
    batches = messages // BATCH
    started = time.perf_counter()
    in_flight = 0
    for _ in range(batches):
        wire.sock.sendall(frame)
        in_flight += 1
        if in_flight == DEPTH:
            wire.read_frame()
            in_flight -= 1
    while in_flight:
        wire.read_frame()
        in_flight -= 1
    elapsed = time.perf_counter() - started
    total = batches * len(message_set)
    print(f"produce  raw client  acks=1 depth={DEPTH}: {batches * BATCH / elapsed:12,.0f} msg/s"
          f"  {total / elapsed / 1e6:8.1f} MB/s  ({batches} batches of {BATCH})")
    wire.sock.close()
    return elapsed


def bench_fetch(address: str, messages: int) -> None:
    wire = Wire(address)
    offset = 0
    fetched_bytes = 0
    requests = 0
    topic_len = len(TOPIC)
    header_at = 4 + 4 + 2 + topic_len + 4  # corr id, topics count, topic, partitions count
    started = time.perf_counter()
    while offset < messages:
        wire.sock.sendall(wire.frame(FetchRequest(-1, 0, 0, [FetchTopicData(TOPIC, [
            FetchPartitionData(0, offset, 1024 * 1024)])])))
        frame = wire.read_frame()
        _, error, _, size = _partition_header.unpack_from(frame, header_at)
        if error:
            raise RuntimeError(f"fetch error {error}")
        offset += size // ENTRY  # fixed-size messages: whole ones in this response
        fetched_bytes += size
        requests += 1
    elapsed = time.perf_counter() - started
    print(f"fetch    raw client  1 MiB fetches    : {offset / elapsed:12,.0f} msg/s"
          f"  {fetched_bytes / elapsed / 1e6:8.1f} MB/s  ({requests} fetches)")
    wire.sock.close()


def bench_kafka_python(bootstrap: str, messages: int) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=(0, 8, 2),
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             fetch_max_bytes=1024 * 1024, max_partition_fetch_bytes=1024 * 1024,
                             max_poll_records=100000)
    consumer.assign([TopicPartition(TOPIC, 0)])
    count = 0
    started = time.perf_counter()
    while count < messages:
        for records in consumer.poll(timeout_ms=1000).values():
            count += len(records)
    elapsed = time.perf_counter() - started
    consumer.close()
    print(f"fetch    kafka-python consumer     : {count / elapsed:12,.0f} msg/s"
          f"  {count * ENTRY / elapsed / 1e6:8.1f} MB/s  (client-bound)")


def main() -> None:
    messages = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    started = time.perf_counter()
    with ClusterProcess(brokers=1, topics={TOPIC: 1}) as cluster:
        print(f"cluster process ready in {time.perf_counter() - started:.2f} s "
              f"({cluster.bootstrap})")
        address = cluster.brokers[0]
        bench_produce(address, messages)
        bench_fetch(address, messages)
        bench_fetch(address, messages)
        bench_kafka_python(cluster.bootstrap, min(messages, 200_000))


if __name__ == "__main__":
    main()
