"""Transactions in a three-node cluster: the coordinator's state and the markers are
replicated, so kill -9 of the broker coordinating a transactional id in the middle of a
transaction loses nothing: the new coordinator (the new leader of its __transaction_state
partition) finishes what was prepared, the producer commits the open transaction there,
and read_committed consumers see exactly the committed records."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import wait_until
from replication_helpers import FAST, create, full_isr, layout

from logbroker import Cluster
from logbroker.coord.groups.transaction_log import TRANSACTION_STATE_TOPIC, partition_for

CONFIG = {
    **FAST,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 5,
    "offsets.topic.replication.factor": 3,
    "min.insync.replicas": 2,
}


def read_committed(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60.0) -> list[bytes]:
    """Every record a read_committed consumer sees: until `expected` arrived (markers are written
    after commit_transaction returns, so a partition's last stable offset may move a little
    later, more so right after a failover) and then one more second, or `timeout`."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "rc",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m.value())
                if len(out) >= expected:
                    deadline = min(deadline, time.monotonic() + 1.0)  # anything beyond is an anomaly
    finally:
        c.close()
    return out


def test_killing_the_transaction_coordinator_mid_transaction_loses_nothing(tmp_path):
    with Cluster(3, data_dir=tmp_path, config=CONFIG) as cluster:
        create(cluster.nodes[0], "ct", 3, 3)
        full_isr(cluster, "ct", 3)
        bootstrap = cluster.bootstrap_servers
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": "ct-tx",
                "linger.ms": 5,
                "transaction.timeout.ms": 60000,
            }
        )
        p.init_transactions(60)
        full_isr(cluster, TRANSACTION_STATE_TOPIC, 5)
        p.begin_transaction()
        for i in range(30):
            p.produce("ct", value=f"a{i}".encode(), partition=i % 3)
        p.commit_transaction(60)
        p.begin_transaction()
        for i in range(30):
            p.produce("ct", value=f"x{i}".encode(), partition=i % 3)
        p.flush(30)
        p.abort_transaction(60)
        p.begin_transaction()
        for i in range(30):
            p.produce("ct", value=f"b{i}".encode(), partition=i % 3)
        p.flush(30)

        index = partition_for("ct-tx", 5)
        coordinator = layout(cluster.nodes[0])[(TRANSACTION_STATE_TOPIC, index)][0]
        cluster.node(coordinator).kill()
        others = [n for n in cluster.nodes if n.node_id != coordinator]
        wait_until(
            lambda: layout(others[0])[(TRANSACTION_STATE_TOPIC, index)][0] not in (coordinator, -1),
            timeout=30,
            what="a new transaction coordinator",
        )
        for i in range(30, 40):
            p.produce("ct", value=f"b{i}".encode(), partition=i % 3)
        p.commit_transaction(90)

        got = read_committed(others[0].bootstrap_servers, "ct", 3, 70)
        expected = [f"a{i}".encode() for i in range(30)] + [f"b{i}".encode() for i in range(40)]
        assert sorted(got) == sorted(expected), (len(got), sorted(set(got) ^ set(expected))[:10])

        # the killed broker comes back, catches up, and serves the same committed view
        cluster.node(coordinator).restart()
        full_isr(cluster, "ct", 3)
        assert sorted(read_committed(cluster.node(coordinator).bootstrap_servers, "ct", 3, 70)) == sorted(expected)
