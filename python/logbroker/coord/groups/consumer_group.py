"""KIP-848 consumer groups: ConsumerGroupHeartbeat, ConsumerGroupDescribe.

The broker owns the assignment. Each group has a group epoch (bumped when membership,
subscriptions or subscribed topics' partition counts change), a target assignment
computed by a server-side assignor (assignors.py) at that epoch (the assignment epoch),
and per member a current assignment that converges to the target:

    member heartbeats ──▶ revoke first: partitions in its assignment but not in its
                          target are taken away (its epoch stays) until the member
                          reports, in a later heartbeat, that it no longer owns them;
                      ──▶ then its epoch becomes the assignment epoch and it receives
                          every target partition that no other member still holds;
                          partitions still held elsewhere come on later heartbeats.

So no partition is ever assigned to two members at once. A member missing heartbeats
for group.consumer.session.timeout.ms, or not revoking within its rebalance timeout,
is fenced and removed. Member epochs: 0 joins, -1 leaves, -2 leaves temporarily (a
static member that will come back with the same instance id).

Persistence, as Kafka's: the group lives in `__consumer_offsets` as Kafka's consumer-group
records (formats in offsets_topic.py): the group epoch, the subscribed topics' partition
counts, each member's subscription, the target assignment (its epoch and each member's
partitions) and each member's current assignment (epoch, previous epoch, state, assigned
and pending-revocation partitions). After each change (a heartbeat, an expired session)
only the records that changed are written — the difference between the group's state and
what its records already say (`_image` / `persist`; the mechanism, shared with streams groups,
in group_records.py) — in one append, and the heartbeat is answered once that append is
committed (the HW covers it), as offset commits are. A member leaving writes tombstones for
its records; a group left empty stays, state Empty, with its group-level records (type, epoch:
ListGroups shows it as a consumer group, as Kafka does) until DeleteGroups removes it or a
classic member joins it (`drop_empty`), which tombstone the group records too (committed
offsets stay unless deleted).

A new coordinator (after a failover, or the same broker after a restart) replays those
records when it loads the partition (`replay`, then `finish_load`): group epoch, target
assignment, members with their epochs and current assignments come back; each member gets
a fresh session timeout to find it. Members keep heartbeating at their epoch, keep their
partitions, and nothing rebalances.
"""

from __future__ import annotations

import base64
import logging
import re
import uuid
from collections.abc import Callable

import trio

from logbroker.coord.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from logbroker.coord.groups.group_records import GroupRecords, Image
from logbroker.coord.groups.offsets_topic import (
    CG_CURRENT_ASSIGNMENT,
    CG_MEMBER_METADATA,
    CG_METADATA,
    CG_PARTITION_METADATA,
    CG_TARGET_MEMBER,
    CG_TARGET_METADATA,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    MEMBER_STABLE,
    MEMBER_UNRELEASED_PARTITIONS,
    MEMBER_UNREVOKED_PARTITIONS,
    ConsumerMemberRecord,
    CurrentAssignmentRecord,
    TopicMetadataRecord,
    consumer_group_key,
    consumer_group_metadata_value,
    current_assignment_value,
    member_metadata_value,
    parse_consumer_group_metadata_value,
    parse_current_assignment_value,
    parse_member_metadata_value,
    parse_partition_metadata_value,
    parse_target_assignment_member_value,
    parse_target_assignment_metadata_value,
    partition_metadata_value,
    target_assignment_member_value,
    target_assignment_metadata_value,
)
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.groups")

TP = tuple[str, int]


class ConsumerMember:
    def __init__(
        self,
        member_id: str,
        instance_id: str | None,
        rack_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
    ) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_epoch = 0
        self.previous_epoch = -1
        self.subscribed_topics: list[str] = []
        self.subscribed_regex: str | None = None
        self.server_assignor: str | None = None
        self.assigned: set[TP] = set()
        self.pending_revocation: set[TP] = set()
        self.last_sent: frozenset[TP] | None = None
        self.session_deadline = 0.0
        self.revocation_deadline: float | None = None
        self.left_temporarily = False
        # ACLs: which topics its regex may match (those its principal may describe, as Kafka
        # resolves a regex); None without authorization (handlers/consumer_groups.py)
        self.may_describe: Callable[[str], bool] | None = None

    def subscribes(self, topic: str) -> bool:
        if topic in self.subscribed_topics:
            return True
        if self.subscribed_regex:
            try:
                matches = re.fullmatch(self.subscribed_regex, topic) is not None
            except re.error:
                return False
            return matches and (self.may_describe is None or self.may_describe(topic))
        return False


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignor = DEFAULT_ASSIGNOR
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.target: dict[str, set[TP]] = {}
        self.subscription_metadata: dict[str, int] = {}

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        if self.group_epoch > self.assignment_epoch:
            return "Assigning"
        for m in self.members.values():
            if (
                m.member_epoch != self.assignment_epoch
                or m.pending_revocation
                or m.assigned != self.target.get(m.member_id, set())
            ):
                return "Reconciling"
        return "Stable"


class ConsumerGroupCoordinator(GroupRecords):
    """KIP-848 group logic; `GroupCoordinator` owns it and its timers. Its records in
    __consumer_offsets: `GroupRecords` (group_records.py)."""

    GROUP_TYPE = "consumer group"
    # the order records go out in one append, as Kafka writes them (and as its replay wants
    # them): a leaving member's tombstones first (current assignment, target, subscription),
    # then new values, and the group-level tombstones of a group removed last
    TOMBSTONE_FIRST = [CG_CURRENT_ASSIGNMENT, CG_TARGET_MEMBER, CG_MEMBER_METADATA]
    VALUES = [
        CG_MEMBER_METADATA,
        CG_METADATA,
        CG_PARTITION_METADATA,
        CG_TARGET_MEMBER,
        CG_TARGET_METADATA,
        CG_CURRENT_ASSIGNMENT,
    ]
    TOMBSTONE_LAST = [CG_TARGET_METADATA, CG_PARTITION_METADATA, CG_METADATA]
    groups: dict[str, ConsumerGroup]

    def __init__(self, owner) -> None:
        super().__init__(owner)
        cfg = owner.config
        self.assignors = [a.strip() for a in cfg.get_str("group.consumer.assignors").split(",") if a.strip()]
        self.max_size = cfg.get_int("group.consumer.max.size")

    # --- helpers --------------------------------------------------------------------

    def session_timeout_ms(self, group_id: str) -> int:
        return self.owner.group_config(group_id, "consumer.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.owner.group_config(group_id, "consumer.heartbeat.interval.ms")

    def _topics(self) -> dict[str, int]:
        """Every topic a subscription may name or a regex match, internal ones included: Kafka
        resolves KIP-848 subscriptions against the whole metadata image."""
        return {name: len(t.partitions) for name, t in self.owner.controller.image.topics.items()}

    def _topic_ids(self) -> tuple[dict[str, uuid.UUID], dict[uuid.UUID, str]]:
        image = self.owner.controller.image
        by_name = {name: t.topic_id for name, t in image.topics.items()}
        return by_name, {v: k for k, v in by_name.items()}

    def _subscribed_partitions(self, group: ConsumerGroup) -> dict[str, int]:
        topics = self._topics()
        return {t: n for t, n in topics.items() if any(m.subscribes(t) for m in group.members.values())}

    def _bump(self, group: ConsumerGroup, reason: str) -> None:
        group.group_epoch += 1
        log.info(
            "consumer group %s: epoch %d (%s)",
            group.group_id,
            group.group_epoch,
            reason,
            extra=fields(group=group.group_id),
        )

    def _compute_target(self, group: ConsumerGroup) -> None:
        if group.assignment_epoch >= group.group_epoch:
            return
        partitions = self._subscribed_partitions(group)
        group.subscription_metadata = partitions
        members = {mid: {t for t in partitions if m.subscribes(t)} for mid, m in sorted(group.members.items())}
        preferred = [m.server_assignor for m in group.members.values() if m.server_assignor]
        name = (
            max(set(preferred), key=preferred.count)
            if preferred
            else (self.assignors[0] if self.assignors else DEFAULT_ASSIGNOR)
        )
        group.assignor = name
        group.target = ASSIGNORS[name](members, partitions, group.target)
        group.assignment_epoch = group.group_epoch
        self.owner.wake()

    def _remove(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        m = group.members.pop(member_id, None)
        if m is None:
            return
        if m.instance_id is not None and group.static_members.get(m.instance_id) == member_id:
            del group.static_members[m.instance_id]
        group.target.pop(member_id, None)
        log.info(
            "consumer group %s: member %s removed (%s)",
            group.group_id,
            member_id,
            reason,
            extra=fields(group=group.group_id),
        )
        self._bump(group, f"member {member_id} left")
        self._compute_target(group)
        self.dirty.add(group.group_id)
        # An emptied group stays, Empty, as in Kafka: its type, epoch and assignor are kept
        # (ListGroups, kafka-consumer-groups) until DeleteGroups, or until a classic member
        # joins it (`drop_empty`).

    def drop_empty(self, group_id: str) -> bool:
        """Removes an Empty group (DeleteGroups, or a classic JoinGroup taking the id over, as
        Kafka converts an empty consumer group); its records are tombstoned by the next
        `persist`. False when the group does not exist or has members."""
        group = self.groups.get(group_id)
        if group is None or group.members:
            return False
        del self.groups[group_id]
        self.dirty.add(group_id)
        log.info("consumer group %s: empty group removed", group_id, extra=fields(group=group_id))
        return True

    def _reconcile(self, group: ConsumerGroup, m: ConsumerMember, now: float) -> None:
        target = group.target.get(m.member_id, set())
        if m.pending_revocation:
            return
        revoke = m.assigned - target
        if revoke:
            m.assigned = m.assigned & target
            m.pending_revocation = revoke
            m.revocation_deadline = now + m.rebalance_timeout_ms / 1000
            self.owner.wake()
            return
        busy: set[TP] = set()
        for other in group.members.values():
            if other is not m:
                busy |= other.assigned | other.pending_revocation
        m.assigned = {tp for tp in target if tp in m.assigned or tp not in busy}
        if m.member_epoch != group.assignment_epoch:
            m.previous_epoch, m.member_epoch = m.member_epoch, group.assignment_epoch

    # --- heartbeat ------------------------------------------------------------------

    async def heartbeat(
        self, req, version: int, client_id: str, client_host: str, may_describe: Callable[[str], bool] | None = None
    ) -> dict:
        """ConsumerGroupHeartbeat: the state change, then its records (only what changed)
        appended to __consumer_offsets; the answer once they are committed. A failed append
        answers its error (NOT_COORDINATOR when the partition moved, ...): the member retries
        at the same epoch (the new coordinator has everything committed before)."""
        return await self._answer_when_written(
            req.group_id, self._heartbeat(req, version, client_id, client_host, may_describe)
        )

    def _heartbeat(
        self, req, version: int, client_id: str, client_host: str, may_describe: Callable[[str], bool] | None = None
    ) -> dict:
        owner = self.owner
        gid = req.group_id
        code = owner.check_coordinator(gid)
        if code:
            return {"error": code}
        if not gid:
            return {"error": ErrorCode.INVALID_REQUEST, "message": "GroupId can't be empty"}
        classic = owner.groups.get(gid)
        if classic is not None and classic.members:
            return {"error": ErrorCode.GROUP_ID_NOT_FOUND, "message": f"group {gid} is a classic group with members"}
        if gid in owner.share.groups:
            return {"error": ErrorCode.GROUP_ID_NOT_FOUND, "message": f"group {gid} is a share group"}
        if gid in owner.streams.groups:
            return {"error": ErrorCode.GROUP_ID_NOT_FOUND, "message": f"group {gid} is a streams group"}
        now = trio.current_time()
        group = self.groups.get(gid)
        epoch = req.member_epoch
        member_id = req.member_id
        if epoch == 0:
            if req.subscribed_topic_names is None and getattr(req, "subscribed_topic_regex", None) is None:
                return {
                    "error": ErrorCode.INVALID_REQUEST,
                    "message": "SubscribedTopicNames or SubscribedTopicRegex must be set when joining",
                }
            if req.server_assignor is not None and req.server_assignor not in self.assignors:
                return {
                    "error": ErrorCode.UNSUPPORTED_ASSIGNOR,
                    "message": f"assignor {req.server_assignor!r} is not one of {self.assignors}",
                }
            if req.rebalance_timeout_ms is not None and req.rebalance_timeout_ms < -1:
                return {"error": ErrorCode.INVALID_REQUEST, "message": "RebalanceTimeoutMs must be -1 or positive"}
            if not member_id:
                if version >= 1:
                    return {
                        "error": ErrorCode.INVALID_REQUEST,
                        "message": "MemberId must be set (KIP-1082) from version 1",
                    }
                member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            if group is None:
                group = self.groups[gid] = ConsumerGroup(gid)
            if self.max_size and len(group.members) >= self.max_size and member_id not in group.members:
                return {
                    "error": ErrorCode.GROUP_MAX_SIZE_REACHED,
                    "message": f"group {gid} has {len(group.members)} members",
                }
            inherited = None
            if req.instance_id is not None:
                prev_id = group.static_members.get(req.instance_id)
                if prev_id is not None and prev_id != member_id:
                    prev = group.members.get(prev_id)
                    if prev is not None and not prev.left_temporarily:
                        return {
                            "error": ErrorCode.UNRELEASED_INSTANCE_ID,
                            "message": f"instance {req.instance_id} is still held by member {prev_id}",
                        }
                    if prev is not None:
                        inherited = prev
                        group.members.pop(prev_id)
                        group.target[member_id] = group.target.pop(prev_id, set())
            existing = group.members.get(member_id)
            if existing is not None:
                # a rejoin of a known member (e.g. after being fenced on its side): start afresh
                existing.assigned, existing.pending_revocation = set(), set()
            m = ConsumerMember(
                member_id,
                req.instance_id,
                req.rack_id,
                client_id,
                client_host,
                req.rebalance_timeout_ms if req.rebalance_timeout_ms and req.rebalance_timeout_ms > 0 else 300_000,
            )
            if inherited is not None:
                m.assigned = set(inherited.assigned)
                m.member_epoch = inherited.member_epoch
                m.previous_epoch = inherited.previous_epoch
                m.subscribed_topics, m.subscribed_regex = inherited.subscribed_topics, inherited.subscribed_regex
                m.server_assignor = inherited.server_assignor
            group.members[member_id] = m
            if req.instance_id is not None:
                group.static_members[req.instance_id] = member_id
            changed = inherited is None
            if req.subscribed_topic_names is not None:
                changed |= sorted(req.subscribed_topic_names) != sorted(m.subscribed_topics)
                m.subscribed_topics = list(req.subscribed_topic_names)
            if getattr(req, "subscribed_topic_regex", None) is not None:
                changed |= req.subscribed_topic_regex != m.subscribed_regex
                m.subscribed_regex = req.subscribed_topic_regex or None
            if req.server_assignor is not None:
                changed |= req.server_assignor != m.server_assignor
                m.server_assignor = req.server_assignor
            if changed:
                self._bump(
                    group,
                    f"member {member_id} joined"
                    if inherited is None
                    else f"static member {req.instance_id} changed its subscription",
                )
            else:
                log.info(
                    "consumer group %s: static member %s rejoined as %s",
                    gid,
                    req.instance_id,
                    member_id,
                    extra=fields(group=gid),
                )
            m.last_sent = None
        elif epoch in (-1, -2):
            if group is None or member_id not in group.members:
                return {"error": ErrorCode.UNKNOWN_MEMBER_ID, "message": f"member {member_id} is not in group {gid}"}
            m = group.members[member_id]
            if epoch == -2 and m.instance_id is not None:
                m.left_temporarily = True
                m.session_deadline = now + self.session_timeout_ms(gid) / 1000
                self.owner.wake()
            else:
                self._remove(group, member_id, "left the group")
            return {"error": ErrorCode.NONE, "member_id": member_id, "member_epoch": epoch}
        else:
            m = group.members.get(member_id) if group is not None else None
            if m is None:
                return {"error": ErrorCode.UNKNOWN_MEMBER_ID, "message": f"member {member_id} is not in group {gid}"}
            if epoch != m.member_epoch:
                owned = self._owned(req)
                if not (epoch == m.previous_epoch and owned is not None and owned <= m.assigned):
                    return {
                        "error": ErrorCode.FENCED_MEMBER_EPOCH,
                        "message": f"member {member_id} sent epoch {epoch}, its epoch is {m.member_epoch}",
                    }
            changed = False
            if req.subscribed_topic_names is not None and sorted(req.subscribed_topic_names) != sorted(
                m.subscribed_topics
            ):
                m.subscribed_topics = list(req.subscribed_topic_names)
                changed = True
            if (
                getattr(req, "subscribed_topic_regex", None) is not None
                and (req.subscribed_topic_regex or None) != m.subscribed_regex
            ):
                m.subscribed_regex = req.subscribed_topic_regex or None
                changed = True
            if req.server_assignor is not None and req.server_assignor != m.server_assignor:
                if req.server_assignor not in self.assignors:
                    return {
                        "error": ErrorCode.UNSUPPORTED_ASSIGNOR,
                        "message": f"assignor {req.server_assignor!r} is not supported",
                    }
                m.server_assignor = req.server_assignor
                changed = True
            if changed:
                self._bump(group, f"member {member_id} changed its subscription")
        m.session_deadline = now + self.session_timeout_ms(gid) / 1000
        m.left_temporarily = False
        m.may_describe = may_describe
        if (
            self._subscribed_partitions(group) != group.subscription_metadata
            and group.assignment_epoch >= group.group_epoch
        ):
            self._bump(group, "subscribed topics changed")
        self._compute_target(group)
        owned = self._owned(req)
        if owned is not None and m.pending_revocation and not (owned & m.pending_revocation):
            m.pending_revocation = set()
            m.revocation_deadline = None
        self._reconcile(group, m, now)
        self.owner.wake()
        out = {
            "error": ErrorCode.NONE,
            "member_id": member_id,
            "member_epoch": m.member_epoch,
            "heartbeat_interval_ms": self.heartbeat_interval_ms(gid),
        }
        current = frozenset(m.assigned)
        # As Kafka: the assignment goes back when it changed, on a join, and whenever the
        # member reported what it owns (so a member that missed a response catches up).
        if m.last_sent != current or owned is not None:
            m.last_sent = current
            out["assignment"] = current
        return out

    def _owned(self, req) -> set[TP] | None:
        if req.topic_partitions is None:
            return None
        _, by_id = self._topic_ids()
        out = set()
        for tp in req.topic_partitions:
            name = by_id.get(tp.topic_id)
            if name is not None:
                out.update((name, p) for p in tp.partitions)
        return out

    # --- timers ---------------------------------------------------------------------

    def deadlines(self) -> list[float]:
        out = []
        for g in self.groups.values():
            for m in g.members.values():
                out.append(m.session_deadline)
                if m.revocation_deadline is not None and m.pending_revocation:
                    out.append(m.revocation_deadline)
        return out

    def expire(self, now: float) -> None:
        for g in list(self.groups.values()):
            for m in list(g.members.values()):
                if m.session_deadline <= now:
                    self._remove(
                        g,
                        m.member_id,
                        f"no heartbeat for consumer.session.timeout.ms={self.session_timeout_ms(g.group_id)}",
                    )
                elif m.pending_revocation and m.revocation_deadline is not None and m.revocation_deadline <= now:
                    self._remove(
                        g, m.member_id, f"did not revoke {sorted(m.pending_revocation)} within its rebalance timeout"
                    )

    # --- persistence: records in __consumer_offsets -------------------------------------

    @staticmethod
    def _member_state(group: ConsumerGroup, m: ConsumerMember) -> int:
        if m.pending_revocation:
            return MEMBER_UNREVOKED_PARTITIONS
        if m.member_epoch == group.assignment_epoch and m.assigned != group.target.get(m.member_id, set()):
            return MEMBER_UNRELEASED_PARTITIONS
        return MEMBER_STABLE

    def _image(self, group: ConsumerGroup | None, ids: dict[str, uuid.UUID]) -> Image:
        """The records the group's state makes, as (kind, member id) -> a fingerprint of the
        value (compared, not encoded: encoding happens only for what changed). A removed
        group has none (its records are tombstoned); an Empty one keeps its group-level records."""
        if group is None:
            return {}
        img: Image = {
            (CG_METADATA, None): group.group_epoch,
            (CG_PARTITION_METADATA, None): tuple(
                sorted((t, n, ids.get(t)) for t, n in group.subscription_metadata.items())
            ),
            (CG_TARGET_METADATA, None): group.assignment_epoch,
        }
        for mid, m in group.members.items():
            img[(CG_MEMBER_METADATA, mid)] = (
                m.instance_id,
                m.rack_id,
                m.client_id,
                m.client_host,
                tuple(m.subscribed_topics),
                m.subscribed_regex,
                m.rebalance_timeout_ms,
                m.server_assignor,
            )
            img[(CG_CURRENT_ASSIGNMENT, mid)] = (
                m.member_epoch,
                m.previous_epoch,
                m.left_temporarily,
                self._member_state(group, m),
                frozenset(m.assigned),
                frozenset(m.pending_revocation),
            )
        for mid, parts in group.target.items():
            img[(CG_TARGET_MEMBER, mid)] = frozenset(parts)
        return img

    @staticmethod
    def _by_id(parts, ids: dict[str, uuid.UUID]) -> list[tuple[uuid.UUID, list[int]]]:
        by_topic: dict[str, list[int]] = {}
        for t, p in parts:
            if t in ids:  # a deleted topic's partitions are not written
                by_topic.setdefault(t, []).append(p)
        return [(ids[t], sorted(ps)) for t, ps in sorted(by_topic.items())]

    def _value(self, group: ConsumerGroup, kind: str, mid: str | None, ids: dict[str, uuid.UUID]) -> bytes:
        if kind == CG_METADATA:
            return consumer_group_metadata_value(group.group_epoch)
        if kind == CG_PARTITION_METADATA:
            return partition_metadata_value(
                [TopicMetadataRecord(ids[t], t, n) for t, n in sorted(group.subscription_metadata.items()) if t in ids]
            )
        if kind == CG_TARGET_METADATA:
            return target_assignment_metadata_value(group.assignment_epoch)
        if kind == CG_TARGET_MEMBER:
            return target_assignment_member_value(self._by_id(group.target[mid], ids))
        m = group.members[mid]
        if kind == CG_MEMBER_METADATA:
            return member_metadata_value(
                ConsumerMemberRecord(
                    m.instance_id,
                    m.rack_id,
                    m.client_id,
                    m.client_host,
                    list(m.subscribed_topics),
                    m.subscribed_regex,
                    m.rebalance_timeout_ms,
                    m.server_assignor,
                )
            )
        # a static member gone for now: epoch -2 (as Kafka), its own epoch kept as the previous one
        epoch, previous = (
            (LEAVE_GROUP_STATIC_MEMBER_EPOCH, m.member_epoch)
            if m.left_temporarily
            else (m.member_epoch, m.previous_epoch)
        )
        return current_assignment_value(
            CurrentAssignmentRecord(
                epoch,
                previous,
                self._member_state(group, m),
                self._by_id(m.assigned, ids),
                self._by_id(m.pending_revocation, ids),
            )
        )

    @staticmethod
    def _key(kind: str, gid: str, member_id: str | None) -> bytes:
        return consumer_group_key(kind, gid, member_id)

    def _state(self, gid: str) -> tuple[Image, Callable[[str, str | None], bytes]]:
        ids, _ = self._topic_ids()
        group = self.groups.get(gid)
        return self._image(group, ids), lambda kind, mid: self._value(group, kind, mid, ids)

    # --- loading: replaying the records ------------------------------------------------------

    def replay(
        self, kind: str, gid: str, member_id: str | None, value: bytes | None, names: dict[uuid.UUID, str]
    ) -> None:
        """One consumer-group record of a partition being loaded (as Kafka's replay: a value
        creates the group / member when missing; a tombstone of something unknown is
        ignored). `names`: topic id -> name. OffsetsRecordError for an unreadable value."""
        group = self._replaying(kind, gid, member_id, value, ConsumerGroup)
        if group is None:
            return

        def parts(tps) -> set[TP]:
            return {(names[tid], p) for tid, ps in tps if tid in names for p in ps}

        def member() -> ConsumerMember:
            m = group.members.get(member_id)
            if m is None:
                m = group.members[member_id] = ConsumerMember(member_id, None, None, "", "", 300_000)
            return m

        if kind == CG_METADATA:
            if value is None:
                del self.groups[gid]  # the group was deleted (its other records are tombstoned first)
            else:
                group.group_epoch = parse_consumer_group_metadata_value(value)
        elif kind == CG_PARTITION_METADATA:
            group.subscription_metadata = (
                {} if value is None else {t.topic_name: t.num_partitions for t in parse_partition_metadata_value(value)}
            )
        elif kind == CG_TARGET_METADATA:
            group.assignment_epoch = 0 if value is None else parse_target_assignment_metadata_value(value)
        elif kind == CG_TARGET_MEMBER:
            if value is None:
                group.target.pop(member_id, None)
            else:
                group.target[member_id] = parts(parse_target_assignment_member_value(value))
        elif kind == CG_MEMBER_METADATA:
            if value is None:
                group.members.pop(member_id, None)
            else:
                rec = parse_member_metadata_value(value)
                m = member()
                m.instance_id, m.rack_id, m.client_id, m.client_host = (
                    rec.instance_id,
                    rec.rack_id,
                    rec.client_id,
                    rec.client_host,
                )
                m.subscribed_topics, m.subscribed_regex = list(rec.subscribed_topic_names), rec.subscribed_topic_regex
                m.rebalance_timeout_ms = rec.rebalance_timeout_ms if rec.rebalance_timeout_ms > 0 else 300_000
                m.server_assignor = rec.server_assignor
        elif kind == CG_CURRENT_ASSIGNMENT:
            if value is None:
                m = group.members.get(member_id)
                if m is not None:  # leaving: its subscription's tombstone follows
                    m.member_epoch, m.previous_epoch, m.assigned, m.pending_revocation = -1, -1, set(), set()
            else:
                rec = parse_current_assignment_value(value)
                m = member()
                m.left_temporarily = rec.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
                if m.left_temporarily:
                    m.member_epoch, m.previous_epoch = rec.previous_member_epoch, -1
                else:
                    m.member_epoch, m.previous_epoch = rec.member_epoch, rec.previous_member_epoch
                m.assigned, m.pending_revocation = parts(rec.assigned), parts(rec.pending_revocation)

    def finish_load(self, now: float) -> list[str]:
        """After the records of the partitions being loaded: the groups they hold take over,
        each member with a fresh session timeout (and rebalance timeout for a revocation in
        progress). The records replayed become the groups' written image; where the loaded
        state differs (records of a half-written change), the group is queued for `flush`.
        The ids of the groups loaded."""
        ids, _ = self._topic_ids()
        loaded = []
        for gid in self._replayed:
            group = self.groups.get(gid)
            if group is not None:
                self._finish_leaves(group)
            self._loaded(gid, self._image(group, ids))
            if group is None:
                continue
            loaded.append(gid)
            group.static_members = {m.instance_id: mid for mid, m in group.members.items() if m.instance_id is not None}
            preferred = [m.server_assignor for m in group.members.values() if m.server_assignor]
            group.assignor = (
                max(set(preferred), key=preferred.count)
                if preferred
                else (self.assignors[0] if self.assignors else DEFAULT_ASSIGNOR)
            )
            self._resume(gid, group, now, lambda m: f"{len(m.assigned)} partition(s)")
        self._loading_done()
        return loaded

    # --- offsets and describe ---------------------------------------------------------

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int) -> int | None:
        """None: not a consumer-group member commit (use the classic rules)."""
        g = self.groups.get(group_id)
        if g is None or not member_id:
            return None
        m = g.members.get(member_id)
        if m is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE
