"""Issue 45's "done when", as one command (minutes to an hour: not in CI, whose tiered tests
are its short form): a three-node cluster (RF 3, min.insync.replicas 2) whose tiered topic
keeps `local.retention.bytes` 100 MB per partition holds `--gb` GB of records on an
S3-compatible store (moto's server, in a process of its own, behind a relay that can hold
every request: an outage the brokers cannot tell from a store that stopped answering).

1. Produce: `--gb` GB of records (acks=all, idempotent; librdkafka) whose key is their
   sequence number and whose value is made from it (the SHA-256 of the key in hex, repeated
   to `--record-size` bytes: any reader can check each record alone). While it runs, the
   leader of partition 0 is SIGKILLed (and started again `--down` seconds later), and then
   the store is held for `--outage` seconds. Every record must be acknowledged.
2. Tiering: waits until every rolled segment is copied and deleted locally; prints each
   broker's bytes on disk for the topic beside the topic's size.
3. Reads from offset 0, each record checked against its key, every acknowledged key once:
   Apache Kafka's ConsoleConsumer (the Java client), then a Spark batch (Spark's own Kafka
   source, local[2]) that checks every row in SQL.
4. Replacement: one node stops, its partitions' data is deleted (the disk replaced; the
   node keeps its metadata log: it is a controller voter too), and it starts again: the
   seconds until it is back in the ISR of every partition, and the bytes it copied.

    python -m benches.tiered_acceptance [--gb 5] [--partitions 6] [--record-size 1000]
        [--outage 60] [--down 10] [--dir DIR]

docs/benchmarks.md ("Tiered storage, the three-node acceptance run") has the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "spark"))

TOPIC = "acceptance"
SEGMENT = 16 << 20
LOCAL = 100 << 20


def value_of(key: int, size: int) -> bytes:
    """The record of sequence number `key`: SHA-256 of its decimal text, in hex, repeated
    to `size` bytes (Spark's SQL and Java compute the same from the key alone)."""
    h = hashlib.sha256(str(key).encode()).hexdigest().encode()
    return (h * (size // len(h) + 1))[:size]


def start_moto() -> tuple[subprocess.Popen, int]:
    """moto's S3 server in its own process (its request handling is Python: in this one it
    would take the GIL from the producer and the checks)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import boto3

    deadline = time.monotonic() + 60
    while True:
        try:
            boto3.client(
                "s3",
                endpoint_url=f"http://127.0.0.1:{port}",
                aws_access_key_id="test",
                aws_secret_access_key="test",
                region_name="us-east-1",
            ).create_bucket(Bucket="tier")
            return proc, port
        except Exception:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.3)


def describe(bs: str) -> dict:
    from logbroker import Admin

    with Admin(bs) as admin:
        return {p.partition: p for p in admin.describe_topics([TOPIC])[TOPIC].partitions}


def list_offsets(bs: str, partitions: int, spec: str) -> list[int]:
    from logbroker import Admin, TopicPartition

    with Admin(bs) as admin:
        r = admin.list_offsets({(TOPIC, p): spec for p in range(partitions)})
        return [r[TopicPartition(TOPIC, p)][0] for p in range(partitions)]


def topic_bytes(node) -> int:
    return sum(f.stat().st_size for f in node.data_dir.glob(f"{TOPIC}-*/*") if f.is_file())


def produce(cluster, relay, args, n: int) -> float:
    """Produces records 0..n-1 (key i to partition i % partitions); the leader kill at 30% of
    them, the store held from 55% for `--outage` seconds. Returns the seconds it took."""
    from confluent_kafka import Producer

    bs = cluster.bootstrap_servers
    p = Producer(
        {
            "bootstrap.servers": bs,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 20,
            "batch.size": 1 << 20,
            "compression.type": "none",
            "delivery.timeout.ms": 600_000,
            "queue.buffering.max.kbytes": 512 << 10,
        }
    )
    failed: list[str] = []
    acked = [0]

    def done(err, msg):
        if err is not None:
            failed.append(f"{msg.key()}: {err}")
        else:
            acked[0] += 1

    kill_at, outage_at = int(n * 0.3), int(n * 0.55)
    killed = None
    t0 = time.monotonic()
    for i in range(n):
        if i == kill_at:
            leader = describe(bs)[0].leader
            killed = cluster.node(leader)
            print(f"[{time.monotonic() - t0:.0f} s] SIGKILL node {leader}, leader of {TOPIC}-0", flush=True)
            killed.kill()
            threading.Timer(args.down, lambda node=killed: node.start()).start()
        if i == outage_at:
            print(f"[{time.monotonic() - t0:.0f} s] object store held for {args.outage} s", flush=True)
            relay.stall()
            threading.Timer(args.outage, relay.heal).start()
        while True:
            try:
                p.produce(
                    TOPIC,
                    value_of(i, args.record_size),
                    key=str(i).encode(),
                    partition=i % args.partitions,
                    on_delivery=done,
                )
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    left = p.flush(600)
    took = time.monotonic() - t0
    assert left == 0 and not failed, f"{left} unacknowledged, {len(failed)} failed: {failed[:5]}"
    assert acked[0] == n, (acked[0], n)
    return took


def java_read(bs: str, n: int, size: int) -> tuple[float, int]:
    """Apache Kafka's ConsoleConsumer from offset 0 (a group subscribed to the topic); every
    line checked here, as it comes: the value is what its key makes, every key once."""
    from benches.peers import kafka

    tools = kafka.install()
    cmd = tools.tools_java(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        [
            "--bootstrap-server",
            bs,
            "--topic",
            TOPIC,
            "--from-beginning",
            "--max-messages",
            str(n),
            "--group",
            f"acceptance-{time.monotonic_ns()}",
            "--formatter-property",
            "print.key=true",
            "--command-property",
            "max.partition.fetch.bytes=8388608",
        ],
        heap="-Xmx1g",
        short_lived=False,
    )
    seen = bytearray(n)
    bad = 0
    other: list[bytes] = []  # lines that are not records (a tool's notice): shown, not counted
    t0 = time.monotonic()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            key, tab, value = line.rstrip(b"\n").partition(b"\t")
            if not tab or not key.isdigit():
                other.append(line[:200])
                continue
            i = int(key)
            if i >= n or value != value_of(i, size) or seen[i]:
                bad += 1
            else:
                seen[i] = 1
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        rc = proc.wait()
    took = time.monotonic() - t0
    missing = n - sum(seen)
    assert rc == 0 and bad == 0 and missing == 0, (
        f"rc {rc}, {bad} wrong or repeated, {missing} missing; other output {other[:5]}: {err[-2000:]}"
    )
    return took, n


def spark_read(bs: str, n: int, size: int) -> float:
    """Spark's Kafka source, a batch from the earliest offsets: every row's value checked
    against its key in SQL, and the keys counted."""
    from jars import connector_jars
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .config("spark.jars", ",".join(connector_jars()))
        .getOrCreate()
    )
    try:
        t0 = time.monotonic()
        reps = size // 64 + 1
        row = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bs)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr(
                "CAST(CAST(key AS STRING) AS BIGINT) AS k",
                f"value = CAST(substring(repeat(sha2(CAST(key AS STRING), 256), {reps}), 1, {size}) AS BINARY) AS ok",
            )
            .selectExpr(
                "count(*) AS c",
                "sum(CAST(ok AS INT)) AS good",
                "count(DISTINCT k) AS keys",
                "min(k) AS lo",
                "max(k) AS hi",
            )
            .collect()[0]
        )
        took = time.monotonic() - t0
    finally:
        spark.stop()
    assert (row.c, row.good, row.keys, row.lo, row.hi) == (n, n, n, 0, n - 1), row
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.tiered_acceptance")
    ap.add_argument("--gb", type=float, default=5.0)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--record-size", type=int, default=1000)
    ap.add_argument("--outage", type=float, default=60.0, help="seconds the object store is held")
    ap.add_argument("--down", type=float, default=10.0, help="seconds the killed leader stays down")
    ap.add_argument("--dir", help="where the nodes' data goes (default: a temporary directory)")
    args = ap.parse_args(argv)

    from polling import wait_until  # tests/polling.py
    from store_relay import StallingRelay  # tests/store_relay.py

    import logbroker
    from logbroker import Admin, NewTopic

    n = int(args.gb * 1e9 / args.record_size)
    moto, port = start_moto()
    relay = StallingRelay(("127.0.0.1", port))
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="tiered-acceptance-"))
    config = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.url": "s3://tier/acceptance",
        "rsm.config.aws_endpoint": f"http://127.0.0.1:{relay.port}",
        "rsm.config.aws_access_key_id": "test",
        "rsm.config.aws_secret_access_key": "test",
        "rsm.config.aws_region": "us-east-1",
        "rsm.config.aws_allow_http": "true",
        "remote.log.manager.task.interval.ms": "1000",
        "log.retention.check.interval.ms": "1000",
    }
    try:
        with logbroker.Cluster(3, data_dir=root / "c", config=config) as cluster:
            bs = cluster.bootstrap_servers
            with Admin(bs) as admin:
                admin.create_topics(
                    [
                        NewTopic(
                            TOPIC,
                            args.partitions,
                            3,
                            {
                                "remote.storage.enable": "true",
                                "local.retention.bytes": str(LOCAL),
                                "segment.bytes": str(SEGMENT),
                                "retention.ms": "-1",
                                "min.insync.replicas": "2",
                            },
                        )
                    ]
                )
            print(f"{n:,} records of {args.record_size} B ({args.gb:g} GB) to {args.partitions} partitions", flush=True)
            took = produce(cluster, relay, args, n)
            print(f"produced and acknowledged in {took:.0f} s ({args.gb * 1e3 / took:.1f} MB/s)", flush=True)
            wait_until(lambda: all(len(p.isr) == 3 for p in describe(bs).values()), 300, "every replica in the ISR")

            t0 = time.monotonic()
            ends = list_offsets(bs, args.partitions, "latest")

            per_segment = SEGMENT // (args.record_size + 70)  # records a segment holds, about

            def tiered_down() -> bool:
                local = list_offsets(bs, args.partitions, "earliest_local")
                tiered = list_offsets(bs, args.partitions, "latest_tiered")
                # everything but the active segment copied, and what is left locally at most the
                # local retention plus a segment
                return (
                    all(t >= e - 2 * per_segment for t, e in zip(tiered, ends))
                    and all((e - lo) * args.record_size <= LOCAL + 2 * SEGMENT for e, lo in zip(ends, local))
                    and all(topic_bytes(node) <= args.partitions * (LOCAL + 3 * SEGMENT) for node in cluster.nodes)
                )

            wait_until(tiered_down, 1800, "every broker's local part within local.retention.bytes")
            total = args.gb * 1e9
            print(f"tiered down {time.monotonic() - t0:.0f} s after the last acknowledgement", flush=True)
            for node in cluster.nodes:
                b = topic_bytes(node)
                print(f"  node {node.node_id}: {b / 1e6:,.0f} MB of {TOPIC} on disk ({b / total:.1%} of the topic)")

            took, _ = java_read(bs, n, args.record_size)
            print(
                f"Java ConsoleConsumer: {n:,} records checked in {took:.0f} s ({total / 1e6 / took:.1f} MB/s)",
                flush=True,
            )
            took = spark_read(bs, n, args.record_size)
            print(
                f"Spark batch (Kafka source): {n:,} rows checked in {took:.0f} s ({total / 1e6 / took:.1f} MB/s)",
                flush=True,
            )

            # the replacement: a node's partition data gone, then back in every ISR
            node = cluster.nodes[-1]
            node.stop()
            for d in node.data_dir.glob(f"{TOPIC}-*"):
                shutil.rmtree(d)
            t0 = time.monotonic()
            node.start()
            wait_until(
                lambda: all(node.node_id in p.isr for p in describe(bs).values()),
                1800,
                f"node {node.node_id} back in every ISR",
            )
            took = time.monotonic() - t0
            print(
                f"replacement: node {node.node_id} with empty partition directories back in every ISR in {took:.1f} s, "
                f"having copied {topic_bytes(node) / 1e6:,.0f} MB of the topic's {total / 1e6:,.0f} MB",
                flush=True,
            )
    finally:
        relay.close()
        moto.send_signal(signal.SIGTERM)
        moto.wait(30)
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
