"""InitProducerId v2 to v5 (api key 22, Kafka 2.4+): a producer id and epoch.

An idempotent or transactional producer asks for its producer id and epoch
once, then numbers every batch per partition so the broker can drop a
duplicate sent again after a lost answer. kiel speaks only the flexible
versions: Tansu serves InitProducerId only from v3 (see docs), and every
broker that serves v0 or v1 also serves v2 (Kafka 2.4+).

Wire grammar (Apache Kafka's message definitions; every version flexible)::

    InitProducerIdRequest v2     => TransactionalId(compact nullable string)
                                    TransactionTimeoutMs(int32) TaggedFields
    InitProducerIdRequest v3-v5  => v2's fields, then ProducerId(int64)
                                    ProducerEpoch(int16), then TaggedFields
    InitProducerIdResponse v2-v5 => ThrottleTimeMs(int32) ErrorCode(int16)
                                    ProducerId(int64) ProducerEpoch(int16)
                                    TaggedFields

v3 adds the current producer id and epoch, so a producer can bump its epoch
after an error instead of taking a new id (KIP-360); -1 and -1 ask for a new
id. v4 lets the broker answer PRODUCER_FENCED (KIP-588), v5
TRANSACTION_ABORTABLE (KIP-890); their layouts are v3's.
"""
from typing import Annotated, NamedTuple, Optional

from kiel.exc import ConfigError, UnsupportedFeatureError
from kiel.protocol.api import Api, flexible_versions, register
from kiel.protocol.primitives import Int16, Int32, Int64, NullableString

API_KEY = 22
#: Kafka's ``"flexibleVersions": "2+"``.
flexible_versions(API_KEY, 2)

#: The producer id and epoch that ask for a new id (v3+).
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class InitProducerIdRequestV2(NamedTuple):
    """InitProducerId v2 request: ``transactional_id`` ``None`` for an idempotent producer."""

    transactional_id: Annotated[Optional[str], NullableString]
    transaction_timeout_ms: Annotated[int, Int32]


class InitProducerIdRequestV3(NamedTuple):
    """InitProducerId v3 request: v2 plus the current id and epoch (-1, -1 for a new id)."""

    transactional_id: Annotated[Optional[str], NullableString]
    transaction_timeout_ms: Annotated[int, Int32]
    producer_id: Annotated[int, Int64] = NO_PRODUCER_ID
    producer_epoch: Annotated[int, Int16] = NO_PRODUCER_EPOCH


class InitProducerIdRequestV4(InitProducerIdRequestV3):
    """InitProducerId v4 request (the v3 layout; its own class for the registry)."""

    __slots__ = ()


class InitProducerIdRequestV5(InitProducerIdRequestV3):
    """InitProducerId v5 request (the v3 layout; its own class for the registry)."""

    __slots__ = ()


class InitProducerIdResponseV2(NamedTuple):
    """InitProducerId response (v2 to v5): the producer id and epoch, or an error."""

    throttle_time_ms: Annotated[int, Int32]
    error_code: Annotated[int, Int16]
    producer_id: Annotated[int, Int64]
    producer_epoch: Annotated[int, Int16]


class InitProducerIdResponseV3(InitProducerIdResponseV2):
    """InitProducerId v3 response (the v2 layout; its own class for the registry)."""

    __slots__ = ()


class InitProducerIdResponseV4(InitProducerIdResponseV2):
    """InitProducerId v4 response (the v2 layout; its own class for the registry)."""

    __slots__ = ()


class InitProducerIdResponseV5(InitProducerIdResponseV2):
    """InitProducerId v5 response (the v2 layout; its own class for the registry)."""

    __slots__ = ()


INIT_PRODUCER_ID_V2 = register(Api(
    API_KEY, 2, "InitProducerId", InitProducerIdRequestV2, InitProducerIdResponseV2))
INIT_PRODUCER_ID_V3 = register(Api(
    API_KEY, 3, "InitProducerId", InitProducerIdRequestV3, InitProducerIdResponseV3))
INIT_PRODUCER_ID_V4 = register(Api(
    API_KEY, 4, "InitProducerId", InitProducerIdRequestV4, InitProducerIdResponseV4))
INIT_PRODUCER_ID_V5 = register(Api(
    API_KEY, 5, "InitProducerId", InitProducerIdRequestV5, InitProducerIdResponseV5))

#: The registered InitProducerId versions, by version.
INIT_PRODUCER_ID: dict[int, Api] = {api.version: api for api in (
    INIT_PRODUCER_ID_V2, INIT_PRODUCER_ID_V3, INIT_PRODUCER_ID_V4, INIT_PRODUCER_ID_V5)}


def init_producer_id_request(
    version: int,
    transactional_id: Optional[str] = None,
    transaction_timeout_ms: int = 60000,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
) -> InitProducerIdRequestV2 | InitProducerIdRequestV3:
    """The InitProducerId request of ``version``.

    Args:
        version: 2 to 5 (as negotiated).
        transactional_id: ``None`` for an idempotent producer.
        transaction_timeout_ms: only meaningful with a transactional id.
        producer_id, producer_epoch: the current ones, to bump the epoch
            (v3+, KIP-360); -1 and -1 ask for a new id.

    Returns:
        an instance of the request struct registered for that version.

    Raises:
        UnsupportedFeatureError: ``version`` 2 with a current producer id
            (only v3+ can carry it).
        ConfigError: kiel does not speak ``version``.
    """
    api = INIT_PRODUCER_ID.get(version) if type(version) is int else None
    if api is None:
        raise ConfigError(
            f"InitProducerId version {version!r} is not one of {sorted(INIT_PRODUCER_ID)}")
    if version == 2:
        if (producer_id, producer_epoch) != (NO_PRODUCER_ID, NO_PRODUCER_EPOCH):
            raise UnsupportedFeatureError(
                "InitProducerId v2 cannot bump an epoch (KIP-360 needs v3)",
                api="InitProducerId")
        return api.request(transactional_id, transaction_timeout_ms)
    return api.request(transactional_id, transaction_timeout_ms, producer_id, producer_epoch)
