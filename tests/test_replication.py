"""Replication in a three-node cluster of real `logbroker serve` processes: followers pull
from their leaders (the Rust fetch loops), the ISR grows to every replica through
AlterPartition, acks=all waits for the ISR, and after the cluster stops every replica's log
holds the same records at the same offsets with the same leader epochs as its leader's
(checked by opening the logs with the storage engine, against the list of acknowledged
records as the model)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from confluent_kafka import Producer

from conftest import wait_until
from logbroker import Cluster, _core
from logbroker.protocol import REQUESTS
from rawclient import RawClient

FAST = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300, "replica.lag.time.max.ms": 3000,
        "replica.fetch.wait.max.ms": 200}


def layout(node) -> dict[tuple[str, int], tuple[int, int, list[int], list[int]]]:
    with RawClient(node.bootstrap_servers) as c:
        r = c.request(3, 12, REQUESTS[3](topics=None, allow_auto_topic_creation=False))
    return {(t.name, p.partition_index): (p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
            for t in r.topics for p in t.partitions}


def create(node, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None) -> None:
    C = REQUESTS[19]
    req = C(topics=[C.CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
                                     configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
            timeout_ms=10000, validate_only=False)
    with RawClient(node.bootstrap_servers) as c:
        assert c.request(19, 5, req).topics[0].error_code == 0


def full_isr(cluster, topic: str, n: int) -> dict:
    def check():
        parts = {k: v for k, v in layout(cluster.nodes[0]).items() if k[0] == topic}
        return parts if len(parts) == n and all(sorted(v[3]) == sorted(v[2]) for v in parts.values()) else None
    return wait_until(check, timeout=30, what=f"every replica of {topic} in the ISR")


def produce_all(bootstrap: str, topic: str, n: int, **conf) -> list[tuple[int, int, bytes]]:
    """Produce n records with acks=all, idempotent; the acknowledged (partition, offset, value)."""
    acked: list[tuple[int, int, bytes]] = []
    errors: list[str] = []

    def done(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5, **conf})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), on_delivery=done)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:5]
    return acked


def stored(data_dir: Path, topic: str, partition: int) -> tuple[list[tuple[int, bytes]], list[tuple[int, int]]]:
    lg = _core.Log.open(str(data_dir / f"{topic}-{partition}"), topic, partition, {}, None, 0)
    try:
        return [(o, v) for o, _ts, _k, v in lg.read_records(lg.log_start_offset)], lg.epoch_entries()
    finally:
        lg.close()


def test_followers_replicate_and_the_isr_grows(tmp_path):
    with Cluster(3, data_dir=tmp_path, config=FAST) as cluster:
        create(cluster.node(1), "rep", 3, 3, {"min.insync.replicas": "2"})
        full_isr(cluster, "rep", 3)
        acked = produce_all(cluster.bootstrap_servers, "rep", 3000)
        assert len(acked) == 3000
        parts = layout(cluster.nodes[0])
        # followers catch up: every broker's replica reaches the leader's LEO (stopped cleanly below)
        time.sleep(1)
    model: dict[int, list[tuple[int, bytes]]] = {}
    for partition, offset, value in acked:
        model.setdefault(partition, []).append((offset, value))
    for p in range(3):
        leader = parts[("rep", p)][0]
        want = sorted(model.get(p, []))
        leader_records, leader_epochs = stored(tmp_path / f"node{leader}", "rep", p)
        assert leader_records == want, f"leader {leader} of rep-{p}"
        for replica in parts[("rep", p)][2]:
            records, epochs = stored(tmp_path / f"node{replica}", "rep", p)
            assert records == want, f"replica {replica} of rep-{p}: {len(records)} records, leader has {len(want)}"
            assert epochs == leader_epochs, (replica, epochs, leader_epochs)


def test_kill_the_leader_during_acks_all_produce_loses_nothing(tmp_path):
    """kill -9 a partition leader while an idempotent acks=all producer writes: the controller
    fences it and elects another ISR member; every acknowledged record is on the new leader,
    once, in order; the old leader comes back, truncates what it alone had, and rejoins."""
    import threading

    from confluent_kafka import Consumer, TopicPartition

    with Cluster(3, data_dir=tmp_path, config=FAST) as cluster:
        create(cluster.node(1), "fo", 1, 3, {"min.insync.replicas": "2"})
        parts = full_isr(cluster, "fo", 1)
        old_leader = parts[("fo", 0)][0]
        acked: list[tuple[int, bytes]] = []
        failed: list[str] = []
        stop = threading.Event()

        def write():
            def done(err, msg):
                if err is None:
                    acked.append((msg.offset(), msg.value()))
                else:
                    failed.append(str(err))

            p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                          "linger.ms": 2, "message.timeout.ms": 60000})
            i = 0
            while not stop.is_set():
                p.produce("fo", value=f"r{i}".encode(), on_delivery=done)
                p.poll(0.001)
                i += 1
                if i % 200 == 0:
                    time.sleep(0.01)
            p.flush(90)

        t = threading.Thread(target=write)
        t.start()
        wait_until(lambda: len(acked) > 2000, what="records acknowledged before the kill")
        cluster.node(old_leader).kill()
        killed_at = len(acked)
        new_leader = wait_until(lambda: next((v[0] for v in [layout(cluster.node(1 if old_leader != 1 else 2))[("fo", 0)]]
                                              if v[0] not in (-1, old_leader)), None), what="a new leader")
        wait_until(lambda: len(acked) > killed_at + 2000, timeout=60, what="records acknowledged by the new leader")
        cluster.node(old_leader).start()
        wait_until(lambda: sorted(layout(cluster.node(new_leader))[("fo", 0)][3]) == [1, 2, 3], timeout=60,
                   what="the old leader back in the ISR")
        stop.set()
        t.join(120)
        assert not failed, failed[:5]
        c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "fo-check", "enable.auto.commit": False})
        c.assign([TopicPartition("fo", 0, 0)])
        got: list[tuple[int, bytes]] = []
        hw = c.get_watermark_offsets(TopicPartition("fo", 0), timeout=10)[1]
        while len(got) < hw:
            for m in c.consume(1000, timeout=5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
        c.close()
    offsets = [o for o, _ in got]
    assert offsets == list(range(len(got))), "offsets dense and in order"
    values = [v for _, v in got]
    assert len(set(values)) == len(values), "no duplicates"
    stored_at = dict(got)
    lost = [(o, v) for o, v in acked if stored_at.get(o) != v]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:3]}"
    # every replica holds the same log (checked on disk after the cluster stopped)
    want, epochs = stored(tmp_path / f"node{new_leader}", "fo", 0)
    for n in (1, 2, 3):
        assert stored(tmp_path / f"node{n}", "fo", 0) == (want, epochs), f"replica {n}"
