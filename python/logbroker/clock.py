"""Wall-clock time for record timestamps, retention and offset expiry.

Timeouts and deadlines use trio's clock (`trio.current_time()`), which tests can mock;
this is only for values that are stored or compared with stored timestamps.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    """Milliseconds since the Unix epoch, as Kafka timestamps are."""
    return time.time_ns() // 1_000_000
