"""The Java client (Apache Kafka 4.x console producer and consumer, installed from Maven
Central by benches/peers/kafka.py) against logbroker: idempotent produce with every
codec, keys, and consumption in a classic group and a KIP-848 (group.protocol=consumer)
group."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = pytest.mark.skipif(shutil.which("java") is None or shutil.which("mvn") is None,
                                reason="Java 17 and Maven are needed for the Java client")


@pytest.fixture(scope="module")
def kafka_tools():
    from benches.peers.kafka import install

    return install()


def produce(kafka_tools, bs: str, topic: str, lines: list[str], codec: str) -> None:
    cmd = kafka_tools.tools_java("org.apache.kafka.tools.ConsoleProducer", [
        "--bootstrap-server", bs, "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:",
        "--compression-codec", codec, "--producer-property", "enable.idempotence=true", "--producer-property", "acks=all"])
    r = subprocess.run(cmd, input="".join(line + "\n" for line in lines).encode(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-3000:]


def consume(kafka_tools, bs: str, topic: str, n: int, group: str, protocol: str) -> list[str]:
    cmd = kafka_tools.tools_java("org.apache.kafka.tools.consumer.ConsoleConsumer", [
        "--bootstrap-server", bs, "--topic", topic, "--from-beginning", "--max-messages", str(n), "--timeout-ms", "60000",
        "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:", "--group", group,
        "--command-property", f"group.protocol={protocol}"])
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
