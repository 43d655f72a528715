"""The share coordinator (KIP-932): keeps the persisted state of share-partitions in the
compacted `__share_group_state` topic and serves it to the share-partition leaders
(InitializeShareGroupState 83, ReadShareGroupState 84, WriteShareGroupState 85,
DeleteShareGroupState 86, ReadShareGroupStateSummary 87; handlers/share_state.py).

Placement: a share-partition (group id, topic id, partition) lives on the leader of
`__share_group_state` partition partition_for("groupId:topicId:partition") (FindCoordinator
key type 2); this broker serves the keys of the partitions it leads, read back from the log
when it becomes their leader (state_topic.py). The topic is created on first use.

State per share-partition (`ShareState`, share_state_log.py): the state epoch (bumped when
the group's offsets are reset: InitializeShareGroupState), the leader epoch of the
share-partition leader that last read or wrote it, the start offset (SPSO) and the state
batches of the in-flight offsets above it (delivery state and count). Every change is one
ShareSnapshot record holding the whole new state; it is applied in memory only once the HW
covers it, and changes to one key are serialised by its lock. (Kafka also writes
ShareUpdate records and a snapshot every so many; both are read back here.)

Fencing, as Kafka's: a Read or Write from a leader epoch below the stored one answers
FENCED_LEADER_EPOCH (a deposed share-partition leader), a Write with a state epoch below
the stored one FENCED_STATE_EPOCH (its offsets were reset since), an Initialize whose state
epoch is not above the stored one FENCED_STATE_EPOCH. A Read from a newer leader epoch
records that epoch first. A Read of a share-partition with no state answers state epoch 0,
start offset -1 (uninitialised: the leader starts at share.auto.offset.reset).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid

import trio

from logbroker.clock import now_ms
from logbroker.coord.groups.share_state_log import (
    DELIVERY_STATES,
    SHARE_STATE_TOPIC,
    SNAPSHOT,
    ShareState,
    ShareStateLogError,
    StateBatch,
    combine,
    coordinator_key,
    delivery_complete_count,
    overlap,
    parse_snapshot_value,
    parse_state_key,
    parse_update_value,
    snapshot_value,
    state_key,
)
from logbroker.coord.groups.state_topic import StateTopic, StateTopicError
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.share")

Key = tuple[str, uuid.UUID, int]  # group id, topic id, partition

UNINITIALIZED_START_OFFSET = -1


def _name(key: Key) -> str:
    return f"share group {key[0]!r} topic id {key[1]} partition {key[2]}"


class ShareCoordinator:
    def __init__(self, config, replicas, controller) -> None:
        self.config = config
        self.node_id = config.node_id
        self.topic = StateTopic(
            SHARE_STATE_TOPIC,
            self.node_id,
            replicas,
            controller,
            config.get_int("share.coordinator.state.topic.num.partitions"),
        )
        self.controller = controller
        self.states: dict[Key, ShareState] = {}
        self._locks: dict[Key, trio.Lock] = {}

    # --- placement and loading ---------------------------------------------------------

    async def startup(self) -> None:
        await self.on_metadata(self.controller.image)
        self.controller.add_listener(self.on_metadata)

    async def ensure_state_topic(self) -> None:
        c = self.config
        await self.topic.ensure(
            c.get_int("share.coordinator.state.topic.num.partitions"),
            c.get_int("share.coordinator.state.topic.replication.factor"),
            c.get_int("share.coordinator.state.topic.min.isr"),
            c.get_int("share.coordinator.state.topic.segment.bytes"),
        )

    def coordinator_node(self, key: str) -> tuple[int, int]:
        """(partition, leader id or -1) of a FindCoordinator key "groupId:topicId:partition"."""
        return self.topic.coordinator_node(key)

    def _index(self, key: Key) -> int:
        return self.topic.partition_of(coordinator_key(*key))

    async def on_metadata(self, image, delta=None) -> None:
        lost, gained = self.topic.leadership_changes(image)
        if lost:
            gone = set(lost)
            dropped = [k for k in self.states if self._index(k) in gone]
            for k in dropped:
                del self.states[k]
            log.info(
                "no longer share coordinator for %s partition(s) %s: %d share-partition state(s) unloaded",
                SHARE_STATE_TOPIC,
                sorted(lost),
                len(dropped),
                extra=fields(topic=SHARE_STATE_TOPIC),
            )
        if gained:
            await self._load(gained)

    async def _load(self, epochs: dict[int, int]) -> None:
        found: dict[Key, ShareState | None] = {}
        for index, records in await self.topic.read_all(epochs):
            for offset, _ts, key, value in records:
                try:
                    record_type, group_id, topic_id, partition = parse_state_key(key or b"")
                    k = (group_id, topic_id, partition)
                    if value is None:
                        found[k] = None
                    elif record_type == SNAPSHOT:
                        found[k] = parse_snapshot_value(value)
                    else:
                        u = parse_update_value(value)
                        s = found.get(k)
                        if s is None:
                            log.warning(
                                "%s-%d offset %d: update of %s without a snapshot: skipped",
                                SHARE_STATE_TOPIC,
                                index,
                                offset,
                                _name(k),
                                extra=fields(topic=SHARE_STATE_TOPIC, partition=index, offset=offset, group=group_id),
                            )
                            continue
                        if u.start_offset != -1:
                            s.start_offset = u.start_offset
                        s.leader_epoch = max(s.leader_epoch, u.leader_epoch)
                        s.batches = combine(s.batches, u.batches, s.start_offset)
                        s.delivery_complete_count = u.delivery_complete_count
                except ShareStateLogError as e:
                    log.error(
                        "%s-%d offset %d: skipping unreadable record: %s",
                        SHARE_STATE_TOPIC,
                        index,
                        offset,
                        e,
                        extra=fields(topic=SHARE_STATE_TOPIC, partition=index, offset=offset),
                    )
        loaded = set(epochs)
        for k in [k for k in self.states if self._index(k) in loaded]:
            del self.states[k]
        for k, s in found.items():
            if s is not None:
                self.states[k] = s
        self.topic.mark_loaded(epochs)
        log.info(
            "share coordinator for %s partition(s) %s: %d share-partition state(s) loaded",
            SHARE_STATE_TOPIC,
            sorted(epochs),
            sum(s is not None for s in found.values()),
            extra=fields(topic=SHARE_STATE_TOPIC),
        )

    # --- persistence ---------------------------------------------------------------------

    def _check(self, key: Key) -> int:
        group_id, _topic_id, partition = key
        if not group_id:
            raise StateTopicError(ErrorCode.INVALID_REQUEST, "empty group id")
        if partition < 0:
            raise StateTopicError(ErrorCode.INVALID_REQUEST, f"{_name(key)}: bad partition")
        index = self._index(key)
        self.topic.check_loaded(index, _name(key))
        return index

    def _lock(self, key: Key) -> trio.Lock:
        return self._locks.setdefault(key, trio.Lock())

    async def _put(self, index: int, key: Key, new: ShareState | None) -> None:
        if new is None:
            await self.topic.append(index, state_key(*key), None, f"the deletion of {_name(key)}")
            self.states.pop(key, None)
            return
        new.delivery_complete_count = delivery_complete_count(new.batches)
        await self.topic.append(index, state_key(*key), snapshot_value(new), f"the state of {_name(key)}")
        self.states[key] = new

    def _new_state(self, key: Key, **fields) -> ShareState:
        """The key's next state (snapshot epoch + 1, written now) with `fields` changed; a
        blank uninitialised state if it has none."""
        old = self.states.get(key)
        ms = now_ms()
        if old is None:
            old = ShareState(
                snapshot_epoch=-1,
                state_epoch=0,
                leader_epoch=-1,
                start_offset=UNINITIALIZED_START_OFFSET,
                create_ms=ms,
                write_ms=ms,
                batches=[],
            )
        changes: dict = {"snapshot_epoch": old.snapshot_epoch + 1, "write_ms": ms, "batches": list(old.batches)}
        changes.update(fields)
        return dataclasses.replace(old, **changes)

    def _check_leader_epoch(self, key: Key, leader_epoch: int) -> None:
        s = self.states.get(key)
        if s is not None and leader_epoch != -1 and leader_epoch < s.leader_epoch:
            raise StateTopicError(
                ErrorCode.FENCED_LEADER_EPOCH,
                f"{_name(key)}: leader epoch {leader_epoch} is older than {s.leader_epoch}",
            )

    # --- the APIs (one share-partition each; StateTopicError names the error) ---------------

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> None:
        index = self._check(key)
        async with self._lock(key):
            s = self.states.get(key)
            if s is not None and state_epoch <= s.state_epoch:
                raise StateTopicError(
                    ErrorCode.FENCED_STATE_EPOCH,
                    f"{_name(key)}: state epoch {state_epoch} is not above {s.state_epoch}",
                )
            await self._put(
                index, key, self._new_state(key, state_epoch=state_epoch, start_offset=start_offset, batches=[])
            )
        log.info(
            "%s: initialised at offset %d, state epoch %d",
            _name(key),
            start_offset,
            state_epoch,
            extra=fields(group=key[0], offset=start_offset),
        )

    async def read(self, key: Key, leader_epoch: int) -> ShareState | None:
        """The state (None: none stored), after recording a newer `leader_epoch`."""
        index = self._check(key)
        async with self._lock(key):
            self._check_leader_epoch(key, leader_epoch)
            s = self.states.get(key)
            if s is not None and leader_epoch > s.leader_epoch:
                await self._put(index, key, self._new_state(key, leader_epoch=leader_epoch))
            return self.states.get(key)

    async def write(
        self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int, batches: list[StateBatch]
    ) -> None:
        index = self._check(key)
        bad = [
            b
            for b in batches
            if b.last_offset < b.first_offset
            or b.first_offset < 0
            or b.delivery_state not in DELIVERY_STATES
            or b.delivery_count < 0
        ]
        if bad or overlap(batches) is not None:
            raise StateTopicError(
                ErrorCode.INVALID_REQUEST, f"{_name(key)}: bad state batch {bad[0] if bad else overlap(batches)}"
            )
        async with self._lock(key):
            s = self.states.get(key)
            self._check_leader_epoch(key, leader_epoch)
            if s is not None and state_epoch < s.state_epoch:
                raise StateTopicError(
                    ErrorCode.FENCED_STATE_EPOCH,
                    f"{_name(key)}: state epoch {state_epoch} is older than {s.state_epoch}",
                )
            start = start_offset if start_offset != -1 else (s.start_offset if s is not None else -1)
            new = self._new_state(
                key, start_offset=start, batches=combine([] if s is None else s.batches, batches, start)
            )
            if s is None:
                new.state_epoch = state_epoch
            if leader_epoch != -1:
                new.leader_epoch = max(new.leader_epoch, leader_epoch)
            await self._put(index, key, new)

    async def delete(self, key: Key) -> None:
        index = self._check(key)
        async with self._lock(key):
            if key in self.states:
                await self._put(index, key, None)
                log.info("%s: state deleted", _name(key), extra=fields(group=key[0]))

    async def read_summary(self, key: Key, leader_epoch: int) -> ShareState | None:
        self._check(key)
        self._check_leader_epoch(key, leader_epoch)
        return self.states.get(key)
