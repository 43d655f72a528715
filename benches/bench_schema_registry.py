"""What the schema registry costs as it grows: one broker with `schema.registry.listen`, N
subjects registered one schema each (Avro records of a few fields, every fourth subject a
second, compatible version), then lookups. Reported per N: registrations per second and their
latency (median, p99; each is a produce with acks=all read back), `GET /schemas/ids/{id}`
and `GET /subjects/{s}/versions/latest` per second, a restarted broker's time until its
registry answers (it reads `_schemas` from the start), and the broker's RSS after loading.
Plain HTTP/1.1 keep-alive from one client thread, as a serializer's cache misses would be.

    python -m benches.bench_schema_registry [--sizes 100,1000,10000] [--lookups 2000]

The sizes are 10x and 100x the hundreds the tests register, and beyond. Not in CI.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def schema(i: int, extra: bool) -> str:
    fields = [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "score", "type": "double"}]
    if extra:
        fields.append({"name": "tag", "type": "string", "default": ""})
    return json.dumps({"type": "record", "name": f"R{i}", "namespace": "bench", "fields": fields})


class Client:
    def __init__(self, host: str, port: int) -> None:
        self.conn = http.client.HTTPConnection(host, port, timeout=60)

    def call(self, method: str, path: str, body: dict | None = None) -> object:
        self.conn.request(
            method,
            path,
            body=None if body is None else json.dumps(body),
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        r = self.conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"{method} {path}: {r.status} {data[:200]!r}")
        return json.loads(data)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_size(n: int, lookups: int) -> dict:
    from logbroker import Cluster

    with (
        tempfile.TemporaryDirectory(prefix="bench-registry-") as root,
        Cluster(1, data_dir=root, schema_registry=True) as c,
    ):
        node = c.nodes[0]
        host, port = "127.0.0.1", node.registry_port
        client = Client(host, port)
        latencies, ids = [], []
        t0 = time.monotonic()
        for i in range(n):
            for extra in (False, True) if i % 4 == 0 else (False,):
                s = time.monotonic()
                ids.append(client.call("POST", f"/subjects/s{i}-value/versions", {"schema": schema(i, extra)})["id"])
                latencies.append(time.monotonic() - s)
        register_s = time.monotonic() - t0
        t0 = time.monotonic()
        for k in range(lookups):
            client.call("GET", f"/schemas/ids/{ids[(k * 7919) % len(ids)]}")
        by_id = lookups / (time.monotonic() - t0)
        t0 = time.monotonic()
        for k in range(lookups):
            client.call("GET", f"/subjects/s{(k * 7919) % n}-value/versions/latest")
        latest = lookups / (time.monotonic() - t0)
        node.stop()
        t0 = time.monotonic()
        node.start()
        client = Client(host, port)
        while True:
            try:
                if client.call("GET", f"/subjects/s{n - 1}-value/versions/latest"):
                    break
            except (RuntimeError, OSError):
                client = Client(host, port)
                time.sleep(0.05)
        restart_s = time.monotonic() - t0
        latencies.sort()
        return {
            "n": n,
            "registrations_per_s": len(latencies) / register_s,
            "register_p50_ms": 1000 * statistics.median(latencies),
            "register_p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
            "by_id_per_s": by_id,
            "latest_per_s": latest,
            "restart_to_ready_s": restart_s,
            "rss_mb": rss_mb(node.pid),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.bench_schema_registry")
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--lookups", type=int, default=2000)
    args = ap.parse_args(argv)
    rows = []
    for n in map(int, args.sizes.split(",")):
        row = one_size(n, args.lookups)
        rows.append(row)
        print(
            f"{n:6d} subjects: register {row['registrations_per_s']:7.1f}/s (p50 {row['register_p50_ms']:.1f} ms, "
            f"p99 {row['register_p99_ms']:.1f} ms); by id {row['by_id_per_s']:7.0f}/s; latest "
            f"{row['latest_per_s']:7.0f}/s; restart to ready {row['restart_to_ready_s']:.2f} s; "
            f"RSS {row['rss_mb']:.0f} MB",
            flush=True,
        )
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
