"""Tiered storage's configuration (KIP-405, Kafka's names; common/config.py, the checks in
coord/metadata/config_control.py): the broker keys and their defaults, remote.log.storage.url,
the object store's rsm.config.* options (secrets never shown), and the checks across a
topic's keys, refused with INVALID_CONFIG at CreateTopics, AlterConfigs and
IncrementalAlterConfigs through real clients: remote storage needs the broker's
remote.log.storage.system.enable, local.retention.* within retention.*, turning remote
storage off needs remote.log.delete.on.disable (KIP-950). Compacted topics may be tiered."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from logbroker import Admin, Broker, NewTopic
from logbroker.client.errors import InvalidConfigError
from logbroker.common.config import (
    BROKER_KEYS,
    DYNAMIC_BROKER_KEYS,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigError,
    sensitive_key,
    validate_broker_config,
    validate_topic_config,
)
from logbroker.coord.metadata.config_control import ConfigurationControlManager
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.metadata import MetadataImage, PartitionState, TopicState
from logbroker.protocol import ErrorCode

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
DISABLE_WITHOUT_DELETE = "It is invalid to disable remote storage without deleting remote data"


def tiered(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.url": f"file://{tmp_path}/remote",
        **extra,
    }


# --------------------------------------------------------------- keys, defaults, start-up


def test_defaults_are_kafkas():
    c = BrokerConfig()
    expected = {
        "remote.log.storage.system.enable": False,
        "remote.log.storage.url": "",
        "remote.log.manager.task.interval.ms": 30000,
        "remote.log.reader.threads": 10,
        "remote.log.manager.copy.max.bytes.per.second": 2**63 - 1,
        "remote.log.manager.fetch.max.bytes.per.second": 2**63 - 1,
        "remote.fetch.max.wait.ms": 500,
        "remote.log.index.file.cache.total.size.bytes": 1073741824,
        "remote.log.chunk.cache.total.size.bytes": 268435456,
        "remote.log.chunk.size.bytes": 4194304,
        "log.local.retention.ms": -2,
        "log.local.retention.bytes": -2,
    }
    assert {k: c[k] for k in expected} == expected
    topic = c.topic_defaults()
    assert {k: topic[k] for k in TIERED_TOPIC_DEFAULTS} == TIERED_TOPIC_DEFAULTS
    assert {k: TOPIC_KEYS[k][1] for k in ("local.retention.ms", "local.retention.bytes")} == {
        "local.retention.ms": "log.local.retention.ms",
        "local.retention.bytes": "log.local.retention.bytes",
    }
    # the engine reads these (rust/src/config.rs LogConfig)
    assert {"remote.storage.enable", "local.retention.ms", "local.retention.bytes"} <= set(c.engine_config({}))
    assert "remote.log.copy.disable" not in c.engine_config({})
    # the broker-only keys are static; the topic keys' broker defaults dynamic
    assert "remote.log.storage.system.enable" not in DYNAMIC_BROKER_KEYS
    assert {"log.local.retention.ms", "remote.storage.enable"} <= DYNAMIC_BROKER_KEYS
    assert c.remote_storage_options() == {}


TIERED_TOPIC_DEFAULTS = {
    "remote.storage.enable": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
}


@pytest.mark.parametrize(
    "key, bad",
    [
        ("remote.log.manager.task.interval.ms", "0"),
        ("remote.log.reader.threads", "0"),
        ("remote.log.manager.copy.max.bytes.per.second", "0"),
        ("remote.log.manager.fetch.max.bytes.per.second", "0"),
        ("remote.fetch.max.wait.ms", "0"),
        ("remote.log.index.file.cache.total.size.bytes", "0"),
        ("remote.log.chunk.cache.total.size.bytes", "-1"),
        ("remote.log.chunk.size.bytes", "65535"),
        ("log.local.retention.ms", "-3"),
        ("log.local.retention.bytes", "-3"),
        ("remote.log.storage.system.enable", "maybe"),
    ],
)
def test_bounds(key, bad):
    with pytest.raises(ConfigError, match=f"{key}.*{bad}"):
        BrokerConfig({key: bad})


@pytest.mark.parametrize(
    "url, normalised",
    [
        ("s3://bucket/some/prefix/", "s3://bucket/some/prefix"),
        ("s3://bucket", "s3://bucket"),
        ("gs://bucket/p", "gs://bucket/p"),
        ("az://container/p", "az://container/p"),
        ("file:///var/lib/tiered/", "file:///var/lib/tiered"),
        ("", ""),
    ],
)
def test_storage_url(url, normalised):
    assert BrokerConfig({"remote.log.storage.url": url}).get_str("remote.log.storage.url") == normalised


@pytest.mark.parametrize(
    "url", ["http://bucket/p", "bucket/p", "s3://", "s3:///prefix", "file://relative/dir", "file://", "s3://b/a b"]
)
def test_bad_storage_url(url):
    with pytest.raises(ConfigError, match="remote.log.storage.url"):
        BrokerConfig({"remote.log.storage.url": url})


def test_system_enable_needs_a_url():
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"remote.log.storage.system.enable": "true"})
    assert "remote.log.storage.system.enable" in str(e.value) and "remote.log.storage.url" in str(e.value)
    BrokerConfig({"remote.log.storage.system.enable": "true", "remote.log.storage.url": "s3://b/p"})


def test_broker_defaults_of_the_topic_keys_are_checked_at_start(tmp_path):
    with pytest.raises(ConfigError, match="Tiered Storage functionality is disabled in the broker"):
        BrokerConfig({"remote.storage.enable": "true"})
    BrokerConfig(tiered(tmp_path, **{"remote.storage.enable": "true"}))
    with pytest.raises(ConfigError, match=r"log.local.retention.ms \(7200000\) must not be more than log.retention.ms"):
        BrokerConfig(tiered(tmp_path, **{"log.retention.ms": "3600000", "log.local.retention.ms": "7200000"}))
    with pytest.raises(
        ConfigError, match=r"log.local.retention.bytes \(-1\) must not be more than log.retention.bytes"
    ):
        BrokerConfig(tiered(tmp_path, **{"log.retention.bytes": "1000", "log.local.retention.bytes": "-1"}))
    # without tiered storage the broker's local retention keys are not read (Kafka's rule)
    BrokerConfig({"log.retention.ms": "3600000", "log.local.retention.ms": "7200000"})


def test_object_store_options_pass_through_without_the_prefix():
    c = BrokerConfig(
        {
            "rsm.config.aws_endpoint": "http://127.0.0.1:9000",
            "rsm.config.aws_region": "eu-west-1",
            "rsm.config.aws_access_key_id": "AKIAEXAMPLE",
            "rsm.config.aws_secret_access_key": SECRET,
            "rsm.config.aws_allow_http": "true",
        }
    )
    assert c.remote_storage_options() == {
        "aws_endpoint": "http://127.0.0.1:9000",
        "aws_region": "eu-west-1",
        "aws_access_key_id": "AKIAEXAMPLE",
        "aws_secret_access_key": SECRET,
        "aws_allow_http": "true",
    }
    with pytest.raises(ConfigError, match="static") as e:  # IncrementalAlterConfigs on a broker
        validate_broker_config({"rsm.config.aws_secret_access_key": SECRET})
    assert SECRET not in str(e.value)
    # the in-process Broker rebuilds its config from `explicit`: the options survive it
    assert BrokerConfig(dict(c.explicit)).remote_storage_options() == c.remote_storage_options()
    with pytest.raises(ConfigError, match="rsm.config."):
        BrokerConfig({"rsm.config.": "x"})


@pytest.mark.parametrize(
    "key, secret",
    [
        ("rsm.config.aws_secret_access_key", True),
        ("rsm.config.aws_session_token", True),
        ("rsm.config.azure_storage_account_key", True),
        ("rsm.config.azure_storage_sas_key", True),
        ("rsm.config.azure_client_secret", True),
        ("rsm.config.google_service_account_key", True),
        ("rsm.config.google_application_credentials", True),
        ("rsm.config.private_key_pem", True),
        ("rsm.config.some.password", True),
        ("rsm.config.aws_access_key_id", False),
        ("rsm.config.aws_sse_kms_key_id", False),
        ("rsm.config.aws_region", False),
        ("rsm.config.aws_endpoint", False),
        ("remote.log.storage.url", False),
        ("ssl.key.password", True),
    ],
)
def test_which_options_are_secrets(key, secret):
    assert sensitive_key(key) is secret


def test_an_unknown_key_that_looks_secret_is_not_echoed():
    with pytest.raises(ConfigError) as e:
        BrokerConfig({"rsm.confg.aws_secret_access_key": SECRET})  # a typo of the prefix
    assert "rsm.confg.aws_secret_access_key" in str(e.value) and SECRET not in str(e.value)
    with pytest.raises(ConfigError, match="'nope'"):
        BrokerConfig({"no.such.setting": "nope"})


# --------------------------------------------------------------- the checks across a topic's keys


@pytest.mark.parametrize(
    "configs, previous, error",
    [
        ({"remote.storage.enable": "true"}, None, None),
        # compacted topics may be tiered (Kafka refuses them)
        ({"remote.storage.enable": "true", "cleanup.policy": "compact"}, None, None),
        ({"remote.storage.enable": "true", "local.retention.ms": "1000", "retention.ms": "1000"}, None, None),
        ({"remote.storage.enable": "true", "local.retention.ms": "-2", "retention.ms": "1000"}, None, None),
        ({"remote.storage.enable": "true", "local.retention.ms": "-1", "retention.ms": "-1"}, None, None),
        ({"remote.storage.enable": "true", "local.retention.ms": "5000", "retention.ms": "-1"}, None, None),
        (
            {"remote.storage.enable": "true", "local.retention.ms": "1001", "retention.ms": "1000"},
            None,
            "local.retention.ms (1001) must not be more than retention.ms (1000)",
        ),
        (
            {"remote.storage.enable": "true", "local.retention.ms": "-1", "retention.ms": "1000"},
            None,
            "local.retention.ms (-1) must not be more than retention.ms (1000)",
        ),
        (
            {"remote.storage.enable": "true", "local.retention.bytes": "2000", "retention.bytes": "1000"},
            None,
            "local.retention.bytes (2000) must not be more than retention.bytes (1000)",
        ),
        # the broker default of retention.ms (7 days) bounds a topic without its own
        (
            {"remote.storage.enable": "true", "local.retention.ms": str(8 * 86400000)},
            None,
            "local.retention.ms (691200000) must not be more than retention.ms (604800000)",
        ),
        # without remote storage local retention is not read (Kafka's rule)
        ({"local.retention.ms": "1001", "retention.ms": "1000"}, None, None),
        # KIP-950
        ({"remote.storage.enable": "false"}, {"remote.storage.enable": "true"}, DISABLE_WITHOUT_DELETE),
        ({}, {"remote.storage.enable": "true"}, DISABLE_WITHOUT_DELETE),  # the override deleted
        (
            {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"},
            {"remote.storage.enable": "true"},
            None,
        ),
        (
            {"remote.storage.enable": "true", "remote.log.copy.disable": "true"},
            {"remote.storage.enable": "true"},
            None,
        ),
        ({"remote.storage.enable": "false"}, {"remote.storage.enable": "false"}, None),
        ({"remote.storage.enable": "false"}, None, None),
    ],
)
def test_checks_across_a_topics_keys(tmp_path, configs, previous, error):
    c = BrokerConfig(tiered(tmp_path))
    configs = validate_topic_config(configs)
    if error is None:
        c.check_topic_configs("t", configs, previous)
    else:
        with pytest.raises(ConfigError) as e:
            c.check_topic_configs("t", configs, previous)
        assert error in str(e.value)


def test_remote_storage_needs_the_broker_to_have_it():
    with pytest.raises(ConfigError) as e:
        BrokerConfig().check_topic_configs("t", {"remote.storage.enable": "true"})
    assert str(e.value) == (
        "Tiered Storage functionality is disabled in the broker. Topic t cannot be configured with remote log storage."
    )
    BrokerConfig().check_topic_configs("t", {"local.retention.ms": "5"})


def _image(topics: dict[str, dict[str, str]], broker_configs=None) -> MetadataImage:
    return MetadataImage(
        "c",
        1,
        {},
        {
            name: TopicState(name, uuid.uuid4(), {0: PartitionState(0, 1, 0, [1], [1])}, dict(configs))
            for name, configs in topics.items()
        },
        broker_configs=broker_configs or {},
    )


def test_a_broker_default_change_is_checked_against_the_topics_it_reaches(tmp_path):
    """The cluster default remote.storage.enable turned off under a topic that relies on it
    is KIP-950's refusal; a topic with its own override is not reached. Another broker's own
    configs are not this controller's to check."""
    manager = ConfigurationControlManager(BrokerConfig(tiered(tmp_path)))
    image = _image({"relies": {}, "own": {"remote.storage.enable": "true"}}, {"": {"remote.storage.enable": "true"}})
    with pytest.raises(ControllerError) as e:
        manager.alter_broker_configs(image, "", {"remote.storage.enable": None}, False)
    assert e.value.code == ErrorCode.INVALID_CONFIG
    assert "topic 'relies'" in e.value.message and DISABLE_WITHOUT_DELETE in e.value.message
    both = {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
    assert manager.alter_broker_configs(image, "", both, False).response == both
    # the default lowered under a tiered topic's local retention
    image = _image({"t": {"remote.storage.enable": "true", "local.retention.ms": "3600000"}})
    with pytest.raises(ControllerError, match=r"topic 't': local.retention.ms \(3600000\) must not be more"):
        manager.alter_broker_configs(image, "1", {"log.retention.ms": "60000"}, False)
    manager.alter_broker_configs(image, "2", {"log.retention.ms": "60000"}, False)  # broker 2's own
    manager.alter_broker_configs(image, "", {"min.insync.replicas": "2"}, False)  # reaches no tiered value
    # a broker default the broker's settings refuse
    disabled = ConfigurationControlManager(BrokerConfig())
    with pytest.raises(ControllerError, match="Tiered Storage functionality is disabled"):
        disabled.alter_broker_configs(_image({}), "", {"remote.storage.enable": "true"}, False)


# --------------------------------------------------------------- through real clients


def legacy_alter(ca: AdminClient, res: ConfigResource):
    """AlterConfigs, the request that replaces a topic's overrides (confluent-kafka still
    sends it, deprecated), for `res`: its future."""
    with pytest.warns(DeprecationWarning):
        return ca.alter_configs([res])[res]


def _confluent_error(fut) -> str:
    with pytest.raises(KafkaException) as e:
        fut.result(30)
    err = e.value.args[0]
    assert err.name() == "INVALID_CONFIG", err.str()
    return err.str()


def test_a_broker_without_tiered_storage_refuses_remote_topics(tmp_path):
    refused = (
        "Tiered Storage functionality is disabled in the broker. Topic {} cannot be configured with remote log storage."
    )
    with Broker(data_dir=tmp_path / "d") as b, Admin(b.bootstrap_servers) as admin:
        with pytest.raises(InvalidConfigError) as e:
            admin.create_topics([NewTopic("tiered", 1, 1, {"remote.storage.enable": "true"})])
        assert refused.format("tiered") in str(e.value)
        assert "tiered" not in admin.list_topics()
        admin.create_topics([NewTopic("plain", 1, 1)])
        with pytest.raises(InvalidConfigError) as e:
            admin.alter_configs({("topic", "plain"): {"remote.storage.enable": "true"}})
        assert refused.format("plain") in str(e.value)
        ca = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        res = ConfigResource(ResourceType.TOPIC, "plain", set_config={"remote.storage.enable": "true"})
        assert refused.format("plain") in _confluent_error(legacy_alter(ca, res))
        assert admin.describe_configs([("topic", "plain")])[("topic", "plain")]["remote.storage.enable"] == "false"


def test_tiered_topics_and_their_refusals(tmp_path):
    with Broker(data_dir=tmp_path / "d", config=tiered(tmp_path)) as b, Admin(b.bootstrap_servers) as admin:
        bs = b.bootstrap_servers
        ca = AdminClient({"bootstrap.servers": bs})
        # the defaults, as DescribeConfigs shows them
        admin.create_topics([NewTopic("plain", 1, 1)])
        described = admin.describe_configs([("topic", "plain")])[("topic", "plain")]
        assert {k: described[k] for k in TIERED_TOPIC_DEFAULTS} == TIERED_TOPIC_DEFAULTS

        # CreateTopics
        admin.create_topics(
            [
                NewTopic("tiered", 1, 1, {"remote.storage.enable": "true", "local.retention.ms": "60000"}),
                NewTopic("compacted", 1, 1, {"remote.storage.enable": "true", "cleanup.policy": "compact"}),
            ]
        )
        for configs, words in [
            ({"local.retention.ms": "7200000", "retention.ms": "3600000"}, ["7200000", "3600000"]),
            ({"local.retention.ms": "-1", "retention.ms": "3600000"}, ["local.retention.ms (-1)", "3600000"]),
            ({"local.retention.bytes": "2048", "retention.bytes": "1024"}, ["local.retention.bytes (2048)", "1024"]),
            ({"local.retention.ms": "-3"}, ["local.retention.ms", "-3"]),  # below the table's min
            ({"local.retention.bytes": "-3"}, ["local.retention.bytes", "-3"]),
        ]:
            with pytest.raises(InvalidConfigError) as e:
                admin.create_topics([NewTopic("bad", 1, 1, {"remote.storage.enable": "true", **configs})])
            assert all(w in str(e.value) for w in ["'bad'", *words]), str(e.value)
        assert "bad" not in admin.list_topics()

        # IncrementalAlterConfigs: retention.ms lowered under the local retention
        with pytest.raises(InvalidConfigError) as e:
            admin.alter_configs({("topic", "tiered"): {"retention.ms": "1000"}})
        assert "'tiered'" in str(
            e.value
        ) and "local.retention.ms (60000) must not be more than retention.ms (1000)" in str(e.value)
        # AlterConfigs (replaces every override): the same check
        res = ConfigResource(
            ResourceType.TOPIC,
            "tiered",
            set_config={"remote.storage.enable": "true", "local.retention.bytes": "10", "retention.bytes": "5"},
        )
        assert "local.retention.bytes (10) must not be more than retention.bytes (5)" in _confluent_error(
            legacy_alter(ca, res)
        )

        # KIP-950: turning remote storage off needs remote.log.delete.on.disable
        with pytest.raises(InvalidConfigError) as e:
            admin.alter_configs({("topic", "tiered"): {"remote.storage.enable": "false"}})
        assert DISABLE_WITHOUT_DELETE in str(e.value)
        with pytest.raises(InvalidConfigError, match=DISABLE_WITHOUT_DELETE):
            admin.alter_configs({("topic", "tiered"): {"remote.storage.enable": None}})  # back to the default
        res = ConfigResource(ResourceType.TOPIC, "tiered", set_config={"retention.ms": "86400000"})
        assert DISABLE_WITHOUT_DELETE in _confluent_error(legacy_alter(ca, res))  # AlterConfigs drops it
        fut = ca.incremental_alter_configs(
            [
                ConfigResource(
                    ResourceType.TOPIC,
                    "tiered",
                    incremental_configs=[
                        ConfigEntry("remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET)
                    ],
                )
            ]
        )
        assert DISABLE_WITHOUT_DELETE in _confluent_error(next(iter(fut.values())))
        described = admin.describe_configs([("topic", "tiered")])[("topic", "tiered")]
        assert described["remote.storage.enable"] == "true"

        # read-only remote data, then off with deletion
        admin.alter_configs({("topic", "tiered"): {"remote.log.copy.disable": "true"}})
        admin.alter_configs(
            {("topic", "tiered"): {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}}
        )
        described = admin.describe_configs([("topic", "tiered")])[("topic", "tiered")]
        assert described["remote.storage.enable"] == "false" and described["remote.log.delete.on.disable"] == "true"


def test_describe_configs_never_shows_the_object_stores_secrets(tmp_path):
    """rsm.config.* options are this broker's static configs; a secret one is described as
    Kafka describes a PASSWORD key: is_sensitive, no value (in its synonyms either)."""
    options = {
        "rsm.config.aws_access_key_id": "AKIAEXAMPLE",
        "rsm.config.aws_secret_access_key": SECRET,
        "rsm.config.aws_region": "eu-west-1",
    }
    with Broker(data_dir=tmp_path / "d", config=tiered(tmp_path, **options)) as b:
        assert b.server.config.remote_storage_options()["aws_secret_access_key"] == SECRET
        ca = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        res = ConfigResource(ResourceType.BROKER, str(b.server.node_id))
        entries = ca.describe_configs([res])[res].result(30)
        assert all(
            SECRET not in str(e.value) and all(SECRET not in str(s.value) for s in e.synonyms.values())
            for e in entries.values()
        )
        secret = entries["rsm.config.aws_secret_access_key"]
        assert (secret.value, secret.is_sensitive, secret.is_read_only) == (None, True, True)
        shown = entries["rsm.config.aws_access_key_id"]
        assert (shown.value, shown.is_sensitive) == ("AKIAEXAMPLE", False)
        assert entries["rsm.config.aws_region"].value == "eu-west-1"
        assert entries["remote.log.storage.system.enable"].value == "true"
        assert entries["remote.log.storage.url"].value == f"file://{tmp_path}/remote"
        assert not BROKER_KEYS["remote.log.storage.url"].sensitive
