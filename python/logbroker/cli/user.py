"""`logbroker user ...`: the SCRAM credentials of SASL users (kept in the metadata log,
KIP-554), through Kafka's AlterUserScramCredentials and DescribeUserScramCredentials with the
admin client (any broker of a cluster will do; it forwards to the active controller).

    logbroker user set-password NAME [--mechanism SCRAM-SHA-256|SCRAM-SHA-512] [--iterations N]
                                     [--password P | --password-file F]
    logbroker user delete NAME [--mechanism M]
    logbroker user list [NAME ...]

`set-password` reads the password from `--password`, else the first line of
`--password-file`, else one line of stdin (no prompt: `echo "$PW" | logbroker user set-password
alice`); the password is salted on this side with a random salt, so only the salted password
travels. `delete` without `--mechanism` deletes every credential the user has. `list` prints
user, mechanism and iterations (never a salt or a key). Exit codes: 0 done, 1 an error from
the cluster (the message names the user), 2 bad arguments.
"""

from __future__ import annotations

import sys

from logbroker.cli.args import UsageError, add_command_config, run_admin_command
from logbroker.scram import MAX_ITERATIONS, MECHANISM_TYPES, MIN_ITERATIONS

DEFAULT_MECHANISM = "SCRAM-SHA-256"


def _password(args) -> str:
    if args.password is not None:
        password = args.password
    elif args.password_file is not None:
        try:
            with open(args.password_file, encoding="utf-8") as f:
                password = f.readline()
        except OSError as e:
            raise UsageError(f"{args.password_file}: {e.strerror or e}") from None
    else:
        password = sys.stdin.readline()
    password = password.rstrip("\r\n")
    if not password:
        where = "--password" if args.password is not None else args.password_file or "stdin"
        raise UsageError(
            f"no password for user {args.name!r} (from {where}); give --password, --password-file, or one line on stdin"
        )
    return password


def cmd_set_password(admin, args) -> int:
    if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
        raise UsageError(f"--iterations {args.iterations}: must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    admin.alter_user_scram_credentials(upsertions=[(args.name, args.mechanism, _password(args), args.iterations)])
    print(f"user {args.name}: {args.mechanism} credential set ({args.iterations} iterations)")
    return 0


def cmd_delete(admin, args) -> int:
    if args.mechanism is not None:
        mechanisms = [args.mechanism]
    else:
        mechanisms = [m for m, _i in admin.describe_user_scram_credentials([args.name])[args.name]]
    for m in mechanisms:  # one request each: Kafka alters a user at most once per request
        admin.alter_user_scram_credentials(deletions=[(args.name, m)])
        print(f"user {args.name}: {m} credential deleted")
    return 0


def cmd_list(admin, args) -> int:
    described = admin.describe_user_scram_credentials(args.names or None)
    rows = [("USER", "MECHANISM", "ITERATIONS")]
    rows += [(user, m, str(i)) for user, creds in sorted(described.items()) for m, i in creds]
    widths = [max(len(r[c]) for r in rows) for c in range(2)]
    for user, m, i in rows:
        print(f"{user:<{widths[0]}}  {m:<{widths[1]}}  {i}")
    return 0


def add_parser(sub) -> None:
    u = sub.add_parser("user", help="set, delete and list the SCRAM credentials of SASL users")
    u.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    add_command_config(u)
    us = u.add_subparsers(dest="user_command", required=True)
    mechanisms = sorted(MECHANISM_TYPES)
    s = us.add_parser("set-password", help="create or replace a user's SCRAM credential")
    s.add_argument("name")
    s.add_argument("--mechanism", choices=mechanisms, default=DEFAULT_MECHANISM, help=f"default {DEFAULT_MECHANISM}")
    s.add_argument(
        "--iterations",
        type=int,
        default=MIN_ITERATIONS,
        help=f"{MIN_ITERATIONS}..{MAX_ITERATIONS} (default {MIN_ITERATIONS})",
    )
    given = s.add_mutually_exclusive_group()
    given.add_argument(
        "--password",
        help="the password (visible to other local users in the process list; prefer --password-file or stdin)",
    )
    given.add_argument("--password-file", metavar="FILE", help="a file whose first line is the password")
    d = us.add_parser("delete", help="delete a user's SCRAM credentials")
    d.add_argument("name")
    d.add_argument("--mechanism", choices=mechanisms, help="default: every credential the user has")
    lst = us.add_parser("list", help="users with SCRAM credentials: mechanism and iterations")
    lst.add_argument("names", nargs="*", metavar="NAME", help="default: every user")


def run(args) -> int:
    commands = {"set-password": cmd_set_password, "delete": cmd_delete, "list": cmd_list}
    return run_admin_command(args, "logbroker-user", commands[args.user_command])
