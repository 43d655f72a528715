"""`logbroker cluster status`: the state of a cluster as one broker sees it, through the
Kafka protocol (any broker of the cluster will do); `add-voter` and `remove-voter` change
the controller quorum's voters (voter_cli.py).

    logbroker cluster status --bootstrap-server 127.0.0.1:9092 [--json]

Prints the cluster id and active controller, then three tables: the nodes (id, host:port,
rack, roles, fenced or not), the controller quorum (leader, leader epoch, high watermark,
and per voter its log end offset, lag behind the leader and the age of its last fetch) and
the partitions that are offline (no leader) or under-replicated (ISR smaller than the
replica set), or "none". `--json` prints the same as one JSON object.

Sources: DescribeCluster (v2, fenced brokers included), Metadata (all topics) and
DescribeQuorum (API key 55, `__cluster_metadata-0`). DescribeQuorum is asked last and
optional: when the broker does not offer it or it fails, the other tables are printed with
a line saying why the quorum could not be described. Exit codes: 0 ok, 1 the cluster cannot
be reached (or answers with an error), 2 bad arguments.
"""

from __future__ import annotations

import json
import sys
import time

from logbroker.admin_views import partition_state
from logbroker.cli_args import add_command_config, client_config
from logbroker.client import BrokerConnection, ClientError
from logbroker.protocol import REQUESTS, ErrorCode, ProtocolError
from logbroker.common import directory_id

METADATA_TOPIC = "__cluster_metadata"
TIMEOUT_S = 10.0


class StatusError(Exception):
    """The cluster could not be reached or did not answer DescribeCluster/Metadata."""


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _brokers(conn: BrokerConnection) -> tuple[str, int, list[dict]]:
    """(cluster id, active controller, brokers) from DescribeCluster; from Metadata when the
    broker does not offer DescribeCluster (then fenced brokers are not seen)."""
    if 60 in conn.versions:
        version = conn.version_for(60)
        request = REQUESTS[60](include_fenced_brokers=True) if version >= 2 else REQUESTS[60]()
        r = conn.send(request, version=version)
        if r.error_code:
            raise StatusError(f"DescribeCluster from {conn.bootstrap}: {_error_name(r.error_code)}"
                              + (f": {r.error_message}" if r.error_message else ""))
        brokers = [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack,
                    "fenced": bool(version >= 2 and b.is_fenced)} for b in r.brokers]
        return r.cluster_id, r.controller_id, brokers
    r = conn.send(REQUESTS[3](topics=[], allow_auto_topic_creation=False))
    brokers = [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "fenced": False}
               for b in r.brokers]
    return r.cluster_id, r.controller_id, brokers


def _problem_partitions(conn: BrokerConnection) -> list[dict]:
    """Partitions that are offline (leader -1) or under-replicated (ISR smaller than replicas)."""
    r = conn.send(REQUESTS[3](topics=None, allow_auto_topic_creation=False))
    out = []
    for t in sorted(r.topics, key=lambda t: t.name or ""):
        if t.error_code:
            out.append({"topic": t.name, "partition": None, "leader": None, "replicas": [], "isr": [],
                        "status": _error_name(t.error_code)})
            continue
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            status = partition_state(p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
            if status == "ok":
                continue
            out.append({"topic": t.name, "partition": p.partition_index, "leader": p.leader_id,
                        "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes), "status": status})
    return out


def describe_quorum(conn: BrokerConnection) -> dict:
    """DescribeQuorum of __cluster_metadata-0; raises StatusError saying why it cannot be had."""
    Request = REQUESTS.get(55)
    if Request is None:
        raise StatusError("this logbroker has no DescribeQuorum message (API key 55)")
    if 55 not in conn.versions:
        raise StatusError(f"broker {conn.bootstrap} does not offer DescribeQuorum (API key 55) in ApiVersions")
    try:
        version = conn.version_for(55)
    except ClientError as e:
        raise StatusError(str(e)) from None
    request = Request(topics=[Request.TopicData(topic_name=METADATA_TOPIC,
                                                partitions=[Request.PartitionData(partition_index=0)])])
    try:
        r = conn.send(request, version=version)
    except Exception as e:  # noqa: BLE001 - whatever went wrong, the other tables are still printed
        raise StatusError(f"DescribeQuorum v{version} to {conn.bootstrap} failed: "
                          f"{e or type(e).__name__}") from None
    if r.error_code:
        message = getattr(r, "error_message", None)
        raise StatusError(f"DescribeQuorum: {_error_name(r.error_code)}" + (f": {message}" if message else ""))
    parts = [p for t in r.topics if t.topic_name == METADATA_TOPIC for p in t.partitions if p.partition_index == 0]
    if not parts:
        raise StatusError(f"DescribeQuorum answered without {METADATA_TOPIC}-0")
    p = parts[0]
    if p.error_code:
        message = getattr(p, "error_message", None)
        raise StatusError(f"DescribeQuorum {METADATA_TOPIC}-0: {_error_name(p.error_code)}"
                          + (f": {message}" if message else ""))
    now_ms = int(time.time() * 1000)
    leader_end = next((v.log_end_offset for v in p.current_voters if v.replica_id == p.leader_id), None)

    def replica(v, status: str) -> dict:
        directory = getattr(v, "replica_directory_id", None)
        return {
            "node_id": v.replica_id,
            "status": status,
            "directory_id": None if directory is None or directory.int == 0 else directory_id.text(directory),
            "log_end_offset": v.log_end_offset,
            "lag": (leader_end - v.log_end_offset) if leader_end is not None and v.log_end_offset >= 0 else None,
            "last_fetch_age_ms": max(0, now_ms - v.last_fetch_timestamp) if v.last_fetch_timestamp >= 0 else None,
            "last_caught_up_age_ms": (max(0, now_ms - v.last_caught_up_timestamp)
                                      if v.last_caught_up_timestamp >= 0 else None),
        }

    voters = [replica(v, "leader" if v.replica_id == p.leader_id else "follower")
              for v in sorted(p.current_voters, key=lambda v: v.replica_id)]
    observers = [replica(v, "observer") for v in sorted(p.observers, key=lambda v: v.replica_id)]
    endpoints = {n.node_id: (n.listeners[0].host, n.listeners[0].port)
                 for n in getattr(r, "nodes", None) or [] if n.listeners}
    return {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch, "high_watermark": p.high_watermark,
            "voters": voters, "observers": observers,
            "controller_endpoints": {str(k): f"{h}:{port}" for k, (h, port) in sorted(endpoints.items())}}


def collect(bootstrap: str, config: dict[str, str] | None = None) -> dict:
    """Everything `cluster status` shows, as a JSON-able dict. Raises StatusError when no
    broker of `bootstrap` (HOST:PORT[,HOST:PORT...]) answers. `config`: client properties
    (TLS)."""
    errors = []
    for server in [s.strip() for s in bootstrap.split(",") if s.strip()]:
        try:
            conn = BrokerConnection(server, client_id="logbroker-cluster-status", timeout=TIMEOUT_S, config=config)
        except (ClientError, OSError, ProtocolError) as e:
            errors.append(_why(server, e))
            continue
        with conn:
            try:
                cluster_id, controller_id, brokers = _brokers(conn)
                partitions = _problem_partitions(conn)
            except (ClientError, OSError, ProtocolError, StatusError) as e:
                errors.append(_why(server, e))
                continue
            try:
                quorum, quorum_error = describe_quorum(conn), None
            except StatusError as e:
                quorum, quorum_error = None, str(e)
        return {"bootstrap_server": server, "cluster_id": cluster_id, "controller_id": controller_id,
                "nodes": _nodes(brokers, quorum), "quorum": quorum, "quorum_error": quorum_error,
                "partitions": partitions}
    raise StatusError(f"cannot reach the cluster at {bootstrap}: " + "; ".join(errors))


def _why(server: str, e: Exception) -> str:
    message = str(e) or type(e).__name__
    return message if server in message else f"{server}: {message}"


def _nodes(brokers: list[dict], quorum: dict | None) -> list[dict]:
    """Brokers and quorum voters by node id; a voter is a controller (a voter that is not a
    registered broker is listed with its controller endpoint)."""
    voters = {v["node_id"] for v in quorum["voters"]} if quorum else set()
    endpoints = quorum["controller_endpoints"] if quorum else {}
    nodes = {}
    for b in brokers:
        roles = ["broker", "controller"] if b["node_id"] in voters else ["broker"]
        nodes[b["node_id"]] = {"node_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
                               "roles": roles, "state": "fenced" if b["fenced"] else "unfenced"}
    for v in sorted(voters - set(nodes)):
        host, _, port = endpoints.get(str(v), ":").rpartition(":")
        nodes[v] = {"node_id": v, "host": host or None, "port": int(port) if port else None, "rack": None,
                    "roles": ["controller"], "state": None}
    return [nodes[k] for k in sorted(nodes)]


def _table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [headers] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def render(status: dict) -> str:
    """The readable form of `collect()`'s dict."""
    controller = status["controller_id"]
    out = [f"cluster {status['cluster_id']}, active controller "
           + (str(controller) if controller >= 0 else "none") + f" (asked {status['bootstrap_server']})", ""]
    out.append("nodes:")
    out.append(_table(["ID", "HOST:PORT", "RACK", "ROLES", "STATE"], [
        [n["node_id"], f"{n['host']}:{n['port']}" if n["host"] else None, n["rack"] or None,
         ",".join(n["roles"]), n["state"]] for n in status["nodes"]]))
    out.append("")
    q = status["quorum"]
    if q is None:
        out.append(f"quorum: could not be described: {status['quorum_error']}")
    else:
        out.append(f"quorum {METADATA_TOPIC}-0: leader {q['leader_id']}, leader epoch {q['leader_epoch']}, "
                   f"high watermark {q['high_watermark']}")
        out.append(_table(["NODE", "STATUS", "LOG-END-OFFSET", "LAG", "LAST-FETCH-AGE-MS"], [
            [r["node_id"], r["status"], r["log_end_offset"], r["lag"], r["last_fetch_age_ms"]]
            for r in q["voters"] + q["observers"]]))
    out.append("")
    parts = status["partitions"]
    if not parts:
        out.append("under-replicated or offline partitions: none")
    else:
        out.append(f"under-replicated or offline partitions: {len(parts)}")
        out.append(_table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "STATUS"], [
            [p["topic"], p["partition"], p["leader"], ",".join(map(str, p["replicas"])) or None,
             ",".join(map(str, p["isr"])) or None, p["status"]] for p in parts]))
    return "\n".join(out)


def add_parser(sub) -> None:
    c = sub.add_parser("cluster", help="the state of a cluster: nodes, controller quorum, partitions needing attention")
    cs = c.add_subparsers(dest="cluster_command", required=True)
    s = cs.add_parser("status", help="nodes, controller quorum, under-replicated and offline partitions")
    s.add_argument("--bootstrap-server", default="127.0.0.1:9092",
                   help="HOST:PORT of any broker (or several, comma-separated; default 127.0.0.1:9092)")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    add_command_config(s)
    from logbroker.voter_cli import add_parsers as add_voter_parsers

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
        from logbroker.voter_cli import run as run_voter

        return run_voter(args)
    try:
        status = collect(args.bootstrap_server, client_config(args.command_config))
    except StatusError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
    print(json.dumps(status, indent=2) if args.json else render(status))
    return 0
