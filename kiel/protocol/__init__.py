"""The Kafka wire protocol, sans I/O: bytes in, objects out.

Importing this package registers every supported API: Produce (0), Fetch (1),
ListOffsets (2), Metadata (3), OffsetCommit (8), OffsetFetch (9) and
GroupCoordinator (10), all v0; Produce v3, Fetch v4, ListOffsets v1,
Metadata v1 and v4, OffsetCommit v2 and v7, OffsetFetch v1 and v5 and
FindCoordinator v1 and v2 for current brokers; the group coordinator's
JoinGroup (11) v5, Heartbeat (12) v3, LeaveGroup (13) v3, SyncGroup (14) v3,
DescribeGroups (15) v2 and v4 and ListGroups (16) v2
(:mod:`kiel.protocol.group_membership`); ApiVersions (18) v0 to v3;
SaslHandshake (17) and SaslAuthenticate (36) v0 and v1 for SASL
(:mod:`kiel.protocol.sasl`); and InitProducerId (22) v2 to v5
(:mod:`kiel.protocol.init_producer_id`). ApiVersions v3 and InitProducerId
are flexible versions (KIP-482: compact types, tagged fields, request
header v2; see :mod:`kiel.protocol.schema`). Record batches (magic 2) are in
:mod:`kiel.protocol.record_batch`, the consumer groups' embedded
subscription and assignment in :mod:`kiel.protocol.consumer_protocol`;
which version to speak with a broker is :mod:`kiel.protocol.versions`.
The admin client's APIs (CreateTopics v5, DeleteTopics v5, CreatePartitions
v2, DescribeConfigs v4, IncrementalAlterConfigs v1, DeleteRecords v2,
ListOffsets v7, DescribeCluster v0, DeleteGroups v2, OffsetDelete v0) are in
the ``admin_*`` modules; the transactional producer's (AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn v2 and v3, TxnOffsetCommit v3) in
:mod:`kiel.protocol.transactions`.
"""
# The admin client's APIs (kiel.admin.Admin): registered with the others, so
# every connection negotiates them whatever the application imported
# (admin_records imports list_offsets first: ListOffsets v0 and v1, then v7).
from kiel.protocol import (  # noqa: F401
    admin_cluster,
    admin_configs,
    admin_groups,
    admin_records,
    admin_topics,
    transactions,
)
from kiel.protocol.api import (
    Api,
    RequestHeader,
    RequestHeaderV2,
    ResponseHeader,
    ResponseHeaderV1,
)
from kiel.protocol.api_versions import (
    API_VERSIONS,
    API_VERSIONS_V0,
    API_VERSIONS_V1,
    API_VERSIONS_V2,
    API_VERSIONS_V3,
    ApiVersionRange,
    ApiVersionsRequestV0,
    ApiVersionsRequestV1,
    ApiVersionsRequestV2,
    ApiVersionsRequestV3,
    ApiVersionsResponseV0,
    ApiVersionsResponseV1,
    ApiVersionsResponseV2,
    ApiVersionsResponseV3,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kiel.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
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
    FIND_COORDINATOR_V2,
    GROUP_COORDINATOR_V0,
    FindCoordinatorRequestV1,
    FindCoordinatorRequestV2,
    FindCoordinatorResponseV1,
    FindCoordinatorResponseV2,
    GroupCoordinatorRequest,
    GroupCoordinatorResponse,
)
from kiel.protocol.group_membership import (
    DESCRIBE_GROUPS_V2,
    DESCRIBE_GROUPS_V4,
    HEARTBEAT_V3,
    JOIN_GROUP_V5,
    LEAVE_GROUP_V3,
    LIST_GROUPS_V2,
    SYNC_GROUP_V3,
    DescribedGroup,
    DescribedGroupV4,
    DescribedMember,
    DescribedMemberV4,
    DescribeGroupsRequestV2,
    DescribeGroupsRequestV4,
    DescribeGroupsResponseV2,
    DescribeGroupsResponseV4,
    HeartbeatRequestV3,
    HeartbeatResponseV3,
    JoinGroupMember,
    JoinGroupProtocol,
    JoinGroupRequestV5,
    JoinGroupResponseV5,
    LeaveGroupMember,
    LeaveGroupMemberResponse,
    LeaveGroupRequestV3,
    LeaveGroupResponseV3,
    ListedGroup,
    ListGroupsRequestV2,
    ListGroupsResponseV2,
    SyncGroupAssignment,
    SyncGroupRequestV3,
    SyncGroupResponseV3,
)
from kiel.protocol.init_producer_id import (
    INIT_PRODUCER_ID,
    INIT_PRODUCER_ID_V2,
    INIT_PRODUCER_ID_V3,
    INIT_PRODUCER_ID_V4,
    INIT_PRODUCER_ID_V5,
    InitProducerIdRequestV2,
    InitProducerIdRequestV3,
    InitProducerIdRequestV4,
    InitProducerIdRequestV5,
    InitProducerIdResponseV2,
    InitProducerIdResponseV3,
    InitProducerIdResponseV4,
    InitProducerIdResponseV5,
)
from kiel.protocol.list_offsets import (
    EARLIEST,
    LATEST,
    LIST_OFFSETS_V0,
    LIST_OFFSETS_V1,
    LIST_OFFSETS_V2,
    ListOffsetsPartitionData,
    ListOffsetsPartitionDataV1,
    ListOffsetsPartitionResponse,
    ListOffsetsPartitionResponseV1,
    ListOffsetsRequest,
    ListOffsetsRequestV1,
    ListOffsetsRequestV2,
    ListOffsetsResponse,
    ListOffsetsResponseV1,
    ListOffsetsResponseV2,
    ListOffsetsTopicData,
    ListOffsetsTopicDataV1,
    ListOffsetsTopicResponse,
    ListOffsetsTopicResponseV1,
)
from kiel.protocol.metadata import (
    METADATA_V0,
    METADATA_V1,
    METADATA_V4,
    BrokerMetadata,
    BrokerMetadataV1,
    MetadataRequest,
    MetadataRequestV1,
    MetadataRequestV4,
    MetadataResponse,
    MetadataResponseV1,
    MetadataResponseV4,
    PartitionMetadata,
    TopicMetadata,
    TopicMetadataV1,
)
from kiel.protocol.offset_commit import (
    OFFSET_COMMIT_V0,
    OFFSET_COMMIT_V2,
    OFFSET_COMMIT_V7,
    OffsetCommitPartitionData,
    OffsetCommitPartitionDataV7,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitRequestV2,
    OffsetCommitRequestV7,
    OffsetCommitResponse,
    OffsetCommitResponseV2,
    OffsetCommitResponseV7,
    OffsetCommitTopicData,
    OffsetCommitTopicDataV7,
    OffsetCommitTopicResponse,
)
from kiel.protocol.offset_fetch import (
    OFFSET_FETCH_V0,
    OFFSET_FETCH_V1,
    OFFSET_FETCH_V5,
    OffsetFetchPartitionResponse,
    OffsetFetchPartitionResponseV5,
    OffsetFetchRequest,
    OffsetFetchRequestV1,
    OffsetFetchRequestV5,
    OffsetFetchResponse,
    OffsetFetchResponseV1,
    OffsetFetchResponseV5,
    OffsetFetchTopicData,
    OffsetFetchTopicResponse,
    OffsetFetchTopicResponseV5,
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
