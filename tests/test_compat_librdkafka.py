"""librdkafka's own integration tests, short form, against logbroker (tests/compat/librdkafka.py).

Runs `python -m tests.compat librdkafka --short --broker logbroker` as a user would: it fetches
(sha256-pinned) and builds librdkafka 2.8.0 and its test-runner once into
~/.cache/logbroker-compat (installing the Debian build packages it lacks), starts logbroker with
the suite's settings and runs a dozen of the suite's tests one by one. A build that cannot be
done fails this test with the suite's own message (what is missing), it is never skipped.
"""

from __future__ import annotations

from tests.compat import librdkafka
from tests.compat.short import run_short

TIMEOUT = 1200  # a cold cache builds librdkafka first (about 3.5 minutes on 2 cores)


def test_librdkafka_short_suite_passes_on_logbroker():
    run_short("librdkafka", set(librdkafka.SHORT_TESTS), TIMEOUT)
