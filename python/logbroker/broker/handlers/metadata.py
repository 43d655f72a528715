"""Metadata (3): brokers, cluster id, controller, and topics with partition leaders,
leader epochs, replicas and ISR, from the controller's metadata image.

Unknown topics asked for by name are created when `auto.create.topics.enable` is true
and the request allows it (v4+ AllowAutoTopicCreation; always allowed before v4), with
`num.partitions` and `default.replication.factor`. v0 asks for all topics with an
empty list; v1+ with a null list.
"""

from __future__ import annotations

import logging
import uuid

from logbroker.coord.controller import ControllerError
from logbroker.coord.metadata import TopicState, topic_name_error
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 12

Response = RESPONSES[API_KEY]
log = logging.getLogger("logbroker.metadata")
ZERO_UUID = uuid.UUID(int=0)


def topic_entry(topic: TopicState, error: int = ErrorCode.NONE) -> object:
    parts = [
        Response.MetadataResponsePartition(
            error_code=ErrorCode.NONE,
            partition_index=p.partition,
            leader_id=p.leader,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            offline_replicas=[],
        )
        for _, p in sorted(topic.partitions.items())
    ]
    return Response.MetadataResponseTopic(
        error_code=error,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name.startswith("__"),
        partitions=parts,
    )


def error_entry(name: str | None, code: int, topic_id: uuid.UUID = ZERO_UUID) -> object:
    return Response.MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[])


async def handle(ctx, request):
    controller = ctx.controller
    image = controller.image
    version = ctx.version
    topics_out = []
    if request.topics is None or (version == 0 and not request.topics):
        topics_out = [topic_entry(t) for _, t in sorted(image.topics.items())]
    else:
        auto_create = ctx.broker.config.get_bool("auto.create.topics.enable") and (
            version < 4 or request.allow_auto_topic_creation
        )
        for req_topic in request.topics:
            name = req_topic.name
            topic_id = getattr(req_topic, "topic_id", ZERO_UUID) or ZERO_UUID
            if name is None:
                t = image.topic_by_id(topic_id) if topic_id != ZERO_UUID else None
                topics_out.append(topic_entry(t) if t else error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
                continue
            t = image.topics.get(name)
            if t is not None:
                topics_out.append(topic_entry(t))
                continue
            if topic_name_error(name):
                topics_out.append(error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            if not auto_create:
                topics_out.append(error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                t = await controller.create_topic(name)
                log.info("auto-created topic %s for Metadata request from %s", name, ctx.peer,
                         extra=fields(topic=name, peer=ctx.peer))
                topics_out.append(topic_entry(t))
            except ControllerError as e:
                if e.code == ErrorCode.TOPIC_ALREADY_EXISTS and name in controller.image.topics:
                    topics_out.append(topic_entry(controller.image.topics[name]))
                else:
                    log.info("auto-creating topic %s for %s refused (%s): %s", name, ctx.peer, ErrorCode(e.code).name,
                             e.message, extra=fields(topic=name, peer=ctx.peer))
                    topics_out.append(error_entry(name, e.code))
            image = controller.image
    listed = controller.client_brokers(image)
    brokers = [Response.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
               for b in listed]
    return Response(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=image.cluster_id,
        controller_id=controller.client_controller_id(listed),
        topics=topics_out,
    )
