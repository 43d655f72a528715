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

A null value is a tombstone: the offset, the group, the member or its assignment was
deleted. The topic is compacted, so only the newest value per key survives. Group
placement follows Kafka: partition = abs(java_string_hash(group_id)) %
offsets.topic.num.partitions.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid

OFFSETS_TOPIC = "__consumer_offsets"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class OffsetsRecordError(ValueError):
    pass


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


class _W:
    def __init__(self) -> None:
        self.b = bytearray()

    def i16(self, v: int) -> _W:
        self.b += _I16.pack(v)
        return self

    def i32(self, v: int) -> _W:
        self.b += _I32.pack(v)
        return self

    def i64(self, v: int) -> _W:
        self.b += _I64.pack(v)
        return self

    def str(self, v: str | None) -> _W:
        if v is None:
            return self.i16(-1)
        raw = v.encode()
        self.i16(len(raw))
        self.b += raw
        return self

    def bytes(self, v: bytes | None) -> _W:
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.b += v
        return self


class _R:
    def __init__(self, data: bytes, what: str) -> None:
        self.d = data
        self.p = 0
        self.what = what

    def _take(self, n: int) -> bytes:
        if n < 0 or self.p + n > len(self.d):
            raise OffsetsRecordError(f"{self.what}: truncated at byte {self.p} (need {n} of {len(self.d) - self.p})")
        out = self.d[self.p : self.p + n]
        self.p += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def str(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode()

    def bytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else bytes(self._take(n))


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
    return bytes(_W().i16(1).str(group).str(topic).i32(partition).b)


def group_key(group: str) -> bytes:
    return bytes(_W().i16(2).str(group).b)


def offset_value(v: OffsetAndMetadata) -> bytes:
    return bytes(_W().i16(3).i64(v.offset).i32(v.leader_epoch).str(v.metadata).i64(v.commit_timestamp).b)


def group_value(g: GroupRecord) -> bytes:
    w = _W().i16(3).str(g.protocol_type).i32(g.generation).str(g.protocol).str(g.leader).i64(g.current_state_timestamp)
    w.i32(len(g.members))
    for m in g.members:
        w.str(m.member_id).str(m.group_instance_id).str(m.client_id).str(m.client_host)
        w.i32(m.rebalance_timeout).i32(m.session_timeout).bytes(m.subscription).bytes(m.assignment)
    return bytes(w.b)


def parse_key(key: bytes) -> tuple[str, str, str | None, int | None]:
    """('offset', group, topic, partition) or ('group', group, None, None); for a KIP-848
    consumer-group record (KIND_BY_TYPE) (kind, group, member id or None, None)."""
    r = _R(key, "__consumer_offsets key")
    version = r.i16()
    if version in KIND_BY_TYPE:
        kind = KIND_BY_TYPE[version]
        group = r.str()
        member = r.str() if version in _MEMBER_KEYED else None
        if group is None or (version in _MEMBER_KEYED and member is None):
            raise OffsetsRecordError(f"{kind} key: null group or member id")
        return kind, group, member, None
    if version in (0, 1):
        group, topic, partition = r.str(), r.str(), r.i32()
        if group is None or topic is None:
            raise OffsetsRecordError("__consumer_offsets key: null group or topic")
        return "offset", group, topic, partition
    if version == 2:
        group = r.str()
        if group is None:
            raise OffsetsRecordError("__consumer_offsets key: null group")
        return "group", group, None, None
    raise OffsetsRecordError(f"__consumer_offsets key: unknown key version {version}")


def parse_offset_value(value: bytes) -> OffsetAndMetadata:
    r = _R(value, "OffsetCommitValue")
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise OffsetsRecordError(f"OffsetCommitValue: unknown version {version}")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.str() or ""
    ts = r.i64()
    if version == 1:
        r.i64()  # expire timestamp, unused since Kafka 2.1
    return OffsetAndMetadata(offset, leader_epoch, metadata, ts)


def parse_group_value(value: bytes) -> GroupRecord:
    r = _R(value, "GroupMetadataValue")
    version = r.i16()
    if version not in (0, 1, 2, 3):
        raise OffsetsRecordError(f"GroupMetadataValue: unknown version {version}")
    protocol_type = r.str() or ""
    generation = r.i32()
    protocol, leader = r.str(), r.str()
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.str() or ""
        instance = r.str() if version >= 3 else None
        client_id, client_host = r.str() or "", r.str() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        members.append(MemberRecord(member_id, instance, client_id, client_host, rebalance_timeout, session_timeout,
                                    r.bytes() or b"", r.bytes() or b""))
    return GroupRecord(protocol_type, generation, protocol, leader, ts, members)


def subscription_topics(subscription: bytes) -> list[str]:
    """The topics of a classic consumer group member's metadata (ConsumerProtocolSubscription,
    protocol type "consumer"), read by its version 0 prefix as every version starts with it:
    int16 version, then an int32 count of int16-length topic names. OffsetsRecordError when
    the bytes do not hold that."""
    r = _R(subscription, "ConsumerProtocolSubscription")
    version = r.i16()
    if version < 0:
        raise OffsetsRecordError(f"ConsumerProtocolSubscription: version {version}")
    topics = []
    for _ in range(r.i32()):
        t = r.str()
        if t is None:
            raise OffsetsRecordError("ConsumerProtocolSubscription: null topic")
        topics.append(t)
    return topics


# --- KIP-848 consumer groups (record types 3 to 8) ------------------------------------

CG_METADATA = "consumer_group_metadata"                          # 3
CG_PARTITION_METADATA = "consumer_group_partition_metadata"      # 4
CG_MEMBER_METADATA = "consumer_group_member_metadata"            # 5
CG_TARGET_METADATA = "consumer_group_target_assignment_metadata"  # 6
CG_TARGET_MEMBER = "consumer_group_target_assignment_member"     # 7
CG_CURRENT_ASSIGNMENT = "consumer_group_current_member_assignment"  # 8
KIND_BY_TYPE = {3: CG_METADATA, 4: CG_PARTITION_METADATA, 5: CG_MEMBER_METADATA, 6: CG_TARGET_METADATA,
                7: CG_TARGET_MEMBER, 8: CG_CURRENT_ASSIGNMENT}
TYPE_BY_KIND = {v: k for k, v in KIND_BY_TYPE.items()}
_MEMBER_KEYED = {5, 7, 8}

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


class _FW(_W):
    """A flexible-version writer (compact strings and arrays, tagged fields)."""

    def uvarint(self, v: int) -> _FW:
        if v < 0:
            raise ValueError(f"unsigned varint of a negative number {v}")
        while v >= 0x80:
            self.b.append((v & 0x7F) | 0x80)
            v >>= 7
        self.b.append(v)
        return self

    def i8(self, v: int) -> _FW:
        self.b += struct.pack(">b", v)
        return self

    def cstr(self, v: str | None) -> _FW:
        if v is None:
            return self.uvarint(0)
        raw = v.encode()
        self.uvarint(len(raw) + 1)
        self.b += raw
        return self

    def count(self, n: int) -> _FW:
        return self.uvarint(n + 1)

    def uuid(self, v: uuid.UUID) -> _FW:
        self.b += v.bytes
        return self

    def no_tags(self) -> _FW:
        return self.uvarint(0)

    def topic_partitions(self, tps: TopicPartitions) -> _FW:
        self.count(len(tps))
        for topic_id, partitions in tps:
            self.uuid(topic_id).count(len(partitions))
            for p in partitions:
                self.i32(p)
            self.no_tags()
        return self


class _FR(_R):
    """A flexible-version reader."""

    def uvarint(self) -> int:
        out = shift = 0
        while True:
            b = self._take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 28:
                raise OffsetsRecordError(f"{self.what}: unsigned varint too long at byte {self.p}")

    def i8(self) -> int:
        return struct.unpack(">b", self._take(1))[0]

    def cstr(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def count(self) -> int:
        n = self.uvarint()
        if n == 0:
            raise OffsetsRecordError(f"{self.what}: null array at byte {self.p}")
        return n - 1

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

    def topic_partitions(self) -> TopicPartitions:
        out = []
        for _ in range(self.count()):
            topic_id = self.uuid()
            out.append((topic_id, [self.i32() for _ in range(self.count())]))
            self.tags()
        return out

    def version0(self) -> None:
        version = self.i16()
        if version != 0:
            raise OffsetsRecordError(f"{self.what}: unknown version {version}")

    def end(self) -> None:
        self.tags()
        if self.p != len(self.d):
            raise OffsetsRecordError(f"{self.what}: {len(self.d) - self.p} byte(s) after the value")


def consumer_group_key(kind: str, group: str, member_id: str | None = None) -> bytes:
    """The key of a consumer-group record of `kind` (CG_*); member-keyed kinds need `member_id`."""
    rtype = TYPE_BY_KIND[kind]
    w = _W().i16(rtype).str(group)
    if rtype in _MEMBER_KEYED:
        if member_id is None:
            raise ValueError(f"{kind} key needs a member id")
        w.str(member_id)
    return bytes(w.b)


def consumer_group_metadata_value(epoch: int) -> bytes:
    return bytes(_FW().i16(0).i32(epoch).no_tags().b)


def target_assignment_metadata_value(assignment_epoch: int) -> bytes:
    return bytes(_FW().i16(0).i32(assignment_epoch).no_tags().b)


def _epoch_value(value: bytes, what: str) -> int:
    r = _FR(value, what)
    r.version0()
    epoch = r.i32()
    r.end()
    return epoch


def parse_consumer_group_metadata_value(value: bytes) -> int:
    """The group epoch."""
    return _epoch_value(value, "ConsumerGroupMetadataValue")


def parse_target_assignment_metadata_value(value: bytes) -> int:
    """The assignment epoch."""
    return _epoch_value(value, "ConsumerGroupTargetAssignmentMetadataValue")


def partition_metadata_value(topics: list[TopicMetadataRecord]) -> bytes:
    w = _FW().i16(0).count(len(topics))
    for t in topics:
        w.uuid(t.topic_id).cstr(t.topic_name).i32(t.num_partitions).count(len(t.partition_racks))
        for partition, racks in t.partition_racks:
            w.i32(partition).count(len(racks))
            for rack in racks:
                w.cstr(rack)
            w.no_tags()
        w.no_tags()
    return bytes(w.no_tags().b)


def parse_partition_metadata_value(value: bytes) -> list[TopicMetadataRecord]:
    r = _FR(value, "ConsumerGroupPartitionMetadataValue")
    r.version0()
    topics = []
    for _ in range(r.count()):
        topic_id, name, n = r.uuid(), r.cstr(), r.i32()
        if name is None:
            raise OffsetsRecordError("ConsumerGroupPartitionMetadataValue: null topic name")
        racks = []
        for _ in range(r.count()):
            partition = r.i32()
            names = []
            for _ in range(r.count()):
                rack = r.cstr()
                if rack is None:
                    raise OffsetsRecordError("ConsumerGroupPartitionMetadataValue: null rack")
                names.append(rack)
            r.tags()
            racks.append((partition, names))
        r.tags()
        topics.append(TopicMetadataRecord(topic_id, name, n, racks))
    r.end()
    return topics


def member_metadata_value(m: ConsumerMemberRecord) -> bytes:
    w = _FW().i16(0).cstr(m.instance_id).cstr(m.rack_id).cstr(m.client_id).cstr(m.client_host)
    w.count(len(m.subscribed_topic_names))
    for t in m.subscribed_topic_names:
        w.cstr(t)
    w.cstr(m.subscribed_topic_regex).i32(m.rebalance_timeout_ms).cstr(m.server_assignor)
    return bytes(w.no_tags().b)


def parse_member_metadata_value(value: bytes) -> ConsumerMemberRecord:
    """Tag 0 (ClassicMemberMetadata, a classic-protocol member of a consumer group) is skipped."""
    r = _FR(value, "ConsumerGroupMemberMetadataValue")
    r.version0()
    instance_id, rack_id, client_id, client_host = r.cstr(), r.cstr(), r.cstr(), r.cstr()
    names = []
    for _ in range(r.count()):
        t = r.cstr()
        if t is None:
            raise OffsetsRecordError("ConsumerGroupMemberMetadataValue: null subscribed topic name")
        names.append(t)
    regex, rebalance_timeout, assignor = r.cstr(), r.i32(), r.cstr()
    r.end()
    return ConsumerMemberRecord(instance_id, rack_id, client_id or "", client_host or "", names, regex,
                                rebalance_timeout, assignor)


def target_assignment_member_value(partitions: TopicPartitions) -> bytes:
    return bytes(_FW().i16(0).topic_partitions(partitions).no_tags().b)


def parse_target_assignment_member_value(value: bytes) -> TopicPartitions:
    r = _FR(value, "ConsumerGroupTargetAssignmentMemberValue")
    r.version0()
    out = r.topic_partitions()
    r.end()
    return out


def current_assignment_value(a: CurrentAssignmentRecord) -> bytes:
    w = _FW().i16(0).i32(a.member_epoch).i32(a.previous_member_epoch).i8(a.state)
    w.topic_partitions(a.assigned).topic_partitions(a.pending_revocation)
    return bytes(w.no_tags().b)


def parse_current_assignment_value(value: bytes) -> CurrentAssignmentRecord:
    r = _FR(value, "ConsumerGroupCurrentMemberAssignmentValue")
    r.version0()
    epoch, previous, state = r.i32(), r.i32(), r.i8()
    assigned = r.topic_partitions()
    pending = r.topic_partitions()
    r.end()
    return CurrentAssignmentRecord(epoch, previous, state, assigned, pending)
