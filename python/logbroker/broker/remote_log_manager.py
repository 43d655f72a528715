"""Tiered storage's control plane (Kafka's RemoteLogManager, KIP-405): which segments of
which partitions are copied to the object store, when local and remote segments go, and
what the data path is told so a Fetch below the local log start reads the copies.

Where things live:
- the objects: rust/src/remote/ (keys, formats; the copy itself and the reads are Rust);
- the remote segments' metadata: records of the metadata log (`RemoteLogSegment`,
  coord/metadata/metadata_records.py), so every broker has them, a deposed leader cannot
  write them (they carry its leader epoch, and the metadata log refuses a stale one) and
  a restart reads nothing remote (docs/decisions.md, "Tiered storage metadata ...").

Every `remote.log.manager.task.interval.ms`, for each partition this broker leads whose
topic has `remote.storage.enable=true`:
1. segments a previous copy left in COPY_SEGMENT_STARTED (a copy cut by a crash or a
   leader change) are deleted (DELETE_SEGMENT_STARTED, the objects, DELETE_SEGMENT_FINISHED);
2. unless `remote.log.copy.disable`, each rolled segment entirely below the last stable
   offset and not yet copied is copied, oldest first: COPY_SEGMENT_STARTED (naming a new
   segment id), the six objects (Rust, GIL released), COPY_SEGMENT_FINISHED. A failure
   stops the partition's pass (the next pass retries with back-off); local retention never
   deletes what is not copied (`Log.highest_remote_offset`);
3. remote retention: copied segments entirely older than `retention.ms`, beyond
   `retention.bytes` of the whole log (remote plus local), or below the log start offset
   are deleted, oldest first.
A compacted topic (`cleanup.policy` with `compact`) copies what the cleaner wrote: each
rolled segment the cleaner has cleaned (`Log.cleaned_segments`) that has no copy of the same
offsets and size. A later pass that rewrites segments (merging them, removing records they
held) brings the result back with another range or size: it is copied, and the copies it
replaces (their offsets inside its range) are deleted as obsolete. What local retention has
already removed is compacted no further; the cleaner then keeps tombstones, so no older
remote value of a deleted key comes back (`Log.remote_log_start`; docs/decisions.md).
Every replica (leader or follower) is told at each metadata change of its partition's
copied segments: the data path's remote view (`RemoteStorage.set_segments`) and the log's
highest remote offset, which bounds local retention.
"""

from __future__ import annotations

import logging
import time
import uuid

import trio

from logbroker import _core
from logbroker.clock import now_ms, run_every
from logbroker.common.config import ConfigError
from logbroker.coord.metadata.metadata_records import MetadataRecordError, encode_record, remote_segment_record
from logbroker.log_format import fields

log = logging.getLogger("logbroker.remote")

COPY_STARTED = "COPY_SEGMENT_STARTED"
COPY_FINISHED = "COPY_SEGMENT_FINISHED"
DELETE_STARTED = "DELETE_SEGMENT_STARTED"
DELETE_FINISHED = "DELETE_SEGMENT_FINISHED"

# back-off of a partition whose copy failed: doubles from one task interval up to this
MAX_BACKOFF_S = 60.0


def partition_dir(topic: str, topic_id: uuid.UUID, partition: int) -> str:
    """The partition's directory of objects below the store's prefix (rust/src/remote/mod.rs)."""
    return f"{topic}-{topic_id.hex}/{partition}"


def stem(topic: str, topic_id: uuid.UUID, partition: int, base_offset: int, segment_id: uuid.UUID) -> str:
    return f"{partition_dir(topic, topic_id, partition)}/{base_offset:020d}-{segment_id.hex}"


class ByteRate:
    """A byte-rate limit (remote.log.manager.copy.max.bytes.per.second): `take(n)` returns
    once n more bytes fit the rate since the limiter was last idle (a leaky bucket: bursts
    of one segment, then the rate)."""

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self._free_at = 0.0

    async def take(self, n: int) -> None:
        if self.per_second >= 2**62:
            return
        now = time.monotonic()
        start = max(now, self._free_at)
        self._free_at = start + n / self.per_second
        if start > now:
            await trio.sleep(start - now)


class RemoteLogManager:
    def __init__(self, config, replicas) -> None:
        self.config = config
        self.replicas = replicas
        self.enabled = config.get_bool("remote.log.storage.system.enable")
        self.storage: _core.RemoteStorage | None = None
        self.quorum = None  # the metadata log (set by the broker service)
        self._backoff: dict[tuple[str, int], tuple[float, float]] = {}  # key -> (retry at, delay)
        # (bytes, segments) rolled below the LSO and not copied yet, per partition led here
        # (Kafka's RemoteCopyLagBytes / RemoteCopyLagSegments), as of the last pass
        self.lag: dict[tuple[str, int], tuple[int, int]] = {}
        # partition directories in the store to delete (their topic deleted), by the broker
        # that led the partition
        self.dropped: set[str] = set()
        self.copy_quota = ByteRate(config.get_int("remote.log.manager.copy.max.bytes.per.second"))
        if self.enabled:
            try:
                self.storage = self._open(config)
            except _core.RemoteStorageError as e:
                raise ConfigError(f"remote.log.storage.url: {e}") from None
            self.storage.attach(replicas.table)
            log.info("tiered storage on: segments go to %s", self.storage.url)

    @staticmethod
    def _open(config) -> _core.RemoteStorage:
        return _core.RemoteStorage(
            config.get_str("remote.log.storage.url"),
            config.remote_storage_options(),
            reader_threads=config.get_int("remote.log.reader.threads"),
            chunk_cache_bytes=config.get_int("remote.log.chunk.cache.total.size.bytes"),
            index_cache_bytes=config.get_int("remote.log.index.file.cache.total.size.bytes"),
            chunk_size=config.get_int("remote.log.chunk.size.bytes"),
            fetch_max_wait_ms=config.get_int("remote.fetch.max.wait.ms"),
            fetch_max_bytes_per_second=config.get_int("remote.log.manager.fetch.max.bytes.per.second"),
        )

    def tiered(self, topic: str) -> bool:
        """Its segments are copied: remote.storage.enable, unless the topic's Iceberg table is
        its tier (iceberg.enable; logbroker/iceberg/table_tier.py)."""
        return (
            self.enabled
            and bool(self.replicas._topic_config(topic, "remote.storage.enable"))
            and not self.replicas._is_table(topic)
        )

    # --- what every replica is told ------------------------------------------------------

    def apply(self, image, delta, opened: list, config_changed: list, deleted: list | None = None) -> None:
        """After a metadata change: refresh the remote view of the local replicas whose
        remote segments, topic config or existence changed (all of them without a delta);
        note the partitions whose objects go with their topic (those led here)."""
        if self.storage is None:
            return
        for p in deleted or []:
            if p.is_leader:
                self.dropped.add(partition_dir(p.topic, p.topic_id, p.index))
        parts = self.replicas.partitions
        if delta is None:
            keys = list(parts)
        else:
            keys = [k for k in delta.remote_segments_changed if k in parts]
            keys += [(p.topic, p.index) for p in opened]
            keys += [(p.topic, p.index) for p, _ in config_changed]
        for key in dict.fromkeys(keys):
            p = parts.get(key)
            if p is not None and not p.deleted:
                self.refresh(image, p)

    def refresh(self, image, p) -> None:
        if not self.tiered(p.topic):
            self.storage.set_segments(p.core, None, -1)
            p.log.highest_remote_offset = -1
            p.log.remote_log_start = -1
            return
        segs = [s for s in image.remote_segments_of(p.topic_id, p.index) if s.state == COPY_FINISHED]
        floor = image.remote_log_start.get((p.topic_id, p.index), 0)  # DeleteRecords
        view = []
        last_end = -1
        for s in segs:  # sorted by start offset; an overlap starts where the previous ends
            start = max(s.start_offset, last_end + 1, floor)
            last_end = max(last_end, s.end_offset)
            if start > s.end_offset:
                continue
            view.append((start, s.end_offset, s.base_offset, self._stem(p, s), s.size_bytes, s.max_timestamp))
        start = view[0][0] if view else -1
        self.storage.set_segments(p.core, view, start)
        p.log.highest_remote_offset = last_end
        p.log.remote_log_start = start

    @staticmethod
    def _stem(p, s) -> str:
        return stem(p.topic, p.topic_id, p.index, s.base_offset, s.segment_id)

    # --- the leader's task -----------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        if self.storage is None:
            return
        await run_every(self.config.get_int("remote.log.manager.task.interval.ms"), self.pass_once, log)

    async def pass_once(self) -> None:
        image = self.replicas._image
        if image is None or self.quorum is None:
            return
        await self._delete_dropped()
        for p in list(self.replicas.partitions.values()):
            if p.deleted or not p.is_leader:
                continue
            if not self.tiered(p.topic):
                self.lag.pop((p.topic, p.index), None)
                if self.replicas._topic_config(p.topic, "remote.log.delete.on.disable") and image.remote_segments_of(
                    p.topic_id, p.index
                ):
                    # tiering turned off with remote.log.delete.on.disable (KIP-950): the copies go
                    try:
                        for s in image.remote_segments_of(p.topic_id, p.index):
                            await self._delete(p, s)
                    except (_core.RemoteStorageError, OSError) as e:
                        log.warning("tiered storage: deleting %s's copies failed, retried: %s", p.name, e)
                continue
            key = (p.topic, p.index)
            retry_at, _ = self._backoff.get(key, (0.0, 0.0))
            if time.monotonic() < retry_at:
                continue
            try:
                await self._partition_pass(p)
                self._backoff.pop(key, None)
            except (_core.RemoteStorageError, _core.LogBrokerError, OSError) as e:
                _, delay = self._backoff.get(key, (0.0, 0.0))
                delay = min(
                    MAX_BACKOFF_S, max(delay * 2, self.config.get_int("remote.log.manager.task.interval.ms") / 1000)
                )
                self._backoff[key] = (time.monotonic() + delay, delay)
                log.warning(
                    "tiered storage: %s failed, retried in %.1f s (local segments wait): %s",
                    p.name,
                    delay,
                    e,
                    extra=fields(topic=p.topic, partition=p.index),
                )

    async def _delete_dropped(self) -> None:
        """The objects of partitions whose topic was deleted while this broker led them."""
        for d in list(self.dropped):
            try:
                n = await trio.to_thread.run_sync(self.storage.delete_dir, d)
            except _core.RemoteStorageError as e:
                log.warning("tiered storage: deleting %s failed, retried at the next pass: %s", self.storage.key(d), e)
                continue
            self.dropped.discard(d)
            log.info("tiered storage: deleted %d object(s) under %s", n, self.storage.key(d))

    async def _write(self, p, segment_id: uuid.UUID, state: str, **copy_fields) -> None:
        rec = remote_segment_record(
            p.topic_id,
            p.index,
            segment_id,
            state,
            p.leader_epoch,
            self.replicas.node_id,
            now_ms(),
            **copy_fields,
        )
        try:
            await self.quorum.write([rec])
        except MetadataRecordError as e:
            # a newer leader epoch (this broker was deposed) or a state already moved on
            raise _core.RemoteStorageError(f"{p.name}: remote segment {segment_id.hex} {state} refused: {e}") from None

    async def _partition_pass(self, p) -> None:
        image = self.replicas._image
        segs = image.remote_segments_of(p.topic_id, p.index)
        # 1. copies a crash or leader change cut short, and deletes that did not finish
        for s in segs:
            if s.state == COPY_STARTED or s.state == DELETE_STARTED:
                await self._delete(p, s)
        segs = [s for s in self.replicas._image.remote_segments_of(p.topic_id, p.index) if s.state == COPY_FINISHED]
        copied_end = max((s.end_offset for s in segs), default=-1)
        # 2. copy, oldest first; what is left is the copy lag
        key = (p.topic, p.index)
        if self.replicas._topic_config(p.topic, "remote.log.copy.disable"):
            self.lag.pop(key, None)
        elif "compact" in str(self.replicas._topic_config(p.topic, "cleanup.policy")):
            await self._copy_cleaned(p, segs)
        else:
            todo = await trio.to_thread.run_sync(p.log.upload_candidates, copied_end + 1)
            self.lag[key] = (sum(n for _, n in todo), len(todo))
            for i, (base, size) in enumerate(todo):
                await self.copy_quota.take(size)
                copied_end = await self._copy(p, base, copied_end)
                rest = todo[i + 1 :]
                self.lag[key] = (sum(n for _, n in rest), len(rest))
        # 3. remote retention
        await self._expire(p)

    async def _copy_cleaned(self, p, finished: list) -> None:
        """A compacted topic: copy each cleaned segment without a copy of the same offsets
        and size, oldest first, then delete the copies it makes obsolete."""
        key = (p.topic, p.index)
        have = {(s.base_offset, s.end_offset, s.size_bytes) for s in finished}
        cleaned = await trio.to_thread.run_sync(p.log.cleaned_segments)
        todo = [c for c in cleaned if c not in have]
        self.lag[key] = (sum(n for *_, n in todo), len(todo))
        floor = self.replicas._image.remote_log_start.get((p.topic_id, p.index), 0)
        for i, (base, end, size) in enumerate(todo):
            await self.copy_quota.take(size)
            end = await self._copy(p, base, floor - 1)
            if end < base:
                continue  # deleted meanwhile: the next pass sees what is there
            for s in finished:
                if base <= s.base_offset and s.end_offset <= end:
                    await self._delete(p, s)
                    log.info(
                        "tiered storage: %s remote segment %d..%d made obsolete by compaction (its offsets are "
                        "in the cleaned copy of %d..%d)",
                        p.name,
                        s.start_offset,
                        s.end_offset,
                        base,
                        end,
                        extra=fields(topic=p.topic, partition=p.index, offset=s.start_offset),
                    )
            finished = [s for s in finished if not (base <= s.base_offset and s.end_offset <= end)]
            rest = todo[i + 1 :]
            self.lag[key] = (sum(n for *_, n in rest), len(rest))

    async def _copy(self, p, base: int, copied_end: int) -> int:
        """Copies the rolled segment at `base`: COPY_SEGMENT_STARTED with its bounds (so a
        copy cut short is found and cleaned up), the objects, COPY_SEGMENT_FINISHED."""
        info = await trio.to_thread.run_sync(p.log.upload_info, base)
        if info is None:
            return copied_end
        base_offset, end_offset, size, max_ts, epochs = info
        segment_id = uuid.uuid4()
        start = max(base_offset, copied_end + 1)
        t0 = time.monotonic()
        await self._write(
            p,
            segment_id,
            COPY_STARTED,
            start_offset=start,
            end_offset=end_offset,
            base_offset=base_offset,
            max_timestamp=max_ts,
            size_bytes=size,
            segment_epochs=[list(e) for e in epochs],
        )
        directory = partition_dir(p.topic, p.topic_id, p.index)
        got = await trio.to_thread.run_sync(self.storage.copy_segment, p.log, directory, segment_id.hex, base)
        if got is None:  # gone meanwhile (deleted records): STARTED is cleaned up next pass
            return copied_end
        sent = got[6]
        await self._write(p, segment_id, COPY_FINISHED)
        log.info(
            "tiered storage: copied %s offsets %d..%d (%d bytes) in %.2f s to %s",
            p.name,
            start,
            end_offset,
            sent,
            time.monotonic() - t0,
            self.storage.key(got[5]),
            extra=fields(topic=p.topic, partition=p.index, offset=start),
        )
        return end_offset

    async def _delete(self, p, s) -> None:
        if s.state != DELETE_STARTED:
            await self._write(p, s.segment_id, DELETE_STARTED)
        await trio.to_thread.run_sync(self.storage.delete_segment, self._stem(p, s))
        await self._write(p, s.segment_id, DELETE_FINISHED)
        log.info(
            "tiered storage: deleted %s remote segment %d..%d (%s)",
            p.name,
            s.start_offset,
            s.end_offset,
            self.storage.key(self._stem(p, s)),
            extra=fields(topic=p.topic, partition=p.index, offset=s.start_offset),
        )

    async def _expire(self, p) -> None:
        """Remote retention: whole copied segments beyond retention.ms / retention.bytes of
        the whole log (with cleanup.policy delete), or below the log start offset, oldest first."""
        segs = [s for s in self.replicas._image.remote_segments_of(p.topic_id, p.index) if s.state == COPY_FINISHED]
        if not segs:
            return
        floor = self.replicas._image.remote_log_start.get((p.topic_id, p.index), 0)
        for s in [s for s in segs if s.end_offset < floor]:  # below DeleteRecords' log start
            await self._delete(p, s)
        segs = [s for s in segs if s.end_offset >= floor]
        if not segs or "delete" not in str(self.replicas._topic_config(p.topic, "cleanup.policy")):
            return  # cleanup.policy=compact alone: nothing expires by time or size
        retention_ms = int(self.replicas._topic_config(p.topic, "retention.ms"))
        retention_bytes = int(self.replicas._topic_config(p.topic, "retention.bytes"))
        local_start = p.log.log_start_offset
        # bytes of the whole log: remote segments, then the local part not copied
        total = sum(s.size_bytes for s in segs)
        total += await trio.to_thread.run_sync(lambda: p.log.size_bytes)
        now = now_ms()
        for s in segs:
            due = retention_ms >= 0 and now - s.max_timestamp > retention_ms
            if not due and retention_bytes >= 0 and total - s.size_bytes >= retention_bytes:
                due = True
            if not due:
                break
            if s.end_offset >= local_start and s.end_offset >= p.log.high_watermark:
                break
            await self._delete(p, s)
            total -= s.size_bytes

    def has_copies(self, p) -> bool:
        image = self.replicas._image
        return self.storage is not None and image is not None and bool(image.remote_segments_of(p.topic_id, p.index))

    async def raise_log_start(self, p, offset: int) -> int:
        """DeleteRecords on a tiered partition: the first readable offset becomes `offset`
        for every replica (a RemoteLogStartOffset record); returns the log start offset."""
        current = p.core.log_start_offset
        if offset > current:
            rec = encode_record(
                "RemoteLogStartOffset",
                topic_id=p.topic_id.hex,
                partition=p.index,
                offset=offset,
                leader_epoch=p.leader_epoch,
            )
            try:
                await self.quorum.write([rec])
            except MetadataRecordError as e:
                raise _core.RemoteStorageError(f"{p.name}: log start offset {offset} refused: {e}") from None
            log.info(
                "tiered storage: %s log start offset raised to %d (DeleteRecords); remote segments below it go",
                p.name,
                offset,
                extra=fields(topic=p.topic, partition=p.index, offset=offset),
            )
        return max(offset, current)

    # --- visibility ------------------------------------------------------------------

    def remote_size(self, p) -> tuple[int, int]:
        """(bytes, segments) of the partition's copies."""
        image = self.replicas._image
        return (0, 0) if image is None else _copied_size(image, p.topic_id, p.index)

    def remote_size_of(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(bytes, segments) in remote storage of any partition of the cluster (every broker's
        metadata image holds every partition's copies); None without tiered storage."""
        image = self.replicas._image
        t = None if image is None or self.storage is None else image.topics.get(topic)
        return None if t is None else _copied_size(image, t.topic_id, partition)

    def stats(self) -> dict[str, int]:
        return {} if self.storage is None else self.storage.stats()


def _copied_size(image, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
    """(bytes, segments) of a partition's finished copies."""
    segs = [s for s in image.remote_segments_of(topic_id, partition) if s.state == COPY_FINISHED]
    return sum(s.size_bytes for s in segs), len(segs)
