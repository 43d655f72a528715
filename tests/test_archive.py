"""Archive instead of delete (`retention.archive`): a real broker archives the segments that
retention would delete to Parquet, and what was produced is found exactly once, in the
archive or still in the log, checked against a model of what was produced and committed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import logbroker
from logbroker import Admin, NewTopic, Producer
from logbroker.archive import ArchiveStore, file_name

SMALL = {"segment.bytes": "2048", "retention.bytes": "1", "retention.archive": "true"}


def wait_for(cond, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def produce_model(bootstrap: str, topic: str, partitions: int, n: int, *, aborted_every: int = 0) -> dict:
    """Produce n committed records (keys, headers, explicit timestamps) round-robin over the
    partitions, with an aborted transaction of 5 records every `aborted_every` records.
    Returns the model: (partition, offset) -> (key, value, headers, timestamp)."""
    model: dict[tuple[int, int], tuple] = {}
    with Producer(bootstrap, linger_ms=0) as plain:
        for i in range(n):
            key, value = f"k{i}".encode(), (f"value-{i}-" + "x" * 40).encode()
            headers = [("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else []
            ts = 1_700_000_000_000 + i
            md = plain.send(topic, value, key=key, partition=i % partitions, headers=headers, timestamp=ts).result(10)
            model[(md.partition, md.offset)] = (key, value, [(k, v) for k, v in headers], ts)
    if aborted_every:
        with Producer(bootstrap, transactional_id=f"archive-abort-{topic}") as txn:
            txn.init_transactions(10)
            for j in range(n // aborted_every):
                txn.begin_transaction()
                for k in range(5):
                    txn.send(topic, b"aborted", key=f"a{j}-{k}".encode(), partition=k % partitions)
                txn.flush(10)
                txn.abort_transaction(10)
    return model


def log_start(bootstrap: str, topic: str, partition: int) -> int:
    with Admin(bootstrap) as admin:
        return admin.list_offsets({(topic, partition): "earliest"})[logbroker.TopicPartition(topic, partition)][0]


def settled_log_start(bootstrap: str, topic: str, partition: int, data_dir: Path, timeout: float = 60.0) -> int:
    """With retention.bytes=1 (SMALL) retention archives and deletes every segment but the
    active one: waits for that end state (one segment file left in the partition's directory,
    and the log start offset at its base offset) and returns the log start offset. A fixed
    sleep instead once read the log start while a later check was still archiving."""
    pdir = data_dir / f"{topic}-{partition}"

    def settled():
        logs = list(pdir.glob("*.log"))
        if len(logs) != 1:
            return None
        base = int(logs[0].stem)
        return (base,) if log_start(bootstrap, topic, partition) == base else None

    return wait_for(settled, timeout=timeout, what=f"retention of {topic}-{partition} down to its active segment")[0]


def archived_rows(store: ArchiveStore, topic: str) -> dict[tuple[int, int], tuple]:
    rows: dict[tuple[int, int], tuple] = {}
    for f in store.files(topic):
        for r in store.records(store.read(f)):
            key = (r["partition"], r["offset"])
            assert key not in rows, f"offset archived twice: {key}"
            assert r["topic"] == topic
            rows[key] = (r["key"], r["value"], r["headers"], r["timestamp"])
    return rows


def test_retention_archives_then_deletes(tmp_path: Path) -> None:
    with logbroker.Broker(data_dir=tmp_path / "d", log_retention_check_interval_ms=200) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("arch", 2, 1, dict(SMALL))])
        model = produce_model(b.bootstrap_servers, "arch", 2, 300, aborted_every=50)
        store = ArchiveStore(str(tmp_path / "d" / "__archive"))
        starts = [settled_log_start(b.bootstrap_servers, "arch", p, tmp_path / "d") for p in (0, 1)]
        rows = archived_rows(store, "arch")
        assert starts == [log_start(b.bootstrap_servers, "arch", p) for p in (0, 1)], "settled"
        # Everything below the log start is in the archive, exactly as produced; aborted
        # records and markers are not archived.
        below = {k: v for k, v in model.items() if k[1] < starts[k[0]]}
        assert rows == below
        assert all(v[1] != b"aborted" for v in rows.values())
        # Files are whole segments' ranges, disjoint and increasing, named by their range.
        for p in (0, 1):
            files = store.files("arch", p)
            assert files and files[-1].last_offset < starts[p]
            for a, c in zip(files, files[1:]):
                assert a.last_offset < c.first_offset
            for f in files:
                assert Path(f.path).name == file_name(f.first_offset, f.last_offset, f.topic_id)
                assert not list(Path(f.path).parent.glob("*.tmp"))
        # Plain pyarrow reads the topic directory; the schema is Spark's Kafka schema.
        table = pq.read_table(str(tmp_path / "d" / "__archive" / "arch"))
        assert table.schema.names == [
            "key",
            "value",
            "topic",
            "partition",
            "offset",
            "timestamp",
            "timestampType",
            "headers",
        ]
        assert table.num_rows == len(rows)
        # What is above the log start is still readable from the broker: nothing lost.
        with logbroker.Consumer(
            b.bootstrap_servers, auto_offset_reset="earliest", isolation_level="read_committed"
        ) as c:
            c.assign([logbroker.TopicPartition("arch", p) for p in (0, 1)])
            seen: dict[tuple[int, int], bytes] = {}
            end = {p: max(o for (q, o) in model if q == p) for p in (0, 1)}
            deadline = time.monotonic() + 30
            while any(max([o for (q, o) in seen if q == p], default=-1) < end[p] for p in (0, 1)):
                assert time.monotonic() < deadline
                for r in c.poll(1.0):
                    seen[(r.partition, r.offset)] = r.value
        assert set(seen) | set(rows) == set(model)
        assert min(o for (q, o) in seen if q == 0) >= starts[0]


def test_archive_resumes_without_duplicates(tmp_path: Path) -> None:
    """A restart between archive passes (and a file already written for a range whose
    deletion did not happen) never archives a record twice."""
    data = tmp_path / "d"
    with logbroker.Broker(data_dir=data, log_retention_check_interval_ms=200) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("res", 1, 1, dict(SMALL))])
        model = produce_model(b.bootstrap_servers, "res", 1, 150)
        wait_for(lambda: log_start(b.bootstrap_servers, "res", 0) > 0, what="first archive")
    with logbroker.Broker(data_dir=data, log_retention_check_interval_ms=200) as b:
        more = produce_model(b.bootstrap_servers, "res", 1, 150)
        last = max(o for (_, o) in more)
        wait_for(lambda: log_start(b.bootstrap_servers, "res", 0) > last - 40, what="second archive")
        # retention may still be archiving the next segment: read the log start once it settles
        start = settled_log_start(b.bootstrap_servers, "res", 0, data)
    rows = archived_rows(ArchiveStore(str(data / "__archive")), "res")
    # model keys collide across the two runs only if offsets were reused: they are not.
    everything = {**model, **more}
    assert len(everything) == 300
    assert rows == {k: v for k, v in everything.items() if k[1] < start}


def test_archive_config_validation(tmp_path: Path) -> None:
    with logbroker.Broker(data_dir=tmp_path / "d") as b, Admin(b.bootstrap_servers) as admin:
        with pytest.raises(logbroker.KafkaError, match="retention.archive"):
            admin.create_topics([NewTopic("bad", 1, 1, {"retention.archive": "sometimes"})])
        admin.create_topics([NewTopic("ok", 1, 1, {"retention.archive": "true"})])
        assert admin.describe_configs([("topic", "ok")])[("topic", "ok")]["retention.archive"] == "true"
        admin.alter_configs({("topic", "ok"): {"retention.archive": "false"}})
        assert admin.describe_configs([("topic", "ok")])[("topic", "ok")]["retention.archive"] == "false"


def test_unwritable_archive_keeps_segments(tmp_path: Path) -> None:
    """The archive location cannot be written: the error is logged with the partition,
    retention deletes nothing, and once the location is writable archiving catches up."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the archive directory should be")
    with logbroker.Broker(
        data_dir=tmp_path / "d", log_retention_check_interval_ms=200, config={"archive.location": str(blocked / "sub")}
    ) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("stuck", 1, 1, dict(SMALL))])
        model = produce_model(b.bootstrap_servers, "stuck", 1, 150)
        time.sleep(1.5)
        assert log_start(b.bootstrap_servers, "stuck", 0) == 0, "nothing deleted while the archive fails"
        blocked.unlink()
        wait_for(lambda: log_start(b.bootstrap_servers, "stuck", 0) > 0, what="archive after the location is fixed")
        start = log_start(b.bootstrap_servers, "stuck", 0)
    # retention keeps archiving until the broker stops: what is archived is a prefix of the
    # log reaching at least the log start read above, every record as produced
    rows = archived_rows(ArchiveStore(str(blocked / "sub")), "stuck")
    offsets = sorted(o for _p, o in rows)
    assert offsets == list(range(len(offsets))) and len(offsets) >= start, (start, offsets[-3:])
    assert rows == {k: v for k, v in model.items() if k[1] < len(offsets)}


def archive_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbroker", "archive", *args], capture_output=True, text=True, timeout=60
    )


def test_archive_cli_list_and_read(tmp_path: Path) -> None:
    with logbroker.Broker(data_dir=tmp_path / "d", log_retention_check_interval_ms=200) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("cli", 1, 1, dict(SMALL))])
        model = produce_model(b.bootstrap_servers, "cli", 1, 120)
        wait_for(lambda: log_start(b.bootstrap_servers, "cli", 0) > 0, what="archive")
    location = str(tmp_path / "d" / "__archive")
    store = ArchiveStore(location)
    files = store.files("cli")
    listed = archive_cli("list", "--location", location, "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["topic"], r["partition"], r["first_offset"], r["last_offset"]) for r in rows] == [
        ("cli", 0, f.first_offset, f.last_offset) for f in files
    ]
    archived = sum(r["records"] for r in rows)
    assert archived == files[-1].last_offset + 1  # no gaps: plain records only
    table = archive_cli("list", "--location", location, "--topic", "cli")
    assert table.returncode == 0 and "cli" in table.stdout and f"{archived} record(s)" in table.stderr
    # read: JSON lines, from an offset, bounded
    out = archive_cli(
        "read", "--location", location, "--topic", "cli", "--offset", "5", "--max-records", "7", "--format", "json"
    )
    assert out.returncode == 0, out.stderr
    got = [json.loads(line) for line in out.stdout.splitlines()]
    assert [g["offset"] for g in got] == list(range(5, 12))
    for g in got:
        key, value, headers, ts = model[(0, g["offset"])]
        assert (g["key"], g["value"], g["timestamp"]) == (key.decode(), value.decode(), ts)
        assert [(h[0], None if h[1] is None else h[1].encode()) for h in g["headers"]] == headers
    text = archive_cli("read", "--location", location, "--topic", "cli", "--print-key", "--print-offset")
    assert text.returncode == 0
    assert text.stdout.splitlines()[0] == f"0:0\tk0\t{model[(0, 0)][1].decode()}"
    assert len(text.stdout.splitlines()) == archived
    # bad arguments and an unreadable location: clean errors, exit codes 2 and 1
    bad = archive_cli("list", "--location", location, "--set", "archive.s3.bogus=1")
    assert bad.returncode == 2 and "not an archive key" in bad.stderr
    broken = archive_cli(
        "list",
        "--location",
        "s3://nobucket/x",
        "--set",
        "archive.s3.endpoint=http://127.0.0.1:1",
        "--set",
        "archive.s3.access.key.id=a",
        "--set",
        "archive.s3.secret.access.key=b",
    )
    assert broken.returncode == 1 and "s3://nobucket/x" in broken.stderr, broken.stderr
    assert "Traceback" not in broken.stderr


@pytest.fixture
def s3_server():
    """An S3-compatible server (moto) on loopback with one bucket, `archive`."""
    from moto.server import ThreadedMotoServer
    from pyarrow import fs

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    fs.S3FileSystem(
        endpoint_override=f"{host}:{port}",
        scheme="http",
        access_key="test",
        secret_key="test",
        region="us-east-1",
        allow_bucket_creation=True,
    ).create_dir("archive")
    yield {
        "archive.s3.endpoint": endpoint,
        "archive.s3.access.key.id": "test",
        "archive.s3.secret.access.key": "test",
        "archive.s3.region": "us-east-1",
    }
    server.stop()


def test_archive_to_s3(tmp_path: Path, s3_server: dict) -> None:
    keys = {"archive.location": "s3://archive/kafka", **s3_server}
    with logbroker.Broker(data_dir=tmp_path / "d", log_retention_check_interval_ms=200, config=keys) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("s3t", 1, 1, dict(SMALL))])
            # The secret is not shown by DescribeConfigs.
            broker_cfg = admin.describe_configs([("broker", "1")])[("broker", "1")]
            assert broker_cfg["archive.s3.secret.access.key"] is None
            assert broker_cfg["archive.s3.endpoint"] == s3_server["archive.s3.endpoint"]
        model = produce_model(b.bootstrap_servers, "s3t", 1, 200, aborted_every=40)
        start = settled_log_start(b.bootstrap_servers, "s3t", 0, tmp_path / "d")
        store = ArchiveStore.from_keys(keys)
        rows = archived_rows(store, "s3t")
        assert start == log_start(b.bootstrap_servers, "s3t", 0)
    assert rows == {k: v for k, v in model.items() if k[1] < start} and rows
    assert not (tmp_path / "d" / "__archive").exists()
    sets = [a for k, v in s3_server.items() for a in ("--set", f"{k}={v}")]
    listed = archive_cli("list", "--location", "s3://archive/kafka", "--json", *sets)
    assert listed.returncode == 0, listed.stderr
    assert sum(json.loads(line)["records"] for line in listed.stdout.splitlines()) == len(rows)


def test_recreated_topic_is_a_new_incarnation(tmp_path: Path) -> None:
    """A topic deleted and created again starts at offset 0 again: its files carry the new
    topic id, the old incarnation's files stay as they were, and nothing of either is
    skipped or overwritten."""
    location = tmp_path / "d" / "__archive"
    with logbroker.Broker(data_dir=tmp_path / "d", log_retention_check_interval_ms=200) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("again", 1, 1, dict(SMALL))])
        first = produce_model(bs, "again", 1, 200)
        wait_for(lambda: log_start(bs, "again", 0) > 0, what="archive of the first incarnation")
        with Admin(bs) as admin:
            admin.delete_topics(["again"])
            wait_for(lambda: "again" not in admin.list_topics(), what="topic deletion")
            store = ArchiveStore(str(location))
            old_files = store.files("again")
            old_rows = archived_rows(store, "again")
            admin.create_topics([NewTopic("again", 1, 1, dict(SMALL))])
        second = produce_model(bs, "again", 1, 100)
        start = settled_log_start(bs, "again", 0, tmp_path / "d")
    old_id, new_id = store.incarnations("again")
    assert {f.topic_id for f in old_files} == {old_id}
    assert store.files("again", topic_id=old_id) == old_files, "the old incarnation's files are untouched"
    assert old_rows and set(old_rows) <= set(first)
    new_rows = {}
    for f in store.files("again", topic_id=new_id):
        for r in store.records(store.read(f)):
            new_rows[(r["partition"], r["offset"])] = (r["key"], r["value"], r["headers"], r["timestamp"])
    assert new_rows == {k: v for k, v in second.items() if k[1] < start} and new_rows
    out = archive_cli("read", "--location", str(location), "--topic", "again", "--format", "json")
    assert out.returncode == 0 and "2 archived incarnations" in out.stderr, out.stderr
    assert len(out.stdout.splitlines()) == len(new_rows)
    old = archive_cli("read", "--location", str(location), "--topic", "again", "--topic-id", old_id)
    assert len(old.stdout.splitlines()) == len(old_rows)


def test_read_range_reads_overlapping_files_once(tmp_path: Path) -> None:
    """Two leaders around a leadership change may archive overlapping ranges (their segments
    are cut at other offsets): readers still see each offset once, in order."""
    import pyarrow as pa

    from logbroker.arrow_records import kafka_arrow_schema

    schema = kafka_arrow_schema(include_headers=True)
    tid = "B" * 22

    def write(first: int, last: int) -> None:
        n = last - first + 1
        table = pa.table(
            {
                "key": [None] * n,
                "value": [b"v%d" % o for o in range(first, last + 1)],
                "topic": ["t"] * n,
                "partition": pa.array([0] * n, pa.int32()),
                "offset": list(range(first, last + 1)),
                "timestamp": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
                "timestampType": pa.array([0] * n, pa.int32()),
                "headers": [[]] * n,
            },
            schema=schema,
        )
        d = tmp_path / "t" / "0"
        d.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, d / file_name(first, last, tid))

    write(0, 99)
    write(0, 119)  # the new leader's first segment ended later
    write(120, 149)
    store = ArchiveStore(str(tmp_path))
    offsets = [r["offset"] for r in store.records(store.read_range("t", 0, 0, 1000, tid))]
    assert offsets == list(range(150))
    assert [r["offset"] for r in store.records(store.read_range("t", 0, 110, 125, tid))] == list(range(110, 125))
    assert store.resume_point("t", 0, tid) == 150
