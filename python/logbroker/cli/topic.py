"""`logbroker topic ...`: create, list, describe, reconfigure and delete topics, move partitions
between brokers and elect leaders, through the Kafka protocol (any broker of the cluster will
do; it forwards to the active controller). As Kafka's tools, `--bootstrap-server` names it.

    logbroker topic create --topic T [--partitions N] [--replication-factor R] [--config K=V ...]
    logbroker topic list [--internal] [--json]
    logbroker topic describe [--topic T ...] [--configs] [--json]
    logbroker topic alter-config --topic T [--set K=V ...] [--delete K ...]
    logbroker topic delete --topic T [--topic T2 ...]
    logbroker topic reassign --topic T --partition P --replicas 2,3,4 [--wait]
    logbroker topic reassign --reassignment-json-file plan.json [--wait]
    logbroker topic reassign --topic T --partition P --cancel
    logbroker topic reassign --list
    logbroker topic elect-leaders [--type preferred|unclean] [--topic T [--partition P]]

The plan file is Kafka's `kafka-reassign-partitions` format:
`{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}`.
`--wait` polls ListPartitionReassignments until the partitions are no longer moving.
`--no-replication-factor-change` refuses targets that change a partition's replica count
(AlterPartitionReassignments v1). Exit codes: 0 every partition accepted, 1 an error from
the cluster or a partition refused, 2 bad arguments.
"""

from __future__ import annotations

import json
import sys
import time

from logbroker.cli.args import UsageError, add_command_config, client_config, key_values
from logbroker.client import BrokerConnection, ClientError
from logbroker.protocol import REQUESTS, ErrorCode

TIMEOUT_MS = 60_000


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def add_parser(sub) -> None:
    t = sub.add_parser(
        "topic", help="create, list, describe, configure and delete topics; reassign partitions, elect leaders"
    )
    t.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    add_command_config(t)
    ts = t.add_subparsers(dest="topic_command", required=True)
    c = ts.add_parser("create", help="create a topic")
    c.add_argument("--topic", required=True)
    c.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    c.add_argument(
        "--replication-factor", type=int, default=-1, help="default: the broker's default.replication.factor"
    )
    c.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config (repeatable)")
    c.add_argument("--if-not-exists", action="store_true", help="succeed if the topic exists")
    lst = ts.add_parser("list", help="list topics")
    lst.add_argument("--internal", action="store_true", help="include internal topics (__consumer_offsets, ...)")
    lst.add_argument("--json", action="store_true")
    d = ts.add_parser(
        "describe",
        help="partitions with leaders, replicas, ISR and offsets (tiered storage: the last copied offset and the local log start)",
    )
    d.add_argument("--topic", action="append", default=[], help="a topic (repeatable; default: every topic)")
    d.add_argument("--configs", action="store_true", help="also every config of the topics")
    d.add_argument("--json", action="store_true")
    a = ts.add_parser("alter-config", help="set or delete topic configs")
    a.add_argument("--topic", required=True)
    a.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a.add_argument("--delete", action="append", default=[], metavar="KEY", help="back to the default")
    x = ts.add_parser("delete", help="delete topics")
    x.add_argument("--topic", action="append", required=True, help="a topic (repeatable)")
    r = ts.add_parser("reassign", help="move partitions to other brokers (or list / cancel moves)")
    r.add_argument("--topic")
    r.add_argument("--partition", type=int)
    what = r.add_mutually_exclusive_group(required=True)
    what.add_argument("--replicas", help="target broker ids, comma separated; the first is the preferred leader")
    what.add_argument("--reassignment-json-file", help="Kafka's reassignment plan (see `logbroker topic --help`)")
    what.add_argument("--cancel", action="store_true", help="cancel the reassignment of --topic/--partition")
    what.add_argument("--list", action="store_true", help="list reassignments in progress")
    r.add_argument("--no-replication-factor-change", action="store_true")
    r.add_argument("--wait", action="store_true", help="wait until the partitions have moved")
    r.add_argument("--timeout", type=float, default=300.0, help="seconds --wait waits at most (default 300)")
    e = ts.add_parser("elect-leaders", help="move leadership to preferred replicas, or elect an unclean leader")
    e.add_argument("--type", choices=["preferred", "unclean"], default="preferred")
    e.add_argument("--topic")
    e.add_argument("--partition", type=int)


def _plan(args) -> list[tuple[str, int, list[int] | None]]:
    if args.reassignment_json_file:
        try:
            with open(args.reassignment_json_file) as f:
                doc = json.load(f)
            return [(str(p["topic"]), int(p["partition"]), [int(r) for r in p["replicas"]]) for p in doc["partitions"]]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UsageError(
                f"reassignment file {args.reassignment_json_file}: {e!r}; expected "
                '{"version": 1, "partitions": [{"topic": ..., "partition": ..., "replicas": [...]}]}'
            ) from None
    if args.topic is None or args.partition is None:
        raise UsageError("--replicas and --cancel need --topic and --partition")
    if args.cancel:
        return [(args.topic, args.partition, None)]
    try:
        replicas = [int(x) for x in args.replicas.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--replicas {args.replicas!r} is not a comma-separated list of broker ids") from None
    return [(args.topic, args.partition, replicas)]


def _moving(conn: BrokerConnection, topics: dict[str, list[int]] | None) -> list[tuple[str, int, list, list, list]]:
    req = REQUESTS[46]
    body = req(
        timeout_ms=TIMEOUT_MS,
        topics=None
        if topics is None
        else [req.ListPartitionReassignmentsTopics(name=n, partition_indexes=ps) for n, ps in topics.items()],
    )
    r = conn.send(body)
    if r.error_code:
        raise ClientError(f"ListPartitionReassignments: {_name(r.error_code)}: {r.error_message or ''}")
    return [
        (t.name, p.partition_index, list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
        for t in r.topics
        for p in t.partitions
    ]


def cmd_reassign(conn: BrokerConnection, args) -> int:
    if args.list:
        rows = _moving(conn, None)
        if not rows:
            print("no reassignments in progress")
        for name, i, replicas, adding, removing in sorted(rows):
            print(f"{name}-{i}: replicas {replicas} adding {adding} removing {removing}")
        return 0
    plan = _plan(args)
    req = REQUESTS[45]
    topics: dict[str, list] = {}
    for name, i, target in plan:
        topics.setdefault(name, []).append(req.ReassignablePartition(partition_index=i, replicas=target))
    allow = not args.no_replication_factor_change
    if not allow and conn.version_for(45) < 1:
        raise ClientError("the broker does not support --no-replication-factor-change (AlterPartitionReassignments v1)")
    r = conn.send(
        req(
            timeout_ms=TIMEOUT_MS,
            allow_replication_factor_change=allow,
            topics=[req.ReassignableTopic(name=n, partitions=ps) for n, ps in topics.items()],
        )
    )
    if r.error_code:
        raise ClientError(f"AlterPartitionReassignments: {_name(r.error_code)}: {r.error_message or ''}")
    failed = 0
    for t in r.responses:
        for p in t.partitions:
            if p.error_code:
                failed += 1
                print(f"{t.name}-{p.partition_index}: {_name(p.error_code)}: {p.error_message or ''}")
            else:
                print(f"{t.name}-{p.partition_index}: {'cancelled' if args.cancel else 'reassignment started'}")
    if args.wait and not failed and not args.cancel:
        wanted: dict[str, list[int]] = {}
        for name, i, _ in plan:
            wanted.setdefault(name, []).append(i)
        deadline = time.monotonic() + args.timeout
        while (rows := _moving(conn, wanted)) and time.monotonic() < deadline:
            time.sleep(0.5)
        if rows:
            print(f"still moving after {args.timeout:.0f} s: " + ", ".join(f"{n}-{i}" for n, i, *_ in rows))
            return 1
        print("reassignment complete")
    return 1 if failed else 0


def cmd_elect(conn: BrokerConnection, args) -> int:
    req = REQUESTS[43]
    if args.topic is None:
        wanted = None
    elif args.partition is not None:
        wanted = [req.TopicPartitions(topic=args.topic, partitions=[args.partition])]
    else:
        meta = conn.send(
            REQUESTS[3](topics=[REQUESTS[3].MetadataRequestTopic(name=args.topic)], allow_auto_topic_creation=False)
        )
        t = meta.topics[0]
        if t.error_code:
            raise ClientError(f"topic {args.topic}: {_name(t.error_code)}")
        wanted = [req.TopicPartitions(topic=args.topic, partitions=sorted(p.partition_index for p in t.partitions))]
    election_type = 0 if args.type == "preferred" else 1
    if election_type and conn.version_for(43) < 1:
        raise ClientError("the broker does not support unclean elections (ElectLeaders v1)")
    r = conn.send(req(election_type=election_type, topic_partitions=wanted, timeout_ms=TIMEOUT_MS))
    if getattr(r, "error_code", 0):
        raise ClientError(f"ElectLeaders: {_name(r.error_code)}")
    failed = 0
    rows = [
        (t.topic, p.partition_id, p.error_code, p.error_message)
        for t in r.replica_election_results
        for p in t.partition_result
    ]
    if not rows:
        print("no partition needed an election")
    for name, i, code, message in sorted(rows):
        if code == ErrorCode.NONE:
            print(f"{name}-{i}: elected")
        elif code == ErrorCode.ELECTION_NOT_NEEDED:
            print(f"{name}-{i}: no election needed")
        else:
            failed += 1
            print(f"{name}-{i}: {_name(code)}: {message or ''}")
    return 1 if failed else 0


def _table(title: str, columns: list[str], rows: list[list[object]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c)
    for row in rows:
        table.add_row(*(str(v) for v in row))
    Console(width=200).print(table)


def cmd_create(admin, args) -> int:
    from logbroker.client import NewTopic
    from logbroker.client.errors import TopicAlreadyExistsError

    configs = dict(key_values(args.config, "--config"))
    try:
        admin.create_topics([NewTopic(args.topic, args.partitions, args.replication_factor, configs)])
    except TopicAlreadyExistsError:
        if args.if_not_exists:
            print(f"topic {args.topic!r} exists")
            return 0
        raise
    d = admin.describe_topics([args.topic])[args.topic]
    rf = len(d.partitions[0].replicas) if d.partitions else 0
    print(f"created topic {args.topic!r}: {len(d.partitions)} partition(s), replication factor {rf}")
    return 0


def cmd_list(admin, args) -> int:
    names = sorted(n for n in admin.list_topics() if args.internal or not n.startswith("__"))
    if args.json:
        print(json.dumps(names))
    else:
        for n in names:
            print(n)
    return 0


def cmd_describe(admin, args) -> int:
    from logbroker.admin_views import describe_topics

    doc = describe_topics(admin, args.topic or None, configs=args.configs)
    missing = [t for t in args.topic if t not in {d["topic"] for d in doc}]
    if missing:
        print(f"logbroker: no such topic: {', '.join(missing)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    for d in doc:
        n, parts = d["topic"], d["partitions"]
        # tiered storage: the remote part [earliest, tiered up to] and where the local log starts
        tiered = any((p.get("latest_tiered_offset") or -1) >= 0 for p in parts)
        rows = []
        for p in parts:
            e, ltst = p["earliest_offset"], p["latest_offset"]
            row = [
                p["partition"],
                p["leader"],
                ",".join(map(str, p["replicas"])),
                ",".join(map(str, p["isr"])),
                "-" if e is None else e,
                "-" if ltst is None else ltst,
                ltst - e if e is not None and ltst is not None else "",
            ]
            if tiered:
                lt, el = p.get("latest_tiered_offset"), p.get("earliest_local_offset")
                row += ["-" if lt is None or lt < 0 else lt, "-" if el is None else el]
            rows.append([*row, "" if p["state"] == "ok" else p["state"]])
        rf = len(parts[0]["replicas"]) if parts else 0
        header = ["partition", "leader", "replicas", "isr", "earliest", "latest", "records"]
        _table(
            f"{n}: {len(parts)} partition(s), replication factor {rf}" + (" (internal)" if d["internal"] else ""),
            [*header, *(["tiered to", "local from"] if tiered else []), "state"],
            rows,
        )
        if args.configs:
            _table(f"{n}: configs", ["key", "value"], [[k, v] for k, v in d["configs"].items()])
    return 0


def cmd_alter_config(admin, args) -> int:
    changes: dict[str, str | None] = dict(key_values(args.set, "--set"))
    for key in args.delete:
        changes[key] = None
    if not changes:
        raise UsageError("alter-config needs --set KEY=VALUE or --delete KEY")
    admin.alter_configs({("topic", args.topic): changes})
    for k, v in changes.items():
        print(f"{args.topic}: {k} " + ("deleted (back to the default)" if v is None else f"= {v}"))
    return 0


def cmd_delete(admin, args) -> int:
    admin.delete_topics(args.topic)
    for t in args.topic:
        print(f"deleted topic {t!r}")
    return 0


ADMIN_COMMANDS = {
    "create": cmd_create,
    "list": cmd_list,
    "describe": cmd_describe,
    "alter-config": cmd_alter_config,
    "delete": cmd_delete,
}


def run(args) -> int:
    from logbroker.client import Admin, KafkaError

    commands = {"reassign": cmd_reassign, "elect-leaders": cmd_elect}
    try:
        conf = client_config(args.command_config)
        if args.topic_command in ADMIN_COMMANDS:
            with Admin(args.bootstrap_server, client_id="logbroker-topic", **conf) as admin:
                return ADMIN_COMMANDS[args.topic_command](admin, args)
        if args.topic_command == "reassign" and not args.list:
            _plan(args)  # bad arguments are reported before any connection
        if args.topic_command == "elect-leaders" and args.partition is not None and args.topic is None:
            raise UsageError("--partition needs --topic")
        with BrokerConnection(args.bootstrap_server, client_id="logbroker-topic", config=conf) as conn:
            return commands[args.topic_command](conn, args)
    except UsageError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 2
    except (ClientError, KafkaError) as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
