"""The schema registry's error type for schemas: InvalidSchema (a schema of any type that does
not parse, or names a reference that is not there). rest.py turns it into Confluent's 42201."""

from __future__ import annotations


class InvalidSchema(ValueError):
    """The reason is the message."""
