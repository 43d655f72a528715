"""`logbroker bench`: a quick produce-then-consume benchmark against any Kafka-compatible
broker, with logbroker's client.

    logbroker bench --bootstrap-server HOST:PORT [--records N] [--record-size B] [--partitions P]
                    [--acks all|1] [--compression none|lz4|zstd|...] [--topic T] [--keep] [--json]

It creates a topic (`logbroker-bench-<time>` unless `--topic`; deleted afterwards unless
`--keep`), produces N records of B random bytes as fast as the producer takes them, and
reports records/s, MB/s and the acknowledgement latency (median, p99, measured per record
from send to acknowledgement); then it consumes them back from the beginning and reports the
same rates. A progress bar shows each phase on a terminal. The figures are one run on
whatever machine and network it runs on; docs/benchmarks.md has the measured comparisons.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any

from logbroker.cli.args import add_command_config, client_config, progress_bar
from logbroker.client import Admin, Consumer, KafkaError, NewTopic, Producer


def add_parser(sub) -> None:
    b = sub.add_parser("bench", help="a quick produce/consume benchmark against a Kafka-compatible broker")
    b.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    b.add_argument("--records", type=int, default=200_000)
    b.add_argument("--record-size", type=int, default=100)
    b.add_argument("--partitions", type=int, default=1)
    b.add_argument("--replication-factor", type=int, default=-1)
    b.add_argument("--acks", choices=["all", "1"], default="all")
    b.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    b.add_argument("--topic", help="use this topic (created if missing, kept)")
    b.add_argument("--keep", action="store_true", help="keep the benchmark topic")
    b.add_argument("--json", action="store_true", help="print the results as one JSON object")
    add_command_config(b)


def _produce(args, conf: dict[str, str], topic: str) -> dict[str, Any]:
    payload = os.urandom(args.record_size)
    latencies: list[float] = []
    failed: list[str] = []
    with (
        Producer(
            args.bootstrap_server,
            acks="all" if args.acks == "all" else 1,
            compression_type=args.compression,
            linger_ms=5,
            client_id="logbroker-bench",
            **conf,
        ) as producer,
        progress_bar(args.records, "produce") as show,
    ):
        start = time.perf_counter()
        for i in range(args.records):
            sent = time.perf_counter()
            fut = producer.send(topic, payload)

            def done(f, sent=sent) -> None:
                err = f.exception()
                if err is not None:
                    failed.append(str(err))
                latencies.append(time.perf_counter() - sent)

            fut.add_done_callback(done)
            if i % 1000 == 999:
                show(len(latencies))
        producer.flush()
        elapsed = time.perf_counter() - start
    if failed:
        raise KafkaError(f"{len(failed)} of {args.records} record(s) failed; first: {failed[0]}")
    latencies.sort()
    return {
        "records": args.records,
        "seconds": elapsed,
        "records_per_s": args.records / elapsed,
        "mb_per_s": args.records * args.record_size / elapsed / 1e6,
        "latency_median_ms": statistics.median(latencies) * 1000,
        "latency_p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
    }


def _consume(args, conf: dict[str, str], topic: str, partitions: int) -> dict[str, Any]:
    got = 0
    size = 0
    with (
        Consumer(args.bootstrap_server, client_id="logbroker-bench", auto_offset_reset="earliest", **conf) as consumer,
        progress_bar(args.records, "consume") as show,
    ):
        consumer.assign([(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        start = time.perf_counter()
        last = start
        while got < args.records and time.perf_counter() - last < 30:
            records = consumer.poll(0.5)
            if records:
                last = time.perf_counter()
                got += len(records)
                size += sum(len(r.value or b"") for r in records)
                show(got)
        elapsed = time.perf_counter() - start
    if got < args.records:
        raise KafkaError(f"consumed {got} of {args.records} record(s) from {topic!r}: none arrived for 30 s")
    return {"records": got, "seconds": elapsed, "records_per_s": got / elapsed, "mb_per_s": size / elapsed / 1e6}


def run(args) -> int:
    if args.records < 1 or args.record_size < 0 or args.partitions < 1:
        print("logbroker: --records and --partitions must be >= 1, --record-size >= 0", file=sys.stderr)
        return 2
    topic = args.topic or f"logbroker-bench-{int(time.time())}"
    created = False
    conf = client_config(args.command_config)
    try:
        with Admin(args.bootstrap_server, client_id="logbroker-bench", **conf) as admin:
            if topic not in admin.list_topics():
                admin.create_topics([NewTopic(topic, args.partitions, args.replication_factor)])
                created = True
            partitions = len(admin.describe_topics([topic])[topic].partitions)
        try:
            produced = _produce(args, conf, topic)
            consumed = _consume(args, conf, topic, partitions)
        finally:
            if created and not args.keep and not args.topic:
                with Admin(args.bootstrap_server, client_id="logbroker-bench", **conf) as admin:
                    admin.delete_topics([topic])
    except KafkaError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
    result = {
        "topic": topic,
        "partitions": partitions,
        "record_size": args.record_size,
        "acks": args.acks,
        "compression": args.compression,
        "produce": produced,
        "consume": consumed,
    }
    if args.json:
        print(json.dumps(result))
        return 0
    from rich.console import Console
    from rich.table import Table

    t = Table(
        title=f"{args.records} records of {args.record_size} B to {topic!r} ({partitions} partition(s), "
        f"acks={args.acks}, compression {args.compression})",
        title_justify="left",
    )
    for c in ("phase", "records/s", "MB/s", "ack latency median", "ack latency p99"):
        t.add_column(c, justify="right")
    t.add_row(
        "produce",
        f"{produced['records_per_s']:,.0f}",
        f"{produced['mb_per_s']:.1f}",
        f"{produced['latency_median_ms']:.2f} ms",
        f"{produced['latency_p99_ms']:.2f} ms",
    )
    t.add_row("consume", f"{consumed['records_per_s']:,.0f}", f"{consumed['mb_per_s']:.1f}", "", "")
    Console(width=200).print(t)
    return 0
