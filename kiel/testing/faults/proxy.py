"""FaultProxy: a TCP proxy in front of ZooKeeper or a broker that breaks the network on cue.

Usage::

    from kiel.testing.faults import FaultProxy

    with FaultProxy(zookeeper.hosts) as proxy:        # target "127.0.0.1:2181"
        client = KazooClient(hosts=proxy.address)      # connect through it
        proxy.cut()                  # RST on every connection now
        proxy.blackout(5.0)          # a network partition for 5 s
        proxy.delay(0.1)             # 100 ms more latency, both directions
        proxy.stall("downstream")    # answers held until unstall()
        print(proxy.stats())

The proxy runs on its own thread with its own event loop, so it keeps
working while the test's loop is busy or blocked. Every method can be called
from any thread except the proxy's own, and returns once the fault is in
effect: no byte passes after ``blackout()`` or ``stall()`` returns.
"""

import ipaddress
from typing import Any, Optional, Union

from kiel.exc import ConfigError, HarnessError
from kiel.testing.faults.answers import ANSWERABLE
from kiel.testing.faults.core import ProxyCore
from kiel.testing.faults.loop import LoopThread
from kiel.testing.faults.state import ProxyStats, directions, seconds

__all__ = ["FaultProxy", "parse_target"]

Target = Union[str, tuple[str, int]]

#: Bytes each direction of each connection holds at most by default.
DEFAULT_MAX_HELD = 256 * 1024


def parse_target(target: Target) -> tuple[str, int]:
    """Check a proxy target.

    Args:
        target: ``"host:port"`` (``"[::1]:port"`` for IPv6) or ``(host, port)``;
            the host is ``localhost`` or a loopback address.

    Returns:
        ``(address, port)`` with ``localhost`` replaced by ``127.0.0.1``.

    Raises:
        ConfigError: malformed, or not a loopback address (the proxy never
            relays to other hosts).
    """
    if isinstance(target, str):
        host, sep, port_text = target.rpartition(":")
        if not sep or not port_text.isdigit():
            raise ConfigError(f"a proxy target is HOST:PORT, not {target!r}")
        host, port = host.strip("[]"), int(port_text)
    else:
        host, port = target
    if host == "localhost":
        host = "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(f"a fault proxy only relays to loopback addresses, not {host!r}")
    if not 0 < int(port) < 65536:
        raise ConfigError(f"no such port: {port!r}")
    return host, int(port)


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of one target, with faults on cue.

    Put one in front of each member (or broker) that a test must cut off
    alone. Faults, once started, hold until ended:

    * :meth:`cut` resets every connection now (RST, both sides).
    * :meth:`blackout` is a network partition: nothing passes either way, no
      FIN or RST reaches anyone, and new connections are accepted and held
      (not refused: a partition never answers, and refusals would only speed
      the client's back-off). When it ends, held bytes and connections go on
      where they stood, as after a partition that healed before TCP gave up.
    * :meth:`delay` adds latency to every chunk.
    * :meth:`stall` holds one direction's bytes until :meth:`unstall`.
    * With ``kafka=True``, rules that read Kafka frames:
      :meth:`cut_after_produce` and :meth:`cut_after_answer` (the broker
      did it, its answer never arrives), :meth:`rewrite_produce_error` and
      :meth:`answer_error` (a coordinator's request kept from the broker
      and answered with an error code by the proxy); with
      ``advertise=True`` too, the broker's Metadata and FindCoordinator
      answers name the proxy (see :mod:`~kiel.testing.faults.frames`).

    Held bytes stay in bounded queues: a direction stops reading its source
    once ``max_held`` bytes wait, so the sender's socket buffers fill and it
    blocks, as against a slow peer.

    Args:
        target: ``"host:port"`` or ``(host, port)`` on loopback.
        listen_port: port to listen on (0: any free one; kept across restarts).
        max_held: bytes each direction of each connection holds at most.
        connect_timeout: seconds to connect to the target; a client whose
            target does not answer (or refuses) is reset.
        timeout: seconds a control call or ``stop()`` waits at most.
        kafka: read the Kafka frames that pass (each connection's bytes go
            on in whole frames), for the frame rules.
        advertise: (with ``kafka=True``) Metadata and FindCoordinator
            answers that name the target's port name the proxy's instead,
            so that every connection of a client goes through the proxy
            even to a broker that advertises the port it listens on
            (noida-db); the host is left as the broker says it.

    Raises:
        ConfigError: bad target or options.
    """

    def __init__(self, target: Target, *, listen_port: int = 0,
                 max_held: int = DEFAULT_MAX_HELD, connect_timeout: float = 5.0,
                 timeout: float = 10.0, kafka: bool = False, advertise: bool = False) -> None:
        self.kafka = bool(kafka)
        self.advertise = bool(advertise)
        if self.advertise and not self.kafka:
            raise ConfigError("advertise=True rewrites Kafka answers: it needs kafka=True")
        self.target = parse_target(target)
        if max_held < 1:
            raise ConfigError(f"max_held must be at least 1 byte, not {max_held}")
        self.max_held = max_held
        self.connect_timeout = seconds(connect_timeout, "connect_timeout")
        self.port = listen_port
        self._loop = LoopThread(f"kiel-fault-proxy-{self.target[1]}",
                                seconds(timeout, "timeout"))
        self._core: Optional[ProxyCore] = None

    def __repr__(self) -> str:
        state = f"on {self.address}" if self.running else "stopped"
        return f"<FaultProxy to {self.target[0]}:{self.target[1]} {state}>"

    @property
    def running(self) -> bool:
        """Whether the proxy listens."""
        return self._core is not None

    @property
    def host(self) -> str:
        """``127.0.0.1``: the proxy listens on loopback only."""
        return "127.0.0.1"

    @property
    def address(self) -> str:
        """``127.0.0.1:port``: what clients connect to instead of the target."""
        return f"{self.host}:{self.port}"

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        """Start the thread and listen (a no-op when running).

        Raises:
            HarnessError: the port cannot be bound.
        """
        if self._core is not None:
            return
        # The core's own waits (acceptor, then links) take at most half the
        # bound of the call that runs them.
        core = ProxyCore(self.target, self.port, self.max_held, self.connect_timeout,
                         stop_timeout=self._loop.timeout / 4, kafka=self.kafka,
                         advertise=self.advertise)
        self._loop.start()
        try:
            self._loop.call(core.listen())
        except HarnessError:
            self._loop.stop(core.close())
            raise
        self.port = core.port
        self._core = core

    def stop(self) -> None:
        """Reset every connection, close the listening socket, end the thread.

        Nothing is left running or open afterwards. Idempotent.

        Raises:
            HarnessError: the proxy hit an unexpected error while it ran, or
                did not stop in time.
        """
        core, self._core = self._core, None
        if core is None:
            return
        self._loop.stop(core.close())
        if core.errors:
            raise HarnessError("fault proxy errors: " + "; ".join(map(repr, core.errors)))

    def __enter__(self) -> "FaultProxy":
        self.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def _running_core(self) -> ProxyCore:
        if self._core is None:
            raise HarnessError("the fault proxy is not running")
        return self._core

    # -- faults ------------------------------------------------------------------

    def cut(self) -> int:
        """Reset every current connection (held ones too): both sides get an RST.

        Returns:
            how many connections were reset.

        Raises:
            HarnessError: the proxy is not running.
        """
        return int(self._loop.call(self._running_core().cut()))

    def blackout(self, duration: Optional[float] = None) -> None:
        """Partition the network: nothing passes, nothing closes, new connections wait.

        Args:
            duration: seconds until it ends by itself (``None``: until
                :meth:`restore`). A new blackout replaces the one in effect.

        Raises:
            ConfigError: a negative or infinite duration.
            HarnessError: the proxy is not running.
        """
        checked = None if duration is None else seconds(duration, "a blackout")
        self._loop.call(self._running_core().blackout(checked))

    def restore(self) -> None:
        """End the blackout: held bytes, FINs and connections go on, in order.

        Raises:
            HarnessError: the proxy is not running.
        """
        self._loop.call(self._running_core().restore())

    def delay(self, duration: float, direction: str = "both") -> None:
        """Add latency to every chunk read from now on (0: none).

        Args:
            duration: seconds each chunk waits before it may pass.
            direction: ``"upstream"`` (client to target), ``"downstream"`` or ``"both"``.

        Raises:
            ConfigError: a bad duration or direction.
            HarnessError: the proxy is not running.
        """
        checked, which = seconds(duration, "a delay"), self._direction(direction)
        self._loop.call(self._running_core().delay(checked, which))

    def stall(self, direction: str = "both") -> None:
        """Hold the bytes of ``direction`` (not drop them) until :meth:`unstall`.

        Raises:
            ConfigError: a bad direction.
            HarnessError: the proxy is not running.
        """
        self._loop.call(self._running_core().stall(self._direction(direction), True))

    def unstall(self, direction: str = "both") -> None:
        """Release ``direction``: the held bytes pass, in order.

        Raises:
            ConfigError: a bad direction.
            HarnessError: the proxy is not running.
        """
        self._loop.call(self._running_core().stall(self._direction(direction), False))

    def heal(self) -> None:
        """End every fault: blackout, stalls and delays.

        Raises:
            HarnessError: the proxy is not running.
        """
        self._loop.call(self._running_core().heal())

    # -- Kafka frame rules (kafka=True) --------------------------------------------

    def cut_after_produce(self, every: int, times: Optional[int] = None) -> None:
        """Reset the connection right after the broker's answer to every
        ``every``-th Produce request, dropping that answer: the broker wrote
        the batch, the client never hears of it.

        Counted over every connection of the proxy, from now on. Produce
        requests with ``acks=0`` get no answer and do not count.

        Args:
            every: the period (1: after every answer); 0 clears the rule.
            times: cut at most this many times (``None``: no limit).

        Raises:
            ConfigError: a bad ``every`` or ``times``.
            HarnessError: the proxy is not running or was not made with
                ``kafka=True``.
        """
        self._kafka_rule("cut", every, times)

    def cut_after_answer(self, api_key: int, every: int = 1, times: Optional[int] = 1) -> None:
        """Reset the connection right after the broker's answer to every
        ``every``-th request of API ``api_key`` (e.g. 26 EndTxn, 24
        AddPartitionsToTxn), dropping that answer: the broker did what was
        asked, the client never hears of it. Replaces the cut rule
        (:meth:`cut_after_produce` is this rule for Produce).

        Args:
            api_key: the API whose answers count.
            every: the period (1: after every answer); 0 clears the rule.
            times: cut at most this many times (``None``: no limit).

        Raises:
            ConfigError: a bad ``api_key``, ``every`` or ``times``.
            HarnessError: the proxy is not running or was not made with
                ``kafka=True``.
        """
        if type(api_key) is not int or not 0 <= api_key < 2**15:
            raise ConfigError(f"api_key must be a Kafka API key, not {api_key!r}")
        self._kafka_rule("cut", every, times, api_key=api_key)

    def rewrite_produce_error(self, code: int, every: int = 1,
                              times: Optional[int] = 1) -> None:
        """Replace each partition's error code in the broker's answer to
        every ``every``-th Produce request with ``code`` (and its base
        offset with -1). What the broker wrote stays written.

        Args:
            code: the Kafka error code to answer (e.g. 45, 59, 47).
            every: the period (1: every answer); 0 clears the rule.
            times: rewrite at most this many answers (``None``: no limit).

        Raises:
            ConfigError: a bad ``code``, ``every`` or ``times``.
            HarnessError: the proxy is not running or was not made with
                ``kafka=True``.
        """
        if type(code) is not int or not -(2**15) <= code < 2**15:
            raise ConfigError(f"code must be an int16 Kafka error code, not {code!r}")
        self._kafka_rule("rewrite", every, times, code)

    def answer_error(self, api_key: int, code: int, every: int = 1,
                     times: Optional[int] = 1) -> None:
        """Keep every ``every``-th request of API ``api_key`` from the broker
        and answer it with error ``code`` in the broker's place: the broker
        never did it, as a coordinator that answers NOT_COORDINATOR (16),
        COORDINATOR_LOAD_IN_PROGRESS (14), COORDINATOR_NOT_AVAILABLE (15)
        or CONCURRENT_TRANSACTIONS (51) did not.

        The answer is of the request's API and version (flexible ones
        included), every error code in it set to ``code``: FindCoordinator
        (10) v0-3 (no coordinator), InitProducerId (22) v0-5 (producer id
        and epoch -1), AddPartitionsToTxn (24) v0-3 and TxnOffsetCommit (28)
        v0-4 (each partition of the request), AddOffsetsToTxn (25) and
        EndTxn (26) v0-4. A request of another version passes to the broker
        and does not count. It reaches the client after the broker's
        answers to the requests sent before it on that connection.

        Counted over every connection of the proxy, from now on; one rule
        per API (a second call for the same API replaces its rule).

        Args:
            api_key: one of the APIs above.
            code: the int16 Kafka error code to answer (not 0: the broker
                never did the work).
            every: the period (1: every request); 0 clears the API's rule.
            times: answer at most this many requests (``None``: no limit).

        Raises:
            ConfigError: a bad ``api_key``, ``code``, ``every`` or ``times``.
            HarnessError: the proxy is not running or was not made with
                ``kafka=True``.
        """
        if type(api_key) is not int or api_key not in ANSWERABLE:
            raise ConfigError(f"api_key must be one of {sorted(ANSWERABLE)} (the APIs the "
                              f"proxy can answer itself), not {api_key!r}")
        if type(code) is not int or not -(2**15) <= code < 2**15 or code == 0:
            # 0 would tell the client the work was done when the broker never saw it.
            raise ConfigError(f"code must be an int16 Kafka error code other than 0, "
                              f"not {code!r}")
        self._kafka_rule("answer", every, times, code, api_key=api_key)

    def kafka_requests(self) -> dict[int, int]:
        """Requests seen so far (all connections), by API key: those
        :meth:`answer_error` kept from the broker included.

        Raises:
            HarnessError: the proxy is not running or was not made with
                ``kafka=True``.
        """
        core = self._kafka_core()
        requests: dict[int, int] = self._loop.call(core.kafka_requests())
        return requests

    def kafka_stats(self) -> dict[str, int]:
        """What the Kafka frame rules saw and did: ``produce_answers``,
        ``cut``, ``rewritten``, ``answered`` (by the proxy itself).

        Raises:
            HarnessError: the proxy is not running or was not made with
                ``kafka=True``.
        """
        core = self._kafka_core()
        counts: dict[str, int] = self._loop.call(core.kafka_counts())
        return counts

    def _kafka_rule(self, which: str, every: int, times: Optional[int], code: int = 0,
                    api_key: int = 0) -> None:
        if type(every) is not int or every < 0:
            raise ConfigError(f"every must be an int >= 0, not {every!r}")
        if times is not None and (type(times) is not int or times < 1):
            raise ConfigError(f"times must be None or an int >= 1, not {times!r}")
        core = self._kafka_core()
        self._loop.call(core.kafka_rule(which, every, times, code, api_key))

    def _kafka_core(self) -> ProxyCore:
        core = self._running_core()
        if core.kafka is None:
            raise HarnessError("the Kafka frame rules need a proxy made with kafka=True")
        return core

    def stats(self) -> ProxyStats:
        """The counters (connections accepted and cut, bytes each way) and faults now.

        Raises:
            HarnessError: the proxy is not running.
        """
        result: ProxyStats = self._loop.call(self._running_core().stats())
        return result

    @staticmethod
    def _direction(direction: str) -> str:
        directions(direction)  # raises ConfigError for anything else
        return direction
