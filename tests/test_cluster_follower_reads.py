"""Reads from followers (KIP-392) in a three-node cluster of real `logbroker serve` processes
with racks ra, rb, rc and `replica.selector.class` = RackAwareReplicaSelector: the leader
sends a consumer that sets its rack to the in-sync follower in that rack, the follower
serves it up to its high watermark, and a librdkafka consumer with `client.rack` reads every
record from the follower in its rack (its fetch log names that broker)."""

from __future__ import annotations

import logging
import uuid

from confluent_kafka import Consumer, TopicPartition
from conftest import wait_until
from rawclient import RawClient
from replication_helpers import FAST, assign, full_isr, produce_all

from logbroker import Cluster
from logbroker.protocol import REQUESTS

Fetch = REQUESTS[1]
SELECTOR = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}


def fetch(node, topic: str, rack: str, version: int = 11, offset: int = 0):
    req = Fetch(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=[],
        rack_id=rack,
        topics=[
            Fetch.FetchTopic(
                topic=topic,
                topic_id=uuid.UUID(int=0),
                partitions=[
                    Fetch.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
    )
    with RawClient(node.bootstrap_servers) as c:
        return c.request(1, version, req).responses[0].partitions[0]


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_consumer_reads_from_the_replica_in_its_rack(tmp_path):
    with Cluster(3, data_dir=tmp_path, config=dict(FAST, **SELECTOR), racks=["ra", "rb", "rc"]) as cluster:
        assign(cluster.node(1), "fr", [1, 2, 3])
        full_isr(cluster, "fr", 1)
        acked = produce_all(cluster.bootstrap_servers, "fr", 1000)
        leader = cluster.node(1)
        # the leader names the follower in the consumer's rack once that follower has the data
        d = wait_until(
            lambda: (f := fetch(leader, "fr", "rc")).preferred_read_replica == 3 and f,
            what="broker 1 naming broker 3 for rack rc",
        )
        assert d.error_code == 0 and len(d.records or b"") == 0
        # its own rack, no rack, an unknown rack: read here
        for rack in ("ra", "", "rz"):
            f = fetch(leader, "fr", rack)
            assert (f.error_code, f.preferred_read_replica) == (0, -1) and len(f.records) > 0, rack
        # the follower serves up to its HW, which follows the leader's
        f = wait_until(
            lambda: (f := fetch(cluster.node(3), "fr", "rc")).high_watermark == 1000 and f, what="broker 3's HW at 1000"
        )
        assert f.error_code == 0 and len(f.records) > 0

        handler = Lines()
        logger = logging.getLogger("rdkafka-follower-reads")
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        c = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "fr-rc",
                "client.rack": "rc",
                "enable.auto.commit": False,
                "debug": "fetch",
                "logger": logger,
            }
        )
        try:
            c.assign([TopicPartition("fr", 0, 0)])
            got = []
            while len(got) < len(acked):
                for m in c.consume(500, timeout=10):
                    assert m.error() is None, m.error()
                    got.append((m.offset(), m.value()))
        finally:
            c.close()
        assert sorted(got) == sorted((o, v) for _, o, v in acked)
        moved = [line for line in handler.lines if "preferred replica updated" in line]
        assert moved and "migrating from broker 1 to 3" in moved[0], "\n".join(handler.lines)[-3000:]
