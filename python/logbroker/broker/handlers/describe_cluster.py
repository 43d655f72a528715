"""DescribeCluster (60): cluster id, controller and brokers (endpoint type 1: brokers); the
unfenced ones, and from v2 the fenced ones too when asked (include_fenced_brokers)."""

from __future__ import annotations

from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

Response = RESPONSES[API_KEY]
BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2


async def handle(ctx, request):
    image = ctx.controller.image
    endpoint = request.endpoint_type if ctx.version >= 1 else BROKERS_ENDPOINT
    if endpoint not in (BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT):
        return Response(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                        error_message=f"unknown endpoint type {endpoint}", endpoint_type=endpoint,
                        cluster_id=image.cluster_id, controller_id=-1, brokers=[])
    fenced_too = ctx.version >= 2 and request.include_fenced_brokers  # KIP-1073
    brokers = [
        Response.DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack, is_fenced=b.fenced)
        for _, b in sorted(image.brokers.items()) if fenced_too or not b.fenced
    ]
    return Response(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=endpoint,
        cluster_id=image.cluster_id, controller_id=ctx.controller.controller_id, brokers=brokers,
    )
