"""The client's exception hierarchy and configuration checks."""

from __future__ import annotations

import pytest

from logbroker.client import config, errors
from logbroker.protocol import ErrorCode


def test_every_error_code_has_a_named_class():
    for code in ErrorCode:
        if code == ErrorCode.NONE:
            continue
        cls = errors.error_class(code)
        assert issubclass(cls, errors.BrokerResponseError) and cls.code == code
        assert cls.__name__.endswith("Error")
    assert errors.error_class(ErrorCode.NOT_LEADER_OR_FOLLOWER) is errors.NotLeaderOrFollowerError
    assert errors.error_class(9999) is errors.BrokerResponseError


def test_retriable_marks_follow_kafka():
    assert errors.NotLeaderOrFollowerError.retriable
    assert errors.error_class(ErrorCode.NOT_ENOUGH_REPLICAS).retriable
    assert not errors.error_class(ErrorCode.TOPIC_AUTHORIZATION_FAILED).retriable
    assert not errors.OutOfOrderSequenceNumberError.retriable
    assert errors.KafkaTimeoutError.retriable and issubclass(errors.KafkaTimeoutError, TimeoutError)
    assert errors.KafkaConnectionError.retriable


def test_error_for_names_the_context():
    e = errors.error_for(6, "moved", "produce to t-0")
    assert isinstance(e, errors.NotLeaderOrFollowerError)
    assert str(e) == "produce to t-0: NOT_LEADER_OR_FOLLOWER (6): moved"


def test_config_keys_and_coercion():
    c = config.build(config.PRODUCER, {"linger_ms": "7", "enable.idempotence": "false", "acks": "all"})
    assert (c["linger.ms"], c["enable.idempotence"], c["acks"]) == (7, False, -1)
    assert config.build(config.CONSUMER, {"partition_assignment_strategy": "RoundRobinAssignor"})[
        "partition.assignment.strategy"
    ] == ["roundrobin"]
    with pytest.raises(errors.ConfigError, match="did you mean 'linger.ms'"):
        config.build(config.PRODUCER, {"linger": 1})
    with pytest.raises(errors.ConfigError):
        config.build(config.CONSUMER, {"auto_offset_reset": "middle"})
    with pytest.raises(errors.ConfigError):
        config.build(config.PRODUCER, {"batch_size": "big"})
    assert config.parse_servers("a:1, b:2") == [("a", 1), ("b", 2)]
    with pytest.raises(errors.ConfigError):
        config.parse_servers("nohost")
