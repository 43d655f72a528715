"""DescribeLogDirs (35): this broker's one log directory (`log.dirs`), the size of each
replica it holds there, and (v4) the volume's total and usable bytes. Served at 1-4 (Kafka
4 removed v0). OffsetLag is Kafka's max(HW - LEO, 0) for a current (non-future) log; there
are no future logs (AlterReplicaLogDirs is not served), so IsFutureKey is always false.
Topics null asks for every replica; unknown topics and partitions are left out, as Kafka's.
Needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED (v3+) and no results."""

from __future__ import annotations

import os

import trio

from logbroker.common.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as Res
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 4

Response = RESPONSES[API_KEY]


def _describe(parts, wanted: dict[str, set[int]] | None, data_dir: str) -> tuple[list, int, int]:
    by_topic: dict[str, list] = {}
    for (topic, index), p in sorted(parts.items()):
        if p.deleted or (wanted is not None and index not in wanted.get(topic, ())):
            continue
        lg = p.log
        by_topic.setdefault(topic, []).append(Response.DescribeLogDirsPartition(
            partition_index=index, partition_size=lg.size_bytes,
            offset_lag=max(lg.high_watermark - lg.log_end_offset, 0), is_future_key=False))
    try:
        st = os.statvfs(data_dir)
        total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError:
        total = usable = -1
    topics = [Response.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
    return topics, total, usable


async def handle(ctx, request):
    if not ctx.authorize(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):  # Kafka: a top-level error (v3+), no results
        return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED if ctx.version >= 3
                        else ErrorCode.NONE, results=[])
    replicas = ctx.replicas
    data_dir = str(replicas.data_dir.resolve())
    wanted = None if request.topics is None else {t.topic: set(t.partitions) for t in request.topics}
    topics, total, usable = await trio.to_thread.run_sync(_describe, dict(replicas.partitions), wanted, data_dir)
    result = Response.DescribeLogDirsResult(error_code=ErrorCode.NONE, log_dir=data_dir, topics=topics,
                                            total_bytes=total, usable_bytes=usable)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, results=[result])
