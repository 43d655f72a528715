"""The load generators, each run as its own process against one broker:

- Kafka's kafka-producer-perf-test / kafka-consumer-perf-test
  (org.apache.kafka.tools.ProducerPerformance / ConsumerPerformance, run with java);
- confluent-kafka (librdkafka) from Python (benches/compare/ck_worker.py);
- logbroker's own client (logbroker.Producer / Consumer, benches/compare/ours.py) when the
  installed logbroker has it.

Every function returns a dict with at least records, bytes (record payload bytes) and
seconds; MB/s in the report is bytes / seconds / 10^6.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Batching of both producer clients (Java and librdkafka): the same numbers for both brokers.
BATCHING = {"linger.ms": "10", "batch.size": "262144"}
JAVA_WARMUP = 0.2  # ProducerPerformance --warmup-records: this share is excluded from the steady-state rate


class LoadError(RuntimeError):
    pass


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO, env=_env())
    except subprocess.TimeoutExpired as e:
        raise LoadError(f"{cmd[0]} timed out after {timeout:.0f}s") from e
    return r


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Exception" in ln or "ERROR" in ln or "error" in ln:
            return ln[:300]
    return (lines[-1] if lines else "no output")[:300]


_STEADY = re.compile(
    r"(\d+) steady state records sent, ([\d.]+) records/sec .*?([\d.]+) ms avg latency.*?"
    r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)
_TOTAL = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec", re.M)


def java_produce(inst, bootstrap: str, topic: str, size: int, count: int, acks: str, timeout: float = 300) -> dict:
    warm = int(count * JAVA_WARMUP)
    props = [f"acks={acks}", *(f"{k}={v}" for k, v in BATCHING.items())]
    args = [
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--num-records",
        str(count),
        "--warmup-records",
        str(warm),
        "--record-size",
        str(size),
        "--throughput",
        "-1",
        "--command-property",
        *props,
    ]
    r = _run(inst.tools_java("org.apache.kafka.tools.ProducerPerformance", args, short_lived=False), timeout)
    m = _STEADY.search(r.stdout)
    if r.returncode != 0 or not m:
        raise LoadError(f"ProducerPerformance failed (rc {r.returncode}): {_last_error(r.stdout + r.stderr)}")
    n, rps = int(m.group(1)), float(m.group(2))
    return {
        "records": n,
        "bytes": n * size,
        "seconds": n / rps,
        "total_records": count,
        "client_p50_ms": float(m.group(4)),
        "client_p99_ms": float(m.group(6)),
    }


def java_consume(inst, bootstrap: str, topic: str, size: int, count: int, timeout: float = 300) -> dict:
    """ConsumerPerformance always subscribes with a consumer group (--group defaults to a
    random perf-consumer-N): it needs FindCoordinator/JoinGroup/SyncGroup on the broker.
    The rate reported is its fetch rate, which leaves out the group join."""
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(count), "--timeout", "20000"]
    r = _run(inst.tools_java("org.apache.kafka.tools.ConsumerPerformance", args, short_lived=False), timeout)
    rows = [ln for ln in r.stdout.splitlines() if re.match(r"^\d{4}-\d\d-\d\d ", ln)]
    if r.returncode != 0 or not rows:
        raise LoadError(f"ConsumerPerformance failed (rc {r.returncode}): {_last_error(r.stdout + r.stderr)}")
    f = [x.strip() for x in rows[-1].split(",")]
    nmsg, fetch_ms = int(float(f[4])), float(f[7])
    return {"records": nmsg, "bytes": nmsg * size, "seconds": fetch_ms / 1000.0, "rebalance_ms": float(f[6])}


def _worker(args: list[str], timeout: float) -> dict:
    r = _run([sys.executable, "-m", "benches.compare.ck_worker", *args], timeout)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        raise LoadError(f"ck_worker {args[0]} failed (rc {r.returncode}): {_last_error(r.stdout + r.stderr)}")
    return json.loads(lines[-1])


def ck_produce(bootstrap: str, topic: str, size: int, count: int, acks: str, timeout: float = 300) -> dict:
    d = _worker(
        [
            "produce",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--size",
            str(size),
            "--count",
            str(count),
            "--acks",
            acks,
        ],
        timeout,
    )
    if d.get("errors"):
        raise LoadError(f"confluent-kafka producer: {d['errors']} records not delivered")
    return d


def ck_consume(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 300) -> dict:
    d = _worker(
        [
            "consume",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--count",
            str(count),
            "--timeout",
            str(timeout - 10),
        ],
        timeout,
    )
    if not d.get("complete"):
        raise LoadError(f"confluent-kafka consumer read {d['records']} of {count} records")
    return d


def e2e(
    bootstrap: str, topic: str, rate: float, seconds: float, size: int, skip: int, acks: str = "1", linger_ms: float = 1
) -> dict:
    """Fixed-rate producer and an assign()-mode consumer, separate processes; the consumer
    reports receive - send percentiles."""
    count = int(rate * seconds)
    common = ["--bootstrap", bootstrap, "--topic", topic, "--count", str(count), "--size", str(size)]
    cons = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benches.compare.ck_worker",
            "e2e-consume",
            *common,
            "--skip",
            str(skip),
            "--timeout",
            str(seconds + 60),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=_env(),
    )
    try:
        assert cons.stdout is not None
        line = cons.stdout.readline()
        if "ready" not in line:
            raise LoadError(f"e2e consumer did not start: {line!r} {cons.stderr.read()[-300:] if cons.stderr else ''}")
        time.sleep(0.5)
        prod = _worker(
            ["e2e-produce", *common, "--rate", str(rate), "--acks", acks, "--linger", str(linger_ms)], seconds + 120
        )
        out, err = cons.communicate(timeout=seconds + 90)
    except BaseException:
        cons.kill()
        cons.wait()
        raise
    lines = out.strip().splitlines()
    if cons.returncode != 0 or not lines:
        raise LoadError(f"e2e consumer failed: {_last_error(out + err)}")
    d = json.loads(lines[-1])
    if not d.get("complete"):
        raise LoadError(f"e2e consumer got {d['samples']} of {count - skip} records")
    d["producer"] = prod
    d["records"] = count
    return d


def _ours(args: list[str], timeout: float) -> dict:
    r = _run([sys.executable, "-m", "benches.compare.ours", *args], timeout)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        raise LoadError(f"logbroker client {args[0]} failed (rc {r.returncode}): {_last_error(r.stdout + r.stderr)}")
    return json.loads(lines[-1])


def ours_produce(bootstrap: str, topic: str, size: int, count: int, acks: str, timeout: float = 300) -> dict:
    return _ours(
        [
            "produce",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--size",
            str(size),
            "--count",
            str(count),
            "--acks",
            acks,
        ],
        timeout,
    )


def ours_consume(bootstrap: str, topic: str, partitions: int, count: int, timeout: float = 300) -> dict:
    d = _ours(
        [
            "consume",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--count",
            str(count),
            "--timeout",
            str(timeout - 10),
        ],
        timeout,
    )
    if not d.get("complete"):
        raise LoadError(f"logbroker consumer read {d['records_total']} of {count} records")
    return d
