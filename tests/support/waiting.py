"""Waiting for a condition in tests: bounded, and loud when it never holds.

Tests wait for the state they need, never for a fixed time: a sleep that is
long enough on an idle machine is too short on a loaded one, and a sleep that
is always long enough makes every run slow.
"""
import asyncio
import time
from typing import Callable

__all__ = ["until", "wait_until"]


def wait_until(
    predicate: Callable[[], object], timeout: float = 10.0, what: str = "condition",
    interval: float = 0.01,
) -> None:
    """Poll ``predicate`` (from a plain thread) until it is true.

    Raises:
        AssertionError: still false after ``timeout`` seconds; says ``what``.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not met within {timeout} s"
        time.sleep(interval)


async def until(
    predicate: Callable[[], object], timeout: float = 10.0, what: str = "condition",
    interval: float = 0.01,
) -> None:
    """Poll ``predicate`` on the event loop (letting it run between polls) until it is true.

    Raises:
        AssertionError: still false after ``timeout`` seconds; says ``what``.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"{what} not met within {timeout} s"
        await asyncio.sleep(interval)
