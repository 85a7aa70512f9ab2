"""Every client option is checked at construction: NaN, infinity, a wrong type
and a bool where a number belongs are each a :class:`~kiel.exc.ConfigError`
naming the option, never accepted to fail later (a produce future pending
for ever, a raw ValueError in the fetcher) nor a TypeError from inside.

Pure construction, no broker: building a client opens nothing.
"""
import math
import re

import pytest

from kiel.clients import GroupedConsumer, Producer, SingleConsumer
from kiel.exc import ConfigError

NAN, INF = math.nan, math.inf


def producer(**options):
    return Producer("127.0.0.1:1", **options)


def single(**options):
    return SingleConsumer("127.0.0.1:1", **options)


def broker_group(**options):
    return GroupedConsumer("127.0.0.1:1", "g", topics=["t"], **options)


def zk_group(**options):
    return GroupedConsumer("127.0.0.1:1", "g", zk_hosts="127.0.0.1:2181", topics=["t"], **options)


#: The connection settings every client passes on to Cluster.
CLIENT_OPTIONS = [
    ("connect_timeout", [NAN, INF, True, "10", 0]),
    ("request_timeout", [NAN, INF, True, "30", -1]),
    ("metadata_max_age", [NAN, INF, False, "300"]),
    ("retry_backoff", [NAN, INF, True, "0.1", 0]),
    ("max_backoff", [NAN, INF, True, "5", 0.01]),  # 0.01: below retry_backoff
    ("retries", ["3", 2.5, True, NAN, -1]),
    ("max_in_flight", ["64", 2.5, True, NAN, 0]),
    ("max_frame_size", ["1048576", 2.5e6, True, NAN]),
    ("max_metadata_brokers", ["1", 2.5, True]),
    ("max_metadata_partitions", ["1", 2.5, True]),
    ("client_id", [123, b"kiel", True]),
]

PRODUCER_OPTIONS = [
    ("linger", [NAN, INF, True, "0.005", -1]),
    ("linger_ms", [NAN, INF, True, "5"]),
    ("ack_timeout", [NAN, INF, True, "1"]),
    ("buffer_timeout", [NAN, INF, True, "1", -1]),
    ("batch_size", [NAN, 2.5, True, "16384", 0]),
    ("max_request_size", [NAN, 2.5, True, "1"]),
    ("max_message_size", [NAN, 2.5, True, "1"]),
    ("max_pending_bytes", [NAN, 2.5, True, "1"]),
    ("required_acks", [NAN, True, "1", 2]),
    ("gzip_level", [NAN, 2.5, True, "6", 0, 10]),
    ("compression", [1, True]),
    ("partitioner", [1, "murmur2"]),
    ("key_maker", [1]),
    ("serializer", ["json"]),
    ("key_serializer", [b"x"]),
]

CONSUMER_OPTIONS = [
    ("max_wait_time", [NAN, INF, True, "1", -1]),
    ("min_bytes", [NAN, 2.5, True, "1", -1]),
    ("max_bytes", [NAN, 2.5, True, "1", 0]),
    ("max_fetch_size", [NAN, 2.5, True, "1"]),
    ("offset_reset", [1, True, ["earliest"], "smallest"]),
    ("decode_budget", [NAN, INF, True, "0.001", -1]),
    ("max_records", [NAN, 2.5, True, "100", 0]),
    ("max_decoded", [NAN, 2.5, True, "1"]),
    ("max_prefetch_bytes", [NAN, 2.5, True, "1"]),
    ("deserializer", [1, "json"]),
    ("key_deserializer", [1]),
]

#: What both coordinators' members take.
GROUP_OPTIONS = [
    ("commit_interval", [NAN, INF, True, "5", -1]),
    ("commit_every", [NAN, 2.5, True, "100", 0]),
    ("commit_metadata", [1, b"meta", None]),
    ("revoke_timeout", [NAN, INF, True, "30", -1]),
    ("listener_timeout", [NAN, INF, True, "30", -1]),
    ("auto_finish", ["yes", 1, None]),
    ("capacity", [NAN, INF, True, "big", 0]),
    ("join_timeout", [NAN, INF, True, "60", -1]),
    ("leave_timeout", [NAN, INF, True, "10", -1]),
    # None of on_partitions_revoked/assigned/lost: it would never be called.
    ("listener", [1, "on_partitions_assigned", lambda tps: None, object()]),
]

BROKER_GROUP_OPTIONS = [
    ("session_timeout", [NAN, INF, True, "10"]),
    ("heartbeat_interval", [NAN, INF, True, "3"]),
    ("max_poll_interval", [NAN, INF, True, "300"]),
    ("group_instance_id", [1, b"id", ""]),
]

ZK_GROUP_OPTIONS = [
    ("zk_session_timeout", [NAN, INF, True, "10"]),
    ("zk_max_retry_delay", [NAN, INF, True, "5"]),
    ("zk_connect_timeout", [NAN, INF, True, "15"]),
    ("acquire_timeout", [NAN, INF, True, "30"]),
    ("zk_chroot", [1, b"/kiel", "kiel"]),
    ("partitions_from", [1, ["auto"], "brokers"]),
    ("member_id", [1, b"m", ""]),
    ("zk_auth", [1, b"u:p"]),
]


def _label(value):
    # A function's or a plain object's repr holds its address, which differs
    # between processes: pytest-xdist's workers must collect the same ids.
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text


def _cases(makers, table):
    return [
        pytest.param(make, name, value, id=f"{make.__name__}-{name}={_label(value)}")
        for make in makers
        for name, values in table
        for value in values
    ]


@pytest.mark.parametrize("make,name,value", (
    _cases([producer, single, broker_group, zk_group], CLIENT_OPTIONS)
    + _cases([producer], PRODUCER_OPTIONS)
    + _cases([single, broker_group, zk_group], CONSUMER_OPTIONS)
    + _cases([broker_group, zk_group], GROUP_OPTIONS)
    + _cases([broker_group], BROKER_GROUP_OPTIONS)
    + _cases([zk_group], ZK_GROUP_OPTIONS)
))
def test_a_bad_option_is_a_config_error_naming_it(make, name, value):
    options = {name: value}
    if name == "linger_ms":
        options["linger"] = None
    with pytest.raises(ConfigError, match=re.escape(name)):
        if name == "gzip_level":
            make(compression="gzip", **options)
        else:
            make(**options)


@pytest.mark.parametrize("make", [producer, single, broker_group, zk_group])
def test_the_defaults_and_ordinary_values_are_accepted(make):
    make()
    make(request_timeout=2, retries=0, retry_backoff=0.5, max_backoff=0.5, client_id="x")


def test_ordinary_values_of_every_kind_are_accepted():
    producer(linger=0, ack_timeout=0, buffer_timeout=0, batch_size=1, gzip_level=9,
             compression="gzip", required_acks=0, max_pending_bytes=2**40)
    single(max_wait_time=0, min_bytes=0, decode_budget=0, max_records=1)
    broker_group(commit_interval=None, commit_every=1, capacity=0.5, auto_finish=False,
                 revoke_timeout=0, listener_timeout=0, commit_metadata="")
    zk_group(commit_interval=0, zk_session_timeout=0.5, zk_chroot="/kiel", member_id="m1",
             capacity=3)


@pytest.mark.parametrize("group", [None, 123, b"g", "", "a/b"])
@pytest.mark.parametrize("make", [
    lambda group: GroupedConsumer("127.0.0.1:1", group, topics=["t"]),
    lambda group: GroupedConsumer("127.0.0.1:1", group, zk_hosts="127.0.0.1:2181", topics=["t"]),
])
def test_a_bad_group_name_is_a_config_error(make, group):
    with pytest.raises(ConfigError, match="group"):
        make(group)


def test_a_listener_with_some_of_the_callbacks_is_accepted():
    class OnlyAssigned:
        def on_partitions_assigned(self, tps):
            pass

    broker_group(listener=OnlyAssigned())
    zk_group(listener=None)


@pytest.mark.parametrize("brokers", [None, 123, b"127.0.0.1:9092", [None], ["h:1", 2],
                                     {"h": 1}, "", []])
@pytest.mark.parametrize("make", [Producer, SingleConsumer])
def test_a_wrong_brokers_argument_is_a_config_error(make, brokers):
    # Producer(None) was a TypeError from list(None); bytes listed ints.
    with pytest.raises(ConfigError, match="broker"):
        make(brokers)


def test_a_nan_linger_is_refused_rather_than_leaving_futures_pending():
    # linger=nan made every batch wait "nan seconds": never sent.
    with pytest.raises(ConfigError, match="linger must be seconds >= 0, got nan"):
        producer(linger=NAN)


def test_the_helpers_say_what_the_option_must_be():
    from kiel._options import flag, integer, optional, real, text

    with pytest.raises(ConfigError, match=r"^x must be seconds > 0, got True$"):
        real("x", True, above=0)
    with pytest.raises(ConfigError, match=r"^x must be seconds in \[0, 60\], got 61$"):
        real("x", 61, at_least=0, most=60)
    with pytest.raises(ConfigError, match=r"^n must be an int >= 1, got '3'$"):
        integer("n", "3", at_least=1)
    with pytest.raises(ConfigError, match=r"^s must be a non-empty str, got ''$"):
        text("s", "")
    with pytest.raises(ConfigError, match=r"^f must be True or False, got 1$"):
        flag("f", 1)
    with pytest.raises(ConfigError, match="x must be seconds >= 0"):
        real("x", 10**400, at_least=0)  # float() of it overflows
    assert real("x", 2, at_least=0) == 2 and isinstance(real("x", 2, at_least=0), float)
    assert optional(integer, "n", None, at_least=1) is None
    assert optional(integer, "n", 5, at_least=1) == 5
    assert text("s", "", empty=True) == ""


# --------------------------------------------------------------------------
# The call itself: other clients' names, and arguments given by position


@pytest.mark.parametrize("make,expected", [
    # aiokafka's commonest names, where kiel's required arguments go: a bare
    # TypeError ("missing 1 required positional argument") before.
    (lambda: Producer(bootstrap_servers="h:1"),
     ["no option 'bootstrap_servers': kiel's spelling is the first argument, brokers"]),
    (lambda: SingleConsumer(bootstrap_servers="h:1", value_deserializer=bytes),
     ["the first argument, brokers", "no option 'value_deserializer': kiel's spelling is "
      "deserializer"]),
    (lambda: GroupedConsumer(bootstrap_servers="h:1", group_id="g", topics=["t"]),
     ["no option 'bootstrap_servers': kiel's spelling is the first argument, brokers",
      "no option 'group_id': kiel's spelling is the second argument, group"]),
    (lambda: GroupedConsumer("h:1", group_id="g", topics=["t"], auto_offset_reset="earliest"),
     ["the second argument, group", "'auto_offset_reset': kiel's spelling is offset_reset"]),
    # confluent-kafka's dotted names, and what kiel takes instead.
    (lambda: SingleConsumer("h:1", **{"client.id": "c", "sasl.username": "u"}),
     ["'client.id': kiel's spelling is client_id", "'sasl.username': kiel's spelling is "
      "sasl_username"]),
    (lambda: Producer("h:1", **{"bootstrap.servers": "h:1", "compression.type": "gzip"}),
     ["the first argument, brokers", "'compression.type': kiel's spelling is compression"]),
    (lambda: GroupedConsumer("h:1", "g", topics=["t"], **{"session.timeout.ms": 6000}),
     ["'session.timeout.ms': kiel's spelling is session_timeout, in seconds"]),
    # A name kiel has no counterpart of says what to do instead.
    (lambda: Producer("h:1", group_id="g"), ["a Producer belongs to no group", "drop it"]),
    (lambda: SingleConsumer("h:1", check_crcs=True), ["kiel always checks CRCs"]),
    (lambda: Producer("h:1", enable_idempotence=True), ["not idempotent"]),
    (lambda: Producer("h:1", ssl_cafile="ca.pem"), ["ssl_context"]),
])
def test_another_clients_option_names_kiels_spelling_before_the_call_is_bound(make, expected):
    with pytest.raises(ConfigError) as raised:
        make()
    for text in expected:
        assert text in str(raised.value)


def test_a_list_in_third_place_is_refused_naming_topics_and_zk_hosts():
    # It was taken as zk_hosts (the ZooKeeper coordinator chosen by a list of
    # topics): "give either topics or pattern", or with topics= given, a
    # complaint about ZooKeeper hosts.
    from kiel.exc import ArgumentError

    with pytest.raises(ArgumentError) as raised:
        GroupedConsumer("h:1", "g", ["svc"])
    message = str(raised.value)
    assert "GroupedConsumer takes 2 positional arguments (brokers, group)" in message
    assert "topics=['svc']" in message and "zk_hosts=" in message
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, ConfigError)
    with pytest.raises(ArgumentError, match=re.escape("topics=['svc']")):
        GroupedConsumer("h:1", "g", ["svc"], topics=["svc"])


@pytest.mark.parametrize("third,spelled", [
    ("zk1:2181,zk2:2181/kiel", "zk_hosts='zk1:2181,zk2:2181/kiel'"),
    (["zk1:2181", "zk2:2181"], "zk_hosts='zk1:2181,zk2:2181'"),  # kiel 0.9's list
])
def test_kiel_09s_third_argument_is_refused_naming_zk_hosts(third, spelled):
    from kiel.exc import ArgumentError

    with pytest.raises(ArgumentError, match=re.escape(spelled)):
        GroupedConsumer("h:1", "g", third, topics=["t"])
    GroupedConsumer("h:1", "g", zk_hosts="zk1:2181", topics=["t"])  # named: taken


def test_only_brokers_and_group_are_positional_in_the_signature():
    import inspect

    params = inspect.signature(GroupedConsumer).parameters.values()
    assert [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD] == ["brokers", "group"]
    assert [p.name for p in inspect.signature(Producer).parameters.values()
            if p.kind is p.POSITIONAL_OR_KEYWORD] == ["brokers"]


def test_an_option_by_position_says_to_name_it():
    from kiel.exc import ArgumentError

    with pytest.raises(ArgumentError, match=r"Producer takes 1 positional argument \(brokers\)"):
        Producer("h:1", bytes)
    with pytest.raises(ArgumentError, match="SingleConsumer takes 1 positional argument"):
        SingleConsumer("h:1", bytes)


def test_the_cluster_and_the_admin_functions_name_kiels_spelling_too():
    import asyncio

    from kiel import admin
    from kiel.cluster import Cluster

    with pytest.raises(ConfigError, match="kiel's spelling is the first argument, brokers"):
        Cluster(bootstrap_servers="h:1")
    with pytest.raises(ConfigError, match="'request_timeout_ms': kiel's spelling is "
                                          "request_timeout, in seconds"):
        asyncio.run(admin.describe_topics("h:1", request_timeout_ms=100))
    with pytest.raises(ConfigError, match="kiel's spelling is the third argument, group"):
        asyncio.run(admin.describe_group("h:1", "z:2181", group_id="g"))
