"""kiel.admin.Admin without a current broker: the nulls its requests carry
(byte for byte against kafka-python 3), the Results shape, what it refuses
before sending, and what a Kafka 0.8.2 broker (the embedded one) serves of
it: none of the admin APIs, each an UnsupportedFeatureError naming the API
and the broker; describe_cluster falls back to the metadata."""
from typing import Any

import pytest

from kiel.admin import (
    Admin,
    AlterConfigOp,
    ConfigResource,
    NewTopic,
    Results,
)
from kiel.exc import ConfigError, TopicAlreadyExistsError, UnsupportedFeatureError
from kiel.protocol import admin_configs as cf
from kiel.protocol import admin_topics as tp
from kiel.protocol.schema import encode
from kiel.structs import TopicPartition
from tests.conftest import run
from tests.support.admin_counterparts import ADMIN_FLEXIBLE

KP = {cls: (kp, version) for cls, kp, version in ADMIN_FLEXIBLE}


def _kp_bytes(value: Any, **fields: Any) -> bytes:
    kp, version = KP[type(value)]
    return bytes(kp(version=version, **fields).encode(header=False))


def test_null_arrays_kiel_sends_are_kafkas_nulls() -> None:
    # Every config of a resource: a null key list, not an empty one.
    request = cf.DescribeConfigsRequestV4(
        [cf.DescribeConfigsResource(cf.TOPIC, "t", None)], False, False)
    kp, _ = KP[cf.DescribeConfigsRequestV4]
    assert encode(request) == _kp_bytes(request, resources=[
        kp.DescribeConfigsResource(resource_type=2, resource_name="t",
                                   configuration_keys=None)],
        include_synonyms=False, include_documentation=False)
    # The broker places new partitions: a null assignment, not an empty one.
    grow = tp.CreatePartitionsRequestV2([tp.CreatePartitionsTopic("t", 4, None)], 1000, False)
    kp, _ = KP[tp.CreatePartitionsRequestV2]
    assert encode(grow) == _kp_bytes(grow, topics=[
        kp.CreatePartitionsTopic(name="t", count=4, assignments=None)],
        timeout_ms=1000, validate_only=False)


def test_results_split_errors_from_results() -> None:
    error = TopicAlreadyExistsError("exists", topic="a")
    results: Results[str, Any] = Results([("a", error), ("b", 3)])
    assert results.errors == {"a": error} and results.ok == {"b": 3}
    with pytest.raises(TopicAlreadyExistsError):
        results.raise_for_errors()
    Results([("b", 3)]).raise_for_errors()


@pytest.mark.parametrize("call", [
    lambda a: a.create_topics([NewTopic("t", 1, 1, {"segment.bytes": "1 GB"})]),
    lambda a: a.create_topics([NewTopic("t", 1, 1, {"cleanup.policy": True})]),
    lambda a: a.create_partitions({"t": 0}),
    lambda a: a.describe_configs([ConfigResource("group", "g")]),
    lambda a: a.describe_configs([ConfigResource("broker", "one")]),
    lambda a: a.incremental_alter_configs({ConfigResource("topic", "t"): {
        "cleanup.policy": AlterConfigOp("replace", "x")}}),
    lambda a: a.incremental_alter_configs({ConfigResource("topic", "t"): {
        "retention.ms": "-"}}),
    lambda a: a.delete_records({TopicPartition("t", 0): -2}),
    lambda a: a.delete_records({("t", -1): 0}),
    lambda a: a.list_offsets({TopicPartition("t", 0): "newest"}),
    lambda a: a.list_offsets({TopicPartition("t", 0): -5}),
    lambda a: a.alter_group_offsets("g", {TopicPartition("t", 0): -1}),
    lambda a: a.delete_groups([""]),
], ids=["segment.bytes", "bool value", "0 partitions", "group resource", "broker name",
        "bad op", "retention.ms", "offset -2", "partition -1", "spec", "negative time",
        "negative offset", "empty group"])
def test_bad_input_is_a_config_error_before_anything_is_sent(call: Any) -> None:
    # Nothing listens on port 1: a request would fail to connect, not with ConfigError.
    admin = Admin("127.0.0.1:1", retries=0)

    async def main() -> None:
        with pytest.raises(ConfigError):
            await call(admin)
        await admin.close()

    run(main())


def test_a_0_8_broker_serves_none_of_the_admin_apis(kafka_cluster: Any) -> None:
    async def main() -> None:
        async with Admin(kafka_cluster.bootstrap) as admin:
            calls = {
                "CreateTopics": admin.create_topics([NewTopic("t", 1, 1)]),
                "DeleteTopics": admin.delete_topics(["t"]),
                "CreatePartitions": admin.create_partitions({"t": 2}),
                "DescribeConfigs": admin.describe_configs([ConfigResource("topic", "t")]),
                "IncrementalAlterConfigs": admin.incremental_alter_configs(
                    {ConfigResource("topic", "t"): {"retention.ms": "1"}}),
            }
            for api, call in calls.items():
                with pytest.raises(UnsupportedFeatureError, match=api) as info:
                    await call
                assert info.value.broker_id is not None
            cluster = await admin.describe_cluster()
            assert cluster.cluster_id is None and cluster.controller is None
            assert len(cluster.brokers) == 3

    run(main())
