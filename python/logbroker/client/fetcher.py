"""The consumer's sans-I/O core: partition positions, offset resets, pipelined fetches,
group membership (`group.py`), commits and the hand-off of decoded records to `poll()`.

# Positions
Each assigned partition has a *position* (the offset of the next record `poll()` returns)
and a *fetch offset* (where the next Fetch starts). They differ while fetched records wait
in the hand-off queue: the core fetches ahead (pipelining) as long as the buffered bytes
stay below `fetch.buffer.bytes`, so one consumer keeps its broker links busy while the
application processes a batch. A seek, pause, reassignment or offset reset bumps the
partition's *epoch*; fetched data stamped with an older epoch is dropped (in flight or
queued), so nothing from before a seek is ever returned after it.

# Threads
The core runs in the I/O loop. `take_records()` and the rebalance events are the
application side: they run in the caller's thread (sync) or task (trio) and only pop from
deques and write `position`, which the loop reads for commits.

# Offsets
A partition with no position is reset: to its committed offset (group members), else per
`auto.offset.reset` (earliest / latest via ListOffsets; `none` raises
NoOffsetForPartitionError from `poll()`). OFFSET_OUT_OF_RANGE on fetch resets the same way.
Auto-commit commits the positions every `auto.commit.interval.ms`, before a rebalance gives
partitions up, and on close.

# Poll interval
Heartbeats run in the I/O loop, so a member stays in its group while the application works
on a batch; `max.poll.interval.ms` bounds that. When the application has not called
`poll()` for longer, the loop gives the partitions up as *lost* (the revoke callback runs
at the next `poll()`, nothing is committed for them), leaves the group (LeaveGroup with a
reason; a static member just stops, its session expires) and does not rejoin until the
application polls again, as Kafka's consumer does.
"""

from __future__ import annotations

import collections
import itertools
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from logbroker import _core
from logbroker.client.core import ClientCore
from logbroker.client.errors import ConfigError, KafkaError, SaslAuthenticationError, error_for
from logbroker.client.group import GroupMembership, TopicPartition, committed_from_response
from logbroker.client.group_consumer import ConsumerGroupMembership
from logbroker.client.network import Pending
from logbroker.protocol import ErrorCode
from logbroker.protocol.messages.fetch_request import _FetchRequest
from logbroker.protocol.messages.list_offsets_request import _ListOffsetsRequest
from logbroker.protocol.messages.offset_commit_request import _OffsetCommitRequest
from logbroker.protocol.messages.offset_fetch_request import _OffsetFetchRequest

__all__ = ["ConsumerCore", "NoOffsetForPartitionError", "PartitionState"]

log = logging.getLogger("logbroker.client")

FETCH = 1
LIST_OFFSETS = 2
EARLIEST, LATEST = -2, -1


class NoOffsetForPartitionError(KafkaError):
    """A partition has no committed offset and auto.offset.reset is 'none'."""


# Epochs are unique across all PartitionStates of the process: a partition revoked and
# assigned again gets a new state whose epochs never equal the old one's, so a fetch or
# a record set of the old assignment can never pass for one of the new.
_epochs = itertools.count(1)


class PartitionState:
    __slots__ = ("epoch", "error", "fetch_offset", "high_watermark", "in_flight", "paused", "position", "reset")

    def __init__(self) -> None:
        self.position: int | None = None
        self.fetch_offset: int | None = None
        self.epoch = next(_epochs)
        self.paused = False
        self.reset: int | None = None  # EARLIEST / LATEST while a reset is wanted
        self.in_flight = False
        self.high_watermark = -1
        self.error: BaseException | None = None

    def bump(self) -> None:
        """Invalidates everything fetched or in flight for this partition."""
        self.epoch = next(_epochs)


class ConsumerCore(ClientCore):
    """The consumer state machine (see the module docstring)."""

    def __init__(self, config: dict[str, Any], waker: _core.Waker | None = None) -> None:
        super().__init__(config, waker)
        self.group_id: str | None = config["group.id"]
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.ready: collections.deque[_core.RecordSet] = collections.deque()
        self.buffered = 0
        self.events: collections.deque[tuple[str, list[TopicPartition]]] = collections.deque()
        self.errors: collections.deque[BaseException] = collections.deque()
        self.notify: Callable[[], None] = lambda: None
        self.group: GroupMembership | ConsumerGroupMembership | None = None
        if self.group_id:
            protocol = config["group.protocol"]
            self.group = (
                ConsumerGroupMembership(self, self.group_id)
                if protocol == "consumer"
                else GroupMembership(self, self.group_id)
            )
        self._incremental_revoke: tuple[list[TopicPartition], Callable[[], None]] | None = None
        self.subscription: list[str] | None = None
        self.pattern: re.Pattern[str] | None = None
        self.wait_for_app_on_revoke = False
        self.auto_commit = bool(config["enable.auto.commit"]) and self.group_id is not None
        self.auto_commit_interval = config["auto.commit.interval.ms"] / 1000
        self.next_auto_commit = 0.0
        self.committed_positions: dict[TopicPartition, int] = {}
        reset = config["auto.offset.reset"]
        self.default_reset = {"earliest": EARLIEST, "latest": LATEST, "none": None}[reset]
        self.read_committed = config["isolation.level"] == "read_committed"
        self.check_crcs = bool(config["check.crcs"])
        self.buffer_limit = config["fetch.buffer.bytes"]
        self._fetching: set[Any] = set()
        self._resetting: set[TopicPartition] = set()
        self._fetching_committed = False
        self._backoff_until: dict[TopicPartition, float] = {}
        self.max_poll_interval = config["max.poll.interval.ms"] / 1000
        self.last_poll = time.monotonic()  # application side, real time (not the loop's clock)
        self.poll_expired = False

    def on_auth_error(self, err: SaslAuthenticationError) -> None:
        """A broker refused our SASL credentials: the next poll() raises it (once per
        failure that poll has not yet seen: reconnects fail again until the credentials work)."""
        super().on_auth_error(err)
        if not any(type(e) is type(err) for e in self.errors):
            self.errors.append(err)
        self.notify()

    # -- subscription and assignment (loop side) ----------------------------------------

    def subscribe(self, topics: list[str] | None, pattern: str | re.Pattern[str] | None, wait_for_app: bool) -> None:
        if self.group is None:
            raise ConfigError("subscribe() needs a group.id; use assign() without one")
        self.wait_for_app_on_revoke = wait_for_app
        if pattern is not None:
            self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
            self.subscription = None
            self.metadata.all_topics = True
            self.request_metadata_update()
            self.group.active = True
        else:
            self.pattern = None
            self.subscription = sorted(set(topics or []))
            self.want_topics(self.subscription)
            self.group.subscribe(self.subscription)

    def unsubscribe(self) -> None:
        if self.group is not None and self.group.active:
            self.group.leave()
        self.subscription, self.pattern = None, None
        self._set_assignment([])

    def assign(self, tps: list[TopicPartition]) -> None:
        if self.group is not None and self.group.active:
            raise ConfigError("assign() cannot be mixed with subscribe(); call unsubscribe() first")
        self.want_topics({tp.topic for tp in tps})
        self._set_assignment(tps)
        self._refresh_committed(list(self.assignment))

    def _set_assignment(self, tps: list[TopicPartition]) -> None:
        new = {}
        for tp in tps:
            new[tp] = self.assignment.get(tp) or PartitionState()
        for tp, st in self.assignment.items():
            if tp not in new:
                st.bump()
        self.assignment = new
        self.wake()

    def on_metadata_update(self) -> None:
        if isinstance(self.group, GroupMembership):
            self.group.metadata_updated()
        if self.pattern is not None and self.group is not None:
            internal = self.config["exclude.internal.topics"]
            matched = sorted(
                t
                for t, m in self.metadata.topics.items()
                if self.pattern.fullmatch(t) and not (internal and m.internal)
            )
            self.group.subscribe(matched)

    # -- the poll interval ----------------------------------------------------------------

    def polled(self) -> bool:
        """Application side: `poll()` was called. True when the member left its group on a
        poll timeout; the caller then runs `rejoin_after_poll_timeout()` in the loop."""
        self.last_poll = time.monotonic()
        return self.poll_expired

    def rejoin_after_poll_timeout(self) -> None:
        if self.poll_expired:
            self.poll_expired = False
            if self.group is not None and self.group.active:
                self.group.request_rejoin()

    def _check_poll_interval(self) -> None:
        group = self.group
        if group is None or not group.active or self.poll_expired:
            return
        idle = time.monotonic() - self.last_poll
        if idle <= self.max_poll_interval:
            return
        self.poll_expired = True
        log.warning(
            "consumer of group %r: %.1f s since the last poll() exceeds max.poll.interval.ms=%d; "
            "leaving the group and giving up %d partition(s) %s; the next poll() rejoins",
            group.group_id,
            idle,
            self.config["max.poll.interval.ms"],
            len(self.assignment),
            [f"{tp.topic}-{tp.partition}" for tp in self.assignment],
        )
        self.lose_partitions()
        group.leave_on_poll_timeout()

    # -- group callbacks ----------------------------------------------------------------

    def lose_partitions(self) -> None:
        """Every owned partition is gone without a clean hand-over (poll timeout, fenced):
        the revoke callback runs at the next poll(), nothing is committed."""
        owned = list(self.assignment)
        self._set_assignment([])
        # A revocation the application never acknowledged becomes part of the loss.
        self.events = collections.deque(e for e in self.events if e[0] != "revoke")
        self._incremental_revoke = None
        if owned:
            self.events.append(("lost", owned))
            self.notify()

    def revoke_partitions(self, tps: list[TopicPartition], done: Callable[[], None]) -> None:
        """Incremental revocation (KIP-848): on_revoke(tps) at the next poll() when
        registered, auto-commit of their positions, then they leave the assignment and
        `done()` runs; other partitions keep fetching throughout. From now on the revoked
        ones hand out no more records, so the positions committed are the last ones."""
        for tp in tps:
            st = self.assignment.get(tp)
            if st is not None and not st.paused:
                st.paused = True
                st.bump()
        self._incremental_revoke = (tps, done)
        self.events.append(("revoke", tps))
        self.notify()
        if not self.wait_for_app_on_revoke:
            self.finish_revoke()

    def add_partitions(self, tps: list[TopicPartition]) -> None:
        """Incremental assignment (KIP-848): `tps` join the assignment; on_assign(tps)."""
        self.want_topics({tp.topic for tp in tps})
        self._set_assignment(list(self.assignment) + tps)
        self.events.append(("assign", list(tps)))
        self.notify()
        self._refresh_committed(tps)

    def prepare_rejoin(self, group: GroupMembership) -> None:
        owned = list(self.assignment)
        if owned:
            self.events.append(("revoke", owned))
            self.notify()
            if self.wait_for_app_on_revoke:
                group.join_after_revoke(True)
                return
        self.finish_revoke()

    def finish_revoke(self) -> None:
        """Commit (auto-commit), give the partitions up, then join (classic) or acknowledge
        the incremental revocation (KIP-848)."""
        group = self.group
        assert group is not None
        if self._incremental_revoke is not None:
            tps, done = self._incremental_revoke
            self._incremental_revoke = None

            def release(_: Any) -> None:
                gone = set(tps)
                self._set_assignment([tp for tp in self.assignment if tp not in gone])
                done()

            if self.auto_commit:
                self.commit_positions(tps).add_callback(release)
            else:
                release(None)
            return
        assert isinstance(group, GroupMembership)

        def then(_: Any) -> None:
            self._set_assignment([])
            if group.state == "awaiting_revoke":
                group.revoked()
            else:
                group.join_after_revoke(False)

        if self.auto_commit and self.assignment:
            self.commit_positions().add_callback(then)
        else:
            then(None)

    def assignment_received(self, tps: list[TopicPartition]) -> None:
        self.want_topics({tp.topic for tp in tps})
        self._set_assignment(tps)
        self.events.append(("assign", list(tps)))
        self.notify()
        self._refresh_committed(tps)

    # -- committed offsets and resets ---------------------------------------------------

    def _refresh_committed(self, tps: list[TopicPartition]) -> None:
        if not tps:
            return
        if self.group is None:
            for tp in tps:
                st = self.assignment.get(tp)
                if st is not None and st.position is None:
                    self._start_reset(tp, st, self.default_reset)
            return
        self._fetching_committed = True

        group = self.group

        def done(p: Pending[Any]) -> None:
            self._fetching_committed = False
            err = p.error
            if err is not None:
                # never fall back to auto.offset.reset because the coordinator was away
                if isinstance(err, KafkaError) and not err.retriable and not isinstance(err, ConnectionError):
                    self.errors.append(err)
                    self.notify()
                    return
                self.call_at(
                    self.now + group.backoff,
                    lambda: self._refresh_committed(
                        [tp for tp in tps if tp in self.assignment and self.assignment[tp].position is None]
                    ),
                )
                return
            offsets = p._value
            for tp in tps:
                st = self.assignment.get(tp)
                if st is None or st.position is not None:
                    continue
                off = offsets.get(tp)
                if off is not None and off[0] >= 0:
                    st.position = st.fetch_offset = off[0]
                    self.committed_positions[tp] = off[0]
                else:
                    self._start_reset(tp, st, self.default_reset)
            self.wake()

        self.fetch_committed(tps).add_callback(done)

    def _start_reset(self, tp: TopicPartition, st: PartitionState, how: int | None) -> None:
        if how is None:
            st.error = NoOffsetForPartitionError(
                f"{tp.topic}-{tp.partition} has no committed offset and auto.offset.reset is 'none'"
            )
            self.errors.append(st.error)
            self.notify()
            return
        st.reset = how
        st.position = st.fetch_offset = None
        st.bump()
        self.wake()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        st = self._state(tp)
        st.position = st.fetch_offset = offset
        st.reset = None
        st.error = None
        st.bump()

    def seek_to(self, tps: list[TopicPartition], how: int) -> None:
        for tp in tps or list(self.assignment):
            self._start_reset(tp, self._state(tp), how)

    def _state(self, tp: TopicPartition) -> PartitionState:
        st = self.assignment.get(tp)
        if st is None:
            raise KafkaError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return st

    def pause(self, tps: list[TopicPartition], paused: bool) -> None:
        for tp in tps:
            st = self._state(tp)
            if st.paused != paused:
                st.paused = paused
                st.bump()
                st.fetch_offset = st.position

    def _send_resets(self) -> None:
        by_leader: dict[int, list[tuple[TopicPartition, PartitionState]]] = {}
        for tp, st in self.assignment.items():
            if st.reset is None or tp in self._resetting:
                continue
            leader = self.metadata.leader(*tp)
            if leader < 0:
                self.request_metadata_update()
                continue
            by_leader.setdefault(leader, []).append((tp, st))
        req_cls = _ListOffsetsRequest
        for leader, items in by_leader.items():
            topics: dict[str, list[Any]] = {}
            for tp, st in items:
                self._resetting.add(tp)
                topics.setdefault(tp.topic, []).append(
                    req_cls.ListOffsetsPartition(partition_index=tp.partition, timestamp=st.reset)
                )
            req = req_cls(
                replica_id=-1,
                isolation_level=1 if self.read_committed else 0,
                topics=[req_cls.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()],
            )
            epochs = {tp: st.epoch for tp, st in items}
            self.net.request(leader, req).add_callback(lambda p, e=epochs: self._on_reset(p, e))  # type: ignore[misc]

    def _on_reset(self, p: Pending[Any], epochs: dict[TopicPartition, int]) -> None:
        for tp in epochs:
            self._resetting.discard(tp)
        if p.error is not None:
            self.request_metadata_update()
            return
        for t in p._value.topics:
            for part in t.partitions:
                tp = TopicPartition(t.name, part.partition_index)
                st = self.assignment.get(tp)
                if st is None or st.reset is None or epochs.get(tp) != st.epoch:
                    continue
                if part.error_code:
                    self.request_metadata_update()
                    continue
                st.position = st.fetch_offset = part.offset
                st.reset = None
        self.wake()

    # -- fetching -----------------------------------------------------------------------

    def _send_fetches(self, now: float) -> None:
        if self.buffered >= self.buffer_limit:
            return
        by_leader: dict[int, list[tuple[TopicPartition, PartitionState]]] = {}
        for tp, st in self.assignment.items():
            if st.fetch_offset is None or st.paused or st.in_flight or st.error is not None:
                continue
            if self._backoff_until.get(tp, 0.0) > now:
                continue
            leader = self.metadata.leader(*tp)
            if leader < 0:
                self.want_topics({tp.topic})
                self.request_metadata_update()
                continue
            if leader in self._fetching:
                continue
            by_leader.setdefault(leader, []).append((tp, st))
        cfg = self.config
        req_cls = _FetchRequest
        for leader, items in by_leader.items():
            topics: dict[str, list[Any]] = {}
            sent = []
            for tp, st in items:
                st.in_flight = True
                sent.append((tp, st, st.epoch, st.fetch_offset))
                topics.setdefault(tp.topic, []).append(
                    req_cls.FetchPartition(
                        partition=tp.partition,
                        fetch_offset=st.fetch_offset,
                        partition_max_bytes=cfg["max.partition.fetch.bytes"],
                    )
                )
            req = req_cls(
                replica_id=-1,
                max_wait_ms=cfg["fetch.max.wait.ms"],
                min_bytes=cfg["fetch.min.bytes"],
                max_bytes=cfg["fetch.max.bytes"],
                isolation_level=1 if self.read_committed else 0,
                session_id=0,
                session_epoch=-1,
                topics=[req_cls.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            )
            self._fetching.add(leader)
            timeout = self.net.request_timeout + cfg["fetch.max.wait.ms"] / 1000
            self.net.request(leader, req, timeout=timeout).add_callback(
                lambda p, n=leader, s=sent: self._on_fetch(n, s, p)  # type: ignore[misc]
            )

    def _on_fetch(
        self, node: int, sent: list[tuple[TopicPartition, PartitionState, int, int]], p: Pending[Any]
    ) -> None:
        self._fetching.discard(node)
        for _, sent_st, _, _ in sent:
            sent_st.in_flight = False  # that state's fetch is over, whatever happened since
        if p.error is not None:
            self.request_metadata_update()
            self.wake()
            return
        resp = p._value
        asked = {tp: (sent_st, epoch, offset) for tp, sent_st, epoch, offset in sent}
        got_data = False
        for t in resp.responses:
            topic = t.topic
            for part in t.partitions:
                tp = TopicPartition(topic, part.partition_index)
                st = self.assignment.get(tp)
                if st is None or tp not in asked or asked[tp][0] is not st or asked[tp][1] != st.epoch:
                    continue  # revoked, reassigned, seeked, paused or reset meanwhile
                offset = asked[tp][2]
                code = part.error_code
                if code:
                    self._fetch_error(tp, st, code)
                    continue
                st.high_watermark = part.high_watermark
                aborted = None
                if self.read_committed:
                    aborted = [(a.producer_id, a.first_offset) for a in (part.aborted_transactions or [])]
                try:
                    rs = _core.decode_records(topic, tp.partition, part.records, offset, self.check_crcs, aborted)
                except _core.LogBrokerError as e:
                    st.error = error_for(ErrorCode.CORRUPT_MESSAGE, str(e), f"fetch from {topic}-{tp.partition}")
                    self.errors.append(st.error)
                    got_data = True
                    continue
                st.fetch_offset = rs.next_offset
                if len(rs):
                    rs.epoch = st.epoch
                    self.ready.append(rs)
                    self.buffered += rs.size
                    got_data = True
        if got_data:
            self.notify()
        self._send_fetches(self.now)

    def _fetch_error(self, tp: TopicPartition, st: PartitionState, code: int) -> None:
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._start_reset(tp, st, self.default_reset)
        elif code in (
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.LEADER_NOT_AVAILABLE,
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.UNKNOWN_LEADER_EPOCH,
            ErrorCode.KAFKA_STORAGE_ERROR,
            ErrorCode.REPLICA_NOT_AVAILABLE,
        ):
            self.request_metadata_update()
            self._backoff_until[tp] = self.now + self.config["retry.backoff.ms"] / 1000
            self.call_at(self._backoff_until[tp], lambda: None)
        else:
            st.error = error_for(code, None, f"fetch from {tp.topic}-{tp.partition}")
            self.errors.append(st.error)
            self.notify()

    # -- application side ---------------------------------------------------------------

    def take_records(self, max_records: int) -> list[_core.ConsumerRecord]:
        """Pops up to `max_records` ready records and advances positions (any thread)."""
        out: list[_core.ConsumerRecord] = []
        ready = self.ready
        before = self.buffered
        while ready and len(out) < max_records:
            rs = ready[0]
            st = self.assignment.get(TopicPartition(rs.topic, rs.partition))
            if st is None or st.epoch != rs.epoch or st.paused:
                ready.popleft()
                self.buffered -= rs.size
                continue
            out.extend(rs.take(max_records - len(out)))
            st.position = rs.position
            if not len(rs):
                ready.popleft()
                self.buffered -= rs.size
        if before >= self.buffer_limit > self.buffered:
            self.wake()
        return out

    def has_ready(self) -> bool:
        return bool(self.ready) or bool(self.errors) or bool(self.events)

    # -- commits ------------------------------------------------------------------------

    def commit_positions(self, only: list[TopicPartition] | None = None) -> Pending[Any]:
        wanted = None if only is None else set(only)
        offsets: dict[TopicPartition, tuple[int, str | None]] = {
            tp: (st.position, None)
            for tp, st in self.assignment.items()
            if st.position is not None
            and self.committed_positions.get(tp) != st.position
            and (wanted is None or tp in wanted)
        }
        if not offsets:
            return Pending.of(None)
        return self.commit(offsets)

    def commit(self, offsets: dict[TopicPartition, tuple[int, str | None]], retries: int = 5) -> Pending[Any]:
        if self.group is None:
            p: Pending[Any] = Pending()
            p.fail(ConfigError("commit needs a group.id"))
            return p
        group = self.group
        req_cls = _OffsetCommitRequest
        topics: dict[str, list[Any]] = {}
        for tp, (off, meta) in offsets.items():
            topics.setdefault(tp.topic, []).append(
                req_cls.OffsetCommitRequestPartition(
                    partition_index=tp.partition, committed_offset=off, committed_metadata=meta
                )
            )
        in_group = group.active and group.generation >= 0 and bool(group.member_id)
        req = req_cls(
            group_id=group.group_id,
            generation_id_or_member_epoch=group.generation if in_group else -1,
            member_id=group.member_id if in_group else "",
            group_instance_id=group.instance_id,
            topics=[req_cls.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )
        out: Pending[Any] = Pending()

        def done(p: Pending[Any]) -> None:
            err: BaseException | None = p.error
            if err is None:
                for t in p._value.topics:
                    for part in t.partitions:
                        if part.error_code and err is None:
                            err = error_for(part.error_code, None, f"commit of {t.name}-{part.partition_index}")
                if err is None:
                    for tp, (off, _) in offsets.items():
                        self.committed_positions[tp] = off
                    out.resolve(None)
                    return
            code = getattr(err, "code", None)
            if code == ErrorCode.STALE_MEMBER_EPOCH:
                group.request_rejoin()  # KIP-848: heartbeat now, then commit with the current epoch
            if code == ErrorCode.STALE_MEMBER_EPOCH or _retry_at_coordinator(group, err):
                if retries > 0:
                    self.call_at(
                        self.now + group.backoff,
                        lambda: self.commit(offsets, retries - 1).add_callback(
                            lambda q: out.fail(q.error) if q.error is not None else out.resolve(None)
                        ),
                    )
                    return
            if code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS):
                group.request_rejoin()
            assert err is not None
            out.fail(err)

        group.request(req).add_callback(done)
        return out

    def fetch_committed(
        self, tps: list[TopicPartition], retries: int = 20
    ) -> Pending[dict[TopicPartition, tuple[int, str | None]]]:
        """The group's committed offsets; retried while the coordinator moves or loads, or a
        transaction's offsets are pending (UNSTABLE_OFFSET_COMMIT), as Kafka's clients do."""
        if self.group is None:
            p: Pending[Any] = Pending()
            p.fail(ConfigError("committed offsets need a group.id"))
            return p
        group = self.group
        out: Pending[dict[TopicPartition, tuple[int, str | None]]] = Pending()

        def done(p: Pending[dict[TopicPartition, tuple[int, str | None]]]) -> None:
            err = p.error
            if err is None:
                out.resolve(p.result())
                return
            if retries > 0 and _retry_at_coordinator(group, err):
                self.call_at(
                    self.now + group.backoff,
                    lambda: self.fetch_committed(tps, retries - 1).add_callback(
                        lambda q: out.fail(q.error) if q.error is not None else out.resolve(q.result())
                    ),
                )
                return
            out.fail(err)

        self._fetch_committed_once(tps).add_callback(done)
        return out

    def _fetch_committed_once(self, tps: list[TopicPartition]) -> Pending[dict[TopicPartition, tuple[int, str | None]]]:
        assert self.group is not None
        req_cls = _OffsetFetchRequest
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        req = req_cls(
            group_id=self.group.group_id,
            require_stable=True,
            topics=[req_cls.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
        )

        group_id = self.group.group_id
        return self.group.request(req).chain(lambda resp: committed_from_response(resp, group_id))

    # -- the loop -----------------------------------------------------------------------

    def _tick(self, now: float) -> None:
        if self.group is not None:
            self._check_poll_interval()
            self.group.tick(now)
        self._send_resets()
        self._send_fetches(now)
        if self.auto_commit and now >= self.next_auto_commit:
            self.next_auto_commit = now + self.auto_commit_interval
            if self.group is not None and (self.group.state == "stable" or not self.group.active):
                self.commit_positions().add_callback(lambda p: None)

    def _deadline(self) -> float | None:
        ds = []
        if self.group is not None:
            d = self.group.deadline()
            if d is not None:
                ds.append(d)
        if self.auto_commit:
            ds.append(self.next_auto_commit)
        return min(ds) if ds else None

    def close_group(self) -> Pending[Any]:
        """Commit (auto-commit) and leave the group."""

        def leave(_: Any) -> Pending[Any]:
            if self.group is not None and self.group.active:
                return self.group.leave()
            return Pending.of(None)

        first = self.commit_positions() if self.auto_commit and self.assignment else Pending.of(None)
        out: Pending[Any] = Pending()
        first.add_callback(lambda _: leave(None).add_callback(lambda _: out.resolve(None)))
        return out


def _retry_at_coordinator(group: Any, err: BaseException | None) -> bool:
    """Whether a group request that failed with `err` is retried after the group's backoff
    (the coordinator moved or is loading, the connection broke, a retriable error); where
    the coordinator is gone or unreachable it is forgotten, so the retry finds it anew."""
    code = getattr(err, "code", None)
    gone = code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not (gone or isinstance(err, ConnectionError) or (isinstance(err, KafkaError) and err.retriable)):
        return False
    if gone or not isinstance(err, KafkaError) or code == ErrorCode.NETWORK_EXCEPTION:
        group.coordinator_lost()
    return True
