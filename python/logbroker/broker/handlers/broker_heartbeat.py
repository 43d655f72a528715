"""BrokerHeartbeat (63), on the controller listener only: a broker's liveness and its
controlled shutdown, answered by the active controller (coord/metadata/broker_sessions.py)."""

from __future__ import annotations

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 63
MIN_VERSION = 0
MAX_VERSION = 1

Response = RESPONSES[API_KEY]


async def handle(ctx, request):
    if not ctx.authorize(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):  # Kafka's rule (brokers only)
        return Response(
            throttle_time_ms=0,
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            is_caught_up=False,
            is_fenced=True,
            should_shut_down=False,
        )
    error, caught_up, fenced, should = await ctx.controller.sessions.heartbeat(
        request.broker_id,
        request.broker_epoch,
        request.current_metadata_offset,
        request.want_fence,
        request.want_shut_down,
    )
    return Response(
        throttle_time_ms=0, error_code=error, is_caught_up=caught_up, is_fenced=fenced, should_shut_down=should
    )
