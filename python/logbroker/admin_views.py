"""What `logbroker topic` and `logbroker group` show and the web console serves, as JSON-able
dicts built with the admin client (`logbroker.client.Admin`): topics with their partitions'
leaders, replicas, ISR, log start and end offsets and sizes; a consumer group's members and
lag per partition; a group's offsets reset. The CLI prints them, the console answers them.

Everything goes through the Kafka API, so what a caller sees is what its credentials let it
see. A partition whose leader does not answer (a broker just killed, not yet fenced) has its
offsets as None rather than failing the whole view: offsets are asked of each leader on its
own, sizes of each broker on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from logbroker.client import Admin, BrokerResponseError, KafkaError, TopicDescription, TopicPartition
from logbroker.protocol import ErrorCode

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


def log_offsets(admin: Admin, leaders: dict[Key, int], spec: str | int,
                timeout: float | None = None) -> dict[Key, int | None]:
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


def describe_topics(admin: Admin, names: list[str] | None = None, *, configs: bool = False, sizes: bool = False,
                    timeout: float | None = None) -> list[dict[str, Any]]:
    """Each topic (all when `names` is None) with its partitions: leader, replicas, ISR,
    earliest and latest offset (None where the leader does not answer), state (see
    `partition_state`), with `sizes` the bytes of the leader's replica (`size_bytes`) and of
    each replica; with `configs` the topic's configs."""
    found = admin.describe_topics(names, timeout=timeout)
    topics = sorted(found)
    leaders = leaders_of(found)
    earliest = log_offsets(admin, leaders, "earliest", timeout)
    latest = log_offsets(admin, leaders, "latest", timeout)
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
            row: dict[str, Any] = {"partition": p.partition, "leader": p.leader, "replicas": p.replicas, "isr": p.isr,
                                   "earliest_offset": earliest[key], "latest_offset": latest[key],
                                   "state": partition_state(p.leader, p.replicas, p.isr)}
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
        members.append({"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                        "instance_id": m.group_instance_id,
                        "assignment": {t: sorted(ps) for t, ps in sorted(assignment.items())}})
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
        partitions.append({"topic": key[0], "partition": key[1], "committed_offset": offset, "log_end_offset": end,
                           "lag": max(0, end - offset) if offset is not None and end is not None else None,
                           "member": owner.get(key)})
    return {"group": group, "state": d.state, "protocol_type": d.protocol_type, "protocol": d.protocol,
            "members": members, "partitions": partitions}


def _existing(admin: Admin, topics: list[str], timeout: float | None) -> dict[str, TopicDescription]:
    """The named topics that exist (a group may hold offsets of a deleted topic)."""
    found = admin.describe_topics(None, timeout=timeout)
    return {n: found[n] for n in topics if n in found}


def reset_offsets(admin: Admin, group: str, topic: str, to: str, value: int | None = None,
                  timeout: float | None = None) -> dict[Key, int]:
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
            raise GroupNotEmptyError(f"group {group!r} is {d.state} with {len(d.members)} member(s); stop its "
                                     "consumers before resetting offsets")
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
