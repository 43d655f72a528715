"""DeleteTopics (20): delete by name (v0-5) or by name or topic id (v6)."""

from __future__ import annotations

import uuid

from logbroker.coord.controller import ControllerError
from logbroker.protocol import RESPONSES, ErrorCode
from logbroker.coord.controller_forwarding import client_timeout

API_KEY = 20
MIN_VERSION = 1
MAX_VERSION = 6

Response = RESPONSES[API_KEY]
ZERO_UUID = uuid.UUID(int=0)


async def handle(ctx, request):
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    results = []
    for name, topic_id in wanted:
        res = Response.DeletableTopicResult(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None)
        results.append(res)
        if name is None:
            topic = ctx.controller.image.topic_by_id(topic_id)
            if topic is None:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                res.error_message = f"no topic has id {topic_id}"
                continue
            name = res.name = topic.name
        try:
            with client_timeout(request.timeout_ms):
                topic = await ctx.controller.delete_topic(name)
            res.topic_id = topic.topic_id
        except ControllerError as e:
            res.error_code = e.code
            res.error_message = e.message
    return Response(throttle_time_ms=0, responses=results)
