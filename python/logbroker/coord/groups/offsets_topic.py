"""Record formats of the internal `__consumer_offsets` topic, as Kafka writes them.

Keys and values are Kafka's non-flexible schemas (a big-endian int16 schema version,
then the fields; strings int16-length-prefixed, -1 = null; bytes int32-prefixed):

    OffsetCommitKey    (key version 1)  group: str, topic: str, partition: int32
    OffsetCommitValue  (version 3)      offset: int64, leader_epoch: int32,
                                        metadata: str, commit_timestamp: int64
    GroupMetadataKey   (key version 2)  group: str
    GroupMetadataValue (version 3)      protocol_type: str, generation: int32,
                                        protocol: str|null, leader: str|null,
                                        current_state_timestamp: int64,
                                        members: int32 count x (member_id: str,
                                            group_instance_id: str|null, client_id: str,
                                            client_host: str, rebalance_timeout: int32,
                                            session_timeout: int32, subscription: bytes,
                                            assignment: bytes)

KIP-848 consumer groups (group.protocol=consumer) are persisted with Kafka's consumer-group
record types. Their keys are non-flexible like the ones above (the key version is the
record type); their values are *flexible* (version 0): strings compact (unsigned varint
length + 1, 0 = null), arrays compact (unsigned varint count + 1), uuids 16 bytes, and
every struct, the value itself included, ends with tagged fields (an unsigned varint
count, then tag, size, bytes each; we write none, and skip unknown ones on reading):

    ConsumerGroupMetadataKey                 (key version 3)  group: str
    ConsumerGroupMetadataValue               (version 0)      epoch: int32  (the group epoch)
    ConsumerGroupPartitionMetadataKey        (key version 4)  group: str
    ConsumerGroupPartitionMetadataValue      (version 0)      topics: [topic_id: uuid, topic_name: str,
                                                                num_partitions: int32,
                                                                partition_metadata: [partition: int32,
                                                                                     racks: [str]]]
    ConsumerGroupMemberMetadataKey           (key version 5)  group: str, member: str
    ConsumerGroupMemberMetadataValue         (version 0)      instance_id: str|null, rack_id: str|null,
                                                              client_id: str, client_host: str,
                                                              subscribed_topic_names: [str],
                                                              subscribed_topic_regex: str|null,
                                                              rebalance_timeout_ms: int32,
                                                              server_assignor: str|null
                                                              (tag 0: classic member metadata, unused)
    ConsumerGroupTargetAssignmentMetadataKey (key version 6)  group: str
    ConsumerGroupTargetAssignmentMetadataValue (version 0)    assignment_epoch: int32
    ConsumerGroupTargetAssignmentMemberKey   (key version 7)  group: str, member: str
    ConsumerGroupTargetAssignmentMemberValue (version 0)      topic_partitions: [topic_id: uuid,
                                                                                 partitions: [int32]]
    ConsumerGroupCurrentMemberAssignmentKey  (key version 8)  group: str, member: str
    ConsumerGroupCurrentMemberAssignmentValue (version 0)     member_epoch: int32,
                                                              previous_member_epoch: int32,
                                                              state: int8 (0 stable, 1 unrevoked
                                                                partitions, 2 unreleased partitions),
                                                              assigned_partitions: [topic_id: uuid,
                                                                                    partitions: [int32]],
                                                              partitions_pending_revocation: (same)

A static member that left temporarily (heartbeat epoch -2) has member_epoch -2, as Kafka
writes it; we keep the epoch it had in previous_member_epoch (so its replacement continues
at that epoch). Partition lists name topics by id, so a partition of a deleted topic drops
out on loading. Rack lists are written empty (racks are not used by our assignors).

KIP-1071 streams groups are persisted with Kafka 4.4's streams-group record types (read from
Kafka 4.4.0's generated classes; 4.4 has no other streams-group record: type 18, the former
StreamsGroupPartitionMetadata, is gone). Keys as above (the key version is the record type);
values flexible, version 0. A task list is [subtopology_id: str, partitions: [int32]]; the
active ones of a current assignment carry tag 0, assignment_epochs: [int32] (one per
partition: the member epoch it was given the task at), written when not empty:

    StreamsGroupMetadataKey                  (key version 17) group: str
    StreamsGroupMetadataValue                (version 0)      epoch: int32, metadata_hash: int64,
                                                              (tag 0: validated_topology_epoch: int32,
                                                               default -1;
                                                               tag 1: last_assignment_configs:
                                                               [key: str, value: str], default empty
                                                               ("num.standby.replicas");
                                                               tag 2: stored_description_topology_epoch,
                                                               tag 3: failed_description_topology_epoch:
                                                               int32, default -1, unused here)
    StreamsGroupMemberMetadataKey            (key version 19) group: str, member: str
    StreamsGroupMemberMetadataValue          (version 0)      instance_id: str|null, rack_id: str|null,
                                                              client_id: str, client_host: str,
                                                              rebalance_timeout_ms: int32,
                                                              topology_epoch: int32, process_id: str,
                                                              user_endpoint: (host: str, port: uint16)|null
                                                                (a nullable struct: int8 -1 = null, 1 = set),
                                                              client_tags: [key: str, value: str]
    StreamsGroupTargetAssignmentMetadataKey  (key version 20) group: str
    StreamsGroupTargetAssignmentMetadataValue (version 0)     assignment_epoch: int32
                                                              (tag 0: assignment_timestamp: int64, default 0)
    StreamsGroupTargetAssignmentMemberKey    (key version 21) group: str, member: str
    StreamsGroupTargetAssignmentMemberValue  (version 0)      active_tasks, standby_tasks, warmup_tasks: tasks
    StreamsGroupCurrentMemberAssignmentKey   (key version 22) group: str, member: str
    StreamsGroupCurrentMemberAssignmentValue (version 0)      member_epoch: int32,
                                                              previous_member_epoch: int32,
                                                              state: int8 (1 stable, 2 unrevoked tasks,
                                                                3 unreleased tasks),
                                                              active_tasks, standby_tasks, warmup_tasks,
                                                              active_tasks_pending_revocation,
                                                              standby_tasks_pending_revocation,
                                                              warmup_tasks_pending_revocation: tasks
    StreamsGroupTopologyKey                  (key version 23) group: str
    StreamsGroupTopologyValue                (version 0)      epoch: int32,
                                                              subtopologies: [subtopology_id: str,
                                                                source_topics: [str],
                                                                source_topic_regex: [str],
                                                                state_changelog_topics: [topic info],
                                                                repartition_sink_topics: [str],
                                                                repartition_source_topics: [topic info],
                                                                copartition_groups: [source_topics: [int16],
                                                                  source_topic_regex: [int16],
                                                                  repartition_source_topics: [int16]]]
                                                              topic info: name: str, partitions: int32,
                                                                replication_factor: int16,
                                                                topic_configs: [key: str, value: str]

Tagged fields are written only when not at their default, as Kafka's generated code does.

A null value is a tombstone: the offset, the group, the member or its assignment was
deleted. The topic is compacted, so only the newest value per key survives. Group
placement follows Kafka: partition = abs(java_string_hash(group_id)) %
offsets.topic.num.partitions.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid

from logbroker.coord.groups.record_fields import FieldReader, FieldWriter
from logbroker.coord.groups.streams_topology import Subtopology, TopicInfo, Topology

OFFSETS_TOPIC = "__consumer_offsets"


class OffsetsRecordError(ValueError):
    pass


def _writer(what: str) -> FieldWriter:
    return FieldWriter(what, OffsetsRecordError)


def _reader(data: bytes, what: str) -> FieldReader:
    return FieldReader(data, what, OffsetsRecordError)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, num_partitions: int) -> int:
    """The partition of an internal state topic owning `key` (a group id, a transactional
    id, a share-partition key), as Kafka places it."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = java_string_hash(key)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclasses.dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclasses.dataclass
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclasses.dataclass
class GroupRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberRecord]


def offset_key(group: str, topic: str, partition: int) -> bytes:
    w = _writer("OffsetCommitKey").i16(1, "key version")
    return bytes(w.string(group, "group", False).string(topic, "topic", False).i32(partition, "partition").b)


def group_key(group: str) -> bytes:
    return bytes(_writer("GroupMetadataKey").i16(2, "key version").string(group, "group", False).b)


def offset_value(v: OffsetAndMetadata) -> bytes:
    w = _writer("OffsetCommitValue").i16(3, "version").i64(v.offset, "offset").i32(v.leader_epoch, "leader_epoch")
    return bytes(w.string(v.metadata, "metadata", False).i64(v.commit_timestamp, "commit_timestamp").b)


def group_value(g: GroupRecord) -> bytes:
    w = _writer("GroupMetadataValue").i16(3, "version").string(g.protocol_type, "protocol_type", False)
    w.i32(g.generation, "generation").nullable_string(g.protocol, "protocol", False)
    w.nullable_string(g.leader, "leader", False).i64(g.current_state_timestamp, "current_state_timestamp")
    w.array_len(len(g.members), "members", False)
    for m in g.members:
        w.string(m.member_id, "member_id", False).nullable_string(m.group_instance_id, "group_instance_id", False)
        w.string(m.client_id, "client_id", False).string(m.client_host, "client_host", False)
        w.i32(m.rebalance_timeout, "rebalance_timeout").i32(m.session_timeout, "session_timeout")
        w.nullable_bytes(m.subscription, "subscription", False).nullable_bytes(m.assignment, "assignment", False)
    return bytes(w.b)


def parse_key(key: bytes) -> tuple[str, str, str | None, int | None]:
    """('offset', group, topic, partition) or ('group', group, None, None); for a KIP-848
    consumer-group record (KIND_BY_TYPE) or a KIP-1071 streams-group record (SG_KIND_BY_TYPE)
    (kind, group, member id or None, None)."""
    r = _reader(key, "__consumer_offsets key")
    version = r.i16("key version")
    kind = KIND_BY_TYPE.get(version) or SG_KIND_BY_TYPE.get(version)
    if kind is not None:
        group = r.string("group", False)
        return kind, group, r.string("member", False) if version in _MEMBER_KEYED else None, None
    if version in (0, 1):
        return "offset", r.string("group", False), r.string("topic", False), r.i32("partition")
    if version == 2:
        return "group", r.string("group", False), None, None
    raise OffsetsRecordError(f"__consumer_offsets key: unknown key version {version}")


def parse_offset_value(value: bytes) -> OffsetAndMetadata:
    r = _reader(value, "OffsetCommitValue")
    version = r.i16("version")
    if version not in (0, 1, 2, 3):
        raise OffsetsRecordError(f"OffsetCommitValue: unknown version {version}")
    offset = r.i64("offset")
    leader_epoch = r.i32("leader_epoch") if version >= 3 else -1
    metadata = r.nullable_string("metadata", False) or ""
    ts = r.i64("commit_timestamp")
    if version == 1:
        r.i64("expire_timestamp")  # unused since Kafka 2.1
    return OffsetAndMetadata(offset, leader_epoch, metadata, ts)


def parse_group_value(value: bytes) -> GroupRecord:
    r = _reader(value, "GroupMetadataValue")
    version = r.i16("version")
    if version not in (0, 1, 2, 3):
        raise OffsetsRecordError(f"GroupMetadataValue: unknown version {version}")
    protocol_type = r.nullable_string("protocol_type", False) or ""
    generation = r.i32("generation")
    protocol, leader = r.nullable_string("protocol", False), r.nullable_string("leader", False)
    ts = r.i64("current_state_timestamp") if version >= 2 else -1
    members = []
    for _ in range(r.array_len("members", False) or 0):
        member_id = r.nullable_string("member_id", False) or ""
        instance = r.nullable_string("group_instance_id", False) if version >= 3 else None
        client_id = r.nullable_string("client_id", False) or ""
        client_host = r.nullable_string("client_host", False) or ""
        rebalance_timeout = r.i32("rebalance_timeout") if version >= 1 else -1
        session_timeout = r.i32("session_timeout")
        subscription = r.nullable_bytes("subscription", False) or b""
        members.append(
            MemberRecord(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                r.nullable_bytes("assignment", False) or b"",
            )
        )
    return GroupRecord(protocol_type, generation, protocol, leader, ts, members)


def subscription_topics(subscription: bytes) -> list[str]:
    """The topics of a classic consumer group member's metadata (ConsumerProtocolSubscription,
    protocol type "consumer"), read by its version 0 prefix as every version starts with it:
    int16 version, then an int32 count of int16-length topic names. OffsetsRecordError when
    the bytes do not hold that."""
    r = _reader(subscription, "ConsumerProtocolSubscription")
    version = r.i16("version")
    if version < 0:
        raise OffsetsRecordError(f"ConsumerProtocolSubscription: version {version}")
    return [r.string("topic", False) for _ in range(r.array_len("topics", False) or 0)]


# --- KIP-848 consumer groups (record types 3 to 8) ------------------------------------

CG_METADATA = "consumer_group_metadata"  # 3
CG_PARTITION_METADATA = "consumer_group_partition_metadata"  # 4
CG_MEMBER_METADATA = "consumer_group_member_metadata"  # 5
CG_TARGET_METADATA = "consumer_group_target_assignment_metadata"  # 6
CG_TARGET_MEMBER = "consumer_group_target_assignment_member"  # 7
CG_CURRENT_ASSIGNMENT = "consumer_group_current_member_assignment"  # 8
KIND_BY_TYPE = {
    3: CG_METADATA,
    4: CG_PARTITION_METADATA,
    5: CG_MEMBER_METADATA,
    6: CG_TARGET_METADATA,
    7: CG_TARGET_MEMBER,
    8: CG_CURRENT_ASSIGNMENT,
}
TYPE_BY_KIND = {v: k for k, v in KIND_BY_TYPE.items()}
_MEMBER_KEYED = {5, 7, 8, 19, 21, 22}

# ConsumerGroupCurrentMemberAssignmentValue.State (Kafka's MemberState)
MEMBER_STABLE, MEMBER_UNREVOKED_PARTITIONS, MEMBER_UNRELEASED_PARTITIONS = 0, 1, 2
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# partitions by topic id, as the records hold them: [(topic id, sorted partitions)]
TopicPartitions = list[tuple[uuid.UUID, list[int]]]


@dataclasses.dataclass
class TopicMetadataRecord:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_racks: list[tuple[int, list[str]]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ConsumerMemberRecord:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclasses.dataclass
class CurrentAssignmentRecord:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions


def _count(r: FieldReader, field: str) -> int:
    """A compact array's element count; OffsetsRecordError for a null array."""
    n = r.array_len(field, True)
    if n is None:
        raise OffsetsRecordError(f"{r.what}: {field} is null")
    return n


def _write_topic_partitions(w: FieldWriter, tps: TopicPartitions, field: str) -> FieldWriter:
    w.array_len(len(tps), field, True)
    for topic_id, partitions in tps:
        w.uuid(topic_id).array_len(len(partitions), "partitions", True)
        for p in partitions:
            w.i32(p, "partition")
        w.tagged_fields([])
    return w


def _read_topic_partitions(r: FieldReader, field: str) -> TopicPartitions:
    out = []
    for _ in range(_count(r, field)):
        topic_id = r.uuid("topic_id")
        out.append((topic_id, [r.i32("partition") for _ in range(_count(r, "partitions"))]))
        r.tagged_fields(field)
    return out


def _flexible_reader(value: bytes, what: str) -> FieldReader:
    """A reader past the version of a flexible value, which must be 0."""
    r = _reader(value, what)
    version = r.i16("version")
    if version != 0:
        raise OffsetsRecordError(f"{what}: unknown version {version}")
    return r


def _end(r: FieldReader) -> None:
    """The value's own tagged fields (skipped), then nothing more."""
    r.tagged_fields(r.what)
    r.end()


def consumer_group_key(kind: str, group: str, member_id: str | None = None) -> bytes:
    """The key of a consumer-group record of `kind` (CG_*); member-keyed kinds need `member_id`."""
    rtype = TYPE_BY_KIND[kind]
    w = _writer(f"{kind} key").i16(rtype, "record type").string(group, "group", False)
    if rtype in _MEMBER_KEYED:
        if member_id is None:
            raise ValueError(f"{kind} key needs a member id")
        w.string(member_id, "member", False)
    return bytes(w.b)


def _epoch_value(epoch: int, what: str, field: str) -> bytes:
    return bytes(_writer(what).i16(0, "version").i32(epoch, field).tagged_fields([]).b)


def consumer_group_metadata_value(epoch: int) -> bytes:
    return _epoch_value(epoch, "ConsumerGroupMetadataValue", "epoch")


def target_assignment_metadata_value(assignment_epoch: int) -> bytes:
    return _epoch_value(assignment_epoch, "ConsumerGroupTargetAssignmentMetadataValue", "assignment_epoch")


def _parse_epoch_value(value: bytes, what: str, field: str) -> int:
    r = _flexible_reader(value, what)
    epoch = r.i32(field)
    _end(r)
    return epoch


def parse_consumer_group_metadata_value(value: bytes) -> int:
    """The group epoch."""
    return _parse_epoch_value(value, "ConsumerGroupMetadataValue", "epoch")


def parse_target_assignment_metadata_value(value: bytes) -> int:
    """The assignment epoch."""
    return _parse_epoch_value(value, "ConsumerGroupTargetAssignmentMetadataValue", "assignment_epoch")


def partition_metadata_value(topics: list[TopicMetadataRecord]) -> bytes:
    w = _writer("ConsumerGroupPartitionMetadataValue").i16(0, "version").array_len(len(topics), "topics", True)
    for t in topics:
        w.uuid(t.topic_id).string(t.topic_name, "topic_name", True).i32(t.num_partitions, "num_partitions")
        w.array_len(len(t.partition_racks), "partition_metadata", True)
        for partition, racks in t.partition_racks:
            w.i32(partition, "partition").array_len(len(racks), "racks", True)
            for rack in racks:
                w.string(rack, "rack", True)
            w.tagged_fields([])
        w.tagged_fields([])
    return bytes(w.tagged_fields([]).b)


def parse_partition_metadata_value(value: bytes) -> list[TopicMetadataRecord]:
    r = _flexible_reader(value, "ConsumerGroupPartitionMetadataValue")
    topics = []
    for _ in range(_count(r, "topics")):
        topic_id, name, n = r.uuid("topic_id"), r.string("topic_name", True), r.i32("num_partitions")
        racks = []
        for _ in range(_count(r, "partition_metadata")):
            partition = r.i32("partition")
            racks.append((partition, [r.string("rack", True) for _ in range(_count(r, "racks"))]))
            r.tagged_fields("partition_metadata")
        r.tagged_fields("topics")
        topics.append(TopicMetadataRecord(topic_id, name, n, racks))
    _end(r)
    return topics


def member_metadata_value(m: ConsumerMemberRecord) -> bytes:
    w = _writer("ConsumerGroupMemberMetadataValue").i16(0, "version")
    w.nullable_string(m.instance_id, "instance_id", True).nullable_string(m.rack_id, "rack_id", True)
    w.string(m.client_id, "client_id", True).string(m.client_host, "client_host", True)
    w.array_len(len(m.subscribed_topic_names), "subscribed_topic_names", True)
    for t in m.subscribed_topic_names:
        w.string(t, "subscribed_topic_name", True)
    w.nullable_string(m.subscribed_topic_regex, "subscribed_topic_regex", True)
    w.i32(m.rebalance_timeout_ms, "rebalance_timeout_ms").nullable_string(m.server_assignor, "server_assignor", True)
    return bytes(w.tagged_fields([]).b)


def parse_member_metadata_value(value: bytes) -> ConsumerMemberRecord:
    """Tag 0 (ClassicMemberMetadata, a classic-protocol member of a consumer group) is skipped."""
    r = _flexible_reader(value, "ConsumerGroupMemberMetadataValue")
    instance_id, rack_id = r.nullable_string("instance_id", True), r.nullable_string("rack_id", True)
    client_id = r.nullable_string("client_id", True) or ""
    client_host = r.nullable_string("client_host", True) or ""
    names = [r.string("subscribed_topic_name", True) for _ in range(_count(r, "subscribed_topic_names"))]
    regex = r.nullable_string("subscribed_topic_regex", True)
    rebalance_timeout = r.i32("rebalance_timeout_ms")
    assignor = r.nullable_string("server_assignor", True)
    _end(r)
    return ConsumerMemberRecord(instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout, assignor)


def target_assignment_member_value(partitions: TopicPartitions) -> bytes:
    w = _writer("ConsumerGroupTargetAssignmentMemberValue").i16(0, "version")
    return bytes(_write_topic_partitions(w, partitions, "topic_partitions").tagged_fields([]).b)


def parse_target_assignment_member_value(value: bytes) -> TopicPartitions:
    r = _flexible_reader(value, "ConsumerGroupTargetAssignmentMemberValue")
    out = _read_topic_partitions(r, "topic_partitions")
    _end(r)
    return out


def current_assignment_value(a: CurrentAssignmentRecord) -> bytes:
    w = _writer("ConsumerGroupCurrentMemberAssignmentValue").i16(0, "version")
    w.i32(a.member_epoch, "member_epoch").i32(a.previous_member_epoch, "previous_member_epoch").i8(a.state, "state")
    _write_topic_partitions(w, a.assigned, "assigned_partitions")
    _write_topic_partitions(w, a.pending_revocation, "partitions_pending_revocation")
    return bytes(w.tagged_fields([]).b)


def parse_current_assignment_value(value: bytes) -> CurrentAssignmentRecord:
    r = _flexible_reader(value, "ConsumerGroupCurrentMemberAssignmentValue")
    epoch, previous, state = r.i32("member_epoch"), r.i32("previous_member_epoch"), r.i8("state")
    assigned = _read_topic_partitions(r, "assigned_partitions")
    pending = _read_topic_partitions(r, "partitions_pending_revocation")
    _end(r)
    return CurrentAssignmentRecord(epoch, previous, state, assigned, pending)


# --- KIP-1071 streams groups (record types 17, 19 to 23) --------------------------------

SG_METADATA = "streams_group_metadata"  # 17
SG_MEMBER_METADATA = "streams_group_member_metadata"  # 19
SG_TARGET_METADATA = "streams_group_target_assignment_metadata"  # 20
SG_TARGET_MEMBER = "streams_group_target_assignment_member"  # 21
SG_CURRENT_ASSIGNMENT = "streams_group_current_member_assignment"  # 22
SG_TOPOLOGY = "streams_group_topology"  # 23
SG_KIND_BY_TYPE = {
    17: SG_METADATA,
    19: SG_MEMBER_METADATA,
    20: SG_TARGET_METADATA,
    21: SG_TARGET_MEMBER,
    22: SG_CURRENT_ASSIGNMENT,
    23: SG_TOPOLOGY,
}
SG_TYPE_BY_KIND = {v: k for k, v in SG_KIND_BY_TYPE.items()}

# StreamsGroupCurrentMemberAssignmentValue.State (Kafka's streams MemberState values)
SG_MEMBER_STABLE, SG_MEMBER_UNREVOKED_TASKS, SG_MEMBER_UNRELEASED_TASKS = 1, 2, 3
# StreamsGroupMetadataValue.LastAssignmentConfigs key of the standby replicas
SG_NUM_STANDBY_REPLICAS = "num.standby.replicas"

# tasks by subtopology, as the records hold them: [(subtopology id, sorted partitions)]
TaskIds = list[tuple[str, list[int]]]
# active tasks of a current assignment, with each partition's assignment epoch (same length;
# empty when not known: the tagged field is then not written)
TaskIdsWithEpochs = list[tuple[str, list[int], list[int]]]

_U16 = struct.Struct(">H")


@dataclasses.dataclass
class StreamsGroupMetadataRecord:
    epoch: int
    metadata_hash: int
    validated_topology_epoch: int = -1  # tag 0
    last_assignment_configs: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # tag 1
    stored_description_topology_epoch: int = -1  # tag 2
    failed_description_topology_epoch: int = -1  # tag 3


@dataclasses.dataclass
class StreamsMemberRecord:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    topology_epoch: int
    process_id: str
    user_endpoint: tuple[str, int] | None
    client_tags: list[tuple[str, str]]


@dataclasses.dataclass
class StreamsTargetRecord:
    active: TaskIds
    standby: TaskIds
    warmup: TaskIds


@dataclasses.dataclass
class StreamsCurrentAssignmentRecord:
    member_epoch: int
    previous_member_epoch: int
    state: int
    active: TaskIdsWithEpochs
    standby: TaskIds
    warmup: TaskIds
    active_pending_revocation: TaskIdsWithEpochs
    standby_pending_revocation: TaskIds
    warmup_pending_revocation: TaskIds


def streams_group_key(kind: str, group: str, member_id: str | None = None) -> bytes:
    """The key of a streams-group record of `kind` (SG_*); member-keyed kinds need `member_id`."""
    rtype = SG_TYPE_BY_KIND[kind]
    w = _writer(f"{kind} key").i16(rtype, "record type").string(group, "group", False)
    if rtype in _MEMBER_KEYED:
        if member_id is None:
            raise ValueError(f"{kind} key needs a member id")
        w.string(member_id, "member", False)
    return bytes(w.b)


def _i32_tag(v: int) -> bytes:
    return bytes(_writer("tag").i32(v, "tag").b)


def _tag_i32(tags: dict[int, bytes], tag: int, what: str) -> int:
    if tag not in tags:
        return -1
    r = _reader(tags[tag], f"{what} tag {tag}")
    v = r.i32("value")
    r.end()
    return v


def _write_pairs(w: FieldWriter, pairs, field: str) -> FieldWriter:
    w.array_len(len(pairs), field, True)
    for k, v in pairs:
        w.string(k, "key", True).string(v, "value", True).tagged_fields([])
    return w


def _read_pairs(r: FieldReader, field: str) -> list[tuple[str, str]]:
    out = []
    for _ in range(_count(r, field)):
        out.append((r.string("key", True), r.string("value", True)))
        r.tagged_fields(field)
    return out


def streams_group_metadata_value(v: StreamsGroupMetadataRecord) -> bytes:
    """Tagged fields are written only when not at their default, as Kafka's generated code."""
    w = _writer("StreamsGroupMetadataValue").i16(0, "version").i32(v.epoch, "epoch")
    w.i64(v.metadata_hash, "metadata_hash")
    tags = []
    if v.validated_topology_epoch != -1:
        tags.append((0, _i32_tag(v.validated_topology_epoch)))
    if v.last_assignment_configs:
        tags.append(
            (1, bytes(_write_pairs(_writer("last_assignment_configs"), v.last_assignment_configs, "configs").b))
        )
    if v.stored_description_topology_epoch != -1:
        tags.append((2, _i32_tag(v.stored_description_topology_epoch)))
    if v.failed_description_topology_epoch != -1:
        tags.append((3, _i32_tag(v.failed_description_topology_epoch)))
    return bytes(w.tagged_fields(tags).b)


def parse_streams_group_metadata_value(value: bytes) -> StreamsGroupMetadataRecord:
    what = "StreamsGroupMetadataValue"
    r = _flexible_reader(value, what)
    epoch, metadata_hash = r.i32("epoch"), r.i64("metadata_hash")
    tags = r.tagged_fields(what)
    r.end()
    configs: list[tuple[str, str]] = []
    if 1 in tags:
        cr = _reader(tags[1], f"{what} last_assignment_configs")
        configs = _read_pairs(cr, "last_assignment_configs")
        cr.end()
    return StreamsGroupMetadataRecord(
        epoch,
        metadata_hash,
        _tag_i32(tags, 0, what),
        configs,
        _tag_i32(tags, 2, what),
        _tag_i32(tags, 3, what),
    )


def _write_topic_info(w: FieldWriter, infos: tuple[TopicInfo, ...]) -> None:
    w.array_len(len(infos), "topic_infos", True)
    for t in infos:
        w.string(t.name, "name", True).i32(t.partitions, "partitions").i16(t.replication_factor, "replication_factor")
        _write_pairs(w, list(t.configs.items()), "topic_configs").tagged_fields([])


def _read_topic_info(r: FieldReader, field: str) -> tuple[TopicInfo, ...]:
    out = []
    for _ in range(_count(r, field)):
        name, partitions, rf = r.string("name", True), r.i32("partitions"), r.i16("replication_factor")
        configs = dict(_read_pairs(r, "topic_configs"))
        r.tagged_fields(field)
        out.append(TopicInfo(name=name, partitions=partitions, replication_factor=rf, configs=configs))
    return tuple(out)


def _write_strings(w: FieldWriter, names, field: str) -> None:
    w.array_len(len(names), field, True)
    for n in names:
        w.string(n, field, True)


def _read_strings(r: FieldReader, field: str) -> tuple[str, ...]:
    return tuple(r.string(field, True) for _ in range(_count(r, field)))


def _write_i16s(w: FieldWriter, values, field: str) -> None:
    w.array_len(len(values), field, True)
    for v in values:
        w.i16(v, field)


def _read_i16s(r: FieldReader, field: str) -> tuple[int, ...]:
    return tuple(r.i16(field) for _ in range(_count(r, field)))


def streams_group_topology_value(topology: Topology) -> bytes:
    """A streams_topology.Topology, as StreamsGroupTopologyValue (its subtopologies in order)."""
    w = _writer("StreamsGroupTopologyValue").i16(0, "version").i32(topology.epoch, "epoch")
    w.array_len(len(topology.subtopologies), "subtopologies", True)
    for s in topology.subtopologies:
        w.string(s.subtopology_id, "subtopology_id", True)
        _write_strings(w, s.source_topics, "source_topics")
        _write_strings(w, s.source_topic_regex, "source_topic_regex")
        _write_topic_info(w, s.state_changelog_topics)
        _write_strings(w, s.repartition_sink_topics, "repartition_sink_topics")
        _write_topic_info(w, s.repartition_source_topics)
        w.array_len(len(s.copartition_groups), "copartition_groups", True)
        for sources, regexes, repartition in s.copartition_groups:
            _write_i16s(w, sources, "source_topics")
            _write_i16s(w, regexes, "source_topic_regex")
            _write_i16s(w, repartition, "repartition_source_topics")
            w.tagged_fields([])
        w.tagged_fields([])
    return bytes(w.tagged_fields([]).b)


def parse_streams_group_topology_value(value: bytes) -> Topology:
    """The streams_topology.Topology of a StreamsGroupTopologyValue."""
    r = _flexible_reader(value, "StreamsGroupTopologyValue")
    epoch = r.i32("epoch")
    subs = []
    for _ in range(_count(r, "subtopologies")):
        sid = r.string("subtopology_id", True)
        sources = _read_strings(r, "source_topics")
        regexes = _read_strings(r, "source_topic_regex")
        changelogs = _read_topic_info(r, "state_changelog_topics")
        sinks = _read_strings(r, "repartition_sink_topics")
        repartition = _read_topic_info(r, "repartition_source_topics")
        groups = []
        for _ in range(_count(r, "copartition_groups")):
            groups.append(
                (
                    _read_i16s(r, "source_topics"),
                    _read_i16s(r, "source_topic_regex"),
                    _read_i16s(r, "repartition_source_topics"),
                )
            )
            r.tagged_fields("copartition_groups")
        r.tagged_fields("subtopologies")
        subs.append(Subtopology(sid, sources, regexes, changelogs, sinks, repartition, tuple(groups)))
    _end(r)
    return Topology(epoch=epoch, subtopologies=tuple(subs))


def streams_member_metadata_value(m: StreamsMemberRecord) -> bytes:
    w = _writer("StreamsGroupMemberMetadataValue").i16(0, "version")
    w.nullable_string(m.instance_id, "instance_id", True).nullable_string(m.rack_id, "rack_id", True)
    w.string(m.client_id, "client_id", True).string(m.client_host, "client_host", True)
    w.i32(m.rebalance_timeout_ms, "rebalance_timeout_ms").i32(m.topology_epoch, "topology_epoch")
    w.string(m.process_id, "process_id", True)
    if m.user_endpoint is None:  # a nullable struct: int8 -1, else 1 and the struct
        w.i8(-1, "user_endpoint")
    else:
        host, port = m.user_endpoint
        w.i8(1, "user_endpoint").string(host, "host", True).pack(_U16, port, "port").tagged_fields([])
    _write_pairs(w, m.client_tags, "client_tags")
    return bytes(w.tagged_fields([]).b)


def parse_streams_member_metadata_value(value: bytes) -> StreamsMemberRecord:
    r = _flexible_reader(value, "StreamsGroupMemberMetadataValue")
    instance_id, rack_id = r.nullable_string("instance_id", True), r.nullable_string("rack_id", True)
    client_id, client_host = r.string("client_id", True), r.string("client_host", True)
    rebalance_timeout, topology_epoch = r.i32("rebalance_timeout_ms"), r.i32("topology_epoch")
    process_id = r.string("process_id", True)
    endpoint = None
    present = r.i8("user_endpoint")
    if present >= 0:
        host = r.string("host", True)
        endpoint = (host, int(_U16.unpack(r.take(2, "port"))[0]))
        r.tagged_fields("user_endpoint")
    tags = _read_pairs(r, "client_tags")
    _end(r)
    return StreamsMemberRecord(
        instance_id, rack_id, client_id, client_host, rebalance_timeout, topology_epoch, process_id, endpoint, tags
    )


def streams_target_metadata_value(assignment_epoch: int, assignment_timestamp: int = 0) -> bytes:
    """StreamsGroupTargetAssignmentMetadataValue; the timestamp (tag 0) only when not 0."""
    w = _writer("StreamsGroupTargetAssignmentMetadataValue").i16(0, "version")
    w.i32(assignment_epoch, "assignment_epoch")
    tags = (
        [(0, bytes(_writer("tag").i64(assignment_timestamp, "assignment_timestamp").b))] if assignment_timestamp else []
    )
    return bytes(w.tagged_fields(tags).b)


def parse_streams_target_metadata_value(value: bytes) -> tuple[int, int]:
    """(assignment epoch, assignment timestamp or 0)."""
    what = "StreamsGroupTargetAssignmentMetadataValue"
    r = _flexible_reader(value, what)
    epoch = r.i32("assignment_epoch")
    tags = r.tagged_fields(what)
    r.end()
    ts = 0
    if 0 in tags:
        tr = _reader(tags[0], f"{what} assignment_timestamp")
        ts = tr.i64("assignment_timestamp")
        tr.end()
    return epoch, ts


def _write_task_ids(w: FieldWriter, tasks, field: str, with_epochs: bool = False) -> None:
    w.array_len(len(tasks), field, True)
    for t in tasks:
        sid, partitions = t[0], t[1]
        w.string(sid, "subtopology_id", True).array_len(len(partitions), "partitions", True)
        for p in partitions:
            w.i32(p, "partition")
        epochs = t[2] if with_epochs else []
        if epochs:  # tag 0, AssignmentEpochs, only when not empty (Kafka's default)
            tw = _writer("assignment_epochs").array_len(len(epochs), "assignment_epochs", True)
            for e in epochs:
                tw.i32(e, "assignment_epoch")
            w.tagged_fields([(0, bytes(tw.b))])
        else:
            w.tagged_fields([])


def _read_task_ids(r: FieldReader, field: str, with_epochs: bool = False) -> list:
    out = []
    for _ in range(_count(r, field)):
        sid = r.string("subtopology_id", True)
        partitions = [r.i32("partition") for _ in range(_count(r, "partitions"))]
        tags = r.tagged_fields(field)
        if with_epochs:
            epochs: list[int] = []
            if 0 in tags:
                er = _reader(tags[0], f"{r.what} {field} assignment_epochs")
                epochs = [er.i32("assignment_epoch") for _ in range(_count(er, "assignment_epochs"))]
                er.end()
            out.append((sid, partitions, epochs))
        else:
            out.append((sid, partitions))
    return out


def streams_target_member_value(t: StreamsTargetRecord) -> bytes:
    w = _writer("StreamsGroupTargetAssignmentMemberValue").i16(0, "version")
    _write_task_ids(w, t.active, "active_tasks")
    _write_task_ids(w, t.standby, "standby_tasks")
    _write_task_ids(w, t.warmup, "warmup_tasks")
    return bytes(w.tagged_fields([]).b)


def parse_streams_target_member_value(value: bytes) -> StreamsTargetRecord:
    r = _flexible_reader(value, "StreamsGroupTargetAssignmentMemberValue")
    out = StreamsTargetRecord(
        _read_task_ids(r, "active_tasks"), _read_task_ids(r, "standby_tasks"), _read_task_ids(r, "warmup_tasks")
    )
    _end(r)
    return out


def streams_current_assignment_value(a: StreamsCurrentAssignmentRecord) -> bytes:
    w = _writer("StreamsGroupCurrentMemberAssignmentValue").i16(0, "version")
    w.i32(a.member_epoch, "member_epoch").i32(a.previous_member_epoch, "previous_member_epoch").i8(a.state, "state")
    _write_task_ids(w, a.active, "active_tasks", True)
    _write_task_ids(w, a.standby, "standby_tasks")
    _write_task_ids(w, a.warmup, "warmup_tasks")
    _write_task_ids(w, a.active_pending_revocation, "active_tasks_pending_revocation", True)
    _write_task_ids(w, a.standby_pending_revocation, "standby_tasks_pending_revocation")
    _write_task_ids(w, a.warmup_pending_revocation, "warmup_tasks_pending_revocation")
    return bytes(w.tagged_fields([]).b)


def parse_streams_current_assignment_value(value: bytes) -> StreamsCurrentAssignmentRecord:
    r = _flexible_reader(value, "StreamsGroupCurrentMemberAssignmentValue")
    epoch, previous, state = r.i32("member_epoch"), r.i32("previous_member_epoch"), r.i8("state")
    out = StreamsCurrentAssignmentRecord(
        epoch,
        previous,
        state,
        _read_task_ids(r, "active_tasks", True),
        _read_task_ids(r, "standby_tasks"),
        _read_task_ids(r, "warmup_tasks"),
        _read_task_ids(r, "active_tasks_pending_revocation", True),
        _read_task_ids(r, "standby_tasks_pending_revocation"),
        _read_task_ids(r, "warmup_tasks_pending_revocation"),
    )
    _end(r)
    return out
