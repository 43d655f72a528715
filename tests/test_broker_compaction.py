"""Compacted topics in the running broker: many updates per key shrink to the newest
value per key, a consumer reading from the start sees exactly those, and tombstoned keys
disappear; producing a record without a key to a compacted topic is refused."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logbroker import Broker


def read_all(bs: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    c = Consumer(
        {"bootstrap.servers": bs, "group.id": "reader", "enable.auto.commit": False, "enable.partition.eof": True}
    )
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                break
            raise AssertionError(m.error())
        out.append((m.offset(), m.key(), m.value()))
    c.close()
    return out


def test_compacted_topic_keeps_newest_per_key(tmp_path):
    with Broker(data_dir=tmp_path / "d", log_cleaner_backoff_ms=200, log_flush_scheduler_interval_ms=100) as b:
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics(
            [
                NewTopic(
                    "compacted",
                    1,
                    1,
                    config={
                        "cleanup.policy": "compact",
                        "segment.bytes": "16384",
                        "segment.ms": "300",
                        "min.cleanable.dirty.ratio": "0.01",
                        "delete.retention.ms": "0",
                    },
                )
            ]
        )["compacted"].result(10)
        p = Producer({"bootstrap.servers": bs, "linger.ms": 2, "batch.size": 4000})
        newest = {}
        for i in range(2000):
            k = f"key-{i % 20}".encode()
            v = f"value-{i}".encode()
            p.produce("compacted", v, key=k)
            newest[k] = v
        for k in (b"key-3", b"key-7"):
            p.produce("compacted", None, key=k)  # tombstones
            del newest[k]
        assert p.flush(10) == 0
        log = b.server.replicas.get("compacted", 0).log
        size_before = log.size_bytes
        deadline = time.monotonic() + 30
        rows = read_all(bs, "compacted")
        while time.monotonic() < deadline and ({k: v for _, k, v in rows} != newest or len(rows) != len(newest)):
            time.sleep(0.5)
            rows = read_all(bs, "compacted")
        assert {k: v for _, k, v in rows} == newest and len(rows) == len(newest), rows[:5]
        offsets = [o for o, _, _ in rows]
        assert offsets == sorted(offsets)
        assert log.size_bytes < size_before / 10
        # offsets are kept: the newest value of key-0 is record 1980
        assert (1980, b"key-0", b"value-1980") in rows
        # a keyless record is refused by a compacted topic
        errors = []
        p.produce("compacted", b"no key", on_delivery=lambda err, msg: errors.append(err))
        p.flush(10)
        assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_RECORD


def test_keyless_records_are_named_in_record_errors(tmp_path):
    """KIP-467: a batch refused because some of its records have no key names each of them
    (ProduceResponse RecordErrors), so librdkafka fails exactly those with INVALID_RECORD and
    the rest of the batch with _INVALID_DIFFERENT_RECORD; nothing of the batch is stored."""
    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})])["compacted"].result(10)
        p = Producer({"bootstrap.servers": bs, "linger.ms": 500, "batch.num.messages": 1000})
        outcome: dict[int, int | None] = {}
        for i in range(30):
            key = None if i % 10 == 0 else f"key-{i}".encode()
            p.produce(
                "compacted",
                f"value-{i}".encode(),
                key=key,
                partition=0,
                on_delivery=lambda err, msg, i=i: outcome.__setitem__(i, err.code() if err else None),
            )
        p.flush(15)
        assert len(outcome) == 30, outcome
        assert {i for i, c in outcome.items() if c == KafkaError.INVALID_RECORD} == {0, 10, 20}, outcome
        assert {i for i, c in outcome.items() if c == KafkaError._INVALID_DIFFERENT_RECORD} == set(range(30)) - {
            0,
            10,
            20,
        }
        assert b.server.replicas.get("compacted", 0).log.log_end_offset == 0
