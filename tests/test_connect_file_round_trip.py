"""Kafka Connect 4.4, Apache Kafka's own framework run unchanged, against three logbroker
nodes: a distributed worker (its config, offset and status topics replicated 3 ways) with the
file source and file sink connectors, configured through its REST API. The worker is stopped
midway while a broker is killed with -9; both come back, more lines are appended, and the
sink's file equals the source's, line for line."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import needs_java
from replication_helpers import FAST, create, full_isr, layout

from logbroker import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = needs_java

CONFIG = {**FAST, "offsets.topic.replication.factor": 3, "min.insync.replicas": 2}
SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@pytest.fixture(scope="module")
def frameworks():
    from benches.peers.kafka import install, install_frameworks

    inst = install()
    install_frameworks(inst)
    return inst


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Worker:
    """connect-distributed (ConnectDistributed) as a process; its output in `log`."""

    def __init__(self, inst, bootstrap: str, workdir: Path):
        self.port = free_port()
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": "connect-cluster",
            "listeners": f"http://127.0.0.1:{self.port}",
            "config.storage.topic": "connect-configs",
            "offset.storage.topic": "connect-offsets",
            "status.storage.topic": "connect-status",
            "config.storage.replication.factor": "3",
            "offset.storage.replication.factor": "3",
            "status.storage.replication.factor": "3",
            "offset.storage.partitions": "5",
            "status.storage.partitions": "3",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.flush.interval.ms": "500",
            "plugin.discovery": "only_scan",
        }
        path = workdir / "worker.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.cmd = inst.framework_java("connect", "org.apache.kafka.connect.cli.ConnectDistributed", [str(path)])
        self.log = workdir / "worker.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 90.0) -> Worker:
        with self.log.open("a") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.rest("GET", "/connectors")
                return self
            except (urllib.error.URLError, ConnectionError):
                assert self.proc.poll() is None, f"the worker exited:\n{self.text()[-4000:]}"
                assert time.monotonic() < deadline, f"the worker's REST API did not answer:\n{self.text()[-4000:]}"
                time.sleep(0.3)

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def rest(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def put_connector(self, name: str, config: dict, timeout: float = 60.0) -> None:
        """PUT the connector's config; the worker answers 409 while it rebalances, so retry."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.rest("PUT", f"/connectors/{name}/config", config)
                return
            except urllib.error.HTTPError as e:
                assert e.code == 409 and time.monotonic() < deadline, f"{name}: {e.code} {e.read()[:500]!r}"
                time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def wait_for_lines(path: Path, n: int, worker: Worker, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(lines_of(path)) < n:
        assert time.monotonic() < deadline, (
            f"{path} has {len(lines_of(path))} of {n} lines after {timeout:.0f} s\n{worker.text()[-4000:]}"
        )
        time.sleep(0.3)


def test_file_source_to_file_sink_survives_a_worker_restart_and_a_broker_kill(tmp_path, frameworks):
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    first = [f"line {i} " + "x" * (i % 50) for i in range(3000)]
    second = [f"line {i} " + "y" * (i % 50) for i in range(3000, 6000)]
    source.write_text("".join(s + "\n" for s in first))
    with Cluster(3, data_dir=tmp_path / "cluster", config=CONFIG) as cluster:
        node0 = cluster.nodes[0]
        create(node0, "file-lines", 1, 3)
        full_isr(cluster, "file-lines", 1)
        worker = Worker(frameworks, cluster.bootstrap_servers, tmp_path)
        try:
            worker.start()
            worker.put_connector(
                "file-source", {"connector.class": SOURCE, "tasks.max": "1", "file": str(source), "topic": "file-lines"}
            )
            worker.put_connector(
                "file-sink", {"connector.class": SINK, "tasks.max": "1", "file": str(sink), "topics": "file-lines"}
            )
            wait_for_lines(sink, 1000, worker, 90)
            # the worker stops (its tasks commit what they did) and the data's leader dies
            worker.stop()
            leader = layout(node0)[("file-lines", 0)][0]
            victim = next(n for n in cluster.nodes if n.node_id == leader)
            victim.kill()
            with source.open("a") as f:
                f.write("".join(s + "\n" for s in second))
            worker.start()
            victim.start()
            wait_for_lines(sink, len(first) + len(second), worker, 120)
            time.sleep(2)  # a line copied twice would show up after the last one
            status = worker.rest("GET", "/connectors/file-sink/status")
        finally:
            worker.stop()
    assert lines_of(sink) == first + second
    assert status["connector"]["state"] == "RUNNING", status
    assert [t["state"] for t in status["tasks"]] == ["RUNNING"], status
