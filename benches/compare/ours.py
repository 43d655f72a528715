"""HOOK: logbroker's own client, the third client of the comparison.

It does not exist yet. When it does, implement `produce` and `consume` below with it (same
contract as the confluent-kafka worker in ck_worker.py: return records, bytes and seconds,
the clock started after connecting) and set AVAILABLE = True; the comparison then runs it
against both brokers in the same A/B pairs and the table fills in its rows. Until then the
table lists its rows as "n/a" with REASON.
"""

from __future__ import annotations

AVAILABLE = False
REASON = "logbroker's own client does not exist yet (hook: benches/compare/ours.py)"


def produce(bootstrap: str, topic: str, size: int, count: int, acks: str) -> dict:
    """Produce `count` records of `size` bytes to `topic`; return
    {"records": int, "bytes": int, "seconds": float}."""
    raise NotImplementedError(REASON)


def consume(bootstrap: str, topic: str, partitions: int, count: int) -> dict:
    """Read `count` records from the start of every partition of `topic` without a consumer
    group; return {"records": int, "bytes": int, "seconds": float}."""
    raise NotImplementedError(REASON)
