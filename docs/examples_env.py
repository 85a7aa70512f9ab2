"""What the examples in these docs run against in the test suite.

``sphinx-build -b doctest`` (run by ``tests/test_docs.py``) executes every
``testcode`` and ``doctest`` block. A complete example starts its own
embedded cluster; a fragment that continues a page's story (a producer or a
consumer already made) gets what it needs from here, in a hidden block, so
that it runs for real: the embedded 0.8.2 cluster of :mod:`kiel.testing`,
and the real ZooKeeper for the grouped consumer's pages.
"""
import asyncio
import itertools
from typing import Any, Coroutine, Optional

from kiel.testing.broker import EmbeddedCluster

_cluster: Optional[EmbeddedCluster] = None
_zookeeper: Any = None
_tansu: Any = None
_names = itertools.count()


def zookeeper() -> Any:
    """A real ZooKeeper server (started once per page): what kiel's pytest
    fixture of that name gives."""
    global _zookeeper
    if _zookeeper is None:
        from kiel.testing.zookeeper import ZooKeeperServer

        _zookeeper = ZooKeeperServer()
        _zookeeper.start()
    return _zookeeper


def zookeeper_hosts() -> str:
    """The real ZooKeeper, as ``host:port``."""
    return str(zookeeper().hosts)


_proxies: list = []
_kazoo: list = []


def fault_proxy(target: Any, **options: Any) -> Any:
    """A started fault proxy in front of ``target`` (kiel's ``fault_proxy`` fixture)."""
    from kiel.testing.faults import FaultProxy

    proxy = FaultProxy(target, **options)
    proxy.start()
    _proxies.append(proxy)
    return proxy


def kazoo_client() -> Any:
    """A kazoo client connected to :func:`zookeeper` (kiel's ``kazoo_client`` fixture)."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper().hosts, timeout=10.0)
    client.start(timeout=15.0)
    _kazoo.append(client)
    return client


def kafka_cluster() -> EmbeddedCluster:
    """An embedded 3-broker cluster registered in the real ZooKeeper (started once per
    page), with a topic ``events`` of 4 partitions."""
    global _cluster
    if _cluster is None:
        _cluster = EmbeddedCluster(brokers=3, partitions=3, topics={"events": 4},
                                   zookeeper=zookeeper_hosts() + "/kiel-docs")
        _cluster.start()
    return _cluster


def brokers() -> str:
    """The cluster's bootstrap servers."""
    return kafka_cluster().bootstrap


def zk_hosts() -> str:
    """The ZooKeeper connection string the cluster and the groups use."""
    return str(kafka_cluster().zookeeper)


def topic_factory(partitions: int = 1) -> str:
    """A new topic of the cluster (what kiel's pytest fixture of that name does)."""
    name = f"docs-{next(_names)}"
    kafka_cluster().create_topic(name, partitions=partitions)
    return name


def tansu() -> Any:
    """A Tansu broker (a current Kafka-compatible broker; started once per page)."""
    global _tansu
    if _tansu is None:
        from kiel.testing.tansu import TansuBroker

        _tansu = TansuBroker()
        _tansu.start()
    return _tansu


def run(coro: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any:
    """Run ``coro`` on a fresh loop, bounded."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def shutdown() -> None:
    """Stop what a page started (the doctest builder calls it after each page)."""
    global _cluster, _zookeeper, _tansu
    while _kazoo:
        client = _kazoo.pop()
        client.stop()
        client.close()
    while _proxies:
        _proxies.pop().stop()
    if _tansu is not None:
        _tansu.close()
        _tansu = None
    if _cluster is not None:
        _cluster.stop()
        _cluster = None
    if _zookeeper is not None:
        _zookeeper.close()
        _zookeeper = None
