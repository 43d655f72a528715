"""logbroker.Consumer with group.protocol=consumer (KIP-848, client/group_consumer.py)
against our broker: server-side assignment, incremental rebalances that leave kept
partitions alone, commits with member epochs, a member fenced by the broker, the poll
interval, and a group shared with librdkafka's KIP-848 consumer."""

from __future__ import annotations

import time

import confluent_kafka as ck
import pytest

import logbroker
from logbroker import Broker
from logbroker.client import errors

TP = logbroker.TopicPartition


@pytest.fixture
def fast_broker(tmp_path):
    """KIP-848 heartbeats every 100 ms (Kafka's default is 5 s) so rebalances settle fast."""
    with Broker(
        data_dir=tmp_path / "data",
        config={"group.consumer.heartbeat.interval.ms": 100, "group.consumer.session.timeout.ms": 6000},
    ) as b:
        yield b


def fill(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    with logbroker.Admin(bootstrap) as a:
        if topic not in a.list_topics():
            a.create_topics([logbroker.NewTopic(topic, partitions)])
    with logbroker.Producer(bootstrap) as p:
        for i in range(n):
            p.send(topic, f"v{i}".encode(), partition=i % partitions)
        p.flush(20)


def until(cond, consumers, timeout: float = 30.0, sink: list | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        for c in consumers:
            recs = c.poll(0.02)
            if sink is not None:
                sink.extend(recs)
    assert cond()


def conf(**kw):
    return dict(group_protocol="consumer", auto_offset_reset="earliest", **kw)


def test_incremental_rebalance_keeps_unmoved_partitions(fast_broker):
    bs = fast_broker.bootstrap_servers
    fill(bs, "inc", 0, 4)
    events: list = []
    a = logbroker.Consumer(bs, group_id="inc-g", **conf())
    b = logbroker.Consumer(bs, group_id="inc-g", **conf())
    try:
        a.subscribe(
            ["inc"],
            on_assign=lambda ps: events.append(("a+", sorted(ps))),
            on_revoke=lambda ps: events.append(("a-", sorted(ps))),
        )
        until(lambda: len(a.assignment()) == 4, [a])
        assert events == [("a+", [TP("inc", p) for p in range(4)])]
        b.subscribe(["inc"], on_assign=lambda ps: events.append(("b+", sorted(ps))))
        until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, [a, b])
        kept = a.assignment()
        # `a` gave up exactly the two partitions that moved, not all four, and never the kept ones.
        revoked = [e[1] for e in events if e[0] == "a-"]
        assert len(revoked) == 1 and len(revoked[0]) == 2
        assert set(revoked[0]).isdisjoint(kept)
        assert sorted(revoked[0]) == b.assignment()
        # `b` leaves: its partitions come back to `a` as an addition.
        b.close()
        until(lambda: len(a.assignment()) == 4, [a])
        assert events[-1] == ("a+", sorted(revoked[0]))
        assert not any(e[0] == "a-" and set(e[1]) & set(kept) for e in events)
    finally:
        a.close()
        b.close()


def test_two_members_consume_everything_and_commit(fast_broker):
    bs = fast_broker.bootstrap_servers
    fill(bs, "ev", 400, 4)
    # Auto-commit commits a revoked partition's position before it moves: nothing twice.
    a = logbroker.Consumer(bs, group_id="ev-g", **conf())
    b = logbroker.Consumer(bs, group_id="ev-g", **conf())
    got: list = []
    try:
        a.subscribe(["ev"])
        b.subscribe(["ev"])
        until(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2 and len(got) >= 400, [a, b], sink=got)
        a.commit()
        b.commit()
        committed = a.committed([TP("ev", p) for p in range(4)])
        assert sum(committed.values()) == 400
        assert a._core.group.generation > 0
    finally:
        a.close()
        b.close()
    assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(400))


def test_fenced_member_loses_partitions_and_rejoins(tmp_path, caplog):
    """The broker fences a member that misses heartbeats past its session timeout; the
    member's next heartbeat gets UNKNOWN_MEMBER_ID, it reports the partitions lost and joins
    again with epoch 0."""
    caplog.set_level("INFO", logger="logbroker.client")
    with Broker(
        data_dir=tmp_path / "data",
        config={"group.consumer.heartbeat.interval.ms": 100, "group.consumer.session.timeout.ms": 1000},
    ) as broker:
        bs = broker.bootstrap_servers
        fill(bs, "fen", 0, 2)
        lost: list = []
        with logbroker.Consumer(bs, group_id="fen-g", **conf()) as c:
            c.subscribe(["fen"], on_revoke=lambda ps: lost.append(sorted(ps)))
            until(lambda: len(c.assignment()) == 2, [c])
            # Stall the member's I/O thread for longer than the session timeout: no heartbeats.
            c._driver.submit(lambda: time.sleep(2.5))
            time.sleep(2.6)
            until(lambda: lost == [[TP("fen", 0), TP("fen", 1)]] and len(c.assignment()) == 2, [c])
            assert c._core.group.state == "stable" and c._core.group.epoch > 0
        assert any(
            "UNKNOWN_MEMBER_ID" in r.getMessage() or "FENCED_MEMBER_EPOCH" in r.getMessage() for r in caplog.records
        )


def test_poll_timeout_leaves_and_rejoins(fast_broker):
    bs = fast_broker.bootstrap_servers
    fill(bs, "kpt", 0, 2)
    a = logbroker.Consumer(bs, group_id="kpt-g", **conf(max_poll_interval_ms=1500))
    b = logbroker.Consumer(bs, group_id="kpt-g", **conf(max_poll_interval_ms=60000))
    try:
        a.subscribe(["kpt"])
        b.subscribe(["kpt"])
        until(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1, [a, b])
        until(lambda: len(b.assignment()) == 2, [b], timeout=15)
        assert a.assignment() == []
        until(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1, [a, b])
    finally:
        a.close()
        b.close()


def test_shared_group_with_librdkafka(fast_broker):
    bs = fast_broker.bootstrap_servers
    fill(bs, "mix", 0, 4)
    ours = logbroker.Consumer(bs, group_id="mix-g", **conf())
    theirs = ck.Consumer(
        {"bootstrap.servers": bs, "group.id": "mix-g", "group.protocol": "consumer", "auto.offset.reset": "earliest"}
    )
    got_ours: list = []
    got_theirs: list = []
    try:
        ours.subscribe(["mix"])
        theirs.subscribe(["mix"])
        deadline = time.monotonic() + 60
        while not (len(ours.assignment()) == 2 and len(theirs.assignment()) == 2) and time.monotonic() < deadline:
            ours.poll(0.05)
            theirs.consume(100, 0.05)
        assert len(ours.assignment()) == 2 and len(theirs.assignment()) == 2
        fill(bs, "mix", 300, 4)
        while len(got_ours) + len(got_theirs) < 300 and time.monotonic() < deadline:
            got_ours.extend(ours.poll(0.05))
            for m in theirs.consume(100, 0.05):
                if m.error() is None:
                    got_theirs.append(m)
    finally:
        ours.close()
        theirs.close()
    values = sorted([r.value for r in got_ours] + [m.value() for m in got_theirs])
    assert values == sorted(f"v{i}".encode() for i in range(300))
    assert {r.partition for r in got_ours}.isdisjoint({m.partition() for m in got_theirs})


def test_unknown_group_protocol_is_a_config_error():
    with pytest.raises(errors.ConfigError, match="group.protocol"):
        logbroker.Consumer("127.0.0.1:1", group_id="x", group_protocol="eager")
