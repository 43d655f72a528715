"""AlterPartition (56) on the controller listener of a three-node cluster, sent raw as a
partition leader would: each of Kafka's checks answers with its own error and changes
nothing; a valid request commits the ISR with the partition epoch bumped; a node that is not
the active controller answers NOT_CONTROLLER."""

from __future__ import annotations

import uuid

from rawclient import RawClient
from replication_helpers import FAST, create, full_isr

from logbroker import Cluster
from logbroker.protocol import REQUESTS, ErrorCode

AlterPartition = REQUESTS[56]


def state(node, topic: str) -> tuple[uuid.UUID, int, int, list[int], list[int]]:
    """(topic id, leader, leader epoch, replicas, ISR) of partition 0, from Metadata."""
    with RawClient(node.bootstrap_servers) as c:
        t = c.request(
            3, 12, REQUESTS[3](topics=[REQUESTS[3].MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
        ).topics[0]
    p = t.partitions[0]
    return t.topic_id, p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes)


def alter(
    node,
    broker_id: int,
    topic_id: uuid.UUID,
    leader_epoch: int,
    partition_epoch: int,
    isr: list[int],
    broker_epoch: int = -1,
    version: int = 3,
):
    if version >= 3:
        part = AlterPartition.PartitionData(
            partition_index=0,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            leader_recovery_state=0,
            new_isr_with_epochs=[AlterPartition.BrokerState(broker_id=b, broker_epoch=-1) for b in isr],
        )
    else:
        part = AlterPartition.PartitionData(
            partition_index=0,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            leader_recovery_state=0,
            new_isr=isr,
        )
    req = AlterPartition(
        broker_id=broker_id,
        broker_epoch=broker_epoch,
        topics=[AlterPartition.TopicData(topic_id=topic_id, partitions=[part])],
    )
    with RawClient(f"127.0.0.1:{node.controller_port}") as c:
        r = c.request(56, version, req)
    if r.error_code:
        return r.error_code, None
    return r.topics[0].partitions[0].error_code, r.topics[0].partitions[0]


def test_alter_partition_checks_and_commits(tmp_path):
    config = dict(FAST, **{"replica.lag.time.max.ms": 60000})  # the leader's own ISR loop shrinks nothing
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        create(cluster.node(1), "ap", 1, 3)
        full_isr(cluster, "ap", 1)
        topic_id, leader, epoch, replicas, isr = state(cluster.node(1), "ap")
        active = cluster.node(cluster.controller_id())
        other = next(n for n in cluster.nodes if n is not active)
        follower = next(r for r in replicas if r != leader)
        # the current partition epoch: a wrong one is refused with the partition's state
        code, probe = alter(active, leader, topic_id, epoch, 10**6, isr)
        assert code == ErrorCode.INVALID_UPDATE_VERSION and probe.leader_id == leader
        pe = probe.partition_epoch
        shrunk = [r for r in isr if r != follower]

        checks = [
            ("unknown topic id", alter(active, leader, uuid.uuid4(), epoch, pe, shrunk), ErrorCode.UNKNOWN_TOPIC_ID),
            (
                "stale broker epoch",
                alter(active, leader, topic_id, epoch, pe, shrunk, broker_epoch=12345),
                ErrorCode.STALE_BROKER_EPOCH,
            ),
            ("not the leader", alter(active, follower, topic_id, epoch, pe, shrunk), ErrorCode.NOT_LEADER_OR_FOLLOWER),
            (
                "older leader epoch",
                alter(active, leader, topic_id, epoch - 1, pe, shrunk),
                ErrorCode.FENCED_LEADER_EPOCH,
            ),
            (
                "stale partition epoch",
                alter(active, leader, topic_id, epoch, pe - 1, shrunk),
                ErrorCode.INVALID_UPDATE_VERSION,
            ),
            (
                "ISR without the leader",
                alter(active, leader, topic_id, epoch, pe, [follower]),
                ErrorCode.INVALID_REQUEST,
            ),
            (
                "ISR with a non-replica",
                alter(active, leader, topic_id, epoch, pe, isr + [9]),
                ErrorCode.INVALID_REQUEST,
            ),
            ("not the active controller", alter(other, leader, topic_id, epoch, pe, shrunk), ErrorCode.NOT_CONTROLLER),
        ]
        if epoch == 0:
            checks = [c for c in checks if c[0] != "older leader epoch"]
        for what, (code, _), want in checks:
            assert code == want, (what, ErrorCode(code).name, want.name)
        assert sorted(state(cluster.node(2), "ap")[4]) == sorted(isr), "nothing changed"

        code, after = alter(active, leader, topic_id, epoch, pe, shrunk, version=2)
        assert code == ErrorCode.NONE and sorted(after.isr) == sorted(shrunk) and after.partition_epoch == pe + 1
        # the same request again carries a stale partition epoch now
        assert alter(active, leader, topic_id, epoch, pe, shrunk)[0] == ErrorCode.INVALID_UPDATE_VERSION
