"""logbroker.Admin against our broker: topics, partitions, configs, groups, offsets, cluster."""

from __future__ import annotations

import pytest

import logbroker
from logbroker.client import errors


def test_topics_partitions_and_configs(broker):
    with logbroker.Admin(broker.bootstrap_servers) as a:
        a.create_topics([logbroker.NewTopic("a1", 2, config={"retention.ms": "60000"}), "a2"])
        with pytest.raises(errors.TopicAlreadyExistsError, match="a1"):
            a.create_topics(["a1"])
        a.create_topics([logbroker.NewTopic("dry", 1)], validate_only=True)
        assert {"a1", "a2"} <= set(a.list_topics()) and "dry" not in a.list_topics()
        d = a.describe_topics(["a1"])["a1"]
        assert [p.partition for p in d.partitions] == [0, 1] and not d.internal
        assert d.partitions[0].leader >= 0 and d.partitions[0].replicas
        a.create_partitions({"a1": 4})
        assert len(a.describe_topics(["a1"])["a1"].partitions) == 4
        with pytest.raises(errors.InvalidPartitionsError):
            a.create_partitions({"a1": 2})
        cfg = a.describe_configs([("topic", "a1")])[("topic", "a1")]
        assert cfg["retention.ms"] == "60000"
        a.alter_configs({("topic", "a1"): {"retention.ms": "120000", "cleanup.policy": "compact"}})
        cfg = a.describe_configs([("topic", "a1")])[("topic", "a1")]
        assert (cfg["retention.ms"], cfg["cleanup.policy"]) == ("120000", "compact")
        a.alter_configs({("topic", "a1"): {"retention.ms": None}})
        assert a.describe_configs([("topic", "a1")])[("topic", "a1")]["retention.ms"] != "120000"
        a.delete_topics(["a2"])
        assert "a2" not in a.list_topics()
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            a.delete_topics(["a2"])


def test_offsets_groups_and_cluster(broker):
    with logbroker.Producer(broker.bootstrap_servers) as p:
        for i in range(5):
            p.send("ofs", b"v", timestamp=1000 + i)
    with logbroker.Consumer(broker.bootstrap_servers, group_id="adm-g", auto_offset_reset="earliest") as c:
        c.assign([("ofs", 0)])
        c.commit({("ofs", 0): 3})
    with logbroker.Admin(broker.bootstrap_servers) as a:
        got = a.list_offsets({("ofs", 0): "earliest"})
        assert got[logbroker.TopicPartition("ofs", 0)][0] == 0
        assert a.list_offsets({("ofs", 0): "latest"})[("ofs", 0)][0] == 5
        assert a.list_offsets({("ofs", 0): 1002})[("ofs", 0)] == (2, 1002)
        assert ("adm-g", "consumer", "Empty") in a.list_groups() or any(g[0] == "adm-g" for g in a.list_groups())
        desc = a.describe_groups(["adm-g"])["adm-g"]
        assert desc.members == [] and desc.group_id == "adm-g"
        a.delete_groups(["adm-g"])
        assert all(g[0] != "adm-g" for g in a.list_groups())
        with pytest.raises(errors.BrokerResponseError):
            a.delete_groups(["adm-g"])
        cluster = a.describe_cluster()
        assert cluster.brokers and cluster.controller_id == cluster.brokers[0].node_id
    a.close()
    with pytest.raises(errors.ClientClosedError):
        a.list_topics()


def test_describe_a_live_group(broker):
    with logbroker.Admin(broker.bootstrap_servers) as a:
        a.create_topics(["live-t"])
    with logbroker.Consumer(broker.bootstrap_servers, group_id="live", heartbeat_interval_ms=100) as c:
        c.subscribe(["live-t"])
        import time

        deadline = time.monotonic() + 20
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.1)
        with logbroker.Admin(broker.bootstrap_servers) as a:
            d = a.describe_groups(["live"])["live"]
            assert d.state == "Stable" and d.protocol in ("range", "roundrobin")
            assert d.members[0].assignment == [logbroker.TopicPartition("live-t", 0)]
