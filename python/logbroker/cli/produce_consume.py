"""`logbroker produce` and `logbroker consume`: records from and to the terminal (or files),
with logbroker's own client, against any Kafka-compatible broker (`--bootstrap-server`).

    logbroker produce --topic T [--file F] [--key-separator SEP] [--header K=V ...] [--partition P]
                      [--acks all|1|0] [--compression none|gzip|snappy|lz4|zstd]
    logbroker consume --topic T [--partition P ...] [--from-beginning | --offset N | --timestamp MS]
                      [--group G] [--max-messages N] [--timeout S] [--format text|json|hex]
                      [--print-key] [--print-headers] [--print-offset] [--output F]

produce: one record per input line (the newline is not part of it); with `--key-separator`
the text before the first separator is the key. A progress bar on stderr counts the records
acknowledged when the input is a file and stderr a terminal. Exits 1 if any record failed.

consume: without `--group` the partitions are assigned (all of the topic's unless
`--partition`) and start at the end, or where `--from-beginning`, `--offset` or `--timestamp`
(the first offset at or after it, ListOffsets) says; with `--group` it subscribes and starts
from the group's committed offsets (the start options then apply where it has none: earliest
with `--from-beginning`) and commits as it goes. It stops after `--max-messages`, or after
`--timeout` seconds without a record, or on Ctrl-C. Formats: `text` (bytes as UTF-8,
undecodable bytes escaped), `json` (one object per line: topic, partition, offset,
timestamp, key, value, headers; bytes as UTF-8 strings or, when they are not UTF-8, as
{"base64": ...}), `hex`.
"""

from __future__ import annotations

import json
import sys
import time
from typing import IO, Any

from logbroker.admin_views import render_bytes
from logbroker.cli.args import UsageError, add_command_config, client_config, key_values, progress_bar
from logbroker.client import Consumer, KafkaError, Producer


def add_parser(sub) -> None:
    p = sub.add_parser("produce", help="send lines of stdin (or a file) as records")
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    p.add_argument("--topic", required=True)
    p.add_argument("--file", help="read records from this file (default stdin)")
    p.add_argument("--key-separator", help="text before the first separator is the key")
    p.add_argument("--header", action="append", default=[], metavar="KEY=VALUE", help="added to every record")
    p.add_argument("--partition", type=int)
    p.add_argument("--acks", choices=["all", "1", "0"], default="all")
    p.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none")
    add_command_config(p)
    c = sub.add_parser("consume", help="print records of a topic")
    c.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    c.add_argument("--topic", required=True)
    c.add_argument("--partition", type=int, action="append", default=[])
    start = c.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int, help="start offset (with --partition)")
    start.add_argument("--timestamp", type=int, help="start at the first record at or after this time (ms)")
    c.add_argument("--group", help="consume as a member of this consumer group, committing offsets")
    c.add_argument("--max-messages", type=int)
    c.add_argument("--timeout", type=float, help="stop after this many seconds without a record")
    c.add_argument("--format", choices=["text", "json", "hex"], default="text")
    add_command_config(c)
    c.add_argument("--print-key", action="store_true")
    c.add_argument("--print-headers", action="store_true")
    c.add_argument("--print-offset", action="store_true")
    c.add_argument("--output", help="write records to this file (default stdout)")


# --- produce ---------------------------------------------------------------------------


def run_produce(args) -> int:
    try:
        headers = [(k, v.encode()) for k, v in key_values(args.header, "--header")]
        conf = client_config(args.command_config)
        source: IO[bytes] = open(args.file, "rb") if args.file else sys.stdin.buffer  # noqa: SIM115
    except (UsageError, OSError) as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 2
    sep = args.key_separator.encode() if args.key_separator else None
    total = None
    if args.file and sys.stderr.isatty():  # count the lines for the progress bar
        with open(args.file, "rb") as f:
            total = sum(1 for _ in f)
    failed: list[str] = []
    sent = 0
    try:
        with (
            Producer(
                args.bootstrap_server,
                acks=args.acks if args.acks == "all" else int(args.acks),
                compression_type=args.compression,
                client_id="logbroker-produce",
                **conf,
            ) as producer,
            progress_bar(total, "producing") as show,
        ):
            acked = [0]

            def done(fut) -> None:
                err = fut.exception()
                if err is not None:
                    failed.append(str(err))
                acked[0] += 1
                if acked[0] % 100 == 0 or acked[0] == total:
                    show(acked[0])

            for line in source:
                line = line.rstrip(b"\n").rstrip(b"\r")
                key = None
                if sep is not None and sep in line:
                    key, line = line.split(sep, 1)
                fut = producer.send(args.topic, line, key=key, partition=args.partition, headers=headers or None)
                fut.add_done_callback(done)
                sent += 1
            producer.flush()
    except KafkaError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    if failed:
        print(
            f"logbroker: {len(failed)} of {sent} record(s) to {args.topic!r} failed; first: {failed[0]}",
            file=sys.stderr,
        )
        return 1
    print(f"{sent} record(s) sent to {args.topic!r}", file=sys.stderr)
    return 0


# --- consume ---------------------------------------------------------------------------


def format_record(r, fmt: str, print_key: bool, print_headers: bool, print_offset: bool) -> str:
    if fmt == "json":
        return json.dumps(
            {
                "topic": r.topic,
                "partition": r.partition,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": render_bytes(r.key, fmt),
                "value": render_bytes(r.value, fmt),
                "headers": [[k, render_bytes(v, fmt)] for k, v in r.headers],
            }
        )

    def show(b: bytes | None) -> str:
        shown = render_bytes(b, fmt)
        return "null" if shown is None else shown

    parts = []
    if print_offset:
        parts.append(f"{r.partition}:{r.offset}")
    if print_headers:
        parts.append(",".join(f"{k}={show(v)}" for k, v in r.headers) or "-")
    if print_key:
        parts.append(show(r.key))
    parts.append(show(r.value))
    return "\t".join(parts)


def run_consume(args) -> int:
    if args.offset is not None and len(args.partition) != 1:
        print("logbroker: --offset needs exactly one --partition", file=sys.stderr)
        return 2
    conf = client_config(args.command_config)
    out: IO[str] = open(args.output, "w") if args.output else sys.stdout  # noqa: SIM115
    count = 0
    try:
        config: dict[str, Any] = {
            **conf,
            "client_id": "logbroker-consume",
            "auto_offset_reset": "earliest" if args.from_beginning else "latest",
        }
        if args.group:
            config.update(group_id=args.group, enable_auto_commit=True)
        with Consumer(args.bootstrap_server, **config) as consumer:
            _start(consumer, args, conf)
            last = time.monotonic()
            while args.max_messages is None or count < args.max_messages:
                want = None if args.max_messages is None else args.max_messages - count
                records = consumer.poll(0.5, max_records=want)
                if not records:
                    if args.timeout is not None and time.monotonic() - last >= args.timeout:
                        break
                    continue
                last = time.monotonic()
                for r in records:
                    out.write(
                        format_record(r, args.format, args.print_key, args.print_headers, args.print_offset) + "\n"
                    )
                count += len(records)
                out.flush()
    except KafkaError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"{count} record(s) from {args.topic!r}", file=sys.stderr)
    return 0


def _start(consumer: Consumer, args, conf: dict[str, str]) -> None:
    if args.group and not args.partition:
        consumer.subscribe([args.topic])
        return
    partitions = args.partition or list(range(_partition_count(consumer, args.topic)))
    tps = [(args.topic, p) for p in partitions]
    consumer.assign(tps)
    if args.offset is not None:
        consumer.seek(tps[0], args.offset)
    elif args.timestamp is not None:
        from logbroker.client import Admin

        with Admin(args.bootstrap_server, client_id="logbroker-consume", **conf) as admin:
            found = admin.list_offsets({tp: args.timestamp for tp in tps})
        for tp, (offset, _ts) in found.items():
            if offset >= 0:
                consumer.seek(tp, offset)
            else:
                consumer.seek_to_end([tp])
    elif args.from_beginning:
        consumer.seek_to_beginning(tps)
    elif not args.group:
        consumer.seek_to_end(tps)


def _partition_count(consumer: Consumer, topic: str) -> int:
    n = consumer.topics().get(topic)
    if not n:
        raise KafkaError(f"topic {topic!r} does not exist")
    return n
