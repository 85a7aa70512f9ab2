"""Shared test helpers; kiel's pytest plugin is opt-in, enabled here."""

import asyncio
import uuid
from typing import Awaitable, TypeVar

T = TypeVar("T")

pytest_plugins = ["kiel.testing.pytest_plugin"]


def run(coro: Awaitable[T], timeout: float = 120.0) -> T:
    """Run one coroutine on a fresh event loop, bounded by ``timeout`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def unique(prefix: str) -> str:
    """A name no other test uses (topics, groups, znodes)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"
