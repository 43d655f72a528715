"""Record formats of the internal `__share_group_state` topic (KIP-932), as Kafka writes
them, and how state batches combine.

A key is a big-endian int16 record type, then a non-flexible v0 struct:

    type 0  ShareSnapshotKey  } GroupId: str (int16 length + UTF-8), TopicId: uuid
    type 1  ShareUpdateKey    } (16 bytes), Partition: int32

A value is a big-endian int16 value version (0), then a flexible v0 struct:

    ShareSnapshotValue: SnapshotEpoch int32, StateEpoch int32, LeaderEpoch int32,
        StartOffset int64, CreateTimestamp int64, WriteTimestamp int64,
        StateBatches: COMPACT array of StateBatch, tagged fields
    ShareUpdateValue: SnapshotEpoch int32, LeaderEpoch int32, StartOffset int64 (-1: not
        changed), StateBatches, tagged fields
    StateBatch: FirstOffset int64, LastOffset int64, DeliveryState int8 (0 available,
        2 acknowledged, 3 archiving (KIP-1191: its dead letter not yet written), 4 archived),
        DeliveryCount int16, tagged fields
    tag 0 of either value: DeliveryCompleteCount int32 (default -1, not written then)
    tag LOGBROKER_TAG (0x4C42) of a StateBatch (logbroker's, issue 48): AvailableAt int64, the wall-clock ms
        before which its released records are not handed out again (a back-off); absent when
        none. Kafka's readers skip it. The share-group state RPCs (WriteShareGroupState,
        ReadShareGroupState) carry it in the same tagged field of their StateBatch.

A snapshot is the whole state of one share-partition (group, topic id, partition); an
update changes the latest snapshot: a new start offset drops what is below it, and its
batches replace the state of the offsets they cover (`combine`). A null value (on either
key type) is a tombstone: the share-partition's state was deleted. The topic is compacted.
Placement: partition_for("groupId:topicId:partition", share.coordinator.state.topic.num.partitions).

Invariant of a state's batches (`combine` keeps it): sorted, not overlapping, none below
the start offset, adjacent batches with the same delivery state and count merged.
"""

from __future__ import annotations

import dataclasses
import uuid

from logbroker.coord.groups.record_fields import FieldReader, FieldWriter
from logbroker.protocol import LOGBROKER_TAG

SHARE_STATE_TOPIC = "__share_group_state"

SNAPSHOT, UPDATE = 0, 1
_VALUE_VERSION = 0
_TAG_DELIVERY_COMPLETE_COUNT = 0

AVAILABLE, ACKNOWLEDGED, ARCHIVING, ARCHIVED = 0, 2, 3, 4
DELIVERY_STATES = (AVAILABLE, ACKNOWLEDGED, ARCHIVING, ARCHIVED)


class ShareStateLogError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int
    available_at: int = -1  # wall-clock ms of a back-off's end (-1: none)

    def tagged(self) -> dict[int, bytes]:
        """The batch's tagged fields as the state RPCs carry them."""
        return {LOGBROKER_TAG: self.available_at.to_bytes(8, "big", signed=True)} if self.available_at >= 0 else {}

    @staticmethod
    def available_at_of(tags) -> int:
        raw = (tags or {}).get(LOGBROKER_TAG)
        return int.from_bytes(raw, "big", signed=True) if raw is not None and len(raw) == 8 else -1

    @classmethod
    def from_wire(cls, b) -> StateBatch:
        """A StateBatch of the share-group state RPCs (WriteShareGroupState's request,
        ReadShareGroupState's response), its tagged AvailableAt included."""
        return cls(
            b.first_offset,
            b.last_offset,
            b.delivery_state,
            b.delivery_count,
            cls.available_at_of(b.unknown_tagged_fields),
        )


@dataclasses.dataclass
class ShareState:
    """The persisted state of one share-partition (a snapshot)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_ms: int
    write_ms: int
    batches: list[StateBatch]
    delivery_complete_count: int = -1


@dataclasses.dataclass
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int  # -1: unchanged
    batches: list[StateBatch]
    delivery_complete_count: int = -1


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """The FindCoordinator key (type 2, SHARE) and placement key of a share-partition."""
    return f"{group_id}:{topic_id}:{partition}"


def state_key(group_id: str, topic_id: uuid.UUID, partition: int, record_type: int = SNAPSHOT) -> bytes:
    w = FieldWriter("ShareSnapshotKey" if record_type == SNAPSHOT else "ShareUpdateKey", ShareStateLogError)
    w.i16(record_type, "record type").string(group_id, "GroupId", False).uuid(topic_id).i32(partition, "Partition")
    return bytes(w.b)


def parse_state_key(key: bytes) -> tuple[int, str, uuid.UUID, int]:
    """(record type, group id, topic id, partition)."""
    r = FieldReader(key, "__share_group_state key", ShareStateLogError)
    record_type = r.i16("record type")
    if record_type not in (SNAPSHOT, UPDATE):
        raise ShareStateLogError(f"__share_group_state key: unknown record type {record_type}")
    group_id = r.string("GroupId", False)
    topic_id = r.uuid("TopicId")
    partition = r.i32("Partition")
    r.end()
    return record_type, group_id, topic_id, partition


def _write_batches(w: FieldWriter, batches: list[StateBatch]) -> None:
    w.array_len(len(batches), "StateBatches", True)
    for b in batches:
        if b.delivery_state not in DELIVERY_STATES:
            raise ShareStateLogError(
                f"{w.what}: bad DeliveryState {b.delivery_state} in batch {b.first_offset}-{b.last_offset}"
            )
        w.i64(b.first_offset, "FirstOffset").i64(b.last_offset, "LastOffset")
        w.i8(b.delivery_state, "DeliveryState").i16(b.delivery_count, "DeliveryCount")
        w.tagged_fields(sorted(b.tagged().items()))


def _read_batches(r: FieldReader) -> list[StateBatch]:
    n = r.array_len("StateBatches", True)
    if n is None:
        raise ShareStateLogError(f"{r.what}: StateBatches is null")
    out = []
    for _ in range(n):
        first, last, state, count = (
            r.i64("FirstOffset"),
            r.i64("LastOffset"),
            r.i8("DeliveryState"),
            r.i16("DeliveryCount"),
        )
        b = StateBatch(first, last, state, count, StateBatch.available_at_of(r.tagged_fields("StateBatch")))
        if b.delivery_state not in DELIVERY_STATES or b.last_offset < b.first_offset:
            raise ShareStateLogError(f"{r.what}: bad state batch {b}")
        out.append(b)
    return out


def _complete_count_tags(w: FieldWriter, count: int) -> None:
    tags = []
    if count != -1:
        tags.append(
            (
                _TAG_DELIVERY_COMPLETE_COUNT,
                bytes(FieldWriter(w.what, ShareStateLogError).i32(count, "DeliveryCompleteCount").b),
            )
        )
    w.tagged_fields(tags)


def _complete_count(r: FieldReader) -> int:
    count = -1
    for tag, data in r.tagged_fields(r.what).items():
        if tag == _TAG_DELIVERY_COMPLETE_COUNT:
            count = FieldReader(data, f"{r.what} DeliveryCompleteCount", ShareStateLogError).i32(
                "DeliveryCompleteCount"
            )
    return count


def snapshot_value(s: ShareState) -> bytes:
    w = FieldWriter("ShareSnapshotValue v0", ShareStateLogError).i16(_VALUE_VERSION, "value version")
    w.i32(s.snapshot_epoch, "SnapshotEpoch").i32(s.state_epoch, "StateEpoch").i32(s.leader_epoch, "LeaderEpoch")
    w.i64(s.start_offset, "StartOffset").i64(s.create_ms, "CreateTimestamp").i64(s.write_ms, "WriteTimestamp")
    _write_batches(w, s.batches)
    _complete_count_tags(w, s.delivery_complete_count)
    return bytes(w.b)


def parse_snapshot_value(value: bytes) -> ShareState:
    r = FieldReader(value, "ShareSnapshotValue", ShareStateLogError)
    version = r.i16("value version")
    if version != _VALUE_VERSION:
        raise ShareStateLogError(f"ShareSnapshotValue: unknown version {version}")
    s = ShareState(
        r.i32("SnapshotEpoch"),
        r.i32("StateEpoch"),
        r.i32("LeaderEpoch"),
        r.i64("StartOffset"),
        r.i64("CreateTimestamp"),
        r.i64("WriteTimestamp"),
        _read_batches(r),
    )
    s.delivery_complete_count = _complete_count(r)
    r.end()
    return s


def update_value(u: ShareUpdate) -> bytes:
    w = FieldWriter("ShareUpdateValue v0", ShareStateLogError).i16(_VALUE_VERSION, "value version")
    w.i32(u.snapshot_epoch, "SnapshotEpoch").i32(u.leader_epoch, "LeaderEpoch").i64(u.start_offset, "StartOffset")
    _write_batches(w, u.batches)
    _complete_count_tags(w, u.delivery_complete_count)
    return bytes(w.b)


def parse_update_value(value: bytes) -> ShareUpdate:
    r = FieldReader(value, "ShareUpdateValue", ShareStateLogError)
    version = r.i16("value version")
    if version != _VALUE_VERSION:
        raise ShareStateLogError(f"ShareUpdateValue: unknown version {version}")
    u = ShareUpdate(r.i32("SnapshotEpoch"), r.i32("LeaderEpoch"), r.i64("StartOffset"), _read_batches(r))
    u.delivery_complete_count = _complete_count(r)
    r.end()
    return u


def combine(old: list[StateBatch], new: list[StateBatch], start_offset: int) -> list[StateBatch]:
    """The batches of a state after `new` replaced what they cover of `old`, with nothing
    below `start_offset`; sorted, disjoint, adjacent equal batches merged. `new` must be
    disjoint (`overlap` finds where it is not)."""
    new = sorted(new, key=lambda b: b.first_offset)
    pieces: list[StateBatch] = []
    for b in old:
        lo = b.first_offset
        for n in new:
            if n.last_offset < lo or n.first_offset > b.last_offset:
                continue
            if n.first_offset > lo:
                pieces.append(dataclasses.replace(b, first_offset=lo, last_offset=n.first_offset - 1))
            lo = max(lo, n.last_offset + 1)
            if lo > b.last_offset:
                break
        if lo <= b.last_offset:
            pieces.append(dataclasses.replace(b, first_offset=lo))
    out: list[StateBatch] = []
    for b in sorted(pieces + new, key=lambda b: b.first_offset):
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = dataclasses.replace(b, first_offset=start_offset)
        if (
            out
            and out[-1].last_offset + 1 == b.first_offset
            and out[-1].delivery_state == b.delivery_state
            and out[-1].delivery_count == b.delivery_count
            and out[-1].available_at == b.available_at
        ):
            out[-1] = dataclasses.replace(out[-1], last_offset=b.last_offset)
        else:
            out.append(b)
    return out


def overlap(batches: list[StateBatch]) -> tuple[StateBatch, StateBatch] | None:
    """Two batches that share an offset, or None."""
    ordered = sorted(batches, key=lambda b: b.first_offset)
    for a, b in zip(ordered, ordered[1:]):
        if b.first_offset <= a.last_offset:
            return a, b
    return None


def delivery_complete_count(batches: list[StateBatch]) -> int:
    """How many offsets of `batches` are done (acknowledged or archived)."""
    return sum(b.last_offset - b.first_offset + 1 for b in batches if b.delivery_state != AVAILABLE)
