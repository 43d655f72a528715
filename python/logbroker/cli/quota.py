"""`logbroker quota ...`: client quotas (KIP-13/55: produce and fetch byte rates by user and
client id, kept in the metadata log), through Kafka's AlterClientQuotas and
DescribeClientQuotas with the admin client (any broker of a cluster will do; it forwards to
the active controller).

    logbroker quota set ENTITY [--producer-byte-rate N] [--consumer-byte-rate N]
    logbroker quota remove ENTITY [--key producer_byte_rate|consumer_byte_rate ...]
    logbroker quota list [ENTITY]

ENTITY is `--user NAME` or `--user-default`, and/or `--client-id ID` or `--client-id-default`
(Kafka's entities: /config/users/alice, /config/users/alice/clients/app, /config/clients/<default>,
...). `remove` without `--key` removes every quota the entity has. `list` prints the
quotas of the entities matching (without an entity: every quota; `--strict` leaves out
entities with other components). Rates are bytes per second. Exit codes: 0 done, 1 an
error from the cluster (the message names the entity and key), 2 bad arguments.
"""

from __future__ import annotations

from logbroker.cli.args import UsageError, add_command_config, run_admin_command
from logbroker.coord.metadata.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    KEYS,
    PRODUCER_BYTE_RATE,
    USER,
    entity_name,
)


def _entity(args) -> dict[str, str | None]:
    entity: dict[str, str | None] = {}
    if args.user is not None:
        entity[USER] = args.user
    elif args.user_default:
        entity[USER] = None
    if args.client_id is not None:
        entity[CLIENT_ID] = args.client_id
    elif args.client_id_default:
        entity[CLIENT_ID] = None
    return entity


def _needs_entity(args) -> dict[str, str | None]:
    entity = _entity(args)
    if not entity:
        raise UsageError("name an entity: --user NAME or --user-default, and/or --client-id ID or --client-id-default")
    return entity


def _rate(option: str, value: int | None) -> float | None:
    if value is not None and value <= 0:
        raise UsageError(f"{option} {value}: a byte rate must be greater than 0")
    return None if value is None else float(value)


def cmd_set(admin, args) -> int:
    entity = _needs_entity(args)
    ops = {
        k: v
        for k, v in [
            (PRODUCER_BYTE_RATE, _rate("--producer-byte-rate", args.producer_byte_rate)),
            (CONSUMER_BYTE_RATE, _rate("--consumer-byte-rate", args.consumer_byte_rate)),
        ]
        if v is not None
    }
    if not ops:
        raise UsageError("nothing to set: give --producer-byte-rate and/or --consumer-byte-rate")
    admin.alter_client_quotas([(entity, ops)])
    name = entity_name(sorted(entity.items()))
    print(f"{name}: " + ", ".join(f"{k}={v:.0f}" for k, v in ops.items()))
    return 0


def cmd_remove(admin, args) -> int:
    entity = _needs_entity(args)
    key = tuple(sorted(entity.items()))
    keys = args.key or sorted(
        admin.describe_client_quotas(
            [(t, "exact" if n is not None else "default", n) for t, n in key], strict=True
        ).get(key, {})
    )
    name = entity_name(key)
    if not keys:
        print(f"{name}: no quotas")
        return 0
    admin.alter_client_quotas([(entity, {k: None for k in keys})])
    print(f"{name}: removed {', '.join(keys)}")
    return 0


def cmd_list(admin, args) -> int:
    components = [(t, "exact" if n is not None else "default", n) for t, n in sorted(_entity(args).items())]
    quotas = admin.describe_client_quotas(components, strict=args.strict)
    rows = [("USER", "CLIENT-ID", "KEY", "VALUE")]
    for entity, values in sorted(quotas.items(), key=lambda kv: entity_name(kv[0])):
        parts = dict(entity)
        shown = [
            "-" if t not in parts else "<default>" if parts[t] is None else str(parts[t]) for t in (USER, CLIENT_ID)
        ]
        rows += [(shown[0], shown[1], k, f"{v:.0f}") for k, v in sorted(values.items())]
    widths = [max(len(r[c]) for r in rows) for c in range(3)]
    for r in rows:
        print(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}")
    return 0


def _entity_options(p) -> None:
    user = p.add_mutually_exclusive_group()
    user.add_argument("--user", metavar="NAME", help="a user (the principal's name, e.g. alice for User:alice)")
    user.add_argument("--user-default", action="store_true", help="the default user (<default>)")
    client = p.add_mutually_exclusive_group()
    client.add_argument("--client-id", metavar="ID", help="a client id")
    client.add_argument("--client-id-default", action="store_true", help="the default client id (<default>)")


def add_parser(sub) -> None:
    q = sub.add_parser("quota", help="set, remove and list client quotas (produce and fetch byte rates)")
    q.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    add_command_config(q)
    qs = q.add_subparsers(dest="quota_command", required=True)
    s = qs.add_parser("set", help="set an entity's byte rates")
    _entity_options(s)
    s.add_argument("--producer-byte-rate", type=int, metavar="N", help="bytes per second the entity may produce")
    s.add_argument("--consumer-byte-rate", type=int, metavar="N", help="bytes per second the entity may fetch")
    r = qs.add_parser("remove", help="remove an entity's quotas")
    _entity_options(r)
    r.add_argument("--key", action="append", choices=KEYS, help="default: every quota the entity has")
    lst = qs.add_parser("list", help="the quotas of the entities matching (default: all)")
    _entity_options(lst)
    lst.add_argument("--strict", action="store_true", help="only entities with exactly the components named")


def run(args) -> int:
    commands = {"set": cmd_set, "remove": cmd_remove, "list": cmd_list}
    return run_admin_command(args, "logbroker-quota", commands[args.quota_command])
