"""Futures nobody holds are dropped when their batch closes (issue 34,
second round): the records are still sent, counted by flush() and, when they
fail, listed there (with ``future=None``); a future anybody holds, or that
has a done callback, is kept and resolved as before.

Why: a loop that drops the futures it is given kept them alive until their
acknowledgement, long enough for the garbage collector's full collections to
scan them all (a fifth of the producer's CPU, and 10-40 ms pauses of the loop).
"""
import asyncio
import gc
import weakref
from typing import Any, List

from kiel.exc import ClientClosedError, DeliveryUnknownError
from kiel.producer import Producer
from kiel.producer.accumulator import RecordAccumulator
from kiel.producer.sender import unheld
from kiel.protocol.messages import MESSAGE_OVERHEAD
from kiel.structs import TopicPartition
from tests.conftest import run
from tests.support.producer import read_back

T0 = TopicPartition("t", 0)


def _accumulator(**options: Any) -> RecordAccumulator:
    settings = dict(batch_size=3 * (MESSAGE_OVERHEAD + 1), linger=10.0, max_request_size=10**6,
                    max_pending_bytes=10**6, codec=None, clock=lambda: 100.0, unheld=unheld,
                    one_batch=True)
    settings.update(options)
    return RecordAccumulator(**settings)  # type: ignore[arg-type]


def test_a_closed_batch_drops_payloads_only_it_holds():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        acc = _accumulator()
        queue = acc.queue(T0)
        refs = []
        for _ in range(3):  # fills the first batch
            future = loop.create_future()
            refs.append(weakref.ref(future))
            acc.append(queue, None, b"x", MESSAGE_OVERHEAD + 1, future)
            del future
        first = queue.open
        assert first is not None and first.bare == 0
        kept = loop.create_future()
        acc.append(queue, None, b"y", MESSAGE_OVERHEAD + 1, kept)  # closes the first
        assert [ref() for ref in refs] == [None, None, None]
        assert first.payloads == [None, None, None] and first.bare == 3
        assert acc.pending_records == 4
        # The second batch holds a future somebody keeps: it stays, with
        # the one nobody holds next to it, when the batch closes by linger.
        loose = loop.create_future()
        acc.append(queue, None, b"z", MESSAGE_OVERHEAD + 1, loose)
        loose_ref = weakref.ref(loose)
        del loose
        drained = acc.drain(200.0, lambda tp: 1)
        [(_, [batch])] = drained.ready[1]  # the two batches joined, never sent
        assert batch.payloads == [None, None, None, kept, loose_ref()]
        assert batch.bare == 3

    run(main())


def test_a_future_with_a_callback_is_kept():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        acc = _accumulator()
        queue = acc.queue(T0)
        seen: List[Any] = []
        for i in range(3):
            future = loop.create_future()
            if i == 1:
                future.add_done_callback(seen.append)
            acc.append(queue, None, b"x", MESSAGE_OVERHEAD + 1, future)
            del future
        first = queue.open
        acc.append(queue, None, b"y", MESSAGE_OVERHEAD + 1, loop.create_future())
        assert first is not None and first.bare == 0
        assert all(isinstance(f, asyncio.Future) for f in first.payloads)

    run(main())


def test_without_the_predicate_payloads_stay():
    async def main() -> None:
        loop = asyncio.get_running_loop()
        acc = _accumulator(unheld=None)
        queue = acc.queue(T0)
        for _ in range(4):
            acc.append(queue, None, b"x", MESSAGE_OVERHEAD + 1, loop.create_future())
        assert queue.ready[0].bare == 0 and None not in queue.ready[0].payloads

    run(main())


def test_dropped_futures_die_when_their_batch_closes_and_their_records_are_written(
        kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    n = 2000

    async def main() -> Any:
        async with Producer(kafka_cluster.bootstrap, batch_size=1024, linger=5.0) as p:
            await p.connect()
            gc.disable()  # only reference counts may free them
            try:
                refs = []
                seen: List[int] = []
                kept = []
                for i in range(n):
                    future = p.produce(topic, b"v%05d" % i)
                    refs.append(weakref.ref(future))
                    if i % 500 == 3:
                        kept.append(future)
                    if i % 500 == 7:
                        future.add_done_callback(lambda f: seen.append(f.result().offset))
                    del future
                # Nothing was sent yet (linger 5 s, no turn given): the
                # batches that closed full dropped the futures nobody holds.
                alive = [i for i, ref in enumerate(refs) if ref() is not None]
                held = {i for i in range(n) if i % 500 in (3, 7)}
                assert held <= set(alive)
                assert len(alive) < n // 5, len(alive)
                report = await p.flush()
                await asyncio.sleep(0)  # the callbacks' turn
            finally:
                gc.enable()
            return report, [f.result().offset for f in kept], sorted(seen)

    report, kept_offsets, seen = run(main())
    assert (report.delivered, report.failed) == (n, 0)
    assert kept_offsets == [3, 503, 1003, 1503]
    assert seen == [7, 507, 1007, 1507]
    got = read_back(kafka_cluster.bootstrap, topic, 0, n)
    assert [m.value for m in got] == [b"v%05d" % i for i in range(n)]


def test_a_dropped_future_that_fails_is_listed_without_it(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main() -> Any:
        p = Producer(kafka_cluster.bootstrap, batch_size=1024, linger=30.0)
        await p.connect()
        kept = [p.produce(topic, b"v%03d" % i) for i in range(3)]
        for i in range(300):
            p.produce(topic, b"w%03d" % i)
        # Closed with no time to flush before anything was sent (no turn
        # given, a long linger): every record fails (never sent, or sent
        # and unanswered), and is reported.
        await p.close(timeout=0)
        return kept, await p.flush()

    kept, report = run(main())
    assert (report.delivered, report.failed) == (0, 303)
    errors = {type(f.error) for f in report.failures}
    assert errors <= {ClientClosedError, DeliveryUnknownError}, errors
    listed = [f.future for f in report.failures if f.future is not None]
    assert all(future in listed for future in kept)
    # The batches that closed full had nobody's futures: listed without one.
    assert sum(f.future is None for f in report.failures) >= 200
    for future in kept:
        assert isinstance(future.exception(), (ClientClosedError, DeliveryUnknownError))
