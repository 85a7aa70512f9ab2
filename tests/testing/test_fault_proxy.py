"""The fault proxy (kiel.testing.faults) against real peers: a loopback echo
server, the real ZooKeeper with kazoo, and the embedded broker with kiel's
Connection. No mocks: every byte crosses real sockets.
"""
import asyncio
import contextlib
import json
import os
import queue
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest
from kazoo.client import KazooClient, KazooState

from kiel.connection import Connection
from kiel.exc import ConfigError, ConnectionClosedError, HarnessError
from kiel.protocol import MetadataRequest
from kiel.protocol.framing import ClientFraming
from kiel.protocol.versions import LEGACY
from kiel.testing.faults import FaultProxy
from tests.support.raw_requests import fetch_request, only

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WAIT = 15.0  # seconds any wait in these tests may take at most


def eventually(check: Callable[[], Any], timeout: float = WAIT, what: str = "") -> Any:
    """Poll ``check`` until it returns something true; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"not within {timeout} s: {what or check}"
        time.sleep(0.02)


# --------------------------------------------------------------------------
# A loopback echo server on one thread, which counts what it sees.


class EchoServer:
    """Echoes every byte back; counts connections, bytes, FINs and resets it saw."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.accepted = self.received = self.eofs = self.resets = 0
        self._out: Dict[socket.socket, bytearray] = {}
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.listener, selectors.EVENT_READ)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="echo-server", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, mask in self._selector.select(0.05):
                if key.fileobj is self.listener:
                    conn, _ = self.listener.accept()
                    conn.setblocking(False)
                    self.accepted += 1
                    self._out[conn] = bytearray()
                    self._selector.register(conn, selectors.EVENT_READ)
                    continue
                conn = key.fileobj  # type: ignore[assignment]
                if mask & selectors.EVENT_READ:
                    self._read(conn)
                if conn in self._out and mask & selectors.EVENT_WRITE:
                    self._flush(conn)
        for conn in list(self._out):
            self._drop(conn)
        self._selector.close()
        self.listener.close()

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(65536)
        except ConnectionResetError:
            self.resets += 1
            self._drop(conn)
            return
        if not data:
            self.eofs += 1
            self._drop(conn)
            return
        self.received += len(data)
        self._out[conn] += data
        self._selector.modify(conn, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def _flush(self, conn: socket.socket) -> None:
        out = self._out[conn]
        try:
            sent = conn.send(out)
        except BlockingIOError:
            return
        except ConnectionResetError:
            self.resets += 1
            self._drop(conn)
            return
        del out[:sent]
        if not out:
            self._selector.modify(conn, selectors.EVENT_READ)

    def _drop(self, conn: socket.socket) -> None:
        self._selector.unregister(conn)
        del self._out[conn]
        conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(WAIT)


@pytest.fixture
def echo() -> Any:
    server = EchoServer()
    yield server
    server.close()


def connect(proxy: FaultProxy, timeout: float = WAIT) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=timeout)


def recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, f"connection closed after {len(data)} of {count} bytes"
        data += chunk
    return data


def assert_silent(sock: socket.socket, seconds: float = 0.5) -> None:
    """Nothing arrives on ``sock`` for a while: no data, no FIN, no RST."""
    sock.settimeout(seconds)
    with pytest.raises(socket.timeout):
        sock.recv(1)
    sock.settimeout(WAIT)


# --------------------------------------------------------------------------
# Raw TCP


def test_bytes_pass_both_ways_and_are_counted(echo, fault_proxy):
    proxy = fault_proxy(("127.0.0.1", echo.port))
    payload = os.urandom(300_000)
    with connect(proxy) as client:
        client.sendall(payload)
        assert recv_exactly(client, len(payload)) == payload
        client.shutdown(socket.SHUT_WR)  # our FIN reaches the server, its FIN comes back
        assert client.recv(1) == b""
    stats = eventually(lambda: (s := proxy.stats()).active == 0 and s, what="link closed")
    assert (stats.accepted, stats.cut, stats.failed) == (1, 0, 0)
    assert stats.bytes_upstream == stats.bytes_downstream == len(payload)
    assert stats.held_upstream == stats.held_downstream == 0
    assert (echo.accepted, echo.eofs, echo.resets) == (1, 1, 0)


def test_cut_resets_both_sides_and_new_connections_pass(echo, fault_proxy):
    proxy = fault_proxy(f"127.0.0.1:{echo.port}")
    clients = [connect(proxy) for _ in range(2)]
    for client in clients:
        client.sendall(b"hi")
        assert recv_exactly(client, 2) == b"hi"
    assert proxy.cut() == 2
    for client in clients:
        with pytest.raises(ConnectionResetError):
            client.recv(1)
        client.close()
    eventually(lambda: echo.resets == 2, what="the server saw two resets")
    assert echo.eofs == 0
    stats = proxy.stats()
    assert (stats.accepted, stats.cut, stats.active) == (2, 2, 0)
    with connect(proxy) as client:
        client.sendall(b"again")
        assert recv_exactly(client, 5) == b"again"


def test_cut_while_links_connect_to_the_target_resets_every_one(echo, fault_proxy):
    # Each cut() lands while some links are still connecting to the target.
    # A link whose connect finished in the round of the cut once lost the
    # cancel (asyncio.wait_for before Python 3.12) and went on carrying: cut()
    # then waited for it until its call bound ran out.
    proxy = fault_proxy(("127.0.0.1", echo.port), timeout=3.0)
    for _ in range(30):
        clients = [connect(proxy) for _ in range(10)]
        for _ in range(3):
            proxy.cut()  # timed out here before the fix; now stop() would report such a link
        for client in clients:
            client.close()
    eventually(lambda: proxy.stats().active == 0, what="no link left")
    stats = proxy.stats()
    assert (stats.accepted, stats.cut) == (300, 300)  # each reset by the first cut after it
    with connect(proxy) as client:
        client.sendall(b"after")
        assert recv_exactly(client, 5) == b"after"


def test_blackout_passes_nothing_closes_nothing_and_resumes_held_connections(echo, fault_proxy):
    proxy = fault_proxy(("127.0.0.1", echo.port))
    talker, closer = connect(proxy), connect(proxy)
    for client in (talker, closer):
        client.sendall(b"warm")
        assert recv_exactly(client, 4) == b"warm"
    received = echo.received

    proxy.blackout()
    talker.sendall(b"ping")
    closer.shutdown(socket.SHUT_WR)
    late = connect(proxy)  # accepted, and held: like a partition, it gets no answer
    late.sendall(b"late")
    quitter = connect(proxy)  # gives up during the blackout: never reaches the server
    quitter.close()
    assert_silent(talker)
    assert_silent(late)
    stats = eventually(lambda: (s := proxy.stats()).held_upstream == 4 and s, what="ping held")
    assert stats.blackout and stats.waiting == 2
    # The far side saw nothing either: no byte, no FIN, no new connection.
    assert (echo.received, echo.eofs, echo.accepted) == (received, 0, 2)

    proxy.restore()
    assert recv_exactly(talker, 4) == b"ping"
    assert recv_exactly(late, 4) == b"late"
    assert closer.recv(1) == b""  # the held FIN passed, and the server's came back
    eventually(lambda: echo.eofs == 1, what="the server saw the held FIN")
    assert echo.accepted == 3  # talker, closer, late: the quitter never arrived
    for client in (talker, closer, late):
        client.close()


def test_a_timed_blackout_ends_by_itself(echo, fault_proxy):
    proxy = fault_proxy(("127.0.0.1", echo.port))
    with connect(proxy) as client:
        proxy.blackout(0.3)
        assert proxy.stats().blackout
        client.sendall(b"after")
        assert recv_exactly(client, 5) == b"after"
    assert not proxy.stats().blackout


def round_trip(client: socket.socket, data: bytes = b"x") -> float:
    started = time.monotonic()
    client.sendall(data)
    assert recv_exactly(client, len(data)) == data
    return time.monotonic() - started


def test_delay_adds_at_least_the_configured_latency_per_direction(echo, fault_proxy):
    proxy = fault_proxy(("127.0.0.1", echo.port))
    with connect(proxy) as client:
        proxy.delay(0.2)
        assert round_trip(client) >= 0.4  # 0.2 s each way
        proxy.delay(0, "both")
        proxy.delay(0.3, "upstream")
        stats = proxy.stats()
        assert (stats.delay_upstream, stats.delay_downstream) == (0.3, 0.0)
        assert round_trip(client) >= 0.3
        proxy.heal()
        assert proxy.stats().delay_upstream == 0.0


def test_stalls_hold_bytes_and_release_them_in_order(echo, fault_proxy):
    proxy = fault_proxy(("127.0.0.1", echo.port))
    with connect(proxy) as client:
        proxy.stall("downstream")
        client.sendall(b"abc")
        eventually(lambda: proxy.stats().held_downstream == 3, what="answer held")
        client.sendall(b"def")
        eventually(lambda: proxy.stats().held_downstream == 6, what="second answer held")
        assert echo.received == 6  # upstream still passes
        assert_silent(client)
        proxy.unstall("downstream")
        assert recv_exactly(client, 6) == b"abcdef"

        proxy.stall("upstream")
        client.sendall(b"ghi")
        eventually(lambda: proxy.stats().held_upstream == 3, what="request held")
        assert echo.received == 6 and proxy.stats().stalled_upstream
        proxy.unstall()
        assert recv_exactly(client, 3) == b"ghi"
    assert proxy.stats().peak_held_downstream == 6


def test_a_stalled_direction_holds_at_most_its_bound(echo, fault_proxy):
    bound = 64 * 1024
    proxy = fault_proxy(("127.0.0.1", echo.port), max_held=bound)
    payload = os.urandom(16 * 1024 * 1024)  # far more than the kernel's buffers take
    echoed = bytearray()
    with connect(proxy) as client:
        proxy.stall("upstream")
        sender = threading.Thread(target=client.sendall, args=(payload,), daemon=True)
        sender.start()
        eventually(lambda: proxy.stats().held_upstream == bound, what="the bound reached")
        time.sleep(0.3)  # a proxy that kept reading would now hold more
        assert proxy.stats().held_upstream == bound
        assert sender.is_alive()  # the sender is blocked: back-pressure, not buffering
        assert echo.received == 0

        def read_all() -> None:
            while len(echoed) < len(payload):
                chunk = client.recv(1 << 20)
                if not chunk:
                    return
                echoed.extend(chunk)

        reader = threading.Thread(target=read_all, daemon=True)
        reader.start()
        proxy.unstall("upstream")
        sender.join(60)
        reader.join(60)
    assert bytes(echoed) == payload  # every byte, in order
    stats = proxy.stats()
    assert stats.peak_held_upstream == bound
    assert stats.bytes_upstream == len(payload)


def socket_fds() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return count


def test_stop_leaves_no_thread_and_no_socket_and_restarts_on_the_same_port(echo):
    threads, sockets = set(threading.enumerate()), socket_fds()
    proxy = FaultProxy(("127.0.0.1", echo.port))
    proxy.start()
    port = proxy.port
    client = connect(proxy)
    client.sendall(b"x")
    assert recv_exactly(client, 1) == b"x"
    proxy.blackout()
    held = connect(proxy)
    proxy.stop()
    assert set(threading.enumerate()) == threads
    for sock in (client, held):  # what it carried is reset
        with pytest.raises(ConnectionResetError):
            sock.recv(1)
        sock.close()
    # (the echo server closes its ends as the resets reach it)
    eventually(lambda: socket_fds() == sockets, what="every socket closed")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    with pytest.raises(HarnessError):
        proxy.cut()
    proxy.stop()  # idempotent

    with proxy:
        assert proxy.port == port and not proxy.stats().blackout
        with connect(proxy) as client:
            client.sendall(b"y")
            assert recv_exactly(client, 1) == b"y"
    assert set(threading.enumerate()) == threads


def test_a_refusing_target_resets_the_client(fault_proxy):
    with socket.socket() as bound:  # bound, not listening: the port refuses, and stays ours
        bound.bind(("127.0.0.1", 0))
        proxy = fault_proxy(bound.getsockname())
        # The reset can reach the client while its connect() is still
        # returning (loopback is that fast) or at its first read: both are
        # the reset this test is about.
        with pytest.raises(ConnectionResetError):
            with connect(proxy) as client:
                client.recv(1)
    assert eventually(lambda: proxy.stats().failed == 1)


@pytest.mark.parametrize("target", ["10.1.2.3:9092", "example.org:2181", "127.0.0.1", "::1:x",
                                    ("192.168.0.1", 1), ("127.0.0.1", 0)])
def test_only_loopback_targets(target):
    with pytest.raises(ConfigError):
        FaultProxy(target)


def test_bad_fault_arguments_are_config_errors(echo, fault_proxy):
    proxy = fault_proxy(("127.0.0.1", echo.port))
    for call in (lambda: proxy.stall("sideways"), lambda: proxy.delay(-1),
                 lambda: proxy.blackout(float("inf")), lambda: proxy.delay(0.1, "up")):
        with pytest.raises(ConfigError):
            call()
    assert FaultProxy("localhost:1").target == ("127.0.0.1", 1)
    assert FaultProxy("[::1]:2").target == ("::1", 2)


# --------------------------------------------------------------------------
# The command line


def read_line(process: subprocess.Popen, timeout: float = WAIT) -> Dict[str, Any]:
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: lines.put(process.stdout.readline()), daemon=True).start()
    line = lines.get(timeout=timeout)
    assert line, process.stderr.read().decode()
    return json.loads(line)


def command(process: subprocess.Popen, line: str) -> Dict[str, Any]:
    process.stdin.write(line.encode() + b"\n")
    process.stdin.flush()
    return read_line(process)


@contextlib.contextmanager
def proxy_process(*args: str, stdin: Any = subprocess.PIPE) -> Iterator[subprocess.Popen]:
    """``python -m kiel.testing proxy ARGS``, killed at the end if still running."""
    process = subprocess.Popen([sys.executable, "-m", "kiel.testing", "proxy", *args],
                               stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=REPO)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=WAIT)


def test_command_line_proxy_is_driven_through_stdin(echo):
    with proxy_process("--target", f"127.0.0.1:{echo.port}") as process:
        ready = read_line(process)
        assert set(ready) == {"proxy", "target", "pid"}
        assert ready["target"] == f"127.0.0.1:{echo.port}" and ready["pid"] == process.pid
        host, port = ready["proxy"].rsplit(":", 1)
        assert host == "127.0.0.1"
        with socket.create_connection((host, int(port)), timeout=WAIT) as client:
            client.sendall(b"hello")
            assert recv_exactly(client, 5) == b"hello"
            answer = command(process, "cut")
            assert answer["ok"] and answer["result"] == 1 and answer["stats"]["cut"] == 1
            with pytest.raises(ConnectionResetError):
                client.recv(1)
        assert command(process, "blackout")["stats"]["blackout"] is True
        assert command(process, "restore")["stats"]["blackout"] is False
        assert command(process, "delay 0.05 upstream")["stats"]["delay_upstream"] == 0.05
        assert command(process, "stall downstream")["stats"]["stalled_downstream"] is True
        assert command(process, "heal")["stats"]["stalled_downstream"] is False
        wrong = command(process, "delay soon")
        assert not wrong["ok"] and wrong["type"] == "ConfigError"
        assert command(process, "teleport")["type"] == "ConfigError"
        stats = command(process, "stats")["stats"]
        assert stats["accepted"] == 1 and stats["bytes_upstream"] == 5
        assert command(process, "stop")["ok"]
        out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 0, err.decode()
    assert out == b""  # nothing after the answer to stop
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", int(port)), timeout=WAIT)


def test_command_line_proxy_on_a_fixed_port_stops_on_sigterm(echo):
    with socket.create_server(("127.0.0.1", 0)) as probe:
        free = probe.getsockname()[1]
    with proxy_process("--target", f"localhost:{echo.port}", "--listen-port", str(free),
                       stdin=subprocess.DEVNULL) as process:
        assert read_line(process)["proxy"] == f"127.0.0.1:{free}"
        with socket.create_connection(("127.0.0.1", free), timeout=WAIT) as client:
            client.sendall(b"ok")  # the end of stdin did not stop it
            assert recv_exactly(client, 2) == b"ok"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 0, err.decode()
    assert out == b""


def test_command_line_proxy_refuses_a_remote_target():
    with proxy_process("--target", "192.0.2.1:2181", stdin=subprocess.DEVNULL) as process:
        out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 1 and out == b""
    assert b"loopback" in err


# --------------------------------------------------------------------------
# Against the real ZooKeeper, with kazoo


class States:
    """The states a kazoo client reports, in order; waits for one, bounded."""

    def __init__(self, client: KazooClient) -> None:
        self.seen: List[str] = []
        self._changed = threading.Condition()
        client.add_listener(self._record)

    def _record(self, state: str) -> None:
        with self._changed:
            self.seen.append(state)
            self._changed.notify_all()

    def wait(self, state: str, after: Optional[str] = None, timeout: float = 30.0) -> None:
        """Wait until ``state`` is seen (after ``after``, if given)."""

        def arrived() -> bool:
            start = self.seen.index(after) + 1 if after in self.seen else 0
            return (after is None or after in self.seen) and state in self.seen[start:]

        with self._changed:
            assert self._changed.wait_for(arrived, timeout), f"no {state} in {self.seen}"


@contextlib.contextmanager
def kazoo_through(proxy: FaultProxy, session_timeout: float) -> Iterator[Any]:
    """A kazoo client connected through ``proxy``, with an ephemeral node of its
    session; yields ``(client, states, path)`` and closes the client at the end."""
    client = KazooClient(hosts=proxy.address, timeout=session_timeout)
    states = States(client)
    client.start(timeout=WAIT)
    try:
        path = client.create(f"/kiel-proxy-{uuid.uuid4().hex}", b"", ephemeral=True)
        yield client, states, path
    finally:
        client.stop()
        client.close()


@pytest.fixture
def observer(zookeeper) -> Any:
    """A kazoo client straight to the server: sees what the server really did."""
    zookeeper.heal()
    client = KazooClient(hosts=zookeeper.hosts, timeout=10.0)
    client.start(timeout=WAIT)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def zk_proxy(zookeeper, fault_proxy) -> FaultProxy:
    """A fault proxy in front of the session's ZooKeeper server."""
    return fault_proxy((zookeeper.host, zookeeper.port))


@pytest.mark.zookeeper
def test_kazoo_through_a_cut_is_suspended_then_connected_on_the_same_session(
        zk_proxy, observer):
    proxy = zk_proxy
    with kazoo_through(proxy, session_timeout=10.0) as (client, states, path):
        session = client.client_id[0]
        assert proxy.cut() == 1
        states.wait(KazooState.SUSPENDED)
        states.wait(KazooState.CONNECTED, after=KazooState.SUSPENDED)
        assert KazooState.LOST not in states.seen
        assert client.client_id[0] == session
        assert observer.exists(path) is not None
        assert proxy.stats().accepted >= 2


@pytest.mark.zookeeper
@pytest.mark.slow
def test_a_blackout_longer_than_the_session_expires_it_on_the_server(zk_proxy, observer):
    proxy = zk_proxy
    with kazoo_through(proxy, session_timeout=2.0) as (client, states, path):
        session = client.client_id[0]
        proxy.blackout()
        # The server expires the session (its ephemeral node goes) while the
        # client, cut off, can only notice its own timeouts.
        eventually(lambda: observer.exists(path) is None, timeout=30,
                   what="the server expired the session")
        states.wait(KazooState.SUSPENDED)
        assert KazooState.LOST not in states.seen
        proxy.restore()
        states.wait(KazooState.LOST)  # told by the server once it is reachable again
        states.wait(KazooState.CONNECTED, after=KazooState.LOST)
        assert client.client_id[0] != session


@pytest.mark.zookeeper
@pytest.mark.slow
def test_a_blackout_shorter_than_the_session_keeps_it(zk_proxy, observer):
    proxy = zk_proxy
    # kazoo gives up on a connection after 2/3 of the session without an
    # answer; the server keeps the session for all of it.
    with kazoo_through(proxy, session_timeout=10.0) as (client, states, path):
        session = client.client_id[0]
        proxy.blackout()
        states.wait(KazooState.SUSPENDED)  # the client noticed, by its own timeout
        proxy.restore()
        states.wait(KazooState.CONNECTED, after=KazooState.SUSPENDED)
        assert KazooState.LOST not in states.seen
        assert client.client_id[0] == session
        assert observer.exists(path) is not None
        assert client.exists(path) is not None


# --------------------------------------------------------------------------
# Against the embedded broker, with kiel's Connection


def test_a_request_in_flight_when_cut_fails_typed_and_the_next_connection_succeeds(
        kafka_cluster, topic_factory, fault_proxy):
    topic = topic_factory(partitions=1)
    leader = kafka_cluster.leader(topic, 0)
    proxy = fault_proxy(kafka_cluster.address(leader))
    # A long poll on an empty partition: the broker holds it for 20 s.
    long_poll = fetch_request(topic, 0, 0, max_wait=20_000, min_bytes=1)
    frame_size = len(ClientFraming("kiel").send_request(long_poll)[1])

    async def main() -> None:
        loop = asyncio.get_running_loop()
        # The 0.8.2 versions pinned: no ApiVersions probe (a 0.8 broker closes
        # the connection on it), so the proxy sees this test's connections only.
        conn = Connection("127.0.0.1", proxy.port, broker_id=leader, versions=LEGACY)
        fetch = asyncio.ensure_future(conn.send(long_poll, timeout=60))
        while (await loop.run_in_executor(None, proxy.stats)).bytes_upstream < frame_size:
            await asyncio.sleep(0.02)
        assert not fetch.done()  # with the broker, waiting for data
        assert await loop.run_in_executor(None, proxy.cut) == 1
        with pytest.raises(ConnectionClosedError) as caught:
            await fetch
        assert caught.value.port == proxy.port and caught.value.broker_id == leader
        assert conn.closed

        again = Connection("127.0.0.1", proxy.port, broker_id=leader, versions=LEGACY)
        try:
            metadata = await again.send(MetadataRequest([topic]))
            assert [t.topic for t in metadata.topics] == [topic]
            assert only(await again.send(fetch_request(topic, 0, 0))).error_code == 0
        finally:
            again.close()

    asyncio.run(asyncio.wait_for(main(), 60))
    stats = proxy.stats()
    assert (stats.accepted, stats.cut) == (2, 1)


# --------------------------------------------------------------------------
# The example


@pytest.mark.zookeeper
@pytest.mark.slow
def test_the_example_runs():
    example = os.path.join(REPO, "examples", "fault_proxy.py")
    # PYTHONPATH: the example imports this checkout's kiel, not an installed one.
    env = {**os.environ, "PYTHONPATH": REPO}
    out = subprocess.run([sys.executable, example], capture_output=True, text=True, timeout=180,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "cut: SUSPENDED, CONNECTED (same session: True)" in out.stdout
    assert "blackout: SUSPENDED, LOST, CONNECTED (same session: False)" in out.stdout
