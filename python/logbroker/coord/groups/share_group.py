"""Share groups (KIP-932): membership and assignment (ShareGroupHeartbeat, ShareGroupDescribe).

A share group is served by the group coordinator of its id (the leader of its
`__consumer_offsets` partition), like a KIP-848 consumer group, and owns its assignment the
same way: a group epoch, bumped when membership, subscriptions or the subscribed topics'
partition counts change, and a target assignment computed at that epoch by the simple
assignor. Unlike a consumer group a partition may be assigned to several members at once
(records, not partitions, are handed out: share_partition.py), so there is nothing to
revoke first: a member takes its target assignment and the group epoch at its next heartbeat.

Simple assignor (Kafka's rule of thumb, deterministic here): for each subscribed topic, with
M members subscribing to it and P partitions, sorted: if M <= P the partitions are dealt
round-robin to the members; if M > P each member gets one partition, dealt round-robin, so
every partition is consumed and members share partitions evenly.

Member epochs: 0 joins (the member id is the client's, KIP-1082), -1 leaves. A member
missing heartbeats for group.share.session.timeout.ms is removed. Membership lives in memory
(as for our consumer groups): after a coordinator change members are fenced
(UNKNOWN_MEMBER_ID) and rejoin with epoch 0.
"""

from __future__ import annotations

import logging
import uuid

import trio

from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.groups")

TP = tuple[str, int]


class ShareMember:
    def __init__(self, member_id: str, rack_id: str | None, client_id: str, client_host: str) -> None:
        self.member_id = member_id
        self.rack_id = rack_id
        self.client_id = client_id
        self.client_host = client_host
        self.member_epoch = 0
        self.subscribed_topics: list[str] = []
        self.assigned: frozenset[TP] = frozenset()
        self.last_sent: frozenset[TP] | None = None
        self.session_deadline = 0.0


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, frozenset[TP]] = {}
        self.subscription_metadata: dict[str, int] = {}

    @property
    def state(self) -> str:
        if not self.members:
            return "Empty"
        return "Stable"


def simple_assign(members: dict[str, set[str]], partitions: dict[str, int]) -> dict[str, frozenset[TP]]:
    """members: member id -> subscribed topics; partitions: topic -> partition count."""
    out: dict[str, set[TP]] = {m: set() for m in members}
    for topic in sorted(partitions):
        subs = sorted(m for m, topics in members.items() if topic in topics)
        n = partitions[topic]
        if not subs or n == 0:
            continue
        if len(subs) <= n:
            for p in range(n):
                out[subs[p % len(subs)]].add((topic, p))
        else:
            for i, m in enumerate(subs):
                out[m].add((topic, i % n))
    return {m: frozenset(tps) for m, tps in out.items()}


class ShareGroupCoordinator:
    """KIP-932 group logic; `GroupCoordinator` owns it and its timers."""

    def __init__(self, owner) -> None:
        self.owner = owner
        cfg = owner.config
        self.enabled = cfg.get_bool("group.share.enable")
        self.max_size = cfg.get_int("group.share.max.size")
        self.groups: dict[str, ShareGroup] = {}
        self.on_member_left = None  # callable(group_id, member_id): releases its records on this broker

    def session_timeout_ms(self, group_id: str) -> int:
        return self.owner.group_config(group_id, "share.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.owner.group_config(group_id, "share.heartbeat.interval.ms")

    def _topics(self) -> dict[str, int]:
        return {
            name: len(t.partitions)
            for name, t in self.owner.controller.image.topics.items()
            if not name.startswith("__")
        }

    def topic_ids(self) -> dict[str, uuid.UUID]:
        return {name: t.topic_id for name, t in self.owner.controller.image.topics.items()}

    def _subscribed_partitions(self, group: ShareGroup) -> dict[str, int]:
        topics = self._topics()
        wanted = {t for m in group.members.values() for t in m.subscribed_topics}
        return {t: n for t, n in topics.items() if t in wanted}

    def _bump(self, group: ShareGroup, reason: str) -> None:
        group.group_epoch += 1
        log.info(
            "share group %s: epoch %d (%s)",
            group.group_id,
            group.group_epoch,
            reason,
            extra=fields(group=group.group_id),
        )

    def _compute_target(self, group: ShareGroup) -> None:
        if group.assignment_epoch >= group.group_epoch:
            return
        partitions = self._subscribed_partitions(group)
        group.subscription_metadata = partitions
        group.target = simple_assign({mid: set(m.subscribed_topics) for mid, m in group.members.items()}, partitions)
        group.assignment_epoch = group.group_epoch

    def _remove(self, group: ShareGroup, member_id: str, reason: str) -> None:
        if group.members.pop(member_id, None) is None:
            return
        group.target.pop(member_id, None)
        log.info(
            "share group %s: member %s removed (%s)",
            group.group_id,
            member_id,
            reason,
            extra=fields(group=group.group_id),
        )
        self._bump(group, f"member {member_id} left")
        self._compute_target(group)
        if self.on_member_left is not None:
            self.on_member_left(group.group_id, member_id)

    def offsets_check(self, gid: str, need_empty: bool) -> tuple[int, str | None]:
        """Whether this coordinator may describe (or, `need_empty`, alter or delete) the share
        offsets of group `gid`: (error code, message)."""
        owner = self.owner
        code = owner.check_coordinator(gid)
        if code:
            return code, None
        if not gid:
            return ErrorCode.INVALID_REQUEST, "GroupId can't be empty"
        classic = owner.groups.get(gid)
        if (classic is not None and classic.members) or gid in owner.consumer.groups:
            return ErrorCode.GROUP_ID_NOT_FOUND, f"group {gid!r} is not a share group"
        group = self.groups.get(gid)
        if need_empty and group is not None and group.members:
            return ErrorCode.NON_EMPTY_GROUP, (
                f"share group {gid!r} has {len(group.members)} member(s): its offsets change only while it is empty"
            )
        return ErrorCode.NONE, None

    def note_group(self, gid: str) -> None:
        """An (empty) share group exists from its first offsets change (AlterShareGroupOffsets)."""
        self.groups.setdefault(gid, ShareGroup(gid))

    def heartbeat(self, req, client_id: str, client_host: str) -> dict:
        owner = self.owner
        gid = req.group_id
        code = owner.check_coordinator(gid)
        if code:
            return {"error": code}
        if not gid:
            return {"error": ErrorCode.INVALID_REQUEST, "message": "GroupId can't be empty"}
        if not req.member_id:
            return {"error": ErrorCode.INVALID_REQUEST, "message": "MemberId can't be empty"}
        classic = owner.groups.get(gid)
        if (classic is not None and classic.members) or gid in owner.consumer.groups:
            return {
                "error": ErrorCode.GROUP_ID_NOT_FOUND,
                "message": f"group {gid!r} is a {'classic' if classic is not None else 'consumer'} group, "
                f"not a share group",
            }
        now = trio.current_time()
        group = self.groups.get(gid)
        epoch, member_id = req.member_epoch, req.member_id
        if epoch == 0:
            if req.subscribed_topic_names is None and (group is None or member_id not in group.members):
                return {"error": ErrorCode.INVALID_REQUEST, "message": "SubscribedTopicNames must be set when joining"}
            if group is None:
                group = self.groups[gid] = ShareGroup(gid)
            m = group.members.get(member_id)
            if m is None:
                if len(group.members) >= self.max_size:
                    return {
                        "error": ErrorCode.GROUP_MAX_SIZE_REACHED,
                        "message": f"share group {gid} has {len(group.members)} members "
                        f"(group.share.max.size={self.max_size})",
                    }
                m = group.members[member_id] = ShareMember(member_id, req.rack_id, client_id, client_host)
                self._bump(group, f"member {member_id} joined")
            m.last_sent = None
        elif epoch == -1:
            if group is None or member_id not in group.members:
                return {
                    "error": ErrorCode.UNKNOWN_MEMBER_ID,
                    "message": f"member {member_id} is not in share group {gid}",
                }
            self._remove(group, member_id, "left the group")
            return {"error": ErrorCode.NONE, "member_id": member_id, "member_epoch": -1}
        else:
            m = group.members.get(member_id) if group is not None else None
            if m is None:
                return {
                    "error": ErrorCode.UNKNOWN_MEMBER_ID,
                    "message": f"member {member_id} is not in share group {gid}",
                }
            if epoch > m.member_epoch or epoch < 0:
                return {
                    "error": ErrorCode.FENCED_MEMBER_EPOCH,
                    "message": f"member {member_id} sent epoch {epoch}, its epoch is {m.member_epoch}",
                }
        assert group is not None
        if req.subscribed_topic_names is not None and sorted(req.subscribed_topic_names) != sorted(m.subscribed_topics):
            m.subscribed_topics = sorted(set(req.subscribed_topic_names))
            self._bump(group, f"member {member_id} subscribed to {m.subscribed_topics}")
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        m.session_deadline = now + self.session_timeout_ms(gid) / 1000
        if (
            self._subscribed_partitions(group) != group.subscription_metadata
            and group.assignment_epoch >= group.group_epoch
        ):
            self._bump(group, "subscribed topics changed")
        self._compute_target(group)
        m.assigned = group.target.get(member_id, frozenset())
        m.member_epoch = group.assignment_epoch
        owner.wake()
        out = {
            "error": ErrorCode.NONE,
            "member_id": member_id,
            "member_epoch": m.member_epoch,
            "heartbeat_interval_ms": self.heartbeat_interval_ms(gid),
        }
        if m.last_sent != m.assigned:
            m.last_sent = m.assigned
            out["assignment"] = m.assigned
        return out

    # --- timers -----------------------------------------------------------------------

    def deadlines(self) -> list[float]:
        return [m.session_deadline for g in self.groups.values() for m in g.members.values()]

    def expire(self, now: float) -> None:
        for g in list(self.groups.values()):
            for m in list(g.members.values()):
                if m.session_deadline <= now:
                    self._remove(
                        g,
                        m.member_id,
                        f"no heartbeat for share.session.timeout.ms={self.session_timeout_ms(g.group_id)}",
                    )

    def unload(self, group_ids: list[str]) -> None:
        for g in group_ids:
            self.groups.pop(g, None)
