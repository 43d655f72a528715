"""CreateTopics (19): create topics through the controller (validate_only honoured).

Authorization as Kafka's: CREATE on the cluster, or on the topic, else
TOPIC_AUTHORIZATION_FAILED; the created topic's partitions, replication factor and configs
are answered only with DESCRIBE_CONFIGS on it (else TopicConfigErrorCode
TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import logging

from logbroker.broker.audit_log import shown_value
from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.common.config import TOPIC_KEYS
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.controller_forwarding import client_timeout
from logbroker.coord.metadata.replication_control import NewTopicSpec
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

API_KEY = 19
MIN_VERSION = 2
MAX_VERSION = 7

Response = RESPONSES[API_KEY]
log = logging.getLogger("logbroker.admin")

# DescribeConfigs / CreateTopics config sources (Kafka's ConfigSource ids)
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


def config_entries(ctx, overrides: dict[str, str]) -> list:
    resolved = ctx.broker.config.resolve_topic(overrides)
    return [
        Response.CreatableTopicConfigs(
            name=k,
            value=resolved[k],
            read_only=False,
            config_source=SOURCE_TOPIC if k in overrides else SOURCE_DEFAULT,
            is_sensitive=False,
        )
        for k in sorted(TOPIC_KEYS)
    ]


async def handle(ctx, request):
    results = []
    seen: set[str] = set()
    # CREATE on the cluster: any topic (its denial refuses nothing by itself: not audited)
    cluster_create = ctx.authorize(Op.CREATE, Res.CLUSTER, CLUSTER_NAME, audit=False)
    wanted: list[tuple[object, NewTopicSpec]] = []  # (result, spec) of the topics asked of the controller
    for t in request.topics:
        res = Response.CreatableTopicResult(name=t.name, error_code=ErrorCode.NONE, error_message=None)
        results.append(res)
        if t.name in seen:
            res.error_code = ErrorCode.INVALID_REQUEST
            res.error_message = f"topic {t.name!r} appears more than once in the request"
            continue
        seen.add(t.name)
        if not (cluster_create or ctx.authorize(Op.CREATE, Res.TOPIC, t.name)):
            res.error_code, res.error_message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
            continue
        assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
        if assignments and (t.num_partitions != -1 or t.replication_factor != -1):
            res.error_code = ErrorCode.INVALID_REQUEST
            res.error_message = "both replica assignments and num_partitions/replication_factor were given"
            continue
        configs = {c.name: c.value for c in t.configs}
        wanted.append((res, NewTopicSpec(t.name, t.num_partitions, t.replication_factor, assignments, configs)))
    if not wanted:
        return Response(throttle_time_ms=0, topics=results)
    try:  # every topic of the request in one controller call: one metadata-log entry
        with client_timeout(request.timeout_ms):
            created = await ctx.controller.create_topics([spec for _res, spec in wanted], request.validate_only)
    except ControllerError as e:
        created = [e] * len(wanted)
    for (res, spec), topic in zip(wanted, created):
        if not request.validate_only:  # the audit log (broker/audit_log.py): who created what
            shown = {k: shown_value(k, v) for k, v in spec.configs.items()}
            if isinstance(topic, ControllerError):
                ctx.audit_change("create_topic", "TOPIC", spec.name, topic.code, topic.message, configs=shown)
            else:
                ctx.audit_change(
                    "create_topic",
                    "TOPIC",
                    spec.name,
                    partitions=len(topic.partitions),
                    replication_factor=len(topic.partitions[0].replicas) if topic.partitions else -1,
                    configs=shown,
                )
        if isinstance(topic, ControllerError):
            res.error_code, res.error_message = topic.code, topic.message
            if topic.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                log.info(
                    "CreateTopics %s from %s refused (%s): %s",
                    spec.name,
                    ctx.peer,
                    ErrorCode(topic.code).name,
                    topic.message,
                    extra=fields(topic=spec.name, peer=ctx.peer),
                )
            continue
        res.topic_id = topic.topic_id
        if not ctx.authorize(
            Op.DESCRIBE_CONFIGS, Res.TOPIC, spec.name
        ):  # the topic's settings only to who may see them
            if ctx.version >= 5:
                res.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        res.num_partitions = len(topic.partitions)
        res.replication_factor = len(topic.partitions[0].replicas) if topic.partitions else -1
        res.configs = config_entries(ctx, topic.configs)
    return Response(throttle_time_ms=0, topics=results)
