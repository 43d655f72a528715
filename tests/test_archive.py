"""Archive instead of delete (`retention.archive`): a real broker archives the segments that
retention would delete to Parquet, and what was produced is found exactly once, in the
archive or still in the log, checked against a model of what was produced and committed."""

from __future__ import annotations

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


def archived_rows(store: ArchiveStore, topic: str) -> dict[tuple[int, int], tuple]:
    rows: dict[tuple[int, int], tuple] = {}
    for f in store.files(topic):
        for batch in store.read(f):
            for r in batch.to_pylist():
                key = (r["partition"], r["offset"])
                assert key not in rows, f"offset archived twice: {key}"
                assert r["topic"] == topic
                hdrs = [(h["key"], h["value"]) for h in r["headers"]]
                rows[key] = (r["key"], r["value"], hdrs, int(r["timestamp"].timestamp() * 1000))
    return rows


def test_retention_archives_then_deletes(tmp_path: Path) -> None:
    with logbroker.Broker(data_dir=tmp_path / "d", log_retention_check_interval_ms=200) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("arch", 2, 1, dict(SMALL))])
        model = produce_model(b.bootstrap_servers, "arch", 2, 300, aborted_every=50)
        store = ArchiveStore(str(tmp_path / "d" / "__archive"))
        wait_for(lambda: all(log_start(b.bootstrap_servers, "arch", p) > 0 for p in (0, 1)), what="retention")
        time.sleep(1.0)  # several more checks: everything inactive is archived by now
        starts = [log_start(b.bootstrap_servers, "arch", p) for p in (0, 1)]
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
                assert Path(f.path).name == file_name(f.first_offset, f.last_offset)
                assert not Path(f.path + ".tmp").exists()
        # Plain pyarrow reads the topic directory; the schema is Spark's Kafka schema.
        table = pq.read_table(str(tmp_path / "d" / "__archive" / "arch"))
        assert table.schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                                      "headers"]
        assert table.num_rows == len(rows)
        # What is above the log start is still readable from the broker: nothing lost.
        with logbroker.Consumer(b.bootstrap_servers, auto_offset_reset="earliest", isolation_level="read_committed") as c:
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
        start = log_start(b.bootstrap_servers, "res", 0)
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
    with logbroker.Broker(data_dir=tmp_path / "d", log_retention_check_interval_ms=200,
                          config={"archive.location": str(blocked / "sub")}) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("stuck", 1, 1, dict(SMALL))])
        model = produce_model(b.bootstrap_servers, "stuck", 1, 150)
        time.sleep(1.5)
        assert log_start(b.bootstrap_servers, "stuck", 0) == 0, "nothing deleted while the archive fails"
        blocked.unlink()
        wait_for(lambda: log_start(b.bootstrap_servers, "stuck", 0) > 0, what="archive after the location is fixed")
        start = log_start(b.bootstrap_servers, "stuck", 0)
    rows = archived_rows(ArchiveStore(str(blocked / "sub")), "stuck")
    assert rows == {k: v for k, v in model.items() if k[1] < start}
