"""Classic consumer-group membership from the member's side (sans-I/O), plus the consumer
protocol's byte formats and the client-side assignors.

# State machine (`GroupMembership.state`)
    unjoined -> (FindCoordinator) -> joining -> (JoinGroup) -> syncing -> (SyncGroup)
             -> stable (Heartbeat every heartbeat.interval.ms) -> unjoined on rebalance
`awaiting_revoke` sits before `joining` when the application registered `on_revoke`: the
consumer's next `poll()` runs the callback (in the application's thread, as Kafka does)
and acknowledges; heartbeats continue meanwhile, so a long-running batch does not cost the
membership (`max.poll.interval.ms` is the rebalance timeout the coordinator waits, and the
longest the application may go without `poll()` before the member leaves: `fetcher.py`).

Assignors: `range` (per topic, contiguous ranges, as Kafka's RangeAssignor), `roundrobin`
(all partitions dealt in order over the members subscribed to them) and `cooperative-sticky`
(`sticky_assignor.py`). The member offers them in `partition.assignment.strategy` order; the
coordinator picks one every member supports (each member votes for its first such one) and
the leader runs it.

Rebalances are eager unless every configured assignor is cooperative (Kafka's rule, so a
rolling upgrade goes through `[..., cooperative-sticky]` first): an eager member gives up all
its partitions before rejoining (auto-commit commits their positions first). A cooperative
member (KIP-429) rejoins keeping them, and lists them in its subscription with the generation
it got them in; on its assignment it revokes only `owned - assigned` (on_revoke with those,
their positions committed, while it goes on fetching the rest), on_assign gets only
`assigned - owned`, and if anything was revoked it rejoins at once so the next generation can
hand those partitions over. Before joining it revokes partitions of topics it no longer
subscribes to; after losing its membership (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION) it gives
all of them up as lost.

Errors: UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID reset the member id and
rejoin; REBALANCE_IN_PROGRESS rejoins; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE /
COORDINATOR_LOAD_IN_PROGRESS / connection errors rediscover the coordinator after
`retry.backoff.ms`. MEMBER_ID_REQUIRED (JoinGroup v4+) rejoins at once with the given id.

# Byte formats (ConsumerProtocolSubscription v3 / ConsumerProtocolAssignment v0, not flexible)
    subscription: version i16 | topics [i32 count, (i16 len, utf-8)*] | user_data (i32 len | bytes, -1 = null)
                  | v1+: owned [i32 count, (topic string, [i32 count, i32 partition*])*]
                  | v2+: generation i32 (-1 unknown) | v3+: rack (i16 len | utf-8, -1 = null)
    assignment:   version i16 | [i32 count, (topic string, [i32 count, i32 partition*])*] | user_data
Newer versions append fields; decoders read the fields they know and ignore the rest. The
cooperative-sticky user data is the generation as an i32 (Java's; a v0/v1 subscription's
only source of it).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol

from logbroker.client.errors import KafkaError, error_for
from logbroker.client.network import Network, Pending, Versioned
from logbroker.client.sticky_assignor import Member, cooperative_assign
from logbroker.protocol import ErrorCode
from logbroker.protocol.messages.find_coordinator_request import _FindCoordinatorRequest
from logbroker.protocol.messages.heartbeat_request import _HeartbeatRequest
from logbroker.protocol.messages.join_group_request import _JoinGroupRequest
from logbroker.protocol.messages.leave_group_request import _LeaveGroupRequest
from logbroker.protocol.messages.sync_group_request import _SyncGroupRequest


class CoordinatorHost(Protocol):
    """What finding a group coordinator uses of its client core (CoordinatorLink)."""

    net: Network
    config: dict[str, Any]
    now: float

    def call_at(self, when: float, fn: Callable[[], object]) -> None: ...
    def wake(self) -> None: ...


class MemberHost(CoordinatorHost, Protocol):
    """What a group membership uses of its consumer (`fetcher.ConsumerCore` is one). The
    membership depends on this, not on the fetcher, so imports point one way."""

    metadata: Any
    errors: Any
    assignment: dict[Any, Any]
    poll_expired: bool

    def notify(self) -> None: ...
    def want_topics(self, topics: set[str] | list[str]) -> None: ...
    def request_metadata_update(self) -> None: ...
    def wait_metadata(self, ready: Callable[[], bool], timeout: float, what: str) -> Pending[Any]: ...
    def assignment_received(self, tps: list[TopicPartition]) -> None: ...
    def add_partitions(self, tps: list[TopicPartition]) -> None: ...
    def revoke_partitions(self, tps: list[TopicPartition], done: Callable[[], None]) -> None: ...
    def lose_partitions(self) -> None: ...
    def prepare_rejoin(self, group: Any) -> None: ...


__all__ = [
    "COOPERATIVE",
    "CoordinatorLink",
    "GroupMembership",
    "Subscription",
    "TopicPartition",
    "decode_assignment",
    "decode_subscription",
    "parse_subscription",
    "encode_assignment",
    "encode_subscription",
    "range_assign",
    "roundrobin_assign",
]

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
OFFSET_COMMIT, OFFSET_FETCH = 8, 9


def find_coordinator_request(key: str, key_type: int) -> Versioned:
    """FindCoordinator for one key, in the shape of the negotiated version (v4+ batches keys)."""
    cls = _FindCoordinatorRequest
    return Versioned(
        FIND_COORDINATOR,
        lambda v: cls(key=key, key_type=key_type) if v < 4 else cls(key_type=key_type, coordinator_keys=[key]),
    )


def coordinator_from_response(net: Network, r: Any, kind: str, what: str) -> tuple[str, int]:
    """The coordinator a FindCoordinator response names (v4+ nests it in `coordinators`), as a
    connection key of `kind` whose address `net` now knows; raises the response's error, naming `what`."""
    c = r.coordinators[0] if r.coordinators else r
    if c.error_code:
        raise error_for(c.error_code, c.error_message, f"FindCoordinator for {what}")
    key = (kind, c.node_id)
    net.set_address(key, c.host, c.port)
    return key


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def committed_from_response(resp: Any, group: str) -> dict[TopicPartition, tuple[int, str | None]]:
    """{TopicPartition: (committed offset, metadata)} of an OffsetFetch response (v0-7; -1
    where nothing is committed); raises its first error."""
    if resp.error_code:
        raise error_for(resp.error_code, None, f"OffsetFetch for group {group!r}")
    out = {}
    for t in resp.topics:
        for part in t.partitions:
            if part.error_code:
                raise error_for(part.error_code, None, f"committed offset of {t.name}-{part.partition_index}")
            out[TopicPartition(t.name, part.partition_index)] = (part.committed_offset, part.metadata)
    return out


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class Subscription(NamedTuple):
    topics: list[str]
    user_data: bytes | None = None
    owned: list[TopicPartition] = []
    generation: int = -1
    rack: str | None = None


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _partitions(parts: list[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)
    out = struct.pack(">i", len(by_topic))
    for t in sorted(by_topic):
        ps = sorted(by_topic[t])
        out += _str(t) + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return out


def encode_subscription(
    topics: list[str],
    user_data: bytes | None = None,
    owned: Iterable[TopicPartition] = (),
    generation: int = -1,
    rack: str | None = None,
) -> bytes:
    """Version 3 (what Java and librdkafka send)."""
    out = struct.pack(">hi", 3, len(topics)) + b"".join(_str(t) for t in sorted(topics))
    out += _bytes(user_data) + _partitions(list(owned)) + struct.pack(">i", generation)
    return out + (struct.pack(">h", -1) if rack is None else _str(rack))


def _read_str(b: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", b, pos)
    pos += 2
    return bytes(b[pos : pos + n]).decode(), pos + n


def _read_partitions(b: bytes, pos: int) -> tuple[list[TopicPartition], int]:
    (n,) = struct.unpack_from(">i", b, pos)
    pos += 4
    out: list[TopicPartition] = []
    for _ in range(n):
        t, pos = _read_str(b, pos)
        (k,) = struct.unpack_from(">i", b, pos)
        pos += 4
        out.extend(TopicPartition(t, p) for p in struct.unpack_from(f">{k}i", b, pos))
        pos += 4 * k
    return out, pos


def parse_subscription(b: bytes) -> Subscription:
    """Any version; fields past what the bytes hold keep their defaults (they are ignorable)."""
    (version, n) = struct.unpack_from(">hi", b, 0)
    pos, topics = 6, []
    for _ in range(n):
        t, pos = _read_str(b, pos)
        topics.append(t)
    (k,) = struct.unpack_from(">i", b, pos)
    pos += 4
    user_data = None if k < 0 else bytes(b[pos : pos + k])
    pos += max(k, 0)
    owned: list[TopicPartition] = []
    generation, rack = -1, None
    if version >= 1 and len(b) >= pos + 4:
        owned, pos = _read_partitions(b, pos)
        if version >= 2 and len(b) >= pos + 4:
            (generation,) = struct.unpack_from(">i", b, pos)
            pos += 4
            if version >= 3 and len(b) >= pos + 2 and struct.unpack_from(">h", b, pos)[0] >= 0:
                rack, pos = _read_str(b, pos)
    return Subscription(topics, user_data, owned, generation, rack)


def decode_subscription(b: bytes) -> list[str]:
    return parse_subscription(b).topics


def encode_assignment(parts: list[TopicPartition]) -> bytes:
    return struct.pack(">h", 0) + _partitions(parts) + struct.pack(">i", -1)


def decode_assignment(b: bytes) -> list[TopicPartition]:
    if not b:
        return []
    return _read_partitions(b, 2)[0]


def range_assign(members: dict[str, list[str]], counts: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Kafka's RangeAssignor: per topic, members (sorted by id) get contiguous ranges; the
    first `count % members` get one extra."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for topic in sorted(counts):
        subs = sorted(m for m, ts in members.items() if topic in ts)
        if not subs:
            continue
        per, extra = divmod(counts[topic], len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = per + (1 if i < extra else 0)
            out[m].extend(TopicPartition(topic, p) for p in range(start, start + n))
            start += n
    return out


def roundrobin_assign(members: dict[str, list[str]], counts: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """Kafka's RoundRobinAssignor: all partitions (sorted) dealt over the members (sorted),
    skipping members not subscribed to the partition's topic."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    order = sorted(members)
    if not order:
        return out
    i = 0
    for topic in sorted(counts):
        for p in range(counts[topic]):
            for _ in range(len(order)):
                m = order[i % len(order)]
                i += 1
                if topic in members[m]:
                    out[m].append(TopicPartition(topic, p))
                    break
    return out


def cooperative_sticky_assign(subs: dict[str, Subscription], counts: dict[str, int]) -> dict[str, list[TopicPartition]]:
    """`sticky_assignor.cooperative_assign` over the members' subscriptions: the generation
    of their owned partitions is the v2+ field, else Java's user data (an i32), else unknown."""
    members = {}
    for m, s in subs.items():
        gen = s.generation
        if gen < 0 and s.user_data is not None and len(s.user_data) == 4:
            (gen,) = struct.unpack(">i", s.user_data)
        members[m] = Member(s.topics, [(tp.topic, tp.partition) for tp in s.owned], gen)
    return {m: [TopicPartition(*tp) for tp in tps] for m, tps in cooperative_assign(members, counts).items()}


ASSIGNORS: dict[str, Callable[[dict[str, list[str]], dict[str, int]], dict[str, list[TopicPartition]]]] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
}
# Assignors whose rebalances may be incremental (they read the members' subscriptions).
COOPERATIVE = {"cooperative-sticky": cooperative_sticky_assign}

_REJOIN_RESET = {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID}
_COORDINATOR = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


class CoordinatorLink:
    """Finding a group's coordinator and sending it requests; shared by the classic
    membership below, the KIP-848 one (`group_consumer.py`) and the share group's
    (`share_consumer.py`)."""

    core: CoordinatorHost

    def __init__(self, core: CoordinatorHost, group_id: str) -> None:
        self.core = core
        cfg = core.config
        self.group_id = group_id
        self.instance_id: str | None = cfg.get("group.instance.id")
        self.backoff = cfg["retry.backoff.ms"] / 1000
        self.coordinator: tuple[str, int] | None = None
        self._finding = False
        self._coord_waiters: list[Pending[Any]] = []
        self._retry_at = 0.0
        self.last_error: BaseException | None = None

    # -- coordinator --------------------------------------------------------------------

    def ensure_coordinator(self) -> Pending[Any]:
        p: Pending[Any] = Pending()
        if self.coordinator is not None:
            p.resolve(self.coordinator)
            return p
        self._coord_waiters.append(p)
        self._find()
        return p

    def _find(self) -> None:
        if self._finding or self.core.now < self._retry_at:
            if not self._finding:
                self.core.call_at(self._retry_at, self._find)
            return
        self._finding = True
        req = find_coordinator_request(self.group_id, 0)
        self.core.net.request(self.core.net.any_node(), req).add_callback(self._on_find)

    def _on_find(self, p: Pending[Any]) -> None:
        self._finding = False
        err: BaseException | None = p.error
        if err is None:
            try:
                key = coordinator_from_response(self.core.net, p._value, "coordinator", f"group {self.group_id!r}")
            except KafkaError as e:
                err = e
            else:
                self.coordinator = key
                waiters, self._coord_waiters = self._coord_waiters, []
                for w in waiters:
                    w.resolve(key)
                self.core.wake()
                return
        self.last_error = err
        self._retry_at = self.core.now + self.backoff
        if isinstance(err, KafkaError) and not err.retriable and not isinstance(err, ConnectionError):
            if getattr(err, "code", None) not in _COORDINATOR:
                waiters, self._coord_waiters = self._coord_waiters, []
                for w in waiters:
                    w.fail(err)
        self.core.call_at(self._retry_at, self._find)

    def coordinator_lost(self) -> None:
        if self.coordinator is not None:
            conn = self.core.net.conns.get(self.coordinator)
            self.coordinator = None
            if conn is not None:
                conn.close()
        self._retry_at = self.core.now + self.backoff

    def request(self, body: Any, timeout: float | None = None) -> Pending[Any]:
        """Sends to the coordinator (discovering it first)."""
        return self.ensure_coordinator().chain(lambda node: self.core.net.request(node, body, timeout=timeout))


class GroupMembership(CoordinatorLink):
    """One member of a classic consumer group (see the module docstring)."""

    core: MemberHost

    def __init__(self, core: MemberHost, group_id: str) -> None:
        super().__init__(core, group_id)
        cfg = core.config
        self.session_timeout_ms: int = cfg["session.timeout.ms"]
        self.rebalance_timeout_ms: int = cfg["max.poll.interval.ms"]
        self.heartbeat_interval = cfg["heartbeat.interval.ms"] / 1000
        self.assignors: list[str] = list(cfg["partition.assignment.strategy"])
        self.cooperative = all(a in COOPERATIVE for a in self.assignors)
        self.rack: str | None = cfg.get("client.rack")
        self._revoking: object | None = None  # a cooperative revocation in progress
        self.state = "unjoined"
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader = False
        self.subscribed: list[str] = []
        self.next_heartbeat = 0.0
        self._heartbeat_in_flight = False
        self.needs_rejoin = False
        self.active = False
        self.joined_topics: list[str] = []
        # The leader's view when it assigned: partition count per subscribed topic (topics
        # not yet in metadata left out). A change (a topic created, partitions added) makes
        # it rejoin so the group is assigned again, as Kafka's leader does.
        self.assigned_counts: dict[str, int] | None = None
        self._assigned_topics: list[str] = []

    # -- membership ---------------------------------------------------------------------

    def subscribe(self, topics: list[str]) -> None:
        self.active = True
        if sorted(topics) != sorted(self.subscribed):
            self.subscribed = sorted(topics)
            self.request_rejoin()

    def request_rejoin(self) -> None:
        self.needs_rejoin = True
        self.core.wake()

    def metadata_updated(self) -> None:
        """New metadata: the leader of a stable group rejoins when a topic its members
        subscribe to appeared or changed its partition count since it assigned."""
        if not self.leader or self.state != "stable" or self.assigned_counts is None:
            return
        now = {}
        for t in self._assigned_topics:
            n = self.core.metadata.partition_count(t)
            if n:
                now[t] = n
        if now != self.assigned_counts:
            self.assigned_counts = None
            self.request_rejoin()

    def tick(self, now: float) -> None:
        if not self.active or self.core.poll_expired:
            return
        if self.coordinator is None:
            if self.state in ("joining", "syncing"):
                return
            self.ensure_coordinator()
            return
        if self.state == "stable" and self.needs_rejoin and self._revoking is None:
            self.state = "unjoined"
        if self.state == "unjoined" and now >= self._retry_at:
            self.needs_rejoin = False
            if self.cooperative:
                self._prepare_cooperative()
            else:
                self.core.prepare_rejoin(self)
        if self.state in ("stable", "awaiting_revoke", "syncing") and now >= self.next_heartbeat:
            self._heartbeat()

    def deadline(self) -> float | None:
        if not self.active or self.core.poll_expired:
            return None
        if self.state in ("stable", "awaiting_revoke"):
            return self.next_heartbeat
        if self.state == "unjoined":
            return max(self._retry_at, self.core.now)
        return None

    def revoked(self) -> None:
        """The application has given up its partitions: join now."""
        if self.state == "awaiting_revoke":
            self._join()

    def join_after_revoke(self, wait_for_app: bool) -> None:
        if wait_for_app:
            self.state = "awaiting_revoke"
            self.next_heartbeat = self.core.now
        else:
            self._join()

    # -- the cooperative protocol (KIP-429) ----------------------------------------------

    def _prepare_cooperative(self) -> None:
        """Before joining: all partitions are lost when the membership is gone; else only
        those of topics no longer subscribed are revoked (then join); the rest are kept."""
        owned = list(self.core.assignment)
        if owned and (self.generation < 0 or not self.member_id):
            self._revoking = None
            self.core.lose_partitions()
            self._join()
            return
        gone = [tp for tp in owned if tp.topic not in self.subscribed]
        if not gone:
            self._join()
            return
        self.state = "awaiting_revoke"
        self.next_heartbeat = self.core.now
        token = self._revoking = object()

        def done() -> None:
            if self._revoking is token:
                self._revoking = None
                if self.state == "awaiting_revoke":
                    self._join()

        self.core.revoke_partitions(gone, done)

    def _assigned_incrementally(self, assigned: list[TopicPartition]) -> None:
        """A cooperative member's new assignment: revoke `owned - assigned` (then rejoin),
        add `assigned - owned`; kept partitions go on fetching."""
        owned = set(self.core.assignment)
        revoked = sorted(owned - set(assigned))
        added = sorted(set(assigned) - owned)
        if revoked:
            token = self._revoking = object()

            def done() -> None:
                if self._revoking is token:
                    self._revoking = None
                    self.request_rejoin()

            self.core.revoke_partitions(revoked, done)
        self.core.add_partitions(added)

    def _join(self) -> None:
        self.state = "joining"
        topics = list(self.subscribed)
        self.joined_topics = topics
        owned = sorted(self.core.assignment)
        req_cls = _JoinGroupRequest
        protocols = []
        for a in self.assignors:
            user_data = struct.pack(">i", self.generation) if a in COOPERATIVE else None
            meta = encode_subscription(topics, user_data, owned, self.generation, self.rack)
            protocols.append(req_cls.JoinGroupRequestProtocol(name=a, metadata=meta))
        req = req_cls(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocols=protocols,
        )
        timeout = self.rebalance_timeout_ms / 1000 + 5.0
        assert self.coordinator is not None
        self.core.net.request(self.coordinator, req, timeout=timeout).add_callback(self._on_join)

    def _error(self, code: int, what: str) -> None:
        """Common error handling for join/sync/heartbeat."""
        self.state = "unjoined"
        if code in _REJOIN_RESET:
            self.member_id = ""
            self.generation = -1
        elif code in _COORDINATOR or code == -100:
            self.coordinator_lost()
        elif code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.MEMBER_ID_REQUIRED):
            pass
        else:
            self.last_error = error_for(code, None, what)
            self._retry_at = self.core.now + self.backoff
        self.core.wake()

    def _on_join(self, p: Pending[Any]) -> None:
        if self.state != "joining":
            return
        if p.error is not None:
            self._error(-100, "JoinGroup")
            return
        r = p._value
        if r.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            self._join()
            return
        if r.error_code:
            self._error(r.error_code, f"JoinGroup of group {self.group_id!r}")
            return
        self.generation, self.member_id, self.protocol = r.generation_id, r.member_id, r.protocol_name
        self.leader = r.leader == r.member_id
        self.assigned_counts = None
        self.state = "syncing"
        self.next_heartbeat = self.core.now + self.heartbeat_interval
        if self.leader:
            members = {m.member_id: parse_subscription(m.metadata) for m in r.members}
            topics = sorted({t for s in members.values() for t in s.topics})
            self.core.want_topics(topics)
            gen = self.generation
            self.core.wait_metadata(
                lambda: all(
                    self.core.metadata.partition_count(t) is not None or t in self.core.metadata.topics for t in topics
                ),
                10.0,
                f"metadata of topics {topics}",
            ).add_callback(lambda q: self._assign_and_sync(members, gen))
        else:
            self._sync([])

    def _assign_and_sync(self, members: dict[str, Subscription], generation: int) -> None:
        if self.state != "syncing" or self.generation != generation:
            return
        topics = sorted({t for s in members.values() for t in s.topics})
        counts = {}
        for t in topics:
            n = self.core.metadata.partition_count(t)
            if n:
                counts[t] = n
        self.assigned_counts = dict(counts)
        self._assigned_topics = topics
        if self.protocol in COOPERATIVE:
            plan = COOPERATIVE[self.protocol](members, counts)
        else:
            assignor = ASSIGNORS.get(self.protocol or "range", range_assign)
            plan = assignor({m: s.topics for m, s in members.items()}, counts)
        req_cls = _SyncGroupRequest
        self._sync(
            [
                req_cls.SyncGroupRequestAssignment(member_id=m, assignment=encode_assignment(ps))
                for m, ps in plan.items()
            ]
        )

    def _sync(self, assignments: list[Any]) -> None:
        req = _SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol,
            assignments=assignments,
        )
        assert self.coordinator is not None
        gen = self.generation
        self.core.net.request(self.coordinator, req, timeout=self.rebalance_timeout_ms / 1000 + 5.0).add_callback(
            lambda p: self._on_sync(p, gen)
        )

    def _on_sync(self, p: Pending[Any], generation: int) -> None:
        if self.state != "syncing" or generation != self.generation:
            return
        if p.error is not None:
            self._error(-100, "SyncGroup")
            return
        r = p._value
        if r.error_code:
            self._error(r.error_code, f"SyncGroup of group {self.group_id!r}")
            return
        self.state = "stable"
        self.next_heartbeat = self.core.now + self.heartbeat_interval
        if self.cooperative:
            self._assigned_incrementally(decode_assignment(r.assignment))
        else:
            self.core.assignment_received(decode_assignment(r.assignment))

    def _heartbeat(self) -> None:
        self.next_heartbeat = self.core.now + self.heartbeat_interval
        if self._heartbeat_in_flight or self.coordinator is None or self.generation < 0:
            return
        self._heartbeat_in_flight = True
        req = _HeartbeatRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.instance_id,
        )
        gen = self.generation
        self.core.net.request(self.coordinator, req).add_callback(lambda p: self._on_heartbeat(p, gen))

    def _on_heartbeat(self, p: Pending[Any], generation: int) -> None:
        self._heartbeat_in_flight = False
        if generation != self.generation or self.state not in ("stable", "awaiting_revoke", "syncing"):
            return
        if p.error is not None:
            self.coordinator_lost()
            return
        code = p._value.error_code
        if code == 0:
            return
        if code == ErrorCode.REBALANCE_IN_PROGRESS:
            if self.state == "stable":
                self.request_rejoin()
            return
        if self.state == "stable":
            self._error(code, f"Heartbeat of group {self.group_id!r}")

    def leave(self) -> Pending[Any]:
        """Leaves the group (LeaveGroup), best effort."""
        self.active = False
        return self._leave("the consumer is closing")

    def leave_on_poll_timeout(self) -> None:
        """The application stopped polling (max.poll.interval.ms): a dynamic member leaves at
        once so the group rebalances; a static member stays registered until its session
        times out (Kafka's rule). Either way the member rejoins with a new member id."""
        if self.instance_id is not None:
            self._unjoin()
            return
        self._leave("consumer poll timeout has expired").add_callback(lambda p: None)

    def _unjoin(self) -> None:
        self.state = "unjoined"
        self.member_id, self.generation = "", -1
        self._revoking = None

    def _leave(self, reason: str) -> Pending[Any]:
        if self.coordinator is None or not self.member_id:
            self.state = "unjoined"
            return Pending.of(None)
        req_cls = _LeaveGroupRequest
        member, instance = self.member_id, self.instance_id

        def build(v: int) -> Any:
            if v < 3:
                return req_cls(group_id=self.group_id, member_id=member)
            return req_cls(
                group_id=self.group_id,
                members=[req_cls.MemberIdentity(member_id=member, group_instance_id=instance, reason=reason)],
            )

        req = Versioned(LEAVE_GROUP, build)
        self._unjoin()
        return self.core.net.request(self.coordinator, req, timeout=5.0)
