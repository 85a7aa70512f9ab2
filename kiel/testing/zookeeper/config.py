"""What a node runs with: its ``zoo.cfg``, ``myid``, log4j settings and Java command line."""
import os
from typing import TYPE_CHECKING, Any

from kiel.testing.zookeeper.fourletter import FOUR_LETTER_WORDS

if TYPE_CHECKING:  # pragma: no cover - imports for annotations only
    from kiel.testing.zookeeper.ensemble import ZooKeeperEnsemble
    from kiel.testing.zookeeper.node import ZooKeeperNode

__all__ = ["java_command", "write_node_files"]

DEFAULT_JVM_OPTIONS = (
    "-Xms16m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    # Tests want a server now, not peak throughput in ten minutes.
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
    "-Dzookeeper.jmx.log4j.disable=true",
    "-Dzookeeper.admin.enableServer=false",
)

STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def zoo_cfg(ensemble: "ZooKeeperEnsemble", node: "ZooKeeperNode") -> dict[str, Any]:
    """The ``zoo.cfg`` settings of ``node`` (the ensemble's ``extra_config`` wins)."""
    config: dict[str, Any] = {
        "tickTime": ensemble.tick_time,
        "initLimit": 20,
        "syncLimit": 10,
        "dataDir": node.data_dir,
        "clientPort": node.port,
        "clientPortAddress": node.host,
        "maxClientCnxns": 0,
        "minSessionTimeout": ensemble.min_session_timeout,
        "maxSessionTimeout": ensemble.max_session_timeout,
        "admin.enableServer": "false",
        "4lw.commands.whitelist": ",".join(FOUR_LETTER_WORDS),
        # Small, unsynced transaction logs: tests need speed, not durability
        # against power loss (data still survives a process kill).
        "preAllocSize": 1024,
        "forceSync": "no",
        "autopurge.purgeInterval": 0,
        "reconfigEnabled": "false",
    }
    if ensemble.size > 1:
        config["quorumListenOnAllIPs"] = "false"
        for other in ensemble.nodes:
            config[f"server.{other.node_id}"] = (
                f"{other.host}:{other.peer_port}:{other.election_port}"
            )
    config.update(ensemble.extra_config)
    return config


def write_node_files(ensemble: "ZooKeeperEnsemble", node: "ZooKeeperNode") -> None:
    """Write ``node``'s ``zoo.cfg``, ``myid`` (ensembles only) and ``log4j.properties``."""
    with open(node.config_path, "w", encoding="utf-8") as handle:
        for key, value in zoo_cfg(ensemble, node).items():
            handle.write(f"{key}={value}\n")
    if ensemble.size > 1:
        with open(os.path.join(node.data_dir, "myid"), "w", encoding="ascii") as handle:
            handle.write(f"{node.node_id}\n")
    with open(os.path.join(node.node_dir, "log4j.properties"), "w", encoding="utf-8") as handle:
        handle.write(
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={node.log_path}\n"
            "log4j.appender.FILE.Append=true\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern="
            "%d{ISO8601} %-5p [myid:" + str(node.node_id) + "] [%t:%C{1}@%L] - %m%n\n"
        )


def java_command(ensemble: "ZooKeeperEnsemble", node: "ZooKeeperNode") -> list[str]:
    """The command line that runs ``node``'s server."""
    logging_options = [
        "-Dlog4j.configuration=file:" + os.path.join(node.node_dir, "log4j.properties"),
        "-Dzookeeper.log.dir=" + node.node_dir,
        # Used only when the log4j binding is missing and slf4j-simple is on the path.
        "-Dorg.slf4j.simpleLogger.logFile=" + node.log_path,
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
    ]
    return [
        ensemble.java,
        *DEFAULT_JVM_OPTIONS,
        *logging_options,
        *ensemble.jvm_options,
        "-cp",
        os.pathsep.join(ensemble.classpath),
        STANDALONE_MAIN if ensemble.size == 1 else QUORUM_MAIN,
        node.config_path,
    ]
