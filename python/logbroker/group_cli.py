"""`logbroker group ...`: list, describe (members, assignment, committed offsets, lag),
reset-offsets and delete consumer groups, through the Kafka protocol."""

from __future__ import annotations

import datetime as dt
import struct
import sys

from logbroker.client import BrokerConnection, ClientError
from logbroker.protocol import REQUESTS, ErrorCode


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """ConsumerProtocol assignment: version int16, [topic string, [partition int32]], user data."""
    out: dict[str, list[int]] = {}
    if len(data) < 6:
        return out
    try:
        pos = 2
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", data, pos)
            pos += 2
            topic = data[pos : pos + ln].decode()
            pos += ln
            (k,) = struct.unpack_from(">i", data, pos)
            pos += 4
            out[topic] = list(struct.unpack_from(f">{k}i", data, pos))
            pos += 4 * k
    except (struct.error, UnicodeDecodeError):
        return {}
    return out


def _describe(conn: BrokerConnection, group: str):
    d = conn.send(REQUESTS[15](groups=[group])).groups[0]
    if d.error_code:
        raise ClientError(f"describe group {group}: {ErrorCode(d.error_code).name}")
    return d


def _committed(conn: BrokerConnection, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    OffsetFetch = REQUESTS[9]
    v = conn.version_for(9)
    if v >= 8:
        resp = conn.send(OffsetFetch(groups=[OffsetFetch.OffsetFetchRequestGroup(group_id=group, topics=None)]))
        topics = resp.groups[0].topics
    else:
        topics = conn.send(OffsetFetch(group_id=group, topics=None)).topics
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata) for t in topics for p in t.partitions}


def _end_offsets(conn: BrokerConnection, parts: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
    ListOffsets = REQUESTS[2]
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    req = ListOffsets(replica_id=-1, isolation_level=0, topics=[
        ListOffsets.ListOffsetsTopic(name=t, partitions=[
            ListOffsets.ListOffsetsPartition(partition_index=p, timestamp=timestamp) for p in ps])
        for t, ps in by_topic.items()])
    resp = conn.send(req)
    return {(t.name, p.partition_index): p.offset for t in resp.topics for p in t.partitions}


def _partitions_of(conn: BrokerConnection, topic: str) -> list[int]:
    Metadata = REQUESTS[3]
    md = conn.send(Metadata(topics=[Metadata.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
    t = md.topics[0]
    if t.error_code:
        raise ClientError(f"topic {topic}: {ErrorCode(t.error_code).name}")
    return sorted(p.partition_index for p in t.partitions)


def cmd_list(conn: BrokerConnection, args) -> int:
    for g in conn.send(REQUESTS[16]()).groups:
        print(f"{g.group_id}\t{g.group_state or '-'}\t{g.protocol_type}")
    return 0


def cmd_describe(conn: BrokerConnection, args) -> int:
    d = _describe(conn, args.group)
    print(f"group {args.group}: state {d.group_state}, protocol {d.protocol_type or '-'}/{d.protocol_data or '-'}, "
          f"{len(d.members)} member(s)")
    owner: dict[tuple[str, int], str] = {}
    for m in d.members:
        assignment = decode_assignment(bytes(m.member_assignment))
        for t, ps in assignment.items():
            for p in ps:
                owner[(t, p)] = m.member_id
        print(f"  member {m.member_id} client {m.client_id} host {m.client_host}"
              + (f" instance {m.group_instance_id}" if m.group_instance_id else "")
              + f" assignment {dict(sorted(assignment.items()))}")
    committed = _committed(conn, args.group)
    parts = sorted(set(committed) | set(owner))
    ends = _end_offsets(conn, parts, -1) if parts else {}
    print(f"{'TOPIC':<24} {'PARTITION':>9} {'COMMITTED':>12} {'LOG-END':>12} {'LAG':>10}  MEMBER")
    for key in parts:
        off = committed.get(key, (-1, ""))[0]
        end = ends.get(key, -1)
        lag = end - off if off >= 0 and end >= 0 else "-"
        print(f"{key[0]:<24} {key[1]:>9} {off if off >= 0 else '-':>12} {end:>12} {lag:>10}  {owner.get(key, '-')}")
    return 0


def cmd_reset(conn: BrokerConnection, args) -> int:
    d = _describe(conn, args.group)
    if d.group_state not in ("Empty", "Dead"):
        print(f"logbroker: group {args.group} is {d.group_state} with {len(d.members)} member(s); "
              "stop its consumers before resetting offsets", file=sys.stderr)
        return 1
    parts = [(args.topic, p) for p in _partitions_of(conn, args.topic)]
    if args.to_earliest:
        targets = _end_offsets(conn, parts, -2)
    elif args.to_latest:
        targets = _end_offsets(conn, parts, -1)
    elif args.to_offset is not None:
        targets = {k: args.to_offset for k in parts}
    else:
        when = dt.datetime.fromisoformat(args.to_datetime)
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        found = _end_offsets(conn, parts, int(when.timestamp() * 1000))
        latest = _end_offsets(conn, parts, -1)
        targets = {k: (o if o >= 0 else latest[k]) for k, o in found.items()}
    OffsetCommit = REQUESTS[8]
    req = OffsetCommit(group_id=args.group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommit.OffsetCommitRequestTopic(name=args.topic, partitions=[
            OffsetCommit.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
            for (_, p), o in sorted(targets.items())])])
    resp = conn.send(req)
    failed = [(p.partition_index, ErrorCode(p.error_code).name) for t in resp.topics for p in t.partitions if p.error_code]
    if failed:
        print(f"logbroker: reset of group {args.group} failed: {failed}", file=sys.stderr)
        return 1
    for (t, p), o in sorted(targets.items()):
        print(f"{t}\t{p}\t{o}")
    return 0


def cmd_delete(conn: BrokerConnection, args) -> int:
    r = conn.send(REQUESTS[42](groups_names=[args.group])).results[0]
    if r.error_code:
        print(f"logbroker: delete group {args.group}: {ErrorCode(r.error_code).name}", file=sys.stderr)
        return 1
    print(f"deleted group {args.group}")
    return 0


def add_parser(sub) -> None:
    g = sub.add_parser("group", help="list, describe, reset offsets of and delete consumer groups")
    g.add_argument("--bootstrap-server", default="127.0.0.1:9092")
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
    commands = {"list": cmd_list, "describe": cmd_describe, "reset-offsets": cmd_reset, "delete": cmd_delete}
    try:
        with BrokerConnection(args.bootstrap_server) as conn:
            return commands[args.group_command](conn, args)
    except ClientError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
