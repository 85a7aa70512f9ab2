"""Which version of each API kiel speaks with a broker: negotiation, sans I/O.

kiel implements a few versions of each API (the registry in
:mod:`kiel.protocol.api`): v0 of everything for Kafka 0.8, and for current
brokers Produce v3 (record batches), Fetch v4, ListOffsets v1 and v2 (the
isolation level, for read_committed), Metadata v1
and v4 (v4 can ask a broker not to auto-create the topics it names),
OffsetCommit v2 and v7, OffsetFetch v1 and v5, FindCoordinator v1 and v2,
and the group coordinator's JoinGroup v5, Heartbeat v3, LeaveGroup v3,
SyncGroup v3, DescribeGroups v2 and v4 and ListGroups v2 (none of which a
0.8 broker serves).
With one broker it speaks, per API, the highest version both sides know:

* from the broker's ApiVersions answer (Kafka 0.10+): :func:`negotiate`;
* from a broker release the application pinned (``api_version=(0, 10, 1)``,
  kafka-python's meaning): :func:`for_broker_version`, no request needed;
* for a broker that closed the connection on ApiVersions (Kafka 0.8 and
  0.9 do): :data:`LEGACY`, the 0.8.2 versions.

The result is a :class:`Versions`: ``versions.of(api_key)`` is the version to
build a request with, and raises :class:`~kiel.exc.UnsupportedFeatureError`
for an API the two sides share no version of.

Example::

    versions = negotiate(version_ranges(api_versions_response))
    if versions.of(PRODUCE) >= 3:
        ...  # record batches
"""
from collections.abc import Mapping
from typing import Any, Optional

from kiel.exc import ConfigError, UnsupportedFeatureError
from kiel.protocol.api import BY_KEY
from kiel.protocol.api_versions import ApiVersionRange

__all__ = [
    "API_NAMES",
    "CREATE_PARTITIONS",
    "CREATE_TOPICS",
    "DELETE_GROUPS",
    "DELETE_RECORDS",
    "DELETE_TOPICS",
    "DESCRIBE_CLUSTER",
    "DESCRIBE_CONFIGS",
    "INCREMENTAL_ALTER_CONFIGS",
    "OFFSET_DELETE",
    "DESCRIBE_GROUPS",
    "FETCH",
    "GROUP_COORDINATOR",
    "HEARTBEAT",
    "INIT_PRODUCER_ID",
    "ADD_PARTITIONS_TO_TXN",
    "ADD_OFFSETS_TO_TXN",
    "END_TXN",
    "TXN_OFFSET_COMMIT",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "LEGACY",
    "LIST_GROUPS",
    "LIST_OFFSETS",
    "METADATA",
    "OFFSET_COMMIT",
    "OFFSET_FETCH",
    "PRODUCE",
    "SYNC_GROUP",
    "Versions",
    "check_api_version",
    "for_broker_version",
    "negotiate",
    "supported",
]

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
GROUP_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
SASL_HANDSHAKE = 17
API_VERSIONS = 18
INIT_PRODUCER_ID = 22
SASL_AUTHENTICATE = 36
# The admin client's APIs (kiel.admin.Admin).
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
DESCRIBE_CONFIGS = 32
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
INCREMENTAL_ALTER_CONFIGS = 44
OFFSET_DELETE = 47
DESCRIBE_CLUSTER = 60
# The transactional producer's APIs (kiel.producer.transactions).
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28

#: Names for messages (the protocol guide's, GroupCoordinator as 0.8.2 calls it).
API_NAMES = {
    PRODUCE: "Produce", FETCH: "Fetch", LIST_OFFSETS: "ListOffsets", METADATA: "Metadata",
    OFFSET_COMMIT: "OffsetCommit", OFFSET_FETCH: "OffsetFetch",
    GROUP_COORDINATOR: "GroupCoordinator", JOIN_GROUP: "JoinGroup", HEARTBEAT: "Heartbeat",
    LEAVE_GROUP: "LeaveGroup", SYNC_GROUP: "SyncGroup", DESCRIBE_GROUPS: "DescribeGroups",
    LIST_GROUPS: "ListGroups", API_VERSIONS: "ApiVersions",
    SASL_HANDSHAKE: "SaslHandshake", SASL_AUTHENTICATE: "SaslAuthenticate",
    INIT_PRODUCER_ID: "InitProducerId",
    CREATE_TOPICS: "CreateTopics", DELETE_TOPICS: "DeleteTopics",
    DELETE_RECORDS: "DeleteRecords", DESCRIBE_CONFIGS: "DescribeConfigs",
    CREATE_PARTITIONS: "CreatePartitions", DELETE_GROUPS: "DeleteGroups",
    INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs", OFFSET_DELETE: "OffsetDelete",
    DESCRIBE_CLUSTER: "DescribeCluster",
    ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn", ADD_OFFSETS_TO_TXN: "AddOffsetsToTxn",
    END_TXN: "EndTxn", TXN_OFFSET_COMMIT: "TxnOffsetCommit",
}

# The highest version of each API kiel may use that a Kafka release serves,
# from the release that introduced it (the protocol guide's tables). Only the
# releases where one of kiel's versions becomes available matter; later
# releases keep serving these (Kafka 4.0's new minimums are Produce v3,
# Fetch v4 and ListOffsets v1, exactly kiel's newer versions).
_RELEASES: tuple[tuple[tuple[int, ...], dict[int, int]], ...] = (
    ((0, 8, 0), {PRODUCE: 0, FETCH: 0, LIST_OFFSETS: 0, METADATA: 0}),
    ((0, 8, 1), {PRODUCE: 0, FETCH: 0, LIST_OFFSETS: 0, METADATA: 0,
                 OFFSET_COMMIT: 0, OFFSET_FETCH: 0}),
    ((0, 8, 2), {PRODUCE: 0, FETCH: 0, LIST_OFFSETS: 0, METADATA: 0,
                 OFFSET_COMMIT: 1, OFFSET_FETCH: 1, GROUP_COORDINATOR: 0}),
    ((0, 9), {PRODUCE: 1, FETCH: 1, LIST_OFFSETS: 0, METADATA: 0,
              OFFSET_COMMIT: 2, OFFSET_FETCH: 1, GROUP_COORDINATOR: 0}),
    ((0, 10, 0), {PRODUCE: 2, FETCH: 2, LIST_OFFSETS: 0, METADATA: 1,
                  OFFSET_COMMIT: 2, OFFSET_FETCH: 1, GROUP_COORDINATOR: 0, API_VERSIONS: 0}),
    ((0, 10, 1), {PRODUCE: 2, FETCH: 3, LIST_OFFSETS: 1, METADATA: 2,
                  OFFSET_COMMIT: 2, OFFSET_FETCH: 1, GROUP_COORDINATOR: 0, API_VERSIONS: 0}),
    ((0, 11, 0), {PRODUCE: 3, FETCH: 5, LIST_OFFSETS: 2, METADATA: 4,
                  OFFSET_COMMIT: 3, OFFSET_FETCH: 3, GROUP_COORDINATOR: 1, API_VERSIONS: 1}),
    # SASL inside the Kafka protocol (KIP-152): SaslHandshake v1 with
    # SaslAuthenticate v0 from 1.0, SaslAuthenticate v1 from 2.2 (KIP-368).
    ((1, 0, 0), {PRODUCE: 5, FETCH: 6, LIST_OFFSETS: 2, METADATA: 5,
                 OFFSET_COMMIT: 3, OFFSET_FETCH: 3, GROUP_COORDINATOR: 1, API_VERSIONS: 1,
                 SASL_HANDSHAKE: 1, SASL_AUTHENTICATE: 0}),
    # The group coordinator's APIs from the release that serves kiel's first
    # version of one of them: FindCoordinator v2, DescribeGroups v2 and
    # ListGroups v2 in 2.0 (KIP-219); OffsetFetch v5 in 2.1 (KIP-320);
    # JoinGroup v5, SyncGroup v3, Heartbeat v3 and OffsetCommit v7 in 2.3,
    # LeaveGroup v3 and DescribeGroups v4 in 2.4 (static membership, KIP-345).
    ((2, 0, 0), {PRODUCE: 6, FETCH: 8, LIST_OFFSETS: 3, METADATA: 6,
                 OFFSET_COMMIT: 4, OFFSET_FETCH: 4, GROUP_COORDINATOR: 2, API_VERSIONS: 2,
                 SASL_HANDSHAKE: 1, SASL_AUTHENTICATE: 0, JOIN_GROUP: 3, HEARTBEAT: 2,
                 LEAVE_GROUP: 2, SYNC_GROUP: 2, DESCRIBE_GROUPS: 2, LIST_GROUPS: 2}),
    ((2, 1, 0), {PRODUCE: 7, FETCH: 10, LIST_OFFSETS: 4, METADATA: 7,
                 OFFSET_COMMIT: 6, OFFSET_FETCH: 5, GROUP_COORDINATOR: 2, API_VERSIONS: 2,
                 SASL_HANDSHAKE: 1, SASL_AUTHENTICATE: 0, JOIN_GROUP: 3, HEARTBEAT: 2,
                 LEAVE_GROUP: 2, SYNC_GROUP: 2, DESCRIBE_GROUPS: 2, LIST_GROUPS: 2}),
    ((2, 2, 0), {PRODUCE: 7, FETCH: 10, LIST_OFFSETS: 5, METADATA: 7,
                 OFFSET_COMMIT: 6, OFFSET_FETCH: 5, GROUP_COORDINATOR: 2, API_VERSIONS: 2,
                 SASL_HANDSHAKE: 1, SASL_AUTHENTICATE: 1, JOIN_GROUP: 4, HEARTBEAT: 2,
                 LEAVE_GROUP: 2, SYNC_GROUP: 2, DESCRIBE_GROUPS: 2, LIST_GROUPS: 2}),
    ((2, 3, 0), {PRODUCE: 7, FETCH: 11, LIST_OFFSETS: 5, METADATA: 8,
                 OFFSET_COMMIT: 7, OFFSET_FETCH: 5, GROUP_COORDINATOR: 2, API_VERSIONS: 2,
                 SASL_HANDSHAKE: 1, SASL_AUTHENTICATE: 1, JOIN_GROUP: 5, HEARTBEAT: 3,
                 LEAVE_GROUP: 2, SYNC_GROUP: 3, DESCRIBE_GROUPS: 3, LIST_GROUPS: 2}),
    ((2, 4, 0), {PRODUCE: 8, FETCH: 11, LIST_OFFSETS: 5, METADATA: 9,
                 OFFSET_COMMIT: 8, OFFSET_FETCH: 6, GROUP_COORDINATOR: 3, API_VERSIONS: 3,
                 SASL_HANDSHAKE: 1, SASL_AUTHENTICATE: 1, JOIN_GROUP: 6, HEARTBEAT: 4,
                 LEAVE_GROUP: 4, SYNC_GROUP: 4, DESCRIBE_GROUPS: 5, LIST_GROUPS: 3}),
)
# InitProducerId's versions by release (apache/kafka's release branches):
# v2 (its first flexible version, kiel's first) from 2.4, v3 (KIP-360) from
# 2.5, v4 (KIP-588) from 2.7, v5 (KIP-890) from 3.8. Added to the last row
# and later rows made from it, so the table above reads as before.
_RELEASES = _RELEASES[:-1] + (
    (_RELEASES[-1][0], {**_RELEASES[-1][1], INIT_PRODUCER_ID: 2}),
    ((2, 5, 0), {**_RELEASES[-1][1], INIT_PRODUCER_ID: 3}),
    ((2, 7, 0), {**_RELEASES[-1][1], INIT_PRODUCER_ID: 4}),
    ((3, 8, 0), {**_RELEASES[-1][1], INIT_PRODUCER_ID: 5}),
)
#: The admin client's versions (kiel.admin.Admin) for a pinned release: from
#: 2.8, the first release that serves every one of them (DescribeCluster
#: v0, KIP-700, is the newest); ListOffsets v7 (MAX_TIMESTAMP, KIP-734)
#: from 3.0. An older pinned release gets none: UnsupportedFeatureError,
#: not a guess (negotiation with ApiVersions finds what the broker serves).
_ADMIN_SINCE_2_8 = {CREATE_TOPICS: 5, DELETE_TOPICS: 5, CREATE_PARTITIONS: 2,
                    DESCRIBE_CONFIGS: 4, INCREMENTAL_ALTER_CONFIGS: 1, DELETE_RECORDS: 2,
                    DELETE_GROUPS: 2, OFFSET_DELETE: 0, DESCRIBE_CLUSTER: 0}


def _with_admin(rows: tuple[tuple[tuple[int, ...], dict[int, int]], ...]
                ) -> tuple[tuple[tuple[int, ...], dict[int, int]], ...]:
    """``rows`` with rows for 2.8 and 3.0 added and the admin versions in every
    row from 2.8 on (each new row copies the release before it)."""
    out = []
    for since in sorted({release for release, _ in rows} | {(2, 8, 0), (3, 0, 0)}):
        maxima = dict([m for release, m in rows if release <= since][-1])
        if since >= (2, 8, 0):
            maxima.update(_ADMIN_SINCE_2_8)
        if since >= (3, 0, 0):
            maxima[LIST_OFFSETS] = 7
        out.append((since, maxima))
    return tuple(out)


_RELEASES = _with_admin(_RELEASES)


def _with_transactions(rows: tuple[tuple[tuple[int, ...], dict[int, int]], ...]
                       ) -> tuple[tuple[tuple[int, ...], dict[int, int]], ...]:
    """``rows`` with the transactional producer's versions: TxnOffsetCommit
    v3 (KIP-447) from 2.5; AddPartitionsToTxn, AddOffsetsToTxn and EndTxn
    v2 (PRODUCER_FENCED, KIP-588) from 2.7 and v3 (flexible) from 3.0, a
    release that serves them for certain (negotiation with ApiVersions
    finds a broker's own). Rows for 2.5, 2.7 and 3.0 exist already."""
    out = []
    for since, maxima in rows:
        maxima = dict(maxima)
        if since >= (2, 5, 0):
            maxima[TXN_OFFSET_COMMIT] = 3
        if since >= (2, 7, 0):
            for key in (ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN):
                maxima[key] = 3 if since >= (3, 0, 0) else 2
        out.append((since, maxima))
    return tuple(out)


_RELEASES = _with_transactions(_RELEASES)


def supported() -> dict[int, tuple[int, ...]]:
    """The versions kiel implements, per API key (from the registry).

    Returns:
        ``{api_key: (version, ...)}``, versions ascending.
    """
    out: dict[int, tuple[int, ...]] = {}
    for key, version in sorted(BY_KEY):
        out[key] = out.get(key, ()) + (version,)
    return out


def _pair_offsets(chosen: dict[int, int], fetch_v0: bool) -> dict[int, int]:
    """Keep OffsetFetch and OffsetCommit on the same offset storage.

    Strategy: OffsetCommit v0 and OffsetFetch v0 use ZooKeeper storage on a
    0.8.2 broker, OffsetCommit v1+ and OffsetFetch v1+ the broker's own; a
    0.8.2 broker serves OffsetFetch v1 but not OffsetCommit v2 (kiel's next
    version after v0), and reading one storage after writing the other
    loses every commit. So OffsetFetch v1 or later goes only with
    OffsetCommit v2 or later (any of kiel's later versions, v2 or v7, with
    any, v1 or v5: they all read and write the broker's storage);
    otherwise v0 (``fetch_v0``: the broker serves it), or none.
    """
    if chosen.get(OFFSET_FETCH, 0) >= 1 and chosen.get(OFFSET_COMMIT, 0) < 2:
        if fetch_v0:
            chosen[OFFSET_FETCH] = 0
        else:
            del chosen[OFFSET_FETCH]
    return chosen


class Versions:
    """The version of each API to speak with one broker.

    Args:
        chosen: ``{api_key: version}``; an API absent here is one the two
            sides share no version of.
        source: how they were found: ``"ApiVersions"``, ``"legacy"`` (the
            broker closed the connection on ApiVersions) or ``"pinned"``.
        broker: the broker's ranges when it listed them, else ``None``.
    """

    __slots__ = ("chosen", "source", "broker")

    def __init__(self, chosen: Mapping[int, int], source: str,
                 broker: Optional[Mapping[int, ApiVersionRange]] = None) -> None:
        self.chosen: dict[int, int] = dict(chosen)
        self.source = source
        self.broker = dict(broker) if broker is not None else None

    def of(self, api_key: int) -> int:
        """The version to build ``api_key``'s requests with.

        Returns:
            the version number.

        Raises:
            UnsupportedFeatureError: kiel and the broker share no version of it.
        """
        version = self.chosen.get(api_key)
        if version is None:
            theirs = self.broker.get(api_key) if self.broker is not None else None
            ours = supported().get(api_key, ())
            raise UnsupportedFeatureError(
                f"{API_NAMES.get(api_key, api_key)}: kiel speaks versions {list(ours)}, "
                f"the broker {_describe(theirs, self.source)}",
                api=API_NAMES.get(api_key, str(api_key)),
            )
        return version

    def get(self, api_key: int) -> Optional[int]:
        """The version of ``api_key``, or ``None`` when there is none."""
        return self.chosen.get(api_key)

    def __repr__(self) -> str:
        pairs = ", ".join(f"{API_NAMES.get(k, k)} v{v}" for k, v in sorted(self.chosen.items()))
        return f"<Versions ({self.source}): {pairs}>"


def _describe(theirs: Optional[ApiVersionRange], source: str) -> str:
    if theirs is not None:
        return f"versions {theirs.min_version} to {theirs.max_version}"
    if source == "ApiVersions":
        return "does not list the API"
    return f"({source}) does not serve it"


def negotiate(ranges: Mapping[int, ApiVersionRange]) -> Versions:
    """Per API, the highest version kiel implements within the broker's range.

    Args:
        ranges: the broker's ApiVersions answer, ``{api_key: ApiVersionRange}``
            (see :func:`kiel.protocol.api_versions.version_ranges`).

    Returns:
        the :class:`Versions` (``source="ApiVersions"``).
    """
    chosen: dict[int, int] = {}
    for key, ours in supported().items():
        theirs = ranges.get(key)
        if theirs is None:
            continue
        usable = [v for v in ours if theirs.min_version <= v <= theirs.max_version]
        if usable:
            chosen[key] = usable[-1]
    fetch = ranges.get(OFFSET_FETCH)
    _pair_offsets(chosen, fetch is not None and fetch.min_version == 0)
    return Versions(chosen, "ApiVersions", ranges)


def check_api_version(value: Any) -> Optional[tuple[int, ...]]:
    """Validate a client's ``api_version`` setting.

    Args:
        value: ``"auto"`` (ask each broker), or a broker release as a tuple
            of 2 or 3 non-negative ints such as ``(0, 8, 2)`` or ``(2, 8)``.

    Returns:
        ``None`` for ``"auto"``, else the tuple.

    Raises:
        ConfigError: anything else, or a release older than 0.8.0.
    """
    if value == "auto":
        return None
    if (
        not isinstance(value, tuple)
        or not 2 <= len(value) <= 3
        or not all(type(part) is int and part >= 0 for part in value)
    ):
        raise ConfigError(
            f"api_version must be 'auto' or a broker version tuple like (0, 8, 2), got {value!r}"
        )
    if value < (0, 8, 0):
        raise ConfigError(f"api_version {value!r} is older than Kafka 0.8.0")
    return value


def for_broker_version(release: tuple[int, ...]) -> Versions:
    """The versions to speak with a broker of a known Kafka release (no probe).

    Args:
        release: e.g. ``(0, 8, 2)`` or ``(2, 8)`` (see :func:`check_api_version`).

    Returns:
        the :class:`Versions` (``source="pinned"``): per API, the highest
        version kiel implements that the release serves.

    Raises:
        ConfigError: a release older than 0.8.0 or not a version tuple.
    """
    release = check_api_version(release) or (0, 8, 0)
    release = release + (0,) * (3 - len(release))  # (0, 10) is (0, 10, 0)
    table: dict[int, int] = {}
    for since, maxima in _RELEASES:
        if release >= since:
            table = maxima
    chosen: dict[int, int] = {}
    for key, ours in supported().items():
        highest = table.get(key)
        if highest is None:
            continue
        usable = [v for v in ours if v <= highest]
        if usable:
            chosen[key] = usable[-1]
    return Versions(_pair_offsets(chosen, True), "pinned")


#: What a broker that closes the connection on ApiVersions gets: Kafka 0.8.2's
#: versions (0.8 and 0.9 brokers both serve every v0 kiel speaks).
LEGACY = Versions(for_broker_version((0, 8, 2)).chosen, "legacy")
