"""The share consumer's sans-I/O core (KIP-932 share groups): membership by
ShareGroupHeartbeat, one share session per partition leader, ShareFetch and
ShareAcknowledge, and the hand-off of acquired records to `poll()` (client/share.py).

# Membership (`ShareGroupMembership.state`)
    unjoined --(heartbeat, epoch 0, subscribed topic names)--> joining --(response)--> stable
    stable: heartbeat every interval the broker gives (ShareGroupHeartbeat); a response
            may carry a new assignment (topic ids -> partitions, named through Metadata),
            which replaces the old one at once: share groups have no revocation protocol,
            partitions are shared, and records already acquired stay ours until their
            acquisition lock runs out or we acknowledge them.
    UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH: the assignment is dropped and the member
            rejoins with epoch 0 and the same member id (generated here, as Kafka 4.x does).
    leave (close, unsubscribe): a heartbeat with epoch -1.
    Fatal errors (authorization, UNSUPPORTED_VERSION, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED,
    GROUP_ID_NOT_FOUND for a group of another type) stop the membership; poll() raises them.

# Share sessions (`_Session`, one per leader node)
    epoch 0 opens a session naming every partition we fetch from that node; each later
    request carries the next epoch (1, 2, ... wrapping to 1) and names only partitions added
    (or acknowledged), dropping the others in ForgottenTopicsData; -1 (ShareAcknowledge on
    close) closes it, and the broker hands back what we still hold. SHARE_SESSION_NOT_FOUND,
    INVALID_SHARE_SESSION_EPOCH, a lost connection: the session starts again at epoch 0.
    Invariant: at most one request (ShareFetch or ShareAcknowledge) is in flight per node,
    so epochs are used in order.

# Fetching
    As in Kafka's client, a poll() served from records already fetched does not fetch;
    one that finds none calls `polled()`, after which the leaders are fetched from (long
    polls, again and again) until a response acquires records. So a member that stops
    polling holds only what it was handed, and nothing is acquired on its behalf
    meanwhile; nor is a node fetched from while records it gave still wait in the hand-off
    queue (`ready`). A ShareFetch asks for max.poll.records records; the broker answers
    whole batches plus AcquiredRecords ranges and the Rust decoder keeps only the acquired
    offsets (`RecordSet.take_acquired`), each carrying its delivery count. Acquired offsets with no record (control records,
    compaction) are acknowledged as GAP with the next request.

# Acknowledgements
    The application's acknowledgements (client/share.py turns a poll's records into ACCEPTs
    in implicit mode) reach the core in one of three ways:
    - `polled(acks)`: they ride on the next ShareFetch to the partition's leader (or go in a
      ShareAcknowledge at once when that partition is no longer fetched from that node);
      their results are reported to the acknowledgement commit callback.
    - `acknowledge_async(acks)` (a poll served from the hand-off queue): ShareAcknowledge,
      results to the acknowledgement commit callback.
    - `commit(acks)` (commit_sync / commit_async): a ShareAcknowledge per leader as
      soon as the node has nothing in flight; the results, per partition (None or the
      error), resolve the returned Pending.
    `close_share(acks)` sends the last ones in the closing ShareAcknowledge (epoch -1).
    Acknowledgements need an open session: ones for a node whose session is gone fail with
    SHARE_SESSION_NOT_FOUND (their records come back to the group when their locks run out).
    Leadership errors (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_ID, ...)
    refresh metadata; partitions then go to their new leader's session.

# Threads
    Everything here runs in the I/O loop (driver thread or async task) except
    `take_records()`, `ready`, `errors`, `ack_results` and `callbacks`, which the
    application side pops from (deques: one side appends, the other pops).
"""

from __future__ import annotations

import base64
import collections
import enum
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from logbroker import _core
from logbroker.client.core import ClientCore
from logbroker.client.errors import KafkaError, KafkaTimeoutError, error_for
from logbroker.client.group import CoordinatorLink, TopicPartition
from logbroker.client.network import Pending, Versioned
from logbroker.protocol import LOGBROKER_TAG, ErrorCode
from logbroker.protocol.messages.share_acknowledge_request import ShareAcknowledgeRequest
from logbroker.protocol.messages.share_fetch_request import ShareFetchRequest
from logbroker.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest

__all__ = [
    "AckMap",
    "AckResults",
    "AcknowledgeType",
    "IllegalStateError",
    "ShareConsumerCore",
    "ShareGroupMembership",
]

log = logging.getLogger("logbroker.client")

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
GAP = 0
MAX_EPOCH = 2**31 - 1
FINAL_EPOCH = -1

AckMap = dict[TopicPartition, dict[int, int | tuple[int, int]]]  # type, or (RELEASE, back-off ms)


def split_renews(acks: AckMap) -> AckMap:
    """Takes the RENEW acknowledgements out of `acks` (in place) and returns them."""
    out: AckMap = {}
    for tp, offsets in list(acks.items()):
        renew: dict[int, int | tuple[int, int]] = {o: t for o, t in offsets.items() if t == AcknowledgeType.RENEW}
        if renew:
            out[tp] = renew
            for o in renew:
                del offsets[o]
            if not offsets:
                del acks[tp]
    return out


def has_renew(acks: AckMap) -> bool:
    """Whether any acknowledgement is a RENEW (the request's IsRenewAck, v2)."""
    return any(t == AcknowledgeType.RENEW for offsets in acks.values() for t in offsets.values())


"""Acknowledgements: {partition: {offset: acknowledge type}}."""
AckResults = dict[TopicPartition, KafkaError | None]
"""What became of acknowledgements, per partition: None (done) or the error."""


class AcknowledgeType(enum.IntEnum):
    """How a record delivered by a share group is acknowledged (Kafka's AcknowledgeType)."""

    ACCEPT = 1
    """Processed: never delivered again."""
    RELEASE = 2
    """Not processed: delivered again (to any member), with a higher delivery count."""
    REJECT = 3
    """Unprocessable: never delivered again (archived)."""
    RENEW = 4
    """Still being processed: the lock is extended by another lock duration (KIP-1222; the
    record stays this member's, to be acknowledged later)."""


class IllegalStateError(KafkaError):
    """The call does not fit the share consumer's state, as Kafka's IllegalStateException:
    poll() in explicit mode with records of the last poll unacknowledged, acknowledge() in
    implicit mode or of a record not from the last poll (or acknowledged already)."""


_FENCED = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH}
_COORDINATOR = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
_FATAL = {
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.GROUP_MAX_SIZE_REACHED,
    ErrorCode.INVALID_REQUEST,
    ErrorCode.GROUP_ID_NOT_FOUND,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
}
_LEADERSHIP = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.REPLICA_NOT_AVAILABLE,
}


def ack_batches(acks: dict[int, int | tuple[int, int]], cls: Any) -> list[Any]:
    """`acks` ({offset: type, or (RELEASE, back-off ms)}) as AcknowledgementBatch entries of
    `cls`: one per run of consecutive offsets with the same type (and back-off), ascending."""
    out: list[Any] = []
    first: int | None = None
    last: int | None = None
    kind: int | tuple[int, int] | None = None

    def batch(first: int | None, last: int | None, kind: int | tuple[int, int] | None) -> Any:
        assert first is not None and last is not None and kind is not None
        if isinstance(kind, tuple):
            t, delay = kind
            return cls(
                first_offset=first,
                last_offset=last,
                acknowledge_types=[t],
                unknown_tagged_fields={LOGBROKER_TAG: int(delay).to_bytes(4, "big", signed=True)},  # the back-off
            )
        return cls(first_offset=first, last_offset=last, acknowledge_types=[kind])

    for off in sorted(acks):
        t = acks[off]
        if last is not None and off == last + 1 and t == kind:
            last = off
            continue
        if first is not None:
            out.append(batch(first, last, kind))
        first = last = off
        kind = t
    if first is not None:
        out.append(batch(first, last, kind))
    return out


def merge_acks(into: AckMap, acks: AckMap) -> None:
    for tp, offsets in acks.items():
        into.setdefault(tp, {}).update(offsets)


# -- membership -----------------------------------------------------------------------


class ShareGroupMembership(CoordinatorLink):
    """One member of a share group (see the module docstring); finds its coordinator as
    every group member does (CoordinatorLink)."""

    core: ShareConsumerCore

    def __init__(self, core: ShareConsumerCore, group_id: str) -> None:
        super().__init__(core, group_id)
        self.member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self.epoch = 0
        self.state = "unjoined"
        self.subscribed: list[str] = []
        self.active = False
        self.heartbeat_interval = 5.0  # until the broker says otherwise
        self.next_heartbeat = 0.0
        self._in_flight = False
        self._send_topics = True
        self._target_ids: list[tuple[Any, list[int]]] | None = None

    def subscribe(self, topics: list[str]) -> None:
        self.active = True
        topics = sorted(set(topics))
        if topics != self.subscribed or self.state == "unjoined":
            self.subscribed = topics
            self._send_topics = True
            self.next_heartbeat = self.core.now
            self.core.wake()

    def tick(self, now: float) -> None:
        if not self.active or self.state == "fatal":
            return
        if self._target_ids is not None:
            self._resolve_target()
        if self.coordinator is None:
            if not self._finding and now >= self._retry_at:  # else a lookup or its retry timer is pending
                self._find()
        elif not self._in_flight and now >= self.next_heartbeat and now >= self._retry_at:
            self._heartbeat()

    def deadline(self) -> float | None:
        if not self.active or self._in_flight or self.state == "fatal" or self._finding:
            return None
        return max(self.next_heartbeat, self._retry_at)

    # -- heartbeats ---------------------------------------------------------------------

    def _request(self, epoch: int) -> Versioned:
        topics = list(self.subscribed) if (epoch == 0 or self._send_topics) and epoch >= 0 else None
        member_id, group_id = self.member_id, self.group_id
        return Versioned(
            SHARE_GROUP_HEARTBEAT,
            lambda v: ShareGroupHeartbeatRequest(
                group_id=group_id, member_id=member_id, member_epoch=epoch, rack_id=None, subscribed_topic_names=topics
            ),
        )

    def _heartbeat(self) -> None:
        if self.state == "unjoined":
            self.state = "joining"
        epoch = 0 if self.state == "joining" else self.epoch
        req = self._request(epoch)
        self._send_topics = False
        self._in_flight = True
        self.next_heartbeat = self.core.now + self.heartbeat_interval
        assert self.coordinator is not None
        self.core.net.request(self.coordinator, req).add_callback(lambda p: self._on_heartbeat(p, epoch))

    def _on_heartbeat(self, p: Pending[Any], sent_epoch: int) -> None:
        self._in_flight = False
        if not self.active:
            return
        if p.error is not None:
            self._retry(coordinator_lost=True)
            return
        r = p._value
        code = r.error_code
        if code in _FENCED:
            log.info(
                "share consumer of group %r: %s (%s); rejoining", self.group_id, ErrorCode(code).name, r.error_message
            )
            self.core.set_assignment(set())
            self._rejoin()
            return
        if code in _COORDINATOR:
            self._retry(coordinator_lost=code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            return
        if code:
            err = error_for(code, r.error_message, f"ShareGroupHeartbeat of group {self.group_id!r}")
            if code in _FATAL:
                log.error("share consumer of group %r: %s; the membership stops", self.group_id, err)
                self.state = "fatal"
                self.core.fail(err)
                return
            self.last_error = err
            self._retry(coordinator_lost=False)
            return
        if r.member_id:
            self.member_id = r.member_id
        self.epoch = r.member_epoch
        if self.state == "joining":
            self.state = "stable"
        if r.heartbeat_interval_ms > 0:
            self.heartbeat_interval = r.heartbeat_interval_ms / 1000
            self.next_heartbeat = min(self.next_heartbeat, self.core.now + self.heartbeat_interval)
        if r.assignment is not None:
            self._target_ids = [(t.topic_id, list(t.partitions)) for t in r.assignment.topic_partitions]
            self._resolve_target()
        self.core.wake()

    def _rejoin(self) -> None:
        self.state, self.epoch = "unjoined", 0
        self._send_topics = True
        self.next_heartbeat = self.core.now
        self.core.wake()

    def _retry(self, coordinator_lost: bool) -> None:
        if coordinator_lost:
            self.coordinator_lost()
        if self.state == "joining":
            self.state = "unjoined"
            self._send_topics = True
        self._retry_at = self.core.now + self.backoff
        self.next_heartbeat = self._retry_at
        self.core.call_at(self._retry_at, self.core.wake)

    def _resolve_target(self) -> None:
        """Names the last assignment's topic ids (metadata), then hands it to the core."""
        assert self._target_ids is not None
        names = self.core.topic_names()
        if any(tid not in names for tid, _ in self._target_ids):
            self.core.metadata.all_topics = True
            self.core.request_metadata_update()
            return
        target = {TopicPartition(names[tid], p) for tid, ps in self._target_ids for p in ps}
        self._target_ids = None
        self.core.set_assignment(target)

    def leave(self) -> Pending[Any]:
        """Leaves the group (a heartbeat with epoch -1), best effort."""
        joined = self.active and self.state == "stable" and self.coordinator is not None
        self.active = False
        self.state, self.epoch = "unjoined", 0
        self._target_ids = None
        if not joined:
            return Pending.of(None)
        assert self.coordinator is not None
        return self.core.net.request(self.coordinator, self._request(-1), timeout=5.0)


# -- the core -------------------------------------------------------------------------


@dataclass
class _Session:
    """A share session with one leader (see the module docstring)."""

    epoch: int = 0
    members: set[TopicPartition] = field(default_factory=set)

    def advance(self) -> None:
        self.epoch = 1 if self.epoch >= MAX_EPOCH else self.epoch + 1

    def reset(self) -> None:
        self.epoch = 0
        self.members = set()


class _Chunk:
    """Acquired records of one partition waiting for `poll()`."""

    __slots__ = ("pos", "records", "tp")

    def __init__(self, tp: TopicPartition, records: list[_core.ConsumerRecord]) -> None:
        self.tp = tp
        self.records = records
        self.pos = 0


class _Commit:
    """Acknowledgements on their way in ShareAcknowledge requests; `done` gets the results
    (None: they go to the acknowledgement commit callback)."""

    def __init__(self, acks: AckMap, done: Pending[AckResults] | None, deadline: float) -> None:
        self.acks = {tp: offs for tp, offs in acks.items() if offs}
        self.done = done
        self.deadline = deadline
        self.results: AckResults = {}
        self.outstanding = 0


class ShareConsumerCore(ClientCore):
    """The share consumer state machine (see the module docstring)."""

    def __init__(self, config: dict[str, Any], waker: _core.Waker | None = None) -> None:
        super().__init__(config, waker)
        self.group_id: str = config["group.id"]
        self.group = ShareGroupMembership(self, self.group_id)
        self.assignment: set[TopicPartition] = set()
        self.ready: collections.deque[_Chunk] = collections.deque()
        self.errors: collections.deque[BaseException] = collections.deque()
        self.ack_results: collections.deque[AckResults] = collections.deque()
        self.callbacks: collections.deque[tuple[Callable[[AckResults], object] | None, AckResults]] = (
            collections.deque()
        )
        self.notify: Callable[[], None] = lambda: None
        self.closing = False
        self.max_records: int = config["max.poll.records"]
        # ShareFetch's ShareAcquireMode (v2, KIP-1206): 0 batch-optimized, 1 record-limit
        self.acquire_mode = 1 if config["share.acquire.mode"] == "record_limit" else 0
        self.check_crcs = bool(config["check.crcs"])
        self._sessions: dict[int, _Session] = {}
        self._busy: set[int] = set()
        self._fetch_acks: AckMap = {}
        self._commits: list[_Commit] = []
        self._want_fetch = False
        self._node_retry: dict[int, float] = {}

    # -- what the application side calls (through the driver) ---------------------------

    def subscribe(self, topics: list[str]) -> None:
        self.want_topics(topics)
        self.group.subscribe(topics)

    def unsubscribe(self) -> Pending[Any]:
        self.set_assignment(set())
        p = self.group.leave()
        self.group.subscribed = []
        return p

    def polled(self, acks: AckMap) -> None:
        """The application polled: `acks` (its acknowledgements so far) ride on the next
        fetches, and each leader may be fetched from once more. RENEWs go in ShareAcknowledge
        requests of their own: a ShareFetch with IsRenewAck fetches nothing (KIP-1222)."""
        renews = split_renews(acks)
        if renews:
            self.acknowledge_async(renews)
        merge_acks(self._fetch_acks, acks)
        self._want_fetch = True
        self.wake()

    def acknowledge_async(self, acks: AckMap) -> None:
        """Sends `acks` in ShareAcknowledge requests without fetching (a poll served from
        records already fetched); the results go to the acknowledgement commit callback."""
        c = _Commit(acks, None, self.now + self.net.request_timeout)
        if c.acks:
            self._commits.append(c)
            self.call_at(c.deadline, self._expire_commits)
            self.wake()

    def commit(self, acks: AckMap, timeout: float) -> Pending[AckResults]:
        """Sends `acks` in ShareAcknowledge requests; resolves with the result per partition."""
        p: Pending[AckResults] = Pending()
        c = _Commit(acks, p, self.now + timeout)
        if not c.acks:
            p.resolve({})
            return p
        self._commits.append(c)
        self.call_at(c.deadline, self._expire_commits)
        self.wake()
        return p

    def close_share(self, acks: AckMap, timeout: float) -> Pending[Any]:
        """Closes every share session (ShareAcknowledge with epoch -1, carrying `acks` and
        whatever was waiting to ride on a fetch), then leaves the group."""
        self.closing = True
        merge_acks(self._fetch_acks, acks)
        done: Pending[Any] = Pending()
        deadline = self.now + timeout
        sent: set[int] = set()

        def step() -> None:
            if done.done():
                return
            for node, s in list(self._sessions.items()):
                if node in sent or node in self._busy:
                    continue  # closing, or a fetch is still out (its records go back with the close)
                sent.add(node)
                if s.epoch <= 0:
                    del self._sessions[node]
                    continue
                node_acks = {
                    tp: self._fetch_acks.pop(tp) for tp in list(self._fetch_acks) if self.metadata.leader(*tp) == node
                }
                self._send_acknowledge(node, node_acks, None, final=True).add_callback(lambda _p: step())
            if self._sessions and self.now < deadline:
                self.call_at(min(deadline, self.now + 0.05), step)
                return
            self.group.leave().add_callback(lambda _p: done.resolve(None))

        step()
        return done

    def take_records(self, max_records: int) -> list[_core.ConsumerRecord]:
        """Pops up to `max_records` acquired records (application side)."""
        out: list[_core.ConsumerRecord] = []
        ready = self.ready
        while ready and len(out) < max_records:
            c = ready[0]
            n = max_records - len(out)
            out.extend(c.records[c.pos : c.pos + n])
            c.pos += n
            if c.pos >= len(c.records):
                ready.popleft()
        return out

    # -- state the membership drives -----------------------------------------------------

    def set_assignment(self, tps: set[TopicPartition]) -> None:
        if tps != self.assignment:
            log.debug("share consumer of group %r: assignment %s", self.group_id, sorted(tps))
            self.assignment = tps
            self.want_topics({tp.topic for tp in tps})
            self.wake()

    def fail(self, err: BaseException) -> None:
        self.errors.append(err)
        self.notify()

    def topic_names(self) -> dict[Any, str]:
        return {m.topic_id: name for name, m in self.metadata.topics.items() if m.topic_id is not None}

    def on_auth_error(self, err: Any) -> None:
        super().on_auth_error(err)
        self.fail(err)

    # -- the loop -----------------------------------------------------------------------

    def _tick(self, now: float) -> None:
        self.group.tick(now)
        if self.closing:
            return
        self._send_commits()
        self._send_fetches()

    def _deadline(self) -> float | None:
        return self.group.deadline()

    def _topic_id(self, topic: str) -> Any:
        t = self.metadata.topics.get(topic)
        return None if t is None else t.topic_id

    def _node_free(self, node: int) -> bool:
        return node not in self._busy and self._node_retry.get(node, 0.0) <= self.now

    def _wanted_by_node(self) -> dict[int, set[TopicPartition]]:
        out: dict[int, set[TopicPartition]] = {}
        for tp in self.assignment:
            leader = self.metadata.leader(*tp)
            if leader < 0 or self._topic_id(tp.topic) is None:
                self.want_topics({tp.topic})
                self.request_metadata_update()
                continue
            out.setdefault(leader, set()).add(tp)
        return out

    def _send_fetches(self) -> None:
        wanted = self._wanted_by_node()
        # acknowledgements for partitions no longer fetched from their leader go on their own
        stray = {
            tp: offs for tp, offs in self._fetch_acks.items() if tp not in wanted.get(self.metadata.leader(*tp), ())
        }
        if stray:
            for tp in stray:
                del self._fetch_acks[tp]
            self._commits.append(_Commit(stray, None, self.now + self.net.request_timeout))
            self._send_commits()
        if not self._want_fetch or not wanted:
            return
        buffered = {c.tp for c in list(self.ready)}
        for node, tps in wanted.items():
            if not self._node_free(node) or any(tp in buffered for tp in tps):
                continue
            self._send_fetch(node, tps)

    def _send_fetch(self, node: int, want: set[TopicPartition]) -> None:
        s = self._sessions.setdefault(node, _Session())
        cls = ShareFetchRequest
        acks: AckMap = {}
        if s.epoch > 0:  # acknowledgements need an open session
            for tp in want:
                offs = self._fetch_acks.pop(tp, None)
                if offs:
                    acks[tp] = offs
            add = want - s.members
            forget = s.members - want
        else:
            add, forget = set(want), set()
        named = add | set(acks)
        by_topic: dict[str, list[Any]] = {}
        for tp in sorted(named):
            by_topic.setdefault(tp.topic, []).append(
                cls.FetchPartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=ack_batches(acks.get(tp, {}), cls.AcknowledgementBatch),
                )
            )
        forgotten: dict[str, list[int]] = {}
        for tp in sorted(forget):
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        cfg = self.config
        epoch = s.epoch
        req = cls(
            group_id=self.group_id,
            member_id=self.group.member_id,
            share_session_epoch=epoch,
            max_wait_ms=cfg["fetch.max.wait.ms"],
            min_bytes=cfg["fetch.min.bytes"],
            max_bytes=cfg["fetch.max.bytes"],
            max_records=self.max_records,
            batch_size=self.max_records,
            share_acquire_mode=self.acquire_mode,
            topics=[cls.FetchTopic(topic_id=self._topic_id(t), partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[
                cls.ForgottenTopic(topic_id=self._topic_id(t), partitions=ps) for t, ps in forgotten.items()
            ],
        )
        self._busy.add(node)
        timeout = self.net.request_timeout + cfg["fetch.max.wait.ms"] / 1000
        self.net.request(node, req, timeout=timeout).add_callback(
            lambda p: self._on_fetch(node, s, epoch, add, forget, acks, p)
        )

    def _on_fetch(
        self,
        node: int,
        s: _Session,
        epoch: int,
        add: set[TopicPartition],
        forget: set[TopicPartition],
        acks: AckMap,
        p: Pending[Any],
    ) -> None:
        self._busy.discard(node)
        if p.error is not None or p._value.error_code:
            err = (
                p.error
                if p.error is not None
                else error_for(p._value.error_code, p._value.error_message, f"ShareFetch from node {node}")
            )
            self._request_failed(node, s, err, acks, None)
            return
        r = p._value
        if s is self._sessions.get(node):
            s.members = (set() if epoch == 0 else s.members - forget) | add
            s.advance()
        self._learn_endpoints(r)
        names = self.topic_names()
        got = False
        results: AckResults = {}
        for t in r.responses:
            name = names.get(t.topic_id)
            if name is None:
                self.metadata.all_topics = True
                self.request_metadata_update()
                continue
            for part in t.partitions:
                tp = TopicPartition(name, part.partition_index)
                if tp in acks:
                    results[tp] = (
                        error_for(
                            part.acknowledge_error_code,
                            part.acknowledge_error_message,
                            f"acknowledging {name}-{tp.partition}",
                        )
                        if part.acknowledge_error_code
                        else None
                    )
                if part.error_code:
                    self._partition_error(tp, part.error_code, part.error_message)
                    continue
                if part.acquired_records:
                    got |= self._take_acquired(tp, part)
        for tp in acks:
            results.setdefault(tp, None)
        if results:
            self.ack_results.append(results)
            got = True
        if got:
            self.notify()
        self.wake()

    def _take_acquired(self, tp: TopicPartition, part: Any) -> bool:
        acquired = [(a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records]
        try:
            rs = _core.decode_records(tp.topic, tp.partition, part.records, acquired[0][0], self.check_crcs)
        except _core.LogBrokerError as e:
            self.fail(error_for(ErrorCode.CORRUPT_MESSAGE, str(e), f"share fetch from {tp.topic}-{tp.partition}"))
            return True
        records = rs.take_acquired(acquired)
        self._want_fetch = False
        expected = sum(last - first + 1 for first, last, _ in acquired)
        if len(records) < expected:  # acquired offsets without a record: acknowledge as gaps
            present = {r.offset for r in records}
            gaps = self._fetch_acks.setdefault(tp, {})
            for first, last, _ in acquired:
                for off in range(first, last + 1):
                    if off not in present:
                        gaps[off] = GAP
        if not records:
            return False
        self.ready.append(_Chunk(tp, records))
        return True

    def _partition_error(self, tp: TopicPartition, code: int, message: str | None) -> None:
        if code in _LEADERSHIP:
            if code == ErrorCode.UNKNOWN_TOPIC_ID:
                self.metadata.all_topics = True
            self.request_metadata_update()
            return
        err = error_for(code, message, f"share fetch from {tp.topic}-{tp.partition}")
        if not err.retriable:
            self.fail(err)

    def _learn_endpoints(self, r: Any) -> None:
        for e in r.node_endpoints or ():
            self.net.set_address(e.node_id, e.host, e.port)

    def _request_failed(self, node: int, s: _Session, err: BaseException, acks: AckMap, commit: _Commit | None) -> None:
        """A ShareFetch / ShareAcknowledge failed as a whole: its acknowledgements failed;
        the session starts again on session errors and lost connections."""
        code = getattr(err, "code", None)
        if s is self._sessions.get(node):
            s.reset()  # whatever the broker made of it, the next request opens a new session
        if code in _FATAL:
            self.fail(err)
        self.request_metadata_update()
        self._node_retry[node] = self.now + self.config["retry.backoff.ms"] / 1000
        self.call_at(self._node_retry[node], self.wake)
        results: AckResults = {tp: err if isinstance(err, KafkaError) else KafkaError(str(err)) for tp in acks}
        if commit is not None:
            commit.results.update(results)
        elif results:
            self.ack_results.append(results)
            self.notify()
        self.wake()

    # -- ShareAcknowledge ---------------------------------------------------------------

    def _send_commits(self) -> None:
        for c in list(self._commits):
            by_node: dict[int, AckMap] = {}
            for tp, offs in list(c.acks.items()):
                leader = self.metadata.leader(*tp)
                if leader < 0:
                    self.want_topics({tp.topic})
                    self.request_metadata_update()
                    continue
                by_node.setdefault(leader, {})[tp] = offs
            for node, acks in by_node.items():
                if not self._node_free(node):
                    continue
                s = self._sessions.get(node)
                for tp in acks:
                    del c.acks[tp]
                if s is None or s.epoch <= 0:
                    err = error_for(
                        ErrorCode.SHARE_SESSION_NOT_FOUND, "no open share session with the leader", "acknowledging"
                    )
                    c.results.update({tp: err for tp in acks})
                    continue
                c.outstanding += 1
                self._send_acknowledge(node, acks, c).add_callback(self._progress_of(c))
            self._commit_progress(c)

    def _progress_of(self, c: _Commit) -> Callable[[Pending[Any]], None]:
        return lambda _p: self._commit_progress(c)

    def _commit_progress(self, c: _Commit) -> None:
        if c.acks or c.outstanding or c not in self._commits:
            return
        self._commits.remove(c)
        self._finish_commit(c)

    def _finish_commit(self, c: _Commit) -> None:
        if c.done is not None:
            c.done.resolve(c.results)
        elif c.results:
            self.ack_results.append(c.results)
            self.notify()

    def _expire_commits(self) -> None:
        for c in list(self._commits):
            if c.deadline <= self.now and c.acks:
                err = KafkaTimeoutError("acknowledgements not sent in time (no leader or no free connection)")
                c.results.update({tp: err for tp in c.acks})
                c.acks = {}
                self._commit_progress(c)

    def _send_acknowledge(self, node: int, acks: AckMap, c: _Commit | None, final: bool = False) -> Pending[Any]:
        s = self._sessions[node]
        cls = ShareAcknowledgeRequest
        by_topic: dict[str, list[Any]] = {}
        for tp in sorted(acks):
            by_topic.setdefault(tp.topic, []).append(
                cls.AcknowledgePartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=ack_batches(acks[tp], cls.AcknowledgementBatch),
                )
            )
        epoch = FINAL_EPOCH if final else s.epoch
        req = cls(
            group_id=self.group_id,
            member_id=self.group.member_id,
            share_session_epoch=epoch,
            is_renew_ack=has_renew(acks),
            topics=[cls.AcknowledgeTopic(topic_id=self._topic_id(t), partitions=ps) for t, ps in by_topic.items()],
        )
        self._busy.add(node)
        done: Pending[Any] = Pending()

        def on_done(p: Pending[Any]) -> None:
            self._busy.discard(node)
            if c is not None:
                c.outstanding -= 1
            if final:
                self._sessions.pop(node, None)
            if p.error is not None or p._value.error_code:
                err = (
                    p.error
                    if p.error is not None
                    else error_for(p._value.error_code, p._value.error_message, f"ShareAcknowledge to node {node}")
                )
                if c is None and final:
                    c2 = _Commit({}, None, 0.0)
                    c2.results = {tp: err if isinstance(err, KafkaError) else KafkaError(str(err)) for tp in acks}
                    self._finish_commit(c2)
                else:
                    self._request_failed(node, s, err, acks, c)
                done.resolve(None)
                return
            r = p._value
            if not final and s is self._sessions.get(node):
                s.advance()
            self._learn_endpoints(r)
            names = self.topic_names()
            results: AckResults = {}
            for t in r.responses:
                name = names.get(t.topic_id)
                for part in t.partitions:
                    if name is None:
                        continue
                    tp = TopicPartition(name, part.partition_index)
                    if part.error_code:
                        results[tp] = error_for(
                            part.error_code, part.error_message, f"acknowledging {name}-{tp.partition}"
                        )
                        if part.error_code in _LEADERSHIP:
                            self.request_metadata_update()
                    else:
                        results[tp] = None
            for tp in acks:
                results.setdefault(tp, None)
            if c is not None:
                c.results.update(results)
            else:
                c2 = _Commit({}, None, 0.0)
                c2.results = results
                self._finish_commit(c2)
            self.wake()
            done.resolve(None)

        self.net.request(node, req).add_callback(on_done)
        return done
