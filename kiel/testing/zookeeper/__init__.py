"""Launch the real ZooKeeper server (Debian's ``zookeeper`` package) for tests.

:class:`ZooKeeperServer` runs one standalone server, :class:`ZooKeeperEnsemble`
runs an N-node quorum. Each node is a real Java process
(``org.apache.zookeeper.server.ZooKeeperServerMain`` for a standalone server,
``org.apache.zookeeper.server.quorum.QuorumPeerMain`` for an ensemble member)
on free ports bound to 127.0.0.1 only, with its own temporary data dir and
log file. Single nodes can be stopped, killed, restarted (same port, same
data), paused (SIGSTOP) and resumed (SIGCONT), and
:meth:`~ZooKeeperEnsemble.expire_session` makes the server really expire a
client's session.

Needs Java and the ZooKeeper jars: ``apt-get install zookeeper
default-jre-headless``. Without them the constructors raise
:class:`~kiel.exc.MissingDependencyError` saying so.

This package is test-side and synchronous: it polls with short sleeps and
every wait is bounded. Do not call it from a running Tornado IOLoop.

Modules: :mod:`~kiel.testing.zookeeper.java` (finding Java and the jars),
:mod:`~kiel.testing.zookeeper.fourletter` (``srvr`` and friends),
:mod:`~kiel.testing.process` (ports, spawning, signals, nothing
outlives the interpreter), :mod:`~kiel.testing.zookeeper.config` (``zoo.cfg``
and the command line), :mod:`~kiel.testing.zookeeper.node` (one server
process), :mod:`~kiel.testing.zookeeper.ensemble` (the launchers) and
:mod:`~kiel.testing.zookeeper.session` (session expiry).
"""
from kiel.testing.process import LOOPBACK
from kiel.testing.zookeeper.ensemble import ZooKeeperEnsemble, ZooKeeperServer
from kiel.testing.zookeeper.fourletter import FOUR_LETTER_WORDS, four_letter_word, server_status
from kiel.testing.zookeeper.java import (
    DEFAULT_JAR_DIR,
    INSTALL_HINT,
    find_java,
    zookeeper_classpath,
)
from kiel.testing.zookeeper.node import ZooKeeperNode

__all__ = [
    "DEFAULT_JAR_DIR",
    "FOUR_LETTER_WORDS",
    "INSTALL_HINT",
    "LOOPBACK",
    "ZooKeeperEnsemble",
    "ZooKeeperNode",
    "ZooKeeperServer",
    "find_java",
    "four_letter_word",
    "server_status",
    "zookeeper_classpath",
]
