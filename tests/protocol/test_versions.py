"""Version negotiation, pure logic (kiel.protocol.versions): which version of
each API kiel speaks with a broker, from its ApiVersions ranges, a pinned
release, or the legacy fallback. The network side is tests/test_modern_clients.py."""
from typing import Any

import pytest

from kiel.exc import ConfigError, UnsupportedFeatureError
from kiel.protocol.api_versions import ApiVersionRange
from kiel.protocol.versions import (
    API_NAMES,
    DESCRIBE_GROUPS,
    FETCH,
    GROUP_COORDINATOR,
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    LEGACY,
    LIST_GROUPS,
    LIST_OFFSETS,
    METADATA,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    PRODUCE,
    SYNC_GROUP,
    check_api_version,
    for_broker_version,
    negotiate,
    supported,
)

ALL_V0 = {PRODUCE: 0, FETCH: 0, LIST_OFFSETS: 0, METADATA: 0, OFFSET_COMMIT: 0,
          OFFSET_FETCH: 0, GROUP_COORDINATOR: 0}
#: ListOffsets v2 (isolation level, Kafka 0.11+): read_committed consumers.
MODERN = {PRODUCE: 3, FETCH: 4, LIST_OFFSETS: 2, METADATA: 4}
#: Offsets stored by the broker (0.9+): OffsetCommit v2 with OffsetFetch v1.
BROKER_OFFSETS = {OFFSET_COMMIT: 2, OFFSET_FETCH: 1}
#: What a broker-coordinated group needs (Kafka 2.4+, Tansu): the membership
#: APIs, static-membership OffsetCommit v7, OffsetFetch v5, FindCoordinator v2.
GROUP_APIS = {JOIN_GROUP: 5, HEARTBEAT: 3, LEAVE_GROUP: 3, SYNC_GROUP: 3,
              DESCRIBE_GROUPS: 4, LIST_GROUPS: 2, OFFSET_COMMIT: 7, OFFSET_FETCH: 5,
              GROUP_COORDINATOR: 2}
#: The admin client's (kiel.admin.Admin), for a pinned release from 2.8;
#: ListOffsets v7 (MAX_TIMESTAMP) from 3.0.
ADMIN = {19: 5, 20: 5, 21: 2, 32: 4, 37: 2, 42: 2, 44: 1, 47: 0, 60: 0}
ADMIN_3_0 = {**ADMIN, LIST_OFFSETS: 7}
#: The transactional producer's (pinned): TxnOffsetCommit v3 (KIP-447) from
#: 2.5; AddPartitionsToTxn, AddOffsetsToTxn, EndTxn v2 from 2.7, v3 from 3.0.
TXN_2_5 = {28: 3}
TXN_2_7 = {**TXN_2_5, 24: 2, 25: 2, 26: 2}
TXN_3_0 = {**TXN_2_5, 24: 3, 25: 3, 26: 3}


def ranges(by_key: dict) -> dict:
    return {key: ApiVersionRange(key, low, high) for key, (low, high) in by_key.items()}


def test_kiel_implements_v0_of_everything_and_the_newer_versions() -> None:
    ours = supported()
    assert ours[PRODUCE] == (0, 3) and ours[FETCH] == (0, 4)
    # v2: read_committed consumers (isolation 1); v7: the admin's.
    assert ours[LIST_OFFSETS] == (0, 1, 2, 7) and ours[METADATA] == (0, 1, 4)
    assert ours[OFFSET_COMMIT] == (0, 2, 7) and ours[OFFSET_FETCH] == (0, 1, 5)
    assert ours[GROUP_COORDINATOR] == (0, 1, 2)
    assert all(ours[key][0] == 0 for key in ALL_V0)
    # The group coordinator's APIs: one version each (two of DescribeGroups).
    assert {key: ours[key] for key in (JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP,
                                       DESCRIBE_GROUPS, LIST_GROUPS)} == {
        JOIN_GROUP: (5,), HEARTBEAT: (3,), LEAVE_GROUP: (3,), SYNC_GROUP: (3,),
        DESCRIBE_GROUPS: (2, 4), LIST_GROUPS: (2,)}


def test_every_api_kiel_speaks_has_a_name() -> None:
    assert set(supported()) <= set(API_NAMES)
    assert [API_NAMES[k] for k in (11, 12, 13, 14, 15, 16)] == [
        "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups"]


def test_tansu_ranges_pick_the_newest_versions_kiel_has() -> None:
    # What Tansu 0.6 advertises (ApiVersions 0-4, Produce 0-11, Fetch 0-17, ...).
    tansu = {0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9),
             10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 5),
             16: (0, 5), 18: (0, 4)}
    versions = negotiate(ranges(tansu))
    assert {k: versions.of(k) for k in MODERN} == {**MODERN, LIST_OFFSETS: 7}
    assert {k: versions.of(k) for k in GROUP_APIS} == GROUP_APIS
    assert versions.source == "ApiVersions" and versions.broker is not None


def test_a_range_between_kiel_versions_picks_the_highest_inside() -> None:
    # Produce 0-2: v3 is out of reach, v0 is in. Fetch 5-17: v4 is below the
    # broker's minimum (a Kafka 4 style cut), so no Fetch at all.
    versions = negotiate(ranges({PRODUCE: (0, 2), FETCH: (5, 17)}))
    assert versions.of(PRODUCE) == 0
    assert versions.get(FETCH) is None
    with pytest.raises(UnsupportedFeatureError, match="Fetch.*versions 5 to 17"):
        versions.of(FETCH)
    with pytest.raises(UnsupportedFeatureError, match="does not list"):
        versions.of(METADATA)


def test_legacy_is_0_8_2() -> None:
    assert LEGACY.chosen == ALL_V0
    assert LEGACY.source == "legacy"


@pytest.mark.parametrize("release,expected", [
    ((0, 8, 0), {PRODUCE: 0, FETCH: 0, LIST_OFFSETS: 0, METADATA: 0}),
    ((0, 8, 1), {PRODUCE: 0, FETCH: 0, LIST_OFFSETS: 0, METADATA: 0, OFFSET_COMMIT: 0,
                 OFFSET_FETCH: 0}),
    ((0, 8, 2), ALL_V0),
    ((0, 9), {**ALL_V0, **BROKER_OFFSETS}),
    ((0, 10), {**ALL_V0, **BROKER_OFFSETS, METADATA: 1, 18: 0}),
    ((0, 10, 1), {**ALL_V0, **BROKER_OFFSETS, METADATA: 1, LIST_OFFSETS: 1, 18: 0}),
    ((0, 11), {**ALL_V0, **MODERN, **BROKER_OFFSETS, GROUP_COORDINATOR: 1, 18: 1}),
    # SaslHandshake v1 (17) and SaslAuthenticate (36): v0 from 1.0, v1 from 2.2.
    ((1, 0), {**ALL_V0, **MODERN, **BROKER_OFFSETS, GROUP_COORDINATOR: 1, 18: 1, 17: 1, 36: 0}),
    # FindCoordinator v2, DescribeGroups v2 and ListGroups v2 from 2.0;
    # OffsetFetch v5 from 2.1 (with OffsetCommit still v2: both broker storage).
    ((2, 0), {**ALL_V0, **MODERN, **BROKER_OFFSETS, GROUP_COORDINATOR: 2, 18: 2, 17: 1, 36: 0,
              DESCRIBE_GROUPS: 2, LIST_GROUPS: 2}),
    ((2, 1), {**ALL_V0, **MODERN, OFFSET_COMMIT: 2, OFFSET_FETCH: 5, GROUP_COORDINATOR: 2,
              18: 2, 17: 1, 36: 0, DESCRIBE_GROUPS: 2, LIST_GROUPS: 2}),
    ((2, 2), {**ALL_V0, **MODERN, OFFSET_COMMIT: 2, OFFSET_FETCH: 5, GROUP_COORDINATOR: 2,
              18: 2, 17: 1, 36: 1, DESCRIBE_GROUPS: 2, LIST_GROUPS: 2}),
    # JoinGroup v5, SyncGroup v3, Heartbeat v3, OffsetCommit v7 from 2.3;
    # LeaveGroup v3 (and DescribeGroups v4) only from 2.4.
    ((2, 3), {**ALL_V0, **MODERN, **GROUP_APIS, LEAVE_GROUP: None, DESCRIBE_GROUPS: 2,
              18: 2, 17: 1, 36: 1}),
    # ApiVersions v3 and InitProducerId v2 (both flexible) from 2.4;
    # InitProducerId v3 from 2.5, v4 from 2.7, v5 from 3.8.
    ((2, 4), {**ALL_V0, **MODERN, **GROUP_APIS, 18: 3, 17: 1, 36: 1, 22: 2}),
    ((2, 5), {**ALL_V0, **MODERN, **GROUP_APIS, 18: 3, 17: 1, 36: 1, 22: 3, **TXN_2_5}),
    ((2, 8), {**ALL_V0, **MODERN, **GROUP_APIS, 18: 3, 17: 1, 36: 1, 22: 4, **ADMIN,
              **TXN_2_7}),
    ((3, 7, 1), {**ALL_V0, **MODERN, **GROUP_APIS, 18: 3, 17: 1, 36: 1, 22: 4, **ADMIN_3_0,
                 **TXN_3_0}),
    ((3, 8), {**ALL_V0, **MODERN, **GROUP_APIS, 18: 3, 17: 1, 36: 1, 22: 5, **ADMIN_3_0,
                 **TXN_3_0}),
    ((4, 1), {**ALL_V0, **MODERN, **GROUP_APIS, 18: 3, 17: 1, 36: 1, 22: 5, **ADMIN_3_0,
                 **TXN_3_0}),
])
def test_pinned_release(release: tuple, expected: dict) -> None:
    expected = {key: v for key, v in expected.items() if v is not None}
    versions = for_broker_version(release)
    assert versions.chosen == expected
    assert versions.source == "pinned"


def test_a_pinned_0_8_0_has_no_offset_apis() -> None:
    with pytest.raises(UnsupportedFeatureError, match="OffsetCommit"):
        for_broker_version((0, 8, 0)).of(OFFSET_COMMIT)


@pytest.mark.parametrize("bad", ["0.8.2", (0,), (0, 8, 2, 1), (0, -1), (0, 8.2), [0, 8, 2],
                                 None, (0, 7), (True, 0)])
def test_bad_api_version_settings(bad: Any) -> None:
    with pytest.raises(ConfigError):
        check_api_version(bad)


def test_auto_is_none() -> None:
    assert check_api_version("auto") is None
    assert check_api_version((2, 8)) == (2, 8)


def test_offset_fetch_stays_on_the_storage_offset_commit_writes() -> None:
    # 0.8.2 serves OffsetFetch v1 (broker storage) but OffsetCommit only up
    # to v1 (kiel has v0 and v2): commits go to ZooKeeper, so fetches must too.
    pinned = for_broker_version((0, 8, 2))
    assert (pinned.of(OFFSET_COMMIT), pinned.of(OFFSET_FETCH)) == (0, 0)
    answered = negotiate(ranges({OFFSET_COMMIT: (0, 1), OFFSET_FETCH: (0, 1)}))
    assert (answered.of(OFFSET_COMMIT), answered.of(OFFSET_FETCH)) == (0, 0)
    # A broker without OffsetFetch v0 then has no usable OffsetFetch at all.
    answered = negotiate(ranges({OFFSET_COMMIT: (0, 1), OFFSET_FETCH: (1, 3)}))
    assert answered.get(OFFSET_FETCH) is None
    # With OffsetCommit v2 or later both read and write the broker's storage.
    answered = negotiate(ranges({OFFSET_COMMIT: (0, 9), OFFSET_FETCH: (0, 9)}))
    assert (answered.of(OFFSET_COMMIT), answered.of(OFFSET_FETCH)) == (7, 5)
    answered = negotiate(ranges({OFFSET_COMMIT: (0, 6), OFFSET_FETCH: (0, 5)}))
    assert (answered.of(OFFSET_COMMIT), answered.of(OFFSET_FETCH)) == (2, 5)
    answered = negotiate(ranges({OFFSET_COMMIT: (0, 7), OFFSET_FETCH: (0, 4)}))
    assert (answered.of(OFFSET_COMMIT), answered.of(OFFSET_FETCH)) == (7, 1)
    # Kafka 4's cut (OffsetCommit 2+, OffsetFetch 1+) still pairs.
    answered = negotiate(ranges({OFFSET_COMMIT: (2, 9), OFFSET_FETCH: (1, 9)}))
    assert (answered.of(OFFSET_COMMIT), answered.of(OFFSET_FETCH)) == (7, 5)


def test_a_0_8_broker_has_no_group_apis() -> None:
    # Legacy (closed on ApiVersions) and a pinned 0.8.2 or 1.1: none of the
    # membership APIs, and a typed error that names the API.
    for versions in (LEGACY, for_broker_version((0, 8, 2)), for_broker_version((1, 1))):
        for key in (JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP):
            assert versions.get(key) is None
        with pytest.raises(UnsupportedFeatureError, match="JoinGroup: kiel speaks versions"):
            versions.of(JOIN_GROUP)
    # A broker that lists JoinGroup only up to v4 (Kafka 2.2) cannot host
    # kiel's member either.
    with pytest.raises(UnsupportedFeatureError, match=r"JoinGroup.*\[5\].*versions 0 to 4"):
        negotiate(ranges({JOIN_GROUP: (0, 4)})).of(JOIN_GROUP)
