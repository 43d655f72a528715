"""logbroker: a Kafka-compatible commit-log broker for the Python world.

    with logbroker.Broker() as broker:      # in-process broker on a free port
        print(broker.bootstrap_servers)

    with logbroker.Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        p.send("events", b"hello").result(10)

Producer, Consumer, ShareConsumer and Admin are the Python Kafka client (`logbroker.client`;
async versions for asyncio and trio in `logbroker.aio`), usable against Apache Kafka as well.
"""

from typing import TYPE_CHECKING

from logbroker._core import __version__
from logbroker.client import (
    AcknowledgeType,
    Admin,
    Consumer,
    ConsumerRecord,
    DeadLetters,
    KafkaError,
    KafkaTimeoutError,
    NewTopic,
    Producer,
    RecordFuture,
    RecordMetadata,
    ShareConsumer,
    TopicPartition,
)
from logbroker.common.config import BrokerConfig, ConfigError

if TYPE_CHECKING:
    from logbroker.broker import Broker, BrokerServer
    from logbroker.cluster import Cluster

# The broker (its service, handlers, replication, trio and the rest) is imported when first
# named, not with the package: a client or a `logbroker` command that only talks to a broker
# (topic, group, acl, user, ...) starts in a fraction of the time (docs/decisions.md).
_LAZY = {"Broker": "logbroker.broker", "BrokerServer": "logbroker.broker", "Cluster": "logbroker.cluster"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'logbroker' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without this function
    return value


__all__ = [
    "AcknowledgeType",
    "Admin",
    "Broker",
    "BrokerConfig",
    "BrokerServer",
    "Cluster",
    "ConfigError",
    "Consumer",
    "ConsumerRecord",
    "DeadLetters",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "ShareConsumer",
    "TopicPartition",
    "__version__",
]
