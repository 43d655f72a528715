"""`logbroker archive list|read`: what `retention.archive` wrote (logbroker/archive.py),
read straight from the store, without a broker.

    logbroker archive list [--location DIR|s3://BUCKET/PREFIX] [--topic T] [--json]
    logbroker archive read --topic T [--topic-id ID] [--partition P] [--offset N] [--max-records N]
                           [--format text|json|hex] [--print-key] [--print-headers] [--print-offset]

`--location` defaults to the archive of `logbroker serve`'s default data directory
(./logbroker-data/__archive); an s3:// location takes `--set archive.s3.endpoint=URL` and
the other `archive.s3.*` broker keys (credentials also from the AWS_* environment).
A topic deleted and created again has one set of files per incarnation (topic id); `read`
reads the most recently archived one unless `--topic-id` names another.
Exit codes: 0 done, 1 the store failed, 2 bad arguments.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

from logbroker.cli.args import UsageError, key_values

DEFAULT_LOCATION = "./logbroker-data/__archive"


def add_parser(sub) -> None:
    a = sub.add_parser("archive", help="list and read what retention.archive archived (Parquet)")
    asub = a.add_subparsers(dest="archive_command", required=True)
    common = dict(
        location=(
            "--location",
            dict(default=DEFAULT_LOCATION, help=f"a directory or s3://BUCKET/PREFIX (default {DEFAULT_LOCATION})"),
        ),
        set=(
            "--set",
            dict(
                action="append",
                default=[],
                metavar="KEY=VALUE",
                help="archive.s3.endpoint, archive.s3.region, archive.s3.access.key.id, ...",
            ),
        ),
    )
    ls = asub.add_parser("list", help="archived files: topic, partition, offsets, records, bytes")
    rd = asub.add_parser("read", help="print archived records")
    for p in (ls, rd):
        for flag, kw in common.values():
            p.add_argument(flag, **kw)  # type: ignore[arg-type]
    ls.add_argument("--topic", help="only this topic")
    ls.add_argument("--json", action="store_true", help="one JSON object per file")
    rd.add_argument("--topic", required=True)
    rd.add_argument("--topic-id", help="the incarnation to read (default: the most recently archived)")
    rd.add_argument("--partition", type=int, action="append", default=[], help="only these partitions (repeatable)")
    rd.add_argument("--offset", type=int, default=0, help="from this offset on (default: the first archived)")
    rd.add_argument("--max-records", type=int, help="stop after this many records")
    rd.add_argument("--format", choices=("text", "json", "hex"), default="text")
    rd.add_argument("--print-key", action="store_true")
    rd.add_argument("--print-headers", action="store_true")
    rd.add_argument("--print-offset", action="store_true")


def _store(args):
    from logbroker.archive import STORE_KEYS, ArchiveStore

    keys = dict(key_values(args.set, "--set"))
    unknown = sorted(set(keys) - set(STORE_KEYS))
    if unknown:
        raise UsageError(f"--set {unknown[0]}: not an archive key (one of {', '.join(STORE_KEYS[1:])})")
    keys["archive.location"] = args.location
    return ArchiveStore.from_keys(keys)


def run(args) -> int:
    from logbroker.archive import ArchiveError

    try:
        store = _store(args)
        return _list(store, args) if args.archive_command == "list" else _read(store, args)
    except UsageError as e:
        print(f"logbroker archive: {e}", file=sys.stderr)
        return 2
    except ArchiveError as e:
        print(f"logbroker archive: {e}", file=sys.stderr)
        return 1


def _list(store, args) -> int:
    topics = [args.topic] if args.topic else store.topics()
    files = [f for t in topics for f in store.files(t)]
    rows = [
        {
            "topic": f.topic,
            "topic_id": f.topic_id,
            "partition": f.partition,
            "first_offset": f.first_offset,
            "last_offset": f.last_offset,
            "records": store.row_count(f),
            "bytes": f.size_bytes,
            "path": f.path,
        }
        for f in files
    ]
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"archive {store.location}")
    for col in ("topic", "topic id", "partition", "first offset", "last offset", "records", "bytes", "file"):
        table.add_column(col, justify="right" if col not in ("topic", "topic id", "file") else "left")
    for r in rows:
        table.add_row(
            r["topic"],
            r["topic_id"],
            str(r["partition"]),
            str(r["first_offset"]),
            str(r["last_offset"]),
            str(r["records"]),
            str(r["bytes"]),
            r["path"].rsplit("/", 1)[-1],
        )
    Console().print(table)
    print(f"{len(rows)} file(s), {sum(r['records'] for r in rows)} record(s)", file=sys.stderr)
    return 0


def _read(store, args) -> int:
    from logbroker.cli.produce_consume import format_record

    ids = store.incarnations(args.topic)
    topic_id = args.topic_id or (ids[-1] if ids else None)
    if len(ids) > 1 and not args.topic_id:
        print(
            f"{args.topic!r} has {len(ids)} archived incarnations ({', '.join(ids)}); reading {topic_id} "
            "(--topic-id picks another)",
            file=sys.stderr,
        )
    partitions = sorted({f.partition for f in store.files(args.topic, topic_id=topic_id)} if topic_id else set())
    count = 0
    for p in partitions:
        if args.partition and p not in args.partition:
            continue
        for row in store.records(store.read_range(args.topic, p, args.offset, 2**63 - 1, topic_id)):
            if args.max_records is not None and count >= args.max_records:
                break
            print(
                format_record(
                    SimpleNamespace(**row), args.format, args.print_key, args.print_headers, args.print_offset
                )
            )
            count += 1
    print(f"{count} record(s) from the archive of {args.topic!r}", file=sys.stderr)
    return 0
