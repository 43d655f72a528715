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

A null value is a tombstone: the offset (or the group) was deleted. The topic is
compacted, so only the newest value per key survives. Group placement follows Kafka:
partition = abs(java_string_hash(group_id)) % offsets.topic.num.partitions.
"""

from __future__ import annotations

import dataclasses
import struct

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
    """('offset', group, topic, partition) or ('group', group, None, None)."""
    r = _R(key, "__consumer_offsets key")
    version = r.i16()
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
