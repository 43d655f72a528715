"""The Java client's transactions (transactions v2) in a three-node cluster under faults, as
Kafka's own transactions system test runs them: Kafka's TransactionalMessageCopier copies a
topic (consume-transform-produce, offsets sent to the transaction) while the broker
coordinating its transactional id is killed with SIGKILL and brought back, and then the
copier itself is killed mid-transaction and a second copier with the same transactional id
takes over (fencing the first and aborting what it left open). A read_committed consumer then
sees every input record exactly once, and the group has committed the end of the input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import wait_until
from logbroker import Cluster
from logbroker.coord.transaction_log import TRANSACTION_STATE_TOPIC, partition_for
from replication_helpers import create, full_isr, layout
from test_cluster_transactions import CONFIG, read_committed

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                                reason="Java 17 and Maven are needed for the Java client")

RECORDS = 4000


@pytest.fixture(scope="module")
def kafka_tools():
    from benches.peers.kafka import install

    return install()


def processed(out: Path) -> int:
    """The copier's count of records copied in committed transactions (its last status line)."""
    total = 0
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith("{") and '"totalProcessed"' in line:
            try:
                total = json.loads(line)["totalProcessed"]
            except ValueError:
                pass
    return total


@pytest.mark.timeout(400)
def test_java_copier_survives_killing_its_coordinator_and_itself(tmp_path, kafka_tools):
    with Cluster(3, data_dir=tmp_path / "cluster", config=CONFIG) as cluster:
        create(cluster.nodes[0], "jci", 1, 3)
        create(cluster.nodes[0], "jco", 3, 3)
        full_isr(cluster, "jci", 1)
        full_isr(cluster, "jco", 3)
        bs = cluster.bootstrap_servers
        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True})
        for i in range(RECORDS):
            p.produce("jci", value=str(i).encode())
        assert p.flush(60) == 0

        cmd = kafka_tools.tools_java("org.apache.kafka.tools.TransactionalMessageCopier", [
            "--broker-list", bs, "--input-topic", "jci", "--input-partition", "0", "--output-topic", "jco",
            "--transactional-id", "jcopy", "--consumer-group", "jcg", "--max-messages", str(RECORDS),
            "--transaction-size", "20", "--transaction-timeout", "20000"])
        out1 = tmp_path / "copier1.out"
        with out1.open("w") as f1:
            first = subprocess.Popen(cmd, stdout=f1, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: processed(out1) >= 400, timeout=120, what="the first copier under way")
            full_isr(cluster, TRANSACTION_STATE_TOPIC, 5)
            index = partition_for("jcopy", 5)
            coordinator = layout(cluster.nodes[0])[(TRANSACTION_STATE_TOPIC, index)][0]
            cluster.node(coordinator).kill()
            at_kill = processed(out1)
            wait_until(lambda: processed(out1) >= at_kill + 400, timeout=120,
                       what="the copier going on with a new transaction coordinator")
            cluster.node(coordinator).restart()
            wait_until(lambda: processed(out1) >= at_kill + 800, timeout=120, what="the copier after the restart")
        finally:
            first.kill()  # mid-transaction, most likely: a crashed producer
            first.wait(30)
        assert processed(out1) < RECORDS, "the first copier finished before it could be killed"

        out2 = tmp_path / "copier2.out"
        with out2.open("w") as f2:
            second = subprocess.run(cmd, stdout=f2, stderr=subprocess.STDOUT, timeout=300)
        text = out2.read_text(errors="replace")
        assert second.returncode == 0, text[-3000:]
        assert '"stage":"ShutdownComplete"' in text and '"remaining":0' in text, text[-2000:]

        full_isr(cluster, "jco", 3)
        got = read_committed(bs, "jco", 3, RECORDS)
        values = sorted(int(v) for v in got)
        assert values == list(range(RECORDS)), (len(values), len(set(values)))
        g = Consumer({"bootstrap.servers": bs, "group.id": "jcg"})
        try:
            assert g.committed([TopicPartition("jci", 0)], timeout=10)[0].offset == RECORDS
        finally:
            g.close()
