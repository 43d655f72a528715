"""Kafka Streams 4.4, Apache Kafka's own framework run unchanged, against three logbroker
nodes: the word count of tests/java/WordCount.java (a repartition topic, a RocksDB store
with its changelog, exactly_once_v2) with the classic group protocol. The application is
killed with -9 midway and so is a broker; after both come back, every word's count is exact
and no read_committed consumer of the output ever saw a count above the true one (a record
counted twice would show as one)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import needs_java
from replication_helpers import FAST, create, full_isr, layout

from logbroker import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

pytestmark = needs_java

WORD_COUNT = str(Path(__file__).resolve().parent / "java" / "WordCount.java")
WORDS = [f"w{i:02d}" for i in range(40)]
CONFIG = {
    **FAST,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "offsets.topic.replication.factor": 3,
    "min.insync.replicas": 2,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture(scope="module")
def frameworks():
    from benches.peers.kafka import install, install_frameworks

    inst = install()
    install_frameworks(inst)
    return inst


class StreamsApp:
    """WordCount.java as a process; its output in `log`."""

    def __init__(self, inst, bootstrap: str, app_id: str, state_dir: Path, protocol: str, log: Path):
        self.cmd = inst.framework_java(
            "streams", WORD_COUNT, [bootstrap, app_id, str(state_dir), protocol, "lines", "counts"], heap="-Xmx384m"
        )
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.since = 0

    def start(self) -> StreamsApp:
        self.since = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("a") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT)
        return self

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_running(self, timeout: float = 90.0) -> None:
        """Until this start of the app has reached RUNNING."""
        deadline = time.monotonic() + timeout
        while "-> RUNNING" not in self.text()[self.since :]:
            assert self.proc is not None and self.proc.poll() is None, f"the app exited:\n{self.text()[-4000:]}"
            assert time.monotonic() < deadline, f"the app did not reach RUNNING:\n{self.text()[-4000:]}"
            time.sleep(0.2)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def produce_lines(bootstrap: str, lines: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i, line in enumerate(lines):
        p.produce("lines", key=str(i).encode(), value=line.encode())
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0, "lines not acknowledged"


class CountsReader:
    """A read_committed consumer of `counts` from the start: every count seen, per word."""

    def __init__(self, bootstrap: str):
        self.c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "counts-check",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        self.c.assign([TopicPartition("counts", p, 0) for p in range(3)])
        self.seen: dict[str, list[int]] = {}

    def poll_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for m in self.c.consume(1000, 0.2):
                if m.error():
                    continue
                count = int.from_bytes(m.value(), "big", signed=True)
                self.seen.setdefault(m.key().decode(), []).append(count)

    def latest(self) -> dict[str, int]:
        return {w: s[-1] for w, s in self.seen.items()}

    def close(self) -> None:
        self.c.close()


def test_word_count_is_exact_through_kill_of_the_app_and_of_a_broker(tmp_path, frameworks):
    rng = random.Random(46)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) for _ in range(6000)]
    expected = Counter(w for line in lines for w in line.split())
    with Cluster(3, data_dir=tmp_path / "cluster", config=CONFIG) as cluster:
        node0 = cluster.nodes[0]
        create(node0, "lines", 3, 3)
        create(node0, "counts", 3, 3)
        full_isr(cluster, "lines", 3)
        full_isr(cluster, "counts", 3)
        bootstrap = cluster.bootstrap_servers
        app = StreamsApp(frameworks, bootstrap, "wc", tmp_path / "state", "classic", tmp_path / "app.log")
        reader = CountsReader(bootstrap)
        try:
            produce_lines(bootstrap, lines[:3000])
            app.start().wait_running()
            # some counts committed, then the app and the leader of lines-0 die at once
            deadline = time.monotonic() + 60
            while not reader.seen and time.monotonic() < deadline:
                reader.poll_for(0.5)
            assert reader.seen, f"no counts committed within 60 s:\n{app.text()[-4000:]}"
            leader = layout(node0)[("lines", 0)][0]
            victim = next(n for n in cluster.nodes if n.node_id == leader)
            app.kill()
            victim.kill()
            produce_lines(bootstrap, lines[3000:4500])
            app.start().wait_running(timeout=120)
            produce_lines(bootstrap, lines[4500:])
            victim.start()
            deadline = time.monotonic() + 120
            while reader.latest() != dict(expected) and time.monotonic() < deadline:
                reader.poll_for(1.0)
            reader.poll_for(2.0)  # anything after the exact counts would be a count too many
        finally:
            app.stop()
            reader.close()
        got = reader.latest()
        wrong = {w: (got.get(w), n) for w, n in expected.items() if got.get(w) != n}
        assert not wrong, f"(counted, true) of the words whose count is wrong: {wrong}\n{app.text()[-3000:]}"
        over = {w: max(s) for w, s in reader.seen.items() if max(s) > expected[w]}
        assert not over, f"counts above the true count were committed (a record counted twice): {over}"
        for w, s in reader.seen.items():
            assert s == sorted(s), f"{w}: its committed counts went down: {s}"
