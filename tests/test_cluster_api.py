"""`logbroker.Cluster(3)` and the `logbroker_cluster` pytest fixture: three real nodes in
subprocesses; every node agrees on brokers and controller; a stopped node leaves the others
serving and rejoins on start; the last nodes stopping together do not hang."""

from __future__ import annotations

import time

from logbroker import Admin, Cluster, NewTopic
from logbroker.client.connection import BrokerConnection
from logbroker.protocol import REQUESTS


def brokers_and_topics(node) -> tuple[list[int], set[str]]:
    with BrokerConnection(node.bootstrap_servers, timeout=5) as c:
        r = c.send(REQUESTS[3](topics=None, allow_auto_topic_creation=False))
    return sorted(b.node_id for b in r.brokers), {t.name for t in r.topics}


def test_cluster_of_three(tmp_path):
    with Cluster(3, data_dir=tmp_path, config={"broker.session.timeout.ms": 3000,
                                               "broker.heartbeat.interval.ms": 300}) as cluster:
        assert [brokers_and_topics(n)[0] for n in cluster.nodes] == [[1, 2, 3]] * 3
        controller = cluster.controller_id()
        assert controller in (1, 2, 3)
        with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("c", num_partitions=3, replication_factor=3)])
        deadline = time.monotonic() + 20
        while not all("c" in brokers_and_topics(n)[1] for n in cluster.nodes):
            assert time.monotonic() < deadline, "topic not on every node"
            time.sleep(0.1)
        other = next(n for n in cluster.nodes if n.node_id != controller)
        assert other.stop() == 0  # controlled shutdown: gone from Metadata at once
        assert brokers_and_topics(cluster.node(controller))[0] == sorted({1, 2, 3} - {other.node_id})
        other.start()
        cluster.wait_ready(30)
        assert "c" in brokers_and_topics(other)[1]
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 15  # stopping together does not wait out every timeout
    assert not any(n.is_running for n in cluster.nodes)


def test_logbroker_cluster_fixture(logbroker_cluster):
    assert len(logbroker_cluster.nodes) == 3
    assert all(brokers_and_topics(n)[0] == [1, 2, 3] for n in logbroker_cluster.nodes)
    assert logbroker_cluster.bootstrap_servers.count(",") == 2
