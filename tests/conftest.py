"""Shared test helpers.

kiel's fixtures (kafka_cluster, zookeeper, tansu_broker, fault_proxy...) come
from its pytest plugin, which installing kiel registers (the ``pytest11``
entry point in pyproject.toml). Naming it in ``pytest_plugins`` as well would
register it twice, which pytest refuses; it is named only when the
environment's kiel was installed before that entry point existed, so that an
older development venv keeps its fixtures until it is re-installed
(tests/test_packaging.py fails there, saying so).
"""

import asyncio
import shutil
import uuid
from importlib import metadata
from typing import Awaitable, TypeVar

import pytest

T = TypeVar("T")


def pytest11_entry_points() -> list:
    """The installed ``pytest11`` entry points (Python 3.9's API too)."""
    points = metadata.entry_points()
    if hasattr(points, "select"):
        return list(points.select(group="pytest11"))
    return list(points.get("pytest11", []))  # Python 3.9: a dict of groups


if not [ep for ep in pytest11_entry_points() if ep.name == "kiel"]:
    pytest_plugins = ["kiel.testing.pytest_plugin"]


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
