"""The `logbroker` Spark sink with `transactional.id.prefix`: each task writes in a
transaction the driver commits once the job succeeds, or aborts when it fails; a stream
commits its micro-batch id with each task's transaction. read_committed readers see every
row of a successful write exactly once and nothing of a failed one."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from logbroker import Broker


def values(bs: str, topic: str, partitions: int, isolation: str = "read_committed") -> list[bytes]:
    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": "eos-check",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, last = [], time.monotonic()
    try:
        while time.monotonic() - last < 2.0:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append(m.value())
                last = time.monotonic()
    finally:
        c.close()
    return out


@pytest.fixture
def bs():
    with Broker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        for t in ("eos-out", "eos-fail", "eos-src", "eos-copy"):
            admin.create_topics([NewTopic(t, num_partitions=2, replication_factor=1)])[t].result(10)
        yield b.bootstrap_servers


def test_batch_write_commits_once_and_a_failed_job_leaves_nothing(spark, bs):
    df = spark.createDataFrame([(f"k{i}", f"row-{i}") for i in range(60)], "key string, value string").repartition(3)
    (
        df.write.format("logbroker")
        .option("bootstrap.servers", bs)
        .option("topic", "eos-out")
        .option("transactional.id.prefix", "eos-batch")
        .mode("append")
        .save()
    )
    got = values(bs, "eos-out", 2)
    assert sorted(got) == sorted(f"row-{i}".encode() for i in range(60))
    assert sorted(values(bs, "eos-out", 2, "read_uncommitted")) == sorted(got), "written once, not retried"

    # one row names a partition the topic does not have: its task fails, the others succeed
    bad = spark.createDataFrame(
        [(f"k{i}", f"bad-{i}", 99 if i == 29 else i % 2) for i in range(30)], "key string, value string, partition int"
    ).repartition(3)
    from pyspark.errors import PythonException  # the failed task's error, raised again on the driver

    with pytest.raises(PythonException):
        (
            bad.write.format("logbroker")
            .option("bootstrap.servers", bs)
            .option("topic", "eos-fail")
            .option("transactional.id.prefix", "eos-failing")
            .mode("append")
            .save()
        )
    # the tasks that succeeded wrote rows, but the driver aborted their transactions
    assert values(bs, "eos-fail", 2) == []

    # the logbroker source reads committed data only with kafka.isolation.level=read_committed
    def spark_values(topic: str) -> list[bytes]:
        return [
            bytes(r.value)
            for r in spark.read.format("logbroker")
            .option("bootstrap.servers", bs)
            .option("subscribe", topic)
            .option("kafka.isolation.level", "read_committed")
            .load()
            .collect()
        ]

    assert sorted(spark_values("eos-out")) == sorted(f"row-{i}".encode() for i in range(60))
    assert spark_values("eos-fail") == []


def test_stream_copies_exactly_once(spark, bs, tmp_path):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs})
    for i in range(200):
        p.produce("eos-src", f"s{i}".encode(), partition=i % 2)
    p.flush(10)
    q = (
        spark.readStream.format("logbroker")
        .option("bootstrap.servers", bs)
        .option("subscribe", "eos-src")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "60")
        .load()
        .selectExpr("value")
        .writeStream.format("logbroker")
        .option("bootstrap.servers", bs)
        .option("topic", "eos-copy")
        .option("transactional.id.prefix", "eos-stream")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(180)
    assert q.exception() is None
    assert sorted(values(bs, "eos-copy", 2)) == sorted(f"s{i}".encode() for i in range(200))
