"""Delayed delivery (issue 48): a record's not-before time, which share groups honour (they
hand the record out only from that time; broker/share_partition.py) and plain consumers
ignore (they see the record as any other).

    header   logbroker.deliver.at
    value    the time in ms since the Unix epoch, as ASCII decimal digits, e.g. b"1764547200000"

Any client can set it (it is an ordinary header); `logbroker.Producer.send(...,
deliver_at=...)` does, from ms since the epoch, a `datetime` (naive: local time) or a
`timedelta` from now. A value that is not such a number is ignored by the broker (the record
is delivered at once). The broker reads it in Rust (rust/src/share_records.rs).
"""

from __future__ import annotations

import datetime as _dt
import time

__all__ = ["DELIVER_AT_HEADER", "deliver_at_ms", "with_deliver_at"]

DELIVER_AT_HEADER = "logbroker.deliver.at"


def deliver_at_ms(when: int | float | _dt.datetime | _dt.timedelta) -> int:
    """`when` as ms since the epoch; ValueError for a negative time or another type."""
    if isinstance(when, _dt.timedelta):
        ms = int(time.time() * 1000 + when.total_seconds() * 1000)
    elif isinstance(when, _dt.datetime):
        ms = int(when.timestamp() * 1000)
    elif isinstance(when, (int, float)) and not isinstance(when, bool):
        ms = int(when)
    else:
        raise ValueError(f"deliver_at={when!r}: ms since the epoch, a datetime or a timedelta")
    if ms < 0:
        raise ValueError(f"deliver_at={when!r}: before the epoch")
    return ms


def with_deliver_at(headers, when) -> list:
    """`headers` (a dict or (key, value) pairs, or None) with the deliver-at header added (an
    earlier one replaced)."""
    items = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
    items = [(k, v) for k, v in items if (k.decode() if isinstance(k, bytes) else k) != DELIVER_AT_HEADER]
    items.append((DELIVER_AT_HEADER, str(deliver_at_ms(when)).encode()))
    return items
