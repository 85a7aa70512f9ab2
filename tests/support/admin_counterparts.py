"""The admin client's messages and their judges: kafka-python 3's classes
generated from Kafka's JSON definitions (tests/protocol/test_flexible.py compares
every flexible one byte for byte, both ways; tests/admin/test_admin_protocol.py
the classic OffsetDelete v0 and what the flexible ones mean)."""
from typing import Any

from kafka.protocol.admin.cluster import DescribeClusterRequest as KpDescribeClusterRequest
from kafka.protocol.admin.cluster import DescribeClusterResponse as KpDescribeClusterResponse
from kafka.protocol.admin.configs import DescribeConfigsRequest as KpDescribeConfigsRequest
from kafka.protocol.admin.configs import DescribeConfigsResponse as KpDescribeConfigsResponse
from kafka.protocol.admin.configs import (
    IncrementalAlterConfigsRequest as KpIncrementalAlterConfigsRequest,
)
from kafka.protocol.admin.configs import (
    IncrementalAlterConfigsResponse as KpIncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import DeleteGroupsRequest as KpDeleteGroupsRequest
from kafka.protocol.admin.groups import DeleteGroupsResponse as KpDeleteGroupsResponse
from kafka.protocol.admin.topics import CreatePartitionsRequest as KpCreatePartitionsRequest
from kafka.protocol.admin.topics import CreatePartitionsResponse as KpCreatePartitionsResponse
from kafka.protocol.admin.topics import CreateTopicsRequest as KpCreateTopicsRequest
from kafka.protocol.admin.topics import CreateTopicsResponse as KpCreateTopicsResponse
from kafka.protocol.admin.topics import DeleteRecordsRequest as KpDeleteRecordsRequest
from kafka.protocol.admin.topics import DeleteRecordsResponse as KpDeleteRecordsResponse
from kafka.protocol.admin.topics import DeleteTopicsRequest as KpDeleteTopicsRequest
from kafka.protocol.admin.topics import DeleteTopicsResponse as KpDeleteTopicsResponse
from kafka.protocol.consumer.group import OffsetDeleteRequest as KpOffsetDeleteRequest
from kafka.protocol.consumer.group import OffsetDeleteResponse as KpOffsetDeleteResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest as KpListOffsetsRequest
from kafka.protocol.consumer.offsets import ListOffsetsResponse as KpListOffsetsResponse

from kiel.protocol import admin_cluster as cl
from kiel.protocol import admin_configs as cf
from kiel.protocol import admin_groups as gr
from kiel.protocol import admin_records as rc
from kiel.protocol import admin_topics as tp

#: kiel's flexible admin messages -> (kafka-python's class, version).
ADMIN_FLEXIBLE = [
    (tp.CreateTopicsRequestV5, KpCreateTopicsRequest, 5),
    (tp.CreateTopicsResponseV5, KpCreateTopicsResponse, 5),
    (tp.DeleteTopicsRequestV5, KpDeleteTopicsRequest, 5),
    (tp.DeleteTopicsResponseV5, KpDeleteTopicsResponse, 5),
    (tp.CreatePartitionsRequestV2, KpCreatePartitionsRequest, 2),
    (tp.CreatePartitionsResponseV2, KpCreatePartitionsResponse, 2),
    (cf.DescribeConfigsRequestV4, KpDescribeConfigsRequest, 4),
    (cf.DescribeConfigsResponseV4, KpDescribeConfigsResponse, 4),
    (cf.IncrementalAlterConfigsRequestV1, KpIncrementalAlterConfigsRequest, 1),
    (cf.IncrementalAlterConfigsResponseV1, KpIncrementalAlterConfigsResponse, 1),
    (rc.DeleteRecordsRequestV2, KpDeleteRecordsRequest, 2),
    (rc.DeleteRecordsResponseV2, KpDeleteRecordsResponse, 2),
    (rc.ListOffsetsRequestV7, KpListOffsetsRequest, 7),
    (rc.ListOffsetsResponseV7, KpListOffsetsResponse, 7),
    (cl.DescribeClusterRequestV0, KpDescribeClusterRequest, 0),
    (cl.DescribeClusterResponseV0, KpDescribeClusterResponse, 0),
    (gr.DeleteGroupsRequestV2, KpDeleteGroupsRequest, 2),
    (gr.DeleteGroupsResponseV2, KpDeleteGroupsResponse, 2),
]
#: The classic ones (OffsetDelete v0: never flexible).
ADMIN_CLASSIC = [
    (gr.OffsetDeleteRequest, KpOffsetDeleteRequest, 0),
    (gr.OffsetDeleteResponse, KpOffsetDeleteResponse, 0),
]

#: kiel's nested structs -> kafka-python's nested class names (their
#: Kafka definitions' names; kiel names them the same).
ADMIN_NESTED = {cls: cls.__name__ for module in (tp, cf, rc, cl, gr)
                for cls in vars(module).values()
                if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")
                and cls.__module__ == module.__name__}

_TOPIC_CONFIGS = [tp.CreatableTopicConfigs("retention.ms", "604800000", False, 5, False),
                  tp.CreatableTopicConfigs("secret", None, True, 4, True)]
_CONFIG = cf.DescribeConfigsResourceResult(
    "retention.ms", "1000", False, 1, False,
    [cf.DescribeConfigsSynonym("retention.ms", "1000", 1),
     cf.DescribeConfigsSynonym("log.retention.ms", None, 5)], 5, "How long \u00e9")

#: Sample values of every admin message (tests/protocol/test_flexible.py adds the
#: flexible ones to its own; random ones come from their declarations).
#: No null arrays here: kiel decodes one as ``[]`` (tests/admin/test_admin_protocol.py
#: checks the nulls kiel sends: every config, the broker's assignment).
ADMIN_SAMPLES: list[Any] = [
    tp.CreateTopicsRequestV5(
        [tp.CreatableTopic("t", 3, -1, [], [tp.CreatableTopicConfig("retention.ms", "1000"),
                                             tp.CreatableTopicConfig("x", None)]),
         tp.CreatableTopic("u", -1, 2, [tp.CreatableReplicaAssignment(0, [1, 2])], [])],
        60000, True),
    tp.CreateTopicsResponseV5(0, [tp.CreatableTopicResult("t", 0, None, 3, 1, _TOPIC_CONFIGS),
                                  tp.CreatableTopicResult("u", 36, "exists", -1, -1, [], 40)]),
    tp.DeleteTopicsRequestV5(["a", "\u00e9"], 30000),
    tp.DeleteTopicsResponseV5(5, [tp.DeletableTopicResult("a", 0, None),
                                  tp.DeletableTopicResult("b", 3, "unknown")]),
    tp.CreatePartitionsRequestV2([tp.CreatePartitionsTopic(
                                      "t", 4, [tp.CreatePartitionsAssignment([3])]),
                                  tp.CreatePartitionsTopic(
                                      "u", 3, [tp.CreatePartitionsAssignment([1, 2])])],
                                 30000, False),
    tp.CreatePartitionsResponseV2(0, [tp.CreatePartitionsTopicResult("t", 37, "fewer")]),
    cf.DescribeConfigsRequestV4([cf.DescribeConfigsResource(cf.TOPIC, "t", ["retention.ms"]),
                                 cf.DescribeConfigsResource(cf.BROKER, "1", ["a", "b"])],
                                True, False),
    cf.DescribeConfigsResponseV4(0, [cf.DescribeConfigsResult(0, None, cf.TOPIC, "t", [_CONFIG]),
                                     cf.DescribeConfigsResult(3, "no", cf.TOPIC, "x", [])]),
    cf.IncrementalAlterConfigsRequestV1(
        [cf.AlterConfigsResource(cf.TOPIC, "t", [cf.AlterableConfig("retention.ms", cf.SET, "1"),
                                                 cf.AlterableConfig("x", cf.DELETE, None)])],
        False),
    cf.IncrementalAlterConfigsResponseV1(0, [cf.AlterConfigsResourceResponse(40, "bad", 2, "t")]),
    rc.DeleteRecordsRequestV2([rc.DeleteRecordsTopic("t", [rc.DeleteRecordsPartition(0, 5),
                                                           rc.DeleteRecordsPartition(1, -1)])],
                              30000),
    rc.DeleteRecordsResponseV2(0, [rc.DeleteRecordsTopicResult(
        "t", [rc.DeleteRecordsPartitionResult(0, 5, 0)])]),
    rc.ListOffsetsRequestV7(-1, 0, [rc.ListOffsetsTopic("t", [
        rc.ListOffsetsPartition(0, -1, rc.MAX_TIMESTAMP), rc.ListOffsetsPartition(1, 3, 1000)])]),
    rc.ListOffsetsResponseV7(0, [rc.ListOffsetsTopicResponse("t", [
        rc.ListOffsetsPartitionResponse(0, 0, 1000, 42, 0)])]),
    cl.DescribeClusterRequestV0(False),
    cl.DescribeClusterResponseV0(0, 0, None, "kiel-cluster", 1,
                                 [cl.DescribeClusterBroker(1, "127.0.0.1", 9092, None),
                                  cl.DescribeClusterBroker(2, "h", 9093, "rack-a")],
                                 -2147483648),
    gr.DeleteGroupsRequestV2(["g", "h"]),
    gr.DeleteGroupsResponseV2(0, [gr.DeletableGroupResult("g", 68)]),
    gr.OffsetDeleteRequest("g", [gr.OffsetDeleteRequestTopic(
        "t", [gr.OffsetDeleteRequestPartition(0)])]),
    gr.OffsetDeleteResponse(0, 0, [gr.OffsetDeleteResponseTopic(
        "t", [gr.OffsetDeleteResponsePartition(0, 86)])]),
]
