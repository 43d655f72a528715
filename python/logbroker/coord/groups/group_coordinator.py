"""The group coordinator for classic consumer groups (JoinGroup/SyncGroup/Heartbeat/
LeaveGroup) and committed offsets (OffsetCommit/OffsetFetch), persisted in the
compacted internal topic `__consumer_offsets` (formats in offsets_topic.py).

Placement: a group lives on the leader of `__consumer_offsets` partition
partition_for(group_id); this broker coordinates the groups of the partitions it leads.

Time: deadlines (session timeouts, rebalance timeouts, the initial rebalance delay,
pending MEMBER_ID_REQUIRED members) are on trio's clock; `run` sleeps until the
nearest one and is woken early whenever a new, earlier deadline appears.

Durability: an offset commit is answered only after its record is appended to the
offsets partition (and, in a replicated cluster, after the HW covers it). Appends to
one offsets partition are serialised by a lock so commits land in arrival order.
Group metadata (generation, protocol, leader, members with assignments) is written
when a generation becomes Stable or the group becomes Empty, so a restarted broker
restores groups and static members without forcing a rebalance.

Transactional offset commits (TxnOffsetCommit): written as a transactional batch of the
producer (so the transaction's markers reach this partition too) and held as *pending*
per producer id until the transaction coordinator's marker arrives: COMMIT makes them the
group's committed offsets, ABORT drops them (`complete_txn_offsets`). Loading replays the
same rule from the log's records and markers. While a group has pending offsets for a
partition, OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for it.
"""

from __future__ import annotations

import logging
import uuid

import trio

from logbroker import _core
from logbroker.clock import now_ms
from logbroker.common.config import BrokerConfig
from logbroker.coord.groups.consumer_group import ConsumerGroupCoordinator
from logbroker.coord.groups.group import Group, GroupState, JoinResult, Member, SyncResult, Waiter
from logbroker.coord.groups.offsets_topic import (
    OFFSETS_TOPIC,
    SG_TYPE_BY_KIND,
    TYPE_BY_KIND,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetsRecordError,
    group_key,
    group_value,
    offset_key,
    offset_value,
    parse_group_value,
    parse_key,
    parse_offset_value,
    partition_for,
    subscription_topics,
)
from logbroker.coord.groups.share_group import ShareGroupCoordinator
from logbroker.coord.groups.state_topic import coordinator_state
from logbroker.coord.groups.streams_group import StreamsGroupCoordinator
from logbroker.coord.metadata.control import ControllerError
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.groups")


class CoordinatorError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, replicas, controller) -> None:
        self.config = config
        self.replicas = replicas
        self.controller = controller
        self.groups: dict[str, Group] = {}
        self.num_partitions = config.get_int("offsets.topic.num.partitions")
        self.min_session_ms = config.get_int("group.min.session.timeout.ms")
        self.max_session_ms = config.get_int("group.max.session.timeout.ms")
        self.initial_delay_ms = config.get_int("group.initial.rebalance.delay.ms")
        self.max_size = config.get_int("group.max.size")
        self.metadata_max_bytes = config.get_int("offset.metadata.max.bytes")
        self.retention_ms = config.get_int("offsets.retention.minutes") * 60_000
        self.retention_check_ms = config.get_int("offsets.retention.check.interval.ms")
        self._wakeup = trio.Event()
        self._pending_stores: list[Group] = []
        self._append_locks: dict[int, trio.Lock] = {}
        self._led: dict[int, int] = {}  # __consumer_offsets partitions loaded -> their leader epoch
        self._loads_changed = trio.Event()  # set (and replaced) whenever partitions are loaded or unloaded
        # transactional offset commits awaiting their marker: producer id -> group -> offsets
        self.pending_txn: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        self.consumer = ConsumerGroupCoordinator(self)
        self.share = ShareGroupCoordinator(self)
        self.streams = StreamsGroupCoordinator(self)

    # --- start-up -------------------------------------------------------------------

    async def startup(self) -> None:
        """Load every `__consumer_offsets` partition this broker leads, and follow
        leadership from then on (`on_metadata`). The topic itself is created on first use
        (the first FindCoordinator), as Kafka does, so a broker that never sees a group
        never pays for its partitions."""
        await self.on_metadata(self.controller.image)
        self.controller.add_listener(self.on_metadata)

    async def on_metadata(self, image, delta=None) -> None:
        """A group's coordinator is the leader of its `__consumer_offsets` partition: load
        the groups of every partition this broker now leads (new, or led again with another
        leader epoch: its log may have changed meanwhile) from the log, and forget those of
        partitions it no longer leads (their members find the new coordinator through
        FindCoordinator after NOT_COORDINATOR)."""
        topic = image.topics.get(OFFSETS_TOPIC)
        led = (
            {}
            if topic is None
            else {p: ps.leader_epoch for p, ps in topic.partitions.items() if ps.leader == self.config.node_id}
        )
        if topic is not None:
            self.num_partitions = len(topic.partitions)
        lost = [p for p in self._led if led.get(p) != self._led[p]]
        if lost:
            self._unload(lost)
        gained = [p for p, e in led.items() if self._led.get(p) != e]
        if gained:
            await self._load(gained, led)

    async def reload(self) -> None:
        """Forget every group and load them again from the log (what a new coordinator sees)."""
        self._unload(list(self._led))
        await self.on_metadata(self.controller.image)

    def _unload(self, partitions: list[int]) -> None:
        gone = set(partitions)
        for by_group in self.pending_txn.values():
            for g in [g for g in by_group if self.partition_of(g) in gone]:
                del by_group[g]
        for p in partitions:
            self._led.pop(p, None)
        self._loads_changed_now()
        dropped = [g for g in self.groups if self.partition_of(g) in gone]
        for g in dropped:
            del self.groups[g]
        dropped_848 = self.consumer.unload(gone)
        dropped_share = [g for g in self.share.groups if self.partition_of(g) in gone]
        self.share.unload(dropped_share)
        dropped_streams = self.streams.unload(gone)
        log.info(
            "no longer coordinator for %s partition(s) %s: %d group(s) unloaded",
            OFFSETS_TOPIC,
            sorted(partitions),
            len(dropped) + len(dropped_848) + len(dropped_share) + len(dropped_streams),
            extra=fields(topic=OFFSETS_TOPIC),
        )

    def _loads_changed_now(self) -> None:
        ev, self._loads_changed = self._loads_changed, trio.Event()
        ev.set()

    async def wait_loaded(self, group_ids, deadline: float) -> None:
        """Wait (until trio time `deadline` at the latest) while any of `group_ids` is
        coordinated here but its `__consumer_offsets` partition is still being loaded.
        FindCoordinator waits so, rather than name a coordinator that would answer
        COORDINATOR_LOAD_IN_PROGRESS to the group's first request: librdkafka does not
        retry an OffsetCommit refused so (issue 31)."""
        with trio.move_on_at(deadline):
            while any(self.check_coordinator(g) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for g in group_ids if g):
                await self._loads_changed.wait()

    async def ensure_offsets_topic(self) -> None:
        if OFFSETS_TOPIC in self.controller.image.topics:
            return
        try:
            await self.controller.create_topic(
                OFFSETS_TOPIC,
                self.config.get_int("offsets.topic.num.partitions"),
                self.config.get_int("offsets.topic.replication.factor"),
                configs={
                    "cleanup.policy": "compact",
                    "segment.bytes": str(self.config.get_int("offsets.topic.segment.bytes")),
                },
            )
        except ControllerError as e:
            if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
        self.num_partitions = len(self.controller.image.topics[OFFSETS_TOPIC].partitions)

    async def _load(self, indexes: list[int], epochs: dict[int, int]) -> None:
        wanted = set(indexes)
        parts = [p for (t, i), p in self.replicas.partitions.items() if t == OFFSETS_TOPIC and i in wanted]

        def read_all() -> list[tuple[int, list]]:
            # to the log end, not the HW: a new leader's HW lags until its followers fetch,
            # but everything in a leader's log stays (a leader never truncates), including
            # what the previous leader acknowledged
            return [
                (p.index, p.log.read_records_with_markers(p.log.log_start_offset, p.log.log_end_offset)) for p in parts
            ]

        loaded = await trio.to_thread.run_sync(read_all)
        t = trio.current_time()
        n_offsets = 0
        names = {topic.topic_id: name for name, topic in self.controller.image.topics.items()}
        for index, records in loaded:
            for offset, _ts, key, value, producer_id, transactional, marker in records:
                if marker is not None:
                    self.complete_txn_offsets(index, producer_id, marker)
                    continue
                try:
                    if transactional and producer_id >= 0:
                        self._replay_txn_offset(producer_id, key, value)
                    else:
                        n_offsets += self._replay(key, value, t, names)
                except OffsetsRecordError as e:
                    log.error(
                        "%s-%d offset %d: skipping unreadable record: %s",
                        OFFSETS_TOPIC,
                        index,
                        offset,
                        e,
                        extra=fields(topic=OFFSETS_TOPIC, partition=index, offset=offset),
                    )
        consumer_groups = self.consumer.finish_load(t)
        streams_groups = self.streams.finish_load(t)
        for p in parts:
            self._led[p.index] = epochs[p.index]
        self._loads_changed_now()
        log.info(
            "coordinator for %s partition(s) %s: loaded %d committed offset(s), %d consumer group(s) and "
            "%d streams group(s); %d group(s) now",
            OFFSETS_TOPIC,
            _ranges(sorted(p.index for p in parts)),
            n_offsets,
            len(consumer_groups),
            len(streams_groups),
            len(self.groups),
            extra=fields(topic=OFFSETS_TOPIC),
        )

    def _replay_txn_offset(self, producer_id: int, key: bytes | None, value: bytes | None) -> None:
        if key is None or value is None:
            raise OffsetsRecordError("transactional record without a key or value")
        kind, group_id, topic, partition = parse_key(key)
        if kind != "offset":
            raise OffsetsRecordError(f"transactional {kind} record of group {group_id!r}")
        self.pending_txn.setdefault(producer_id, {}).setdefault(group_id, {})[(topic, partition)] = parse_offset_value(
            value
        )

    def complete_txn_offsets(self, index: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of `producer_id` on `__consumer_offsets`-`index`: its
        pending offset commits for the groups of that partition become committed (COMMIT)
        or are dropped (ABORT)."""
        by_group = self.pending_txn.get(producer_id)
        if not by_group:
            return
        for group_id in [g for g in by_group if self.partition_of(g) == index]:
            offsets = by_group.pop(group_id)
            if commit:
                group = self.groups.get(group_id)
                if group is None:
                    group = self.groups[group_id] = Group(group_id, now_ms())
                group.offsets.update(offsets)
        if not by_group:
            del self.pending_txn[producer_id]

    def has_pending_txn_offsets(self, group_id: str, partitions) -> bool:
        wanted = None if partitions is None else set(partitions)
        for by_group in self.pending_txn.values():
            pending = by_group.get(group_id)
            if pending and (wanted is None or not wanted.isdisjoint(pending)):
                return True
        return False

    async def txn_commit_offsets(
        self,
        *,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
    ) -> dict[tuple[str, int], int]:
        """TxnOffsetCommit: offsets as a transactional write of the producer, pending until
        its transaction's marker (see the module doc). Error per partition."""

        def all_(code: int) -> dict[tuple[str, int], int]:
            return {(t, p): code for t, p, *_ in offsets}

        code = self.check_coordinator(group_id)
        if code:
            return all_(code)
        group = self.groups.get(group_id)
        if generation_id >= 0 or member_id:
            # v3+: the member's generation is checked as for OffsetCommit (KIP-447)
            consumer_check = self.member_commit_check(group_id, member_id, generation_id)
            if consumer_check:
                return all_(consumer_check)
            if consumer_check is None:
                err = self._validate_member(group, member_id, group_instance_id)
                if err:
                    return all_(err)
                if generation_id != group.generation_id:
                    return all_(ErrorCode.ILLEGAL_GENERATION)
        results, values, records = self._offset_records(group_id, offsets)
        if records:
            try:
                await self._append(group_id, records, producer=(producer_id, producer_epoch))
            except CoordinatorError as e:
                for k in values:
                    results[k] = e.code
                return results
            self.pending_txn.setdefault(producer_id, {}).setdefault(group_id, {}).update(values)
            for k in values:
                results[k] = ErrorCode.NONE
            log.debug(
                "group %s: %d offset(s) of transactional id %r (producer %d epoch %d) pending",
                group_id,
                len(values),
                transactional_id,
                producer_id,
                producer_epoch,
                extra=fields(group=group_id, transactional_id=transactional_id, producer_id=producer_id),
            )
        return results

    def _replay(self, key: bytes | None, value: bytes | None, t: float, names: dict[uuid.UUID, str]) -> int:
        if key is None:
            raise OffsetsRecordError("record without a key")
        kind, group_id, topic, partition = parse_key(key)
        if kind in TYPE_BY_KIND:  # a KIP-848 consumer group's record (`topic` holds the member id)
            self.consumer.replay(kind, group_id, topic, value, names)
            return 0
        if kind in SG_TYPE_BY_KIND:  # a KIP-1071 streams group's record (`topic` holds the member id)
            self.streams.replay(kind, group_id, topic, value)
            return 0
        group = self.groups.get(group_id)
        if kind == "offset":
            if value is None:
                self._forget_offset(group_id, (topic, partition))
                return 0
            if group is None:
                group = self.groups[group_id] = Group(group_id, now_ms())
            group.offsets[(topic, partition)] = parse_offset_value(value)
            return 1
        if value is None:
            self.groups.pop(group_id, None)
            return 0
        rec = parse_group_value(value)
        if group is None:
            group = self.groups[group_id] = Group(group_id, rec.current_state_timestamp)
        group.members.clear()
        group.static_members.clear()
        group.generation_id = rec.generation
        group.protocol_type = rec.protocol_type or None
        group.protocol_name = rec.protocol
        group.leader_id = rec.leader
        group.state_timestamp = rec.current_state_timestamp
        for m in rec.members:
            member = Member(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.session_timeout,
                m.rebalance_timeout,
                rec.protocol_type,
                [(rec.protocol or "", m.subscription)],
                m.assignment,
                t + m.session_timeout / 1000,
            )
            group.add_member(member)
        group.leader_id = rec.leader if rec.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return 0

    # --- placement ------------------------------------------------------------------

    def group_config(self, group_id: str, key: str):
        """A group-level key (Kafka's GroupConfig: consumer.session.timeout.ms, share.*): the
        group's own value from the metadata image, else the broker's group.* default."""
        return self.config.group_value(self.controller.image.group_configs.get(group_id, {}), key)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def coordinator_for(self, group_id: str):
        """(error, partition) for FindCoordinator and for request validation."""
        index = self.partition_of(group_id)
        code = coordinator_state(
            self.replicas, self.controller.image, self.config.node_id, OFFSETS_TOPIC, index, self._led
        )
        return code, self.replicas.get(OFFSETS_TOPIC, index)

    def coordinator_node(self, group_id: str) -> tuple[int, int]:
        """(partition, leader id or -1) of the group's `__consumer_offsets` partition, from
        the metadata image: the coordinator wherever it is (FindCoordinator)."""
        index = self.partition_of(group_id)
        topic = self.controller.image.topics.get(OFFSETS_TOPIC)
        ps = None if topic is None else topic.partitions.get(index)
        return index, -1 if ps is None else ps.leader

    def check_coordinator(self, group_id: str) -> int:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        return self.coordinator_for(group_id)[0]

    # --- persistence ----------------------------------------------------------------

    async def _append(
        self, group_id: str, records: list[tuple[bytes, bytes | None]], producer: tuple[int, int] | None = None
    ) -> None:
        """Append `records` to the group's partition and wait for the HW. `producer`:
        (producer id, epoch) of a transactional write (TxnOffsetCommit)."""
        index = self.partition_of(group_id)
        part = self.replicas.get(OFFSETS_TOPIC, index)
        if part is None or not part.is_leader:
            raise CoordinatorError(ErrorCode.NOT_COORDINATOR, f"this broker does not lead {OFFSETS_TOPIC}-{index}")
        lock = self._append_locks.setdefault(index, trio.Lock())
        async with lock:
            if producer is None:
                batch = _core.encode_batch([(k, v, 0, []) for k, v in records], base_timestamp=now_ms())
            else:
                batch = _core.encode_batch(
                    [(k, v, 0, []) for k, v in records],
                    base_timestamp=now_ms(),
                    producer_id=producer[0],
                    producer_epoch=producer[1],
                    base_sequence=-1,
                    transactional=True,
                )
            epoch = part.leader_epoch
            try:
                result = await trio.to_thread.run_sync(part.log.append_as_leader, batch, epoch, now_ms())
            except _core.InvalidProducerEpochError as e:
                raise CoordinatorError(ErrorCode.PRODUCER_FENCED, str(e)) from None
            except (_core.LogBrokerError, OSError) as e:
                log.error(
                    "writing %d record(s) of group %s to %s-%d failed: %s",
                    len(records),
                    group_id,
                    OFFSETS_TOPIC,
                    index,
                    e,
                    extra=fields(group=group_id, topic=OFFSETS_TOPIC, partition=index),
                )
                raise CoordinatorError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)) from None
            part.maybe_increment_hw()
        await part.wait_for_hw(result.last_offset + 1, trio.current_time() + 30)

    async def append_records(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> CoordinatorError | None:
        """`_append` for the KIP-848 coordinator (consumer_group.py, which cannot import this
        module): None once committed, else the error."""
        try:
            await self._append(group_id, records)
        except CoordinatorError as e:
            return e
        return None

    def _group_record(self, group: Group) -> GroupRecord:
        return GroupRecord(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=group.leader_id if group.members else None,
            current_state_timestamp=group.state_timestamp,
            members=[
                MemberRecord(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata_for(group.protocol_name) if group.protocol_name else b"",
                    m.assignment,
                )
                for m in group.members.values()
            ],
        )

    async def _store_group(self, group: Group) -> None:
        try:
            await self._append(group.group_id, [(group_key(group.group_id), group_value(self._group_record(group)))])
        except CoordinatorError as e:
            log.error(
                "could not store metadata of group %s (generation %d): %s",
                group.group_id,
                group.generation_id,
                e,
                extra=fields(group=group.group_id),
            )

    def _store_group_soon(self, group: Group) -> None:
        """Queue a group-metadata write for the coordinator task (state changes made
        inside synchronous transitions cannot await the append themselves)."""
        if group not in self._pending_stores:
            self._pending_stores.append(group)
        self.wake()

    # --- timers ---------------------------------------------------------------------

    def wake(self) -> None:
        self._wakeup.set()

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        next_retention = trio.current_time() + self.retention_check_ms / 1000
        task_status.started()
        while True:
            now = trio.current_time()
            self._expire(now)
            await self.consumer.flush()
            await self.streams.flush()
            while self._pending_stores:
                g = self._pending_stores.pop(0)
                await self._store_group(g)
            if now >= next_retention:
                await self._expire_offsets()
                next_retention = now + self.retention_check_ms / 1000
            deadline = min([next_retention, *self._deadlines()])
            self._wakeup = trio.Event()
            with trio.move_on_at(deadline):
                await self._wakeup.wait()

    def _deadlines(self) -> list[float]:
        out = self.consumer.deadlines() + self.share.deadlines() + self.streams.deadlines()
        for g in self.groups.values():
            if g.rebalance_deadline is not None:
                out.append(g.rebalance_deadline)
            if g.sync_deadline is not None:
                out.append(g.sync_deadline)
            out.extend(g.pending_members.values())
            for m in g.members.values():
                if not m.awaiting_join:
                    out.append(m.heartbeat_deadline)
        return out

    def _expire(self, now: float) -> None:
        self.consumer.expire(now)
        self.share.expire(now)
        self.streams.expire(now)
        for group in list(self.groups.values()):
            for mid, deadline in list(group.pending_members.items()):
                if deadline <= now:
                    del group.pending_members[mid]
                    log.info(
                        "group %s: pending member %s did not rejoin within its session timeout",
                        group.group_id,
                        mid,
                        extra=fields(group=group.group_id),
                    )
                    self._maybe_complete_join(group)
            for member in list(group.members.values()):
                if not member.awaiting_join and member.heartbeat_deadline <= now:
                    log.info(
                        "group %s: member %s (instance %s) expired: no heartbeat for session.timeout.ms=%d",
                        group.group_id,
                        member.member_id,
                        member.group_instance_id,
                        member.session_timeout_ms,
                        extra=fields(group=group.group_id),
                    )
                    self._remove_member(group, member.member_id, "session timeout")
            if (
                group.state == GroupState.PREPARING_REBALANCE
                and group.rebalance_deadline is not None
                and group.rebalance_deadline <= now
            ):
                if (
                    getattr(group, "initial_delay", None) is not None
                    and group.initial_delay["new_members"]
                    and group.initial_delay["remaining"] > 0
                ):
                    d = group.initial_delay
                    step = min(self.initial_delay_ms, d["remaining"])
                    d["remaining"] -= step
                    d["new_members"] = False
                    group.rebalance_deadline = now + step / 1000
                else:
                    group.initial_delay = None
                    self._complete_join(group)
            if (
                group.state == GroupState.COMPLETING_REBALANCE
                and group.sync_deadline is not None
                and group.sync_deadline <= now
            ):
                missing = [m.member_id for m in group.members.values() if not m.awaiting_sync]
                log.info(
                    "group %s: generation %d not synced in time; removing %s",
                    group.group_id,
                    group.generation_id,
                    missing,
                    extra=fields(group=group.group_id),
                )
                for mid in missing:
                    self._remove_member(group, mid, "sync timeout", rebalance=False)
                self._prepare_rebalance(group, "members did not sync in time")

    # --- state machine --------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        now = trio.current_time()
        if group.state == GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                if m.awaiting_sync:
                    m.sync_waiter.set(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        group.sync_deadline = None
        if group.state == GroupState.EMPTY and self.initial_delay_ms > 0:
            budget = max(group.max_rebalance_timeout_ms() - self.initial_delay_ms, 0)
            group.initial_delay = {"remaining": budget, "new_members": False}
            group.rebalance_deadline = now + min(self.initial_delay_ms, group.max_rebalance_timeout_ms()) / 1000
        else:
            group.initial_delay = None
            group.rebalance_deadline = now + group.max_rebalance_timeout_ms() / 1000
        log.info(
            "group %s: preparing to rebalance generation %d (%s)",
            group.group_id,
            group.generation_id,
            reason,
            extra=fields(group=group.group_id),
        )
        group.transition(GroupState.PREPARING_REBALANCE, now_ms())
        self.wake()

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            self._prepare_rebalance(group, reason)

    def _maybe_complete_join(self, group: Group) -> None:
        if (
            group.state == GroupState.PREPARING_REBALANCE
            and getattr(group, "initial_delay", None) is None
            and group.all_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        for m in list(group.members.values()):
            if not m.awaiting_join:
                log.info(
                    "group %s: member %s did not rejoin generation %d in time",
                    group.group_id,
                    m.member_id,
                    group.generation_id + 1,
                    extra=fields(group=group.group_id),
                )
                group.remove_member(m.member_id)
        group.rebalance_deadline = None
        group.generation_id += 1
        now = trio.current_time()
        if not group.members:
            group.protocol_name = None
            group.transition(GroupState.EMPTY, now_ms())
            log.info(
                "group %s: generation %d is empty",
                group.group_id,
                group.generation_id,
                extra=fields(group=group.group_id),
            )
            self._store_group_soon(group)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms())
        group.sync_deadline = now + group.max_rebalance_timeout_ms() / 1000
        all_members = [
            (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name)) for m in group.members.values()
        ]
        for m in group.members.values():
            m.heartbeat_deadline = now + m.session_timeout_ms / 1000
            m.is_new = False
            m.join_waiter.set(self._join_result(group, m, all_members if m.member_id == group.leader_id else []))
        log.info(
            "group %s: generation %d with %d member(s), protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
            extra=fields(group=group.group_id),
        )
        self.wake()

    def _join_result(self, group: Group, member: Member, members: list, leader: str | None = None) -> JoinResult:
        return JoinResult(
            ErrorCode.NONE,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            leader if leader is not None else (group.leader_id or ""),
            member.member_id,
            members,
        )

    def _remove_member(self, group: Group, member_id: str, reason: str, rebalance: bool = True) -> None:
        member = group.remove_member(member_id)
        if member is None:
            return
        if member.awaiting_join:
            member.join_waiter.set(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
        if member.awaiting_sync:
            member.sync_waiter.set(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if not rebalance:
            return
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member_id} left ({reason})")
        if group.state == GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group)

    # --- JoinGroup ------------------------------------------------------------------

    async def join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        reason: str | None,
    ) -> JoinResult:
        code = self.check_coordinator(group_id)
        if code:
            return JoinResult(code, member_id=member_id)
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        if self.consumer.drop_empty(group_id):  # an Empty consumer group becomes classic, as in Kafka
            await self.consumer.persist(group_id)
        if group_id in self.consumer.groups or group_id in self.share.groups or group_id in self.streams.groups:
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self.groups[group_id] = Group(group_id, now_ms())
        if not group.supports(protocol_type, protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not member_id:
            return await self._join_new(
                group,
                group_instance_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms,
                protocol_type,
                protocols,
                require_known_member_id,
                reason,
            )
        return await self._join_known(
            group,
            member_id,
            group_instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            protocol_type,
            protocols,
            reason,
        )

    def _new_member_id(self, client_id: str) -> str:
        return f"{client_id}-{uuid.uuid4()}"

    async def _join_new(
        self,
        group,
        instance_id,
        client_id,
        client_host,
        session_ms,
        rebalance_ms,
        ptype,
        protocols,
        require_known,
        reason,
    ) -> JoinResult:
        new_id = self._new_member_id(client_id)
        if instance_id is not None and instance_id in group.static_members:
            return await self._rejoin_static(
                group, instance_id, new_id, client_id, client_host, session_ms, rebalance_ms, protocols, reason
            )
        if instance_id is None and require_known:
            group.pending_members[new_id] = trio.current_time() + session_ms / 1000
            self.wake()
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
        return await self._add_and_join(
            group, new_id, instance_id, client_id, client_host, session_ms, rebalance_ms, ptype, protocols, reason
        )

    async def _add_and_join(
        self, group, member_id, instance_id, client_id, client_host, session_ms, rebalance_ms, ptype, protocols, reason
    ) -> JoinResult:
        if self.max_size > 0 and len(group.members) >= self.max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=member_id)
        member = Member(member_id, instance_id, client_id, client_host, session_ms, rebalance_ms, ptype, protocols)
        member.is_new = True
        member.join_waiter = Waiter()
        member.heartbeat_deadline = trio.current_time() + session_ms / 1000
        group.add_member(member)
        if getattr(group, "initial_delay", None) is not None:
            group.initial_delay["new_members"] = True
        self._maybe_prepare_rebalance(group, f"new member {member_id} joined" + (f" ({reason})" if reason else ""))
        self._maybe_complete_join(group)
        return await member.join_waiter.wait()

    async def _join_known(
        self, group, member_id, instance_id, client_id, client_host, session_ms, rebalance_ms, ptype, protocols, reason
    ) -> JoinResult:
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            return await self._add_and_join(
                group,
                member_id,
                instance_id,
                client_id,
                client_host,
                session_ms,
                rebalance_ms,
                ptype,
                protocols,
                reason,
            )
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
        member = group.members.get(member_id)
        if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        member.heartbeat_deadline = trio.current_time() + session_ms / 1000
        if group.state == GroupState.COMPLETING_REBALANCE and member.matches(protocols):
            # a retried join of this generation: answer as the join phase did
            members = self._members_of(group) if member_id == group.leader_id else []
            return self._join_result(group, member, members)
        if group.state == GroupState.STABLE and member_id != group.leader_id and member.matches(protocols):
            return self._join_result(group, member, [])
        member.protocols = protocols
        member.session_timeout_ms, member.rebalance_timeout_ms = session_ms, rebalance_ms
        member.join_waiter = Waiter()
        self._maybe_prepare_rebalance(group, f"member {member_id} rejoined" + (f" ({reason})" if reason else ""))
        self._maybe_complete_join(group)
        return await member.join_waiter.wait()

    def _members_of(self, group: Group) -> list:
        return [(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name)) for m in group.members.values()]

    async def _rejoin_static(
        self, group, instance_id, new_id, client_id, client_host, session_ms, rebalance_ms, protocols, reason
    ) -> JoinResult:
        old_id = group.static_members[instance_id]
        old_leader = group.leader_id
        old = group.members[old_id]
        if old.awaiting_join:
            old.join_waiter.set(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        if old.awaiting_sync:
            old.sync_waiter.set(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.protocols = protocols
        member.client_id, member.client_host = client_id, client_host
        member.session_timeout_ms, member.rebalance_timeout_ms = session_ms, rebalance_ms
        member.heartbeat_deadline = trio.current_time() + session_ms / 1000
        log.info(
            "group %s: static member %s rejoined as %s (was %s)",
            group.group_id,
            instance_id,
            new_id,
            old_id,
            extra=fields(group=group.group_id),
        )
        if group.state == GroupState.STABLE:
            if group.select_protocol() == group.protocol_name:
                await self._store_group(group)
                # Return the old leader id so that a rejoining leader does not assign again:
                # a Stable group would not hand out a new assignment.
                return self._join_result(group, member, [], leader=old_leader)
            member.join_waiter = Waiter()
            self._prepare_rebalance(group, f"static member {instance_id} rejoined with a different protocol")
            return await member.join_waiter.wait()
        if group.state == GroupState.COMPLETING_REBALANCE:
            member.join_waiter = Waiter()
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
            return await member.join_waiter.wait()
        # PreparingRebalance: take part in the join phase under the new id
        member.join_waiter = Waiter()
        self._maybe_complete_join(group)
        return await member.join_waiter.wait()

    # --- SyncGroup ------------------------------------------------------------------

    async def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        code = self.check_coordinator(group_id)
        if code:
            return SyncResult(code)
        group = self.groups.get(group_id)
        err = self._validate_member(group, member_id, group_instance_id)
        if err:
            return SyncResult(err)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        member.heartbeat_deadline = trio.current_time() + member.session_timeout_ms / 1000
        if group.state == GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state == GroupState.STABLE:
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance
        waiter = member.sync_waiter = Waiter()
        if member_id == group.leader_id:
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.sync_deadline = None
            group.transition(GroupState.STABLE, now_ms())
            for m in group.members.values():
                if m.awaiting_sync:
                    m.sync_waiter.set(
                        SyncResult(ErrorCode.NONE, m.assignment, group.protocol_type, group.protocol_name)
                    )
            log.info(
                "group %s: generation %d is stable",
                group.group_id,
                group.generation_id,
                extra=fields(group=group.group_id),
            )
            self._store_group_soon(group)
        return await waiter.wait()

    def _validate_member(self, group: Group | None, member_id: str, instance_id: str | None) -> int:
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    # --- Heartbeat / LeaveGroup ------------------------------------------------------

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        code = self.check_coordinator(group_id)
        if code:
            return code
        group = self.groups.get(group_id)
        err = self._validate_member(group, member_id, group_instance_id)
        if err:
            return err
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[member_id]
        member.heartbeat_deadline = trio.current_time() + member.session_timeout_ms / 1000
        if group.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> tuple[int, list[int]]:
        code = self.check_coordinator(group_id)
        if code:
            return code, [code] * len(members)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        results = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    results.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                results.append(ErrorCode.NONE)
                self._maybe_complete_join(group)
                continue
            if member_id not in group.members:
                results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s left", group_id, member_id, extra=fields(group=group_id))
            self._remove_member(group, member_id, "LeaveGroup")
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results

    # --- offsets --------------------------------------------------------------------

    def member_commit_check(self, group_id: str, member_id: str, member_epoch: int) -> int | None:
        """The check of a commit by a member of a KIP-848 consumer group or a streams group
        (its epoch); None when the group is neither (the classic generation rules apply)."""
        check = self.consumer.validate_commit(group_id, member_id, member_epoch)
        return self.streams.validate_commit(group_id, member_id, member_epoch) if check is None else check

    async def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: list[tuple[str, int, int, int, str | None]],
    ) -> dict[tuple[str, int], int]:
        """offsets: (topic, partition, offset, leader_epoch, metadata) -> error per partition."""

        def all_(code: int) -> dict[tuple[str, int], int]:
            return {(t, p): code for t, p, *_ in offsets}

        code = self.check_coordinator(group_id)
        if code:
            return all_(code)
        group = self.groups.get(group_id)
        consumer_check = self.member_commit_check(group_id, member_id, generation_id)
        if consumer_check:
            return all_(consumer_check)
        if consumer_check is not None:  # a KIP-848 or streams-group member at its current epoch
            if group is None:
                group = self.groups[group_id] = Group(group_id, now_ms())
        elif generation_id < 0 and not member_id and (group is None or group.state == GroupState.EMPTY):
            if group is None:
                group = self.groups[group_id] = Group(group_id, now_ms())
        else:
            err = self._validate_member(group, member_id, group_instance_id)
            if err:
                return all_(err)
            if group.state == GroupState.COMPLETING_REBALANCE:
                return all_(ErrorCode.REBALANCE_IN_PROGRESS)
            if generation_id != group.generation_id:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            member = group.members[member_id]
            member.heartbeat_deadline = trio.current_time() + member.session_timeout_ms / 1000
        results, values, records = self._offset_records(group_id, offsets)
        if records:
            try:
                await self._append(group_id, records)
            except CoordinatorError as e:
                for k in values:
                    results[k] = e.code
                return results
            group = self.groups.setdefault(group_id, group)
            group.offsets.update(values)
            for k in values:
                results[k] = ErrorCode.NONE
        return results

    def _offset_records(self, group_id: str, offsets: list[tuple[str, int, int, int, str | None]]):
        """The checked offsets of a commit: (errors by partition for those refused — unknown
        partition, metadata too large —, the values to store, their records)."""
        results: dict[tuple[str, int], int] = {}
        values: dict[tuple[str, int], OffsetAndMetadata] = {}
        records = []
        image = self.controller.image
        ts = now_ms()
        for topic, partition, offset, epoch, metadata in offsets:
            t = image.topics.get(topic)
            if t is None or partition not in t.partitions:
                results[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if metadata is not None and len(metadata.encode()) > self.metadata_max_bytes:
                results[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            v = OffsetAndMetadata(offset, epoch, metadata or "", ts)
            values[(topic, partition)] = v
            records.append((offset_key(group_id, topic, partition), offset_value(v)))
        return results, values, records

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None) -> tuple[int, dict]:
        code = self.check_coordinator(group_id)
        if code:
            return code, {}
        group = self.groups.get(group_id)
        committed = group.offsets if group is not None else {}
        if partitions is None:
            return ErrorCode.NONE, dict(committed)
        return ErrorCode.NONE, {k: committed.get(k) for k in partitions}

    async def _expire_offsets(self) -> None:
        """offsets.retention.minutes: offsets of a group that has been Empty that long
        (or, for groups that never had members, offsets not committed that long) go."""
        now = now_ms()
        for group in list(self.groups.values()):
            if group.state != GroupState.EMPTY or not group.offsets:
                if group.state == GroupState.EMPTY and not group.offsets and group.generation_id == 0:
                    self.groups.pop(group.group_id, None)
                continue
            base = group.state_timestamp if group.protocol_type else None
            expired = [
                k
                for k, v in group.offsets.items()
                if now - (base if base is not None else v.commit_timestamp) >= self.retention_ms
            ]
            if not expired:
                continue
            try:
                await self._append(group.group_id, [(offset_key(group.group_id, t, p), None) for t, p in expired])
            except CoordinatorError:
                continue
            for k in expired:
                group.offsets.pop(k, None)
            log.info(
                "group %s: expired %d committed offset(s) (offsets.retention.minutes)",
                group.group_id,
                len(expired),
                extra=fields(group=group.group_id),
            )
            if not group.offsets and not group.members:
                await self._delete_group_records(group)
                self.groups.pop(group.group_id, None)

    async def _delete_group_records(self, group: Group) -> None:
        records = [(offset_key(group.group_id, t, p), None) for (t, p) in group.offsets]
        records.append((group_key(group.group_id), None))
        await self._append(group.group_id, records)

    # --- admin ----------------------------------------------------------------------

    def _subscribed(self, group_id: str, group: Group | None):
        """Kafka's Group.isSubscribedToTopic for OffsetDelete, as a predicate on topic names: a
        KIP-848 group's members' subscriptions (names and regexes); a classic group of protocol
        type "consumer" the topics its members' subscriptions (ConsumerProtocolSubscription)
        name (none while it is Empty), and every topic while its protocol is not chosen yet or a
        subscription does not parse; any other classic group none."""
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            return lambda t: any(m.subscribes(t) for m in cg.members.values())
        if group is None or group.protocol_type != "consumer":
            return lambda t: False
        if not group.members:
            return lambda t: False
        topics: set[str] = set()
        try:
            if group.protocol_name is None:
                raise ValueError("no protocol chosen yet")
            for m in group.members.values():
                topics.update(subscription_topics(m.metadata_for(group.protocol_name)))
        except (KeyError, ValueError):  # OffsetsRecordError, UnicodeDecodeError are ValueErrors
            return lambda t: True
        return topics.__contains__

    async def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete, as Kafka's OffsetMetadataManager.deleteOffsets: (group error, error per
        partition). Group errors: those of the coordinator (NOT_COORDINATOR, loading),
        GROUP_ID_NOT_FOUND (no such group, or a share group), NON_EMPTY_GROUP (a classic group
        with members that does not use the consumer protocol). Each partition of a topic the
        group is subscribed to GROUP_SUBSCRIBED_TO_TOPIC; every other one NONE, its committed
        (and pending transactional) offset removed by a tombstone in `__consumer_offsets`, so
        the deletion holds after a restart or a move of the coordinator."""
        code = self.check_coordinator(group_id)
        if code:
            return code, {}
        group = self.groups.get(group_id)
        if group_id in self.share.groups:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if group_id not in self.consumer.groups:
            if group is None or group.state == GroupState.DEAD:
                return ErrorCode.GROUP_ID_NOT_FOUND, {}
            if group.state != GroupState.EMPTY and group.protocol_type != "consumer":
                return ErrorCode.NON_EMPTY_GROUP, {}
        subscribed = self._subscribed(group_id, group)
        results: dict[tuple[str, int], int] = {}
        gone: list[tuple[str, int]] = []
        for tp in partitions:
            if subscribed(tp[0]):
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if (group is not None and tp in group.offsets) or self.has_pending_txn_offsets(group_id, [tp]):
                if tp not in gone:
                    gone.append(tp)
        if gone:
            try:
                await self._append(group_id, [(offset_key(group_id, t, p), None) for t, p in gone])
            except CoordinatorError as e:
                return e.code, {}
            for tp in gone:
                self._forget_offset(group_id, tp)
            log.info(
                "group %s: deleted the committed offsets of %d partition(s) (OffsetDelete)",
                group_id,
                len(gone),
                extra=fields(group=group_id),
            )
        return ErrorCode.NONE, results

    def _forget_offset(self, group_id: str, tp: tuple[str, int]) -> None:
        """A tombstone of the group's offset of `tp`: the committed offset goes, and so do
        the pending transactional ones (as Kafka replays it)."""
        group = self.groups.get(group_id)
        if group is not None:
            group.offsets.pop(tp, None)
        for by_group in self.pending_txn.values():
            pending = by_group.get(group_id)
            if pending is not None:
                pending.pop(tp, None)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        out = {}
        for gid in group_ids:
            code = self.check_coordinator(gid)
            if code:
                out[gid] = code
                continue
            share = self.share.groups.get(gid)
            if share is not None:
                out[gid] = ErrorCode.NON_EMPTY_GROUP if share.members else ErrorCode.NONE
                if not share.members:
                    del self.share.groups[gid]
                continue
            streams = self.streams.groups.get(gid)
            if streams is not None and streams.members:
                out[gid] = ErrorCode.NON_EMPTY_GROUP
                continue
            if streams is not None:
                self.streams.drop_empty(gid)
                code = await self.streams.persist(gid)
                if code:
                    out[gid] = code
                    continue
            consumer = self.consumer.groups.get(gid)
            if consumer is not None:
                if consumer.members:
                    out[gid] = ErrorCode.NON_EMPTY_GROUP
                    continue
                self.consumer.drop_empty(gid)
                code = await self.consumer.persist(gid)
                if code:
                    out[gid] = code
                    continue
            group = self.groups.get(gid)
            if group is None:
                out[gid] = (
                    ErrorCode.NONE if consumer is not None or streams is not None else ErrorCode.GROUP_ID_NOT_FOUND
                )
            elif group.members or group.state not in (GroupState.EMPTY, GroupState.DEAD):
                out[gid] = ErrorCode.NON_EMPTY_GROUP
            else:
                try:
                    await self._delete_group_records(group)
                except CoordinatorError as e:
                    out[gid] = e.code
                    continue
                group.transition(GroupState.DEAD, now_ms())
                self.groups.pop(gid, None)
                log.info("group %s deleted", gid, extra=fields(group=gid))
                out[gid] = ErrorCode.NONE
        return out


def _ranges(indexes: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5" (log lines about many partitions)."""
    runs: list[list[int]] = []
    for i in indexes:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs) or "none"
