"""iceberg.partition.spec (logbroker/iceberg/table_schema.py, rust/src/table/partition_spec.rs):
a real broker writes each row into the file of its partition under the configured transforms,
checked row by row against pyiceberg's own transforms, and pyiceberg's scans, which prune
files by those partition values, find every row they should."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_iceberg_topics import FAST, catalog, local_path, table_rows, wait_for

import logbroker
from logbroker import Admin, NewTopic, Producer

HOUR_MS = 3_600_000


def test_rows_go_by_the_configured_spec_and_pyiceberg_prunes_by_it(tmp_path: Path) -> None:
    from pyiceberg.expressions import EqualTo
    from pyiceberg.transforms import BucketTransform, HourTransform
    from pyiceberg.types import BinaryType, TimestamptzType

    data = tmp_path / "d"
    base = data / "__iceberg"
    spec = "bucket(4, key), identity(partition), hour(timestamp)"
    model: dict[tuple[int, int], bytes] = {}
    with logbroker.Broker(data_dir=data, **FAST) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("events", 2, 1, {"iceberg.enable": "true", "iceberg.partition.spec": spec})])
        with Producer(b.bootstrap_servers, linger_ms=5) as p:
            futures = [
                (
                    f"user-{i % 37}".encode(),
                    p.send(
                        "events",
                        b"v%d" % i,
                        key=f"user-{i % 37}".encode(),
                        partition=i % 2,
                        timestamp=1_700_000_000_000 + i * 40_000,  # 400 records over 4.4 hours
                    ),
                )
                for i in range(400)
            ]
            for key, f in futures:
                md = f.result(10)
                model[(md.partition, md.offset)] = key
        wait_for(lambda: len(table_rows(base, "events")) == 400, what="every record in the table")

    table = catalog(base).load_table("logbroker.events")
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [
        ("key_bucket", "bucket[4]"),
        ("partition", "identity"),
        ("timestamp_hour", "hour"),
    ]
    bucket = BucketTransform(4).transform(BinaryType())
    hour = HourTransform().transform(TimestamptzType())
    seen = 0
    tasks = table.scan().plan_files()
    for task in tasks:
        part = task.file.partition
        rows = pq.read_table(local_path(task.file.file_path)).to_pylist()
        for r in rows:
            us = int(r["timestamp"].timestamp() * 1_000_000)
            assert (bucket(r["key"]), r["partition"], hour(us)) == (part[0], part[1], part[2]), task.file.file_path
        assert f"/key_bucket={part[0]}/partition={part[1]}/timestamp_hour=" in task.file.file_path
        seen += len(rows)
    assert seen == 400
    for key in (b"user-3", b"user-30"):
        scan = table.scan(row_filter=EqualTo("key", key))
        got = scan.to_arrow()
        want = sorted(po for po, k in model.items() if k == key)
        assert sorted(zip(got.column("partition").to_pylist(), got.column("offset").to_pylist())) == want
        assert len(scan.plan_files()) < len(tasks), "the bucket prunes files"


def test_an_unpartitioned_table_and_a_bad_spec(tmp_path: Path) -> None:
    from logbroker.client.errors import InvalidConfigError

    data = tmp_path / "d"
    base = data / "__iceberg"
    with logbroker.Broker(data_dir=data, **FAST) as b:
        with Admin(b.bootstrap_servers) as admin:
            for bad, why in (
                ("zorder(key)", "not an Iceberg transform"),
                ("bucket(key)", "positive width"),
                ("day(timestamp", "not an Iceberg transform"),
            ):
                with pytest.raises(InvalidConfigError, match=why):
                    admin.create_topics([NewTopic("bad", 1, 1, {"iceberg.partition.spec": bad})])
            with pytest.raises(InvalidConfigError, match="day\\(timestamp\\)"):
                admin.create_topics(
                    [
                        NewTopic(
                            "bad",
                            1,
                            1,
                            {"iceberg.upsert.enable": "true", "iceberg.partition.spec": "identity(partition)"},
                        )
                    ]
                )
            admin.create_topics([NewTopic("flat", 1, 1, {"iceberg.enable": "true", "iceberg.partition.spec": ""})])
            assert "bad" not in admin.list_topics()
        with Producer(b.bootstrap_servers) as p:
            for i in range(20):
                p.send("flat", b"x%d" % i, timestamp=1_700_000_000_000 + i * HOUR_MS * 30)
        wait_for(lambda: len(table_rows(base, "flat")) == 20, what="the unpartitioned table's rows")
    table = catalog(base).load_table("logbroker.flat")
    assert table.spec().fields == ()
    files = table.scan().plan_files()
    assert len(files) == 1 and "/data/" in files[0].file.file_path and "=" not in files[0].file.file_path
