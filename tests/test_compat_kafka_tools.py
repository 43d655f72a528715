"""The short form of the kafka-tools compatibility suite (tests/compat/kafka_tools.py) against
logbroker: Kafka 4.4's own command-line tools (kafka-topics, kafka-configs,
kafka-consumer-groups, kafka-get-offsets, kafka-metadata-quorum, kafka-features,
kafka-cluster, kafka-broker-api-versions, kafka-dump-log on logbroker's segment files) each
run against a fresh one-node logbroker, judged by exit status and output. The full form, side
by side with Apache Kafka on one and three nodes, is `./scripts/compat kafka-tools`."""

from __future__ import annotations

from conftest import needs_java

from tests.compat.short import run_short

pytestmark = needs_java


def test_kafka_tools_short_form_passes_on_logbroker():
    from tests.compat.kafka_tools import CASES

    run_short("kafka-tools", {c.name for c in CASES if c.short and 1 in c.sizes}, timeout=600)
