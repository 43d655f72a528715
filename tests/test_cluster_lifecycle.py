"""Broker lifecycle in a three-node cluster (separate `logbroker serve` processes):
heartbeats and fencing after `broker.session.timeout.ms`, leaderships moved (here: taken
offline, the ISR being the leader alone until replication) with bumped leader epochs and
given back when the broker returns, controlled shutdown (SIGTERM) fencing at once and
handing over controller leadership, metadata changes forwarded from any broker to the
active controller, and DescribeQuorum from any broker."""

from __future__ import annotations

import shutil
import signal
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import BrokerProcess, cluster_processes, wait_until
from rawclient import RawClient

from logbroker import _core
from logbroker.protocol import REQUESTS

SESSION_MS = 3000
FAST = ["--set", f"broker.session.timeout.ms={SESSION_MS}", "--set", "broker.heartbeat.interval.ms=300"]


def start_cluster(tmp_path, n=3, extra=()) -> list[BrokerProcess]:
    return cluster_processes(tmp_path, n, [*FAST, *extra])


wait_for = wait_until


def metadata(bp: BrokerProcess):
    """(broker ids, {(topic, partition): (leader, leader_epoch, replicas, isr)}, active
    controller id (from DescribeCluster: in a cluster, Metadata names the broker asked))."""
    req = REQUESTS[3](topics=None, allow_auto_topic_creation=False)
    with RawClient(bp.bootstrap_servers) as c:
        r = c.request(3, 12, req)
        controller = c.request(60, 0, REQUESTS[60]()).controller_id
    parts = {
        (t.name, p.partition_index): (p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
        for t in r.topics
        for p in t.partitions
    }
    ids = sorted(b.node_id for b in r.brokers)
    # a broker names itself; one not unfenced yet (not in its own list) the first that is
    expect = node_of(bp) if node_of(bp) in ids else ids[0]
    assert r.controller_id == expect, f"Metadata from {bp.bootstrap_servers} names {r.controller_id} ({ids})"
    return ids, parts, controller


def node_of(bp: BrokerProcess) -> int:
    return int(bp.extra[bp.extra.index("--node-id") + 1])


def node_id(cluster, bp) -> int:
    return cluster.index(bp) + 1


@pytest.fixture
def cluster(tmp_path):
    nodes = start_cluster(tmp_path)
    yield nodes
    for bp in nodes:
        bp.reap()


def test_a_killed_broker_is_fenced_and_its_leaderships_move_with_bumped_epochs(cluster):
    wait_for(lambda: all(metadata(bp)[0] == [1, 2, 3] for bp in cluster), what="3 brokers everywhere")
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap_servers})
    admin.create_topics([NewTopic("t", num_partitions=6, replication_factor=1)])["t"].result(30)
    _, parts, controller = wait_for(lambda: (m := metadata(cluster[0])) and len(m[1]) == 6 and m, what="topic t")
    victim_id = next(i for i in (1, 2, 3) if i != controller)
    victim = cluster[victim_id - 1]
    led = {k: v for k, v in parts.items() if v[0] == victim_id}
    assert led, parts
    survivor = next(bp for i, bp in enumerate(cluster, 1) if i not in (victim_id,))

    t0 = time.monotonic()
    victim.kill()
    wait_for(lambda: victim_id not in metadata(survivor)[0], what="the killed broker to be fenced")
    fenced_after = time.monotonic() - t0
    print(f"broker {victim_id} killed; fenced after {fenced_after:.2f} s (session timeout {SESSION_MS} ms)")
    assert SESSION_MS / 1000 * 0.8 <= fenced_after <= SESSION_MS / 1000 + 5
    _, after, _ = metadata(survivor)
    for key, (_leader, epoch, _replicas, isr) in led.items():
        # replication factor 1: no other replica, so the partition has no leader now, and with
        # eligible leader replicas (KIP-966) the fenced broker leaves the ISR too: it is the
        # partition's last known leader, which leads again when it is back
        assert isr == [victim_id]
        assert after[key][0] == -1 and after[key][1] == epoch + 1 and after[key][3] == [], (key, after[key])
    for key, v in parts.items():
        if key not in led:
            assert after[key] == v  # untouched

    victim.start()  # re-registers: unfenced, and leads its partitions again (epoch bumped again)
    wait_for(lambda: all(metadata(survivor)[1][k][0] == victim_id for k in led), what="leaderships back")
    _, back, _ = metadata(victim)
    for key, (_, epoch, _, _) in led.items():
        assert back[key][0] == victim_id and back[key][1] == epoch + 2


def test_controlled_shutdown_fences_at_once_and_hands_over_the_controller(cluster):
    wait_for(lambda: all(metadata(bp)[0] == [1, 2, 3] for bp in cluster), what="3 brokers everywhere")
    admin = AdminClient({"bootstrap.servers": cluster[0].bootstrap_servers})
    admin.create_topics([NewTopic("t", num_partitions=3, replication_factor=1)])["t"].result(30)
    _, parts, controller = wait_for(lambda: (m := metadata(cluster[0])) and len(m[1]) == 3 and m, what="topic t")

    # a broker that is not the controller: fenced before it exits, no session timeout to wait
    other = next(i for i in (1, 2, 3) if i != controller)
    assert cluster[other - 1].stop(signal.SIGTERM) == 0
    _, now, _ = metadata(cluster[controller - 1])
    assert other not in metadata(cluster[controller - 1])[0]
    assert all(now[k][0] == -1 for k, v in parts.items() if v[0] == other)
    assert "controlled shutdown done" in cluster[other - 1].log_text()
    cluster[other - 1].start()
    wait_for(lambda: metadata(cluster[controller - 1])[0] == [1, 2, 3], what="the broker back")

    # the active controller: hands Raft leadership to a caught-up voter before it exits
    rest = [bp for i, bp in enumerate(cluster, 1) if i != controller]
    t0 = time.monotonic()
    assert cluster[controller - 1].stop(signal.SIGTERM) == 0
    stopped = time.monotonic() - t0
    new = wait_for(lambda: (c := metadata(rest[0])[2]) not in (controller, -1) and c, what="a new controller")
    print(
        f"controller {controller} stopped in {stopped:.2f} s; node {new} active "
        f"{time.monotonic() - t0 - stopped:.2f} s after the exit"
    )
    assert time.monotonic() - t0 - stopped < 1.0  # handed over, no election timeout waited
    assert controller not in metadata(rest[0])[0]
    assert "handed controller leadership to node" in cluster[controller - 1].log_text()


def test_any_broker_forwards_metadata_changes_and_describes_the_quorum(cluster):
    wait_for(lambda: all(metadata(bp)[0] == [1, 2, 3] for bp in cluster), what="3 brokers everywhere")
    controller = metadata(cluster[0])[2]
    follower = next(bp for i, bp in enumerate(cluster, 1) if i != controller)
    # straight to a broker that is not the controller (kcat-style raw requests, no client routing)
    req = REQUESTS[19]
    body = req(
        topics=[
            req.CreatableTopic(
                name="fwd",
                num_partitions=4,
                replication_factor=2,
                configs=[req.CreatableTopicConfig(name="retention.ms", value="60000")],
            )
        ],
        timeout_ms=10000,
        validate_only=False,
    )
    with RawClient(follower.bootstrap_servers) as c:
        r = c.request(19, 7, body)
        assert r.topics[0].error_code == 0, r.topics[0].error_message
        assert r.topics[0].num_partitions == 4 and r.topics[0].replication_factor == 2
        # visible on this broker as soon as CreateTopics returns (it waited for its own image)
        _, parts, _ = metadata(follower)
        assert sorted(p for (t, p) in parts if t == "fwd") == [0, 1, 2, 3]
        r = c.request(19, 7, body)
        assert r.topics[0].error_code == 36  # TOPIC_ALREADY_EXISTS, from the controller
        cp = REQUESTS[37]
        r = c.request(
            37,
            3,
            cp(
                topics=[cp.CreatePartitionsTopic(name="fwd", count=6, assignments=None)],
                timeout_ms=10000,
                validate_only=False,
            ),
        )
        assert r.results[0].error_code == 0, r.results[0].error_message
        ia = REQUESTS[44]
        r = c.request(
            44,
            1,
            ia(
                resources=[
                    ia.AlterConfigsResource(
                        resource_type=2,
                        resource_name="fwd",
                        configs=[ia.AlterableConfig(name="retention.ms", config_operation=1, value=None)],
                    )
                ],
                validate_only=False,
            ),
        )
        assert r.responses[0].error_code == 0, r.responses[0].error_message
        dt = REQUESTS[20]
        r = c.request(20, 6, dt(topics=[dt.DeleteTopicState(name="fwd")], timeout_ms=10000))
        assert r.responses[0].error_code == 0, r.responses[0].error_message
        assert not any(t == "fwd" for (t, _) in metadata(follower)[1])

        dq = REQUESTS[55]
        q = c.request(
            55,
            2,
            dq(
                topics=[dq.TopicData(topic_name="__cluster_metadata", partitions=[dq.PartitionData(partition_index=0)])]
            ),
        )
    assert q.error_code == 0
    p = q.topics[0].partitions[0]
    assert p.error_code == 0 and p.leader_id == controller and p.leader_epoch >= 1 and p.high_watermark > 0
    assert sorted(v.replica_id for v in p.current_voters) == [1, 2, 3]
    assert all(v.log_end_offset >= p.high_watermark - 5 for v in p.current_voters)
    assert sorted(n.node_id for n in q.nodes) == [1, 2, 3]
    assert all(n.listeners[0].name == "CONTROLLER" for n in q.nodes)


def test_a_directory_of_an_earlier_topic_of_the_same_name_is_not_taken_for_the_new_one(cluster):
    """A broker that stopped after its metadata log took in "t deleted, t created again" but
    before its replicas acted on it (a crash in between) finds the earlier t in directory
    t-0 at its next start. The topic-id checkpoint (broker/topic_id_checkpoint.py) says so:
    the directory is replaced by an empty log, which fetches the new t from the leader.
    Taken for the new t, the earlier records at offsets 0-1 would pass for the new ones."""
    wait_for(lambda: all(metadata(bp)[0] == [1, 2, 3] for bp in cluster), what="3 brokers everywhere")
    controller = metadata(cluster[0])[2]
    away_id = next(i for i in (1, 2, 3) if i != controller)
    away = cluster[away_id - 1]
    third = next(i for i in (1, 2, 3) if i not in (away_id, controller))
    admin = AdminClient({"bootstrap.servers": cluster[controller - 1].bootstrap_servers})
    admin.create_topics([NewTopic("t", 1, replica_assignment=[[controller, third, away_id]])])["t"].result(30)
    conf = {"bootstrap.servers": cluster[controller - 1].bootstrap_servers, "acks": "all"}
    p = Producer(conf)
    for i in range(5):
        p.produce("t", value=f"old-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    wait_for(lambda: sorted(metadata(cluster[0])[1][("t", 0)][3]) == [1, 2, 3], what="all three in sync")
    assert away.stop(signal.SIGTERM) == 0  # its shutdown writes the topic-id checkpoint
    saved = away.data_dir.parent / "saved"
    shutil.copytree(away.data_dir / "t-0", saved / "t-0")
    shutil.copy(away.data_dir / "topic-id-checkpoint", saved / "topic-id-checkpoint")

    admin.delete_topics(["t"])["t"].result(30)
    wait_for(lambda: ("t", 0) not in metadata(cluster[controller - 1])[1], what="t deleted")
    # the away broker is fenced: it is a replica, not in the ISR, until it has caught up (as in Kafka)
    admin.create_topics([NewTopic("t", 1, replica_assignment=[[controller, away_id]])])["t"].result(30)
    assert metadata(cluster[controller - 1])[1][("t", 0)][3] == [controller]
    p = Producer(conf)
    for i in range(2):
        p.produce("t", value=f"new-{i}".encode(), partition=0)
    assert p.flush(30) == 0

    def back_in_sync() -> None:
        away.start()
        wait_for(
            lambda: sorted(metadata(cluster[controller - 1])[1][("t", 0)][3]) == sorted([controller, away_id]),
            what="the returning broker in the ISR of the new t",
        )
        assert away.stop(signal.SIGTERM) == 0

    back_in_sync()  # its metadata log now holds the new t
    shutil.rmtree(away.data_dir / "t-0")  # as if it had stopped before its replicas acted on it
    shutil.copytree(saved / "t-0", away.data_dir / "t-0")
    shutil.copy(saved / "topic-id-checkpoint", away.data_dir / "topic-id-checkpoint")
    back_in_sync()
    lg = _core.Log.open(str(away.data_dir / "t-0"), "t", 0, {})
    assert [v for _o, _ts, _k, v in lg.read_records(0)] == [b"new-0", b"new-1"]
    assert "hold an earlier topic of that name" in away.log_text()


def test_a_topic_deleted_and_created_again_while_a_follower_was_away_is_followed_anew(tmp_path):
    """The away broker learns "t deleted, t created again" in one step (here a metadata
    snapshot: a full reconcile). The new t has the old one's name, leader and leader epoch,
    so only its topic id tells the fetch loops that the partition they follow is gone: the
    follower must drop the old t-0 and fetch the new one into the ISR (seen once in CI: it
    kept following the deleted replica and never rejoined)."""
    nodes = start_cluster(tmp_path, extra=["--set", "metadata.log.max.record.bytes.between.snapshots=1500"])
    try:
        wait_for(lambda: all(metadata(bp)[0] == [1, 2, 3] for bp in nodes), what="3 brokers everywhere")
        controller = metadata(nodes[0])[2]
        away_id = next(i for i in (1, 2, 3) if i != controller)
        away = nodes[away_id - 1]
        admin = AdminClient({"bootstrap.servers": nodes[controller - 1].bootstrap_servers})
        conf = {"bootstrap.servers": nodes[controller - 1].bootstrap_servers, "acks": "all"}

        def create_and_fill(prefix: str) -> None:
            admin.create_topics([NewTopic("t", 1, replica_assignment=[[controller, away_id]])])["t"].result(30)
            p = Producer(conf)
            for i in range(3):
                p.produce("t", value=f"{prefix}-{i}".encode(), partition=0)
            assert p.flush(30) == 0

        create_and_fill("old")
        wait_for(
            lambda: sorted(metadata(nodes[0])[1][("t", 0)][3]) == sorted([controller, away_id]),
            what="the old t in sync on both",
        )
        old_epoch = metadata(nodes[controller - 1])[1][("t", 0)][1]
        assert away.stop(signal.SIGTERM) == 0
        admin.delete_topics(["t"])["t"].result(30)
        wait_for(lambda: ("t", 0) not in metadata(nodes[controller - 1])[1], what="t deleted")
        create_and_fill("new")
        assert metadata(nodes[controller - 1])[1][("t", 0)][:2] == (controller, old_epoch)  # same leader, epoch
        for i in range(12):  # the leader's snapshot passes the away broker's log end: it is sent the snapshot
            admin.create_topics([NewTopic(f"s{i}", 1, replication_factor=1)])[f"s{i}"].result(30)

        away.start()
        wait_for(
            lambda: sorted(metadata(nodes[controller - 1])[1][("t", 0)][3]) == sorted([controller, away_id]),
            what="the returning broker in the ISR of the new t",
        )
        assert "loaded the metadata snapshot at index" in away.log_text()
        assert away.stop(signal.SIGTERM) == 0
        lg = _core.Log.open(str(away.data_dir / "t-0"), "t", 0, {})
        assert [v for _o, _ts, _k, v in lg.read_records(0)] == [b"new-0", b"new-1", b"new-2"]
    finally:
        for bp in nodes:
            bp.reap()


def test_snapshots_bound_the_metadata_log_and_a_node_far_behind_catches_up_from_one(tmp_path):
    nodes = start_cluster(tmp_path, extra=["--set", "metadata.log.max.record.bytes.between.snapshots=1500"])
    try:
        wait_for(lambda: all(metadata(bp)[0] == [1, 2, 3] for bp in nodes), what="3 brokers everywhere")
        controller = metadata(nodes[0])[2]
        behind = next(bp for i, bp in enumerate(nodes, 1) if i != controller)
        behind.kill()
        admin = AdminClient({"bootstrap.servers": nodes[controller - 1].bootstrap_servers})
        for i in range(12):
            admin.create_topics([NewTopic(f"s{i}", num_partitions=2, replication_factor=1)])[f"s{i}"].result(30)
        leader_log = nodes[controller - 1].log_text()
        assert "metadata snapshot at index" in leader_log, leader_log[-3000:]
        raft_log = (nodes[controller - 1].data_dir / "__cluster_metadata-0" / "raft.log").stat().st_size

        behind.start()  # its log ends before the leader's snapshot: it is sent the snapshot
        wait_for(
            lambda: all(f"s{i}" in {t for t, _ in metadata(behind)[1]} for i in range(12)),
            what="the restarted node to catch up",
        )
        assert "loaded the metadata snapshot at index" in behind.log_text()
        # the leader's log holds only what follows its latest snapshot (it stays small)
        assert raft_log < 12 * 1500

        behind.stop()  # and a restart starts from its own snapshot, then replays the rest
        behind.start()
        assert sum(1 for (t, _) in metadata(behind)[1] if t.startswith("s")) == 24
        assert behind.log_text().count("loaded the metadata snapshot at index") == 2
    finally:
        for bp in nodes:
            bp.reap()


def test_librdkafka_admin_started_with_the_cluster_creates_a_topic_without_stalling(tmp_path):
    """An admin client started with the nodes reaches them before any broker is registered.
    The answer then names the broker asked, never an empty broker list: librdkafka takes an
    empty list as a failed lookup and waited a whole request timeout (60 s) before asking
    again."""
    from logbroker import Cluster

    cluster = Cluster(3, data_dir=tmp_path)
    try:
        for n in cluster.nodes:
            n.spawn()
        t0 = time.monotonic()
        admin = AdminClient(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "reconnect.backoff.ms": 10,
                "reconnect.backoff.max.ms": 100,
            }
        )
        while True:
            fut = admin.create_topics([NewTopic("early", 3, 3)], operation_timeout=30)["early"]
            try:
                fut.result(timeout=45)
                break
            except Exception as e:  # noqa: BLE001 - no controller yet: retriable, as a client would retry
                code = e.args[0] if e.args else None
                assert code is not None and code.retriable(), e
                assert time.monotonic() - t0 < 30, e
                time.sleep(0.1)
        took = time.monotonic() - t0
        assert took < 20, f"creating a topic at cluster start took {took:.1f} s"
        md = admin.list_topics("early", timeout=10)
        assert sorted(md.brokers) == [1, 2, 3]
        assert all(len(p.replicas) == 3 for p in md.topics["early"].partitions.values())
    finally:
        cluster.stop()
