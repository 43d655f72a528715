"""A share-partition: one share group's delivery state for one topic partition (KIP-932),
kept by the partition's leader.

State (Kafka's names):
    SPSO   share-partition start offset: every record below it is done.
    SPEO   share-partition end offset: the next offset never handed out yet.
    in-flight records, one entry per offset in [SPSO, SPEO):
        AVAILABLE     to be delivered (again): released, its lock expired, or its consumer left
        ACQUIRED      delivered to `member_id`, locked until `deadline`
        ACKNOWLEDGED  accepted by its consumer                         } done
        ARCHIVED      rejected, a gap, or out of deliveries            }
    delivery count: how often the record was acquired; at `delivery_count_limit` a record that
    comes back (released, lock expired) is archived instead of delivered again. Records given
    up on (archived so, or rejected) are listed in `dead_letters` for the dead-letter topic.

Invariants:
    SPSO <= SPEO; `records` holds exactly the offsets [SPSO, SPEO); the record at SPSO, if
    any, is not done (the done prefix is dropped as SPSO moves past it); at most
    `max_in_flight` offsets are in flight before new ones are acquired; a record is acquired
    by one member at a time; only the member holding a record can acknowledge it.

Persistence: `version` counts the changes that the share coordinator must learn (every one
but an acquisition: like Kafka, a leader does not write when it hands records out);
`state_batches()` is what is written — the in-flight offsets as runs of (delivery state,
delivery count), an acquired record as available with its count — and `restore` rebuilds a
share-partition from what was read back (SPEO: the end of the last batch).

Offsets with no record (compaction gaps, transaction markers) are handed out like records:
the consumer acknowledges them as GAP. Nothing here reads record bytes: the caller reads whole
batches from the log (`share_fetch.py`) and this module decides which of their offsets are
acquired. Times are trio-clock seconds, passed in.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

import trio

from logbroker.coord.groups.share_state_log import StateBatch
from logbroker.protocol import ErrorCode


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """The AcknowledgeTypes values of ShareFetch/ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2 (KIP-1222): keep the lock


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


@dataclass
class InFlight:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str = ""
    deadline: float = 0.0


class ShareError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class SharePartition:
    def __init__(
        self,
        group_id: str,
        topic: str,
        partition: int,
        start_offset: int,
        lock_duration_s: float,
        delivery_count_limit: int,
        max_in_flight: int,
    ) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.start_offset = start_offset  # SPSO
        self.end_offset = start_offset  # SPEO
        self.records: dict[int, InFlight] = {}
        self.lock_duration_s = lock_duration_s
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self.leader_epoch = -1  # of the leadership this state belongs to (set by its owner)
        self.state_epoch = 0  # of the persisted state (bumped when the group's offsets are reset)
        self.topic_id: uuid.UUID | None = None  # the topic's id (set by its owner)
        self.version = 0  # changes to persist; `persisted_version` of them are persisted
        self.persisted_version = 0
        self.writing: trio.Event | None = None  # while a write is in flight (set by its owner)
        self.source_log = None  # the partition's log (set by its owner, for dead letters)
        # (offset, delivery count, reason) of records given up on (archived at the delivery
        # limit, or rejected), for the dead-letter topic; the owner drains it
        self.dead_letters: list[tuple[int, int, str]] = []

    def __repr__(self) -> str:
        return f"SharePartition({self.group_id}, {self.name}, SPSO {self.start_offset}, SPEO {self.end_offset})"

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    # --- persistence ---------------------------------------------------------------------

    def restore(self, batches: list[StateBatch]) -> None:
        """Takes the persisted in-flight state (batches above the SPSO; offsets between them
        are available, never delivered); the SPEO becomes the end of the last batch."""
        for b in batches:
            for off in range(max(b.first_offset, self.start_offset), b.last_offset + 1):
                self.records[off] = InFlight(RecordState(b.delivery_state), b.delivery_count)
            self.end_offset = max(self.end_offset, b.last_offset + 1)
        for off in range(self.start_offset, self.end_offset):
            self.records.setdefault(off, InFlight())
        self._advance()

    def state_batches(self) -> list[StateBatch]:
        """The in-flight offsets as runs of equal (delivery state, delivery count); acquired
        records as available (their lock does not survive the leader)."""
        out: list[StateBatch] = []
        for off in range(self.start_offset, self.end_offset):
            rec = self.records[off]
            state = RecordState.AVAILABLE if rec.state == RecordState.ACQUIRED else rec.state
            if (
                out
                and out[-1].last_offset == off - 1
                and out[-1].delivery_state == state
                and out[-1].delivery_count == rec.delivery_count
            ):
                out[-1] = StateBatch(out[-1].first_offset, off, int(state), rec.delivery_count)
            else:
                out.append(StateBatch(off, off, int(state), rec.delivery_count))
        return out

    @property
    def dirty(self) -> bool:
        return self.persisted_version < self.version

    # --- acquisition -------------------------------------------------------------------

    def first_available(self, now: float) -> int | None:
        """The lowest in-flight offset that can be delivered now (locks past `now` expire first)."""
        self.expire_locks(now)
        for off in range(self.start_offset, self.end_offset):
            if self.records[off].state == RecordState.AVAILABLE:
                return off
        return None

    def can_acquire_new(self) -> bool:
        return self.end_offset - self.start_offset < self.max_in_flight

    def acquire(self, member_id: str, first: int, end: int, now: float, max_records: int) -> list[tuple[int, int, int]]:
        """Acquires for `member_id` what is acquirable in [first, end) — available in-flight
        records, and offsets from SPEO on — up to `max_records` (more to finish a run of new
        offsets is not taken); returns the AcquiredRecords ranges `(first, last, delivery count)`."""
        out: list[tuple[int, int, int]] = []
        taken = 0
        deadline = now + self.lock_duration_s
        off = max(first, self.start_offset)
        while off < end and taken < max_records:
            rec = self.records.get(off)
            if rec is None:
                if off != self.end_offset or not self.can_acquire_new():
                    break
                rec = self.records[off] = InFlight()
                self.end_offset = off + 1
            if rec.state == RecordState.AVAILABLE:
                rec.state, rec.member_id, rec.deadline = RecordState.ACQUIRED, member_id, deadline
                rec.delivery_count += 1
                taken += 1
                if out and out[-1][1] == off - 1 and out[-1][2] == rec.delivery_count:
                    out[-1] = (out[-1][0], off, rec.delivery_count)
                else:
                    out.append((off, off, rec.delivery_count))
            off += 1
        return out

    # --- acknowledgement ------------------------------------------------------------------

    def acknowledge(self, member_id: str, first: int, last: int, types: list[int], now: float) -> None:
        """Applies one AcknowledgementBatch: `types` has one type for every offset, or one for
        all. Checked whole before anything changes; ShareError(INVALID_RECORD_STATE) names the
        first offset not acquired by this member."""
        n = last - first + 1
        if n <= 0 or not types or (len(types) != 1 and len(types) != n):
            raise ShareError(
                ErrorCode.INVALID_REQUEST,
                f"share group {self.group_id!r}, {self.name}: acknowledgement batch {first}-{last} "
                f"has {len(types)} acknowledge types",
            )
        kinds = [AcknowledgeType(t) if t in AcknowledgeType._value2member_map_ else None for t in types]
        if None in kinds:
            raise ShareError(
                ErrorCode.INVALID_REQUEST,
                f"share group {self.group_id!r}, {self.name}: unknown acknowledge type in {types}",
            )
        for off in range(first, last + 1):
            rec = self.records.get(off)
            if rec is None or rec.state != RecordState.ACQUIRED or rec.member_id != member_id:
                what = (
                    "not in flight"
                    if rec is None
                    else (
                        f"{rec.state.name.lower()}"
                        + (f" by member {rec.member_id}" if rec.state == RecordState.ACQUIRED else "")
                    )
                )
                raise ShareError(
                    ErrorCode.INVALID_RECORD_STATE,
                    f"share group {self.group_id!r}, {self.name}: offset {off} is {what}, "
                    f"not acquired by member {member_id} (SPSO {self.start_offset}, SPEO {self.end_offset})",
                )
        for i, off in enumerate(range(first, last + 1)):
            kind = kinds[0] if len(kinds) == 1 else kinds[i]
            rec = self.records[off]
            if kind == AcknowledgeType.ACCEPT:
                rec.state = RecordState.ACKNOWLEDGED
            elif kind == AcknowledgeType.REJECT:
                rec.state = RecordState.ARCHIVED
                self.dead_letters.append((off, rec.delivery_count, f"rejected by member {member_id}"))
            elif kind == AcknowledgeType.GAP:
                rec.state = RecordState.ARCHIVED
            elif kind == AcknowledgeType.RELEASE:
                self._give_back(off, rec)
            else:  # RENEW
                rec.deadline = now + self.lock_duration_s
        self.version += 1
        self._advance()

    def release_member(self, member_id: str) -> int:
        """Every record `member_id` holds becomes available again (its consumer left); the count."""
        n = 0
        for off, rec in self.records.items():
            if rec.state == RecordState.ACQUIRED and rec.member_id == member_id:
                self._give_back(off, rec)
                n += 1
        if n:
            self.version += 1
            self._advance()
        return n

    def expire_locks(self, now: float) -> int:
        """Acquired records whose lock ran out come back; the count."""
        n = 0
        for off, rec in self.records.items():
            if rec.state == RecordState.ACQUIRED and rec.deadline <= now:
                self._give_back(off, rec)
                n += 1
        if n:
            self.version += 1
            self._advance()
        return n

    def next_lock_deadline(self) -> float | None:
        deadlines = [r.deadline for r in self.records.values() if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def _give_back(self, off: int, rec: InFlight) -> None:
        rec.member_id, rec.deadline = "", 0.0
        if rec.delivery_count >= self.delivery_count_limit:
            rec.state = RecordState.ARCHIVED
            self.dead_letters.append(
                (off, rec.delivery_count, f"delivery count limit {self.delivery_count_limit} reached")
            )
        else:
            rec.state = RecordState.AVAILABLE

    def _advance(self) -> None:
        while self.start_offset < self.end_offset and self.records[self.start_offset].state in DONE:
            del self.records[self.start_offset]
            self.start_offset += 1

    # --- the log moving under it ------------------------------------------------------------

    def move_start(self, log_start_offset: int) -> None:
        """Records below the log start offset are gone (retention, DeleteRecords): skip them."""
        if log_start_offset <= self.start_offset:
            return
        for off in range(self.start_offset, min(log_start_offset, self.end_offset)):
            del self.records[off]
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self.version += 1
        self._advance()
