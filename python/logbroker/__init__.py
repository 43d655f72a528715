"""logbroker: a Kafka-compatible commit-log broker for the Python world."""

from logbroker._core import __version__

__all__ = ["__version__"]
