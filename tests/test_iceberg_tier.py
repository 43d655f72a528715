"""The table as the tier (issue 46, part 2): a topic with `iceberg.enable=true` and
`remote.storage.enable=true`, on a broker with no remote.log.storage.* settings, keeps its
history only in its Iceberg table. Once the table holds a segment, local retention
(`local.retention.bytes`) deletes it locally, and a Fetch below the local log start offset is
answered from the table's Parquet files with the same offsets, timestamps, keys, values and
headers: the Java client (tests/java/TierReader.java) and librdkafka (confluent-kafka) read
from offset 0 exactly what they read before the deletion (count and checksum, and against a
model of what was produced and acknowledged), and from a seek into the middle of the tiered
range. ListOffsets EARLIEST is the table's first offset (0), EARLIEST_LOCAL the local log
start. Only committed records are in the table: aborted transactions and control records
leave offset gaps, so even read_uncommitted reads no aborted record from the tiered range."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_java
from polling import wait_until
from test_iceberg_topics import shared_lake

import logbroker
from logbroker import Admin, NewTopic, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benches.peers.kafka: the Java client's jars

READER = str(Path(__file__).resolve().parent / "java" / "TierReader.java")

# No remote.log.storage.* keys: the topic's table is its remote tier. Commits every 500 ms and
# retention (local deletion, whichever task does it) every 200 ms.
BROKER_SETTINGS = [
    "--set",
    "iceberg.commit.interval.ms=500",
    "--set",
    "log.retention.check.interval.ms=200",
    "--set",
    "remote.log.manager.task.interval.ms=200",
]
# retention.ms -1: nothing expires from the table while a test runs, whatever its records' timestamps
TOPIC_CONFIG = {
    "iceberg.enable": "true",
    "remote.storage.enable": "true",
    "segment.bytes": str(64 * 1024),
    "retention.ms": "-1",
}

# a segment's files (<20-digit base offset>.<suffix>); a name with a further suffix (.deleted,
# .cleaned) is one too: gone means gone from the directory
SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex|txnindex)(\..*)?")
TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime", -1: "none"}  # Kafka's ids (the Java client's)
DAY_MS = 24 * 3600 * 1000

Row = tuple  # (partition, offset, timestamp type, timestamp, key, value, headers)


def record(i: int, tag: str, base_ms: int) -> tuple[bytes | None, bytes | None, tuple, int]:
    """Record i of a deterministic workload: (key, value, headers, timestamp). Null, empty and
    binary keys and values, headers with null, empty, binary and repeated values and a
    non-ASCII key, and CreateTime timestamps over about two days (several of the table's day
    partitions), not quite in order."""
    key = None if i % 7 == 3 else b"" if i % 101 == 50 else f"{tag}-key-{i % 500}".encode()
    if i % 11 == 4:
        value = None
    elif i % 37 == 9:
        value = b""
    elif i % 997 == 1:
        value = hashlib.sha256(f"{tag}{i}".encode()).digest() * 80  # 2.5 KiB
    else:
        lo = (i % 7) * 30
        value = i.to_bytes(4, "big") + f"{tag}-value-{i}-".encode() * (1 + i % 5) + bytes(range(lo, lo + i % 40))
    headers: tuple = (
        (),
        (("trace", str(i).encode()),),
        (("null", None), ("empty", b"")),
        (("dup", b"1"), ("dup", b"2"), ("bin", bytes([0, 255, i % 256]))),
        (("clé", tag.encode()),),
    )[i % 5]
    return key, value, headers, base_ms + i * 9_000 - (i % 7) * 3_000


def produce(bs: str, topic: str, partitions: int, n: int, txn_at: int) -> tuple[dict, set, dict]:
    """n records round-robin from an idempotent confluent-kafka producer; after the first
    `txn_at` of them a transactional producer (lz4) sends an aborted transaction of 200
    records, then a committed one of 150, each record of theirs followed by a plain one.
    Returns the model (partition, offset) -> Row of every acknowledged committed record, the
    aborted records' (partition, offset), and by partition the last offset either
    transaction wrote there."""
    from confluent_kafka import Producer

    base_ms = int(time.time() * 1000) - 3 * DAY_MS
    model: dict[tuple[int, int], Row] = {}
    aborted: set[tuple[int, int]] = set()
    committed: dict[tuple[int, int], Row] = {}
    errors: list[str] = []

    def send(producer, i: int, tag: str, into: dict | set) -> None:
        key, value, headers, ts = record(i, tag, base_ms)

        def delivered(err, msg) -> None:
            if err is not None:
                errors.append(f"{tag} record {i}: {err}")
            elif isinstance(into, set):
                into.add((msg.partition(), msg.offset()))
            else:
                into[(msg.partition(), msg.offset())] = (
                    msg.partition(),
                    msg.offset(),
                    "CreateTime",
                    ts,
                    key,
                    value,
                    headers,
                )

        producer.produce(
            topic,
            value=value,
            key=key,
            partition=i % partitions,
            timestamp=ts,
            headers=list(headers) or None,
            on_delivery=delivered,
        )
        producer.poll(0)

    common = {"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 16384}
    plain = Producer({**common, "enable.idempotence": True, "acks": "all"})
    txn = Producer({**common, "transactional.id": f"{topic}-txn", "compression.type": "lz4"})
    txn.init_transactions(30)
    i = 0

    def plain_until(stop: int) -> None:
        nonlocal i
        while i < stop:
            send(plain, i, "plain", model)
            i += 1

    plain_until(txn_at)
    for tag, size, into in (("aborted", 200, aborted), ("txn", 150, committed)):
        txn.begin_transaction()
        for j in range(size):
            send(txn, j, tag, into)
            plain_until(i + 1)
        assert plain.flush(30) == 0 and txn.flush(30) == 0
        if into is aborted:
            txn.abort_transaction(30)
        else:
            txn.commit_transaction(30)
    plain_until(n)
    assert plain.flush(60) == 0 and txn.flush(30) == 0
    assert not errors, errors[:5]
    model.update(committed)
    assert len(model) == n + 150 and len(aborted) == 200, (len(model), len(aborted))
    txn_last = {p: max(o for q, o in (*aborted, *committed) if q == p) for p in range(partitions)}
    return model, aborted, txn_last


def produce_plain(bs: str, topic: str, n: int, tag: str) -> dict:
    """n records of `record` to partition 0 (acks=all); the model of what was acknowledged."""
    from confluent_kafka import Producer

    base_ms = int(time.time() * 1000)
    model: dict[tuple[int, int], Row] = {}
    producer = Producer({"bootstrap.servers": bs, "linger.ms": 5, "acks": "all", "batch.size": 16384})
    for i in range(n):
        key, value, headers, ts = record(i, tag, base_ms)

        def delivered(err, msg, row=(key, value, headers, ts)) -> None:
            assert err is None, err
            model[(msg.partition(), msg.offset())] = (msg.partition(), msg.offset(), "CreateTime", row[3], *row[:3])

        producer.produce(
            topic, value=value, key=key, partition=0, timestamp=ts, headers=list(headers) or None, on_delivery=delivered
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    return model


def offsets(bs: str, topic: str, partition: int, spec: str) -> int:
    """ListOffsets: earliest (-2), earliest_local (-4), latest (-1)."""
    with Admin(bs) as admin:
        return admin.list_offsets({(topic, partition): spec})[TopicPartition(topic, partition)][0]


def checksum(rows: list[Row]) -> str:
    """sha256 over the rows' reprs, in partition and offset order."""
    h = hashlib.sha256()
    for r in sorted(rows, key=lambda r: (r[0], r[1])):
        h.update(repr(r).encode() + b"\n")
    return h.hexdigest()


def check(rows: list[Row], want: dict, who: str) -> tuple[int, str]:
    """Asserts `rows` (in the order read) are `want`'s records, each once, in offset order per
    partition, naming the first difference; returns (count, checksum)."""
    seen: dict[tuple[int, int], Row] = {}
    last: dict[int, int] = {}
    for r in rows:
        at = (r[0], r[1])
        assert at not in seen, f"{who}: offset {r[1]} of partition {r[0]} read twice"
        assert r[1] > last.get(r[0], -1), f"{who}: partition {r[0]}: offset {r[1]} read after {last[r[0]]}"
        seen[at], last[r[0]] = r, r[1]
    missing, extra = sorted(set(want) - set(seen)), sorted(set(seen) - set(want))
    assert not missing and not extra, (
        f"{who}: read {len(seen)} records, expected {len(want)}; "
        f"missing {len(missing)} {missing[:5]}, not expected {len(extra)} {extra[:5]}"
    )
    for at in sorted(want):
        assert seen[at] == want[at], f"{who}: partition {at[0]} offset {at[1]}: read {seen[at]}, produced {want[at]}"
    return len(rows), checksum(rows)


def java_read(tools, bs: str, topic: str, isolation: str, *reads: str) -> list[list[Row]]:
    """The Java client's KafkaConsumer (tests/java/TierReader.java): the rows of each read,
    PARTITIONS:OFFSET:LIMIT, in the order read."""
    cmd = tools.tools_java(READER, [bs, topic, isolation, *reads], heap="-Xmx512m")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, f"the Java client (TierReader.java) failed ({r.returncode}): {r.stderr[-3000:]}"

    def blob(s: str) -> bytes | None:
        return None if s == "-" else base64.b64decode(s.removeprefix("b:"))

    out: list[list[Row]] = [[] for _ in reads]
    for line in r.stdout.splitlines():
        n, p, o, tt, ts, key, value, hs = line.split(" ")
        headers = (
            ()
            if hs == "."
            else tuple((base64.b64decode(k).decode(), blob(v)) for k, v in (h.split("~") for h in hs.split(",")))
        )
        out[int(n)].append((int(p), int(o), TIMESTAMP_TYPES[int(tt)], int(ts), blob(key), blob(value), headers))
    return out


def rdkafka_read(bs: str, topic: str, start: dict[int, int], done, timeout: float = 60.0) -> list[Row]:
    """librdkafka (confluent-kafka, read_committed) from `start` (partition -> offset) until
    `done(rows)`: the rows in the order read."""
    import confluent_kafka

    types = {
        confluent_kafka.TIMESTAMP_CREATE_TIME: "CreateTime",
        confluent_kafka.TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime",
        confluent_kafka.TIMESTAMP_NOT_AVAILABLE: "none",
    }
    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"{topic}-rdkafka",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "error",  # an out-of-range answer is an error here, not a jump to the end
        }
    )
    rows: list[Row] = []
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, o) for p, o in start.items()])
        deadline = time.monotonic() + timeout
        while not done(rows):
            assert time.monotonic() < deadline, f"confluent-kafka: read {len(rows)} records in {timeout} s"
            for m in c.consume(1000, 0.5):
                assert m.error() is None, f"confluent-kafka: {m.error()}"
                tt, ts = m.timestamp()
                headers = tuple((k, v) for k, v in m.headers() or ())
                rows.append((m.partition(), m.offset(), types[tt], ts, m.key(), m.value(), headers))
    finally:
        c.close()
    return rows


def reached(last: dict[int, int]):
    """done(rows) for rdkafka_read: every partition read up to its offset in `last`."""

    def done(rows: list[Row]) -> bool:
        top: dict[int, int] = {}
        for r in rows:
            top[r[0]] = max(top.get(r[0], -1), r[1])
        return all(top.get(p, -1) >= o for p, o in last.items())

    return done


def tiered_past(bs: str, topic: str, data_dir: Path, past: dict[int, int]) -> dict[int, int]:
    """Waits until, in every partition, the local log starts above `past[p]` (ListOffsets
    EARLIEST_LOCAL) and no local segment file below it is left in the data directory (the
    oldest is the local log start's); returns the local log start offsets."""

    def settled() -> dict[int, int] | None:
        locals_ = {}
        for p, above in past.items():
            local = offsets(bs, topic, p, "earliest_local")
            names = (SEGMENT_FILE.fullmatch(f.name) for f in (data_dir / f"{topic}-{p}").iterdir())
            bases = [int(m[1]) for m in names if m]
            if local <= above or not bases or min(bases) != local:
                return None
            locals_[p] = local
        return locals_

    return wait_until(
        settled,
        timeout=90,
        what=f"the local logs of {topic} deleted past offsets {past} (the table holding their records)",
    )


@needs_java
@pytest.mark.timeout(300)  # one broker, 20,000 records read four times, two JVMs: about a minute on 2 cores
def test_fetch_below_the_local_log_is_served_from_the_table(broker_process) -> None:
    """20,000 records over 3 partitions with an aborted and a committed transaction in the
    middle, read from offset 0 (read_committed) by the Java client and librdkafka while the
    local log has everything, then again once local retention has deleted every segment the
    table holds past the transactions: the same records, count and checksum. Seeks into the
    tiered range, to an ordinary offset and to an aborted record's, read from there."""
    from benches.peers.kafka import install

    tools = install()  # Apache Kafka's client jars from Maven Central (cached)
    bp = broker_process(extra=BROKER_SETTINGS)
    bs, topic, partitions = bp.bootstrap_servers, "tier", 3
    with Admin(bs) as admin:
        # local.retention.bytes stays at its default (retention.bytes: unlimited) until the
        # first reads are done, so that they read the local log
        admin.create_topics([NewTopic(topic, partitions, 1, dict(TOPIC_CONFIG))])
    model, aborted, txn_last = produce(bs, topic, partitions, 20_000, txn_at=9_000)
    last = {p: max(o for q, o in model if q == p) for p in range(partitions)}
    ends = {p: offsets(bs, topic, p, "latest") for p in range(partitions)}
    assert all(ends[p] == last[p] + 1 for p in range(partitions)), (ends, last)

    everything = ",".join(map(str, range(partitions))) + ":0:-1"
    (java_before,) = java_read(tools, bs, topic, "read_committed", everything)
    java_sum = check(java_before, model, "Java client, before the local deletion")
    rd_sum = check(
        rdkafka_read(bs, topic, dict.fromkeys(range(partitions), 0), reached(last)),
        model,
        "confluent-kafka, before the local deletion",
    )
    assert java_sum == rd_sum
    assert all(offsets(bs, topic, p, "earliest_local") == 0 for p in range(partitions)), "nothing deleted yet"

    with Admin(bs) as admin:
        admin.alter_configs({("topic", topic): {"local.retention.bytes": "1"}})
    # past the transactions, so that their records and markers are read from the table
    local = tiered_past(bs, topic, bp.data_dir, txn_last)
    assert any((bp.data_dir / "__iceberg").rglob("*.parquet")), "no Parquet data file in the table's warehouse"
    for p in range(partitions):
        assert offsets(bs, topic, p, "earliest") == 0, f"partition {p}: EARLIEST is the table's first offset"
        assert offsets(bs, topic, p, "latest") == ends[p]
    # offsets by time: the first record at or after a timestamp (the records' timestamps are
    # not quite in order), whether it is in the table or the local log
    stamps = sorted({row[3] for row in model.values()})
    with Admin(bs) as admin:
        for t in [stamps[0] - 1, stamps[len(stamps) // 7], stamps[len(stamps) // 3], stamps[-1], stamps[-1] + 1]:
            got = admin.list_offsets({(topic, p): t for p in range(partitions)})
            for p in range(partitions):
                hits = [o for (q, o), row in model.items() if q == p and row[3] >= t]
                first = min(hits, default=-1)
                want = (first, model[(p, first)][3]) if hits else (-1, -1)
                assert got[TopicPartition(topic, p)] == want, (p, t, local[p], got[TopicPartition(topic, p)], want)
    assert any(
        min((o for (q, o), row in model.items() if q == p and row[3] >= stamps[len(stamps) // 7]), default=-1)
        < local[p]
        for p in range(partitions)
    ), "a timestamp looked up in the table"
    seek_at = 1234
    gap = min(o for q, o in aborted if q == 1)  # the first aborted record of partition 1
    assert seek_at < local[1] and gap < local[1], (local, seek_at, gap)

    p1 = sorted(o for q, o in model if q == 1)
    from_seek = {(1, o): model[(1, o)] for o in [o for o in p1 if o >= seek_at][:100]}
    from_gap = {(1, o): model[(1, o)] for o in [o for o in p1 if o > gap][:50]}
    assert min(from_seek)[1] == seek_at and (1, gap) not in model

    java_all, java_seek, java_gap = java_read(
        tools, bs, topic, "read_committed", everything, f"1:{seek_at}:100", f"1:{gap}:50"
    )
    assert check(java_all, model, "Java client, from offset 0 after the local deletion") == java_sum
    assert java_seek[0][1] == seek_at, f"the Java client seeking to {seek_at} read from {java_seek[0][1]}"
    check(java_seek, from_seek, f"Java client from offset {seek_at} of partition 1 (tiered)")
    check(java_gap, from_gap, f"Java client from offset {gap} of partition 1 (an aborted record's)")

    rd_all = rdkafka_read(bs, topic, dict.fromkeys(range(partitions), 0), reached(last))
    assert check(rd_all, model, "confluent-kafka, from offset 0 after the local deletion") == rd_sum
    rd_seek = rdkafka_read(bs, topic, {1: seek_at}, lambda rows: len(rows) >= 100)[:100]
    assert rd_seek[0][1] == seek_at, f"confluent-kafka seeking to {seek_at} read from {rd_seek[0][1]}"
    check(rd_seek, from_seek, f"confluent-kafka from offset {seek_at} of partition 1 (tiered)")
    rd_gap = rdkafka_read(bs, topic, {1: gap}, lambda rows: len(rows) >= 50)[:50]
    check(rd_gap, from_gap, f"confluent-kafka from offset {gap} of partition 1 (an aborted record's)")


@pytest.mark.timeout(240)  # about 15 s; the waits' own timeouts say what did not happen first
def test_read_uncommitted_from_the_table_has_no_aborted_records(broker_process) -> None:
    """The table holds only committed records: read_uncommitted (logbroker's own client) from
    offset 0 after the local deletion reads the same records read_committed does, with no
    aborted one (documented: an aborted transaction below the local log start is gone)."""
    bp = broker_process(extra=BROKER_SETTINGS)
    bs, topic, partitions = bp.bootstrap_servers, "tieru", 2
    config = {**TOPIC_CONFIG, "segment.bytes": "16384", "local.retention.bytes": "1"}
    with Admin(bs) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1, config)])
    model, aborted, txn_last = produce(bs, topic, partitions, 3_000, txn_at=1_000)
    last = {p: max(o for q, o in model if q == p) for p in range(partitions)}
    tiered_past(bs, topic, bp.data_dir, txn_last)
    assert all(offsets(bs, topic, p, "earliest") == 0 for p in range(partitions))

    rows: list[Row] = []
    done = reached(last)
    with logbroker.Consumer(bs, isolation_level="read_uncommitted", auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        for p in range(partitions):
            c.seek(TopicPartition(topic, p), 0)
        deadline = time.monotonic() + 60
        while not done(rows):
            assert time.monotonic() < deadline, f"logbroker's client: read {len(rows)} of {len(model)} records"
            for r in c.poll(1.0):
                rows.append(
                    (
                        r.partition,
                        r.offset,
                        TIMESTAMP_TYPES[r.timestamp_type],
                        r.timestamp,
                        r.key,
                        r.value,
                        tuple(r.headers),
                    )
                )
    assert not {(r[0], r[1]) for r in rows} & aborted, "read_uncommitted read aborted records from the table"
    check(rows, model, "logbroker's client, read_uncommitted from offset 0 after the local deletion")


@pytest.mark.timeout(240)
def test_a_compaction_by_another_writer_is_followed(broker_process, monkeypatch) -> None:
    """Another writer (here the test, with pyiceberg) compacts the table's files and their
    old files are deleted, as snapshot expiry does: at its next commit round the broker reads
    the partition's files again from the table, and a read from offset 0 below the local log
    start gets every record from the compacted file."""
    from pyiceberg.catalog.sql import SqlCatalog

    from logbroker.iceberg import table_maintenance

    bp = broker_process(extra=BROKER_SETTINGS)
    bs, topic = bp.bootstrap_servers, "tierc"
    with Admin(bs) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, dict(TOPIC_CONFIG))])
    base = bp.data_dir / "__iceberg"

    def load_table():
        catalog = SqlCatalog(
            "logbroker", uri=f"sqlite:///{base / 'catalog.db'}", warehouse=(base / "warehouse").as_uri()
        )
        return catalog.load_table(f"logbroker.{topic}")

    def rows_in_table() -> int:
        try:
            return sum(t.file.record_count for t in load_table().scan().plan_files())
        except Exception:  # no catalog or table yet: the broker creates them at its first commit
            return -1

    model: dict = {}
    for round_ in range(4):  # a commit each: four files of partition 0 at least
        model.update(produce_plain(bs, topic, 500, f"round{round_}"))
        wait_until(lambda: rows_in_table() == len(model), timeout=30, what=f"round {round_}'s records in the table")
    last = max(o for _, o in model)
    with Admin(bs) as admin:
        admin.alter_configs({("topic", topic): {"local.retention.bytes": "1"}})
    tiered_past(bs, topic, bp.data_dir, {0: last // 2})

    table = load_table()
    before = {t.file.file_path for t in table.scan().plan_files()}
    monkeypatch.setattr(table_maintenance, "MIN_SMALL_FILES", 2)
    done = table_maintenance.compact_small_files(table)
    assert done is not None and done.files_after < done.files_before, done
    after = {t.file.file_path for t in table.refresh().scan().plan_files()}
    replaced = before - after
    assert replaced, (before, after)
    for path in replaced:  # what expiry deletes once the compaction's snapshot is old enough
        Path(path.removeprefix("file://")).unlink()

    rows = rdkafka_read(bs, topic, {0: 0}, reached({0: last}))
    check(rows, model, "confluent-kafka from offset 0 after a compaction by another writer")


@pytest.mark.timeout(240)
def test_a_new_leader_serves_the_history_from_the_table(tmp_path: Path) -> None:
    """Three nodes sharing one catalog and warehouse, RF 3: once the local logs hold only the
    last segments, the leader is killed; the new leader lists the table's files for the
    partition (within a second, not at its next commit) and librdkafka reads every record from
    offset 0, the history from the table."""
    from logbroker import Cluster

    base = tmp_path / "shared"
    config = shared_lake(base, 300) | {"log.retention.check.interval.ms": 200}
    topic = "hat"
    with Cluster(3, data_dir=tmp_path / "c", config=config) as c:
        bs = c.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics(
                [
                    NewTopic(
                        topic,
                        1,
                        3,
                        {**TOPIC_CONFIG, "min.insync.replicas": "2", "local.retention.bytes": "1"},
                    )
                ]
            )
        model = produce_plain(bs, topic, 3000, "ha")
        last = max(o for _, o in model)

        def local_starts() -> list[int]:
            """Each replica's first local segment (followers follow the leader's local log start)."""
            out = []
            for n in c.nodes:
                names = (SEGMENT_FILE.fullmatch(f.name) for f in (Path(n.data_dir) / f"{topic}-0").iterdir())
                out.append(min((int(m[1]) for m in names if m and m[2] == "log"), default=0))
            return out

        wait_until(
            lambda: min(local_starts()) > last // 2,
            timeout=60,
            what=f"every replica's local log of {topic}-0 past offset {last // 2} (the table holding the rest)",
        )
        with Admin(bs) as admin:
            leader = admin.describe_topics([topic])[topic].partitions[0].leader
        c.node(leader).kill()

        def new_leader() -> int | None:
            with Admin(bs) as admin:
                now = admin.describe_topics([topic])[topic].partitions[0].leader
            return now if now not in (leader, -1) else None

        wait_until(new_leader, timeout=60, what=f"a new leader of {topic}-0")
        # while the new leader lists the table's files, EARLIEST is OFFSET_NOT_AVAILABLE (the
        # client retries), never its local log start
        assert offsets(bs, topic, 0, "earliest") == 0, "EARLIEST at the new leader is the table's first offset"
        assert offsets(bs, topic, 0, "earliest_local") > 0, "the new leader's local log starts past offset 0 too"
        rows = rdkafka_read(bs, topic, {0: 0}, reached({0: last}))
        check(rows, model, "confluent-kafka from offset 0 at the new leader")


@pytest.mark.timeout(120)
def test_a_table_holding_an_earlier_incarnation_is_not_the_tier(broker_process) -> None:
    """A table-tier topic deleted and created again: its table still holds the first
    incarnation's rows at the same offsets, so it cannot answer fetches for the second. The
    broker says so (naming the table and the other topic id) and keeps the segments: the
    local log still starts at 0 after the new records are in the table, and a read from 0
    gets the new incarnation's records only."""
    bp = broker_process(extra=BROKER_SETTINGS)
    bs, topic = bp.bootstrap_servers, "again"
    config = {**TOPIC_CONFIG, "local.retention.bytes": "1", "segment.bytes": "16384"}
    with Admin(bs) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, config)])
    first = produce_plain(bs, topic, 300, "first")
    wait_until(lambda: offsets(bs, topic, 0, "earliest_local") > 0, timeout=60, what="the first incarnation tiered")
    with Admin(bs) as admin:
        admin.delete_topics([topic])
    wait_until(lambda: not (bp.data_dir / f"{topic}-0").exists(), timeout=30, what=f"{topic}-0 deleted")
    with Admin(bs) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, config)])
    second = produce_plain(bs, topic, 300, "second")
    wait_until(
        lambda: "earlier incarnation of the topic" in bp.log_path.read_text(),
        timeout=60,
        what="the broker refusing the table as the tier",
    )
    assert offsets(bs, topic, 0, "earliest_local") == 0, "segments deleted though the table cannot serve them"
    assert offsets(bs, topic, 0, "earliest") == 0
    rows = rdkafka_read(bs, topic, {0: 0}, reached({0: max(o for _, o in second)}))
    check(rows, second, "confluent-kafka from offset 0 of the second incarnation")
    assert len(first) == len(second)
