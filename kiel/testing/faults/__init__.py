"""A fault proxy for tests: a TCP proxy that cuts, partitions, delays and stalls on cue.

Put a :class:`FaultProxy` between a client and ZooKeeper (or a broker) and
break the network under it: :meth:`~FaultProxy.cut` (RST now),
:meth:`~FaultProxy.blackout` (a partition: nothing passes, nothing closes),
:meth:`~FaultProxy.delay`, :meth:`~FaultProxy.stall`. One proxy per member
cuts that member off alone. It runs on its own thread; the ``fault_proxy``
pytest fixture and ``python -m kiel.testing proxy`` make them too (see the
"Testing with network faults" guide).

Modules: :mod:`~kiel.testing.faults.proxy` (the public class),
:mod:`~kiel.testing.faults.core` (the proxy on its loop),
:mod:`~kiel.testing.faults.pipe` (one connection, one direction),
:mod:`~kiel.testing.faults.state` (faults and counters),
:mod:`~kiel.testing.faults.frames` (the Kafka frame rules of a proxy made
with ``kafka=True``), :mod:`~kiel.testing.faults.answers` (the answers it
writes in a broker's place),
:mod:`~kiel.testing.faults.loop` (the thread) and
:mod:`~kiel.testing.faults.cli` (the command line).
"""
from kiel.testing.faults.proxy import FaultProxy
from kiel.testing.faults.state import DIRECTIONS, ProxyStats

__all__ = ["DIRECTIONS", "FaultProxy", "ProxyStats"]
