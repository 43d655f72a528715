"""logbroker: a Kafka-compatible commit-log broker for the Python world.

    with logbroker.Broker() as broker:      # in-process broker on a free port
        print(broker.bootstrap_servers)
"""

from logbroker._core import __version__
from logbroker.broker import Broker, BrokerServer
from logbroker.config import BrokerConfig, ConfigError

__all__ = ["Broker", "BrokerConfig", "BrokerServer", "ConfigError", "__version__"]
