"""Eligible leader replicas (KIP-966) on a running cluster: one controller-only node and three
brokers, a topic with replication factor 3 and min.insync.replicas 2. The ISR shrinks below
min ISR (a follower killed, another paused), then the leader is killed: the paused follower,
held in the ELR, is elected cleanly once it is back, with every acknowledged record; before
ELR the partition stayed offline until its last ISR member returned. DescribeTopicPartitions
(what kafka-topics --describe reads) shows the ELR and the last known leader on the way.
The pause is kept short (a few seconds past the session timeout): a broker paused about 10 s
once did not answer again in CI (docs/reliability.md)."""

from __future__ import annotations

import os
import signal
import subprocess

from confluent_kafka import Producer
from conftest import needs_java
from polling import wait_until
from rawclient import RawClient
from replication_helpers import FAST, assign, read_all

from logbroker import Cluster
from logbroker.protocol import REQUESTS

Request = REQUESTS[75]


def described(node, topic: str) -> tuple[int, list[int], list[int], list[int]]:
    """(leader, ISR, ELR, last known ELR) of `topic`-0 as `node` answers DescribeTopicPartitions."""
    req = Request(topics=[Request.TopicRequest(name=topic)], response_partition_limit=10, cursor=None)
    with RawClient(node.bootstrap_servers) as c:
        p = c.request(75, 0, req).topics[0].partitions[0]
    return p.leader_id, sorted(p.isr_nodes), sorted(p.eligible_leader_replicas), list(p.last_known_elr)


def produce(bootstrap: str, topic: str, values: list[bytes], timeout_ms: int = 30000) -> list[bytes]:
    """The values acknowledged (acks=all)."""
    acked: list[bytes] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": timeout_ms, "linger.ms": 0})
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda err, m: err is None and acked.append(m.value()))
    p.flush(timeout_ms / 1000 + 10)
    return acked


def kafka_topics_describe(bootstrap: str, topic: str) -> str:
    """Kafka 4.4's own `kafka-topics --describe` (TopicCommand), its output."""
    from benches.peers.kafka import install

    cmd = install().tools_java(
        "org.apache.kafka.tools.TopicCommand", ["--bootstrap-server", bootstrap, "--describe", "--topic", topic]
    )
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


@needs_java
def test_a_follower_in_the_elr_is_elected_with_every_acknowledged_record(tmp_path):
    config = {**FAST, "min.insync.replicas": 2, "offsets.topic.replication.factor": 1}
    with Cluster(1, broker_only=3, controller_only=True, data_dir=tmp_path, config=config) as cluster:
        b2, b3, b4 = (cluster.node(n) for n in (2, 3, 4))
        assign(b2, "elr", [2, 3, 4])
        wait_until(lambda: described(b2, "elr") == (2, [2, 3, 4], [], []), what="elr-0 led by 2, full ISR")
        acked = produce(cluster.bootstrap_servers, "elr", [f"r{i}".encode() for i in range(200)])
        assert len(acked) == 200

        b3.kill()  # ISR [2, 4]: still at min ISR, no ELR
        wait_until(lambda: described(b2, "elr") == (2, [2, 4], [], []), what="3 out of the ISR")
        acked += produce(b2.bootstrap_servers, "elr", [f"s{i}".encode() for i in range(100)])
        assert len(acked) == 300
        os.kill(b4.proc.pid, signal.SIGSTOP)  # 4 stops fetching and heartbeating
        try:
            wait_until(lambda: described(b2, "elr") == (2, [2], [4], []), what="4 out of the ISR, into the ELR")
            # below min ISR: nothing more is acknowledged
            assert produce(b2.bootstrap_servers, "elr", [b"refused"], timeout_ms=3000) == []
            b2.kill()
        finally:
            os.kill(b4.proc.pid, signal.SIGCONT)
        # 2 fenced: the ISR empties (2 joins the ELR, and is the last known leader); 4, back,
        # is eligible and leads with an ISR of itself
        wait_until(lambda: described(b4, "elr") == (4, [4], [2], []), timeout=60, what="4 elected from the ELR")
        out = kafka_topics_describe(b4.bootstrap_servers, "elr")
        row = " ".join(next(line for line in out.splitlines() if "Partition: 0" in line).split())
        assert "Leader: 4 Replicas: 2,3,4 Isr: 4 Elr: 2 LastKnownElr:" in row, out
        got = [v for _o, v in read_all(b4.bootstrap_servers, "elr")]
        assert got[: len(acked)] == acked and b"refused" not in got
        assert len(got) == len(acked), got[len(acked) :]
        log = cluster.node(1).log_text()
        assert "UNCLEAN" not in log, log[-3000:]
