"""Tiered storage (KIP-405) on one broker, with the built-in object store: rolled segments
are copied (a local directory, and an S3-compatible server on loopback), the local log
keeps only `local.retention.bytes`, and consumers still read every record from offset 0,
as produced (keys, values, headers, timestamps, transactions), checked against a model."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_java

import logbroker
from logbroker import Admin, NewTopic, Producer, TopicPartition
from logbroker.coord.metadata.metadata_records import MetadataRecordError  # noqa: F401  (records exist)

FAST = {
    "remote.log.manager.task.interval.ms": "200",
    "log.retention.check.interval.ms": "200",
}
# retention.ms -1: nothing expires while a test runs, whatever its records' timestamps
TIERED = {"remote.storage.enable": "true", "segment.bytes": "4096", "local.retention.bytes": "1", "retention.ms": "-1"}


def wait_for(cond, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def broker(tmp_path: Path, url: str | None = None, **extra: str) -> logbroker.Broker:
    cfg = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.url": url or (tmp_path / "remote").as_uri(),
        **FAST,
        **extra,
    }
    return logbroker.Broker(data_dir=tmp_path / "d", config=cfg)


def moto_s3(bucket: str):
    """moto's S3 server on loopback with `bucket` created: (server, the broker's rsm.config.* keys)."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    boto3.client(
        "s3",
        endpoint_url=f"http://{host}:{port}",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    ).create_bucket(Bucket=bucket)
    keys = {
        "rsm.config.aws_endpoint": f"http://{host}:{port}",
        "rsm.config.aws_access_key_id": "test",
        "rsm.config.aws_secret_access_key": "test",
        "rsm.config.aws_region": "us-east-1",
        "rsm.config.aws_allow_http": "true",
    }
    return server, keys


def produce_model(
    bootstrap: str, topic: str, partitions: int, n: int, *, aborted_every: int = 0, acks: str = "1"
) -> dict:
    """n committed records (keys, headers, explicit timestamps), round-robin; an aborted
    transaction of 5 records every `aborted_every`. Returns (partition, offset) -> record."""
    model: dict[tuple[int, int], tuple] = {}
    base = int(time.time() * 1000) - 3_600_000  # an hour ago: segment.ms (by record time) never rolls
    with Producer(bootstrap, linger_ms=0, acks=acks) as plain:
        for i in range(n):
            key, value = f"k{i}".encode(), (f"value-{i}-" + "x" * 60).encode()
            headers = [("h", f"{i}".encode())] if i % 3 == 0 else []
            ts = base + i
            md = plain.send(topic, value, key=key, partition=i % partitions, headers=headers, timestamp=ts).result(10)
            model[(md.partition, md.offset)] = (key, value, headers, ts)
    if aborted_every:
        with Producer(bootstrap, transactional_id=f"tier-abort-{topic}") as txn:
            txn.init_transactions(10)
            for j in range(n // aborted_every):
                txn.begin_transaction()
                for k in range(5):
                    txn.send(topic, b"aborted", key=f"a{j}-{k}".encode(), partition=k % partitions)
                txn.flush(10)
                txn.abort_transaction(10)
    return model


def offsets(bootstrap: str, topic: str, partition: int, spec: str) -> int:
    with Admin(bootstrap) as admin:
        return admin.list_offsets({(topic, partition): spec})[TopicPartition(topic, partition)][0]


def read_all(bootstrap: str, topic: str, partitions: int, model: dict, **config) -> dict:
    """Every record from offset 0 up to the model's last offsets (read_committed)."""
    seen: dict[tuple[int, int], tuple] = {}
    end = {p: max(o for (q, o) in model if q == p) for p in range(partitions)}
    with logbroker.Consumer(bootstrap, auto_offset_reset="earliest", isolation_level="read_committed", **config) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + 60
        while any(max([o for (q, o) in seen if q == p], default=-1) < end[p] for p in range(partitions)):
            assert time.monotonic() < deadline, f"read {len(seen)} of {len(model)} records"
            for r in c.poll(1.0):
                assert (r.partition, r.offset) not in seen, f"offset {r.offset} of partition {r.partition} read twice"
                seen[(r.partition, r.offset)] = (r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp)
    return seen


def tiered_down(bootstrap: str, topic: str, partition: int, data_dir: Path) -> int:
    """Waits until the local log keeps only its active segment (the rest copied, then
    deleted locally); returns the local log start offset."""

    def settled():
        logs = list((data_dir / f"{topic}-{partition}").glob("*.log"))
        if len(logs) != 1:
            return None
        local = offsets(bootstrap, topic, partition, "earliest_local")
        return (local,) if local == int(logs[0].stem) and local > 0 else None

    return wait_for(settled, what=f"{topic}-{partition} tiered down to its active segment")[0]


def test_consumers_read_from_offset_zero_after_local_deletion(tmp_path: Path) -> None:
    with broker(tmp_path) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("tier", 2, 1, dict(TIERED))])
        model = produce_model(b.bootstrap_servers, "tier", 2, 400, aborted_every=80)
        locals_ = [tiered_down(b.bootstrap_servers, "tier", p, tmp_path / "d") for p in (0, 1)]
        for p in (0, 1):
            # KIP-1005: earliest is the first tiered offset; earliest-local the local log
            # start; latest-tiered the last copied offset, just below the local part
            assert offsets(b.bootstrap_servers, "tier", p, "earliest") == 0
            assert offsets(b.bootstrap_servers, "tier", p, "latest_tiered") == locals_[p] - 1
        # objects under <topic>-<topic id>/<partition>/, six per segment
        objects = [q for q in (tmp_path / "remote").rglob("*") if q.is_file()]
        suffixes = {q.name.split(".", 1)[1] for q in objects}
        assert suffixes == {"log", "index", "timeindex", "txnindex", "snapshot", "leader-epoch-checkpoint"}
        seen = read_all(b.bootstrap_servers, "tier", 2, model)
        assert seen == model, "read_committed from offset 0: every committed record as produced, no aborted one"
        # a second read is served from the cache
        assert read_all(b.bootstrap_servers, "tier", 2, model) == model


def test_restart_keeps_reading_remote(tmp_path: Path) -> None:
    """After a restart the copies are known from the metadata log alone (nothing remote is
    read to start), retention goes on, and reads from 0 still work."""
    with broker(tmp_path) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("rs", 1, 1, dict(TIERED))])
        model = produce_model(b.bootstrap_servers, "rs", 1, 200)
        tiered_down(b.bootstrap_servers, "rs", 0, tmp_path / "d")
    with broker(tmp_path) as b:
        assert offsets(b.bootstrap_servers, "rs", 0, "earliest") == 0
        # ListOffsets by time finds records in the copies (and in the local part)
        local = offsets(b.bootstrap_servers, "rs", 0, "earliest_local")
        for (_, o), (_k, _v, _h, ts) in sorted(model.items())[:: len(model) // 7]:
            with Admin(b.bootstrap_servers) as admin:
                got = admin.list_offsets({("rs", 0): ts})[TopicPartition("rs", 0)]
            assert got == (o, ts), f"offset {o} ({'remote' if o < local else 'local'}) by its timestamp {ts}"
        assert read_all(b.bootstrap_servers, "rs", 1, model) == model
        more = produce_model(b.bootstrap_servers, "rs", 1, 100)
        assert read_all(b.bootstrap_servers, "rs", 1, {**model, **more}) == {**model, **more}


def test_corrupt_remote_object_is_an_error_not_wrong_bytes(tmp_path: Path, caplog) -> None:
    """A flipped byte in a copied segment: the Fetch gets KAFKA_STORAGE_ERROR (retriable:
    the consumer retries and gets nothing), the broker logs the object key, partition and
    offset, and goes on serving."""
    with broker(tmp_path) as b:
        with Admin(b.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("bad", 1, 1, dict(TIERED))])
        model = produce_model(b.bootstrap_servers, "bad", 1, 200)
        local = tiered_down(b.bootstrap_servers, "bad", 0, tmp_path / "d")
        first = sorted((tmp_path / "remote").rglob("00000000000000000000-*.log"))[0]
        data = bytearray(first.read_bytes())
        data[100] ^= 0xFF  # a flipped byte inside the first batch
        first.write_bytes(bytes(data))
        with logbroker.Consumer(b.bootstrap_servers, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition("bad", 0)])
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                assert not c.poll(0.5), "corrupt remote bytes were served"
        errors = [r.getMessage() for r in caplog.records if "remote storage" in r.getMessage()]
        assert any("bad-0" in m and "CRC-32C mismatch" in m and first.name in m and "offset 0" in m for m in errors), (
            errors
        )
        # the broker goes on serving what is intact: the local part
        with logbroker.Consumer(b.bootstrap_servers) as c:
            c.assign([TopicPartition("bad", 0)])
            c.seek(TopicPartition("bad", 0), local)
            got = []
            deadline = time.monotonic() + 20
            while len(got) < len([k for k in model if k[1] >= local]) and time.monotonic() < deadline:
                got += c.poll(0.5)
            assert [r.offset for r in got] == sorted(o for (_, o) in model if o >= local)


def test_s3_compatible_store(tmp_path: Path) -> None:
    """s3:// through moto's server on loopback, credentials as rsm.config.* keys, which
    DescribeConfigs does not show."""
    server, keys = moto_s3("tier")
    try:
        with broker(tmp_path, "s3://tier/logs", **keys) as b:
            with Admin(b.bootstrap_servers) as admin:
                admin.create_topics([NewTopic("s3t", 1, 1, dict(TIERED))])
                shown = admin.describe_configs([("broker", "1")])[("broker", "1")]
                assert shown.get("rsm.config.aws_secret_access_key") is None
            model = produce_model(b.bootstrap_servers, "s3t", 1, 200)
            tiered_down(b.bootstrap_servers, "s3t", 0, tmp_path / "d")
            assert read_all(b.bootstrap_servers, "s3t", 1, model) == model
    finally:
        server.stop()


def test_enabling_on_an_existing_topic_tiers_its_segments_and_metrics_show_it(tmp_path: Path) -> None:
    """remote.storage.enable turned on later: the topic's rolled segments are copied too;
    /metrics has the copy and fetch totals and the per-partition remote size and lag."""
    from test_metrics import scrape, value

    with broker(tmp_path, **{"metrics.listen": "127.0.0.1:0"}) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("later", 1, 1, {"segment.bytes": "4096", "retention.ms": "-1"})])
            model = produce_model(bs, "later", 1, 200)
            assert offsets(bs, "later", 0, "latest_tiered") == -1
            admin.alter_configs({("topic", "later"): {"remote.storage.enable": "true", "local.retention.bytes": "1"}})
        tiered_down(bs, "later", 0, tmp_path / "d")
        assert read_all(bs, "later", 1, model) == model
        m = scrape(b.metrics_url)
        assert value(m, "kafka_server_brokertopicmetrics_remotecopybytespersec_total") > 0
        assert value(m, "kafka_server_brokertopicmetrics_remotefetchbytespersec_total") > 0
        assert value(m, "kafka_server_brokertopicmetrics_remotefetcherrorspersec_total") == 0
        copied = sum(f.stat().st_size for f in (tmp_path / "remote").rglob("*.log"))
        assert value(m, "kafka_server_brokertopicmetrics_remotelogsizebytes", topic="later", partition=0) == copied
        assert value(m, "kafka_server_brokertopicmetrics_remotecopylagsegments", topic="later", partition=0) == 0


def test_topic_deletion_and_disabling_delete_the_copies(tmp_path: Path) -> None:
    """Deleting a tiered topic deletes its objects; remote.storage.enable=false with
    remote.log.delete.on.disable=true (KIP-950) deletes the copies and their metadata."""
    with broker(tmp_path) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("gone", 1, 1, dict(TIERED)), NewTopic("off", 1, 1, dict(TIERED))])
        produce_model(bs, "gone", 1, 150)
        model = produce_model(bs, "off", 1, 150)
        for t in ("gone", "off"):
            tiered_down(bs, t, 0, tmp_path / "d")

        def objects(topic: str) -> list[Path]:
            return [q for q in (tmp_path / "remote").glob(f"{topic}-*/**/*") if q.is_file()]

        assert objects("gone") and objects("off")
        with Admin(bs) as admin:
            admin.delete_topics(["gone"])
            admin.alter_configs(
                {("topic", "off"): {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}}
            )
        wait_for(lambda: not objects("gone"), what="the deleted topic's objects gone")
        wait_for(lambda: not objects("off"), what="the copies of the topic that turned tiering off gone")
        assert offsets(bs, "off", 0, "latest_tiered") == -1
        start = offsets(bs, "off", 0, "earliest")
        assert start > 0, "what was only remote is gone with the copies"
        assert offsets(bs, "off", 0, "latest") == max(o for _, o in model) + 1


def test_object_store_outage_delays_copies_not_producers(tmp_path: Path) -> None:
    """The S3 server goes away while records are produced: producers are unaffected,
    local retention deletes nothing that is not copied, and once the store is back
    everything is copied and readable from offset 0."""
    from moto.server import ThreadedMotoServer

    server, keys = moto_s3("out")
    port = server.get_host_and_port()[1]
    keys["rsm.config.aws_retry_timeout"] = "1s"
    try:
        with broker(tmp_path, "s3://out/t", **keys) as b:
            bs = b.bootstrap_servers
            with Admin(bs) as admin:
                admin.create_topics([NewTopic("o", 1, 1, dict(TIERED))])
            model = produce_model(bs, "o", 1, 100)
            tiered_down(bs, "o", 0, tmp_path / "d")
            copied = offsets(bs, "o", 0, "latest_tiered")
            server.stop()
            t0 = time.monotonic()
            model.update(produce_model(bs, "o", 1, 200))
            assert time.monotonic() - t0 < 30, "producers wait for nothing remote"
            time.sleep(2)
            assert offsets(bs, "o", 0, "latest_tiered") == copied, "nothing copied while the store is down"
            assert offsets(bs, "o", 0, "earliest_local") <= copied + 1, "nothing deleted locally that is not copied"
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
            server.start()
            wait_for(
                lambda: offsets(bs, "o", 0, "latest_tiered") > max(o for _, o in model) - 60,
                timeout=120,
                what="copies after the store came back",
            )
            assert read_all(bs, "o", 1, model) == model
    finally:
        server.stop()


def test_librdkafka_and_kafka_python_read_from_offset_zero(tmp_path: Path) -> None:
    """Clients that know nothing of tiering: librdkafka (confluent-kafka) and kafka-python
    read every record from offset 0 after the local log kept only its active segment."""
    import confluent_kafka
    import kafka

    with broker(tmp_path) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("rk", 1, 1, dict(TIERED))])
        model = produce_model(bs, "rk", 1, 300)
        tiered_down(bs, "rk", 0, tmp_path / "d")
        want = {o: (r[0], r[1], r[3]) for (_, o), r in model.items()}

        c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "rk", "auto.offset.reset": "earliest"})
        c.assign([confluent_kafka.TopicPartition("rk", 0, 0)])
        got = {}
        deadline = time.monotonic() + 60
        while len(got) < len(want) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None:
                assert m.error() is None, m.error()
                got[m.offset()] = (m.key(), m.value(), m.timestamp()[1])
        c.close()
        assert got == want

        kc = kafka.KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False)
        kc.assign([kafka.TopicPartition("rk", 0)])
        kc.seek_to_beginning()
        got = {}
        deadline = time.monotonic() + 60
        while len(got) < len(want) and time.monotonic() < deadline:
            for records in kc.poll(500).values():
                got.update({r.offset: (r.key, r.value, r.timestamp) for r in records})
        kc.close()
        assert got == want


@needs_java
def test_java_consumer_reads_from_offset_zero(tmp_path: Path) -> None:
    """Apache Kafka's own consumer (ConsoleConsumer, read_committed) reads every committed
    record from offset 0, with its key, value, headers and timestamp, and no aborted one,
    after the local log kept only its active segment."""
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benches.peers.kafka import install

    tools = install()
    with broker(tmp_path) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("jv", 1, 1, dict(TIERED))])
        model = produce_model(bs, "jv", 1, 300, aborted_every=60)
        local = tiered_down(bs, "jv", 0, tmp_path / "d")
        args = ["--bootstrap-server", bs, "--topic", "jv", "--from-beginning", "--isolation-level", "read_committed"]
        args += ["--max-messages", str(len(model)), "--timeout-ms", "60000"]
        for prop in ("print.offset", "print.timestamp", "print.headers", "print.key"):
            args += ["--formatter-property", f"{prop}=true"]
        r = subprocess.run(
            tools.tools_java("org.apache.kafka.tools.consumer.ConsoleConsumer", args), capture_output=True, timeout=120
        )
        assert r.returncode == 0, r.stderr.decode()[-3000:]
        got = {}
        for line in r.stdout.decode().splitlines():
            ts, offset, headers, key, value = line.split("\t")
            hs = (
                []
                if headers == "NO_HEADERS"
                else [(k, v.encode()) for k, v in (h.split(":") for h in headers.split(","))]
            )
            got[(0, int(offset.removeprefix("Offset:")))] = (
                key.encode(),
                value.encode(),
                hs,
                int(ts.removeprefix("CreateTime:")),
            )
        assert min(o for _, o in got) < local, "the first records read were remote"
        assert got == model


def go_program(name: str) -> Path:
    """tests/go/<name> built (tests/go/build.py; tests/prepare.py builds it before pytest starts).
    Without Go, or when the build fails, the test fails saying why: it is never skipped."""
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:  # tests.go and tests.compat are packages of the checkout's root
        sys.path.insert(0, root)
    from tests.go.build import program

    try:
        return program(name)
    except RuntimeError as e:
        pytest.fail(f"franz-go reader: {e}", pytrace=False)


# a cold cache builds the reader first (tests/prepare.py does it before pytest starts): about
# two minutes on a busy 2-core machine, more with franz-go's modules to download
@pytest.mark.timeout(600)
def test_franz_go_reads_from_offset_zero(tmp_path: Path) -> None:
    """franz-go's kgo consumer (tests/go/tiered_reader, read_committed) reads every committed
    record from offset 0, with its offset, key, value, headers and timestamp, no aborted one,
    and the abort markers where the log has them, after the local log kept only its active
    segment: the aborted transactions too are read from remote storage."""
    reader = go_program("tiered_reader")
    with broker(tmp_path) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("fg", 2, 1, dict(TIERED))])
        model = produce_model(bs, "fg", 2, 300, aborted_every=60)
        # committed records after the aborted transactions, so that those are tiered too
        model.update(produce_model(bs, "fg", 2, 200))
        local = [tiered_down(bs, "fg", p, tmp_path / "d") for p in (0, 1)]
        end = [offsets(bs, "fg", p, "latest") for p in (0, 1)]
        r = subprocess.run([str(reader), bs, "fg", "2", "read_committed"], capture_output=True, timeout=180)
        assert r.returncode == 0, r.stderr.decode()[-3000:]

    def b64(s: str | None) -> bytes | None:
        return None if s is None else base64.b64decode(s)

    got: dict[tuple[int, int], tuple] = {}
    markers: dict[tuple[int, int], int] = {}  # (partition, offset) -> control type: 0 abort, 1 commit
    for line in r.stdout.decode().splitlines():
        rec = json.loads(line)
        at = (rec["partition"], rec["offset"])
        assert at not in got and at not in markers, f"offset {at[1]} of partition {at[0]} read twice"
        if rec["control"]:
            # a control record's key: version (int16), type (int16)
            markers[at] = struct.unpack(">hh", b64(rec["key"]))[1]
        else:
            assert rec["timestamp_type"] == 0, f"{at}: not CreateTime"
            headers = [(h["key"], b64(h["value"])) for h in rec["headers"]]
            got[at] = (b64(rec["key"]), b64(rec["value"]), headers, rec["timestamp"])
    assert got == model, "read_committed from offset 0: every committed record as produced, no aborted one"
    txns = 300 // 60
    for p in (0, 1):
        assert min(o for q, o in got if q == p) < local[p], "the first records read were remote"
        mine = sorted(o for q, o in markers if q == p)
        assert [markers[(p, o)] for o in mine] == [0] * txns, "one abort marker per transaction, no commit one"
        assert max(mine) < local[p], "the aborted transactions were read from remote storage"
        # the offsets kgo was not given are the aborted records: each transaction's on this
        # partition (the 5 records went round-robin), just below its marker
        per_txn = len([k for k in range(5) if k % 2 == p])
        skipped = set(range(end[p])) - {o for q, o in got if q == p} - set(mine)
        assert skipped == {m - i for m in mine for i in range(1, per_txn + 1)}


def test_remote_fetch_quota_slows_remote_reads(tmp_path: Path) -> None:
    """remote.log.manager.fetch.max.bytes.per.second (KIP-956): reads from remote storage
    go no faster than the quota (fetches meanwhile carry no remote records, counted as
    throttled), and every record still arrives."""
    quota = 16384
    with broker(tmp_path, **{"remote.log.manager.fetch.max.bytes.per.second": str(quota)}) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("fq", 1, 1, dict(TIERED))])
        model = produce_model(bs, "fq", 1, 500)
        tiered_down(bs, "fq", 0, tmp_path / "d")
        remote_bytes = sum(q.stat().st_size for q in (tmp_path / "remote").glob("fq-*/0/*.log"))
        assert remote_bytes > 3 * quota
        t0 = time.monotonic()
        assert read_all(bs, "fq", 1, model) == model
        elapsed = time.monotonic() - t0
        # a second's worth may come at once (the bucket starts full), the rest at the rate
        assert elapsed >= 0.8 * (remote_bytes - quota) / quota, (elapsed, remote_bytes)
        assert b.server.replicas.remote.stats()["fetch_throttled"] > 0


def test_delete_records_into_the_remote_part(tmp_path: Path) -> None:
    """DeleteRecords below the local log start: the log start offset becomes that offset
    on the broker (ListOffsets, Fetch), reads below it are out of range, and the remote
    segments entirely below it are deleted."""
    from rawclient import RawClient
    from test_apis import fetch

    from logbroker.protocol import REQUESTS, ErrorCode

    with broker(tmp_path) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("dr", 1, 1, dict(TIERED))])
        model = produce_model(bs, "dr", 1, 300)
        local = tiered_down(bs, "dr", 0, tmp_path / "d")
        target = local // 2
        segments_before = len(list((tmp_path / "remote").rglob("*.log")))
        dr_req = REQUESTS[21]
        with RawClient(bs) as c:
            dr = c.request(
                21,
                1,
                dr_req(
                    topics=[
                        dr_req.DeleteRecordsTopic(
                            name="dr", partitions=[dr_req.DeleteRecordsPartition(partition_index=0, offset=target)]
                        )
                    ],
                    timeout_ms=5000,
                ),
            )
            res = dr.topics[0].partitions[0]
            assert (res.error_code, res.low_watermark) == (0, target)
            assert offsets(bs, "dr", 0, "earliest") == target
            assert fetch(c, "dr", target - 1).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        wait_for(
            lambda: len(list((tmp_path / "remote").rglob("*.log"))) < segments_before,
            what="remote segments below the new log start deleted",
        )
        rest = {k: v for k, v in model.items() if k[1] >= target}
        seen = read_all(bs, "dr", 1, rest)
        assert seen == rest


def test_topic_describe_shows_the_tiered_and_the_local_part(tmp_path: Path) -> None:
    """`logbroker topic describe`: the last copied offset and where the local log starts,
    in the table and in --json; the console: local and remote size per partition."""
    import json

    from test_console import ok
    from test_topic_cli import cli

    with broker(tmp_path, **{"console.listen": "127.0.0.1:0"}) as b:
        bs = b.bootstrap_servers
        with Admin(bs) as admin:
            admin.create_topics([NewTopic("desc", 1, 1, dict(TIERED)), NewTopic("flat", 1, 1)])
        produce_model(bs, "desc", 1, 150)
        local = tiered_down(bs, "desc", 0, tmp_path / "d")
        doc = json.loads(cli(bs, "describe", "--topic", "desc", "--json").stdout)
        (p,) = doc[0]["partitions"]
        assert (p["earliest_offset"], p["latest_tiered_offset"], p["earliest_local_offset"]) == (0, local - 1, local)
        table = cli(bs, "describe", "--topic", "desc").stdout
        assert "tiered to" in table and "local from" in table, table
        assert "tiered to" not in cli(bs, "describe", "--topic", "flat").stdout
        # the console: the remote bytes are the copies' (their .log objects), the local the log's
        remote_logs = sum(q.stat().st_size for q in (tmp_path / "remote").glob("desc-*/0/*.log"))
        detail = ok(b.console_url, "GET", "/api/topics/desc")
        (p,) = detail["partitions"]
        assert p["remote_size_bytes"] == remote_logs > 0 and p["earliest_local_offset"] == local
        assert 0 < p["size_bytes"] < remote_logs
        local_bytes = sum(q.stat().st_size for q in (tmp_path / "d" / "desc-0").glob("*.log"))
        with Admin(bs) as admin:  # kafka-log-dirs: the local size, as Kafka reports it
            assert admin.describe_log_dirs(b.server.node_id)[TopicPartition("desc", 0)] == local_bytes
        [row] = [t for t in ok(b.console_url, "GET", "/api/topics") if t["topic"] == "desc"]
        assert row["remote_size_bytes"] == remote_logs
        [flat] = [t for t in ok(b.console_url, "GET", "/api/topics") if t["topic"] == "flat"]
        assert flat["remote_size_bytes"] is None or flat["remote_size_bytes"] == 0
