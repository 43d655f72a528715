"""Helpers for tests of replication in a `Cluster` of real `logbroker serve` processes:
the partition layout as Metadata reports it, topic creation, waiting for a full ISR, an
idempotent acks=all producer that returns what was acknowledged, a topic placed on given
brokers, a consumer reading a partition to its high watermark, and a partition's records
and leader epochs as stored on disk (read with the storage engine after the cluster stopped)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import wait_until
from rawclient import RawClient

from logbroker import _core
from logbroker.protocol import REQUESTS

FAST = {
    "broker.session.timeout.ms": 3000,
    "broker.heartbeat.interval.ms": 300,
    "replica.lag.time.max.ms": 3000,
    "replica.fetch.wait.max.ms": 200,
}


def layout(node) -> dict[tuple[str, int], tuple[int, int, list[int], list[int]]]:
    with RawClient(node.bootstrap_servers) as c:
        r = c.request(3, 12, REQUESTS[3](topics=None, allow_auto_topic_creation=False))
    return {
        (t.name, p.partition_index): (p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
        for t in r.topics
        for p in t.partitions
    }


def create(node, name: str, partitions: int, rf: int, configs: dict[str, str] | None = None) -> None:
    C = REQUESTS[19]
    req = C(
        topics=[
            C.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=rf,
                assignments=[],
                configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=10000,
        validate_only=False,
    )
    with RawClient(node.bootstrap_servers) as c:
        assert c.request(19, 5, req).topics[0].error_code == 0


def full_isr(cluster, topic: str, n: int) -> dict:
    def check():
        parts = {k: v for k, v in layout(cluster.nodes[0]).items() if k[0] == topic}
        return parts if len(parts) == n and all(sorted(v[3]) == sorted(v[2]) for v in parts.values()) else None

    return wait_until(check, timeout=30, what=f"every replica of {topic} in the ISR")


def produce_all(bootstrap: str, topic: str, n: int, **conf) -> list[tuple[int, int, bytes]]:
    """Produce n records with acks=all, idempotent; the acknowledged (partition, offset, value)."""
    acked: list[tuple[int, int, bytes]] = []
    errors: list[str] = []

    def done(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5, **conf})
    for i in range(n):
        p.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), on_delivery=done)
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:5]
    return acked


def stored(data_dir: Path, topic: str, partition: int) -> tuple[list[tuple[int, bytes]], list[tuple[int, int]]]:
    lg = _core.Log.open(str(data_dir / f"{topic}-{partition}"), topic, partition, {}, None, 0)
    try:
        return [(o, v) for o, _ts, _k, v in lg.read_records(lg.log_start_offset)], lg.epoch_entries()
    finally:
        lg.close()


def assign(node, name: str, replicas: list[int], configs: dict[str, str] | None = None) -> None:
    C = REQUESTS[19]
    req = C(
        topics=[
            C.CreatableTopic(
                name=name,
                num_partitions=-1,
                replication_factor=-1,
                assignments=[C.CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
                configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=10000,
        validate_only=False,
    )
    with RawClient(node.bootstrap_servers) as c:
        r = c.request(19, 5, req).topics[0]
        assert r.error_code == 0, (r.error_code, r.error_message)


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0, 0)
        c.assign([tp])
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        got: list[tuple[int, bytes]] = []
        while len(got) < high - low:
            for m in c.consume(1000, timeout=5):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
        return got
    finally:
        c.close()
