"""Produce and Fetch at a broker that does not lead the partition, in a three-node cluster of
real `logbroker serve` processes (KIP-951): the answer is NOT_LEADER_OR_FOLLOWER naming the
current leader and its epoch (Produce v10+, Fetch v12+) and the leader's endpoint (Produce
v10+, Fetch v16+), whether the broker holds a follower replica or none; older versions get
the same error without the hint; only a partition that does not exist anywhere is
UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id). Nothing is written at a non-leader.
Fetch v13+ names topics by id. A follower replica serves a consumer's Fetch v11+ (KIP-392).
When the controller moves a leadership (its leader fenced),
the other brokers name the new leader at once."""

from __future__ import annotations

import uuid

import pytest
from conftest import wait_until
from rawclient import RawClient

from logbroker import Cluster, _core
from logbroker.protocol import REQUESTS, ErrorCode

FAST = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 300}
Produce, Fetch, CreateTopics = REQUESTS[0], REQUESTS[1], REQUESTS[19]


def batch(values: list[bytes]) -> bytes:
    return _core.encode_batch([(None, v, i, []) for i, v in enumerate(values)], base_timestamp=1_700_000_000_000)


def produce(node, topic: str, partition: int, version: int):
    req = Produce(
        transactional_id=None,
        acks=1,
        timeout_ms=5000,
        topic_data=[
            Produce.TopicProduceData(
                name=topic, partition_data=[Produce.PartitionProduceData(index=partition, records=batch([b"x"]))]
            )
        ],
    )
    with RawClient(node.bootstrap_servers) as c:
        return c.request(0, version, req)


def fetch(node, topic: str, topic_id: uuid.UUID, partition: int, version: int, leader_epoch: int = -1):
    req = Fetch(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=[],
        rack_id="",
        topics=[
            Fetch.FetchTopic(
                topic=topic if version < 13 else "",
                topic_id=topic_id,
                partitions=[
                    Fetch.FetchPartition(
                        partition=partition,
                        current_leader_epoch=leader_epoch,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
    )
    with RawClient(node.bootstrap_servers) as c:
        return c.request(1, version, req)


def layout(node) -> tuple[dict[int, tuple[str, int, str | None]], dict, dict[str, uuid.UUID]]:
    """(brokers {id: (host, port, rack)}, {(topic, p): (leader, epoch, replicas)}, topic ids)."""
    with RawClient(node.bootstrap_servers) as c:
        r = c.request(3, 12, REQUESTS[3](topics=None, allow_auto_topic_creation=False))
    brokers = {b.node_id: (b.host, b.port, b.rack) for b in r.brokers}
    parts = {
        (t.name, p.partition_index): (p.leader_id, p.leader_epoch, list(p.replica_nodes))
        for t in r.topics
        for p in t.partitions
    }
    return brokers, parts, {t.name: t.topic_id for t in r.topics}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(3, data_dir=tmp_path_factory.mktemp("hints"), config=FAST, racks=["ra", "rb", "rc"]) as c:
        req = CreateTopics(
            topics=[
                CreateTopics.CreatableTopic(
                    name="solo", num_partitions=3, replication_factor=1, assignments=[], configs=[]
                ),
                CreateTopics.CreatableTopic(
                    name="trio", num_partitions=3, replication_factor=3, assignments=[], configs=[]
                ),
            ],
            timeout_ms=10000,
            validate_only=False,
        )
        with RawClient(c.node(1).bootstrap_servers) as rc:
            assert [t.error_code for t in rc.request(19, 5, req).topics] == [0, 0]
        wait_until(
            lambda: all(sum(1 for k in layout(n)[1] if k[0] in ("solo", "trio")) == 6 for n in c.nodes),
            what="both topics on every broker",
        )
        yield c


def non_leaders(cluster, leader: int, replicas: list[int]) -> list[tuple[object, bool]]:
    """The brokers that do not lead, each with whether it holds a replica."""
    return [(n, n.node_id in replicas) for n in cluster.nodes if n.node_id != leader]


def test_produce_at_a_non_leader_names_the_leader_and_writes_nothing(cluster):
    brokers, parts, _ = layout(cluster.node(1))
    seen = set()
    for (topic, p), (leader, epoch, replicas) in sorted(parts.items()):
        for node, holds_replica in non_leaders(cluster, leader, replicas):
            seen.add(holds_replica)
            for version in (10, 11):
                r = produce(node, topic, p, version)
                pr = r.responses[0].partition_responses[0]
                assert pr.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER, (topic, p, node.node_id, pr)
                assert (pr.current_leader.leader_id, pr.current_leader.leader_epoch) == (leader, epoch)
                assert f"broker {leader} is" in pr.error_message, pr.error_message
                assert [(e.node_id, e.host, e.port, e.rack) for e in r.node_endpoints] == [(leader, *brokers[leader])]
            # v7 (what kafka-python and aiokafka send): the same error, no room for the hint
            pr = produce(node, topic, p, 7).responses[0].partition_responses[0]
            assert pr.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert seen == {True, False}, "both a follower replica and a broker without one were asked"
    # nothing was written anywhere: every leader's log is empty
    for (topic, p), (leader, _epoch, _r) in parts.items():
        f = fetch(cluster.node(leader), topic, uuid.UUID(int=0), p, 12).responses[0].partitions[0]
        assert (f.error_code, f.high_watermark) == (0, 0), (topic, p, f)
    # the leader takes the same request
    (topic, p), (leader, _e, _r) = next(iter(sorted(parts.items())))
    ok = produce(cluster.node(leader), topic, p, 11).responses[0].partition_responses[0]
    assert (ok.error_code, ok.base_offset) == (0, 0)


def test_only_what_does_not_exist_is_unknown(cluster):
    node = cluster.node(2)
    _, _, ids = layout(node)
    pr = produce(node, "solo", 9, 11).responses[0].partition_responses[0]
    assert (pr.error_code, pr.error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "partition solo-9 does not exist",
    )
    pr = produce(node, "nosuch", 0, 11).responses[0].partition_responses[0]
    assert (pr.error_code, pr.error_message) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 'topic "nosuch" does not exist')
    r = fetch(node, "", uuid.uuid4(), 0, 16)
    assert r.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert r.node_endpoints == []
    r = fetch(node, "solo", ids["solo"], 9, 16)
    assert r.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_at_a_non_leader_names_the_leader_by_version(cluster):
    brokers, parts, ids = layout(cluster.node(3))
    for (topic, p), (leader, epoch, replicas) in sorted(parts.items()):
        for node, holds in non_leaders(cluster, leader, replicas):
            if holds:
                # a follower replica serves consumers from v11 (KIP-392); older versions are
                # sent to the leader
                for version in (11, 12, 16, 17, 18):
                    f = fetch(node, topic, ids[topic], p, version).responses[0].partitions[0]
                    assert (f.error_code, f.preferred_read_replica) == (0, -1), (topic, p, node.node_id, version)
                f = fetch(node, topic, ids[topic], p, 10).responses[0].partitions[0]
                assert f.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
                continue
            for version in (16, 17, 18):
                r = fetch(node, topic, ids[topic], p, version)
                assert r.responses[0].topic_id == ids[topic]
                f = r.responses[0].partitions[0]
                assert f.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER, (topic, p, node.node_id, version)
                assert (f.current_leader.leader_id, f.current_leader.leader_epoch) == (leader, epoch)
                assert [(e.node_id, e.host, e.port, e.rack) for e in r.node_endpoints] == [(leader, *brokers[leader])]
            # v12: the leader, not its endpoint (NodeEndpoints is v16+); v11: neither
            r = fetch(node, topic, ids[topic], p, 12)
            f = r.responses[0].partitions[0]
            assert (f.error_code, f.current_leader.leader_id) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, leader)
            f = fetch(node, topic, ids[topic], p, 11).responses[0].partitions[0]
            assert (f.error_code, f.current_leader.leader_id) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
        # at the leader, by id: served; an older leader epoch is fenced and told the current one
        leader_node = cluster.node(leader)
        f = fetch(leader_node, topic, ids[topic], p, 17, leader_epoch=epoch).responses[0].partitions[0]
        assert f.error_code == 0
        if epoch > 0:
            r = fetch(leader_node, topic, ids[topic], p, 17, leader_epoch=epoch - 1)
            f = r.responses[0].partitions[0]
            assert (f.error_code, f.current_leader.leader_id, f.current_leader.leader_epoch) == (
                ErrorCode.FENCED_LEADER_EPOCH,
                leader,
                epoch,
            )


def test_the_hint_follows_a_leader_move(cluster):
    """Fence the leader of a replicated partition (SIGSTOP past the session timeout): the
    controller moves leadership to another ISR member with a new epoch, and a broker that
    does not lead names the new leader and its endpoint at once."""
    brokers, parts, _ = layout(cluster.node(1))
    (topic, p), (old, old_epoch, _r) = next((k, v) for k, v in sorted(parts.items()) if k[0] == "trio")
    victim = cluster.node(old)
    survivor = next(n for n in cluster.nodes if n.node_id != old)

    def hint(node):
        r = produce(node, topic, p, 11)
        pr = r.responses[0].partition_responses[0]
        return (
            pr.error_code,
            pr.current_leader.leader_id,
            pr.current_leader.leader_epoch,
            [e.node_id for e in r.node_endpoints],
        )

    victim.proc.send_signal(19)  # SIGSTOP
    try:
        new, epoch, _ = wait_until(
            lambda: next((v for v in [layout(survivor)[1][(topic, p)]] if v[0] not in (old, -1)), None),
            timeout=30,
            what=f"a new leader of {topic}-{p}",
        )
        assert epoch > old_epoch
        asked = next(n for n in cluster.nodes if n.node_id not in (old, new))
        got = wait_until(
            lambda: next((h for h in [hint(asked)] if h[1] == new), None),
            what=f"broker {asked.node_id} naming broker {new}",
        )
        assert got == (ErrorCode.NOT_LEADER_OR_FOLLOWER, new, epoch, [new]), got
        # The new leader learns of its leadership from the metadata log like every broker, and
        # may apply the change a moment after `asked` did (Kafka's brokers do the same): a
        # client retries NOT_LEADER_OR_FOLLOWER until the leader takes the write.
        wait_until(
            lambda: produce(cluster.node(new), topic, p, 11).responses[0].partition_responses[0].error_code == 0,
            what=f"broker {new} taking a write to {topic}-{p} as its leader",
        )
    finally:
        victim.proc.send_signal(18)  # SIGCONT
