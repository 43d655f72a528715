"""DescribeCluster (60): cluster id, controller and brokers (endpoint type 1: brokers); the
unfenced ones, and from v2 the fenced ones too when asked (include_fenced_brokers).

As Kafka's broker, anyone may describe the cluster; the authorized operations asked for
(IncludeClusterAuthorizedOperations) are those on the cluster with DESCRIBE on it, else 0."""

from __future__ import annotations

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

Response = RESPONSES[API_KEY]
BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2
NO_OPERATIONS = -2147483648  # ClusterAuthorizedOperations when not asked for


async def handle(ctx, request):
    image = ctx.controller.image
    endpoint = request.endpoint_type if ctx.version >= 1 else BROKERS_ENDPOINT
    if endpoint not in (BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT):
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=f"unknown endpoint type {endpoint}",
            endpoint_type=endpoint,
            cluster_id=image.cluster_id,
            controller_id=-1,
            brokers=[],
        )
    fenced_too = ctx.version >= 2 and request.include_fenced_brokers  # KIP-1073
    cluster_ops = NO_OPERATIONS
    if request.include_cluster_authorized_operations:  # Kafka: 0 without DESCRIBE on the cluster
        cluster_ops = (
            ctx.authorized_operations(Res.CLUSTER, CLUSTER_NAME)
            if ctx.authorize(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME)
            else 0
        )
    brokers = [
        Response.DescribeClusterBroker(broker_id=b.node_id, host=host, port=port, rack=b.rack, is_fenced=b.fenced)
        for _, b in sorted(image.brokers.items())
        if fenced_too or not b.fenced
        for host, port in [b.endpoint(ctx.listener)]
    ]
    return Response(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        endpoint_type=endpoint,
        cluster_id=image.cluster_id,
        controller_id=ctx.controller.controller_id,
        brokers=brokers,
        cluster_authorized_operations=cluster_ops,
    )
