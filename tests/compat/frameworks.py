"""Apache Kafka's own frameworks, run unchanged, as a suite: each case is an application a
Kafka user runs, with a failure midway, judged by its end result. The same scenario code runs
against logbroker and against Apache Kafka, three nodes each (RF 3, min.insync.replicas 2).

- `streams-word-count-classic`: Kafka Streams 4.4 (tests/java/WordCount.java: a repartition
  topic, a RocksDB store with its changelog, `processing.guarantee=exactly_once_v2`,
  `group.protocol=classic`). Half the lines are counted, then the application and the leader
  of `lines-classic-0` are killed with -9; more lines arrive while that broker is down; the
  application restarts, the broker comes back, the rest arrive. Judged: every word's last
  committed count equals the true count, and no read_committed consumer of the output ever
  saw a count above the true one (a record counted twice would show as one) or a count going
  down.
- `streams-word-count-streams`: the same application with `group.protocol=streams`
  (KIP-1071: the broker configures the topology, creates the internal topics and assigns the
  tasks). The broker killed is the group's coordinator, which holds the group's state.
- `connect-file-round-trip`: Kafka Connect's distributed worker (config, offset and status
  topics replicated 3 ways) with the file source and file sink connectors, configured through
  its REST API. Once part of the file is copied, the worker stops and the data's leader is
  killed with -9; more lines are appended, the worker starts again, the broker comes back.
  Judged: the sink's file equals the source's, line for line, and both connectors run. The
  worker is Connect 4.3.1, the newest whose file connectors the registry serves
  (benches/peers/maven/connect/pom.xml says why).

Settings (broker_settings, the same on both): `group.initial.rebalance.delay.ms=0`, so a
Streams restart does not wait 3 s for more members. The short form (CI,
tests/test_compat_frameworks.py) runs every case against logbroker alone; the full form
(`./scripts/compat frameworks`) runs them on both brokers.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import time
import traceback
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from benches.peers.common import create_topic
from logbroker.cluster import free_port
from tests.compat.results import ROOT, Outcome

WORD_COUNT = str(ROOT / "tests" / "java" / "WordCount.java")
WORDS = [f"w{i:02d}" for i in range(40)]
SETTINGS = {"group.initial.rebalance.delay.ms": "0"}
DIFFERENCES: dict[str, str] = {}


def prepare(short: bool) -> dict:
    """Kafka Streams' and Kafka Connect's jars (benches/peers/kafka.py install_frameworks():
    Maven Central, cached)."""
    if shutil.which("java") is None:
        raise RuntimeError(
            "java not found on the PATH: the frameworks suite runs Kafka Streams and Kafka Connect "
            "(Java 17+; ./scripts/test installs Debian's default-jdk-headless)"
        )
    from benches.peers.kafka import install, install_frameworks

    inst = install()
    dirs = install_frameworks(inst)
    connect = next(p.name for p in dirs["connect"].glob("connect-runtime-*.jar"))
    return {"Kafka Streams": inst.version, "Kafka Connect": connect.removeprefix("connect-runtime-")[:-4]}


def nodes(short: bool) -> list[int]:
    return [3]


def broker_settings(nodes: int) -> dict[str, str]:
    return dict(SETTINGS)


class CaseFailed(Exception):
    """The application's end result is wrong: the message says how."""


def check(ok: bool, why: str) -> None:
    if not ok:
        raise CaseFailed(why)


# --------------------------------------------------------------------------------------------
# the cluster: its nodes, killed and started again


def leader_node(target, topic: str, partition: int):
    """The peer node leading `topic`-`partition`."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    leader = desc.partitions[partition].leader.id
    return next(n for n in target.peer.nodes if n.node_id == leader)


def coordinator_node(target, group: str):
    """The peer node coordinating `group` (FindCoordinator)."""
    from logbroker.protocol import REQUESTS
    from tests.rawclient import RawClient

    FindCoordinator = REQUESTS[10]
    with RawClient(target.bootstrap.split(",")[0], timeout=30) as c:
        r = c.request(10, 4, FindCoordinator(key_type=0, coordinator_keys=[group])).coordinators[0]
    check(r.error_code == 0, f"FindCoordinator for group {group!r}: error {r.error_code} {r.error_message}")
    return next(n for n in target.peer.nodes if n.node_id == r.node_id)


def kill(node) -> None:
    """kill -9 of one node; its data stays for `node.start()`."""
    node.proc.send_signal(signal.SIGKILL)
    node.proc.wait(30)


class App:
    """A Java process (a Streams application, a Connect worker); its output in `log`."""

    def __init__(self, cmd: list[str], log: Path):
        self.cmd = cmd
        self.log = log
        self.proc: subprocess.Popen | None = None
        self.since = 0

    def start(self) -> App:
        self.since = len(self.text())
        with self.log.open("a") as out:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT)
        return self

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> None:
        check(self.proc is not None and self.proc.poll() is None, f"it exited:\n{self.text()[-4000:]}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def wait(cond: Callable[[], bool], timeout: float, why: Callable[[], str], app: App | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if app is not None:
            app.alive()
        check(time.monotonic() < deadline, f"after {timeout:.0f} s: {why()}")
        time.sleep(0.3)


# --------------------------------------------------------------------------------------------
# Kafka Streams: the word count


def produce_lines(bootstrap: str, topic: str, lines: list[str]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i, line in enumerate(lines):
        p.produce(topic, key=str(i).encode(), value=line.encode())
        if i % 1000 == 0:
            p.poll(0)
    check(p.flush(120) == 0, "the lines were not all acknowledged within 120 s")


class CountsReader:
    """A read_committed consumer of the counts from the start: every count it saw, per word."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Consumer, TopicPartition

        self.c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "counts-check",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        self.c.assign([TopicPartition(topic, p, 0) for p in range(3)])
        self.seen: dict[str, list[int]] = {}

    def poll_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for m in self.c.consume(1000, 0.2):
                if not m.error():
                    count = int.from_bytes(m.value(), "big", signed=True)
                    self.seen.setdefault(m.key().decode(), []).append(count)

    def latest(self) -> dict[str, int]:
        return {w: s[-1] for w, s in self.seen.items()}

    def close(self) -> None:
        self.c.close()


def streams_word_count(target, inst, work: Path, protocol: str) -> None:
    rng = random.Random(47)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8))) for _ in range(6000)]
    expected = dict(Counter(w for line in lines for w in line.split()))
    bs = target.bootstrap
    # each case its own topics: the cases share a cluster
    lines_topic, counts_topic = f"lines-{protocol}", f"counts-{protocol}"
    create_topic(bs, lines_topic, 3, timeout=60, replication_factor=3)
    create_topic(bs, counts_topic, 3, timeout=60, replication_factor=3)
    app_id = f"wc-{protocol}"
    cmd = inst.framework_java(
        "streams", WORD_COUNT, [bs, app_id, str(work / "state"), protocol, lines_topic, counts_topic], heap="-Xmx384m"
    )
    app = App(cmd, work / "streams.log")
    reader = CountsReader(bs, counts_topic)

    def running() -> bool:
        return "-> RUNNING" in app.text()[app.since :]

    try:
        produce_lines(bs, lines_topic, lines[:3000])
        app.start()
        wait(running, 120, lambda: f"{app.text()[-4000:]}\nthe application did not reach RUNNING", app)
        deadline = time.monotonic() + 90
        while not reader.seen and time.monotonic() < deadline:
            reader.poll_for(0.5)
        check(bool(reader.seen), f"{app.text()[-4000:]}\nno counts committed within 90 s")
        # the classic protocol: the leader of an input partition; streams groups: the group's
        # coordinator, which holds the group's state and task assignment
        victim = leader_node(target, lines_topic, 0) if protocol == "classic" else coordinator_node(target, app_id)
        app.kill()
        kill(victim)
        try:
            produce_lines(bs, lines_topic, lines[3000:4500])
            app.start()
            wait(running, 180, lambda: f"{app.text()[-4000:]}\nthe restarted application did not reach RUNNING", app)
            produce_lines(bs, lines_topic, lines[4500:])
        finally:
            victim.start()
        deadline = time.monotonic() + 180
        while reader.latest() != expected and time.monotonic() < deadline:
            reader.poll_for(1.0)
        reader.poll_for(2.0)  # anything after the exact counts would be a count too many
    finally:
        app.stop()
        reader.close()
    got = reader.latest()
    wrong = {w: (got.get(w), n) for w, n in expected.items() if got.get(w) != n}
    # the verdict last: a failure's detail keeps its end (tests/compat/results.py)
    check(not wrong, f"{app.text()[-3000:]}\n(counted, true) of the words counted wrong: {wrong}")
    over = {w: max(s) for w, s in reader.seen.items() if max(s) > expected[w]}
    check(not over, f"counts above the true count were committed (a record counted twice): {over}")
    down = {w: s for w, s in reader.seen.items() if s != sorted(s)}
    check(not down, f"committed counts that went down: {down}")


# --------------------------------------------------------------------------------------------
# Kafka Connect: file source to file sink

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


class Worker(App):
    """connect-distributed (ConnectDistributed) and its REST API."""

    def __init__(self, inst, bootstrap: str, work: Path):
        self.port = free_port()
        props = {
            "bootstrap.servers": bootstrap,
            "group.id": "connect-cluster",
            "listeners": f"http://127.0.0.1:{self.port}",
            "config.storage.topic": "connect-configs",
            "offset.storage.topic": "connect-offsets",
            "status.storage.topic": "connect-status",
            "config.storage.replication.factor": "3",
            "offset.storage.replication.factor": "3",
            "status.storage.replication.factor": "3",
            "offset.storage.partitions": "5",
            "status.storage.partitions": "3",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "offset.flush.interval.ms": "500",
            "plugin.discovery": "only_scan",
        }
        path = work / "worker.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        cmd = inst.framework_java("connect", "org.apache.kafka.connect.cli.ConnectDistributed", [str(path)])
        super().__init__(cmd, work / "worker.log")

    def rest(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def start_serving(self, timeout: float = 120.0) -> Worker:
        self.start()

        def answers() -> bool:
            try:
                self.rest("GET", "/connectors")
                return True
            except (urllib.error.URLError, ConnectionError):
                return False

        wait(answers, timeout, lambda: f"{self.text()[-4000:]}\nthe worker's REST API did not answer", self)
        return self

    def put_connector(self, name: str, config: dict, timeout: float = 90.0) -> None:
        """PUT the connector's config; the worker answers 409 while it rebalances, so retry."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.rest("PUT", f"/connectors/{name}/config", config)
                return
            except urllib.error.HTTPError as e:
                body = e.read()[:500]
                check(e.code == 409 and time.monotonic() < deadline, f"PUT {name}: {e.code} {body!r}")
                time.sleep(0.5)


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def connect_file_round_trip(target, inst, work: Path) -> None:
    source, sink = work / "source.txt", work / "sink.txt"
    first = [f"line {i} " + "x" * (i % 50) for i in range(3000)]
    second = [f"line {i} " + "y" * (i % 50) for i in range(3000, 6000)]
    source.write_text("".join(s + "\n" for s in first))
    create_topic(target.bootstrap, "file-lines", 1, timeout=60, replication_factor=3)
    worker = Worker(inst, target.bootstrap, work)

    def copied(n: int) -> Callable[[], bool]:
        return lambda: len(lines_of(sink)) >= n

    def short_of(n: int) -> Callable[[], str]:
        return lambda: f"{worker.text()[-4000:]}\n{sink} has {len(lines_of(sink))} of {n} lines"

    try:
        worker.start_serving()
        worker.put_connector(
            "file-source", {"connector.class": SOURCE, "tasks.max": "1", "file": str(source), "topic": "file-lines"}
        )
        worker.put_connector(
            "file-sink", {"connector.class": SINK, "tasks.max": "1", "file": str(sink), "topics": "file-lines"}
        )
        wait(copied(1000), 120, short_of(1000), worker)
        # the worker stops (its tasks commit what they did) and the data's leader dies
        worker.stop()
        victim = leader_node(target, "file-lines", 0)
        kill(victim)
        try:
            with source.open("a") as f:
                f.write("".join(s + "\n" for s in second))
            worker.start_serving()
        finally:
            victim.start()
        total = len(first) + len(second)
        wait(copied(total), 180, short_of(total), worker)
        time.sleep(2)  # a line copied twice would show up after the last one
        status = worker.rest("GET", "/connectors/file-sink/status")
    finally:
        worker.stop()
    got = lines_of(sink)
    if got != first + second:
        extra = Counter(got) - Counter(first + second)
        missing = Counter(first + second) - Counter(got)
        raise CaseFailed(
            f"the sink's {len(got)} lines differ from the source's {total}: "
            f"{sum(missing.values())} missing (e.g. {list(missing)[:3]}), "
            f"{sum(extra.values())} extra (e.g. {list(extra)[:3]})"
        )
    check(status["connector"]["state"] == "RUNNING", f"the sink connector: {status}")
    check([t["state"] for t in status["tasks"]] == ["RUNNING"], f"the sink's tasks: {status}")


CASES: dict[str, Callable] = {
    "streams-word-count-classic": lambda target, inst, work: streams_word_count(target, inst, work, "classic"),
    "streams-word-count-streams": lambda target, inst, work: streams_word_count(target, inst, work, "streams"),
    "connect-file-round-trip": connect_file_round_trip,
}


def run(target, short: bool, workdir: str) -> list[Outcome]:
    from benches.peers.kafka import install

    inst = install()
    outcomes: list[Outcome] = []
    for name, fn in CASES.items():
        work = Path(workdir) / name
        work.mkdir(parents=True)
        t0 = time.monotonic()
        try:
            fn(target, inst, work)
            status, detail = "pass", ""
        except CaseFailed as e:
            status, detail = "fail", str(e)
        except Exception as e:  # noqa: BLE001 - a case's own error is its failure
            tb = "".join(traceback.format_exception(e)[-3:])
            status, detail = "fail", f"no error in the scenario; got {type(e).__name__}: {e}\n{tb}"
        secs = round(time.monotonic() - t0, 2)
        outcomes.append(Outcome(name, status, secs, detail))
        print(f"   {status:4} {secs:6.1f}s  {name}", flush=True)
    return outcomes
