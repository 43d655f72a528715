"""`logbroker.Cluster(3)`, the `logbroker_cluster` pytest fixture and `logbroker cluster
status`, with real processes: three nodes in subprocesses; every node agrees on brokers and
controller; a topic made through the Admin client shows on every node; a stopped node leaves
the others serving and rejoins on start or restart(); the last nodes stopping together do not
hang; a node that cannot start is named with its log and nothing is left running. The status
command prints the nodes (with racks), the controller and the quorum, as tables or JSON; it
says why when a broker has no quorum to describe, exits 1 naming an unreachable bootstrap
server and 2 on bad arguments. `logbroker serve --rack` sets broker.rack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from conftest import BrokerProcess, free_port

from logbroker import Admin, Cluster, NewTopic
from logbroker.client.connection import BrokerConnection
from logbroker.protocol import REQUESTS


def brokers_and_topics(node) -> tuple[list[int], set[str]]:
    with BrokerConnection(node.bootstrap_servers, timeout=5) as c:
        r = c.send(REQUESTS[3](topics=None, allow_auto_topic_creation=False))
    return sorted(b.node_id for b in r.brokers), {t.name for t in r.topics}


def controller_seen_by(node) -> int:
    with BrokerConnection(node.bootstrap_servers, timeout=5) as c:
        return c.send(REQUESTS[60](), version=0).controller_id


def status(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbroker", "cluster", "status", *args], capture_output=True, text=True, timeout=60
    )


def test_cluster_of_three(tmp_path):
    with Cluster(
        3, data_dir=tmp_path, config={"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300}
    ) as cluster:
        assert [brokers_and_topics(n)[0] for n in cluster.nodes] == [[1, 2, 3]] * 3
        controller = cluster.controller_id()
        assert controller in (1, 2, 3)
        assert [controller_seen_by(n) for n in cluster.nodes] == [controller] * 3
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


def test_a_node_restarted_after_a_controlled_shutdown_is_unfenced(tmp_path):
    """A broker's session belongs to its registration: a node that shut down cleanly and comes
    back after its old session would have expired registers anew and is not fenced by the old
    session (heartbeats 2 s apart leave the controller's 0.75 s sweep time to look at it
    before its first beat), nor kept fenced by the old controlled shutdown. Both happened under
    load: the node stayed fenced for good."""
    cfg = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 2000}
    with Cluster(3, data_dir=tmp_path, config=cfg) as cluster:
        controller = cluster.controller_id()
        other = next(n for n in cluster.nodes if n.node_id != controller)
        assert other.stop() == 0  # controlled shutdown
        time.sleep(3.5)  # longer than the session timeout: the old session has run out
        other.start()
        cluster.wait_ready(30)
        time.sleep(3.5)  # and it stays unfenced on its new session's heartbeats
        cluster.wait_ready(5)


def test_logbroker_cluster_fixture(logbroker_cluster):
    assert len(logbroker_cluster.nodes) == 3
    assert all(brokers_and_topics(n)[0] == [1, 2, 3] for n in logbroker_cluster.nodes)
    assert logbroker_cluster.bootstrap_servers.count(",") == 2
    node = logbroker_cluster.node(2)
    pid, port, log = node.pid, node.port, node.log_path
    node.restart()  # same ports and data directory, a new process
    assert node.is_running and node.pid != pid and node.port == port
    logbroker_cluster.wait_ready(30)
    assert brokers_and_topics(node)[0] == [1, 2, 3]
    assert log.read_text().count("serving on") == 2  # both runs log to the same file


def test_failed_start_names_the_node_and_leaves_nothing_running(tmp_path):
    cluster = Cluster(2, data_dir=tmp_path, config={"num.partitions": "lots"})
    with pytest.raises(RuntimeError, match=r"(?s)node 1 \(port \d+.*exited with code 2.*num.partitions"):
        cluster.start()
    assert not any(n.is_running for n in cluster.nodes)
    assert all(n.pid is None for n in cluster.nodes)


def test_cluster_status(tmp_path):
    racks = ["east", "west", "east"]
    with Cluster(3, data_dir=tmp_path, racks=racks) as cluster:
        controller = cluster.controller_id()
        out = status("--bootstrap-server", cluster.node(2).bootstrap_servers)
        assert out.returncode == 0, out.stderr
        assert out.stderr == ""
        text = out.stdout
        assert f"active controller {controller} " in text
        for n, rack in zip(cluster.nodes, racks):
            row = next(line.split() for line in text.splitlines() if line.split()[1:2] == [f"127.0.0.1:{n.port}"])
            assert row == [str(n.node_id), f"127.0.0.1:{n.port}", rack, "broker,controller", "unfenced"]
        assert f"quorum __cluster_metadata-0: leader {controller}, leader epoch " in text
        assert "under-replicated or offline partitions: none" in text

        with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("rf3", num_partitions=2, replication_factor=3)])
        deadline = time.monotonic() + 20
        while "rf3" not in brokers_and_topics(cluster.node(1))[1]:
            assert time.monotonic() < deadline, "topic rf3 not on node 1"
            time.sleep(0.1)
        out = status("--bootstrap-server", f"127.0.0.1:{free_port()},{cluster.node(1).bootstrap_servers}", "--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["bootstrap_server"] == cluster.node(1).bootstrap_servers  # the first one answering
        assert doc["controller_id"] == controller and doc["cluster_id"]
        assert [(n["node_id"], n["port"], n["rack"], n["roles"]) for n in doc["nodes"]] == [
            (n.node_id, n.port, rack, ["broker", "controller"]) for n, rack in zip(cluster.nodes, racks)
        ]
        q = doc["quorum"]
        assert doc["quorum_error"] is None and q["leader_id"] == controller and q["high_watermark"] > 0
        assert sorted(v["node_id"] for v in q["voters"]) == [1, 2, 3]
        assert [v["status"] for v in q["voters"] if v["node_id"] == controller] == ["leader"]
        assert all(v["lag"] is not None and v["lag"] >= 0 for v in q["voters"])
        assert all(v["last_fetch_age_ms"] is not None for v in q["voters"] if v["node_id"] != controller)
        # every replica starts in the ISR and the followers keep up: nothing under-replicated
        assert doc["partitions"] == [], doc["partitions"]

        # Uneven racks (east = {1, 3}, west = {2}): with replication factor 2 every partition
        # has a replica in each rack, and leaders still go round robin over all three brokers.
        with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("spread", num_partitions=6, replication_factor=2)])
            deadline = time.monotonic() + 20
            while True:
                parts = admin.describe_topics(["spread"])["spread"].partitions
                if len(parts) == 6 and all(p.leader >= 0 for p in parts):
                    break
                assert time.monotonic() < deadline, f"topic spread not ready: {parts}"
                time.sleep(0.1)
        rack = dict(zip((n.node_id for n in cluster.nodes), racks))
        for p in parts:
            assert sorted(rack[r] for r in p.replicas) == ["east", "west"], (p.partition, p.replicas)
        assert {p.leader for p in parts} == {1, 2, 3}


def test_cluster_status_of_a_single_broker_and_serve_rack(tmp_path):
    """A single node is a quorum of one voter: it is the controller, leads the metadata log
    and answers DescribeQuorum as a cluster does."""
    bp = BrokerProcess(tmp_path / "data", extra=["--rack", "rack-a"]).start()
    try:
        out = status("--bootstrap-server", bp.bootstrap_servers)
        assert out.returncode == 0, out.stderr
        assert "Traceback" not in out.stdout + out.stderr
        assert f"1   {bp.bootstrap_servers}  rack-a  broker,controller  unfenced" in out.stdout
        assert "quorum __cluster_metadata-0: leader 1, leader epoch " in out.stdout
        assert "under-replicated or offline partitions: none" in out.stdout
        doc = json.loads(status("--bootstrap-server", bp.bootstrap_servers, "--json").stdout)
        q = doc["quorum"]
        assert doc["quorum_error"] is None and doc["controller_id"] == 1
        assert q["leader_id"] == 1 and q["high_watermark"] > 0 and q["observers"] == []
        assert [(v["node_id"], v["status"], v["lag"]) for v in q["voters"]] == [(1, "leader", 0)]
    finally:
        assert bp.stop() == 0


def test_cluster_status_unreachable_and_bad_arguments():
    dead = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    out = status("--bootstrap-server", dead)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith(f"logbroker: cannot reach the cluster at {dead}: ")
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert time.monotonic() - t0 < 15
    bad = status("--bootstrap-server", "no-port-here")
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr and "'no-port-here'" in bad.stderr
    assert status("--no-such-flag").returncode == 2
    usage = subprocess.run(
        [sys.executable, "-m", "logbroker", "cluster"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert usage.returncode == 2 and "status" in usage.stderr
