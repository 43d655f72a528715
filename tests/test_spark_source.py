"""The logbroker PySpark data source in local mode against a real broker: batch reads
with metadata columns, offset ranges and timestamps, headers, minPartitions; a
streaming query with Trigger.AvailableNow over several micro-batches and a restart,
ending with every record exactly once in a file sink; and the sink."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


@pytest.fixture(scope="module")
def topic_data():
    from logbroker import Broker

    with Broker() as b:
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("sp", num_partitions=3, replication_factor=1)])["sp"].result(10)
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "compression.type": "lz4"})
        rows = []
        for i in range(900):
            part = i % 3
            key = f"k{i}".encode() if i % 10 else None
            p.produce(
                "sp",
                f"v{i}".encode(),
                key=key,
                partition=part,
                timestamp=1_700_000_000_000 + i,
                headers=[("h", f"{i}".encode())],
            )
            rows.append((key, f"v{i}".encode(), part, 1_700_000_000_000 + i))
        assert p.flush(10) == 0
        yield bs, rows


def test_batch_read_all_columns(spark, topic_data):
    bs, rows = topic_data
    df = spark.read.format("logbroker").option("bootstrap.servers", bs).option("subscribe", "sp").load()
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    got = df.collect()
    assert len(got) == 900
    by_part: dict[int, list] = {}
    for r in got:
        assert r.topic == "sp" and r.timestampType == 0
        by_part.setdefault(r.partition, []).append(r)
    for p, rs in by_part.items():
        rs.sort(key=lambda r: r.offset)
        assert [r.offset for r in rs] == list(range(300))
        expected = [x for x in rows if x[2] == p]
        assert [(r.key, r.value) for r in rs] == [(k, v) for k, v, _, _ in expected]
        assert [int(r.timestamp.timestamp() * 1000) for r in rs] == [t for *_, t in expected]


def test_batch_read_offsets_headers_and_min_partitions(spark, topic_data):
    bs, _ = topic_data
    df = (
        spark.read.format("logbroker")
        .option("kafka.bootstrap.servers", bs)
        .option("assign", json.dumps({"sp": [1]}))
        .option("startingOffsets", json.dumps({"sp": {"1": 10}}))
        .option("endingOffsets", json.dumps({"sp": {"1": 20}}))
        .option("includeHeaders", "true")
        .option("minPartitions", "4")
        .load()
    )
    assert df.rdd.getNumPartitions() == 4
    got = sorted(df.collect(), key=lambda r: r.offset)
    assert [r.offset for r in got] == list(range(10, 20))
    assert [(h.key, h.value) for h in got[0].headers] == [("h", str(1 + 3 * 10).encode())]
    by_time = (
        spark.read.format("logbroker")
        .option("bootstrap.servers", bs)
        .option("subscribe", "sp")
        .option("startingTimestamp", str(1_700_000_000_000 + 600))
        .load()
    )
    assert by_time.count() == 300


def test_streaming_available_now_with_restart_exactly_once(spark, topic_data, tmp_path):
    bs, rows = topic_data
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def run_once() -> None:
        q = (
            spark.readStream.format("logbroker")
            .option("bootstrap.servers", bs)
            .option("subscribe", "sp")
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "200")
            .load()
            .selectExpr("CAST(value AS STRING) AS v", "partition", "offset")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        assert q.exception() is None
        return q

    q = run_once()
    assert len([p for p in q.recentProgress if p["numInputRows"] > 0]) >= 2  # several micro-batches
    first = spark.read.parquet(out).count()
    assert first == 900
    p = Producer({"bootstrap.servers": bs})
    for i in range(900, 960):
        p.produce("sp", f"v{i}".encode(), partition=i % 3)
    p.flush(10)
    run_once()  # restart from the checkpoint: only the new records
    values = [r.v for r in spark.read.parquet(out).collect()]
    assert len(values) == 960 and len(set(values)) == 960


def test_spark_kafka_source_gets_the_same_rows(spark, topic_data):
    bs, _ = topic_data
    cols = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    ours = spark.read.format("logbroker").option("bootstrap.servers", bs).option("subscribe", "sp").load()
    theirs = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bs)
        .option("subscribe", "sp")
        .option("startingOffsets", "earliest")
        .load()
    )
    assert theirs.columns == ours.columns

    def rows(df):
        return sorted((tuple(r) for r in df.select(*cols).collect()), key=lambda r: (r[3], r[4]))

    a, b = rows(ours), rows(theirs)
    assert len(a) >= 900 and a == b  # the streaming test may have added records


def test_spark_kafka_sink_writes_to_logbroker(spark, topic_data):
    bs, _ = topic_data
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("sp-out", num_partitions=2, replication_factor=1)])["sp-out"].result(10)
    df = spark.createDataFrame([(f"k{i}", f"out-{i}") for i in range(50)], "key string, value string")
    df.write.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", "sp-out").save()
    back = spark.read.format("logbroker").option("bootstrap.servers", bs).option("subscribe", "sp-out").load()
    got = sorted((r.key.decode(), r.value.decode()) for r in back.collect())
    assert got == sorted((f"k{i}", f"out-{i}") for i in range(50))


def test_logbroker_sink_batch_and_stream(spark, topic_data, tmp_path):
    bs, _ = topic_data
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("sp-sink", num_partitions=2, replication_factor=1)])["sp-sink"].result(10)
    df = spark.createDataFrame(
        [(f"k{i}", f"row-{i}", i % 2, [("src", b"spark")]) for i in range(40)],
        "key string, value string, partition int, headers array<struct<key: string, value: binary>>",
    )
    df.write.format("logbroker").option("bootstrap.servers", bs).option("topic", "sp-sink").mode("append").save()
    back = (
        spark.read.format("logbroker")
        .option("bootstrap.servers", bs)
        .option("subscribe", "sp-sink")
        .option("includeHeaders", "true")
        .load()
        .collect()
    )
    assert sorted((r.key, r.value, r.partition) for r in back) == sorted(
        (f"k{i}".encode(), f"row-{i}".encode(), i % 2) for i in range(40)
    )
    assert all([(h.key, h.value) for h in r.headers] == [("src", b"spark")] for r in back)
    # streaming: copy topic sp into sp-copy with the logbroker sink
    q = (
        spark.readStream.format("logbroker")
        .option("bootstrap.servers", bs)
        .option("subscribe", "sp")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("logbroker")
        .option("bootstrap.servers", bs)
        .option("topic", "sp-copy")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None
    src = spark.read.format("logbroker").option("bootstrap.servers", bs).option("subscribe", "sp").load().count()
    copy = spark.read.format("logbroker").option("bootstrap.servers", bs).option("subscribe", "sp-copy").load().count()
    assert copy == src


def test_pattern_new_partitions_and_fail_on_data_loss(spark, tmp_path):
    from logbroker import Broker
    from logbroker.spark.kafka_io import SparkSourceError  # noqa: F401 (the error the executors raise)

    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("pat-a", 1, 1), NewTopic("pat-b", 1, 1), NewTopic("other", 1, 1)])[
            "pat-b"
        ].result(10)
        p = Producer({"bootstrap.servers": bs})
        for t in ("pat-a", "pat-b", "other"):
            p.produce(t, t.encode())
        p.flush(10)
        df = spark.read.format("logbroker").option("bootstrap.servers", bs).option("subscribePattern", "pat-.*").load()
        assert sorted(r.value for r in df.collect()) == [b"pat-a", b"pat-b"]
        # streaming picks up a partition added between triggers, from its start
        out, ck = str(tmp_path / "o"), str(tmp_path / "ck")

        def run():
            q = (
                spark.readStream.format("logbroker")
                .option("bootstrap.servers", bs)
                .option("subscribe", "pat-a")
                .option("startingOffsets", "earliest")
                .load()
                .selectExpr("CAST(value AS STRING) AS v")
                .writeStream.format("parquet")
                .option("path", out)
                .option("checkpointLocation", ck)
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination(120)
            assert q.exception() is None

        run()
        from confluent_kafka.admin import NewPartitions

        admin.create_partitions([NewPartitions("pat-a", 2)])["pat-a"].result(10)
        p2 = Producer({"bootstrap.servers": bs})  # fresh metadata: sees partition 1
        p2.produce("pat-a", b"in-new-partition", partition=1)
        p2.flush(10)
        run()
        assert sorted(r.v for r in spark.read.parquet(out).collect()) == ["in-new-partition", "pat-a"]
        # records deleted before they were read: failOnDataLoss decides
        for i in range(5):
            p.produce("other", f"x{i}".encode())
        p.flush(10)
        from rawclient import RawClient

        from logbroker.protocol import REQUESTS

        DeleteRecords = REQUESTS[21]
        with RawClient(bs) as c:
            r = c.request(
                21,
                2,
                DeleteRecords(
                    topics=[
                        DeleteRecords.DeleteRecordsTopic(
                            name="other", partitions=[DeleteRecords.DeleteRecordsPartition(partition_index=0, offset=4)]
                        )
                    ],
                    timeout_ms=5000,
                ),
            )
            assert r.topics[0].partitions[0].error_code == 0

        def read(fail: str):
            return (
                spark.read.format("logbroker")
                .option("bootstrap.servers", bs)
                .option("subscribe", "other")
                .option("startingOffsets", json.dumps({"other": {"0": 0}}))
                .option("failOnDataLoss", fail)
                .load()
            )

        with pytest.raises(Exception, match="no longer available"):
            read("true").collect()
        assert sorted(r.value for r in read("false").collect()) == [b"x3", b"x4"]


def test_both_sources_read_a_tiered_topic_from_offset_zero(spark, tmp_path):
    """Tiered storage is transparent to Spark: the logbroker source and Spark's own Kafka
    source read every record of a topic whose local log kept only its active segment,
    with its key, value, offset, timestamp and headers, from the remote copies."""
    import time

    import logbroker
    from logbroker import Admin, NewTopic, Producer, TopicPartition

    cfg = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.url": (tmp_path / "remote").as_uri(),
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
    }
    # retention.ms -1: the records carry 2023 timestamps, which 7 days of retention would expire
    tiered = {
        "remote.storage.enable": "true",
        "segment.bytes": "4096",
        "local.retention.bytes": "1",
        "retention.ms": "-1",
    }
    with logbroker.Broker(data_dir=tmp_path / "d", config=cfg) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("sp-tier", 2, 1, tiered)])
        want = {}
        with Producer(bs, linger_ms=5) as p:
            for i in range(600):
                md = p.send(
                    "sp-tier",
                    f"value-{i}-{'x' * 40}".encode(),
                    key=f"k{i}".encode(),
                    partition=i % 2,
                    timestamp=1_700_000_000_000 + i,
                    headers=[("h", f"{i}".encode())],
                ).result(10)
                want[(md.partition, md.offset)] = (f"k{i}".encode(), f"value-{i}-{'x' * 40}".encode(), f"{i}".encode())
        deadline = time.monotonic() + 60
        with Admin(bs) as admin:
            while True:
                local = admin.list_offsets({("sp-tier", q): "earliest_local" for q in (0, 1)})
                if all(local[TopicPartition("sp-tier", q)][0] > 200 for q in (0, 1)):
                    break
                assert time.monotonic() < deadline, f"local log starts {local}"
                time.sleep(0.2)
        ours = (
            spark.read.format("logbroker")
            .option("bootstrap.servers", bs)
            .option("subscribe", "sp-tier")
            .option("includeHeaders", "true")
            .load()
        )
        theirs = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", "sp-tier")
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .load()
        )
        for name, df in (("logbroker", ours), ("kafka", theirs)):
            rows = df.select("key", "value", "partition", "offset", "timestamp", "headers").collect()
            got = {(r.partition, r.offset): (bytes(r.key), bytes(r.value), bytes(r.headers[0].value)) for r in rows}
            assert got == want, f"the {name} source"
            stamps = sorted(int(r.timestamp.timestamp() * 1000) for r in rows)
            assert stamps == [1_700_000_000_000 + i for i in range(600)], f"the {name} source's timestamps"
