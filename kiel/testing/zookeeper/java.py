"""Finding Java and the ZooKeeper server's jars (Debian's packages).

Without them nothing can run, so the errors here say exactly what to install.
"""
import os
import zipfile
from collections.abc import Mapping
from typing import Optional

from kiel.exc import MissingDependencyError
from kiel.testing.process import find_executable

__all__ = ["DEFAULT_JAR_DIR", "INSTALL_HINT", "find_java", "zookeeper_classpath"]

#: Where Debian's ``libzookeeper-java`` puts its jar and the jars it needs.
DEFAULT_JAR_DIR = "/usr/share/java"
#: What to install when Java or ZooKeeper is missing.
INSTALL_HINT = "apt-get install zookeeper default-jre-headless"

# Jars without which the server cannot start at all.
_REQUIRED_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar")
# Debian's zookeeper.jar manifest lists netty-handler and netty-transport but
# not what they need in turn: netty-codec (SslHandler extends its
# ByteToMessageDecoder, so the Netty connection factory and TLS fail with
# NoClassDefFoundError), netty-resolver (Bootstrap) and the native-epoll
# helper jar.
_NETTY_EXTRA_JARS = (
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-unix-common.jar",
)
# slf4j binding: log4j 1.2 (what Debian's package uses), so logs go to a
# file we configure; slf4j-simple as a fallback.
_LOG4J_JARS = ("slf4j-log4j12.jar", "log4j-1.2.jar")
_SIMPLE_LOGGER_JAR = "slf4j-simple.jar"


def find_java(java_home: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> str:
    """Find the ``java`` executable the way ZooKeeper's own scripts do.

    Args:
        java_home: a Java home directory to use (its ``bin/java``). Without it,
            ``JAVA_HOME`` from ``environ`` is used if set, else ``java`` on
            ``PATH``.
        environ: the environment to read ``JAVA_HOME`` and ``PATH`` from
            (default: ``os.environ``).

    Returns:
        the absolute path of the ``java`` executable.

    Raises:
        MissingDependencyError: the Java home has no executable ``bin/java``,
            or there is no ``java`` on ``PATH``; the message says what to install.
    """
    env = os.environ if environ is None else environ
    source = "java_home argument"
    if java_home is None and env.get("JAVA_HOME"):
        java_home, source = env["JAVA_HOME"], "JAVA_HOME"
    if java_home is not None:
        java = os.path.join(java_home, "bin", "java")
        if os.path.isfile(java) and os.access(java, os.X_OK):
            return os.path.abspath(java)
        raise MissingDependencyError(
            f"Java not found: {source}={java_home!r} has no executable bin/java. "
            f"Point it at a Java 11+ runtime, or unset it and install one: {INSTALL_HINT}",
            dependency="java",
        )
    return find_executable(
        "java", env,
        "Java not found: JAVA_HOME is not set and there is no `java` on PATH. "
        f"The real ZooKeeper server needs a Java runtime: {INSTALL_HINT}",
        "java",
    )


def _manifest_class_path(jar: str) -> list[str]:
    """The ``Class-Path`` entries of a jar's manifest (empty if it has none)."""
    try:
        with zipfile.ZipFile(jar) as archive:
            text = archive.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return []
    # Manifest lines are wrapped at 72 bytes; a continuation starts with one space.
    unwrapped = text.replace("\r\n", "\n").replace("\n ", "")
    for line in unwrapped.splitlines():
        if line.startswith("Class-Path:"):
            return line[len("Class-Path:"):].split()
    return []


def zookeeper_classpath(jar_dir: str = DEFAULT_JAR_DIR) -> list[str]:
    """Build the classpath for the ZooKeeper server from a directory of jars.

    ``zookeeper.jar`` plus the jars its manifest names (each looked up in
    ``jar_dir`` first), plus the Netty jars the manifest forgets, plus an
    slf4j binding (log4j 1.2) so the server logs to the file we configure.

    Args:
        jar_dir: the directory holding ``zookeeper.jar`` and its dependencies.

    Returns:
        the jar paths, in order, without duplicates.

    Raises:
        MissingDependencyError: ``zookeeper.jar`` or another jar the server
            cannot start without is missing; the message says what to install.
    """
    missing = [name for name in _REQUIRED_JARS if not os.path.isfile(os.path.join(jar_dir, name))]
    if missing:
        raise MissingDependencyError(
            f"ZooKeeper jars not found in {jar_dir!r} (missing: {', '.join(missing)}). "
            f"Install Debian's ZooKeeper server and a Java runtime: {INSTALL_HINT}",
            dependency="zookeeper",
        )
    main_jar = os.path.join(jar_dir, "zookeeper.jar")
    candidates = [main_jar]
    for entry in _manifest_class_path(main_jar):
        local = os.path.join(jar_dir, os.path.basename(entry))
        candidates.append(local if os.path.isfile(local) else entry)
    candidates += [os.path.join(jar_dir, name) for name in _REQUIRED_JARS + _NETTY_EXTRA_JARS]
    binding = [os.path.join(jar_dir, name) for name in _LOG4J_JARS]
    if not all(os.path.isfile(jar) for jar in binding):
        binding = [os.path.join(jar_dir, _SIMPLE_LOGGER_JAR)]
    candidates += binding
    classpath: list[str] = []
    for jar in candidates:
        if os.path.isfile(jar) and jar not in classpath:
            classpath.append(jar)
    return classpath
