"""Client side of the Kafka protocol, used by the `logbroker` CLI (and grown into the
Python Producer/Consumer/Admin API)."""

from logbroker.client.connection import BrokerConnection, ClientError

__all__ = ["BrokerConnection", "ClientError"]
