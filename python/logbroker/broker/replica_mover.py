"""Moving a replica between this broker's log directories while it serves
(AlterReplicaLogDirs, KIP-113; Kafka's future log and ReplicaAlterLogDirsThread).

A move of partition P to log directory D:
 1. creates the future log `D/<P>.<move id>-future`, empty;
 2. copies rounds while the replica keeps serving produce, fetch and replication: each round
    is one worker-thread hop of `Log.copy_to` (the Rust log reads whole batches from the
    current log and appends them to the future one as a follower would, cutting the future
    back if the current log was truncated, and carrying the HW and log start over), at most
    `replica.fetch.max.bytes` per round, until a round finds the future caught up;
 3. swaps, holding the replica manager's metadata lock: the partition leaves the data path
    (produce and fetch answer as for a partition not hosted here, which clients retry) and
    the fetch loops, the last batches are copied, both logs are closed, the current
    directory is renamed `-delete` and the future one renamed live (that order makes a crash
    recoverable: broker/log_dirs.py), the log is opened again from D with its HW, the
    partition returns to the data path and its followers' loops, and the `-delete`
    directory is removed. The old Partition object is marked deleted, so a control-plane
    writer waiting on it gets a retriable error, as after a leader change.
A move is cancelled, and its future log deleted, by an AlterReplicaLogDirs naming another
directory (which starts a new move), by the partition's deletion, and by shutdown (then the
`-future` directory is removed at the next start). DescribeLogDirs shows a move's future
replica in D with IsFutureKey, its size and its lag (current LEO - future LEO).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import trio

from logbroker import _core
from logbroker.broker.log_dirs import move_dir_name, partition_dir_name
from logbroker.clock import now_ms
from logbroker.common.files import fsync_dir
from logbroker.log_format import fields

log = logging.getLogger("logbroker.replica_mover")

# pause between rounds that found nothing to copy (the future is caught up but a round found
# the current log longer again): the swap copies the rest
_IDLE_S = 0.05


@dataclass
class Move:
    key: tuple[str, int]
    dest: Path
    move_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    future: _core.Log | None = None
    cancel_scope: trio.CancelScope = field(default_factory=trio.CancelScope)

    @property
    def future_dir(self) -> Path:
        return self.dest / move_dir_name(*self.key, self.move_id, "future")


class ReplicaMover:
    def __init__(self, replicas) -> None:
        self.replicas = replicas  # the ReplicaManager
        self.moves: dict[tuple[str, int], Move] = {}
        self._nursery: trio.Nursery | None = None
        self._round_bytes = replicas.config.get_int("replica.fetch.max.bytes")

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Hosts the moves; runs until cancelled (the replica manager's background)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    def start(self, key: tuple[str, int], dest: Path) -> None:
        """Move replica `key` (hosted here, not in `dest`) to `dest`; a move of it to another
        directory is cancelled first. Raises RuntimeError when moves are not running."""
        old = self.moves.get(key)
        if old is not None:
            if old.dest == dest:
                return
            self.cancel(key)
        if self._nursery is None:
            raise RuntimeError("the replica manager's background tasks are not running")
        move = Move(key, dest)
        self.moves[key] = move
        self._nursery.start_soon(self._run, move)

    def cancel(self, key: tuple[str, int]) -> None:
        move = self.moves.pop(key, None)
        if move is not None:
            move.cancel_scope.cancel()

    def cancel_all(self) -> None:
        for key in list(self.moves):
            self.cancel(key)

    async def _run(self, move: Move) -> None:
        topic, index = move.key
        where = fields(topic=topic, partition=index)
        rm = self.replicas
        try:
            with move.cancel_scope:
                p = rm.partitions.get(move.key)
                if p is None:
                    return
                configs = rm.topic_configs(topic)
                move.future = await trio.to_thread.run_sync(
                    lambda: _core.Log.create(
                        str(move.future_dir), topic, index, rm.config.engine_config(configs), now_ms()
                    )
                )
                log.info(
                    "moving %s-%d from %s to %s (future log %s)",
                    topic,
                    index,
                    Path(p.log.dir).parent,
                    move.dest,
                    move.future_dir,
                    extra=where,
                )
                while True:
                    p = rm.partitions.get(move.key)
                    if p is None or p.deleted:
                        return
                    future_leo, leo = await trio.to_thread.run_sync(p.log.copy_to, move.future, self._round_bytes)
                    if future_leo >= leo:
                        break
                await self._swap(move)
        except (_core.LogBrokerError, OSError) as e:
            log.error(
                "moving %s-%d to %s failed, the replica stays where it was: %s", topic, index, move.dest, e, extra=where
            )
        finally:
            if self.moves.get(move.key) is move:
                del self.moves[move.key]
            if move.future is not None and not move.future.closed:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(_delete_quietly, move.future)

    async def _swap(self, move: Move) -> None:
        rm = self.replicas
        key = move.key
        topic, index = key
        async with rm.metadata_lock:
            p = rm.partitions.get(key)
            if p is None or p.deleted or rm.image is None or topic not in rm.image.topics:
                return
            await rm.replication.stop_following([key])
            rm.table.remove(topic, index)
            source_dir = Path(p.log.dir)
            future = move.future
            live = move.dest / partition_dir_name(topic, index)
            deleted = source_dir.parent / move_dir_name(topic, index, move.move_id, "delete")
            configs = rm.topic_configs(topic)

            state = {"source closed": False}

            def work() -> tuple[_core.Log, int]:
                while True:
                    future_leo, leo = p.log.copy_to(future, self._round_bytes)
                    if future_leo >= leo:
                        break
                hw = p.log.high_watermark
                state["source closed"] = True
                p.log.close()
                future.close()
                os.rename(source_dir, deleted)
                try:
                    os.rename(move.future_dir, live)
                except OSError:
                    os.rename(deleted, source_dir)  # undone: the replica stays where it was
                    raise
                fsync_dir(source_dir.parent)
                fsync_dir(move.dest)
                lg = _core.Log.open(str(live), topic, index, rm.config.engine_config(configs), None, now_ms())
                lg.update_high_watermark(hw)
                shutil.rmtree(deleted, ignore_errors=True)
                return lg, hw

            try:
                with trio.CancelScope(shield=True):  # once started, the swap finishes
                    lg, hw = await trio.to_thread.run_sync(work)
            except (_core.LogBrokerError, OSError) as e:
                if state["source closed"]:
                    # offline here, opened again by the replica manager's retries from where it is
                    rm.replaced(p, None, e, live if live.exists() else source_dir)
                else:  # the copy failed: the replica serves on from its log
                    rm.replaced(p, p.log, None, source_dir)
                await rm.replication.after_image(rm.image, {topic})
                raise
            rm.replaced(p, lg, None, live)
            log.info(
                "moved %s-%d to %s: log end offset %d, HW %d",
                topic,
                index,
                move.dest,
                lg.log_end_offset,
                hw,
                extra=fields(topic=topic, partition=index, offset=lg.log_end_offset),
            )
        await rm.replication.after_image(rm.image, {topic})

    def future_replicas(self) -> list[tuple[tuple[str, int], Path, _core.Log]]:
        """(partition, destination, future log) of the moves under way."""
        return [(k, m.dest, m.future) for k, m in self.moves.items() if m.future is not None and not m.future.closed]


def _delete_quietly(lg: _core.Log) -> None:
    try:
        lg.delete()
    except _core.LogBrokerError as e:
        log.warning("removing the future log %s of a cancelled move failed: %s", lg.dir, e)
