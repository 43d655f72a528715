"""Dynamic broker configs (IncrementalAlterConfigs on BROKER resources): the cluster default
and a broker's own, kept in the metadata log and applied without a restart; static keys
refused saying where to set them; Kafka's kafka-configs --entity-type brokers."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, ConfigSource, NewTopic, ResourceType
from conftest import kafka_configs, needs_java

from logbroker import Admin, Broker, KafkaError


def alter(bs: str, name: str, **changes: str | None) -> None:
    """IncrementalAlterConfigs of broker `name` ("" the cluster default) with logbroker's
    Admin (confluent-kafka refuses a broker resource without a name)."""
    with Admin(bs) as admin:
        admin.alter_configs({("broker", name): {k.replace("_", "."): v for k, v in changes.items()}})


def produce_all(bs: str, topic: str) -> str | None:
    """An acks=all produce: None when acknowledged, else the error's name."""
    p = Producer({"bootstrap.servers": bs, "acks": "all", "message.timeout.ms": 5000, "retries": 0})
    out: list = []
    p.produce(topic, b"x", on_delivery=lambda err, _m: out.append(err))
    p.flush(10)
    return None if out[0] is None else out[0].name()


def topic_config(admin: AdminClient, topic: str, key: str) -> ConfigEntry:
    res = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([res])[res].result(timeout=30)[key]


def test_cluster_default_and_broker_configs_apply_at_once_and_persist(tmp_path):
    data = tmp_path / "d"
    with Broker(data_dir=data) as b:
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
        assert produce_all(bs, "t") is None

        alter(bs, "", min_insync_replicas="2")
        # one replica: acks=all still succeeds under Kafka's effective min ISR, min(2, replicas)
        assert produce_all(bs, "t") is None
        entry = topic_config(admin, "t", "min.insync.replicas")
        assert (entry.value, entry.source) == ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

        alter(bs, "1", min_insync_replicas="1")  # this broker's own beats the cluster default
        assert produce_all(bs, "t") is None
        entry = topic_config(admin, "t", "min.insync.replicas")
        assert (entry.value, entry.source) == ("1", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        res = ConfigResource(ResourceType.BROKER, "1")
        described = admin.describe_configs([res])[res].result(timeout=30)
        assert described["min.insync.replicas"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert not described["min.insync.replicas"].is_read_only and described["num.partitions"].is_read_only

        alter(bs, "", log_retention_ms="3600000")
        assert topic_config(admin, "t", "retention.ms").value == "3600000"
        assert b.server.config.get_int("log.retention.ms") == 3600000

        for bad, why in [
            ({"num_partitions": "3"}, "static"),
            ({"log_retention_ms": "soon"}, "log.retention.ms"),
            ({"no_such_key": "1"}, "unknown"),
        ]:
            with pytest.raises(KafkaError) as e:
                alter(bs, "", **bad)
            assert e.value.code == 40 and why in str(e.value), e.value  # INVALID_CONFIG
        with pytest.raises(KafkaError) as e:
            alter(bs, "not-a-broker", min_insync_replicas="1")
        assert e.value.code == 42, e.value  # INVALID_REQUEST

    with Broker(data_dir=data) as b:  # the metadata log keeps them
        assert b.server.config.get_int("min.insync.replicas") == 1
        assert b.server.config.get_int("log.retention.ms") == 3600000
        bs = b.bootstrap_servers
        alter(bs, "1", min_insync_replicas=None)
        assert b.server.config.get_int("min.insync.replicas") == 2  # the cluster default's 2 again
        assert topic_config(AdminClient({"bootstrap.servers": bs}), "t", "min.insync.replicas").value == "2"
        alter(bs, "", min_insync_replicas=None)
        assert b.server.config.get_int("min.insync.replicas") == 1
        assert produce_all(b.bootstrap_servers, "t") is None
        assert b.server.controller.image.broker_configs == {"": {"log.retention.ms": "3600000"}}


@needs_java
def test_kafka_configs_entity_default(tmp_path):
    from benches.peers.kafka import install

    tools = install()
    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        kafka_configs(
            tools,
            bs,
            "--alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "log.segment.bytes=1048576",
        )
        out = kafka_configs(tools, bs, "--describe", "--entity-type", "brokers", "--entity-default")
        assert "log.segment.bytes=1048576" in out, out
        out = kafka_configs(tools, bs, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all")
        assert "log.segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" in out, out
        kafka_configs(
            tools, bs, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config", "log.segment.bytes"
        )
        assert b.server.controller.image.broker_configs == {}
