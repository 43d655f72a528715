"""KIP-848 consumer groups persisted in __consumer_offsets with Kafka's record types
(ConsumerGroupMetadata, ConsumerGroupPartitionMetadata, ConsumerGroupMemberMetadata,
ConsumerGroupTargetAssignmentMetadata/Member, ConsumerGroupCurrentMemberAssignment;
python/logbroker/coord/groups/offsets_topic.py), so a new coordinator continues the group: members
keep heartbeating at their epoch with their assignment, nothing rebalances.

- the records' encoders and decoders round-trip, and decode bytes written by hand from
  Kafka's schemas (group-coordinator/src/main/resources/common/message/ConsumerGroup*.json);
- the coordinator on trio's mock clock (real controller and logs): only what changed is
  written, a reload (what a new coordinator does) rebuilds the very same state, mid-revocation
  included, and tombstones remove a leaving member and an emptied group;
- Kafka's own kafka-dump-log --offsets-decoder reads what a broker wrote;
- three brokers: the coordinator is killed (SIGKILL) under two members (librdkafka; Java)
  (group.protocol=consumer); the new coordinator has the group with the same group epoch,
  member epochs and assignments, and every record is consumed exactly once;
- one broker restarted under two members: the same.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import trio
import trio.testing
from conftest import require_java, wait_until

from logbroker.coord.groups import offsets_topic as ot
from logbroker.coord.groups.offsets_topic import (
    CG_CURRENT_ASSIGNMENT,
    CG_MEMBER_METADATA,
    CG_METADATA,
    CG_PARTITION_METADATA,
    CG_TARGET_MEMBER,
    CG_TARGET_METADATA,
    OFFSETS_TOPIC,
    ConsumerMemberRecord,
    CurrentAssignmentRecord,
    OffsetsRecordError,
    TopicMetadataRecord,
)
from logbroker.protocol import REQUESTS, ErrorCode

HERE = Path(__file__).resolve().parent
TID = uuid.UUID("0123456789abcdef0123456789abcdef")
TID_BYTES = bytes.fromhex("0123456789abcdef0123456789abcdef")


# --- (a) the record formats ---------------------------------------------------------------


def test_consumer_group_records_round_trip():
    for kind, member in [
        (CG_METADATA, None),
        (CG_PARTITION_METADATA, None),
        (CG_MEMBER_METADATA, "m-1"),
        (CG_TARGET_METADATA, None),
        (CG_TARGET_MEMBER, "m-1"),
        (CG_CURRENT_ASSIGNMENT, "m-1"),
    ]:
        assert ot.parse_key(ot.consumer_group_key(kind, "grp", member)) == (kind, "grp", member, None)
    assert ot.parse_consumer_group_metadata_value(ot.consumer_group_metadata_value(42)) == 42
    assert ot.parse_target_assignment_metadata_value(ot.target_assignment_metadata_value(41)) == 41
    topics = [
        TopicMetadataRecord(TID, "orders", 12),
        TopicMetadataRecord(uuid.uuid4(), "é-topic", 1, [(0, ["r1", "r2"])]),
    ]
    assert ot.parse_partition_metadata_value(ot.partition_metadata_value(topics)) == topics
    for m in [
        ConsumerMemberRecord("inst", "rack-a", "client", "/10.0.0.1", ["a", "b"], None, 45000, "uniform"),
        ConsumerMemberRecord(None, None, "", "", [], "orders-.*", -1, None),
    ]:
        assert ot.parse_member_metadata_value(ot.member_metadata_value(m)) == m
    parts = [(TID, [0, 3, 5]), (uuid.uuid4(), list(range(200)))]  # 200: a count past one varint byte
    assert ot.parse_target_assignment_member_value(ot.target_assignment_member_value(parts)) == parts
    for a in [CurrentAssignmentRecord(7, 6, 1, parts, [(TID, [9])]), CurrentAssignmentRecord(-2, 3, 0, [], [])]:
        assert ot.parse_current_assignment_value(ot.current_assignment_value(a)) == a
    with pytest.raises(OffsetsRecordError, match="unknown version 1"):
        ot.parse_consumer_group_metadata_value(b"\x00\x01\x00\x00\x00\x01\x00")
    with pytest.raises(OffsetsRecordError, match="truncated"):
        ot.parse_current_assignment_value(ot.current_assignment_value(CurrentAssignmentRecord(7, 6, 0, parts, []))[:-5])


def test_decodes_bytes_laid_out_as_kafka_schemas_say():
    """Bytes written by hand from Kafka's JSON schemas: keys are non-flexible (int16 record
    type, int16-length strings), values flexible version 0 (compact strings and arrays,
    uuid as 16 bytes, a tagged-field section closing every struct)."""
    # ConsumerGroupMetadataKey (type 3) + Value: Epoch int32, tags
    assert ot.consumer_group_key(CG_METADATA, "g1") == b"\x00\x03\x00\x02g1"
    assert ot.consumer_group_metadata_value(5) == b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00"
    # ConsumerGroupPartitionMetadataKey (type 4) + Value: Topics [TopicId, TopicName, NumPartitions,
    # PartitionMetadata [] ]
    assert ot.consumer_group_key(CG_PARTITION_METADATA, "g1") == b"\x00\x04\x00\x02g1"
    pm = b"\x00\x00" + b"\x02" + TID_BYTES + b"\x02t" + b"\x00\x00\x00\x04" + b"\x01" + b"\x00" + b"\x00"
    assert ot.parse_partition_metadata_value(pm) == [TopicMetadataRecord(TID, "t", 4)]
    assert ot.partition_metadata_value([TopicMetadataRecord(TID, "t", 4)]) == pm
    # ConsumerGroupMemberMetadataKey (type 5): GroupId, MemberId
    assert ot.consumer_group_key(CG_MEMBER_METADATA, "g1", "m") == b"\x00\x05\x00\x02g1\x00\x01m"
    member = (
        b"\x00\x00"  # version 0
        + b"\x00"  # InstanceId null
        + b"\x02r"  # RackId "r"
        + b"\x02c"  # ClientId "c"
        + b"\x03/h"  # ClientHost "/h"
        + b"\x02"
        + b"\x02t"  # SubscribedTopicNames ["t"]
        + b"\x00"  # SubscribedTopicRegex null
        + b"\x00\x00\xaf\xc8"  # RebalanceTimeoutMs 45000
        + b"\x08uniform"
    )  # ServerAssignor "uniform"
    expected = ConsumerMemberRecord(None, "r", "c", "/h", ["t"], None, 45000, "uniform")
    assert ot.parse_member_metadata_value(member + b"\x00") == expected
    assert ot.member_metadata_value(expected) == member + b"\x00"
    # with Kafka's tagged ClassicMemberMetadata (tag 0): SessionTimeoutMs 10000, one protocol
    # ("range", metadata 0x01), tags — skipped
    classic = b"\x00\x00\x27\x10" + b"\x02" + b"\x06range" + b"\x02\x01" + b"\x00" + b"\x00"
    assert ot.parse_member_metadata_value(member + b"\x01\x00" + bytes([len(classic)]) + classic) == expected
    # ConsumerGroupTargetAssignmentMetadataKey (type 6) + Value: AssignmentEpoch
    assert ot.consumer_group_key(CG_TARGET_METADATA, "g1") == b"\x00\x06\x00\x02g1"
    assert ot.parse_target_assignment_metadata_value(b"\x00\x00\x00\x00\x00\x09\x00") == 9
    # ConsumerGroupTargetAssignmentMemberKey (type 7) + Value: TopicPartitions [TopicId, Partitions []]
    assert ot.consumer_group_key(CG_TARGET_MEMBER, "g1", "m") == b"\x00\x07\x00\x02g1\x00\x01m"
    target = b"\x00\x00" + b"\x02" + TID_BYTES + b"\x03" + b"\x00\x00\x00\x00\x00\x00\x00\x02" + b"\x00" + b"\x00"
    assert ot.parse_target_assignment_member_value(target) == [(TID, [0, 2])]
    assert ot.target_assignment_member_value([(TID, [0, 2])]) == target
    # ConsumerGroupCurrentMemberAssignmentKey (type 8) + Value: MemberEpoch, PreviousMemberEpoch,
    # State int8, AssignedPartitions, PartitionsPendingRevocation
    assert ot.consumer_group_key(CG_CURRENT_ASSIGNMENT, "g1", "m") == b"\x00\x08\x00\x02g1\x00\x01m"
    current = (
        b"\x00\x00"
        + b"\x00\x00\x00\x07"
        + b"\xff\xff\xff\xff"
        + b"\x01"
        + b"\x02"
        + TID_BYTES
        + b"\x02"
        + b"\x00\x00\x00\x01"
        + b"\x00"
        + b"\x02"
        + TID_BYTES
        + b"\x02"
        + b"\x00\x00\x00\x03"
        + b"\x00"
        + b"\x00"
    )
    rec = CurrentAssignmentRecord(7, -1, 1, [(TID, [1])], [(TID, [3])])
    assert ot.parse_current_assignment_value(current) == rec
    assert ot.current_assignment_value(rec) == current
    # an unknown record type stays an error for the loader to log and skip
    with pytest.raises(OffsetsRecordError, match="unknown key version 99"):
        ot.parse_key(b"\x00\x63\x00\x02g1")


# --- the coordinator, on trio's mock clock ------------------------------------------------


@pytest.fixture
def clock():
    return trio.testing.MockClock(autojump_threshold=0.05)


def records_of(coord, group: str, start: int) -> list[tuple[str, str | None, bytes | None]]:
    """(kind, member id, value) of the group's consumer-group records from `start` on."""
    part = coord.replicas.get(OFFSETS_TOPIC, coord.partition_of(group))
    out = []
    for _o, _ts, key, value in part.log.read_records(start, part.log.log_end_offset):
        kind, gid, member, _ = ot.parse_key(key)
        if gid == group and kind in ot.TYPE_BY_KIND:
            out.append((kind, member, value))
    return out


def log_end(coord, group: str) -> int:
    return coord.replicas.get(OFFSETS_TOPIC, coord.partition_of(group)).log.log_end_offset


def state(coord, group: str) -> dict:
    g = coord.consumer.groups[group]
    return {
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "assignor": g.assignor,
        "target": {k: set(v) for k, v in g.target.items() if v or k in g.members},
        "subscription_metadata": dict(g.subscription_metadata),
        "static": dict(g.static_members),
        "members": {
            mid: (
                m.member_epoch,
                m.previous_epoch,
                set(m.assigned),
                set(m.pending_revocation),
                m.instance_id,
                m.rack_id,
                m.client_id,
                m.client_host,
                list(m.subscribed_topics),
                m.subscribed_regex,
                m.server_assignor,
                m.rebalance_timeout_ms,
                m.left_temporarily,
            )
            for mid, m in g.members.items()
        },
    }


@pytest.mark.trio
async def test_reload_rebuilds_the_group_from_delta_records(tmp_path, nursery, clock):
    from test_group_coordinator import make

    coord = await make(tmp_path, nursery, group_consumer_session_timeout_ms=45000)
    HB = REQUESTS[68]
    tid = coord.controller.image.topics["t"].topic_id

    async def hb(member_id, epoch, owned=None, topics=None, instance=None):
        req = HB(
            group_id="g",
            member_id=member_id,
            member_epoch=epoch,
            rebalance_timeout_ms=20000,
            instance_id=instance,
            rack_id="rack-1" if epoch == 0 else None,
            subscribed_topic_names=topics,
            server_assignor="range" if member_id == "m2" and epoch == 0 else None,
            topic_partitions=None if owned is None else [HB.TopicPartitions(topic_id=tid, partitions=sorted(owned))],
        )
        return await coord.consumer.heartbeat(req, 1, f"client-{member_id}", "/127.0.0.1")

    at = log_end(coord, "g")
    r1 = await hb("m1", 0, owned=set(), topics=["t"])
    assert r1["member_epoch"] == 1
    # a join writes the whole group: member, group epoch, partition metadata, target, current
    kinds = [k for k, _, _ in records_of(coord, "g", at)]
    assert kinds == [
        CG_MEMBER_METADATA,
        CG_METADATA,
        CG_PARTITION_METADATA,
        CG_TARGET_MEMBER,
        CG_TARGET_METADATA,
        CG_CURRENT_ASSIGNMENT,
    ], kinds
    # a heartbeat that changes nothing writes nothing
    at = log_end(coord, "g")
    assert (await hb("m1", 1, owned={0, 1, 2, 3}))["error"] == 0
    assert log_end(coord, "g") == at
    r2 = await hb("m2", 0, owned=set(), topics=["t"], instance="i2")
    assert r2["member_epoch"] == 2
    at = log_end(coord, "g")
    r1 = await hb("m1", 1, owned={0, 1, 2, 3})  # m1 must revoke: only its current assignment changes
    assert r1["member_epoch"] == 1 and len(r1["assignment"]) == 2
    assert [(k, m) for k, m, _ in records_of(coord, "g", at)] == [(CG_CURRENT_ASSIGNMENT, "m1")]
    kept = {p for _, p in r1["assignment"]}
    pending = ot.parse_current_assignment_value(records_of(coord, "g", at)[0][2])
    assert pending.state == ot.MEMBER_UNREVOKED_PARTITIONS and pending.member_epoch == 1
    assert sorted(p for _, ps in pending.pending_revocation for p in ps) == sorted({0, 1, 2, 3} - kept)

    # a new coordinator (reload: forget everything, replay the log) mid-revocation
    before = state(coord, "g")
    assert before["members"]["m1"][3]  # partitions pending revocation
    await coord.reload()
    assert state(coord, "g") == before
    at = log_end(coord, "g")
    # the members go on at their epochs: m1 acknowledges the revocation, m2 gets the rest
    r1 = await hb("m1", 1, owned=kept)
    assert r1["error"] == 0 and r1["member_epoch"] == 2
    r2 = await hb("m2", 2, owned=set())
    assert r2["error"] == 0 and {p for _, p in r2["assignment"]} == {0, 1, 2, 3} - kept
    assert {k for k, _, _ in records_of(coord, "g", at)} == {CG_CURRENT_ASSIGNMENT}
    assert coord.consumer.groups["g"].state == "Stable"
    assert coord.consumer.groups["g"].group_epoch == 2

    # a static member leaving for now (-2) and a reload: it comes back as itself
    assert (await hb("m2", -2))["member_epoch"] == -2
    await coord.reload()
    assert coord.consumer.groups["g"].members["m2"].left_temporarily
    r3 = await hb("m3", 0, owned=set(), topics=["t"], instance="i2")
    assert r3["error"] == 0 and r3["member_epoch"] == 2 and {p for _, p in r3["assignment"]} == {0, 1, 2, 3} - kept
    assert coord.consumer.groups["g"].group_epoch == 2 and "m2" not in coord.consumer.groups["g"].members
    await coord.reload()
    assert set(coord.consumer.groups["g"].members) == {"m1", "m3"}

    # a member leaving: its three records are tombstoned, then the new epoch and assignment
    at = log_end(coord, "g")
    assert (await hb("m3", -1))["error"] == 0
    recs = records_of(coord, "g", at)
    assert [(k, m) for k, m, v in recs if v is None] == [
        (CG_CURRENT_ASSIGNMENT, "m3"),
        (CG_TARGET_MEMBER, "m3"),
        (CG_MEMBER_METADATA, "m3"),
    ]
    before = state(coord, "g")
    await coord.reload()
    assert state(coord, "g") == before and before["group_epoch"] == 3
    # the session timeout starts afresh at loading: m1 stays while it heartbeats the new coordinator
    await trio.sleep(40)
    assert (await hb("m1", 2, owned=kept))["error"] == 0
    assert (await hb("m1", 3, owned=kept))["member_epoch"] == 3
    await trio.sleep(46)  # then silent: fenced; the group stays, Empty, as in Kafka: its member
    # records are tombstoned, its group-level records (epoch, assignment epoch) kept
    empty = coord.consumer.groups["g"]
    assert not empty.members and empty.state == "Empty"
    assert {k for k, _ in coord.consumer.persisted["g"]} == {CG_METADATA, CG_PARTITION_METADATA, CG_TARGET_METADATA}
    await coord.reload()
    assert coord.consumer.groups["g"].state == "Empty" and coord.consumer.groups["g"].group_epoch == empty.group_epoch
    assert (await hb("m1", 3, owned=kept))["error"] == ErrorCode.UNKNOWN_MEMBER_ID
    # DeleteGroups removes it: every record tombstoned, gone after a reload too
    assert (await coord.delete_groups(["g"])) == {"g": ErrorCode.NONE}
    assert "g" not in coord.consumer.groups and not coord.consumer.persisted.get("g")
    await coord.reload()
    assert "g" not in coord.consumer.groups


# --- Kafka's own tool reads the records -----------------------------------------------------


def heartbeat(bs: str, group: str, member_id: str, epoch: int, topic_id=None, owned=None, topics=None):
    HB = REQUESTS[68]
    req = HB(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=topics,
        topic_partitions=None
        if owned is None
        else [HB.TopicPartitions(topic_id=topic_id, partitions=sorted(owned))]
        if owned
        else [],
    )
    from rawclient import RawClient

    with RawClient(bs) as c:
        return c.request(68, 1, req)


def describe(bs: str, group: str):
    from rawclient import RawClient

    with RawClient(bs) as c:
        return c.request(69, 1, REQUESTS[69](group_ids=[group])).groups[0]


def test_kafka_dump_log_decodes_the_consumer_group_records(tmp_path):
    """kafka-dump-log --offsets-decoder (Kafka's GroupCoordinatorRecordSerde) on the segment
    of __consumer_offsets: every record type, with the values the group has."""
    require_java()
    sys.path.insert(0, str(HERE.parent))
    from replication_helpers import create

    from benches.peers.kafka import install
    from logbroker import Broker
    from logbroker.coord.groups.offsets_topic import partition_for

    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        create(b, "dumped", 3, 1)
        tid = None

        def join(member):
            r = heartbeat(bs, "dg", member, 0, owned=set(), topics=["dumped"])
            return r if r.error_code == 0 else None

        r1 = wait_until(lambda: join("member-a"), what="member-a joined")
        tid = r1.assignment.topic_partitions[0].topic_id
        r2 = join("member-b")
        assert r2.member_epoch == 2
        heartbeat(bs, "dg", "member-a", 1, tid, owned={0, 1, 2})  # revokes one of its partitions
        assert heartbeat(bs, "dg", "member-b", -1).error_code == 0  # leaves: tombstones
        index = partition_for("dg", b.config.get_int("offsets.topic.num.partitions"))
        segs = sorted((tmp_path / "d" / f"{OFFSETS_TOPIC}-{index}").glob("*.log"))
        kafka = install()
        r = subprocess.run(
            kafka.tools_java(
                "org.apache.kafka.tools.DumpLogSegments", ["--files", ",".join(map(str, segs)), "--offsets-decoder"]
            ),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        decoded = re.findall(r"key: (\{.*?\}) payload: (.*)$", r.stdout, re.M)
        mine = [(json.loads(k), p) for k, p in decoded if json.loads(k)["data"].get("groupId") == "dg"]
        assert mine, r.stdout[-3000:]
        by_type: dict[str, list] = {}
        for key, payload in mine:
            by_type.setdefault(key["type"], []).append(
                (key["data"], None if not payload.startswith("{") else json.loads(payload))
            )
        assert set(by_type) == {"3", "4", "5", "6", "7", "8"}, sorted(by_type)
        assert by_type["3"][-1][1]["data"]["epoch"] == 3  # joined, joined, left
        assert by_type["6"][-1][1]["data"]["assignmentEpoch"] == 3
        assert by_type["4"][-1][1]["data"]["topics"][0]["topicName"] == "dumped"
        assert by_type["4"][-1][1]["data"]["topics"][0]["numPartitions"] == 3
        a_meta = [v for k, v in by_type["5"] if k["memberId"] == "member-a"][-1]["data"]
        assert a_meta["subscribedTopicNames"] == ["dumped"] and a_meta["rebalanceTimeoutMs"] == 30000
        assert a_meta["clientId"] == "raw"
        # member-b: values first, then tombstones (current assignment, target, subscription)
        b_last = {t: [v for k, v in by_type[t] if k["memberId"] == "member-b"][-1] for t in ("5", "7", "8")}
        assert b_last == {"5": None, "7": None, "8": None}, b_last
        a_cur = [v for k, v in by_type["8"] if k["memberId"] == "member-a"]
        revoking = [v["data"] for v in a_cur if v["data"]["partitionsPendingRevocation"]]
        assert revoking and revoking[0]["state"] == 1 and revoking[0]["memberEpoch"] == 1
        d = describe(bs, "dg")
        assert d.group_epoch == 3 and [m.member_id for m in d.members] == ["member-a"]


# --- real clients: a coordinator killed, a broker restarted ----------------------------------


SESSION_MS = 8000  # group.consumer.session.timeout.ms of the tests with real clients


def outlive_session(since: float) -> None:
    """Sleep until 1.5 session timeouts after `since` (a group's load): a member that did not
    heartbeat the new coordinator at its epoch is fenced by then, which changes the group."""
    time.sleep(max(0.0, since + 1.5 * SESSION_MS / 1000 - time.monotonic()))


def group_view(bs: str, group: str):
    """(group epoch, {member id: (member epoch, sorted partitions)}) from ConsumerGroupDescribe
    to `bs`, None unless it answers for the group without error."""
    d = describe(bs, group)
    if d.error_code != 0:
        return None
    return d.group_epoch, {
        m.member_id: (m.member_epoch, sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions))
        for m in d.members
    }


def stable_view(bs: str, group: str, members: list, partitions: int):
    """The group's view once both members are at the group epoch with a disjoint split of
    every partition that their clients agree with (None before)."""
    v = group_view(bs, group)
    if v is None or len(v[1]) != len(members):
        return None
    epoch, by_member = v
    owned = [set(ps) for _, ps in by_member.values()]
    if (
        any(e != epoch for e, _ in by_member.values())
        or sum(map(len, owned)) != partitions
        or set().union(*owned) != set(range(partitions))
    ):
        return None
    if sorted(map(sorted, owned)) != sorted(sorted(m.assigned) for m in members):
        return None
    return v


def assert_exactly_once(members: list, values: list[str]) -> None:
    got = [r[2] for m in members for r in m.records]
    dupes = sorted({v for v in got if got.count(v) > 1})
    assert not dupes, f"consumed twice: {dupes[:20]}"
    assert sorted(got) == sorted(values)


def assert_no_rebalance(members: list, marks: list[int]) -> None:
    for m, mark in zip(members, marks):
        assert m.history[mark:] == [], f"member saw its assignment change: {m.history[mark:]}"


def committed_ends(bs: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        return {
            tp.partition: tp.offset
            for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=15)
        }
    finally:
        c.close()


class JavaMember:
    """tests/java/CoopWorker.java with group.protocol=consumer (auto-commit every 200 ms), seen
    as test_groups.MemberProc is: assigned, history (assign / revoke / lost events), records."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        import threading

        sys.path.insert(0, str(HERE.parent))
        from benches.peers.kafka import install

        cmd = install().tools_java(
            str(HERE / "java" / "CoopWorker.java"), [bootstrap, group, topic, name, "consumer"], heap="-Xmx256m"
        )
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.assigned: set[int] = set()
        self.history: list[tuple[str, list[int]]] = []
        self.records: list[tuple[int, int, str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            f = line.split()
            if f and f[0] in ("assign", "revoke", "lost"):
                ps = [] if f[2] == "-" else sorted(int(x) for x in f[2].split(","))
                if not ps:
                    continue  # an empty callback: nothing moved
                self.history.append((f[0], ps))
                if f[0] == "assign":
                    self.assigned |= set(ps)
                else:
                    self.assigned -= set(ps)
            elif f and f[0] == "record":
                self.records.append((int(f[1]), int(f[2]), f[3]))

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.reader.join(10)  # it reads to the end of stdout
        self.proc.stdin.close()
        self.proc.stdout.close()


@pytest.mark.timeout(500)
@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_members_continue_after_their_coordinator_is_killed(tmp_path, client):
    """Three brokers, __consumer_offsets replicated three ways; two members (librdkafka, or
    the Java client) with group.protocol=consumer. SIGKILL of the coordinator: the new coordinator (the new leader
    of the group's partition) loads the group with the same group epoch, member epochs and
    assignments; the members go on without a rebalance (no partition revoked or assigned on
    their side), every record is consumed exactly once, and the committed offsets are the ends.
    Then the killed broker comes back (and may lead the partition again): the same."""
    from replication_helpers import FAST, create, full_isr, layout
    from test_groups import MemberProc, produce

    from logbroker import Cluster
    from logbroker.coord.groups.offsets_topic import partition_for

    config = {
        **FAST,
        "offsets.topic.replication.factor": 3,
        "offsets.topic.num.partitions": 5,
        "min.insync.replicas": 2,
        "group.consumer.heartbeat.interval.ms": 500,
        "group.consumer.session.timeout.ms": SESSION_MS,
    }
    started: list = []
    with Cluster(3, data_dir=tmp_path / "cluster", config=config) as cluster:
        try:
            create(cluster.nodes[0], "cg-t", 6, 3)
            full_isr(cluster, "cg-t", 6)
            bs = cluster.bootstrap_servers
            values = produce(bs, "cg-t", 6, 600, "a")
            for i in range(2):
                if client == "java":
                    require_java()
                    started.append(JavaMember(bs, "cg-kill", "cg-t", f"java-{i}"))
                else:
                    started.append(MemberProc("confluent", bs, "cg-kill", "cg-t", "--protocol", "consumer"))
            full_isr(cluster, OFFSETS_TOPIC, 5)
            index = partition_for("cg-kill", 5)
            coordinator = layout(cluster.nodes[0])[(OFFSETS_TOPIC, index)][0]
            coord_bs = cluster.node(coordinator).bootstrap_servers
            before = wait_until(
                lambda: stable_view(coord_bs, "cg-kill", started, 6), timeout=60, what="two members with a stable split"
            )
            wait_until(lambda: sum(len(m.records) for m in started) >= 600, timeout=60, what="the first 600 records")
            wait_until(
                lambda: committed_ends(bs, "cg-kill", "cg-t", 6) == {p: 100 for p in range(6)},
                timeout=30,
                what="the first records committed",
            )
            marks = [len(m.history) for m in started]

            cluster.node(coordinator).kill()
            survivor = next(n for n in cluster.nodes if n.node_id != coordinator)

            def new_coordinator():
                leader = layout(survivor)[(OFFSETS_TOPIC, index)][0]
                return leader if leader not in (coordinator, -1) else None

            moved = wait_until(new_coordinator, timeout=60, what=f"a new leader of {OFFSETS_TOPIC}-{index}")
            new_bs = cluster.node(moved).bootstrap_servers
            after = wait_until(
                lambda: group_view(new_bs, "cg-kill"), timeout=60, what=f"node {moved} coordinating cg-kill"
            )
            loaded = time.monotonic()
            assert after == before, f"the group changed across the failover: {before} -> {after}"
            more = produce(bs, "cg-t", 6, 300, "b")
            wait_until(
                lambda: sum(len(m.records) for m in started) >= 900,
                timeout=90,
                what="the records produced after the failover",
            )
            outlive_session(loaded)  # members not heartbeating the new coordinator would be gone by now
            assert group_view(new_bs, "cg-kill") == before
            assert_no_rebalance(started, marks)
            assert_exactly_once(started, values + more)
            wait_until(
                lambda: committed_ends(bs, "cg-kill", "cg-t", 6) == {p: 150 for p in range(6)},
                timeout=30,
                what="every record committed",
            )

            cluster.node(coordinator).start()
            full_isr(cluster, OFFSETS_TOPIC, 5)
            last = produce(bs, "cg-t", 6, 120, "c")
            wait_until(
                lambda: sum(len(m.records) for m in started) >= 1020,
                timeout=90,
                what="the records produced after the restart",
            )

            def view_at_leader():  # leadership may be moving back to the restarted node meanwhile
                leader = layout(cluster.node(moved))[(OFFSETS_TOPIC, index)][0]
                return leader > 0 and group_view(cluster.node(leader).bootstrap_servers, "cg-kill")

            assert wait_until(view_at_leader, timeout=30, what="the coordinator's view") == before
            assert_no_rebalance(started, marks)
            assert_exactly_once(started, values + more + last)
            wait_until(
                lambda: committed_ends(bs, "cg-kill", "cg-t", 6) == {p: 170 for p in range(6)},
                timeout=30,
                what="every record committed",
            )
            assert all(m.proc.poll() is None for m in started)
        finally:
            for m in started:
                if m.proc.poll() is None:
                    m.kill()


@pytest.mark.timeout(300)
def test_members_continue_after_a_broker_restart(tmp_path):
    """One broker restarted (a clean stop, a start on the same data and port) under two
    librdkafka members: it loads the group from __consumer_offsets, and the members go on at
    their epochs with their partitions; every record once."""
    from test_groups import MemberProc, produce, setup_topic

    from logbroker import Broker

    started: list[MemberProc] = []
    with Broker(
        data_dir=tmp_path / "d", group_consumer_heartbeat_interval_ms=500, group_consumer_session_timeout_ms=SESSION_MS
    ) as b:
        try:
            bs = b.bootstrap_servers
            values = setup_topic(bs, "cg-r", 6, 600, "a")
            for _ in range(2):
                started.append(MemberProc("confluent", bs, "cg-restart", "cg-r", "--protocol", "consumer"))
            before = wait_until(
                lambda: stable_view(bs, "cg-restart", started, 6), timeout=60, what="two members with a stable split"
            )
            wait_until(lambda: sum(len(m.records) for m in started) >= 600, timeout=60, what="the first 600 records")
            wait_until(
                lambda: committed_ends(bs, "cg-restart", "cg-r", 6) == {p: 100 for p in range(6)},
                timeout=30,
                what="the first records committed",
            )
            marks = [len(m.history) for m in started]
            b.restart()
            assert b.bootstrap_servers == bs
            after = wait_until(lambda: group_view(bs, "cg-restart"), timeout=60, what="the group loaded")
            loaded = time.monotonic()
            assert after == before, f"the group changed across the restart: {before} -> {after}"
            more = produce(bs, "cg-r", 6, 300, "b")
            wait_until(
                lambda: sum(len(m.records) for m in started) >= 900,
                timeout=90,
                what="the records produced after the restart",
            )
            outlive_session(loaded)
            assert group_view(bs, "cg-restart") == before
            assert_no_rebalance(started, marks)
            assert_exactly_once(started, values + more)
            wait_until(
                lambda: committed_ends(bs, "cg-restart", "cg-r", 6) == {p: 150 for p in range(6)},
                timeout=30,
                what="every record committed",
            )
        finally:
            for m in started:
                if m.proc.poll() is None:
                    m.kill()


def test_an_emptied_group_stays_a_consumer_group_until_deleted_or_taken_over(tmp_path):
    """As Kafka: when its last member leaves, a KIP-848 group stays, type consumer, state Empty
    (ListGroups, kafka-consumer-groups); across a restart too. A classic member joining the
    empty group converts it to classic; DeleteGroups removes an empty one."""
    from confluent_kafka import Consumer, ConsumerGroupType
    from confluent_kafka.admin import AdminClient
    from test_groups import produce, setup_topic

    from logbroker import Broker

    def listed(admin, gid):
        groups = admin.list_consumer_groups().result(30).valid
        return next(((str(g.type), str(g.state)) for g in groups if g.group_id == gid), None)

    def consume_some(gid: str, protocol: str) -> None:
        conf = {"bootstrap.servers": bs, "group.id": gid, "auto.offset.reset": "earliest", "group.protocol": protocol}
        if protocol == "classic":
            conf["session.timeout.ms"] = 6000
        c = Consumer(conf)
        c.subscribe(["cg-e"])
        got: list = []
        try:
            wait_until(
                lambda: got.extend(m for m in c.consume(100, 1) if m.error() is None) or len(got) >= 10,
                60,
                f"records for {gid} ({protocol})",
            )
            c.commit(asynchronous=False)
        finally:
            c.close()

    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        setup_topic(bs, "cg-e", 2, 40, "a")
        admin = AdminClient({"bootstrap.servers": bs})
        for gid in ("emptied", "taken-over"):
            consume_some(gid, "consumer")
            assert wait_until(
                lambda gid=gid: listed(admin, gid) == (str(ConsumerGroupType.CONSUMER), "ConsumerGroupState.EMPTY"),
                30,
                f"{gid} Empty",
            )
        b.restart()
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        assert wait_until(lambda: listed(admin, "emptied"), 30, "groups loaded") == (
            str(ConsumerGroupType.CONSUMER),
            "ConsumerGroupState.EMPTY",
        )
        produce(bs, "cg-e", 2, 20, "b")  # the groups committed the first 40
        consume_some("taken-over", "classic")  # converts: the id becomes a classic group
        assert listed(admin, "taken-over") == (str(ConsumerGroupType.CLASSIC), "ConsumerGroupState.EMPTY")
        admin.delete_consumer_groups(["emptied"])["emptied"].result(30)
        assert listed(admin, "emptied") is None
        b.restart()
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        wait_until(lambda: listed(admin, "taken-over"), 30, "groups loaded")
        assert listed(admin, "emptied") is None
