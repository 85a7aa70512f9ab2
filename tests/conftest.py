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
import os
import random
import shutil
import uuid
from importlib import metadata
from typing import Awaitable, TypeVar

import pytest

T = TypeVar("T")


def pytest11_entry_points() -> list:
    """The installed ``pytest11`` entry points."""
    return list(metadata.entry_points().select(group="pytest11"))


if not [ep for ep in pytest11_entry_points() if ep.name == "kiel"]:
    pytest_plugins = ["kiel.testing.pytest_plugin"]


def import_kiel_now() -> list:
    """Import every kiel module (but ``__main__``s) now, before any test starts a thread.

    Strategy: kiel's pytest plugin makes pytest rewrite every kiel module
    when it is first imported, and the rewrite builds the module's AST. On
    CPython 3.11 that construction keeps its recursion depth in state the
    whole interpreter shares, and a test that imports a module lazily (a
    membership adapter, say) while another thread also builds an AST can
    fail with ``SystemError: AST constructor recursion depth mismatch``
    (CPython gh-106905; seen once in a CI rehearsal, importing
    kiel.coordinator.membership inside a test). Imported here, while the
    process has one thread, no test imports kiel for the first time.

    Returns:
        the modules left out, with why: those whose optional dependency this
        environment lacks (no test imports them either).
    """
    import importlib
    import pkgutil

    import kiel

    skipped = []
    for info in pkgutil.walk_packages(kiel.__path__, "kiel."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue  # running one is what importing it does
        try:
            importlib.import_module(info.name)
        except ImportError as e:  # an optional dependency not installed here
            skipped.append((info.name, repr(e)))
    return skipped


def pytest_configure(config: pytest.Config) -> None:
    """Draw the chaos suite's random seed base once, in the process that starts the run;
    keep the order of the files under ``--dist loadfile``; import kiel whole
    (see :func:`import_kiel_now`).

    tests/consumer/test_group_chaos.py names its tests after the seeds, and pytest-xdist
    refuses a run whose workers collected different tests; the workers inherit
    this environment, so all of them see the one base drawn here.
    """
    if not hasattr(config, "workerinput") and not os.environ.get("KIEL_CHAOS_BASE"):
        os.environ["KIEL_CHAOS_BASE"] = str(random.SystemRandom().randrange(10**6))
    # --dist loadfile hands out files in the order the workers collected them,
    # which pytest_collection_modifyitems below sets (the long ones first),
    # not by their number of tests (pytest-xdist's default).
    if getattr(config.option, "dist", "no") == "loadfile":
        config.option.loadscopereorder = False
    import_kiel_now()


#: The files that take longest on a worker, handed out first under
#: pytest-xdist so that none of them starts last and keeps the run going
#: alone. The chaos schedules (10-12 minutes) set the wall time: first. The
#: others from --durations of parallel runs on the 2-core machine (2-7
#: minutes each under load), longest first. A file missing here is only
#: handed out later, never skipped.
LONG_FILES = (
    "tests/consumer/test_group_chaos.py",
    "tests/test_docs.py",
    "tests/spark/test_spark.py",
    "tests/spark/test_spark_config.py",
    "tests/coordinator/test_cooperative_groups.py",
    "tests/coordinator/test_groups.py",
    "tests/spark/test_spark_tansu.py",
    "tests/zookeeper/test_group_faults.py",
    "tests/consumer/test_grouped.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """In a pytest-xdist worker: the :data:`LONG_FILES` first, then the rest.

    ``--dist loadfile`` sends each file to one worker, in this order (see
    :func:`pytest_configure`). Each file keeps its tests' order. Runs without
    pytest-xdist are not changed.
    """
    if not hasattr(config, "workerinput"):
        return

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return LONG_FILES.index(path) if path in LONG_FILES else len(LONG_FILES)

    ranks = {id(item): rank(item) for item in items}
    items.sort(key=lambda item: ranks[id(item)])  # stable


def pytest_report_header(config: pytest.Config) -> str:
    return (f"chaos seed base: {os.environ.get('KIEL_CHAOS_BASE')} "
            "(KIEL_CHAOS_BASE=<n> runs the same ZooKeeper schedules again)")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    # The chaos suite's totals, summed from its tests' reports (which come
    # back from pytest-xdist's workers too).
    from tests.support.chaos.totals import terminal_summary

    terminal_summary(terminalreporter)


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


@pytest.fixture
def proxied_tansu(fault_proxy):
    """Tansu behind a fault proxy: it advertises the proxy, so every
    connection goes through it. Yields ``(broker, proxy)``."""
    from kiel.testing.process import free_ports
    from kiel.testing.tansu import TansuBroker

    (port,) = free_ports(1)
    proxy = fault_proxy(("127.0.0.1", port))
    broker = TansuBroker(port=port, advertised_port=int(proxy.address.rsplit(":", 1)[1]))
    broker.start()
    yield broker, proxy
    broker.close()
