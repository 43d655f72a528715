"""KIP-1071 streams groups: StreamsGroupHeartbeat and StreamsGroupDescribe.

A Kafka Streams application (group.protocol=streams) is a streams group: the broker owns the
topology's configuration and the task assignment, as it owns the partition assignment of a
KIP-848 consumer group (consumer_group.py, whose shape this follows).

The topology. The first member to join (member epoch 0) sends the application's topology:
its subtopologies with their source, repartition and changelog topics. It becomes the group's
topology (`streams_topology.validate`, STREAMS_INVALID_TOPOLOGY when refused); a member that
joins with an older topology epoch keeps working and is told STALE_TOPOLOGY; a different
topology at the same epoch is INVALID_REQUEST, as Kafka's ("Topology updates are not supported
yet"). The topology is configured against the cluster's topics (`streams_topology.configure`)
whenever it or the metadata image changed: the number of tasks of each subtopology, the
partition counts of the internal (repartition and changelog) topics. Internal topics that do
not exist are created by the heartbeat's handler (handlers/streams_groups.py) through the
controller, and members are told MISSING_INTERNAL_TOPICS (or MISSING_SOURCE_TOPICS,
INCORRECTLY_PARTITIONED_TOPICS) meanwhile, with no tasks.

Epochs and the target assignment. The group epoch is bumped when membership or a member's
metadata (process id, rack, client tags, instance id, endpoint, topology epoch) changes, when
the configured task layout changes, and when the number of standby replicas changes. A new
group waits `streams.initial.rebalance.delay.ms` after its first member joined before its
first assignment (status ASSIGNMENT_DELAYED meanwhile), so the members started together are
assigned together. At a group epoch above the assignment epoch the task assignor
(streams_assignor.py: active tasks balanced over processes then members, sticky, standby
tasks for stateful subtopologies off the active task's process) computes each member's
target, and the assignment epoch becomes the group epoch.

Reconciliation, as Kafka's streams CurrentAssignmentBuilder: a member first revokes what its
target no longer holds (state UNREVOKED_TASKS, its epoch kept) until a heartbeat reports it
no longer owns those tasks; then its epoch becomes the assignment epoch and it receives every
target task that is released: an active task no other member holds, and no standby or warm-up
copy of it on the member's own process; a standby or warm-up task not held on its process in
any role. Tasks not yet released come on later heartbeats (UNRELEASED_TASKS). So a task is
never active on two members at once, and a process never holds two copies of one task. Who
holds what is kept as an index (`_Owners`), updated per member change: a heartbeat costs the
size of that member's assignment, not the group's.

Members are fenced (removed) after `streams.session.timeout.ms` without a heartbeat, or when
they do not revoke within their rebalance timeout. Member epochs: 0 joins, -1 leaves, -2 leaves
temporarily (a static member, `group.instance.id`, that will come back and take over its
tasks). Offset commits (OffsetCommit, TxnOffsetCommit with exactly-once) from a member are
checked against its epoch (`validate_commit`).

Persistence, as Kafka's (and as consumer_group.py's): the group lives in `__consumer_offsets` as
Kafka 4.4's streams-group records (formats in offsets_topic.py): the group epoch with the
metadata hash, the validated topology epoch and the number of standby replicas the assignment
used; the topology; each member's metadata; the target assignment (its epoch and each member's
tasks); each member's current assignment (epoch, previous epoch, state, tasks by role assigned
and pending revocation, each active task's assignment epoch). After each change (a heartbeat,
an expired session, the end of the initial rebalance delay) only the records that changed are
written — the difference between the group's state and what its records already say (`_image`
/ `persist`; the mechanism, shared with consumer groups, in group_records.py) — in one append,
and the heartbeat is answered once that append is committed. A member leaving writes
tombstones for its records; a group left empty stays, Empty, with its group-level records and
its topology, until DeleteGroups tombstones them too.

A new coordinator (after a failover, or the same broker after a restart) replays those records
when it loads the partition (`replay`, then `finish_load`): group epoch, topology, target
assignment, members with their epochs, states and tasks come back, and each member gets a fresh
session timeout. Members keep heartbeating at their epoch with their tasks, and nothing
rebalances. Not in the records, and rebuilt on load: the owners index and the static members
(from the members' current assignments); the configured topology (configured again against the
cluster's topics, as Kafka recomputes it; the group epoch is bumped only when the metadata hash
of those topics changed since, as Kafka's); the initial rebalance delay (a group loaded while
it ran — members, a ready topology, no task in any target — ends it at load and is assigned at
its next heartbeat); `shutdown_by` (a member's SHUTDOWN_APPLICATION request, in memory in Kafka
too) and the internal topics being created (asked again) start empty.

The streams-group APIs are served while the feature streams.version is at least 1, as Kafka
4.2+ (finalized 1 on a new cluster; handlers/streams_groups.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
import time
from collections import Counter
from collections.abc import Callable

import trio

from logbroker.coord.groups import streams_assignor, streams_topology
from logbroker.coord.groups.group_records import GroupRecords, Image
from logbroker.coord.groups.offsets_topic import (
    SG_CURRENT_ASSIGNMENT,
    SG_MEMBER_METADATA,
    SG_MEMBER_STABLE,
    SG_MEMBER_UNRELEASED_TASKS,
    SG_MEMBER_UNREVOKED_TASKS,
    SG_METADATA,
    SG_NUM_STANDBY_REPLICAS,
    SG_TARGET_MEMBER,
    SG_TARGET_METADATA,
    SG_TOPOLOGY,
    StreamsCurrentAssignmentRecord,
    StreamsGroupMetadataRecord,
    StreamsMemberRecord,
    StreamsTargetRecord,
    parse_streams_current_assignment_value,
    parse_streams_group_metadata_value,
    parse_streams_group_topology_value,
    parse_streams_member_metadata_value,
    parse_streams_target_member_value,
    parse_streams_target_metadata_value,
    streams_current_assignment_value,
    streams_group_key,
    streams_group_metadata_value,
    streams_group_topology_value,
    streams_member_metadata_value,
    streams_target_member_value,
    streams_target_metadata_value,
)
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.groups")

TaskId = tuple[str, int]

# StreamsGroupHeartbeatResponse Status codes
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5

STABLE, UNREVOKED_TASKS, UNRELEASED_TASKS = "STABLE", "UNREVOKED_TASKS", "UNRELEASED_TASKS"
LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH = -1, -2
DEFAULT_REBALANCE_TIMEOUT_MS = 300_000

# the member states as StreamsGroupCurrentMemberAssignmentValue.State writes them
_STATE_BYTE = {
    STABLE: SG_MEMBER_STABLE,
    UNREVOKED_TASKS: SG_MEMBER_UNREVOKED_TASKS,
    UNRELEASED_TASKS: SG_MEMBER_UNRELEASED_TASKS,
}
_STATE_OF_BYTE = {v: k for k, v in _STATE_BYTE.items()}


@dataclasses.dataclass(frozen=True)
class Tasks:
    """A member's tasks by role: active, standby and warm-up."""

    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.active or self.standby or self.warmup)

    def contains_any(self, other: Tasks) -> bool:
        return bool(self.active & other.active or self.standby & other.standby or self.warmup & other.warmup)

    def all(self) -> frozenset[TaskId]:
        return self.active | self.standby | self.warmup


EMPTY = Tasks()


class StreamsMember:
    def __init__(self, member_id: str, client_id: str, client_host: str) -> None:
        self.member_id = member_id
        self.client_id = client_id
        self.client_host = client_host
        self.instance_id: str | None = None
        self.rack_id: str | None = None
        self.process_id = ""
        self.user_endpoint: tuple[str, int] | None = None
        self.client_tags: dict[str, str] = {}
        self.topology_epoch = -1
        self.rebalance_timeout_ms = DEFAULT_REBALANCE_TIMEOUT_MS
        self.member_epoch = 0
        self.previous_epoch = -1
        self.state = STABLE
        self.assigned = EMPTY
        self.pending_revocation = EMPTY
        self.session_deadline = 0.0
        self.revocation_deadline: float | None = None
        self.left_temporarily = False
        self.last_sent: Tasks | None = None
        # the member epoch each active task (assigned or pending revocation) was given at, as
        # Kafka keeps it (StreamsGroupCurrentMemberAssignmentValue's AssignmentEpochs)
        self.active_epochs: dict[TaskId, int] = {}

    def metadata(self) -> tuple:
        """What, when it changes, bumps the group epoch."""
        return (
            self.instance_id,
            self.rack_id,
            self.process_id,
            self.user_endpoint,
            tuple(sorted(self.client_tags.items())),
            self.topology_epoch,
        )


class _Owners:
    """Who currently holds each task: the active owner (member id) and, per task, the processes
    holding a standby or warm-up copy. A member's contribution is its assigned tasks plus those
    pending revocation (still running on it)."""

    def __init__(self) -> None:
        self.active: dict[TaskId, str] = {}
        self.standby: dict[TaskId, Counter[str]] = {}
        self.warmup: dict[TaskId, Counter[str]] = {}

    def _apply(self, m: StreamsMember, sign: int) -> None:
        for t in m.assigned.active | m.pending_revocation.active:
            if sign > 0:
                self.active[t] = m.member_id
            elif self.active.get(t) == m.member_id:
                del self.active[t]
        for held, index in (
            (m.assigned.standby | m.pending_revocation.standby, self.standby),
            (m.assigned.warmup | m.pending_revocation.warmup, self.warmup),
        ):
            for t in held:
                c = index.setdefault(t, Counter())
                c[m.process_id] += sign
                if c[m.process_id] <= 0:
                    del c[m.process_id]
                if not c:
                    del index[t]

    def remove(self, m: StreamsMember) -> None:
        self._apply(m, -1)

    def add(self, m: StreamsMember) -> None:
        self._apply(m, +1)


class StreamsGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.topology: streams_topology.Topology | None = None
        self.configured: streams_topology.Configured | None = None
        self.configured_for: tuple[object, int] | None = None  # (image, topology epoch) it was configured at
        self.validated_epoch = -1
        self.standby_replicas = 0
        self.members: dict[str, StreamsMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, Tasks] = {}
        self.owners = _Owners()
        self.shutdown_by: str | None = None
        self.endpoint_epoch = 0
        self.delay_until: float | None = None
        self.creating: set[str] = set()  # internal topics asked of the controller, not yet in the image
        self.metadata_hash = 0  # of the topics the topology was last configured against (`_metadata_hash`)
        self.assignment_timestamp = 0  # ms, when the target assignment was last computed

    @property
    def state(self) -> str:
        """Kafka's StreamsGroupState names (ListGroups, StreamsGroupDescribe)."""
        if not self.members:
            return "Empty"
        if self.configured is None or self.configured.subtopologies is None:
            return "NotReady"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != STABLE:
                return "Reconciling"
        return "Stable"

    def set_tasks(self, m: StreamsMember, assigned: Tasks, pending: Tasks) -> None:
        """The one way a member's tasks change: the owners index follows."""
        self.owners.remove(m)
        m.assigned, m.pending_revocation = assigned, pending
        m.active_epochs = {t: m.active_epochs.get(t, m.member_epoch) for t in assigned.active | pending.active}
        self.owners.add(m)


def _task_ids(lists) -> frozenset[TaskId]:
    return frozenset((t.subtopology_id, p) for t in lists or () for p in t.partitions)


class StreamsGroupCoordinator(GroupRecords):
    """KIP-1071 group logic; `GroupCoordinator` owns it, its timers and the other group types.
    Its records in __consumer_offsets: `GroupRecords` (group_records.py)."""

    GROUP_TYPE = "streams group"
    # the order records go out in one append (as consumer_group.py's): a leaving member's
    # tombstones first, then new values, and the group-level tombstones of a deleted group last
    TOMBSTONE_FIRST = [SG_CURRENT_ASSIGNMENT, SG_TARGET_MEMBER, SG_MEMBER_METADATA]
    VALUES = [SG_TOPOLOGY, SG_MEMBER_METADATA, SG_METADATA, SG_TARGET_MEMBER, SG_TARGET_METADATA, SG_CURRENT_ASSIGNMENT]
    TOMBSTONE_LAST = [SG_TARGET_METADATA, SG_TOPOLOGY, SG_METADATA]
    groups: dict[str, StreamsGroup]

    def __init__(self, owner) -> None:
        super().__init__(owner)
        self.max_size = owner.config.get_int("group.streams.max.size")
        self.max_standby = owner.config.get_int("group.streams.max.standby.replicas")

    # --- configs --------------------------------------------------------------------

    def session_timeout_ms(self, group_id: str) -> int:
        return self.owner.group_config(group_id, "streams.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.owner.group_config(group_id, "streams.heartbeat.interval.ms")

    def _standby_replicas(self, group_id: str) -> int:
        return min(self.owner.group_config(group_id, "streams.num.standby.replicas"), self.max_standby)

    # --- epochs, topology, target ----------------------------------------------------

    def _bump(self, group: StreamsGroup, reason: str) -> None:
        group.group_epoch += 1
        log.info(
            "streams group %s: epoch %d (%s)",
            group.group_id,
            group.group_epoch,
            reason,
            extra=fields(group=group.group_id),
        )

    def _configure(self, group: StreamsGroup, loading: bool = False) -> None:
        """(Re)configures the topology when it or the metadata image changed since; bumps the
        group epoch when the task layout changed (`loading`: when the topics changed since the
        group's records were written)."""
        if group.topology is None:
            return
        image = self.owner.controller.image
        if group.configured_for == (image, group.topology.epoch):
            return
        topics = image.topics

        def partitions(name: str) -> int | None:
            t = topics.get(name)
            return None if t is None else len(t.partitions)

        before = group.configured.subtopologies if group.configured is not None else None
        group.configured = streams_topology.configure(group.topology, partitions, topics.keys())
        group.configured_for = (image, group.topology.epoch)
        group.creating &= set(group.configured.internal_topics_to_create)
        validated = group.topology.epoch if group.configured.subtopologies is not None else -1
        digest = self._metadata_hash(group, partitions, topics.keys())
        # loaded from its records, the group does not know its last configuration: the hash of
        # the topics it was configured against tells whether it still holds
        changed = digest != group.metadata_hash if loading else group.configured.subtopologies != before
        group.metadata_hash = digest
        if changed or validated != group.validated_epoch:
            group.validated_epoch = validated
            self._bump(group, "topology configured" if validated >= 0 else "topology not ready")

    @staticmethod
    def _metadata_hash(group: StreamsGroup, partitions, names) -> int:
        """StreamsGroupMetadataValue.MetadataHash, logbroker's own (Kafka hashes each topic's id,
        name, partitions and racks with its own function; the value is only compared with what
        this coordinator computes): a signed 64-bit hash of the name and partition count (-1:
        missing) of every topic the topology reads or writes, and of the topics its source
        regexes match."""
        topology = group.topology
        wanted: set[str] = set()
        regexes = []
        for s in topology.subtopologies:
            wanted.update(s.source_topics, s.repartition_sink_topics)
            wanted.update(t.name for t in s.state_changelog_topics + s.repartition_source_topics)
            regexes.extend(s.source_topic_regex)
        for rx in regexes:
            try:
                pattern = re.compile(rx)
            except re.error:
                continue
            wanted.update(n for n in names if pattern.fullmatch(n))
        h = hashlib.blake2b(digest_size=8)
        for name in sorted(wanted):
            n = partitions(name)
            h.update(f"{name}\0{-1 if n is None else n}\0".encode())
        return int.from_bytes(h.digest(), "big", signed=True)

    def _compute_target(self, group: StreamsGroup, now: float) -> None:
        """The target assignment at the group epoch, when it is newer than the assignment's.
        While a new group's initial rebalance delay runs, or its topology is not ready, every
        member's target is empty (members still move to the group epoch: a member is never
        left at epoch 0, which means joining); the end of the delay bumps the group epoch."""
        if group.delay_until is not None and now >= group.delay_until:
            group.delay_until = None
            self._bump(group, "streams.initial.rebalance.delay.ms is over")
        if group.assignment_epoch >= group.group_epoch:
            return
        configured = group.configured.subtopologies if group.configured is not None else None
        if configured is None or group.delay_until is not None:
            group.target = {mid: EMPTY for mid in group.members}
        else:
            specs = {}
            for mid, m in sorted(group.members.items()):
                prev = group.target.get(mid, EMPTY)
                specs[mid] = streams_assignor.MemberSpec(
                    process_id=m.process_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    client_tags=dict(m.client_tags),
                    active=prev.active,
                    standby=prev.standby,
                    warmup=prev.warmup,
                )
            subtopologies = {
                sid: streams_assignor.Subtopology(num_tasks=s.num_tasks, stateful=s.stateful)
                for sid, s in configured.items()
            }
            out = streams_assignor.assign(specs, subtopologies, group.standby_replicas)
            group.target = {
                mid: Tasks(out[mid].active, out[mid].standby, out[mid].warmup) if mid in out else EMPTY
                for mid in group.members
            }
        group.assignment_epoch = group.group_epoch
        group.assignment_timestamp = int(time.time() * 1000)
        self.owner.wake()

    def _unreleased(self, group: StreamsGroup, m: StreamsMember, role: str, t: TaskId) -> bool:
        owners = group.owners
        here = m.process_id
        if role == "active":
            if t in owners.active:
                return True
        else:
            holder = owners.active.get(t)
            if holder is not None and group.members[holder].process_id == here:
                return True
        return here in owners.standby.get(t, ()) or here in owners.warmup.get(t, ())

    def _next(self, group: StreamsGroup, m: StreamsMember, epoch: int, owned: Tasks | None, now: float) -> None:
        target = group.target.get(m.member_id, EMPTY)
        kept, revoke, add = {}, {}, {}
        unreleased = False
        for role in ("active", "standby", "warmup"):
            have, want = getattr(m.assigned, role), getattr(target, role)
            kept[role] = have & want
            revoke[role] = have - want
            wanted = want - kept[role]
            free = frozenset(t for t in wanted if not self._unreleased(group, m, role, t))
            unreleased |= len(free) < len(wanted)
            add[role] = free
        revoking = Tasks(**revoke)
        keeping = Tasks(**kept)
        if revoking and (owned is None or owned.contains_any(revoking)):
            m.state = UNREVOKED_TASKS
            if m.member_epoch != epoch:
                m.previous_epoch, m.member_epoch = m.member_epoch, epoch
            group.set_tasks(m, keeping, revoking)
            m.revocation_deadline = now + m.rebalance_timeout_ms / 1000
            self.owner.wake()
            return
        adding = Tasks(**add)
        m.state = UNRELEASED_TASKS if unreleased else STABLE
        if m.member_epoch != group.assignment_epoch:
            m.previous_epoch, m.member_epoch = m.member_epoch, group.assignment_epoch
        group.set_tasks(
            m,
            Tasks(keeping.active | adding.active, keeping.standby | adding.standby, keeping.warmup | adding.warmup),
            EMPTY,
        )
        m.revocation_deadline = None

    def _reconcile(self, group: StreamsGroup, m: StreamsMember, owned: Tasks | None, now: float) -> None:
        """One step of Kafka's streams CurrentAssignmentBuilder for member `m`."""
        if m.state == STABLE:
            if m.member_epoch != group.assignment_epoch:
                self._next(group, m, m.member_epoch, owned, now)
        elif m.state == UNREVOKED_TASKS:
            if owned is None or owned.contains_any(m.pending_revocation):
                return
            self._next(group, m, m.member_epoch + 1, owned, now)
        else:  # UNRELEASED_TASKS: what was held elsewhere may be free now
            self._next(group, m, m.member_epoch, owned, now)

    def _remove(self, group: StreamsGroup, member_id: str, reason: str) -> None:
        m = group.members.pop(member_id, None)
        if m is None:
            return
        group.owners.remove(m)
        if m.instance_id is not None and group.static_members.get(m.instance_id) == member_id:
            del group.static_members[m.instance_id]
        group.target.pop(member_id, None)
        if group.shutdown_by == member_id and not group.members:
            group.shutdown_by = None
        log.info(
            "streams group %s: member %s removed (%s)",
            group.group_id,
            member_id,
            reason,
            extra=fields(group=group.group_id),
        )
        if group.members:
            self._bump(group, f"member {member_id} left")
        else:  # an emptied group stays, Empty, with its topology, until DeleteGroups
            group.shutdown_by = None
            group.group_epoch += 1
        self._compute_target(group, trio.current_time())
        self.dirty.add(group.group_id)

    def drop_empty(self, group_id: str) -> bool:
        """Removes an Empty group (DeleteGroups); its records are tombstoned by the next
        `persist`. False when it does not exist or has members."""
        group = self.groups.get(group_id)
        if group is None or group.members:
            return False
        del self.groups[group_id]
        self.dirty.add(group_id)
        log.info("streams group %s: empty group removed", group_id, extra=fields(group=group_id))
        return True

    # --- heartbeat ------------------------------------------------------------------

    async def heartbeat(self, req, version: int, client_id: str, client_host: str) -> dict:
        """StreamsGroupHeartbeat: {"error", "message", "member_id", "member_epoch",
        "heartbeat_interval_ms", "assignment" (Tasks, when sent), "status" [(code, detail)],
        "endpoint_epoch", "create" {internal topic: TopicInfo}}. The state change, then its
        records (only what changed) appended to __consumer_offsets; the answer once they are
        committed. A failed append answers its error (NOT_COORDINATOR when the partition moved,
        ...): the member retries at the same epoch."""
        return await self._answer_when_written(req.group_id, self._heartbeat(req, version, client_id, client_host))

    def _heartbeat(self, req, version: int, client_id: str, client_host: str) -> dict:
        owner = self.owner
        gid = req.group_id
        code = owner.check_coordinator(gid)
        if code:
            return {"error": code}
        refused = self._invalid(req)
        if refused:
            return {"error": ErrorCode.INVALID_REQUEST, "message": refused}
        other = self._other_type(gid)
        if other:
            return {"error": ErrorCode.GROUP_ID_NOT_FOUND, "message": f"group {gid} is a {other} group"}
        now = trio.current_time()
        group = self.groups.get(gid)
        epoch, member_id = req.member_epoch, req.member_id
        owned = self._owned(req)
        if epoch == 0:
            topology = streams_topology.from_request(req.topology)
            try:
                streams_topology.validate(topology)
            except streams_topology.InvalidTopology as e:
                return {"error": ErrorCode.STREAMS_INVALID_TOPOLOGY, "message": str(e)}
            if group is not None and group.topology is not None:
                if topology.epoch == group.topology.epoch and topology != group.topology:
                    return {"error": ErrorCode.INVALID_REQUEST, "message": "Topology updates are not supported yet."}
            if group is None:
                group = self.groups[gid] = StreamsGroup(gid)
            if len(group.members) >= self.max_size and member_id not in group.members:
                return {
                    "error": ErrorCode.GROUP_MAX_SIZE_REACHED,
                    "message": f"streams group {gid} has {len(group.members)} members (group.streams.max.size)",
                }
            if group.topology is None:
                group.topology = topology
                log.info(
                    "streams group %s: topology of epoch %d set by member %s (%d subtopologies)",
                    gid,
                    topology.epoch,
                    member_id,
                    len(topology.subtopologies),
                    extra=fields(group=gid),
                )
            known = member_id in group.members  # a rejoin (not a static member taking over a place)
            m, joined = self._join(group, req, member_id, client_id, client_host, now)
            if isinstance(m, dict):
                return m
            m.topology_epoch = topology.epoch
        elif epoch in (LEAVE_GROUP_EPOCH, LEAVE_GROUP_STATIC_EPOCH):
            if group is None or member_id not in group.members:
                return {"error": ErrorCode.UNKNOWN_MEMBER_ID, "message": f"member {member_id} is not in group {gid}"}
            m = group.members[member_id]
            if epoch == LEAVE_GROUP_STATIC_EPOCH and m.instance_id is not None:
                m.left_temporarily = True
                m.session_deadline = now + self.session_timeout_ms(gid) / 1000
                owner.wake()
            else:
                self._remove(group, member_id, "left the group")
            return {"error": ErrorCode.NONE, "member_id": member_id, "member_epoch": epoch}
        else:
            m = group.members.get(member_id) if group is not None else None
            if m is None:
                return {"error": ErrorCode.UNKNOWN_MEMBER_ID, "message": f"member {member_id} is not in group {gid}"}
            if epoch != m.member_epoch and not (
                epoch == m.previous_epoch and owned is not None and owned.all() <= m.assigned.all()
            ):
                return {
                    "error": ErrorCode.FENCED_MEMBER_EPOCH,
                    "message": f"member {member_id} sent epoch {epoch}, its epoch is {m.member_epoch}",
                }
            joined = known = False
        before = m.metadata()
        self._update(m, req)
        if joined or m.metadata() != before:
            self._bump(group, f"member {member_id} joined" if joined else f"member {member_id} changed its metadata")
        if group.delay_until is None and group.assignment_epoch == 0 and joined:
            delay = owner.group_config(gid, "streams.initial.rebalance.delay.ms")
            if delay > 0:
                group.delay_until = now + delay / 1000
                owner.wake()
        m.session_deadline = now + self.session_timeout_ms(gid) / 1000
        m.left_temporarily = False
        standbys = self._standby_replicas(gid)
        if standbys != group.standby_replicas:
            group.standby_replicas = standbys
            if group.group_epoch > 0:
                self._bump(group, f"streams.num.standby.replicas is {standbys}")
        self._configure(group)
        if group.configured is not None and group.configured.subtopologies is not None and owned is not None:
            bad = self._invalid_tasks(group, owned)
            if bad:
                return {"error": ErrorCode.INVALID_REQUEST, "message": bad}
        if req.shutdown_application:
            group.shutdown_by = member_id
        self._compute_target(group, now)
        if epoch == 0 and known:  # a rejoin of a known member: it starts again without tasks
            group.set_tasks(m, EMPTY, EMPTY)
            m.state = STABLE
        self._reconcile(group, m, owned, now)
        owner.wake()
        out = {
            "error": ErrorCode.NONE,
            "member_id": member_id,
            "member_epoch": m.member_epoch,
            "heartbeat_interval_ms": self.heartbeat_interval_ms(gid),
            "status": self._status(group, m, now),
            "endpoint_epoch": group.endpoint_epoch,
            "create": {
                name: info
                for name, info in (group.configured.internal_topics_to_create if group.configured else {}).items()
                if name not in group.creating
            },
        }
        group.creating |= set(out["create"])
        current = m.assigned
        if epoch == 0 or m.last_sent != current:
            m.last_sent = current
            out["assignment"] = current
        return out

    def _join(self, group: StreamsGroup, req, member_id: str, client_id: str, client_host: str, now: float):
        """The member joining at epoch 0: new, a static member taking over its instance's
        place, or a known member rejoining. (member or error dict, whether it is new)."""
        inherited = None
        if req.instance_id is not None:
            prev_id = group.static_members.get(req.instance_id)
            if prev_id is not None and prev_id != member_id:
                prev = group.members.get(prev_id)
                if prev is not None and not prev.left_temporarily:
                    return {
                        "error": ErrorCode.UNRELEASED_INSTANCE_ID,
                        "message": f"instance {req.instance_id} is still held by member {prev_id}",
                    }, False
                if prev is not None:
                    inherited = prev
                    group.members.pop(prev_id)
                    group.owners.remove(prev)
                    group.target[member_id] = group.target.pop(prev_id, EMPTY)
        existing = group.members.get(member_id)
        if existing is not None:
            return existing, False
        m = StreamsMember(member_id, client_id, client_host)
        if inherited is not None:  # the static member's place: its tasks and epoch
            m.member_epoch, m.previous_epoch = inherited.member_epoch, inherited.previous_epoch
            m.active_epochs = dict(inherited.active_epochs)
            m.state, m.assigned, m.pending_revocation = (
                inherited.state,
                inherited.assigned,
                inherited.pending_revocation,
            )
            m.process_id, m.rack_id, m.client_tags = inherited.process_id, inherited.rack_id, inherited.client_tags
            m.user_endpoint, m.topology_epoch = inherited.user_endpoint, inherited.topology_epoch
        group.members[member_id] = m
        group.owners.add(m)
        if req.instance_id is not None:
            m.instance_id = req.instance_id
            group.static_members[req.instance_id] = member_id
            if inherited is not None:
                log.info(
                    "streams group %s: static member %s rejoined as %s",
                    group.group_id,
                    req.instance_id,
                    member_id,
                    extra=fields(group=group.group_id),
                )
                return m, False
        return m, True

    @staticmethod
    def _update(m: StreamsMember, req) -> None:
        """The member's metadata from a heartbeat: null fields are unchanged."""
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.rebalance_timeout_ms is not None and req.rebalance_timeout_ms > 0:
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.process_id is not None:
            m.process_id = req.process_id
        if req.user_endpoint is not None:
            m.user_endpoint = (req.user_endpoint.host, req.user_endpoint.port)
        if req.client_tags is not None:
            m.client_tags = {kv.key: kv.value for kv in req.client_tags}

    @staticmethod
    def _invalid(req) -> str | None:
        """Kafka's checks of a heartbeat's fields (INVALID_REQUEST), before anything changes."""
        if not req.group_id:
            return "GroupId can't be empty."
        if not req.member_id:
            return "MemberId can't be empty."
        if req.member_epoch < LEAVE_GROUP_STATIC_EPOCH:
            return f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2."
        if req.member_epoch == LEAVE_GROUP_STATIC_EPOCH and req.instance_id is None:
            return "InstanceId can't be null when MemberEpoch is -2."
        if req.member_epoch == 0:
            if req.topology is None:
                return "Topology must be non-null when (re-)joining."
            if req.rebalance_timeout_ms is None or req.rebalance_timeout_ms <= 0:
                return "RebalanceTimeoutMs must be provided when (re-)joining."
            if not req.process_id:
                return "ProcessId can't be empty when (re-)joining."
            for name in ("active_tasks", "standby_tasks", "warmup_tasks"):
                if getattr(req, name):
                    return f"{name} must be empty when (re-)joining."
            if any(s.source_topic_regex for s in req.topology.subtopologies or ()):
                return streams_topology.REGEX_NOT_SUPPORTED  # as Kafka 4.4
        elif req.topology is not None:
            return "Topology can only be provided when (re-)joining."
        return None

    def _other_type(self, gid: str) -> str | None:
        owner = self.owner
        classic = owner.groups.get(gid)
        if classic is not None and classic.members:  # an empty one only holds the group's offsets
            return "classic"
        if gid in owner.consumer.groups:
            return "consumer"
        if gid in owner.share.groups:
            return "share"
        return None

    @staticmethod
    def _owned(req) -> Tasks | None:
        if req.active_tasks is None or req.standby_tasks is None or req.warmup_tasks is None:
            return None
        return Tasks(_task_ids(req.active_tasks), _task_ids(req.standby_tasks), _task_ids(req.warmup_tasks))

    @staticmethod
    def _invalid_tasks(group: StreamsGroup, owned: Tasks) -> str | None:
        subs = group.configured.subtopologies
        for sid, p in sorted(owned.all()):
            s = subs.get(sid)
            if s is None or not 0 <= p < s.num_tasks:
                return f"Task {sid}_{p} does not exist in the topology of group {group.group_id}."
        return None

    def _status(self, group: StreamsGroup, m: StreamsMember, now: float) -> list[tuple[int, str]]:
        out = []
        if group.topology is not None and m.topology_epoch < group.topology.epoch:
            out.append(
                (
                    STALE_TOPOLOGY,
                    f"The member's topology epoch {m.topology_epoch} is behind the group's topology epoch "
                    f"{group.topology.epoch}.",
                )
            )
        if group.configured is not None:
            out.extend(group.configured.status)
        if group.shutdown_by is not None:
            out.append(
                (
                    SHUTDOWN_APPLICATION,
                    f"Streams group member {group.shutdown_by} encountered a fatal error and requested a shutdown "
                    "for the entire application.",
                )
            )
        if group.delay_until is not None and now < group.delay_until:
            out.append(
                (
                    ASSIGNMENT_DELAYED,
                    f"Assignment delayed by streams.initial.rebalance.delay.ms for "
                    f"{group.delay_until - now:.1f} s more.",
                )
            )
        return out

    # --- timers ---------------------------------------------------------------------

    def deadlines(self) -> list[float]:
        out = []
        for g in self.groups.values():
            if g.delay_until is not None:
                out.append(g.delay_until)
            for m in g.members.values():
                out.append(m.session_deadline)
                if m.revocation_deadline is not None and m.pending_revocation:
                    out.append(m.revocation_deadline)
        return out

    def expire(self, now: float) -> None:
        for g in list(self.groups.values()):
            if g.delay_until is not None and now >= g.delay_until:
                self._compute_target(g, now)
                self.dirty.add(g.group_id)
            for m in list(g.members.values()):
                if m.session_deadline <= now:
                    self._remove(
                        g,
                        m.member_id,
                        f"no heartbeat for streams.session.timeout.ms={self.session_timeout_ms(g.group_id)}",
                    )
                elif m.pending_revocation and m.revocation_deadline is not None and m.revocation_deadline <= now:
                    self._remove(
                        g,
                        m.member_id,
                        f"did not revoke {sorted(m.pending_revocation.all())} within its rebalance timeout",
                    )

    # --- persistence: records in __consumer_offsets -------------------------------------

    def _image(self, group: StreamsGroup | None) -> Image:
        """The records the group's state makes, as (kind, member id) -> a fingerprint of the
        value (compared, not encoded: encoding happens only for what changed). A removed group
        has none (its records are tombstoned); an Empty one keeps its group-level records."""
        if group is None:
            return {}
        img: Image = {
            (SG_METADATA, None): (
                group.group_epoch,
                group.metadata_hash,
                group.validated_epoch,
                group.standby_replicas,
            ),
            (SG_TARGET_METADATA, None): (group.assignment_epoch, group.assignment_timestamp),
        }
        if group.topology is not None:
            img[(SG_TOPOLOGY, None)] = group.topology
        for mid, m in group.members.items():
            img[(SG_MEMBER_METADATA, mid)] = (
                m.instance_id,
                m.rack_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.topology_epoch,
                m.process_id,
                m.user_endpoint,
                tuple(m.client_tags.items()),
            )
            img[(SG_CURRENT_ASSIGNMENT, mid)] = (
                m.member_epoch,
                m.previous_epoch,
                m.left_temporarily,
                m.state,
                m.assigned,
                m.pending_revocation,
                tuple(sorted(m.active_epochs.items())),
            )
        for mid, tasks in group.target.items():
            img[(SG_TARGET_MEMBER, mid)] = tasks
        return img

    @staticmethod
    def _task_ids(tasks: frozenset[TaskId]) -> list[tuple[str, list[int]]]:
        by_sub: dict[str, list[int]] = {}
        for sid, p in tasks:
            by_sub.setdefault(sid, []).append(p)
        return [(sid, sorted(ps)) for sid, ps in sorted(by_sub.items())]

    @staticmethod
    def _with_epochs(tasks: frozenset[TaskId], epochs: dict[TaskId, int]) -> list[tuple[str, list[int], list[int]]]:
        out = []
        for sid, ps in StreamsGroupCoordinator._task_ids(tasks):
            known = all((sid, p) in epochs for p in ps)
            out.append((sid, ps, [epochs[(sid, p)] for p in ps] if known else []))
        return out

    def _value(self, group: StreamsGroup, kind: str, mid: str | None) -> bytes:
        if kind == SG_METADATA:
            return streams_group_metadata_value(
                StreamsGroupMetadataRecord(
                    group.group_epoch,
                    group.metadata_hash,
                    group.validated_epoch,
                    [(SG_NUM_STANDBY_REPLICAS, str(group.standby_replicas))],
                )
            )
        if kind == SG_TOPOLOGY:
            return streams_group_topology_value(group.topology)
        if kind == SG_TARGET_METADATA:
            return streams_target_metadata_value(group.assignment_epoch, group.assignment_timestamp)
        if kind == SG_TARGET_MEMBER:
            t = group.target[mid]
            return streams_target_member_value(
                StreamsTargetRecord(self._task_ids(t.active), self._task_ids(t.standby), self._task_ids(t.warmup))
            )
        m = group.members[mid]
        if kind == SG_MEMBER_METADATA:
            return streams_member_metadata_value(
                StreamsMemberRecord(
                    m.instance_id,
                    m.rack_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.topology_epoch,
                    m.process_id,
                    m.user_endpoint,
                    list(m.client_tags.items()),
                )
            )
        # a static member gone for now: epoch -2 (as Kafka), its own epoch kept as the previous one
        epoch, previous = (
            (LEAVE_GROUP_STATIC_EPOCH, m.member_epoch) if m.left_temporarily else (m.member_epoch, m.previous_epoch)
        )
        a, p = m.assigned, m.pending_revocation
        return streams_current_assignment_value(
            StreamsCurrentAssignmentRecord(
                epoch,
                previous,
                _STATE_BYTE[m.state],
                self._with_epochs(a.active, m.active_epochs),
                self._task_ids(a.standby),
                self._task_ids(a.warmup),
                self._with_epochs(p.active, m.active_epochs),
                self._task_ids(p.standby),
                self._task_ids(p.warmup),
            )
        )

    @staticmethod
    def _key(kind: str, gid: str, member_id: str | None) -> bytes:
        return streams_group_key(kind, gid, member_id)

    def _state(self, gid: str) -> tuple[Image, Callable[[str, str | None], bytes]]:
        group = self.groups.get(gid)
        return self._image(group), lambda kind, mid: self._value(group, kind, mid)

    # --- loading: replaying the records ------------------------------------------------------

    def replay(self, kind: str, gid: str, member_id: str | None, value: bytes | None) -> None:
        """One streams-group record of a partition being loaded (as Kafka's replay: a value
        creates the group / member when missing; a tombstone of something unknown is ignored).
        OffsetsRecordError for an unreadable value."""
        group = self._replaying(kind, gid, member_id, value, StreamsGroup)
        if group is None:
            return

        def member() -> StreamsMember:
            m = group.members.get(member_id)
            if m is None:
                m = group.members[member_id] = StreamsMember(member_id, "", "")
            return m

        def tasks(ids) -> frozenset[TaskId]:
            return frozenset((t[0], p) for t in ids for p in t[1])

        if kind == SG_METADATA:
            if value is None:
                del self.groups[gid]  # the group was deleted (its other records are tombstoned first)
            else:
                rec = parse_streams_group_metadata_value(value)
                group.group_epoch, group.metadata_hash = rec.epoch, rec.metadata_hash
                group.validated_epoch = rec.validated_topology_epoch
                configs = dict(rec.last_assignment_configs)
                try:
                    group.standby_replicas = int(configs.get(SG_NUM_STANDBY_REPLICAS, "0"))
                except ValueError:
                    group.standby_replicas = 0
        elif kind == SG_TOPOLOGY:
            group.topology = None if value is None else parse_streams_group_topology_value(value)
        elif kind == SG_TARGET_METADATA:
            group.assignment_epoch, group.assignment_timestamp = (
                (0, 0) if value is None else parse_streams_target_metadata_value(value)
            )
        elif kind == SG_TARGET_MEMBER:
            if value is None:
                group.target.pop(member_id, None)
            else:
                rec = parse_streams_target_member_value(value)
                group.target[member_id] = Tasks(tasks(rec.active), tasks(rec.standby), tasks(rec.warmup))
        elif kind == SG_MEMBER_METADATA:
            if value is None:
                group.members.pop(member_id, None)
            else:
                rec = parse_streams_member_metadata_value(value)
                m = member()
                m.instance_id, m.rack_id, m.client_id, m.client_host = (
                    rec.instance_id,
                    rec.rack_id,
                    rec.client_id,
                    rec.client_host,
                )
                m.rebalance_timeout_ms = (
                    rec.rebalance_timeout_ms if rec.rebalance_timeout_ms > 0 else DEFAULT_REBALANCE_TIMEOUT_MS
                )
                m.topology_epoch, m.process_id = rec.topology_epoch, rec.process_id
                m.user_endpoint, m.client_tags = rec.user_endpoint, dict(rec.client_tags)
        elif kind == SG_CURRENT_ASSIGNMENT:
            if value is None:
                m = group.members.get(member_id)
                if m is not None:  # leaving: its metadata's tombstone follows
                    m.member_epoch, m.previous_epoch = LEAVE_GROUP_EPOCH, LEAVE_GROUP_EPOCH
                    m.assigned, m.pending_revocation, m.active_epochs = EMPTY, EMPTY, {}
            else:
                rec = parse_streams_current_assignment_value(value)
                m = member()
                m.left_temporarily = rec.member_epoch == LEAVE_GROUP_STATIC_EPOCH
                if m.left_temporarily:
                    m.member_epoch, m.previous_epoch = rec.previous_member_epoch, -1
                else:
                    m.member_epoch, m.previous_epoch = rec.member_epoch, rec.previous_member_epoch
                m.state = _STATE_OF_BYTE.get(rec.state, STABLE)
                m.assigned = Tasks(tasks(rec.active), tasks(rec.standby), tasks(rec.warmup))
                m.pending_revocation = Tasks(
                    tasks(rec.active_pending_revocation),
                    tasks(rec.standby_pending_revocation),
                    tasks(rec.warmup_pending_revocation),
                )
                m.active_epochs = {
                    (sid, p): e
                    for sid, ps, es in rec.active + rec.active_pending_revocation
                    if len(es) == len(ps)
                    for p, e in zip(ps, es, strict=True)
                }
                m.active_epochs = {
                    t: m.active_epochs.get(t, m.member_epoch) for t in m.assigned.active | m.pending_revocation.active
                }

    def finish_load(self, now: float) -> list[str]:
        """After the records of the partitions being loaded: the groups they hold take over.
        What the records do not hold is rebuilt: the owners index and the static members from
        the members' current assignments; the configured topology by configuring the topology
        against the cluster's topics again (as Kafka does), the group epoch bumped only when the
        topics changed since (the metadata hash); each member gets a fresh session timeout (and
        rebalance timeout for a revocation in progress). A group loaded during its initial
        rebalance delay (members, a ready topology, no task in any target) ends the delay now:
        its next heartbeat assigns. The records replayed become the groups' written image;
        where the loaded state differs (records of a half-written change, a new configuration),
        the group is queued for `flush`. The ids of the groups loaded."""
        loaded = []
        for gid in self._replayed:
            group = self.groups.get(gid)
            if group is not None:
                self._finish_leaves(group)
                group.owners = _Owners()
                for m in group.members.values():
                    group.owners.add(m)
                group.static_members = {
                    m.instance_id: mid for mid, m in group.members.items() if m.instance_id is not None
                }
                group.configured = group.configured_for = None
                self._configure(group, loading=True)
                ready = group.configured is not None and group.configured.subtopologies is not None
                if (
                    group.members
                    and ready
                    and group.assignment_epoch == group.group_epoch
                    and not any(group.target.get(mid) for mid in group.members)
                ):
                    self._bump(group, "streams.initial.rebalance.delay.ms ended at load")
            self._loaded(gid, self._image(group))
            if group is None:
                continue
            loaded.append(gid)
            self._resume(gid, group, now, lambda m: f"{len(m.assigned.all())} task(s)")
        self._loading_done()
        return loaded

    # --- offsets and describe ---------------------------------------------------------

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int) -> int | None:
        """None: not a streams-group commit. A member's commit needs its current epoch, or the
        one it had before its last bump (a commit of tasks it is revoking, sent at that epoch)."""
        g = self.groups.get(group_id)
        if g is None or not member_id:
            return None
        m = g.members.get(member_id)
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch not in (m.member_epoch, m.previous_epoch) or member_epoch < 0:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE
