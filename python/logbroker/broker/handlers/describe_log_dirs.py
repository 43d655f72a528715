"""DescribeLogDirs (35): this broker's log directories (`log.dirs`, broker/log_dirs.py), the
size of each replica in each, (v4) each volume's total and usable bytes, and (v5, KIP-1066)
whether the directory is cordoned: always false, as logbroker has no cordoning and places
replicas in every directory. Served at 1-5 (Kafka 4 removed v0). OffsetLag is Kafka's: max(HW - LEO, 0) for a current replica, and for
the future replica of a move under way (AlterReplicaLogDirs; IsFutureKey true, listed in its
destination) the current replica's LEO minus its own. A directory whose volume cannot be
read answers KAFKA_STORAGE_ERROR. Topics null asks for every replica; unknown topics and
partitions are left out, as Kafka's. Needs DESCRIBE on the cluster, else
CLUSTER_AUTHORIZATION_FAILED (v3+) and no results."""

from __future__ import annotations

import os

import trio

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 5

Response = RESPONSES[API_KEY]


def _describe(dirs, placed, futures, wanted: dict[str, set[int]] | None) -> list:
    """`placed`: (log dir, topic, index, current log); `futures`: (log dir, topic, index,
    future log, current log). Blocking (statvfs, sizes): a worker thread."""
    by_dir: dict = {d: {} for d in dirs}

    def add(d, topic, index, entry):
        if wanted is None or index in wanted.get(topic, ()):
            by_dir.setdefault(d, {}).setdefault(topic, []).append(entry)

    for d, topic, index, lg in sorted(placed, key=lambda x: (x[1], x[2])):
        add(
            d,
            topic,
            index,
            Response.DescribeLogDirsPartition(
                partition_index=index,
                partition_size=lg.size_bytes,
                offset_lag=max(lg.high_watermark - lg.log_end_offset, 0),
                is_future_key=False,
            ),
        )
    for d, topic, index, future, current in futures:
        add(
            d,
            topic,
            index,
            Response.DescribeLogDirsPartition(
                partition_index=index,
                partition_size=future.size_bytes,
                offset_lag=max(current.log_end_offset - future.log_end_offset, 0),
                is_future_key=True,
            ),
        )
    results = []
    for d, topics in by_dir.items():
        try:
            st = os.statvfs(d)
            total, usable, code = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize, ErrorCode.NONE
        except OSError:
            total = usable = -1
            code = ErrorCode.KAFKA_STORAGE_ERROR
        results.append(
            Response.DescribeLogDirsResult(
                error_code=code,
                log_dir=str(d),
                total_bytes=total,
                usable_bytes=usable,
                topics=[Response.DescribeLogDirsTopic(name=t, partitions=ps) for t, ps in topics.items()],
            )
        )
    return results


async def handle(ctx, request):
    if not ctx.authorize(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):  # Kafka: a top-level error (v3+), no results
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED if ctx.version >= 3 else ErrorCode.NONE,
            results=[],
        )
    replicas = ctx.replicas
    where = replicas.log_dirs.where
    placed = [(where.get(key), key[0], key[1], p.log) for key, p in replicas.partitions.items() if not p.deleted]
    futures = []
    for key, dest, future in replicas.mover.future_replicas():
        p = replicas.partitions.get(key)
        if p is not None:
            futures.append((dest, key[0], key[1], future, p.log))
    wanted = None if request.topics is None else {t.topic: set(t.partitions) for t in request.topics}
    results = await trio.to_thread.run_sync(_describe, list(replicas.log_dirs.dirs), placed, futures, wanted)
    return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
