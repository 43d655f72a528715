"""DeleteRecords (21): advance a partition's log start offset (offset -1 means the HW).
Whole segments below the new log start are deleted; reads below it fail with
OFFSET_OUT_OF_RANGE. Needs DELETE on the topic (else TOPIC_AUTHORIZATION_FAILED, as Kafka).
A tiered partition with segments in remote storage: the new log start is also written to
the metadata log (RemoteLogStartOffset), so every replica stops serving below it at once,
and the leader's next tiered-storage pass deletes the remote segments entirely below it."""

from __future__ import annotations

import trio

from logbroker import _core
from logbroker.broker.handlers.lookup import leader_partition
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.common.errors import error_code_for
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 21
MIN_VERSION = 0
MAX_VERSION = 2

Response = RESPONSES[API_KEY]


async def handle(ctx, request):
    jobs = []
    topics = []
    for t in request.topics:
        parts = []
        topics.append(Response.DeleteRecordsTopicResult(name=t.name, partitions=parts))
        deletable = ctx.authorize(Op.DELETE, Res.TOPIC, t.name)
        for p in t.partitions:
            r = Response.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.NONE
            )
            parts.append(r)
            if not deletable:
                r.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            r.error_code, part = leader_partition(ctx, t.name, p.partition_index)
            if part is not None:
                jobs.append((r, part, p.offset))

    def work() -> None:
        for r, part, offset in jobs:
            hw = part.log.high_watermark
            target = hw if offset == -1 else offset
            if target < 0 or target > hw:
                r.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            try:
                r.low_watermark = part.log.delete_records_before(target)
            except (_core.LogBrokerError, OSError) as e:
                r.error_code = error_code_for(e)

    if jobs:
        await trio.to_thread.run_sync(work)
        remote = ctx.replicas.remote
        for r, part, offset in jobs:
            if r.error_code == ErrorCode.NONE and remote.has_copies(part):
                target = part.log.high_watermark if offset == -1 else offset
                try:
                    r.low_watermark = await remote.raise_log_start(part, target)
                except _core.RemoteStorageError:
                    r.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # deposed meanwhile: the client retries
    return Response(throttle_time_ms=0, topics=topics)
