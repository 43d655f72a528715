"""DeadLetters with our consumer in a classic group: a record whose handler keeps failing is
retried max_attempts times, then written to the dead-letter topic with headers naming its
source topic, partition, offset, attempts and last error; the others are processed once,
and committing after each record never re-reads a dead-lettered one."""

from __future__ import annotations

import pytest

from logbroker import Admin, Consumer, DeadLetters, NewTopic, Producer
from logbroker.client import ConfigError


def test_failing_records_are_retried_then_dead_lettered(broker):
    bs = broker.bootstrap_servers
    with Admin(bs) as a:
        a.create_topics([NewTopic("orders", 2), NewTopic("orders.DLT", 1)])
    with Producer(bs) as p:
        for i in range(20):
            p.send(
                "orders", f"o{i}".encode(), key=f"k{i}".encode(), partition=i % 2, headers=[("trace", f"t{i}".encode())]
            )
    calls: dict[bytes, int] = {}
    processed = []

    def handle(r):
        calls[r.value] = calls.get(r.value, 0) + 1
        if r.value in (b"o3", b"o14"):
            raise ValueError(f"cannot parse {r.value!r}")
        processed.append(r.value)

    with (
        Consumer(bs, group_id="orders-app", auto_offset_reset="earliest", enable_auto_commit=False) as c,
        DeadLetters(c, topic="orders.DLT", max_attempts=3, backoff_ms=1) as dl,
    ):
        c.subscribe(["orders"])
        seen = 0
        for r in c:
            ok = dl.process(r, handle)
            assert ok == (r.value not in (b"o3", b"o14"))
            c.commit()
            seen += 1
            if seen == 20:
                break
        assert dl.dead_lettered == 2
    assert calls[b"o3"] == calls[b"o14"] == 3 and calls[b"o0"] == 1
    assert sorted(processed) == sorted(f"o{i}".encode() for i in range(20) if i not in (3, 14))

    with Consumer(bs, auto_offset_reset="earliest") as d:
        d.assign([("orders.DLT", 0)])
        got = []
        while len(got) < 2:
            got += d.poll(1.0)
    by_value = {r.value: r for r in got}
    r = by_value[b"o3"]
    h = {k: v for k, v in r.headers}
    assert r.key == b"k3"
    assert h["trace"] == b"t3", "the original headers stay"
    assert (h["dlt.source.topic"], h["dlt.source.partition"], h["dlt.attempts"], h["dlt.group"]) == (
        b"orders",
        b"1",
        b"3",
        b"orders-app",
    )
    assert int(h["dlt.source.offset"]) >= 0
    assert h["dlt.error"].startswith(b"ValueError: cannot parse")

    # the group's committed position is past everything: a restart reads nothing again
    with Consumer(bs, group_id="orders-app") as c:
        committed = c.committed([("orders", 0), ("orders", 1)])
        assert sorted(committed.values()) == [10, 10]


def test_bad_settings():
    with pytest.raises(ConfigError):
        DeadLetters(object(), topic="", max_attempts=3)
    with pytest.raises(ConfigError):
        DeadLetters(object(), topic="x", max_attempts=0)
