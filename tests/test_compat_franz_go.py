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

import pytest

from tests.compat import franz_go
from tests.compat.short import run_short

# a cold cache downloads franz-go and its dependencies and compiles the test binary first
# (about 100 s on 2 cores); the short form itself takes about a minute
TIMEOUT = 900


@pytest.mark.timeout(TIMEOUT + 60)
def test_franz_go_short_suite_passes_on_logbroker():
    run_short("franz-go", set(franz_go.SHORT_TESTS), TIMEOUT)
