"""The table as the tier (docs/lakehouse.md, "The table as the tier"): what an Iceberg topic
with `remote.storage.enable=true` stores, and what reading its history from the table costs.

N JSON events of about S bytes (bench_iceberg_topics.event_values; lz4, acks=all) go to a
plain topic and to a table-tier topic (`iceberg.enable`, `remote.storage.enable`,
`local.retention.bytes=1`, 16 MiB segments by default) on one broker. Once the table holds every record
and local retention has run:
- storage: bytes of the plain topic's log, of the tier topic's local log (its active
  segment), and of the table's data files (Parquet, zstd) and metadata;
- reads: a confluent-kafka consumer (read_committed) reads every record from offset 0 of
  each topic, `--runs` times: seconds, MB/s of record values, and broker CPU seconds per GB
  of values (/proc utime+stime), medians; the tier topic's reads come from the table's data
  files (rust/src/table/tier_reader.rs), the plain topic's from its segments.

    python -m benches.bench_iceberg_tier [--records 1000000] [--size 200] [--runs 3]
        [--segment-bytes 16777216]

Not in CI (minutes).
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

from benches.bench_iceberg_topics import event_values, lake_config, produce, table_count  # noqa: E402
from benches.peers.common import cpu_seconds  # noqa: E402

PARTITIONS = 2


def dir_bytes(path: Path, suffix: str = "") -> int:
    return sum(f.stat().st_size for f in path.rglob(f"*{suffix}") if f.is_file())


def log_bytes(data: Path, topic: str) -> int:
    return sum(dir_bytes(data / f"{topic}-{p}", ".log") for p in range(PARTITIONS))


def read_all(bs: str, topic: str, records: int, pid: int) -> tuple[float, float, int]:
    """Every record from offset 0: (seconds, broker CPU seconds, value bytes)."""
    import confluent_kafka

    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"bench-{topic}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.max.bytes": 52428800,
        }
    )
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    n, size = 0, 0
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    deadline = t0 + 600
    while n < records:
        assert time.monotonic() < deadline, f"{topic}: read {n} of {records} records"
        for m in c.consume(10_000, 1.0):
            assert m.error() is None, m.error()
            n += 1
            size += len(m.value())
    seconds, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    c.close()
    return seconds, cpu, size


def wait_tiered(bs: str, data: Path, base: Path, topic: str, records: int) -> float:
    """Waits for the table (catalog and warehouse under `base`) to hold every record and the
    local log (under `data`) to keep one segment per partition; returns the seconds waited."""
    from logbroker import Admin, TopicPartition

    t0 = time.monotonic()
    while time.monotonic() - t0 < 900:
        if table_count(base, topic) >= records:
            with Admin(bs) as admin:
                local = admin.list_offsets({(topic, p): "earliest_local" for p in range(PARTITIONS)})
                ends = admin.list_offsets({(topic, p): "latest" for p in range(PARTITIONS)})
            segments = [len(list((data / f"{topic}-{p}").glob("*.log"))) for p in range(PARTITIONS)]
            starts = [local[TopicPartition(topic, p)][0] for p in range(PARTITIONS)]
            if all(s == 1 for s in segments) and all(
                s > 0 or ends[TopicPartition(topic, p)][0] == 0 for p, s in enumerate(starts)
            ):
                return time.monotonic() - t0
        time.sleep(1.0)
    raise AssertionError(f"{topic}: the table did not take over the history in 900 s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--segment-bytes", type=int, default=16 << 20)
    args = ap.parse_args(argv)

    from confluent_kafka.admin import AdminClient, NewTopic

    from logbroker import Cluster

    out: dict = {"records": args.records, "size": args.size}
    with tempfile.TemporaryDirectory(prefix="bench-tier-") as tmp:
        root = Path(tmp)
        base = root / "iceberg"
        config = lake_config(base) | {"log.retention.check.interval.ms": 1000}
        values = event_values(args.records, args.size)
        with Cluster(1, data_dir=root / "data", config=config) as c:
            data = Path(c.nodes[0].data_dir)
            bs, pid = c.bootstrap_servers, c.nodes[0].pid
            admin = AdminClient({"bootstrap.servers": bs})
            segment = {"segment.bytes": str(args.segment_bytes)}
            tier = {**segment, "iceberg.enable": "true", "remote.storage.enable": "true", "local.retention.bytes": "1"}
            for topic, conf in (("plain", segment), ("tier", tier)):
                admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=conf)])[topic].result(30)
                produce(bs, topic, values)
            out["tier_wait_s"] = round(wait_tiered(bs, data, base, "tier", args.records), 1)
            out["storage_bytes"] = {
                "plain_log": log_bytes(data, "plain"),
                "tier_local_log": log_bytes(data, "tier"),
                "tier_table_data": dir_bytes(base / "warehouse", ".parquet"),
                "tier_table_metadata": dir_bytes(base / "warehouse") - dir_bytes(base / "warehouse", ".parquet"),
            }
            runs: dict[str, list[tuple[float, float, int]]] = {"plain": [], "tier": []}
            for _ in range(args.runs):
                for topic in runs:
                    runs[topic].append(read_all(bs, topic, args.records, pid))
            reads = {}
            for topic, rs in runs.items():
                gb = rs[0][2] / 1e9
                reads[topic] = {
                    "seconds": round(statistics.median(r[0] for r in rs), 2),
                    "mb_per_s": round(statistics.median(r[2] / 1e6 / r[0] for r in rs), 1),
                    "broker_cpu_s_per_gb": round(statistics.median(r[1] / gb for r in rs), 2),
                }
            reads["tier_over_plain_seconds"] = round(reads["tier"]["seconds"] / reads["plain"]["seconds"], 2)
            out["reads"] = reads
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
