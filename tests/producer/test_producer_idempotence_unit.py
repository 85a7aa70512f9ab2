"""The idempotent producer's pure parts: several batches of a partition in
flight, their order over retries, and their numbering (no broker, a fake
clock). The behaviour against a broker is in test_idempotent_producer.py."""
import struct

from kiel.producer.accumulator import RecordAccumulator
from kiel.producer.idempotence import SEQUENCE_LIMIT, Idempotence
from kiel.producer.sender import _requests
from kiel.protocol.messages import MESSAGE_OVERHEAD
from kiel.protocol.record_batch import BatchHeader, decode_record_batches
from kiel.structs import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
ONE = MESSAGE_OVERHEAD + 1  # a batch per one-byte record


def make(**options) -> RecordAccumulator:
    settings = dict(batch_size=ONE, linger=0.0, max_request_size=10**6,
                    max_pending_bytes=10**6, codec=None, clock=lambda: 100.0,
                    max_in_flight=5)
    settings.update(options)
    return RecordAccumulator(**settings)


def add(acc: RecordAccumulator, tp: TopicPartition, value: bytes) -> None:
    acc.append(acc.queue(tp), None, value, MESSAGE_OVERHEAD + len(value), None)


def taken(drained, leader=1):
    return [(queue.tp, [b.values[0] for b in batches])
            for queue, batches in drained.ready.get(leader, [])]


def test_up_to_five_requests_of_a_partition_one_batch_each() -> None:
    acc = make()
    queue = acc.queue(T0)
    sent = []
    for i in range(6):
        add(acc, T0, b"%d" % i)
        sent.append(taken(acc.drain(100, lambda tp: 1, force=True)))
    assert sent == [[(T0, [b"%d" % i])] for i in range(5)] + [[]]  # the sixth waits
    assert queue.in_flight == 5
    queue.in_flight -= 1
    assert taken(acc.drain(100, lambda tp: 1)) == [(T0, [b"5"])]


def test_batches_that_waited_go_as_one_batch_their_times_kept() -> None:
    clock = [100.0]
    acc = make(clock=lambda: clock[0])
    for i in range(4):
        add(acc, T0, b"%d" % i)
    acc.append(acc.queue(T0), b"key", b"4", MESSAGE_OVERHEAD + 4, "payload",
               timestamp=1234, headers=(("h", b"v"),))
    batches = list(acc.queue(T0).ready) + [acc.queue(T0).open]
    for n, batch in enumerate(batches):
        batch.wall = 1000 + 10 * (n // 2)  # pairs of batches opened in the same ms
    [(queue, [joined])] = acc.drain(100, lambda tp: 1, force=True).ready[1]
    assert joined.values == [b"0", b"1", b"2", b"3", b"4"]
    assert joined.keys == [None, None, None, None, b"key"]
    assert joined.payloads == [None, None, None, None, "payload"]
    assert all(b.done for b in batches[1:]) and acc.pending_records == 5
    records = decode_record_batches(joined.encode(None, True)).records
    assert [r.timestamp for r in records] == [1000, 1000, 1010, 1010, 1234]
    assert records[4].headers == (("h", b"v"),) and records[4].key == b"key"
    assert acc.complete(joined) == joined.payloads or acc.pending_bytes == 0


def test_batches_put_back_go_again_in_produce_order_once_the_partition_settled() -> None:
    acc = make()
    queue = acc.queue(T0)
    batches = []
    for i in range(4):
        add(acc, T0, b"%d" % i)
        [(_, [batch])] = acc.drain(100, lambda tp: 1, force=True).ready[1]
        batches.append(batch)
    # The answers fail out of order: the third, then the second.
    queue.in_flight -= 1
    acc.requeue(queue, [batches[2]], 100)
    queue.in_flight -= 1
    acc.requeue(queue, [batches[1]], 100)
    assert [b.values[0] for b in queue.ready] == [b"1", b"2"]
    # Held: the first and the fourth are still out.
    assert acc.drain(100, lambda tp: 1).ready == {}
    queue.in_flight -= 1
    acc.complete(batches[0])
    assert acc.drain(100, lambda tp: 1).ready == {}
    queue.in_flight -= 1
    acc.requeue(queue, [batches[3]], 100)
    # Sent before: each goes again alone, with its own numbers.
    assert taken(acc.drain(100, lambda tp: 1)) == [(T0, [b"1"]), (T0, [b"2"]), (T0, [b"3"])]


def test_batches_are_numbered_per_partition_and_keep_their_numbers() -> None:
    acc = make(batch_size=3 * ONE, max_request_size=3 * ONE)  # too small to join batches
    idem = Idempotence(required=False)
    idem.enabled, idem.producer_id, idem.producer_epoch = True, 42, 7
    for i in range(5):
        add(acc, T0, b"%d" % i)
        add(acc, T1, b"%d" % i)
    q0, q1 = acc.queue(T0), acc.queue(T1)
    drained = acc.drain(100, lambda tp: 1, force=True)
    for queue, batches in drained.ready[1]:
        for batch in batches:
            idem.number(queue, batch)
    b0 = [batches[0] for queue, batches in drained.ready[1] if queue is q0]
    assert [(b.base_sequence, len(b.values)) for b in b0] == [(0, 3), (3, 2)]
    assert q0.next_sequence == 5 and q1.next_sequence == 5
    assert list(q0.unacked) == b0
    assert not idem.earlier_unacked(q0, b0[0]) and idem.earlier_unacked(q0, b0[1])
    idem.number(q0, b0[0])  # a retry: same numbers
    assert b0[0].base_sequence == 0 and q0.next_sequence == 5
    header = BatchHeader._make(struct.unpack_from(">qiibIhiqqqhii", b0[1].encode(None, True)))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 7, 3)
    acc.complete(b0[0])
    assert list(q0.unacked) == [b0[1]]
    # A new identity: numbered again from 0.
    idem.producer_id = 43
    q0.next_sequence = 0
    q0.unacked.clear()
    idem.number(q0, b0[1])
    assert (b0[1].producer_id, b0[1].base_sequence) == (43, 0)


def test_sequences_wrap_past_the_largest_int32() -> None:
    acc = make(batch_size=2 * ONE)
    idem = Idempotence(required=False)
    idem.enabled, idem.producer_id, idem.producer_epoch = True, 1, 0
    queue = acc.queue(T0)
    queue.next_sequence = SEQUENCE_LIMIT - 1
    add(acc, T0, b"a")
    add(acc, T0, b"b")
    [(_, [batch])] = acc.drain(100, lambda tp: 1, force=True).ready[1]
    idem.number(queue, batch)
    assert batch.base_sequence == SEQUENCE_LIMIT - 1 and queue.next_sequence == 1


def test_a_request_carries_a_partition_once_in_rounds() -> None:
    acc = make(max_request_size=ONE)  # too small to join batches
    for i in range(3):
        add(acc, T0, b"a%d" % i)
    add(acc, T1, b"b0")
    items = acc.drain(100, lambda tp: 1, force=True).ready[1]
    # Partitions come in any order (the accumulator keeps a set of them).
    chunks = [sorted((q.tp, batches[0].values[0]) for q, batches in chunk)
              for chunk in _requests(items, 10**6)]
    assert chunks == [[(T0, b"a0"), (T1, b"b0")], [(T0, b"a1")], [(T0, b"a2")]]


class Answers:
    """Stands in for the cluster's ``send_any``: records each InitProducerId
    request (built for the given versions) and answers from a list."""

    def __init__(self, versions: dict, *answers: tuple) -> None:
        from kiel.protocol.versions import Versions

        self.versions = Versions(versions, "ApiVersions")
        self.answers = list(answers)
        self.requests: list = []

    async def send_any(self, build, timeout=None):
        from kiel.protocol.init_producer_id import InitProducerIdResponseV2

        self.requests.append(build(self.versions))
        return InitProducerIdResponseV2(0, *self.answers.pop(0))


def acquire(idem: Idempotence, answers: Answers) -> None:
    import asyncio

    asyncio.run(idem.acquire(answers, 1.0))  # type: ignore[arg-type]


def test_a_renewal_bumps_the_epoch_where_the_broker_allows_it() -> None:
    idem = Idempotence(required=False)
    answers = Answers({22: 4}, (0, 7, 0), (0, 7, 1))
    acquire(idem, answers)
    assert (idem.enabled, idem.producer_id, idem.producer_epoch) == (True, 7, 0)
    first = answers.requests[0]
    assert (first.transactional_id, first.producer_id, first.producer_epoch) == (None, -1, -1)
    idem.renew = True
    acquire(idem, answers)
    bump = answers.requests[1]
    assert (bump.producer_id, bump.producer_epoch) == (7, 0)  # KIP-360: the current ones
    assert (idem.producer_id, idem.producer_epoch, idem.renew, idem.renewals) == (7, 1, False, 1)


def test_a_refused_bump_takes_a_new_producer_id() -> None:
    idem = Idempotence(required=False)
    answers = Answers({22: 5}, (0, 7, 0), (-1, -1, -1), (0, 8, 0))
    acquire(idem, answers)
    acquire(idem, answers)
    assert [(r.producer_id, r.producer_epoch) for r in answers.requests] == [
        (-1, -1), (7, 0), (-1, -1)]
    assert (idem.producer_id, idem.producer_epoch, idem.renewals) == (8, 0, 1)


def test_v2_cannot_bump_and_asks_for_a_new_id() -> None:
    idem = Idempotence(required=False)
    answers = Answers({22: 2}, (0, 7, 0), (0, 9, 0))
    acquire(idem, answers)
    acquire(idem, answers)
    assert not hasattr(answers.requests[1], "producer_id") and idem.producer_id == 9


def test_without_init_producer_id_idempotence_is_off_or_an_error() -> None:
    import pytest

    from kiel.exc import ClusterAuthorizationFailedError, UnsupportedFeatureError

    idem = Idempotence(required=False)
    acquire(idem, Answers({0: 3}))
    assert idem.enabled is False and idem.ready
    with pytest.raises(UnsupportedFeatureError, match="idempotent=True"):
        acquire(Idempotence(required=True), Answers({0: 3}))
    with pytest.raises(ClusterAuthorizationFailedError):
        acquire(Idempotence(required=False), Answers({22: 4}, (31, -1, -1)))


def test_a_numbered_batch_is_kafka_pythons_byte_for_byte() -> None:
    """kafka-python 3 builds record batches from Kafka's definitions: the
    same records with the same producer id, epoch and base sequence give the
    same bytes (CRC included), but for the partition leader epoch, which a
    producer leaves to the broker: kiel writes -1 as the Java client does,
    kafka-python 0."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    acc = make(batch_size=10**6)
    queue = acc.queue(T0)
    pairs = ((b"k0", b"v0"), (None, b"v1"), (b"k2", None))
    for key, value in pairs:
        acc.append(queue, key, value, MESSAGE_OVERHEAD + 4, None)
    [(queue, [batch])] = acc.drain(100, lambda tp: 1, force=True).ready[1]
    batch.wall = 1700000000000
    idem = Idempotence(required=True)
    idem.enabled, idem.producer_id, idem.producer_epoch = True, 42, 7
    queue.next_sequence = 3
    idem.number(queue, batch)
    ours = bytearray(batch.encode(None, True))
    theirs = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=42,
        producer_epoch=7, base_sequence=3, batch_size=10**6)
    for offset, (key, value) in enumerate(pairs):
        theirs.append(offset, timestamp=1700000000000, key=key, value=value, headers=[])
    assert struct.unpack_from(">i", ours, 12) == (-1,)
    struct.pack_into(">i", ours, 12, 0)  # the partition leader epoch, outside the CRC
    assert bytes(ours) == bytes(theirs.build())
