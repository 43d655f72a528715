"""What `logbroker topic`, `group` and `cluster status` show and the web console serves, as
JSON-able dicts built with the admin client (`logbroker.client.Admin`): topics with their
partitions' leaders, replicas, ISR, log start and end offsets and sizes; a consumer group's
members and lag per partition; a group's offsets reset; the cluster's state as one broker
sees it (`collect`: nodes, controller quorum, partitions needing attention); and a record's
key, value or header as text, hex or JSON (`render_bytes`). The CLI prints them, the console
answers them.

Everything goes through the Kafka API, so what a caller sees is what its credentials let it
see. A partition whose leader does not answer (a broker just killed, not yet fenced) has its
offsets as None rather than failing the whole view: offsets are asked of each leader on its
own, sizes of each broker on its own.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable
from typing import Any

from logbroker.client import (
    Admin,
    BrokerConnection,
    BrokerResponseError,
    ClientError,
    KafkaError,
    TopicDescription,
    TopicPartition,
)
from logbroker.common import directory_id
from logbroker.protocol import REQUESTS, ErrorCode, ProtocolError

Key = tuple[str, int]

RESET_TO = ("earliest", "latest", "offset", "timestamp")


class GroupNotEmptyError(KafkaError):
    """Offsets of a group with members cannot be reset (its consumers would overwrite them)."""


def partition_state(leader: int, replicas: list[int], isr: list[int]) -> str:
    """`offline` (no leader), `under-replicated` (ISR smaller than the replicas) or `ok`."""
    if leader < 0:
        return "offline"
    if len(isr) < len(replicas):
        return "under-replicated"
    return "ok"


def log_offsets(
    admin: Admin, leaders: dict[Key, int], spec: str | int, timeout: float | None = None
) -> dict[Key, int | None]:
    """ListOffsets (`spec`: "earliest", "latest" or a timestamp in ms) of each partition, asked
    of each leader separately; None where there is no leader or it did not answer."""
    by_leader: dict[int, list[Key]] = {}
    for key, leader in leaders.items():
        if leader >= 0:
            by_leader.setdefault(leader, []).append(key)
    out: dict[Key, int | None] = dict.fromkeys(leaders)
    for keys in by_leader.values():
        try:
            found = admin.list_offsets(dict.fromkeys(keys, spec), timeout=timeout)
        except KafkaError:
            continue
        for tp, (offset, _ts) in found.items():
            out[(tp.topic, tp.partition)] = offset
    return out


def replica_sizes(admin: Admin, brokers: Iterable[int], timeout: float | None = None) -> dict[Key, dict[int, int]]:
    """{(topic, partition): {broker: bytes}} from each broker's DescribeLogDirs; a broker that
    does not answer is left out."""
    out: dict[Key, dict[int, int]] = {}
    for b in brokers:
        try:
            sizes = admin.describe_log_dirs(b, timeout=timeout)
        except KafkaError:
            continue
        for tp, size in sizes.items():
            out.setdefault((tp.topic, tp.partition), {})[b] = size
    return out


def hosting_brokers(admin: Admin, found: dict[str, TopicDescription], timeout: float | None = None) -> list[int]:
    """The brokers holding replicas of the topics that Metadata lists as live (a fenced broker
    is not asked: its sizes would cost a connection timeout)."""
    live = {b.node_id for b in admin.describe_cluster(timeout=timeout).brokers}
    return sorted({r for d in found.values() for p in d.partitions for r in p.replicas} & live)


def leaders_of(found: dict[str, TopicDescription]) -> dict[Key, int]:
    return {(n, p.partition): p.leader for n, d in found.items() for p in d.partitions}


def describe_topics(
    admin: Admin,
    names: list[str] | None = None,
    *,
    configs: bool = False,
    sizes: bool = False,
    timeout: float | None = None,
) -> list[dict[str, Any]]:
    """Each topic (all when `names` is None) with its partitions: leader, replicas, ISR,
    earliest and latest offset (None where the leader does not answer), the earliest local
    and the latest tiered offset (tiered storage; -1 tiered: nothing copied), state (see
    `partition_state`), with `sizes` the bytes of the leader's replica (`size_bytes`) and of
    each replica; with `configs` the topic's configs."""
    found = admin.describe_topics(names, timeout=timeout)
    topics = sorted(found)
    leaders = leaders_of(found)
    earliest = log_offsets(admin, leaders, "earliest", timeout)
    latest = log_offsets(admin, leaders, "latest", timeout)
    # tiered storage (KIP-1005): where the local log starts, and the last copied offset
    # (-1: none); None from a broker without ListOffsets v9
    earliest_local = log_offsets(admin, leaders, "earliest_local", timeout)
    latest_tiered = log_offsets(admin, leaders, "latest_tiered", timeout)
    held: dict[Key, dict[int, int]] = {}
    if sizes and leaders:
        held = replica_sizes(admin, hosting_brokers(admin, found, timeout), timeout)
    described = admin.describe_configs([("topic", n) for n in topics], timeout=timeout) if configs and topics else {}
    doc = []
    for n in topics:
        d = found[n]
        parts = []
        for p in d.partitions:
            key = (n, p.partition)
            row: dict[str, Any] = {
                "partition": p.partition,
                "leader": p.leader,
                "replicas": p.replicas,
                "isr": p.isr,
                "earliest_offset": earliest[key],
                "latest_offset": latest[key],
                "earliest_local_offset": earliest_local[key],
                "latest_tiered_offset": latest_tiered[key],
                "state": partition_state(p.leader, p.replicas, p.isr),
            }
            if sizes:
                on = held.get(key, {})
                row["size_bytes"] = on.get(p.leader, max(on.values()) if on else None)
                row["replica_sizes"] = {str(b): s for b, s in sorted(on.items())}
            parts.append(row)
        entry: dict[str, Any] = {"topic": n, "internal": d.internal, "partitions": parts}
        if configs:
            entry["configs"] = dict(sorted(described.get(("topic", n), {}).items()))
        doc.append(entry)
    return doc


def describe_group(admin: Admin, group: str, timeout: float | None = None) -> dict[str, Any]:
    """The group's state, protocol and members (client id, host, static instance id,
    assignment), and per partition it has an offset for or is assigned: the committed offset,
    the log end offset, the lag (end less committed) and the member it is assigned to (None
    where unknown)."""
    d = admin.describe_groups([group], timeout=timeout)[group]
    committed = admin.list_group_offsets(group, timeout=timeout)
    owner: dict[Key, str] = {}
    members = []
    for m in d.members:
        assignment: dict[str, list[int]] = {}
        for tp in m.assignment:
            owner[(tp.topic, tp.partition)] = m.member_id
            assignment.setdefault(tp.topic, []).append(tp.partition)
        members.append(
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "instance_id": m.group_instance_id,
                "assignment": {t: sorted(ps) for t, ps in sorted(assignment.items())},
            }
        )
    keys = sorted({(tp.topic, tp.partition) for tp in committed} | set(owner))
    topics = sorted({t for t, _ in keys})
    leaders: dict[Key, int] = {}
    if topics:
        wanted = set(keys)
        leaders = {k: v for k, v in leaders_of(_existing(admin, topics, timeout)).items() if k in wanted}
    ends = log_offsets(admin, leaders, "latest", timeout)
    partitions = []
    for key in keys:
        got = committed.get(TopicPartition(*key))
        offset = got[0] if got is not None else None
        end = ends.get(key)
        partitions.append(
            {
                "topic": key[0],
                "partition": key[1],
                "committed_offset": offset,
                "log_end_offset": end,
                "lag": max(0, end - offset) if offset is not None and end is not None else None,
                "member": owner.get(key),
            }
        )
    return {
        "group": group,
        "state": d.state,
        "protocol_type": d.protocol_type,
        "protocol": d.protocol,
        "members": members,
        "partitions": partitions,
    }


def _existing(admin: Admin, topics: list[str], timeout: float | None) -> dict[str, TopicDescription]:
    """The named topics that exist (a group may hold offsets of a deleted topic)."""
    found = admin.describe_topics(None, timeout=timeout)
    return {n: found[n] for n in topics if n in found}


def reset_offsets(
    admin: Admin, group: str, topic: str, to: str, value: int | None = None, timeout: float | None = None
) -> dict[Key, int]:
    """Sets the committed offsets of `group` on every partition of `topic` to the earliest or
    latest offset, to `value` (an offset), or to the first offset at or after `value` (a
    timestamp in ms; the latest where none is). Refused with GroupNotEmptyError unless the
    group is Empty (or does not exist yet), as Kafka's kafka-consumer-groups refuses. Returns the
    offsets committed."""
    if to not in RESET_TO:
        raise ValueError(f"reset to must be one of {', '.join(RESET_TO)}, not {to!r}")
    if to in ("offset", "timestamp") and value is None:
        raise ValueError(f"reset to {to} needs a value")
    try:
        d = admin.describe_groups([group], timeout=timeout)[group]
    except BrokerResponseError as e:
        if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise
    else:  # no group yet: the commit creates it
        if d.state not in ("Empty", "Dead"):
            raise GroupNotEmptyError(
                f"group {group!r} is {d.state} with {len(d.members)} member(s); stop its "
                "consumers before resetting offsets"
            )
    leaders = leaders_of(admin.describe_topics([topic], timeout=timeout))
    targets: dict[Key, int | None]
    if to == "offset":
        assert value is not None
        targets = dict.fromkeys(leaders, value)
    elif to == "timestamp":
        assert value is not None
        found = log_offsets(admin, leaders, value, timeout)
        latest = log_offsets(admin, leaders, "latest", timeout)
        targets = {k: (o if o is not None and o >= 0 else latest[k]) for k, o in found.items()}
    else:
        targets = log_offsets(admin, leaders, to, timeout)
    unknown = sorted(f"{t}-{p}" for (t, p), o in targets.items() if o is None)
    if unknown:
        raise KafkaError(f"cannot reset group {group!r}: no leader answered for {', '.join(unknown)}")
    done = {k: int(o) for k, o in sorted(targets.items()) if o is not None}
    admin.alter_group_offsets(group, done, timeout=timeout)
    return done


# --- the cluster's state: `logbroker cluster status`, the console's /api/cluster -------


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
            raise StatusError(
                f"DescribeCluster from {conn.bootstrap}: {_error_name(r.error_code)}"
                + (f": {r.error_message}" if r.error_message else "")
            )
        brokers = [
            {
                "node_id": b.broker_id,
                "host": b.host,
                "port": b.port,
                "rack": b.rack,
                "fenced": bool(version >= 2 and b.is_fenced),
            }
            for b in r.brokers
        ]
        return r.cluster_id, r.controller_id, brokers
    r = conn.send(REQUESTS[3](topics=[], allow_auto_topic_creation=False))
    brokers = [
        {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "fenced": False} for b in r.brokers
    ]
    return r.cluster_id, r.controller_id, brokers


def _problem_partitions(conn: BrokerConnection) -> list[dict]:
    """Partitions that are offline (leader -1) or under-replicated (ISR smaller than replicas)."""
    r = conn.send(REQUESTS[3](topics=None, allow_auto_topic_creation=False))
    out = []
    for t in sorted(r.topics, key=lambda t: t.name or ""):
        if t.error_code:
            out.append(
                {
                    "topic": t.name,
                    "partition": None,
                    "leader": None,
                    "replicas": [],
                    "isr": [],
                    "status": _error_name(t.error_code),
                }
            )
            continue
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            status = partition_state(p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
            if status == "ok":
                continue
            out.append(
                {
                    "topic": t.name,
                    "partition": p.partition_index,
                    "leader": p.leader_id,
                    "replicas": list(p.replica_nodes),
                    "isr": list(p.isr_nodes),
                    "status": status,
                }
            )
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
    request = Request(
        topics=[Request.TopicData(topic_name=METADATA_TOPIC, partitions=[Request.PartitionData(partition_index=0)])]
    )
    try:
        r = conn.send(request, version=version)
    except Exception as e:  # noqa: BLE001 - whatever went wrong, the other tables are still printed
        raise StatusError(f"DescribeQuorum v{version} to {conn.bootstrap} failed: {e or type(e).__name__}") from None
    if r.error_code:
        message = getattr(r, "error_message", None)
        raise StatusError(f"DescribeQuorum: {_error_name(r.error_code)}" + (f": {message}" if message else ""))
    parts = [p for t in r.topics if t.topic_name == METADATA_TOPIC for p in t.partitions if p.partition_index == 0]
    if not parts:
        raise StatusError(f"DescribeQuorum answered without {METADATA_TOPIC}-0")
    p = parts[0]
    if p.error_code:
        message = getattr(p, "error_message", None)
        raise StatusError(
            f"DescribeQuorum {METADATA_TOPIC}-0: {_error_name(p.error_code)}" + (f": {message}" if message else "")
        )
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
            "last_caught_up_age_ms": (
                max(0, now_ms - v.last_caught_up_timestamp) if v.last_caught_up_timestamp >= 0 else None
            ),
        }

    voters = [
        replica(v, "leader" if v.replica_id == p.leader_id else "follower")
        for v in sorted(p.current_voters, key=lambda v: v.replica_id)
    ]
    observers = [replica(v, "observer") for v in sorted(p.observers, key=lambda v: v.replica_id)]
    endpoints = {
        n.node_id: (n.listeners[0].host, n.listeners[0].port) for n in getattr(r, "nodes", None) or [] if n.listeners
    }
    return {
        "leader_id": p.leader_id,
        "leader_epoch": p.leader_epoch,
        "high_watermark": p.high_watermark,
        "voters": voters,
        "observers": observers,
        "controller_endpoints": {str(k): f"{h}:{port}" for k, (h, port) in sorted(endpoints.items())},
    }


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
        return {
            "bootstrap_server": server,
            "cluster_id": cluster_id,
            "controller_id": controller_id,
            "nodes": _nodes(brokers, quorum),
            "quorum": quorum,
            "quorum_error": quorum_error,
            "partitions": partitions,
        }
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
        nodes[b["node_id"]] = {
            "node_id": b["node_id"],
            "host": b["host"],
            "port": b["port"],
            "rack": b["rack"],
            "roles": roles,
            "state": "fenced" if b["fenced"] else "unfenced",
        }
    for v in sorted(voters - set(nodes)):
        host, _, port = endpoints.get(str(v), ":").rpartition(":")
        nodes[v] = {
            "node_id": v,
            "host": host or None,
            "port": int(port) if port else None,
            "rack": None,
            "roles": ["controller"],
            "state": None,
        }
    return [nodes[k] for k in sorted(nodes)]


# --- records: `logbroker consume`, the console's message browser -----------------------


def render_bytes(b: bytes | None, fmt: str) -> Any:
    """A key, value or header value as `fmt` shows it: `text` (UTF-8, undecodable bytes
    escaped), `hex`, or `json` (a UTF-8 string, or {"base64": ...} when the bytes are not
    UTF-8); None (no key, a null value) stays None."""
    if b is None:
        return None
    if fmt == "hex":
        return b.hex()
    if fmt == "json":
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(b).decode()}
    return b.decode("utf-8", errors="backslashreplace")
