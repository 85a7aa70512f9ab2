"""kafka-python 3's generated classes that judge kiel's flexible messages."""

from kafka.protocol.metadata.api_versions import ApiVersionsRequest as KpApiVersionsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest as KpInitProducerIdRequest
from kafka.protocol.producer.transaction import InitProducerIdResponse as KpInitProducerIdResponse

from kiel.protocol import (
    ApiVersionsRequestV3,
    ApiVersionsResponseV3,
    InitProducerIdRequestV2,
    InitProducerIdRequestV3,
    InitProducerIdRequestV4,
    InitProducerIdRequestV5,
    InitProducerIdResponseV2,
    InitProducerIdResponseV3,
    InitProducerIdResponseV4,
    InitProducerIdResponseV5,
)
from tests.support.admin_counterparts import ADMIN_FLEXIBLE
from tests.support.txn_counterparts import TXN_FLEXIBLE

#: kiel class -> (kafka-python's generated class, version): the judges of
#: every flexible message (tests/protocol/test_flexible.py and
#: tests/protocol/test_protocol_conformance.py).
FLEXIBLE_COUNTERPARTS = [
    (ApiVersionsRequestV3, KpApiVersionsRequest, 3),
    (ApiVersionsResponseV3, KpApiVersionsResponse, 3),
    (InitProducerIdRequestV2, KpInitProducerIdRequest, 2),
    (InitProducerIdRequestV3, KpInitProducerIdRequest, 3),
    (InitProducerIdRequestV4, KpInitProducerIdRequest, 4),
    (InitProducerIdRequestV5, KpInitProducerIdRequest, 5),
    (InitProducerIdResponseV2, KpInitProducerIdResponse, 2),
    (InitProducerIdResponseV3, KpInitProducerIdResponse, 3),
    (InitProducerIdResponseV4, KpInitProducerIdResponse, 4),
    (InitProducerIdResponseV5, KpInitProducerIdResponse, 5),
]


FLEXIBLE_COUNTERPARTS += ADMIN_FLEXIBLE  # the admin client's (tests/support/admin_counterparts.py)
FLEXIBLE_COUNTERPARTS += TXN_FLEXIBLE  # the transactional producer's (support/txn_counterparts.py)

