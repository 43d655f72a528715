"""SharePartition (broker/share_partition.py): acquisition, acknowledgement, lock expiry and
delivery limits, checked step by step and against a simple per-offset model under random
operations."""

from __future__ import annotations

import random

import pytest

from logbroker.broker.share_partition import AcknowledgeType as Ack
from logbroker.broker.share_partition import RecordState, ShareError, SharePartition
from logbroker.protocol import ErrorCode


def sp(start: int = 0, limit: int = 3, max_in_flight: int = 100, lock: float = 10.0) -> SharePartition:
    return SharePartition("g", "t", 0, start, lock, limit, max_in_flight)


def test_new_records_are_acquired_once_and_the_start_moves_past_acknowledged_ones():
    s = sp()
    assert s.acquire("a", 0, 5, now=0, max_records=100) == [(0, 4, 1)]
    assert s.acquire("b", 0, 5, now=0, max_records=100) == [], "acquired records go to one member"
    assert s.acquire("b", 5, 8, now=0, max_records=2) == [(5, 6, 1)], "max_records bounds new offsets"
    assert s.end_offset == 7
    s.acknowledge("a", 0, 1, [Ack.ACCEPT], now=1)
    assert s.start_offset == 2
    s.acknowledge("a", 3, 4, [Ack.REJECT, Ack.ACCEPT], now=1)
    assert s.start_offset == 2, "offset 2 is still acquired"
    s.acknowledge("a", 2, 2, [Ack.GAP], now=1)
    assert (s.start_offset, s.end_offset) == (5, 7)
    assert set(s.records) == {5, 6}


def test_only_the_holder_acknowledges_and_a_bad_batch_changes_nothing():
    s = sp()
    s.acquire("a", 0, 3, now=0, max_records=100)
    with pytest.raises(ShareError) as e:
        s.acknowledge("b", 0, 2, [Ack.ACCEPT], now=1)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE and "offset 0" in str(e.value) and "member a" in str(e.value)
    with pytest.raises(ShareError) as e:
        s.acknowledge("a", 1, 5, [Ack.ACCEPT], now=1)
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE and "offset 3 is not in flight" in str(e.value)
    with pytest.raises(ShareError) as e:
        s.acknowledge("a", 0, 2, [Ack.ACCEPT, Ack.ACCEPT], now=1)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(ShareError):
        s.acknowledge("a", 0, 0, [9], now=1)
    assert all(r.state == RecordState.ACQUIRED and r.member_id == "a" for r in s.records.values())


def test_released_and_expired_records_come_back_until_the_delivery_limit():
    s = sp(limit=2, lock=5)
    s.acquire("a", 0, 2, now=0, max_records=100)
    s.acknowledge("a", 0, 0, [Ack.RELEASE], now=1)
    assert s.first_available(now=1) == 0
    assert s.acquire("b", 0, 1, now=1, max_records=100) == [(0, 0, 2)], "second delivery"
    # offset 1's lock (taken at 0) runs out at 5; offset 0 (taken at 1) at 6
    assert s.first_available(now=5) == 1
    assert s.acquire("b", 1, 2, now=5, max_records=100) == [(1, 1, 2)]
    assert s.expire_locks(now=6) == 1, "offset 0 expires at its second delivery: archived"
    assert (s.start_offset, [(o, n) for o, n, _ in s.dead_letters]) == (1, [(0, 2)]), (
        "archived at the start: the start moves past it"
    )
    s.acknowledge("b", 1, 1, [Ack.RELEASE], now=7)
    assert [(o, n) for o, n, _ in s.dead_letters] == [(0, 2), (1, 2)]
    assert (s.start_offset, s.end_offset, s.records) == (2, 2, {})


def test_a_member_leaving_gives_its_records_back_and_renew_extends_the_lock():
    s = sp(lock=5)
    s.acquire("a", 0, 2, now=0, max_records=100)
    s.acquire("b", 2, 4, now=0, max_records=100)
    s.acknowledge("b", 2, 3, [Ack.RENEW], now=4)
    assert s.release_member("a") == 2
    assert s.expire_locks(now=6) == 0, "b renewed at 4: locked until 9"
    assert s.acquire("c", 0, 4, now=6, max_records=100) == [(0, 1, 2)]


def test_in_flight_records_are_bounded():
    s = sp(max_in_flight=4)
    assert s.acquire("a", 0, 10, now=0, max_records=100) == [(0, 3, 1)]
    assert not s.can_acquire_new()
    s.acknowledge("a", 0, 1, [Ack.ACCEPT], now=0)
    assert s.acquire("a", 4, 10, now=0, max_records=100) == [(4, 5, 1)]


def test_the_log_start_moving_skips_records():
    s = sp()
    s.acquire("a", 0, 5, now=0, max_records=100)
    s.move_start(3)
    assert (s.start_offset, sorted(s.records)) == (3, [3, 4])
    s.move_start(9)
    assert (s.start_offset, s.end_offset, s.records) == (9, 9, {})


def test_random_operations_agree_with_a_per_offset_model():
    rng = random.Random(7)
    limit, lock = 3, 4.0
    s = sp(limit=limit, lock=lock, max_in_flight=30)
    # model: offset -> [state, count, member, deadline]; done offsets stay in the model
    model: dict[int, list] = {}
    hw = 0
    members = ["a", "b", "c"]
    failovers = 0
    for step in range(3000):
        now = step * 0.5
        hw += rng.choice([0, 0, 1, 3])
        for m in model.values():  # expiry, as the model sees it
            if m[0] == "acq" and m[3] <= now:
                m[0], m[2] = ("archived" if m[1] >= limit else "avail"), ""
        op = rng.random()
        who = rng.choice(members)
        if op < 0.4:
            first = s.first_available(now)
            bound = s.end_offset if first is not None else hw
            first = s.end_offset if first is None else first
            got = s.acquire(who, first, bound, now, rng.randint(1, 8))
            for a, b, n in got:
                for off in range(a, b + 1):
                    m = model.setdefault(off, ["avail", 0, "", 0.0])
                    assert m[0] == "avail", (step, off, m)
                    m[0], m[1], m[2], m[3] = "acq", m[1] + 1, who, now + lock
                    assert m[1] == n
        else:
            held = [off for off, m in model.items() if m[0] == "acq" and m[2] == who]
            if not held:
                continue
            off = rng.choice(held)
            kind = rng.choice([Ack.ACCEPT, Ack.RELEASE, Ack.REJECT])
            s.acknowledge(who, off, off, [kind], now)
            m = model[off]
            if kind == Ack.ACCEPT:
                m[0] = "acked"
            elif kind == Ack.REJECT:
                m[0] = "archived"
            else:
                m[0], m[2] = ("archived" if m[1] >= limit else "avail"), ""
        s.expire_locks(now)
        if rng.random() < 0.02:  # a new leader reads back what was written: the locks are gone
            restored = sp(start=s.start_offset, limit=limit, lock=lock, max_in_flight=30)
            restored.restore(s.state_batches())
            s = restored
            for m in model.values():
                if m[0] == "acq":
                    m[0], m[2] = "avail", ""
            failovers += 1
        # the start offset is the first offset not done; in-flight entries match the model
        done = {"acked", "archived"}
        expect_start = 0
        while expect_start in model and model[expect_start][0] in done:
            expect_start += 1
        assert s.start_offset == expect_start, step
        assert s.end_offset == (max(model) + 1 if model else 0)
        for off, rec in s.records.items():
            m = model[off]
            state = {
                RecordState.AVAILABLE: "avail",
                RecordState.ACQUIRED: "acq",
                RecordState.ACKNOWLEDGED: "acked",
                RecordState.ARCHIVED: "archived",
            }[rec.state]
            assert (state, rec.delivery_count) == (m[0], m[1]), (step, off)
    assert s.start_offset > 100, "the run made progress"
    assert failovers > 20


def test_persisted_state_is_runs_of_the_in_flight_offsets_and_restores_them():
    s = sp(start=10, limit=5)
    s.acquire("a", 10, 16, now=0, max_records=100)
    v = s.version
    assert v == 0, "acquiring is not written"
    s.acknowledge("a", 11, 12, [Ack.ACCEPT], now=1)
    s.acknowledge("a", 13, 13, [Ack.RELEASE], now=1)
    s.acknowledge("a", 15, 15, [Ack.REJECT], now=1)
    assert s.version == 3 and s.dirty
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in s.state_batches()] == [
        (10, 10, 0, 1),
        (11, 12, 2, 1),
        (13, 14, 0, 1),
        (15, 15, 4, 1),
    ], "acquired records are written as available"
    r = sp(start=10, limit=5)
    r.restore(s.state_batches())
    assert (r.start_offset, r.end_offset) == (10, 16)
    assert r.acquire("b", 10, 16, now=2, max_records=100) == [(10, 10, 2), (13, 14, 2)]
    # a gap between batches is never-delivered records; a done prefix moves the start
    r = sp(start=0)
    from logbroker.coord.groups.share_state_log import StateBatch

    r.restore([StateBatch(0, 1, 2, 1), StateBatch(5, 5, 4, 3)])
    assert (r.start_offset, r.end_offset) == (2, 6)
    assert r.acquire("c", 0, 6, now=0, max_records=100) == [(2, 4, 1)]
