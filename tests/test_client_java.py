"""The Java client (Apache Kafka 4.x console producer and consumer, installed from Maven
Central by benches/peers/kafka.py) against logbroker: idempotent produce with every
codec, keys, and consumption in a classic group and a KIP-848 (group.protocol=consumer)
group."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_java

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = needs_java


@pytest.fixture(scope="module")
def kafka_tools():
    from benches.peers.kafka import install

    return install()


def produce(kafka_tools, bs: str, topic: str, lines: list[str], codec: str) -> None:
    cmd = kafka_tools.tools_java(
        "org.apache.kafka.tools.ConsoleProducer",
        [
            "--bootstrap-server",
            bs,
            "--topic",
            topic,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            "--compression-codec",
            codec,
            "--producer-property",
            "enable.idempotence=true",
            "--producer-property",
            "acks=all",
        ],
    )
    r = subprocess.run(cmd, input="".join(line + "\n" for line in lines).encode(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-3000:]


def consume(kafka_tools, bs: str, topic: str, n: int, group: str, protocol: str) -> list[str]:
    cmd = kafka_tools.tools_java(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        [
            "--bootstrap-server",
            bs,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            str(n),
            "--timeout-ms",
            "60000",
            "--formatter-property",
            "print.key=true",
            "--formatter-property",
            "key.separator=:",
            "--group",
            group,
            "--command-property",
            f"group.protocol={protocol}",
        ],
    )
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return r.stdout.decode().splitlines()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_java_console_roundtrip(broker, kafka_tools, codec):
    bs = broker.bootstrap_servers
    lines = [f"k{i}:value-{codec}-{i}" for i in range(200)]
    produce(kafka_tools, bs, f"java-{codec}", lines, codec)
    assert consume(kafka_tools, bs, f"java-{codec}", 200, f"jg-{codec}", "classic") == lines


def test_java_consumer_kip848_group(broker, kafka_tools):
    bs = broker.bootstrap_servers
    lines = [f"k{i}:v{i}" for i in range(100)]
    produce(kafka_tools, bs, "java-848", lines, "none")
    assert consume(kafka_tools, bs, "java-848", 100, "jg-848", "consumer") == lines
    # the group committed its offsets through the new protocol
    assert broker.server.groups.groups["jg-848"].offsets[("java-848", 0)].offset == 100


def test_java_consumer_uses_incremental_fetch_sessions(broker, kafka_tools):
    """The Java consumer opens a KIP-227 fetch session on its first fetch and then sends
    incremental fetches; records produced while it long-polls arrive through them."""
    import time

    import logbroker

    bs = broker.bootstrap_servers
    with logbroker.Admin(bs) as admin:
        admin.create_topics([logbroker.NewTopic("jsess", 24)])
    first = [f"k{i}:a{i}" for i in range(240)]
    second = [f"k{i}:b{i}" for i in range(240)]
    produce(kafka_tools, bs, "jsess", first, "none")
    net = broker.server.server.net
    cmd = kafka_tools.tools_java(
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        [
            "--bootstrap-server",
            bs,
            "--topic",
            "jsess",
            "--from-beginning",
            "--max-messages",
            "480",
            "--timeout-ms",
            "60000",
            "--formatter-property",
            "print.key=true",
            "--formatter-property",
            "key.separator=:",
            "--group",
            "jsess-g",
        ],
    )
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while net.stats()["fetch_sessions"] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert net.stats()["fetch_sessions"] >= 1, net.stats()
        time.sleep(1.0)  # the consumer has read the first batch and long-polls incrementally
        produce(kafka_tools, bs, "jsess", second, "none")
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode()[-3000:]
    lines = out.decode().splitlines()
    assert sorted(lines) == sorted(first + second)
    # Per key (one partition each), the first batch's record comes before the second's.
    seen = {}
    for line in lines:
        key, value = line.split(":")
        seen.setdefault(key, []).append(value[0])
    assert all(v == ["a", "b"] for v in seen.values())
