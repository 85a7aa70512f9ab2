"""The grouped consumer off the happy path: faults injected with the real parts.

Each member reaches ZooKeeper through its own fault proxy
(:mod:`kiel.testing.faults`), so one member can be cut off, blacked out or
have its replies lost while the others go on; session expiry and server
stops use the ZooKeeper launcher. Every test here reproduced a defect before
its fix (see the commit that added it).
"""

import asyncio
import logging
import threading
from typing import Any, Set

import pytest

from kiel.consumer import GroupedConsumer
from kiel.structs import TopicPartition
from tests.conftest import run, unique
from tests.waiting import until

pytestmark = pytest.mark.zookeeper

TP = TopicPartition


def proxied_hosts(cluster: Any, proxy: Any) -> str:
    """``cluster.zookeeper`` (``host:port/chroot``) with the proxy in place of the server."""
    _, slash, chroot = cluster.zookeeper.partition("/")
    return proxy.address + slash + chroot


def zk_target(cluster: Any) -> str:
    return cluster.zookeeper.partition("/")[0]


def kazoo_threads() -> Set[threading.Thread]:
    """Threads kazoo started (its connection and worker threads)."""
    return {
        t for t in threading.enumerate()
        if t.is_alive() and "kazoo" in (getattr(t.run, "__module__", "") or "")
        or t.name.startswith("kazoo")
    }


def grouped(
    cluster: Any, zk_hosts: str, group: str, topics: Any, **options: Any
) -> GroupedConsumer:
    options.setdefault("max_wait_time", 0.2)
    options.setdefault("zk_session_timeout", 6.0)
    options.setdefault("commit_interval", 1.0)
    return GroupedConsumer(cluster.bootstrap, group, zk_hosts, topics=topics, **options)


@pytest.mark.parametrize("noticed", [True, False], ids=["suspended", "unnoticed"])
def test_close_during_a_zookeeper_blackout_returns_within_leave_timeout(
    kafka_cluster: Any, topic_factory: Any, fault_proxy: Any, caplog: Any, noticed: bool
) -> None:
    topic = topic_factory(partitions=2)
    group = unique("g")
    proxy = fault_proxy(zk_target(kafka_cluster))

    async def main() -> None:
        before = kazoo_threads()
        c = grouped(kafka_cluster, proxied_hosts(kafka_cluster, proxy), group, [topic],
                    leave_timeout=2.0)
        await c.connect()
        assert c.assignment() == [TP(topic, 0), TP(topic, 1)]
        proxy.blackout()  # until restored: ZooKeeper never answers again
        if noticed:
            # kazoo notices (SUSPENDED) and keeps trying to reconnect
            # meanwhile: requests queue until it is back.
            await until(lambda: c._ownership.suspended, timeout=30, what="SUSPENDED")
        # else: the release's requests go out and wait for answers that never come.
        loop = asyncio.get_running_loop()
        started = loop.time()
        # Bounded by leave_timeout (2 s) plus stopping kazoo; before the fix
        # it waited for ZooKeeper for ever (the outer bound here is 60 s).
        await asyncio.wait_for(c.close(), 60)
        took = loop.time() - started
        print(f"\nclose() during a blackout: {took:.1f} s (leave_timeout 2 s)")
        assert took < 2.0 + 15.0, "close() waited for ZooKeeper past leave_timeout"
        assert c.member is not None
        assert [t for t in asyncio.all_tasks() if t.get_name().startswith("kiel")
                and not t.done()] == []
        assert kazoo_threads() <= before, "kazoo threads still running after close()"
        with caplog.at_level(logging.DEBUG, logger="kiel"):
            caplog.clear()
            proxy.restore()
            await asyncio.sleep(0.5)  # anything left running would log now
            assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []

    run(main())
