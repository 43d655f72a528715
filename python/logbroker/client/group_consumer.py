"""KIP-848 consumer-group membership from the member's side (`group.protocol=consumer`):
the broker computes the assignment; the member heartbeats (ConsumerGroupHeartbeat) and
reconciles what it owns towards what the broker sends, one partition set at a time.

# State machine (`ConsumerGroupMembership.state`)
    unjoined --(heartbeat, epoch 0)--> joining --(response)--> stable
    stable: heartbeat every heartbeat interval the broker gives; each response may carry a
            new assignment -> reconcile
    reconcile: partitions owned but no longer assigned are revoked first (the application's
               on_revoke runs at its next poll() when registered; auto-commit commits their
               positions), then newly assigned ones are added (on_assign); the next
               heartbeat, sent at once, reports what the member owns so the broker can give
               revoked partitions to others. Partitions kept are never interrupted:
               rebalances are incremental (cooperative), not eager.
    UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: every partition is lost (on_revoke, nothing
               committed) and the member rejoins with epoch 0 and the same member id.
    leave: a heartbeat with epoch -1 (-2 for a static member, which keeps its place for
           the session timeout).
    Fatal errors (UNSUPPORTED_VERSION, GROUP_MAX_SIZE_REACHED, UNRELEASED_INSTANCE_ID,
    UNSUPPORTED_ASSIGNOR, INVALID_REQUEST, GROUP_ID_NOT_FOUND for a classic group in use)
    stop the membership and are raised by the next poll().

# Request fields
The member id is generated here (KIP-1082, required from version 1) and kept for the
consumer's life; at version 0 the broker's id is adopted. Subscribed topic names are
always sent (topic patterns are matched on the client, as for classic groups, and sent as
names); the rebalance timeout (max.poll.interval.ms) and instance id go with joins; the
owned partitions (topic ids from metadata) go with joins, after every reconciliation and
after a failed heartbeat, which also makes the broker resend the full assignment.
"""

from __future__ import annotations

import base64
import logging
import uuid
from typing import Any

from logbroker.client.errors import error_for
from logbroker.client.group import CoordinatorLink, MemberHost, TopicPartition
from logbroker.client.network import Pending, Versioned
from logbroker.protocol import ErrorCode
from logbroker.protocol.messages.consumer_group_heartbeat_request import _ConsumerGroupHeartbeatRequest

__all__ = ["CONSUMER_GROUP_HEARTBEAT", "ConsumerGroupMembership"]

log = logging.getLogger("logbroker.client")

CONSUMER_GROUP_HEARTBEAT = 68
_FENCED = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH}
_COORDINATOR = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
_FATAL = {
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.GROUP_MAX_SIZE_REACHED,
    ErrorCode.UNRELEASED_INSTANCE_ID,
    ErrorCode.UNSUPPORTED_ASSIGNOR,
    ErrorCode.INVALID_REQUEST,
    ErrorCode.GROUP_ID_NOT_FOUND,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
}


class ConsumerGroupMembership(CoordinatorLink):
    """One member of a KIP-848 consumer group (see the module docstring)."""

    core: MemberHost

    def __init__(self, core: MemberHost, group_id: str) -> None:
        super().__init__(core, group_id)
        cfg = core.config
        self.rebalance_timeout_ms: int = cfg["max.poll.interval.ms"]
        self.server_assignor: str | None = cfg["group.remote.assignor"]
        self.heartbeat_interval = 5.0  # until the broker says otherwise
        self.state = "unjoined"
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.epoch = 0
        self.subscribed: list[str] = []
        self.active = False
        self.next_heartbeat = 0.0
        self._in_flight = False
        self._send_owned = True
        self._target: set[TopicPartition] | None = None
        self._target_ids: list[Any] | None = None
        self._reconciling = False

    @property
    def generation(self) -> int:
        """The member epoch, for OffsetCommit (-1 while not a member)."""
        return self.epoch if self.epoch > 0 and self.state != "unjoined" else -1

    # -- what the consumer core calls ---------------------------------------------------

    def subscribe(self, topics: list[str]) -> None:
        self.active = True
        topics = sorted(topics)
        if topics != self.subscribed:
            self.subscribed = topics
            self.next_heartbeat = self.core.now
            self.core.wake()

    def request_rejoin(self) -> None:
        """Heartbeat at once (after a poll timeout the member joins again with epoch 0)."""
        self.next_heartbeat = self.core.now
        self.core.wake()

    def tick(self, now: float) -> None:
        if not self.active or self.core.poll_expired or self.state == "fatal":
            return
        if self._target_ids is not None:
            self._resolve_target()
        if self.coordinator is None:
            self.ensure_coordinator()
            return
        if not self._in_flight and now >= self.next_heartbeat and now >= self._retry_at:
            self._heartbeat()

    def deadline(self) -> float | None:
        if not self.active or self.core.poll_expired or self._in_flight or self.state == "fatal":
            return None
        return max(self.next_heartbeat, self._retry_at)

    def leave(self) -> Pending[Any]:
        """Leaves the group (epoch -1, or -2 for a static member), best effort."""
        self.active = False
        return self._leave()

    def leave_on_poll_timeout(self) -> None:
        self._leave().add_callback(lambda p: None)

    def _unjoin(self) -> None:
        """Back to epoch 0 with nothing reconciled (the member id is kept)."""
        self.state, self.epoch = "unjoined", 0
        self._target, self._target_ids, self._send_owned = None, None, True

    def _leave(self) -> Pending[Any]:
        joined = self.state != "unjoined" and self.epoch > 0
        self._unjoin()
        if self.coordinator is None or not joined:
            return Pending.of(None)
        leave_epoch = -2 if self.instance_id is not None else -1
        return self.core.net.request(self.coordinator, self._request(leave_epoch, owned=None), timeout=5.0)

    # -- heartbeats ---------------------------------------------------------------------

    def _request(self, epoch: int, owned: set[TopicPartition] | None) -> Versioned:
        cls = _ConsumerGroupHeartbeatRequest
        joining = epoch == 0
        partitions = None
        if owned is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in sorted(owned):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            partitions = [
                cls.TopicPartitions(topic_id=self.core.metadata.topics[t].topic_id, partitions=ps)
                for t, ps in by_topic.items()
                if t in self.core.metadata.topics
            ]
        member_id = self.member_id

        def build(v: int) -> Any:
            return cls(
                group_id=self.group_id,
                member_id=member_id if (v >= 1 or not joining) else "",
                member_epoch=epoch,
                instance_id=self.instance_id,
                rebalance_timeout_ms=self.rebalance_timeout_ms if joining else -1,
                subscribed_topic_names=list(self.subscribed) if epoch >= 0 else None,
                server_assignor=self.server_assignor,
                topic_partitions=partitions,
            )

        return Versioned(CONSUMER_GROUP_HEARTBEAT, build)

    def _heartbeat(self) -> None:
        joining = self.state == "unjoined"
        epoch = 0 if joining else self.epoch
        if joining:
            self.state = "joining"
        owned: set[TopicPartition] | None = None  # None: unchanged since the last report
        if joining:
            owned = set()
        elif self._send_owned:
            owned = set(self.core.assignment)
        self._send_owned = False
        self._in_flight = True
        self.next_heartbeat = self.core.now + self.heartbeat_interval
        assert self.coordinator is not None
        self.core.net.request(self.coordinator, self._request(epoch, owned)).add_callback(
            lambda p: self._on_heartbeat(p, epoch)
        )

    def _on_heartbeat(self, p: Pending[Any], sent_epoch: int) -> None:
        self._in_flight = False
        if not self.active or self.state == "unjoined" and sent_epoch != 0:
            return
        if p.error is not None:
            self._retry(coordinator_lost=True, rejoin=self.state == "joining")
            return
        r = p._value
        code = r.error_code
        what = f"ConsumerGroupHeartbeat of group {self.group_id!r}"
        if code in _FENCED:
            log.info(
                "consumer of group %r: %s (%s); giving up %d partition(s) and rejoining",
                self.group_id,
                ErrorCode(code).name,
                r.error_message,
                len(self.core.assignment),
            )
            self.core.lose_partitions()
            self._unjoin()
            self.next_heartbeat = self.core.now
            self.core.wake()
            return
        if code in _COORDINATOR:
            self._retry(coordinator_lost=code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, rejoin=self.state == "joining")
            return
        if code:
            err = error_for(code, r.error_message, what)
            if code in _FATAL:
                log.error("consumer of group %r: %s; the membership stops", self.group_id, err)
                self.state = "fatal"
                self.core.errors.append(err)
                self.core.notify()
                return
            self.last_error = err
            self._retry(coordinator_lost=False, rejoin=self.state == "joining")
            return
        if r.member_id:
            self.member_id = r.member_id
        self.epoch = r.member_epoch
        if r.heartbeat_interval_ms > 0:
            self.heartbeat_interval = r.heartbeat_interval_ms / 1000
            self.next_heartbeat = min(self.next_heartbeat, self.core.now + self.heartbeat_interval)
        if self.state == "joining":
            self.state = "stable"
        if r.assignment is not None:
            self._target_ids = [(t.topic_id, list(t.partitions)) for t in r.assignment.topic_partitions]
            self._resolve_target()
        self.core.wake()

    def _retry(self, coordinator_lost: bool, rejoin: bool) -> None:
        if coordinator_lost:
            self.coordinator_lost()
        self._send_owned = True
        if rejoin:
            self.state = "unjoined"
        self._retry_at = self.core.now + self.backoff
        self.next_heartbeat = self._retry_at
        self.core.wake()

    # -- reconciliation -----------------------------------------------------------------

    def _resolve_target(self) -> None:
        """Turns the topic ids of the last assignment into names (metadata), then reconciles."""
        assert self._target_ids is not None
        names = {m.topic_id: name for name, m in self.core.metadata.topics.items() if m.topic_id is not None}
        unknown = [tid for tid, _ in self._target_ids if tid not in names]
        if unknown:
            self.core.metadata.all_topics = True
            self.core.request_metadata_update()
            return
        self._target = {TopicPartition(names[tid], p) for tid, ps in self._target_ids for p in ps}
        self._target_ids = None
        self.core.want_topics({tp.topic for tp in self._target})
        self._reconcile()

    def _reconcile(self) -> None:
        if self._reconciling or self._target is None or self.state not in ("stable", "joining"):
            return
        owned = set(self.core.assignment)
        revoke = owned - self._target
        add = self._target - owned
        if revoke:
            self._reconciling = True

            def revoked() -> None:
                self._reconciling = False
                self._acknowledge()
                self._reconcile()

            self.core.revoke_partitions(sorted(revoke), revoked)
        elif add:
            self.core.add_partitions(sorted(add))
            self._acknowledge()

    def _acknowledge(self) -> None:
        """Tell the broker what we own now, at once."""
        self._send_owned = True
        self.next_heartbeat = self.core.now
        self.core.wake()
