"""The runnable pipelines in spark/ end to end against a real broker."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))


def test_zero_call_registration(spark, broker):
    # pyspark_logbroker.DefaultSource was registered when the session started
    assert spark.logbroker_registered_at_start
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce("zero-call", b"hello")
    p.flush(10)
    rows = (
        spark.read.format("logbroker")
        .option("bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", "zero-call")
        .load()
        .collect()
    )
    assert [r.value for r in rows] == [b"hello"]


def test_window_counts_and_topic_to_parquet(spark, broker, tmp_path):
    import topic_to_parquet
    import window_counts

    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    for t in ("events", "event-counts"):
        admin.create_topics([NewTopic(t, num_partitions=2, replication_factor=1)])[t].result(10)
    p = Producer({"bootstrap.servers": bs})
    events = [
        ("u1", 1.0, "2026-11-21T10:00:05Z"),
        ("u1", 2.0, "2026-11-21T10:00:50Z"),
        ("u2", 5.0, "2026-11-21T10:00:10Z"),
        ("u1", 4.0, "2026-11-21T10:01:10Z"),
    ]
    for key, amount, ts in events:
        p.produce("events", json.dumps({"key": key, "amount": amount, "ts": ts}).encode(), key=key.encode())
    p.flush(10)
    q = window_counts.build(spark, bs, "events", "event-counts", str(tmp_path / "ck"), available_now=True)
    q.awaitTermination(120)
    assert q.exception() is None
    out = (
        spark.read.format("logbroker")
        .option("bootstrap.servers", bs)
        .option("subscribe", "event-counts")
        .load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS v")
        .collect()
    )
    results = {}
    for r in sorted(out, key=lambda r: (r.partition, r.offset)):  # newest per key and window wins
        d = json.loads(r.v)
        results[(d["key"], d["window_start"][11:16])] = (d["count"], d["total"])
    assert results == {("u1", "10:00"): (2, 3.0), ("u2", "10:00"): (1, 5.0), ("u1", "10:01"): (1, 4.0)}
    n = topic_to_parquet.run(spark, bs, "events", str(tmp_path / "events.parquet"))
    assert n == 4
    rows = spark.read.parquet(str(tmp_path / "events.parquet")).collect()
    assert sorted(json.loads(r.value)["amount"] for r in rows) == [1.0, 2.0, 4.0, 5.0]
