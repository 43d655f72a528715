"""The partitions of a compacted internal state topic that a coordinator keeps its state in
(`__transaction_state` for transactions, `__share_group_state` for share-group state).

Placement: a key lives in partition abs(java_string_hash(key)) % the topic's partition
count, and is coordinated by that partition's leader. This broker coordinates the
partitions it leads: `on_metadata` reports the ones it stopped leading (their state is to
be dropped) and the ones it started leading (at a new leader epoch: their state is to be
read back with `read_all`, to the log end, since a new leader's HW lags the records the
previous leader acknowledged). A partition counts as loaded (`loaded`) only once its
coordinator has read it back.

Writes (`append`): one record, appended as the leader at the loaded leader epoch (appends
to a partition are serialised), and acknowledged once the HW covers it, so a change is
applied in memory only after it is replicated to the ISR. Errors are StateTopicError with
the Kafka code to answer: NOT_COORDINATOR (leadership lost before or during the write),
COORDINATOR_NOT_AVAILABLE (the append failed or the HW did not reach it in time).
"""

from __future__ import annotations

import logging

import trio

from logbroker import _core
from logbroker.clock import now_ms
from logbroker.coord.groups.offsets_topic import partition_for
from logbroker.coord.metadata.control import ControllerError
from logbroker.log_format import fields
from logbroker.protocol import ErrorCode

log = logging.getLogger("logbroker.coord")

WRITE_TIMEOUT_S = 30.0


class StateTopicError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def coordinator_state(replicas, image, node_id: int, topic: str, index: int, loaded) -> int:
    """Whether this broker coordinates what lives in partition `index` of the state topic:
    NONE when it leads the partition and has read it back (`index in loaded`);
    COORDINATOR_LOAD_IN_PROGRESS when it leads it but has not read it yet, including while the
    metadata image already makes it the leader (FindCoordinator answers so) and its replica
    is still being opened; NOT_COORDINATOR otherwise."""
    part = replicas.get(topic, index)
    if part is None or not part.is_leader:
        t = image.topics.get(topic)
        ps = None if t is None else t.partitions.get(index)
        return (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            if ps is not None and ps.leader == node_id
            else ErrorCode.NOT_COORDINATOR
        )
    return ErrorCode.NONE if index in loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class StateTopic:
    def __init__(self, topic: str, node_id: int, replicas, controller, num_partitions: int) -> None:
        self.topic = topic
        self.node_id = node_id
        self.replicas = replicas
        self.controller = controller
        self.num_partitions = num_partitions
        self.loaded: dict[int, int] = {}  # partitions read back -> their leader epoch
        self._append_locks: dict[int, trio.Lock] = {}

    async def ensure(self, num_partitions: int, replication_factor: int, min_isr: int, segment_bytes: int) -> None:
        """Creates the topic (compacted) unless it exists."""
        if self.topic not in self.controller.image.topics:
            try:
                await self.controller.create_topic(
                    self.topic,
                    num_partitions,
                    replication_factor,
                    configs={
                        "cleanup.policy": "compact",
                        "min.insync.replicas": str(min(replication_factor, min_isr)),
                        "segment.bytes": str(segment_bytes),
                    },
                )
            except ControllerError as e:
                if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise
        self.num_partitions = len(self.controller.image.topics[self.topic].partitions)

    def partition_of(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def coordinator_node(self, key: str) -> tuple[int, int]:
        """(partition, leader id or -1) of the key's partition."""
        index = self.partition_of(key)
        topic = self.controller.image.topics.get(self.topic)
        ps = None if topic is None else topic.partitions.get(index)
        return index, -1 if ps is None else ps.leader

    def check_loaded(self, index: int, what: str) -> None:
        """StateTopicError unless this broker leads partition `index` and has read it back."""
        code = coordinator_state(self.replicas, self.controller.image, self.node_id, self.topic, index, self.loaded)
        if code == ErrorCode.NOT_COORDINATOR:
            raise StateTopicError(code, f"this broker does not lead {self.topic}-{index} ({what})")
        if code != ErrorCode.NONE:
            raise StateTopicError(code, f"{self.topic}-{index} is loading ({what})")

    def leadership_changes(self, image) -> tuple[list[int], dict[int, int]]:
        """(partitions no longer led at their loaded epoch, which are forgotten here; partitions
        led at an epoch not loaded yet -> that epoch)."""
        topic = image.topics.get(self.topic)
        led = (
            {}
            if topic is None
            else {p: ps.leader_epoch for p, ps in topic.partitions.items() if ps.leader == self.node_id}
        )
        if topic is not None:
            self.num_partitions = len(topic.partitions)
        lost = [p for p in self.loaded if led.get(p) != self.loaded[p]]
        for p in lost:
            del self.loaded[p]
        return lost, {p: e for p, e in led.items() if self.loaded.get(p) != e}

    async def read_all(self, indexes) -> list[tuple[int, list]]:
        """[(partition, [(offset, timestamp, key, value), ...])] of the local replicas of
        `indexes`, from the log start to the log end."""
        wanted = set(indexes)
        parts = [p for (t, i), p in self.replicas.partitions.items() if t == self.topic and i in wanted]

        def read():
            return [(p.index, p.log.read_records(p.log.log_start_offset, p.log.log_end_offset)) for p in parts]

        return await trio.to_thread.run_sync(read)

    def mark_loaded(self, epochs: dict[int, int]) -> None:
        self.loaded.update(epochs)

    async def append(self, index: int, key: bytes, value: bytes | None, what: str) -> None:
        """Appends one record to partition `index` and waits until the HW covers it."""
        part = self.replicas.get(self.topic, index)
        epoch = self.loaded.get(index)
        if part is None or not part.is_leader or epoch is None or part.leader_epoch != epoch:
            raise StateTopicError(ErrorCode.NOT_COORDINATOR, f"lost leadership of {self.topic}-{index} ({what})")
        lock = self._append_locks.setdefault(index, trio.Lock())
        async with lock:
            batch = _core.encode_batch([(key, value, 0, [])], base_timestamp=now_ms())
            try:
                result = await trio.to_thread.run_sync(part.log.append_as_leader, batch, epoch, now_ms())
            except (_core.LogBrokerError, OSError) as e:
                log.error(
                    "writing %s to %s-%d failed: %s",
                    what,
                    self.topic,
                    index,
                    e,
                    extra=fields(topic=self.topic, partition=index),
                )
                raise StateTopicError(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, f"writing {what} to {self.topic}-{index} failed: {e}"
                ) from None
            part.maybe_increment_hw()
        if not await part.wait_for_hw(result.last_offset + 1, trio.current_time() + WRITE_TIMEOUT_S):
            raise StateTopicError(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"{self.topic}-{index}: HW did not reach {result.last_offset + 1} within "
                f"{WRITE_TIMEOUT_S:.0f} s ({what})",
            )
        if self.loaded.get(index) != epoch:
            raise StateTopicError(ErrorCode.NOT_COORDINATOR, f"lost leadership of {self.topic}-{index} ({what})")
