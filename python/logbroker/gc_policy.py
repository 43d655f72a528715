"""Python's cyclic garbage collector on a serving node: the metadata image is kept out of it
while it grows.

CPython collects its oldest generation whenever the objects that survived the younger ones
have grown by a quarter since the last full collection, and a full collection visits every
tracked object. Most of a node's objects are the metadata image (topic and partition states:
long-lived, and not garbage while the topic exists). While topics are created the image
grows steadily, so full collections come every few batches and each visits everything:
creating 40,000 partitions on three nodes made 20-26 full collections per node, 4.6-5.5 s
in all, single pauses up to 0.66 s (docs/benchmarks.md).

Policy (`logbroker serve` only, `install`; an in-process broker shares its process with its
caller and keeps CPython's defaults):
- after a metadata update that added topics, the heap is frozen (`gc.freeze()`: every
  object tracked at that moment moves to the permanent generation, which collections skip),
  at most once per `FREEZE_INTERVAL`;
- `THAW_AFTER` after the last freeze the heap is thawed and collected once
  (`gc.unfreeze()`, `gc.collect()`): cyclic garbage among objects that were alive when frozen
  (a request in flight then) is reclaimed there, by one full collection instead of dozens;
- while topics keep being created (churn), it is thawed and collected anyway once it has been
  frozen for `MAX_FROZEN`.

Invariant: nothing stays frozen longer than `MAX_FROZEN`, nor longer than `THAW_AFTER` past
the last growth of the image plus `CHECK_INTERVAL` (`run` checks when nothing is published);
a node that creates no topics never freezes
anything. (Frozen objects are still freed by reference counting when they die outside a
cycle: a deleted topic's states go at once.) Freezing and thawing are O(1) list splices; the
collection after a thaw is what CPython would have done anyway, once.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

import trio

log = logging.getLogger("logbroker.gc")

# At most one freeze per this many seconds (a freeze is cheap; this bounds what an object in
# flight at a freeze can hold up).
FREEZE_INTERVAL = 1.0
# Seconds after the last freeze before the heap is thawed and collected.
THAW_AFTER = 30.0
# Seconds frozen at most while the image keeps growing (bounds what churn can hold up).
MAX_FROZEN = 300.0
# How often `run` checks whether a thaw is due when nothing is published.
CHECK_INTERVAL = 5.0


class GcPolicy:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last_freeze: float | None = None
        self._first_freeze: float | None = None
        self.freezes = 0
        self.thaws = 0

    def after_publish(self, image_grew: bool) -> None:
        """Called by the metadata publisher after each batch of metadata it applied (and
        when it wakes idle): freezes after growth, thaws once growth has stopped."""
        now = self._clock()
        if self._first_freeze is not None and now - self._first_freeze >= MAX_FROZEN:
            self.thaw()
        if image_grew:
            if self._last_freeze is None or now - self._last_freeze >= FREEZE_INTERVAL:
                gc.freeze()
                self._last_freeze = now
                if self._first_freeze is None:
                    self._first_freeze = now
                self.freezes += 1
        elif self._last_freeze is not None and now - self._last_freeze >= THAW_AFTER:
            self.thaw()

    async def run(self) -> None:
        """Thaws when due although nothing is published (an idle node after a burst)."""
        while True:
            await trio.sleep(CHECK_INTERVAL)
            self.after_publish(image_grew=False)

    def thaw(self) -> int:
        """Unfreezes the heap and collects it whole; the number of unreachable objects found."""
        frozen = gc.get_freeze_count()
        started = time.perf_counter()
        gc.unfreeze()
        found = gc.collect()
        self._last_freeze = self._first_freeze = None
        self.thaws += 1
        log.info(
            "heap thawed after %d freeze(s): %d object(s) had been frozen, a full collection found %d "
            "unreachable in %.0f ms",
            self.freezes,
            frozen,
            found,
            (time.perf_counter() - started) * 1000,
        )
        self.freezes = 0
        return found


_policy: GcPolicy | None = None


def install() -> GcPolicy:
    """Turns the policy on for this process (`logbroker serve`)."""
    global _policy
    _policy = GcPolicy()
    return _policy


def after_publish(image_grew: bool) -> None:
    """The metadata publisher's hook: does nothing unless `install` was called."""
    if _policy is not None:
        _policy.after_publish(image_grew)


def uninstall() -> None:
    """Turns the policy off, thawing what it froze (a node shutting down)."""
    global _policy
    if _policy is not None and _policy.freezes:
        _policy.thaw()
    _policy = None
