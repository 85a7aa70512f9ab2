"""Peer members of the exactly-once proof (tests/producer/test_exactly_once.py):
a confluent-kafka or a kafka-python member doing examples/exactly_once.py's
work with its own client's API, in a process the test starts and kills::

    python -m tests.support.eos_peers {confluent,kafka-python} --bootstrap B \\
        --input IN --output OUT --group G --transactional-id NAME \\
        [--max-records N] [--pause S] [--dynamic]

(the example's own options after the peer's name).

Both run the loop each client's docs write for consume-transform-produce:
a static group member (``group.instance.id`` = NAME, as the example's;
dynamic with ``--dynamic``) that reads committed with auto commit off, and
one transactional producer (id = NAME, the same for each restart, so its
initialisation aborts what the killed life left open). Per batch: begin,
produce the outputs, hold the transaction open ``--pause`` seconds (a
window for the test's kills), send the batch's next offsets with the
consumer's group metadata (KIP-447), commit. A failed transaction is
aborted and the batch's partitions are sought back to its first offsets,
so their records are done again; a fenced producer (another process has
NAME) stops the member.

It prints ``NAME: joined`` once subscribed and stops on SIGTERM.
"""
import abc
import argparse
import signal
import sys
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Type, cast

#: The example's session timeout (a restarted dynamic member waits it out).
SESSION_TIMEOUT = 6.0

TopicPartition = Tuple[str, int]


class Record(NamedTuple):
    topic: str
    partition: int
    offset: int
    key: Optional[bytes]
    value: Optional[bytes]


def transform(value: Optional[bytes]) -> bytes:
    """The example's work on one record (examples/exactly_once.py)."""
    return b"out-" + (value or b"")


class Member(abc.ABC):
    """One client's consumer and transactional producer; the loop is :func:`serve`."""

    #: Errors after which the transaction is aborted and the batch done again.
    abortable: Tuple[Type[BaseException], ...] = ()
    #: The transactional producer; both clients name its calls as Java does.
    producer: Any
    #: The bound on commit_transaction and abort_transaction: confluent-kafka
    #: takes one; kafka-python's take none (they wait for the coordinator's
    #: answer; the test bounds the process).
    bound: Tuple[float, ...] = ()

    @abc.abstractmethod
    def poll(self) -> List[Record]:
        """Up to ``--max-records`` records; none after 0.2 s without any."""

    def begin(self) -> None:
        """Begin a transaction."""
        self.producer.begin_transaction()

    @abc.abstractmethod
    def produce(self, topic: str, key: Optional[bytes], value: bytes) -> None:
        """Write one record in the open transaction."""

    @abc.abstractmethod
    def send_offsets(self, offsets: Dict[TopicPartition, int]) -> None:
        """Add the input's next offsets, with the consumer's group metadata."""

    def commit(self) -> None:
        """Commit the open transaction."""
        self.producer.commit_transaction(*self.bound)

    def abort(self) -> None:
        """Abort the open transaction."""
        self.producer.abort_transaction(*self.bound)

    @abc.abstractmethod
    def fenced(self, error: BaseException) -> bool:
        """Whether ``error`` means another producer has this member's id."""

    @abc.abstractmethod
    def seek(self, offsets: Dict[TopicPartition, int]) -> None:
        """Seek those of ``offsets``' partitions this member still owns."""

    @abc.abstractmethod
    def close(self) -> None:
        """Leave the group and close both clients."""


class ConfluentMember(Member):
    """confluent-kafka (librdkafka), as confluent's own docs write the loop."""

    def __init__(self, options: argparse.Namespace) -> None:
        import confluent_kafka

        self.ck = confluent_kafka
        self.bound = (30.0,)
        self.abortable = (confluent_kafka.KafkaException,)
        self.max_records = options.max_records
        config = {
            "bootstrap.servers": options.bootstrap, "group.id": options.group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": int(SESSION_TIMEOUT * 1000),
            "partition.assignment.strategy": "range"}
        if not options.dynamic:
            config["group.instance.id"] = options.transactional_id
        self.consumer = confluent_kafka.Consumer(config)
        self.producer = confluent_kafka.Producer({"bootstrap.servers": options.bootstrap,
                                                  "transactional.id": options.transactional_id})
        self.producer.init_transactions(30)
        self.consumer.subscribe([options.input])

    def poll(self) -> List[Record]:
        # A message without an error has its topic, partition and offset.
        return [Record(cast(str, m.topic()), cast(int, m.partition()), cast(int, m.offset()),
                       m.key(), m.value())
                for m in self.consumer.consume(self.max_records, 0.2) if not m.error()]

    def produce(self, topic: str, key: Optional[bytes], value: bytes) -> None:
        self.producer.produce(topic, value, key=key)

    def send_offsets(self, offsets: Dict[TopicPartition, int]) -> None:
        self.producer.send_offsets_to_transaction(
            [self.ck.TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            self.consumer.consumer_group_metadata(), 30)

    def fenced(self, error: BaseException) -> bool:
        return bool(error.args and error.args[0].fatal())

    def seek(self, offsets: Dict[TopicPartition, int]) -> None:
        owned = {(tp.topic, tp.partition) for tp in self.consumer.assignment()}
        for (topic, partition), offset in offsets.items():
            if (topic, partition) in owned:
                self.consumer.seek(self.ck.TopicPartition(topic, partition, offset))

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(10)


class KafkaPythonMember(Member):
    """kafka-python 3, with its own API: ``KafkaConsumer(isolation_level=
    "read_committed")``, ``KafkaProducer(transactional_id=...)`` and
    ``send_offsets_to_transaction`` with ``consumer.group_metadata()``
    (generation, member id, instance id: KIP-447, so the coordinator
    refuses offsets of a member the group has moved past)."""

    def __init__(self, options: argparse.Namespace) -> None:
        import kafka
        import kafka.coordinator.assignors.range
        import kafka.errors

        self.kafka = kafka
        self.abortable = (kafka.errors.KafkaError,)
        self.max_records = options.max_records
        self.consumer = kafka.KafkaConsumer(
            bootstrap_servers=options.bootstrap, group_id=options.group,
            enable_auto_commit=False, auto_offset_reset="earliest",
            isolation_level="read_committed",
            group_instance_id=None if options.dynamic else options.transactional_id,
            session_timeout_ms=int(SESSION_TIMEOUT * 1000), heartbeat_interval_ms=1000,
            partition_assignment_strategy=[
                kafka.coordinator.assignors.range.RangePartitionAssignor])
        self.producer = kafka.KafkaProducer(bootstrap_servers=options.bootstrap,
                                            transactional_id=options.transactional_id)
        self.producer.init_transactions()
        self.consumer.subscribe([options.input])

    def poll(self) -> List[Record]:
        batches = self.consumer.poll(timeout_ms=200, max_records=self.max_records)
        return [Record(m.topic, m.partition, m.offset, m.key, m.value)
                for messages in batches.values() for m in messages]

    def produce(self, topic: str, key: Optional[bytes], value: bytes) -> None:
        self.producer.send(topic, value, key=key)

    def send_offsets(self, offsets: Dict[TopicPartition, int]) -> None:
        self.producer.send_offsets_to_transaction(
            {self.kafka.TopicPartition(t, p): self.kafka.OffsetAndMetadata(o, "", -1)
             for (t, p), o in offsets.items()},
            self.consumer.group_metadata())

    def fenced(self, error: BaseException) -> bool:
        return isinstance(error, self.kafka.errors.ProducerFencedError)

    def seek(self, offsets: Dict[TopicPartition, int]) -> None:
        owned = self.consumer.assignment()
        for (topic, partition), offset in offsets.items():
            tp = self.kafka.TopicPartition(topic, partition)
            if tp in owned:
                self.consumer.seek(tp, offset)

    def close(self) -> None:
        self.consumer.close()
        self.producer.close(10)


#: The peers by the name the test gives them.
PEERS: Dict[str, Callable[[argparse.Namespace], Member]] = {
    "confluent": ConfluentMember, "kafka-python": KafkaPythonMember}


def serve(member: Member, sink: str, name: str, pause: float, stop: List[int]) -> int:
    """Consume, transform, produce in transactions until ``stop`` is
    non-empty; returns the transactions committed."""
    committed = 0
    while not stop:
        records = member.poll()
        if not records:
            continue
        first: Dict[TopicPartition, int] = {}
        offsets: Dict[TopicPartition, int] = {}
        for record in records:
            first.setdefault((record.topic, record.partition), record.offset)
            offsets[(record.topic, record.partition)] = record.offset + 1
        member.begin()
        try:
            for record in records:
                member.produce(sink, record.key, transform(record.value))
            time.sleep(pause)  # a window for the test's kills
            member.send_offsets(offsets)
            member.commit()
        except member.abortable as e:
            if member.fenced(e):
                raise  # another process has this member's id: stop
            # Aborted: nothing of it counts. Do these records again.
            print(f"{name}: transaction aborted ({e!r}); again", file=sys.stderr, flush=True)
            member.abort()
            member.seek(first)
            continue
        committed += 1
    return committed


def main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", choices=sorted(PEERS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--max-records", type=int, default=100)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--dynamic", action="store_true")
    options = parser.parse_args(argv)
    name = options.transactional_id
    stop: List[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    member = PEERS[options.peer](options)
    print(f"{name}: joined", flush=True)
    try:
        done = serve(member, options.output, name, options.pause, stop)
    finally:
        member.close()
    print(f"{name}: stopped after {done} transactions", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
