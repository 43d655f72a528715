"""Tiered storage (docs/operations.md, "Tiered storage"): what copying costs the produce
path, and how fast consumers read history back from the object store.

One broker (a `logbroker serve` process), the store a local directory on the same disk
(`file://`), `remote.log.manager.task.interval.ms` 1000, 8 MiB segments:
1. Produce: R records of S random bytes (confluent-kafka, uncompressed, acks=all, 2 partitions) to a plain
   topic and to a tiered one (`remote.storage.enable`, `local.retention.bytes` 1), runs
   alternating; MB/s of each (median of the runs), and the broker's CPU seconds per GB
   for the tiered run until every rolled segment is copied.
2. Consume: the same records read from offset 0 by a confluent-kafka consumer: the plain
   topic (local, page cache warm), the tiered one once its local log kept only the active
   segment, after a broker restart (remote, first read: nothing cached), and again (from
   the reader's cache). MB/s of each (median of the runs).

    python -m benches.bench_tiered_storage [--records 400000] [--size 500] [--runs 3]

Not in CI (minutes). Kafka 4.4 beside it (LocalTieredStorage from its test jar) is a later step.
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

from benches.peers.common import cpu_seconds  # noqa: E402

SEGMENT = 8 << 20


def produce(bs: str, topic: str, values: list[bytes]) -> float:
    """Seconds to produce and acknowledge every value."""
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bs,
            "linger.ms": 5,
            "batch.size": 262144,
            "acks": "all",
            "compression.type": "none",
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    t0 = time.monotonic()
    for i, v in enumerate(values):
        while True:
            try:
                p.produce(topic, v, partition=i % 2)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(300) == 0
    return time.monotonic() - t0


def consume(bs: str, topic: str, n: int) -> float:
    """Seconds to read n records of the topic's 2 partitions from offset 0, from the first
    record received (the consumer's start and its first round trip left out: they would
    swamp a read of a few hundred MB)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bs,
            "group.id": f"bench-{topic}-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 8388608,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    got = 0
    t0, first = 0.0, 0
    deadline = time.monotonic() + 600
    while got < n:
        assert time.monotonic() < deadline, f"read {got} of {n}"
        batch = c.consume(10000, 1.0)
        for m in batch:
            assert m.error() is None, m.error()
        if batch and not first:
            t0, first = time.monotonic(), len(batch)  # the clock starts after the first batch
        got += len(batch)
    took = time.monotonic() - t0
    c.close()
    return took * n / (n - first)  # as if the first batch had come at the same rate


def offsets(bs: str, topic: str, spec: str) -> list[int]:
    from logbroker import Admin, TopicPartition

    with Admin(bs) as admin:
        r = admin.list_offsets({(topic, p): spec for p in (0, 1)})
        return [r[TopicPartition(topic, p)][0] for p in (0, 1)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.bench_tiered_storage")
    ap.add_argument("--records", type=int, default=400_000)
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    import os

    from confluent_kafka.admin import AdminClient, NewTopic

    from logbroker import Cluster

    blob = os.urandom(args.records * args.size)  # incompressible: the bytes on disk are the bytes sent
    values = [blob[i * args.size : (i + 1) * args.size] for i in range(args.records)]
    mb = sum(map(len, values)) / 1e6
    res: dict[str, list[float]] = {k: [] for k in ("produce_plain", "produce_tiered", "cpu_per_gb_copied")}
    reads: dict[str, list[float]] = {k: [] for k in ("local", "remote_first", "remote_cached")}
    with tempfile.TemporaryDirectory(prefix="bench-tiered-") as root:
        config = {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.url": (Path(root) / "remote").as_uri(),
            "remote.log.manager.task.interval.ms": 1000,
            "log.retention.check.interval.ms": 1000,
        }
        with Cluster(1, data_dir=Path(root) / "c", config=config) as c:
            bs = c.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bs})
            topics = []
            for r in range(args.runs):
                for kind in ("plain", "tiered") if r % 2 == 0 else ("tiered", "plain"):  # neither always first
                    topic = f"{kind}_{r}"
                    conf = {"segment.bytes": str(SEGMENT), "retention.ms": "-1"}
                    if kind == "tiered":
                        conf |= {"remote.storage.enable": "true", "local.retention.bytes": "1"}
                    admin.create_topics([NewTopic(topic, 2, 1, config=conf)])[topic].result(30)
                    cpu0 = cpu_seconds(c.nodes[0].pid)
                    res[f"produce_{kind}"].append(mb / produce(bs, topic, values))
                    if kind == "tiered":
                        # until every rolled segment is copied and deleted locally
                        deadline = time.monotonic() + 600
                        while time.monotonic() < deadline:
                            tiered = offsets(bs, topic, "latest_tiered")
                            local = offsets(bs, topic, "earliest_local")
                            if all(t >= 0 and lo == t + 1 for t, lo in zip(tiered, local)):
                                break
                            time.sleep(0.2)
                        copied = sum(f.stat().st_size for f in (Path(root) / "remote").rglob(f"{topic}-*/*/*.log"))
                        res["cpu_per_gb_copied"].append((cpu_seconds(c.nodes[0].pid) - cpu0) / (copied / 1e9))
                    topics.append(topic)
                print(
                    f"run {r}: produce plain {res['produce_plain'][-1]:.1f} MB/s, tiered "
                    f"{res['produce_tiered'][-1]:.1f} MB/s",
                    flush=True,
                )
            for r in range(args.runs):
                reads["local"].append(mb / consume(bs, f"plain_{r}", args.records))
            c.nodes[0].restart()  # nothing remote cached
            bs = c.bootstrap_servers
            deadline = time.monotonic() + 60
            while True:  # serving again (leader elected, unfenced) before anything is timed
                try:
                    offsets(bs, "tiered_0", "latest")
                    break
                except Exception:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            for r in range(args.runs):
                reads["remote_first"].append(mb / consume(bs, f"tiered_{r}", args.records))
                reads["remote_cached"].append(mb / consume(bs, f"tiered_{r}", args.records))
    med = {k: statistics.median(v) for k, v in (res | reads).items()}
    print(
        f"\n{args.records} records of {args.size} B ({mb:.0f} MB), {args.runs} runs, medians:\n"
        f"produce: plain {med['produce_plain']:.1f} MB/s, tiered {med['produce_tiered']:.1f} MB/s "
        f"({med['produce_tiered'] / med['produce_plain']:.2f}x)\n"
        f"broker CPU per GB copied (produce + copy): {med['cpu_per_gb_copied']:.2f} s\n"
        f"consume from offset 0: local {med['local']:.1f} MB/s, remote first read {med['remote_first']:.1f} MB/s "
        f"({med['remote_first'] / med['local']:.2f}x), remote cached {med['remote_cached']:.1f} MB/s "
        f"({med['remote_cached'] / med['local']:.2f}x)",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
