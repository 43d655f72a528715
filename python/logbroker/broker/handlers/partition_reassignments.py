"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): moving partitions'
replicas between brokers (KIP-455; coord/metadata/reassignment.py). Alter goes to the active
controller; List answers from this broker's metadata image. Alter needs ALTER on the
cluster, List DESCRIBE on it, else CLUSTER_AUTHORIZATION_FAILED, as Kafka."""

from __future__ import annotations

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.controller_forwarding import client_timeout
from logbroker.protocol import RESPONSES, ErrorCode

AlterResponse = RESPONSES[45]
ListResponse = RESPONSES[46]


async def alter(ctx, request):
    allow = request.allow_replication_factor_change if ctx.version >= 1 else True
    if not ctx.authorize(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        return AlterResponse(
            throttle_time_ms=0,
            allow_replication_factor_change=allow,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.",
            responses=[],
        )
    items = [
        (t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
        for t in request.topics
        for p in t.partitions
    ]
    try:
        with client_timeout(request.timeout_ms):
            results = await ctx.controller.alter_reassignments(items, allow)
    except ControllerError as e:
        return AlterResponse(
            throttle_time_ms=0,
            allow_replication_factor_change=allow,
            error_code=e.code,
            error_message=e.message,
            responses=[],
        )
    by_topic: dict[str, list] = {}
    for name, i, code, message in results:
        by_topic.setdefault(name, []).append(
            AlterResponse.ReassignablePartitionResponse(
                partition_index=i, error_code=code, error_message=message or None
            )
        )
    return AlterResponse(
        throttle_time_ms=0,
        allow_replication_factor_change=allow,
        error_code=ErrorCode.NONE,
        error_message=None,
        responses=[AlterResponse.ReassignableTopicResponse(name=n, partitions=ps) for n, ps in by_topic.items()],
    )


async def list_reassignments(ctx, request):
    if not ctx.authorize(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):
        return ListResponse(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.",
            topics=[],
        )
    wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
    by_topic: dict[str, list] = {}
    for name, i, replicas, adding, removing in ctx.controller.list_reassignments(wanted):
        by_topic.setdefault(name, []).append(
            ListResponse.OngoingPartitionReassignment(
                partition_index=i, replicas=replicas, adding_replicas=adding, removing_replicas=removing
            )
        )
    return ListResponse(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        topics=[ListResponse.OngoingTopicReassignment(name=n, partitions=ps) for n, ps in by_topic.items()],
    )


ENTRIES = [
    (45, 0, 1, alter),
    (46, 0, 0, list_reassignments),
]
