"""DeleteTopics (20): delete by name (v0-5) or by name or topic id (v6).

Authorization as Kafka's controller: DELETE on the cluster, or on the topic, else
TOPIC_AUTHORIZATION_FAILED, decided before existence; a topic named by id keeps its name
out of the refusal unless the principal may describe it."""

from __future__ import annotations

import uuid

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.controller_forwarding import client_timeout
from logbroker.protocol import RESPONSES, ErrorCode

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
    # DELETE on the cluster: any topic (its denial refuses nothing by itself: not audited)
    cluster_delete = ctx.authorize(Op.DELETE, Res.CLUSTER, CLUSTER_NAME, audit=False)
    for name, topic_id in wanted:
        res = Response.DeletableTopicResult(name=name, topic_id=topic_id, error_code=ErrorCode.NONE, error_message=None)
        results.append(res)
        if name is None:
            topic = ctx.controller.image.topic_by_id(topic_id)
            if topic is None:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                res.error_message = f"no topic has id {topic_id}"
                continue
            if not (cluster_delete or ctx.authorize(Op.DELETE, Res.TOPIC, topic.name)):
                # ids are not secret; the name only to who may describe the topic
                described = ctx.authorize(Op.DESCRIBE, Res.TOPIC, topic.name)
                res.name = topic.name if described else None
                res.error_code, res.error_message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
                continue
            name = res.name = topic.name
        elif not (cluster_delete or ctx.authorize(Op.DELETE, Res.TOPIC, name)):  # before existence
            res.error_code, res.error_message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
            continue
        try:
            with client_timeout(request.timeout_ms):
                topic = await ctx.controller.delete_topic(name)
            res.topic_id = topic.topic_id
            ctx.audit_change("delete_topic", "TOPIC", name, topic_id=str(topic.topic_id))
        except ControllerError as e:
            res.error_code = e.code
            res.error_message = e.message
            ctx.audit_change("delete_topic", "TOPIC", name, e.code, e.message)
    return Response(throttle_time_ms=0, responses=results)
