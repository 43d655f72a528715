"""The GC policy of a serving node (python/logbroker/gc_policy.py) against CPython's real
collector: what it freezes is not collected until it thaws, and a thaw collects it."""

from __future__ import annotations

import gc
import weakref

import pytest

from logbroker import gc_policy
from logbroker.gc_policy import FREEZE_INTERVAL, MAX_FROZEN, THAW_AFTER, GcPolicy


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref:
    """A two-object reference cycle, alive only through the cycle once returned."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def clock():
    now = [1000.0]
    yield now
    gc.unfreeze()  # whatever a failing test left frozen


def test_growth_freezes_at_most_once_per_interval_and_a_thaw_collects_what_was_frozen(clock):
    policy = GcPolicy(clock=lambda: clock[0])
    gc.collect()
    policy.after_publish(image_grew=False)
    assert (policy.freezes, gc.get_freeze_count()) == (0, 0), "no growth, nothing frozen"

    # an object alive at the freeze, dead later in a cycle: held up, not leaked for good
    doomed = [Node(), Node()]
    doomed[0].other, doomed[1].other = doomed[1], doomed[0]
    ref = weakref.ref(doomed[0])
    policy.after_publish(image_grew=True)
    assert policy.freezes == 1 and gc.get_freeze_count() > 0
    del doomed
    gc.collect()
    assert ref() is not None, "frozen: full collections skip it"

    clock[0] += FREEZE_INTERVAL / 2
    policy.after_publish(image_grew=True)
    assert policy.freezes == 1, "at most one freeze per interval"
    clock[0] += FREEZE_INTERVAL
    policy.after_publish(image_grew=True)
    assert policy.freezes == 2

    # garbage made after the last freeze is collected as usual
    young = cycle()
    gc.collect()
    assert young() is None

    clock[0] += THAW_AFTER - 1
    policy.after_publish(image_grew=False)
    assert ref() is not None and policy.thaws == 0, "not yet: growth stopped less than THAW_AFTER ago"
    clock[0] += 1
    policy.after_publish(image_grew=False)
    assert policy.thaws == 1 and gc.get_freeze_count() == 0
    assert ref() is None, "the thaw's full collection reclaimed the cycle"


def test_churn_thaws_after_max_frozen_even_while_the_image_keeps_growing(clock):
    policy = GcPolicy(clock=lambda: clock[0])
    keep = [Node(), Node()]
    keep[0].other, keep[1].other = keep[1], keep[0]
    ref = weakref.ref(keep[0])
    policy.after_publish(image_grew=True)
    del keep
    while clock[0] < 1000.0 + MAX_FROZEN - FREEZE_INTERVAL:
        clock[0] += FREEZE_INTERVAL
        policy.after_publish(image_grew=True)
        assert policy.thaws == 0
    assert ref() is not None
    clock[0] += FREEZE_INTERVAL
    policy.after_publish(image_grew=True)
    assert policy.thaws == 1 and ref() is None, "thawed and collected, then frozen again"
    assert policy.freezes == 1 and gc.get_freeze_count() > 0


def test_the_module_hook_does_nothing_until_installed_and_uninstall_thaws():
    gc.collect()
    gc_policy.after_publish(True)
    assert gc.get_freeze_count() == 0, "not installed: an in-process broker keeps CPython's defaults"
    policy = gc_policy.install()
    try:
        ref = cycle()
        keep = ref()
        gc_policy.after_publish(True)
        assert policy.freezes == 1 and gc.get_freeze_count() > 0
        del keep
    finally:
        gc_policy.uninstall()
    assert gc.get_freeze_count() == 0
    assert ref() is None
