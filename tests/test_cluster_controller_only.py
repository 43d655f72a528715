"""Kafka's production shape: three controller-only nodes (process.roles=controller, the
quorum's voters, a controller listener and nothing else) and two broker-only nodes (the
quorum's observers, all the partitions). Clients see only the brokers; the controllers
lead the metadata log, place partitions on the brokers alone, and one of them can die while
an acks=all producer keeps writing."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import wait_until
from rawclient import RawClient

from logbroker import Cluster
from logbroker.protocol import REQUESTS


def describe_quorum(bs: str):
    dq = REQUESTS[55]
    with RawClient(bs) as c:
        r = c.request(
            55,
            2,
            dq(
                topics=[dq.TopicData(topic_name="__cluster_metadata", partitions=[dq.PartitionData(partition_index=0)])]
            ),
        )
    return r.topics[0].partitions[0]


def test_three_controllers_two_brokers(tmp_path):
    with Cluster(
        3,
        broker_only=2,
        controller_only=True,
        data_dir=tmp_path,
        config={"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500},
    ) as cluster:
        assert [n.node_id for n in cluster.brokers] == [4, 5]
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        md = admin.list_topics(timeout=10)
        assert sorted(md.brokers) == [4, 5], "controllers are not brokers"
        one = cluster.node(4).bootstrap_servers  # a raw client dials one broker
        q = describe_quorum(one)
        assert sorted(v.replica_id for v in q.current_voters) == [1, 2, 3]
        assert sorted(o.replica_id for o in q.observers) == [4, 5]
        leader = q.leader_id
        assert leader in (1, 2, 3)

        admin.create_topics([NewTopic("orders", 4, 2)])["orders"].result(30)
        md = admin.list_topics("orders", timeout=10)
        assert all(set(p.replicas) == {4, 5} for p in md.topics["orders"].partitions.values())
        # replication factor 3 cannot be met by two brokers: refused at once, the voters are not counted
        t0 = time.monotonic()
        fut = admin.create_topics([NewTopic("too-wide", 1, 3)])["too-wide"]
        try:
            fut.result(30)
            raise AssertionError("replication factor 3 on two brokers was accepted")
        except Exception as e:  # noqa: BLE001 - the KafkaException is checked by name
            assert "INVALID_REPLICATION_FACTOR" in str(e), e
        assert time.monotonic() - t0 < 5

        acked: list[int] = []
        errors: list = []
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
            i = 0
            while not stop.is_set():
                p.produce(
                    "orders",
                    str(i).encode(),
                    key=str(i).encode(),
                    on_delivery=lambda err, m: errors.append(err) if err else acked.append(int(m.value())),
                )
                i += 1
                p.poll(0.002)
            p.flush(30)

        t = threading.Thread(target=produce)
        t.start()
        try:
            wait_until(lambda: len(acked) > 200, 30, "records acknowledged")
            cluster.node(leader).kill()  # the active controller dies
            wait_until(lambda: describe_quorum(one).leader_id not in (leader, -1, 0), 30, "a new active controller")
            admin.create_topics([NewTopic("after", 2, 2)])["after"].result(30)  # metadata changes go on
            count = len(acked)
            wait_until(lambda: len(acked) > count + 200, 30, "records acknowledged after the failover")
        finally:
            stop.set()
            t.join(60)
        assert not errors, errors[:5]
        c = Consumer(
            {"bootstrap.servers": bs, "group.id": "check", "auto.offset.reset": "earliest", "enable.auto.commit": False}
        )
        c.subscribe(["orders"])
        seen: set[int] = set()
        deadline = time.monotonic() + 60
        while not set(acked) <= seen and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                seen.add(int(m.value()))
        c.close()
        assert set(acked) <= seen, f"{len(set(acked) - seen)} acknowledged records lost"
