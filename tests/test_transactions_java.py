"""The Java client's transactions against logbroker: Kafka's own TransactionalMessageCopier
(consume-transform-produce with send_offsets_to_transaction, randomly aborting some
transactions) copies a topic; a read_committed consumer then sees every input record
exactly once, and the copier's group has committed the end of the input."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import needs_java
from rawclient import RawClient  # noqa: E402

from logbroker.protocol import REQUESTS  # noqa: E402

pytestmark = needs_java


@pytest.fixture(scope="module")
def kafka_tools():
    from benches.peers.kafka import install

    return install()


def test_java_transactional_copier_with_random_aborts_is_exactly_once(broker, kafka_tools):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for t in ("jin", "jout"):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(10)
    p = Producer({"bootstrap.servers": bs})
    for i in range(500):
        p.produce("jin", value=str(i).encode())
    assert p.flush(30) == 0
    cmd = kafka_tools.tools_java(
        "org.apache.kafka.tools.TransactionalMessageCopier",
        [
            "--broker-list",
            bs,
            "--input-topic",
            "jin",
            "--input-partition",
            "0",
            "--output-topic",
            "jout",
            "--transactional-id",
            "jcopy",
            "--consumer-group",
            "jgroup",
            "--max-messages",
            "500",
            "--transaction-size",
            "50",
            "--enable-random-aborts",
        ],
    )
    r = subprocess.run(cmd, capture_output=True, timeout=180)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert '"stage":"ShutdownComplete"' in r.stdout.decode() and '"remaining":0' in r.stdout.decode()

    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "check",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition("jout", 0, 0)])
    values, last = [], time.monotonic()
    try:
        while time.monotonic() - last < 3:
            m = c.poll(0.2)
            if m is not None and not m.error():
                values.append(int(m.value()))
                last = time.monotonic()
        assert sorted(values) == list(range(500)), (len(values), len(set(values)))
        committed = c.committed([TopicPartition("jin", 0)], timeout=10)
    finally:
        c.close()
    g = Consumer({"bootstrap.servers": bs, "group.id": "jgroup"})
    try:
        assert g.committed([TopicPartition("jin", 0)], timeout=10)[0].offset == 500
    finally:
        g.close()
    assert committed[0].offset < 0, "the checking consumer committed nothing"
    # Kafka's kafka-transactions tool (ListTransactions, DescribeTransactions) sees the id
    txns = "org.apache.kafka.tools.TransactionsCommand"
    out = subprocess.run(
        kafka_tools.tools_java(txns, ["--bootstrap-server", bs, "list"]), capture_output=True, timeout=120
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert "jcopy" in out.stdout.decode() and "CompleteCommit" in out.stdout.decode(), out.stdout.decode()
    out = subprocess.run(
        kafka_tools.tools_java(txns, ["--bootstrap-server", bs, "describe", "--transactional-id", "jcopy"]),
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert "CompleteCommit" in out.stdout.decode(), out.stdout.decode()
    # the Java producer followed transactions v2 (transaction.version 2 is finalized): every
    # EndTxn bumped its epoch, so at least one per transaction of 50 records
    with RawClient(bs) as rc:
        state = rc.request(65, 0, REQUESTS[65](transactional_ids=["jcopy"])).transaction_states[0]
    assert state.error_code == 0 and state.producer_epoch >= 500 // 50, state
    out = subprocess.run(
        kafka_tools.tools_java(
            txns, ["--bootstrap-server", bs, "describe-producers", "--topic", "jout", "--partition", "0"]
        ),
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    assert "ProducerId" in out.stdout.decode(), out.stdout.decode()
    out = subprocess.run(
        kafka_tools.tools_java(txns, ["--bootstrap-server", bs, "find-hanging", "--broker-id", "1"]),
        capture_output=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    rows = [line for line in out.stdout.decode().splitlines()[1:] if line.strip()]
    assert rows == [], f"hanging transactions reported: {out.stdout.decode()}"  # a header, no rows
