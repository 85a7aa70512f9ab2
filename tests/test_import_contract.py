"""docs/architecture.rst's layer list, held against kiel's imports.

The doc's "Layers" section says each layer depends only on the ones above it.
The layers are read from its code block, the doc being the source: a line
that starts with a kiel path opens a layer (a ``.py`` file is that module, a
folder is the package and everything in it). The imports are read from
kiel's sources with :mod:`ast`, and every import counts: at module level,
inside a function (kiel imports some on first use, to keep ``import kiel``
light or a dependency optional; that changes when, not what, it depends on)
and under ``TYPE_CHECKING`` (a dependency on another layer's shapes all the
same). What is not an import statement is not seen: a module named in a
string and imported with importlib, the way the consumer finds its
coordinator adapters (the one inverted seam the doc states, which
tests/consumer/test_consumer_unit.py checks from the consumer's side).
"""

import ast
import functools
import re
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
KIEL = ROOT / "kiel"
ARCHITECTURE = ROOT / "docs" / "architecture.rst"

# The two coordinator adapters: siblings below the consumer, each a wing of
# its own (the Layers section says so).
COORDINATORS = ("kiel/coordinator/", "kiel/zookeeper/")


def layers_in(doc: str) -> list[str]:
    """The kiel paths that open the lines of the Layers section's code block, in order."""
    section = doc.split("\nLayers\n------\n", 1)[1]
    block = section.split(".. code-block:: text\n", 1)[1]
    paths = []
    for line in block.splitlines()[1:]:
        if line and not line.startswith("   "):
            break  # the block ends at the first line that is not indented
        match = re.match(r"   (kiel/\S*)", line)
        if match:
            paths.append(match.group(1))
    return paths


def module_name(path: Path) -> str:
    """``kiel/consumer/base.py`` -> ``kiel.consumer.base``; a package is its ``__init__``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def kiel_modules() -> dict[str, Path]:
    """Every module of kiel by its dotted name."""
    return {module_name(path): path for path in sorted(KIEL.rglob("*.py"))}


def layer_of(module: str, layers: list[str]) -> list[int]:
    """The indexes of the layers that hold ``module`` (one, when the map is right)."""
    found = []
    for index, path in enumerate(layers):
        if path.endswith("/"):  # a package and everything in it
            package = path.rstrip("/").replace("/", ".")
            if module == package or module.startswith(package + "."):
                found.append(index)
        elif module_name(ROOT / path) == module:
            found.append(index)
    return found


class Import(NamedTuple):
    target: str  # the kiel module imported
    line: int


def imports_of(source: str, module: str, is_package: bool, modules: set[str]) -> list[Import]:
    """The kiel modules ``source`` imports, wherever the import statement is.

    ``from X import y`` imports the module ``X.y`` when there is one, else
    ``X`` (y is a name in it); relative imports are resolved against
    ``module``.
    """
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):  # every statement, nested ones too
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            targets = [
                f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules else origin
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            if target == "kiel" or target.startswith("kiel."):
                # import kiel.a.b binds kiel but imports kiel.a.b: the
                # deepest module of the dotted name is the dependency.
                while target not in modules:
                    target = target.rpartition(".")[0]
                found.append(Import(target, node.lineno))
    return sorted(found, key=lambda found_import: found_import.line)


class Edge(NamedTuple):
    importer: str
    imported: str
    where: str  # file:line

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported} ({self.where})"


@functools.cache
def edges() -> list[Edge]:
    """Every import of a kiel module by a kiel module (once per statement)."""
    modules = kiel_modules()
    found: list[Edge] = []
    for module, path in modules.items():
        for imported in imports_of(
            path.read_text(), module, path.name == "__init__.py", set(modules)
        ):
            if imported.target != module:
                where = f"{path.relative_to(ROOT)}:{imported.line}"
                found.append(Edge(module, imported.target, where))
    return list(dict.fromkeys(found))


@pytest.fixture(scope="module")
def layers() -> list[str]:
    paths = layers_in(ARCHITECTURE.read_text())
    assert len(paths) > 20, paths  # the block was found and read
    return paths


def test_every_listed_layer_exists(layers: list[str]) -> None:
    assert len(set(layers)) == len(layers), layers
    missing = [path for path in layers if not (ROOT / path).exists()]
    assert not missing, f"docs/architecture.rst lists what is not there: {missing}"


def test_every_module_is_in_one_layer(layers: list[str]) -> None:
    unplaced = {}
    for module in kiel_modules():
        found = [layers[index] for index in layer_of(module, layers)]
        if len(found) != 1:
            unplaced[module] = found
    assert not unplaced, (
        "each kiel module must be in exactly one layer of docs/architecture.rst's "
        f"Layers block (module: the layers that hold it): {unplaced}"
    )


def breaks(found: list[Edge], layers: list[str]) -> dict[tuple[str, str], list[str]]:
    """The imports of a layer listed below the importer's, by (importer's, imported's) layer."""
    broken: dict[tuple[str, str], list[str]] = {}
    for edge in found:
        importer, imported = layer_of(edge.importer, layers), layer_of(edge.imported, layers)
        if len(importer) != 1 or len(imported) != 1:
            continue  # test_every_module_is_in_one_layer says which
        if imported[0] > importer[0]:
            pair = (layers[importer[0]], layers[imported[0]])
            broken.setdefault(pair, []).append(str(edge))
    return broken


def test_each_layer_imports_only_the_ones_above_it(layers: list[str]) -> None:
    broken = breaks(edges(), layers)
    report = "\n".join(
        f"{importer} imports {imported}, listed below it:\n    " + "\n    ".join(found)
        for (importer, imported), found in broken.items()
    )
    assert not broken, (
        f"{len(broken)} layer pairs break docs/architecture.rst's order "
        f"(fix the import, or move the layer's line and say why):\n{report}"
    )


def test_the_two_coordinators_do_not_import_each_other(layers: list[str]) -> None:
    for path in COORDINATORS:
        assert path in layers, path
    coordinator, zookeeper = (layers.index(path) for path in COORDINATORS)
    crossing = [
        str(edge)
        for edge in edges()
        if {*layer_of(edge.importer, layers), *layer_of(edge.imported, layers)}
        == {coordinator, zookeeper}
    ]
    assert not crossing, crossing


# The reader must be able to fail: it sees each kind of import.
_SAMPLE = '''
from typing import TYPE_CHECKING

import kiel.protocol.framing
from kiel import exc
from . import sibling
from ..structs import TopicPartition

if TYPE_CHECKING:
    from kiel.consumer.grouped import GroupedConsumer


def later():
    from kiel.cluster import Cluster
    import kazoo.client
'''


def test_the_reader_sees_every_kind_of_import() -> None:
    modules = {
        "kiel", "kiel.exc", "kiel.structs", "kiel.protocol", "kiel.protocol.framing",
        "kiel.consumer", "kiel.consumer.grouped", "kiel.cluster", "kiel.pkg",
        "kiel.pkg.sibling", "kiel.pkg.here",
    }
    found = imports_of(_SAMPLE, "kiel.pkg.here", False, modules)
    assert [(i.target, i.line) for i in found if i.target != "kiel"] == [
        ("kiel.protocol.framing", 4),
        ("kiel.exc", 5),
        ("kiel.pkg.sibling", 6),
        ("kiel.structs", 7),
        ("kiel.consumer.grouped", 10),
        ("kiel.cluster", 14),
    ]


def test_a_break_is_reported(layers: list[str]) -> None:
    upward = Edge("kiel.structs", "kiel.testing.process", "kiel/structs.py:1")
    downward = Edge("kiel.testing.process", "kiel.structs", "kiel/testing/process.py:1")
    within = Edge("kiel.consumer.base", "kiel.consumer.offsets", "kiel/consumer/base.py:1")
    assert breaks([upward, downward, within], layers) == {
        ("kiel/structs.py", "kiel/testing/"): [str(upward)]
    }
