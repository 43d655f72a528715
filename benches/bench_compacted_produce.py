"""Broker CPU per GB of produce to a compacted topic beside a plain one (docs/decisions.md,
"The columnar decoder checks and decodes a batch in one walk"): a compacted topic's leader
checks that every record has a key, which it reads in the walk that validates the batch.

N keyed JSON records of about 200 B (50,000 keys, lz4, acks=all, 2 partitions) produced as
fast as they go to a plain topic, then to a compacted one (`min.cleanable.dirty.ratio` 0.99,
so the cleaner stays out of the figure), `--runs` times in one broker; medians of the broker
process's CPU seconds (/proc utime+stime) per GB of values, and their ratio.

    python -m benches.bench_compacted_produce [--records 3000000] [--runs 3]

Not in CI (a minute or two).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benches.bench_iceberg_topics import event_values, produce  # noqa: E402
from benches.peers.common import cpu_seconds  # noqa: E402


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
    with tempfile.TemporaryDirectory() as tmp, Cluster(1, data_dir=Path(tmp)) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        for r in range(args.runs):
            for kind, conf in (
                ("plain", {}),
                ("compacted", {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.99"}),
            ):
                topic = f"{kind}_{r}"
                admin.create_topics([NewTopic(topic, 2, 1, config=conf)])[topic].result(30)
                before = cpu_seconds(c.nodes[0].pid)
                produce(c.bootstrap_servers, topic, values, keys=keys)
                cpu[kind].append((cpu_seconds(c.nodes[0].pid) - before) / gb)
    plain, compacted = statistics.median(cpu["plain"]), statistics.median(cpu["compacted"])
    print(f"broker CPU per GB: plain {plain:.2f} s, compacted {compacted:.2f} s ({compacted / plain:.2f}x)")
    print({k: [round(x, 3) for x in v] for k, v in cpu.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
