"""A share-partition: one share group's delivery state for one topic partition (KIP-932),
kept by the partition's leader.

State (Kafka's names):
    SPSO   share-partition start offset: every record below it is done.
    SPEO   share-partition end offset: the next offset never handed out yet.
    in-flight records, one entry per offset in [SPSO, SPEO):
        AVAILABLE     to be delivered (again): released, its lock expired, or its consumer left
        ACQUIRED      delivered to `member_id`, locked until `deadline`
        ACKNOWLEDGED  accepted by its consumer                         } done
        ARCHIVING     given up on (rejected, or out of deliveries) while its group has a
                      dead-letter topic: not handed out, holding the SPSO, until the dead
                      letter is written (or given up on); then ARCHIVED (KIP-1191)
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

Beyond Kafka (issue 48), what each in-flight record's batch says (`set_facts`, from the Rust
`share_record_facts`): its key (a hash) and its not-before time (header `logbroker.deliver.at`,
ms since the epoch). A record is *ready* when it is available and
    - its not-before time has come (delayed delivery: wall-clock ms, passed in);
    - its back-off has passed (`available_at_ms`: a release with a delay, or the group's
      `share.release.backoff.ms` growing with the delivery count; wall-clock ms, persisted
      with the state batches so a new leader keeps it);
    - with `key_order` (the group's `share.delivery.order=key`), it is the lowest in-flight
      offset of its key that is not done: `keys` maps each key to its in-flight offsets in
      order, so a record waits while an earlier one of its key is available, acquired or
      backing off. Records without a key are not ordered.
Only ready records are acquired. New offsets taken in from the SPEO that are not ready stay
in flight as available (so the SPEO, and the records behind them, move on). A share-partition
read back after a leader change has its in-flight records' facts read again from the log
(`needs_facts`) before anything is acquired; back-offs are persisted (StateBatch's tagged
AvailableAt), not-before times and key order come from the log: all three hold across a
failover.

Offsets with no record (compaction gaps, transaction markers) are handed out like records:
the consumer acknowledges them as GAP. Nothing here reads record bytes: the caller reads whole
batches from the log (`share_fetch.py`) and this module decides which of their offsets are
acquired. Times are trio-clock seconds, passed in.
"""

from __future__ import annotations

import enum
import uuid
from collections import deque
from dataclasses import dataclass

import trio

from logbroker.coord.groups.share_state_log import StateBatch
from logbroker.protocol import ErrorCode


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """The AcknowledgeTypes values of ShareFetch/ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2 (KIP-1222): keep the lock


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
KEY_DONE = (*DONE, RecordState.ARCHIVING)  # done as far as its key's order goes
# why a record was given up on: Kafka's dead-letter messages (KIP-1191, __dlq.errors.message)
REJECTED = "Offset rejected by client."
EXCEEDED = "Offset delivery count exceeded the threshold."


@dataclass
class InFlight:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str = ""
    deadline: float = 0.0
    key: int | None = None  # the record key's hash (None: no key, no record, or not read yet)
    not_before_ms: int = -1  # delayed delivery: not acquired before this wall-clock time
    available_at_ms: int = -1  # a back-off: not acquired before this wall-clock time (persisted)


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
        self.key_order = False  # share.delivery.order=key (set by its owner; `set_key_order`)
        self.keys: dict[int, deque[int]] = {}  # key -> its in-flight offsets not done, in order
        self.release_backoff_s = 0.0  # share.release.backoff.ms (0: a release is ready at once)
        self.release_backoff_max_s = 0.0  # share.release.backoff.max.ms
        self.needs_facts = False  # read back: the in-flight records' keys and times are to be read
        self.dlq = False  # the group has a dead-letter topic (KIP-1191): give-ups go ARCHIVING first

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
                self.records[off] = InFlight(
                    RecordState(b.delivery_state), b.delivery_count, available_at_ms=b.available_at
                )
            self.end_offset = max(self.end_offset, b.last_offset + 1)
        for off in range(self.start_offset, self.end_offset):
            self.records.setdefault(off, InFlight())
            rec = self.records[off]
            if rec.state == RecordState.ARCHIVING:  # its dead letter may not be written yet: again
                reason = EXCEEDED if rec.delivery_count >= self.delivery_count_limit else REJECTED
                self.dead_letters.append((off, rec.delivery_count, reason))
        self.needs_facts = self.end_offset > self.start_offset
        self._advance()

    # --- what the log says of each record ---------------------------------------------------

    def set_facts(self, offsets: list[int], keys: list[int | None], not_before: list[int]) -> None:
        """Keys and not-before times of in-flight records (`_core.share_record_facts` of their
        batches); offsets not in flight are ignored. Keys join `keys` in offset order."""
        for off, key, nb in zip(offsets, keys, not_before):
            rec = self.records.get(off)
            if rec is None or rec.state in DONE:
                continue
            rec.key, rec.not_before_ms = key, nb
        self._rebuild_keys()

    def set_key_order(self, on: bool) -> None:
        if on != self.key_order:
            self.key_order = on
            self._rebuild_keys()

    def _rebuild_keys(self) -> None:
        self.keys = {}
        if self.key_order:
            for off in range(self.start_offset, self.end_offset):
                rec = self.records[off]
                if rec.key is not None and rec.state not in KEY_DONE:
                    self.keys.setdefault(rec.key, deque()).append(off)

    def _key_done(self, off: int, rec: InFlight) -> None:
        """`off` is done: it leaves its key's queue (where it is the head, but for a record
        skipped by the log start moving)."""
        if not self.key_order or rec.key is None:
            return
        q = self.keys.get(rec.key)
        if not q:
            return
        if q[0] == off:
            q.popleft()
        else:
            try:
                q.remove(off)
            except ValueError:
                return
        if not q:
            del self.keys[rec.key]

    def ready(self, off: int, rec: InFlight, wall_ms: int) -> bool:
        """Whether the available record at `off` may be acquired now (see the module doc)."""
        if rec.state != RecordState.AVAILABLE or rec.available_at_ms > wall_ms or rec.not_before_ms > wall_ms:
            return False
        if self.key_order and rec.key is not None:
            q = self.keys.get(rec.key)
            return not q or q[0] == off
        return True

    def next_ready_time(self, now: float, wall_ms: int) -> float | None:
        """The trio time at which an available record held back by its not-before time or its
        back-off becomes ready (None: none is); key order is not a wait of its own (a record
        waits for an acknowledgement or a lock expiry, which wake fetches anyway)."""
        best: int | None = None
        for rec in self.records.values():
            if rec.state != RecordState.AVAILABLE:
                continue
            at = max(rec.available_at_ms, rec.not_before_ms)
            if at > wall_ms and (best is None or at < best):
                best = at
        return None if best is None else now + (best - wall_ms) / 1000

    def state_batches(self) -> list[StateBatch]:
        """The in-flight offsets as runs of equal (delivery state, delivery count, back-off);
        acquired records as available (their lock does not survive the leader)."""
        out: list[StateBatch] = []
        for off in range(self.start_offset, self.end_offset):
            rec = self.records[off]
            state = RecordState.AVAILABLE if rec.state == RecordState.ACQUIRED else rec.state
            at = rec.available_at_ms if rec.state == RecordState.AVAILABLE else -1
            if (
                out
                and out[-1].last_offset == off - 1
                and out[-1].delivery_state == state
                and out[-1].delivery_count == rec.delivery_count
                and out[-1].available_at == at
            ):
                out[-1] = StateBatch(out[-1].first_offset, off, int(state), rec.delivery_count, at)
            else:
                out.append(StateBatch(off, off, int(state), rec.delivery_count, at))
        return out

    @property
    def dirty(self) -> bool:
        return self.persisted_version < self.version

    # --- acquisition -------------------------------------------------------------------

    def first_available(self, now: float, wall_ms: int = 0) -> int | None:
        """The lowest in-flight offset that is ready now (locks past `now` expire first)."""
        self.expire_locks(now)
        for off in range(self.start_offset, self.end_offset):
            if self.ready(off, self.records[off], wall_ms):
                return off
        return None

    def can_acquire_new(self) -> bool:
        return self.end_offset - self.start_offset < self.max_in_flight

    def acquire(
        self,
        member_id: str,
        first: int,
        end: int,
        now: float,
        max_records: int,
        wall_ms: int = 0,
        facts: tuple[list[int], list[int | None], list[int]] | None = None,
    ) -> list[tuple[int, int, int]]:
        """Acquires for `member_id` what is ready in [first, end) — available in-flight records,
        and offsets from SPEO on, which come in flight first (with `facts`, the keys and
        not-before times of the batches read: `_core.share_record_facts`) — up to
        `max_records`; returns the AcquiredRecords ranges `(first, last, delivery count)`. A new
        offset that is not ready stays in flight, available."""
        out: list[tuple[int, int, int]] = []
        taken = 0
        deadline = now + self.lock_duration_s
        new_facts: dict[int, tuple[int | None, int]] = {}
        if facts is not None:
            new_facts = {o: (k, nb) for o, k, nb in zip(*facts) if o >= self.end_offset}
        off = max(first, self.start_offset)
        while off < end:
            if taken >= max_records and (not self.key_order or off < self.end_offset):
                break  # in key order the new offsets read still come in flight (their keys known)
            rec = self.records.get(off)
            if rec is None:
                if off != self.end_offset or not self.can_acquire_new():
                    break
                key, not_before = new_facts.get(off, (None, -1))
                rec = self.records[off] = InFlight(key=key, not_before_ms=not_before)
                self.end_offset = off + 1
                if self.key_order and key is not None:
                    self.keys.setdefault(key, deque()).append(off)
            if taken < max_records and self.ready(off, rec, wall_ms):
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

    def acknowledge(
        self,
        member_id: str,
        first: int,
        last: int,
        types: list[int],
        now: float,
        release_delay_ms: int | None = None,
        wall_ms: int = 0,
    ) -> None:
        """Applies one AcknowledgementBatch: `types` has one type for every offset, or one for
        all. Checked whole before anything changes; ShareError(INVALID_RECORD_STATE) names the
        first offset not acquired by this member. A released record backs off for
        `release_delay_ms` (logbroker's ShareConsumer sends it), else for the group's
        back-off at its delivery count."""
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
                self._key_done(off, rec)
            elif kind == AcknowledgeType.REJECT:
                self._give_up(off, rec, REJECTED)
            elif kind == AcknowledgeType.GAP:
                rec.state = RecordState.ARCHIVED
                self._key_done(off, rec)
            elif kind == AcknowledgeType.RELEASE:
                self._give_back(off, rec)
                if rec.state == RecordState.AVAILABLE:
                    backoff = self._backoff_ms(rec.delivery_count, release_delay_ms)
                    rec.available_at_ms = wall_ms + backoff if backoff > 0 else -1
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

    def _backoff_ms(self, delivery_count: int, delay_ms: int | None) -> int:
        if delay_ms is not None:
            return max(0, delay_ms)
        if self.release_backoff_s <= 0:
            return 0
        return int(1000 * min(self.release_backoff_max_s, self.release_backoff_s * 2 ** max(0, delivery_count - 1)))

    def _give_back(self, off: int, rec: InFlight) -> None:
        rec.member_id, rec.deadline, rec.available_at_ms = "", 0.0, -1
        if rec.delivery_count >= self.delivery_count_limit:
            self._give_up(off, rec, EXCEEDED)
        else:
            rec.state = RecordState.AVAILABLE

    def _give_up(self, off: int, rec: InFlight, reason: str) -> None:
        """The group gives up on the record: ARCHIVING until its dead letter is written when the
        group has a dead-letter topic (`dlq`), else ARCHIVED. Either way its key moves on."""
        rec.state = RecordState.ARCHIVING if self.dlq else RecordState.ARCHIVED
        self._key_done(off, rec)
        self.dead_letters.append((off, rec.delivery_count, reason))

    def archived(self, offsets: list[int]) -> int:
        """Dead letters written (or given up on): their ARCHIVING records become ARCHIVED; the count."""
        n = 0
        for off in offsets:
            rec = self.records.get(off)
            if rec is not None and rec.state == RecordState.ARCHIVING:
                rec.state = RecordState.ARCHIVED
                n += 1
        if n:
            self.version += 1
            self._advance()
        return n

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
            self._key_done(off, self.records.pop(off))
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self.version += 1
        self._advance()
