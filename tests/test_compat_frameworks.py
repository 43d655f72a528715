"""The short form of the frameworks compatibility suite (tests/compat/frameworks.py) against
three logbroker nodes: Kafka Streams 4.4's exactly_once_v2 word count through kill -9 of the
application and of a broker, every count exact, with the classic group protocol and with
streams groups (KIP-1071, the group's coordinator killed); Kafka Connect's file source to file sink
through a worker restart and a broker kill, the files equal. The full form, side by side
with Apache Kafka 4.4, is `./scripts/compat frameworks`."""

from __future__ import annotations

import pytest
from conftest import needs_java

from tests.compat.short import run_short

pytestmark = needs_java


@pytest.mark.timeout(960)
def test_frameworks_short_form_passes_on_logbroker():
    from tests.compat.frameworks import CASES

    run_short("frameworks", set(CASES), timeout=900, label="logbroker-3nodes")
