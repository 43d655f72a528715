"""The configuration control manager (Kafka's ConfigurationControlManager): topic, group and
dynamic broker configs (IncrementalAlterConfigs, AlterConfigs; CreateTopics' configs are
checked in replication_control.py) as Config records, one per key that changes.

Pure (see control.py).
"""

from __future__ import annotations

from typing import Callable, Container

from logbroker.common.config import (
    DYNAMIC_BROKER_KEYS,
    GROUP_KEYS,
    TOPIC_KEYS,
    ConfigError,
    validate_broker_config,
    validate_group_config,
    validate_topic_config,
)
from logbroker.coord.control import ControllerError, ControllerResult
from logbroker.coord.metadata import MetadataImage
from logbroker.coord.metadata_records import encode_record
from logbroker.protocol import ErrorCode


def altered(what: str, current: dict[str, str], changes: dict[str, str | None], replace: bool,
            keys: Container[str], validate: Callable[[dict[str, str | None]], dict[str, str]]) -> dict[str, str]:
    """Config overrides after (Incremental)AlterConfigs: `changes` sets (value) or deletes
    (None) keys; `replace` starts from nothing (AlterConfigs). ControllerError(INVALID_CONFIG)
    names `what` and the bad key or value."""
    configs = {} if replace else dict(current)
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


def _config_records(resource: str, name: str, was: dict[str, str], now: dict[str, str]) -> list[bytes]:
    return [encode_record("Config", resource=resource, name=name, key=k, value=now.get(k))
            for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)]


class ConfigurationControlManager:
    def alter_topic_configs(self, image: MetadataImage, name: str, changes: dict[str, str | None],
                            replace: bool) -> ControllerResult[dict[str, str]]:
        """Set (value) or delete (None) topic config overrides; `replace` drops every
        override not named (AlterConfigs). The response: the overrides after."""
        topic = image.topics.get(name)
        if topic is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        configs = altered(f"topic {name!r}", topic.configs, changes, replace, TOPIC_KEYS, validate_topic_config)
        return ControllerResult(_config_records("topic", name, topic.configs, configs), configs,
                                [(f"topic {name}: configs now {configs}", {"topic": name})])

    def alter_broker_configs(self, image: MetadataImage, name: str, changes: dict[str, str | None],
                             replace: bool) -> ControllerResult[dict[str, str]]:
        """Dynamic broker configs (common/config.py DYNAMIC_BROKER_KEYS): `name` "" for the
        cluster default, or a broker id; applied by every broker without a restart."""
        if name and not name.isdigit():
            raise ControllerError(ErrorCode.INVALID_REQUEST, f"broker {name!r}: a broker config resource is \"\" "
                                                             "(the cluster default) or a broker id")
        what = "the cluster-default broker configs" if not name else f"the configs of broker {name}"
        was = image.broker_configs.get(name, {})
        configs = altered(what, was, changes, replace, DYNAMIC_BROKER_KEYS, validate_broker_config)
        return ControllerResult(_config_records("broker", name, was, configs), configs,
                                [(f"{what}: now {configs}", {})])

    def alter_group_configs(self, image: MetadataImage, name: str, changes: dict[str, str | None],
                            replace: bool) -> ControllerResult[dict[str, str]]:
        """Set (value) or delete (None) a group's config overrides (Kafka's GroupConfig keys,
        common/config.py GROUP_KEYS); `replace` drops every override not named. A group need
        not exist: its configs wait for it, as in Kafka."""
        if not name:
            raise ControllerError(ErrorCode.INVALID_GROUP_ID, "a group config needs a group id")
        was = image.group_configs.get(name, {})
        configs = altered(f"group {name!r}", was, changes, replace, GROUP_KEYS, validate_group_config)
        return ControllerResult(_config_records("group", name, was, configs), configs,
                                [(f"group {name}: configs now {configs}", {"group": name})])
