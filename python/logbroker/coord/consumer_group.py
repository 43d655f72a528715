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

Membership lives in memory: after a broker restart, members are fenced (UNKNOWN_MEMBER_ID)
and rejoin with epoch 0; committed offsets persist in __consumer_offsets as for classic
groups. (Kafka also persists KIP-848 membership; we do not yet.)
"""

from __future__ import annotations

import logging
import re
import uuid
import base64
from typing import Callable

import trio

from logbroker.coord.assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.groups")

TP = tuple[str, int]


class ConsumerMember:
    def __init__(self, member_id: str, instance_id: str | None, rack_id: str | None, client_id: str,
                 client_host: str, rebalance_timeout_ms: int) -> None:
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
            if m.member_epoch != self.assignment_epoch or m.pending_revocation or m.assigned != self.target.get(m.member_id, set()):
                return "Reconciling"
        return "Stable"


class ConsumerGroupCoordinator:
    """KIP-848 group logic; `GroupCoordinator` owns it and its timers."""

    def __init__(self, owner) -> None:
        self.owner = owner
        cfg = owner.config
        self.assignors = [a.strip() for a in cfg.get_str("group.consumer.assignors").split(",") if a.strip()]
        self.max_size = cfg.get_int("group.consumer.max.size")
        self.groups: dict[str, ConsumerGroup] = {}

    # --- helpers --------------------------------------------------------------------

    def session_timeout_ms(self, group_id: str) -> int:
        return self.owner.group_config(group_id, "consumer.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.owner.group_config(group_id, "consumer.heartbeat.interval.ms")

    def _topics(self) -> dict[str, int]:
        return {name: len(t.partitions) for name, t in self.owner.controller.image.topics.items() if not name.startswith("__")}

    def _topic_ids(self) -> tuple[dict[str, uuid.UUID], dict[uuid.UUID, str]]:
        image = self.owner.controller.image
        by_name = {name: t.topic_id for name, t in image.topics.items()}
        return by_name, {v: k for k, v in by_name.items()}

    def _subscribed_partitions(self, group: ConsumerGroup) -> dict[str, int]:
        topics = self._topics()
        return {t: n for t, n in topics.items() if any(m.subscribes(t) for m in group.members.values())}

    def _bump(self, group: ConsumerGroup, reason: str) -> None:
        group.group_epoch += 1
        log.info("consumer group %s: epoch %d (%s)", group.group_id, group.group_epoch, reason,
                 extra=fields(group=group.group_id))

    def _compute_target(self, group: ConsumerGroup) -> None:
        if group.assignment_epoch >= group.group_epoch:
            return
        partitions = self._subscribed_partitions(group)
        group.subscription_metadata = partitions
        members = {mid: {t for t in partitions if m.subscribes(t)} for mid, m in sorted(group.members.items())}
        preferred = [m.server_assignor for m in group.members.values() if m.server_assignor]
        name = max(set(preferred), key=preferred.count) if preferred else (self.assignors[0] if self.assignors else DEFAULT_ASSIGNOR)
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
        log.info("consumer group %s: member %s removed (%s)", group.group_id, member_id, reason,
                 extra=fields(group=group.group_id))
        self._bump(group, f"member {member_id} left")
        self._compute_target(group)
        if not group.members:
            self.groups.pop(group.group_id, None)

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

    def heartbeat(self, req, version: int, client_id: str, client_host: str,
                  may_describe: Callable[[str], bool] | None = None) -> dict:
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
        now = trio.current_time()
        group = self.groups.get(gid)
        epoch = req.member_epoch
        member_id = req.member_id
        if epoch == 0:
            if req.subscribed_topic_names is None and getattr(req, "subscribed_topic_regex", None) is None:
                return {"error": ErrorCode.INVALID_REQUEST, "message": "SubscribedTopicNames or SubscribedTopicRegex must be set when joining"}
            if req.server_assignor is not None and req.server_assignor not in self.assignors:
                return {"error": ErrorCode.UNSUPPORTED_ASSIGNOR, "message": f"assignor {req.server_assignor!r} is not one of {self.assignors}"}
            if req.rebalance_timeout_ms is not None and req.rebalance_timeout_ms < -1:
                return {"error": ErrorCode.INVALID_REQUEST, "message": "RebalanceTimeoutMs must be -1 or positive"}
            if not member_id:
                if version >= 1:
                    return {"error": ErrorCode.INVALID_REQUEST, "message": "MemberId must be set (KIP-1082) from version 1"}
                member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            if group is None:
                group = self.groups[gid] = ConsumerGroup(gid)
            if self.max_size and len(group.members) >= self.max_size and member_id not in group.members:
                return {"error": ErrorCode.GROUP_MAX_SIZE_REACHED, "message": f"group {gid} has {len(group.members)} members"}
            inherited = None
            if req.instance_id is not None:
                prev_id = group.static_members.get(req.instance_id)
                if prev_id is not None and prev_id != member_id:
                    prev = group.members.get(prev_id)
                    if prev is not None and not prev.left_temporarily:
                        return {"error": ErrorCode.UNRELEASED_INSTANCE_ID,
                                "message": f"instance {req.instance_id} is still held by member {prev_id}"}
                    if prev is not None:
                        inherited = prev
                        group.members.pop(prev_id)
                        group.target[member_id] = group.target.pop(prev_id, set())
            existing = group.members.get(member_id)
            if existing is not None:
                # a rejoin of a known member (e.g. after being fenced on its side): start afresh
                existing.assigned, existing.pending_revocation = set(), set()
            m = ConsumerMember(member_id, req.instance_id, req.rack_id, client_id, client_host,
                               req.rebalance_timeout_ms if req.rebalance_timeout_ms and req.rebalance_timeout_ms > 0 else 300_000)
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
                self._bump(group, f"member {member_id} joined" if inherited is None else f"static member {req.instance_id} changed its subscription")
            else:
                log.info("consumer group %s: static member %s rejoined as %s", gid, req.instance_id, member_id,
                         extra=fields(group=gid))
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
                    return {"error": ErrorCode.FENCED_MEMBER_EPOCH,
                            "message": f"member {member_id} sent epoch {epoch}, its epoch is {m.member_epoch}"}
            changed = False
            if req.subscribed_topic_names is not None and sorted(req.subscribed_topic_names) != sorted(m.subscribed_topics):
                m.subscribed_topics = list(req.subscribed_topic_names)
                changed = True
            if getattr(req, "subscribed_topic_regex", None) is not None and (req.subscribed_topic_regex or None) != m.subscribed_regex:
                m.subscribed_regex = req.subscribed_topic_regex or None
                changed = True
            if req.server_assignor is not None and req.server_assignor != m.server_assignor:
                if req.server_assignor not in self.assignors:
                    return {"error": ErrorCode.UNSUPPORTED_ASSIGNOR, "message": f"assignor {req.server_assignor!r} is not supported"}
                m.server_assignor = req.server_assignor
                changed = True
            if changed:
                self._bump(group, f"member {member_id} changed its subscription")
        m.session_deadline = now + self.session_timeout_ms(gid) / 1000
        m.left_temporarily = False
        m.may_describe = may_describe
        if self._subscribed_partitions(group) != group.subscription_metadata and group.assignment_epoch >= group.group_epoch:
            self._bump(group, "subscribed topics changed")
        self._compute_target(group)
        owned = self._owned(req)
        if owned is not None and m.pending_revocation and not (owned & m.pending_revocation):
            m.pending_revocation = set()
            m.revocation_deadline = None
        self._reconcile(group, m, now)
        self.owner.wake()
        out = {"error": ErrorCode.NONE, "member_id": member_id, "member_epoch": m.member_epoch,
               "heartbeat_interval_ms": self.heartbeat_interval_ms(gid)}
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
                    self._remove(g, m.member_id, f"no heartbeat for consumer.session.timeout.ms={self.session_timeout_ms(g.group_id)}")
                elif m.pending_revocation and m.revocation_deadline is not None and m.revocation_deadline <= now:
                    self._remove(g, m.member_id, f"did not revoke {sorted(m.pending_revocation)} within its rebalance timeout")

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
