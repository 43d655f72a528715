"""Server-side assignors (KIP-848) against their contract, on random inputs."""

from __future__ import annotations

import random

import pytest

from logbroker.coord.groups.assignors import range_assign, uniform_assign


def check_valid(members, partitions, out):
    owners = {}
    for m, parts in out.items():
        for tp in parts:
            assert tp not in owners, f"{tp} assigned to {owners[tp]} and {m}"
            assert tp[0] in members[m], f"{m} got {tp} without subscribing to {tp[0]}"
            owners[tp] = m
    wanted = {(t, p) for t, n in partitions.items() for p in range(n) if any(t in s for s in members.values())}
    assert set(owners) == wanted


@pytest.mark.parametrize("seed", range(40))
def test_uniform_valid_balanced_and_sticky(seed):
    rng = random.Random(seed)
    topics = {f"t{i}": rng.randint(1, 12) for i in range(rng.randint(1, 4))}
    names = list(topics)
    members = {f"m{i}": set(names) for i in range(rng.randint(1, 7))}
    out = uniform_assign(members, topics, {})
    check_valid(members, topics, out)
    counts = [len(v) for v in out.values()]
    assert max(counts) - min(counts) <= 1  # homogeneous subscriptions: balanced within one
    # a member joins: only what is needed moves
    members2 = dict(members, mnew=set(names))
    out2 = uniform_assign(members2, topics, out)
    check_valid(members2, topics, out2)
    counts2 = [len(v) for v in out2.values()]
    assert max(counts2) - min(counts2) <= 1
    moved = sum(len(out[m] - out2[m]) for m in out)
    total = sum(topics.values())
    assert moved <= -(-total // len(members2)) + 1, (moved, out, out2)


@pytest.mark.parametrize("seed", range(30))
def test_uniform_heterogeneous_subscriptions(seed):
    rng = random.Random(100 + seed)
    topics = {f"t{i}": rng.randint(1, 8) for i in range(4)}
    members = {f"m{i}": {t for t in topics if rng.random() < 0.6} or {"t0"} for i in range(rng.randint(1, 6))}
    check_valid(members, topics, uniform_assign(members, topics, {}))


def test_range_matches_kafka_range_rule():
    members = {"a": {"t"}, "b": {"t"}, "c": {"t"}}
    out = range_assign(members, {"t": 7}, {})
    assert out == {"a": {("t", 0), ("t", 1), ("t", 2)}, "b": {("t", 3), ("t", 4)}, "c": {("t", 5), ("t", 6)}}
    check_valid(members, {"t": 7}, out)
