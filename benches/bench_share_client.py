"""Share-group consumption (KIP-932) through a real client: logbroker's ShareConsumer
(client/share.py) against Java's KafkaShareConsumer (tests/java/ShareBench.java, on the Kafka
tools classpath from benches/peers/kafka.py), each consuming the same N records from one
logbroker broker (its own process, benches/peers/logbroker.py) in a fresh share group per run,
implicit acknowledgement, max.poll.records 500. Reported: records/s from subscribe() to the
Nth record (join included) and from the first record to the Nth, median of the runs.

    python -m benches.bench_share_client [--records 200000] [--size 100] [--runs 3]

Not run in CI (it needs Java and Maven, and minutes).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benches.peers.kafka import install  # noqa: E402
from benches.peers.logbroker import LogbrokerPeer  # noqa: E402

BENCH_JAVA = ROOT / "tests" / "java" / "ShareBench.java"
TOPIC = "share-bench"
BROKER_SETS = {
    "group.share.enable": "true",
    "group.share.auto.offset.reset": "earliest",
    "group.share.partition.max.record.locks": "2000",
}


def produce(bs: str, n: int, size: int) -> None:
    from logbroker import Admin, NewTopic, Producer

    with Admin(bs) as a:
        a.create_topics([NewTopic(TOPIC, 1)])
    payload = b"v" * size
    with Producer(bs, linger_ms=5) as p:
        for _ in range(n):
            p.send(TOPIC, payload)
        p.flush(120)


def run_ours(bs: str, group: str, n: int, max_poll: int) -> tuple[float, float]:
    from logbroker import ShareConsumer

    with ShareConsumer(bs, group, max_poll_records=max_poll) as c:
        t0 = time.perf_counter()
        c.subscribe([TOPIC])
        first = None
        count = 0
        deadline = t0 + 300
        while count < n and time.perf_counter() < deadline:
            recs = c.poll(0.5)
            if recs and first is None:
                first = time.perf_counter()
            count += len(recs)
        end = time.perf_counter()
    if count < n:
        raise RuntimeError(f"ours: {count} of {n} records")
    assert first is not None
    return end - t0, end - first


def run_java(tools, bs: str, group: str, n: int, max_poll: int) -> tuple[float, float]:
    cmd = tools.tools_java(str(BENCH_JAVA), [bs, group, TOPIC, str(n), str(max_poll)], heap="-Xmx1g", short_lived=False)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if r.returncode != 0 or line is None:
        raise RuntimeError(f"java ShareBench failed ({r.returncode}): {r.stderr[-2000:]}")
    _, count, total, from_first = line.split()
    if int(count) < n:
        raise RuntimeError(f"java: {count} of {n} records")
    return float(total), float(from_first)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-poll-records", type=int, default=500)
    args = ap.parse_args()
    tools = install()
    os.environ["LOGBROKER_PEER_SET"] = ",".join(f"{k}={v}" for k, v in BROKER_SETS.items())
    peer = LogbrokerPeer(data_root=tempfile.mkdtemp(prefix="share-bench-"))
    peer.start()
    try:
        bs = peer.bootstrap
        produce(bs, args.records, args.size)
        results: dict[str, list[tuple[float, float]]] = {
            "logbroker ShareConsumer (Python)": [],
            f"KafkaShareConsumer (Java, Kafka {tools.version})": [],
        }
        for run in range(args.runs):  # interleaved, so drift hits both
            for name in results:
                group = f"bench-{run}-{'py' if 'Python' in name else 'java'}"
                if "Python" in name:
                    r = run_ours(bs, group, args.records, args.max_poll_records)
                else:
                    r = run_java(tools, bs, group, args.records, args.max_poll_records)
                results[name].append(r)
                print(
                    f"run {run + 1} {name}: {args.records / r[0]:,.0f} rec/s from subscribe, "
                    f"{args.records / r[1]:,.0f} rec/s from the first record",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        peer.stop()
    print(
        f"\n{args.records:,} records x {args.size} B, one partition, max.poll.records {args.max_poll_records}, "
        f"implicit acknowledgement, median of {args.runs} runs (one logbroker broker process)\n"
    )
    print(f"| {'client':45} | {'rec/s from subscribe':>20} | {'rec/s from first record':>23} |")
    print(f"|{'-' * 47}|{'-' * 22}|{'-' * 25}|")
    for name, rs in results.items():
        total = statistics.median(args.records / t for t, _ in rs)
        first = statistics.median(args.records / f for _, f in rs)
        print(f"| {name:45} | {total:>20,.0f} | {first:>23,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
