"""`logbroker mirror` with Apache Kafka itself (4.x, KRaft combined mode, from
benches/peers/kafka.py) on either side: Kafka -> logbroker and logbroker -> Kafka. Records
(keys, values, headers, timestamps, partitions) kept, aborted transactions left behind, a
source group's offsets translated onto the target, a later run copying only what is new, and
exactly-once through a target transaction."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import needs_java
from test_mirror import mirror, read_all, strip

from logbroker import Broker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = needs_java

# Recent timestamps: Kafka's retention (7 days) deletes segments of records older than that.
NOW_MS = int(time.time() * 1000) - 60_000


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    from benches.peers.kafka import KafkaPeer, install

    peer = KafkaPeer(data_root=tmp_path_factory.mktemp("kafka"), install_info=install())
    peer.start()
    try:
        yield peer.bootstrap
    finally:
        peer.stop()


@pytest.fixture
def ours(tmp_path):
    with Broker(data_dir=tmp_path / "data") as b:
        yield b.bootstrap_servers


def fill_source(src: str, prefix: str) -> None:
    admin = AdminClient({"bootstrap.servers": src})
    for name, n in ((f"{prefix}-m1", 3), (f"{prefix}-m2", 1)):
        admin.create_topics([NewTopic(name, n, 1)])[name].result(30)
    p = Producer({"bootstrap.servers": src})
    for i in range(30):
        p.produce(
            f"{prefix}-m1",
            key=b"k%d" % i,
            value=b"v%d" % i,
            partition=i % 3,
            headers=[("n", b"%d" % i)],
            timestamp=NOW_MS + i,
        )
    assert p.flush(30) == 0
    t = Producer({"bootstrap.servers": src, "transactional.id": f"{prefix}-txn"})
    t.init_transactions(30)
    for value, commit in ((b"committed-1", True), (b"aborted", False), (b"committed-2", True)):
        t.begin_transaction()
        t.produce(f"{prefix}-m2", value=value)
        t.flush(30)
        t.commit_transaction(30) if commit else t.abort_transaction(30)
    app = Consumer({"bootstrap.servers": src, "group.id": f"{prefix}-app", "enable.auto.commit": False})
    offsets = [
        TopicPartition(f"{prefix}-m1", 0, 4),
        TopicPartition(f"{prefix}-m1", 1, 10),
        TopicPartition(f"{prefix}-m2", 0, 4),
    ]
    for _attempt in range(10):
        # A new group's first commit can meet a coordinator still loading (NOT_COORDINATOR on
        # Kafka 4.4 here too): librdkafka leaves the retry to the application.
        try:
            app.commit(offsets=offsets, asynchronous=False)
            break
        except KafkaException as e:
            if not e.args[0].retriable() and e.args[0].code() not in (
                KafkaError.NOT_COORDINATOR,
                KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
            ):
                raise
            time.sleep(0.5)
    app.close()


def committed(bs: str, group: str, tps: list[TopicPartition]) -> list[int]:
    g = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        return [x.offset for x in g.committed(tps, timeout=30)]
    finally:
        g.close()


@pytest.mark.parametrize("direction", ["kafka-to-logbroker", "logbroker-to-kafka"])
def test_mirror_with_apache_kafka(kafka, ours, direction):
    src, dst = (kafka, ours) if direction == "kafka-to-logbroker" else (ours, kafka)
    prefix = direction.split("-")[0]
    m1, m2 = f"{prefix}-m1", f"{prefix}-m2"
    fill_source(src, prefix)

    r = mirror(src, dst, "--topics", f"{prefix}-m.*", "--sync-group-offsets", f"{prefix}-app")
    assert r.returncode == 0, r.stderr
    md = AdminClient({"bootstrap.servers": dst}).list_topics(timeout=30)
    assert len(md.topics[m1].partitions) == 3 and len(md.topics[m2].partitions) == 1
    assert strip(read_all(dst, m1, 3)) == strip(read_all(src, m1, 3))
    assert [v for _, _, v, _, _ in read_all(dst, m2, 1)[0]] == [b"committed-1", b"committed-2"]
    # m1 keeps its offsets; m2's source offset 4 (after the aborted record and its marker) is
    # the target offset of committed-2
    tps = [TopicPartition(m1, 0), TopicPartition(m1, 1), TopicPartition(m2, 0)]
    assert committed(dst, f"{prefix}-app", tps) == [4, 10, 1]

    # a later run copies only what is new
    p = Producer({"bootstrap.servers": src})
    for i in range(30, 36):
        p.produce(m1, key=b"k%d" % i, value=b"v%d" % i, partition=i % 3, timestamp=NOW_MS + i)
    assert p.flush(30) == 0
    r = mirror(src, dst, "--topics", f"{prefix}-m.*")
    assert r.returncode == 0 and "copied 6 record(s)" in r.stderr, r.stderr
    assert strip(read_all(dst, m1, 3)) == strip(read_all(src, m1, 3))

    # exactly-once: the copy and the progress commit in one target transaction
    e1 = f"{prefix}-e1"
    admin = AdminClient({"bootstrap.servers": src})  # held: a dropped client cancels its futures
    admin.create_topics([NewTopic(e1, 2, 1)])[e1].result(30)
    for i in range(200):
        p.produce(e1, value=b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    r = mirror(src, dst, "--topics", e1, "--exactly-once", "--group", f"{prefix}-eos")
    assert r.returncode == 0, r.stderr
    got = read_all(dst, e1, 2, "read_committed")
    assert sorted(int(v) for rs in got.values() for _, _, v, _, _ in rs) == list(range(200))
    assert committed(dst, f"{prefix}-eos", [TopicPartition(e1, 0), TopicPartition(e1, 1)]) == [100, 100]
