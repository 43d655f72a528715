"""`wait_until`, the tests' poll for a condition: a module of its own, with nothing run at
import, so that benches (benches/tiered_acceptance.py) use it without tests/conftest.py's
settings for the test run (its JVM options)."""

from __future__ import annotations

import time


def wait_until(cond, timeout: float = 30.0, what: str = ""):
    """Poll `cond` until it returns something true (returned); errors count as not yet (a
    node may be mid-election); AssertionError naming `what` and the last error on timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")
