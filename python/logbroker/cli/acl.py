"""`logbroker acl ...`: the ACLs of a cluster (kept in the metadata log, enforced when the
brokers run with `authorizer.class.name` set), with Kafka's CreateAcls, DescribeAcls and
DeleteAcls through the admin client, and kafka-acls's options:

    logbroker acl add    (--allow-principal P | --deny-principal P)... [--allow-host H]... [--deny-host H]...
                         [--operation OP]... RESOURCE... [--resource-pattern-type literal|prefixed]
                         | --producer [--idempotent] | --consumer
    logbroker acl list   [RESOURCE...] [--resource-pattern-type literal|prefixed|match|any] [--principal P]...
    logbroker acl remove RESOURCE... [the options of add] [--force]

    RESOURCE: --topic NAME, --group NAME, --transactional-id ID (each repeatable), --cluster

As kafka-acls: a principal is `Type:name` (`User:alice`, `User:*` for everyone); hosts
default to `*` (every host); operations (Read, Write, Create, Delete, Alter, Describe,
ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All; default All) must suit
the resource type; `--producer` gives Write, Describe and Create on the topics (Write and
Describe on transactional ids; with `--idempotent` IdempotentWrite on the cluster),
`--consumer` Read and Describe on the topics and Read on the group. `add` makes one ACL per
resource, principal, host and operation. `remove` without principals removes every ACL of
each resource; it asks for confirmation on stdin unless `--force`. `list` without a resource
lists every ACL. `--bootstrap-server` and `--command-config` go before or after the action.

Exit codes: 0 done, 1 an error from the cluster (SECURITY_DISABLED without an authorizer,
CLUSTER_AUTHORIZATION_FAILED without ALTER/DESCRIBE on the cluster, INVALID_REQUEST naming
the bad field), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import re
import sys

from logbroker.cli.args import UsageError, add_command_config, run_admin_command

CLUSTER_NAME = "kafka-cluster"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
WILDCARD_HOST = "*"
# Kafka's AclEntry.supportedOperations, plus "all" for every type
SUPPORTED = {
    "topic": {"read", "write", "create", "describe", "delete", "alter", "describe_configs", "alter_configs"},
    "group": {"read", "describe", "delete", "describe_configs", "alter_configs"},
    "cluster": {
        "create",
        "cluster_action",
        "describe_configs",
        "alter_configs",
        "idempotent_write",
        "alter",
        "describe",
    },
    "transactional_id": {"describe", "write", "two_phase_commit"},
}
PRODUCER_TOPIC, PRODUCER_TXN, CONSUMER_TOPIC, CONSUMER_GROUP = (
    ("write", "describe", "create"),
    ("write", "describe"),
    ("read", "describe"),
    ("read",),
)


def operation_name(text: str) -> str:
    """Kafka's operation spellings (Read, DescribeConfigs, describe-configs, DESCRIBE_CONFIGS)
    as the admin client's names ("read", "describe_configs")."""
    name = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", text.strip()).lower().replace("-", "_")
    known = set().union(*SUPPORTED.values()) | {"all"}
    if name not in known:
        raise UsageError(f"--operation {text!r}: not one of {', '.join(_camel(o) for o in sorted(known))}")
    return name


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _principal(text: str, option: str) -> str:
    kind, sep, name = text.strip().partition(":")
    if not (kind and sep and name):
        raise UsageError(f"{option} {text!r}: a principal is Type:name, e.g. User:alice (User:* for everyone)")
    return f"{kind}:{name}"


def resources(args, pattern_type: str) -> list[tuple[str, str, str]]:
    """(resource type, name, pattern type) of each resource option, in order, without repeats."""
    out = [("topic", t.strip(), pattern_type) for t in args.topic or []]
    if args.cluster or getattr(args, "idempotent", False):  # the one cluster: never a prefix
        out.append(("cluster", CLUSTER_NAME, "literal" if pattern_type == "prefixed" else pattern_type))
    out += [("group", g.strip(), pattern_type) for g in args.group or []]
    out += [("transactional_id", t, pattern_type) for t in args.transactional_id or []]
    if any(not name for _t, name, _p in out):
        raise UsageError("a resource name is empty")
    return list(dict.fromkeys(out))


def entries(args, operations: tuple[str, ...]) -> list[tuple[str, str, str, str]]:
    """(principal, host, operation, permission) for every allowed and denied principal, host
    and operation; hosts default to * for the principals given."""
    out = []
    for permission in ("allow", "deny"):
        principals = [
            _principal(p, f"--{permission}-principal") for p in getattr(args, f"{permission}_principal") or []
        ]
        hosts = [h.strip() for h in getattr(args, f"{permission}_host") or []]
        if hosts and not principals:
            raise UsageError(f"--{permission}-host needs --{permission}-principal")
        for principal in principals:
            for host in hosts or [WILDCARD_HOST]:
                out += [(principal, host, op, permission) for op in operations]
    return list(dict.fromkeys(out))


def resource_entries(args, pattern_type: str) -> dict[tuple[str, str, str], list[tuple[str, str, str, str]]]:
    """What `add` creates and `remove` deletes: kafka-acls's getResourceFilterToAcls."""
    if (args.producer or args.consumer) and (args.operation or args.deny_principal or args.deny_host):
        raise UsageError(
            "--producer and --consumer choose the operations: no --operation, --deny-principal or --deny-host with them"
        )
    if args.idempotent and not args.producer:
        raise UsageError("--idempotent is only for --producer")
    if args.producer and not args.topic:
        raise UsageError("with --producer, give a --topic")
    if args.consumer and (
        not args.topic or not args.group or (not args.producer and (args.cluster or args.transactional_id))
    ):
        raise UsageError("with --consumer, give a --topic and a --group, and no --cluster or --transactional-id")
    patterns = resources(args, pattern_type)
    if not patterns:
        raise UsageError("give at least one resource: --topic, --group, --cluster or --transactional-id")
    out: dict[tuple[str, str, str], list[tuple[str, str, str, str]]] = {}
    if not args.producer and not args.consumer:
        ops = tuple(dict.fromkeys(operation_name(o) for o in args.operation or ["All"]))
        out = {r: entries(args, ops) for r in patterns}
    if args.producer:
        for r in patterns:
            ops = {"topic": PRODUCER_TOPIC, "transactional_id": PRODUCER_TXN}.get(r[0])
            if r[0] == "cluster" and args.idempotent:
                ops = ("idempotent_write",)
            if ops:
                out[r] = entries(args, ops)
    if args.consumer:
        for r in patterns:
            ops = {"topic": CONSUMER_TOPIC, "group": CONSUMER_GROUP}.get(r[0])
            if ops:
                out[r] = list(dict.fromkeys(out.get(r, []) + entries(args, ops)))
    for (rtype, _name, _p), acls in out.items():
        bad = sorted({op for _pr, _h, op, _perm in acls} - SUPPORTED[rtype] - {"all"})
        if bad:
            raise UsageError(
                f"{rtype.upper()} resources do not take {', '.join(_camel(o) for o in bad)}; they take "
                f"{', '.join(_camel(o) for o in sorted(SUPPORTED[rtype] | {'all'}))}"
            )
    return out


def print_acls(acls) -> None:
    rows = [("RESOURCE_TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION")]
    rows += [
        (
            a.resource_type.upper(),
            a.name,
            a.pattern_type.upper(),
            a.principal,
            a.host,
            a.operation.upper(),
            a.permission.upper(),
        )
        for a in acls
    ]
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join(f"{v:<{w}}" for v, w in zip(r, widths)) + "  " + r[-1])


def cmd_add(admin, args) -> int:
    from logbroker.client.admin import AclBinding

    if args.resource_pattern_type not in ("literal", "prefixed"):
        raise UsageError(
            f"--resource-pattern-type {args.resource_pattern_type} is for list and remove; an ACL is "
            "literal or prefixed"
        )
    todo = resource_entries(args, args.resource_pattern_type)
    if any(not acls for acls in todo.values()):
        raise UsageError("give --allow-principal or --deny-principal to add ACLs")
    bindings = [
        AclBinding(rtype, name, ptype, principal, host, op, perm)
        for (rtype, name, ptype), acls in todo.items()
        for principal, host, op, perm in acls
    ]
    admin.create_acls(bindings)
    print(f"added {len(bindings)} ACL(s) (an ACL that existed already is left as it was):")
    print_acls(bindings)
    return 0


def _confirm(question: str) -> bool:
    print(f"{question} (y/n)", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def cmd_remove(admin, args) -> int:
    from logbroker.client.admin import AclBindingFilter

    todo = resource_entries(args, args.resource_pattern_type)
    filters = []
    for (rtype, name, ptype), acls in todo.items():
        if not acls:
            filters.append(AclBindingFilter(rtype, name, ptype))
        else:
            filters += [
                AclBindingFilter(rtype, name, ptype, principal, host, op, perm) for principal, host, op, perm in acls
            ]
    if not args.force:
        what = "; ".join(f"{rtype.upper()} {name!r} ({ptype})" for rtype, name, ptype in todo)
        scope = "every ACL" if all(not a for a in todo.values()) else "the ACLs given"
        if not _confirm(f"remove {scope} of {what}?"):
            print("nothing removed", file=sys.stderr)
            return 1
    removed = list(dict.fromkeys(b for matched in admin.delete_acls(filters) for b in matched))
    print(f"removed {len(removed)} ACL(s)" + (":" if removed else ""))
    if removed:
        print_acls(removed)
    return 0


def cmd_list(admin, args) -> int:
    from logbroker.client.admin import AclBindingFilter

    principals = [_principal(p, "--principal") for p in args.principal or []] or [None]
    patterns = resources(args, args.resource_pattern_type)
    filters = (
        [AclBindingFilter(rtype, name, ptype, principal) for rtype, name, ptype in patterns for principal in principals]
        if patterns
        else [AclBindingFilter(principal=p) for p in principals]
    )
    found = list(dict.fromkeys(b for f in filters for b in admin.describe_acls(f)))
    print_acls(found)
    return 0


def _add_connection_options(parser, top: bool) -> None:
    default = DEFAULT_BOOTSTRAP if top else argparse.SUPPRESS
    parser.add_argument(
        "--bootstrap-server", default=default, help=f"HOST:PORT of a broker (default {DEFAULT_BOOTSTRAP})"
    )
    if top:
        add_command_config(parser)
    else:
        parser.add_argument(
            "--command-config",
            metavar="FILE",
            default=argparse.SUPPRESS,
            help="client properties (security.protocol=SSL, ...), as Kafka's tools take them",
        )


def _add_resource_options(parser, patterns: list[str], default_pattern: str) -> None:
    parser.add_argument("--topic", action="append", metavar="NAME", help="a topic (repeatable; * for every topic)")
    parser.add_argument("--group", action="append", metavar="NAME", help="a consumer group (repeatable)")
    parser.add_argument("--cluster", action="store_true", help=f"the cluster ({CLUSTER_NAME})")
    parser.add_argument("--transactional-id", action="append", metavar="ID", help="a transactional id (repeatable)")
    parser.add_argument(
        "--resource-pattern-type",
        choices=patterns,
        default=default_pattern,
        type=str.lower,
        help=f"default {default_pattern}",
    )


def _add_entry_options(parser) -> None:
    for permission in ("allow", "deny"):
        parser.add_argument(
            f"--{permission}-principal",
            action="append",
            metavar="TYPE:NAME",
            help=f"the principal to {permission}, e.g. User:alice (repeatable)",
        )
        parser.add_argument(
            f"--{permission}-host",
            action="append",
            metavar="HOST",
            help=f"a host the {permission} applies to (repeatable; default * for every host)",
        )
    parser.add_argument(
        "--operation",
        action="append",
        metavar="OP",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite or All (repeatable; default All)",
    )
    parser.add_argument(
        "--producer",
        action="store_true",
        help="the ACLs a producer needs on the --topic "
        "(Write, Describe, Create) and --transactional-id (Write, Describe)",
    )
    parser.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    parser.add_argument(
        "--consumer",
        action="store_true",
        help="the ACLs a consumer needs: Read and Describe on the --topic, Read on the --group",
    )


def add_parser(sub) -> None:
    a = sub.add_parser("acl", help="add, list and remove ACLs (Kafka's kafka-acls)")
    _add_connection_options(a, top=True)
    acts = a.add_subparsers(dest="acl_command", required=True)
    add = acts.add_parser("add", help="create ACLs")
    _add_connection_options(add, top=False)
    _add_resource_options(add, ["literal", "prefixed"], "literal")
    _add_entry_options(add)
    lst = acts.add_parser("list", help="list ACLs (every ACL without a resource)")
    _add_connection_options(lst, top=False)
    _add_resource_options(lst, ["literal", "prefixed", "match", "any"], "literal")
    lst.add_argument("--principal", action="append", metavar="TYPE:NAME", help="only this principal's (repeatable)")
    rm = acts.add_parser("remove", help="delete ACLs")
    _add_connection_options(rm, top=False)
    _add_resource_options(rm, ["literal", "prefixed", "match", "any"], "literal")
    _add_entry_options(rm)
    rm.add_argument("--force", action="store_true", help="do not ask for confirmation")


def run(args) -> int:
    commands = {"add": cmd_add, "list": cmd_list, "remove": cmd_remove}
    return run_admin_command(args, "logbroker-acl", commands[args.acl_command])
