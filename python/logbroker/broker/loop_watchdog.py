"""The event-loop watchdog: a warning, with the trio thread's stack, when a node's trio loop
has not run for `STALL_S` seconds.

Every request Python serves (Metadata, group and transaction coordination, the controller)
waits on the one trio loop, so a call that blocks it (a lock held by a thread doing I/O, a
long Rust call that keeps the GIL) stalls the whole control plane while the data path goes
on: clients see requests time out and nothing in the log says why. A trio task stamps the
time every `TICK_S`; a plain thread looks every `TICK_S` and, once the stamp is `STALL_S`
old, logs where the trio thread is (`sys._current_frames`, the frame it is blocked in), once
per stall, then how long the stall lasted when the loop runs again.

The thread needs the GIL to look, so a call that keeps the GIL (a Rust call that does not
release it while it waits or works) stops every Python thread, the watchdog's too, and may
end before the trio loop is seen late. Two things report it: the watching thread notices
its own sleep ran `STALL_S` late ("no Python thread ... ran"), and, armed by the watching
threads at most once a second, `faulthandler.dump_traceback_later` (a C thread that needs no
GIL) writes the stack of every thread to stderr (fd 2) when no watcher has run for
`STALL_S + 1` seconds: the thread in the call that keeps the GIL is the one not waiting.

A broker's watchdog also watches the Rust network thread (`network`: its
`NetworkServer.loop_stall`), which owns every socket and serves Produce and Fetch itself: a
turn of its loop that takes `STALL_S` (an append waiting for the log's lock while the cleaner
or retention holds it across disk I/O, a slow disk) stops every connection, new ones too, and
the trio loop goes on unaware. That is reported once per stall, naming the request it was
serving, then its length.
"""

from __future__ import annotations

import faulthandler
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

import trio

from logbroker.protocol import API_NAMES

log = logging.getLogger("logbroker.loop")

TICK_S = 0.25
# the longest stall not reported: above the pauses a loaded 2-core test machine makes
# (scheduling, a full garbage collection), far below a client's request.timeout.ms
STALL_S = 5.0


class _ProcessDump:
    """The process's one faulthandler timer (it is global), armed while any watchdog runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watchers = 0
        self._armed_at = -1e18

    def start(self) -> None:
        with self._lock:
            self._watchers += 1

    def arm(self, stall_s: float) -> None:
        now = time.monotonic()
        with self._lock:
            if self._watchers == 0 or now - self._armed_at < 1.0:
                return
            self._armed_at = now
            # fd 2, not sys.stderr: the object may be closed before the timer fires (a test's
            # capture); the descriptor is whatever stderr is when it does
            faulthandler.dump_traceback_later(stall_s + 1.0, repeat=False, file=2)

    def stop(self) -> None:
        with self._lock:
            self._watchers -= 1
            if self._watchers == 0:
                faulthandler.cancel_dump_traceback_later()
                self._armed_at = -1e18


_PROCESS_DUMP = _ProcessDump()


class LoopWatchdog:
    """`await nursery.start(LoopWatchdog(name).run)` in the trio program to watch."""

    def __init__(
        self,
        name: str,
        stall_s: float = STALL_S,
        tick_s: float = TICK_S,
        network: Callable[[], tuple[float, int] | None] | None = None,
    ) -> None:
        self.name = name
        self.network = network  # () -> NetworkServer.loop_stall(), None before it is bound
        self.stall_s = stall_s
        self.tick_s = tick_s
        self.stalls = 0  # stalls reported since start
        self.process_stalls = 0  # times no Python thread ran for stall_s
        self.network_stalls = 0  # network thread turns reported as stalled
        self.longest_s = 0.0  # the longest of them, in seconds
        self._beat = time.monotonic()
        self._trio_thread = 0
        self._stop = threading.Event()

    async def run(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        self._trio_thread = threading.get_ident()
        self._beat = time.monotonic()
        watcher = threading.Thread(target=self._watch, name=f"loop-watchdog-{self.name}", daemon=True)
        watcher.start()
        task_status.started()
        try:
            while True:
                self._beat = time.monotonic()
                await trio.sleep(self.tick_s)
        finally:
            self._stop.set()

    def _watch_network(self, stalled: bool) -> bool:
        """Reports a stalled turn of the network thread once; returns whether one is on."""
        got = self.network() if self.network is not None else None
        if got is None:
            return stalled
        since, api = got
        if stalled and since < self.stall_s:
            log.warning("%s: the network thread came round its loop again", self.name)
            return False
        if not stalled and since >= self.stall_s:
            self.network_stalls += 1
            serving = f"serving {API_NAMES.get(api, f'API {api}')}" if api >= 0 else "between requests"
            log.warning(
                "%s: the network thread has been in one turn of its loop for %.1f s (%s): every "
                "connection waits, new ones too",
                self.name,
                since,
                serving,
            )
            return True
        return stalled

    def _watch(self) -> None:
        _PROCESS_DUMP.start()
        try:
            self._watch_loop()
        finally:
            _PROCESS_DUMP.stop()

    def _watch_loop(self) -> None:
        stalled_since: float | None = None
        network_stalled = False
        woke = time.monotonic()
        while True:
            _PROCESS_DUMP.arm(self.stall_s)
            if self._stop.wait(self.tick_s):
                return
            now = time.monotonic()
            overslept = now - woke - self.tick_s
            woke = now
            if overslept >= self.stall_s:
                self.process_stalls += 1
                log.warning(
                    "%s: no Python thread of this process ran for %.1f s (a call that kept the GIL, "
                    "or the process was stopped); a stall over %.1f s wrote the stack of every thread to stderr",
                    self.name,
                    overslept,
                    self.stall_s + 1.0,
                )
            network_stalled = self._watch_network(network_stalled)
            beat = self._beat
            late = now - beat
            if stalled_since is not None and beat > stalled_since:
                took = beat - stalled_since
                self.longest_s = max(self.longest_s, took)
                log.warning("%s: the trio loop ran again after %.1f s stalled", self.name, took)
                stalled_since = None
            if stalled_since is None and late >= self.stall_s:
                stalled_since = beat
                self.stalls += 1
                frame = sys._current_frames().get(self._trio_thread)
                stack = "".join(traceback.format_stack(frame)) if frame is not None else "(trio thread gone)\n"
                log.warning(
                    "%s: the trio loop has not run for %.1f s (every request Python serves waits); "
                    "the trio thread is at:\n%s",
                    self.name,
                    late,
                    stack.rstrip(),
                )
