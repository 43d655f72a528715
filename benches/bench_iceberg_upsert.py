"""Upsert tables (docs/lakehouse.md, "Upsert tables"): what keeping one row per key costs the
broker beside an append table and a plain topic, and what a key index rebuild costs as the
keys grow.

KEYS keys updated UPDATES times each (a shuffled pass over the keys per update; one record in
ten a tombstone), JSON values of about SIZE bytes (bench_iceberg_topics.event_values; lz4,
acks=all), to three topics of two partitions on one broker: plain, iceberg (append) and
upsert (`iceberg.upsert.enable`). For each: broker CPU seconds per GB of values from the
first record produced until the table's position reaches the log end (/proc utime+stime),
and for the tables the rows and files they end with. Then the broker restarts and one more
record per partition is produced to the upsert topic: the seconds until that commit lands
are the key index rebuild (both partitions' live keys read from the table) plus one commit,
and the broker's log line gives the rebuild's own time.

    python -m benches.bench_iceberg_upsert [--keys 100000] [--updates 10] [--size 200]

Not in CI (minutes); tests/test_iceberg_upsert.py checks the result at 10,000 keys.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benches.bench_iceberg_topics import catalog, event_values, lake_config, produce  # noqa: E402
from benches.peers.common import cpu_seconds  # noqa: E402

PARTITIONS = 2


def stream(keys: int, updates: int, size: int, seed: int = 11) -> list[tuple[bytes, bytes | None]]:
    values = event_values(min(keys, 200_000), size)
    rng = random.Random(seed)
    out: list[tuple[bytes, bytes | None]] = []
    for _ in range(updates):
        order = list(range(keys))
        rng.shuffle(order)
        for k in order:
            value = None if rng.random() < 0.1 else values[rng.randrange(len(values))]
            out.append((f"customer-{k:09d}".encode(), value))
    return out


def position(base: Path, topic: str) -> dict[int, int]:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        s = catalog(base).load_table(f"logbroker.{topic}").current_snapshot()
    except NoSuchTableError:
        return {}
    if s is None:
        return {}
    return {int(p): o for p, o in json.loads(s.summary.additional_properties["logbroker.offsets"]).items()}


def ends(bs: str, topic: str) -> dict[int, int]:
    from logbroker import Admin, TopicPartition

    with Admin(bs) as admin:
        got = admin.list_offsets({(topic, p): "latest" for p in range(PARTITIONS)})
    return {p: got[TopicPartition(topic, p)][0] for p in range(PARTITIONS)}


def wait_committed(bs: str, base: Path, topic: str, timeout: float = 1800) -> float:
    t0 = time.monotonic()
    want = ends(bs, topic)
    while position(base, topic) != want:
        assert time.monotonic() - t0 < timeout, f"{topic}: the table did not reach {want} in {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - t0


def table_shape(base: Path, topic: str) -> dict:
    t = catalog(base).load_table(f"logbroker.{topic}")
    props = t.current_snapshot().summary.additional_properties
    t0 = time.monotonic()
    rows = t.scan(selected_fields=("key",)).to_arrow().num_rows
    return {
        "rows_read": rows,
        "pyiceberg_scan_s": round(time.monotonic() - t0, 2),
        "data_files": int(props.get("total-data-files", 0)),
        "delete_files": int(props.get("total-delete-files", 0)),
        "position_deletes": int(props.get("total-position-deletes", 0)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--updates", type=int, default=10)
    ap.add_argument("--size", type=int, default=200)
    args = ap.parse_args(argv)

    from confluent_kafka.admin import AdminClient, NewTopic

    from logbroker import Cluster

    records = stream(args.keys, args.updates, args.size)
    gb = sum(len(v) for _, v in records if v is not None) / 1e9
    live = {}
    for k, v in records:
        live[k] = v
    out: dict = {"keys": args.keys, "updates": args.updates, "records": len(records)}
    out["live_keys"] = sum(1 for v in live.values() if v is not None)
    with tempfile.TemporaryDirectory(prefix="bench-upsert-") as tmp:
        root = Path(tmp)
        base = root / "iceberg"
        config = lake_config(base)
        with Cluster(1, data_dir=root / "data", config=config) as c:
            bs = c.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bs})
            kinds = {
                "plain": {},
                "iceberg": {"iceberg.enable": "true"},
                "upsert": {"iceberg.enable": "true", "iceberg.upsert.enable": "true"},
            }
            cpu = {}
            for topic, conf in kinds.items():
                admin.create_topics([NewTopic(topic, PARTITIONS, 1, config=conf)])[topic].result(30)
                pid = c.nodes[0].pid
                cpu0 = cpu_seconds(pid)
                produce(bs, topic, [v for _, v in records], keys=[k for k, _ in records], partitions=PARTITIONS)
                if conf:
                    wait_committed(bs, base, topic)
                cpu[topic] = round((cpu_seconds(pid) - cpu0) / gb, 2)
            out["cpu_s_per_gb"] = cpu
            out["upsert_over_iceberg"] = round(cpu["upsert"] / cpu["iceberg"], 2)
            out["upsert_over_plain"] = round(cpu["upsert"] / cpu["plain"], 2)
            out["tables"] = {t: table_shape(base, t) for t in ("iceberg", "upsert")}
            assert out["tables"]["upsert"]["rows_read"] == out["live_keys"], out
            node = c.nodes[0]
            node.stop()
            node.start()
            t0 = time.monotonic()
            produce(bs, "upsert", [b"{}", b"{}"], keys=[b"customer-000000000", b"customer-000000001"])
            wait_committed(bs, base, "upsert")
            out["restart_first_commit_s"] = round(time.monotonic() - t0, 2)
            lines = [ln for ln in node.log_text().splitlines() if "key index of partition" in ln]
            out["rebuild_log"] = [ln.split("table ", 1)[-1] for ln in lines[-PARTITIONS:]]
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
