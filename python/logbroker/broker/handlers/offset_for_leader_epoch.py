"""OffsetForLeaderEpoch (23): the end offset of a leader epoch, from the log's
leader-epoch cache (consumers use it to detect log truncation, KIP-320; followers,
next wave, to find where to truncate)."""

from __future__ import annotations

import trio

from logbroker.broker.handlers.lookup import leader_partition
from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 23
MIN_VERSION = 2
MAX_VERSION = 4

Response = RESPONSES[API_KEY]


async def handle(ctx, request):
    jobs = []
    topics = []
    # CLUSTER_ACTION on the cluster (a follower) covers every topic, else DESCRIBE on each (a consumer, KIP-320)
    replica = ctx.authorize(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)
    for t in request.topics:
        parts = []
        topics.append(Response.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        described = replica or ctx.authorize(Op.DESCRIBE, Res.TOPIC, t.topic)
        for p in t.partitions:
            r = Response.EpochEndOffset(
                error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=-1, end_offset=-1
            )
            parts.append(r)
            if not described:
                r.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            r.error_code, part = leader_partition(ctx, t.topic, p.partition, p.current_leader_epoch)
            if part is not None:
                jobs.append((r, part, p.leader_epoch))

    def work() -> None:
        for r, part, epoch in jobs:
            r.leader_epoch, r.end_offset = part.log.end_offset_for_epoch(epoch)

    if jobs:
        await trio.to_thread.run_sync(work)
    return Response(throttle_time_ms=0, topics=topics)
