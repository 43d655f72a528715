"""retention.archive in a three-node cluster: only the partition leader archives (each
record once however many replicas there are), followers delete the same segments after
the leader's log start, and a new leader after a SIGKILL resumes from the files already
in the shared store without archiving anything twice."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_archive import SMALL, archived_rows, settled_log_start, wait_for

import logbroker
from logbroker import Admin, NewTopic, Producer
from logbroker.archive import ArchiveStore


def leader_of(bs: str, topic: str) -> int:
    with Admin(bs) as admin:
        return admin.describe_topics([topic])[topic].partitions[0].leader


def log_start(bs: str, topic: str) -> int:
    with Admin(bs) as admin:
        return admin.list_offsets({(topic, 0): "earliest"})[logbroker.TopicPartition(topic, 0)][0]


def first_segment(node_dir: Path, topic: str) -> int:
    """The base offset of a replica's oldest segment, from its files."""
    logs = sorted((node_dir / f"{topic}-0").glob("*.log"))
    return int(logs[0].stem) if logs else -1


def produce(bs: str, topic: str, start: int, n: int) -> dict[int, bytes]:
    out = {}
    with Producer(bs, acks="all", linger_ms=0) as p:
        for i in range(start, start + n):
            value = f"record-{i}-".encode() + b"y" * 40
            md = p.send(topic, value, key=f"k{i}".encode(), partition=0).result(30)
            out[md.offset] = value
    return out


@pytest.mark.timeout(300)
def test_leader_archives_followers_follow_failover_resumes(tmp_path: Path) -> None:
    location = tmp_path / "shared-archive"
    config = {"log.retention.check.interval.ms": 200, "archive.location": str(location)}
    with logbroker.Cluster(3, data_dir=tmp_path / "c", config=config) as cluster:
        bs = cluster.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("carch", 1, 3, {**SMALL, "min.insync.replicas": "2"})])
        model = produce(bs, "carch", 0, 200)
        wait_for(lambda: log_start(bs, "carch") > 0, timeout=60, what="first archive")
        leader = leader_of(bs, "carch")
        start = log_start(bs, "carch")
        # Followers take the leader's log start and drop the same segments.
        for node in cluster.nodes:
            wait_for(
                lambda node=node: first_segment(node.data_dir, "carch") >= start,
                timeout=60,
                what=f"node {node.node_id} deleting below {start}",
            )
        archive_lines = {n.node_id: n.log_text().count("archived carch-0") for n in cluster.nodes}
        assert archive_lines[leader] > 0 and sum(archive_lines.values()) == archive_lines[leader], archive_lines
        # Kill the leader: a new one takes over and goes on archiving from the store.
        cluster.node(leader).kill()
        survivor = next(n for n in cluster.nodes if n.node_id != leader)
        sbs = survivor.bootstrap_servers
        wait_for(lambda: leader_of(sbs, "carch") not in (leader, -1), timeout=60, what="a new leader")
        new_leader = leader_of(sbs, "carch")
        model.update(produce(sbs, "carch", 200, 200))
        last = max(model)
        wait_for(lambda: log_start(sbs, "carch") > last - 60, timeout=60, what="archive by the new leader")
        assert cluster.node(new_leader).log_text().count("archived carch-0") > 0
        cluster.node(leader).restart()
        # everything but the active segment archived (a later check could still be archiving
        # when a fixed sleep ended): the new leader's replica down to one segment file
        start = settled_log_start(sbs, "carch", 0, cluster.node(new_leader).data_dir)
    rows = archived_rows(ArchiveStore(str(location)), "carch")  # asserts no offset twice
    assert {o: v[1] for (_, o), v in rows.items()} == {o: v for o, v in model.items() if o < start}
