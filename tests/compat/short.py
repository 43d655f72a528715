"""The short form of a suite as CI runs it: `python -m tests.compat SUITE --short --broker
logbroker` in a subprocess (as a user would run it), judged from the results file it writes."""

from __future__ import annotations

import subprocess
import sys

from tests.compat import results


def run_short(suite: str, expected: set[str], timeout: float, label: str = "logbroker") -> None:
    """Runs the suite's short form against logbroker; AssertionError unless it exits 0 and its
    results file (`label`: "logbroker", or "logbroker-3nodes" for a suite on three nodes)
    names exactly `expected`, every one passed."""
    before = results.path_for(suite, label, "short")
    if before.exists():
        before.unlink()  # judge this run's record, not an earlier one
    p = subprocess.run(
        [sys.executable, "-m", "tests.compat", suite, "--short", "--broker", "logbroker"],
        cwd=results.ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"python -m tests.compat {suite} --short exited {p.returncode}:\n{out[-6000:]}"
    doc = results.load(suite, label, "short")
    assert doc is not None, f"no result file {before} after the run:\n{out[-3000:]}"
    ran = {o["test"]: o for o in doc["outcomes"]}
    assert set(ran) == expected, f"ran {sorted(ran)}, expected {sorted(expected)}"
    failed = {t: o["detail"][-800:] for t, o in ran.items() if o["status"] != "pass"}
    assert not failed, f"{suite} tests failing on logbroker: {failed}"
