"""A partition replica on this broker: its log plus the replication state around it.

State (Kafka's names):
    leader, leader_epoch, replicas, isr   from the metadata image (controller-owned)
    log.log_end_offset (LEO)              owned by the Rust Log
    high watermark (HW)                   stored in the Rust Log and moved by the data path's
                                          rule (rust/src/server/partition.rs): the minimum LEO
                                          over the ISR, so with a one-replica ISR it equals
                                          the leader's LEO right after every append
    follower LEOs                         reported by follower fetches, kept in Rust

`core` is this replica's entry in the data path's partition table (`_core.ReplicaPartition`):
Produce and Fetch are served from it on the network thread; this object mirrors the leader
state into it (`apply_state`) and moves the HW after the control plane's own appends
(`maybe_increment_hw`, e.g. the group coordinator writing `__consumer_offsets`).

Invariants:
    log_start_offset <= HW <= LEO; consumers never read at or above the HW;
    every leader change arrives with a higher leader epoch, which the log records in its
    leader-epoch cache the first time a batch is appended under it.

Waiting: control-plane writers that need their write covered by the HW (the group and
transaction coordinators, transaction markers) register a trio.Event (`add_waiter`);
`notify` sets and forgets them all, and the waiter re-checks its own condition. A follower's
fetch moves the HW on the network thread (Rust), so while this replica has waiters it asks
the data path to report HW moves (`core.watch_high_watermark`): they arrive as events on the
network server's notify fd and the dispatcher calls `notify` (`ReplicaManager.high_watermark_moved`).
A waiter registers before it reads the HW, so a move in between is reported. (Data-path
waits live in Rust.)
"""

from __future__ import annotations

import uuid

import trio

from logbroker._core import Log, PartitionTable
from logbroker.coord.metadata.metadata import PartitionState


class Partition:
    def __init__(
        self,
        topic: str,
        topic_id: uuid.UUID,
        state: PartitionState,
        log: Log,
        node_id: int,
        table: PartitionTable,
        min_insync_replicas: int,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.index = state.partition
        self.node_id = node_id
        self.log = log
        self.configured_min_isr = min_insync_replicas  # the topic's min.insync.replicas
        self.replicas = list(state.replicas)
        self.deleted = False  # set when the topic is deleted; waiters then see UNKNOWN_TOPIC_OR_PARTITION
        self._waiters: set[trio.Event] = set()
        self.state = state
        self.core = table.add(
            topic,
            state.partition,
            node_id,
            log,
            state.leader,
            state.leader_epoch,
            list(state.isr),
            self.min_insync_replicas,
        )
        self.apply_state(state)

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.index}, epoch {self.leader_epoch}, HW {self.log.high_watermark}, LEO {self.log.log_end_offset})"

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def min_insync_replicas(self) -> int:
        """The effective min ISR (Kafka's Partition.effectiveMinIsr): min.insync.replicas, but
        never more than the partition has replicas, so acks=all on a topic with fewer replicas
        than min.insync.replicas is answered once every replica has the records."""
        return min(self.configured_min_isr, max(len(self.replicas), 1))

    def apply_state(self, state: PartitionState, min_insync_replicas: int | None = None) -> None:
        self.state = state
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        if min_insync_replicas is not None:
            self.configured_min_isr = min_insync_replicas
        self.core.update(state.leader, state.leader_epoch, self.isr, self.min_insync_replicas)
        if self.is_leader:
            self.maybe_increment_hw()

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def maybe_increment_hw(self) -> bool:
        """HW = min LEO over the ISR (the leader's own LEO counts for itself); the data
        path's waiters and ours are woken when it moves."""
        if self.core.maybe_increment_hw():
            self.notify()
            return True
        return False

    def notify(self) -> None:
        waiters, self._waiters = self._waiters, set()
        self.core.watch_high_watermark(False)
        for event in waiters:
            event.set()

    def add_waiter(self, event: trio.Event) -> None:
        """Wake `event` at the next HW move or state change; register before reading the HW."""
        self._waiters.add(event)
        self.core.watch_high_watermark(True)

    def remove_waiter(self, event: trio.Event) -> None:
        self._waiters.discard(event)
        if not self._waiters:
            self.core.watch_high_watermark(False)

    async def wait_for_hw(self, offset: int, deadline: float) -> bool:
        """Wait until HW >= offset or the trio-clock deadline passes; True if reached."""
        with trio.move_on_at(deadline):
            while True:
                event = trio.Event()
                self.add_waiter(event)
                try:
                    if self.log.high_watermark >= offset:
                        return True
                    await event.wait()
                finally:
                    self.remove_waiter(event)
        return self.log.high_watermark >= offset
