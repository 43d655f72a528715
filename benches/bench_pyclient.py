"""Our Python client (logbroker.Producer / logbroker.Consumer) against confluent-kafka
(librdkafka) on the same broker, same records, same machine, in one run.

    python benches/bench_pyclient.py [--mib 64] [--runs 3] [--settings default,tuned]
                                     [--bootstrap HOST:PORT]

Starts `logbroker serve` in a child process (unless --bootstrap is given) so the broker does
not share the clients' GIL. For each settings profile, record size (100 B, 1 KiB) and client
it produces the same volume to a fresh 1-partition topic and then consumes it back from
offset 0, decoding every record's value; the clients run alternately, `--runs` times, and
the median of each is reported.

Profiles:
- `default`: each client exactly as it comes (only bootstrap.servers; the consumers are
  assigned partition 0 from offset 0), what a user who sets nothing gets.
- `tuned`: both producers with the same settings (acks=all, idempotence on, linger.ms=5,
  batch.size=1 MB, 256 MiB of buffer, no compression); both consumers with
  fetch.max.bytes / max.partition.fetch.bytes = 8 MiB (librdkafka also with
  fetch.queue.backoff.ms=1, see CK_TUNED_CONSUMER).

This is a benchmark, not a test: nothing is timed in CI.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka as ck

import logbroker

PRODUCER_CONF = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "acks": "all",
    "enable.idempotence": True,
    "compression.type": "none",
}
FETCH_BYTES = 8 << 20

# Per profile: (our producer, librdkafka producer, our consumer, librdkafka consumer) settings.
OURS_TUNED_PRODUCER = {**PRODUCER_CONF, "buffer.memory": 256 << 20}
CK_TUNED_PRODUCER = {**PRODUCER_CONF, "queue.buffering.max.kbytes": 262144, "queue.buffering.max.messages": 10_000_000}
OURS_TUNED_CONSUMER = {"fetch.max.bytes": FETCH_BYTES, "max.partition.fetch.bytes": FETCH_BYTES}
# fetch.queue.backoff.ms: librdkafka (>= 2.4) pauses a partition's fetches for this long
# (default 1000 ms) once queued.min.messages (100,000) are queued; with 100 B records that
# idles the consumer most of the time, so the tuned profile sets it to 1 ms.
CK_TUNED_CONSUMER = {
    "fetch.max.bytes": FETCH_BYTES,
    "max.partition.fetch.bytes": FETCH_BYTES,
    "fetch.queue.backoff.ms": 1,
}
PROFILES = {
    "default": ({}, {}, {}, {}),
    "tuned": (OURS_TUNED_PRODUCER, CK_TUNED_PRODUCER, OURS_TUNED_CONSUMER, CK_TUNED_CONSUMER),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "logbroker",
            "serve",
            "--data-dir",
            str(data),
            "--listen",
            f"127.0.0.1:{port}",
            "--log-level",
            "WARNING",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("broker did not start")


def produce_ours(bootstrap: str, topic: str, payload: bytes, count: int, conf: dict) -> float:
    with logbroker.Producer(bootstrap, **conf) as p:
        p.partitions_for(topic)
        send = p.send
        t0 = time.perf_counter()
        for _ in range(count):
            send(topic, payload)
        p.flush(300)
        return time.perf_counter() - t0


def produce_ck(bootstrap: str, topic: str, payload: bytes, count: int, conf: dict) -> float:
    p = ck.Producer({"bootstrap.servers": bootstrap, **conf})
    p.list_topics(topic, timeout=10)
    produce = p.produce
    t0 = time.perf_counter()
    for _ in range(count):
        try:
            produce(topic, payload)
        except BufferError:
            p.poll(0.01)
            produce(topic, payload)
    assert p.flush(300) == 0
    return time.perf_counter() - t0


def consume_ours(bootstrap: str, topic: str, count: int, conf: dict) -> float:
    with logbroker.Consumer(bootstrap, **conf) as c:
        c.assign([(topic, 0)])
        c.seek((topic, 0), 0)
        n = 0
        t0 = time.perf_counter()
        while n < count:
            for r in c.poll(5.0, 10_000):
                _ = r.value  # touch the payload, as a real consumer would
                n += 1
        return time.perf_counter() - t0


def consume_ck(bootstrap: str, topic: str, count: int, conf: dict) -> float:
    # confluent-kafka insists on a group.id; nothing is committed (assign, not subscribe).
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{topic}-{time.time()}", **conf})
    c.assign([ck.TopicPartition(topic, 0, 0)])
    n = 0
    t0 = time.perf_counter()
    while n < count:
        for m in c.consume(min(10_000, count - n), 5.0):
            if m.error():
                raise RuntimeError(m.error())
            m.value()
            n += 1
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64, help="MiB produced per run and size")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--settings", default="default,tuned", help="profiles to run: default, tuned")
    ap.add_argument("--bootstrap")
    a = ap.parse_args()
    profiles = [x.strip() for x in a.settings.split(",") if x.strip()]
    for name in profiles:
        if name not in PROFILES:
            ap.error(f"unknown profile {name!r}; choose from {sorted(PROFILES)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        proc = None
        bootstrap = a.bootstrap
        if bootstrap is None:
            proc, bootstrap = start_broker(Path(tmp) / "data")
        try:
            admin = logbroker.Admin(bootstrap)
            for profile in profiles:
                ours_p, ck_p, ours_c, ck_c = PROFILES[profile]
                clients = (
                    ("logbroker", produce_ours, ours_p, consume_ours, ours_c),
                    ("librdkafka", produce_ck, ck_p, consume_ck, ck_c),
                )
                for size in (100, 1024):
                    count = (a.mib << 20) // size
                    payload = os.urandom(size)
                    res: dict[tuple[str, str], list[float]] = {}
                    for run in range(a.runs):
                        for name, produce, pconf, consume, cconf in clients:
                            topic = f"bench-{profile}-{size}-{name}-{run}"
                            admin.create_topics([logbroker.NewTopic(topic, 1)])
                            res.setdefault((name, "produce"), []).append(
                                produce(bootstrap, topic, payload, count, pconf)
                            )
                            res.setdefault((name, "consume"), []).append(consume(bootstrap, topic, count, cconf))
                            admin.delete_topics([topic])
                            print(
                                f"{profile} size {size} run {run} {name}: produce {res[(name, 'produce')][-1]:.2f}s "
                                f"consume {res[(name, 'consume')][-1]:.2f}s",
                                file=sys.stderr,
                            )
                    for op in ("produce", "consume"):
                        ours = statistics.median(res[("logbroker", op)])
                        theirs = statistics.median(res[("librdkafka", op)])
                        rows.append(
                            (
                                profile,
                                size,
                                op,
                                count / ours,
                                count * size / ours / 1e6,
                                count / theirs,
                                count * size / theirs / 1e6,
                                theirs / ours,
                            )
                        )
            admin.close()
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(10)
    print(
        "| settings | record | op | logbroker rec/s | logbroker MB/s | librdkafka rec/s | librdkafka MB/s | ratio |\n"
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
    )
    for profile, size, op, r1, m1, r2, m2, ratio in rows:
        print(f"| {profile} | {size} B | {op} | {r1:,.0f} | {m1:,.1f} | {r2:,.0f} | {m2:,.1f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
