"""Smoke run of the side-by-side harness (benches/): both brokers start through their
peer wrappers (Apache Kafka installed from Maven Central, KRaft combined mode), and one
workload (Kafka's own ProducerPerformance, then a confluent-kafka consume) completes
against each, one node and three nodes (replication factor 3, acks=all). The full
comparisons are `python -m benches.compare [--cluster]` (too slow for CI).

The three-node cases run against Apache Kafka only in the long form
(`LOGBROKER_TEST_LONG=1 python -m pytest tests/test_bench_smoke.py`, docs/testing.md "Long
runs"): three Kafka JVMs for each were about 90 of the CI run's CPU seconds, and what they
check is the harness, which the one-node case and every `--cluster` run check too."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import needs_java

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = needs_java
# the three-node cases' peers: Apache Kafka's in the long form only (the module doc)
CLUSTER_PEERS = ["logbroker", "kafka"] if os.environ.get("LOGBROKER_TEST_LONG") == "1" else ["logbroker"]


@pytest.mark.parametrize("peer_name", ["logbroker", "kafka"])
def test_peer_starts_and_one_workload_completes(peer_name, tmp_path):
    from benches.compare import loadgen
    from benches.peers.common import create_topic
    from benches.peers.kafka import KafkaPeer, install
    from benches.peers.logbroker import LogbrokerPeer

    inst = install()
    peer = LogbrokerPeer(data_root=tmp_path) if peer_name == "logbroker" else KafkaPeer(data_root=tmp_path)
    cold = peer.start()
    try:
        assert cold > 0
        create_topic(peer.bootstrap, "smoke", 2)
        produced = loadgen.java_produce(inst, peer.bootstrap, "smoke", 100, 20_000, "all")
        assert produced["records"] >= 20_000 * (1 - loadgen.JAVA_WARMUP) - 1, produced
        consumed = loadgen.ck_consume(peer.bootstrap, "smoke", 2, 20_000)
        assert consumed["records_total"] == 20_000, consumed
        assert peer.rss() > 0 and peer.cpu() > 0
    finally:
        peer.stop()


@pytest.mark.parametrize("peer_name", CLUSTER_PEERS)
def test_three_node_clusters_start_and_replicate_one_workload(peer_name, tmp_path):
    from benches.compare import loadgen
    from benches.peers.common import PeerCluster, create_topic, min_isr_size
    from benches.peers.kafka import KafkaPeer, install
    from benches.peers.logbroker import LogbrokerPeer

    inst = install()
    if peer_name == "kafka":
        cluster = PeerCluster(KafkaPeer, 3, tmp_path, install_info=inst)
    else:
        cluster = PeerCluster(LogbrokerPeer, 3, tmp_path)
    cold = cluster.start()
    try:
        assert cold > 0 and len(set(cluster.pids)) == 3
        create_topic(cluster.bootstrap, "smoke3", 3, replication_factor=3)
        produced = loadgen.java_produce(inst, cluster.bootstrap, "smoke3", 1024, 20_000, "all")
        assert produced["records"] >= 20_000 * (1 - loadgen.JAVA_WARMUP) - 1, produced
        consumed = loadgen.ck_consume(cluster.bootstrap, "smoke3", 3, 20_000)
        assert consumed["records_total"] == 20_000, consumed
        assert min_isr_size(cluster.bootstrap, "smoke3") == 3
        assert all(c > 0 for c in cluster.cpu_by_node()) and cluster.rss() > 0
        # every node holds a replica of every partition: three copies of the data on disk
        for node in cluster.nodes:
            sizes = [f.stat().st_size for d in node.data_dir.glob("smoke3-*") for f in d.glob("*.log")]
            assert len([d for d in node.data_dir.glob("smoke3-*")]) == 3 and sum(sizes) >= 20_000 * 1024, (
                node.node_id,
                sizes,
            )
    finally:
        cluster.stop()


@pytest.mark.parametrize("peer_name", CLUSTER_PEERS)
def test_scale_harness_runs_every_measurement_on_three_nodes(peer_name):
    """`python -m benches.compare.scale` at 200 partitions on three nodes: creation, Metadata,
    idle CPU, controller failover (the quorum leader killed, a CreateTopics served by the
    survivors) and a broker-only fourth node catching up; every figure is measured."""
    from benches.compare import scale
    from benches.peers.kafka import install

    install()
    r = scale.run_one(peer_name, 3, 200, 5, 20, settle_s=0, idle_s=1, idle_after=0)
    assert r["partitions"] == 200 and r["topics"] == 40
    assert r["metadata_seconds"] > 0 and r["rss_mb"] > 0 and r["idle_cpu_share"] >= 0
    assert 0 < r["controller_failover_seconds"] < 120, r
    assert 0 < r["new_broker_catch_up_seconds"] < 120 and 0 < r["new_broker_registered_seconds"] < 120, r
