"""The ZooKeeper layout a Kafka 0.8.2 cluster writes, and its v0 offset storage.

Paths and documents (as Kafka 0.8.2's ``ZkUtils``, ``AdminUtils`` and
``KafkaController`` write them)::

    /brokers/ids/<id>                         ephemeral {"jmx_port":-1,"timestamp":"<ms>",
                                              "host":"127.0.0.1","version":1,"port":<port>}
    /brokers/topics/<topic>                   {"version":1,"partitions":{"0":[1,2],...}}
    /brokers/topics/<topic>/partitions/<p>/state
                                              {"controller_epoch":1,"leader":1,"version":1,
                                               "leader_epoch":0,"isr":[1,2]}
    /config/topics/<topic>                    {"version":1,"config":{}}
    /controller                               ephemeral {"version":1,"brokerid":1,
                                              "timestamp":"<ms>"}
    /controller_epoch                         "1"
    /consumers/<group>/offsets/<topic>/<p>    "<offset>" (OffsetCommit v0)

:class:`ZooKeeperLayout` is synchronous on purpose: the broker runs every
call in an executor thread (``IOLoop.run_in_executor``), never on its IOLoop.
kazoo's session-state callbacks arrive on kazoo's thread and are handed to
the caller's ``on_session_restored`` untouched (the broker re-posts it onto
its IOLoop with ``add_callback``).
"""

import json
import time
from collections.abc import Callable
from typing import Any, Optional

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.retry import KazooRetry

from kiel.exc import ZooKeeperError

__all__ = ["ZooKeeperLayout", "split_chroot"]

COMMON_PATHS = (
    "/consumers",
    "/brokers/ids",
    "/brokers/topics",
    "/config/changes",
    "/config/topics",
    "/admin/delete_topics",
)


def _json(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode("utf-8")


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def split_chroot(hosts: str) -> tuple[str, str]:
    """Split ``"h1:p1,h2:p2/chroot"`` into ``("h1:p1,h2:p2", "/chroot")`` (chroot may be ``""``)."""
    slash = hosts.find("/")
    if slash < 0:
        return hosts, ""
    chroot = hosts[slash:].rstrip("/")
    return hosts[:slash], chroot


#: Seconds a layout write keeps retrying while ZooKeeper is unreachable.
WRITE_DEADLINE = 60.0


class ZooKeeperLayout:
    """Reads and writes the 0.8.2 cluster layout in ZooKeeper (blocking calls).

    Args:
        hosts: kazoo connection string; may end in a chroot
            (``"127.0.0.1:2181/my-cluster"``), which is created if missing,
            as Kafka's ``zookeeper.connect`` allows.
        timeout: connect and session timeout in seconds.
        on_session_restored: called (on kazoo's thread) when a new session
            replaced an expired one: ephemeral nodes must be written again.

    Raises:
        ZooKeeperError: (from :meth:`start`) ZooKeeper could not be reached.
    """

    def __init__(self, hosts: str, timeout: float = 10.0,
                 on_session_restored: Optional[Callable[[], None]] = None) -> None:
        self.hosts = hosts
        self.timeout = timeout
        self._on_session_restored = on_session_restored
        self._lost = False
        # Reconnect forever, at most a second apart, as Kafka's ZkClient does; calls
        # made while disconnected wait for the connection (on an executor thread).
        self.client = KazooClient(hosts=hosts, timeout=timeout, connection_retry=KazooRetry(
            max_tries=-1, delay=0.05, backoff=2, max_delay=1.0))
        # ZkClient.retryUntilConnected: a write interrupted by a lost
        # connection or an expired session is made again once ZooKeeper is
        # back (bounded here, where 0.8.2 waits for ever).
        self._retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0,
                                 deadline=WRITE_DEADLINE, ignore_expire=True)
        self.client.add_listener(self._listener)

    def _listener(self, state: str) -> None:
        # Runs on kazoo's thread: record and hand off, never block here.
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            if self._on_session_restored is not None:
                self._on_session_restored()

    def start(self) -> None:
        """Connect, create the chroot if needed, and the paths Kafka sets up."""
        base, chroot = split_chroot(self.hosts)
        try:
            if chroot:
                root = KazooClient(hosts=base, timeout=self.timeout)
                root.start(timeout=self.timeout)
                try:
                    root.ensure_path(chroot)
                finally:
                    root.stop()
                    root.close()
            self.client.start(timeout=self.timeout)
            for path in COMMON_PATHS:
                self.client.ensure_path(path)
        except (KazooException, OSError) as e:
            raise ZooKeeperError(f"cannot set up ZooKeeper at {self.hosts}: {e!r}") from e
        except self.client.handler.timeout_exception as e:
            raise ZooKeeperError(f"cannot connect to ZooKeeper at {self.hosts}: {e!r}") from e

    def close(self) -> None:
        """End the session (its ephemeral nodes go with it)."""
        self.client.stop()
        self.client.close()

    # -- brokers and controller -------------------------------------------

    def register_broker(self, broker_id: int, host: str, port: int) -> None:
        """Write ``/brokers/ids/<id>`` (ephemeral), replacing a stale node of ours."""
        path = f"/brokers/ids/{broker_id}"
        data = _json({"jmx_port": -1, "timestamp": _now_ms(), "host": host,
                      "version": 1, "port": port})
        try:
            self.client.create(path, data, ephemeral=True)
        except NodeExistsError:
            self.client.delete(path)
            self.client.create(path, data, ephemeral=True)

    def unregister_broker(self, broker_id: int) -> None:
        """Remove ``/brokers/ids/<id>`` (what a broker's session end does)."""
        try:
            self.client.delete(f"/brokers/ids/{broker_id}")
        except NoNodeError:
            pass

    def set_controller(self, broker_id: Optional[int], epoch: int) -> None:
        """Write ``/controller`` (ephemeral; none when ``broker_id`` is None) and its epoch."""
        try:
            self.client.delete("/controller")
        except NoNodeError:
            pass
        if broker_id is not None:
            self.client.create(
                "/controller",
                _json({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()}),
                ephemeral=True,
            )
        self._set("/controller_epoch", str(epoch).encode())

    # -- topics -----------------------------------------------------------

    def _set(self, path: str, data: bytes) -> None:
        """``ZkUtils.updatePersistentPath``: set, creating parents when missing,
        retried until ZooKeeper answers (see ``_retry``)."""
        self._retry.copy()(self._set_once, path, data)

    def _set_once(self, path: str, data: bytes) -> None:
        try:
            self.client.set(path, data)
        except NoNodeError:
            try:
                self.client.create(path, data, makepath=True)
            except NodeExistsError:
                self.client.set(path, data)

    def write_topic(self, topic: str, assignment: dict[str, Any],
                    states: dict[int, dict[str, Any]]) -> None:
        """Write a topic's config, assignment and partition states."""
        self._set(f"/config/topics/{topic}", _json({"version": 1, "config": {}}))
        self._set(f"/brokers/topics/{topic}", _json(assignment))
        for partition, state in states.items():
            self.write_state(topic, partition, state)

    def write_assignment(self, topic: str, assignment: dict[str, Any]) -> None:
        """Rewrite ``/brokers/topics/<topic>`` (a reassignment)."""
        self._set(f"/brokers/topics/{topic}", _json(assignment))

    def write_state(self, topic: str, partition: int, state: dict[str, Any]) -> None:
        """Write ``/brokers/topics/<topic>/partitions/<p>/state``."""
        self._set(f"/brokers/topics/{topic}/partitions/{partition}/state", _json(state))

    def read_topics(self) -> dict[str, tuple[dict[int, list[int]], dict[int, dict[str, Any]]]]:
        """Every topic: ``{topic: ({partition: replicas}, {partition: state})}``.

        Topics whose documents do not parse are skipped (Kafka would not
        load them either).
        """
        result: dict[str, tuple[dict[int, list[int]], dict[int, dict[str, Any]]]] = {}
        for topic in self.client.get_children("/brokers/topics"):
            try:
                data, _ = self.client.get(f"/brokers/topics/{topic}")
                document = json.loads(data.decode("utf-8"))
                assignment = {int(p): [int(r) for r in replicas]
                              for p, replicas in document["partitions"].items()}
            except (NoNodeError, ValueError, KeyError, TypeError, AttributeError):
                continue
            states: dict[int, dict[str, Any]] = {}
            for partition in assignment:
                try:
                    raw, _ = self.client.get(
                        f"/brokers/topics/{topic}/partitions/{partition}/state")
                    states[partition] = json.loads(raw.decode("utf-8"))
                except (NoNodeError, ValueError):
                    continue
            result[topic] = (assignment, states)
        return result

    # -- consumer offsets (OffsetCommit/OffsetFetch v0) ---------------------

    @staticmethod
    def offset_path(group: str, topic: str, partition: int) -> str:
        """``/consumers/<group>/offsets/<topic>/<partition>`` (``ZKGroupTopicDirs``)."""
        return f"/consumers/{group}/offsets/{topic}/{partition}"

    def commit_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Store ``offset`` as a decimal string, as 0.8.2 does for v0 commits."""
        self._set(self.offset_path(group, topic, partition), str(offset).encode("ascii"))

    def fetch_offset(self, group: str, topic: str, partition: int) -> Optional[bytes]:
        """The stored offset's raw data, ``None`` when nothing was committed."""
        try:
            data, _ = self.client.get(self.offset_path(group, topic, partition))
        except NoNodeError:
            return None
        return data
