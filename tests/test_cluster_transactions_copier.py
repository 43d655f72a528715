"""logbroker's own client and librdkafka (confluent-kafka), transactional
consume-transform-produce in a three-node cluster under faults: a copier process (tests/transactional_copier.py) runs while the broker
coordinating its transactional id is killed with SIGKILL and brought back; then the copier
itself is killed mid-run and a second copier with the same transactional id finishes the
copy. A read_committed consumer sees every input record exactly once, and the group has
committed the end of the input."""

from __future__ import annotations

import json
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

RECORDS = 3000
COPIER = Path(__file__).resolve().parent / "transactional_copier.py"


def committed(out: Path) -> int:
    done = 0
    for line in out.read_text(errors="replace").splitlines():
        if line.startswith('{"committed"'):
            done = json.loads(line)["committed"]
    return done


@pytest.mark.timeout(400)
@pytest.mark.parametrize("client", ["logbroker", "librdkafka"])
def test_a_copier_survives_killing_its_coordinator_and_itself(tmp_path, client):
    with Cluster(3, data_dir=tmp_path / "cluster", config=CONFIG) as cluster:
        create(cluster.nodes[0], "pci", 1, 3)
        create(cluster.nodes[0], "pco", 3, 3)
        full_isr(cluster, "pci", 1)
        full_isr(cluster, "pco", 3)
        bs = cluster.bootstrap_servers
        p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True})
        for i in range(RECORDS):
            p.produce("pci", value=str(i).encode())
        assert p.flush(60) == 0

        cmd = [sys.executable, str(COPIER), bs, "pci", "pco", "py-copy", "pcg", str(RECORDS), client]
        out1 = tmp_path / "copier1.out"
        with out1.open("w") as f1:
            first = subprocess.Popen(cmd, stdout=f1, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: committed(out1) >= 300 or first.poll() is not None, timeout=120,
                       what="the first copier under way")
            assert first.poll() is None, out1.read_text(errors="replace")[-3000:]
            full_isr(cluster, TRANSACTION_STATE_TOPIC, 5)
            index = partition_for("py-copy", 5)
            coordinator = layout(cluster.nodes[0])[(TRANSACTION_STATE_TOPIC, index)][0]
            cluster.node(coordinator).kill()
            at_kill = committed(out1)
            wait_until(lambda: committed(out1) >= at_kill + 300, timeout=120,
                       what="the copier going on with a new transaction coordinator")
            cluster.node(coordinator).restart()
            wait_until(lambda: committed(out1) >= at_kill + 600, timeout=120, what="the copier after the restart")
        finally:
            first.kill()
            first.wait(30)
        assert committed(out1) < RECORDS, "the first copier finished before it could be killed"

        out2 = tmp_path / "copier2.out"
        with out2.open("w") as f2:
            second = subprocess.run(cmd, stdout=f2, stderr=subprocess.STDOUT, timeout=300)
        assert second.returncode == 0, out2.read_text(errors="replace")[-3000:]
        assert committed(out2) == RECORDS

        full_isr(cluster, "pco", 3)
        values = sorted(int(v) for v in read_committed(bs, "pco", 3, RECORDS))
        assert values == list(range(RECORDS)), (len(values), len(set(values)))
        g = Consumer({"bootstrap.servers": bs, "group.id": "pcg"})
        try:
            assert g.committed([TopicPartition("pci", 0)], timeout=10)[0].offset == RECORDS
        finally:
            g.close()
