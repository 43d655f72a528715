"""The cooperative-sticky assignor of classic groups (client/sticky_assignor.py) and the
cooperative protocol of our classic member (client/group.py, KIP-429): a model test of the
algorithm's invariants, three of our consumers joining one by one (only moved partitions
revoked, kept ones consumed throughout, every record once), and one group of ours, a
librdkafka consumer and a Java KafkaConsumer (tests/java/CoopWorker.java) against a
logbroker broker, each of the three leading it in one of the runs."""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import require_java
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import logbroker
from logbroker import Broker
from logbroker.client import config
from logbroker.client.group import (
    Subscription,
    TopicPartition,
    cooperative_sticky_assign,
    encode_subscription,
    parse_subscription,
)
from logbroker.client.sticky_assignor import Member, cooperative_assign, sticky_assign, valid_owned

WORKER = str(Path(__file__).resolve().parent / "java" / "CoopWorker.java")

# -- (a) the algorithm ------------------------------------------------------------------------


@st.composite
def groups(draw, equal: bool | None = None):
    """(members, counts, previous owner of each partition): up to 3 topics of up to 8
    partitions, up to 6 members with subscriptions (equal ones when `equal`), owned
    partitions from a previous assignment (some to members gone or unsubscribed since) and
    now and then a stale claim with an older generation."""
    counts = {f"t{i}": draw(st.integers(1, 8)) for i in range(draw(st.integers(1, 3)))}
    topics = sorted(counts)
    n = draw(st.integers(1, 6))
    ids = [f"m{i}" for i in range(n)]
    if equal is None:
        equal = draw(st.booleans())
    if equal:
        subs = {m: topics for m in ids}
    else:
        subs = {m: sorted(draw(st.sets(st.sampled_from(topics), min_size=1))) for m in ids}
    owners = {}
    owned: dict[str, list] = {m: [] for m in ids}
    for t in topics:
        for p in range(counts[t]):
            o = draw(st.integers(-1, n + 1))  # -1 and n, n+1: nobody among these members
            if 0 <= o < n:
                owned[ids[o]].append((t, p))
                owners[(t, p)] = ids[o]
    gen = draw(st.integers(1, 5))
    stale = {}
    if n > 1 and draw(st.booleans()):
        # a member that missed a rebalance still claims what it had, one generation back
        m = draw(st.sampled_from(ids))
        extra = [tp for tp in owners if owners[tp] != m and tp[0] in subs[m]]
        if extra:
            stale[m] = draw(st.lists(st.sampled_from(extra), max_size=3, unique=True))
    members = {}
    for m in ids:
        claims = owned[m] + stale.get(m, [])
        members[m] = Member(subs[m], draw(st.permutations(claims)) if claims else [], gen - (1 if m in stale else 0))
    return members, counts


def check_plan(members: dict[str, Member], counts: dict[str, int], plan: dict[str, list]) -> None:
    every = [tp for m in plan for tp in plan[m]]
    assert len(every) == len(set(every)), "a partition assigned twice"
    wanted = {(t, p) for t, n in counts.items() if any(t in s.topics for s in members.values()) for p in range(n)}
    assert set(every) == wanted, "not every subscribed partition assigned (or an unknown one assigned)"
    for m, tps in plan.items():
        assert all(t in members[m].topics for t, _ in tps), f"{m} got a topic it does not subscribe to"
        for t, _ in tps:
            for other, s in members.items():
                if t in s.topics:
                    assert len(plan[other]) >= len(tps) - 1, f"{m} holds {len(tps)}, {other} only {len(plan[other])}"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(groups())
def test_sticky_plan_complete_exclusive_balanced(g):
    members, counts = g
    plan = sticky_assign(members, counts)
    check_plan(members, counts, plan)
    kept = valid_owned(members, counts)
    # a member never both gives up something it owned and gets something new of that topic
    for m, tps in plan.items():
        lost = set(kept[m]) - set(tps)
        gained = set(tps) - set(kept[m])
        assert not ({t for t, _ in lost} & {t for t, _ in gained}), (m, lost, gained)
    # an owned assignment that is already complete and balanced comes back as it is
    if {tp for tps in kept.values() for tp in tps} == {tp for tps in plan.values() for tp in tps}:
        try:
            check_plan(members, counts, kept)
        except AssertionError:
            return
        assert {m: sorted(v) for m, v in kept.items()} == plan


@settings(max_examples=300, deadline=None)
@given(groups(equal=True))
def test_sticky_moves_only_what_balance_needs(g):
    """Equal subscriptions: the counts differ by at most 1, and the number of owned
    partitions that move is the least any balanced plan needs (the members owning most keep
    the larger quota)."""
    members, counts = g
    plan = sticky_assign(members, counts)
    sizes = [len(v) for v in plan.values()]
    assert max(sizes) - min(sizes) <= 1
    kept = valid_owned(members, counts)
    total, n = sum(counts.values()), len(members)
    lo, extra = divmod(total, n)
    order = sorted(members, key=lambda m: -len(kept[m]))
    quota = {m: lo + (1 if i < extra else 0) for i, m in enumerate(order)}
    least = sum(max(0, len(kept[m]) - quota[m]) for m in members)
    moved = sum(len(set(kept[m]) - set(plan[m])) for m in members)
    assert moved == least


@settings(max_examples=400, deadline=None)
@given(groups())
def test_cooperative_never_gives_away_an_owned_partition(g):
    """No partition a member claims goes to another member in the same generation; what is
    withheld is exactly what changes owner; the next generations complete the plan."""
    members, counts = g
    plan = sticky_assign(members, counts)
    out = cooperative_assign(members, counts)
    for m, tps in out.items():
        assert set(tps) <= set(plan[m])
        for tp in tps:
            if tp not in members[m].owned:
                assert not any(tp in s.owned for o, s in members.items() if o != m), (m, tp)
    withheld = {tp for m in plan for tp in set(plan[m]) - set(out[m])}
    moving = {
        tp
        for m in plan
        for tp in plan[m]
        if tp not in members[m].owned and any(tp in s.owned for s in members.values())
    }
    assert withheld == moving
    # members revoke what they lost and rejoin with what they have: a few generations later
    # nothing is withheld and the plan is complete
    for gen in range(1, 6):
        members = {m: Member(s.topics, list(out[m]), s.generation + gen) for m, s in members.items()}
        out = cooperative_assign(members, counts)
        if out == sticky_assign(members, counts):
            break
    else:
        pytest.fail("the cooperative plan did not settle")
    check_plan(members, counts, out)


def test_equal_subscriptions_settle_in_two_rebalances():
    counts = {"t": 6}
    members = {
        "a": Member(["t"], [("t", p) for p in range(6)], 3),
        "b": Member(["t"], [], -1),
        "c": Member(["t"], [], -1),
    }
    first = cooperative_assign(members, counts)
    assert first == {"a": [("t", 0), ("t", 1)], "b": [], "c": []}
    members = {m: Member(["t"], first[m], 4) for m in members}
    second = cooperative_assign(members, counts)
    assert sorted(len(v) for v in second.values()) == [2, 2, 2] and second["a"] == first["a"]


def test_duplicate_claims_go_to_the_newer_generation_or_nobody():
    counts = {"t": 2}
    newer = {"a": Member(["t"], [("t", 0)], 5), "b": Member(["t"], [("t", 0), ("t", 1)], 4)}
    assert valid_owned(newer, counts) == {"a": [("t", 0)], "b": [("t", 1)]}
    same = {"a": Member(["t"], [("t", 0)], 5), "b": Member(["t"], [("t", 0), ("t", 1)], 5)}
    assert valid_owned(same, counts) == {"a": [], "b": [("t", 1)]}
    gone = {"a": Member(["u"], [("t", 0)], 5), "b": Member(["t"], [("t", 5)], 5)}  # unsubscribed, no such partition
    assert valid_owned(gone, counts) == {"a": [], "b": []}


def test_subscription_bytes_and_config_names():
    owned = [TopicPartition("a", 1), TopicPartition("b", 0), TopicPartition("a", 0)]
    b = encode_subscription(["b", "a"], b"\x00\x00\x00\x07", owned, 7, "r1")
    assert parse_subscription(b) == Subscription(["a", "b"], b"\x00\x00\x00\x07", sorted(owned), 7, "r1")
    # version 0 (an old client) and version 1 with Java's user data carrying the generation
    v0 = b"\x00\x00" + b"\x00\x00\x00\x01\x00\x01t" + b"\xff\xff\xff\xff"
    assert parse_subscription(v0) == Subscription(["t"])
    v1 = (
        b"\x00\x01"
        + b"\x00\x00\x00\x01\x00\x01t"
        + b"\x00\x00\x00\x04\x00\x00\x00\x09"
        + b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x02"
    )
    s1 = parse_subscription(v1)
    assert s1.owned == [TopicPartition("t", 2)] and s1.generation == -1
    v1_other = parse_subscription(encode_subscription(["t"], None, [TopicPartition("t", 2)], 8))
    # the v1 claim (generation 9 from its user data) wins over the v3 one of generation 8
    plan = cooperative_sticky_assign({"x": s1, "y": v1_other}, {"t": 4})
    assert TopicPartition("t", 2) in plan["x"]
    for name in (
        "cooperative-sticky",
        "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
        "CooperativeStickyAssignor",
    ):
        assert config.build(config.CONSUMER, {"partition.assignment.strategy": name})[
            "partition.assignment.strategy"
        ] == ["cooperative-sticky"]
    assert config.build(config.CONSUMER, {})["partition.assignment.strategy"][-1] == "cooperative-sticky"


# -- (b) our consumers ----------------------------------------------------------------------

FAST = {"group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def coop_broker(tmp_path):
    with Broker(data_dir=tmp_path / "data", config=FAST) as b:
        yield b


def create_topic(bs: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


class Feeder:
    """Produces `v<i>` to every partition in turn, `rate` records a second, until stopped."""

    def __init__(self, bs: str, topic: str, partitions: int, rate: int = 300) -> None:
        self.p = CKProducer({"bootstrap.servers": bs, "linger.ms": 2})
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.sent = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(max(1, self.rate // 50)):
                self.p.produce(self.topic, f"v{self.sent}".encode(), partition=self.sent % self.partitions)
                self.sent += 1
            self.p.poll(0)
            time.sleep(0.02)

    def stop(self) -> int:
        self._stop.set()
        self.thread.join(5)
        assert self.p.flush(10) == 0
        return self.sent


class Ours:
    """One of our consumers, polling in its own thread: what it consumed, its rebalance
    callbacks and its group state at each batch."""

    def __init__(self, name: str, bs: str, group: str, topic: str, revoke_sleep: float = 0.0) -> None:
        self.name = name
        self.c = logbroker.Consumer(
            bs,
            group_id=group,
            client_id=name,
            auto_offset_reset="earliest",
            partition_assignment_strategy="cooperative-sticky",
            heartbeat_interval_ms=100,
            session_timeout_ms=10000,
            auto_commit_interval_ms=200,
        )
        self.topic = topic
        self.revoke_sleep = revoke_sleep
        self.owned: set[int] = set()
        self.events: list[tuple[str, float, list[int], frozenset[int]]] = []  # kind, time, partitions, owned before
        self.records: list[tuple[int, int, bytes, float, str]] = []  # partition, offset, value, time, group state
        self.revoke_ends: list[float] = []  # when each on_revoke returned
        self.states: list[tuple[float, str]] = []  # (time, group state) at each change seen by poll
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assign(self, tps) -> None:
        ps = sorted(tp.partition for tp in tps)
        self.events.append(("assign", time.time(), ps, frozenset(self.owned)))
        self.owned |= set(ps)

    def _revoke(self, tps) -> None:
        ps = sorted(tp.partition for tp in tps)
        self.events.append(("revoke", time.time(), ps, frozenset(self.owned)))
        self.owned -= set(ps)
        if self.revoke_sleep:
            time.sleep(self.revoke_sleep)
        self.revoke_ends.append(time.time())

    def _run(self) -> None:
        try:
            self.c.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke)
            while not self._stop.is_set():
                batch = self.c.poll(0.05)
                state = self.c._core.group.state
                now = time.time()
                if not self.states or self.states[-1][1] != state:
                    self.states.append((now, state))
                self.records.extend((r.partition, r.offset, r.value, now, state) for r in batch)
        except BaseException as e:  # reported by the test
            self.error = e

    def close(self) -> None:
        self._stop.set()
        self.thread.join(10)
        self.c.close()
        assert self.error is None, repr(self.error)


def wait_for(cond, timeout: float, what: str, members=()) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}: " + "; ".join(f"{m.name} {sorted(m.owned)}" for m in members))
        for m in members:
            assert m.error is None, repr(m.error)
        time.sleep(0.02)


def test_three_members_join_one_by_one(coop_broker):
    bs, topic, group = coop_broker.bootstrap_servers, "coop6", "coop-g"
    create_topic(bs, topic, 6)
    feeder = Feeder(bs, topic, 6)
    a = Ours("a", bs, group, topic)
    members = [a]
    try:
        wait_for(lambda: len(a.owned) == 6, 20, "a to own all 6", members)
        b = Ours("b", bs, group, topic, revoke_sleep=0.0)
        members.append(b)
        wait_for(lambda: len(a.owned) == 3 and len(b.owned) == 3, 20, "3/3", members)
        # c joins; b takes 3 s over its revocation, so the group's second rebalance waits
        # for b while a has rejoined: a must go on consuming its kept partitions meanwhile
        b.revoke_sleep = 3.0
        c = Ours("c", bs, group, topic)
        members.append(c)
        wait_for(lambda: sorted(len(m.owned) for m in members) == [2, 2, 2], 30, "2/2/2", members)
        final = {m.name: set(m.owned) for m in members}
        total = feeder.stop()
        wait_for(lambda: sum(len(m.records) for m in members) >= total, 30, f"{total} records", members)
        time.sleep(0.5)
    finally:
        feeder.stop() if not feeder._stop.is_set() else None
        for m in members:
            m.close()
    assert sorted(p for ps in final.values() for p in ps) == list(range(6))
    for m in members:
        assigns = [e for e in m.events if e[0] == "assign"]
        revokes = [e for e in m.events if e[0] == "revoke"]
        for _, _, ps, before in revokes:
            # only what moved: never all it owned, and each one is someone else's now
            assert ps and set(ps) < before, (m.name, ps, before)
            assert all(p not in final[m.name] for p in ps)
        for _, _, ps, before in assigns:
            assert not set(ps) & before, f"{m.name}: on_assign repeated owned partitions {ps} {before}"
    assert [len(e[2]) for e in a.events if e[0] == "revoke"] == [3, 1]
    assert [len(e[2]) for e in b.events if e[0] == "revoke"] == [1]
    # a went on consuming its kept partitions all through b's slow revocation. Whether a's
    # JoinGroup waits for b meanwhile depends on the race of b's SyncGroup with a's rejoin:
    # when b's revocation falls in the generation after a's, the group stays Stable until b
    # rejoins. So: no gap in a's kept records over the window, and when a was rejoining in
    # it, records came while it was.
    t_b_revoke, t_b_revoked = next(e[1] for e in b.events if e[0] == "revoke"), b.revoke_ends[0]
    kept = final["a"]
    window = [r for r in a.records if r[0] in kept and t_b_revoke <= r[3] <= t_b_revoked]
    times = [t_b_revoke] + [r[3] for r in window] + [t_b_revoked]
    gap = max(t2 - t1 for t1, t2 in zip(times, times[1:]))
    state_before = [s for t, s in a.states if t < t_b_revoke][-1:]
    rejoining = {s for t, s in a.states if t_b_revoke <= t <= t_b_revoked} | set(state_before)
    rejoining.discard("stable")
    during = [r for r in window if r[4] != "stable"]
    if gap > 1.0 or (rejoining and not during):  # what each member did around b's revocation
        near = [
            (round(r[3] - t_b_revoke, 2), r[0], r[4]) for r in a.records if t_b_revoke - 2 <= r[3] <= t_b_revoked + 2
        ]
        pytest.fail(
            f"a stopped consuming its kept partitions during b's revocation (longest gap {gap:.2f} s, states "
            f"{sorted(rejoining)}): b revoked at 0 and returned at "
            f"{t_b_revoked - t_b_revoke:.2f}; a kept {sorted(kept)}; events (s from b's revoke) "
            + "; ".join(f"{m.name} {e[0]} {e[2]} at {e[1] - t_b_revoke:.2f}" for m in members for e in m.events)
            + f"; a's states {[(round(t - t_b_revoke, 2), s) for t, s in a.states]}"
            + f"; a's records within 2 s of the window (s, partition, state): {near[:40]} ({len(near)})"
        )
    # every record exactly once, committed as it went (the positions at the end are the ends)
    seen = [(r[0], r[1]) for m in members for r in m.records]
    assert len(seen) == len(set(seen)) == total, (len(seen), len(set(seen)), total)
    assert sorted(r[2] for m in members for r in m.records) == sorted(f"v{i}".encode() for i in range(total))
    with logbroker.Consumer(bs, group_id=group) as check:
        committed = check.committed([(topic, p) for p in range(6)])
    assert sum(v or 0 for v in committed.values()) == total


# -- (c) with librdkafka and Java in one group -------------------------------------------------


class Rdkafka:
    """A confluent_kafka (librdkafka) consumer with cooperative-sticky, polling in a thread."""

    def __init__(self, name: str, bs: str, group: str, topic: str) -> None:
        self.name = name
        self.c = CKConsumer(
            {
                "bootstrap.servers": bs,
                "group.id": group,
                "client.id": name,
                "partition.assignment.strategy": "cooperative-sticky",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                "heartbeat.interval.ms": 100,
                "session.timeout.ms": 10000,
            }
        )
        self.owned: set[int] = set()
        self.events: list[tuple[str, float, list[int]]] = []
        self.records: list[tuple[int, int, bytes]] = []
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(topic,), daemon=True)
        self.thread.start()

    def _assign(self, _c, tps) -> None:
        ps = sorted(tp.partition for tp in tps)
        self.events.append(("assign", time.time(), ps))
        self.owned |= set(ps)

    def _revoke(self, _c, tps) -> None:
        ps = sorted(tp.partition for tp in tps)
        self.events.append(("revoke", time.time(), ps))
        self.owned -= set(ps)

    def _run(self, topic: str) -> None:
        try:
            self.c.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
            while not self._stop.is_set():
                m = self.c.poll(0.05)
                if m is not None and not m.error():
                    self.records.append((m.partition(), m.offset(), m.value()))
            self.c.close()
        except BaseException as e:
            self.error = e

    def close(self) -> None:
        self._stop.set()
        self.thread.join(15)
        assert self.error is None, repr(self.error)


class Java:
    """tests/java/CoopWorker.java: a Java KafkaConsumer with the CooperativeStickyAssignor."""

    def __init__(self, tools, name: str, bs: str, group: str, topic: str) -> None:
        self.name = name
        cmd = tools.tools_java(WORKER, [bs, group, topic, name], heap="-Xmx256m")
        self.stderr = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.owned: set[int] = set()
        self.events: list[tuple[str, float, list[int]]] = []
        self.records: list[tuple[int, int, bytes]] = []
        self.other: list[str] = []
        self.error = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            f = line.split()
            if f and f[0] in ("assign", "revoke", "lost"):
                ps = [] if f[2] == "-" else sorted(int(x) for x in f[2].split(","))
                self.events.append((f[0] if f[0] == "assign" else "revoke", int(f[1]) / 1000, ps))
                if f[0] == "assign":
                    self.owned |= set(ps)
                else:
                    self.owned -= set(ps)
            elif f and f[0] == "record":
                self.records.append((int(f[1]), int(f[2]), f[3].encode()))
            else:
                self.other.append(line)

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                assert self.proc.stdin is not None
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()
                self.proc.wait(20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
            self.reader.join(5)
            for f in (self.proc.stdin, self.proc.stdout):
                if f is not None and not f.closed:
                    f.close()
            self.stderr.seek(0)
            err = self.stderr.read()
            self.stderr.close()
        assert self.proc.returncode == 0, err[-3000:]


@pytest.fixture(scope="module")
def kafka_tools():
    require_java()
    from benches.peers.kafka import install

    return install()


def ownership_overlaps(members, ended: dict[str, float]) -> list:
    """Partitions two members held at the same moment, by their rebalance callbacks' clocks
    (a member's ownership ends at its revoke, or when the test started closing it)."""
    spans: dict[int, list[tuple[float, float, str]]] = {}
    for m in members:
        start: dict[int, float] = {}
        for kind, t, ps, *_ in m.events:
            for p in ps:
                if kind == "assign":
                    start[p] = t
                elif p in start:
                    spans.setdefault(p, []).append((start.pop(p), t, m.name))
        for p, t in start.items():
            spans.setdefault(p, []).append((t, ended.get(m.name, float("inf")), m.name))
    bad = []
    for p, ss in spans.items():
        ss.sort()
        for (s1, e1, n1), (s2, e2, n2) in zip(ss, ss[1:]):
            if s2 < e1 and n1 != n2:
                bad.append((p, n1, (s1, e1), n2, (s2, e2)))
    return bad


@pytest.mark.parametrize("order", [("ours", "rdkafka", "java"), ("java", "ours", "rdkafka")])
def test_interop_with_librdkafka_and_java(coop_broker, kafka_tools, order):
    """One group of three clients on 6 partitions: balanced 2/2/2, no partition held by two
    members at once, every record consumed; then the leader leaves and the next one leads
    the remaining two to 3/3. The first run starts with ours (then librdkafka leads), the
    second with Java."""
    bs, group, topic = coop_broker.bootstrap_servers, f"mixed-{order[0]}", f"mixed-{order[0]}"
    create_topic(bs, topic, 6)
    feeder = Feeder(bs, topic, 6, rate=200)
    made = {
        "ours": lambda: Ours("ours", bs, group, topic),
        "rdkafka": lambda: Rdkafka("rdkafka", bs, group, topic),
        "java": lambda: Java(kafka_tools, "java", bs, group, topic),
    }
    state = coop_broker.server.groups.groups
    leaders: list[str] = []

    def note_leader() -> None:
        g = state.get(group)
        if g is not None and g.leader_id in g.members:
            cid = g.members[g.leader_id].client_id
            if not leaders or leaders[-1] != cid:
                leaders.append(cid)

    members: list = []
    ended: dict[str, float] = {}
    open_members: list = []
    try:
        for i, kind in enumerate(order):
            members.append(made[kind]())
            open_members.append(members[-1])
            want = sorted([6 // (i + 1) + (1 if j < 6 % (i + 1) else 0) for j in range(i + 1)])

            def settled(want=want) -> bool:
                note_leader()
                return sorted(len(m.owned) for m in open_members) == want and sorted(
                    p for m in open_members for p in m.owned
                ) == list(range(6))

            wait_for(settled, 45, f"{want} with {[m.name for m in members]}", members)
        assert state[group].protocol_name == "cooperative-sticky"
        # the leader leaves; the one that joined next leads the two left to 3/3
        first = open_members.pop(0)
        ended[first.name] = time.time()
        first.close()

        def settled_two() -> bool:
            note_leader()
            return sorted(len(m.owned) for m in open_members) == [3, 3] and sorted(
                p for m in open_members for p in m.owned
            ) == list(range(6))

        wait_for(settled_two, 45, "3/3 after the leader left", open_members)
        total = feeder.stop()
        consumed = lambda: {(p, o) for m in members for p, o, *_ in m.records}  # noqa: E731
        wait_for(lambda: len(consumed()) >= total, 30, f"{total} records", open_members)
    finally:
        if not feeder._stop.is_set():
            feeder.stop()
        for m in open_members:
            ended[m.name] = time.time()
            m.close()
    assert leaders[:2] == [order[0], order[1]], leaders
    assert not ownership_overlaps(members, ended)
    values = {r[2] for m in members for r in m.records}
    assert values == {f"v{i}".encode() for i in range(total)}
    ours = next(m for m in members if m.name == "ours")
    assert all(set(ps) < before for kind, _, ps, before in ours.events if kind == "revoke"), ours.events
