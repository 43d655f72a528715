"""How long `logbroker.aio` blocks the event loop: the worst loop stall during a round trip of
50,000 records (produce them all, then consume them all), under asyncio and under trio.

    python benches/bench_aio_stall.py [--records 50000] [--record-size 100] [--runs 3]
                                      [--loops asyncio,trio] [--bootstrap HOST:PORT]

A watchdog task sleeps 1 ms at a time; each time it wakes late by more than its own sleep, the
lateness is a stall (the loop was busy in someone's code). The client's tasks are the only
other work on the loop, so the worst lateness is the longest the client held the loop. The
same watchdog runs alone first (the baseline: the machine's own scheduling noise).

Starts `logbroker serve` in a child process (unless --bootstrap is given), so the broker does
not share the client's GIL. Goal (issue 30): worst stall under 10 ms.
This is a benchmark, not a test: nothing is timed in CI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import trio

from logbroker import aio


class Watchdog:
    """Sleeps `tick` seconds in a loop and records how late each wake-up was."""

    def __init__(self, tick: float = 0.001) -> None:
        self.tick = tick
        self.late: list[float] = []
        self.stop = False
        self.phase = "start"
        self.worst: list[tuple[float, str]] = []  # (lateness, phase) of the 5 worst

    async def run(self) -> None:
        while not self.stop:
            t0 = time.perf_counter()
            await anyio.sleep(self.tick)
            late = max(0.0, time.perf_counter() - t0 - self.tick)
            self.late.append(late)
            if len(self.worst) < 5 or late > self.worst[-1][0]:
                self.worst = sorted([*self.worst, (late, self.phase)], reverse=True)[:5]

    def summary(self) -> dict[str, float]:
        late = sorted(self.late) or [0.0]
        return {
            "worst_ms": late[-1] * 1000,
            "p99_ms": late[int(len(late) * 0.99)] * 1000,
            "median_ms": statistics.median(late) * 1000,
            "wakeups": len(late),
            "where": ", ".join(f"{w * 1000:.1f} ms in {p}" for w, p in self.worst),
        }


async def baseline(seconds: float) -> dict[str, float]:
    dog = Watchdog()
    async with anyio.create_task_group() as tg:
        tg.start_soon(dog.run)
        await anyio.sleep(seconds)
        dog.stop = True
    return dog.summary()


async def round_trip(bootstrap: str, topic: str, records: int, size: int) -> dict[str, float]:
    dog = Watchdog()
    value = b"x" * size
    async with anyio.create_task_group() as tg:
        tg.start_soon(dog.run)
        t0 = time.perf_counter()
        dog.phase = "producer start"
        async with aio.Producer(bootstrap, linger_ms=5) as p:
            dog.phase = "enqueue"
            for i in range(records):
                await p.enqueue(topic, value, key=b"%d" % i)
            dog.phase = "flush"
            await p.flush(60)
            dog.phase = "producer close"
        t1 = time.perf_counter()
        got = 0
        dog.phase = "consumer start"
        async with aio.Consumer(bootstrap, auto_offset_reset="earliest") as c:
            await c.assign([(topic, 0)])
            dog.phase = "poll"
            with anyio.fail_after(120):
                while got < records:
                    got += len(await c.poll(1.0))
            dog.phase = "consumer close"
        t2 = time.perf_counter()
        dog.phase = "end"
        dog.stop = True
    assert got == records, (got, records)
    return {**dog.summary(), "produce_s": t1 - t0, "consume_s": t2 - t1}


def run_on(loop: str, fn, *args):
    if loop == "trio":
        return trio.run(fn, *args)
    return asyncio.run(fn(*args))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(data_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "logbroker", "serve", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"logbroker serve on port {port} did not start within 60 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--loops", default="asyncio,trio")
    ap.add_argument("--bootstrap")
    ap.add_argument("--trace", action="store_true", help="print the 5 worst stalls of each run and where they were")
    args = ap.parse_args()
    proc = None
    with tempfile.TemporaryDirectory() as tmp:
        bootstrap = args.bootstrap
        if bootstrap is None:
            proc, bootstrap = start_broker(Path(tmp) / "data")
        try:
            for loop in args.loops.split(","):
                base = run_on(loop, baseline, 2.0)
                runs = [
                    run_on(
                        loop, round_trip, bootstrap, f"stall-{loop}-{r}-{os.getpid()}", args.records, args.record_size
                    )
                    for r in range(args.runs)
                ]
                worst = [r["worst_ms"] for r in runs]
                print(
                    f"{loop:8s} baseline worst {base['worst_ms']:.2f} ms p99 {base['p99_ms']:.2f} ms | "
                    f"{args.records} records of {args.record_size} B, {args.runs} runs: worst stall per run "
                    f"{', '.join(f'{w:.2f}' for w in worst)} ms (median {statistics.median(worst):.2f}), "
                    f"p99 {statistics.median(r['p99_ms'] for r in runs):.2f} ms, "
                    f"produce {statistics.median(r['produce_s'] for r in runs):.2f} s, "
                    f"consume {statistics.median(r['consume_s'] for r in runs):.2f} s",
                    flush=True,
                )
                if args.trace:
                    for r in runs:
                        print(f"    worst: {r['where']}")
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(30)


if __name__ == "__main__":
    main()
