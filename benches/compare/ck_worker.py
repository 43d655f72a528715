"""confluent-kafka (librdkafka) load generator, run as its own process by the comparison
so that the harness itself never shares a GIL with the client under test.

    python -m benches.compare.ck_worker produce --bootstrap B --topic T --size 1024 --count N --acks 1
    python -m benches.compare.ck_worker consume --bootstrap B --topic T --partitions P --count N
    python -m benches.compare.ck_worker e2e-consume --bootstrap B --topic T --count N
    python -m benches.compare.ck_worker e2e-produce --bootstrap B --topic T --rate R --count N --size S

Each prints one JSON line on stdout with what it measured. Consumers use assign() and
never join a group, commit or fetch offsets: logbroker has no group coordinator yet.
librdkafka insists on a group.id all the same; it only looks the coordinator up.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

# Same batching as the Java ProducerPerformance runs (see benches/compare/loadgen.py).
PRODUCER_BATCHING = {"linger.ms": 10, "batch.size": 262144}
# Headroom so that produce() rarely hits BufferError; the same for both brokers.
ASSIGN_ONLY_GROUP = "bench-assign-only"  # required by librdkafka; never joined or committed
PRODUCER_QUEUE = {"queue.buffering.max.kbytes": 262144, "queue.buffering.max.messages": 1000000}


def _base(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 200}


def produce(a) -> dict:
    conf = {
        **_base(a.bootstrap),
        **PRODUCER_BATCHING,
        **PRODUCER_QUEUE,
        "acks": a.acks,
        "enable.idempotence": a.acks == "all",
        "message.timeout.ms": 120000,
    }
    p = Producer(conf)
    p.list_topics(a.topic, timeout=30)  # connect and fetch metadata before the clock starts
    payload = b"x" * a.size
    errors = [0]

    def on_delivery(err, _msg):
        if err is not None:
            errors[0] += 1

    produce_ = p.produce
    t0 = time.perf_counter()
    for _ in range(a.count):
        while True:
            try:
                produce_(a.topic, payload, on_delivery=on_delivery)
                break
            except BufferError:  # local queue full: wait for deliveries, then retry
                p.poll(0.005)
    left = p.flush(120)
    t1 = time.perf_counter()
    return {"records": a.count, "bytes": a.count * a.size, "seconds": t1 - t0, "errors": errors[0] + left}


def _assign_all(c: Consumer, topic: str, partitions: int, offset: int) -> None:
    c.assign([TopicPartition(topic, p, offset) for p in range(partitions)])


def _consumer(bootstrap: str, **extra) -> Consumer:
    conf = {
        **_base(bootstrap),
        "group.id": ASSIGN_ONLY_GROUP,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        **extra,
    }
    return Consumer(conf)


def consume(a) -> dict:
    """Read `count` records from offset 0 of every partition. The clock starts when the first
    batch arrives (connection set-up and the first ListOffsets/Fetch round trips are left
    out); that first batch is not counted."""
    # fetch.queue.backoff.ms: librdkafka (>= 2.4) stops fetching a partition for this long
    # (default 1000 ms) once queued.min.messages (100,000) records are queued locally, so at
    # the default both brokers spend most of a 1 GiB read waiting on the client's back-off.
    c = _consumer(a.bootstrap, **{"queued.max.messages.kbytes": 262144, "fetch.queue.backoff.ms": 1})
    _assign_all(c, a.topic, a.partitions, OFFSET_BEGINNING)
    n = nbytes = first_n = first_bytes = 0
    t0 = None
    deadline = time.monotonic() + a.timeout
    while n < a.count and time.monotonic() < deadline:
        # never ask for more than is left: consume(n) waits for n records or the timeout
        msgs = c.consume(num_messages=min(10000, a.count - n), timeout=1.0)
        size = 0
        for m in msgs:
            if m.error() is not None:
                raise SystemExit(f"consume error: {m.error()}")
            size += len(m)
        n += len(msgs)
        nbytes += size
        if t0 is None and msgs:
            t0 = time.perf_counter()
            first_n, first_bytes = n, nbytes
    t1 = time.perf_counter()
    c.close()
    return {
        "records": n - first_n,
        "bytes": nbytes - first_bytes,
        "seconds": t1 - (t0 or t1),
        "records_total": n,
        "complete": n >= a.count,
    }


def e2e_consume(a) -> dict:
    """Wait for `count` records carrying a send timestamp; latency = receive - send
    (CLOCK_MONOTONIC, one clock for every process on the machine)."""
    c = _consumer(a.bootstrap, **{"fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    _assign_all(c, a.topic, 1, 0)
    c.consume(num_messages=1, timeout=0.5)  # connected and fetching
    print("ready", flush=True)
    lat: list[int] = []
    deadline = time.monotonic() + a.timeout
    unpack = struct.unpack_from
    poll = c.poll
    while len(lat) < a.count and time.monotonic() < deadline:
        # poll() hands over one record as soon as it is there (consume(n) would wait for n)
        m = poll(0.1)
        if m is None or m.error() is not None:
            continue
        lat.append(time.monotonic_ns() - unpack(">q", m.value(), 0)[0])
    c.close()
    lat = lat[a.skip :]
    lat.sort()

    def q(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] / 1e6 if lat else float("nan")

    return {
        "samples": len(lat),
        "p50_ms": q(0.50),
        "p99_ms": q(0.99),
        "p999_ms": q(0.999),
        "max_ms": lat[-1] / 1e6 if lat else float("nan"),
        "complete": len(lat) + a.skip >= a.count,
    }


def e2e_produce(a) -> dict:
    p = Producer({**_base(a.bootstrap), "acks": a.acks, "linger.ms": a.linger, "enable.idempotence": a.acks == "all"})
    p.list_topics(a.topic, timeout=30)
    pad = b"x" * (a.size - 8)
    pack = struct.pack
    interval = 1.0 / a.rate
    t0 = time.monotonic()
    late = 0
    sent = 0
    # Pace by the clock without spinning (a spinning sender would take a whole core from the
    # broker and the consumer): wake up about every millisecond and send what is due.
    while sent < a.count:
        now = time.monotonic()
        due = min(a.count, int((now - t0) / interval) + 1)
        if due - sent > a.rate * 0.005:
            late += 1
        while sent < due:
            p.produce(a.topic, pack(">q", time.monotonic_ns()) + pad, partition=0)
            sent += 1
        p.poll(0)
        nxt = t0 + sent * interval
        delay = nxt - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    p.flush(30)
    return {"sent": a.count, "seconds": time.monotonic() - t0, "ticks_behind_5ms": late}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.compare.ck_worker")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("produce", "consume", "e2e-consume", "e2e-produce"):
        s = sub.add_parser(name)
        s.add_argument("--bootstrap", required=True)
        s.add_argument("--topic", required=True)
        s.add_argument("--count", type=int, required=True)
        s.add_argument("--size", type=int, default=1024)
        s.add_argument("--acks", default="1")
        s.add_argument("--partitions", type=int, default=1)
        s.add_argument("--rate", type=float, default=5000)
        s.add_argument("--linger", type=float, default=0, help="e2e-produce: linger.ms")
        s.add_argument("--skip", type=int, default=0, help="e2e: leading samples dropped as warm-up")
        s.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args(argv)
    fn = {"produce": produce, "consume": consume, "e2e-consume": e2e_consume, "e2e-produce": e2e_produce}[a.cmd]
    print(json.dumps(fn(a)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
