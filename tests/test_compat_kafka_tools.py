"""The short form of the kafka-tools compatibility suite (tests/compat/kafka_tools.py) against
logbroker: Kafka 4.4's own command-line tools (kafka-topics, kafka-configs,
kafka-consumer-groups, kafka-get-offsets, kafka-metadata-quorum, kafka-features,
kafka-cluster, kafka-broker-api-versions, kafka-dump-log on logbroker's segment files) each
run against a fresh one-node logbroker, judged by exit status and output. The full form, side
by side with Apache Kafka on one and three nodes, is `./scripts/compat kafka-tools`."""

from __future__ import annotations

import subprocess
import sys

from conftest import needs_java

from tests.compat import results

pytestmark = needs_java

ROOT = results.ROOT


def test_kafka_tools_short_form_passes_on_logbroker():
    from tests.compat.kafka_tools import CASES

    before = results.path_for("kafka-tools", "logbroker", "short")
    if before.exists():
        before.unlink()  # judge this run's record, not an earlier one
    r = subprocess.run([sys.executable, "-m", "tests.compat", "kafka-tools", "--short", "--broker", "logbroker"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    doc = results.load("kafka-tools", "logbroker", "short")
    assert doc is not None, "python -m tests.compat wrote no results file"
    outcomes = {o["test"]: o for o in doc["outcomes"]}
    want = {c.name for c in CASES if c.short and 1 in c.sizes}
    assert set(outcomes) == want, (sorted(set(outcomes) ^ want), r.stdout[-2000:])
    failed = {name: o["detail"] for name, o in outcomes.items() if o["status"] != "pass"}
    assert not failed, failed
