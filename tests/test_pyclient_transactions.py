"""logbroker's own Producer with transactions (sync and trio): commit and abort seen by our
read_committed consumer, consume-transform-produce with offsets sent to the transaction,
zombie fencing, and the state rules (send before begin, commit after a failure)."""

from __future__ import annotations

import time

import pytest
import trio

import logbroker
from logbroker import aio
from logbroker.client import Admin, Consumer, KafkaError, NewTopic, Producer, TransactionStateError


def topics(bs: str, *names: str, partitions: int = 1) -> None:
    with Admin(bs) as a:
        a.create_topics([NewTopic(n, partitions) for n in names])


def read_committed(bs: str, topic: str, partitions: int = 1, idle: float = 1.5) -> list[bytes]:
    with Consumer(bs, isolation_level="read_committed", auto_offset_reset="earliest") as c:
        c.assign([(topic, p) for p in range(partitions)])
        out, last = [], time.monotonic()
        while time.monotonic() - last < idle:
            got = c.poll(0.2)
            if got:
                out.extend(r.value for r in got)
                last = time.monotonic()
        return out


def test_commit_abort_and_state_rules(broker):
    bs = broker.bootstrap_servers
    topics(bs, "pt", partitions=2)
    p = Producer(bs, transactional_id="py-tx")
    try:
        with pytest.raises(TransactionStateError):
            p.send("pt", b"too early")
        p.init_transactions(30)
        with pytest.raises(TransactionStateError):
            p.send("pt", b"no transaction yet")
        p.begin_transaction()
        futs = [p.send("pt", f"c{i}".encode(), partition=i % 2) for i in range(20)]
        p.commit_transaction(30)
        assert all(f.result(1).offset >= 0 for f in futs)
        p.begin_transaction()
        for i in range(10):
            p.send("pt", f"a{i}".encode(), partition=i % 2)
        p.flush(10)
        p.abort_transaction(30)
        p.begin_transaction()
        p.send("pt", b"last", partition=0)
        p.commit_transaction(30)
        with pytest.raises(TransactionStateError):
            p.commit_transaction(5)  # nothing open
    finally:
        p.close()
    assert sorted(read_committed(bs, "pt", 2)) == sorted([f"c{i}".encode() for i in range(20)] + [b"last"])


def test_consume_transform_produce_with_our_consumer(broker):
    bs = broker.bootstrap_servers
    topics(bs, "src", "dst")
    with Producer(bs) as plain:
        for i in range(30):
            plain.send("src", str(i).encode())
    with (
        Producer(bs, transactional_id="py-etl") as p,
        Consumer(
            bs,
            group_id="py-etl-g",
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        ) as c,
    ):
        p.init_transactions(30)
        c.subscribe(["src"])
        done = 0
        rounds = 0
        while done < 30 and rounds < 200:
            rounds += 1
            got = c.poll(0.5, max_records=7)
            if not got:
                continue
            p.begin_transaction()
            for r in got:
                p.send("dst", b"t" + r.value)
            p.send_offsets_to_transaction({("src", 0): got[-1].offset + 1}, c)
            if rounds == 2:
                p.abort_transaction(30)  # output and offsets roll back: re-read from the last commit
                c.seek(("src", 0), done)
                continue
            p.commit_transaction(30)
            done = got[-1].offset + 1
        assert done == 30
    assert read_committed(bs, "dst") == [b"t" + str(i).encode() for i in range(30)]
    with Consumer(bs, group_id="py-etl-g") as c:
        assert c.committed([("src", 0)])[("src", 0)] == 30


def test_a_second_producer_fences_the_first(broker):
    bs = broker.bootstrap_servers
    topics(bs, "fz")
    old = Producer(bs, transactional_id="py-z")
    new = Producer(bs, transactional_id="py-z")
    try:
        old.init_transactions(30)
        old.begin_transaction()
        old.send("fz", b"zombie")
        old.flush(10)
        new.init_transactions(30)
        new.begin_transaction()
        new.send("fz", b"fresh")
        new.commit_transaction(30)
        with pytest.raises(KafkaError):
            old.send("fz", b"zombie-2")
            old.commit_transaction(10)
    finally:
        old.close()
        new.close()
    assert read_committed(bs, "fz") == [b"fresh"]


def test_trio_producer_transactions(broker):
    bs = broker.bootstrap_servers
    topics(bs, "at")

    async def main() -> None:
        async with aio.Producer(bs, transactional_id="aio-tx") as p:
            await p.init_transactions(30)
            p.begin_transaction()
            for i in range(5):
                await p.enqueue("at", f"ok{i}".encode())
            await p.commit_transaction(30)
            p.begin_transaction()
            await p.enqueue("at", b"dropped")
            await p.abort_transaction(30)

    trio.run(main)
    assert read_committed(bs, "at") == [f"ok{i}".encode() for i in range(5)]


def test_transactional_config_checks():
    with pytest.raises(logbroker.client.ConfigError):
        Producer("127.0.0.1:1", transactional_id="x", enable_idempotence=False)
    with pytest.raises(logbroker.client.ConfigError):
        Producer("127.0.0.1:1", transactional_id="")
