"""The Kafka 0.8.x wire protocol, sans I/O: bytes in, objects out.

Importing this package registers every supported API: Produce (0), Fetch (1),
ListOffsets (2), Metadata (3), OffsetCommit (8), OffsetFetch (9) and
GroupCoordinator (10), all v0; Produce v3, Fetch v4, ListOffsets v1,
Metadata v1, OffsetCommit v2, OffsetFetch v1 and FindCoordinator v1 for
current brokers; ApiVersions (18) v0 to v2; and SaslHandshake (17) and
SaslAuthenticate (36) v0 and v1 for SASL (:mod:`kiel.protocol.sasl`).
Record batches (magic 2) are in :mod:`kiel.protocol.record_batch`; which
version to speak with a broker is :mod:`kiel.protocol.versions`.
"""
from kiel.protocol.api import Api, RequestHeader, ResponseHeader
from kiel.protocol.api_versions import (
    API_VERSIONS,
    API_VERSIONS_V0,
    API_VERSIONS_V1,
    API_VERSIONS_V2,
    ApiVersionRange,
    ApiVersionsRequestV0,
    ApiVersionsRequestV1,
    ApiVersionsRequestV2,
    ApiVersionsResponseV0,
    ApiVersionsResponseV1,
    ApiVersionsResponseV2,
)
from kiel.protocol.fetch import (
    FETCH_V0,
    FETCH_V4,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AbortedTransaction,
    FetchPartitionData,
    FetchPartitionResponse,
    FetchPartitionResponseV4,
    FetchRequest,
    FetchRequestV4,
    FetchResponse,
    FetchResponseV4,
    FetchTopicData,
    FetchTopicResponse,
    FetchTopicResponseV4,
)
from kiel.protocol.group_coordinator import (
    FIND_COORDINATOR_V1,
    GROUP_COORDINATOR_V0,
    FindCoordinatorRequestV1,
    FindCoordinatorResponseV1,
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
)
from kiel.protocol.list_offsets import (
    EARLIEST,
    LATEST,
    LIST_OFFSETS_V0,
    LIST_OFFSETS_V1,
    ListOffsetsPartitionData,
    ListOffsetsPartitionDataV1,
    ListOffsetsPartitionResponse,
    ListOffsetsPartitionResponseV1,
    ListOffsetsRequest,
    ListOffsetsRequestV1,
    ListOffsetsResponse,
    ListOffsetsResponseV1,
    ListOffsetsTopicData,
    ListOffsetsTopicDataV1,
    ListOffsetsTopicResponse,
    ListOffsetsTopicResponseV1,
)
from kiel.protocol.metadata import (
    METADATA_V0,
    METADATA_V1,
    BrokerMetadata,
    BrokerMetadataV1,
    MetadataRequest,
    MetadataRequestV1,
    MetadataResponse,
    MetadataResponseV1,
    PartitionMetadata,
    TopicMetadata,
    TopicMetadataV1,
)
from kiel.protocol.offset_commit import (
    OFFSET_COMMIT_V0,
    OFFSET_COMMIT_V2,
    OffsetCommitPartitionData,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitRequestV2,
    OffsetCommitResponse,
    OffsetCommitResponseV2,
    OffsetCommitTopicData,
    OffsetCommitTopicResponse,
)
from kiel.protocol.offset_fetch import (
    OFFSET_FETCH_V0,
    OFFSET_FETCH_V1,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchRequestV1,
    OffsetFetchResponse,
    OffsetFetchResponseV1,
    OffsetFetchTopicData,
    OffsetFetchTopicResponse,
)
from kiel.protocol.produce import (
    PRODUCE_V0,
    PRODUCE_V3,
    ProducePartitionData,
    ProducePartitionResponse,
    ProducePartitionResponseV3,
    ProduceRequest,
    ProduceRequestV3,
    ProduceResponse,
    ProduceResponseV3,
    ProduceTopicData,
    ProduceTopicResponse,
    ProduceTopicResponseV3,
)
from kiel.protocol.sasl import (
    SASL_AUTHENTICATE_V0,
    SASL_AUTHENTICATE_V1,
    SASL_HANDSHAKE_V0,
    SASL_HANDSHAKE_V1,
    SaslAuthenticateRequest,
    SaslAuthenticateRequestV1,
    SaslAuthenticateResponse,
    SaslAuthenticateResponseV1,
    SaslHandshakeRequest,
    SaslHandshakeRequestV1,
    SaslHandshakeResponse,
    SaslHandshakeResponseV1,
)

__all__ = [name for name in dir() if not name.startswith("_")]
