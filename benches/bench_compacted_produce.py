"""Broker CPU per GB of produce to a compacted topic beside a plain one (docs/decisions.md,
"The columnar decoder checks and decodes a batch in one walk"): a compacted topic's leader
checks that every record has a key, which it reads in the walk that validates the batch.

N keyed JSON records of about 200 B (50,000 keys, lz4, acks=all, 2 partitions) produced as
fast as they go to a plain topic, then to a compacted one (`min.cleanable.dirty.ratio` 0.99,
so the cleaner stays out of the figure), `--runs` times in one broker; medians of the broker
process's CPU seconds (/proc utime+stime) per GB of values, and their ratio.

Then the cleaning: the compacted topics (8 MiB segments, so all but the active one are
cleanable) are made dirty enough (`min.cleanable.dirty.ratio` 0.01) and the broker's CPU is
counted until their size on disk is under half and has not changed for 2 s (the cleaner
checks every 200 ms here): seconds per GB of values cleaned, those 2 s included.

    python -m benches.bench_compacted_produce [--records 3000000] [--runs 3]

Not in CI (a minute or two).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benches.bench_iceberg_topics import event_values, produce  # noqa: E402
from benches.peers.common import cpu_seconds  # noqa: E402


def cleaning(c, topics: list[str]) -> float:
    """Broker CPU seconds from making `topics` cleanable until their size on disk has not
    changed for 5 s."""
    from logbroker import Admin

    with Admin(c.bootstrap_servers) as admin:
        node = c.nodes[0]

        def size() -> int:
            return sum(n for tp, n in admin.describe_log_dirs(node.node_id).items() if tp.topic in topics)

        before = cpu_seconds(node.pid)
        admin.alter_configs({("topic", t): {"min.cleanable.dirty.ratio": "0.01"} for t in topics})
        start = last = size()
        still = 0
        while last > start // 2 or still < 4:  # cleaned (well under half), then 2 s without a change
            time.sleep(0.5)
            now = size()
            still = still + 1 if now == last else 0
            last = now
        print(f"cleaning: {start:,} bytes on disk to {last:,}")
        return cpu_seconds(node.pid) - before


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    from logbroker import Cluster

    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    values = event_values(args.records, 200)
    keys = [b"key-%06d" % (i % 50_000) for i in range(args.records)]
    gb = sum(map(len, values)) / 1e9
    cpu: dict[str, list[float]] = {"plain": [], "compacted": []}
    with (
        tempfile.TemporaryDirectory() as tmp,
        Cluster(1, data_dir=Path(tmp), config={"log.cleaner.backoff.ms": 200}) as c,
    ):
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        for r in range(args.runs):
            for kind, conf in (
                ("plain", {}),
                (
                    "compacted",
                    {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.99", "segment.bytes": str(8 << 20)},
                ),
            ):
                topic = f"{kind}_{r}"
                admin.create_topics([NewTopic(topic, 2, 1, config=conf)])[topic].result(30)
                before = cpu_seconds(c.nodes[0].pid)
                produce(c.bootstrap_servers, topic, values, keys=keys)
                cpu[kind].append((cpu_seconds(c.nodes[0].pid) - before) / gb)
        clean = cleaning(c, [f"compacted_{r}" for r in range(args.runs)])
        print(f"cleaning: broker CPU {clean / (gb * args.runs):.2f} s per GB of values cleaned")
    plain, compacted = statistics.median(cpu["plain"]), statistics.median(cpu["compacted"])
    print(f"broker CPU per GB: plain {plain:.2f} s, compacted {compacted:.2f} s ({compacted / plain:.2f}x)")
    print({k: [round(x, 3) for x in v] for k, v in cpu.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
