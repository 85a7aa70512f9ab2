"""Producer under faults injected into the embedded cluster: leader moves,
broker restarts, killed connections, hangs, error codes, a full buffer."""
import asyncio
from typing import Any, Dict, List, Tuple

import pytest

from kiel.exc import (
    BufferFullError,
    ClientClosedError,
    DeliveryUnknownError,
    KielConnectionError,
    KielError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
    RequestTimedOutError,
    RequestTimeoutError,
    UnknownPartitionError,
)
from kiel.producer import Producer, RecordMetadata
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.support.producer import in_thread, read_back
from tests.support.waiting import until


def check_acknowledged(cluster: Any, topic: str, acked: List[Tuple[RecordMetadata, bytes]]) -> None:
    """Every acknowledged record is in the log at the offset it was given."""
    by_partition: Dict[int, Dict[int, bytes]] = {}
    for meta, value in acked:
        assert meta.topic == topic
        by_partition.setdefault(meta.partition, {})[meta.offset] = value
    for partition, expected in by_partition.items():
        end = cluster.offsets(topic, partition)[1]
        records = read_back(cluster.bootstrap, topic, partition, end, timeout=120)
        log = {m.offset: m.value for m in records}
        missing = [o for o in expected if log.get(o) != expected[o]]
        assert not missing, f"partition {partition}: {len(missing)} acknowledged records lost"


def other_broker(cluster: Any, broker_id: int) -> int:
    return next(b for b in cluster.broker_ids if b != broker_id)


# --------------------------------------------------------------------------
# leader moves and restarts


def test_leader_move_during_produce_loses_nothing(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    n = 20000

    async def main():
        async with Producer(kafka_cluster.bootstrap, batch_size=2048) as p:
            values = [b"m-%d" % i for i in range(n)]
            futures = []
            for i, value in enumerate(values):
                futures.append(await p.enqueue(topic, value))
                if i == n // 4:
                    await asyncio.wait([futures[0]])
                    old = kafka_cluster.leader(topic, 0)
                    await in_thread(kafka_cluster.move_leader, topic, 0,
                                    other_broker(kafka_cluster, old))
                if i % 500 == 0:
                    await asyncio.sleep(0)
            results = await asyncio.gather(*futures)
            return list(zip(results, values))

    acked = run(main())
    assert len(acked) == n
    check_acknowledged(kafka_cluster, topic, acked)
    # Order within each partition is produce order, across the move too.
    for partition in range(3):
        offsets = [m.offset for m, _ in acked if m.partition == partition]
        assert offsets == sorted(offsets)


@pytest.mark.slow
def test_broker_restart_during_large_produce_loses_no_acknowledged_message(
    kafka_cluster, topic_factory
):
    topic = topic_factory(partitions=3)
    n = 100000

    async def main():
        acked: List[Tuple[RecordMetadata, bytes]] = []
        failed: List[BaseException] = []

        def record(value: bytes):
            def done(future: "asyncio.Future[RecordMetadata]") -> None:
                if future.exception() is None:
                    acked.append((future.result(), value))
                else:
                    failed.append(future.exception())
            return done

        async with Producer(kafka_cluster.bootstrap, retries=10, max_backoff=1.0,
                            request_timeout=10) as p:
            victim = kafka_cluster.leader(topic, 1)
            for i in range(n):
                value = b"restart-%d" % i
                future = await p.enqueue(topic, value)
                future.add_done_callback(record(value))
                if i == n // 3:
                    await in_thread(kafka_cluster.stop_broker, victim)
                if i == 2 * n // 3:
                    await in_thread(kafka_cluster.start_broker, victim)
                if i % 1000 == 0:
                    await asyncio.sleep(0)
            await p.flush()
        return acked, failed

    acked, failed = run(main(), timeout=280)
    # Every record is settled one way or the other, and failures are typed.
    assert len(acked) + len(failed) == n
    assert all(isinstance(e, KielError) for e in failed)
    assert len(acked) > n // 2
    check_acknowledged(kafka_cluster, topic, acked)


# --------------------------------------------------------------------------
# killed connections and hangs


def test_killed_connection_fails_in_flight_futures_promptly_then_recovers(
    kafka_cluster, topic_factory
):
    topic = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)

    async def main():
        async with Producer(kafka_cluster.bootstrap, retries=0, request_timeout=60) as p:
            await p.produce(topic, b"warm-up")
            # The leader sits on Produce requests: they stay in flight.
            await in_thread(kafka_cluster.set_latency, 30.0, "Produce", leader)
            futures = [p.produce(topic, b"in-flight-%d" % i) for i in range(10)]
            connection = p.cluster.connection(leader)
            await until(lambda: connection.in_flight, what="the Produce request in flight")
            await in_thread(kafka_cluster.close_connections, leader)
            done, _ = await asyncio.wait(futures, timeout=10)  # far less than 30 or 60
            assert len(done) == len(futures)
            for future in futures:
                # Sent and never answered: the broker may have written them.
                error = future.exception()
                assert isinstance(error, DeliveryUnknownError), error
                assert isinstance(error.__cause__, KielConnectionError)
                assert error.topic == topic and error.broker_id == leader
            await in_thread(kafka_cluster.clear_faults)
            return await p.produce(topic, b"after")

    meta = run(main())
    assert meta.topic == topic and meta.partition == 0


def test_killed_connection_is_retried_when_retries_allow(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap) as p:
            await p.produce(topic, b"warm-up")
            # The next Produce response is cut half way and its connection closed.
            await in_thread(kafka_cluster.drop_responses, "Produce", 1)
            return await asyncio.gather(*(p.produce(topic, b"r%d" % i) for i in range(20)))

    results = run(main())
    # At least once: the cut request may have been written before the retry.
    assert len(results) == 20
    assert [r.offset for r in results] == sorted(r.offset for r in results)


def test_hanging_broker_fails_as_delivery_unknown_after_its_request_timeout(
    kafka_cluster, topic_factory
):
    topic = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)

    async def main():
        async with Producer(kafka_cluster.bootstrap, request_timeout=1.0, retries=1,
                            retry_backoff=0.05) as p:
            await p.produce(topic, b"warm-up")
            await in_thread(kafka_cluster.hang_broker, leader)
            # The request goes out on the open connection and is never
            # answered: the broker may have written it.
            with pytest.raises(DeliveryUnknownError) as unknown:
                await p.produce(topic, b"into the void")
            assert isinstance(unknown.value.__cause__, RequestTimeoutError)
            assert unknown.value.topic == topic and unknown.value.broker_id == leader
            await in_thread(kafka_cluster.resume_broker, leader)
            return await p.produce(topic, b"recovered")

    meta = run(main(), timeout=60)
    assert meta.partition == 0


def test_records_whose_request_went_unanswered_are_delivery_unknown(
    kafka_cluster, topic_factory
):
    # Issue #23, defect 3: the broker writes the records, then their answer
    # is cut half way and the connection closed. With no retry left they
    # fail as "delivery unknown" (they are in the log), not with the
    # connection error that says nothing of it; flush() counts them apart.
    topic = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)

    async def main():
        async with Producer(kafka_cluster.bootstrap, retries=0) as p:
            await p.produce(topic, b"warm-up")
            await p.flush()
            await in_thread(kafka_cluster.drop_responses, "Produce", 1, leader)
            futures = [p.produce(topic, b"cut-%d" % i) for i in range(6)]
            return futures, await p.flush()

    futures, report = run(main())
    for future in futures:
        error = future.exception()
        assert isinstance(error, DeliveryUnknownError), error
        assert isinstance(error.__cause__, KielConnectionError)
        assert (error.topic, error.partition, error.broker_id) == (topic, 0, leader)
        assert "may or may not" in str(error)
    assert (report.delivered, report.failed, report.unknown) == (0, 6, 6)
    assert all(failure.maybe_written for failure in report.failures)
    logged = read_back(kafka_cluster.bootstrap, topic, 0, 7)
    assert [m.value for m in logged[1:]] == [b"cut-%d" % i for i in range(6)]


def test_records_that_never_reached_a_broker_are_a_plain_failure(
    kafka_cluster, topic_factory
):
    # The leader is stopped: connecting to it is refused, so nothing went
    # out and the records certainly were not written.
    topic = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)

    async def main():
        async with Producer(kafka_cluster.bootstrap, retries=0, request_timeout=5) as p:
            await p.produce(topic, b"warm-up")
            await p.flush()
            await in_thread(kafka_cluster.stop_broker, leader)
            try:
                futures = [p.produce(topic, b"refused-%d" % i, partition=0) for i in range(4)]
                return futures, await p.flush()
            finally:
                await in_thread(kafka_cluster.start_broker, leader)

    futures, report = run(main(), timeout=60)
    for future in futures:
        error = future.exception()
        assert isinstance(error, KielConnectionError), error
        assert not isinstance(error, DeliveryUnknownError)
    assert (report.delivered, report.failed, report.unknown) == (0, 4, 0)
    assert not any(failure.maybe_written for failure in report.failures)


# --------------------------------------------------------------------------
# close cut short


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_close_cut_short_tells_unanswered_records_from_unsent_ones(
    kafka_cluster, topic_factory, how
):
    topic = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)

    async def main():
        p = Producer(kafka_cluster.bootstrap, request_timeout=60)
        await p.produce(topic, b"warm-up")
        # The leader sits on the next Produce request: its records are out,
        # unanswered. The records after them wait for it (one request per
        # partition in flight), so they are never sent.
        await in_thread(kafka_cluster.set_latency, 30.0, "Produce", leader)
        out = [p.produce(topic, b"out-%d" % i) for i in range(5)]
        queue = p._accumulator.queue(TopicPartition(topic, 0))
        await until(lambda: queue.in_flight, what="the request is out")
        unsent = [p.produce(topic, b"unsent-%d" % i) for i in range(5)]
        await asyncio.sleep(0)  # the sender looks: the partition is busy
        if how == "timeout":
            await p.close(timeout=0.5)
        else:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(p.close(), 0.5)  # the flush in close() is cancelled
        assert p.closed and p.pending_bytes == 0 and p.pending_records == 0
        await in_thread(kafka_cluster.clear_faults)
        return out, unsent

    out, unsent = run(main(), timeout=60)
    for future in out:
        error = future.exception()
        assert isinstance(error, DeliveryUnknownError), error
        assert not isinstance(error, ClientClosedError)
        assert error.topic == topic and error.partition == 0
        assert "may or may not" in str(error)
    for future in unsent:
        error = future.exception()
        assert type(error) is ClientClosedError, error
        assert error.topic == topic and error.partition == 0


def test_close_during_a_retry_backoff_after_a_timeout_is_delivery_unknown(
    kafka_cluster, topic_factory
):
    # The first attempt timed out (the broker may have written it); its
    # retry waits out a long backoff when close() gives up.
    topic = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)

    async def main():
        p = Producer(kafka_cluster.bootstrap, request_timeout=0.5, ack_timeout=0.2,
                     retry_backoff=10, max_backoff=10)
        await p.produce(topic, b"warm-up")
        await in_thread(kafka_cluster.set_latency, 30.0, "Produce", leader)
        futures = [p.produce(topic, b"timed-out-%d" % i) for i in range(3)]
        queue = p._accumulator.queue(TopicPartition(topic, 0))
        await until(lambda: queue.ready and queue.ready[0].failures == 1 and not queue.in_flight,
                    what="the batch waits for its retry")
        await p.close(timeout=0)
        await in_thread(kafka_cluster.clear_faults)
        return futures

    for future in run(main(), timeout=60):
        assert isinstance(future.exception(), DeliveryUnknownError), future.exception()


def test_a_timed_out_request_answered_late_settles_its_records_once(
    kafka_cluster, topic_factory
):
    # The broker holds the request past request_timeout, then answers it
    # (on a connection the client closed at the timeout) while the retry is
    # under way: each record settles once, and nothing stays counted.
    topic = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)

    async def main():
        async with Producer(kafka_cluster.bootstrap, request_timeout=0.5, ack_timeout=0.2,
                            retry_backoff=0.05, max_backoff=0.05) as p:
            await p.produce(topic, b"warm-up")
            await in_thread(kafka_cluster.hang_broker, leader)
            futures = [p.produce(topic, b"late-%d" % i) for i in range(3)]
            [batch] = p._accumulator.unfinished()
            await until(lambda: batch.failures >= 1, what="the first attempt timed out")
            await in_thread(kafka_cluster.resume_broker, leader)
            results = await asyncio.gather(*futures)
            assert batch.done and batch.unanswered >= 1  # the first attempt: never answered
            assert p.pending_bytes == 0 and p.pending_records == 0
            return results

    results = run(main(), timeout=60)
    offsets = [meta.offset for meta in results]
    assert offsets == list(range(offsets[0], offsets[0] + 3))


# --------------------------------------------------------------------------
# error codes


def test_retriable_error_codes_are_retried(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap, retries=3, retry_backoff=0.01) as p:
            await p.connect()
            await in_thread(kafka_cluster.inject_error, "Produce", 6, 2)  # NotLeaderForPartition
            first = await asyncio.gather(*(p.produce(topic, b"a%d" % i) for i in range(50)))
            await in_thread(kafka_cluster.inject_error, "Produce", 7, 10)  # RequestTimedOut
            with pytest.raises(RequestTimedOutError) as info:
                await p.produce(topic, b"gives up")
            assert info.value.errno == 7 and info.value.partition == 0
            await in_thread(kafka_cluster.clear_faults)
            return first

    assert [r.offset for r in run(main())] == list(range(50))
    assert kafka_cluster.offsets(topic, 0)[1] == 50  # the failed one was never appended


def test_retries_run_out_with_the_typed_error(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap, retries=2, retry_backoff=0.01) as p:
            await p.connect()
            await in_thread(kafka_cluster.inject_error, "Produce", 6, None)
            futures = [p.produce(topic, b"x%d" % i) for i in range(5)]
            for future in futures:
                with pytest.raises(NotLeaderForPartitionError):
                    await future
            await in_thread(kafka_cluster.clear_faults)
            return await p.produce(topic, b"fine again")

    assert run(main()).offset == 0


def test_non_retriable_error_code_fails_at_once(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)

    async def main():
        async with Producer(kafka_cluster.bootstrap, retries=5) as p:
            await p.connect()
            await in_thread(kafka_cluster.inject_error, "Produce", 10, 1)
            with pytest.raises(MessageSizeTooLargeError):
                await p.produce(topic, b"refused")
            return await p.produce(topic, b"accepted")

    assert run(main()).offset == 0


def test_flush_reports_deliveries_and_failures_since_the_last_flush(
    kafka_cluster, topic_factory
):
    topic = topic_factory(partitions=2)

    async def main():
        async with Producer(kafka_cluster.bootstrap) as p:
            await p.connect()
            first = await p.flush()
            assert first == (0, 0, [], 0)
            good = [p.produce(topic, b"g%d" % i) for i in range(500)]
            no_partition = p.produce(topic, b"nowhere", partition=7)
            report = await p.flush()
            assert report.delivered == 500 and report.failed == 1
            [failure] = report.failures
            assert failure.future is no_partition and failure.topic == topic
            assert failure.partition == 7
            assert isinstance(failure.error, UnknownPartitionError)
            assert failure.error is no_partition.exception()
            assert all(f.done() and not f.exception() for f in good)
            # The broker refuses the next request: each of its records is
            # listed with the broker's error and its partition.
            await in_thread(kafka_cluster.inject_error, "Produce", 10, 1)
            refused = [p.produce(topic, b"r%d" % i, partition=1) for i in range(3)]
            report = await p.flush()
            assert report.delivered == 0 and report.failed == 3
            assert [f.future for f in report.failures] == refused
            assert {(f.topic, f.partition) for f in report.failures} == {(topic, 1)}
            assert all(isinstance(f.error, MessageSizeTooLargeError) for f in report.failures)
            return await p.flush()

    assert run(main()) == (0, 0, [], 0)


def test_order_is_kept_across_retries(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    n = 3000

    async def main():
        async with Producer(kafka_cluster.bootstrap, batch_size=1024, retry_backoff=0.01) as p:
            await p.connect()
            futures = []
            for i in range(n):
                futures.append(p.produce(topic, b"%d" % i))
                if i % 300 == 150:
                    # The next request fails with NotLeaderForPartition while
                    # the records before and after it are queued.
                    await in_thread(kafka_cluster.inject_error, "Produce", 6, 1)
                if i % 300 == 299:
                    await futures[-1]
            return await asyncio.gather(*futures)

    results = run(main())
    assert [r.offset for r in results] == list(range(n))
    got = read_back(kafka_cluster.bootstrap, topic, 0, n)
    assert [int(m.value) for m in got] == list(range(n))


# --------------------------------------------------------------------------
# back-pressure


def test_pending_bytes_stay_bounded_with_enqueue(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=3)
    limit = 20000

    async def main():
        async with Producer(kafka_cluster.bootstrap, max_pending_bytes=limit,
                            batch_size=2000) as p:
            peak = 0
            futures = []
            for i in range(5000):
                futures.append(await p.enqueue(topic, b"%06d" % i + b"." * 100))
                peak = max(peak, p.pending_bytes)
            results = await asyncio.gather(*futures)
            return peak, results

    peak, results = run(main())
    assert peak <= limit
    assert len(results) == 5000


def test_full_buffer_times_out_with_buffer_full_error(kafka_cluster, topic_factory):
    topic = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)

    async def main():
        async with Producer(kafka_cluster.bootstrap, max_pending_bytes=1000,
                            buffer_timeout=0.5, request_timeout=30) as p:
            await p.connect()
            await in_thread(kafka_cluster.hang_broker, leader)
            admitted = [p.produce(topic, b"x" * 100) for _ in range(7)]  # 7 * 126 bytes
            assert p.pending_bytes == 7 * 126
            with pytest.raises(BufferFullError) as info:
                p.produce(topic, b"y" * 200)  # no room: refused at once
            assert info.value.topic == topic
            with pytest.raises(BufferFullError) as info:
                await p.enqueue(topic, b"z" * 200)  # waits, then fails
            assert info.value.topic == topic
            await in_thread(kafka_cluster.resume_broker, leader)
            results = await asyncio.gather(*admitted)
            return results, await p.produce(topic, b"room again")

    results, last = run(main(), timeout=60)
    assert [r.offset for r in results] == list(range(7))
    assert last.offset == 7


# --------------------------------------------------------------------------
# one bound for every record held (issue #23, defect 2)


def test_produce_fails_fast_once_the_records_held_reach_the_bound(
    kafka_cluster, topic_factory
):
    # The leader hangs: nothing completes. Records batched and records
    # parked (behind them, or for their topic's metadata) all count against
    # max_pending_bytes; past it produce() raises BufferFullError at once,
    # and enqueue() waits (here until buffer_timeout).
    topic = topic_factory(partitions=1)
    other = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)
    if kafka_cluster.leader(other, 0) != leader:
        kafka_cluster.move_leader(other, 0, leader)  # it hangs too
    limit = 10_000

    async def main():
        async with Producer(kafka_cluster.bootstrap, max_pending_bytes=limit,
                            buffer_timeout=0.3, request_timeout=30) as p:
            await p.produce(topic, b"warm-up")
            await in_thread(kafka_cluster.hang_broker, leader)
            accepted, refused = [], 0
            for i in range(1000):
                # ``other``'s metadata is not loaded: its records park.
                try:
                    accepted.append(p.produce(other if i % 2 else topic, b"x" * 100))
                except BufferFullError as e:
                    refused += 1
                    assert e.topic in (topic, other)
                assert p.pending_bytes <= limit
            held = p.pending_bytes, p.pending_records
            with pytest.raises(BufferFullError):
                await p.enqueue(topic, b"x" * 100)
            await in_thread(kafka_cluster.resume_broker, leader)
            await asyncio.gather(*accepted)
            return held, refused, len(accepted)

    (held_bytes, held_records), refused, accepted = run(main(), timeout=60)
    assert held_bytes <= limit and held_records <= limit // 126
    assert refused == 1000 - accepted >= 1000 - limit // 126


class LoopTurns:
    """Counts the IOLoop's turns (a callback that schedules itself again)
    and how many futures settle in each: the most in one turn is what one
    step of the loop had to do."""

    def __init__(self) -> None:
        self.turn = 0
        self.per_turn: Dict[int, int] = {}
        self.running = True

    def start(self) -> None:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self.turn += 1
            if self.running:
                loop.call_soon(tick)

        loop.call_soon(tick)

    def watch(self, future: "asyncio.Future[Any]") -> None:
        future.add_done_callback(self._settled)

    def _settled(self, _future: "asyncio.Future[Any]") -> None:
        self.per_turn[self.turn] = self.per_turn.get(self.turn, 0) + 1


def test_failing_many_held_records_at_once_gives_the_loop_turns(kafka_cluster, topic_factory):
    # Issue #23, defect 2: 60,000 records held (half batched for a leader
    # that hangs, half parked while their topic's Metadata request is held
    # inside the broker) fail together when close() gives up; they fail a
    # chunk per loop turn, not all in one.
    topic = topic_factory(partitions=1)
    other = unique("parked")  # its metadata is never loaded
    leader = kafka_cluster.leader(topic, 0)

    async def main():
        p = Producer(kafka_cluster.bootstrap, request_timeout=60, max_pending_bytes=64 << 20)
        await p.produce(topic, b"warm-up")
        await in_thread(kafka_cluster.hang_broker, leader)
        await in_thread(kafka_cluster.set_latency, 30.0, "Metadata")
        turns = LoopTurns()
        futures = [p.produce(topic, b"b%d" % i) for i in range(30_000)]
        futures += [p.produce(other, b"p%d" % i) for i in range(30_000)]
        for future in futures:
            turns.watch(future)
        assert len(p._parked) == 30_000
        turns.start()
        await p.close(timeout=0.2)
        turns.running = False
        await in_thread(kafka_cluster.clear_faults)
        return futures, turns

    futures, turns = run(main(), timeout=60)
    assert all(isinstance(f.exception(), (ClientClosedError, DeliveryUnknownError))
               for f in futures)
    assert sum(turns.per_turn.values()) == 60_000
    assert max(turns.per_turn.values()) <= 2_000  # FAIL_CHUNK plus one batch


def test_admitting_many_parked_records_gives_the_loop_turns(kafka_cluster, topic_factory):
    # 60,000 records park while their topic's Metadata request is held inside
    # the broker; when it is answered they are batched a chunk per loop turn.
    topic = unique("admitted")

    async def main():
        async with Producer(kafka_cluster.bootstrap, max_pending_bytes=64 << 20) as p:
            # A topic the producer has not seen: its records park.
            await in_thread(kafka_cluster.create_topic, topic, 3)
            await in_thread(kafka_cluster.set_latency, 1.0, "Metadata")
            futures = [p.produce(topic, b"p%d" % i) for i in range(60_000)]
            assert len(p._parked) == 60_000
            loop = asyncio.get_running_loop()
            left: List[int] = []
            running = True

            def tick() -> None:
                left.append(len(p._parked))
                if running:
                    loop.call_soon(tick)

            loop.call_soon(tick)
            await until(lambda: not p._parked, what="every parked record batched", timeout=60)
            running = False
            await in_thread(kafka_cluster.clear_faults)
            await p.flush()
            assert all(f.done() and f.exception() is None for f in futures)
            return [a - b for a, b in zip(left, left[1:])]

    per_turn = run(main(), timeout=120)
    assert sum(per_turn) == 60_000
    assert max(per_turn) <= 1_000  # FAIL_CHUNK: one chunk per loop turn
