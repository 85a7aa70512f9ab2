"""The Kafka 0.8.x wire protocol, sans I/O: bytes in, objects out.

Importing this package registers every supported API (all v0):
Produce (0), Fetch (1), ListOffsets (2), Metadata (3), OffsetCommit (8),
OffsetFetch (9) and GroupCoordinator (10).
"""
from kiel.protocol.api import Api, RequestHeader, ResponseHeader
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
