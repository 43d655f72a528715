"""The Python Kafka client: `Producer`, `Consumer`, `Admin` (sync; the trio versions are in
`logbroker.aio`), built on one sans-I/O core (`core.py`, `network.py`, `sender.py`,
`fetcher.py`, `group.py`, `admin_core.py`) driven by a background thread (`driver.py`) or
trio tasks (`logbroker.aio`), with the per-record work in Rust (`_core.RecordAccumulator`,
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
from logbroker.client.transactions import TransactionStateError

__all__ = [
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
    "TopicDescription",
    "TopicPartition",
    "TransactionStateError",
]
