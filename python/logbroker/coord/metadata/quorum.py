"""The controller quorum's driver: one trio task that owns a `_core.RaftNode` (raft-rs over
a durable Raft log, rust/src/raft) and drives it.

    node = _core.RaftNode(node_id, voters, directory)
    driver = QuorumDriver(node, transport, apply)
    nursery.start_soon(driver.run)
    index = await driver.propose(record_bytes)      # committed and applied here
    driver.receive(message_bytes)                   # the transport hands in peer messages

The driver does no consensus: it feeds raft-rs its inputs (ticks, peer messages,
proposals), then calls `ready()`, which persists what Raft asks (entries, hard state;
fsynced, in a worker thread so the event loop never blocks on the disk) and returns the
messages to send and the committed entries, which are applied in index order by `apply`.
Inputs that arrive while a `ready()` is on disk are batched into the next round, so one
fsync covers many messages (group commit).

Timing: `tick_seconds` x `election_tick` is the election timeout (raft-rs randomises it
between 1x and 2x), `heartbeat_tick` ticks between heartbeats. Kafka's
`controller.quorum.election.timeout.ms` (1000) is `election_tick` = 10 ticks of 100 ms.

A proposal is matched to its committed entry by a random 16-byte context, so a proposal
made at a follower (forwarded to the leader by Raft) completes when this node applies it.
A proposal made while no leader is known is kept and offered again every round. If the
entry is lost (a leader change before it committed), `propose` times out with
`QuorumTimeout` and the caller decides whether to retry. A record appended twice (a
forwarded proposal delivered twice) is applied once: see `_first_time`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from logbroker import _core
from logbroker.log_format import fields

log = logging.getLogger("logbroker.quorum")

__all__ = ["QuorumDriver", "QuorumTimeout", "Transport"]


class QuorumTimeout(Exception):
    """A proposal did not commit in time (no leader, or the leader changed)."""


class Transport(Protocol):
    def send(self, to: int, message: bytes) -> None:
        """Queue a Raft message for node `to`; must not block; may drop it."""


# (index, data) of a committed record, applied in index order.
Apply = Callable[[int, bytes], None]
# (index, term, data) of a snapshot to load instead of the records it covers.
InstallSnapshot = Callable[[int, int, bytes], None]
RunSync = Callable[..., Awaitable]

DEDUPE_WINDOW = 4096


class QuorumDriver:
    def __init__(
        self,
        node: _core.RaftNode,
        transport: Transport,
        apply: Apply,
        *,
        install_snapshot: InstallSnapshot | None = None,
        tick_seconds: float = 0.1,
        run_sync: RunSync | None = None,
        on_conf_change: Callable[[], None] | None = None,
    ) -> None:
        self.node = node
        self.transport = transport
        self.apply = apply
        self.install_snapshot = install_snapshot
        self.tick_seconds = tick_seconds
        self._run_sync: RunSync = run_sync or trio.to_thread.run_sync
        self._inbox: list[bytes] = []
        self._proposals: list[tuple[bytes, bytes]] = []
        self._wake = trio.Event()
        self._waiters: dict[bytes, tuple[trio.Event, list[int]]] = {}
        self.applied_index = 0
        self.failed: BaseException | None = None
        self._recent: dict[bytes, None] = {}  # contexts of the last DEDUPE_WINDOW records applied
        self._transfer_to = 0
        self._add_learners: set[int] = set()
        self.on_conf_change = on_conf_change  # called when a configuration change is applied
        # voter changes asked of this node (the leader): (kind, id, context, outcome slot, done)
        self._voter_changes: list[tuple[str, int, bytes, list, trio.Event]] = []

    # -- inputs (never block)
    def receive(self, message: bytes) -> None:
        """A Raft message from a peer; handled in the next round."""
        self._inbox.append(message)
        self._wake.set()

    def recent_contexts(self) -> list[bytes]:
        """The dedupe window, oldest first (a snapshot carries it)."""
        return list(self._recent)

    def restore_recent(self, contexts: list[bytes]) -> None:
        """Replace the dedupe window with a snapshot's."""
        self._recent = dict.fromkeys(contexts[-DEDUPE_WINDOW:])

    def transfer_leader(self, to: int) -> None:
        """Ask Raft (on the leader) to hand leadership to `to`; done in the next round."""
        self._transfer_to = to
        self._wake.set()

    def add_learners(self, ids: set[int]) -> None:
        """On the leader: propose these observers as learners (one configuration change at
        a time; raft-rs ignores the rest, the caller asks again)."""
        self._add_learners |= ids
        self._wake.set()

    async def propose_voter_change(self, kind: str, node_id: int, context: bytes) -> bool:
        """On the leader: propose adding (`kind` "add": a learner becomes a voter) or removing
        ("remove") voter `node_id`, in the next round. False if this node does not lead or
        another change is pending (ask again); RaftError if the change makes no sense (the
        node is not a learner, already a voter, not a voter, the last voter)."""
        slot: list = []
        done = trio.Event()
        self._voter_changes.append((kind, node_id, context, slot, done))
        self._wake.set()
        await done.wait()
        if isinstance(slot[0], BaseException):
            raise slot[0]
        return bool(slot[0])

    async def propose(self, data: bytes, timeout: float = 5.0) -> int:
        """Append `data` to the metadata log; returns its index once it is committed and
        applied on this node. Raises QuorumTimeout if that does not happen in `timeout`."""
        ctx = os.urandom(16)
        done = trio.Event()
        slot: list[int] = []
        self._waiters[ctx] = (done, slot)
        self._proposals.append((ctx, data))
        self._wake.set()
        try:
            with trio.move_on_after(timeout):
                await done.wait()
            if not slot:
                raise QuorumTimeout(
                    f"metadata record of {len(data)} bytes not committed within {timeout}s "
                    f"(node {self.node.node_id}, leader {self.node.leader_id or 'unknown'}, term {self.node.term})"
                )
            return slot[0]
        finally:
            self._waiters.pop(ctx, None)

    def _first_time(self, ctx: bytes) -> bool:
        """False for a record whose context was applied among the last DEDUPE_WINDOW records
        (a forwarded proposal the network delivered twice is appended twice). Every node
        decides alike: the window is a function of the log prefix it applies (a snapshot
        carries it: `recent_contexts` / `restore_recent`)."""
        if ctx in self._recent:
            return False
        self._recent[ctx] = None
        if len(self._recent) > DEDUPE_WINDOW:
            del self._recent[next(iter(self._recent))]
        return True

    # -- the loop
    async def run(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        node = self.node
        next_tick = trio.current_time() + self.tick_seconds
        task_status.started()
        while True:
            with trio.move_on_at(next_tick):
                await self._wake.wait()
            self._wake = trio.Event()
            now = trio.current_time()
            while now >= next_tick:
                node.tick()
                next_tick += self.tick_seconds
            inbox, self._inbox = self._inbox, []
            for msg in inbox:
                try:
                    node.step(msg)
                except _core.RaftError as e:
                    if isinstance(e, _core.NoLeaderError):
                        continue
                    log.warning("node %d: dropped a Raft message of %d bytes: %s", node.node_id, len(msg), e)
            if self._transfer_to:
                node.transfer_leader(self._transfer_to)
                self._transfer_to = 0
            learners, self._add_learners = self._add_learners, set()
            for n in sorted(learners):
                if node.add_learner(n):
                    log.info(
                        "node %d: proposed observer %d as a learner of the metadata log",
                        node.node_id,
                        n,
                        extra=fields(peer=n),
                    )
                    break  # one configuration change at a time
            changes, self._voter_changes = self._voter_changes, []
            for kind, n, ctx, slot, done in changes:
                try:
                    slot.append(node.add_voter(n, ctx) if kind == "add" else node.remove_voter(n, ctx))
                except _core.RaftError as e:
                    slot.append(e)
                done.set()
            proposals, self._proposals = self._proposals, []
            for i, (ctx, data) in enumerate(proposals):
                if ctx not in self._waiters:
                    continue
                try:
                    node.propose(ctx, data)
                except _core.NoLeaderError:
                    # no leader known yet: keep them for the next round (next tick at the latest)
                    self._proposals[:0] = [p for p in proposals[i:] if p[0] in self._waiters]
                    break
            try:
                messages, snapshot, committed = await self._run_sync(node.ready)
            except _core.RaftError as e:
                self.failed = e
                log.error("node %d: the metadata log failed, the quorum node stops: %s", node.node_id, e)
                raise
            for to, msg in messages:
                self.transport.send(to, msg)
            if snapshot is not None:
                index, term, data = snapshot
                if self.install_snapshot is None:
                    raise _core.RaftError(
                        f"node {node.node_id}: received a snapshot at index {index} but cannot install one"
                    )
                self.install_snapshot(index, term, data)
                self.applied_index = index
            for index, _term, normal, ctx, data in committed:
                if index <= self.applied_index:
                    continue
                if normal and self._first_time(ctx):
                    self.apply(index, data)
                elif not normal and data and self.on_conf_change is not None:
                    self.on_conf_change()  # raft-rs applied it in ready(): the voters changed
                self.applied_index = index
                w = self._waiters.get(ctx)
                if w is not None and normal:
                    w[1].append(index)
                    w[0].set()
            if messages or committed or snapshot is not None:
                self._wake.set()  # Raft may have more ready (e.g. after advance)
