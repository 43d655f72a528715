"""Iceberg topics (`iceberg.enable=true`, logbroker/iceberg): real brokers commit topics into
Iceberg tables in a SQLite catalog, and pyiceberg reads them back. Every record a
read_committed consumer would read is in the table exactly once (checked against a model of
what was produced and acknowledged), across retention, restarts and a leader's death."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from test_archive import produce_model
from test_archive import wait_for as archive_wait_for

import logbroker
from logbroker import Admin, NewTopic, Producer
from logbroker.iceberg.table_maintenance import MIN_SMALL_FILES, expire_snapshots

FAST = {"iceberg_commit_interval_ms": 200, "log_retention_check_interval_ms": 200}


def wait_for(cond, timeout: float = 60.0, what: str = "condition"):
    """test_archive's wait_for, with the longer default an Iceberg commit round needs."""
    return archive_wait_for(cond, timeout, what)


def shared_lake(base: Path, commit_interval_ms: int) -> dict:
    """Broker config for a catalog (SQLite) and warehouse under `base`, which the nodes of one
    test's cluster share."""
    return {
        "iceberg.catalog.uri": f"sqlite:///{base / 'catalog.db'}",
        "iceberg.warehouse": str(base / "warehouse"),
        "iceberg.commit.interval.ms": commit_interval_ms,
    }


def catalog(base: Path, name: str = "logbroker"):
    """pyiceberg's SqlCatalog on the broker's SQLite file (retried while the broker creates
    the catalog's tables or commits at the same moment: pyiceberg's create-if-missing is not
    atomic, and SQLite answers "database is locked" to a second writer)."""
    from pyiceberg.catalog.sql import SqlCatalog

    for attempt in range(20):
        try:
            return SqlCatalog(name, uri=f"sqlite:///{base / 'catalog.db'}", warehouse=(base / "warehouse").as_uri())
        except Exception as e:
            if ("already exists" not in str(e) and "locked" not in str(e)) or attempt == 19:
                raise
            time.sleep(0.1)


def table_rows(base: Path, topic: str, name: str = "logbroker") -> dict[tuple[int, int], tuple]:
    """(partition, offset) -> (key, value, headers, timestamp ms) of the table, each offset
    asserted once."""
    from pyiceberg.exceptions import NoSuchTableError

    if not (base / "catalog.db").exists():
        return {}  # the broker's first commit makes the catalog (and its directory)
    try:
        table = catalog(base, name).load_table(f"logbroker.{topic.replace('.', '_')}")
    except NoSuchTableError:
        return {}
    except Exception as e:  # SQLite busy with the broker's commit: the caller polls again
        if "locked" in str(e):
            return {}
        raise
    return rows_of(table, topic)


def rows_of(table, topic: str) -> dict[tuple[int, int], tuple]:
    """table_rows of a table already loaded (from any catalog)."""
    rows: dict[tuple[int, int], tuple] = {}
    arrow = table.scan().to_arrow()
    millis = arrow.column("timestamp").cast("int64").to_pylist()
    for r, us in zip(arrow.to_pylist(), millis):
        key = (r["partition"], r["offset"])
        assert key not in rows, f"offset in the table twice: {key}"
        assert r["topic"] == topic
        rows[key] = (r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"] or []], us // 1000)
    return rows


def summary_offsets(base: Path, topic: str) -> dict[int, int]:
    snap = catalog(base).load_table(f"logbroker.{topic}").current_snapshot()
    return {int(p): o for p, o in json.loads(snap.summary.additional_properties["logbroker.offsets"]).items()}


def log_start(bootstrap: str, topic: str, partition: int) -> int:
    with Admin(bootstrap) as admin:
        return admin.list_offsets({(topic, partition): "earliest"})[logbroker.TopicPartition(topic, partition)][0]


def end_offset(bootstrap: str, topic: str, partition: int) -> int:
    with Admin(bootstrap) as admin:
        return admin.list_offsets({(topic, partition): "latest"})[logbroker.TopicPartition(topic, partition)][0]


def test_topic_is_a_table_exactly_once_through_retention_and_restart(tmp_path: Path) -> None:
    """Committed records (not aborted ones, not control records) reach the table once each;
    retention deletes segments only after the table has them, and a restarted broker goes
    on from the table's position without repeating a row."""
    data = tmp_path / "d"
    base = data / "__iceberg"
    config = {"segment.bytes": "4096", "retention.bytes": "1", "iceberg.enable": "true"}
    with logbroker.Broker(data_dir=data, **FAST) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("ice", 2, 1, dict(config))])
        model = produce_model(b.bootstrap_servers, "ice", 2, 300, aborted_every=60)
        wait_for(lambda: len(table_rows(base, "ice")) == len(model), what="every committed record in the table")
        assert table_rows(base, "ice") == model
        # Retention went past records that are now only in the table.
        wait_for(lambda: all(log_start(b.bootstrap_servers, "ice", p) > 0 for p in (0, 1)), what="retention")
        ends = {p: end_offset(b.bootstrap_servers, "ice", p) for p in (0, 1)}
        # the table's position goes past the last aborted records and commit markers too
        wait_for(lambda: summary_offsets(base, "ice") == ends, what="the position at the log end")
    with logbroker.Broker(data_dir=data, **FAST) as b:
        more = produce_model(b.bootstrap_servers, "ice", 2, 40)
        model.update(more)
        wait_for(lambda: len(table_rows(base, "ice")) == len(model), what="the new records in the table")
        assert table_rows(base, "ice") == model
        catalog_tables = (
            sqlite3.connect(base / "catalog.db")
            .execute("SELECT catalog_name, table_namespace, table_name FROM iceberg_tables")
            .fetchall()
        )
        assert catalog_tables == [("logbroker", "logbroker", "ice")]


def test_small_files_are_compacted_and_rows_stay_and_expiry_deletes_only_unreachable_files(tmp_path: Path) -> None:
    """A commit every 200 ms makes a small file each; the partition-0 leader compacts them
    (an overwrite snapshot) and the table's rows and position stay the same."""
    from pyiceberg.table.snapshots import Operation

    data = tmp_path / "d"
    base = data / "__iceberg"
    with logbroker.Broker(data_dir=data, **FAST) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("small", 1, 1, {"iceberg.enable": "true"})])
        model: dict = {}
        # each round waits for its commit, so each is a file of its own however slow the
        # commits run (a fixed pace let a loaded machine merge rounds below MIN_SMALL_FILES)
        for _ in range(MIN_SMALL_FILES + 2):
            model.update(produce_model(b.bootstrap_servers, "small", 1, 5))
            wait_for(lambda: len(table_rows(base, "small")) == len(model), what="every record in the table")
        table = catalog(base).load_table("logbroker.small")
        wait_for(
            lambda: any(s.summary.operation == Operation.OVERWRITE for s in table.refresh().snapshots()),
            what="a compaction",
        )
        appends = sum(1 for s in table.snapshots() if s.summary.operation == Operation.APPEND)
        assert appends >= MIN_SMALL_FILES + 2
        assert len(list(table.scan().plan_files())) < appends
        assert table_rows(base, "small") == model
        assert summary_offsets(base, "small") == {0: end_offset(b.bootstrap_servers, "small", 0)}
        position = summary_offsets(base, "small")

    # Expiry (the broker runs it hourly; here at once, as if 6 days had passed): every snapshot
    # but the head and the position's goes, and so do the files only they reached. The model:
    # the files on disk are exactly those the kept snapshots reach, read the long way.
    table = catalog(base).load_table("logbroker.small")
    before = files_under(table.location())
    expired = expire_snapshots(table, int(time.time() * 1000) + 6 * 24 * 3600 * 1000)
    assert expired > 0
    table = table.refresh()
    after = files_under(table.location())
    data_and_manifests = {f for f in after if not f.endswith(".metadata.json")}
    assert data_and_manifests == reachable_files(table)
    assert len(after) < len(before)
    assert table_rows(base, "small") == model and summary_offsets(base, "small") == position
    for s in table.snapshots():  # every kept snapshot still reads
        table.scan(snapshot_id=s.snapshot_id).to_arrow()


def local_path(location: str) -> str:
    from urllib.parse import urlparse

    return urlparse(location).path if location.startswith("file:") else location


def files_under(location: str) -> set[str]:
    return {str(p) for p in Path(local_path(location)).rglob("*") if p.is_file()}


def reachable_files(table) -> set[str]:
    """Manifest lists, manifests and live data files of every snapshot the table keeps."""
    out = set()
    for s in table.snapshots():
        out.add(s.manifest_list)
        for m in s.manifests(table.io):
            out.add(m.manifest_path)
            out.update(e.data_file.file_path for e in m.fetch_manifest_entry(table.io, discard_deleted=True))
    return {local_path(f) for f in out}


def test_table_with_other_columns_is_left_alone(tmp_path: Path, caplog) -> None:
    """A table already in the catalog under the topic's name, with other columns, is never
    written; the log keeps every record (retention waits) and the error names the table."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    data = tmp_path / "d"
    base = data / "__iceberg"
    base.mkdir(parents=True)
    cat = catalog(base)
    cat.create_namespace("logbroker")
    cat.create_table("logbroker.other", schema=Schema(NestedField(1, "id", LongType(), required=False)))
    caplog.set_level("ERROR", logger="logbroker.iceberg")
    with logbroker.Broker(data_dir=data, **FAST) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics(
                [NewTopic("other", 1, 1, {"iceberg.enable": "true", "segment.bytes": "4096", "retention.bytes": "1"})]
            )
        with Producer(b.bootstrap_servers, linger_ms=0) as p:
            for _ in range(100):
                p.send("other", b"x" * 100, key=b"k", partition=0).result(10)
        time.sleep(2.0)  # ten commit intervals and retention checks
        assert log_start(b.bootstrap_servers, "other", 0) == 0
        assert catalog(base).load_table("logbroker.other").current_snapshot() is None
    errors = [r.getMessage() for r in caplog.records if r.name == "logbroker.iceberg"]
    assert errors and "table logbroker.other of topic other has columns" in errors[0], errors


def test_iceberg_enable_is_checked(tmp_path: Path) -> None:
    from logbroker.client.errors import InvalidConfigError

    with logbroker.Broker(data_dir=tmp_path / "d") as b:
        with Admin(b.bootstrap_servers) as admin:
            with pytest.raises(InvalidConfigError, match="iceberg.enable"):
                admin.create_topics([NewTopic("bad", 1, 1, {"iceberg.enable": "maybe"})])
            with pytest.raises(InvalidConfigError, match="iceberg.mode"):
                admin.create_topics([NewTopic("bad", 1, 1, {"iceberg.mode": "columns"})])
            assert "bad" not in admin.list_topics()


def test_three_nodes_leader_killed_every_acknowledged_record_once(tmp_path: Path) -> None:
    """Three nodes sharing one catalog and warehouse, RF 3: the leader of a partition is
    killed while an idempotent producer sends; every acknowledged record is in the table
    exactly once (the new leader goes on from the table's position)."""
    from logbroker import Cluster

    base = tmp_path / "shared"
    config = shared_lake(base, 200)
    with Cluster(3, data_dir=tmp_path / "c", config=config) as c:
        with Admin(c.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("ha", 3, 3, {"iceberg.enable": "true", "min.insync.replicas": "2"})])
        acked: dict[tuple[int, int], bytes] = {}
        with Producer(c.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=5) as p:
            for i in range(300):
                v = f"before-{i}".encode()
                md = p.send("ha", v, partition=i % 3).result(30)
                acked[(md.partition, md.offset)] = v
            wait_for(lambda: len(table_rows(base, "ha")) == len(acked), what="the first records in the table")
            with Admin(c.bootstrap_servers) as admin:
                leader = admin.describe_topics(["ha"])["ha"].partitions[0].leader
            c.node(leader).kill()
            futures = []
            for i in range(300):
                v = f"after-{i}".encode()
                futures.append((v, p.send("ha", v, partition=i % 3)))
            for v, f in futures:
                md = f.result(60)
                acked[(md.partition, md.offset)] = v
        wait_for(lambda: len(table_rows(base, "ha")) >= len(acked), timeout=90, what="every acknowledged record")
        rows = table_rows(base, "ha")
        assert {k: r[1] for k, r in rows.items()} == acked


def test_three_nodes_leader_killed_mid_commit_every_record_once(tmp_path: Path) -> None:
    """kill -9 of the leader mid-commit: between the moment its commit's data file appears in
    the shared warehouse and the commit of the snapshot naming it. The new leader goes on from
    the table's position: every acknowledged record is in the table once, checked by offset
    (no duplicate, no gap), and the killed commit's file is in no snapshot. Tried up to three
    times (the killed node restarted), as a kill may land after the commit instead."""
    import threading

    from logbroker import Cluster

    base = tmp_path / "shared"
    config = shared_lake(base, 200)
    with Cluster(3, data_dir=tmp_path / "c", config=config) as c:
        bs = c.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("mid", 1, 3, {"iceberg.enable": "true", "min.insync.replicas": "2"})])
        acked: dict[tuple[int, int], bytes] = {}
        mid_commit = None
        with Producer(bs, acks="all", enable_idempotence=True, linger_ms=5) as p:

            def send(n: int, tag: str) -> None:
                futures = [
                    (f"{tag}-{i}".encode() * 20, p.send("mid", f"{tag}-{i}".encode() * 20, partition=0))
                    for i in range(n)
                ]
                for v, f in futures:
                    md = f.result(60)
                    acked[(md.partition, md.offset)] = v

            send(200, "warm")
            wait_for(lambda: len(table_rows(base, "mid")) == len(acked), what="the first records in the table")
            for attempt in range(3):
                with Admin(bs) as admin:
                    leader = admin.describe_topics(["mid"])["mid"].partitions[0].leader
                seen = set((base / "warehouse").rglob("*.parquet"))
                appeared: list[Path] = []
                stop = threading.Event()

                def watch(stop=stop, seen=seen, appeared=appeared, leader=leader) -> None:
                    # the first data file a commit creates: kill at once, before its snapshot
                    while not stop.is_set():
                        new = set((base / "warehouse").rglob("*.parquet")) - seen
                        if new:
                            appeared.extend(new)
                            c.node(leader).kill()
                            return
                        time.sleep(0.002)

                watcher = threading.Thread(target=watch)
                watcher.start()
                send(300, f"try{attempt}")  # the commit of these records is the one killed
                watcher.join(60)
                stop.set()
                assert appeared, "no data file appeared while producing"
                send(100, f"after{attempt}")  # on the new leader
                wait_for(lambda: len(table_rows(base, "mid")) >= len(acked), timeout=90, what="every record")
                table = catalog(base).load_table("logbroker.mid")
                live = {Path(t.file.file_path.removeprefix("file://")) for t in table.scan().plan_files()}
                if not set(appeared) & live:
                    mid_commit = appeared
                    break
                c.node(leader).start()  # the kill came after the commit: try again

                def isr() -> int:
                    with Admin(bs) as admin:
                        return len(admin.describe_topics(["mid"])["mid"].partitions[0].isr)

                wait_for(lambda: isr() == 3, timeout=60, what="the restarted node back in the ISR")
        assert mid_commit is not None, "three kills all landed after their commit"
        rows = table_rows(base, "mid")
        assert {k: r[1] for k, r in rows.items()} == acked
        assert sorted(o for _, o in rows) == list(range(len(rows))), "a gap in the table's offsets"


def test_warehouse_in_s3(tmp_path: Path) -> None:
    """iceberg.warehouse=s3://... with iceberg.s3.*: data and metadata files go to an
    S3-compatible store (moto on loopback), the catalog stays in SQLite; pyiceberg reads
    the table back with the same settings, and the secret is not shown by DescribeConfigs."""
    from moto.server import ThreadedMotoServer
    from pyarrow import fs
    from pyiceberg.catalog.sql import SqlCatalog

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        s3 = fs.S3FileSystem(
            endpoint_override=f"{host}:{port}",
            scheme="http",
            access_key="test",
            secret_key="test",
            region="us-east-1",
            allow_bucket_creation=True,
        )
        s3.create_dir("lake")
        keys = {
            "iceberg.warehouse": "s3://lake/wh",
            "iceberg.s3.endpoint": f"http://{host}:{port}",
            "iceberg.s3.access.key.id": "test",
            "iceberg.s3.secret.access.key": "test",
            "iceberg.catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        }
        with logbroker.Broker(data_dir=tmp_path / "d", config=keys, **FAST) as b:
            with Admin(b.bootstrap_servers) as admin:
                admin.create_topics([NewTopic("s3t", 1, 1, {"iceberg.enable": "true"})])
                assert (
                    admin.describe_configs([("broker", "1")])[("broker", "1")]["iceberg.s3.secret.access.key"] is None
                )
            model = produce_model(b.bootstrap_servers, "s3t", 1, 60)
            cat = SqlCatalog(
                "logbroker",
                uri=keys["iceberg.catalog.uri"],
                warehouse="s3://lake/wh",
                **{
                    "s3.endpoint": keys["iceberg.s3.endpoint"],
                    "s3.access-key-id": "test",
                    "s3.secret-access-key": "test",
                    "s3.region": "us-east-1",
                    "s3.path-style-access": "true",
                },
            )

            def count() -> int:
                try:
                    return cat.load_table("logbroker.s3t").scan().to_arrow().num_rows
                except Exception:
                    return 0

            wait_for(lambda: count() == len(model), what="the records in the S3 table")
        files = s3.get_file_info(fs.FileSelector("lake/wh", recursive=True))
        assert any(f.path.endswith(".parquet") for f in files) and any(f.path.endswith(".metadata.json") for f in files)
        assert not (tmp_path / "d" / "__iceberg" / "warehouse").exists()
    finally:
        server.stop()
