"""AlterReplicaLogDirs (34, KIP-113): move replicas on this broker to another of its log
directories (`log.dirs`), online. Served at 1-2 (Kafka 4 removed v0). Per partition, as
Kafka's ReplicaManager.alterReplicaLogDirs answers:
    NONE                    the move started (or is under way, or the replica is there
                            already: a move of it elsewhere is cancelled)
    LOG_DIR_NOT_FOUND       the path is not one of this broker's log directories
    REPLICA_NOT_AVAILABLE   no replica here (yet): it is created in that directory if it comes
    KAFKA_STORAGE_ERROR     the replica is offline here
    CLUSTER_AUTHORIZATION_FAILED  without ALTER on the cluster (every partition)
The move itself is broker/replica_mover.py; DescribeLogDirs shows its progress."""

from __future__ import annotations

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 34
MIN_VERSION = 1
MAX_VERSION = 2

Response = RESPONSES[API_KEY]


async def handle(ctx, request):
    allowed = ctx.authorize(Op.ALTER, Res.CLUSTER, CLUSTER_NAME)
    by_topic: dict[str, list] = {}
    for d in request.dirs:
        for t in d.topics:
            for index in t.partitions:
                code = (
                    ctx.replicas.alter_log_dir(t.name, index, d.path)
                    if allowed
                    else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                )
                by_topic.setdefault(t.name, []).append(
                    Response.AlterReplicaLogDirPartitionResult(partition_index=index, error_code=code)
                )
    return Response(
        throttle_time_ms=0,
        results=[
            Response.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
            for name, parts in by_topic.items()
        ],
    )
