"""The one retry mechanism: bounded attempts, exponential backoff, equal jitter.

Every retry loop in kiel goes through :func:`attempts` (or :func:`retry`,
built on it), so each one is bounded, jittered, and stops when the client
that owns it closes.

Strategy: an attempt loop reads as a plain ``async for``::

    async for attempt in attempts(backoff, closed=lambda: self.closed):
        try:
            return await send()
        except NoBrokersError as e:
            attempt.failed(e)

Each pass either leaves the loop (``return``/``break``) or records why it
failed. The next pass first sleeps the next backoff delay; when the delays are
used up, the last recorded failure is raised instead, so a loop that runs out
never falls through silently.
"""

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Optional, TypeVar

from kiel.exc import ClientClosedError, ConfigError

T = TypeVar("T")

__all__ = ["Attempt", "Backoff", "attempts", "retry"]

# The largest exponent whose power of two is a finite float.
_MAX_DOUBLINGS = 1023


class Backoff:
    """Delays for successive retries: ``min(cap, base * 2**n)``, jittered.

    Equal jitter (a uniform draw in ``[delay/2, delay]``) keeps many clients
    that failed together from retrying in lockstep while never retrying
    sooner than half the nominal delay.

    Args:
        base: the first delay, seconds.
        cap: the largest delay, seconds.
        retries: how many retries at most (``None``: unbounded, only for loops
            that have their own deadline or stop when their owner closes).

    Raises:
        ConfigError: ``base``/``cap``/``retries`` out of range.
    """

    def __init__(self, base: float = 0.1, cap: float = 5.0, retries: Optional[int] = 5) -> None:
        if base <= 0 or cap < base:
            raise ConfigError(f"backoff needs 0 < base <= cap, got base={base} cap={cap}")
        if retries is not None and retries < 0:
            raise ConfigError(f"retries must be >= 0, got {retries}")
        self.base = base
        self.cap = cap
        self.retries = retries

    def delay(self, failures: int) -> float:
        """The jittered delay after ``failures`` consecutive failures (>= 1)."""
        # An unbounded loop's 1025th failure must not raise OverflowError:
        # 2.0**1023 is the largest finite power, and a float product past
        # the largest float is inf, which the cap then bounds.
        doublings = min(max(0, failures - 1), _MAX_DOUBLINGS)
        nominal = min(self.cap, self.base * 2.0**doublings)
        return random.uniform(nominal / 2, nominal)

    def delays(self) -> Iterator[float]:
        """Yield one delay per allowed retry."""
        failures = 0
        while self.retries is None or failures < self.retries:
            failures += 1
            yield self.delay(failures)


class Attempt:
    """One pass of an :func:`attempts` loop.

    Attributes:
        number: 0 for the first try, 1 for the first retry, ...
        error: what the previous pass recorded with :meth:`failed`, if anything.
    """

    __slots__ = ("number", "error", "_retries")

    def __init__(self, retries: Optional[int]) -> None:
        self.number = -1
        self.error: Optional[BaseException] = None
        self._retries = retries

    @property
    def last(self) -> bool:
        """True on the final attempt: a failure now is raised, not retried."""
        return self._retries is not None and self.number >= self._retries

    def failed(self, error: BaseException) -> None:
        """Record why this pass failed; raised if no retry is left."""
        self.error = error


async def attempts(
    backoff: Backoff,
    *,
    closed: Optional[Callable[[], bool]] = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[Attempt]:
    """Yield up to ``backoff.retries + 1`` attempts, sleeping between them.

    Args:
        backoff: the delays between attempts (its ``retries`` bounds the loop).
        closed: asked before every attempt; once it answers true the loop
            raises :class:`~kiel.exc.ClientClosedError` instead of retrying.
        sleep: how to wait (tests pass a fake clock).

    Yields:
        The same :class:`Attempt` each time, its ``number`` advanced.

    Raises:
        BaseException: the error recorded by the last :meth:`Attempt.failed`,
            once the retries are used up.
        ClientClosedError: the owner closed (chained to the last recorded
            error).
    """
    attempt = Attempt(backoff.retries)
    delays = backoff.delays()
    while True:
        if closed is not None and closed():
            raise ClientClosedError("closed while retrying") from attempt.error
        attempt.number += 1
        attempt.error = None
        yield attempt
        if attempt.error is None:
            # The body neither left the loop nor recorded a failure: treat the
            # pass as a success instead of spinning.
            return
        delay = next(delays, None)
        if delay is None:
            raise attempt.error
        await sleep(delay)


async def retry(
    op: Callable[[], Awaitable[T]],
    backoff: Backoff,
    *,
    retriable: Callable[[BaseException], bool] = lambda e: bool(getattr(e, "retriable", False)),
    closed: Optional[Callable[[], bool]] = None,
    before_retry: Optional[Callable[[BaseException], Awaitable[None]]] = None,
) -> T:
    """Await ``op()`` until it succeeds, retrying the failures ``retriable`` accepts.

    Args:
        op: makes one attempt.
        backoff: bounds and spaces the retries.
        retriable: which exceptions are worth another attempt (default: kiel
            errors whose class says ``retriable``).
        closed: stops the retries once the owner closed.
        before_retry: awaited with the failure before the next attempt (e.g. a
            metadata refresh after a leadership change).

    Returns:
        What ``op`` returned.

    Raises:
        Exception: the first error ``retriable`` refuses, at once; the last
            retriable one once the retries are used up.
        ClientClosedError: the owner closed.
    """
    async for attempt in attempts(backoff, closed=closed):
        try:
            return await op()
        except Exception as e:  # noqa: BLE001 - filtered by ``retriable`` just below
            if not retriable(e):
                raise
            attempt.failed(e)
            if before_retry is not None and not attempt.last:
                await before_retry(e)
    raise AssertionError("attempts() ended without success or error")  # pragma: no cover
