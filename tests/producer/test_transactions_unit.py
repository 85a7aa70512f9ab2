"""The transactional producer's pure parts: the classic (v2) transaction
messages byte for byte against kafka-python 3 (the flexible v3 ones are
judged in tests/protocol/test_flexible.py), the settings check, and which error
code an answer stands for."""
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kiel.exc import ConfigError
from kiel.producer.transactions import _first_error, check_transactional
from kiel.protocol.schema import decode, encode, struct_type
from tests.support.protocol_strategies import for_struct
from tests.support.txn_counterparts import TXN_CLASSIC, TXN_NESTED, TXN_SAMPLES, from_kp

KP = {cls: (kp, version) for cls, kp, version in TXN_CLASSIC}


def to_kp(value: Any) -> Any:
    kp, version = KP[type(value)]
    return kp(version=version, **_fields(value, kp))


def _fields(value: Any, kp: Any) -> dict:
    from kiel.protocol.primitives import Array
    from kiel.protocol.schema import StructType

    out = {}
    for (name, wtype), item in zip(struct_type(type(value)).fields, value):
        if isinstance(wtype, Array) and isinstance(wtype.item, StructType):
            nested = getattr(kp, TXN_NESTED[wtype.item.cls])
            item = [nested(**_fields(x, nested)) for x in item]
        out[name] = item
    return out


def _check(value: Any) -> None:
    kp, version = KP[type(value)]
    kp_bytes = bytes(to_kp(value).encode(header=False))
    assert encode(value) == kp_bytes
    assert decode(type(value), kp_bytes) == (value, len(kp_bytes))
    assert from_kp(kp.decode(kp_bytes, version=version, header=False), type(value)) == value


@pytest.mark.parametrize("value", [v for v in TXN_SAMPLES if type(v) in KP],
                         ids=lambda v: type(v).__name__)
def test_classic_bodies_equal_kafka_python(value: Any) -> None:
    _check(value)


def test_every_classic_message_has_a_sample() -> None:
    assert {type(v) for v in TXN_SAMPLES if type(v) in KP} == set(KP)


@pytest.mark.parametrize("cls", list(KP), ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_classic_bodies_equal_kafka_python(cls: type, data: Any) -> None:
    _check(data.draw(for_struct(cls)))


def test_check_transactional() -> None:
    assert check_transactional(None, 60, None, 1, None) == (None, 60.0)
    assert check_transactional("t", 0.001, None, -1, 5) == (True, 0.001)
    assert check_transactional("t", 900, True, -1, None) == (True, 900.0)
    for args in (("", 60, None, -1, None), (b"t", 60, None, -1, None),
                 ("t", 60, False, -1, None), ("t", 60, None, 0, None),
                 ("t", 60, None, -1, 6), ("t", 0, None, -1, None),
                 ("t", 900.5, None, -1, None), ("t", float("nan"), None, -1, None),
                 ("t", True, None, -1, None), (None, -1, None, -1, None)):
        with pytest.raises(ConfigError):
            check_transactional(*args)


def test_the_error_an_answer_stands_for() -> None:
    assert _first_error([]) == 0
    assert _first_error([0, 0]) == 0
    # OPERATION_NOT_ATTEMPTED only says another partition failed.
    assert _first_error([55, 0, 90, 55]) == 90
    assert _first_error([55, 55]) == 55
