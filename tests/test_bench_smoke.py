"""Smoke run of the side-by-side harness (benches/): both brokers start through their
peer wrappers (Apache Kafka installed from Maven Central, KRaft combined mode), and one
workload (Kafka's own ProducerPerformance, then a confluent-kafka consume) completes
against each. The full comparison is `python -m benches.compare` (too slow for CI)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                                reason="Java 17 and Maven are needed for the Kafka peer")


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
