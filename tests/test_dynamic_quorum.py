"""A dynamic controller quorum (KIP-853) with real clients: a controller whose machine died is
replaced while an acks=all producer keeps writing. A new controller-only node joins through
controller.quorum.bootstrap.servers as an observer, Kafka's `kafka-metadata-quorum
add-controller` (the Java Admin's addRaftVoter) makes it a voter, `logbroker cluster
remove-voter` removes the dead one, and the quorum then survives losing another of the
original voters only because the new one votes. Nothing acknowledged is lost. Refusals
(a duplicate voter, an unknown voter, another cluster's id, an observer that is not
there) come back as Kafka's errors."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import needs_java, wait_until
from rawclient import RawClient
from replication_helpers import FAST

from logbroker.cluster import free_port
from logbroker.common import directory_id
from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = needs_java

QUORUM_TOOL = "org.apache.kafka.tools.MetadataQuorumCommand"


@pytest.fixture(scope="module")
def kafka_tools():
    from benches.peers.kafka import install

    return install()


def tool(kafka_tools, args: list[str]) -> str:
    r = subprocess.run(kafka_tools.tools_java(QUORUM_TOOL, args), capture_output=True, timeout=120)
    assert r.returncode == 0, (r.stdout.decode()[-2000:], r.stderr.decode()[-3000:])
    return r.stdout.decode()


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbroker", "cluster", *args], capture_output=True, text=True, timeout=120
    )


def voters(kafka_tools, bootstrap: str) -> list[int]:
    out = tool(kafka_tools, ["--bootstrap-server", bootstrap, "describe", "--status"])
    m = re.search(r"CurrentVoters:\s+\[(.*)\]", out)
    assert m, out
    return sorted(int(x) for x in re.findall(r'"id":\s*(\d+)', m.group(1)) or re.findall(r"\d+", m.group(1)))


class Writer(threading.Thread):
    """An acks=all idempotent producer writing numbered records until stopped; keeps what
    was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
            }
        )
        self.topic = topic
        self.acked: set[bytes] = set()
        self.stopping = threading.Event()

    def run(self) -> None:
        i = 0

        def done(err, msg):
            if err is None:
                self.acked.add(msg.value())

        while not self.stopping.is_set():
            self.producer.produce(self.topic, str(i).encode(), callback=done)
            i += 1
            self.producer.poll(0.01)
        self.producer.flush(120)


def read_values(bootstrap: str, topic: str, partitions: int) -> set[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "enable.auto.commit": False})
    try:
        got: set[bytes] = set()
        for p in range(partitions):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            c.assign([TopicPartition(topic, p, low)])
            n = 0
            while n < high - low:
                for m in c.consume(1000, timeout=5):
                    assert m.error() is None, m.error()
                    got.add(m.value())
                    n += 1
        return got
    finally:
        c.close()


def test_a_dead_controller_is_replaced_while_a_producer_writes(tmp_path, kafka_tools):
    from logbroker import Cluster

    config = {**FAST, "min.insync.replicas": 1}
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("dq", 3, 3)])["dq"].result(30)
        writer = Writer(bs, "dq")
        writer.start()
        wait_until(lambda: len(writer.acked) > 200, timeout=30, what="the producer is writing")

        cluster.node(3).kill()  # the machine of controller 3 dies
        new = cluster.add_controller(4)
        props = tmp_path / "controller4.properties"
        props.write_text(
            f"node.id=4\nprocess.roles=controller\ncontroller.listener.names=CONTROLLER\n"
            f"listeners=CONTROLLER://127.0.0.1:{new.controller_port}\nlog.dirs={new.data_dir}\n"
        )
        out = tool(
            kafka_tools,
            ["--bootstrap-server", cluster.node(1).bootstrap_servers, "--command-config", str(props), "add-controller"],
        )
        meta = (new.data_dir / "meta.properties").read_text()
        new_directory = re.search(r"directory.id=(\S+)", meta).group(1)
        assert f"Added controller 4 with directory id {new_directory}" in out, out

        removed = cli("remove-voter", "--bootstrap-server", cluster.node(2).bootstrap_servers, "--id", "3")
        assert removed.returncode == 0, removed.stderr
        assert "node 3" in removed.stdout and "is no longer a voter" in removed.stdout
        assert voters(kafka_tools, cluster.node(1).bootstrap_servers) == [1, 2, 4]
        replication = tool(
            kafka_tools, ["--bootstrap-server", cluster.node(2).bootstrap_servers, "describe", "--replication"]
        )
        assert re.search(rf"^4\s+{re.escape(new_directory)}\s+\d+\s+\d+", replication, re.M), replication

        # {1, 2, 4}: with 2 gone, 1 and 4 are a majority only because 4 votes now
        cluster.node(2).kill()
        admin = AdminClient({"bootstrap.servers": cluster.node(1).bootstrap_servers})
        admin.create_topics([NewTopic("after", 1, 1)])["after"].result(60)
        wait_until(
            lambda: len(writer.acked) > 0 and _controller(cluster.node(1)) in (1, 4),
            timeout=30,
            what="an active controller among 1 and 4",
        )
        before = len(writer.acked)
        wait_until(
            lambda: len(writer.acked) > before + 100,
            timeout=60,
            what="the producer writing again with two of the original voters dead",
        )
        writer.stopping.set()
        writer.join(180)
        assert not writer.is_alive()
        got = read_values(cluster.node(1).bootstrap_servers, "dq", 3)
        lost = writer.acked - got
        assert not lost, f"{len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"

        # the new voter restarts on another address: it writes its new endpoint to the voter
        # directory (UpdateRaftVoter's record), and with 2 and 3 dead nothing commits without it
        port = free_port()
        new.stop()
        new._args = [a.replace(f"127.0.0.1:{new.controller_port}", f"127.0.0.1:{port}") for a in new._args]
        new.controller_port = port
        new.start()
        wait_until(
            lambda: (
                f"CONTROLLER://127.0.0.1:{port}"
                in tool(kafka_tools, ["--bootstrap-server", cluster.node(1).bootstrap_servers, "describe", "--status"])
            ),
            timeout=60,
            what="voter 4's new endpoint in DescribeQuorum",
        )
        assert voters(kafka_tools, cluster.node(1).bootstrap_servers) == [1, 2, 4]
        admin.create_topics([NewTopic("after-move", 1, 1)])["after-move"].result(60)


def _controller(node) -> int:
    with RawClient(node.bootstrap_servers) as c:
        return c.request(60, 0, REQUESTS[60]()).controller_id


def test_voter_changes_that_cannot_be_made_are_refused(tmp_path):
    from logbroker import Cluster

    with Cluster(3, data_dir=tmp_path, config=FAST) as cluster:
        node = cluster.node(1)
        zero = directory_id.parse(directory_id.ZERO)
        Add, Remove = REQUESTS[80], REQUESTS[81]
        listener = [Add.Listener(name="CONTROLLER", host="127.0.0.1", port=cluster.node(2).controller_port)]
        with RawClient(node.bootstrap_servers) as c:
            r = c.request(
                80, 1, Add(cluster_id=None, timeout_ms=2000, voter_id=2, voter_directory_id=zero, listeners=listener)
            )
            assert r.error_code == ErrorCode.DUPLICATE_VOTER, r
            r = c.request(
                80, 1, Add(cluster_id=None, timeout_ms=1000, voter_id=9, voter_directory_id=zero, listeners=listener)
            )
            assert r.error_code == ErrorCode.REQUEST_TIMED_OUT and "not an observer" in r.error_message, r
            r = c.request(
                80,
                1,
                Add(
                    cluster_id="another-cluster",
                    timeout_ms=1000,
                    voter_id=9,
                    voter_directory_id=zero,
                    listeners=listener,
                ),
            )
            assert r.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID, r
            r = c.request(
                80,
                1,
                Add(
                    cluster_id=None,
                    timeout_ms=1000,
                    voter_id=9,
                    voter_directory_id=zero,
                    listeners=[Add.Listener(name="PLAINTEXT", host="h", port=1)],
                ),
            )
            assert r.error_code == ErrorCode.INVALID_REQUEST and "CONTROLLER" in r.error_message, r
            r = c.request(81, 0, Remove(cluster_id=None, voter_id=9, voter_directory_id=zero))
            assert r.error_code == ErrorCode.VOTER_NOT_FOUND, r
        controller = cluster.node(cluster.controller_id())
        Update = REQUESTS[82]
        with RawClient(f"127.0.0.1:{controller.controller_port}") as c:
            r = c.request(
                82,
                0,
                Update(
                    cluster_id=None,
                    current_leader_epoch=-1,
                    voter_id=9,
                    voter_directory_id=zero,
                    listeners=[Update.Listener(name="CONTROLLER", host="127.0.0.1", port=1)],
                    k_raft_version_feature=Update.KRaftVersionFeature(min_supported_version=0, max_supported_version=1),
                ),
            )
            assert r.error_code == ErrorCode.VOTER_NOT_FOUND and r.current_leader.leader_id == controller.node_id, r
        bad = cli("remove-voter", "--bootstrap-server", node.bootstrap_servers, "--id", "3", "--directory-id", "x")
        assert bad.returncode == 2 and "not a Kafka uuid" in bad.stderr
        # nothing changed
        assert sorted(cli_status_voters(node)) == [1, 2, 3]


def cli_status_voters(node) -> list[int]:
    import json

    r = cli("status", "--bootstrap-server", node.bootstrap_servers, "--json")
    assert r.returncode == 0, r.stderr
    return [v["node_id"] for v in json.loads(r.stdout)["quorum"]["voters"]]


def test_a_single_node_grows_into_a_three_node_cluster_while_a_producer_writes(tmp_path):
    """`logbroker serve` alone (a quorum of one voter) with a controller listener: two nodes
    join through controller.quorum.bootstrap.servers, `logbroker cluster add-voter` makes
    them voters, topics get three replicas, and the first node's death no longer stops the
    cluster. Nothing acknowledged is lost, and the first node, started again, catches up."""
    from logbroker.cluster import ClusterNode

    sets = [a for k, v in {**FAST, "min.insync.replicas": 1}.items() for a in ("--set", f"{k}={v}")]

    def node(node_id: int, extra: list[str]) -> ClusterNode:
        port, ctl = free_port(), free_port()
        data = tmp_path / f"node{node_id}"
        args = [
            "--node-id",
            str(node_id),
            "--data-dir",
            str(data),
            *sets,
            "--listen",
            f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{ctl}",
            *extra,
        ]
        return ClusterNode(node_id, port, ctl, data, args)

    first = node(1, []).start()
    nodes = [first]
    try:
        bs = first.bootstrap_servers
        alone_admin = AdminClient({"bootstrap.servers": bs})
        alone_admin.create_topics([NewTopic("alone", 2, 1)])["alone"].result(30)
        writer = Writer(bs, "alone")
        writer.start()
        wait_until(lambda: len(writer.acked) > 200, timeout=30, what="the producer is writing")

        meta = (first.data_dir / "meta.properties").read_text()
        cluster_id = re.search(r"cluster.id=(\S+)", meta).group(1)
        for node_id in (2, 3):
            new = node(
                node_id,
                [
                    "--set",
                    f"controller.quorum.bootstrap.servers=127.0.0.1:{first.controller_port}",
                    "--set",
                    f"cluster.id={cluster_id}",
                ],
            )
            nodes.append(new.start())
            added = cli(
                "add-voter",
                "--bootstrap-server",
                bs,
                "--id",
                str(node_id),
                "--data-dir",
                str(new.data_dir),
                "--endpoint",
                f"127.0.0.1:{new.controller_port}",
            )
            assert added.returncode == 0, added.stderr
        status = cli("status", "--bootstrap-server", bs)
        assert status.returncode == 0, status.stderr
        with RawClient(bs) as c:
            dq = REQUESTS[55]
            q = c.request(
                55,
                2,
                dq(
                    topics=[
                        dq.TopicData(topic_name="__cluster_metadata", partitions=[dq.PartitionData(partition_index=0)])
                    ]
                ),
            )
        assert sorted(v.replica_id for v in q.topics[0].partitions[0].current_voters) == [1, 2, 3], q

        everywhere = AdminClient({"bootstrap.servers": ",".join(n.bootstrap_servers for n in nodes)})
        everywhere.create_topics([NewTopic("grown", 3, 3)])["grown"].result(60)
        grown = Writer(nodes[1].bootstrap_servers, "grown")
        grown.start()
        wait_until(lambda: len(grown.acked) > 200, timeout=60, what="writing to the replicated topic")
        writer.stopping.set()
        writer.join(180)

        first.kill()  # a majority of {1, 2, 3} is left
        before = len(grown.acked)
        wait_until(lambda: len(grown.acked) > before + 200, timeout=90, what="writing on with the first node dead")
        admin = AdminClient({"bootstrap.servers": nodes[1].bootstrap_servers})
        admin.create_topics([NewTopic("after", 1, 2)])["after"].result(60)

        first.start()  # no voters configured: who votes is what its metadata log says
        wait_until(lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=60, what="node 1 back")
        grown.stopping.set()
        grown.join(180)
        for topic, w, parts in (("grown", grown, 3), ("alone", writer, 2)):
            got = read_values(nodes[1].bootstrap_servers, topic, parts)
            lost = w.acked - got
            assert not lost, f"{topic}: {len(lost)} acknowledged records lost, e.g. {sorted(lost)[:5]}"
        with RawClient(first.bootstrap_servers) as c:
            md = c.request(3, 12, REQUESTS[3](topics=None, allow_auto_topic_creation=False))
        assert {"alone", "grown", "after"} <= {t.name for t in md.topics}
    finally:
        for n in nodes:
            n.stop()
