"""Wall-clock time for record timestamps, retention and offset expiry.

Timeouts and deadlines use trio's clock (`trio.current_time()`), which tests can mock;
`now_ms` is only for values that are stored or compared with stored timestamps;
`run_every` is the broker's periodic-job loop (on trio's clock); `run_ending_every` the
loop of a job whose runs must end at most about an interval after what they pick up arrived.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Awaitable, Callable

import trio

RECENT_RUNS = 5  # run_ending_every plans by the longest of the last few runs
# and ends runs this share of the interval early: room for what a record spends before a run
# can pick it up (the producer's linger, the request, replication to the high watermark)
EARLY_SHARE = 0.05


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


async def run_ending_every(interval_ms: float, job: Callable[[], Awaitable[None]], logger: logging.Logger) -> None:
    """Run `job` until cancelled so that runs end about every `interval_ms`: the wait before
    a run is the interval less the longest of the last RECENT_RUNS runs and EARLY_SHARE of
    the interval (at least a tenth of the interval). What a run picks up at its start arrived at most one wait earlier and is
    done at its end, so it waited about one interval in all, where `run_every` lets it wait
    an interval plus up to two runs. A failing run is logged with its traceback and the next
    one goes on."""
    interval = interval_ms / 1000
    took: collections.deque[float] = collections.deque([0.0], maxlen=RECENT_RUNS)
    while True:
        await trio.sleep(max(interval / 10, interval * (1 - EARLY_SHARE) - max(took)))
        start = trio.current_time()
        try:
            await job()
        except Exception:
            logger.exception("periodic job %s failed", job.__name__)
        took.append(trio.current_time() - start)
