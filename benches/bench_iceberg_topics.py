"""Iceberg topics (docs/lakehouse.md): what a topic that is also a table costs, and what
reading the table gains.

1. Lag: a confluent-kafka producer sends R records/s for D seconds to an `iceberg.enable`
   topic of one broker (`iceberg.commit.interval.ms` = I). Each record's lag is the
   timestamp of the first snapshot that holds it (from the snapshots' positions) minus
   its CreateTime (set by the producer at send). Reported: p50/p99 per interval.
2. CPU: N records of S bytes (lz4, acks=all) produced as fast as they go to a plain topic
   and to an Iceberg topic, waiting until the table holds them all; broker CPU seconds per
   GB (/proc utime+stime of the broker process, first send to last row in the table).
3. Scan: Spark 4.1 (local[2]; spark/iceberg_env.py) reads every row of the table
   (`spark.read.table`, Iceberg's own runtime) and the same records through Spark's Kafka
   source, and sums the value lengths; median seconds of the runs, ratio.

    python -m benches.bench_iceberg_topics [--records 1000000] [--size 200] [--runs 3]
        [--rate 2000] [--seconds 20] [--intervals 1000,10000] [--skip-spark]

Not in CI (minutes, and Spark).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "spark"))

from benches.peers.common import cpu_seconds  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def catalog(base: Path):
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("logbroker", uri=f"sqlite:///{base / 'catalog.db'}", warehouse=(base / "warehouse").as_uri())


def table_count(base: Path, topic: str) -> int:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        t = catalog(base).load_table(f"logbroker.{topic}")
    except NoSuchTableError:
        return 0
    s = t.current_snapshot()
    return int(s.summary.additional_properties.get("total-records", 0)) if s is not None else 0


def produce(bs: str, topic: str, values: list[bytes], rate: float | None = None) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bs,
            "linger.ms": 5,
            "batch.size": 262144,
            "acks": "all",
            "compression.type": "lz4",
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    t0 = time.monotonic()
    for i, v in enumerate(values):
        if rate is not None:
            delay = t0 + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        while True:
            try:
                p.produce(topic, v, partition=i % 2)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(120) == 0


def lag(bs: str, base: Path, topic: str, rate: int, seconds: int) -> dict:
    """Per-record lag from CreateTime to the first snapshot holding it (ms)."""
    produce(bs, topic, [b"x" * 100] * (rate * seconds), rate=rate)
    deadline = time.monotonic() + 300
    while table_count(base, topic) < rate * seconds and time.monotonic() < deadline:
        time.sleep(0.2)
    table = catalog(base).load_table(f"logbroker.{topic}")
    rows = table.scan(selected_fields=("partition", "offset", "timestamp")).to_arrow()
    created = {
        (p, o): us // 1000
        for p, o, us in zip(
            rows.column("partition").to_pylist(),
            rows.column("offset").to_pylist(),
            rows.column("timestamp").cast("int64").to_pylist(),
        )
    }
    snaps = sorted(
        (
            s
            for s in table.snapshots()
            if "logbroker.offsets" in s.summary.additional_properties and s.summary.operation.value == "append"
        ),
        key=lambda s: s.timestamp_ms,
    )
    lags: list[float] = []
    prev: dict[int, int] = {}
    for s in snaps:
        cur = {int(p): o for p, o in json.loads(s.summary.additional_properties["logbroker.offsets"]).items()}
        for p, end in cur.items():
            for o in range(prev.get(p, 0), end):
                if (p, o) in created:
                    lags.append(s.timestamp_ms - created[(p, o)])
        prev = cur
    assert len(lags) == len(created) == rate * seconds, (len(lags), len(created))
    return {"p50_ms": statistics.median(lags), "p99_ms": pct(lags, 0.99)}


def cpu_per_gb(bs: str, pid: int, base: Path, topic: str, values: list[bytes], table: bool) -> float:
    cpu0 = cpu_seconds(pid)
    produce(bs, topic, values)
    if table:
        deadline = time.monotonic() + 600
        while table_count(base, topic) < len(values) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert table_count(base, topic) == len(values)
    return (cpu_seconds(pid) - cpu0) / (sum(map(len, values)) / 1e9)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.bench_iceberg_topics")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--intervals", default="1000,10000")
    ap.add_argument("--skip-spark", action="store_true")
    args = ap.parse_args(argv)
    from confluent_kafka.admin import AdminClient, NewTopic

    from logbroker import Cluster

    out: dict = {}
    intervals = [int(x) for x in args.intervals.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-iceberg-") as root:
        base = Path(root) / "iceberg"
        for interval in intervals:
            config = {
                "iceberg.catalog.uri": f"sqlite:///{base / 'catalog.db'}",
                "iceberg.warehouse": str(base / "warehouse"),
                "iceberg.commit.interval.ms": interval,
            }
            with Cluster(1, data_dir=Path(root) / f"lag-{interval}", config=config) as c:
                admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
                topic = f"lag_{interval}"
                admin.create_topics([NewTopic(topic, 2, 1, config={"iceberg.enable": "true"})])[topic].result(30)
                out[f"lag_{interval}ms"] = row = lag(c.bootstrap_servers, base, topic, args.rate, args.seconds)
                print(
                    f"commit interval {interval} ms: lag p50 {row['p50_ms']:.0f} ms, p99 {row['p99_ms']:.0f} ms",
                    flush=True,
                )
        config = {
            "iceberg.catalog.uri": f"sqlite:///{base / 'catalog.db'}",
            "iceberg.warehouse": str(base / "warehouse"),
            "iceberg.commit.interval.ms": 1000,
        }
        with Cluster(1, data_dir=Path(root) / "cpu", config=config) as c:
            node = c.nodes[0]
            bs = c.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bs})
            values = [(f"{i:012d}".encode() * (args.size // 12 + 1))[: args.size] for i in range(args.records)]
            cpu: dict[str, list[float]] = {"plain": [], "iceberg": []}
            for r in range(args.runs):
                for kind in cpu:
                    topic = f"{kind}_{r}"
                    conf = {"iceberg.enable": "true"} if kind == "iceberg" else {}
                    admin.create_topics([NewTopic(topic, 2, 1, config=conf)])[topic].result(30)
                    cpu[kind].append(cpu_per_gb(bs, node.pid, base, topic, values, kind == "iceberg"))
            out["cpu_s_per_gb"] = {k: statistics.median(v) for k, v in cpu.items()}
            print(
                f"broker CPU per GB: plain {out['cpu_s_per_gb']['plain']:.2f} s, iceberg "
                f"{out['cpu_s_per_gb']['iceberg']:.2f} s "
                f"({out['cpu_s_per_gb']['iceberg'] / out['cpu_s_per_gb']['plain']:.2f}x)",
                flush=True,
            )
            if not args.skip_spark:
                out["scan_s"] = scan(bs, base, "iceberg_0", args.runs)
                s = out["scan_s"]
                print(
                    f"Spark scan of {args.records} records: table {s['table']:.2f} s, Kafka source "
                    f"{s['kafka']:.2f} s (table/kafka {s['table'] / s['kafka']:.2f}x)",
                    flush=True,
                )
    print(json.dumps(out))
    return 0


def scan(bs: str, base: Path, topic: str, runs: int) -> dict:
    """Spark 4.1 (spark/iceberg_env.py; Iceberg's runtime exists for 4.1 at newest) reads the
    table and the topic, `runs` timed scans each (spark/iceberg_read.py --time-scans)."""
    import subprocess

    from iceberg_env import iceberg_python

    res = subprocess.run(
        [
            str(iceberg_python()),
            str(ROOT / "spark" / "iceberg_read.py"),
            "--db",
            str(base / "catalog.db"),
            "--warehouse",
            str(base / "warehouse"),
            "--table",
            f"logbroker.{topic}",
            "--kafka-bootstrap",
            bs,
            "--kafka-topic",
            topic,
            "--time-scans",
            str(runs),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**__import__("os").environ, "PYSPARK_PYTHON": str(iceberg_python())},
    )
    if res.returncode != 0:
        raise RuntimeError(f"the Spark scan failed: {res.stderr[-3000:]}")
    times = json.loads(res.stdout.strip().splitlines()[-1])["scan_s"]
    return {k: statistics.median(v) for k, v in times.items()}


if __name__ == "__main__":
    sys.exit(main())
