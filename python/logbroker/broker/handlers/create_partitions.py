"""CreatePartitions (37): grow a topic's partition count (ALTER on the topic, else
TOPIC_AUTHORIZATION_FAILED, as Kafka)."""

from __future__ import annotations

from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.controller_forwarding import client_timeout
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3

Response = RESPONSES[API_KEY]


async def handle(ctx, request):
    results = []
    for t in request.topics:
        res = Response.CreatePartitionsTopicResult(name=t.name, error_code=ErrorCode.NONE, error_message=None)
        results.append(res)
        if not ctx.authorize(Op.ALTER, Res.TOPIC, t.name):
            res.error_code, res.error_message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
            continue
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        try:
            with client_timeout(request.timeout_ms):
                await ctx.controller.create_partitions(t.name, t.count, assignments, request.validate_only)
            if not request.validate_only:
                ctx.audit_change("create_partitions", "TOPIC", t.name, count=t.count)
        except ControllerError as e:
            res.error_code = e.code
            res.error_message = e.message
            if not request.validate_only:
                ctx.audit_change("create_partitions", "TOPIC", t.name, e.code, e.message, count=t.count)
    return Response(throttle_time_ms=0, results=results)
