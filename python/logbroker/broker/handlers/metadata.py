"""Metadata (3): brokers, cluster id, controller, and topics with partition leaders,
leader epochs, replicas and ISR, from the controller's metadata image.

Unknown topics asked for by name are created when `auto.create.topics.enable` is true
and the request allows it (v4+ AllowAutoTopicCreation; always allowed before v4), with
`num.partitions` and `default.replication.factor`. v0 asks for all topics with an
empty list; v1+ with a null list. v13 adds a top-level error code (KIP-1102), for a broker to
tell the client to go back to its bootstrap servers (REBOOTSTRAP_REQUIRED); as Kafka's, this
broker answers 0 there: a node that answers Metadata at all serves the client's cluster, and a
misrouted connection is caught at ApiVersions v5 (handlers/api_versions.py).
"""

from __future__ import annotations

import copy
import logging
import uuid

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.metadata import TopicState, topic_name_error
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13

Response = RESPONSES[API_KEY]
log = logging.getLogger("logbroker.metadata")
ZERO_UUID = uuid.UUID(int=0)
NO_OPERATIONS = -2147483648  # the authorized-operations bit fields when not asked for


# A topic's response entry, built once per version of the topic: a published image never
# changes, and a topic no record touched is the same object in the next image
# (coord/metadata/metadata_delta.py), so an entry is reused while its TopicState is the same object.
# Keyed by (broker, topic name): the cache holds one entry per topic and broker.
_ENTRIES: dict[tuple[int, str], tuple[TopicState, object]] = {}


def cached_topic_entry(ctx, topic: TopicState) -> object:
    key = (id(ctx.broker), topic.name)
    hit = _ENTRIES.get(key)
    if hit is not None and hit[0] is topic:
        return hit[1]
    entry = topic_entry(topic)
    _ENTRIES[key] = (topic, entry)
    return entry


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
    return Response.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[]
    )


async def handle(ctx, request):
    controller = ctx.controller
    image = controller.image
    version = ctx.version
    topics_out = []
    if request.topics is None or (version == 0 and not request.topics):
        # all topics: those the principal may not describe are left out
        topics_out = [
            cached_topic_entry(ctx, t)
            for _, t in sorted(image.topics.items())
            if ctx.authorize(Op.DESCRIBE, Res.TOPIC, t.name, audit=False)
        ]
    else:
        auto_create = ctx.broker.config.get_bool("auto.create.topics.enable") and (
            version < 4 or request.allow_auto_topic_creation
        )
        for req_topic in request.topics:
            name = req_topic.name
            topic_id = getattr(req_topic, "topic_id", ZERO_UUID) or ZERO_UUID
            if name is None:
                t = image.topic_by_id(topic_id) if topic_id != ZERO_UUID else None
                if t is None:
                    topics_out.append(error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
                elif not ctx.authorize(Op.DESCRIBE, Res.TOPIC, t.name):  # ids are not secret, names are
                    topics_out.append(error_entry(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, topic_id))
                else:
                    topics_out.append(topic_entry(t))
                continue
            if not ctx.authorize(Op.DESCRIBE, Res.TOPIC, name):  # before existence: says nothing of the topic
                topics_out.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            t = image.topics.get(name)
            if t is not None:
                topics_out.append(cached_topic_entry(ctx, t))
                continue
            if auto_create and not (
                ctx.authorize(Op.CREATE, Res.CLUSTER, CLUSTER_NAME, audit=False)
                or ctx.authorize(Op.CREATE, Res.TOPIC, name)
            ):
                topics_out.append(error_entry(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if topic_name_error(name):
                topics_out.append(error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            if not auto_create:
                topics_out.append(error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                t = await controller.create_topic(name)
                log.info(
                    "auto-created topic %s for Metadata request from %s",
                    name,
                    ctx.peer,
                    extra=fields(topic=name, peer=ctx.peer),
                )
                ctx.audit_change("create_topic", "TOPIC", name, partitions=len(t.partitions), auto_created=True)
                topics_out.append(topic_entry(t))
            except ControllerError as e:
                if e.code == ErrorCode.TOPIC_ALREADY_EXISTS and name in controller.image.topics:
                    topics_out.append(topic_entry(controller.image.topics[name]))
                else:
                    log.info(
                        "auto-creating topic %s for %s refused (%s): %s",
                        name,
                        ctx.peer,
                        ErrorCode(e.code).name,
                        e.message,
                        extra=fields(topic=name, peer=ctx.peer),
                    )
                    ctx.audit_change("create_topic", "TOPIC", name, e.code, e.message, auto_created=True)
                    topics_out.append(error_entry(name, e.code))
            image = controller.image
    cluster_ops = NO_OPERATIONS
    if version >= 8:
        if version <= 10 and request.include_cluster_authorized_operations:
            cluster_ops = (
                ctx.authorized_operations(Res.CLUSTER, CLUSTER_NAME)
                if ctx.authorize(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME)
                else 0
            )
        if request.include_topic_authorized_operations:
            for i, entry in enumerate(topics_out):  # the topics it may describe (Kafka: unknown ones too)
                if entry.name is not None and entry.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                    entry = topics_out[i] = copy.copy(entry)  # a cached entry is shared: set it on a copy
                    entry.topic_authorized_operations = ctx.authorized_operations(Res.TOPIC, entry.name)
    listed = controller.client_brokers(image)
    brokers = [
        Response.MetadataResponseBroker(node_id=b.node_id, host=host, port=port, rack=b.rack)
        for b in listed
        for host, port in [b.endpoint(ctx.listener)]
    ]
    return Response(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=image.cluster_id,
        controller_id=controller.client_controller_id(listed),
        topics=topics_out,
        cluster_authorized_operations=cluster_ops,
    )
