"""Compatibility levels (Confluent's): which earlier versions of a subject a new schema is
checked against, and in which direction.

    NONE                  no check
    BACKWARD              the new schema reads data written with the latest version
    FORWARD               the latest version reads data written with the new schema
    FULL                  both
    <level>_TRANSITIVE    the same against every live version, not only the latest
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")

# (reader, writer) -> why the reader cannot read the writer's data (empty: it can)
Checker = Callable[[Any, Any], list[str]]


def check(level: str, new: Any, earlier: Sequence[tuple[int, Any]], incompatibilities: Checker) -> list[str]:
    """Why `new` may not follow `earlier` ((version, parsed schema), oldest first) under
    `level`; empty when it may."""
    if level == "NONE" or not earlier:
        return []
    against = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    base = level.removesuffix("_TRANSITIVE")
    out: list[str] = []
    for version, old in reversed(against):
        if base in ("BACKWARD", "FULL"):
            out += [
                f"version {version} (BACKWARD: the new schema must read its data): {m}"
                for m in incompatibilities(new, old)
            ]
        if base in ("FORWARD", "FULL"):
            out += [
                f"version {version} (FORWARD: it must read the new schema's data): {m}"
                for m in incompatibilities(old, new)
            ]
    return out
