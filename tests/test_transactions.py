"""Transactions end to end with librdkafka (confluent-kafka) on one broker: commit and abort,
read_committed and read_uncommitted consumers, the last stable offset, zombie fencing,
transactional offset commits (consume-transform-produce), a restart in the middle, and
transaction timeouts."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logbroker import Broker


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(10)


def txn_producer(bootstrap: str, txn_id: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **conf})
    p.init_transactions(30)
    return p


def read(
    bootstrap: str, topic: str, isolation: str, partitions: int = 1, idle: float = 2.0, group: str | None = None
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record a consumer sees until `idle` s pass without one."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"g-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    if group is None:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    else:
        c.subscribe([topic])
    out = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle:
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            out.append((m.partition(), m.offset(), m.value()))
            last = time.monotonic()
    finally:
        c.close()
    return out


def end_offsets(bootstrap: str, topic: str, isolation: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets", "isolation.level": isolation})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


@pytest.fixture
def bootstrap(tmp_path):
    with Broker(data_dir=tmp_path / "data") as b:
        yield b.bootstrap_servers


def test_committed_records_are_seen_aborted_ones_only_by_read_uncommitted(bootstrap):
    create_topic(bootstrap, "t", 2)
    p = txn_producer(bootstrap, "tx-1")
    p.begin_transaction()
    for i in range(10):
        p.produce("t", value=f"committed-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(6):
        p.produce("t", value=f"aborted-{i}".encode(), partition=i % 2)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce("t", value=b"after", partition=0)
    p.commit_transaction(30)

    committed = read(bootstrap, "t", "read_committed", 2)
    values = sorted(v.decode() for _, _, v in committed)
    assert values == sorted([f"committed-{i}" for i in range(10)] + ["after"]), values
    everything = sorted(v.decode() for _, _, v in read(bootstrap, "t", "read_uncommitted", 2))
    assert everything == sorted([f"committed-{i}" for i in range(10)] + [f"aborted-{i}" for i in range(6)] + ["after"])
    # markers take offsets: 5 + 1 marker + 3 aborted + 1 marker + 1 + 1 marker on partition 0
    offsets0 = [o for part, o, _ in read(bootstrap, "t", "read_uncommitted", 2) if part == 0]
    assert offsets0 == [0, 1, 2, 3, 4, 6, 7, 8, 10], offsets0


def test_an_open_transaction_holds_back_read_committed_consumers(bootstrap):
    create_topic(bootstrap, "lso")
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("lso", value=b"before")
    plain.flush(10)
    p = txn_producer(bootstrap, "tx-open")
    p.begin_transaction()
    p.produce("lso", value=b"pending")
    p.flush(10)
    plain.produce("lso", value=b"plain-after")  # behind the open transaction
    plain.flush(10)
    assert end_offsets(bootstrap, "lso", "read_uncommitted") == 3
    assert end_offsets(bootstrap, "lso", "read_committed") == 1, "the LSO stops at the open transaction"
    assert [v for _, _, v in read(bootstrap, "lso", "read_committed", idle=1.5)] == [b"before"]
    p.commit_transaction(30)
    assert [v for _, _, v in read(bootstrap, "lso", "read_committed")] == [b"before", b"pending", b"plain-after"]
    assert end_offsets(bootstrap, "lso", "read_committed") == 4


def test_a_new_producer_fences_the_zombie_and_aborts_its_transaction(bootstrap):
    create_topic(bootstrap, "z")
    zombie = txn_producer(bootstrap, "tx-z")
    zombie.begin_transaction()
    zombie.produce("z", value=b"zombie")
    zombie.flush(10)
    fresh = txn_producer(bootstrap, "tx-z")  # aborts the zombie's transaction, bumps the epoch
    fresh.begin_transaction()
    fresh.produce("z", value=b"fresh")
    fresh.commit_transaction(30)
    zombie.produce("z", value=b"zombie-2")
    with pytest.raises(KafkaException) as e:
        zombie.commit_transaction(10)
    assert e.value.args[0].fatal() or e.value.args[0].txn_requires_abort(), e.value
    assert [v for _, _, v in read(bootstrap, "z", "read_committed")] == [b"fresh"]


def test_consume_transform_produce_commits_offsets_with_the_transaction(bootstrap):
    create_topic(bootstrap, "in")
    create_topic(bootstrap, "out")
    src = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        src.produce("in", value=str(i).encode())
    src.flush(10)

    def run_once(n: int, commit: bool) -> None:
        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "etl",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe(["in"])
        p = txn_producer(bootstrap, "etl-tx")
        p.begin_transaction()
        got = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.append(m)
            p.produce("out", value=b"x" + m.value())
        assert len(got) == n
        offsets = [TopicPartition("in", 0, got[-1].offset() + 1)]
        p.send_offsets_to_transaction(offsets, c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
        c.close()

    run_once(8, commit=True)
    run_once(5, commit=False)  # output and offsets both rolled back
    run_once(12, commit=True)  # resumes at 8, not 13
    out = [v for _, _, v in read(bootstrap, "out", "read_committed")]
    assert out == [b"x" + str(i).encode() for i in range(20)], out
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "etl"})
    try:
        assert c.committed([TopicPartition("in", 0)], timeout=10)[0].offset == 20
    finally:
        c.close()


def test_transactions_and_offsets_survive_a_restart(tmp_path):
    data = tmp_path / "data"
    with Broker(data_dir=data) as b:
        bs = b.bootstrap_servers
        create_topic(bs, "r")
        p = txn_producer(bs, "tx-r")
        p.begin_transaction()
        p.produce("r", value=b"kept")
        p.commit_transaction(30)
        p.begin_transaction()
        p.produce("r", value=b"dropped")
        p.flush(10)
        p.abort_transaction(30)
        p.begin_transaction()
        p.produce("r", value=b"open")
        p.flush(10)
    with Broker(data_dir=data) as b:
        bs = b.bootstrap_servers
        # the open transaction still holds the LSO; a new producer aborts it
        assert [v for _, _, v in read(bs, "r", "read_committed", idle=1.0)] == [b"kept"]
        q = txn_producer(bs, "tx-r")
        q.begin_transaction()
        q.produce("r", value=b"new")
        q.commit_transaction(30)
        assert [v for _, _, v in read(bs, "r", "read_committed")] == [b"kept", b"new"]


def test_a_transaction_past_its_timeout_is_aborted(tmp_path):
    with Broker(
        data_dir=tmp_path / "data", config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
    ) as b:
        bs = b.bootstrap_servers
        create_topic(bs, "slow")
        p = txn_producer(bs, "tx-slow", **{"transaction.timeout.ms": 1000})
        p.begin_transaction()
        p.produce("slow", value=b"late")
        p.flush(10)
        deadline = time.monotonic() + 20
        while end_offsets(bs, "slow", "read_committed") < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert end_offsets(bs, "slow", "read_committed") == 2, "the coordinator aborted it (record + marker)"
        assert read(bs, "slow", "read_committed", idle=1.0) == []
        with pytest.raises(KafkaException):
            p.commit_transaction(10)
