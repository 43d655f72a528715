"""Iceberg topics (docs/lakehouse.md): what a topic that is also a table costs, and what
reading the table gains.

1. Lag: a confluent-kafka producer sends R records/s for D seconds to an `iceberg.enable`
   topic of one broker (`iceberg.commit.interval.ms` = I). Each record's lag is the
   timestamp of the first snapshot that holds it (from the snapshots' positions) minus
   its CreateTime (set by the producer at send). Reported: p50/p99 per interval.
2. CPU: N JSON records of about S bytes (an event of a web shop: ids, a page, a session,
   an amount; lz4, acks=all) produced as fast as they go to a plain topic and to an Iceberg
   topic, waiting until the table holds them all; broker CPU seconds per GB (/proc
   utime+stime of the broker process, first send to last row in the table), and data files
   per commit. With `--baseline-python P` the Iceberg run is repeated, in the same run, by
   another install of logbroker (P, a venv's python with an older wheel: the writer the
   numbers are compared with).
3. Stall: a probe producer sends 1,000 records/s to a plain topic (acks=all) while another
   process produces the CPU part's records as fast as it can to a plain topic, then to an
   Iceberg topic; p50/p99 of the probe's delivery latency in each case.
4. Scan: Spark 4.1 (local[2]; spark/iceberg_env.py) reads every row of the table
   (`spark.read.table`, Iceberg's own runtime) and the same records through Spark's Kafka
   source, and sums the value lengths; median seconds of the runs, ratio.

    python -m benches.bench_iceberg_topics [--records 1000000] [--size 200] [--runs 3]
        [--rate 2000] [--seconds 20] [--intervals 1000,10000] [--skip-spark] [--skip-lag]
        [--skip-stall] [--skip-cpu] [--baseline-python PATH]

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


def lake_config(base: Path, commit_interval_ms: int = 1000) -> dict:
    """Broker config for a catalog (SQLite) and warehouse under `base`."""
    return {
        "iceberg.catalog.uri": f"sqlite:///{base / 'catalog.db'}",
        "iceberg.warehouse": str(base / "warehouse"),
        "iceberg.commit.interval.ms": commit_interval_ms,
    }


def produce(
    bs: str,
    topic: str,
    values: list[bytes],
    rate: float | None = None,
    keys: list[bytes] | None = None,
    partitions: int = 2,
) -> None:
    """`values` (None: a tombstone) round-robin over `partitions`, or with `keys` by key
    (its last byte modulo `partitions`), lz4, acks=all; at `rate` records/s if given."""
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
        key = keys[i] if keys is not None else None
        part = key[-1] % partitions if key is not None else i % partitions
        while True:
            try:
                p.produce(topic, v, key=key, partition=part)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(120) == 0


PAGES = ["/", "/search", "/cart", "/checkout", "/account", "/help"] + [f"/products/{i}" for i in range(200)]
REFERRERS = ["", "https://www.google.com/", "https://news.example.org/a/b", "https://mail.example.com/"]
AGENTS = ["Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1)", "curl/8.4.0"]


def event_values(n: int, size: int, seed: int = 7) -> list[bytes]:
    """`n` JSON events of a web shop, about `size` bytes each (padded by a note), as an
    application writes them: repeated keys, varied ids and text."""
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        e = {
            "event_id": i,
            "user_id": rnd.randrange(1_000_000),
            "session": f"{rnd.getrandbits(64):016x}",
            "type": rnd.choice(("view", "view", "view", "click", "cart", "buy")),
            "page": rnd.choice(PAGES),
            "referrer": rnd.choice(REFERRERS),
            "agent": rnd.choice(AGENTS),
            "amount": round(rnd.random() * 200, 2),
        }
        v = json.dumps(e, separators=(",", ":")).encode()
        if len(v) < size:
            v = v[:-1] + b',"note":"' + bytes(rnd.choices(b"abcdefghij klmnop", k=max(0, size - len(v) - 10))) + b'"}'
        out.append(v)
    return out


def lag(bs: str, base: Path, topic: str, rate: int, seconds: int) -> dict:
    """Per-record lag from CreateTime to the first snapshot holding it (ms)."""
    produce(bs, topic, event_values(rate * seconds, 200), rate=rate)
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
        deadline = time.monotonic() + 1800
        while table_count(base, topic) < len(values) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert table_count(base, topic) == len(values)
    return (cpu_seconds(pid) - cpu0) / (sum(map(len, values)) / 1e9)


def files_per_commit(base: Path, topic: str) -> float:
    """Median data files added by the broker's commits (snapshots with a position)."""
    table = catalog(base).load_table(f"logbroker.{topic}")
    added = [
        int(s.summary.additional_properties.get("added-data-files", 0))
        for s in table.snapshots()
        if "logbroker.offsets" in s.summary.additional_properties
    ]
    return statistics.median(added) if added else 0.0


def cpu_runs(root: Path, records: int, size: int, runs: int, kinds: list[str], spark: bool = False) -> dict:
    """CPU per GB (medians of `runs`) and files per commit, for each of `kinds` (plain, iceberg);
    with `spark`, the Spark scans of the first Iceberg topic too."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from logbroker import Cluster

    base = root / "iceberg"
    config = lake_config(base)
    values = event_values(records, size)
    out: dict = {}
    with Cluster(1, data_dir=root / "cpu", config=config) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        cpu: dict[str, list[float]] = {k: [] for k in kinds}
        files: list[float] = []
        for r in range(runs):
            for kind in kinds:
                topic = f"{kind}_{r}"
                conf = {"iceberg.enable": "true"} if kind == "iceberg" else {}
                admin.create_topics([NewTopic(topic, 2, 1, config=conf)])[topic].result(30)
                cpu[kind].append(
                    cpu_per_gb(c.bootstrap_servers, c.nodes[0].pid, base, topic, values, kind == "iceberg")
                )
                if kind == "iceberg":
                    files.append(files_per_commit(base, topic))
        out["cpu_s_per_gb"] = {k: statistics.median(v) for k, v in cpu.items()}
        out["cpu_s_per_gb_runs"] = cpu
        if files:
            out["files_per_commit"] = statistics.median(files)
        if spark:
            out["scan_s"] = scan(c.bootstrap_servers, base, "iceberg_0", runs)
    return out


def stall(root: Path, records: int, size: int) -> dict:
    """p50/p99 delivery latency (ms) of a 1,000/s probe on a plain topic while another process
    loads a plain topic, then an Iceberg topic, with `records` records as fast as it can."""
    import subprocess

    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from logbroker import Cluster

    base = root / "stall-iceberg"
    config = lake_config(base)
    out = {}
    with Cluster(1, data_dir=root / "stall", config=config) as c:
        bs = c.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for kind in ("plain", "iceberg"):
            conf = {"iceberg.enable": "true"} if kind == "iceberg" else {}
            for t, cf in ((f"load_{kind}", conf), (f"probe_{kind}", {})):
                admin.create_topics([NewTopic(t, 2, 1, config=cf)])[t].result(30)
            load = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benches.bench_iceberg_topics",
                    "--load",
                    bs,
                    f"load_{kind}",
                    str(records),
                    str(size),
                ],
                cwd=ROOT,
            )
            lat: list[float] = []
            p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0})
            t0 = time.monotonic()
            i = 0
            while load.poll() is None:
                delay = t0 + i / 1000 - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                sent = time.monotonic()
                p.produce(
                    f"probe_{kind}",
                    b"x" * 100,
                    on_delivery=lambda err, msg, sent=sent, lat=lat: lat.append((time.monotonic() - sent) * 1000),
                )
                p.poll(0)
                i += 1
            assert load.wait() == 0
            p.flush(30)
            if kind == "iceberg":
                deadline = time.monotonic() + 1800
                while table_count(base, f"load_{kind}") < records and time.monotonic() < deadline:
                    time.sleep(0.2)
            out[kind] = {"p50_ms": statistics.median(lat), "p99_ms": pct(lat, 0.99), "probes": len(lat)}
            print(
                f"probe latency during a {kind} load: p50 {out[kind]['p50_ms']:.1f} ms, p99 {out[kind]['p99_ms']:.1f} ms",
                flush=True,
            )
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--load"]:  # the stall part's load process
        bs, topic, records, size = argv[1], argv[2], int(argv[3]), int(argv[4])
        produce(bs, topic, event_values(records, size))
        return 0
    if argv[:1] == ["--cpu-only"]:  # run by --baseline-python: the Iceberg CPU part only
        root, records, size, runs = Path(argv[1]), int(argv[2]), int(argv[3]), int(argv[4])
        print(json.dumps(cpu_runs(root, records, size, runs, ["iceberg"])))
        return 0
    ap = argparse.ArgumentParser(prog="python -m benches.bench_iceberg_topics")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--intervals", default="1000,10000")
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--skip-lag", action="store_true")
    ap.add_argument("--skip-stall", action="store_true")
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument("--baseline-python", help="a python with another logbroker install, for its Iceberg CPU")
    args = ap.parse_args(argv)
    from confluent_kafka.admin import AdminClient, NewTopic

    from logbroker import Cluster

    out: dict = {}
    intervals = [] if args.skip_lag else [int(x) for x in args.intervals.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-iceberg-") as root:
        base = Path(root) / "iceberg"
        for interval in intervals:
            config = lake_config(base, interval)
            with Cluster(1, data_dir=Path(root) / f"lag-{interval}", config=config) as c:
                admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
                topic = f"lag_{interval}"
                admin.create_topics([NewTopic(topic, 2, 1, config={"iceberg.enable": "true"})])[topic].result(30)
                out[f"lag_{interval}ms"] = row = lag(c.bootstrap_servers, base, topic, args.rate, args.seconds)
                print(
                    f"commit interval {interval} ms: lag p50 {row['p50_ms']:.0f} ms, p99 {row['p99_ms']:.0f} ms",
                    flush=True,
                )
        if not args.skip_cpu:
            out.update(
                cpu_runs(Path(root), args.records, args.size, args.runs, ["plain", "iceberg"], not args.skip_spark)
            )
            cpu = out["cpu_s_per_gb"]
            print(
                f"broker CPU per GB: plain {cpu['plain']:.2f} s, iceberg {cpu['iceberg']:.2f} s "
                f"({cpu['iceberg'] / cpu['plain']:.2f}x), {out.get('files_per_commit', 0):.0f} data files per commit",
                flush=True,
            )
            if args.baseline_python:
                import subprocess

                res = subprocess.run(
                    [
                        args.baseline_python,
                        "-m",
                        "benches.bench_iceberg_topics",
                        "--cpu-only",
                        str(Path(root) / "baseline"),
                        str(args.records),
                        str(args.size),
                        str(args.runs),
                    ],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                out["baseline"] = b = json.loads(res.stdout.strip().splitlines()[-1])
                print(
                    f"baseline ({args.baseline_python}): iceberg {b['cpu_s_per_gb']['iceberg']:.2f} s per GB "
                    f"({b['cpu_s_per_gb']['iceberg'] / cpu['plain']:.2f}x this run's plain; this writer "
                    f"{cpu['iceberg'] / b['cpu_s_per_gb']['iceberg']:.2f}x the baseline's), "
                    f"{b.get('files_per_commit', 0):.0f} data files per commit",
                    flush=True,
                )
        if not args.skip_stall:
            out["stall"] = stall(Path(root), args.records, args.size)
        if "scan_s" in out:
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
