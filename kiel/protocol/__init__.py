"""The Kafka 0.8.x wire protocol, sans I/O: bytes in, objects out.

Importing this package registers every supported API: Produce (0), Fetch (1),
ListOffsets (2), Metadata (3), OffsetCommit (8), OffsetFetch (9) and
GroupCoordinator (10), all v0, and ApiVersions (18) v0 to v2.
Record batches (magic 2) are in :mod:`kiel.protocol.record_batch`.
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
    FetchPartitionData,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopicData,
    FetchTopicResponse,
)
from kiel.protocol.group_coordinator import (
    GROUP_COORDINATOR_V0,
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
)
from kiel.protocol.list_offsets import (
    EARLIEST,
    LATEST,
    LIST_OFFSETS_V0,
    ListOffsetsPartitionData,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicData,
    ListOffsetsTopicResponse,
)
from kiel.protocol.metadata import (
    METADATA_V0,
    BrokerMetadata,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from kiel.protocol.offset_commit import (
    OFFSET_COMMIT_V0,
    OffsetCommitPartitionData,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicData,
    OffsetCommitTopicResponse,
)
from kiel.protocol.offset_fetch import (
    OFFSET_FETCH_V0,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicData,
    OffsetFetchTopicResponse,
)
from kiel.protocol.produce import (
    PRODUCE_V0,
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    ProduceTopicResponse,
)

__all__ = [name for name in dir() if not name.startswith("_")]
