"""Directory ids (KIP-858, KIP-853): a data directory's own id, `directory.id` in its
meta.properties, written as Kafka writes a Uuid: its 16 bytes in URL-safe base64 without
padding (22 characters). The controller quorum names a voter by node id and directory id;
the zero id ("AAAAAAAAAAAAAAAAAAAAAA") stands for a voter known without one (configured by
controller.quorum.voters)."""

from __future__ import annotations

import base64
import uuid

ZERO = "AAAAAAAAAAAAAAAAAAAAAA"


def random_uuid() -> uuid.UUID:
    """A random uuid as Kafka's Uuid.randomUuid makes one: never an id Kafka reserves (the ids
    below 100: zero, the metadata topic's) and never one whose printed form starts with "-",
    which a command line would take for an option (`--topic-id -Xa...`)."""
    while True:
        u = uuid.uuid4()
        if u.int >= 100 and not text(u).startswith("-"):
            return u


def new() -> str:
    """A random directory id."""
    return text(random_uuid())


def text(u: uuid.UUID) -> str:
    """A uuid as Kafka prints it."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def parse(value: str) -> uuid.UUID:
    """Kafka's printed form back to a uuid; ValueError naming the value if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise ValueError(f"directory id {value!r} is not a Kafka uuid (22 characters of URL-safe base64)")
    return uuid.UUID(bytes=raw)
