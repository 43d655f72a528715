"""`logbroker topic create|list|describe|alter-config|delete` against a broker, run as a user
would (a subprocess), checked with another client (confluent-kafka's admin)."""

from __future__ import annotations

import json
import subprocess
import sys

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource


def cli(bs: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbroker", "topic", "--bootstrap-server", bs, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_topic_commands(broker):
    bs = broker.bootstrap_servers
    r = cli(bs, "create", "--topic", "orders", "--partitions", "3", "--config", "retention.ms=3600000")
    assert r.returncode == 0 and "3 partition(s), replication factor 1" in r.stdout, r.stderr
    assert cli(bs, "create", "--topic", "orders").returncode == 1  # exists
    r = cli(bs, "create", "--topic", "orders", "--if-not-exists")
    assert r.returncode == 0 and "exists" in r.stdout
    assert cli(bs, "create", "--topic", "x", "--config", "nonsense").returncode == 2
    r = cli(bs, "create", "--topic", "bad", "--config", "cleanup.policy=shred")
    assert r.returncode == 1 and "cleanup.policy" in r.stderr, r.stderr

    admin = AdminClient({"bootstrap.servers": bs})
    md = admin.list_topics(timeout=10)
    assert len(md.topics["orders"].partitions) == 3
    res = ConfigResource(ConfigResource.Type.TOPIC, "orders")
    assert admin.describe_configs([res])[res].result(10)["retention.ms"].value == "3600000"

    p = Producer({"bootstrap.servers": bs})
    for _ in range(7):
        p.produce("orders", value=b"v", partition=1)
    assert p.flush(10) == 0

    r = cli(bs, "list", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == ["orders"], r.stdout
    r = cli(bs, "describe", "--topic", "orders", "--json")
    assert r.returncode == 0, r.stderr
    [doc] = json.loads(r.stdout)
    assert [
        (q["partition"], q["leader"], q["replicas"], q["isr"], q["earliest_offset"], q["latest_offset"])
        for q in doc["partitions"]
    ] == [(0, 1, [1], [1], 0, 0), (1, 1, [1], [1], 0, 7), (2, 1, [1], [1], 0, 0)]
    r = cli(bs, "describe", "--topic", "orders", "--configs")
    assert r.returncode == 0 and "orders: 3 partition(s)" in r.stdout and "retention.ms" in r.stdout, r.stdout
    assert cli(bs, "describe", "--topic", "nope").returncode == 1

    r = cli(bs, "alter-config", "--topic", "orders", "--set", "retention.ms=7200000", "--delete", "max.message.bytes")
    assert r.returncode == 0, r.stderr
    assert admin.describe_configs([res])[res].result(10)["retention.ms"].value == "7200000"
    r = cli(bs, "alter-config", "--topic", "orders", "--delete", "retention.ms")
    assert r.returncode == 0
    assert admin.describe_configs([res])[res].result(10)["retention.ms"].value == "604800000"
    assert cli(bs, "alter-config", "--topic", "orders").returncode == 2

    r = cli(bs, "delete", "--topic", "orders")
    assert r.returncode == 0 and "deleted topic 'orders'" in r.stdout
    assert "orders" not in admin.list_topics(timeout=10).topics
    assert cli(bs, "delete", "--topic", "orders").returncode == 1
