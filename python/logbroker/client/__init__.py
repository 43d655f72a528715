"""The Python Kafka client: `Producer`, `Consumer`, `Admin` (sync; trio versions in
`logbroker.aio`), built on one sans-I/O core (`core.py`, `sender.py`, `fetcher.py`,
`group.py`, `admin_core.py`) with the per-record work in Rust (`_core.RecordAccumulator`,
`_core.decode_records`). `BrokerConnection` is the small blocking client the CLI uses.
"""

from logbroker.client.connection import BrokerConnection, ClientError
from logbroker.client.producer import Producer, RecordFuture, RecordMetadata

__all__ = ["BrokerConnection", "ClientError", "Producer", "RecordFuture", "RecordMetadata"]
