"""`__share_group_state` records (coord/groups/share_state_log.py): Kafka's byte layout, round trips,
errors on malformed input, and `combine` against a per-offset model."""

from __future__ import annotations

import random
import struct
import uuid

import pytest

from logbroker.coord.groups.offsets_topic import partition_for
from logbroker.coord.groups.share_state_log import (
    SNAPSHOT,
    UPDATE,
    ShareState,
    ShareStateLogError,
    ShareUpdate,
    StateBatch,
    combine,
    coordinator_key,
    overlap,
    parse_snapshot_value,
    parse_state_key,
    parse_update_value,
    snapshot_value,
    state_key,
    update_value,
)

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def test_key_layout_is_kafkas():
    key = state_key("g1", TOPIC_ID, 7)
    assert key == struct.pack(">hh", 0, 2) + b"g1" + TOPIC_ID.bytes + struct.pack(">i", 7)
    assert parse_state_key(key) == (SNAPSHOT, "g1", TOPIC_ID, 7)
    assert parse_state_key(state_key("g1", TOPIC_ID, 7, UPDATE))[0] == UPDATE
    with pytest.raises(ShareStateLogError, match="unknown record type 5"):
        parse_state_key(struct.pack(">h", 5) + key[2:])
    with pytest.raises(ShareStateLogError, match="truncated"):
        parse_state_key(key[:-1])


def test_snapshot_value_layout_is_kafkas_and_round_trips():
    s = ShareState(
        snapshot_epoch=3,
        state_epoch=1,
        leader_epoch=4,
        start_offset=100,
        create_ms=5,
        write_ms=6,
        batches=[StateBatch(100, 104, 0, 2), StateBatch(105, 105, 2, 1)],
        delivery_complete_count=1,
    )
    raw = snapshot_value(s)
    expect = (
        struct.pack(">hiiiqqq", 0, 3, 1, 4, 100, 5, 6)
        + bytes([3])
        + struct.pack(">qqbh", 100, 104, 0, 2)
        + b"\x00"
        + struct.pack(">qqbh", 105, 105, 2, 1)
        + b"\x00"
        + bytes([1, 0, 4])
        + struct.pack(">i", 1)
    )  # tag 0 (DeliveryCompleteCount), 4 bytes
    assert raw == expect
    assert parse_snapshot_value(raw) == s
    s.delivery_complete_count = -1
    assert snapshot_value(s).endswith(b"\x00"), "the default is not written"
    assert parse_snapshot_value(snapshot_value(s)) == s
    with pytest.raises(ShareStateLogError, match="trailing"):
        parse_snapshot_value(raw + b"x")
    with pytest.raises(ShareStateLogError, match="unknown version"):
        parse_snapshot_value(b"\x00\x01" + raw[2:])
    with pytest.raises(ShareStateLogError, match="DeliveryState"):
        snapshot_value(ShareState(0, 0, 0, 0, 0, 0, [StateBatch(0, 0, 1, 1)]))


def test_update_value_round_trips():
    u = ShareUpdate(snapshot_epoch=2, leader_epoch=5, start_offset=-1, batches=[StateBatch(7, 9, 4, 3)])
    assert parse_update_value(update_value(u)) == u
    assert update_value(u)[:18] == struct.pack(">hiiq", 0, 2, 5, -1)


def test_placement_key_is_kafkas():
    assert coordinator_key("g", TOPIC_ID, 3) == f"g:{TOPIC_ID}:3"
    # Java: Math.abs("g:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0:3".hashCode()) % 50
    h = 0
    for ch in f"g:{TOPIC_ID}:3":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    assert partition_for(coordinator_key("g", TOPIC_ID, 3), 50) == abs(h) % 50


def _expand(batches):
    out = {}
    for b in batches:
        for off in range(b.first_offset, b.last_offset + 1):
            assert off not in out
            out[off] = (b.delivery_state, b.delivery_count)
    return out


def _random_batches(rng, lo, hi):
    out, off = [], lo + rng.randint(0, 3)
    while off < hi:
        n = rng.randint(1, 6)
        out.append(StateBatch(off, off + n - 1, rng.choice([0, 2, 4]), rng.randint(0, 3)))
        off += n + rng.choice([0, 0, 1, 4])
    return out


def test_combine_agrees_with_a_per_offset_model():
    rng = random.Random(11)
    for _ in range(2000):
        old = combine([], _random_batches(rng, 0, 40), 0)
        new = _random_batches(rng, rng.randint(0, 30), 60)
        start = rng.randint(0, 30)
        got = combine(old, new, start)
        model = {o: v for o, v in {**_expand(old), **_expand(new)}.items() if o >= start}
        assert _expand(got) == model
        assert all(a.last_offset < b.first_offset for a, b in zip(got, got[1:])), "sorted, disjoint"
        assert not any(
            a.last_offset + 1 == b.first_offset
            and (a.delivery_state, a.delivery_count) == (b.delivery_state, b.delivery_count)
            for a, b in zip(got, got[1:])
        ), "merged"


def test_overlap_finds_batches_sharing_an_offset():
    assert overlap([StateBatch(0, 4, 0, 1), StateBatch(5, 6, 0, 1)]) is None
    assert overlap([StateBatch(5, 6, 0, 1), StateBatch(0, 5, 0, 1)]) == (StateBatch(0, 5, 0, 1), StateBatch(5, 6, 0, 1))
