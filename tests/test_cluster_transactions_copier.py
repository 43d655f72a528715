"""Transactional consume-transform-produce in a three-node cluster under faults, as Kafka's
own transactions system test runs it, with three copiers: Kafka's TransactionalMessageCopier
(the Java client 4.x, transactions v2), and tests/transactional_copier.py on librdkafka
(confluent-kafka) and on logbroker's client (transactions v1 with partition verification).
A copier runs while the broker coordinating its transactional id is killed with SIGKILL and
brought back; then the copier itself is killed mid-run and a second one with the same
transactional id takes over (fencing the first and aborting what it left open). A
read_committed consumer then sees every input record exactly once, and the group has
committed the end of the input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import require_java, wait_until
from replication_helpers import create, full_isr, layout
from test_cluster_transactions import CONFIG, read_committed

from logbroker import Cluster
from logbroker.coord.groups.offsets_topic import OFFSETS_TOPIC
from logbroker.coord.groups.offsets_topic import partition_for as offsets_partition_for
from logbroker.coord.groups.transaction_log import TRANSACTION_STATE_TOPIC, partition_for

RECORDS = 3000
PER_TRANSACTION = 20
COPIER = Path(__file__).resolve().parent / "transactional_copier.py"
JAVA_COPIER = "org.apache.kafka.tools.TransactionalMessageCopier"


def copied(out: Path) -> int:
    """Records the copier has copied in committed transactions (its last progress line:
    ours print {"committed": N}, Kafka's {"totalProcessed": N, ...})."""
    done = 0
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            done = doc.get("committed", doc.get("totalProcessed", done))
    return done


def progress(out: Path, records: int, what: str) -> None:
    """Wait until the copier has committed `records`; on a timeout, fail with its last lines."""
    try:
        wait_until(lambda: copied(out) >= records, timeout=120, what=what)
    except AssertionError as e:
        raise AssertionError(f"{e}; the copier's output ends:\n{out.read_text(errors='replace')[-4000:]}") from None


def group_for(cluster, client: str, bs: str) -> str:
    """The copier's consumer group. For librdkafka, one whose coordinator is not on the node
    that coordinates the transactional id (the node the test kills): librdkafka's
    send_offsets_to_transaction() can hang past its timeout when the group coordinator drops
    out of Metadata (confluentinc/librdkafka#5511 and #5456; seen here as a copier silent for
    minutes), a client bug the test is not about. The other clients meet both coordinators
    on one node whenever the layout puts them there."""
    if client != "librdkafka":
        return "cg"
    p = Producer({"bootstrap.servers": bs, "transactional.id": "copy"})
    p.init_transactions(60)  # creates the transaction state topic
    del p
    probe = Consumer({"bootstrap.servers": bs, "group.id": "probe"})
    try:
        wait_until(
            lambda: probe.committed([TopicPartition("ci", 0)], timeout=5) is not None,
            timeout=60,
            what="the offsets topic",
        )
    finally:
        probe.close()
    full_isr(cluster, TRANSACTION_STATE_TOPIC, 5)
    parts = layout(cluster.nodes[0])
    txn_node = parts[(TRANSACTION_STATE_TOPIC, partition_for("copy", 5))][0]
    n = sum(1 for (t, _) in parts if t == OFFSETS_TOPIC)
    for group in ["cg"] + [f"cg-{i}" for i in range(1, 50)]:
        if parts[(OFFSETS_TOPIC, offsets_partition_for(group, n))][0] != txn_node:
            return group
    raise AssertionError(f"every candidate group is coordinated by node {txn_node}")


def copier_command(client: str, bs: str, group: str) -> list[str]:
    if client == "java":
        require_java()
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from benches.peers.kafka import install

        return install().tools_java(
            JAVA_COPIER,
            [
                "--broker-list",
                bs,
                "--input-topic",
                "ci",
                "--input-partition",
                "0",
                "--output-topic",
                "co",
                "--transactional-id",
                "copy",
                "--consumer-group",
                group,
                "--max-messages",
                str(RECORDS),
                "--transaction-size",
                str(PER_TRANSACTION),
                "--transaction-timeout",
                "20000",
            ],
        )
    return [sys.executable, str(COPIER), bs, "ci", "co", "copy", group, str(RECORDS), client]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("client", ["java", "librdkafka", "logbroker"])
def test_a_copier_survives_killing_its_coordinator_and_itself(tmp_path, client):
    with Cluster(3, data_dir=tmp_path / "cluster", config=CONFIG) as cluster:
        create(cluster.nodes[0], "ci", 1, 3)
        create(cluster.nodes[0], "co", 3, 3)
        full_isr(cluster, "ci", 1)
        full_isr(cluster, "co", 3)
        bs = cluster.bootstrap_servers
        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True})
        for i in range(RECORDS):
            p.produce("ci", value=str(i).encode())
        assert p.flush(60) == 0

        group = group_for(cluster, client, bs)
        cmd = copier_command(client, bs, group)
        out1 = tmp_path / "copier1.out"
        with out1.open("w") as f1:
            first = subprocess.Popen(cmd, stdout=f1, stderr=subprocess.STDOUT)
        try:
            wait_until(
                lambda: copied(out1) >= 300 or first.poll() is not None, timeout=120, what="the first copier under way"
            )
            assert first.poll() is None, out1.read_text(errors="replace")[-3000:]
            full_isr(cluster, TRANSACTION_STATE_TOPIC, 5)
            index = partition_for("copy", 5)
            coordinator = layout(cluster.nodes[0])[(TRANSACTION_STATE_TOPIC, index)][0]
            cluster.node(coordinator).kill()
            at_kill = copied(out1)
            progress(out1, at_kill + 300, "the copier going on with a new transaction coordinator")
            cluster.node(coordinator).restart()
            progress(out1, at_kill + 600, "the copier after the restart")
        finally:
            first.kill()  # mid-transaction, most likely: a crashed producer
            first.wait(30)
        assert copied(out1) < RECORDS, "the first copier finished before it could be killed"

        out2 = tmp_path / "copier2.out"
        with out2.open("w") as f2:
            second = subprocess.run(cmd, stdout=f2, stderr=subprocess.STDOUT, timeout=300)
        text = out2.read_text(errors="replace")
        assert second.returncode == 0, text[-3000:]
        if client == "java":
            assert '"stage":"ShutdownComplete"' in text and '"remaining":0' in text, text[-2000:]
        else:
            assert copied(out2) == RECORDS, text[-2000:]

        full_isr(cluster, "co", 3)
        values = sorted(int(v) for v in read_committed(bs, "co", 3, RECORDS))
        assert values == list(range(RECORDS)), (len(values), len(set(values)))
        g = Consumer({"bootstrap.servers": bs, "group.id": group})
        try:
            assert g.committed([TopicPartition("ci", 0)], timeout=10)[0].offset == RECORDS
        finally:
            g.close()
