"""Client quotas on the broker: the metadata image's quotas handed to the Rust network
thread, which measures and throttles Produce and Fetch (rust/src/server/quota.rs,
`_core.ClientQuotas`; the rules are in its module doc).

    quota.window.num            windows a rate is measured over (default 11)
    quota.window.size.seconds   each window's length (default 1)

The quotas are the image's (`MetadataImage.client_quotas`, written by the controller through
AlterClientQuotas); `apply_metadata` hands the byte rates and request percentages to Rust
after every change.

Request time (`request_percentage`, KIP-124) of the requests the Python handlers serve is
their handler's time: while some request quota is set, `RequestTimes` (a trio instrument)
adds up the time each request's task spends running, one clock read pair per task step of
those tasks only (the time it waits, for the controller, a rebalance or another broker, is
not counted, as Kafka counts a request handler thread's time and not its purgatory's), and
broker/dispatch.py records it (`ClientQuotas.record_request`), sets the response's
`throttle_time_ms` and has the network thread mute the connection for it. With no request
quota the instrument is not installed: nothing is timed.
"""

from __future__ import annotations

import logging
import time

import trio

from logbroker import _core
from logbroker.coord.metadata import client_quotas

log = logging.getLogger("logbroker.broker.quotas")


class RequestTimes(trio.abc.Instrument):
    """The running time of the trio tasks serving requests (`start` .. `stop`), in ns."""

    def __init__(self) -> None:
        self._tasks: dict[trio.lowlevel.Task, list[int]] = {}  # task -> [ns run so far, step start]

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        timed = self._tasks.get(task)
        if timed is not None:
            timed[1] = time.perf_counter_ns()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        timed = self._tasks.get(task)
        if timed is not None:
            timed[0] += time.perf_counter_ns() - timed[1]

    def start(self) -> trio.lowlevel.Task:
        """Times the current task from now (its step under way counts from here)."""
        task = trio.lowlevel.current_task()
        self._tasks[task] = [0, time.perf_counter_ns()]
        return task

    def stop(self, task: trio.lowlevel.Task) -> int:
        """The task's running time since `start` (ns), called from the task itself; it is no
        longer timed."""
        timed = self._tasks.pop(task, None)
        return 0 if timed is None else timed[0] + time.perf_counter_ns() - timed[1]

    def forget(self, task: trio.lowlevel.Task) -> None:
        self._tasks.pop(task, None)


class ClientQuotaPublisher:
    """Keeps the network thread's quotas equal to the metadata image's."""

    def __init__(self, config, core: _core.ClientQuotas) -> None:
        self.core = core
        core.configure(config.get_int("quota.window.num"), config.get_int("quota.window.size.seconds") * 1000)
        self._quotas: dict | None = None
        # installed in the trio run while a request_percentage quota is set (broker/dispatch.py)
        self.request_times: RequestTimes | None = None
        self._instrument = RequestTimes()

    async def apply_metadata(self, image, delta=None) -> None:
        quotas = getattr(image, "client_quotas", {})
        if quotas is self._quotas or quotas == self._quotas:  # a published image is never changed
            return
        self._quotas = quotas
        self.core.set_quotas(
            [
                (
                    list(entity),
                    values.get(client_quotas.PRODUCER_BYTE_RATE),
                    values.get(client_quotas.CONSUMER_BYTE_RATE),
                    values.get(client_quotas.REQUEST_PERCENTAGE),
                )
                for entity, values in quotas.items()
            ]
        )
        self._time_requests(self.core.request_quota_enabled)
        log.info(
            "client quotas now: %s",
            "; ".join(
                f"{client_quotas.entity_name(e)}: " + ", ".join(f"{k}={v:g}" for k, v in sorted(vals.items()))
                for e, vals in sorted(quotas.items(), key=lambda kv: client_quotas.entity_name(kv[0]))
            )
            or "none",
        )

    def _time_requests(self, on: bool) -> None:
        """Installs the request timer while some request quota is set (in this trio run)."""
        if on == (self.request_times is not None):
            return
        if on:
            trio.lowlevel.add_instrument(self._instrument)
            self.request_times = self._instrument
        else:
            self.request_times = None
            trio.lowlevel.remove_instrument(self._instrument)
            self._instrument = RequestTimes()
