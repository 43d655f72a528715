"""`logbroker group list/describe/reset-offsets/delete` against a real broker."""

from __future__ import annotations

import subprocess
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def cli(bs: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbroker", "group", "--bootstrap-server", bs, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_group_cli(broker):
    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("cli-t", num_partitions=2, replication_factor=1)])["cli-t"].result(10)
    p = Producer({"bootstrap.servers": bs})
    for i in range(100):
        p.produce("cli-t", str(i).encode(), partition=i % 2, timestamp=1_700_000_000_000 + i * 1000)
    p.flush(10)
    c = Consumer(
        {"bootstrap.servers": bs, "group.id": "cli-g", "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    c.subscribe(["cli-t"])
    got = 0
    deadline = time.monotonic() + 30
    while got < 30 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None and m.partition() == 0:
            got += 1
            if got == 30:
                c.commit(message=m, asynchronous=False)
    # committed offset 30 on partition 0 (30 records read), nothing on partition 1
    out = cli(bs, "describe", "cli-g")
    assert out.returncode == 0, out.stderr
    assert "state Stable" in out.stdout and "1 member(s)" in out.stdout
    row = next(line.split() for line in out.stdout.splitlines() if line.startswith("cli-t") and line.split()[1] == "0")
    assert row[2:5] == ["30", "50", "20"], out.stdout
    assert "cli-g\tStable\tconsumer" in cli(bs, "list").stdout
    refused = cli(bs, "reset-offsets", "cli-g", "--topic", "cli-t", "--to-earliest")
    assert refused.returncode == 1 and "Stable" in refused.stderr
    c.close()
    assert cli(bs, "reset-offsets", "cli-g", "--topic", "cli-t", "--to-offset", "7").returncode == 0
    c2 = Consumer({"bootstrap.servers": bs, "group.id": "cli-g"})
    assert [tp.offset for tp in c2.committed([TopicPartition("cli-t", 0), TopicPartition("cli-t", 1)], timeout=10)] == [
        7,
        7,
    ]
    assert cli(bs, "reset-offsets", "cli-g", "--topic", "cli-t", "--to-latest").stdout.split() == [
        "cli-t",
        "0",
        "50",
        "cli-t",
        "1",
        "50",
    ]
    dt = cli(bs, "reset-offsets", "cli-g", "--topic", "cli-t", "--to-datetime", "2023-11-14T22:13:40+00:00")
    # 1_700_000_000_000 ms = 2023-11-14T22:13:20Z; +20 s is record 20, i.e. offset 10 in each partition
    assert dt.stdout.split() == ["cli-t", "0", "10", "cli-t", "1", "10"], dt.stdout + dt.stderr
    out = cli(bs, "delete", "cli-g")
    assert out.returncode == 0
    assert "cli-g" not in cli(bs, "list").stdout
    assert cli(bs, "delete", "cli-g").returncode == 1
    c2.close()
