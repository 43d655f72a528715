"""Partition reassignment (KIP-455) in a three-node cluster of real `logbroker serve`
processes, through AlterPartitionReassignments / ListPartitionReassignments and
`logbroker topic reassign`: a partition moves to other brokers while a producer writes, the
new replicas catch up and join the ISR, the old ones are deleted, leadership moves to the
new preferred replica, and every acknowledged record is readable once; a move to a broker
that is down stays in progress until cancelled; bad targets are refused."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from conftest import wait_until
from rawclient import RawClient
from replication_helpers import FAST, assign, layout, produce_all, read_all, stored

from logbroker import Cluster
from logbroker.protocol import REQUESTS, ErrorCode


def reassign(node, items: list[tuple[str, int, list[int] | None]], version: int = 1, allow: bool = True):
    A = REQUESTS[45]
    topics: dict[str, list] = {}
    for name, i, target in items:
        topics.setdefault(name, []).append(A.ReassignablePartition(partition_index=i, replicas=target))
    req = A(
        timeout_ms=10000,
        allow_replication_factor_change=allow,
        topics=[A.ReassignableTopic(name=n, partitions=ps) for n, ps in topics.items()],
    )
    with RawClient(node.bootstrap_servers) as c:
        r = c.request(45, version, req)
    assert r.error_code == 0, (r.error_code, r.error_message)
    return {(t.name, p.partition_index): p.error_code for t in r.responses for p in t.partitions}


def ongoing(node, topics=None) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    L = REQUESTS[46]
    req = L(
        timeout_ms=10000,
        topics=None
        if topics is None
        else [L.ListPartitionReassignmentsTopics(name=n, partition_indexes=ps) for n, ps in topics],
    )
    with RawClient(node.bootstrap_servers) as c:
        r = c.request(46, 0, req)
    assert r.error_code == 0
    return {
        (t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in r.topics
        for p in t.partitions
    }


def test_a_partition_moves_to_other_brokers_under_load(tmp_path):
    with Cluster(3, data_dir=tmp_path, config=FAST) as cluster:
        assign(cluster.node(1), "mv", [1])
        acked = produce_all(cluster.bootstrap_servers, "mv", 2000)
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "mv", "partition": 0, "replicas": [2, 3]}]}))
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "logbroker",
                "topic",
                "--bootstrap-server",
                cluster.node(3).bootstrap_servers,
                "reassign",
                "--reassignment-json-file",
                str(plan),
                "--wait",
                "--timeout",
                "60",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert "mv-0: reassignment started" in out.stdout and "reassignment complete" in out.stdout
        leader, _epoch, replicas, isr = wait_until(
            lambda: (v := layout(cluster.node(1))[("mv", 0)])[2] == [2, 3] and v, what="replicas [2, 3]"
        )
        assert leader == 2 and sorted(isr) == [2, 3]
        wait_until(lambda: not (tmp_path / "node1" / "mv-0").exists(), what="broker 1's replica deleted")
        acked += produce_all(cluster.bootstrap_servers, "mv", 500)
        got = read_all(cluster.bootstrap_servers, "mv")
        assert sorted(v for _, v in got) == sorted(v for _, _, v in acked)
        assert [o for o, _ in got] == list(range(len(acked)))
        assert ongoing(cluster.node(1)) == {}
        time.sleep(1)
    assert stored(tmp_path / "node2", "mv", 0) == stored(tmp_path / "node3", "mv", 0)


def test_a_move_to_a_broker_that_is_down_waits_and_can_be_cancelled(tmp_path):
    with Cluster(3, data_dir=tmp_path, config=FAST) as cluster:
        assign(cluster.node(1), "stuck", [1, 2])
        produce_all(cluster.bootstrap_servers, "stuck", 100)
        cluster.node(3).kill()
        assert reassign(cluster.node(2), [("stuck", 0, [3, 2])]) == {("stuck", 0): ErrorCode.NONE}
        moving = wait_until(lambda: ongoing(cluster.node(1)).get(("stuck", 0)), what="the reassignment listed")
        assert moving == ([3, 2, 1], [3], [1])
        time.sleep(2)
        assert ongoing(cluster.node(1), [("stuck", [0])]) == {("stuck", 0): moving}, "3 is down: not complete"
        leader, _e, replicas, isr = layout(cluster.node(1))[("stuck", 0)]
        assert replicas == [3, 2, 1] and 3 not in isr and leader in (1, 2)
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "logbroker",
                "topic",
                "--bootstrap-server",
                cluster.node(1).bootstrap_servers,
                "reassign",
                "--topic",
                "stuck",
                "--partition",
                "0",
                "--cancel",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and "stuck-0: cancelled" in out.stdout, (out.stdout, out.stderr)
        # back to brokers 1 and 2, in the merged order (Kafka's revert: the list less the adding ones)
        wait_until(lambda: layout(cluster.node(1))[("stuck", 0)][2] == [2, 1], what="replicas back to 1 and 2")
        assert ongoing(cluster.node(1)) == {}
        # cancelling again: nothing in progress
        assert reassign(cluster.node(2), [("stuck", 0, None)]) == {("stuck", 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}


def test_bad_reassignments_are_refused_and_change_nothing(tmp_path):
    with Cluster(3, data_dir=tmp_path, config=FAST) as cluster:
        assign(cluster.node(1), "bad", [1, 2])
        before = layout(cluster.node(1))[("bad", 0)]
        got = reassign(cluster.node(3), [("bad", 0, [1, 9]), ("bad", 1, [1, 2]), ("nope", 0, [1]), ("bad", 0, [2, 2])])
        assert got == {
            ("bad", 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            ("bad", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert reassign(cluster.node(3), [("bad", 0, [1, 2, 3])], allow=False) == {
            ("bad", 0): ErrorCode.INVALID_REPLICATION_FACTOR
        }
        # version 0 has no AllowReplicationFactorChange: a change of factor is allowed there
        assert reassign(cluster.node(3), [("bad", 0, [2, 1])], version=0) == {("bad", 0): ErrorCode.NONE}
        after = wait_until(
            lambda: (v := layout(cluster.node(1))[("bad", 0)])[2] == [2, 1] and v,
            what="the new replica order (preferred leader 2)",
        )
        assert sorted(after[3]) == sorted(before[3]) and after[0] == before[0], "same brokers: only the order changed"
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "logbroker",
                "topic",
                "reassign",
                "--topic",
                "bad",
                "--partition",
                "0",
                "--replicas",
                "1,x",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 2 and "not a comma-separated list" in out.stderr
        assert ongoing(cluster.node(2)) == {}
