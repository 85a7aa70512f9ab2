"""The version table: what kiel may send to a Kafka 4 broker (KIP-896) and
which of its versions are flexible (KIP-482), checked against Kafka's own
message definitions.

Kafka 4.0 removed the API versions older than its 2.1 baseline (KIP-896): a
4.x broker refuses them. :data:`KAFKA4` holds, per API kiel speaks, the
lowest version Kafka 4 still accepts and its first flexible version. The
facts come from Apache Kafka's ``clients/src/main/resources/common/message/
*Request.json`` (``validVersions``, ``flexibleVersions`` and the comments
"Versions 0-2 were removed in Apache Kafka 4.0, version 3 is the new
baseline"). They were read from the copy of those definitions that
kafka-python 3.0.12 ships (from Kafka 4.1: ProduceRequest ``validVersions``
"3-13"; the apache/kafka snapshot at hand, trunk of October 2024, predates
4.0's removals), and :func:`test_the_table_is_kafkas` reads that copy again
at every run, so a kafka-python built from newer definitions that moved a
floor fails here instead of drifting silently.

Checked:

* negotiating with a Kafka 4 broker (every API from its floor to its newest
  version) gives kiel a version of every API it uses, each at or above the
  floor; so does pinning ``api_version=(4, 0)``;
* every version kiel registers below a floor is one only the 0.8.2 path
  sends (:data:`kiel.protocol.versions.LEGACY`);
* kiel's declared first flexible versions (``kiel.protocol.api.FLEXIBLE_FROM``)
  are Kafka's, and an API kiel declares none for has no registered version
  at or past Kafka's first flexible one (it would be sent in the classic
  layout).
"""
import json
import re
from pathlib import Path
from typing import Dict, Optional, Tuple

import kafka.protocol.schemas.resources as kp_resources
import pytest

from kiel.protocol.api import BY_KEY, FLEXIBLE_FROM
from kiel.protocol.api_versions import ApiVersionRange
from kiel.protocol.versions import LEGACY, for_broker_version, negotiate, supported

#: api key -> (name, Kafka 4.0's lowest accepted version, first flexible
#: version or None). From Apache Kafka's message definitions (see above).
KAFKA4: Dict[int, Tuple[str, int, Optional[int]]] = {
    0: ("Produce", 3, 9),
    1: ("Fetch", 4, 12),
    2: ("ListOffsets", 1, 6),
    3: ("Metadata", 0, 9),
    8: ("OffsetCommit", 2, 8),
    9: ("OffsetFetch", 1, 6),
    10: ("FindCoordinator", 0, 3),
    11: ("JoinGroup", 0, 6),
    12: ("Heartbeat", 0, 4),
    13: ("LeaveGroup", 0, 4),
    14: ("SyncGroup", 0, 4),
    15: ("DescribeGroups", 0, 5),
    16: ("ListGroups", 0, 3),
    17: ("SaslHandshake", 0, None),
    18: ("ApiVersions", 0, 3),
    22: ("InitProducerId", 0, 2),
    36: ("SaslAuthenticate", 0, 2),
    # The admin client's (kiel.admin.Admin).
    19: ("CreateTopics", 2, 5),
    20: ("DeleteTopics", 1, 4),
    21: ("DeleteRecords", 0, 2),
    32: ("DescribeConfigs", 1, 4),
    37: ("CreatePartitions", 0, 2),
    42: ("DeleteGroups", 0, 2),
    44: ("IncrementalAlterConfigs", 0, 1),
    47: ("OffsetDelete", 0, None),
    60: ("DescribeCluster", 0, 0),
    # The transactional producer's (kiel.producer.transactions).
    24: ("AddPartitionsToTxn", 0, 3),
    25: ("AddOffsetsToTxn", 0, 3),
    26: ("EndTxn", 0, 3),
    28: ("TxnOffsetCommit", 0, 3),
}

RESOURCES = Path(kp_resources.__file__).parent


def _definition(name: str, kind: str) -> dict:
    """One of Kafka's message definitions (JSON with // comments)."""
    text = (RESOURCES / f"{name}{kind}.json").read_text(encoding="utf-8")
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def _versions(spec: str) -> Tuple[int, Optional[int]]:
    """``"3-13"`` -> (3, 13), ``"9+"`` -> (9, None), ``"none"``/``"0"`` as Kafka writes them."""
    if spec == "none":
        return (-1, -1)
    if spec.endswith("+"):
        return (int(spec[:-1]), None)
    low, _, high = spec.partition("-")
    return (int(low), int(high or low))


def kafka4_ranges() -> Dict[int, ApiVersionRange]:
    """What a Kafka 4 broker lists in ApiVersions for kiel's APIs."""
    ranges = {}
    for key, (name, _, _) in KAFKA4.items():
        low, high = _versions(_definition(name, "Request")["validVersions"])
        ranges[key] = ApiVersionRange(key, low, high or low)
    return ranges


def test_the_table_is_kafkas() -> None:
    for key, (name, floor, flexible_from) in KAFKA4.items():
        for kind in ("Request", "Response"):
            definition = _definition(name, kind)
            assert definition["apiKey"] == key, name
            assert _versions(definition["validVersions"])[0] == floor, (name, kind)
            first = _versions(definition["flexibleVersions"])[0]
            assert (None if first < 0 else first) == flexible_from, (name, kind)


def test_the_table_covers_every_api_kiel_speaks() -> None:
    assert set(supported()) == set(KAFKA4)


def test_a_kafka4_broker_gets_versions_at_or_above_its_floor() -> None:
    versions = negotiate(kafka4_ranges())
    below = {KAFKA4[k][0]: v for k, v in versions.chosen.items() if v < KAFKA4[k][1]}
    assert below == {}
    # No API kiel uses with a current broker is lost on the way.
    assert set(versions.chosen) == set(KAFKA4)
    pinned = for_broker_version((4, 0))
    assert {KAFKA4[k][0]: v for k, v in pinned.chosen.items() if v < KAFKA4[k][1]} == {}


def test_versions_below_a_floor_are_only_for_kafka_0_8() -> None:
    below = {(key, v) for key, ours in supported().items() for v in ours if v < KAFKA4[key][1]}
    assert below == {(0, 0), (1, 0), (2, 0), (8, 0), (9, 0)}
    assert all(LEGACY.chosen.get(key) == v for key, v in below)


@pytest.mark.parametrize("key", sorted(KAFKA4), ids=lambda k: KAFKA4[k][0])
def test_flexible_versions_are_kafkas(key: int) -> None:
    name, _, flexible_from = KAFKA4[key]
    if key in FLEXIBLE_FROM:
        assert FLEXIBLE_FROM[key] == flexible_from, name
    for version in supported()[key]:
        api = BY_KEY[(key, version)]
        expected = flexible_from is not None and version >= flexible_from
        assert api.flexible == expected, f"{name} v{version}"


def test_what_kiel_sends_a_kafka4_broker() -> None:
    # The table the docs show (docs/guides/protocol_versions.rst): kiel's
    # version of each API with a current broker, and whether it is flexible.
    versions = negotiate(kafka4_ranges())
    table = {KAFKA4[k][0]: (v, BY_KEY[(k, v)].flexible) for k, v in versions.chosen.items()}
    assert table == {
        "Produce": (3, False), "Fetch": (4, False), "ListOffsets": (7, True),
        "Metadata": (4, False), "OffsetCommit": (7, False), "OffsetFetch": (5, False),
        "FindCoordinator": (2, False), "JoinGroup": (5, False), "Heartbeat": (3, False),
        "LeaveGroup": (3, False), "SyncGroup": (3, False), "DescribeGroups": (4, False),
        "ListGroups": (2, False), "SaslHandshake": (1, False), "ApiVersions": (3, True),
        "InitProducerId": (5, True), "SaslAuthenticate": (1, False),
        # The admin client's; ListOffsets v7 above is its too (the consumers
        # keep building v1 requests, which any version from 1 up answers).
        "CreateTopics": (5, True), "DeleteTopics": (5, True), "DeleteRecords": (2, True),
        "DescribeConfigs": (4, True), "CreatePartitions": (2, True),
        "DeleteGroups": (2, True), "IncrementalAlterConfigs": (1, True),
        "OffsetDelete": (0, False), "DescribeCluster": (0, True),
        # The transactional producer's (AddPartitionsToTxn v4+ are for brokers).
        "AddPartitionsToTxn": (3, True), "AddOffsetsToTxn": (3, True), "EndTxn": (3, True),
        "TxnOffsetCommit": (3, True),
    }
