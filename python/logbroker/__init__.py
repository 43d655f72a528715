"""logbroker: a Kafka-compatible commit-log broker for the Python world.

    with logbroker.Broker() as broker:      # in-process broker on a free port
        print(broker.bootstrap_servers)

    with logbroker.Producer(bootstrap_servers=broker.bootstrap_servers) as p:
        p.send("events", b"hello").result(10)

Producer, Consumer, ShareConsumer and Admin are the Python Kafka client (`logbroker.client`;
async versions for asyncio and trio in `logbroker.aio`), usable against Apache Kafka as well.
"""

from logbroker._core import __version__
from logbroker.broker import Broker, BrokerServer
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
from logbroker.cluster import Cluster
from logbroker.common.config import BrokerConfig, ConfigError

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
