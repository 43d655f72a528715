"""Replication in a three-node cluster of real `logbroker serve` processes: followers pull
from their leaders (the Rust fetch loops), the ISR grows to every replica through
AlterPartition, acks=all waits for the ISR, and after the cluster stops every replica's log
holds the same records at the same offsets with the same leader epochs as its leader's
(checked by opening the logs with the storage engine, against the list of acknowledged
records as the model)."""

from __future__ import annotations

import time
import urllib.request

from confluent_kafka import Producer
from conftest import wait_until
from replication_helpers import FAST, create, full_isr, layout, produce_all, stored

from logbroker import Cluster


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

            p = Producer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 2,
                    "message.timeout.ms": 60000,
                }
            )
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
        new_leader = wait_until(
            lambda: next(
                (
                    v[0]
                    for v in [layout(cluster.node(1 if old_leader != 1 else 2))[("fo", 0)]]
                    if v[0] not in (-1, old_leader)
                ),
                None,
            ),
            what="a new leader",
        )
        wait_until(lambda: len(acked) > killed_at + 2000, timeout=60, what="records acknowledged by the new leader")
        cluster.node(old_leader).start()
        wait_until(
            lambda: sorted(layout(cluster.node(new_leader))[("fo", 0)][3]) == [1, 2, 3],
            timeout=60,
            what="the old leader back in the ISR",
        )
        stop.set()
        t.join(120)
        assert not failed, failed[:5]
        c = Consumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "fo-check", "enable.auto.commit": False}
        )
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


def test_a_new_partition_replicates_at_once(tmp_path):
    """A new topic starts replicating at once, whatever the follower was doing:
    - with replica.fetch.wait.max.ms at 10 s, every follower's fetch to a leader sits parked
      for up to 10 s on an idle cluster; a leader taking a new partition answers its
      followers' parked fetches early (their sessions are small), and a follower that learns
      of the partition after its leader polls briefly until its request carries it;
    - a follower often applies the new topic before its leader does, and its first fetch is
      answered NOT_LEADER_OR_FOLLOWER; with replica.fetch.backoff.ms at 10 s it retries
      after 10 ms, doubling, rather than after the whole back-off.
    Either way the first acks=all produces to each new topic are acknowledged in well under
    the 10 s (the ISR is full and min.insync.replicas is 3, so the followers must have them)."""
    config = dict(
        FAST,
        **{
            "replica.fetch.wait.max.ms": 10000,
            "replica.lag.time.max.ms": 30000,
            "replica.fetch.backoff.ms": 10000,
            "min.insync.replicas": 3,
        },
    )
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        create(cluster.node(1), "warm", 3, 3)  # a partition led by each node: every fetcher exists
        full_isr(cluster, "warm", 3)
        produce_all(cluster.bootstrap_servers, "warm", 30)
        for i in range(4):
            time.sleep(1)  # the followers' next fetches are parked, 10 s each
            create(cluster.node(1 + i % 3), f"fresh{i}", 3, 3)
            full_isr(cluster, f"fresh{i}", 3)
            t0 = time.monotonic()
            acked = produce_all(cluster.bootstrap_servers, f"fresh{i}", 30, **{"linger.ms": 0})
            took = time.monotonic() - t0
            assert len(acked) == 30
            assert took < 5, f"the first acks=all produces to new topic fresh{i} took {took:.1f} s"
            assert all(len(isr) == 3 for (t, _), (_, _, _, isr) in layout(cluster.node(1)).items() if t == f"fresh{i}")
        text = "".join(n.log_text() for n in cluster.nodes)
        assert "retrying every" not in text  # no connection failed or was cut


def test_a_stopped_follower_stays_out_of_the_isr(tmp_path):
    """A follower that stops fetching (SIGSTOP: not fenced, its broker session outlives the
    test) is shrunk out of the ISR after replica.lag.time.max.ms and stays out, even though
    its last known LEO still equals the HW of an idle partition; Kafka expands the ISR only
    on a follower's fetch. Once it runs again it fetches and rejoins."""
    import os
    import signal

    config = dict(FAST, **{"broker.session.timeout.ms": 60000, "replica.lag.time.max.ms": 1500})
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        create(cluster.node(1), "stop", 1, 3, {"min.insync.replicas": "1"})
        parts = full_isr(cluster, "stop", 1)
        leader, _, replicas, _ = parts[("stop", 0)]
        controller = cluster.controller_id()
        follower = next(r for r in replicas if r not in (leader, controller))
        produce_all(cluster.node(leader).bootstrap_servers, "stop", 20)
        pid = cluster.node(follower).pid
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_until(
                lambda: follower not in layout(cluster.node(leader))[("stop", 0)][3],
                timeout=30,
                what=f"follower {follower} shrunk out of the ISR",
            )
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                isr = layout(cluster.node(leader))[("stop", 0)][3]
                assert follower not in isr, f"stopped follower {follower} back in the ISR {isr}"
                time.sleep(0.1)
        finally:
            os.kill(pid, signal.SIGCONT)
        full_isr(cluster, "stop", 1)


def _scrape_gauge(url: str, name: str) -> float:
    with urllib.request.urlopen(url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in {url}")


def test_followers_fetch_in_incremental_sessions_and_replicate_without_them(tmp_path):
    """Each follower loop opens a KIP-227 fetch session with its leader and then lists only the
    partitions whose fetch offset moved (rust/src/server/fetch_session_handler.rs). The
    leaders' metrics show it: per leader, sessions = the two brokers following it and the
    partitions cached = the follower replicas of what it leads, no more (a session ends with
    its connection; each new topic here makes the followers reconnect). acks=all produces with
    min.insync.replicas=3 are acknowledged only when both followers fetched past them, so they
    prove the moved offsets are listed. With max.incremental.fetch.session.cache.slots=0 the
    leaders open no session and full requests replicate the same way."""
    sessions = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
    cached = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
    for slots in (1000, 0):
        config = dict(FAST, **{"min.insync.replicas": 3, "max.incremental.fetch.session.cache.slots": slots})
        with Cluster(3, data_dir=tmp_path / f"slots{slots}", config=config, metrics=True) as cluster:
            for i in range(3):  # three topics: each new one reconnects the fetchers
                create(cluster.node(1 + i), f"s{i}", 8, 3)
                full_isr(cluster, f"s{i}", 8)
            led = {n.node_id: 0 for n in cluster.nodes}
            for leader, _e, replicas, _isr in layout(cluster.node(1)).values():
                led[leader] += len(replicas) - 1
            for i in range(3):
                acked = produce_all(cluster.bootstrap_servers, f"s{i}", 400, **{"linger.ms": 0})
                assert len(acked) == 400
            for n in cluster.nodes:
                want = (2, led[n.node_id]) if slots else (0, 0)
                wait_until(
                    lambda n=n, want=want: (
                        (_scrape_gauge(n.metrics_url, sessions), _scrape_gauge(n.metrics_url, cached)) == want
                    ),
                    what=f"node {n.node_id}: (sessions, partitions cached) = {want}",
                )
            acked = produce_all(cluster.bootstrap_servers, "s0", 200, **{"linger.ms": 0})
            assert len(acked) == 200


def test_acks_all_on_fewer_replicas_than_min_insync_replicas(tmp_path):
    # Kafka's effective min ISR (Partition.effectiveMinIsr) is min(min.insync.replicas, replicas):
    # acks=all on an RF 1 or RF 2 topic of a cluster whose min.insync.replicas is 3 is answered
    # once every replica has the records, not refused with NOT_ENOUGH_REPLICAS.
    with Cluster(3, data_dir=tmp_path, config={**FAST, "min.insync.replicas": 3}) as cluster:
        create(cluster.node(1), "rf1", 2, 1)
        create(cluster.node(1), "rf2", 2, 2)
        full_isr(cluster, "rf2", 2)
        for topic in ("rf1", "rf2"):
            acked = produce_all(cluster.bootstrap_servers, topic, 200)
            assert len(acked) == 200, topic
