"""The public surface: what applications import and annotate with."""

import subprocess
import sys
from pathlib import Path

import pytest

import kiel
from kiel.clients import GroupedConsumer, Producer, SingleConsumer
from kiel.exc import ConfigError

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", [n for n in kiel.__all__ if n != "__version__"])
def test_every_exported_name_resolves(name: str) -> None:
    value = getattr(kiel, name)
    assert value is not None
    assert name in dir(kiel)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        kiel.NoSuchThing  # noqa: B018


def _imports(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_producer_only_application_never_imports_kazoo() -> None:
    out = _imports(
        "import sys, kiel\n"
        "from kiel import Producer, Record, TopicPartition, SingleConsumer\n"
        "import kiel.clients\n"
        "print('kazoo' in sys.modules)\n"
    )
    assert out.strip() == "False"


def test_the_protocol_layer_imports_neither_tornado_nor_kazoo() -> None:
    out = _imports(
        "import sys, kiel.protocol, kiel.structs, kiel.compression\n"
        "print('tornado' in sys.modules, 'kazoo' in sys.modules)\n"
    )
    assert out.strip() == "False False"


def test_grouped_consumer_is_the_same_class_everywhere() -> None:
    from kiel.clients import GroupedConsumer as from_facade
    from kiel.consumer import GroupedConsumer as from_package

    assert kiel.GroupedConsumer is from_facade is from_package


def test_record_is_generic_for_annotations() -> None:
    from kiel.structs import Record

    alias = Record[str, dict]
    record = Record("t", 0, 5, b"k", b"v")
    assert record.topic == "t" and record.timestamp is None
    assert alias is not None


def test_client_options_are_exactly_the_cluster_settings() -> None:
    """ClientOptions types what every client passes on to Cluster: the two
    must name the same settings (a new Cluster setting needs its entry)."""
    import inspect

    from kiel.client import ClientOptions
    from kiel.cluster import Cluster

    # allow_auto_create_topics is the one Cluster setting each client
    # decides itself (consumers never create, the producer has its option).
    settings = set(inspect.signature(Cluster).parameters) - {"brokers", "allow_auto_create_topics"}
    assert set(ClientOptions.__annotations__) == settings


@pytest.mark.parametrize("make,option,spelling", [
    (lambda **o: GroupedConsumer("h:1", "g", topics=["t"], **o), "group_id",
     "the second argument, group"),
    (lambda **o: GroupedConsumer("h:1", "g", topics=["t"], **o), "partition_allocator",
     "allocator"),
    (lambda **o: GroupedConsumer("h:1", "g", zk_hosts="h:2", topics=["t"], **o), "autocommit",
     "commit_interval"),
    (lambda **o: SingleConsumer("h:1", **o), "auto_offset_reset", "offset_reset"),
    (lambda **o: SingleConsumer("h:1", **o), "bootstrap_servers", "the first argument"),
    (lambda **o: Producer("h:1", **o), "request_timeout_ms", "request_timeout, in seconds"),
    (lambda **o: GroupedConsumer("h:1", "g", topics=["t"], **o), "session_timeout_ms",
     "session_timeout, in seconds"),
    (lambda **o: Producer("h:1", **o), "no_such_thing", ""),
])
def test_an_unknown_option_is_a_config_error_naming_kiels_spelling(make, option, spelling):
    # A TypeError about an internal class (Cluster.__init__) before.
    with pytest.raises(ConfigError, match=f"no option '{option}'") as raised:
        make(**{option: 1})
    assert spelling in str(raised.value)
