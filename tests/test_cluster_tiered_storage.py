"""Tiered storage in a three-node cluster (RF 3) on an S3-compatible store: only the leader
copies, every replica deletes locally what is copied, a leader killed (SIGKILL) in the
middle of an upload leaves a copy the new leader cleans up before it goes on copying after
the last finished copy (no gap, nothing copied twice), and a replica that lost its data
catches up from the leader's local part only (OFFSET_MOVED_TO_TIERED_STORAGE), back in the
ISR."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from store_relay import StallingRelay
from test_tiered_storage import FAST, TIERED, moto_s3, offsets, produce_model, read_all, wait_for

import logbroker
from logbroker import Admin, NewTopic


def describe(bs: str, topic: str):
    with Admin(bs) as admin:
        return admin.describe_topics([topic])[topic].partitions[0]


def local_logs(node, topic: str) -> list[int]:
    return sorted(int(p.stem) for p in (node.data_dir / f"{topic}-0").glob("*.log"))


@pytest.mark.timeout(300)
def test_leader_copies_failover_goes_on_and_an_emptied_replica_catches_up(tmp_path: Path) -> None:
    server, keys = moto_s3("tier")
    host, port = server.get_host_and_port()
    relay = StallingRelay((host, port))
    keys["rsm.config.aws_endpoint"] = f"http://127.0.0.1:{relay.port}"
    config = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.url": "s3://tier/cluster",
        **keys,
        **FAST,
    }
    try:
        run(tmp_path, config, relay)
    finally:
        relay.close()
        server.stop()


def run(tmp_path: Path, config: dict, relay: StallingRelay) -> None:
    with logbroker.Cluster(3, data_dir=tmp_path / "c", config=config) as cluster:
        bs = cluster.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("ct", 1, 3, {**TIERED, "min.insync.replicas": "2"})])
        model = produce_model(bs, "ct", 1, 300, acks="all")
        leader = describe(bs, "ct").leader
        # every replica keeps about its active segment (a follower's segments end elsewhere
        # than the leader's: the one holding the last copied offset stays too); the rest is
        # copied, by the leader alone
        for node in cluster.nodes:
            wait_for(
                lambda node=node: 0 < local_logs(node, "ct")[0] and len(local_logs(node, "ct")) <= 2,
                what=f"node {node.node_id} tiered down",
            )
        copies = {n.node_id: n.log_text().count("tiered storage: copied ct-0") for n in cluster.nodes}
        assert copies[leader] > 0 and sum(copies.values()) == copies[leader], copies
        copied_before = offsets(bs, "ct", 0, "latest_tiered")

        # the leader is killed while it uploads a segment (the store holds its request)
        relay.stall()
        model.update(produce_model(bs, "ct", 1, 60, acks="all"))
        wait_for(lambda: any(h.startswith(b"PUT ") for h in relay.held), what="an upload in flight")
        cluster.node(leader).kill()
        relay.heal()
        survivor = next(n for n in cluster.nodes if n.node_id != leader)
        sbs = survivor.bootstrap_servers
        wait_for(lambda: describe(sbs, "ct").leader not in (leader, -1), what="a new leader")
        more = produce_model(sbs, "ct", 1, 300, acks="all")
        model.update(more)
        last = max(o for _, o in more)
        wait_for(lambda: offsets(sbs, "ct", 0, "latest_tiered") > last - 60, what="copies by the new leader")
        new_leader = describe(sbs, "ct").leader
        text = cluster.node(new_leader).log_text()
        assert text.count("tiered storage: copied ct-0") > 0
        # the copy the kill cut short (COPY_SEGMENT_STARTED) was deleted, not served
        assert "tiered storage: deleted ct-0 remote segment" in text, "the cut copy cleaned up"
        assert offsets(sbs, "ct", 0, "latest_tiered") > copied_before
        # no offset is served twice and none is missing, across both leaders' copies
        assert read_all(sbs, "ct", 1, model) == model

        # the old leader comes back with its replica's data gone
        shutil.rmtree(cluster.node(leader).data_dir / "ct-0")
        cluster.node(leader).start()
        wait_for(lambda: leader in describe(sbs, "ct").isr, what="the emptied replica back in the ISR")
        logs = local_logs(cluster.node(leader), "ct")
        assert logs and logs[0] > copied_before, f"it copied only the part not in remote storage: {logs}"
        # the replica fetcher's lines reach the node's log every 200 ms (replication.py), maybe
        # after the ISR has it back
        wait_for(lambda: "moved to tiered storage" in cluster.node(leader).log_text(), what="the fetcher's line")
        wait_for(
            lambda: (
                "producer state and leader epoch" in (t := cluster.node(leader).log_text()) and "restored from" in t
            ),
            what="Kafka's auxiliary state restored",
        )
        assert read_all(cluster.node(leader).bootstrap_servers, "ct", 1, model) == model
