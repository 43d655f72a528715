"""Consumer groups with real clients in separate processes: partitions split without
overlap, rebalances on join, on death (session timeout) and on leave, committed offsets
resume, cooperative-sticky keeps unmoved partitions, static members come back without
a rebalance. Mixed clients (librdkafka, kafka-python, aiokafka) share one group."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = Path(__file__).resolve().parent


class MemberProc:
    def __init__(self, lib: str, bootstrap: str, group: str, topic: str, *extra: str) -> None:
        self.lib = lib
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "group_member.py"), lib, bootstrap, group, topic, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        self.assigned: set[int] = set()
        self.history: list[tuple[str, list[int]]] = []
        self.records: list[tuple[int, int, str]] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            ev = json.loads(line)
            with self.lock:
                if "assigned" in ev:
                    self.history.append(("assigned", ev["assigned"]))
                    self.assigned |= set(ev["assigned"])
                elif "revoked" in ev:
                    self.history.append(("revoked", ev["revoked"]))
                    self.assigned -= set(ev["revoked"])
                elif "records" in ev:
                    self.records.extend(tuple(r) for r in ev["records"])

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


@pytest.fixture
def members():
    started: list[MemberProc] = []

    def start(*args) -> MemberProc:
        m = MemberProc(*args)
        started.append(m)
        return m

    yield start
    for m in started:
        if m.proc.poll() is None:
            m.kill()
        elif not m.proc.stdout.closed:
            m.proc.stdout.close()


def wait_for(cond, timeout: float = 30, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def setup_topic(bootstrap: str, topic: str, partitions: int = 6, n: int = 0, tag: str = "") -> list[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(10)
    return produce(bootstrap, topic, partitions, n, tag)


def produce(bootstrap: str, topic: str, partitions: int, n: int, tag: str) -> list[str]:
    p = Producer({"bootstrap.servers": bootstrap})
    values = [f"{tag}{i}" for i in range(n)]
    for i, v in enumerate(values):
        p.produce(topic, v.encode(), partition=i % partitions)
    assert p.flush(30) == 0
    return values


def split_ok(ms: list[MemberProc], partitions: int) -> bool:
    sets = [m.assigned for m in ms]
    union = set().union(*sets)
    return union == set(range(partitions)) and sum(len(s) for s in sets) == partitions and all(sets)


def test_mixed_clients_split_rebalance_and_death(broker, members):
    bs = broker.bootstrap_servers
    values = setup_topic(bs, "g-mixed", 6, 600, "a")
    # roundrobin is the strategy all three clients share
    m1 = members("confluent", bs, "mixed", "g-mixed", "--strategy", "roundrobin")
    m2 = members("kafka-python", bs, "mixed", "g-mixed")
    wait_for(lambda: split_ok([m1, m2], 6), what="two members to split 6 partitions")
    m3 = members("aiokafka", bs, "mixed", "g-mixed")
    wait_for(lambda: split_ok([m1, m2, m3], 6), what="three members to split 6 partitions")
    more = produce(bs, "g-mixed", 6, 300, "b")
    m2.kill()  # no LeaveGroup: its partitions move after the session timeout (6 s)
    wait_for(lambda: split_ok([m1, m3], 6), timeout=40, what="survivors to take over after the session timeout")
    late = produce(bs, "g-mixed", 6, 300, "c")
    everything = set(values + more + late)
    wait_for(
        lambda: {r[2] for m in (m1, m2, m3) for r in m.records} >= everything,
        timeout=40,
        what="every record to be consumed",
    )
    consumed = {r[2] for m in (m1, m2, m3) for r in m.records}
    assert consumed == everything


def test_exactly_once_without_failures_and_resume_after_restart(tmp_path, members):
    from logbroker import Broker

    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        values = setup_topic(bs, "g-eo", 6, 900, "x")
        m1 = members("confluent", bs, "eo", "g-eo")
        m2 = members("confluent", bs, "eo", "g-eo")
        wait_for(lambda: split_ok([m1, m2], 6), what="split")
        wait_for(lambda: len(m1.records) + len(m2.records) >= 900, what="all records")
        time.sleep(1)
        recs = m1.records + m2.records
        assert sorted(r[2] for r in recs) == sorted(values)  # each exactly once
        m1.stop()
        m2.stop()
        b.restart()
        more = produce(bs, "g-eo", 6, 60, "y")
        m3 = members("confluent", bs, "eo", "g-eo")
        wait_for(lambda: len(m3.records) >= 60, what="records after restart")
        time.sleep(1)
        # the new member resumed at the committed offsets: nothing old is read again
        assert sorted(r[2] for r in m3.records) == sorted(more)


def test_cooperative_sticky_keeps_unmoved_partitions(broker, members):
    bs = broker.bootstrap_servers
    setup_topic(bs, "g-coop", 6, 60, "c")
    m1 = members("confluent", bs, "coop", "g-coop", "--strategy", "cooperative-sticky")
    wait_for(lambda: m1.assigned == set(range(6)), what="first member owns all")
    before = set(m1.assigned)
    m2 = members("confluent", bs, "coop", "g-coop", "--strategy", "cooperative-sticky")
    wait_for(lambda: split_ok([m1, m2], 6), what="cooperative split")
    kept = m1.assigned
    revoked = {p for kind, ps in m1.history if kind == "revoked" for p in ps}
    assert kept | revoked == before
    assert not (kept & revoked), f"kept partitions were revoked on the way: {m1.history}"


def test_static_member_restart_keeps_partitions_without_rebalance(broker, members):
    bs = broker.bootstrap_servers
    setup_topic(bs, "g-static", 6, 60, "s")
    a = members("confluent", bs, "static", "g-static", "--instance", "a", "--session-ms", "20000")
    b = members("confluent", bs, "static", "g-static", "--instance", "b", "--session-ms", "20000")
    wait_for(lambda: split_ok([a, b], 6), what="static split")
    group = broker.server.groups.groups["static"]
    generation = group.generation_id
    a_parts = set(a.assigned)
    b_events = len(b.history)
    a.kill()
    a2 = members("confluent", bs, "static", "g-static", "--instance", "a", "--session-ms", "20000")
    wait_for(lambda: a2.assigned == a_parts, what="static member to get its partitions back")
    time.sleep(2)
    assert group.generation_id == generation
    assert len(b.history) == b_events, f"the other member saw a rebalance: {b.history[b_events:]}"


def test_kip848_consumer_protocol(tmp_path, members):
    from rawclient import RawClient

    from logbroker import Broker
    from logbroker.protocol import REQUESTS

    with Broker(
        data_dir=tmp_path / "d", group_consumer_heartbeat_interval_ms=300, group_consumer_session_timeout_ms=6000
    ) as b:
        bs = b.bootstrap_servers
        values = setup_topic(bs, "g-848", 6, 600, "k")
        m1 = members("confluent", bs, "g848", "g-848", "--protocol", "consumer")
        wait_for(lambda: m1.assigned == set(range(6)), what="first member owns all six")
        m2 = members("confluent", bs, "g848", "g-848", "--protocol", "consumer")
        wait_for(lambda: split_ok([m1, m2], 6), what="server-side uniform split")
        with RawClient(bs) as c:
            d = c.request(69, 1, REQUESTS[69](group_ids=["g848"])).groups[0]
            assert d.error_code == 0 and d.assignor_name == "uniform"
            assert len(d.members) == 2
            owned = [sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions) for m in d.members]
            assert sorted(owned[0] + owned[1]) == list(range(6))
        more = produce(bs, "g-848", 6, 120, "l")
        m2.kill()  # fenced after the session timeout; m1 takes everything
        wait_for(lambda: len(b.server.groups.consumer.groups["g848"].members) == 1, timeout=30, what="m2 fenced")
        wait_for(lambda: m1.assigned == set(range(6)), timeout=30, what="m1 to own all six again")
        wait_for(
            lambda: {r[2] for m in (m1, m2) for r in m.records} >= set(values + more), timeout=30, what="all records"
        )
