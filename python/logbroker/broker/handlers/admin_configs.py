"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Topic resources (type 2) are fully supported: describe gives every topic-level key
with its value and source (topic override or broker default, with synonyms when
asked); alter sets or removes overrides through the controller, and the topic's logs
pick the change up at once. Broker resources (type 4): a broker id, or "" for the cluster
default (`kafka-configs --entity-type brokers --entity-default`); the dynamic keys (the
broker defaults of topic configs, common/config.py DYNAMIC_BROKER_KEYS, as Kafka's
DynamicLogConfig) are set in the metadata log and every broker applies them without a
restart; a static key is refused with INVALID_CONFIG saying where to set it. Describing
a broker gives every key with its source (this broker's dynamic config, the cluster
default, the static config, the default). Group resources (type 32) hold Kafka's
group-level keys (`share.auto.offset.reset`, `share.record.lock.duration.ms`, ...; the
broker's `group.*` keys are their defaults), stored in the metadata log. Client-metrics
resources (type 16, KIP-714) are named subscriptions with the keys `metrics`, `interval.ms` and
`match` (common/client_metrics.py), stored in the metadata log as well; describing one gives
the three keys (source CLIENT_METRICS_CONFIG when set, else the default; an unknown name
is all defaults, as Kafka), and deleting its last key deletes it.

IncrementalAlterConfigs' APPEND and SUBTRACT apply to list keys (cleanup.policy,
log.cleanup.policy): the controller works out the new value from the override it holds, else
the key's default (coord/metadata/config_control.py), and checks it like a set value; on another key
they are INVALID_CONFIG in Kafka's words. As Kafka's ConfigAdminManager, a key twice in a
resource or a null value (but for DELETE) is INVALID_REQUEST.

Deleting a key that is not set changes nothing and succeeds, as in Kafka (an incremental
DELETE of an absent override is a no-op there): a topic key logbroker does not have (such as the replication-throttle keys
`kafka-reassign-partitions --verify` clears) is never set.

Authorization as Kafka's: DESCRIBE_CONFIGS (describe) or ALTER_CONFIGS (alter) on the
topic, the group, or for a broker (and broker logger) and a client-metrics subscription the
cluster, else
TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED for that resource, before anything else about it.
"""

from __future__ import annotations

import logging

from logbroker.broker.audit_log import shown_value
from logbroker.common import client_metrics
from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.common.config import (
    BROKER_KEYS,
    DYNAMIC_BROKER_KEYS,
    GROUP_KEYS,
    REMOTE_STORAGE_OPTION_PREFIX,
    TOPIC_KEYS,
    sensitive_key,
)
from logbroker.coord.metadata.config_control import Change, broker_not_list, list_default
from logbroker.coord.metadata.control import ControllerError
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

log = logging.getLogger("logbroker.admin")

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# Kafka's ConfigSource ids
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, CLIENT_METRICS_CONFIG, GROUP_CONFIG = 4, 5, 7, 8
# ConfigType
BOOLEAN, STRING, INT, LONG, LIST, PASSWORD = 1, 2, 3, 5, 7, 9
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

DescribeResponse = RESPONSES[32]
AlterResponse = RESPONSES[33]
IncrementalResponse = RESPONSES[44]


def _type_of(value: str | None) -> int:
    if value is None:
        return PASSWORD
    if value in ("true", "false"):
        return BOOLEAN
    try:
        int(value)
        return LONG
    except ValueError:
        return STRING


def _broker_layers(cfg, broker_key: str) -> list[tuple[str, int]]:
    """A broker key's values below a topic or group override, highest precedence first:
    this broker's dynamic config, the cluster default, the static config, the default."""
    out = []
    if broker_key in cfg.dynamic_broker:
        out.append((cfg.dynamic_broker[broker_key], DYNAMIC_BROKER_CONFIG))
    if broker_key in cfg.dynamic_default:
        out.append((cfg.dynamic_default[broker_key], DYNAMIC_DEFAULT_BROKER_CONFIG))
    if broker_key in cfg.explicit:
        out.append((cfg.explicit[broker_key], STATIC_BROKER_CONFIG))
    out.append((BROKER_KEYS[broker_key].default, DEFAULT_CONFIG))
    return out


def _describe_topic(ctx, name: str, keys, synonyms: bool, docs: bool, version: int) -> tuple[int, str | None, list]:
    topic = ctx.controller.image.topics.get(name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist", []
    cfg = ctx.broker.config
    resolved = cfg.resolve_topic(topic.configs)
    out = []
    for key in sorted(TOPIC_KEYS):
        if keys is not None and key not in keys:
            continue
        broker_key = TOPIC_KEYS[key][1]
        layers = _broker_layers(cfg, broker_key)
        source = DYNAMIC_TOPIC_CONFIG if key in topic.configs else layers[0][1]
        syn = []
        if synonyms:
            if key in topic.configs:
                syn.append(
                    DescribeResponse.DescribeConfigsSynonym(
                        name=key, value=topic.configs[key], source=DYNAMIC_TOPIC_CONFIG
                    )
                )
            syn += [DescribeResponse.DescribeConfigsSynonym(name=broker_key, value=v, source=src) for v, src in layers]
        out.append(
            DescribeResponse.DescribeConfigsResourceResult(
                name=key,
                value=resolved[key],
                read_only=False,
                config_source=source,
                is_sensitive=False,
                synonyms=syn,
                config_type=_type_of(resolved[key]),
                documentation=BROKER_KEYS[broker_key].doc if docs else None,
            )
        )
    return ErrorCode.NONE, None, out


def _describe_group(ctx, name: str, keys, synonyms: bool, docs: bool) -> tuple[int, str | None, list]:
    if not name:
        return ErrorCode.INVALID_GROUP_ID, "a group config needs a group id", []
    overrides = ctx.controller.image.group_configs.get(name, {})
    cfg = ctx.broker.config
    resolved = cfg.resolve_group(overrides)
    out = []
    for key in sorted(GROUP_KEYS):
        if keys is not None and key not in keys:
            continue
        broker_key = GROUP_KEYS[key][1]
        source = (
            GROUP_CONFIG
            if key in overrides
            else (STATIC_BROKER_CONFIG if broker_key in cfg.explicit else DEFAULT_CONFIG)
        )
        syn = []
        if synonyms:
            if key in overrides:
                syn.append(DescribeResponse.DescribeConfigsSynonym(name=key, value=overrides[key], source=GROUP_CONFIG))
            if broker_key in cfg.explicit:
                syn.append(
                    DescribeResponse.DescribeConfigsSynonym(
                        name=broker_key, value=cfg.explicit[broker_key], source=STATIC_BROKER_CONFIG
                    )
                )
            syn.append(
                DescribeResponse.DescribeConfigsSynonym(
                    name=broker_key, value=BROKER_KEYS[broker_key].default, source=DEFAULT_CONFIG
                )
            )
        out.append(
            DescribeResponse.DescribeConfigsResourceResult(
                name=key,
                value=resolved[key],
                read_only=False,
                config_source=source,
                is_sensitive=False,
                synonyms=syn,
                config_type=_type_of(resolved[key]),
                documentation=BROKER_KEYS[broker_key].doc if docs else None,
            )
        )
    return ErrorCode.NONE, None, out


def _describe_client_metrics(ctx, name: str, keys, synonyms: bool, docs: bool) -> tuple[int, str | None, list]:
    """A client-metrics subscription's three keys, as Kafka's ConfigHelper: the value set
    (source CLIENT_METRICS_CONFIG, its only synonym) or the default (DEFAULT_CONFIG)."""
    if not name:
        return ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty", []
    configs = ctx.controller.image.client_metrics.get(name, {})
    out = []
    for key in client_metrics.KEYS:
        if keys is not None and key not in keys:
            continue
        value = configs.get(key, client_metrics.DEFAULTS[key])
        source = CLIENT_METRICS_CONFIG if key in configs else DEFAULT_CONFIG
        syn = (
            [DescribeResponse.DescribeConfigsSynonym(name=key, value=value, source=CLIENT_METRICS_CONFIG)]
            if synonyms and key in configs
            else []
        )
        out.append(
            DescribeResponse.DescribeConfigsResourceResult(
                name=key,
                value=value,
                read_only=False,
                config_source=source,
                is_sensitive=False,
                synonyms=syn,
                config_type=LIST if key in client_metrics.LIST_KEYS else INT,
                documentation=client_metrics.DOCS[key] if docs else None,
            )
        )
    return ErrorCode.NONE, None, out


def _describe_broker(ctx, name: str, keys, synonyms: bool, docs: bool) -> tuple[int, str | None, list]:
    """A broker's configs (every key, with its source: this broker's dynamic config, the
    cluster default, the static config or the default; only the dynamic keys are not read
    only), or with the name "" the cluster-default dynamic configs alone, as Kafka."""
    cfg = ctx.broker.config
    if name == "":
        return (
            ErrorCode.NONE,
            None,
            [
                DescribeResponse.DescribeConfigsResourceResult(
                    name=k,
                    value=v,
                    read_only=False,
                    config_source=DYNAMIC_DEFAULT_BROKER_CONFIG,
                    is_sensitive=False,
                    synonyms=[
                        DescribeResponse.DescribeConfigsSynonym(name=k, value=v, source=DYNAMIC_DEFAULT_BROKER_CONFIG)
                    ]
                    if synonyms
                    else [],
                    config_type=_type_of(v),
                    documentation=BROKER_KEYS[k].doc if docs else None,
                )
                for k, v in sorted(ctx.controller.image.broker_configs.get("", {}).items())
                if keys is None or k in keys
            ],
        )
    if name != str(ctx.broker.node_id):
        return ErrorCode.INVALID_REQUEST, f"broker {name!r} is not this broker ({ctx.broker.node_id})", []
    out = []
    for key, spec in sorted(BROKER_KEYS.items()):
        if keys is not None and key not in keys:
            continue
        value: str | None = str(cfg[key]).lower() if isinstance(cfg[key], bool) else str(cfg[key])
        if spec.sensitive:
            value = None
        layers = _broker_layers(cfg, key)
        source = layers[0][1]
        syn = (
            [
                DescribeResponse.DescribeConfigsSynonym(name=key, value=None if spec.sensitive else v, source=src)
                for v, src in layers
            ]
            if synonyms
            else []
        )
        out.append(
            DescribeResponse.DescribeConfigsResourceResult(
                name=key,
                value=value,
                read_only=key not in DYNAMIC_BROKER_KEYS,
                config_source=source,
                is_sensitive=spec.sensitive,
                synonyms=syn,
                config_type=_type_of(value),
                documentation=spec.doc if docs else None,
            )
        )
    # the object store's options (rsm.config.*, static): a secret one described as a PASSWORD key is
    for key, text in sorted(cfg.explicit.items()):
        if not key.startswith(REMOTE_STORAGE_OPTION_PREFIX) or (keys is not None and key not in keys):
            continue
        secret = sensitive_key(key)
        shown = None if secret else text
        out.append(
            DescribeResponse.DescribeConfigsResourceResult(
                name=key,
                value=shown,
                read_only=True,
                config_source=STATIC_BROKER_CONFIG,
                is_sensitive=secret,
                synonyms=[DescribeResponse.DescribeConfigsSynonym(name=key, value=shown, source=STATIC_BROKER_CONFIG)]
                if synonyms
                else [],
                config_type=PASSWORD if secret else STRING,
                documentation="An option of tiered storage's object store (remote.log.storage.url)." if docs else None,
            )
        )
    return ErrorCode.NONE, None, out


# a config resource type's ACL resource, and the error when the principal may not
_ACL_RESOURCES = {
    TOPIC: (Res.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
    GROUP: (Res.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."),
    BROKER: (Res.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    BROKER_LOGGER: (Res.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    CLIENT_METRICS: (Res.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
}


def _denied(ctx, operation: int, resource) -> tuple[int, str | None]:
    """(error, message) when the principal may not perform `operation` (DESCRIBE_CONFIGS,
    ALTER_CONFIGS) on the config resource: on the topic, the group, or for a broker the
    cluster, as Kafka; (NONE, None) when it may (an unknown type is refused later)."""
    if resource.resource_type not in _ACL_RESOURCES:
        return ErrorCode.NONE, None
    acl_type, code, message = _ACL_RESOURCES[resource.resource_type]
    if ctx.authorize(operation, acl_type, CLUSTER_NAME if acl_type == Res.CLUSTER else resource.resource_name):
        return ErrorCode.NONE, None
    return code, message


async def describe_configs(ctx, request):
    results = []
    version = ctx.version
    for r in request.resources:
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        code, msg = _denied(ctx, Op.DESCRIBE_CONFIGS, r)
        if code:
            configs = []
        elif r.resource_type == TOPIC:
            code, msg, configs = _describe_topic(
                ctx,
                r.resource_name,
                keys,
                request.include_synonyms,
                version >= 3 and request.include_documentation,
                version,
            )
        elif r.resource_type == GROUP:
            code, msg, configs = _describe_group(
                ctx, r.resource_name, keys, request.include_synonyms, version >= 3 and request.include_documentation
            )
        elif r.resource_type == CLIENT_METRICS:
            code, msg, configs = _describe_client_metrics(
                ctx, r.resource_name, keys, request.include_synonyms, version >= 3 and request.include_documentation
            )
        elif r.resource_type == BROKER:
            code, msg, configs = _describe_broker(
                ctx, r.resource_name, keys, request.include_synonyms, version >= 3 and request.include_documentation
            )
        else:
            code, msg, configs = ErrorCode.INVALID_REQUEST, f"resource type {r.resource_type} is not supported", []
        results.append(
            DescribeResponse.DescribeConfigsResult(
                error_code=code,
                error_message=msg,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=configs,
            )
        )
    return DescribeResponse(throttle_time_ms=0, results=results)


async def _alter(
    ctx, resource, changes: dict[str, Change], replace: bool, validate_only: bool
) -> tuple[int, str | None]:
    named = fields(
        topic=resource.resource_name if resource.resource_type == TOPIC else None,
        group=resource.resource_name if resource.resource_type == GROUP else None,
        peer=ctx.peer,
    )
    if not replace:
        dynamic = ctx.controller.image.broker_configs.get(resource.resource_name, {})
        subscription = ctx.controller.image.client_metrics.get(resource.resource_name, {})
        absent = sorted(
            k
            for k, v in changes.items()
            if v is None
            and (
                (resource.resource_type == TOPIC and k not in TOPIC_KEYS)
                or (resource.resource_type == BROKER and k not in dynamic)
                or (resource.resource_type == CLIENT_METRICS and k not in subscription)
            )
        )
        if absent:
            log.info(
                "%s %s: deleting %s from %s changes nothing (never set)",
                {BROKER: "broker", CLIENT_METRICS: "client-metrics subscription"}.get(resource.resource_type, "topic"),
                resource.resource_name or "default",
                absent,
                ctx.peer,
                extra=named,
            )
        changes = {k: v for k, v in changes.items() if k not in absent}
        if resource.resource_type in (BROKER, GROUP) and not changes:
            return ErrorCode.NONE, None
        if resource.resource_type == TOPIC and not changes:
            if resource.resource_name not in ctx.controller.image.topics:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {resource.resource_name!r} does not exist"
            return ErrorCode.NONE, None
    if resource.resource_type == BROKER:
        kind, alter = "broker", ctx.controller.alter_broker_configs
    elif resource.resource_type == GROUP:
        kind, alter = "group", ctx.controller.alter_group_configs
    elif resource.resource_type == TOPIC:
        kind, alter = "topic", ctx.controller.alter_topic_configs
    elif resource.resource_type == CLIENT_METRICS:
        kind, alter = "client-metrics subscription", ctx.controller.alter_client_metrics_configs
    else:
        return ErrorCode.INVALID_REQUEST, f"resource type {resource.resource_type} is not supported"
    # the audit log (broker/audit_log.py): the keys and their new values (None: deleted; a
    # list operation as [op, value]), a sensitive key's value hidden
    shown = {k: shown_value(k, list(v) if isinstance(v, tuple) else v) for k, v in changes.items()}
    audited = _CONFIG_RESOURCE_NAMES.get(resource.resource_type, str(resource.resource_type))
    change = "replace_configs" if replace else "alter_configs"
    try:
        await alter(resource.resource_name, changes, replace, validate_only)
    except ControllerError as e:
        log.info(
            "altering configs of %s %s from %s refused (%s): %s",
            kind,
            resource.resource_name,
            ctx.peer,
            ErrorCode(e.code).name,
            e.message,
            extra=named,
        )
        if not validate_only:
            ctx.audit_change(change, audited, resource.resource_name, e.code, e.message, configs=shown)
        return e.code, e.message
    if not validate_only:
        ctx.audit_change(change, audited, resource.resource_name, configs=shown)
    return ErrorCode.NONE, None


# Kafka's ConfigResource.Type names, for the audit log
_CONFIG_RESOURCE_NAMES = {
    TOPIC: "TOPIC",
    GROUP: "GROUP",
    BROKER: "BROKER",
    BROKER_LOGGER: "BROKER_LOGGER",
    CLIENT_METRICS: "CLIENT_METRICS",
}


async def alter_configs(ctx, request):
    out = []
    for r in request.resources:
        changes = {c.name: c.value for c in r.configs}
        code, msg = _denied(ctx, Op.ALTER_CONFIGS, r)
        if not code:
            code, msg = await _alter(ctx, r, changes, True, request.validate_only)
        out.append(
            AlterResponse.AlterConfigsResourceResponse(
                error_code=code, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name
            )
        )
    return AlterResponse(throttle_time_ms=0, responses=out)


def _check_incremental(resource) -> tuple[int, str | None]:
    """Kafka's checks of one IncrementalAlterConfigs resource before anything is altered
    (ConfigAdminManager.preprocess): a key at most once, a value with every operation but
    DELETE, a known operation; for a broker resource, APPEND/SUBTRACT only on a list key."""
    names = [c.name for c in resource.configs]
    if len(set(names)) != len(names):
        return ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"
    nulls = [c.name for c in resource.configs if c.config_operation != DELETE and c.value is None]
    if nulls:
        return ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
    for c in resource.configs:
        if c.config_operation not in (SET, DELETE, APPEND, SUBTRACT):
            return ErrorCode.INVALID_REQUEST, f"Unknown operations type {c.config_operation}"
        if (
            resource.resource_type == BROKER
            and c.config_operation in (APPEND, SUBTRACT)
            and list_default(c.name, "broker") is None
        ):
            return ErrorCode.INVALID_CONFIG, broker_not_list(c.config_operation, c.name)
    return ErrorCode.NONE, None


async def incremental_alter_configs(ctx, request):
    out = []
    for r in request.resources:
        changes: dict[str, Change] = {}
        code, msg = _denied(ctx, Op.ALTER_CONFIGS, r)
        if not code:
            code, msg = _check_incremental(r)
        for c in r.configs if not code else []:
            if c.config_operation == SET:
                changes[c.name] = c.value
            elif c.config_operation == DELETE:
                changes[c.name] = None
            else:  # APPEND or SUBTRACT: on a list key, worked out by the controller (config_control.py)
                changes[c.name] = (c.config_operation, c.value)
        if code == ErrorCode.NONE:
            code, msg = await _alter(ctx, r, changes, False, request.validate_only)
        out.append(
            IncrementalResponse.AlterConfigsResourceResponse(
                error_code=code, error_message=msg, resource_type=r.resource_type, resource_name=r.resource_name
            )
        )
    return IncrementalResponse(throttle_time_ms=0, responses=out)


ENTRIES = [
    (32, 1, 4, describe_configs),
    (33, 0, 2, alter_configs),
    (44, 0, 1, incremental_alter_configs),
]
