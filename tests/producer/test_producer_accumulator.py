"""The accumulator on its own: pure bookkeeping driven by a fake clock, no
event loop, no broker."""
from typing import Dict, List, Optional, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st

from kiel.producer.accumulator import CLOCK_SLACK, RecordAccumulator
from kiel.protocol.messages import MESSAGE_OVERHEAD, decode_message_set, encode_message_set
from kiel.structs import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(clock: Clock, **options) -> RecordAccumulator:
    settings_ = dict(batch_size=1000, linger=0.0, max_request_size=10**6,
                     max_pending_bytes=10**6, codec=None)
    settings_.update(options)
    return RecordAccumulator(clock=clock, **settings_)


def leaders(mapping: Dict[TopicPartition, Optional[int]]):
    return lambda tp: mapping.get(tp)


def add(acc: RecordAccumulator, tp: TopicPartition, value: bytes, payload=None):
    return acc.append(acc.queue(tp), None, value, MESSAGE_OVERHEAD + len(value), payload)


def values(batches) -> List[bytes]:
    return [value for batch in batches for _, value in batch.records]


def test_a_new_batch_asks_for_a_drain_after_linger_or_at_once():
    clock = Clock()
    acc = make(clock, linger=0.5)
    assert add(acc, T0, b"a") == 100.5  # a batch opened: drain when it is due
    assert add(acc, T0, b"b") is None  # joined the open batch
    assert add(acc, T1, b"c") == 100.5
    eager = make(clock)
    assert add(eager, T0, b"a") == 100.0


def test_linger_holds_a_batch_until_it_is_due():
    clock = Clock()
    acc = make(clock, linger=0.5)
    add(acc, T0, b"a")
    drained = acc.drain(100.2, leaders({T0: 3}))
    assert drained.ready == {} and drained.next_due == 100.5
    clock.now = 100.4
    add(acc, T0, b"b")
    drained = acc.drain(100.5 - CLOCK_SLACK / 2, leaders({T0: 3}))  # a timer a bit early
    [(queue, batches)] = drained.ready[3]
    assert queue.tp == T0 and queue.in_flight and values(batches) == [b"a", b"b"]
    assert drained.next_due is None


def test_force_and_flush_close_open_batches():
    clock = Clock()
    acc = make(clock, linger=60)
    add(acc, T0, b"a")
    assert acc.drain(100, leaders({T0: 1}), force=True).ready[1][0][1][0].records == [(None, b"a")]
    add(acc, T1, b"b")
    acc.begin_flush()
    assert values(acc.drain(100, leaders({T1: 1})).ready[1][0][1]) == [b"b"]
    acc.end_flush()
    add(acc, T1, b"c")
    assert acc.drain(100, leaders({T1: 1})).ready == {}


def test_a_full_batch_closes_and_is_sent_at_once():
    clock = Clock()
    size = MESSAGE_OVERHEAD + 10
    acc = make(clock, batch_size=3 * size, linger=60)
    for i in range(7):
        due = add(acc, T0, b"%010d" % i)
        assert due == (100.0 if i in (3, 6) else 160.0 if i == 0 else None)
    drained = acc.drain(100, leaders({T0: 1}))
    [(queue, batches)] = drained.ready[1]
    assert [len(b.records) for b in batches] == [3, 3]  # the open one waits
    assert drained.next_due == 160.0  # the open batch's linger


def test_a_record_larger_than_batch_size_travels_alone():
    clock = Clock()
    acc = make(clock, batch_size=100)
    add(acc, T0, b"x" * 500)
    add(acc, T0, b"y")
    acc.begin_flush()
    [(_, batches)] = acc.drain(100, leaders({T0: 1})).ready[1]
    assert [values([b]) for b in batches] == [[b"x" * 500], [b"y"]]


def test_one_partition_one_request_in_flight():
    clock = Clock()
    acc = make(clock)
    add(acc, T0, b"a")
    [(queue, first)] = acc.drain(100, leaders({T0: 1})).ready[1]
    add(acc, T0, b"b")
    assert acc.drain(100, leaders({T0: 1})).ready == {}  # in flight
    queue.in_flight = False
    acc.complete(first[0])
    assert values(acc.drain(100, leaders({T0: 1})).ready[1][0][1]) == [b"b"]


def test_max_request_size_bounds_a_partitions_share():
    clock = Clock()
    size = MESSAGE_OVERHEAD + 100
    acc = make(clock, batch_size=size, max_request_size=2 * size)
    for i in range(5):
        add(acc, T0, b"%0100d" % i)
    acc.begin_flush()
    [(queue, batches)] = acc.drain(100, leaders({T0: 1})).ready[1]
    assert len(batches) == 2 and len(queue.ready) == 3


def test_requeue_puts_batches_back_in_front_after_their_backoff():
    clock = Clock()
    acc = make(clock, batch_size=MESSAGE_OVERHEAD + 1)
    for v in (b"a", b"b", b"c"):
        add(acc, T0, v)
    acc.begin_flush()
    [(queue, taken)] = acc.drain(100, leaders({T0: 1})).ready[1]
    assert values(taken) == [b"a", b"b", b"c"]
    queue.in_flight = False
    add(acc, T0, b"d")
    add(acc, T0, b"e")  # "d" is closed, waiting behind the batches in flight
    acc.requeue(queue, taken[1:], retry_at=101.0)
    acc.complete(taken[0])
    drained = acc.drain(100.5, leaders({T0: 1}))
    assert drained.ready == {} and drained.next_due == 101.0
    assert values(acc.drain(101.0, leaders({T0: 1})).ready[1][0][1]) == [b"b", b"c", b"d", b"e"]


def test_partitions_without_a_leader_come_back_unroutable():
    clock = Clock()
    acc = make(clock)
    add(acc, T0, b"a")
    add(acc, T1, b"b")
    drained = acc.drain(100, leaders({T0: 1, T1: None}))
    assert list(drained.ready) == [1]
    [(queue, batches)] = drained.unroutable
    assert queue.tp == T1 and not queue.in_flight and values(batches) == [b"b"]
    assert not queue.ready


def test_stale_partitions_wait_for_fresh_metadata():
    clock = Clock()
    acc = make(clock)
    add(acc, T0, b"a")
    acc.mark_stale(acc.queue(T0))
    assert acc.drain(100, leaders({T0: 1})).ready == {}
    acc.clear_stale()
    assert 1 in acc.drain(100, leaders({T0: 1})).ready


def test_pending_bytes_and_payloads():
    clock = Clock()
    acc = make(clock, max_pending_bytes=3 * (MESSAGE_OVERHEAD + 1))
    assert acc.has_room(10**9)  # nothing pending: even an oversized record fits
    for i, v in enumerate((b"a", b"b", b"c")):
        add(acc, T0, v, payload=i)
    assert acc.pending_bytes == 3 * (MESSAGE_OVERHEAD + 1) and acc.pending_records == 3
    assert not acc.has_room(1)
    [(_, [batch])] = acc.drain(100, leaders({T0: 1}), force=True).ready[1]
    assert acc.complete(batch) == [0, 1, 2]
    assert acc.complete(batch) == []  # twice is harmless
    assert acc.pending_bytes == 0 and acc.pending_records == 0 and acc.has_room(10**9)


def test_a_batch_finishes_once_whoever_finishes_it_again():
    # A timeout requeues a batch, then the first attempt's answer arrives
    # late and completes it: the retry must not send it again, and a second
    # completion (the retry's answer, a close) frees nothing twice.
    clock = Clock()
    acc = make(clock)
    add(acc, T0, b"a", payload="a")
    [(queue, [batch])] = acc.drain(100, leaders({T0: 1})).ready[1]
    queue.in_flight = False
    acc.requeue(queue, [batch], retry_at=100.0)
    add(acc, T0, b"b", payload="b")
    assert acc.complete(batch) == ["a"]  # the late answer
    assert acc.pending_bytes == MESSAGE_OVERHEAD + 1
    assert acc.complete(batch) == [] and acc.pending_bytes == MESSAGE_OVERHEAD + 1
    [(queue, taken)] = acc.drain(100, leaders({T0: 1})).ready[1]
    assert batch not in taken and values(taken) == [b"b"]  # "a" is not sent again
    queue.in_flight = False
    acc.requeue(queue, [batch], retry_at=100.0)  # a stale retry of it
    assert acc.drain(100, leaders({T0: None})).unroutable == []
    [later] = taken
    assert acc.complete(later) == ["b"] and acc.complete(later) == []
    assert acc.pending_bytes == 0 and acc.unfinished() == []


def test_a_finished_open_batch_takes_no_more_records():
    # close() fails every unfinished batch, the open ones too: a record
    # appended afterwards opens a new batch, and its bytes stay counted.
    clock = Clock()
    acc = make(clock, linger=60)
    add(acc, T0, b"a", payload="a")
    [open_batch] = acc.unfinished()
    assert acc.complete(open_batch) == ["a"] and acc.pending_bytes == 0
    add(acc, T0, b"b", payload="b")
    [fresh] = acc.unfinished()
    assert fresh is not open_batch and acc.pending_bytes == MESSAGE_OVERHEAD + 1
    assert acc.complete(fresh) == ["b"] and acc.pending_bytes == 0


def test_flush_bookkeeping_oldest_unfinished():
    clock = Clock()
    acc = make(clock)
    assert acc.last_seq == 0 and acc.oldest_unfinished() is None
    add(acc, T0, b"a")
    add(acc, T1, b"b")
    assert acc.last_seq == 2 and acc.oldest_unfinished() == 1
    [(_, [b0]), (_, [b1])] = sorted(acc.drain(100, leaders({T0: 1, T1: 1})).ready[1],
                                    key=lambda item: item[0].tp)
    acc.complete(b1)
    assert acc.oldest_unfinished() == 1 and acc.unfinished() == [b0]
    acc.complete(b0)
    assert acc.oldest_unfinished() is None


def test_a_batch_encodes_once_as_encode_message_set():
    clock = Clock()
    acc = make(clock)
    acc.append(acc.queue(T0), b"k", b"v", MESSAGE_OVERHEAD + 2, None)
    add(acc, T0, b"w")
    [(_, [batch])] = acc.drain(100, leaders({T0: 1})).ready[1]
    data = batch.encode(None)
    assert data == encode_message_set([(b"k", b"v"), (None, b"w")])
    assert len(data) == batch.size
    assert batch.encode(None) is data
    assert [r.value for r in decode_message_set(data).records] == [b"v", b"w"]


# ---------------------------------------------------------------------------
# A property: whatever the interleaving of appends, drains, acknowledgements,
# retries, late answers (an attempt that timed out and was retried is
# answered after all) and repeated completions, every record is delivered
# once, each partition's records in append order (retries included), and
# pending bytes are never negative: always the sizes of the unfinished
# batches.

steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from([T0, T1]), st.integers(0, 60)),
        st.tuples(st.just("drain"), st.floats(0, 0.3), st.booleans()),
        st.tuples(st.just("settle"), st.booleans(), st.floats(0, 0.2)),
        st.tuples(st.just("late"), st.integers(0, 10)),
        st.tuples(st.just("again"), st.integers(0, 10)),
    ),
    max_size=80,
)


@given(steps, st.integers(30, 300), st.sampled_from([0.0, 0.05]), st.booleans())
@settings(max_examples=300, deadline=None)
def test_every_record_goes_out_once_in_order(script, batch_size, linger, one_batch):
    clock = Clock()
    # one_batch: a partition sends one batch per request, the rest waits.
    acc = make(clock, batch_size=batch_size, linger=linger,
               max_request_size=batch_size if one_batch else 400)
    leader_of = leaders({T0: 1, T1: 2})
    appended: Dict[TopicPartition, List[int]] = {T0: [], T1: []}
    delivered: Dict[TopicPartition, List[int]] = {T0: [], T1: []}
    in_flight: List[Tuple] = []
    retried: List[Tuple] = []  # attempts that failed and may still be answered
    finished: List = []
    n = 0

    def complete(tp: TopicPartition, batches) -> None:
        for batch in batches:
            delivered[tp].extend(acc.complete(batch))
            finished.append(batch)

    def settle(ok: bool, backoff: float) -> None:
        queue, batches = in_flight.pop(0)
        queue.in_flight = False
        if ok:
            complete(queue.tp, batches)
        else:
            acc.requeue(queue, batches, clock.now + backoff)
            retried.append((queue, batches))

    for step in script:
        if step[0] == "append":
            _, tp, length = step
            add(acc, tp, b"x" * length, payload=n)
            appended[tp].append(n)
            n += 1
        elif step[0] == "drain":
            clock.now += step[1]
            for items in acc.drain(clock.now, leader_of, force=step[2]).ready.values():
                in_flight.extend(items)
        elif step[0] == "settle":
            if in_flight:
                settle(step[1], step[2])
        elif step[0] == "late":
            if retried:
                queue, batches = retried.pop(step[1] % len(retried))
                complete(queue.tp, batches)
        elif finished:  # "again": a batch completed a second time
            batch = finished[step[1] % len(finished)]
            assert acc.complete(batch) == []
        unfinished = acc.unfinished()
        assert not any(batch.done for batch in unfinished)
        assert acc.pending_bytes == sum(batch.size for batch in unfinished) >= 0
        expected = sum(MESSAGE_OVERHEAD + len(r[1]) for b in unfinished for r in b.records)
        assert acc.pending_bytes == expected
    acc.begin_flush()
    while acc.unfinished():
        clock.now += 1.0
        for items in acc.drain(clock.now, leader_of).ready.values():
            in_flight.extend(items)
        while in_flight:
            settle(True, 0.0)
    assert delivered == appended
    assert acc.pending_bytes == 0


@settings(max_examples=60, deadline=None)
@given(
    first=st.lists(st.integers(0, 1500), max_size=5),
    bulk=st.lists(st.integers(0, 1500), max_size=40),
    batch_size=st.integers(1, 3000),
)
def test_extend_batches_records_as_appending_them_one_by_one(first, bulk, batch_size):
    # extend() (produce_many's path) splits records into batches exactly as
    # append() per record does, after records appended before it too; its
    # records carry no payload (None), counted in ``bare``.
    clock = Clock()
    one, many = make(clock, batch_size=batch_size), make(clock, batch_size=batch_size)
    for size in first:
        add(one, T0, b"f" * size, "p")
        add(many, T0, b"f" * size, "p")
    bulk_values = [b"%d" % i + b"x" * size for i, size in enumerate(bulk)]
    dues = [add(one, T0, value) for value in bulk_values]
    due = many.extend(many.queue(T0), bulk_values,
                      [MESSAGE_OVERHEAD + len(v) for v in bulk_values])
    opened = [d for d in dues if d is not None]
    assert due == (min(opened) if opened else None)
    assert one.pending_bytes == many.pending_bytes
    expected, got = one.unfinished(), many.unfinished()
    assert [(b.records, b.size, b.payloads) for b in got] == [
        (b.records, b.size, b.payloads) for b in expected]
    assert sum(b.bare for b in got) == len(bulk)


@given(st.lists(st.one_of(
    st.tuples(st.just("append"), st.one_of(st.none(), st.binary(max_size=4)),
              st.binary(max_size=8)),
    st.tuples(st.just("extend"), st.lists(st.binary(max_size=8), max_size=5)),
), max_size=30))
@settings(max_examples=100, deadline=None)
def test_keyed_unkeyed_and_extended_records_keep_their_keys(steps):
    # A batch holds no key list until its first keyed record; from then on
    # every record (appended or extended) must line up with its own key, in
    # both encodings.
    from kiel.protocol.record_batch import decode_record_batches

    acc = make(Clock(), batch_size=10**6)
    queue = acc.queue(T0)
    expected: List[Tuple[Optional[bytes], bytes]] = []
    for step in steps:
        if step[0] == "append":
            _, key, value = step
            size = MESSAGE_OVERHEAD + len(value) + len(key or b"")
            acc.append(queue, key, value, size, "p")
            expected.append((key, value))
        else:
            values = step[1]
            acc.extend(queue, values, [MESSAGE_OVERHEAD + len(v) for v in values])
            expected.extend((None, v) for v in values)
    batches = acc.unfinished()
    assert [pair for batch in batches for pair in batch.records] == expected
    for batch in batches:
        got = decode_message_set(batch.encode(None)).records
        assert [(r.key, r.value) for r in got] == batch.records
        got = decode_record_batches(batch.encode(None, record_batch=True), "t", 0).records
        assert [(r.key, r.value) for r in got] == batch.records
