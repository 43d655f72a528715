"""kafka-python against a real logbroker broker on loopback (idempotent producer is
kafka-python 3's default)."""

from __future__ import annotations

import time

import pytest
from conftest import CODECS, Rec, check_partition_records, make_records
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30) -> dict:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None, auto_offset_reset="earliest"
    )
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    got: dict[int, list] = {}
    n = 0
    deadline = time.monotonic() + timeout
    try:
        while n < expected and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=500).items():
                for m in msgs:
                    headers = tuple((k, v) for k, v in (m.headers or []))
                    got.setdefault(tp.partition, []).append((m.offset, Rec(tp.partition, m.key, m.value, headers)))
                    n += 1
    finally:
        c.close()
    assert n == expected, f"consumed {n} of {expected}"
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_codec(broker, codec):
    topic = f"kp-{codec}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    admin.close()
    records = make_records(500, 3, tag=codec)
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers, compression_type=None if codec == "none" else codec, linger_ms=5
    )
    futures = [p.send(topic, value=r.value, key=r.key, partition=r.partition, headers=list(r.headers)) for r in records]
    p.flush(30)
    for f in futures:
        f.get(10)
    p.close()
    check_partition_records(records, consume_all(broker.bootstrap_servers, topic, 3, len(records)))
