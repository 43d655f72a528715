"""The broker's periodic-job loops (logbroker/clock.py), on trio's mock clock."""

from __future__ import annotations

import logging

import trio
import trio.testing

from logbroker.clock import EARLY_SHARE, RECENT_RUNS, run_ending_every, run_every


def ends_of(loop, durations: list[float], interval_ms: float = 1000) -> list[float]:
    """When each run of a job taking `durations` seconds ended, under `loop`."""
    ends: list[float] = []

    async def main() -> None:
        async def job() -> None:
            await trio.sleep(durations[len(ends)])
            ends.append(trio.current_time())
            if len(ends) == len(durations):
                nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop, interval_ms, job, logging.getLogger("test"))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return ends


def test_runs_end_about_every_interval_whatever_they_take() -> None:
    ends = ends_of(run_ending_every, [0.3] * 8)
    gaps = [b - a for a, b in zip(ends, ends[1:])]
    assert all(abs(g - (1 - EARLY_SHARE)) < 1e-6 for g in gaps), gaps
    # run_every waits a whole interval after each run: its runs end an interval and a run apart
    plain = ends_of(run_every, [0.3] * 4)
    assert all(abs((b - a) - 1.3) < 1e-6 for a, b in zip(plain, plain[1:]))


def test_a_long_run_shortens_the_waits_after_it_for_a_while() -> None:
    ends = ends_of(run_ending_every, [0.1, 0.6] + [0.1] * (RECENT_RUNS + 1))
    gaps = [round(b - a, 6) for a, b in zip(ends, ends[1:])]
    # after the 0.6 s run the waits plan for 0.6 s, until it is no longer among the recent runs
    assert gaps[1] == round(1 - EARLY_SHARE - 0.6 + 0.1, 6)
    assert gaps[-1] == round(1 - EARLY_SHARE, 6)
    # a run longer than the interval: the next waits a tenth of the interval, not nothing
    over = ends_of(run_ending_every, [1.5, 0.1])
    assert round(over[1] - over[0], 6) == round(0.1 + 0.1, 6)
