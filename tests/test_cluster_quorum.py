"""Three `logbroker serve` processes forming a controller quorum on loopback, configured
with Kafka's keys (node.id, listeners with a CONTROLLER listener, controller.quorum.voters):
the metadata (brokers, topics) is the same on every node, topics are created through the
active controller with a real client, and killing the active controller (kill -9) elects
another one that keeps accepting metadata changes; the killed node restarts and catches up.
Replication of partition data is issue 13: replicas are placed, but followers do not fetch yet
(the ISR is the leader alone)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess, cluster_processes, free_port, wait_until

from logbroker.client.connection import BrokerConnection
from logbroker.protocol import REQUESTS


def start_cluster(tmp_path, n=3) -> list[BrokerProcess]:
    return cluster_processes(tmp_path, n)


def metadata(bp: BrokerProcess):
    admin = AdminClient({"bootstrap.servers": bp.bootstrap_servers})
    return admin.list_topics(timeout=10)


def read_all(bp: BrokerProcess, topic: str, partitions: int, expect: int = 60) -> set[bytes]:
    c = Consumer({"bootstrap.servers": bp.bootstrap_servers, "group.id": "g", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    got: set[bytes] = set()
    deadline = time.monotonic() + 30
    while len(got) < expect and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.add(m.value())
    c.close()
    return got


def controller_of(bp: BrokerProcess) -> int:
    """The active controller as DescribeCluster names it (librdkafka's describe_cluster reads
    Metadata, where a cluster broker names itself, as KRaft brokers name a live broker)."""
    with BrokerConnection(bp.bootstrap_servers, timeout=5) as c:
        return c.send(REQUESTS[60](), version=0).controller_id


wait_for = wait_until


@pytest.fixture
def cluster(tmp_path):
    nodes = start_cluster(tmp_path)
    yield nodes
    for bp in nodes:
        bp.reap()


def test_three_nodes_agree_on_brokers_and_topics_and_survive_the_controller(cluster):
    wait_for(lambda: all(len(metadata(bp).brokers) == 3 for bp in cluster), what="3 registered brokers everywhere")
    admin = AdminClient({"bootstrap.servers": ",".join(bp.bootstrap_servers for bp in cluster)})
    fs = admin.create_topics([NewTopic("spread", num_partitions=6, replication_factor=1)], operation_timeout=20)
    fs["spread"].result(30)

    def topic_everywhere(name, parts):
        views = []
        for bp in cluster:
            if bp.proc is None:
                continue
            t = metadata(bp).topics.get(name)
            if t is None or len(t.partitions) != parts:
                return False
            views.append(sorted((p, t.partitions[p].leader, tuple(t.partitions[p].replicas)) for p in t.partitions))
        return all(v == views[0] for v in views) and views[0]

    view = wait_for(lambda: topic_everywhere("spread", 6), what="topic on every node")
    assert {leader for _, leader, _ in view} == {1, 2, 3}  # leaders spread over the brokers

    # replication factor 3: every broker shows the same replicas, ISR and leaders; replicas
    # spread round robin; every replica starts in the ISR (the followers keep up)
    admin.create_topics([NewTopic("rf3", num_partitions=3, replication_factor=3)])["rf3"].result(30)
    rf3 = wait_for(lambda: topic_everywhere("rf3", 3), what="rf3 on every node")
    assert all(sorted(replicas) == [1, 2, 3] and leader == replicas[0] for _, leader, replicas in rf3)
    assert {leader for _, leader, _ in rf3} == {1, 2, 3}
    isrs = {
        tuple(sorted((p, tuple(t.partitions[p].isrs)) for p in t.partitions))
        for t in (metadata(bp).topics["rf3"] for bp in cluster)
    }
    assert len(isrs) == 1 and all(sorted(isr) == [1, 2, 3] for _, isr in isrs.pop())
    with pytest.raises(Exception, match="INVALID_REPLICATION_FACTOR|larger than the 3"):
        admin.create_topics([NewTopic("rf4", num_partitions=1, replication_factor=4)])["rf4"].result(30)

    # records go to each partition's leader, wherever it is
    p = Producer({"bootstrap.servers": cluster[0].bootstrap_servers, "enable.idempotence": False, "acks": 1})
    for i in range(60):
        p.produce("spread", value=f"v{i}".encode(), partition=i % 6)
    assert p.flush(30) == 0
    assert read_all(cluster[1], "spread", 6) == {f"v{i}".encode() for i in range(60)}

    # an idempotent producer (the default in Kafka's clients) through every node: each node
    # gets its producer-id block from the quorum, whoever the controller is
    for bp in cluster:
        idem = Producer({"bootstrap.servers": bp.bootstrap_servers, "enable.idempotence": True, "acks": "all"})
        idem.produce("spread", value=b"idempotent", partition=0)
        assert idem.flush(30) == 0

    # kill -9 the active controller: another node takes over and metadata changes go on
    old = controller_of(cluster[0])
    victim = next(bp for bp, i in zip(cluster, (1, 2, 3)) if i == old)
    t0 = time.monotonic()
    victim.kill()
    rest = [bp for bp in cluster if bp is not victim]

    def new_controller():
        ids = {controller_of(bp) for bp in rest}
        return len(ids) == 1 and ids != {old} and ids != {-1} and ids.pop()

    new = wait_for(new_controller, what="a new active controller")
    elapsed = time.monotonic() - t0
    print(f"controller {old} killed; node {new} active after {elapsed:.2f} s")
    admin2 = AdminClient({"bootstrap.servers": ",".join(bp.bootstrap_servers for bp in rest)})

    def create_after():
        admin2.create_topics([NewTopic("after", num_partitions=2, replication_factor=1)])["after"].result(10)
        return True

    wait_for(create_after, what="CreateTopics through the new controller")
    wait_for(lambda: all(metadata(bp).topics.get("after") for bp in rest), what="new topic on the survivors")

    victim.start()  # restarts from its data directory and catches up from the log
    wait_for(
        lambda: metadata(victim).topics.get("after") is not None and "spread" in metadata(victim).topics,
        what="the restarted node to catch up",
    )
    # its partitions kept their records through the kill and the replay
    assert read_all(victim, "spread", 6, expect=61) == {f"v{i}".encode() for i in range(60)} | {b"idempotent"}


def test_a_node_from_another_cluster_refuses_to_start(tmp_path):
    single = BrokerProcess(tmp_path / "old").start()  # a single-node data directory
    single.stop()
    p, c = free_port(), free_port()
    bp = BrokerProcess(
        tmp_path / "old",
        port=p,
        extra=[
            "--node-id",
            "1",
            "--voters",
            f"1@127.0.0.1:{c},2@127.0.0.1:{free_port()},3@127.0.0.1:{free_port()}",
            "--listen",
            f"PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
        ],
    )
    with pytest.raises(RuntimeError, match="broker did not start"):
        bp.start(timeout=20)
    text = bp.log_text()
    assert "logbroker: bad configuration: data directory" in text and "refusing to start" in text, text[-2000:]
    assert "Traceback" not in text
