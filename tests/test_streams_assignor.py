"""The streams group (KIP-1071) sticky task assignor against its contract and Kafka's examples."""

from __future__ import annotations

import logging
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.coord.groups.streams_assignor import MemberSpec, Subtopology, TaskAssignment, assign

E: frozenset = frozenset()


@pytest.fixture(autouse=True)
def _quiet_standby_warning(caplog):
    caplog.set_level(logging.ERROR, logger="logbroker.coord.groups.streams_assignor")


def spec(process, active=(), standby=(), warmup=(), tags=None):
    return MemberSpec(process, None, None, tags or {}, frozenset(active), frozenset(standby), frozenset(warmup))


def t(sub, *parts):
    return [(sub, p) for p in parts]


def from_output(members, out):
    """The members with the output as their previous target assignment."""
    return {m: spec(s.process_id, out[m].active, out[m].standby, out[m].warmup) for m, s in members.items()}


@st.composite
def groups(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    r = random.Random(seed)
    subs = {f"s{i}": Subtopology(r.randint(1, 16), r.random() < 0.5) for i in range(r.randint(1, 4))}
    tasks = [(s, p) for s, v in subs.items() for p in range(v.num_tasks)]
    stale = [("gone", 0), ("s0", 99)]  # unknown subtopology, partition beyond the task count
    pool = tasks + stale
    one_each = r.random() < 0.4
    members = {}
    for p in range(r.randint(1, 8)):
        for m in range(1 if one_each else r.randint(1, 3)):
            members[f"m{p}_{m}"] = spec(
                f"p{p}",
                r.sample(pool, min(len(pool), r.randint(0, 5))),
                r.sample(pool, min(len(pool), r.randint(0, 3))),
                r.sample(pool, min(len(pool), r.randint(0, 1))),
            )
    return members, subs, r.randint(0, 2), one_each


def check_contract(members, subs, replicas, out):
    assert set(out) == set(members)
    proc = {m: s.process_id for m, s in members.items()}
    n_procs = len(set(proc.values()))
    tasks = {(s, p) for s, v in subs.items() for p in range(v.num_tasks)}
    active_owner = {}
    for m, a in out.items():
        assert a.warmup == E  # Kafka's sticky assignor assigns no warm-up tasks
        for task in a.active:
            assert task not in active_owner, f"{task} active on {active_owner[task]} and {m}"
            active_owner[task] = m
    assert set(active_owner) == tasks  # every active task exactly once, nothing stale
    copies: dict = {}
    for m, a in out.items():
        for task in a.standby:
            assert subs[task[0]].stateful, f"standby {task} of a stateless subtopology"
            assert proc[active_owner[task]] != proc[m], f"standby {task} on the process running it active"
            assert proc[m] not in copies.setdefault(task, set()), f"two standbys of {task} on {proc[m]}"
            copies[task].add(proc[m])
    for task in tasks:
        want = min(replicas, n_procs - 1) if subs[task[0]].stateful else 0
        assert len(copies.get(task, ())) == want, task
    return active_owner


def active_counts_by_process(members, out):
    by_proc: dict = {}
    for m, a in out.items():
        by_proc.setdefault(members[m].process_id, {})[m] = len(a.active)
    return by_proc


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups())
def test_model(group):
    members, subs, replicas, one_each = group
    out = assign(members, subs, replicas)
    check_contract(members, subs, replicas, out)
    n_active = sum(v.num_tasks for v in subs.values())
    by_proc = active_counts_by_process(members, out)

    # Balance across processes: equal processes (one member each) within one active task.
    if one_each:
        totals = [sum(c.values()) for c in by_proc.values()]
        assert max(totals) - min(totals) <= 1
    # Within a process, Kafka keeps a sticky task on its member while it is below the quota
    # ceil(active / members): no member goes above it.
    quota = math.ceil(n_active / len(members))
    assert all(c <= quota for counts in by_proc.values() for c in counts.values())

    # Determinism: same input, and the same input in another dict order.
    assert assign(members, subs, replicas) == out
    shuffled = dict(reversed(list(members.items())))
    assert assign(shuffled, dict(reversed(list(subs.items()))), replicas) == out

    # Stickiness: from any previous assignment the assignor reaches its own fixed point within
    # two more runs, and re-running on a fixed point changes nothing.
    cur = members
    outs = [out]
    for _ in range(3):
        cur = from_output(members, outs[-1])
        outs.append(assign(cur, subs, replicas))
    assert outs[2] == outs[3]

    # A member (on a new process) joins the fixed point: it gets its share and only about that
    # many tasks move (Kafka: shouldMoveMinimalNumberOfTasksWhen...NewClientAdded).
    stable = outs[3]
    grown = dict(from_output(members, stable), znew=spec("pnew"))
    out2 = assign(grown, subs, replicas)
    check_contract(grown, subs, replicas, out2)
    owner = {task: m for m, a in stable.items() for task in a.active}
    new = len(out2["znew"].active)
    assert new >= n_active // len(grown)
    flips = sum(1 for m, a in out2.items() if m != "znew" for task in a.active if owner[task] != m)
    mixed = len({v.stateful for v in subs.values()}) > 1
    if one_each and not mixed:
        assert flips == 0  # no task flips between existing members
    else:
        assert flips <= 3


@settings(max_examples=100, deadline=None)
@given(groups())
def test_fresh_group_balanced_within_processes_and_stable(group):
    members, subs, replicas, one_each = group
    fresh = {m: spec(s.process_id) for m, s in members.items()}
    out = assign(fresh, subs, replicas)
    check_contract(fresh, subs, replicas, out)
    for counts in active_counts_by_process(fresh, out).values():
        assert max(counts.values()) - min(counts.values()) <= 1
    again = assign(from_output(fresh, out), subs, replicas)
    assert {m: a.active for m, a in again.items()} == {m: a.active for m, a in out.items()}
    if one_each:
        assert again == out


def test_empty_group():
    assert assign({}, {"s": Subtopology(4, True)}, 1) == {}


def test_stale_and_unknown_previous_tasks_are_ignored():
    members = {"m1": spec("p1", t("gone", 0, 1) + t("s", 7)), "m2": spec("p2", standby=t("gone", 2))}
    out = assign(members, {"s": Subtopology(2, True)}, 1)
    assert out["m1"].active | out["m2"].active == frozenset(t("s", 0, 1))
    assert all(task[0] == "s" and task[1] < 2 for a in out.values() for task in a.active | a.standby)


def test_one_active_task_per_process_when_counts_match():
    members = {f"member{i}": spec(f"process{i}") for i in (1, 2, 3)}
    out = assign(members, {"sub": Subtopology(3, False)}, 0)
    assert [len(out[m].active) for m in sorted(out)] == [1, 1, 1]


def test_does_not_migrate_active_task_to_other_process():
    subs = {"sub": Subtopology(3, False)}
    out = assign({"member1": spec("process1", t("sub", 0)), "member2": spec("process2", t("sub", 1))}, subs, 0)
    assert ("sub", 0) in out["member1"].active and ("sub", 1) in out["member2"].active
    out = assign({"member2": spec("process2", t("sub", 1)), "member3": spec("process1", t("sub", 2))}, subs, 0)
    assert ("sub", 1) in out["member2"].active and ("sub", 2) in out["member3"].active


def test_keeps_stickiness_with_more_clients_than_tasks():
    subs = {"sub": Subtopology(3, False)}
    members = {
        "member1": spec("process1"),
        "member2": spec("process2", t("sub", 0)),
        "member3": spec("process3"),
        "member4": spec("process4", t("sub", 2)),
        "member5": spec("process5", t("sub", 1)),
    }
    out = assign(members, subs, 0)
    assert {m: set(a.active) for m, a in out.items()} == {
        "member1": set(),
        "member2": set(t("sub", 0)),
        "member3": set(),
        "member4": set(t("sub", 2)),
        "member5": set(t("sub", 1)),
    }


def test_previous_standby_and_warmup_win_the_active_task():
    out = assign(
        {
            "member1": spec("process1", standby=t("sub", 2)),
            "member2": spec("process2", standby=t("sub", 1)),
            "member3": spec("process3", standby=t("sub", 0)),
        },
        {"sub": Subtopology(3, False)},
        0,
    )
    assert [out[f"member{i}"].active for i in (1, 2, 3)] == [frozenset(t("sub", x)) for x in (2, 1, 0)]
    # a warm-up counts as a previous standby: member3 gets task 8 over the less loaded member4
    out = assign(
        {
            "member1": spec("process1", t("sub", 0, 1, 2)),
            "member2": spec("process2", t("sub", 3, 4, 5)),
            "member3": spec("process3", t("sub", 6, 7), warmup=t("sub", 8)),
            "member4": spec("process4", t("sub", 9)),
        },
        {"sub": Subtopology(12, True)},
        0,
    )
    assert out["member3"].active == frozenset(t("sub", 6, 7, 8))
    assert out["member4"].active == frozenset(t("sub", 9, 10, 11))


def test_standby_goes_to_previous_warmup_over_idle_process():
    out = assign(
        {
            "member1": spec("process1", t("sub", 0)),
            "member2": spec("process2", t("sub", 1)),
            "member3": spec("process3", t("sub", 2), warmup=t("sub", 1)),
            "member4": spec("process4"),
        },
        {"sub": Subtopology(3, True)},
        1,
    )
    assert out["member3"].active == frozenset(t("sub", 2))
    assert out["member3"].standby == frozenset(t("sub", 1))
    assert ("sub", 1) not in out["member4"].standby


def test_previous_standbys_that_now_run_active_swap_standbys():
    out = assign(
        {"member1": spec("process1", standby=t("sub", 0)), "member2": spec("process2", standby=t("sub", 1))},
        {"sub": Subtopology(2, True)},
        1,
    )
    assert out["member1"] == TaskAssignment(frozenset(t("sub", 0)), frozenset(t("sub", 1)), E)
    assert out["member2"] == TaskAssignment(frozenset(t("sub", 1)), frozenset(t("sub", 0)), E)


def test_multiple_standby_replicas_and_none_without_another_process():
    members = {f"member{i}": spec(f"process{i}", t("sub", i - 1)) for i in (1, 2, 3)}
    out = assign(members, {"sub": Subtopology(3, True)}, 2)
    assert [set(out[f"member{i}"].standby) for i in (1, 2, 3)] == [
        set(t("sub", 1, 2)),
        set(t("sub", 0, 2)),
        set(t("sub", 0, 1)),
    ]
    out = assign({"member1": spec("process1")}, {"sub": Subtopology(10, True)}, 3)
    assert len(out["member1"].active) == 10 and out["member1"].standby == E


def test_more_tasks_to_process_with_more_members():
    members = {"member1": spec("process1"), "member2_1": spec("process2"), "member2_2": spec("process2")}
    subs = {f"sub{i}": Subtopology(3, False) for i in range(4)}
    out = assign(members, subs, 0)
    assert len(out["member1"].active) == 4
    assert len(out["member2_1"].active) + len(out["member2_2"].active) == 8


def test_new_client_gets_tasks_without_flipping_existing_ones():
    subs = {"sub": Subtopology(6, False)}
    out = assign(
        {
            "member1": spec("process1", t("sub", 0, 1, 2)),
            "member2": spec("process2", t("sub", 3, 4, 5)),
            "newMember": spec("process3"),
        },
        subs,
        0,
    )
    assert out["member1"].active < frozenset(t("sub", 0, 1, 2)) and len(out["member1"].active) == 2
    assert out["member2"].active < frozenset(t("sub", 3, 4, 5)) and len(out["member2"].active) == 2
    assert len(out["newMember"].active) == 2
    # tasks nobody ran go to the new client
    out = assign(
        {"member1": spec("process1", t("sub", 2, 1)), "member2": spec("process2", t("sub", 0, 3)), "m3": spec("p3")},
        subs,
        0,
    )
    assert out["m3"].active == frozenset(t("sub", 4, 5))


def test_tasks_not_previously_active_go_to_new_client():
    subs = {f"test-subtopology{i}": Subtopology(4, False) for i in range(3)}
    s0, s1, s2 = (f"test-subtopology{i}" for i in range(3))
    members = {
        "member1": spec("process1", t(s0, 1) + t(s1, 2, 3), t(s0, 0) + t(s1, 1) + t(s2, 0, 1, 3)),
        "member2": spec("process2", t(s0, 0) + t(s1, 1) + t(s2, 2), t(s0, 1, 2, 3) + t(s1, 0, 2, 3) + t(s2, 0, 1, 3)),
        "member3": spec("process3", t(s2, 0, 1, 3), t(s0, 2) + t(s1, 2)),
        "newMember": spec("process4", (), t(s0, 0, 1, 2, 3) + t(s1, 0, 1, 2, 3) + t(s2, 0, 1, 2, 3)),
    }
    out = assign(members, subs, 0)
    assert out["member1"].active == frozenset(t(s0, 1) + t(s1, 2, 3))
    assert out["member2"].active == frozenset(t(s0, 0) + t(s1, 1) + t(s2, 2))
    assert out["member3"].active == frozenset(t(s2, 0, 1, 3))
    assert out["newMember"].active == frozenset(t(s0, 2, 3) + t(s1, 0))


def test_standby_stays_on_previous_owner_below_quota():
    out = assign(
        {
            "member1": spec("process1", t("sub", 0), t("sub", 1)),
            "member2": spec("process2", t("sub", 1)),
            "member3": spec("process3"),
        },
        {"sub": Subtopology(2, True)},
        1,
    )
    assert out["member1"].active == frozenset(t("sub", 0))
    assert out["member1"].standby == frozenset(t("sub", 1))


def test_standby_to_previous_standby_not_holding_the_active():
    out = assign(
        {
            "member1": spec("process1", (), t("sub", 2)),
            "member2": spec("process2", t("sub", 0), t("sub", 2)),
            "member3": spec("process3", t("sub", 1)),
            "member4": spec("process4"),
        },
        {"sub": Subtopology(3, True)},
        1,
    )
    assert [out[f"member{i}"].active for i in (1, 2, 3, 4)] == [
        frozenset(t("sub", 2)),
        frozenset(t("sub", 0)),
        frozenset(t("sub", 1)),
        E,
    ]
    assert out["member2"].standby == frozenset(t("sub", 2))
    standbys = {m: set(out[m].standby) for m in ("member1", "member3", "member4")}
    assert standbys in (
        {"member1": set(), "member3": {("sub", 0)}, "member4": {("sub", 1)}},
        {"member1": {("sub", 1)}, "member3": set(), "member4": {("sub", 0)}},
        {"member1": {("sub", 0)}, "member3": set(), "member4": {("sub", 1)}},
    )


def test_stateful_and_stateless_balanced_independently():
    subs = {"stateful": Subtopology(4, True), "stateless": Subtopology(4, False)}
    out = assign({f"member{i}": spec(f"process{i}") for i in (1, 2, 3)}, subs, 0)
    for sub in subs:
        assert sorted(sum(1 for x in a.active if x[0] == sub) for a in out.values()) == [1, 1, 2]
    # each flavor is sticky only within its own quota
    out = assign(
        {
            "member1": spec("process1", t("stateless", 0, 1, 2, 3)),
            "member2": spec("process2", t("stateful", 0, 1, 2, 3)),
            "member3": spec("process3"),
        },
        subs,
        0,
    )
    assert {x for x in out["member2"].active if x[0] == "stateful"} == set(t("stateful", 0, 1))
    assert {x for x in out["member1"].active if x[0] == "stateless"} == set(t("stateless", 0, 1))
    assert {x for x in out["member2"].active if x[0] == "stateless"} == set(t("stateless", 3))
    assert {x for x in out["member3"].active if x[0] == "stateless"} == set(t("stateless", 2))
    # the stateful and stateless quotas do not add up beyond the active quota
    subs3 = {"stateful": Subtopology(3, True), "stateless": Subtopology(3, False)}
    out = assign(
        {"member1": spec("process1", t("stateful", 0, 1, 2) + t("stateless", 0, 1, 2)), "member2": spec("process2")},
        subs3,
        0,
    )
    assert out["member1"].active == frozenset(t("stateful", 0, 1) + t("stateless", 0))
    assert out["member2"].active == frozenset(t("stateful", 2) + t("stateless", 1, 2))


def test_returns_its_own_output_with_unchanged_members():
    subs = {"stateful": Subtopology(7, True), "stateless": Subtopology(5, False)}
    for replicas in (0, 1):
        members = {f"member{i}": spec(f"process{i}") for i in (1, 2, 3)}
        first = assign(members, subs, replicas)
        assert assign(from_output(members, first), subs, replicas) == first


def test_rack_aware_standbys_spread_over_tag_values():
    zones = {"p1": "a", "p2": "a", "p3": "b", "p4": "b"}
    members = {f"m{p}": spec(p, tags={"zone": z}) for p, z in zones.items()}
    subs = {"sub": Subtopology(8, True)}
    out = assign(members, subs, 1, {"num.standby.replicas": "1", "rack.aware.assignment.tags": "zone"})
    owner = check_contract(members, subs, 1, out)
    for m, a in out.items():
        for task in a.standby:
            assert zones[members[m].process_id] != zones[members[owner[task]].process_id], task
