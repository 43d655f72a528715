"""Kafka Streams 4.4 itself on a streams group (KIP-1071, group.protocol=streams) against one
node: tests/java/WordCount.java (a repartition, a RocksDB store with its changelog,
exactly_once_v2) counts exactly, the broker having configured the topology, created the
internal topics and assigned the tasks; then Kafka's own `kafka-streams-groups` lists,
describes, resets the offsets of and deletes the group. The three-node run with kill -9 of the
application and of the coordinator is the frameworks suite's `streams-word-count-streams`
(tests/compat/frameworks.py)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import needs_java
from test_streams_groups import FAST

from logbroker import Broker

pytestmark = needs_java

WORD_COUNT = str(Path(__file__).resolve().parent / "java" / "WordCount.java")
LINES = ["alpha beta gamma", "beta gamma", "gamma"] * 40
EXPECTED = {"alpha": 40, "beta": 80, "gamma": 120}


@pytest.fixture(scope="module")
def kafka():
    from benches.peers.kafka import install, install_frameworks

    inst = install()
    install_frameworks(inst)
    return inst


def streams_groups(kafka, bs: str, *args: str) -> str:
    cmd = kafka.tools_java("org.apache.kafka.tools.streams.StreamsGroupCommand", ["--bootstrap-server", bs, *args])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"kafka-streams-groups {' '.join(args)}: {r.stdout}\n{r.stderr[-2000:]}"
    return r.stdout


def test_word_count_on_a_streams_group_and_kafka_streams_groups(kafka, tmp_path):
    cfg = {**FAST, "group.streams.heartbeat.interval.ms": "300", "group.streams.initial.rebalance.delay.ms": "300"}
    with Broker(data_dir=tmp_path / "data", config=cfg) as b:
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic("lines", 3, 1), NewTopic("counts", 3, 1)]).values():
            f.result(10)
        p = Producer({"bootstrap.servers": bs})
        for i, line in enumerate(LINES):
            p.produce("lines", line.encode(), key=str(i).encode())
        assert p.flush(10) == 0
        log = tmp_path / "app.log"
        cmd = kafka.framework_java(
            "streams", WORD_COUNT, [bs, "wc-app", str(tmp_path / "state"), "streams", "lines", "counts", "1"]
        )
        with log.open("w") as out:
            app = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        c = Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": "check",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        try:
            c.subscribe(["counts"])
            counts: dict[str, int] = {}
            deadline = time.monotonic() + 90
            while counts != EXPECTED and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    counts[m.key().decode()] = int.from_bytes(m.value(), "big")
            assert counts == EXPECTED, f"{counts}\n{log.read_text()[-4000:]}"
            image = b.server.controller.image.topics
            # the broker created the internal topics, as many partitions as tasks
            assert len(image["wc-app-by-word-repartition"].partitions) == 3
            assert image["wc-app-counts-changelog"].configs.get("cleanup.policy") == "compact"
            assert "wc-app" in streams_groups(kafka, bs, "--list").split()
            members = streams_groups(kafka, bs, "--describe", "--group", "wc-app", "--members", "--verbose")
            assert "ACTIVE: 0:[0,1,2]; 1:[0,1,2]" in members, members
            offsets = streams_groups(kafka, bs, "--describe", "--group", "wc-app", "--offsets")
            assert "wc-app-by-word-repartition" in offsets and "lines" in offsets, offsets
        finally:
            c.close()
            app.terminate()
            app.wait(30)
        # the application left: the group is Empty; its offsets reset, then the group deleted
        deadline = time.monotonic() + 20
        while "Empty" not in (state := streams_groups(kafka, bs, "--describe", "--group", "wc-app", "--state")):
            assert time.monotonic() < deadline, state
            time.sleep(0.5)
        reset = streams_groups(
            kafka, bs, "--reset-offsets", "--group", "wc-app", "--to-earliest", "--all-input-topics", "--execute"
        )
        assert reset.count(" 0 ") >= 3 or reset.split().count("0") >= 3, reset
        assert "was successful" in streams_groups(kafka, bs, "--delete", "--group", "wc-app")
        assert "wc-app" not in streams_groups(kafka, bs, "--list").split()
