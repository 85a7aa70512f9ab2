"""The real-ZooKeeper launcher (kiel.testing.zookeeper) against real servers.

No mocks: every test runs Debian's ZooKeeper server in Java. When Java or the
jars are missing these tests fail (MissingDependencyError says what to
install); they never skip.
"""
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import SessionExpiredError
from kazoo.protocol.serialization import Connect, int_int_struct, int_struct

from kiel.exc import HarnessError, MissingDependencyError
from kiel.testing.zookeeper import (
    INSTALL_HINT,
    ZooKeeperServer,
    four_letter_word,
    zookeeper_classpath,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.zookeeper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class StateLog:
    """Records a kazoo client's state changes; waits for one, bounded."""

    def __init__(self, client):
        self.states = []
        self._cond = threading.Condition()
        client.add_listener(self)

    def __call__(self, state):
        with self._cond:
            self.states.append(state)
            self._cond.notify_all()

    def wait_for(self, state, timeout=10.0, after=0):
        with self._cond:
            ok = self._cond.wait_for(lambda: state in self.states[after:], timeout)
        assert ok, f"client never reached {state} within {timeout} s (saw {self.states})"


def unique_path():
    return f"/kiel-test-{uuid.uuid4().hex}"


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def listening_sockets(pid):
    """(ip, port) of every TCP socket process ``pid`` listens on, from /proc."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state != "0A" or inode not in inodes:  # 0A = LISTEN
                    continue
                address, port = local.split(":")
                if len(address) == 8:
                    ip = ".".join(str(b) for b in reversed(bytes.fromhex(address)))
                else:
                    ip = address  # IPv6: kept raw, never expected here
                found.append((ip, int(port, 16)))
    return found


# --------------------------------------------------------------------------
# Standalone server


def test_standalone_start_stop_close():
    server = ZooKeeperServer()
    assert server.hosts == "" and server.port == 0  # nothing runs before start()
    with server as zk:
        assert zk.mode == "standalone"
        assert zk.hosts == f"127.0.0.1:{zk.port}"
        # Listens on its client port on loopback and nowhere else (no admin
        # server, no JMX port); logs go to the node's file, not the terminal.
        assert listening_sockets(zk.node.pid) == [("127.0.0.1", zk.port)]
        assert f"binding to port /127.0.0.1:{zk.port}" in open(zk.node.log_path).read()
        assert "zk_server_state\tstandalone" in four_letter_word(zk.host, zk.port, "mntr")
        pid, work_dir, port = zk.node.pid, zk.work_dir, zk.port

        zk.stop()
        assert not zk.node.is_running and zk.mode is None and not pid_alive(pid)
        zk.start()
        assert zk.port == port and zk.mode == "standalone"
        pid = zk.node.pid
    # close(): process gone, temp dir removed, start refused.
    assert not pid_alive(pid)
    assert not os.path.exists(work_dir)
    with pytest.raises(HarnessError):
        server.start()


def test_kazoo_client_creates_znodes(kazoo_client, zookeeper):
    path = unique_path()
    kazoo_client.create(path + "/a", b"one", makepath=True)
    kazoo_client.create(path + "/b", b"two", ephemeral=True)
    assert kazoo_client.get(path + "/a")[0] == b"one"
    assert sorted(kazoo_client.get_children(path)) == ["a", "b"]
    status = zookeeper.node.status()
    assert status["Mode"] == "standalone" and int(status["Node count"]) >= 7


def test_restart_keeps_data_and_port():
    with ZooKeeperServer() as zk:
        client = KazooClient(hosts=zk.hosts)
        client.start(timeout=15)
        client.create("/kept", b"data")
        client.stop()
        client.close()
        port, data_dir = zk.port, zk.node.data_dir

        zk.restart()
        assert zk.port == port and zk.node.data_dir == data_dir

        zk.kill()  # a crash, not a clean shutdown
        zk.start()
        client = KazooClient(hosts=zk.hosts)
        client.start(timeout=15)
        try:
            assert client.get("/kept")[0] == b"data"
        finally:
            client.stop()
            client.close()


@pytest.mark.slow
def test_pause_and_resume():
    with ZooKeeperServer() as zk:
        client = KazooClient(hosts=zk.hosts, timeout=6.0)
        log = StateLog(client)
        client.start(timeout=15)
        session = client.client_id[0]
        try:
            zk.pause()
            assert zk.node.is_paused
            assert zk.node.status(timeout=0.3) is None  # frozen: no answer
            log.wait_for(KazooState.SUSPENDED, timeout=8)

            seen = len(log.states)
            zk.resume()
            assert not zk.node.is_paused and zk.mode == "standalone"
            log.wait_for(KazooState.CONNECTED, timeout=10, after=seen)
            # Paused for less than the session timeout: the session survived.
            assert client.client_id[0] == session
            assert KazooState.LOST not in log.states
            client.create(unique_path(), b"after resume")
        finally:
            client.stop()
            client.close()


def test_expire_session_removes_ephemeral_nodes(zookeeper, kazoo_client):
    path = unique_path()
    kazoo_client.create(path, b"mine", ephemeral=True)
    old_session = kazoo_client.client_id[0]
    log = StateLog(kazoo_client)

    observer = KazooClient(hosts=zookeeper.hosts)
    observer.start(timeout=15)
    try:
        assert observer.exists(path) is not None
        deleted = threading.Event()
        observer.DataWatch(path, lambda data, stat: deleted.set() if stat is None else None)

        zookeeper.expire_session(kazoo_client)

        assert KazooState.LOST in log.states
        # The server deleted the session's ephemeral node: another session sees it gone.
        assert deleted.wait(10), "observer's watch never saw the ephemeral node deleted"
        assert observer.exists(path) is None
        # kazoo then starts over with a brand new session.
        log.wait_for(KazooState.CONNECTED, timeout=10, after=log.states.index(KazooState.LOST))
        assert kazoo_client.client_id[0] != old_session
    finally:
        observer.stop()
        observer.close()


def test_expire_session_needs_a_connected_client(zookeeper):
    client = KazooClient(hosts=zookeeper.hosts)
    with pytest.raises(HarnessError):
        zookeeper.expire_session(client)


def test_expire_session_says_harness_error_when_the_second_connection_is_lost(
        zookeeper, kazoo_client, monkeypatch):
    # Seen in a chaos run: the ensemble lost its leader while the second
    # connection was being opened, and kazoo's ConnectionLoss escaped
    # expire_session (documented to raise HarnessError) and ended the
    # member process. The failure to connect is injected here; the session
    # and the server are real.
    from kiel.testing.zookeeper import session

    def refused(address, timeout=None):
        raise ConnectionRefusedError(f"{address} refused (injected)")

    monkeypatch.setattr(session, "create_connection", refused)
    session_id = kazoo_client.client_id[0]
    with pytest.raises(HarnessError, match="second connection.*injected"):
        zookeeper.expire_session(kazoo_client, timeout=1.0)
    # Nothing happened to the session.
    assert kazoo_client.connected and kazoo_client.client_id[0] == session_id


def test_netty_connection_factory_works():
    # Debian's zookeeper.jar manifest forgets netty-codec; the classpath adds it.
    assert any(jar.endswith("/netty-codec.jar") for jar in zookeeper_classpath())
    netty = "-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory"
    with ZooKeeperServer(jvm_options=[netty]) as zk:
        client = KazooClient(hosts=zk.hosts)
        client.start(timeout=15)
        try:
            client.create("/netty", b"ok")
            assert client.get("/netty")[0] == b"ok"
        finally:
            client.stop()
            client.close()
        assert "NettyServerCnxnFactory" in open(zk.node.log_path).read()


def test_failed_start_reports_the_log_tail():
    server = ZooKeeperServer(extra_config={"tickTime": "not-a-number"}, start_timeout=120)
    with pytest.raises(HarnessError) as info:
        with server:
            pass
    # The dead process is noticed as such, not as a timeout.
    message = str(info.value)
    assert "exited with status" in message and "not ready within" not in message
    assert "not-a-number" in message  # from the server's own log
    assert info.value.host == "127.0.0.1" and info.value.port > 0
    # A failed __enter__ still cleans up.
    assert server.work_dir is None and server.nodes == []


def test_taken_port_is_retried_then_reported():
    # Forcing the client port onto one we hold makes every attempt collide:
    # start() tries fresh ports a few times, then reports the bind failure.
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        with pytest.raises(HarnessError) as info:
            with ZooKeeperServer(extra_config={"clientPort": taken}, start_timeout=120):
                pass
    # Reported as the bind failure it is (the node exited, or lingered and
    # was caught by the log check), not as a timeout.
    message = str(info.value)
    assert "Address already in use" in message and "not ready within" not in message


# --------------------------------------------------------------------------
# Ensemble


def test_ensemble_is_ready(zookeeper_ensemble):
    nodes = zookeeper_ensemble.nodes
    assert len(nodes) == 3
    assert zookeeper_ensemble.hosts == ",".join(f"127.0.0.1:{n.port}" for n in nodes)
    modes = sorted(node.mode for node in nodes)
    assert modes == ["follower", "follower", "leader"]
    assert zookeeper_ensemble.leader in nodes and len(zookeeper_ensemble.followers) == 2
    config = open(nodes[0].config_path).read()
    for node in nodes:
        listening = listening_sockets(node.pid)
        assert all(ip == "127.0.0.1" for ip, _ in listening), listening
        assert {node.port, node.election_port} <= {port for _, port in listening}
    for node in nodes:
        assert f"server.{node.node_id}=127.0.0.1:{node.peer_port}:{node.election_port}" in config
        assert open(os.path.join(node.data_dir, "myid")).read().strip() == str(node.node_id)


def test_expire_session_on_an_ensemble(zookeeper_ensemble):
    # The second connection may land on another server: closeSession is a
    # quorum transaction, so the client's own server drops it too.
    client = KazooClient(hosts=zookeeper_ensemble.hosts, timeout=4.0)
    client.start(timeout=15)
    try:
        path = unique_path()
        client.create(path, b"", ephemeral=True)
        old_session = client.client_id[0]
        zookeeper_ensemble.expire_session(client, wait_reconnect=True)
        assert client.connected and client.client_id[0] != old_session
        assert client.exists(path) is None
    finally:
        client.stop()
        client.close()


def _holders(ensemble, session_id):
    """The servers that hold a connection of ``session_id`` now (their ``cons``)."""
    return [node.address for node in ensemble.nodes
            if f"sid=0x{session_id:x}" in four_letter_word(node.host, node.port, "cons")]


def _connections(node):
    """The lines of ``node``'s ``cons``, one per client connection."""
    return [line for line in four_letter_word(node.host, node.port, "cons").splitlines()
            if "sid=0x" in line]


def _frame(sock):
    """One length-prefixed ZooKeeper frame from ``sock``."""
    def exactly(count):
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            assert chunk, "the server closed the connection"
            data += chunk
        return data
    (length,) = int_struct.unpack(exactly(int_struct.size))
    return exactly(length)


def _strand_on_a_follower(ensemble, fault_proxy, attempts=10):
    """A client left connected to its closed session, as in the chaos suite's seed 529817.

    A connection of our own with the client's session goes to the client's
    follower (the follower drops the client's connection: one per session
    per server) and sends the close, which the follower reads and passes to
    the leader, paused meanwhile. The client, behind a proxy held dark until
    then, sees its connection dropped and comes back to the follower at once
    (its host is listed twice), so its revalidation reaches the leader right
    behind the close. When the leader answers the revalidation first, the
    follower keeps the client's connection after the close, since the close
    came from another one. Which the leader takes first is its own race, so
    this is tried up to ``attempts`` times.

    Returns:
        ``(client, session_id, log)``: the stranded client (the caller stops
        it), its closed session and its :class:`StateLog`.
    """
    for _ in range(attempts):
        ensemble.wait_ready(30)
        leader, follower = ensemble.leader, ensemble.followers[0]
        proxy = fault_proxy(follower.address)
        client = KazooClient(hosts=f"{proxy.address},{proxy.address}", timeout=2.0,
                             connection_retry={"max_tries": -1, "delay": 0.1})
        client.start(timeout=15)
        session_id, password = client.client_id
        log = StateLog(client)
        proxy.blackout()
        request = bytes(Connect(0, 0, 2000, session_id, password, False).serialize())
        with socket.create_connection((follower.host, follower.port), 10) as ours:
            ours.sendall(int_struct.pack(len(request)) + request)
            _frame(ours)  # the session is ours now, on the follower
            mine = f":{ours.getsockname()[1]}["
            leader.pause()
            try:
                ours.sendall(int_struct.pack(8) + int_int_struct.pack(1, -11))  # closeSession
                wait_until(lambda: any(mine in c and "recved=2," in c  # noqa: B023
                                       for c in _connections(follower)),  # noqa: B023
                           timeout=5, what="the close read by the follower")
                proxy.restore()
                wait_until(lambda: any(mine not in c and f"sid=0x{session_id:x}" in c  # noqa: B023
                                       for c in _connections(follower)),  # noqa: B023
                           timeout=5, what="the client back at the follower")
            finally:
                leader.resume()
        wait_until(lambda: client.connected or KazooState.LOST in log.states,  # noqa: B023
                   timeout=10, what="the client's revalidation answered")
        if client.client_id and client.client_id[0] == session_id:
            try:
                client.create(unique_path(), b"", ephemeral=True)
            except SessionExpiredError:
                return client, session_id, log
        client.stop()
        client.close()
    pytest.fail(f"no client was left on its closed session in {attempts} attempts")


@pytest.mark.slow
def test_expire_session_tells_a_client_left_on_its_closed_session(zookeeper_ensemble,
                                                                   fault_proxy):
    # Seen in the chaos suite (seed 529817, ensemble): a member thrown off a
    # follower by expire_session's second connection came back to it while
    # the close was on its way; the follower kept its connection and
    # answered its pings, so the member never learnt that its session was
    # gone, and went on fetching for 31 s partitions whose owner znodes
    # another member held by then. Such a client must be told: no server may
    # keep a connection of the session.
    client, session_id, log = _strand_on_a_follower(zookeeper_ensemble, fault_proxy)
    try:
        # ZooKeeper's side of it: past its session timeout the client is
        # still connected to the dead session, and nothing tells it.
        time.sleep(3.0)  # the session timeout (2 s) and a second
        assert client.connected and client.client_id[0] == session_id
        assert KazooState.LOST not in log.states
        assert _holders(zookeeper_ensemble, session_id)

        zookeeper_ensemble.expire_session(client, timeout=10.0, wait_reconnect=True)
        assert KazooState.LOST in log.states
        assert client.connected and client.client_id[0] != session_id
        assert _holders(zookeeper_ensemble, session_id) == []
    finally:
        client.stop()
        client.close()


@pytest.mark.slow
def test_ensemble_survives_a_killed_follower(zookeeper_ensemble):
    ensemble = zookeeper_ensemble
    victim = ensemble.followers[0]
    others = [node for node in ensemble.nodes if node is not victim]
    # Connect to the victim first so the client has to fail over.
    hosts = ",".join([victim.address] + [node.address for node in others])
    client = KazooClient(hosts=hosts, timeout=6.0, randomize_hosts=False)
    log = StateLog(client)
    client.start(timeout=15)
    path = unique_path()
    try:
        assert client.client_id is not None
        session = client.client_id[0]
        client.create(path, b"before", ephemeral=True)

        victim.kill()
        assert not victim.is_running
        ensemble.wait_ready(timeout=20)  # the two others still form a quorum
        client.set(path, b"after")  # kazoo retries until it has failed over

        assert client.client_id[0] == session
        assert KazooState.LOST not in log.states
        assert client.get(path)[0] == b"after"

        # The follower comes back on its port and catches up.
        victim.start()
        assert victim.mode in ("leader", "follower")
        direct = KazooClient(hosts=victim.address)
        direct.start(timeout=15)
        try:
            direct.sync(path)
            assert direct.get(path)[0] == b"after"
        finally:
            direct.stop()
            direct.close()
    finally:
        client.stop()
        client.close()
        ensemble.heal()


# --------------------------------------------------------------------------
# Missing dependencies and the safety nets


def test_missing_java_is_a_clear_error(tmp_path):
    with pytest.raises(MissingDependencyError) as info:
        ZooKeeperServer(java_home=str(tmp_path))
    assert INSTALL_HINT in str(info.value)
    assert "default-jre-headless" in str(info.value)
    assert info.value.context["dependency"] == "java"


def test_no_java_on_path_in_a_fresh_process(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # an empty directory: no java anywhere
    code = textwrap.dedent(
        """
        from kiel.exc import MissingDependencyError
        from kiel.testing.zookeeper import ZooKeeperServer
        try:
            ZooKeeperServer()
        except MissingDependencyError as err:
            print(err)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert "no `java` on PATH" in result.stdout
    assert "apt-get install zookeeper default-jre-headless" in result.stdout


def test_missing_jars_is_a_clear_error(tmp_path):
    with pytest.raises(MissingDependencyError) as info:
        ZooKeeperServer(jar_dir=str(tmp_path))
    message = str(info.value)
    assert "zookeeper.jar" in message and INSTALL_HINT in message
    assert info.value.context["dependency"] == "zookeeper"


@pytest.mark.slow
@pytest.mark.parametrize("ending", ["normal exit", "os._exit"])
def test_no_java_process_outlives_the_interpreter(ending):
    # Normal exit: the atexit hook closes the server. os._exit (what
    # pytest-timeout's thread method does) skips atexit: the kernel's
    # parent-death signal kills Java instead.
    finish = "import os; os._exit(0)" if ending == "os._exit" else "pass"
    code = textwrap.dedent(
        f"""
        from kiel.testing.zookeeper import ZooKeeperServer
        zk = ZooKeeperServer()
        zk.start()
        print(zk.node.pid, zk.work_dir, flush=True)
        {finish}
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    pid_text, work_dir = result.stdout.split()
    wait_until(lambda: not pid_alive(int(pid_text)), timeout=10, what="java process gone")
    if ending == "normal exit":
        assert not os.path.exists(work_dir)
    else:  # nothing in the dying process could remove it
        shutil.rmtree(work_dir, ignore_errors=True)
