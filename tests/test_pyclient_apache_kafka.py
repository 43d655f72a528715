"""logbroker's Python client against Apache Kafka itself (4.3.1, KRaft combined mode, installed
from Maven Central by benches/peers/kafka.py): it is a Kafka client, not only ours.

Round trips with every codec and idempotence, keyed placement, a two-member group with
commits, and the Admin calls, all against the real broker."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from conftest import needs_java

import logbroker
from logbroker.client import errors

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = needs_java

TP = logbroker.TopicPartition


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    from benches.peers.kafka import KafkaPeer, install

    peer = KafkaPeer(data_root=tmp_path_factory.mktemp("kafka"), install_info=install())
    peer.start()
    try:
        yield peer.bootstrap
    finally:
        peer.stop()


def poll_n(c: logbroker.Consumer, n: int, timeout: float = 30) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(c.poll(0.2))
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(kafka, codec):
    topic = f"k-{codec}"
    with logbroker.Admin(kafka) as a:
        a.create_topics([logbroker.NewTopic(topic, 2)])
    with logbroker.Producer(kafka, compression_type=codec, linger_ms=2) as p:
        futures = [
            p.send(
                topic,
                f"value-{i}".encode() * 5,
                key=f"key-{i}".encode(),
                headers=[("h", str(i).encode())],
                timestamp=2_000_000 + i,
            )
            for i in range(400)
        ]
        p.flush(30)
        metas = [f.result(10) for f in futures]
    # Keyed records land where Kafka's murmur2 partitioner puts them.
    for i, m in enumerate(metas):
        assert m.partition == logbroker._core.partition_for_key(f"key-{i}".encode(), 2)
    with logbroker.Consumer(kafka, auto_offset_reset="earliest") as c:
        c.assign([TP(topic, 0), TP(topic, 1)])
        recs = poll_n(c, 400)
    assert len(recs) == 400
    by_key = {r.key: r for r in recs}
    r = by_key[b"key-17"]
    assert r.value == b"value-17" * 5 and r.headers == [("h", b"17")]
    assert r.timestamp == 2_000_017 and r.timestamp_type == 0
    assert (r.partition, r.offset) == (metas[17].partition, metas[17].offset)
    # Per-partition order is the send order (idempotent, max.in.flight 5).
    for part in (0, 1):
        offsets = [x.offset for x in recs if x.partition == part]
        assert offsets == list(range(len(offsets)))


def test_group_of_two_with_commits(kafka):
    topic = "k-group"
    with logbroker.Admin(kafka) as a:
        a.create_topics([logbroker.NewTopic(topic, 4)])
    with logbroker.Producer(kafka) as p:
        for i in range(200):
            p.send(topic, str(i).encode(), partition=i % 4)
        p.flush(30)
    conf = {
        "group_id": "kg",
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "heartbeat_interval_ms": 200,
    }
    with logbroker.Consumer(kafka, **conf) as c1, logbroker.Consumer(kafka, **conf) as c2:
        c1.subscribe([topic])
        c2.subscribe([topic])
        # Every record is read at least once. Nothing is committed yet, so a partition that
        # moves in the eager rebalance is read again from the start by its new owner: count
        # distinct (partition, offset) pairs, not records returned.
        seen: set[tuple[int, int]] = set()
        deadline = time.monotonic() + 60
        while len(seen) < 200 and time.monotonic() < deadline:
            for r in c1.poll(0.1) + c2.poll(0.1):
                seen.add((r.partition, r.offset))
        assert seen == {(p, o) for p in range(4) for o in range(50)}

        # Both members own partitions once the group is stable, and each has read its own
        # to the end: a member handed a partition in the eager rebalance reads it again from
        # the start (nothing was committed), and commit() commits positions.
        def caught_up(c: logbroker.Consumer) -> bool:
            try:
                return len(c.assignment()) == 2 and all(c.position(tp, timeout=5) == 50 for tp in c.assignment())
            except errors.KafkaError:
                return False  # the assignment moved meanwhile

        while not (caught_up(c1) and caught_up(c2)) and time.monotonic() < deadline:
            c1.poll(0.1)
            c2.poll(0.1)
        assert sorted(c1.assignment() + c2.assignment()) == [TP(topic, p) for p in range(4)]
        c1.commit()
        c2.commit()
        committed = c1.committed([TP(topic, p) for p in range(4)])
        assert sum(committed[TP(topic, p)] for p in range(4)) == 200
    with logbroker.Admin(kafka) as a:
        assert any(g[0] == "kg" for g in a.list_groups())
        assert a.describe_groups(["kg"])["kg"].state == "Empty"
        a.delete_groups(["kg"])


def test_kip848_group_against_kafka(kafka):
    """group.protocol=consumer against Kafka's own KIP-848 coordinator: the broker assigns,
    a second member takes half the partitions incrementally, every record is read once."""
    topic = "k-848"
    with logbroker.Admin(kafka) as a:
        a.create_topics([logbroker.NewTopic(topic, 4)])
    conf = {"group_id": "k848", "group_protocol": "consumer", "auto_offset_reset": "earliest"}
    revoked: list = []
    got: list = []
    with logbroker.Consumer(kafka, **conf) as c1, logbroker.Consumer(kafka, **conf) as c2:
        c1.subscribe([topic], on_revoke=lambda ps: revoked.append(sorted(ps)))
        deadline = time.monotonic() + 60
        while len(c1.assignment()) != 4 and time.monotonic() < deadline:
            got.extend(c1.poll(0.1))
        assert len(c1.assignment()) == 4
        c2.subscribe([topic])
        with logbroker.Producer(kafka) as p:
            for i in range(200):
                p.send(topic, str(i).encode(), partition=i % 4)
        while (len(got) < 200 or len(c2.assignment()) != 2) and time.monotonic() < deadline:
            got.extend(c1.poll(0.1))
            got.extend(c2.poll(0.1))
        assert sorted(c1.assignment() + c2.assignment()) == [TP(topic, p) for p in range(4)]
        assert len(c2.assignment()) == 2 and revoked == [c2.assignment()]
    assert sorted(int(r.value) for r in got) == list(range(200))


def test_admin_against_kafka(kafka):
    with logbroker.Admin(kafka) as a:
        a.create_topics([logbroker.NewTopic("k-adm", 1, config={"retention.ms": "60000"})])
        with pytest.raises(errors.TopicAlreadyExistsError):
            a.create_topics(["k-adm"])
        assert "k-adm" in a.list_topics()
        assert [p.partition for p in a.describe_topics(["k-adm"])["k-adm"].partitions] == [0]
        a.create_partitions({"k-adm": 3})
        deadline = time.monotonic() + 20
        while len(a.describe_topics(["k-adm"])["k-adm"].partitions) != 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(a.describe_topics(["k-adm"])["k-adm"].partitions) == 3
        assert a.describe_configs([("topic", "k-adm")])[("topic", "k-adm")]["retention.ms"] == "60000"
        a.alter_configs({("topic", "k-adm"): {"retention.ms": "120000"}})
        assert a.describe_configs([("topic", "k-adm")])[("topic", "k-adm")]["retention.ms"] == "120000"
        with logbroker.Producer(kafka) as p:
            for i in range(5):
                p.send("k-adm", b"x", partition=0, timestamp=5000 + i)
        assert a.list_offsets({("k-adm", 0): "latest"})[TP("k-adm", 0)][0] == 5
        assert a.list_offsets({("k-adm", 0): 5003})[TP("k-adm", 0)] == (3, 5003)
        cluster = a.describe_cluster()
        assert cluster.cluster_id and [b.node_id for b in cluster.brokers] == [1]
        a.delete_topics(["k-adm"])
        deadline = time.monotonic() + 20
        while "k-adm" in a.list_topics() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "k-adm" not in a.list_topics()


def test_transactions_against_kafka(kafka):
    """Our Producer's transactions (v1 protocol, capped request versions) with Kafka's own
    transaction coordinator: a commit is seen by read_committed, an abort is not, and offsets
    sent with the transaction are the group's committed offsets."""
    with logbroker.Admin(kafka) as a:
        a.create_topics([logbroker.NewTopic("k-txn", 2), logbroker.NewTopic("k-txn-in", 1)])
    with logbroker.Producer(kafka, transactional_id="ours-on-kafka") as p:
        p.init_transactions(60)
        p.begin_transaction()
        for i in range(10):
            p.send("k-txn", f"c{i}".encode(), partition=i % 2)
        p.send_offsets_to_transaction({("k-txn-in", 0): 7}, "ours-on-kafka-group")
        p.commit_transaction(60)
        p.begin_transaction()
        p.send("k-txn", b"aborted", partition=0)
        p.flush(30)
        p.abort_transaction(60)
    with logbroker.Consumer(kafka, isolation_level="read_committed", auto_offset_reset="earliest") as c:
        c.assign([("k-txn", 0), ("k-txn", 1)])
        got = poll_n(c, 10)
        time.sleep(1)
        got += c.poll(0.5)
    assert sorted(r.value for r in got) == sorted(f"c{i}".encode() for i in range(10))
    with logbroker.Consumer(kafka, group_id="ours-on-kafka-group") as c:
        assert c.committed([("k-txn-in", 0)])[TP("k-txn-in", 0)] == 7
