"""The proxy on its own loop: the listening socket, the links, the fault operations.

Every method here runs on the proxy's loop (:class:`~kiel.testing.faults.proxy.FaultProxy`
calls them there from any thread).
"""

import asyncio
import logging
import socket
from typing import Optional

from kiel._aio import Tasks
from kiel.exc import HarnessError
from kiel.testing.faults.frames import KafkaRules, _Rule
from kiel.testing.faults.pipe import Link
from kiel.testing.faults.sockets import wait_ready
from kiel.testing.faults.state import Counters, Faults, ProxyStats

__all__ = ["ProxyCore"]

log = logging.getLogger(__name__)


class ProxyCore:
    """A listening socket on 127.0.0.1 and the links it accepted.

    Args:
        target: ``(host, port)`` of the target (a loopback address).
        port: port to listen on (0: any free one).
        max_held: bytes each direction of each link holds at most.
        connect_timeout: seconds to connect to the target.
        stop_timeout: seconds a cancelled task (the acceptor, each batch of
            links) may take to end; keep it well under the bound of the call
            that waits for it, so that a link that outlives its cancel is
            reported as what it is rather than as a call that timed out.
    """

    def __init__(self, target: tuple[str, int], port: int, max_held: int,
                 connect_timeout: float, stop_timeout: float, kafka: bool = False,
                 advertise: bool = False) -> None:
        #: The Kafka frame rules (a proxy made with ``kafka=True``), else ``None``.
        self.kafka = KafkaRules() if kafka else None
        self.advertise = advertise
        self.target = target
        self.port = port
        self.max_held = max_held
        self.connect_timeout = connect_timeout
        self.stop_timeout = stop_timeout
        self.faults = Faults()
        self.counters = Counters()
        #: Unexpected failures (bugs); ``FaultProxy.stop()`` raises them.
        self.errors: list[BaseException] = []
        #: Each open link and the task that carries it.
        self._links: dict[Link, asyncio.Task[None]] = {}
        self._tasks = Tasks("kiel-fault-proxy")
        self._acceptor: Optional[asyncio.Task[None]] = None
        self._listener: Optional[socket.socket] = None
        self._blackout_end: Optional[asyncio.TimerHandle] = None

    # -- lifecycle ---------------------------------------------------------------

    async def listen(self) -> None:
        """Bind and start accepting.

        Raises:
            HarnessError: the port cannot be bound.
        """
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("127.0.0.1", self.port))
            listener.listen(128)
        except OSError as e:
            listener.close()
            raise HarnessError(f"fault proxy cannot listen on 127.0.0.1:{self.port}: {e}",
                               host="127.0.0.1", port=self.port) from e
        listener.setblocking(False)
        self.port = listener.getsockname()[1]
        if self.kafka is not None and self.advertise:
            self.kafka.advertise = (self.target[1], self.port)
        self._listener = listener
        self._acceptor = self._tasks.spawn(self._accept(listener), "accept")

    async def close(self) -> None:
        """Stop listening, reset every link, cancel the blackout timer."""
        self._cancel_blackout_end()
        if self._acceptor is not None:
            self._acceptor.cancel()
            await asyncio.wait([self._acceptor], timeout=self.stop_timeout)
        if self._listener is not None:
            # The kernel resets connections still waiting in the backlog.
            self._listener.close()
            self._listener = None
        await self._reset_links()

    async def _accept(self, listener: socket.socket) -> None:
        while self._accept_pending(listener):
            await wait_ready(listener)

    def _accept_pending(self, listener: socket.socket) -> bool:
        """Adopt every connection waiting in the backlog; False once accepting failed."""
        while True:
            try:
                client, _ = listener.accept()
            except BlockingIOError:
                return True
            except ConnectionAbortedError:  # the client reset before we took it
                continue
            except OSError as e:  # out of descriptors or the like: kept for stop()
                self.errors.append(e)
                return False
            self._adopt(client)

    def _adopt(self, client: socket.socket) -> None:
        client.setblocking(False)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.counters.accepted += 1
        link = Link(client, self.target, self.faults, self.counters, self.max_held,
                    self.connect_timeout, self.kafka)
        self._links[link] = self._tasks.spawn(self._carry(link), "link")

    async def _carry(self, link: Link) -> None:
        try:
            await link.run()
        except Exception as e:  # a bug in the proxy: kept for stop(), this link only
            self.errors.append(e)
        finally:
            self._links.pop(link, None)

    # -- faults ------------------------------------------------------------------

    async def kafka_rule(self, which: str, every: int, times: Optional[int],
                         code: int = 0, api_key: int = 0) -> None:
        """Set (``every`` > 0) or clear (0) the ``"cut"`` rule (after answers of
        ``api_key``, Produce by default), the ``"rewrite"`` Produce rule or
        ``api_key``'s ``"answer"`` rule (answered with ``code`` by the proxy)."""
        assert self.kafka is not None
        rule = _Rule(every, times, code, api_key=api_key) if every else None
        if which == "cut":
            self.kafka.cut_rule = rule
        elif which == "rewrite":
            self.kafka.rewrite_rule = rule
        elif rule is None:
            self.kafka.answer_rules.pop(api_key, None)
        else:
            self.kafka.answer_rules[api_key] = rule

    async def kafka_counts(self) -> dict[str, int]:
        """The Kafka frame rules' counters."""
        assert self.kafka is not None
        return self.kafka.counts()

    async def kafka_requests(self) -> dict[int, int]:
        """Requests seen so far, by API key."""
        assert self.kafka is not None
        return dict(self.kafka.requests)

    async def cut(self) -> int:
        """Reset every connection now (both sides get an RST); returns how many."""
        if self._listener is not None:  # connected, but not accepted yet: they count too
            self._accept_pending(self._listener)
        count = await self._reset_links()
        self.counters.cut += count
        return count

    async def _reset_links(self) -> int:
        links = dict(self._links)
        for carrier in links.values():
            carrier.cancel()
        if links:
            _, stuck = await asyncio.wait(links.values(), timeout=self.stop_timeout)
            if stuck:  # a bug in the proxy: kept for stop(); the sockets close below
                self.errors.append(HarnessError(
                    f"{len(stuck)} link(s) still ran {self.stop_timeout} s after their reset"))
        for link in links:
            # A carrier cancelled before its first step never ran its finally.
            link.close()
            self._links.pop(link, None)
        return len(links)

    async def blackout(self, duration: Optional[float]) -> None:
        """Start a blackout; ``duration`` seconds long, or until :meth:`restore`."""
        self._cancel_blackout_end()
        self.faults.set_blackout(True)
        if duration is not None:
            self._blackout_end = asyncio.get_running_loop().call_later(
                duration, self.faults.set_blackout, False)

    async def restore(self) -> None:
        """End the blackout (held bytes and connections go on)."""
        self._cancel_blackout_end()
        self.faults.set_blackout(False)

    def _cancel_blackout_end(self) -> None:
        if self._blackout_end is not None:
            self._blackout_end.cancel()
            self._blackout_end = None

    async def delay(self, delay: float, which: str) -> None:
        """Add ``delay`` seconds to every chunk read from now on in ``which``."""
        self.faults.set_delay(which, delay)

    async def stall(self, which: str, on: bool) -> None:
        """Stall (hold) or release ``which``."""
        self.faults.set_stalled(which, on)

    async def heal(self) -> None:
        """End every fault."""
        await self.restore()
        self.faults.set_stalled("both", False)
        self.faults.set_delay("both", 0.0)

    async def stats(self) -> ProxyStats:
        """A snapshot of the counters and faults."""
        waiting = sum(1 for link in self._links if link.waiting)
        return ProxyStats.of(self.counters, self.faults, len(self._links), waiting)
