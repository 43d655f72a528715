"""Kafka's own tools and the Java client against a three-node cluster, each command through a
different broker: kafka-topics creates and describes a topic with replication factor 3
(forwarded to the active controller when needed), the console producer and a consumer group
move records through other brokers, and kafka-metadata-quorum describes the controller
quorum (DescribeQuorum, forwarded to the active controller)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_java
from test_client_java import consume, produce
from test_cluster_lifecycle import metadata, start_cluster, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = needs_java


@pytest.fixture(scope="module")
def kafka_tools():
    from benches.peers.kafka import install

    return install()


def tool(kafka_tools, main: str, args: list[str]) -> str:
    r = subprocess.run(kafka_tools.tools_java(main, args), capture_output=True, timeout=120)
    assert r.returncode == 0, (r.stdout.decode()[-2000:], r.stderr.decode()[-3000:])
    return r.stdout.decode()


def test_kafka_tools_and_java_client_through_any_broker(tmp_path, kafka_tools):
    nodes = start_cluster(tmp_path)
    try:
        wait_for(lambda: all(metadata(bp)[0] == [1, 2, 3] for bp in nodes), what="3 brokers everywhere")
        controller = metadata(nodes[0])[2]
        others = [bp for i, bp in enumerate(nodes, 1) if i != controller]
        topics = "org.apache.kafka.tools.TopicCommand"
        tool(
            kafka_tools,
            topics,
            [
                "--bootstrap-server",
                others[0].bootstrap_servers,
                "--create",
                "--topic",
                "jt",
                "--partitions",
                "6",
                "--replication-factor",
                "3",
            ],
        )
        for bp in nodes:  # the same replicas, ISR and leaders from every broker
            wait_for(lambda bp=bp: sum(1 for t, _ in metadata(bp)[1] if t == "jt") == 6, what="jt everywhere")
        described = tool(
            kafka_tools, topics, ["--bootstrap-server", others[1].bootstrap_servers, "--describe", "--topic", "jt"]
        )
        rows = re.findall(r"Partition: (\d+)\s+Leader: (\d+)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]+)", described)
        assert len(rows) == 6, described
        assert {leader for _, leader, _, _ in rows} == {"1", "2", "3"}
        assert all(
            sorted(r.split(",")) == ["1", "2", "3"]
            and sorted(isr.split(",")) == ["1", "2", "3"]
            and r.split(",")[0] == leader
            for _, leader, r, isr in rows
        ), described
        _, parts, _ = metadata(nodes[controller - 1])
        assert {int(p): int(leader) for p, leader, _, _ in rows} == {
            p: v[0] for (t, p), v in parts.items() if t == "jt"
        }

        lines = [f"k{i}:v{i}" for i in range(300)]
        produce(kafka_tools, others[0].bootstrap_servers, "jt", lines, "lz4")
        got = consume(kafka_tools, others[1].bootstrap_servers, "jt", 300, "jgroup", "classic")
        assert sorted(got) == sorted(lines)

        quorum = tool(
            kafka_tools,
            "org.apache.kafka.tools.MetadataQuorumCommand",
            ["--bootstrap-server", others[1].bootstrap_servers, "describe", "--status"],
        )
        assert re.search(rf"LeaderId:\s+{controller}\b", quorum), quorum
        assert re.search(r"CurrentVoters:\s+\[.*1.*2.*3", quorum, re.S), quorum
        replication = tool(
            kafka_tools,
            "org.apache.kafka.tools.MetadataQuorumCommand",
            ["--bootstrap-server", others[0].bootstrap_servers, "describe", "--replication"],
        )
        assert "Leader" in replication and "Follower" in replication, replication
    finally:
        for bp in nodes:
            bp.reap()


def test_kafka_reassign_partitions_and_leader_election_tools(tmp_path, kafka_tools):
    """kafka-reassign-partitions (AlterPartitionReassignments / ListPartitionReassignments)
    moves a partition; kafka-leader-election (ElectLeaders) moves a leadership back to the
    preferred replica after an out-of-order reassignment."""
    import json

    from conftest import wait_until
    from replication_helpers import FAST, assign, layout, produce_all, read_all

    from logbroker import Cluster

    config = dict(FAST, **{"auto.leader.rebalance.enable": "false"})
    with Cluster(3, data_dir=tmp_path / "c", config=config) as cluster:
        assign(cluster.node(1), "jr", [1, 2])
        acked = produce_all(cluster.bootstrap_servers, "jr", 300)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "jr", "partition": 0, "replicas": [3, 1]}]}))
        reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
        out = tool(
            kafka_tools,
            reassign,
            [
                "--bootstrap-server",
                cluster.node(2).bootstrap_servers,
                "--reassignment-json-file",
                str(plan),
                "--execute",
            ],
        )
        assert "Successfully started partition reassignment" in out, out
        wait_until(
            lambda: (
                "is completed"
                in tool(
                    kafka_tools,
                    reassign,
                    [
                        "--bootstrap-server",
                        cluster.node(1).bootstrap_servers,
                        "--reassignment-json-file",
                        str(plan),
                        "--verify",
                    ],
                )
            ),
            timeout=60,
            what="kafka-reassign-partitions --verify: completed",
        )
        leader, _e, replicas, isr = layout(cluster.node(1))[("jr", 0)]
        assert replicas == [3, 1] and sorted(isr) == [1, 3] and leader == 1, "1 is a target: it keeps the leadership"
        wait_until(lambda: not (tmp_path / "c" / "node2" / "jr-0").exists(), what="broker 2's replica deleted")
        out = tool(
            kafka_tools,
            "org.apache.kafka.tools.LeaderElectionCommand",
            [
                "--bootstrap-server",
                cluster.node(3).bootstrap_servers,
                "--election-type",
                "preferred",
                "--topic",
                "jr",
                "--partition",
                "0",
            ],
        )
        assert "Successfully completed leader election (PREFERRED) for partitions jr-0" in out, out
        assert layout(cluster.node(1))[("jr", 0)][0] == 3
        assert sorted(v for _, v in read_all(cluster.bootstrap_servers, "jr")) == sorted(v for _, _, v in acked)
