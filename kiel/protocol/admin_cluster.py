"""The cluster's identity: DescribeCluster v0 (60, flexible, Kafka 2.8+, KIP-700).

Schema only (see :meth:`kiel.admin.Admin.describe_cluster`). A broker that
does not serve it is asked Metadata instead, which carries the controller
id (v1+) but no cluster id before v2.

Wire grammar (Apache Kafka's message definitions; compact types, tagged
sections)::

    DescribeClusterRequest v0  => IncludeClusterAuthorizedOperations(bool)
    DescribeClusterResponse v0 => ThrottleTimeMs(int32) ErrorCode(int16)
                                  ErrorMessage(nullable string) ClusterId(string)
                                  ControllerId(int32) [Broker]
                                  AuthorizedOperations(int32)
      Broker                   => BrokerId(int32) Host(string) Port(int32)
                                  Rack(nullable string)
"""
from typing import Annotated, NamedTuple, Optional

from kiel.protocol.api import Api, flexible_versions, register
from kiel.protocol.primitives import Array, Boolean, Int16, Int32, NullableString, String

DESCRIBE_CLUSTER_KEY = 60
#: Kafka's ``"flexibleVersions": "0+"``.
flexible_versions(DESCRIBE_CLUSTER_KEY, 0)


class DescribeClusterRequestV0(NamedTuple):
    """DescribeCluster v0 request."""

    include_cluster_authorized_operations: Annotated[bool, Boolean]


class DescribeClusterBroker(NamedTuple):
    """One broker of the cluster."""

    broker_id: Annotated[int, Int32]
    host: Annotated[str, String]
    port: Annotated[int, Int32]
    rack: Annotated[Optional[str], NullableString]


class DescribeClusterResponseV0(NamedTuple):
    """DescribeCluster v0 response."""

    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    error_message: Annotated[Optional[str], NullableString]
    cluster_id: Annotated[str, String]
    controller_id: Annotated[int, Int32]
    brokers: Annotated[list[DescribeClusterBroker], Array(DescribeClusterBroker)]
    #: Kafka names it ClusterAuthorizedOperations; kiel, as kafka-python and
    #: DescribeGroups, authorized_operations.
    authorized_operations: Annotated[int, Int32]


DESCRIBE_CLUSTER_V0 = register(Api(
    DESCRIBE_CLUSTER_KEY, 0, "DescribeCluster", DescribeClusterRequestV0,
    DescribeClusterResponseV0))
