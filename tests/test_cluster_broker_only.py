"""Broker-only nodes (process.roles=broker) beside three combined nodes, as separate
`logbroker serve` processes: the node follows the metadata log as an observer (a Raft
learner), registers, is listed by every broker, hosts and leads replicas, takes admin
requests (forwarded to the active controller), serves librdkafka, survives a restart and
the loss of the active controller, and shows as an observer in DescribeQuorum. Bad
configurations and a second broker claiming the same node.id are refused with clear errors,
and nothing changes for the node that was there first."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess, free_port, wait_until

from logbroker import Cluster
from logbroker.client.connection import BrokerConnection
from logbroker.protocol import REQUESTS

FAST = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300}


def metadata(node) -> tuple[list[int], dict]:
    with BrokerConnection(node.bootstrap_servers, timeout=5) as c:
        r = c.send(REQUESTS[3](topics=None, allow_auto_topic_creation=False), version=12)
    parts = {(t.name, p.partition_index): (p.leader_id, list(p.replica_nodes)) for t in r.topics for p in t.partitions}
    return sorted(b.node_id for b in r.brokers), parts


def quorum(node):
    Req = REQUESTS[55]
    req = Req(
        topics=[Req.TopicData(topic_name="__cluster_metadata", partitions=[Req.PartitionData(partition_index=0)])]
    )
    with BrokerConnection(node.bootstrap_servers, timeout=10) as c:
        r = c.send(req, version=2)
    return r.topics[0].partitions[0]


def test_a_broker_only_node_joins_serves_and_follows_the_quorum(tmp_path):
    with Cluster(3, data_dir=tmp_path, config=FAST, broker_only=1) as cluster:
        observer = cluster.node(4)
        assert observer.controller_port is None
        assert all(metadata(n)[0] == [1, 2, 3, 4] for n in cluster.nodes)
        q = wait_until(
            lambda: next((p for p in [quorum(observer)] if [o.replica_id for o in p.observers] == [4]), None),
            what="node 4 as an observer in DescribeQuorum",
        )
        assert sorted(v.replica_id for v in q.current_voters) == [1, 2, 3]
        assert q.leader_id in (1, 2, 3)

        # created through the broker-only node (forwarded), replicas on all four brokers
        admin = AdminClient({"bootstrap.servers": observer.bootstrap_servers})
        admin.create_topics([NewTopic("wide", num_partitions=8, replication_factor=1)])["wide"].result(30)
        parts = wait_until(
            lambda: next((m for m in [metadata(observer)[1]] if sum(k[0] == "wide" for k in m) == 8), None),
            what="topic wide on node 4",
        )
        mine = sorted(i for (t, i), (leader, _) in parts.items() if t == "wide" and leader == 4)
        assert mine, f"no partition of wide led by the broker-only node: {parts}"
        assert {leader for (t, _), (leader, _) in parts.items() if t == "wide"} == {1, 2, 3, 4}

        # librdkafka through the broker-only node, to a partition it leads
        p = Producer({"bootstrap.servers": observer.bootstrap_servers, "enable.idempotence": True})
        for i in range(20):
            p.produce("wide", value=f"m{i}".encode(), partition=mine[0])
        assert p.flush(30) == 0
        c = Consumer(
            {
                "bootstrap.servers": cluster.node(1).bootstrap_servers,
                "group.id": "g-wide",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.assign([TopicPartition("wide", mine[0], 0)])
        got = []
        while len(got) < 20:
            m = c.poll(10)
            assert m is not None, f"consumed {len(got)} of 20"
            assert m.error() is None, m.error()
            got.append(m.value())
        c.close()
        assert got == [f"m{i}".encode() for i in range(20)]

        # restart: it replays its own metadata log, re-registers, keeps its partitions
        observer.restart()
        cluster.wait_ready(30)
        assert metadata(observer)[1] == parts or set(metadata(observer)[1]) >= set(parts)

        # the active controller stops: the observer follows the new leader and still
        # forwards admin requests
        old = cluster.controller_id()
        cluster.node(old).kill()
        admin = AdminClient({"bootstrap.servers": observer.bootstrap_servers})
        admin.create_topics([NewTopic("after", num_partitions=2, replication_factor=1)])["after"].result(60)
        wait_until(lambda: ("after", 1) in metadata(observer)[1], what="topic after on node 4")
        q = wait_until(
            lambda: next((p for p in [quorum(observer)] if p.leader_id not in (0, -1, old)), None),
            what="a new controller in DescribeQuorum",
        )
        assert [o.replica_id for o in q.observers] == [4]

        # `logbroker cluster status` names it a broker, not a controller
        out = subprocess.run(
            [sys.executable, "-m", "logbroker", "cluster", "status", "--bootstrap-server", observer.bootstrap_servers],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        row = next(line.split() for line in out.stdout.splitlines() if line.split()[:1] == ["4"])
        assert row[3] == "broker", out.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--node-id", "2", "--roles", "broker"], "node.id 2 is a voter in controller.quorum.voters"),
        (["--node-id", "7", "--roles", "controller"], "a controller-only node listens on CONTROLLER:// only"),
        (
            ["--node-id", "7", "--roles", "controller", "--no-voters"],
            "process.roles=controller needs controller.quorum.voters",
        ),
        (["--node-id", "7", "--roles", "broker", "--no-voters"], "process.roles=broker needs controller.quorum.voters"),
    ],
)
def test_bad_broker_only_configuration_is_refused(tmp_path, args, message):
    voters = f"1@127.0.0.1:{free_port()},2@127.0.0.1:{free_port()},3@127.0.0.1:{free_port()}"
    extra = [a for a in args if a != "--no-voters"] + ([] if "--no-voters" in args else ["--voters", voters])
    bp = BrokerProcess(tmp_path / "data", extra=extra)
    with pytest.raises(RuntimeError, match="broker did not start"):
        bp.start(timeout=20)
    text = bp.log_text()
    assert "logbroker: bad configuration" in text and message in text, text[-2000:]
    assert "Traceback" not in text
    assert not any((tmp_path / "data").glob("__cluster_metadata-0/*")), "a refused node wrote a metadata log"


def test_a_controller_listener_on_a_broker_only_node_is_refused(tmp_path):
    p, c = free_port(), free_port()
    voters = f"1@127.0.0.1:{free_port()},2@127.0.0.1:{free_port()},3@127.0.0.1:{free_port()}"
    bp = BrokerProcess(
        tmp_path / "data",
        port=p,
        extra=[
            "--voters",
            voters,
            "--node-id",
            "4",
            "--roles",
            "broker",
            "--listen",
            f"PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
        ],
    )
    with pytest.raises(RuntimeError, match="broker did not start"):
        bp.start(timeout=20)
    assert "only controllers listen on it" in bp.log_text()


def test_a_second_broker_with_the_same_node_id_is_refused(tmp_path):
    with Cluster(3, data_dir=tmp_path / "c", config=FAST, broker_only=1) as cluster:
        first = cluster.node(4)
        voters = first._args[first._args.index("--voters") + 1]
        dup = BrokerProcess(
            tmp_path / "dup",
            extra=[
                "--node-id",
                "4",
                "--roles",
                "broker",
                "--voters",
                voters,
                "--set",
                "broker.session.timeout.ms=3000",
                "--set",
                "broker.heartbeat.interval.ms=300",
            ],
        )
        dup.start(timeout=30)  # it starts, but no voter lets it in while node 4 is connected
        try:
            wait_until(
                lambda: all("claims observer node id 4" in n.log_text() for n in cluster.nodes[:3]),
                what="every voter refusing the second node 4",
            )
            refusal = next(
                line for line in cluster.node(1).log_text().splitlines() if "claims observer node id 4" in line
            )
            assert "two brokers configured with node.id 4" in refusal
            # nothing changed for the node that was there first: same endpoint everywhere
            for n in cluster.nodes:
                with BrokerConnection(n.bootstrap_servers, timeout=5) as c:
                    r = c.send(REQUESTS[3](topics=[], allow_auto_topic_creation=False), version=12)
                assert {b.node_id: b.port for b in r.brokers}[4] == first.port
            assert metadata(first)[0] == [1, 2, 3, 4]
        finally:
            dup.reap()
