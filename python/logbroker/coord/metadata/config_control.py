"""The configuration control manager (Kafka's ConfigurationControlManager): topic, group,
client-metrics (KIP-714) and dynamic broker configs (IncrementalAlterConfigs, AlterConfigs; CreateTopics' configs are
checked in replication_control.py) as Config records, one per key that changes.

A topic's keys are checked one by one (common/config.py validate_topic_config) and then
together (`check_topic_configs`: tiered storage's rules, Kafka's LogConfig.validate), for
CreateTopics and (Incremental)AlterConfigs alike, against the broker defaults this node
resolves with the image's dynamic broker configs. A change of those defaults is checked
against the topics whose tiered-storage values it changes.

Pure (see control.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Mapping

from logbroker.common import client_metrics
from logbroker.common.config import (
    BROKER_KEYS,
    DYNAMIC_BROKER_KEYS,
    GROUP_KEYS,
    TOPIC_KEYS,
    BrokerConfig,
    ConfigError,
    validate_broker_config,
    validate_group_config,
    validate_topic_config,
)
from logbroker.coord.metadata.control import ControllerError, ControllerResult, partition_change_record
from logbroker.coord.metadata.eligible_leaders import MIN_ISR
from logbroker.coord.metadata.metadata import MetadataImage, TopicState
from logbroker.coord.metadata.metadata_records import encode_record
from logbroker.protocol import ErrorCode

# IncrementalAlterConfigs' list operations (AlterConfigOp.OpType ids)
APPEND, SUBTRACT = 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# A change to one key: a value to set, None to delete, or (APPEND or SUBTRACT, "v1,v2")
Change = str | None | tuple[int, str]


def list_default(key: str, kind: str) -> str | None:
    """The default a list key's APPEND/SUBTRACT starts from when it has no override (Kafka's
    ConfigDef default of the key, not the broker's configured value), or None when `key` is
    not a list key of a `kind` ("topic", "group" or "broker") resource."""
    if kind == "client-metrics":
        return client_metrics.DEFAULTS[key] if key in client_metrics.LIST_KEYS else None
    if kind == "broker":
        broker_key: str | None = key
    else:
        table = TOPIC_KEYS if kind == "topic" else GROUP_KEYS
        broker_key = table[key][1] if key in table else None
    spec = BROKER_KEYS.get(broker_key) if broker_key else None
    return spec.default if spec is not None and spec.type == "list" else None


def list_operation(op: int, current: str | None, value: str) -> str:
    """A list key's value after APPEND (the items of `value` not already there, at the end)
    or SUBTRACT (without the items of `value`), as Kafka's ConfigurationControlManager:
    blank items of the current value are dropped, the items joined with ","."""
    items = [v for v in (current or "").split(",") if v]
    if op == APPEND:
        for v in value.split(","):
            if v not in items:
                items.append(v)
    else:
        for v in value.split(","):
            if v in items:
                items.remove(v)
    return ",".join(items)


def resolve_list_ops(
    current: Mapping[str, str], changes: Mapping[str, Change], kind: str, not_list: Callable[[int, str], str]
) -> dict[str, str | None]:
    """`changes` with each (APPEND|SUBTRACT, value) turned into the value it sets (from the
    key's override, else its default); ControllerError(INVALID_CONFIG, not_list(op, key))
    for a key that is not a list key."""
    out: dict[str, str | None] = {}
    for k, change in changes.items():
        if isinstance(change, tuple):
            op, value = change
            default = list_default(k, kind)
            if default is None:
                raise ControllerError(ErrorCode.INVALID_CONFIG, not_list(op, k))
            out[k] = list_operation(op, current.get(k, default), value)
        else:
            out[k] = change
    return out


def _controller_not_list(op: int, key: str) -> str:  # Kafka's ConfigurationControlManager's words
    return f"Can't {_OP_NAMES.get(op, op)} to key {key} because its type is not LIST."


def broker_not_list(op: int, key: str) -> str:  # Kafka's ConfigAdminManager's words (a BROKER resource)
    return f"Config value {_OP_NAMES.get(op, op).lower()} is not allowed for config key: {key}"


def altered(
    what: str,
    current: dict[str, str],
    changes: Mapping[str, Change],
    replace: bool,
    keys: Container[str],
    validate: Callable[[dict[str, str | None]], dict[str, str]],
    kind: str = "topic",
    not_list: Callable[[int, str], str] = _controller_not_list,
) -> dict[str, str]:
    """Config overrides after (Incremental)AlterConfigs: `changes` sets (value) or deletes
    (None) keys, or APPENDs to or SUBTRACTs from a list key ((op, value); the result is
    checked like a set value); `replace` starts from nothing (AlterConfigs).
    ControllerError(INVALID_CONFIG) names `what` and the bad key or value."""
    configs = {} if replace else dict(current)
    changes = resolve_list_ops(current, changes, kind, not_list)
    try:
        checked = validate({k: v for k, v in changes.items() if v is not None})
    except ConfigError as e:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"{what}: {e}") from None
    for k, v in changes.items():
        if v is None:
            if k not in keys:
                raise ControllerError(ErrorCode.INVALID_CONFIG, f"{what}: unknown configuration key {k!r}")
            configs.pop(k, None)
    configs.update(checked)
    return configs


# the topic keys the checks across a topic's keys read (BrokerConfig.check_topic_configs)
TIERED_STORAGE_TOPIC_KEYS = (
    "remote.storage.enable",
    "remote.log.delete.on.disable",
    "retention.ms",
    "retention.bytes",
    "local.retention.ms",
    "local.retention.bytes",
)


def resolved_defaults(config: BrokerConfig, broker_configs: Mapping[str, Mapping[str, str]]) -> BrokerConfig:
    """This node's `config` with the dynamic broker configs `broker_configs` (the image's:
    "" the cluster default, this node's id its own) instead of those it has applied: the
    broker defaults a topic's keys resolve to, as of that image."""
    return config.with_dynamic(dict(broker_configs.get("", {})), dict(broker_configs.get(str(config.node_id), {})))


def check_topic_configs(
    config: BrokerConfig,
    image: MetadataImage,
    name: str,
    configs: Mapping[str, str],
    previous: Mapping[str, str] | None = None,
) -> None:
    """The checks across a topic's keys (BrokerConfig.check_topic_configs) of a new topic
    (`previous` None) or of one whose overrides were `previous`; ControllerError
    (INVALID_CONFIG) naming the topic, keys and values."""
    try:
        resolved_defaults(config, image.broker_configs).check_topic_configs(name, configs, previous)
    except ConfigError as e:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"topic {name!r}: {e}") from None


def check_broker_defaults(
    config: BrokerConfig, image: MetadataImage, name: str, configs: Mapping[str, str], what: str
) -> None:
    """A change of the dynamic configs of broker `name` ("" the cluster default) to
    `configs`, seen from this node: its tiered-storage defaults must hold together
    (BrokerConfig.check_tiered_storage_defaults), and each topic whose tiered-storage values
    change with them must pass `check_topic_configs` (e.g. the default remote.storage.enable
    turned off under topics that rely on it). Another broker's own configs are that broker's
    business: not checked here. ControllerError(INVALID_CONFIG) naming `what` and the key."""
    if name not in ("", str(config.node_id)):
        return
    before = resolved_defaults(config, image.broker_configs)
    after = resolved_defaults(config, {**image.broker_configs, name: dict(configs)})
    try:
        after.check_tiered_storage_defaults()
    except ConfigError as e:
        raise ControllerError(ErrorCode.INVALID_CONFIG, f"{what}: {e}") from None
    keys = [k for k in TIERED_STORAGE_TOPIC_KEYS if before.topic_value({}, k) != after.topic_value({}, k)]
    if not keys:
        return
    for topic, t in sorted(image.topics.items()):
        if all(k in t.configs for k in keys):
            continue  # its own overrides: the defaults do not reach it
        try:
            after.check_topic_configs(topic, t.configs, t.configs, before)
        except ConfigError as e:
            raise ControllerError(ErrorCode.INVALID_CONFIG, f"{what}: topic {topic!r}: {e}") from None


def _config_records(resource: str, name: str, was: dict[str, str], now: dict[str, str]) -> list[bytes]:
    return [
        encode_record("Config", resource=resource, name=name, key=k, value=now.get(k))
        for k in sorted(set(was) | set(now))
        if was.get(k) != now.get(k)
    ]


def _elrs_cleared(topics: list[TopicState]) -> list[bytes]:
    """PartitionChanges emptying the ELR and last known ELR of `topics`' partitions: a new
    min.insync.replicas no longer vouches for them (coord/metadata/eligible_leaders.py)."""
    out = []
    for t in topics:
        for ps in t.partitions.values():
            if ps.elr or ps.last_known_elr:
                new = dataclasses.replace(ps, elr=[], last_known_elr=[], partition_epoch=ps.partition_epoch + 1)
                out.append(partition_change_record(t.topic_id, new))
    return out


class ConfigurationControlManager:
    def __init__(self, config: BrokerConfig | None = None) -> None:
        self.config = config if config is not None else BrokerConfig()  # this node's: the broker defaults

    def alter_topic_configs(
        self, image: MetadataImage, name: str, changes: Mapping[str, Change], replace: bool
    ) -> ControllerResult[dict[str, str]]:
        """Set (value) or delete (None) topic config overrides; `replace` drops every
        override not named (AlterConfigs). The response: the overrides after."""
        topic = image.topics.get(name)
        if topic is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        configs = altered(f"topic {name!r}", topic.configs, changes, replace, TOPIC_KEYS, validate_topic_config)
        check_topic_configs(self.config, image, name, configs, topic.configs)
        cleared = _elrs_cleared([topic]) if configs.get(MIN_ISR) != topic.configs.get(MIN_ISR) else []
        return ControllerResult(
            _config_records("topic", name, topic.configs, configs) + cleared,
            configs,
            [(f"topic {name}: configs now {configs}", {"topic": name})],
        )

    def alter_broker_configs(
        self, image: MetadataImage, name: str, changes: Mapping[str, Change], replace: bool
    ) -> ControllerResult[dict[str, str]]:
        """Dynamic broker configs (common/config.py DYNAMIC_BROKER_KEYS): `name` "" for the
        cluster default, or a broker id; applied by every broker without a restart."""
        if name and not name.isdigit():
            raise ControllerError(
                ErrorCode.INVALID_REQUEST,
                f'broker {name!r}: a broker config resource is "" (the cluster default) or a broker id',
            )
        what = "the cluster-default broker configs" if not name else f"the configs of broker {name}"
        was = image.broker_configs.get(name, {})
        configs = altered(
            what,
            was,
            changes,
            replace,
            DYNAMIC_BROKER_KEYS,
            validate_broker_config,
            kind="broker",
            not_list=broker_not_list,
        )
        check_broker_defaults(self.config, image, name, configs, what)
        cleared = []
        if not name and configs.get(MIN_ISR) != was.get(MIN_ISR):
            cleared = _elrs_cleared([t for t in image.topics.values() if MIN_ISR not in t.configs])
        return ControllerResult(
            _config_records("broker", name, was, configs) + cleared, configs, [(f"{what}: now {configs}", {})]
        )

    def alter_group_configs(
        self, image: MetadataImage, name: str, changes: Mapping[str, Change], replace: bool
    ) -> ControllerResult[dict[str, str]]:
        """Set (value) or delete (None) a group's config overrides (Kafka's GroupConfig keys,
        common/config.py GROUP_KEYS); `replace` drops every override not named. A group need
        not exist: its configs wait for it, as in Kafka."""
        if not name:
            raise ControllerError(ErrorCode.INVALID_GROUP_ID, "a group config needs a group id")
        was = image.group_configs.get(name, {})
        configs = altered(f"group {name!r}", was, changes, replace, GROUP_KEYS, validate_group_config, kind="group")
        return ControllerResult(
            _config_records("group", name, was, configs),
            configs,
            [(f"group {name}: configs now {configs}", {"group": name})],
        )

    def alter_client_metrics_configs(
        self, image: MetadataImage, name: str, changes: Mapping[str, Change], replace: bool
    ) -> ControllerResult[dict[str, str]]:
        """Set (value) or delete (None) keys of the client-metrics subscription `name` (KIP-714:
        metrics, interval.ms, match; common/client_metrics.py); `replace` drops every key not
        named. The configs after the change are checked whole, as Kafka's
        ControllerConfigurationValidator; a subscription left with no key is deleted."""
        was = image.client_metrics.get(name, {})
        configs = {} if replace else dict(was)
        resolved = resolve_list_ops(was, changes, "client-metrics", _controller_not_list)
        for k, v in resolved.items():
            if v is None:
                configs.pop(k, None)
            else:
                configs[k] = v
        try:
            configs = client_metrics.validate(name, configs)
        except client_metrics.ClientMetricsConfigError as e:
            raise ControllerError(e.code, e.message) from None
        return ControllerResult(
            _config_records("client-metrics", name, was, configs),
            configs,
            [
                (
                    f"client-metrics subscription {name}: configs now {configs}"
                    if configs
                    else f"client-metrics subscription {name}: deleted",
                    {},
                )
            ],
        )
