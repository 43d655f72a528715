"""A PySpark job reads an Iceberg topic's table with Iceberg's own Spark runtime (JdbcCatalog on
the broker's SQLite catalog; spark/iceberg_read.py): every committed record once, the same rows
Spark's Kafka source reads from the topic, and time travel to an earlier snapshot."""

from __future__ import annotations

import base64
from pathlib import Path

from test_archive import produce_model
from test_iceberg_topics import catalog, table_rows, wait_for

import logbroker
from logbroker import Admin, NewTopic


def b(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def test_spark_reads_the_table_as_the_kafka_source_reads_the_topic(iceberg_spark, tmp_path: Path) -> None:
    data = tmp_path / "d"
    base = data / "__iceberg"
    with logbroker.Broker(data_dir=data, iceberg_commit_interval_ms=200) as br:
        bs = br.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("events.v1", 2, 1, {"iceberg.enable": "true"})])
        first = produce_model(bs, "events.v1", 2, 100)
        wait_for(lambda: len(table_rows(base, "events.v1")) == len(first), what="the first records")
        early = wait_for(
            lambda: catalog(base).load_table("logbroker.events_v1").current_snapshot().snapshot_id,
            what="the table's snapshot",
        )
        model = dict(first)
        model.update(produce_model(bs, "events.v1", 2, 200, aborted_every=50))
        wait_for(lambda: len(table_rows(base, "events.v1")) == len(model), what="every committed record")
        where = [
            "--db",
            str(base / "catalog.db"),
            "--warehouse",
            str(base / "warehouse"),
            "--table",
            "logbroker.events_v1",
        ]
        out = iceberg_spark(*where, "--kafka-bootstrap", bs, "--kafka-topic", "events.v1")
        old = iceberg_spark(*where, "--version-as-of", str(early), "--select", "partition,offset")
    assert out["columns"] == ["partition", "offset", "key", "value", "headers"]
    got = {
        (r["partition"], r["offset"]): (b(r["key"]), b(r["value"]), [(h["key"], b(h["value"])) for h in r["headers"]])
        for r in out["table"]
    }
    assert len(out["table"]) == len(got) == len(model), "every committed record once"
    assert got == {k: v[:3] for k, v in model.items()}
    # Spark's Kafka source, read_committed, reads the same rows from the topic.
    kafka = {
        (r["partition"], r["offset"]): (
            b(r["key"]),
            b(r["value"]),
            [(h["key"], b(h["value"])) for h in r["headers"] or []],
        )
        for r in out["kafka"]
    }  # Spark's Kafka source gives null headers where the table has []
    assert kafka == got
    # Time travel: the snapshot taken after the first records holds exactly those.
    assert sorted((r["partition"], r["offset"]) for r in old["table"]) == sorted(first)
