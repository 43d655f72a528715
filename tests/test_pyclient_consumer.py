"""logbroker.Consumer against our broker: assign and poll, iteration, every record field,
seeks and positions, commits (sync, async, auto), pause/resume, pattern subscriptions,
rebalance callbacks and a group of two members."""

from __future__ import annotations

import re
import threading
import time

import pytest
from pyclient_helpers import consume_all

import logbroker
from logbroker.client import errors
from logbroker.client.fetcher import NoOffsetForPartitionError

TP = logbroker.TopicPartition


def fill(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    with logbroker.Admin(bootstrap) as a:
        if topic not in a.list_topics():
            a.create_topics([logbroker.NewTopic(topic, partitions)])
    with logbroker.Producer(bootstrap, linger_ms=1) as p:
        for i in range(n):
            p.send(
                topic,
                f"v{i}".encode(),
                key=f"k{i}".encode(),
                partition=i % partitions,
                headers=[("i", str(i).encode())],
                timestamp=1_000_000 + i,
            )
        p.flush(20)


def poll_n(c: logbroker.Consumer, n: int, timeout: float = 20) -> list:
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(c.poll(0.2))
    return out


def test_assign_poll_and_record_fields(broker):
    fill(broker.bootstrap_servers, "f", 50)
    with logbroker.Consumer(broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([TP("f", 0)])
        assert c.assignment() == [TP("f", 0)]
        recs = poll_n(c, 50)
        assert len(c.poll(0.1)) == 0
    r = recs[7]
    assert (r.topic, r.partition, r.offset, r.key, r.value) == ("f", 0, 7, b"k7", b"v7")
    assert r.headers == [("i", b"7")]
    assert (r.timestamp, r.timestamp_type) == (1_000_007, 0)
    assert "ConsumerRecord" in repr(r)
    assert [x.offset for x in recs] == list(range(50))


def test_max_records_and_iteration(broker):
    fill(broker.bootstrap_servers, "it", 30)
    with logbroker.Consumer(broker.bootstrap_servers, auto_offset_reset="earliest", max_poll_records=7) as c:
        c.assign([("it", 0)])
        first = []
        while not first:
            first = c.poll(1.0)
        assert len(first) <= 7
        assert len(c.poll(5.0, max_records=2)) <= 2
        seen = []
        for r in c:
            seen.append(r.offset)
            if r.offset == 29:
                break
        assert seen[-1] == 29


def test_seek_position_beginning_end(broker):
    fill(broker.bootstrap_servers, "s", 20)
    with logbroker.Consumer(broker.bootstrap_servers, auto_offset_reset="latest") as c:
        c.assign([("s", 0)])
        assert c.position(("s", 0)) == 20
        c.seek_to_beginning()
        assert c.position(("s", 0)) == 0
        c.seek(("s", 0), 15)
        assert [r.offset for r in poll_n(c, 5)] == [15, 16, 17, 18, 19]
        assert c.position(("s", 0)) == 20
        c.seek_to_beginning([("s", 0)])
        assert poll_n(c, 1)[0].offset == 0
        c.seek_to_end([("s", 0)])
        assert c.position(("s", 0)) == 20
        with pytest.raises(logbroker.KafkaError, match="not assigned"):
            c.position(("other", 0))


def test_commit_sync_async_committed_and_auto_commit(broker):
    fill(broker.bootstrap_servers, "c", 10)
    with logbroker.Consumer(
        broker.bootstrap_servers, group_id="cg", auto_offset_reset="earliest", enable_auto_commit=False
    ) as c:
        c.assign([("c", 0)])
        assert c.committed([("c", 0)]) == {TP("c", 0): None}
        poll_n(c, 10)
        c.commit()
        assert c.committed([("c", 0)]) == {TP("c", 0): 10}
        c.commit({("c", 0): 4})
        assert c.committed([("c", 0)]) == {TP("c", 0): 4}
        done = threading.Event()
        result = []
        c.commit({TP("c", 0): (6, "meta")}, asynchronous=True, callback=lambda e: (result.append(e), done.set()))
        assert done.wait(10) and result == [None]
        assert c.committed([TP("c", 0)])[TP("c", 0)] == 6
    # A new member of the group starts at the committed offset.
    with logbroker.Consumer(broker.bootstrap_servers, group_id="cg", auto_commit_interval_ms=100) as c:
        c.assign([("c", 0)])
        assert poll_n(c, 1)[0].offset == 6
        poll_n(c, 3)
        time.sleep(0.5)
        c.poll(0.2)
    with logbroker.Consumer(broker.bootstrap_servers, group_id="cg") as c:
        assert c.committed([("c", 0)])[TP("c", 0)] == 10


def test_no_offset_reset_none_raises(broker):
    fill(broker.bootstrap_servers, "n", 1)
    with logbroker.Consumer(broker.bootstrap_servers, group_id="none-g", auto_offset_reset="none") as c:
        c.assign([("n", 0)])
        with pytest.raises(NoOffsetForPartitionError):
            for _ in range(50):
                c.poll(0.1)


def test_pause_resume(broker):
    fill(broker.bootstrap_servers, "pr", 10, partitions=2)
    with logbroker.Consumer(broker.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([("pr", 0), ("pr", 1)])
        c.pause([("pr", 1)])
        assert c.paused() == [TP("pr", 1)]
        recs = poll_n(c, 5, timeout=5)
        recs += c.poll(0.5)
        assert {r.partition for r in recs} == {0} and len(recs) == 5
        c.resume([("pr", 1)])
        assert c.paused() == []
        assert {r.partition for r in poll_n(c, 5)} == {1}


def test_group_of_two_members_splits_partitions(broker):
    fill(broker.bootstrap_servers, "g2", 0, partitions=4)
    conf = dict(group_id="two", auto_offset_reset="earliest", heartbeat_interval_ms=100, session_timeout_ms=6000)
    assigned: dict[str, list] = {"a": [], "b": []}
    a = logbroker.Consumer(broker.bootstrap_servers, **conf)
    b = logbroker.Consumer(broker.bootstrap_servers, **conf)
    got: dict[str, list] = {"a": [], "b": []}
    try:
        a.subscribe(["g2"], on_assign=lambda ps: assigned["a"].append(ps))
        b.subscribe(["g2"], on_assign=lambda ps: assigned["b"].append(ps))
        assert a.subscription() == ["g2"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(a.assignment()) == 2 and len(b.assignment()) == 2):
            got["a"] += a.poll(0.05)
            got["b"] += b.poll(0.05)
        assert sorted(a.assignment() + b.assignment()) == [TP("g2", p) for p in range(4)]
        fill(broker.bootstrap_servers, "g2", 200, partitions=4)
        while time.monotonic() < deadline and len(got["a"]) + len(got["b"]) < 200:
            got["a"] += a.poll(0.05)
            got["b"] += b.poll(0.05)
    finally:
        a.close()
        b.close()
    values = sorted(r.value for r in got["a"] + got["b"])
    assert values == sorted(f"v{i}".encode() for i in range(200))
    assert {r.partition for r in got["a"]}.isdisjoint({r.partition for r in got["b"]})
    assert assigned["a"] and assigned["b"]


def test_max_poll_interval_leaves_and_next_poll_rejoins(broker, caplog):
    """A member that stops polling for longer than max.poll.interval.ms leaves (its
    partitions move to the other member long before its session would expire), its revoke
    callback sees them as lost at the next poll(), and that poll() rejoins the group."""
    fill(broker.bootstrap_servers, "mpi", 0, partitions=2)
    conf = dict(
        group_id="mpi-g",
        auto_offset_reset="earliest",
        heartbeat_interval_ms=100,
        session_timeout_ms=30000,
        max_poll_interval_ms=1500,
    )
    lost: list = []
    a = logbroker.Consumer(broker.bootstrap_servers, **conf)
    b = logbroker.Consumer(broker.bootstrap_servers, **conf)
    try:
        a.subscribe(["mpi"], on_revoke=lambda ps: lost.append(sorted(ps)))
        b.subscribe(["mpi"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(a.assignment()) == 1 and len(b.assignment()) == 1):
            a.poll(0.05)
            b.poll(0.05)
        owned_by_a = a.assignment()
        assert len(owned_by_a) == 1
        lost.clear()  # an eager rebalance while `b` joined may have revoked both first
        # `a` stops polling; `b` keeps going and gets both partitions well within the session timeout.
        t0 = time.monotonic()
        while time.monotonic() < deadline and len(b.assignment()) != 2:
            b.poll(0.05)
        assert len(b.assignment()) == 2 and time.monotonic() - t0 < 15
        assert a.assignment() == []
        assert any("max.poll.interval.ms=1500" in r.getMessage() and "mpi-g" in r.getMessage() for r in caplog.records)
        # The next poll() reports the loss and rejoins: the group splits again.
        a.poll(0)
        assert lost == [owned_by_a]
        while time.monotonic() < deadline and not (len(a.assignment()) == 1 and len(b.assignment()) == 1):
            a.poll(0.05)
            b.poll(0.05)
        assert sorted(a.assignment() + b.assignment()) == [TP("mpi", 0), TP("mpi", 1)]
    finally:
        a.close()
        b.close()


def test_rebalance_callbacks_and_pattern_subscription(broker):
    fill(broker.bootstrap_servers, "pat-1", 3)
    fill(broker.bootstrap_servers, "pat-2", 3)
    fill(broker.bootstrap_servers, "other", 3)
    events = []
    with logbroker.Consumer(
        broker.bootstrap_servers,
        group_id="pg",
        auto_offset_reset="earliest",
        heartbeat_interval_ms=100,
        metadata_max_age_ms=500,
    ) as c:
        c.subscribe(
            re.compile(r"pat-\d"),
            on_assign=lambda ps: events.append(("assign", sorted(ps))),
            on_revoke=lambda ps: events.append(("revoke", sorted(ps))),
        )
        recs = poll_n(c, 6)
        assert {r.topic for r in recs} == {"pat-1", "pat-2"}
        assert ("assign", [TP("pat-1", 0), TP("pat-2", 0)]) in events
        c.unsubscribe()
        assert c.assignment() == []
        c.subscribe("^pat-1$")
        deadline = time.monotonic() + 20
        while c.assignment() != [TP("pat-1", 0)] and time.monotonic() < deadline:
            c.poll(0.1)
        assert c.assignment() == [TP("pat-1", 0)]


def test_topics_close_and_errors(broker):
    fill(broker.bootstrap_servers, "t-a", 1, partitions=2)
    c = logbroker.Consumer(broker.bootstrap_servers)
    assert c.topics()["t-a"] == 2
    with pytest.raises(errors.ConfigError, match="group.id"):
        c.subscribe(["t-a"])
    with pytest.raises(errors.ConfigError, match="group.id"):
        c.commit({("t-a", 0): 1})
    c.close()
    c.close()
    with pytest.raises(errors.ClientClosedError):
        c.poll(0)
    assert list(c) == []


def test_consume_all_helper_round_trip(broker):
    fill(broker.bootstrap_servers, "h", 5)
    assert len(consume_all(broker.bootstrap_servers, "h", 1, 5)) == 5


def test_reassigned_partition_never_takes_data_fetched_for_the_old_assignment(broker):
    """A partition revoked and assigned again starts a new state: a fetch still in flight from
    the old assignment (here a long poll that new records complete) must not feed it. Once
    the old and new states shared epoch numbers and such a response was taken for the new
    one, leaving the consumer stuck or reading out of order."""
    bs = broker.bootstrap_servers
    fill(bs, "reassign", 100)
    with logbroker.Consumer(bs, auto_offset_reset="earliest", fetch_max_wait_ms=2000) as c:
        for round_ in range(5):
            c.assign([("reassign", 0)])
            got = poll_n(c, 100 + 20 * round_)
            assert [r.offset for r in got] == list(range(100 + 20 * round_))
            # A long poll at the end of the log is in flight now; new records complete it
            # just as the partition is revoked and assigned again (reset to earliest).
            time.sleep(0.05)
            with logbroker.Producer(bs, linger_ms=0) as p:
                for i in range(20):
                    p.send("reassign", f"x{round_}-{i}".encode(), partition=0)
            c.assign([])
            c.assign([("reassign", 0)])
            again = poll_n(c, 100 + 20 * (round_ + 1))
            assert [r.offset for r in again] == list(range(100 + 20 * (round_ + 1))), f"round {round_}"
            assert c.position(("reassign", 0)) == 100 + 20 * (round_ + 1)
            c.assign([])


def test_a_group_subscribed_before_its_topic_exists_is_assigned_when_it_appears(tmp_path):
    """The leader rejoins when a subscribed topic appears or grows (Kafka's leader compares
    the metadata it assigned with to what it sees now)."""
    with logbroker.Broker(data_dir=tmp_path / "d", auto_create_topics_enable=False) as b:
        c = logbroker.Consumer(
            b.bootstrap_servers,
            group_id="early",
            auto_offset_reset="earliest",
            heartbeat_interval_ms=100,
            metadata_max_age_ms=1000,
        )  # partitions added: seen at the next refresh
        try:
            c.subscribe(["later"])
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                assert c.poll(0.1) == []
            assert c.assignment() == []
            fill(b.bootstrap_servers, "later", 30, partitions=3)
            got = poll_n(c, 30, timeout=20)
            assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(30))
            assert sorted(c.assignment()) == [TP("later", p) for p in range(3)]
            with logbroker.Admin(b.bootstrap_servers) as a:
                a.create_partitions({"later": 5})
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and len(c.assignment()) < 5:
                c.poll(0.1)
            assert sorted(c.assignment()) == [TP("later", p) for p in range(5)]
        finally:
            c.close()
