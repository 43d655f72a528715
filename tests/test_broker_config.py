"""Broker configuration keys added for the cluster (logbroker.common.config): advertised
listeners in Kafka's list form (the CONTROLLER entry is what the voters list must name),
replica.selector.class, and unclean.leader.election.enable as a broker and topic key. Bad
values are refused with a ConfigError naming the key and value."""

from __future__ import annotations

import pytest

from logbroker.common.config import RACK_AWARE_SELECTOR, BrokerConfig, ConfigError, validate_topic_config

CLUSTER = [
    "node.id=1",
    "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9095",
    "listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
]


def test_advertised_listeners_list_form():
    c = BrokerConfig.load(sets=CLUSTER + ["advertised.listeners=PLAINTEXT://10.0.0.1:9092,CONTROLLER://127.0.0.1:9093"])
    assert c.advertised_client == ("10.0.0.1", 9092)
    assert c.advertised_controller == ("127.0.0.1", 9093)
    c.check_quorum()  # the voters name the advertised controller port, not the bound one
    plain = BrokerConfig.load(sets=["advertised.listeners=example.com:9000"])
    assert (plain.advertised_client, plain.advertised_controller) == (("example.com", 9000), None)
    assert BrokerConfig.load().advertised_client is None


def test_advertised_controller_must_match_the_voters():
    c = BrokerConfig.load(
        sets=CLUSTER + ["advertised.listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:7777"]
    )
    with pytest.raises(ConfigError, match="7777"):
        c.check_quorum()
    bound = BrokerConfig.load(sets=CLUSTER)  # no advertised entry: the bound port must match
    with pytest.raises(ConfigError, match="19093"):
        bound.check_quorum()


@pytest.mark.parametrize("value", ["PLAINTEXT://nohostport", "PLAINTEXT://h:99999", "A://h:1,A://h:2"])
def test_bad_advertised_listeners_are_refused(value):
    with pytest.raises(ConfigError):
        BrokerConfig.load(sets=[f"advertised.listeners={value}"])


def test_replica_selector_and_unclean_election_keys():
    assert BrokerConfig.load().get_str("replica.selector.class") == ""
    assert (
        BrokerConfig.load(sets=[f"replica.selector.class={RACK_AWARE_SELECTOR}"]).get_str("replica.selector.class")
        == RACK_AWARE_SELECTOR
    )
    with pytest.raises(ConfigError, match="com.example.Mine"):
        BrokerConfig.load(sets=["replica.selector.class=com.example.Mine"])
    assert BrokerConfig.load().get_bool("unclean.leader.election.enable") is False
    assert BrokerConfig.load().topic_defaults()["unclean.leader.election.enable"] == "false"
    assert validate_topic_config({"unclean.leader.election.enable": "TRUE"}) == {
        "unclean.leader.election.enable": "true"
    }
    with pytest.raises(ConfigError, match="unclean.leader.election.enable"):
        validate_topic_config({"unclean.leader.election.enable": "maybe"})
