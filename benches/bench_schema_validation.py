"""What confluent.value.schema.validation costs on the produce path: one broker serving the
schema registry, one topic with validation and one without, a confluent-kafka producer sending
the same N records of S bytes (each in Confluent's framing with a registered schema id, as a
serializer writes them; lz4 batches, acks=all) to each in turn. Reported per topic: produce
MB/s (record bytes from first send to last ack) and broker CPU seconds per GB (/proc
utime+stime of the broker process over the same interval); medians of the runs, the ratio of
validated to not.

    python -m benches.bench_schema_validation [--records 300000] [--size 200] [--runs 3]

The check decompresses each batch to walk its records (as the compacted-topic key check
does), so the cost is one decompression and one walk per batch. Not in CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benches.peers.common import cpu_seconds  # noqa: E402

SCHEMA = json.dumps({"type": "record", "name": "Event", "fields": [{"name": "body", "type": "bytes"}]})


def one_run(bs: str, pid: int, topic: str, values: list[bytes]) -> dict:
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
    p.produce(topic, values[0])
    p.flush(30)
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    for v in values:
        while True:
            try:
                p.produce(topic, v)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(pid) - cpu0
    mb = sum(map(len, values)) / 1e6
    return {"mb_s": mb / elapsed, "cpu_s_per_gb": cpu / (mb / 1000)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.bench_schema_validation")
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    from confluent_kafka.admin import AdminClient, NewTopic
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from logbroker import Cluster

    with (
        tempfile.TemporaryDirectory(prefix="bench-validation-") as root,
        Cluster(1, data_dir=root, schema_registry=True) as c,
    ):
        node = c.nodes[0]
        sr = SchemaRegistryClient({"url": node.schema_registry_url})
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        results: dict[str, list[dict]] = {"validated": [], "plain": []}
        for r in range(args.runs):
            for kind in results:
                topic = f"{kind}-{r}"
                config = {"confluent.value.schema.validation": "true"} if kind == "validated" else {}
                admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)
                sid = sr.register_schema(f"{topic}-value", Schema(SCHEMA, "AVRO"))
                head = b"\x00" + struct.pack(">i", sid)
                values = [
                    head + (f"{i:012d}".encode() * (args.size // 12 + 1))[: args.size - 5] for i in range(args.records)
                ]
                results[kind].append(one_run(c.bootstrap_servers, node.pid, topic, values))
        sr.close()
    rows = {k: {m: statistics.median(r[m] for r in runs) for m in runs[0]} for k, runs in results.items()}
    for kind, row in rows.items():
        print(f"{kind:10} {row['mb_s']:7.1f} MB/s  {row['cpu_s_per_gb']:6.2f} CPU s/GB", flush=True)
    print(
        f"validated/plain: {rows['validated']['mb_s'] / rows['plain']['mb_s']:.2f}x MB/s, "
        f"{rows['validated']['cpu_s_per_gb'] / rows['plain']['cpu_s_per_gb']:.2f}x CPU per GB"
    )
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
