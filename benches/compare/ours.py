"""logbroker's own client (logbroker.Producer / logbroker.Consumer), the third client of the
comparison, run like the confluent-kafka worker: in its own process, one JSON line out.

    python -m benches.compare.ours produce --bootstrap B --topic T --size 1024 --count N --acks 1
    python -m benches.compare.ours consume --bootstrap B --topic T --partitions P --count N

The comparison uses it when the installed logbroker has the client (AVAILABLE); otherwise
its rows say n/a with REASON. Settings mirror the other two clients: linger.ms=10,
batch.size=262144, no compression, idempotence only with acks=all; the consumer assigns
every partition from offset 0 without a group and starts its clock at the first batch.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time


def _available() -> bool:
    if importlib.util.find_spec("logbroker") is None:
        return False
    import logbroker

    return hasattr(logbroker, "Producer") and hasattr(logbroker, "Consumer")


AVAILABLE = _available()
REASON = (
    ""
    if AVAILABLE
    else "the installed logbroker has no client (logbroker.Producer/Consumer); hook: benches/compare/ours.py"
)


def produce(a) -> dict:
    import logbroker

    conf = {
        "acks": "all" if a.acks == "all" else int(a.acks),
        "enable.idempotence": a.acks == "all",
        "linger.ms": 10,
        "batch.size": 262144,
        "buffer.memory": 256 << 20,
        "compression.type": "none",
    }
    payload = b"x" * a.size
    with logbroker.Producer(a.bootstrap, **conf) as p:
        p.partitions_for(a.topic)  # connect and fetch metadata before the clock starts
        send = p.send
        t0 = time.perf_counter()
        for _ in range(a.count):
            send(a.topic, payload)
        p.flush(300)
        t1 = time.perf_counter()
    return {"records": a.count, "bytes": a.count * a.size, "seconds": t1 - t0}


def consume(a) -> dict:
    import logbroker

    n = nbytes = first_n = first_bytes = 0
    t0 = None
    with logbroker.Consumer(a.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.assign([(a.topic, p) for p in range(a.partitions)])
        deadline = time.monotonic() + a.timeout
        while n < a.count and time.monotonic() < deadline:
            recs = c.poll(1.0, 10_000)
            size = 0
            for r in recs:
                v = r.value
                size += len(v) if v is not None else 0
            n += len(recs)
            nbytes += size
            if t0 is None and recs:
                t0 = time.perf_counter()
                first_n, first_bytes = n, nbytes
        t1 = time.perf_counter()
    return {
        "records": n - first_n,
        "bytes": nbytes - first_bytes,
        "seconds": t1 - (t0 or t1),
        "records_total": n,
        "complete": n >= a.count,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benches.compare.ours")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("produce", "consume"):
        s = sub.add_parser(name)
        s.add_argument("--bootstrap", required=True)
        s.add_argument("--topic", required=True)
        s.add_argument("--count", type=int, required=True)
        s.add_argument("--size", type=int, default=1024)
        s.add_argument("--acks", default="1")
        s.add_argument("--partitions", type=int, default=1)
        s.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args(argv)
    print(json.dumps({"produce": produce, "consume": consume}[a.cmd](a)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
