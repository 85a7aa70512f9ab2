"""Packaging: what ``pip install kiel`` gives and how pytest finds kiel's fixtures.

pyproject.toml is kiel's only packaging file. These tests read it, check
the environment they run in (made by ``pip install -e .[test,...]``) and
build the sdist and, from it, the wheel with that environment's setuptools,
offline, to look inside (the licence text); the
check of a fresh ``pip install .`` with no extras needs the network, so it is
``make install-check`` (tests/plain_install_check.py), which ``make test``
runs first.
"""

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

import kiel.testing.pytest_plugin
from kiel import compression
from kiel.protocol import crc32c
from tests.conftest import pytest11_entry_points

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs tomli on 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def pyproject() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _names(requirements: list[str]) -> dict[str, str]:
    """Requirement strings by their lower-cased project name."""
    names = {}
    for requirement in requirements:
        name = requirement.split(";")[0]
        for sep in "<>=!~[ ":
            name = name.split(sep)[0]
        names[name.lower().replace("_", "-")] = requirement
    return names


def test_pyproject_is_the_only_packaging_file() -> None:
    assert not (ROOT / "setup.py").exists()
    assert not (ROOT / "setup.cfg").exists()


def test_a_plain_install_has_the_c_crc32c_and_every_codec(pyproject: dict[str, Any]) -> None:
    dependencies = _names(pyproject["project"]["dependencies"])
    for name in ("tornado", "kazoo", "cramjam", "google-crc32c"):
        assert name in dependencies, dependencies
        # No environment marker: every platform gets it.
        assert ";" not in dependencies[name], dependencies[name]


def test_the_old_extras_still_install(pyproject: dict[str, Any]) -> None:
    # `pip install kiel[snappy]` from older instructions keeps working, and
    # adds nothing the dependencies do not already bring.
    extras = pyproject["project"]["optional-dependencies"]
    dependencies = set(pyproject["project"]["dependencies"])
    for extra in ("snappy", "lz4", "crc32c"):
        assert extra in extras
        assert set(extras[extra]) <= dependencies, (extra, extras[extra])
    assert "pyspark" in _names(extras["spark"])
    assert "prometheus-client" in _names(extras["prometheus"])


def test_the_license_is_a_spdx_expression(pyproject: dict[str, Any]) -> None:
    assert pyproject["project"]["license"] == "Apache-2.0"
    # PEP 639: with a license expression, a License classifier is an error
    # (setuptools warned about it before).
    assert not [c for c in pyproject["project"]["classifiers"] if c.startswith("License ::")]
    assert "setuptools>=77" in pyproject["build-system"]["requires"]


def test_the_command_and_the_pytest_plugin_are_entry_points(pyproject: dict[str, Any]) -> None:
    assert pyproject["project"]["scripts"] == {"kiel": "kiel.cli:main"}
    assert pyproject["project"]["entry-points"]["pytest11"] == {
        "kiel": "kiel.testing.pytest_plugin"
    }


def test_this_environment_uses_the_c_crc32c_and_has_every_codec() -> None:
    # The suite's environment is an install of kiel with its dependencies.
    assert crc32c.IMPLEMENTATION == "google-crc32c"
    for codec_id in (compression.SNAPPY, compression.LZ4, compression.ZSTD):
        assert compression.is_available(codec_id), codec_id


def test_the_installed_plugin_is_registered_once(pytestconfig: pytest.Config) -> None:
    # The entry point registers it (under the name "kiel"); conftest.py must
    # not add it again.
    points = [ep for ep in pytest11_entry_points() if ep.name == "kiel"]
    assert [ep.value for ep in points] == ["kiel.testing.pytest_plugin"]
    manager = pytestconfig.pluginmanager
    assert manager.get_plugin("kiel") is kiel.testing.pytest_plugin
    registered = [p for p in manager.get_plugins() if p is kiel.testing.pytest_plugin]
    assert len(registered) == 1


def test_its_fixtures_resolve_once() -> None:
    # Listed, not started: starting them is what the other tests do.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--fixtures", "-q", "-p", "no:cacheprovider",
         "tests/test_packaging.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    for name in ("zookeeper", "kafka_cluster", "topic_factory", "tansu_broker", "fault_proxy"):
        found = [line for line in lines if line.split(" ")[0] == name]
        assert len(found) == 1, (name, found)
        assert "pytest_plugin.py" in found[0], found[0]


def test_the_pytest_settings_came_along(pytestconfig: pytest.Config) -> None:
    # Moved from setup.cfg's [tool:pytest]: the markers --strict-markers
    # needs, the per-test timeout and where the tests are.
    markers = " ".join(pytestconfig.getini("markers"))
    for marker in ("slow:", "zookeeper:", "interop:"):
        assert marker in markers
    assert "--strict-markers" in pytestconfig.getini("addopts")
    assert str(pytestconfig.getini("timeout")) == "300"
    assert pytestconfig.getini("testpaths") == ["tests"]
    assert pytestconfig.inipath == ROOT / "pyproject.toml"


def test_the_oldest_python_is_the_one_make_test_runs(pyproject: dict[str, Any]) -> None:
    # requires-python promises what `make test-oldest` checks, mypy types
    # for it, ruff keeps its syntax to and the README names: one version.
    oldest = pyproject["project"]["requires-python"].removeprefix(">=")
    makefile = (ROOT / "Makefile").read_text()
    assert f"\nOLDEST := {oldest}\n" in makefile
    assert pyproject["tool"]["mypy"]["python_version"] == oldest
    assert pyproject["tool"]["ruff"]["target-version"] == "py" + oldest.replace(".", "")
    assert f"Python {oldest}+" in (ROOT / "README.rst").read_text()


def test_every_kiel_module_is_imported_before_any_test_runs() -> None:
    """tests/conftest.py imports kiel whole at configure time (CPython
    gh-106905: an AST built by pytest's rewrite while another thread builds
    one can fail), so no test is the first to import a kiel module."""
    import pkgutil

    import kiel

    names = [info.name for info in pkgutil.walk_packages(kiel.__path__, "kiel.")
             if not info.name.endswith(".__main__")]
    assert len(names) > 50
    missing = [name for name in names if name not in sys.modules]
    assert not missing, f"not imported before the tests: {missing}"


# What a frontend (``python -m build``, pip) calls: setuptools' PEP 517 hooks,
# here with the environment's setuptools and no network (no build isolation:
# the suite must run offline). sys.argv[1] is the hook, [2] the output folder.
_BUILD = (
    "import sys\n"
    "from setuptools import build_meta\n"
    "print(getattr(build_meta, sys.argv[1])(sys.argv[2]))\n"
)


def _build(hook: str, source: Path, out: Path) -> tuple[Path, str]:
    """Run setuptools' ``hook`` in ``source``; the file it made and what it said."""
    # Byte-compiling, which PYTHONDONTWRITEBYTECODE turns off with a warning,
    # is left on: the test looks for setuptools' warnings about kiel.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    result = subprocess.run(
        [sys.executable, "-c", _BUILD, hook, str(out)],
        cwd=source, env=env, capture_output=True, text=True, timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return out / result.stdout.strip().splitlines()[-1], output


def _source_copy(dest: Path) -> Path:
    """A copy of the project without what .gitignore names (venvs, builds)."""
    ignored = [".git"]
    for line in (ROOT / ".gitignore").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            ignored.append(line.strip().strip("/"))
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(*ignored))
    return dest


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sdist, and the wheel built from it (as ``python -m build`` does)."""
    work = tmp_path_factory.mktemp("build")
    source = _source_copy(work / "source")
    sdist, sdist_output = _build("build_sdist", source, work / "dist")
    with tarfile.open(sdist) as tar:
        # filter= came to 3.10 in 3.10.12; the sdist is our own anyway.
        safe: dict[str, Any] = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(work / "unpacked", **safe)
    unpacked = work / "unpacked" / sdist.name.removesuffix(".tar.gz")
    wheel, wheel_output = _build("build_wheel", unpacked, work / "dist")
    return {"sdist": sdist, "wheel": wheel, "output": sdist_output + wheel_output}


def test_the_license_is_the_apache_license(pyproject: dict[str, Any]) -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert pyproject["project"]["license-files"] == ["LICENSE"]


def test_the_sdist_ships_the_license(built: dict[str, Any]) -> None:
    root = built["sdist"].name.removesuffix(".tar.gz")
    with tarfile.open(built["sdist"]) as tar:
        names = tar.getnames()
        assert f"{root}/LICENSE" in names, [n for n in names if "/" not in n[len(root) + 1:]]
        member = tar.extractfile(f"{root}/LICENSE")
        pkg_info = tar.extractfile(f"{root}/PKG-INFO")
        assert member is not None and pkg_info is not None
        shipped, metadata = member.read(), pkg_info.read().decode()
    assert shipped == (ROOT / "LICENSE").read_bytes()
    assert "\nLicense-Expression: Apache-2.0\n" in metadata
    assert "\nLicense-File: LICENSE\n" in metadata


def test_the_wheel_ships_the_license(built: dict[str, Any]) -> None:
    dist_info = built["wheel"].name.split("-py")[0] + ".dist-info"
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = wheel.namelist()
        # PEP 639: the licence files go under .dist-info/licenses/.
        license_name = f"{dist_info}/licenses/LICENSE"
        assert license_name in names, [n for n in names if n.startswith(dist_info)]
        shipped = wheel.read(license_name)
        metadata = wheel.read(f"{dist_info}/METADATA").decode()
    assert shipped == (ROOT / "LICENSE").read_bytes()
    assert "\nLicense-Expression: Apache-2.0\n" in metadata
    assert "\nLicense-File: LICENSE\n" in metadata


def test_the_build_warns_of_nothing(built: dict[str, Any]) -> None:
    # setuptools warns of what it will stop accepting (a License classifier
    # beside a license expression, a missing file MANIFEST.in names...).
    lines = built["output"].splitlines()
    assert not [line for line in lines if "warning" in line.lower()], built["output"]


# tox.ini is a doorway to the Makefile: each environment runs the make target
# of its name and declares nothing of its own, so `tox` cannot drift from
# `make test` (it had: its environments lacked the extras the tests import).
@pytest.fixture(scope="module")
def tox() -> configparser.ConfigParser:
    config = configparser.ConfigParser(interpolation=None)
    assert config.read(ROOT / "tox.ini")
    return config


def _make_targets() -> set[str]:
    makefile = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*):", makefile, re.MULTILINE))


def test_tox_runs_make_targets_and_nothing_else(tox: configparser.ConfigParser) -> None:
    assert tox["tox"]["envlist"].split() == ["test"]  # `tox` alone is `make test`
    assert tox["testenv"]["skip_install"] == "true"
    assert tox["testenv"]["allowlist_externals"] == "make"
    targets = _make_targets()
    envs = [section.removeprefix("testenv:") for section in tox.sections()
            if section.startswith("testenv:")]
    assert {"test", "lint", "types", "docs"} <= set(envs)
    for name in ["testenv"] + [f"testenv:{env}" for env in envs]:
        # extras, deps or a pytest call here would be a second definition
        # of what the Makefile defines.
        assert not {"deps", "extras"} & set(tox[name]), name
    for env in envs:
        assert env in targets, f"tox -e {env}: the Makefile has no {env} target"
        command = shlex.split(tox[f"testenv:{env}"]["commands"])
        if env != "test":
            assert command == ["make", env]


def test_tox_passes_its_arguments_to_make_test(
    tox: configparser.ConfigParser, tmp_path: Path
) -> None:
    # Run the test environment's command with a `make` that records its
    # arguments, then ask the real make (-n: print, do not run) what pytest
    # gets from them.
    command = shlex.split(tox["testenv:test"]["commands"])
    assert command[:2] == ["python", "-c"] and command[3:] == ["{posargs}"], command
    recorded = tmp_path / "argv.json"
    fake_make = tmp_path / "make"
    fake_make.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"json.dump(sys.argv[1:], open({str(recorded)!r}, 'w'))\n"
    )
    fake_make.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    posargs = ["-m", "not slow", "-k", "a and b"]
    subprocess.run([sys.executable, "-c", command[2], *posargs], env=env, check=True, timeout=60)
    make_args = json.loads(recorded.read_text())
    assert make_args[0] == "test", make_args

    result = subprocess.run(
        ["make", "-n", *make_args], cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # make test runs the whole suite last (after the oldest Python's share).
    pytest_line = [line for line in result.stdout.splitlines() if " -m pytest " in line][-1]
    assert shlex.split(pytest_line)[-len(posargs):] == posargs, pytest_line
