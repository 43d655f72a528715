"""`logbroker cluster status`: the state of a cluster as one broker sees it, through the
Kafka protocol (any broker of the cluster will do); `add-voter` and `remove-voter` change
the controller quorum's voters (voter.py).

    logbroker cluster status --bootstrap-server 127.0.0.1:9092 [--json]

Prints the cluster id and active controller, then three tables: the nodes (id, host:port,
rack, roles, fenced or not), the controller quorum (leader, leader epoch, high watermark,
and per voter its log end offset, lag behind the leader and the age of its last fetch) and
the partitions that are offline (no leader) or under-replicated (ISR smaller than the
replica set), or "none". `--json` prints the same as one JSON object.

The status is collected by `logbroker.admin_views.collect`, which the web console serves too.
Sources: DescribeCluster (v2, fenced brokers included), Metadata (all topics) and
DescribeQuorum (API key 55, `__cluster_metadata-0`). DescribeQuorum is asked last and
optional: when the broker does not offer it or it fails, the other tables are printed with
a line saying why the quorum could not be described. Exit codes: 0 ok, 1 the cluster cannot
be reached (or answers with an error), 2 bad arguments.
"""

from __future__ import annotations

import json
import sys

from logbroker.admin_views import METADATA_TOPIC, StatusError, collect
from logbroker.cli.args import add_command_config, client_config


def _table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [headers] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def render(status: dict) -> str:
    """The readable form of `collect()`'s dict."""
    controller = status["controller_id"]
    out = [
        f"cluster {status['cluster_id']}, active controller "
        + (str(controller) if controller >= 0 else "none")
        + f" (asked {status['bootstrap_server']})",
        "",
    ]
    out.append("nodes:")
    out.append(
        _table(
            ["ID", "HOST:PORT", "RACK", "ROLES", "STATE"],
            [
                [
                    n["node_id"],
                    f"{n['host']}:{n['port']}" if n["host"] else None,
                    n["rack"] or None,
                    ",".join(n["roles"]),
                    n["state"],
                ]
                for n in status["nodes"]
            ],
        )
    )
    out.append("")
    q = status["quorum"]
    if q is None:
        out.append(f"quorum: could not be described: {status['quorum_error']}")
    else:
        out.append(
            f"quorum {METADATA_TOPIC}-0: leader {q['leader_id']}, leader epoch {q['leader_epoch']}, "
            f"high watermark {q['high_watermark']}"
        )
        out.append(
            _table(
                ["NODE", "STATUS", "LOG-END-OFFSET", "LAG", "LAST-FETCH-AGE-MS"],
                [
                    [r["node_id"], r["status"], r["log_end_offset"], r["lag"], r["last_fetch_age_ms"]]
                    for r in q["voters"] + q["observers"]
                ],
            )
        )
    out.append("")
    parts = status["partitions"]
    if not parts:
        out.append("under-replicated or offline partitions: none")
    else:
        out.append(f"under-replicated or offline partitions: {len(parts)}")
        out.append(
            _table(
                ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "STATUS"],
                [
                    [
                        p["topic"],
                        p["partition"],
                        p["leader"],
                        ",".join(map(str, p["replicas"])) or None,
                        ",".join(map(str, p["isr"])) or None,
                        p["status"],
                    ]
                    for p in parts
                ],
            )
        )
    return "\n".join(out)


def add_parser(sub) -> None:
    c = sub.add_parser("cluster", help="the state of a cluster: nodes, controller quorum, partitions needing attention")
    cs = c.add_subparsers(dest="cluster_command", required=True)
    s = cs.add_parser("status", help="nodes, controller quorum, under-replicated and offline partitions")
    s.add_argument(
        "--bootstrap-server",
        default="127.0.0.1:9092",
        help="HOST:PORT of any broker (or several, comma-separated; default 127.0.0.1:9092)",
    )
    s.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    add_command_config(s)
    from logbroker.cli.voter import add_parsers as add_voter_parsers

    add_voter_parsers(cs)


def _bad_bootstrap(bootstrap: str) -> str | None:
    servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
    if not servers:
        return "--bootstrap-server is empty"
    for s in servers:
        host, sep, port = s.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            return f"--bootstrap-server expects HOST:PORT, got {s!r}"
    return None


def run(args) -> int:
    bad = _bad_bootstrap(args.bootstrap_server)
    if bad:
        print(f"logbroker: {bad}", file=sys.stderr)
        return 2
    if args.cluster_command in ("add-voter", "remove-voter"):
        from logbroker.cli.voter import run as run_voter

        return run_voter(args)
    try:
        status = collect(args.bootstrap_server, client_config(args.command_config))
    except StatusError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
    print(json.dumps(status, indent=2) if args.json else render(status))
    return 0
