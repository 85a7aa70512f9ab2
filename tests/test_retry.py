"""kiel.retry: the one retry loop (bounded, jittered, stopped when its owner closes).

Pure logic: a fake clock records the delays instead of sleeping.
"""
import random
from typing import Any, List

import pytest

from kiel.exc import ClientClosedError, ConfigError, KielConnectionError, NoBrokersError
from kiel.retry import Backoff, attempts, retry
from tests import conftest


def run(coro: Any) -> Any:
    return conftest.run(coro, timeout=10)  # these never wait on a real peer


class FakeClock:
    """Records the requested delays; returns at once."""

    def __init__(self) -> None:
        self.slept: List[float] = []

    async def sleep(self, delay: float) -> None:
        self.slept.append(delay)


@pytest.mark.parametrize(
    "options", [{"base": 0}, {"base": -1}, {"base": 2, "cap": 1}, {"retries": -1}]
)
def test_backoff_rejects_bad_settings(options: Any) -> None:
    with pytest.raises(ConfigError):
        Backoff(**options)


def test_delays_double_up_to_the_cap_with_equal_jitter() -> None:
    random.seed(1234)
    backoff = Backoff(base=0.1, cap=1.0, retries=None)
    for failures in range(1, 40):
        nominal = min(1.0, 0.1 * 2 ** (failures - 1))
        samples = [backoff.delay(failures) for _ in range(200)]
        # Equal jitter: never below half the nominal delay, never above it...
        assert all(nominal / 2 <= d <= nominal for d in samples)
        # ...and really spread over that range, not stuck at one end.
        assert min(samples) < nominal * 0.6 and max(samples) > nominal * 0.9


def test_delay_after_very_many_failures_is_the_cap() -> None:
    # An unbounded loop's 1025th failure used to overflow (int too large for a float).
    backoff = Backoff(base=0.1, cap=5.0, retries=None)
    for failures in (1024, 1025, 5000, 10**6):
        assert 2.5 <= backoff.delay(failures) <= 5.0


def test_delays_yields_one_delay_per_retry() -> None:
    assert len(list(Backoff(retries=3).delays())) == 3
    assert list(Backoff(retries=0).delays()) == []
    unbounded = Backoff(retries=None).delays()
    assert len([next(unbounded) for _ in range(100)]) == 100


def test_bounded_attempts_raise_the_last_error() -> None:
    async def main() -> None:
        clock = FakeClock()
        seen: List[int] = []
        lasts: List[bool] = []
        with pytest.raises(NoBrokersError) as info:
            async for attempt in attempts(Backoff(0.1, 1.0, retries=3), sleep=clock.sleep):
                seen.append(attempt.number)
                lasts.append(attempt.last)
                attempt.failed(NoBrokersError(f"pass {attempt.number}"))
        assert str(info.value) == "pass 3"
        assert seen == [0, 1, 2, 3] and lasts == [False, False, False, True]
        assert len(clock.slept) == 3  # between attempts, not after the last

    run(main())


def test_attempts_end_on_success() -> None:
    async def main() -> None:
        clock = FakeClock()
        passes = 0
        async for attempt in attempts(Backoff(retries=5), sleep=clock.sleep):
            passes += 1
            if attempt.number < 2:
                attempt.failed(NoBrokersError())
                continue
            break
        assert passes == 3 and len(clock.slept) == 2
        # A pass that neither fails nor leaves counts as a success: no spinning.
        passes = 0
        async for _attempt in attempts(Backoff(retries=5), sleep=clock.sleep):
            passes += 1
        assert passes == 1

    run(main())


def test_closed_stops_an_unbounded_loop_with_the_last_error_as_cause() -> None:
    async def main() -> None:
        clock = FakeClock()
        state = {"closed": False}
        with pytest.raises(ClientClosedError) as info:
            async for attempt in attempts(
                Backoff(retries=None), closed=lambda: state["closed"], sleep=clock.sleep
            ):
                if attempt.number == 7:
                    state["closed"] = True
                attempt.failed(KielConnectionError(f"pass {attempt.number}"))
        assert str(info.value.__cause__) == "pass 7"
        assert len(clock.slept) == 8

    run(main())


def test_retry_returns_retries_retriable_and_raises_others_at_once() -> None:
    async def main() -> None:
        calls: List[str] = []
        refreshed: List[BaseException] = []

        async def flaky() -> str:
            calls.append("op")
            if len(calls) < 3:
                raise KielConnectionError("down")
            return "done"

        async def before(error: BaseException) -> None:
            refreshed.append(error)

        assert await retry(flaky, Backoff(0.001, 0.002, 5), before_retry=before) == "done"
        assert len(calls) == 3 and len(refreshed) == 2

        async def broken() -> None:
            calls.append("broken")
            raise ValueError("not retriable")

        with pytest.raises(ValueError):
            await retry(broken, Backoff(0.001, 0.002, 5))
        assert calls.count("broken") == 1

        async def always_down() -> None:
            raise KielConnectionError("still down")

        refreshed.clear()
        with pytest.raises(KielConnectionError):
            await retry(always_down, Backoff(0.001, 0.002, 2), before_retry=before)
        assert len(refreshed) == 2  # before each retry, not after the last attempt

    run(main())


def test_retry_stops_when_closed() -> None:
    async def main() -> None:
        state = {"closed": False, "calls": 0}

        async def op() -> None:
            state["calls"] += 1
            state["closed"] = True
            raise KielConnectionError("down")

        with pytest.raises(ClientClosedError):
            await retry(op, Backoff(0.001, 0.002, retries=None), closed=lambda: state["closed"])
        assert state["calls"] == 1

    run(main())
