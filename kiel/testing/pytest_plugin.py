"""pytest plugin (entry point ``pytest11``): fixtures for kiel's real test parts."""
from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from kazoo.client import KazooClient

    from kiel.testing.zookeeper import ZooKeeperEnsemble, ZooKeeperServer


# --------------------------------------------------------------------------
# ZooKeeper: the real server from Debian's ``zookeeper`` package
# (kiel.testing.zookeeper). Imported inside the fixtures so that loading this
# plugin never needs Java: a missing Java or ZooKeeper fails the test that
# uses a fixture, with a MissingDependencyError saying what to install.


@pytest.fixture(scope="session")
def zookeeper() -> Iterator["ZooKeeperServer"]:
    """A real standalone ZooKeeper server shared by the whole test session.

    Use ``zookeeper.hosts`` as a kazoo connection string. Tests share it: use
    unique paths, and start your own :class:`~kiel.testing.zookeeper.ZooKeeperServer`
    for tests that stop or pause a server (:func:`kazoo_client` heals it anyway).

    Raises:
        MissingDependencyError: Java or the ZooKeeper jars are missing.
    """
    from kiel.testing.zookeeper import ZooKeeperServer

    server = ZooKeeperServer()
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def zookeeper_ensemble() -> Iterator["ZooKeeperEnsemble"]:
    """A real 3-node ZooKeeper ensemble shared by the tests of one module.

    Tests that kill or pause nodes should call ``zookeeper_ensemble.heal()``
    when done, so the next test of the module finds all three serving.

    Raises:
        MissingDependencyError: Java or the ZooKeeper jars are missing.
    """
    from kiel.testing.zookeeper import ZooKeeperEnsemble

    ensemble = ZooKeeperEnsemble(size=3)
    try:
        ensemble.start()
        yield ensemble
    finally:
        ensemble.close()


@pytest.fixture
def kazoo_client(zookeeper: "ZooKeeperServer") -> Iterator["KazooClient"]:
    """A kazoo client connected to the session's :func:`zookeeper` server; stopped after the test.

    The server is healed first (resumed or restarted) if an earlier test left
    it paused or stopped.
    """
    from kazoo.client import KazooClient

    zookeeper.heal()
    client = KazooClient(hosts=zookeeper.hosts, timeout=10.0)
    client.start(timeout=15.0)
    try:
        yield client
    finally:
        client.stop()
        client.close()
