"""librdkafka's own integration tests, short form, against logbroker (tests/compat/librdkafka.py).

Runs `python -m tests.compat librdkafka --short --broker logbroker` as a user would: it fetches
(sha256-pinned) and builds librdkafka 2.8.0 and its test-runner once into
~/.cache/logbroker-compat (installing the Debian build packages it lacks), starts logbroker with
the suite's settings and runs a dozen of the suite's tests one by one. A build that cannot be
done fails this test with the suite's own message (what is missing), it is never skipped.
"""

from __future__ import annotations

import subprocess
import sys

from tests.compat import librdkafka, results
from tests.compat.results import ROOT

TIMEOUT = 1200  # a cold cache builds librdkafka first (about 3.5 minutes on 2 cores)


def test_librdkafka_short_suite_passes_on_logbroker():
    before = results.path_for("librdkafka", "logbroker", "short")
    if before.exists():
        before.unlink()  # judge this run's record, not an earlier one
    p = subprocess.run([sys.executable, "-m", "tests.compat", "librdkafka", "--short", "--broker", "logbroker"],
                       cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"python -m tests.compat librdkafka --short exited {p.returncode}:\n{out[-6000:]}"
    doc = results.load("librdkafka", "logbroker", "short")
    assert doc is not None, f"no result file {before} after the run:\n{out[-3000:]}"
    ran = {o["test"]: o for o in doc["outcomes"]}
    expected = sorted(librdkafka.SHORT_TESTS)
    assert sorted(ran) == expected, f"ran {sorted(ran)}, expected {expected}"
    failed = {t: o["detail"][-800:] for t, o in ran.items() if o["status"] != "pass"}
    assert not failed, f"librdkafka tests failing on logbroker: {failed}"
