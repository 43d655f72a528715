"""franz-go's kgo tests, short form, against logbroker (tests/compat/franz_go.py).

Runs `python -m tests.compat franz-go --short --broker logbroker` as a user would: it downloads
franz-go v1.22.3 through the Go module proxy (h1-pinned) and builds the kgo test binary once
into ~/.cache/logbroker-compat, starts logbroker with the suite's settings and runs the short
form's tests (producing, consuming, a group, transactions, group offsets, ping) in one test
binary run. When Go cannot be had (no go 1.21+, no Debian golang-go to fetch the toolchain
with) the suite's prepare step says what is missing and this test fails with that message;
it is never skipped.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.compat import franz_go, results
from tests.compat.results import ROOT

# a cold cache downloads franz-go and its dependencies and compiles the test binary first
# (about 100 s on 2 cores); the short form itself takes about a minute
TIMEOUT = 900


@pytest.mark.timeout(TIMEOUT + 60)
def test_franz_go_short_suite_passes_on_logbroker():
    before = results.path_for("franz-go", "logbroker", "short")
    if before.exists():
        before.unlink()  # judge this run's record, not an earlier one
    p = subprocess.run([sys.executable, "-m", "tests.compat", "franz-go", "--short", "--broker", "logbroker"],
                       cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"python -m tests.compat franz-go --short exited {p.returncode}:\n{out[-6000:]}"
    doc = results.load("franz-go", "logbroker", "short")
    assert doc is not None, f"no result file {before} after the run:\n{out[-3000:]}"
    ran = {o["test"]: o for o in doc["outcomes"]}
    assert sorted(ran) == sorted(franz_go.SHORT_TESTS), f"ran {sorted(ran)}, expected {sorted(franz_go.SHORT_TESTS)}"
    failed = {t: o["detail"][-800:] for t, o in ran.items() if o["status"] != "pass"}
    assert not failed, f"franz-go kgo tests failing on logbroker: {failed}"
