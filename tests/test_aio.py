"""kiel._aio: the one wake-up primitive and the one way to start background tasks.

Pure logic on a real event loop; no timing assumptions beyond "a timeout of a
few hundredths of a second runs out".
"""
import asyncio
import gc
import logging
from typing import Any, List, Optional

import pytest

from kiel._aio import Tasks, Wakeup, spawn, within
from kiel.exc import NoBrokersError
from tests import conftest


def run(coro: Any) -> Any:
    return conftest.run(coro, timeout=10)  # these never wait on a real peer


async def settle() -> None:
    """Let every ready callback and task step run."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_wakeup_wakes_the_current_waiters_only() -> None:
    async def main() -> None:
        wakeup = Wakeup()
        early = [asyncio.ensure_future(wakeup.wait()) for _ in range(3)]
        await settle()
        assert not any(w.done() for w in early)
        wakeup.fire()
        await settle()
        assert [w.result() for w in early] == [True, True, True]
        # A waiter that arrives after the fire waits for the next one.
        late = asyncio.ensure_future(wakeup.wait())
        await settle()
        assert not late.done()
        wakeup.fire()
        assert await late is True

    run(main())


def test_fire_without_waiters_is_not_remembered() -> None:
    async def main() -> None:
        wakeup = Wakeup()
        wakeup.fire()
        assert await wakeup.wait(timeout=0.05) is False

    run(main())


def test_wait_times_out_without_spoiling_the_round_for_others() -> None:
    async def main() -> None:
        wakeup = Wakeup()
        patient = asyncio.ensure_future(wakeup.wait())
        await settle()
        assert await wakeup.wait(timeout=0.01) is False
        cancelled = asyncio.ensure_future(wakeup.wait())
        await settle()
        cancelled.cancel()
        await settle()
        assert not patient.done()
        wakeup.fire()
        assert await patient is True

    run(main())


def test_future_joins_this_round() -> None:
    async def main() -> None:
        wakeup = Wakeup()
        first, second = wakeup.future(), wakeup.future()
        assert first is second and not first.done()
        wakeup.fire()
        assert first.done()
        assert not wakeup.future().done()  # a new round

    run(main())


def test_tasks_keep_references_until_done() -> None:
    async def main() -> None:
        tasks = Tasks("owner")
        gate = asyncio.Event()

        async def work(n: int) -> int:
            await gate.wait()
            return n

        started = [tasks.spawn(work(i), f"work {i}") for i in range(3)]
        names = sorted(t.get_name() for t in tasks)
        del started
        gc.collect()  # the loop holds tasks weakly: only Tasks keeps them alive
        assert len(tasks) == 3 and names == ["owner:work 0", "owner:work 1", "owner:work 2"]
        gate.set()
        await settle()
        assert len(tasks) == 0

    run(main())


def test_task_failures_are_logged_unless_quiet(caplog: Any) -> None:
    async def main() -> List[str]:
        tasks = Tasks("owner")

        async def fail(error: Exception) -> None:
            raise error

        tasks.spawn(fail(ValueError("boom")), "loud")
        shared = tasks.spawn(fail(NoBrokersError("down")), "shared", quiet=(NoBrokersError,))
        with pytest.raises(NoBrokersError):
            await shared  # whoever awaits a quiet task still gets its error
        await settle()
        return [r.getMessage() for r in caplog.records]

    with caplog.at_level(logging.ERROR, logger="kiel"):
        messages = run(main())
    assert messages == ["background task owner:loud failed"]


def test_cancel_stops_every_task_but_the_caller() -> None:
    async def main() -> None:
        tasks = Tasks("owner")
        ended: List[str] = []

        async def forever(name: str) -> None:
            try:
                await asyncio.Event().wait()
            finally:
                ended.append(name)

        async def closer() -> None:
            await tasks.cancel(timeout=5)
            ended.append("closer done")

        for name in ("a", "b"):
            tasks.spawn(forever(name), name)
        await settle()
        await tasks.spawn(closer(), "closer")
        assert sorted(ended) == ["a", "b", "closer done"]
        assert len(tasks) == 0

    run(main())


def test_module_spawn_keeps_orphans_alive() -> None:
    async def main() -> None:
        gate = asyncio.Event()

        async def orphan() -> str:
            await gate.wait()
            return "done"

        task = spawn(orphan(), "orphan")
        assert task.get_name() == "kiel:orphan"
        gate.set()
        assert await task == "done"

    run(main())


def test_a_cancel_in_the_round_of_the_fire_is_not_lost() -> None:
    # The waiter's task is cancelled in the same loop round as the fire, and
    # also in the round after it: either way the caller asked to stop, and
    # must see CancelledError rather than a wait that "succeeded" (which is
    # what asyncio.wait_for does before Python 3.12 when its inner future
    # completes together with the cancel).
    async def main(rounds_between: int, timeout: Optional[float]) -> None:
        wakeup = Wakeup()
        waiter = asyncio.ensure_future(wakeup.wait(timeout=timeout))
        await settle()
        wakeup.fire()
        for _ in range(rounds_between):
            await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    for rounds in (0, 1):
        for timeout in (None, 5.0):
            run(main(rounds, timeout))


def test_within_returns_the_result_or_times_out() -> None:
    async def main() -> None:
        assert await within(asyncio.sleep(0, "done"), 5) == "done"
        assert await within(asyncio.sleep(0, "unbounded"), None) == "unbounded"
        slow = asyncio.ensure_future(asyncio.sleep(60))
        with pytest.raises(asyncio.TimeoutError):
            await within(slow, 0.01)
        assert slow.cancelled()  # nothing keeps running after the timeout
        with pytest.raises(NoBrokersError):
            await within(failing(), 5)

    async def failing() -> None:
        raise NoBrokersError("boom")

    run(main())


def test_within_passes_a_cancel_on_even_when_the_inner_one_just_finished() -> None:
    async def main(inner_done_first: bool) -> None:
        inner: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        outer = asyncio.ensure_future(within(inner, 5))
        await settle()
        if inner_done_first:
            inner.set_result("too late")
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        assert inner.done()  # cancelled, or finished before the cancel: never left running

    for inner_done_first in (False, True):
        run(main(inner_done_first))


def test_within_retrieves_an_inner_failure_that_came_with_the_cancel(caplog: Any) -> None:
    async def main() -> None:
        inner: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        outer = asyncio.ensure_future(within(inner, 5))
        await settle()
        inner.set_exception(NoBrokersError("lost with the cancel"))
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        del inner
        gc.collect()

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        run(main())
    assert "never retrieved" not in caplog.text
