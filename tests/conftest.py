"""Shared test helpers.

kiel's fixtures (kafka_cluster, zookeeper, tansu_broker, fault_proxy...) come
from its pytest plugin, which installing kiel registers (the ``pytest11``
entry point in pyproject.toml): naming it in ``pytest_plugins`` here as well
would register it twice, which pytest refuses.
"""

import asyncio
import shutil
import uuid
from typing import Awaitable, TypeVar

import pytest

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 120.0) -> T:
    """Run one coroutine on a fresh event loop, bounded by ``timeout`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def unique(prefix: str) -> str:
    """A name no other test uses (topics, groups, znodes)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def kcat() -> str:
    """The kcat (or kafkacat) executable; fails, never skips, without it."""
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.fail("kcat is not installed (apt-get install kcat)")
    return path
