"""What moving a replica between log directories costs (AlterReplicaLogDirs, KIP-113): one
broker with two log directories (logbroker, and Apache Kafka beside it from benches/peers), a
one-partition topic filled with S MB of 1 kB records, then moved to the other directory while
a producer keeps writing 1 kB records at a steady rate (acks=all). Reported per (broker, size):
the move's wall time (AlterReplicaLogDirs until DescribeLogDirs shows the replica in the
destination with no future replica), its MB/s, the broker's CPU seconds over the move, and the
steady producer's delivery latency during the move (median, p99, max) and its errors; median
of the runs.

    python -m benches.bench_log_dir_move [--sizes 20,200] [--rate 2000] [--runs 1] [--brokers logbroker,kafka]

The sizes are 10x and 100x what tests/test_log_dirs.py moves (about 4 MB). Not in CI.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benches.peers.common import cpu_seconds  # noqa: E402

RECORD = 1000


def fill(bs: str, topic: str, mb: int) -> None:
    from confluent_kafka import Producer

    p = Producer(
        {
            "bootstrap.servers": bs,
            "linger.ms": 5,
            "batch.size": 262144,
            "acks": "all",
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    value = b"v" * RECORD
    for _ in range(mb * 1_000_000 // RECORD):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(300) == 0


class SteadyProducer:
    """1 kB records at `rate` per second; the delivery latency of each, and the errors."""

    def __init__(self, bs: str, topic: str, rate: int) -> None:
        from confluent_kafka import Producer

        self.p = Producer({"bootstrap.servers": bs, "linger.ms": 1, "acks": "all", "enable.idempotence": True})
        self.topic, self.rate = topic, rate
        self.latencies: list[tuple[float, float]] = []  # (sent at, latency s)
        self.errors = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        value = b"s" * RECORD
        interval = 1.0 / self.rate
        nxt = time.monotonic()
        while not self.stop.is_set():
            sent = time.monotonic()

            def done(err, _msg, sent=sent):
                if err is not None:
                    self.errors += 1
                else:
                    self.latencies.append((sent, time.monotonic() - sent))

            self.p.produce(self.topic, value, partition=0, on_delivery=done)
            self.p.poll(0)
            nxt += interval
            time.sleep(max(0.0, nxt - time.monotonic()))
        self.p.flush(60)

    def __enter__(self) -> SteadyProducer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(120)


def one_run(peer, topic: str, mb: int, rate: int) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    from logbroker.client import Admin

    admin = AdminClient({"bootstrap.servers": peer.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    fill(peer.bootstrap, topic, mb)
    with Admin(peer.bootstrap) as lb_admin:
        node = peer.node_id
        src = lb_admin.describe_replica_log_dirs(node)[(topic, 0)][0]
        dest = next(str(Path(d).resolve()) for d in peer.log_dirs if str(Path(d).resolve()) != str(Path(src).resolve()))
        with SteadyProducer(peer.bootstrap, topic, rate) as steady:
            time.sleep(1.0)
            cpu0, t0 = cpu_seconds(peer.pid), time.monotonic()
            lb_admin.alter_replica_log_dirs(node, {(topic, 0): dest})
            while True:
                where = lb_admin.describe_replica_log_dirs(node)[(topic, 0)]
                if str(Path(where[0]).resolve()) == dest and where[1] is None:
                    break
                time.sleep(0.05)
            elapsed, cpu = time.monotonic() - t0, cpu_seconds(peer.pid) - cpu0
            time.sleep(1.0)
        during = sorted(lat for sent, lat in steady.latencies if t0 <= sent <= t0 + elapsed) or [0.0]
        before = sorted(lat for sent, lat in steady.latencies if sent < t0) or [0.0]
    return {
        "move_s": elapsed,
        "mb_s": mb / elapsed,
        "cpu_s": cpu,
        "p50_before_ms": 1000 * before[len(before) // 2],
        "p50_ms": 1000 * during[len(during) // 2],
        "p99_ms": 1000 * during[int(len(during) * 0.99)],
        "max_ms": 1000 * during[-1],
        "errors": steady.errors,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.bench_log_dir_move")
    ap.add_argument("--sizes", default="20,200", help="MB per partition, comma-separated")
    ap.add_argument("--rate", type=int, default=2000, help="steady producer records/s during the move")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--brokers", default="logbroker,kafka")
    args = ap.parse_args(argv)
    results = []
    for broker in args.brokers.split(","):
        work = tempfile.mkdtemp(prefix="bench-log-dir-move-")
        if broker == "kafka":
            from benches.peers.kafka import KafkaPeer, install

            peer = KafkaPeer(work, install_info=install(), log_dirs=2)
        else:
            from benches.peers.logbroker import LogbrokerPeer

            peer = LogbrokerPeer(work, log_dirs=2)
        peer.start()
        try:
            for mb in map(int, args.sizes.split(",")):
                runs = [one_run(peer, f"move-{mb}-{r}", mb, args.rate) for r in range(args.runs)]
                row = {"broker": broker, "mb": mb, **{k: statistics.median(r[k] for r in runs) for k in runs[0]}}
                results.append(row)
                print(
                    f"{broker:10} {mb:5d} MB  move {row['move_s']:6.2f} s  {row['mb_s']:7.1f} MB/s  "
                    f"CPU {row['cpu_s']:5.2f} s  steady producer p50 {row['p50_before_ms']:5.1f} ms before, during: "
                    f"p50 {row['p50_ms']:6.1f} ms  "
                    f"p99 {row['p99_ms']:7.1f} ms  max {row['max_ms']:7.1f} ms  errors {row['errors']}",
                    flush=True,
                )
        finally:
            peer.stop()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
