"""Cut a kazoo client off ZooKeeper with kiel.testing's fault proxy, and watch what it sees.

Needs Java and Debian's ``zookeeper`` package (kiel.testing starts a real
ZooKeeper server)::

    python examples/fault_proxy.py

A kazoo client with a 2 s session talks to ZooKeeper through a
:class:`~kiel.testing.faults.FaultProxy`. First the proxy cuts its
connection (an RST): kazoo is SUSPENDED, reconnects, and keeps its session.
Then a blackout (a network partition) lasts until the server has expired the
session, which an observer connected straight to the server sees as the
client's ephemeral node vanishing; once the network is back, kazoo learns
its session is LOST and starts a new one.
"""
import logging
import queue
import time
import uuid
from typing import List

from kazoo.client import KazooClient, KazooState

from kiel.testing.faults import FaultProxy
from kiel.testing.zookeeper import ZooKeeperServer

WAIT = 30.0  # seconds any step may take at most


class StateQueue:
    """kazoo calls listeners on its own thread: hand the states over through a queue."""

    def __init__(self, client: KazooClient) -> None:
        self.states: queue.Queue[str] = queue.Queue()
        client.add_listener(self.states.put)

    def until(self, last: str) -> List[str]:
        """The states reported from now on, up to and including ``last``."""
        seen: List[str] = []
        while last not in seen:
            seen.append(self.states.get(timeout=WAIT))
        return seen


def wait_until_gone(observer: KazooClient, path: str) -> None:
    deadline = time.monotonic() + WAIT
    while observer.exists(path) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the server did not expire the session within {WAIT} s")
        time.sleep(0.1)


def main() -> None:
    # kazoo warns about every dropped connection: here they are made on purpose.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    with ZooKeeperServer() as zookeeper, FaultProxy((zookeeper.host, zookeeper.port)) as proxy:
        observer = KazooClient(hosts=zookeeper.hosts)  # straight to the server
        observer.start(timeout=WAIT)
        client = KazooClient(hosts=proxy.address, timeout=2.0)  # through the proxy
        client.start(timeout=WAIT)
        states = StateQueue(client)  # from now on
        try:
            session = client.client_id[0]
            print(f"connected through {proxy.address} to {zookeeper.hosts}")

            proxy.cut()
            seen = states.until(KazooState.CONNECTED)
            same = client.client_id[0] == session
            print(f"cut: {', '.join(seen)} (same session: {same})")

            path = client.create(f"/example-{uuid.uuid4().hex}", b"", ephemeral=True)
            session = client.client_id[0]
            proxy.blackout()
            wait_until_gone(observer, path)
            print("blackout: the server expired the session (its ephemeral node is gone)")
            proxy.restore()
            seen = states.until(KazooState.LOST) + states.until(KazooState.CONNECTED)
            same = client.client_id[0] == session
            print(f"blackout: {', '.join(seen)} (same session: {same})")
            stats = proxy.stats()
            print(f"proxy: {stats.accepted} connections accepted, {stats.cut} cut, "
                  f"{stats.bytes_upstream} bytes up, {stats.bytes_downstream} bytes down")
        finally:
            client.stop()
            client.close()
            observer.stop()
            observer.close()


if __name__ == "__main__":
    main()
