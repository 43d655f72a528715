"""The Python Kafka client: `Producer`, `Consumer`, `ShareConsumer` (KIP-932 share groups),
`Admin` (sync; the async versions are in `logbroker.aio`), built on one sans-I/O core
(`core.py`, `network.py`, `sender.py`, `fetcher.py`, `group.py`, `share_consumer.py`,
`admin_core.py`) driven by a background thread (`driver.py`) or async tasks
(`logbroker.aio`), with the per-record work in Rust (`_core.RecordAccumulator`,
`_core.decode_records`). `BrokerConnection` is the small blocking client the CLI uses.
"""

from logbroker.client.admin import Admin
from logbroker.client.admin_core import ClusterInfo, GroupDescription, NewTopic, TopicDescription
from logbroker.client.connection import BrokerConnection, ClientError
from logbroker.client.consumer import Consumer, ConsumerRecord
from logbroker.client.dead_letters import DeadLetters
from logbroker.client.errors import (
    BrokerResponseError,
    ClientClosedError,
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SaslAuthenticationError,
    SerializationError,
)
from logbroker.client.fetcher import NoOffsetForPartitionError
from logbroker.client.group import TopicPartition
from logbroker.client.producer import Producer, RecordFuture, RecordMetadata
from logbroker.client.share import AcknowledgeType, IllegalStateError, ShareConsumer
from logbroker.client.transactions import TransactionStateError

__all__ = [
    "AcknowledgeType",
    "Admin",
    "BrokerConnection",
    "BrokerResponseError",
    "ClientClosedError",
    "ClientError",
    "ClusterInfo",
    "ConfigError",
    "Consumer",
    "ConsumerRecord",
    "DeadLetters",
    "GroupDescription",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic",
    "NoOffsetForPartitionError",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "SaslAuthenticationError",
    "SerializationError",
    "ShareConsumer",
    "TopicDescription",
    "TopicPartition",
    "TransactionStateError",
]
