"""IncrementalAlterConfigs APPEND and SUBTRACT (AlterConfigOp.OpType 2 and 3) on list
configs, as Kafka: `cleanup.policy` on a topic, `log.cleanup.policy` on a broker resource.
APPEND adds the values not there yet (to the override, else to the key's default), SUBTRACT
removes them; the result is validated like a SET; a key that is not a list is refused with
INVALID_CONFIG in Kafka's words; validate_only changes nothing. After APPEND compact the
topic is compacted: a keyless record is refused with INVALID_RECORD."""

from __future__ import annotations

import sys
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from conftest import kafka_configs, needs_java
from rawclient import RawClient

from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

Incremental, Describe = REQUESTS[44], REQUESTS[32]
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def incremental(
    c: RawClient, rtype: int, name: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False
):
    req = Incremental(
        resources=[
            Incremental.AlterConfigsResource(
                resource_type=rtype,
                resource_name=name,
                configs=[Incremental.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops],
            )
        ],
        validate_only=validate_only,
    )
    return c.request(44, 1, req).responses[0]


def described(c: RawClient, rtype: int, name: str, key: str) -> str | None:
    r = c.request(
        32,
        4,
        Describe(
            resources=[
                Describe.DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=[key])
            ],
            include_synonyms=False,
            include_documentation=False,
        ),
    ).results[0]
    assert r.error_code == 0, r.error_message
    return {e.name: e.value for e in r.configs}.get(key)


def alter(admin: AdminClient, topic: str, op: AlterConfigOpType, value: str, validate_only: bool = False):
    res = ConfigResource(
        "topic", topic, incremental_configs=[ConfigEntry("cleanup.policy", value, incremental_operation=op)]
    )
    return next(iter(admin.incremental_alter_configs([res], validate_only=validate_only).values())).result(30)


def policy(admin: AdminClient, topic: str) -> set[str]:
    res = ConfigResource("topic", topic)
    configs = next(iter(admin.describe_configs([res]).values())).result(30)
    return set(configs["cleanup.policy"].value.split(","))


def keyless_produce_error(bs: str, topic: str):
    errors = []
    p = Producer({"bootstrap.servers": bs, "message.timeout.ms": 10000, "retries": 0})
    p.produce(topic, value=b"no key", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)  # a batch of its own: a keyless record fails its whole batch
    p.produce(topic, key=b"k", value=b"keyed", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    return errors


def test_append_and_subtract_cleanup_policy_with_confluent_admin(broker):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("lp", 1, 1)])["lp"].result(30)
    assert keyless_produce_error(bs, "lp") == [None, None], "a delete topic takes keyless records"

    alter(admin, "lp", AlterConfigOpType.APPEND, "compact", validate_only=True)
    assert policy(admin, "lp") == {"delete"}, "validate_only changes nothing"

    alter(admin, "lp", AlterConfigOpType.APPEND, "compact")  # from the default, delete
    assert policy(admin, "lp") == {"compact", "delete"}
    errors = keyless_produce_error(bs, "lp")
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD, errors
    assert errors[1] is None, errors

    alter(admin, "lp", AlterConfigOpType.APPEND, "compact,delete")  # nothing new: unchanged
    assert policy(admin, "lp") == {"compact", "delete"}
    alter(admin, "lp", AlterConfigOpType.SUBTRACT, "delete")
    assert policy(admin, "lp") == {"compact"}
    alter(admin, "lp", AlterConfigOpType.SUBTRACT, "delete")  # not there: unchanged
    assert policy(admin, "lp") == {"compact"}

    for op, value in ((AlterConfigOpType.APPEND, "bogus"), (AlterConfigOpType.SUBTRACT, "compact")):
        try:
            alter(admin, "lp", op, value)
        except KafkaException as e:
            assert e.args[0].code() == KafkaError.INVALID_CONFIG, e
        else:
            raise AssertionError(f"{op} {value} was accepted")
    assert policy(admin, "lp") == {"compact"}

    alter(admin, "lp", AlterConfigOpType.APPEND, "delete")
    alter(admin, "lp", AlterConfigOpType.SUBTRACT, "compact")
    assert policy(admin, "lp") == {"delete"}
    assert keyless_produce_error(bs, "lp") == [None, None], "delete again: keyless records are taken"


def test_list_operations_raw(broker):
    node = str(broker.server.node_id)
    with RawClient(broker.bootstrap_servers) as c:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("raw", 1, 1)])["raw"].result(30)

        # not a list: Kafka's controller's words for a topic, its ConfigAdminManager's for a broker
        r = incremental(c, TOPIC, "raw", [("retention.ms", APPEND, "5")])
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_CONFIG,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        )
        r = incremental(c, TOPIC, "raw", [("retention.ms", SUBTRACT, "5")])
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_CONFIG,
            "Can't SUBTRACT to key retention.ms because its type is not LIST.",
        )
        r = incremental(c, BROKER, node, [("log.retention.ms", APPEND, "5")])
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_CONFIG,
            "Config value append is not allowed for config key: log.retention.ms",
        )
        r = incremental(c, BROKER, "", [("log.retention.ms", SUBTRACT, "5")])
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_CONFIG,
            "Config value subtract is not allowed for config key: log.retention.ms",
        )
        assert described(c, TOPIC, "raw", "retention.ms") == "604800000"

        # a request's checks (Kafka's ConfigAdminManager.preprocess)
        r = incremental(c, TOPIC, "raw", [("cleanup.policy", APPEND, "compact"), ("cleanup.policy", SET, "delete")])
        assert (r.error_code, r.error_message) == (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        r = incremental(c, TOPIC, "raw", [("cleanup.policy", APPEND, None)])
        assert (r.error_code, r.error_message) == (
            ErrorCode.INVALID_REQUEST,
            "Null value not supported for : cleanup.policy",
        )
        r = incremental(c, TOPIC, "nope", [("cleanup.policy", APPEND, "compact")])
        assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        # with other changes in the same resource, all or nothing
        r = incremental(c, TOPIC, "raw", [("cleanup.policy", APPEND, "compact"), ("retention.ms", SET, "x")])
        assert r.error_code == ErrorCode.INVALID_CONFIG
        assert described(c, TOPIC, "raw", "cleanup.policy") == "delete"
        r = incremental(c, TOPIC, "raw", [("cleanup.policy", APPEND, "compact"), ("retention.ms", SET, "60000")])
        assert r.error_code == 0, r.error_message
        assert set(described(c, TOPIC, "raw", "cleanup.policy").split(",")) == {"compact", "delete"}
        assert described(c, TOPIC, "raw", "retention.ms") == "60000"
        r = incremental(c, TOPIC, "raw", [("cleanup.policy", SUBTRACT, "compact")], validate_only=True)
        assert r.error_code == 0
        assert set(described(c, TOPIC, "raw", "cleanup.policy").split(",")) == {"compact", "delete"}

        # a broker's list key: the cluster default and one broker's dynamic config
        r = incremental(c, BROKER, "", [("log.cleanup.policy", APPEND, "compact")])
        assert r.error_code == 0, r.error_message
        assert set(broker.server.controller.image.broker_configs[""]["log.cleanup.policy"].split(",")) == {
            "compact",
            "delete",
        }
        # a broker's own config starts from the key's default too, not from the cluster default
        r = incremental(c, BROKER, node, [("log.cleanup.policy", SUBTRACT, "delete")])
        assert r.error_code == ErrorCode.INVALID_CONFIG, "delete minus delete: empty"
        r = incremental(c, BROKER, node, [("log.cleanup.policy", APPEND, "compact")])
        assert r.error_code == 0, r.error_message
        r = incremental(c, BROKER, node, [("log.cleanup.policy", SUBTRACT, "delete")])
        assert r.error_code == 0, r.error_message
        assert described(c, BROKER, node, "log.cleanup.policy") == "compact"
        r = incremental(c, BROKER, node, [("log.cleanup.policy", APPEND, "nope")])
        assert r.error_code == ErrorCode.INVALID_CONFIG
        assert described(c, BROKER, node, "log.cleanup.policy") == "compact"


@needs_java
def test_kafka_configs_tool_sets_a_list(broker):
    from benches.peers.kafka import install

    tools = install()
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("kc", 1, 1)])["kc"].result(30)
    # Kafka 4.4's kafka-configs has no append/subtract options: --add-config sets a list in brackets
    kafka_configs(
        tools,
        bs,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "kc",
        "--add-config",
        "cleanup.policy=[delete,compact]",
    )
    out = kafka_configs(tools, bs, "--describe", "--entity-type", "topics", "--entity-name", "kc")
    assert "cleanup.policy=compact,delete" in out, out
    errors = keyless_produce_error(bs, "kc")
    assert errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD, errors


def test_append_through_a_broker_that_forwards(tmp_path):
    """In a cluster APPEND/SUBTRACT reach the active controller as they were sent (it works
    out the value from the override it holds), from whichever broker took them."""
    from conftest import wait_until

    from logbroker import Cluster

    with Cluster(3, data_dir=tmp_path / "c") as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("fw", 1, 3)])["fw"].result(60)
        for i in (1, 2, 3):
            with RawClient(cluster.node(i).bootstrap_servers) as c:
                r = incremental(
                    c,
                    TOPIC,
                    "fw",
                    [
                        (
                            "cleanup.policy",
                            APPEND if i != 2 else SUBTRACT,
                            "compact" if i == 1 else "delete" if i == 2 else "delete",
                        )
                    ],
                )
                assert r.error_code == 0, (i, r.error_message)
                r = incremental(c, TOPIC, "fw", [("retention.ms", APPEND, "1")])
                assert (r.error_code, r.error_message) == (
                    ErrorCode.INVALID_CONFIG,
                    "Can't APPEND to key retention.ms because its type is not LIST.",
                )
        for i in (1, 2, 3):  # delete,compact; then compact; then compact,delete
            with RawClient(cluster.node(i).bootstrap_servers) as c:
                wait_until(
                    lambda c=c: set(described(c, TOPIC, "fw", "cleanup.policy").split(",")) == {"compact", "delete"},
                    what=f"node {i} sees compact,delete",
                )
