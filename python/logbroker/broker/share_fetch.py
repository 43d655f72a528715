"""Share fetches (KIP-932): share sessions and the share-partitions of the partitions this
broker leads; serves ShareFetch (78) and ShareAcknowledge (79) with handlers/share_groups.py.

A share session belongs to (group id, member id) on this broker: ShareSessionEpoch 0 opens
it (replacing an older one of the member), each next request carries the next epoch (1, 2,
...; SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH otherwise), -1 closes it after its
acknowledgements are applied and hands the member's acquired records back. The session holds
the partitions the member fetches; a request adds the ones it names and drops its
ForgottenTopicsData.

A fetch applies the request's acknowledgements, then acquires records on each session
partition this broker leads: first the lowest run of records that came back (released,
lock expired), else new records from the SPEO up to the high watermark. The records go out
as the whole batches that hold them, read by the Rust log in one `pread` (`Log.read_batches`),
with AcquiredRecords naming the offsets acquired; the consumer drops the rest of a batch.
With nothing to hand out the request waits up to MaxWaitMs for an HW move on one of its
partitions (the data path reports those, `Partition.add_waiter`), a record coming back, or
the next lock expiry.

Share-partition state is persisted at the share coordinator (share_persister.py,
coord/groups/share_coordinator.py). A share-partition is read back when it is first used under a
leader epoch (a fresh one starts at the group's share.auto.offset.reset, and that start is
written at once). Acknowledgements are answered once their state is written; other changes
(records coming back as locks run out or members leave, the log start moving) are written
in the background. Writes of one share-partition are coalesced: one write carries every
change made before it started. A write refused as fenced (a newer leader, or the group's
offsets reset) drops the share-partition here; its next use reads it back.

The group-level keys (share.auto.offset.reset, share.record.lock.duration.ms,
share.delivery.count.limit, and logbroker's share.delivery.order, share.release.backoff.ms
and share.release.backoff.max.ms) are read from the metadata image's group configs at each
use, the broker's group.share.* keys as defaults.

Key order, delayed delivery and release back-off (issue 48, share_partition.py): the batches
a fetch reads give the keys and not-before times (header `logbroker.deliver.at`) of the
offsets new to the in-flight window (`_core.share_record_facts`, in Rust); a share-partition
read back after a leader change reads its in-flight batches once for them. A fetch with
nothing ready also wakes when a held-back record becomes ready. logbroker's ShareConsumer
gives a release's back-off in tagged field LOGBROKER_TAG of the AcknowledgementBatch.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field

import trio

from logbroker import _core
from logbroker.broker.share_partition import ShareError, SharePartition
from logbroker.coord.groups.state_topic import StateTopicError
from logbroker.deliver_at import DELIVER_AT_HEADER
from logbroker.log_format import fields
from logbroker.protocol import LOGBROKER_TAG, ErrorCode

log = logging.getLogger("logbroker.share")

MAX_EPOCH = 2**31 - 1
IDLE_CHECK_S = 5.0
FACTS_READ_BYTES = 8 << 20  # a read-back share-partition's in-flight batches, per read


def release_delay_ms(batch) -> int | None:
    """The back-off logbroker's ShareConsumer gave a RELEASE batch (int32 ms in tagged field
    LOGBROKER_TAG of its AcknowledgementBatch; None: none given)."""
    raw = (getattr(batch, "unknown_tagged_fields", None) or {}).get(LOGBROKER_TAG)
    if raw is None or len(raw) != 4:
        return None
    return max(0, int.from_bytes(raw, "big", signed=True))


def wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: dict[tuple[uuid.UUID, int], None] = field(default_factory=dict)  # ordered set
    last_used: float = 0.0  # trio clock


@dataclass
class PartitionResult:
    """What a fetch or acknowledgement has to say about one partition."""

    topic_id: uuid.UUID
    partition: int
    error: int = ErrorCode.NONE
    message: str | None = None
    ack_error: int = ErrorCode.NONE
    ack_message: str | None = None
    records: bytes | None = None
    acquired: list[tuple[int, int, int]] = field(default_factory=list)
    acked: bool = False

    @property
    def worth_sending(self) -> bool:
        return bool(self.error or self.acked or self.acquired)


class ShareFetchManager:
    def __init__(self, config, replicas, controller, persister, dead_letters=None) -> None:
        self.config = config
        self.replicas = replicas
        self.controller = controller
        self.persister = persister  # a share_persister.SharePersister
        self.dead_letters = dead_letters  # a share_dead_letters.DeadLetterWriter, or None
        self._nursery: trio.Nursery | None = None
        self._loading: dict[tuple[str, str, int], trio.Event] = {}
        self.max_in_flight = config.get_int("group.share.partition.max.record.locks")
        self.max_sessions = config.get_int("group.share.max.share.sessions")
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        # (group, topic id, partition) -> the sessions holding it: how many members a key-ordered
        # fetch shares the keys with (kept as sessions add, forget and close partitions)
        self.holders: dict[tuple[str, uuid.UUID, int], int] = {}
        self._waiters: set[trio.Event] = set()

    # --- lookups ---------------------------------------------------------------------------

    def group_config(self, group_id: str, key: str):
        """A group-level key (share.record.lock.duration.ms, ...): the group's own value, set
        with IncrementalAlterConfigs, or the broker's group.* default."""
        return self.config.group_value(self.controller.image.group_configs.get(group_id, {}), key)

    def lock_duration_ms(self, group_id: str) -> int:
        return self.group_config(group_id, "share.record.lock.duration.ms")

    def topic_names(self) -> dict[uuid.UUID, str]:
        return {t.topic_id: name for name, t in self.controller.image.topics.items()}

    def resolve(self, topic_id: uuid.UUID, partition: int, names: dict[uuid.UUID, str]):
        """(topic name, local leader Partition) or a PartitionResult naming the error."""
        name = names.get(topic_id)
        if name is None:
            return PartitionResult(topic_id, partition, ErrorCode.UNKNOWN_TOPIC_ID, f"topic id {topic_id} is not known")
        part = self.replicas.get(name, partition) if self.replicas is not None else None
        if part is None or not part.is_leader or part.deleted:
            topic = self.controller.image.topics.get(name)
            if topic is None or partition not in topic.partitions:
                return PartitionResult(
                    topic_id, partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{name}-{partition} does not exist"
                )
            return PartitionResult(
                topic_id, partition, ErrorCode.NOT_LEADER_OR_FOLLOWER, f"{name}-{partition} is not led by this broker"
            )
        return name, part

    def share_partition(self, group_id: str, topic: str, part) -> SharePartition | None:
        """The group's share-partition of `part` if it was read back under the current leader
        epoch (state from an earlier leadership here is stale: another leader served the group
        since)."""
        sp = self.partitions.get((group_id, topic, part.index))
        if sp is None or sp.leader_epoch != part.leader_epoch:
            return None
        # the group's configs may change
        sp.lock_duration_s = self.lock_duration_ms(group_id) / 1000
        sp.delivery_count_limit = self.group_config(group_id, "share.delivery.count.limit")
        sp.set_key_order(self.group_config(group_id, "share.delivery.order") == "key")
        sp.release_backoff_s = self.group_config(group_id, "share.release.backoff.ms") / 1000
        sp.release_backoff_max_s = self.group_config(group_id, "share.release.backoff.max.ms") / 1000
        sp.dlq = self.dead_letters is not None and self.dead_letters.active_for(group_id)
        return sp

    async def load(self, group_id: str, topic_id: uuid.UUID, topic: str, part) -> SharePartition:
        """The group's share-partition of `part`, read back from its share coordinator at its
        first use under this leader epoch; StateTopicError if that fails."""
        key = (group_id, topic, part.index)
        while True:
            sp = self.share_partition(group_id, topic, part)
            if sp is not None:
                return sp
            loading = self._loading.get(key)
            if loading is None:
                break
            await loading.wait()
        done = self._loading[key] = trio.Event()
        try:
            epoch = part.leader_epoch
            pkey = (group_id, topic_id, part.index)
            state_epoch, start, batches = await self.persister.read(pkey, epoch)
            fresh = start < 0
            if fresh:
                reset = self.group_config(group_id, "share.auto.offset.reset")
                start = part.log.high_watermark if reset == "latest" else part.log.log_start_offset
                await self.persister.write(pkey, state_epoch, epoch, start, [])
            if part.leader_epoch != epoch or not part.is_leader:
                raise StateTopicError(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    f"share group {group_id!r}: {topic}-{part.index} changed leader while loading",
                )
            old = self.partitions.get(key)
            sp = SharePartition(group_id, topic, part.index, start, 0.0, 0, self.max_in_flight)
            sp.delivery_count_limit = self.group_config(group_id, "share.delivery.count.limit")
            sp.restore(batches)  # ARCHIVING records queue their dead letters again
            sp.leader_epoch, sp.state_epoch, sp.topic_id, sp.source_log = epoch, state_epoch, topic_id, part.log
            self.partitions[key] = sp
            if fresh:
                log.info(
                    "share group %r: %s-%d starts at offset %d (share.auto.offset.reset=%s)",
                    group_id,
                    topic,
                    part.index,
                    start,
                    reset,
                    extra=fields(group=group_id, topic=topic, partition=part.index, offset=start),
                )
            else:
                log.info(
                    "share group %r: %s-%d read back%s: SPSO %d, SPEO %d, state epoch %d, leader epoch %d",
                    group_id,
                    topic,
                    part.index,
                    "" if old is None else f" (was led here at epoch {old.leader_epoch})",
                    sp.start_offset,
                    sp.end_offset,
                    state_epoch,
                    epoch,
                    extra=fields(group=group_id, topic=topic, partition=part.index),
                )
            return self.share_partition(group_id, topic, part) or sp
        finally:
            del self._loading[key]
            done.set()

    async def load_all(
        self, group_id: str, targets: list[tuple[uuid.UUID, int, str, object]]
    ) -> dict[tuple[uuid.UUID, int], PartitionResult]:
        """Loads the share-partitions of `targets` not loaded yet, at once; the ones that
        failed, as results naming the error."""
        failed: dict[tuple[uuid.UUID, int], PartitionResult] = {}

        async def one(topic_id, index, topic, part):
            try:
                await self.load(group_id, topic_id, topic, part)
            except StateTopicError as e:
                log.warning(
                    "share group %r: reading the state of %s-%d failed: %s",
                    group_id,
                    topic,
                    index,
                    e,
                    extra=fields(group=group_id, topic=topic, partition=index),
                )
                failed[(topic_id, index)] = PartitionResult(topic_id, index, e.code, str(e))

        missing = [t for t in targets if self.share_partition(group_id, t[2], t[3]) is None]
        if missing:
            async with trio.open_nursery() as nursery:
                for t in missing:
                    nursery.start_soon(one, *t)
        return failed

    # --- persistence ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Holds the nursery of background writes, and drops idle sessions, until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                while True:  # sessions of consumers that went away without closing them
                    await trio.sleep(IDLE_CHECK_S)
                    self.evict_idle(trio.current_time())
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await self.persister.aclose()

    async def persist(self, sp: SharePartition) -> None:
        """Until every change made to `sp` so far is written; StateTopicError if a write fails."""
        target = sp.version
        while sp.persisted_version < target:
            if sp.writing is not None:
                await sp.writing.wait()
                continue
            done = sp.writing = trio.Event()
            version = sp.version
            try:
                await self.persister.write(
                    (sp.group_id, sp.topic_id, sp.partition),
                    sp.state_epoch,
                    sp.leader_epoch,
                    sp.start_offset,
                    sp.state_batches(),
                )
                sp.persisted_version = max(sp.persisted_version, version)
            except StateTopicError as e:
                if e.code in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.FENCED_STATE_EPOCH):
                    log.warning(
                        "share group %r: %s: %s; its state is read back at its next use",
                        sp.group_id,
                        sp.name,
                        e,
                        extra=fields(group=sp.group_id, topic=sp.topic, partition=sp.partition),
                    )
                    if self.partitions.get((sp.group_id, sp.topic, sp.partition)) is sp:
                        del self.partitions[(sp.group_id, sp.topic, sp.partition)]
                raise
            finally:
                sp.writing = None
                done.set()

    async def _persist_in_background(self, sp: SharePartition) -> None:
        try:
            await self.persist(sp)
        except StateTopicError as e:
            log.warning(
                "share group %r: writing the state of %s failed (retried at its next change): %s",
                sp.group_id,
                sp.name,
                e,
                extra=fields(group=sp.group_id, topic=sp.topic, partition=sp.partition),
            )

    def _after_change(self, sp: SharePartition) -> None:
        """Hands the records `sp` gave up on to the dead-letter writer, and starts writing its
        state if it changed and no write is under way."""
        if sp.dead_letters:
            entries, sp.dead_letters = sp.dead_letters, []
            if self.dead_letters is not None:
                self.dead_letters.submit(
                    sp.group_id, sp.topic, sp.partition, sp.source_log, entries, lambda offs: self._archived(sp, offs)
                )
            else:
                sp.archived([e[0] for e in entries])
        if sp.dirty and sp.writing is None and self._nursery is not None:
            self._nursery.start_soon(self._persist_in_background, sp)

    def _archived(self, sp: SharePartition, offsets: list[int]) -> None:
        """Dead letters written (or given up on): their records are ARCHIVED, the state written,
        fetches woken (the SPSO may move). Nothing for a share-partition dropped meanwhile."""
        if self.partitions.get((sp.group_id, sp.topic, sp.partition)) is not sp:
            return
        if sp.archived(offsets):
            self._after_change(sp)
            self._changed()

    # --- sessions ----------------------------------------------------------------------------

    def session(self, group_id: str, member_id: str, epoch: int, acknowledging: bool) -> ShareSession:
        """The session a request at `epoch` belongs to (a new one at 0); ShareError otherwise."""
        key = (group_id, member_id)
        now = trio.current_time()
        if epoch == 0:
            if acknowledging:
                raise ShareError(
                    ErrorCode.INVALID_REQUEST,
                    f"share group {group_id!r} member {member_id}: acknowledgements in a request "
                    f"that opens a share session (epoch 0)",
                )
            old = self.sessions.pop(key, None)
            if old is not None:
                self._drop_holds(old)
                self.release_member(old.group_id, old.member_id)
            self.evict_idle(now)
            if len(self.sessions) >= self.max_sessions:
                raise ShareError(
                    ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                    f"share group {group_id!r} member {member_id}: this broker holds "
                    f"{len(self.sessions)} share sessions (group.share.max.share.sessions="
                    f"{self.max_sessions})",
                )
            new = self.sessions[key] = ShareSession(group_id, member_id, last_used=now)
            return new
        s = self.sessions.get(key)
        if s is None:
            raise ShareError(
                ErrorCode.SHARE_SESSION_NOT_FOUND,
                f"share group {group_id!r} member {member_id} has no share session on this broker",
            )
        s.last_used = now
        if epoch != -1:
            if epoch != s.next_epoch:
                raise ShareError(
                    ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                    f"share group {group_id!r} member {member_id}: share session epoch {epoch}, "
                    f"expected {s.next_epoch}",
                )
            s.next_epoch = 1 if epoch == MAX_EPOCH else epoch + 1
        return s

    def evict_idle(self, now: float) -> int:
        """Drops sessions unused for longer than their group's share.session.timeout.ms (their
        consumer is gone: it would have fetched or left); their records come back."""
        idle = [
            s
            for s in self.sessions.values()
            if now - s.last_used > self.group_config(s.group_id, "share.session.timeout.ms") / 1000
        ]
        for s in idle:
            log.info(
                "share group %r: share session of member %s idle for %.0f s: dropped",
                s.group_id,
                s.member_id,
                now - s.last_used,
                extra=fields(group=s.group_id),
            )
            self.close_session(s)
        return len(idle)

    def hold(self, s: ShareSession, key: tuple[uuid.UUID, int]) -> None:
        """`s` fetches partition `key` (topic id, index) from now on."""
        if key not in s.partitions:
            s.partitions[key] = None
            hkey = (s.group_id, *key)
            self.holders[hkey] = self.holders.get(hkey, 0) + 1

    def forget(self, s: ShareSession, key: tuple[uuid.UUID, int]) -> None:
        if key in s.partitions:
            del s.partitions[key]
            self._unhold(s.group_id, key)

    def _unhold(self, group_id: str, key: tuple[uuid.UUID, int]) -> None:
        hkey = (group_id, *key)
        n = self.holders.get(hkey, 0) - 1
        if n > 0:
            self.holders[hkey] = n
        else:
            self.holders.pop(hkey, None)

    def _drop_holds(self, s: ShareSession) -> None:
        for key in s.partitions:
            self._unhold(s.group_id, key)

    def close_session(self, s: ShareSession) -> None:
        if self.sessions.pop((s.group_id, s.member_id), None) is not None:
            self._drop_holds(s)
        self.release_member(s.group_id, s.member_id)
        if self._nursery is not None and not any(g == s.group_id for g, _ in self.sessions):
            self._nursery.start_soon(self._forget_group, s.group_id)

    async def _forget_group(self, group_id: str) -> None:
        """A group with no share session here any more: once its share-partitions are written,
        they are dropped, and read back at their next use (their offsets may be reset
        meanwhile: AlterShareGroupOffsets needs an empty group)."""
        for key, sp in [(k, sp) for k, sp in self.partitions.items() if k[0] == group_id]:
            try:
                await self.persist(sp)
            except StateTopicError as e:
                log.warning(
                    "share group %r: writing the state of %s failed: %s",
                    group_id,
                    sp.name,
                    e,
                    extra=fields(group=group_id, topic=sp.topic, partition=sp.partition),
                )
                continue
            if self.partitions.get(key) is sp and not sp.dirty and not any(g == group_id for g, _ in self.sessions):
                del self.partitions[key]

    def release_member(self, group_id: str, member_id: str) -> None:
        """Records the member holds here become available (its session closed, it left the group)."""
        n = 0
        for (g, _, _), sp in self.partitions.items():
            if g == group_id:
                n += sp.release_member(member_id)
                self._after_change(sp)
        if n:
            log.info(
                "share group %r: %d record(s) of member %s released",
                group_id,
                n,
                member_id,
                extra=fields(group=group_id),
            )
            self._changed()

    # --- acknowledgements -----------------------------------------------------------------

    async def acknowledge(
        self, group_id: str, member_id: str, topic_id: uuid.UUID, topic: str, part, batches, renew_allowed: bool = True
    ) -> tuple[int, str | None]:
        """Applies a partition's acknowledgement batches (all or none), and answers once the
        new state is written: (error code, message)."""
        renewing = any(4 in b.acknowledge_types for b in batches)
        if not renew_allowed and renewing:
            return ErrorCode.INVALID_REQUEST, "acknowledge type 4 (RENEW) needs version 2"
        if renewing and not self.group_config(group_id, "share.renew.acknowledge.enable"):
            return (
                ErrorCode.INVALID_RECORD_STATE,
                f"share group {group_id!r}: RENEW is off (share.renew.acknowledge.enable=false)",
            )
        try:
            sp = await self.load(group_id, topic_id, topic, part)
        except StateTopicError as e:
            return e.code, str(e)
        now = trio.current_time()
        try:
            for b in sorted(batches, key=lambda b: b.first_offset):
                sp.acknowledge(
                    member_id,
                    b.first_offset,
                    b.last_offset,
                    list(b.acknowledge_types),
                    now,
                    release_delay_ms(b),
                    wall_ms(),
                )
        except ShareError as e:
            return e.code, str(e)
        finally:
            self._after_change(sp)
            self._changed()
        try:
            await self.persist(sp)
        except StateTopicError as e:
            return e.code, f"share group {group_id!r}, {sp.name}: the acknowledgement was not written: {e}"
        return ErrorCode.NONE, None

    # --- acquisition --------------------------------------------------------------------------

    def _read_facts(self, sp: SharePartition, lg) -> None:
        """A read-back share-partition: its in-flight records' keys and not-before times, read
        from the log once (whole batches over [SPSO, SPEO), at most the in-flight window)."""
        off = sp.start_offset
        while off < sp.end_offset:
            got = lg.read_batches(off, FACTS_READ_BYTES, sp.end_offset)
            if got is None:
                got = lg.read_batches(off, 1, lg.high_watermark)  # one batch past SPEO
            if got is None:
                break
            data, end = got
            sp.set_facts(*_core.share_record_facts(data, DELIVER_AT_HEADER))
            if end <= off:
                break
            off = end
        sp.needs_facts = False

    def _acquire_one(
        self, sp: SharePartition, part, member_id: str, now: float, max_records: int, max_bytes: int, limit: int
    ) -> tuple[bytes | None, list[tuple[int, int, int]]]:
        """Reads up to `max_records` offsets' batches and acquires up to `limit` records of them
        (below max_records in key order: a fetch's share of the keys; the rest of what was read
        still comes in flight, so the keys behind are seen)."""
        lg = part.log
        sp.move_start(lg.log_start_offset)
        if sp.needs_facts:
            self._read_facts(sp, lg)
        wall = wall_ms()
        first = sp.first_available(now, wall)
        if first is not None:
            bound = sp.end_offset
        else:
            first, bound = sp.end_offset, lg.high_watermark
            if first >= bound or not sp.can_acquire_new():
                return None, []
        # whole batches (a batch the SPEO cuts in two is read whole, and only its offsets below
        # `bound` are acquired), no further than max_records could use: Log.read_batches
        # returns the batches that end below its offset bound, or with max_bytes 1 just the
        # first batch (one batch always comes back whatever its size)
        hw = lg.high_watermark
        got = None
        if first + max_records < hw:
            got = lg.read_batches(first, max_bytes, first + max_records)
            if got is None:  # the first batch reaches past first + max_records
                got = lg.read_batches(first, 1, hw)
        else:
            got = lg.read_batches(first, max_bytes, hw)
        if got is None:
            return None, []
        data, end = got
        # keys and not-before times of the offsets that may come in flight now (read in Rust):
        # at most `limit` new ones, or in key order as many as the in-flight window takes;
        # acquisition stops where they end (an offset without its facts is never taken)
        window = sp.start_offset + sp.max_in_flight - sp.end_offset if sp.key_order else limit
        stop = min(end, bound, sp.end_offset + max(0, window))
        facts = None
        if stop > sp.end_offset:
            facts = _core.share_record_facts(data, DELIVER_AT_HEADER, sp.end_offset, stop)
        acquired = sp.acquire(member_id, first, stop, now, limit, wall, facts)
        return (data, acquired) if acquired else (None, [])

    def acquire(
        self,
        session: ShareSession,
        targets: list[tuple[uuid.UUID, int, str, object]],
        now: float,
        max_records: int,
        max_bytes: int,
    ) -> dict[tuple[uuid.UUID, int], tuple[bytes, list]]:
        out = {}
        for topic_id, index, topic, part in targets:
            if max_records <= 0 or max_bytes <= 0:
                break
            sp = self.share_partition(session.group_id, topic, part)
            if sp is None:  # not loaded (its load failed, or its leader changed since)
                continue
            limit = max_records
            if sp.key_order and sp.keys:
                # a key's records go one at a time: a member taking the head of every key would
                # leave the others idle, so each fetch takes its share of the keys in flight
                members = max(1, self.holders.get((session.group_id, topic_id, index), 1))
                limit = min(max_records, max(1, -(-len(sp.keys) // members)))
            try:
                data, acquired = self._acquire_one(sp, part, session.member_id, now, max_records, max_bytes, limit)
            except Exception as e:  # noqa: BLE001 - a log error on one partition must not fail the others
                log.warning(
                    "share group %r: reading %s at offset %d failed: %s",
                    session.group_id,
                    sp.name,
                    sp.end_offset,
                    e,
                    extra=fields(group=session.group_id, topic=sp.topic, partition=sp.partition, offset=sp.end_offset),
                )
                continue
            finally:
                self._after_change(sp)  # locks that ran out at the delivery limit
            if acquired and data is not None:
                out[(topic_id, index)] = (data, acquired)
                max_records -= sum(last - first + 1 for first, last, _ in acquired)
                max_bytes -= len(data)
        return out

    async def wait(self, group_id: str, parts: list, deadline: float) -> None:
        """Until an HW move on one of `parts`, a record coming back, the next lock expiry on one
        of the group's share-partitions of `parts`, or `deadline`."""
        sps = [self.partitions.get((group_id, p.topic, p.index)) for p in parts]
        locks = [d for sp in sps if sp is not None and (d := sp.next_lock_deadline()) is not None]
        now, wall = trio.current_time(), wall_ms()
        ready = [t for sp in sps if sp is not None and (t := sp.next_ready_time(now, wall)) is not None]
        until = min([deadline, *locks, *ready])
        event = trio.Event()
        self._waiters.add(event)
        for p in parts:
            p.add_waiter(event)
        try:
            with trio.move_on_at(until):
                await event.wait()
        finally:
            self._waiters.discard(event)
            for p in parts:
                p.remove_waiter(event)

    def _changed(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for e in waiters:
            e.set()
