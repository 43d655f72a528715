"""Queues beyond Kafka (issue 48) with real clients on a real broker: key-ordered share groups
(share.delivery.order=key: several members, each key's records processed one at a time and in
offset order), delayed delivery (Producer.send(deliver_at=...): a share group does not see the
record before its time, a plain consumer sees it at once), release with a back-off (our
ShareConsumer's acknowledge(r, "release", delay_ms=...), and the group's
share.release.backoff.ms doubling with the delivery count), RENEW (KIP-1222) keeping a lock
past its duration, and share.acquire.mode=record_limit (KIP-1206)."""

from __future__ import annotations

import threading
import time

import pytest

from logbroker import Admin, Broker, Consumer, NewTopic, Producer, ShareConsumer

CONFIG = {
    "group.share.enable": "true",
    "group.share.auto.offset.reset": "earliest",
    "group.share.record.lock.duration.ms": "1500",
    "group.share.delivery.count.limit": "5",
}


@pytest.fixture
def broker(tmp_path):
    with Broker(data_dir=tmp_path / "data", config=CONFIG) as b:
        yield b


def group_configs(bs: str, group: str, **configs: str) -> None:
    with Admin(bs) as a:
        a.alter_configs({("group", group): {k.replace("_", "."): v for k, v in configs.items()}})


def create(bs: str, topic: str, partitions: int = 1) -> None:
    with Admin(bs) as a:
        a.create_topics([NewTopic(topic, partitions)])


def test_key_ordered_share_group_processes_each_key_in_order_across_members(broker):
    """Four members over one partition, 400 records over 20 keys, each record 'processed' for a
    random few ms: per key, processing intervals never overlap and follow offset order; every
    record is accepted once; work is spread over the members."""
    bs = broker.bootstrap_servers
    create(bs, "jobs")
    group_configs(bs, "ordered", share_delivery_order="key")
    n, keys = 400, 20
    with Producer(bs, linger_ms=5) as p:
        for i in range(n):
            p.send("jobs", f"{i}".encode(), key=f"k{i % keys}".encode())
        p.flush(30)
    log: list[tuple[str, int, float, float, str]] = []  # (key, offset, start, end, member)
    lock = threading.Lock()
    done = threading.Event()
    errors: list[BaseException] = []

    def member(name: str) -> None:
        import random

        rng = random.Random(name)
        try:
            with ShareConsumer(bs, "ordered", share_acknowledgement_mode="explicit", max_poll_records=10) as c:
                c.subscribe(["jobs"])
                while not done.is_set():
                    for r in c.poll(0.2):
                        start = time.monotonic()
                        time.sleep(rng.uniform(0.0, 0.004))
                        with lock:
                            log.append((r.key.decode(), r.offset, start, time.monotonic(), name))
                        c.acknowledge(r, "accept")
                    c.commit_sync()
        except BaseException as e:  # noqa: BLE001 - reported by the test thread
            errors.append(e)

    threads = [threading.Thread(target=member, args=(f"m{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len({o for _k, o, *_ in log}) < n and not errors:
        time.sleep(0.2)
    done.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    offsets = [o for _k, o, *_ in log]
    assert sorted(set(offsets)) == list(range(n)), f"{len(set(offsets))} of {n} processed"
    assert len(offsets) == n, "a record was processed twice (all were accepted in time)"
    by_key: dict[str, list[tuple[int, float, float]]] = {}
    for key, off, start, end, _m in log:
        by_key.setdefault(key, []).append((off, start, end))
    for key, runs in by_key.items():
        runs.sort(key=lambda r: r[1])
        assert [o for o, _s, _e in runs] == sorted(o for o, _s, _e in runs), f"key {key} out of order"
        for (o1, _s1, e1), (o2, s2, _e2) in zip(runs, runs[1:]):
            assert s2 >= e1, f"key {key}: offset {o2} started before {o1} was done"
    assert len({m for *_, m in log}) >= 2, "one member did all the work"
    # the sessions a key-ordered fetch shares its keys among are counted as they come and go
    assert broker.server.share_fetch.holders == {}, broker.server.share_fetch.holders


def test_delayed_delivery_waits_for_its_time_in_share_groups_only(broker):
    bs = broker.bootstrap_servers
    create(bs, "later")
    with ShareConsumer(bs, "delayed") as c:
        c.subscribe(["later"])
        c.poll(0.5)  # joined, the share-partition started (earliest)
        sent_at = time.time()
        with Producer(bs) as p:
            p.send("later", b"now").result(10)
            p.send("later", b"in-2s", deliver_at=int((sent_at + 2.0) * 1000)).result(10)
            p.send("later", b"now-too").result(10)
        got: list[tuple[bytes, float]] = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            got += [(r.value, time.time()) for r in c.poll(0.2)]
        values = [v for v, _t in got]
        assert sorted(values) == [b"in-2s", b"now", b"now-too"], values
        assert values[-1] == b"in-2s", "the delayed record came before the others"
        at = dict(got)[b"in-2s"]
        assert at >= sent_at + 2.0, f"delivered {at - sent_at:.3f} s after sending, before its time"
        assert at < sent_at + 5.0, f"delivered {at - sent_at:.3f} s after sending: the fetch did not wake for it"
    # a plain consumer sees it at once, with the header
    with Consumer(bs, group_id="plain", auto_offset_reset="earliest") as pc:
        pc.subscribe(["later"])
        seen = []
        deadline = time.monotonic() + 20
        while len(seen) < 3 and time.monotonic() < deadline:
            seen += pc.poll(0.2)
        delayed = next(r for r in seen if r.value == b"in-2s")
        assert dict(delayed.headers)["logbroker.deliver.at"] == str(int((sent_at + 2.0) * 1000)).encode()


def test_release_with_a_delay_and_the_groups_backoff(broker):
    bs = broker.bootstrap_servers
    create(bs, "retry")
    with Producer(bs) as p:
        p.send("retry", b"job").result(10)
    with ShareConsumer(bs, "retrying", share_acknowledgement_mode="explicit") as c:
        c.subscribe(["retry"])
        deliveries: list[tuple[int, float]] = []
        deadline = time.monotonic() + 30
        while len(deliveries) < 2 and time.monotonic() < deadline:
            for r in c.poll(0.1):
                deliveries.append((r.delivery_count, time.monotonic()))
                if r.delivery_count == 1:
                    c.acknowledge(r, "release", delay_ms=1200)
                else:
                    c.acknowledge(r, "accept")
            c.commit_sync()
        assert [d for d, _t in deliveries] == [1, 2]
        gap = deliveries[1][1] - deliveries[0][1]
        assert gap >= 1.1, f"redelivered {gap:.3f} s after a release with delay_ms=1200"
    # the group's back-off: 600 ms, then 1200 ms (doubling with the delivery count)
    group_configs(bs, "backoff", share_release_backoff_ms="600", share_release_backoff_max_ms="5000")
    with ShareConsumer(bs, "backoff", share_acknowledgement_mode="explicit") as c:
        c.subscribe(["retry"])
        times: list[float] = []
        deadline = time.monotonic() + 30
        while len(times) < 3 and time.monotonic() < deadline:
            for r in c.poll(0.05):
                times.append(time.monotonic())
                c.acknowledge(r, "release" if len(times) < 3 else "accept")
            c.commit_sync()
        assert len(times) == 3, times
        first, second = times[1] - times[0], times[2] - times[1]
        assert 0.55 <= first < 1.1, f"first back-off {first:.3f} s, expected 0.6"
        assert 1.15 <= second < 2.0, f"second back-off {second:.3f} s, expected 1.2"


def test_renew_keeps_the_lock_past_its_duration(broker):
    """A record held 3 s (twice the 1.5 s lock) while RENEWed every 0.5 s is not handed to
    the other member; accepted at the end, it is done."""
    bs = broker.bootstrap_servers
    create(bs, "long")
    with Producer(bs) as p:
        p.send("long", b"slow-job").result(10)
    with (
        ShareConsumer(bs, "renewing", share_acknowledgement_mode="explicit") as a,
        ShareConsumer(bs, "renewing", share_acknowledgement_mode="explicit") as b,
    ):
        a.subscribe(["long"])
        b.subscribe(["long"])
        held = None
        deadline = time.monotonic() + 20
        while held is None and time.monotonic() < deadline:
            recs = a.poll(0.2)
            held = recs[0] if recs else None
            for r in b.poll(0.05):
                held, a, b = r, b, a  # b got it first: the roles swap
        assert held is not None
        start = time.monotonic()
        while time.monotonic() - start < 3.0:
            a.acknowledge(held, "renew")
            a.commit_sync()
            assert b.poll(0.5) == [], "the renewed record went to the other member"
        a.acknowledge(held, "accept")
        a.commit_sync()
        assert b.poll(2.0) == []
    # share.renew.acknowledge.enable=false (KIP-1222): a RENEW is refused
    group_configs(bs, "norenew", share_renew_acknowledge_enable="false")
    with Producer(bs) as p:
        p.send("long", b"another").result(10)
    with ShareConsumer(bs, "norenew", share_acknowledgement_mode="explicit") as c:
        c.subscribe(["long"])
        recs = []
        deadline = time.monotonic() + 20
        while not recs and time.monotonic() < deadline:
            recs = c.poll(0.2)
        assert recs
        c.acknowledge(recs[0], "renew")
        for r in recs[1:]:
            c.acknowledge(r, "accept")
        results = c.commit_sync()
        assert any(type(e).__name__ == "InvalidRecordStateError" for e in results.values()), results


def test_record_limit_acquires_no_more_than_max_poll_records(broker):
    bs = broker.bootstrap_servers
    create(bs, "limited")
    with Producer(bs, linger_ms=50) as p:
        for i in range(40):
            p.send("limited", str(i).encode())
        p.flush(10)
    with ShareConsumer(bs, "limited", max_poll_records=3, share_acquire_mode="record_limit") as c:
        c.subscribe(["limited"])
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < 40 and time.monotonic() < deadline:
            recs = c.poll(0.2)
            assert len(recs) <= 3
            got += [int(r.value) for r in recs]
        assert sorted(got) == list(range(40))


def test_key_order_and_delivery_times_hold_across_a_restart(tmp_path):
    """In-flight records read back after a restart have their keys and times read again from
    the log: the next record of a key still waits for the earlier one, a delayed record still
    waits for its time, and a released record for its back-off (persisted with the state)."""
    data = tmp_path / "data"
    with Broker(data_dir=data, config=CONFIG) as b:
        bs = b.bootstrap_servers
        create(bs, "resume")
        group_configs(bs, "resumed", share_delivery_order="key")
        due = int((time.time() + 6.0) * 1000)
        with Producer(bs, linger_ms=20) as p:
            for i in range(5):
                p.send("resume", f"a{i}".encode(), key=b"a")
            p.send("resume", b"later", key=b"z", deliver_at=due)
            p.send("resume", b"retry", key=b"r")
            p.flush(10)
        with ShareConsumer(bs, "resumed", share_acknowledgement_mode="explicit") as c:
            c.subscribe(["resume"])
            first: list = []
            deadline = time.monotonic() + 20
            while len(first) < 2 and time.monotonic() < deadline:
                recs = c.poll(0.2)
                first += recs
                for r in recs:
                    if r.value == b"retry":  # back off 5 s: the new broker must wait them out too
                        c.acknowledge(r, "release", delay_ms=5000)
                        released_at = time.time()
                    else:
                        c.acknowledge(r, "accept")
                c.commit_sync()
            assert sorted(r.value for r in first) == [b"a0", b"retry"]
            second = []
            deadline = time.monotonic() + 20
            while not second and time.monotonic() < deadline:
                second = c.poll(0.2)
            assert [r.value for r in second] == [b"a1"]
            c.acknowledge(second[0], "release")  # back in flight, available, ahead of a2..a4
            c.commit_sync()
    with Broker(data_dir=data, config=CONFIG) as b:
        bs = b.bootstrap_servers
        got: list[tuple[bytes, float]] = []
        with (
            ShareConsumer(bs, "resumed", share_acknowledgement_mode="explicit") as x,
            ShareConsumer(bs, "resumed", share_acknowledgement_mode="explicit") as y,
        ):
            x.subscribe(["resume"])
            y.subscribe(["resume"])
            deadline = time.monotonic() + 40
            while len(got) < 6 and time.monotonic() < deadline:
                for c in (x, y):
                    recs = c.poll(0.1)
                    keyed = [r for r in recs if r.key == b"a"]
                    assert len(keyed) <= 1, f"two records of key a at once: {[r.value for r in keyed]}"
                    for r in recs:
                        got.append((r.value, time.time()))
                        c.acknowledge(r, "accept")
                    c.commit_sync()
        values = [v for v, _t in got]
        assert [v for v in values if v.startswith(b"a")] == [b"a1", b"a2", b"a3", b"a4"], values
        at = dict(got).get(b"later")
        assert at is not None and at * 1000 >= due, f"the delayed record came {(due - (at or 0) * 1000):.0f} ms early"
        retried = dict(got).get(b"retry")
        assert retried is not None and retried >= released_at + 5.0, (
            f"the released record came back {retried - released_at:.3f} s after its release, within its 5 s back-off"
        )
