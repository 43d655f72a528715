"""`logbroker group ...`: list, describe (members, assignment, committed offsets, lag),
reset-offsets and delete consumer groups, through the Kafka protocol with the admin client
(each group's coordinator and each partition's leader are found as a client finds them, so
any broker of a cluster will do). The figures come from `logbroker.admin_views`, which the
web console serves too."""

from __future__ import annotations

import datetime as dt
import sys

from logbroker.admin_views import describe_group, reset_offsets
from logbroker.cli.args import add_command_config, client_config


def cmd_list(admin, args) -> int:
    for group_id, protocol_type, state in admin.list_groups():
        print(f"{group_id}\t{state or '-'}\t{protocol_type}")
    return 0


def cmd_describe(admin, args) -> int:
    d = describe_group(admin, args.group)
    print(
        f"group {args.group}: state {d['state']}, protocol {d['protocol_type'] or '-'}/{d['protocol'] or '-'}, "
        f"{len(d['members'])} member(s)"
    )
    for m in d["members"]:
        print(
            f"  member {m['member_id']} client {m['client_id']} host {m['host']}"
            + (f" instance {m['instance_id']}" if m["instance_id"] else "")
            + f" assignment {m['assignment']}"
        )
    print(f"{'TOPIC':<24} {'PARTITION':>9} {'COMMITTED':>12} {'LOG-END':>12} {'LAG':>10}  MEMBER")

    def show(v: object) -> object:
        return "-" if v is None else v

    for p in d["partitions"]:
        print(
            f"{p['topic']:<24} {p['partition']:>9} {show(p['committed_offset']):>12} {show(p['log_end_offset']):>12} "
            f"{show(p['lag']):>10}  {show(p['member'])}"
        )
    return 0


def cmd_reset(admin, args) -> int:
    if args.to_earliest or args.to_latest:
        to, value = ("earliest" if args.to_earliest else "latest"), None
    elif args.to_offset is not None:
        to, value = "offset", args.to_offset
    else:
        when = dt.datetime.fromisoformat(args.to_datetime)
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        to, value = "timestamp", int(when.timestamp() * 1000)
    for (t, p), o in reset_offsets(admin, args.group, args.topic, to, value).items():
        print(f"{t}\t{p}\t{o}")
    return 0


def cmd_delete(admin, args) -> int:
    admin.delete_groups([args.group])
    print(f"deleted group {args.group}")
    return 0


def add_parser(sub) -> None:
    g = sub.add_parser("group", help="list, describe, reset offsets of and delete consumer groups")
    g.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    add_command_config(g)
    gs = g.add_subparsers(dest="group_command", required=True)
    gs.add_parser("list", help="list groups")
    d = gs.add_parser("describe", help="members, assignment, committed offsets and lag")
    d.add_argument("group")
    r = gs.add_parser("reset-offsets", help="set committed offsets of an inactive group")
    r.add_argument("group")
    r.add_argument("--topic", required=True)
    how = r.add_mutually_exclusive_group(required=True)
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--to-datetime", help="ISO 8601, e.g. 2026-11-21T10:00:00 (UTC unless an offset is given)")
    x = gs.add_parser("delete", help="delete an empty group and its committed offsets")
    x.add_argument("group")


def run(args) -> int:
    from logbroker.client import Admin, KafkaError

    commands = {"list": cmd_list, "describe": cmd_describe, "reset-offsets": cmd_reset, "delete": cmd_delete}
    try:
        with Admin(args.bootstrap_server, client_id="logbroker-group", **client_config(args.command_config)) as admin:
            return commands[args.group_command](admin, args)
    except (KafkaError, ValueError) as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
