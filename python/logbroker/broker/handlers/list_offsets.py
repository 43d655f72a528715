"""ListOffsets (2): offsets by time.

Timestamp -2 (EARLIEST) gives the log start offset, -1 (LATEST) the high watermark
(isolation_level 1, read_committed: the last stable offset, below any open
transaction), -3 (MAX_TIMESTAMP, v7+) the offset of the record with the largest
timestamp, and t >= 0 the first offset whose timestamp is >= t (via the time index), or
-1 when none below the HW (read_committed: the LSO) is. Tiered storage (KIP-1005):
EARLIEST is the first offset still readable, remote or local; -4 (EARLIEST_LOCAL, v8+) the
local log start offset; -5 (LATEST_TIERED, v9+) the last offset copied to remote storage
(-1 when none is). The table as the tier: EARLIEST is the table's first offset, and
OFFSET_NOT_AVAILABLE (retriable, as Kafka answers before a new leader's HW is known) while a
new leader is still listing the table's files (within a second of the election); a
timestamp below the local log start is looked up in the table's files (its first committed
record at or after it). v10 adds the request's TimeoutMs (KIP-1075), which this broker never needs:
it answers from what it holds, without reading remote data. -6 (EARLIEST_PENDING_UPLOAD, v11+,
KIP-1023) is the first offset not yet copied to remote storage, as Kafka's: the last copied + 1
(at least the log start offset); with nothing copied yet, the log start offset while no local
segment has been deleted (else -1: this leader does not know what was copied); -1 for a topic
that is not tiered.
"""

from __future__ import annotations

import logging

import trio

from logbroker import _core
from logbroker.broker.handlers.lookup import leader_partition
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.common.errors import error_code_for
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 11

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -2, -1, -3, -4, -5, -6

Response = RESPONSES[API_KEY]

log = logging.getLogger("logbroker.list_offsets")


def _lookup(part, timestamp: int, version: int, read_committed: bool, remote=None) -> tuple[int, int, int, int]:
    """(error, timestamp, offset, leader_epoch) — runs on a worker thread."""
    lg = part.log
    hw = lg.last_stable_offset() if read_committed else lg.high_watermark
    epoch = part.leader_epoch
    if timestamp == EARLIEST:
        if part.core.table_tier_pending:
            return ErrorCode.OFFSET_NOT_AVAILABLE, -1, -1, -1
        return ErrorCode.NONE, -1, part.core.log_start_offset, epoch
    if timestamp == EARLIEST_LOCAL and version >= 8:
        return ErrorCode.NONE, -1, lg.log_start_offset, epoch
    if timestamp == LATEST_TIERED and version >= 9:
        return ErrorCode.NONE, -1, lg.highest_remote_offset, epoch
    if timestamp == EARLIEST_PENDING_UPLOAD and version >= 11:
        if remote is None or not remote.tiered(part.topic):
            return ErrorCode.NONE, -1, -1, -1
        copied = lg.highest_remote_offset
        if copied < 0:
            if lg.log_start_offset != part.core.log_start_offset:
                return ErrorCode.NONE, -1, -1, -1
            return ErrorCode.NONE, -1, part.core.log_start_offset, epoch
        return ErrorCode.NONE, -1, max(copied + 1, part.core.log_start_offset), epoch
    if timestamp == LATEST:
        return ErrorCode.NONE, -1, hw, epoch
    if timestamp == MAX_TIMESTAMP and version >= 7:
        ts, off = lg.max_timestamp()
        if off < 0 or off >= hw:
            return ErrorCode.NONE, -1, -1, -1
        return ErrorCode.NONE, ts, off, epoch
    if timestamp < 0:
        return ErrorCode.UNSUPPORTED_VERSION, -1, -1, -1
    if part.core.table_tier_pending:
        return ErrorCode.OFFSET_NOT_AVAILABLE, -1, -1, -1
    found = None
    if part.core.log_start_offset < lg.log_start_offset:
        # the table as the tier: its files first (older), then the local log (None when the
        # table is not the tier)
        found = part.core.table_offset_for_timestamp(timestamp)
        if found is not None and found[0] >= lg.log_start_offset:
            found = None  # in the local log too, which also has the aborted records
    if (
        found is None
        and remote is not None
        and remote.storage is not None
        and part.core.log_start_offset < lg.log_start_offset
    ):
        # tiered: the copies first (older), then the local log
        found = remote.storage.offset_for_timestamp(part.core, timestamp)
    if found is None:
        found = lg.offset_for_timestamp(timestamp)
    if found is None or found[0] >= hw:
        return ErrorCode.NONE, -1, -1, -1
    return ErrorCode.NONE, found[1], found[0], epoch


async def handle(ctx, request):
    version = ctx.version
    read_committed = version >= 2 and request.isolation_level == 1
    jobs = []
    out_topics = []
    for t in request.topics:
        parts_out = []
        out_topics.append(Response.ListOffsetsTopicResponse(name=t.name, partitions=parts_out))
        described = ctx.authorize(Op.DESCRIBE, Res.TOPIC, t.name)
        for p in t.partitions:
            entry = Response.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=ErrorCode.NONE, timestamp=-1, offset=-1, leader_epoch=-1
            )
            parts_out.append(entry)
            if not described:
                entry.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            entry.error_code, part = leader_partition(
                ctx, t.name, p.partition_index, p.current_leader_epoch if version >= 4 else -1
            )
            if part is not None:
                jobs.append((entry, part, p.timestamp))

    def work() -> None:
        for entry, part, ts in jobs:
            try:
                entry.error_code, entry.timestamp, entry.offset, epoch = _lookup(
                    part, ts, version, read_committed, ctx.replicas.remote
                )
                if version >= 4:  # LeaderEpoch exists from v4 on
                    entry.leader_epoch = epoch
            except (_core.LogBrokerError, OSError) as e:
                entry.error_code = error_code_for(e)
            except _core.RemoteStorageError:
                entry.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            except _core.TableDataFileError as e:
                log.error("%s", e, extra={"topic": part.topic, "partition": part.index})
                entry.error_code = ErrorCode.KAFKA_STORAGE_ERROR

    if jobs:
        await trio.to_thread.run_sync(work)
    return Response(throttle_time_ms=0, topics=out_topics)
