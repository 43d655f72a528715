"""The event-loop watchdog (broker/loop_watchdog.py): a call that blocks the trio loop is
reported with the frame it blocks in, once per stall, then the stall's length; a call that
keeps the GIL is reported as a process stall, with every thread's stack on stderr; a loop
that runs is never reported."""

from __future__ import annotations

import logging
import sys
import time

import trio

import logbroker
from logbroker.broker.loop_watchdog import LoopWatchdog


def _block_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # a blocking call on the trio thread, as a lock wait would be


def run_with_watchdog(body, stall_s: float = 0.5) -> LoopWatchdog:
    dog = LoopWatchdog("node 7", stall_s=stall_s, tick_s=0.05)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(dog.run)
            await body()
            await trio.sleep(0.3)  # the watcher sees the loop run again
            nursery.cancel_scope.cancel()

    trio.run(main)
    return dog


def test_a_blocked_loop_is_reported_with_the_blocking_frame_then_its_length(caplog) -> None:
    async def body() -> None:
        await trio.sleep(0.2)
        _block_the_loop(1.5)

    with caplog.at_level(logging.WARNING, logger="logbroker.loop"):
        dog = run_with_watchdog(body)
    stalled = [r.getMessage() for r in caplog.records if "has not run for" in r.getMessage()]
    assert len(stalled) == 1, caplog.text  # once per stall, not at every tick
    assert stalled[0].startswith("node 7: the trio loop has not run for"), stalled[0]
    assert "_block_the_loop" in stalled[0] and "time.sleep(seconds)" in stalled[0], stalled[0]
    again = [r.getMessage() for r in caplog.records if "ran again after" in r.getMessage()]
    assert len(again) == 1, caplog.text
    took = float(again[0].split("after ")[1].split(" s")[0])
    assert 1.3 <= took <= 3.0, again[0]
    assert dog.stalls == 1 and 1.3 <= dog.longest_s <= 3.0, (dog.stalls, dog.longest_s)


def test_a_loop_that_runs_is_not_reported(caplog) -> None:
    async def body() -> None:
        for _ in range(20):
            _block_the_loop(0.05)  # short blocking calls between awaits: a loop that still runs
            await trio.sleep(0.05)

    with caplog.at_level(logging.WARNING, logger="logbroker.loop"):
        dog = run_with_watchdog(body)
    assert dog.stalls == 0 and not caplog.records, caplog.text


def _keep_the_gil(seconds: float) -> None:
    """Pure Python that keeps the GIL (the switch interval raised above `seconds`), as a
    Rust call that does not release it would."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_call_that_keeps_the_gil_is_reported_with_every_threads_stack(caplog, capfd) -> None:
    async def body() -> None:
        await trio.sleep(0.2)
        before = sys.getswitchinterval()
        sys.setswitchinterval(10.0)
        try:
            _keep_the_gil(2.5)
        finally:
            sys.setswitchinterval(before)

    with caplog.at_level(logging.WARNING, logger="logbroker.loop"):
        dog = run_with_watchdog(body)
    stalled = [r.getMessage() for r in caplog.records if "no Python thread of this process ran" in r.getMessage()]
    # (a loaded machine may add a short stall of its own: the one the call made is there)
    ran = [float(m.split("ran for ")[1].split(" s")[0]) for m in stalled]
    assert any(1.5 <= r <= 4.0 for r in ran) and dog.process_stalls == len(stalled), caplog.text
    # faulthandler's C thread wrote the stacks while the call still kept the GIL (at 1.5 s)
    err = capfd.readouterr().err
    assert "Thread 0x" in err and "in _keep_the_gil" in err, err


def test_a_stalled_network_thread_is_reported_once_naming_its_request(caplog) -> None:
    """The watchdog's view of the network thread (`NetworkServer.loop_stall`) during a turn
    that serves a Produce for 1 s, then turns that come round again."""
    t0 = time.monotonic()

    def network() -> tuple[float, int]:
        t = time.monotonic() - t0
        return (t - 0.1, 0) if 0.1 <= t < 1.1 else (0.01, -1)

    async def body() -> None:
        await trio.sleep(1.5)

    dog = LoopWatchdog("broker 3", stall_s=0.5, tick_s=0.05, network=network)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(dog.run)
            await body()
            nursery.cancel_scope.cancel()

    with caplog.at_level(logging.WARNING, logger="logbroker.loop"):
        trio.run(main)
    msgs = [r.getMessage() for r in caplog.records]
    stalled = [m for m in msgs if "the network thread has been in one turn" in m]
    assert len(stalled) == 1 and dog.network_stalls == 1, msgs
    assert stalled[0].startswith("broker 3: ") and "(serving Produce)" in stalled[0], stalled[0]
    assert sum("came round its loop again" in m for m in msgs) == 1, msgs
    assert dog.stalls == 0, msgs  # the trio loop itself ran


def test_a_running_brokers_network_thread_comes_round_and_a_stopped_one_is_not_watched(tmp_path) -> None:
    with logbroker.Broker(data_dir=tmp_path / "d") as b:
        net = b.server.server.net
        for _ in range(5):
            since, api = net.loop_stall()
            assert 0.0 <= since < 2.0, since  # an idle turn is one poll (at most 1 s)
            time.sleep(0.3)
    assert net.loop_stall() == (0.0, -1)
