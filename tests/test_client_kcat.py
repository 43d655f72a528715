"""kcat (librdkafka's command-line client) against logbroker, as a user runs it."""

from __future__ import annotations

import subprocess

import pytest
from conftest import CODECS, kcat_bin


def kcat(*args: str, input: bytes | None = None) -> bytes:
    res = subprocess.run([kcat_bin(), *args], input=input, capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr.decode()
    return res.stdout


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_keys_headers(broker, codec):
    bs = broker.bootstrap_servers
    topic = f"kcat-{codec}"
    kcat("-b", bs, "-L", "-t", topic)  # Metadata auto-creates the topic (1 partition)
    expected = []
    for part_batch in range(3):
        lines = []
        for i in range(100):
            key, value = f"k{part_batch}-{i}", f"v{part_batch}-{i}-" + "x" * (i % 50)
            lines.append(f"{key}\t{value}")
            expected.append((key, value, f"batch={part_batch},codec={codec}"))
        kcat(
            "-b",
            bs,
            "-P",
            "-t",
            topic,
            "-p",
            "0",
            "-z",
            codec,
            "-K",
            "\t",
            "-H",
            f"batch={part_batch}",
            "-H",
            f"codec={codec}",
            input=("\n".join(lines) + "\n").encode(),
        )
    out = kcat("-b", bs, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o\t%k\t%s\t%h\n").decode()
    rows = [line.split("\t") for line in out.splitlines()]
    assert [int(r[0]) for r in rows] == list(range(len(expected)))
    assert [(r[1], r[2], r[3]) for r in rows] == expected


def test_metadata_listing(broker):
    out = kcat("-b", broker.bootstrap_servers, "-L", "-J").decode()
    import json

    md = json.loads(out)
    assert md["brokers"][0]["id"] == broker.server.node_id
