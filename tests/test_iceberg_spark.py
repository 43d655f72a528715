"""Spark reads an Iceberg topic's table with Iceberg's own Spark runtime (JdbcCatalog on the
broker's SQLite catalog): every committed record once, the same rows Spark's Kafka source
reads from the topic, and time travel to an earlier snapshot."""

from __future__ import annotations

from pathlib import Path

import logbroker
from logbroker import Admin, NewTopic

from test_archive import produce_model
from test_iceberg_topics import catalog, table_rows, wait_for


def test_spark_reads_the_table_as_the_kafka_source_reads_the_topic(spark, tmp_path: Path) -> None:
    data = tmp_path / "d"
    base = data / "__iceberg"
    name = f"lb_{tmp_path.name.replace('-', '_')}"  # a catalog of its own: Spark caches catalogs by name
    with logbroker.Broker(data_dir=data, iceberg_commit_interval_ms=200,
                          config={"iceberg.catalog.name": name}) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("events.v1", 2, 1, {"iceberg.enable": "true"})])
        first = produce_model(bs, "events.v1", 2, 100)
        wait_for(lambda: len(table_rows(base, "events.v1", name)) == len(first), what="the first records")
        early = catalog(base, name).load_table("logbroker.events_v1").current_snapshot().snapshot_id
        model = dict(first)
        model.update(produce_model(bs, "events.v1", 2, 200, aborted_every=50))
        wait_for(lambda: len(table_rows(base, "events.v1", name)) == len(model), what="every committed record")

        prefix = f"spark.sql.catalog.{name}"
        spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set(f"{prefix}.type", "jdbc")
        spark.conf.set(f"{prefix}.uri", f"jdbc:sqlite:{base / 'catalog.db'}")
        spark.conf.set(f"{prefix}.warehouse", (base / "warehouse").as_uri())
        df = spark.read.table(f"{name}.logbroker.events_v1")
        assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
        got = {(r.partition, r.offset): (bytes(r.key), bytes(r.value),
                                          [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers])
               for r in df.collect()}
        assert df.count() == len(got) == len(model), "every committed record once"
        assert got == {k: v[:3] for k, v in model.items()}
        # Spark's Kafka source, read_committed, reads the same rows from the topic.
        kafka = (spark.read.format("kafka").option("kafka.bootstrap.servers", bs).option("subscribe", "events.v1")
                 .option("kafka.isolation.level", "read_committed").option("includeHeaders", "true").load())
        assert sorted((r.partition, r.offset, bytes(r.value)) for r in kafka.collect()) == \
            sorted((p, o, v[1]) for (p, o), v in model.items())
        # Time travel: the snapshot taken after the first records holds exactly those.
        old = spark.read.option("snapshot-id", early).table(f"{name}.logbroker.events_v1")
        assert sorted((r.partition, r.offset) for r in old.collect()) == sorted(first)
