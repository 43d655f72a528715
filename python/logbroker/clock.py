"""Wall-clock time for record timestamps, retention and offset expiry.

Timeouts and deadlines use trio's clock (`trio.current_time()`), which tests can mock;
`now_ms` is only for values that are stored or compared with stored timestamps;
`run_every` is the broker's periodic-job loop (on trio's clock).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

import trio


def now_ms() -> int:
    """Milliseconds since the Unix epoch, as Kafka timestamps are."""
    return time.time_ns() // 1_000_000


async def run_every(interval_ms: float, job: Callable[[], Awaitable[None]], logger: logging.Logger) -> None:
    """Run `job` every `interval_ms` until cancelled; a failing run is logged with its
    traceback and the next one runs on schedule."""
    while True:
        await trio.sleep(interval_ms / 1000)
        try:
            await job()
        except Exception:
            logger.exception("periodic job %s failed", job.__name__)
